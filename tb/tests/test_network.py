"""A Vela-compiled network through the pins: ``make sim NPU_MODEL=path/x_vela.npz``.

The network is loaded the way ``tlm.runner.run_model`` (the Arm driver flow) loads it, with
the runner's own code: ``plan_memory`` places the areas and binds the regions (guard bands
and unbound regions answer DECERR: injected into the bench's AXI subordinates),
``check_inputs`` checks the inputs and ``program`` yields the APB register sequence
(MEM_ATTR, QCONFIG, REGIONCFG, AXI limits, QBASE/QSIZE, BASEP, CMD), which is replayed on the
APB pins. The job then runs on the DUT with the scoreboard's reference TLM on a mirror of
memory: every AXI write, STATUS, QREAD and the IRQ are checked, and every output byte is
compared with the reference's and, with ``NPU_MODEL_REF=ref.npz`` (``input0..``,
``output0..``, e.g. LiteRT BUILTIN_REF outputs), with those.

Inputs: ``input<i>`` of NPU_MODEL_REF if present, else random in the model's dtype (seeded
from the test seed). The configuration: NPU_CONFIG if given to tb.run, else the one Vela
embedded in the model.

Throughput: the test logs the AXI beats (R + W, every port) the job moved and the wall-clock
seconds from the first register write to the stop; with ``TB_BENCH_OUT=path.json`` it also
writes them there (``tools/bench.py`` reads it for its bench-vs-loopback figure).
"""
from __future__ import annotations

import json
import os
import time

import numpy as np

import cocotb

from tb.env import Env
from tb.tests.common import DUT, OFF, rtl_unsupported, seeded_rng, skip_now, status_fields

NPU_MODEL = os.environ.get("NPU_MODEL") or None
NPU_MODEL_REF = os.environ.get("NPU_MODEL_REF") or None
# Kernel operations the stand-in does not implement (POOL and ELEMENTWISE int8 it does; a
# network using their unsupported modes still stops with cmd_parse_error and fails loudly).
KERNEL_OPS = ("NPU_OP_CONV", "NPU_OP_DEPTHWISE", "NPU_OP_RESIZE")


def _ops_in_model() -> set:
    if not NPU_MODEL:
        return set()
    try:
        from tlm import isa
        from tlm.vela import load
        return {d.cmd.name for d in isa.decode(load(NPU_MODEL).command_words)}
    except Exception:  # noqa: BLE001 - the test itself reports a bad model
        return set()


_OPS = _ops_in_model()
_USES_KERNELS = bool(_OPS & set(KERNEL_OPS))


class _ApbRecorder:
    """Stands in for a Device in ``tlm.runner.program``: records its APB writes (the
    runner's register sequence) so the test replays them on the pins."""

    def __init__(self, reads: dict):
        self.reads = reads
        self.writes: list[tuple[int, int, int]] = []

    def apb_read(self, addr: int, pprot: int = 0b01):
        return self.reads.get(addr, 0), 0

    def apb_write(self, addr: int, data: int, pprot: int = 0b01, pstrb: int = 0xF) -> int:
        self.writes.append((addr, data, pprot))
        return 0


def _load_ref(path: str) -> dict:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


@cocotb.skipif(NPU_MODEL is None, reason="no network given (make sim NPU_MODEL=path/x_vela.npz)")
@rtl_unsupported("kernel_ops", condition=_USES_KERNELS)
@cocotb.test(timeout_time=500, timeout_unit="ms")
async def test_npu_model(dut):
    """Run NPU_MODEL through the pins; check every output byte against the scoreboard's TLM
    reference (and NPU_MODEL_REF when given)."""
    if NPU_MODEL is None:
        skip_now("no network given (make sim NPU_MODEL=path/x_vela.npz)")
    from tlm import runner
    from tlm.vela import load

    model = load(NPU_MODEL)
    cfg = os.environ.get("NPU_CONFIG_EXPLICIT") and os.environ.get("NPU_CONFIG")
    npu = runner.resolve_config(model, cfg or None)
    ref_npz = _load_ref(NPU_MODEL_REF) if NPU_MODEL_REF else {}
    rng = seeded_rng()
    inputs = []
    for i, t in enumerate(model.inputs):
        if f"input{i}" in ref_npz:
            inputs.append(ref_npz[f"input{i}"])
        else:
            dt = np.dtype(t.dtype)
            info = np.iinfo(dt)
            data = np.random.default_rng(rng.getrandbits(32)).integers(
                info.min, int(info.max) + 1, size=t.shape)
            inputs.append(data.astype(dt))
    arrays = runner.check_inputs(model, inputs)
    driver = runner.DRIVER_DEFAULTS
    mmap = runner.plan_memory(model, driver)
    cocotb.log.info("network %s on %s (%s): ops %s", os.path.basename(NPU_MODEL), DUT, npu.name,
                    sorted(o for o in _OPS if o.startswith("NPU_OP")))
    for a in mmap.areas:
        cocotb.log.info("  area %-14s 0x%010x +0x%x (%s) regions %s", a.name, a.address, a.size,
                        a.interface.name, a.regions)

    env = Env(dut, config=npu.name, reference_model=True)
    await env.start()
    # Memory as run_model fills it (back door), guard bands and unbound regions -> DECERR.
    runner.load_memory(env.memory, model, mmap, arrays)
    for lo, hi in mmap.faults:
        env.axi.inject_fault(lo, hi, "DECERR")

    # The driver's register sequence, from tlm.runner.program, replayed on the pins.
    cmd = await env.read_ok(OFF["CMD"], driver.pprot)
    rec = _ApbRecorder({OFF["CMD"]: cmd})
    runner.program(rec, mmap, driver)
    beats0, t0 = env.axi.beats(), time.perf_counter()
    from cocotb.simtime import get_sim_time
    sim0 = get_sim_time("ns")
    for addr, data, pprot in rec.writes:
        await env.write_ok(addr, data, pprot)
    n_cmds = len(model.command_words)
    status = await env.wait_stopped(max_cycles=2_000_000, poll=64, prot=driver.pprot)
    wall = time.perf_counter() - t0
    beats = env.axi.beats() - beats0
    cycles = (get_sim_time("ns") - sim0) / env.clk_period_ns
    cocotb.log.info("throughput: %d AXI beats in %.3f s wall, %d cycles: %.0f beats/s", beats,
                    wall, cycles, beats / wall if wall > 0 else 0.0)
    if os.environ.get("TB_BENCH_OUT"):
        with open(os.environ["TB_BENCH_OUT"], "w") as fh:
            json.dump({"model": os.path.basename(NPU_MODEL), "dut": DUT, "beats": beats,
                       "wall_s": wall, "cycles": cycles,
                       "beats_per_s": beats / wall if wall > 0 else 0.0}, fh)
    f = status_fields(status)
    job = env.scoreboard.jobs[-1]
    cocotb.log.info("stopped: STATUS 0x%08x, reference: %s; %d DUT bursts", status, job.ref_stop,
                    job.dut_bursts)
    faults = [b for b in ("bus_status", "cmd_parse_error", "branch_fault", "ecc_fault") if f[b]]
    assert not faults, (f"the network stopped with {' + '.join(faults)} (STATUS 0x{status:08x}, "
                        f"QREAD 0x{await env.read_ok(OFF['QREAD']):x} of {4 * n_cmds})")
    qread = await env.read_ok(OFF["QREAD"])
    assert f["cmd_end_reached"] or qread == 4 * n_cmds, f"stopped early at QREAD 0x{qread:x}"

    mirror = env.scoreboard.ref.memory
    for i, t in enumerate(model.outputs):
        addr = mmap.basep[t.region] + t.offset
        got = np.frombuffer(env.memory.read(addr, t.nbytes), np.dtype(t.dtype).newbyteorder("<"))
        want = np.frombuffer(mirror.read(addr, t.nbytes), np.dtype(t.dtype).newbyteorder("<"))
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (f"output{i} ({t.name}): {bad.size} of {got.size} elements differ from "
                               f"the TLM reference, first at {bad[0]}: {got[bad[0]]} vs {want[bad[0]]}")
        if f"output{i}" in ref_npz:
            lit = np.asarray(ref_npz[f"output{i}"]).reshape(-1).astype(got.dtype)
            assert lit.size == got.size, f"output{i}: NPU_MODEL_REF has {lit.size} elements, model {got.size}"
            bad = np.flatnonzero(got != lit)
            assert bad.size == 0, (f"output{i} ({t.name}): {bad.size} of {got.size} elements differ "
                                   f"from NPU_MODEL_REF, first at {bad[0]}: {got[bad[0]]} vs {lit[bad[0]]}")
        cocotb.log.info("output%d (%s, %s %s): %d bytes match the TLM%s", i, t.name, t.dtype,
                        list(t.shape), t.nbytes, " and NPU_MODEL_REF" if f"output{i}" in ref_npz else "")
    await env.write_ok(OFF["CMD"], (cmd & 0xC) | 0x2, driver.pprot)        # clear_irq
    env.finish()
