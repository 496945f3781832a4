"""A Vela-compiled network through the pins: ``make sim NPU_MODEL=path/x_vela.npz``.

Without NPU_MODEL, ``make sim`` (tb/run.py) gives this test the shipped default network
``tests/data/sim_default_vela.npz`` with its LiteRT reference ``sim_default_ref.npz``.

The network is loaded the way ``tlm.ethos_u85.runner.run_model`` (the Arm driver flow) loads it, with
the runner's own code: ``plan_memory`` places the areas and binds the regions (guard bands
and unbound regions answer DECERR: injected into the bench's AXI subordinates),
``check_inputs`` checks the inputs and ``program`` yields the APB register sequence
(MEM_ATTR, QCONFIG, REGIONCFG, AXI limits, QBASE/QSIZE, BASEP, CMD), which is replayed on the
APB pins. The job then runs on the DUT with the scoreboard's reference TLM on a mirror of
memory: every AXI write, STATUS, QREAD and the IRQ are checked, and every output byte is
compared with the reference's and, with ``NPU_MODEL_REF=ref.npz`` (``input0..``,
``output0..``, e.g. LiteRT BUILTIN_REF outputs), with those.

NPU_MODEL_REF is validated first (``tb.ethos_u85.run_options.check_model_ref``: keys, shapes,
dtypes). On DUT=rtl a network with an operation the stand-in does not claim
(``rtl_support.first_unsupported``) runs up to it, must stop there with cmd_parse_error and
a clean scoreboard, and then fails with one line naming the operation.

Inputs: ``input<i>`` of NPU_MODEL_REF if given, else random in the model's dtype (seeded
from the test seed). The configuration: NPU_CONFIG if given to tb.core.run, else the one Vela
embedded in the model.

Throughput: the test logs the AXI beats (R + W, every port) the job moved and the wall-clock
seconds from the first register write to the stop; with ``TB_BENCH_OUT=path.json`` it also
writes them there (``tools/bench.py`` reads it for its bench-vs-loopback figure).
``TB_BENCH_BARE=1`` runs the job on a bare bench (``Env(bare=True)``: APB manager and
cocotbext-axi ``AxiRam``, no monitors, scoreboard or coverage; outputs compared with the TLM's
run after the timed phase): tools/bench.py's figure of the design's own cost.
"""
from __future__ import annotations

import json
import os

import cocotb
import numpy as np

from tb.ethos_u85.env import Env
from tb.ethos_u85.run_options import check_model_ref
from tb.ethos_u85.testlib.marks import DUT, seeded_rng, skip_now
from tb.ethos_u85.testlib.netjob import random_inputs, refusing_reference, run_network
from tb.ethos_u85.testlib.rtl_support import Refused, first_unsupported, judge

NPU_MODEL = os.environ.get("NPU_MODEL") or None
NPU_MODEL_REF = os.environ.get("NPU_MODEL_REF") or None
BARE = os.environ.get("TB_BENCH_BARE", "") not in ("", "0")
# A network the RTL stand-in cannot run is never an expected failure: on DUT=rtl the test
# checks that the stand-in stops with cmd_parse_error at the first operation
# tb/ethos_u85/testlib/rtl_support.py names, and then fails with one line naming it.


def _ops_in_model() -> set:
    if not NPU_MODEL:
        return set()
    try:
        from tlm.ethos_u85 import isa
        from tlm.ethos_u85.vela import load
        return {d.cmd.name for d in isa.decode(load(NPU_MODEL).command_words)}
    except Exception:  # noqa: BLE001 - the test itself reports a bad model
        return set()


_OPS = _ops_in_model()


@cocotb.skipif(NPU_MODEL is None, reason="no network given (make sim NPU_MODEL=path/x_vela.npz)")
@cocotb.test(timeout_time=5000, timeout_unit="ms")
async def test_npu_model(dut):
    """Run NPU_MODEL through the pins; check every output byte against the scoreboard's TLM
    reference (and NPU_MODEL_REF when given)."""
    if NPU_MODEL is None:
        skip_now("no network given (make sim NPU_MODEL=path/x_vela.npz)")
    from tlm.ethos_u85 import runner
    from tlm.ethos_u85.vela import load

    model = load(NPU_MODEL)
    cfg = os.environ.get("NPU_CONFIG_EXPLICIT") and os.environ.get("NPU_CONFIG")
    npu = runner.resolve_config(model, cfg or None)
    ref_npz = check_model_ref(model, NPU_MODEL_REF) if NPU_MODEL_REF else {}
    rng = seeded_rng()
    inputs = [ref_npz[f"input{i}"] if ref_npz else rand for i, rand in enumerate(random_inputs(model, rng))]
    mmap = runner.plan_memory(model, runner.DRIVER_DEFAULTS)
    cocotb.log.info("network %s on %s (%s): ops %s", os.path.basename(NPU_MODEL), DUT, npu.name,
                    sorted(o for o in _OPS if o.startswith("NPU_OP")))
    for a in mmap.areas:
        cocotb.log.info("  area %-14s 0x%010x +0x%x (%s) regions %s", a.name, a.address, a.size,
                        a.interface.name, a.regions)

    env = Env(dut, config=npu.name, reference_model=not BARE, bare=BARE)
    await env.start()
    miss = first_unsupported(model.command_words, npu.macs) if DUT == "rtl" else None
    if BARE and miss is not None:
        raise AssertionError(f"TB_BENCH_BARE: the stand-in does not implement {miss[1]} ({miss[2]})")
    if miss is not None:
        off, op, why = miss
        try:
            with refusing_reference(env, off):
                await run_network(env, NPU_MODEL, rng, inputs=inputs)
        except Refused as e:
            judge(e)
        else:
            raise AssertionError(f"{os.path.basename(NPU_MODEL)}: ran to its end, but the stand-in does "
                                 f"not claim {op} at 0x{off:x} ({why}): update rtl_support and the README")
        raise AssertionError(f"NPU_MODEL {os.path.basename(NPU_MODEL)}: the RTL stand-in does not implement "
                             f"{op} at command offset 0x{off:x} ({why}); it stopped there with "
                             f"cmd_parse_error as tb/ethos_u85/testlib/rtl_support.py says (DUT=tlm runs it)")
    res = await run_network(env, NPU_MODEL, rng, inputs=inputs)
    cocotb.log.info("throughput: %d AXI beats in %.3f s wall, %d cycles: %.0f beats/s", res.beats,
                    res.wall_s, res.cycles, res.beats / res.wall_s if res.wall_s > 0 else 0.0)
    if os.environ.get("TB_BENCH_OUT"):
        with open(os.environ["TB_BENCH_OUT"], "w") as fh:
            json.dump({"model": os.path.basename(NPU_MODEL), "dut": DUT, "beats": res.beats,
                       "wall_s": res.wall_s, "cpu_s": res.cpu_s, "cycles": res.cycles,
                       "beats_per_s": res.beats / res.wall_s if res.wall_s > 0 else 0.0}, fh)
    if BARE:        # no scoreboard ran: the outputs against the TLM's run, after the timed phase
        from tlm.ethos_u85.runner import run_model
        want = run_model(model, inputs, npu).outputs
        for i, (w, got) in enumerate(zip(want, res.outputs, strict=True)):
            bad = np.flatnonzero(np.asarray(w).reshape(-1) != got)
            assert bad.size == 0, f"output{i}: {bad.size} of {got.size} elements differ from the TLM's run"
    else:
        cocotb.log.info("stopped: STATUS 0x%08x, reference: %s", res.status, env.scoreboard.jobs[-1].ref_stop)
    for i, (t, got) in enumerate(zip(model.outputs, res.outputs, strict=True)):
        if ref_npz:
            lit = ref_npz[f"output{i}"].reshape(-1)
            assert lit.size == got.size and lit.dtype == got.dtype, \
                f"output{i}: NPU_MODEL_REF has {lit.size} {lit.dtype}, the DUT's {got.size} {got.dtype}"
            bad = np.flatnonzero(got != lit)
            assert bad.size == 0, (f"output{i} ({t.name}): {bad.size} of {got.size} elements differ "
                                   f"from NPU_MODEL_REF, first at {bad[0]}: {got[bad[0]]} vs {lit[bad[0]]}")
        cocotb.log.info("output%d (%s, %s %s): %d bytes match the TLM%s", i, t.name, t.dtype,
                        list(t.shape), t.nbytes, " and NPU_MODEL_REF" if ref_npz else "")
    env.finish()
