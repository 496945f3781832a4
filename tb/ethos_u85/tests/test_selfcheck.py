"""The bench checks itself: a bug is planted in the DUT (the TLM behind the pins, DUT=tlm) and
the scoreboard must report it.

Each case runs the same small DMA job (SRAM -> EXT) with one planted bug in the adapter's
AXI side or in what the device shows on APB/IRQ, and asserts that the scoreboard reported
a mismatch naming it: wrong write data, a write outside the model's footprint, a missing
write, a write on the wrong port, wrong AxCACHE, a burst longer than AXI_x.max_beats allows,
a wrong STATUS.faulting_channel, a missing IRQ edge, more bursts in flight than
AXI_x.max_outstanding allows, wrong AxPROT or AxDOMAIN, the DMA source read on the wrong
port, a read outside the model's read footprint, a burst across a 4 KB line, an IRQ that
CMD.clear_irq does not drop, a write to a read-only register (CONFIG) that takes effect.
A clean run of the same job must
report nothing. Only DUT=tlm: the bugs are planted in the TLM adapter.

``test_coverage_sampled`` (both DUTs) checks the functional-coverage sampling of the
scoreboard (tb/ethos_u85/coverage.py) on the same job: every command of the stream counted once,
the job's end, the AXI bursts per port and direction, the APB transfers.
"""
from __future__ import annotations

import dataclasses
import types

import cocotb

from tb.ethos_u85 import coverage
from tb.ethos_u85.env import Env
from tb.ethos_u85.tests.common import (
    DUT,
    OFF,
    REGION_BASE,
    STREAM_ADDR,
    TIMEOUT,
    dma_cmds,
    enc,
    named,
    program_regions,
    skip_now,
)
from tlm import isa
from tlm.memory import Channel, Resp

SKIP = DUT != "tlm"
SKIP_REASON = "bench self-check: the bugs are planted in the TLM adapter (DUT=tlm only)"

# bug -> words the scoreboard's report must contain
BUGS = {
    "none": None,
    "corrupt_data": "differ from the model",
    "stray_write": "outside the model's write footprint",
    "dropped_write": "never wrote",
    "wrong_port": "on another port",
    "wrong_cache": "port group/AxCACHE/AxDOMAIN",
    "long_burst": "burst boundary",
    "status": "APB R 0x0004",
    "irq_pin": "rising IRQ edge",
    "outstanding": "bursts outstanding",          # reported by the AXI subordinate
    "wrong_prot": "AxPROT",
    "wrong_domain": "port group/AxCACHE/AxDOMAIN",
    "wrong_port_read": "port group/AxCACHE/AxDOMAIN",
    "stray_read": "outside the model's read footprint",
    "cross_4k": "4 KB boundary",                 # reported by the AXI subordinate
    "irq_stuck": "IRQ pin 1",
    "ro_write": f"APB R 0x{OFF['CONFIG']:04x}",
}


class _StuckHigh:
    """An IRQ driver that, once high, ignores being driven low (CMD.clear_irq does nothing)."""

    def __init__(self, pin):
        self.pin = pin

    @property
    def value(self):
        return self.pin.value

    @value.setter
    def value(self, v):
        if int(v) or not int(self.pin.value):
            self.pin.value = v


def plant(env: Env, bug: str) -> None:
    mgr = env.tlm.axi_manager
    orig = mgr.transfer

    async def transfer(txn, data, boundary, max_reads=1, max_writes=1, **kw):
        if bug == "outstanding":
            max_reads = max_writes = 64                   # ignores AXI_x.max_outstanding
        elif bug == "wrong_prot":
            txn = dataclasses.replace(txn, prot=txn.prot ^ 0x2)
        elif bug == "wrong_domain":
            txn = dataclasses.replace(txn, domain=txn.domain ^ 0x1)
        if not txn.write and txn.channel != Channel.rd_cmd:
            if bug == "wrong_port_read":                  # the DMA source read on the other port
                txn = dataclasses.replace(txn, port="SRAM0" if txn.port == "EXT0" else "EXT0")
            elif bug == "stray_read":                     # and 64 bytes nobody asked for
                await orig(dataclasses.replace(txn, addr=txn.addr + 0x1000, length=64), None,
                           boundary, max_reads, max_writes)
        if txn.write:
            if bug == "corrupt_data":
                buf = bytearray(bytes(data))
                buf[len(buf) // 2] ^= 0x40
                data = bytes(buf)
            elif bug == "dropped_write":
                return Resp.OKAY, None
            elif bug == "wrong_port":
                txn = dataclasses.replace(txn, port="SRAM0" if txn.port == "EXT0" else "EXT0")
            elif bug == "wrong_cache":
                txn = dataclasses.replace(txn, cache=txn.cache ^ 0x2)
            elif bug == "long_burst":
                boundary = 4096
            elif bug == "cross_4k":                       # one burst over the 4 KB line
                mgr.split = lambda addr, length, boundary: [(addr, length)]
                txn = dataclasses.replace(txn, addr=(txn.addr | 0xFFF) - 0x2F)
            elif bug == "stray_write":
                r = await orig(txn, data, boundary, max_reads, max_writes, **kw)
                await orig(dataclasses.replace(txn, addr=txn.addr + 0x800, length=16), bytes(16),
                           boundary, max_reads, max_writes)
                return r
        return await orig(txn, data, boundary, max_reads, max_writes, **kw)

    mgr.transfer = transfer
    if bug == "irq_pin":
        env.tlm.irq = types.SimpleNamespace(value=0)          # the pin never rises
    if bug == "irq_stuck":
        env.tlm.irq = _StuckHigh(env.tlm.irq)
    if bug == "status":
        def patch(dev):
            read = dev.apb_read

            def apb_read(addr, pprot=0b01):
                data, err = read(addr, pprot)
                if addr == OFF["STATUS"] and not data & 1 and data & 2:
                    data ^= 0x1000                            # faulting_channel bit 0
                return data, err
            dev.apb_read = apb_read
        env.tlm.on_reset.append(patch)
    if bug == "ro_write":
        def patch_ro(dev):
            write, read, held = dev.apb_write, dev.apb_read, {}

            def apb_write(addr, data, pprot=0b01, pstrb=0xF):
                if addr == OFF["CONFIG"]:
                    held[addr] = data                         # the bug: a read-only word changes
                return write(addr, data, pprot, pstrb)

            def apb_read(addr, pprot=0b01):
                data, err = read(addr, pprot)
                return (held.get(addr, data), err)
            dev.apb_write, dev.apb_read = apb_write, apb_read
        env.tlm.on_reset.append(patch_ro)


@cocotb.parametrize(bug=named(BUGS))
@cocotb.test(skip=SKIP, **TIMEOUT)
async def test_scoreboard_catches(dut, bug):
    """Plant *bug* in the DUT; the scoreboard must report it (and nothing for 'none')."""
    if SKIP:
        skip_now(SKIP_REASON)
    env = Env(dut, reference_model=True)
    plant(env, bug)
    await env.start()
    await program_regions(env, (0, 0))                      # 64-byte bursts
    if bug == "outstanding":                                # one read, one write at a time
        for reg in ("AXI_SRAM", "AXI_EXT"):
            await env.write_ok(OFF[reg], 0)
    env.memory.write(REGION_BASE[2] + 0x10, bytes((7 * i + 3) & 0xFF for i in range(200)))
    words = dma_cmds(src_region=2, src=0x10, dst_region=1, dst=0x30, length=200) + \
        enc(("NPU_OP_STOP", dict(mask=1)))
    await env.load_stream(STREAM_ADDR, words)
    await env.run_job()
    await env.read_ok(OFF["QREAD"])
    await env.write_ok(OFF["CMD"], 0xC | 0x2)                # CMD.clear_irq
    await env.read_ok(OFF["STATUS"])
    await env.write_ok(OFF["CONFIG"], 0x12345678)            # read-only: ignored
    await env.read_ok(OFF["CONFIG"])
    found = env.scoreboard.mismatches + env.axi.errors
    want = BUGS[bug]
    if want is None:
        env.finish()
        return
    assert found, f"planted bug {bug!r}: the scoreboard reported nothing"
    assert any(want in m for m in found), (f"planted bug {bug!r}: no report mentions {want!r}; "
                                          f"got {found[:3]}")
    cocotb.log.info("bug %s caught: %s", bug, found[0])
    env.scoreboard.mismatches.clear()
    for sub in env.axi.ports.values():
        sub.errors.clear()
    env.finish()


@cocotb.test(**TIMEOUT)
async def test_coverage_sampled(dut):
    """The scoreboard samples functional coverage: run the DMA job (SRAM -> EXT, stream in
    EXT) with a private coverage model and check what it counted."""
    env = Env(dut, reference_model=True)
    cov = env.scoreboard.coverage = coverage.BenchCoverage()    # before start(): the recorder
    await env.start()
    await program_regions(env, (0, 0))
    env.memory.write(REGION_BASE[2] + 0x10, bytes(range(200)))
    words = dma_cmds(src_region=2, src=0x10, dst_region=1, dst=0x30, length=200) + \
        enc(("NPU_OP_STOP", dict(mask=1)))
    await env.load_stream(STREAM_ADDR, words)
    await env.run_job()
    env.finish()
    # every command executed once (NPU_SET_* decoded between the operations)
    want = {}
    for d in isa.decode(words):
        want[d.name] = want.get(d.name, 0) + 1
    got = {k: v for k, v in cov.opcode.hits.items() if v}
    assert got == want, f"opcode coverage {got}, the stream has {want}"
    assert cov.job_end.hits["npu_op_stop"] == 1, cov.job_end.hits
    assert sum(cov.kernel_op_mode.hits.values()) == 0          # a DMA, no kernel op
    # bursts: command fetch and DMA source on their ports, DMA destination writes on EXT0
    bl = cov.burst_len.hits
    for port, d in (("EXT0", "read"), ("SRAM0", "read"), ("EXT0", "write")):
        n = sum(v for k, v in bl.items() if k.startswith(f"{port}/{d}/"))
        assert n > 0, f"no {port} {d} burst sampled: {bl}"
    assert not any(v for k, v in bl.items() if k.startswith("SRAM0/write/")), bl
    assert cov.resp.hits["EXT0/write/OKAY"] > 0 and not cov.resp.other, cov.resp.hits
    assert cov.apb.hits["secure_priv/write/OKAY"] > 0 and cov.apb.hits["secure_priv/read/OKAY"] > 0
    assert cov.axi_prot.hits["EXT0/secure_priv"] > 0, cov.axi_prot.hits
    coverage.current().merge(cov)                              # into the run's report
