"""Run a Vela network through the pins as the Arm driver would (shared by the network tests).

Not a test module (tb.core.run collects ``test_*.py`` only).

``await run_network(env, path, rng)`` loads the Vela output (raw ``.npz``) the way
``tlm.ethos_u85.runner.run_model`` does, with the runner's own code: ``plan_memory`` places the areas
and binds the regions (guard bands and unbound regions answer DECERR, injected into the
bench's AXI subordinates), ``check_inputs`` checks random inputs, ``load_memory`` fills
memory by the back door. The host driver (tb/driver.py) then programs what the runner's
``program`` does with the runner's ``DriverConfig`` values (MEM_ATTR, REGIONCFG, AXI limits,
QBASE/QSIZE/QCONFIG, BASEP), starts the NPU, waits for the IRQ and checks the fault bits
(no fault, end of stream reached; a stop with cmd_parse_error raises
``rtl_support.Refused`` naming the operation at QREAD), closes the scoreboard's job
(every AXI write, STATUS, QREAD and IRQ against the reference TLM on a mirror of memory) and
compares every output byte with the reference's. Returns a ``NetResult``.
``check_litert(name, res.outputs, want)`` compares them with LiteRT's as well.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tb.core.profiling import profiled
from tb.ethos_u85.driver import HostDriver
from tb.ethos_u85.testlib.regs import OFF
from tb.ethos_u85.testlib.rtl_support import Refused

QREAD = OFF["QREAD"]


def vela_model(name: str, config: str = "ethos-u85-256", mode: str = "default") -> Path:
    """Vela output (raw .npz) of catalog network *name* (tests/nets; cached in build/)."""
    from tests import nets
    return Path(nets.compiled(name, config, mode, "raw"))


@dataclass
class NetResult:
    name: str
    status: int
    output_bytes: int
    beats: int                  # AXI R + W beats of the job, every port
    wall_s: float               # wall-clock seconds from the first APB write to the stop
    cycles: float = 0.0         # CLK cycles from the first APB write to the stop
    ops: list = field(default_factory=list)
    outputs: list = field(default_factory=list)     # the DUT's output tensors (numpy)
    cpu_s: float = 0.0          # CPU seconds of the simulator process in the same interval


def random_inputs(model, rng) -> list:
    """Random input tensors of *model* in their dtypes, from the random.Random *rng*."""
    inputs = []
    for t in model.inputs:
        info = np.iinfo(np.dtype(t.dtype))
        inputs.append(np.random.default_rng(rng.getrandbits(32)).integers(
            info.min, int(info.max) + 1, size=t.shape).astype(t.dtype))
    return inputs


async def run_network(env, path, rng, inputs=None, max_cycles: int = 2_000_000) -> NetResult:
    """Run the Vela output *path* on the DUT of *env* (started); see the module docstring.
    *inputs*: the input tensors (default: random from *rng*)."""
    from cocotb.simtime import get_sim_time

    from tlm.ethos_u85 import isa, runner
    from tlm.ethos_u85.vela import load

    path = Path(path)
    model = load(path)
    arrays = runner.check_inputs(model, random_inputs(model, rng) if inputs is None else inputs)
    driver = runner.DRIVER_DEFAULTS
    mmap = runner.plan_memory(model, driver)
    runner.load_memory(env.memory, model, mmap, arrays)
    env.axi.clear_faults()
    for lo, hi in mmap.faults:
        env.axi.inject_fault(lo, hi, "DECERR")
    n_events = len(env.model.events) if env.use_reference else 0
    host = HostDriver(env, prot=driver.pprot)
    await host.clear_irq()
    await host.wait_reset()
    with profiled():                   # TB_PROFILE=path: cProfile of this phase (tools/bench.py)
        beats0, t0, sim0 = env.axi.beats(), time.perf_counter(), get_sim_time("ns")
        c0 = time.process_time()
        await host.setup_axi(driver.mem_attr, driver.regioncfg, driver.axi_sram, driver.axi_ext)
        cs = mmap.area("command_stream")
        await host.load_job(cs.address, qconfig=driver.qconfig, size=cs.size)
        await host.setup_axi(basep=mmap.basep)
        await host.run()
        status = await host.wait_done(max_cycles=max_cycles, use_irq=True, poll=64)
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
    cycles = (get_sim_time("ns") - sim0) / env.clk_period_ns
    beats = env.axi.beats() - beats0
    report = host.check_faults(status)
    if report and report.fields["cmd_parse_error"]:
        # name the command the NPU stopped at (QREAD): on DUT=rtl, an operation the stand-in
        # does not implement as configured (rtl_stub/ethos_u85/README.md)
        q = await env.read_ok(QREAD, driver.pprot)
        at = next((d for d in isa.decode(model.command_words) if d.offset == q), None)
        job = env.scoreboard.close_job() if env.use_reference else None
        from tlm.ethos_u85.config import get_config
        raise Refused(f"{path.name}: stopped with cmd_parse_error at {at.cmd.name if at else '?'} "
                      f"(command offset 0x{q:x}); STATUS 0x{status:08x}",
                      words=model.command_words, macs=get_config(env.config).macs, offset=q,
                      op=at.cmd.name if at else "?", status=status,
                      mismatches=job.mismatches_in_job if job is not None else None)
    assert not report, f"{path.name}: stopped with {report}"
    qread = await env.read_ok(QREAD, driver.pprot)
    assert report.fields["cmd_end_reached"] or qread == 4 * len(model.command_words), \
        f"{path.name}: stopped early at QREAD 0x{qread:x}"
    outputs = []
    for t in model.outputs:
        dt = np.dtype(t.dtype).newbyteorder("<")
        outputs.append(np.frombuffer(env.memory.read(mmap.address(t), t.nbytes), dt))
    if env.use_reference:
        job = env.scoreboard.close_job()
        assert job.mismatches_in_job == 0, f"{path.name}: {env.scoreboard.mismatches[-3:]}"
        skipped = [e for e in list(env.model.events)[n_events:]
                   if e[0] in ("unpredictable", "op_unimplemented")]
        assert not skipped, f"{path.name}: the TLM skipped an operation: {skipped[:2]}"
        mirror = env.scoreboard.ref.memory
        for i, (t, got) in enumerate(zip(model.outputs, outputs, strict=True)):
            want = np.frombuffer(mirror.read(mmap.address(t), t.nbytes), got.dtype)
            bad = np.flatnonzero(got != want)
            assert bad.size == 0, (f"{path.name} output{i} ({t.name}): {bad.size} of {got.size} "
                                   f"elements differ from the TLM reference, first at {bad[0]}: "
                                   f"{got[bad[0]]} vs {want[bad[0]]}")
    ops = sorted({d.cmd.name for d in isa.decode(model.command_words)
                  if d.cmd.name.startswith("NPU_OP_") and d.cmd.name != "NPU_OP_STOP"})
    return NetResult(path.name, status, sum(t.nbytes for t in model.outputs), beats, wall,
                     cycles, ops, outputs, cpu)


def check_litert(name: str, outputs: list, want: list) -> "str | None":
    """Every output tensor of catalog network *name* (the DUT's, ``NetResult.outputs``)
    against LiteRT's (*want*, from ``tests.nets.reference``), element for element; None when
    compared, else the reason from tests/nets ``VELA_VS_LITERT`` (a known Vela/LiteRT
    disagreement: not compared)."""
    from tests import nets
    reason = nets.VELA_VS_LITERT.get(name)
    if reason is not None:
        return reason
    for i, (got, w) in enumerate(zip(outputs, want, strict=True)):
        w = np.asarray(w).reshape(-1)
        assert got.dtype == w.dtype and got.size == w.size, (name, i, got.dtype, w.dtype, got.size, w.size)
        bad = np.flatnonzero(got != w)
        assert bad.size == 0, (f"{name} output{i}: {bad.size} of {got.size} elements differ from LiteRT, "
                               f"first at {bad[0]}: {got[bad[0]]} vs {w[bad[0]]}")
    return None


class refusing_reference:
    """``with refusing_reference(env, offset):`` the scoreboard's reference TLM refuses the
    kernel operation at command offset *offset* as the RTL stand-in does (cmd_parse_error,
    QREAD at it), so everything before it is compared as usual."""

    def __init__(self, env, offset: int):
        self.env, self.offset, self.ops = env, offset, None

    def __enter__(self):
        ref = self.env.model
        self.ops = ref.kernel_ops
        off = self.offset

        def refusing(fn):
            def op(snap, port, dev):
                if dev.qread == off:
                    raise NotImplementedError("refused by the RTL stand-in (tb/ethos_u85/testlib/rtl_support.py)")
                return fn(snap, port, dev)
            return op
        ref.kernel_ops = {k: refusing(fn) for k, fn in self.ops.items()}
        return self

    def __exit__(self, *exc):
        self.env.model.kernel_ops = self.ops
        return False
