"""cocotb tests on the bare AXI loopback (tb/loopback/axi_loopback.v).

* ``test_loopback_throughput``: cocotbext-axi ``AxiMaster`` on ``s_axi_*`` and ``AxiRam`` on
  ``m_axi_*``: writes then reads back ``LOOPBACK_BEATS`` 16-byte beats in total (half each
  way, 16-beat bursts like the NPU's 256-byte bursts), checks the data, and reports beats per
  wall-clock second of that phase (to ``LOOPBACK_OUT``, a JSON file, when set). The
  reference point of ``tools/bench.py``'s bench-throughput figure.
* ``test_subordinate_reorder`` / ``test_subordinate_latency``: the bench's own AXI memory
  models (``tb.agents.axi.lean.LeanSubordinate`` and ``tb.agents.axi.AxiSubordinate``, each)
  on ``m_axi_*``, bound through a pin map (``axi_pattern = "m_axi_{lname}"``), driven by
  ``AxiMaster``: reads of different ARIDs complete out of order, reads of one ARID in
  order, data intact; a fixed latency delays the first R beat and the B response by at
  least that many cycles.
"""
from __future__ import annotations

import json
import logging
import os
import random
import time

import cocotb
from cocotb.clock import Clock
from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, RisingEdge
from cocotbext.axi import AxiBus, AxiMaster, AxiRam

PERIOD_NS = 10
BEAT = 16


async def _start(dut):
    # the cocotbext-axi models log every burst at INFO: keep them quiet, as the bench does
    logging.getLogger(f"cocotb.{dut._name}").setLevel(logging.WARNING)
    # the GPI (C++) clock, as the bench's env uses (tb/core/env.py), on both simulators
    Clock(dut.aclk, PERIOD_NS, unit="ns", impl="gpi").start(start_high=False)
    dut.aresetn.value = 0
    master = AxiMaster(AxiBus.from_prefix(dut, "s_axi"), dut.aclk, dut.aresetn,
                       reset_active_level=False, max_burst_len=16)
    return master


async def _release(dut):
    await ClockCycles(dut.aclk, 4)
    dut.aresetn.value = 1
    await ClockCycles(dut.aclk, 4)


@cocotb.test(timeout_time=60, timeout_unit="sec")
async def test_loopback_throughput(dut):
    """AxiMaster -> wires -> AxiRam: beats per wall-clock second (see the module docstring)."""
    beats = max(32, int(os.environ.get("LOOPBACK_BEATS", "4096")))
    master = await _start(dut)
    AxiRam(AxiBus.from_prefix(dut, "m_axi"), dut.aclk, dut.aresetn, reset_active_level=False,
           size=1 << 22)
    await _release(dut)
    rng = random.Random(1)
    per_dir = beats // 2 * BEAT                    # bytes each way
    chunk = 4096                                   # bytes per command: up to 16 bursts of 16 beats
    cmds = [(a, min(chunk, per_dir - a)) for a in range(0, per_dir, chunk)]
    pattern = bytes(rng.getrandbits(8) for _ in range(chunk))
    t0, s0, c0 = time.perf_counter(), get_sim_time("ns"), time.process_time()
    for a, n in cmds:
        await master.write(a, pattern[:n])
    for a, n in cmds:
        got = await master.read(a, n)
        assert got.data == pattern[:n], f"read back at 0x{a:x} differs"
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    sim_ns = get_sim_time("ns") - s0
    moved = 2 * per_dir // BEAT
    rate = moved / wall if wall > 0 else 0.0
    cocotb.log.info("loopback: %d beats in %.3f s wall (%d cycles): %.0f beats/s", moved, wall,
                  sim_ns // PERIOD_NS, rate)
    out = os.environ.get("LOOPBACK_OUT")
    if out:
        with open(out, "w") as f:
            json.dump({"beats": moved, "wall_s": wall, "cpu_s": cpu, "cycles": sim_ns / PERIOD_NS,
                       "beats_per_s": rate}, f)


def _subordinate(dut, impl: str, **kw):
    from tb.agents.axi import AxiSubordinate, BenchMemory
    from tb.agents.axi.lean import LeanSubordinate
    from tb.core.pinmap import PinMap
    pm = PinMap(axi_pattern="m_axi_{lname}", source="loopback m_axi_*")
    mem = BenchMemory()
    cls = LeanSubordinate if impl == "lean" else AxiSubordinate
    sub = cls(dut, "LB", mem, dut.aclk, dut.aresetn, pinmap=pm, clock_period_ns=PERIOD_NS, **kw)
    return sub, mem


IMPLS = ["lean", "cocotbext"]


@cocotb.test(timeout_time=20, timeout_unit="ms")
@cocotb.parametrize(impl=IMPLS)
async def test_subordinate_reorder(dut, impl):
    """tb.agents.axi.AxiSubordinate with random latency and reordering: 4 ARIDs x 6 reads issued
    back to back; data intact, same-ID order kept, some reads overtaken across IDs."""
    master = await _start(dut)
    sub, mem = _subordinate(dut, impl)
    sub.set_latency(read=(0, 40), seed=5)
    sub.set_reorder(True, seed=5)
    await _release(dut)
    rng = random.Random(7)
    image = bytes(rng.getrandbits(8) for _ in range(1 << 14))
    mem.write(0, image)
    ops = []
    for n in range(6):
        for arid in range(4):
            addr = (n * 4 + arid) * 256 + rng.randrange(0, 16)
            length = rng.randrange(1, 64)
            ops.append((arid, addr, length,
                        cocotb.start_soon(master.read(addr, length, arid=arid))))
    for arid, addr, length, task in ops:
        got = (await task).data
        assert got == image[addr:addr + length], f"ARID {arid} read at 0x{addr:x}: wrong data"
    order = list(sub.bursts)                       # completion order
    assert len(order) >= len(ops)
    for arid in range(4):
        starts = [b.start_ns for b in order if b.id == arid]
        assert starts == sorted(starts), f"ARID {arid}: bursts completed out of AR order"
    overtakes = sum(1 for i, b in enumerate(order) for o in order[:i]
                    if o.start_ns > b.start_ns and o.id != b.id)
    cocotb.log.info("reorder: %d bursts, %d overtakes, stats %s", len(order), overtakes, sub.stats)
    assert overtakes > 0 and sub.stats["reordered"] > 0, f"no read was reordered: {sub.stats}"
    assert not sub.errors, sub.errors


@cocotb.test(timeout_time=20, timeout_unit="ms")
@cocotb.parametrize(impl=IMPLS)
async def test_subordinate_latency(dut, impl):
    """A fixed latency L: the first R beat comes >= L cycles after AR, the B response >= L
    cycles after AW; with reordering off, reads complete in AR order."""
    L = 23
    master = await _start(dut)
    sub, mem = _subordinate(dut, impl)
    sub.set_latency(read=L, write=L)
    await _release(dut)
    ar_t, r_t = [], []

    async def watch():
        while True:
            await RisingEdge(dut.aclk)
            now = get_sim_time("ns")
            if int(dut.m_axi_arvalid.value) and int(dut.m_axi_arready.value):
                ar_t.append(now)
            if int(dut.m_axi_rvalid.value) and int(dut.m_axi_rready.value) and not r_t:
                r_t.append(now)
    task = cocotb.start_soon(watch())
    t0 = get_sim_time("ns")
    await master.write(0x100, b"\x5a" * 40)
    t_write = (get_sim_time("ns") - t0) / PERIOD_NS
    assert t_write >= L, f"write with B latency {L} completed in {t_write:.0f} cycles"
    assert mem.read(0x100, 40) == b"\x5a" * 40
    got = await master.read(0x100, 40, arid=3)
    assert got.data == b"\x5a" * 40
    task.cancel()
    gap = (r_t[0] - ar_t[0]) / PERIOD_NS
    cocotb.log.info("latency %d: first R beat %d cycles after AR; write took %d cycles", L, gap,
                  t_write)
    assert gap >= L, f"first R beat {gap:.0f} cycles after AR, latency {L}"
    assert gap <= L + 4, f"first R beat {gap:.0f} cycles after AR: far more than latency {L}"
    assert sub.stats["reordered"] == 0
