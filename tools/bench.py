#!/usr/bin/env python3
"""Benchmark: the TLM against LiteRT, side by side in one process.

    python -m tools.bench                        # ethos-u85-256, 3 timed runs per engine
    python -m tools.bench --config ethos-u85-512 --runs 5
    python -m tools.bench --breakdown            # + the ordinary path per NPU op type
    python -m tools.bench --profile              # + cProfile of one warm TLM run (top 15)
    python -m tools.bench --no-models            # without the per-model table (section 3)
    python -m tools.bench --blas-threads 0       # numpy's BLAS at its own thread count (default 1)
    python -m tools.bench --sim-only             # only the simulation sections (4. and 5. below)
    python -m tools.bench --no-sim               # without them
    python -m tools.bench --no-rtl               # without section 5 (the RTL stand-in's MACs/cycle)

(`make bench` runs the first form; `make bench BENCH_ARGS=--sim-only`.)  Performance figures
live here, never in timed unit tests: every number below is measured in this one process,
side by side.

Every network is measured the same way (class ``Net``): deterministic inputs over each
input's full integer range (seed ``--seed``); LiteRT with the BUILTIN_REF op resolver (a
first run, then at least 15 timed runs) and, for sections 1 and 2, LiteRT default (XNNPACK);
the TLM (``tlm.ethos_u85.runner.Session(vm, config).run``: run_model's run on the preloaded
VelaModel - a fresh device, the driver's register writes, the memory restored to its loaded
contents, inputs, output read-back - with the checks, memory map and load done once, as
LiteRT's interpreter is allocated once) once cold (the run that builds the operation plans), once more
(the run that records the run trace), then ``--runs`` timed runs.  Medians of the timed runs
give the ratios; wall and CPU time are both printed (CPU time is steadier on a busy host).
Each line of the engine table also gives microseconds per NPU operation (the time per
inference over the NPU operations the command stream executes, so BUILTIN_REF's figure is
its time for the same network per NPU op) and M MAC/s (the CONV/DEPTHWISE MACs of the
executed operations, from their register snapshots).  numpy's BLAS runs single-threaded
by default (``--blas-threads``), as BUILTIN_REF does.  Every TLM output is compared with
BUILTIN_REF bit for bit (exit 1 on any mismatch in sections 1 and 2; section 3 reports).

1. The catalog network (``--model``, default ``mobilenet_v2_0p5_224``, tag 'bench'),
   compiled with Vela (``nets.compiled``: cached under build/vela-cache): the TLM must be
   faster than BUILTIN_REF.  Also printed: how many operations ran by their plans.
2. The LSTM (``--lstm``, default ``tflm_micro_speech_lstm``: about 1,500 NPU operations of
   80 elements) from the published models folder (``--models-dir``, $NPU_SHARED_MODELS or
   ../shared/models): the per-operation cost; the target is within 10x of BUILTIN_REF.
3. Every ``*.tflite`` of that folder (``--no-models`` skips it): NPU ops, TLM and
   BUILTIN_REF medians (``--model-runs`` TLM runs), their ratio, us per NPU op, the cold
   run, and the bit-exactness against BUILTIN_REF; a model the TLM cannot run gets one
   line with the reason.  TLM inputs are the TFLite inputs, reshaped to the raw model's
   input shapes when the runner asks for those.
``--breakdown`` adds, for section 1, the ordinary path (plans, segments and traces off)
timed per NPU op type (the device's kernel-op table and the DMA entry point wrapped with
timers).

4. Bench throughput (``--no-sim`` skips it, ``--sim-only`` runs only it): on each simulator
   (``--sims``, default verilator,icarus) and each DUT (``--sim-dut``, default rtl,tlm) runs one
   Vela network (``--sim-net``, default ``sim_bench_conv``: a 1x1 CONV the RTL stand-in runs,
   about 56,000 AXI beats; catalog networks tagged ``sim_bench`` stay out of the test lists)
   through the cocotb bench (``python -m tb.core.run --npu-model ... --dut rtl|tlm``: APB driver,
   AXI subordinates and monitors, scoreboard with its reference TLM, coverage) and counts the AXI
   beats (R + W, every port) moved between the first register write and the stop, and the DUT's
   cycles, per wall-clock second of that phase. Next to it, in the same run, the bare loopback
   (tb/agents/loopback: a Verilog module wiring an AXI port straight through, cocotbext-axi
   ``AxiMaster`` -> ``AxiRam``, the same GPI clock as the bench) moves as many beats (writes then
   reads, 16-beat bursts) on the same simulator. Printed: beats/s and cycles/s of each and
   bench/loopback. The beats/s ratio also measures how many beats a cycle the DUT moves (the
   loopback moves one nearly every cycle); the cycles/s ratio is the bench's cost per cycle.
   Then one more run per simulator and DUT under cProfile (``TB_PROFILE``;
   ``--no-sim-profile`` skips it) gives the share of wall time per bench component
   (tools/sim_profile.py: AXI channel models, AXI monitors, APB agent, scoreboard, coverage,
   TLM behind the pins, reference TLM, the simulator), GPI callbacks and coroutine resumes a
   cycle. ``--sim-baseline DIR`` (another checkout, e.g. ``git worktree add ../base main``)
   measures it too, interleaved run by run, for a before/after table on the same load.
   Each simulator and DUT also runs on a bare cocotb bench (``TB_BENCH_BARE``: the APB
   manager and cocotbext-axi ``AxiRam`` on every port, no monitors, scoreboard, reference model
   or coverage; the outputs are compared with the TLM's run after the timed phase;
   ``--no-sim-bare`` skips it), interleaved with the others: the design's own cost under the
   simulator with bare cocotb, and "vs bare", the full bench's beats per CPU second over it;
   the profile table's last row bounds what any bench can reach on that simulator and DUT.
   ``--sim-axi lean,cocotbext`` runs this checkout's bench with each AXI subordinate
   (``TB_AXI_SUBORDINATE``: the lean one of tb/agents/axi/lean.py, the default, and the
   cocotbext-axi one with pin-sampling monitors), interleaved the same way.
   Builds are reused from sim_build/; numbers are printed, not asserted (a failing run is an
   error).

5. The RTL stand-in's throughput and size (``--no-rtl`` skips it; ``python -m tools.bench_rtl``
   runs it alone): MACs per cycle of a 3x3 and a 1x1 int8 CONV layer (Vela-compiled, through
   the pins on Icarus with the scoreboard on) against the configuration's MACS peak, for each
   of ``--rtl-configs`` (default ``--config``), and with ``--rtl-yosys`` the Yosys size of the
   stand-in per configuration (``--rtl-yosys-configs``, default all five, MACS 128..2048):
   coarse cells, flip-flop bits, memories and memory bits, with the run's time and peak RSS
   (opt-in: one hierarchical Yosys run per configuration, over 10 minutes each on a loaded
   host; ``--rtl-yosys-mem-gb`` caps each). Issue 17's target: at least 50 % of peak on the
   1x1 layer. A failing run is an error.

Exit status: 0 = bit-exact, 1 = mismatch, 2 = the TLM cannot run the network of section 1
or 2 (missing op, TLM error) or a setup problem; each failure is one line on stderr
(``--traceback`` for details).
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from tools.shared import shared_dir

REPO = Path(__file__).resolve().parents[1]

np = None  # numpy is imported by main() after the BLAS thread count is set (see --blas-threads)

DEFAULT_MODEL = "mobilenet_v2_0p5_224"
DEFAULT_LSTM = "tflm_micro_speech_lstm"
DEFAULT_SIM_NET = "sim_bench_conv"
DEFAULT_CONFIG = "ethos-u85-256"



BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


class BenchError(Exception):
    """A failure reported as one line; `code` is the exit status."""

    def __init__(self, msg: str, code: int = 2):
        super().__init__(msg)
        self.code = code


# ============================================================================ MAC count
def tflite_macs(tflite_bytes: bytes) -> tuple[int, dict, int]:
    """(total MACs, {op type: (count, MACs)}, number of operators) of the first subgraph.

    CONV_2D: N*OH*OW*CO * KH*KW*CI; DEPTHWISE_CONV_2D: N*OH*OW*C*M * KH*KW;
    FULLY_CONNECTED: batch*units * CI.  Other operators count 0 MACs (listed with count)."""
    from ethosu.vela.tflite import BuiltinOperator, Model

    names = {v: k for k, v in vars(BuiltinOperator.BuiltinOperator).items() if not k.startswith("_")}
    m = Model.Model.GetRootAsModel(tflite_bytes, 0)
    sg = m.Subgraphs(0)

    def shape(i):
        return tuple(int(s) for s in sg.Tensors(i).ShapeAsNumpy())

    per: dict = defaultdict(lambda: [0, 0])
    for k in range(sg.OperatorsLength()):
        op = sg.Operators(k)
        oc = m.OperatorCodes(op.OpcodeIndex())
        name = names.get(max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode()), "?")
        out = shape(op.Outputs(0))
        macs = 0
        if name == "CONV_2D":
            _, kh, kw, ci = shape(op.Inputs(1))
            macs = int(np.prod(out)) * kh * kw * ci
        elif name == "DEPTHWISE_CONV_2D":
            _, kh, kw, _ = shape(op.Inputs(1))
            macs = int(np.prod(out)) * kh * kw
        elif name == "FULLY_CONNECTED":
            ci = shape(op.Inputs(1))[1]
            macs = int(np.prod(out)) * ci
        per[name][0] += 1
        per[name][1] += macs
    return sum(v[1] for v in per.values()), {k: tuple(v) for k, v in per.items()}, sg.OperatorsLength()


# ============================================================================ TLM op timing
def _npu_op_key_and_macs(name: str, s) -> tuple[str, int]:
    """A breakdown label for one NPU op (kernel geometry) and its MACs, from the register
    snapshot the op runs with."""
    f = s.field
    short = name.replace("NPU_OP_", "")
    if name not in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE", "NPU_OP_POOL"):
        return short, 0
    kw = f("NPU_SET_KERNEL_WIDTH_M1", "width_m1") + 1
    kh = f("NPU_SET_KERNEL_HEIGHT_M1", "height_m1") + 1
    sx = (f("NPU_SET_KERNEL_STRIDE", "stride_x_msb") << 1 | f("NPU_SET_KERNEL_STRIDE", "stride_x_lsb")) + 1
    sy = (f("NPU_SET_KERNEL_STRIDE", "stride_y_msb") << 1 | f("NPU_SET_KERNEL_STRIDE", "stride_y_lsb")) + 1
    ofm = ((f("NPU_SET_OFM_HEIGHT_M1", "height_m1") + 1) * (f("NPU_SET_OFM_WIDTH_M1", "width_m1") + 1)
           * (f("NPU_SET_OFM_DEPTH_M1", "depth_m1") + 1))
    stride = f" s{sx}" if sx == sy else f" s{sy}x{sx}"
    if name == "NPU_OP_POOL":
        return f"{short} {kh}x{kw}{stride}", 0
    if name == "NPU_OP_DEPTHWISE":
        return f"{short} {kh}x{kw}{stride}", ofm * kh * kw
    ifm_d = f("NPU_SET_IFM_DEPTH_M1", "depth_m1") + 1
    return f"{short} {kh}x{kw}{stride}", ofm * kh * kw * ifm_d


class OpTimer:
    """Wraps tlm.ethos_u85.ops.KERNEL_OPS entries and tlm.ethos_u85.ops.dma.dma_start with wall-clock timers
    while installed (a context manager); restores them on exit."""

    def __init__(self):
        self.time: dict = defaultdict(float)       # label -> seconds
        self.count: Counter = Counter()
        self.macs: Counter = Counter()
        self._saved: dict = {}
        self._dma_saved = None

    def reset(self):
        self.time.clear(), self.count.clear(), self.macs.clear()

    def _wrap(self, name, fn):
        perf = time.perf_counter

        def timed(snap, port, dev, _fn=fn, _name=name):
            label, macs = _npu_op_key_and_macs(_name, snap)
            t0 = perf()
            try:
                return _fn(snap, port, dev)
            finally:
                self.time[label] += perf() - t0
                self.count[label] += 1
                self.macs[label] += macs
        timed.__wrapped__ = fn
        return timed

    def __enter__(self):
        from tlm.ethos_u85 import ops
        from tlm.ethos_u85.ops import dma

        self._ops = ops.KERNEL_OPS
        self._saved = dict(self._ops)
        for name, fn in self._saved.items():
            self._ops[name] = self._wrap(name, fn)
        self._dma_mod = dma
        self._dma_saved = dma.dma_start
        perf = time.perf_counter

        def dma_timed(*a, _fn=self._dma_saved, **kw):
            t0 = perf()
            try:
                return _fn(*a, **kw)
            finally:
                self.time["DMA_START"] += perf() - t0
                self.count["DMA_START"] += 1
        dma.dma_start = dma_timed
        return self

    def __exit__(self, *exc):
        self._ops.clear()
        self._ops.update(self._saved)
        self._dma_mod.dma_start = self._dma_saved
        return False


# ============================================================================ engines
def litert_engine(tflite_bytes: bytes, ref: bool, threads):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kind = OpResolverType.BUILTIN_REF if ref else OpResolverType.AUTO
    it = Interpreter(model_content=bytes(tflite_bytes), experimental_op_resolver_type=kind,
                     num_threads=threads)
    it.allocate_tensors()
    ins, outs = it.get_input_details(), it.get_output_details()
    # a model with variable (state) tensors (LSTMs) starts every inference from their
    # initial values, as every TLM run does (a fresh device and memory)
    stateful = any(d.get("name") for d in it.get_tensor_details()) and _has_variables(tflite_bytes)

    def infer(inputs):
        if stateful:
            it.reset_all_variables()
        for d, x in zip(ins, inputs):
            it.set_tensor(d["index"], x)
        it.invoke()
        return [it.get_tensor(d["index"]).copy() for d in outs]
    return infer


def _has_variables(tflite_bytes: bytes) -> bool:
    from ethosu.vela.tflite import Model

    sg = Model.Model.GetRootAsModel(tflite_bytes, 0).Subgraphs(0)
    return any(sg.Tensors(i).IsVariable() for i in range(sg.TensorsLength()))


def timed_runs(fn, n: int, after=None):
    """One first run + n runs; returns (first seconds, [n wall seconds], [n CPU seconds],
    outputs of every run).  CPU time (this process, all threads) is less sensitive than wall
    time to other load on the host."""
    times, cpu, outputs = [], [], []
    for i in range(n + 1):
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        outputs.append(out)
        if after:
            after(i)
    return times[0], times[1:], cpu[1:], outputs


def missing_ops(vm) -> Counter:
    """NPU_OP commands of the stream that the device cannot execute: name -> occurrences."""
    from tlm.ethos_u85 import isa, ops
    from tlm.ethos_u85.ops import KERNEL_OP_NAMES           # the device executes every other NPU_OP

    used = Counter(d.cmd.name for d in isa.decode(vm.command_words) if d.cmd.is_op)
    return Counter({n: c for n, c in used.items()
                    if n in KERNEL_OP_NAMES and n not in ops.KERNEL_OPS})


def _tlm_failure(e) -> BenchError:
    kind = getattr(e, "kind", None)
    if kind == "unimplemented":
        at = f" (command offset 0x{e.offset:x})" if e.offset is not None else ""
        detail = (e.detail or "").strip()
        why = "kernel op missing in tlm/ethos_u85/ops" if not detail or detail.endswith("not implemented") \
            else detail
        return BenchError(f"bench: FAIL: the TLM does not implement {e.op or detail}{at}: {why}")
    where = f" in {e.op} at command offset 0x{e.offset:x}" if getattr(e, "offset", None) is not None \
        and getattr(e, "op", None) else ""
    msg = str(e).splitlines()[0] if str(e) else repr(e)
    return BenchError(f"bench: FAIL: TLM run failed{where} [{kind or type(e).__name__}]: {msg}")


# ============================================================================ formatting
def fmt_ms(s: float | None) -> str:
    if s is None:
        return "-"
    return f"{s * 1e3:,.3f}" if s < 0.01 else (f"{s * 1e3:,.1f}" if s < 100 else f"{s * 1e3:,.0f}")


def fmt_macs(n: float) -> str:
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= div:
            return f"{n / div:.2f} {unit}"
    return f"{n:.0f} "


def table(rows, header, aligns):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]

    def line(r):
        return "  " + "  ".join(str(c).ljust(w) if a == "l" else str(c).rjust(w)
                                for c, w, a in zip(r, widths, aligns)).rstrip()
    out = [line(header), "  " + "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    return "\n".join(out)


# ============================================================================ networks
def npu_macs_and_ops(vm, tlm_inputs, config) -> "tuple[int, Counter]":
    """MACs of the CONV / DEPTHWISE operations one run executes (from their register
    snapshots, as the breakdown labels them) and the NPU ops executed, by name."""
    from tlm.ethos_u85 import runner

    macs = [0]
    real = runner.Device

    def make(*a, **kw):
        d = real(*a, **kw)

        def hook(ev, det):
            if ev == "op":
                macs[0] += _npu_op_key_and_macs(det["name"], det["snapshot"])[1]
        d.hooks.append(hook)
        return d
    runner.Device = make
    try:
        r = runner.run_model(vm, tlm_inputs, config=config)
    finally:
        runner.Device = real
    return macs[0], Counter(r.device.op_counts)


def tlm_runner(vm, tfl_inputs, config):
    """(run function returning the outputs, the inputs it passes): the TFLite inputs as
    they are, or - for a runner that wants the raw model's shapes (Vela folds a leading
    RESHAPE into the input) - reshaped to them by element count."""
    from tlm.ethos_u85 import runner

    session = runner.Session(vm, config)          # repeated inferences (run_model's run each)

    def once(inputs):
        return session.run(inputs).outputs
    try:
        once(tfl_inputs)
        return once, tfl_inputs
    except runner.RunError as e:
        if e.kind != "input" or len(vm.inputs) != len(tfl_inputs):
            raise
        shaped = [np.asarray(x).reshape(t.shape) for x, t in zip(tfl_inputs, vm.inputs)]
        once(shaped)
        return once, shaped


def tflite_inputs(tfl: bytes, seed: int) -> list:
    """Deterministic inputs over each input's full integer range; a TRANSPOSE_CONV model's
    int32[4] output-shape input gets the true output shape (the models README)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=bytes(tfl), experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    rng = np.random.default_rng(seed)
    out = []
    for d in it.get_input_details():
        dt = np.dtype(d["dtype"])
        if dt == np.int32 and list(d["shape"]) == [4]:
            out.append(np.array(it.get_output_details()[0]["shape"], np.int32))
            continue
        info = np.iinfo(dt)
        out.append(rng.integers(info.min, int(info.max) + 1, size=d["shape"]).astype(dt))
    return out


def mismatches(outs, ref) -> "tuple[int, int]":
    """(elements that differ, elements) of TLM outputs against LiteRT's (by element order)."""
    n = total = 0
    if len(outs) != len(ref):
        return -1, sum(int(np.asarray(b).size) for b in ref)
    for a, b in zip(outs, ref, strict=True):
        a, b = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
        total += b.size
        n += int(np.count_nonzero(a != b)) if a.size == b.size else max(a.size, b.size)
    return n, total


# Untimed TLM runs after the one that records the run trace: a later run with the same
# input shapes becomes a frozen run, and a frozen run's form (the whole run, or the part a run
# on unchanged memory repeats) is bound to compiled segments on its second use
# (tlm/ethos_u85/ops/fused.py): the timed runs are the steady state.
WARMUP_RUNS = 4


class Net:
    """One network measured in this process: LiteRT BUILTIN_REF (and XNNPACK) and the TLM,
    each a first run and `runs` timed runs (the TLM's first is the cold run that builds its
    plans; one more untimed run records the run trace the timed runs replay, then
    WARMUP_RUNS more)."""

    def __init__(self, label, tfl, vm, config, seed, threads, runs, xnn=True):
        self.label, self.config = label, config
        clear_warm_caches()                           # this network's cold run is cold
        inputs = tflite_inputs(tfl, seed)
        ref_fn = litert_engine(tfl, True, threads)
        t0 = time.perf_counter()
        tlm_once, tlm_inputs = tlm_runner(vm, inputs, config)     # the cold run: plans are built
        cold = time.perf_counter() - t0
        ref_runs = max(runs, 15)
        self.ref = timed_runs(lambda: ref_fn(inputs), ref_runs)
        self.ref_out = self.ref[3][0]
        if any(any(not np.array_equal(a, b) for a, b in zip(o, self.ref_out)) for o in self.ref[3][1:]):
            raise BenchError(f"bench: FAIL: LiteRT BUILTIN_REF is not deterministic across runs ({label})")
        self.xnn = None
        if xnn:
            xnn_fn = litert_engine(tfl, False, threads)
            self.xnn = timed_runs(lambda: xnn_fn(inputs), runs)
            self.xnn_mism = mismatches(self.xnn[3][0], self.ref_out)[0]
        t0 = time.perf_counter()
        tlm_once(tlm_inputs)                          # the second run records the run trace
        self.t_record = time.perf_counter() - t0
        for _ in range(WARMUP_RUNS):                  # frozen runs and their fused forms bind
            tlm_once(tlm_inputs)
        _, times, cpu, outs = timed_runs(lambda: tlm_once(tlm_inputs), runs)
        self.tlm = (cold, times, cpu, outs)
        self.mism = [mismatches(o, self.ref_out)[0] for o in self.tlm[3]]
        self.n_elems = mismatches(self.ref_out, self.ref_out)[1]
        self.macs, self.ops = npu_macs_and_ops(vm, tlm_inputs, config)
        self.n_ops = sum(self.ops.values())
        self.med = {k: statistics.median(v[1]) for k, v in (("ref", self.ref), ("tlm", self.tlm))
                    + ((("xnn", self.xnn),) if xnn else ())}

    @property
    def exact(self) -> bool:
        return all(m == 0 for m in self.mism)


def clear_warm_caches() -> None:
    """Forget the TLM's operation plans, segments and run traces (tlm.ethos_u85.ops.plan,
    tlm.ethos_u85.device): the next run of a network is a cold run."""
    from tlm.ethos_u85 import device

    device.clear_warm_caches()


def print_net(net: Net, tfl_macs: "int | None" = None, per_type: str = "") -> None:
    med = net.med
    npu = ", ".join(f"{n.replace('NPU_OP_', '')} {c}" for n, c in net.ops.most_common())
    if tfl_macs is not None:
        print(f"  network: {tfl_macs:,} MACs ({fmt_macs(tfl_macs)}MAC){per_type}")
    print(f"  NPU ops executed: {net.n_ops} ({npu}); CONV/DEPTHWISE MACs "
          f"{fmt_macs(net.macs).strip() if net.macs else 'none'}")
    print()

    def row(name, runs, ratio_ref):
        first, times, cpu, _ = runs
        m = statistics.median(times)
        return [name, fmt_ms(first), fmt_ms(m), fmt_ms(min(times)), fmt_ms(max(times)),
                fmt_ms(statistics.median(cpu)), f"{m / net.n_ops * 1e6:,.1f}" if net.n_ops else "-",
                f"{net.macs / m / 1e6:,.1f}" if net.macs else "-", ratio_ref]
    rows = [row("LiteRT BUILTIN_REF", net.ref, "1.00")]
    if net.xnn is not None:
        rows.append(row("LiteRT default (XNNPACK)", net.xnn, f"{med['xnn'] / med['ref']:.2f}"))
    rows.append(row("TLM (first run = cold)", net.tlm, f"{med['tlm'] / med['ref']:.2f}"))
    print(table(rows, ["engine", "first ms", "median ms", "min ms", "max ms", "CPU ms", "us/NPU op",
                       "M MAC/s", "/ REF"], "lrrrrrrrr"))
    print("  (us/NPU op: time per inference / NPU operations the stream executes, for every engine; "
          "M MAC/s: CONV/DEPTHWISE MACs per second)")
    print()
    cpu_ratio = statistics.median(net.tlm[2]) / max(statistics.median(net.ref[2]), 1e-9)
    print(f"  TLM / BUILTIN_REF     {med['tlm'] / med['ref']:10.2f}x   (by CPU time {cpu_ratio:.2f}x)")
    if net.xnn is not None:
        print(f"  TLM / default         {med['tlm'] / med['xnn']:10.2f}x")
    print(f"  TLM cold / warm       {net.tlm[0] / med['tlm']:10.2f}x   (cold {fmt_ms(net.tlm[0])} ms builds the "
          f"plans; the second run, {fmt_ms(net.t_record)} ms, records the run trace)")
    print(f"  TLM per NPU op        {med['tlm'] / net.n_ops * 1e6:10.1f} us   (BUILTIN_REF "
          f"{med['ref'] / net.n_ops * 1e6:.2f} us per NPU op of the same network)")
    xnn = f" (XNNPACK vs REF: {net.xnn_mism}, for information)" if net.xnn is not None else ""
    print(f"  bit-exact vs REF      {'yes' if net.exact else 'NO'}: mismatches per TLM run "
          f"{net.mism} of {net.n_elems} elements{xnn}")


def warm_coverage() -> str:
    """How the last runs executed their operations (tlm.ethos_u85.ops.plan statistics)."""
    from tlm.ethos_u85.ops import plan

    by: dict = defaultdict(Counter)
    for (op, what), n in plan.STATS.items():
        if what in ("planned", "ordinary", "declined"):
            by[op][what] += n
    return ", ".join(f"{op.replace('NPU_OP_', '')} {c['planned']}/{sum(c.values())}"
                     for op, c in sorted(by.items())) or "-"


def run(args) -> int:
    from tests import nets
    from tests.nets import catalog

    if args.model not in catalog.MODELS:
        raise BenchError(f"bench: unknown model {args.model!r} (bench models: "
                         f"{', '.join(getattr(catalog, 'BENCH_NAMES', [])) or 'none'})")
    try:
        from tlm.ethos_u85 import runner, vela
    except Exception as e:  # noqa: BLE001 - a module being edited, one line
        raise BenchError(f"bench: FAIL: cannot import the TLM runner: {type(e).__name__}: {e}") from e
    t0 = time.perf_counter()
    tfl = nets.build(args.model)
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    npz = compile_or_fail(lambda: nets.compiled(args.model, args.config, memory_mode=args.memory_mode),
                          args.model, args.config)
    t_vela = time.perf_counter() - t0
    total_macs, per_type, n_tfl_ops = tflite_macs(tfl)
    t0 = time.perf_counter()
    vm = vela.load(npz)
    t_load = time.perf_counter() - t0
    missing = missing_ops(vm)
    if missing:
        ops = ", ".join(f"{n} (x{c})" for n, c in sorted(missing.items()))
        raise BenchError(f"bench: FAIL: the TLM does not implement {ops}, needed by {args.model} "
                         f"- no entry in tlm.ethos_u85.ops.KERNEL_OPS")

    print(f"bench: TLM vs LiteRT, {args.config} (memory mode {args.memory_mode}, vela {nets.vela_version()}), "
          f"input seed {args.seed}, {args.runs} timed runs per engine (BUILTIN_REF at least 15)")
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    print(f"  host: Python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs"
          f"{load}; LiteRT num_threads={args.threads or 'default'}; BLAS threads "
          f"{args.blas_threads or 'default'}")
    print()
    # ---------------------------------------------------------------- 1. MobileNet-class
    from tlm.ethos_u85.ops import plan
    plan.STATS.clear()
    try:
        net = Net(args.model, tfl, vm, args.config, args.seed, args.threads, args.runs)
    except runner.RunError as e:
        raise _tlm_failure(e) from e
    kinds = ", ".join(f"{k} {c}x {fmt_macs(m)}MAC" if m else f"{k} {c}x"
                      for k, (c, m) in sorted(per_type.items(), key=lambda kv: -kv[1][1]))
    print(f"1. {args.model} (build {t_build * 1e3:.0f} ms, vela compile/cache {t_vela * 1e3:.0f} ms, npz load "
          f"{t_load * 1e3:.0f} ms: not in the TLM times)")
    print_net(net, total_macs, f", {n_tfl_ops} TFLite ops: {kinds}")
    reached = "reached" if net.med["tlm"] < net.med["ref"] else "NOT reached"
    print(f"  target TLM < BUILTIN_REF: {reached}; executions by plans / all, every run above: {warm_coverage()}")
    failed = [] if net.exact else [f"{args.model}: TLM output differs from BUILTIN_REF in {max(net.mism)} of "
                                   f"{net.n_elems} elements"]
    if args.breakdown:
        print()
        breakdown(vm, net, args)

    # ---------------------------------------------------------------- 2. LSTM
    models = models_dir(args.models_dir)
    if args.lstm and models is not None and (models / f"{args.lstm}.tflite").is_file():
        print()
        ltfl = (models / f"{args.lstm}.tflite").read_bytes()
        lvm = vela.load(compile_or_fail(lambda: compiled_model(ltfl, args.lstm, args.config), args.lstm,
                                        args.config))
        plan.STATS.clear()
        try:
            lnet = Net(args.lstm, ltfl, lvm, args.config, args.seed, args.threads, args.runs)
        except runner.RunError as e:
            raise _tlm_failure(e) from e
        print(f"2. {args.lstm} ({models / (args.lstm + '.tflite')})")
        print_net(lnet)
        ratio = lnet.med["tlm"] / lnet.med["ref"]
        print(f"  target within 10x of BUILTIN_REF: {'reached' if ratio <= 10 else 'NOT reached'} ({ratio:.1f}x); "
              f"executions by plans / all, every run above: {warm_coverage()}")
        if not lnet.exact:
            failed.append(f"{args.lstm}: TLM output differs from BUILTIN_REF in {max(lnet.mism)} elements")
    elif args.lstm:
        print(f"\n2. {args.lstm}: skipped: no {args.lstm}.tflite in the published models folder "
              f"(--models-dir, $NPU_SHARED_MODELS or ../shared/models)")

    # ---------------------------------------------------------------- 3. every published model
    if not args.no_models:
        print()
        models_table(models, args)

    if args.profile:
        print()
        profile(vm, net, args)
    if failed:
        for f in failed:
            print(f"bench: FAIL: {f}", file=sys.stderr)
        return 1
    return 0


def compile_or_fail(fn, name, config):
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - vela failure, one line
        text = str(e)
        why = text.split("--- stderr ---", 1)[-1].strip().splitlines()
        why = [w for w in why if w.strip() and not w.startswith("---")]
        raise BenchError(f"bench: vela failed for {name} ({config}): "
                         f"{(why or text.splitlines() or [repr(e)])[-1].strip()}") from e


def compiled_model(tfl: bytes, stem: str, config: str):
    from tests.nets.compile import compiled_bytes
    return compiled_bytes(tfl, stem, config)


def models_dir(arg: "str | None") -> "Path | None":
    """The published models folder: --models-dir, $NPU_SHARED_MODELS, or ../shared/models
    next to the repository (or next to the folder holding this worktree)."""
    cands = [Path(arg)] if arg else []
    cands += [d for d in [shared_dir("models")] if d is not None]
    for c in cands:
        if c.is_dir() and any(c.glob("*.tflite")):
            return c
    return None


def models_table(models: "Path | None", args) -> None:
    """Section 3: every *.tflite of the published models folder, TLM against BUILTIN_REF."""
    if models is None:
        print("3. published models: skipped: no folder with *.tflite (--models-dir, $NPU_SHARED_MODELS or "
              "../shared/models)")
        return
    from tlm.ethos_u85 import runner, vela

    print(f"3. published models ({models}), {args.config}, warm TLM medians of {args.model_runs} runs, "
          f"BUILTIN_REF medians of at least 15:")
    rows, ratios = [], []
    for path in sorted(models.glob("*.tflite")):
        stem = path.stem
        tfl = path.read_bytes()
        try:
            vm = vela.load(compiled_model(tfl, stem, args.config))
            net = Net(stem, tfl, vm, args.config, args.seed, args.threads, args.model_runs, xnn=False)
        except (runner.RunError, vela.VelaFormatError, RuntimeError, ValueError) as e:
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            rows.append([stem, "-", "-", "-", "-", "-", "-", "-", f"not run: {msg[:70]}"])
            continue
        r = net.med["tlm"] / net.med["ref"]
        cpu = statistics.median(net.tlm[2]) / max(statistics.median(net.ref[2]), 1e-9)
        ratios.append((r, stem))
        mism = max(net.mism)
        rows.append([stem, f"{net.n_ops}", fmt_ms3(net.med["tlm"]), fmt_ms3(net.med["ref"]), f"{r:,.1f}",
                     f"{cpu:,.1f}", f"{net.med['tlm'] / net.n_ops * 1e6:,.1f}" if net.n_ops else "-",
                     fmt_ms(net.tlm[0]), "yes" if mism == 0 else f"{mism} of {net.n_elems} differ"])
    print(table(rows, ["model", "NPU ops", "TLM ms", "REF ms", "TLM/REF", "by CPU", "us/NPU op", "cold ms",
                       "bit-exact vs REF"], "lrrrrrrrl"))
    if ratios:
        over = [s for r, s in ratios if r > 10]
        print(f"  slower than 10x BUILTIN_REF: {', '.join(over) if over else 'none'} "
              f"({len(over)} of {len(ratios)} models run)")


def fmt_ms3(s: float) -> str:
    return f"{s * 1e3:,.3f}" if s < 0.01 else fmt_ms(s)


def breakdown(vm, net: Net, args) -> None:
    """--breakdown: the ordinary path (no plans, segments or traces), per NPU op type."""
    from tlm.ethos_u85 import runner

    timer = OpTimer()
    inputs = tlm_runner(vm, tflite_inputs(nets_build(args.model), args.seed), args.config)[1]
    with timer:
        _, times, _, _ = timed_runs(lambda: runner.run_model(vm, inputs, config=args.config, warm_paths=False),
                                    max(0, args.runs - 1))
    runs = len(times) + 1
    med = statistics.median(times) if times else 0.0
    rows = []
    for label in sorted(timer.time, key=lambda k: -timer.time[k]):
        t = timer.time[label] / runs
        macs = timer.macs[label] / runs
        rows.append([label, f"{timer.count[label] // runs}", f"{t * 1e3:,.1f}", f"{100 * t / med:.1f}" if med else "-",
                     fmt_macs(macs) if macs else "-", f"{macs / t / 1e6:,.1f}" if macs and t else "-"])
    other = med - sum(timer.time.values()) / runs
    rows.append(["other (driver, fetch/decode, memory)", "", f"{other * 1e3:,.1f}",
                 f"{100 * other / med:.1f}" if med else "-", "", ""])
    print(f"  ordinary path (plans, segments and traces off) per NPU op type, {runs} runs with per-op timers "
          f"(they cost time themselves), median run {fmt_ms(med)} ms:")
    print(table(rows, ["op", "count", "ms", "%", "MACs", "M MAC/s"], "lrrrrr"))


def nets_build(name):
    from tests import nets
    return nets.build(name)


def profile(vm, net: Net, args) -> None:
    from tlm.ethos_u85 import runner

    inputs = tlm_runner(vm, tflite_inputs(nets_build(args.model), args.seed), args.config)[1]
    pr = cProfile.Profile()
    pr.enable()
    t0 = time.perf_counter()
    runner.run_model(vm, inputs, config=args.config)
    t_prof = time.perf_counter() - t0
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(args.profile_top)
    print(f"  cProfile of one warm TLM run of {args.model} ({t_prof * 1e3:,.0f} ms under the profiler), "
          f"top {args.profile_top} by cumulative time:")
    text = s.getvalue()
    start = text.find("   ncalls")
    print(text[start:].rstrip() if start >= 0 else text.rstrip())
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(args.profile_top)
    text = s.getvalue()
    start = text.find("   ncalls")
    print(f"\n  top {args.profile_top} by own (tottime) time:")
    print(text[start:].rstrip() if start >= 0 else text.rstrip())


# ============================================================================ bench throughput
def _run_json(cmd: list, out: Path, env_extra: dict, timeout: int,
              cwd: "Path | None" = None) -> "tuple[dict | None, str, float]":
    """Run *cmd* (cwd = repo); return (the JSON it wrote to *out*, a failure line, seconds)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env.update(env_extra)
    out.unlink(missing_ok=True)
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=cwd or REPO, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s", time.perf_counter() - t0
    dt = time.perf_counter() - t0
    if p.returncode != 0 or not out.is_file():
        text = (p.stdout + p.stderr).splitlines()
        errs = [ln.strip() for ln in text if "Error:" in ln or "error:" in ln]
        lines = errs or [ln.strip() for ln in text if ln.startswith(("tb.run", "tb.agents.loopback"))]
        return None, (lines[0] if errs else lines[-1]) if lines else f"exit {p.returncode}", dt
    return json.loads(out.read_text()), "", dt


def _sim_run(tree: Path, cmd: list, out: Path, env_extra: dict, timeout: int):
    """`_run_json` in checkout *tree* (this one, or ``--sim-baseline``'s, whose packages then
    come first on PYTHONPATH so its simulator processes import its tb/ and tlm/)."""
    env = dict(env_extra)
    if tree != REPO:
        env["PYTHONPATH"] = os.pathsep.join([str(tree)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return _run_json(cmd, out, env, timeout, cwd=tree)


BARE = "bare"          # sim_section's variant label of the bare bench (TB_BENCH_BARE)


def sim_section(args) -> int:
    """Section 4 of the module docstring. Returns 0, or 1 if a run failed."""
    from tests import nets
    from tb.core.simtools import SIMS, sim_problem
    from tools import sim_profile
    sims = [s.strip() for s in args.sims.split(",") if s.strip()] if args.sims else list(SIMS)
    bad = [s for s in sims if s not in SIMS]
    if bad:
        raise BenchError(f"bench: unknown simulator(s) {bad} ({', '.join(SIMS)})")
    duts = [d.strip() for d in args.sim_dut.split(",") if d.strip()]
    if not duts or any(d not in ("rtl", "tlm") for d in duts):
        raise BenchError(f"bench: --sim-dut {args.sim_dut!r}: rtl, tlm or rtl,tlm")
    trees = [("this", REPO)]
    if args.sim_baseline:
        base = Path(args.sim_baseline).resolve()
        if not (base / "tb" / "core" / "run.py").is_file():
            raise BenchError(f"bench: --sim-baseline {base}: not a checkout of this project")
        trees.append(("baseline", base))
    try:
        npz = Path(nets.compiled(args.sim_net, "ethos-u85-256", "default", "raw"))
    except Exception as e:  # noqa: BLE001 - vela failure, one line
        raise BenchError(f"bench: vela failed for {args.sim_net}: {str(e).splitlines()[-1:]}") from e
    print(f"\nBench throughput: {args.sim_net} (Vela, ethos-u85-256) through the cocotb bench "
          f"(DUT={','.join(duts)}; APB driver, AXI subordinates and monitors, scoreboard with its "
          f"reference TLM, coverage) vs a bare cocotbext-axi loopback (AxiMaster -> wires -> AxiRam), "
          f"same simulator, this run" + (f"; baseline checkout {trees[1][1]}" if len(trees) > 1 else ""),
          flush=True)
    impls = [i.strip() for i in args.sim_axi.split(",") if i.strip()]
    if not impls or any(i not in ("lean", "cocotbext") for i in impls):
        raise BenchError(f"bench: --sim-axi {args.sim_axi!r}: lean, cocotbext or both")

    def impl_env(impl):
        return {"TB_BENCH_BARE": "1"} if impl == BARE else {"TB_AXI_SUBORDINATE": impl}
    # (label, checkout, AXI subordinate, checkout label); the baseline checkout with its own
    # default subordinate (it may predate TB_AXI_SUBORDINATE); then this checkout's bare bench
    variants = [(t + (f"/{i}" if len(impls) > 1 and t == "this" else ""), tree, i, t)
                for t, tree in trees for i in (impls if t == "this" else impls[:1])]
    if not args.no_sim_bare:
        variants.append((BARE, REPO, BARE, "this"))
    rows, prof_cols, failed = [], [], 0
    with tempfile.TemporaryDirectory(prefix="bench-sim-") as tmp:
        for sim in sims:
            why = sim_problem(sim)
            if why:
                rows.append([sim, "", "", "skipped: " + why] + [""] * 12)
                continue
            results = {}                                  # (dut, variant) -> (json, prof json)
            for dut in duts:
                cmd = [sys.executable, "-m", "tb.core.run", "--device", "ethos-u85", "--sim", sim,
                       "--dut", dut, "--npu-model", str(npz), "--seed", "1"]
                for label, tree, impl, tlabel in variants:     # interleaved: the same load for all
                    out = Path(tmp) / f"net-{sim}-{dut}-{label.replace('/', '-')}.json"
                    net, err, t_net = _sim_run(tree, cmd, out, {"TB_BENCH_OUT": str(out), **impl_env(impl)},
                                               args.sim_timeout)
                    if net is None:
                        failed += 1
                        rows.append([sim, dut, label, f"bench run FAILED: {err}"] + [""] * 12)
                        continue
                    print(f"  {sim} DUT={dut} {label}: bench run {t_net:.1f} s (incl. build/start)",
                          flush=True)
                    results[(dut, label)] = [net, None, tlabel]
                if args.no_sim_profile:
                    continue
                for label, tree, impl, _ in variants:
                    if (dut, label) not in results or impl == BARE:
                        continue
                    stem = f"{sim}-{dut}-{label.replace('/', '-')}"
                    out = Path(tmp) / f"prof-{stem}.json"
                    prof = Path(tmp) / f"prof-{stem}.prof"
                    pj, err, _ = _sim_run(tree, cmd, out, {"TB_BENCH_OUT": str(out), "TB_PROFILE": str(prof),
                                                           **impl_env(impl)}, args.sim_timeout)
                    if pj is not None and prof.is_file():
                        # shares of the profiled run itself (its Python slowed down by the
                        # profiler): rescaling to the plain run's wall time would mix two
                        # loads on a shared machine
                        results[(dut, label)][1] = sim_profile.shares(
                            str(prof), pj.get("cpu_s") or pj["wall_s"], pj["cycles"])
                    else:
                        print(f"  {sim} DUT={dut} {label}: no profile ({err or 'TB_PROFILE not supported'})")
            beats = max([r[0]["beats"] for r in results.values()] or [0])
            loops = {}
            for tlabel, tree in trees:
                if not beats:
                    break
                out = Path(tmp) / f"loop-{sim}-{tlabel}.json"
                lb, err, t_lb = _sim_run(
                    tree, [sys.executable, "-m", "tb.agents.loopback.run", "--sim", sim, "--tests",
                           "test_loopback_throughput", "--beats", str(beats), "--out", str(out)],
                    out, {}, args.sim_timeout)
                if lb is None:
                    failed += 1
                    print(f"  {sim} {tlabel}: loopback FAILED: {err}")
                loops[tlabel] = lb
            for (dut, label), (net, shares, tlabel) in results.items():
                lb = loops.get(tlabel)
                cps = net["cycles"] / net["wall_s"] if net["wall_s"] else 0.0
                lb_cps = lb["cycles"] / lb["wall_s"] if lb and lb["wall_s"] else 0.0
                # per CPU second of the simulator process: steadier than wall time on a busy host
                # (a baseline checkout's loopback may not report CPU time: this checkout's then)
                lbc = lb if lb and lb.get("cpu_s") else loops.get("this")
                cpu, lb_cpu = net.get("cpu_s"), (lbc or {}).get("cpu_s")
                cpu_ratio = (net["beats"] / cpu) / (lbc["beats"] / lb_cpu) if cpu and lb_cpu else None
                # the full bench against the bare one on the same DUT (its own beats: DUT=tlm's
                # accesses are the same in both, the stand-in's too): the bench's own cost
                bare = results.get((dut, BARE), [None])[0]
                vs_bare = ((net["beats"] / cpu) / (bare["beats"] / bare["cpu_s"])
                           if label != BARE and bare and cpu and bare.get("cpu_s") else None)
                rows.append([sim, dut, label, f"{net['beats']}", f"{net['cycles']:,.0f}", f"{net['wall_s']:.2f}",
                             f"{net['beats_per_s']:,.0f}", f"{cps:,.0f}",
                             f"{lb['beats_per_s']:,.0f}" if lb else "FAILED", f"{lb_cps:,.0f}" if lb else "",
                             f"{net['beats_per_s'] / lb['beats_per_s']:.2f}x" if lb and lb["beats_per_s"] else "",
                             f"{cps / lb_cps:.2f}x" if lb_cps else "",
                             f"{cpu:.2f}" if cpu else "",
                             f"{cpu_ratio:.2f}x" if cpu_ratio else "",
                             f"{cpu_ratio * (net['cycles'] / net['beats']) / (lbc['cycles'] / lbc['beats']):.2f}x"
                             if cpu_ratio else "",
                             f"{vs_bare:.2f}x" if vs_bare else ""])
                if shares is not None:
                    named = sum(1 for v in variants if v[2] != BARE) > 1
                    shares["cpu_ratio"] = cpu_ratio
                    prof_cols.append((f"{sim}/{dut}" + (f"/{label}" if named else ""), shares))
    print(table(rows, ["simulator", "DUT", "checkout[/AXI]", "beats", "cycles", "wall s", "beats/s", "cycles/s",
                       "loopback beats/s", "loopback cycles/s", "beats/s ratio", "cycles/s ratio", "CPU s",
                       "beats/CPU-s ratio", "cycles/CPU-s ratio", "beats/CPU-s vs bare"],
                "llllrrrrrrrrrrrr"))
    print("  (bench: AXI R + W beats of every port from the first register write to the stop, the "
          "DUT's cycles at 100 MHz in the same interval; loopback: as many beats, writes then reads, "
          "16-beat bursts; ratios bench/loopback, same simulator and checkout; the CPU ratios use "
          "each simulator process's CPU time in the same interval instead of wall time; 'bare': the "
          "same network and DUT on a bare cocotb bench (TB_BENCH_BARE: APB manager, cocotbext-axi "
          "AxiRam, no monitors, scoreboard or coverage), 'vs bare': the full bench's beats per CPU "
          "second over the bare bench's, the bench's own cost on that DUT)")
    if prof_cols:
        comps = [c for c in sim_profile.ORDER if any(any(r[0] == c for r in sh["rows"]) for _, sh in prof_cols)]
        prow = []
        for c in comps:
            prow.append([c] + [next((f"{100 * r[1]:.1f}" for r in sh["rows"] if r[0] == c), "-")
                               for _, sh in prof_cols])
        prow.append(["GPI callbacks / cycle"] + [f"{sh['gpi_per_cycle']:.2f}" if sh["gpi_per_cycle"] else "-"
                                                 for _, sh in prof_cols])
        prow.append(["coroutine resumes / cycle"] + [f"{sh['resumes_per_cycle']:.2f}" if sh["resumes_per_cycle"]
                                                     else "-" for _, sh in prof_cols])

        def bound(sh):
            # the beats/CPU-s ratio if the bench's Python cost nothing: the simulator's share alone
            sim_share = next((r[1] for r in sh["rows"] if r[0] == sim_profile.SIMULATOR), None)
            return f"{sh['cpu_ratio'] / sim_share:.2f}x" if sh.get("cpu_ratio") and sim_share else "-"
        prow.append(["bound, no bench Python (beats/CPU-s ratio)"] + [bound(sh) for _, sh in prof_cols])
        print("\n  Share of the bench's time per component, % of the simulator process's CPU time "
              "(tools/sim_profile.py: one more run under cProfile (TB_PROFILE), whose overhead inflates "
              "the Python shares; each component's coroutines with the cocotb calls they make, cocotb's "
              "scheduler split by resumes, the simulator = the CPU time Python does not use; the bound "
              "row: the full bench's beats/CPU-s ratio over the simulator's share, what no bench on "
              "this DUT and simulator can exceed (an over-estimate: the profiler inflates Python's "
              "share)):")
        print(table(prow, ["component"] + [n for n, _ in prof_cols], "l" + "r" * len(prof_cols)))
    return 1 if failed else 0

# ============================================================================ RTL stand-in throughput
def rtl_section(args) -> int:
    """Section 5 of the module docstring (tools/bench_rtl.py in a subprocess). Returns 0, or 1
    if it failed."""
    configs = args.rtl_configs or args.config
    print(f"\n5. RTL stand-in throughput and size (tools/bench_rtl.py, {configs}; Icarus, "
          f"through the pins, scoreboard on)", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-rtl-") as tmp:
        out = Path(tmp) / "bench_rtl.json"
        cmd = [sys.executable, "-m", "tools.bench_rtl", "--configs", configs, "--json", str(out)]
        timeout = 7200
        if args.rtl_yosys:
            cmd += ["--yosys-configs", args.rtl_yosys_configs]
            if args.rtl_yosys_mem_gb is not None:
                cmd += ["--yosys-mem-gb", str(args.rtl_yosys_mem_gb)]
            timeout += 7200 * (5 if args.rtl_yosys_configs == "all" else len(args.rtl_yosys_configs.split(",")))
        else:
            cmd.append("--no-yosys")
        rep, err, dt = _run_json(cmd, out, {}, timeout=timeout)
    if rep is None:
        print(f"  RTL stand-in bench FAILED: {err}", flush=True)
        return 1
    rows = [[r["config"], r["net"].removesuffix("_vela"), f"{r['macs']:,}", f"{r['conv_cycles']:,}",
             f"{r['macs_per_cycle']:.1f}", f"{r['peak']}", f"{r['of_peak']:.1f} %"] for r in rep["mac"]]
    print(table(rows, ["configuration", "layer", "MACs", "CONV cycles", "MACs/cycle", "peak", "of peak"],
                "llrrrrr"))
    if rep["yosys"]:
        rows = [[y["config"], f"{y['macs']}", f"{y['cells']:,}", f"{y['flops']:,}", f"{y['memories']}",
                 f"{y['memory_bits']:,}", f"{y['seconds']}", f"{y['peak_rss_mb']:,}"] for y in rep["yosys"]]
        print(table(rows, ["configuration", "MACS", "coarse cells", "flip-flop bits", "memories", "memory bits",
                           "Yosys s", "peak RSS MB"], "lrrrrrrr"))
    print(f"  ({dt:.0f} s; cycles = the CONV unit busy for the whole operation: scale/bias and weight "
          f"reads, IFM reads, MACs, OFM writes)")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=DEFAULT_MODEL, help=f"catalog model (default {DEFAULT_MODEL})")
    ap.add_argument("--config", default=DEFAULT_CONFIG,
                    help=f"vela --accelerator-config and TLM configuration (default {DEFAULT_CONFIG})")
    ap.add_argument("--memory-mode", default="default", help="nets.MEMORY_MODES key (default 'default')")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per engine after the first (default 3)")
    ap.add_argument("--seed", type=int, default=1235, help="input seed (default 1235, as nets.reference)")
    ap.add_argument("--threads", type=int, default=None, help="LiteRT num_threads (default: LiteRT's)")
    ap.add_argument("--blas-threads", type=int, default=1,
                    help="BLAS threads for numpy in the TLM (default 1, like BUILTIN_REF; 0 = the BLAS "
                         "library's default). Multi-threaded OpenBLAS on the TLM's small matrix "
                         "products is much slower on a busy host")
    ap.add_argument("--lstm", default=DEFAULT_LSTM,
                    help=f"published model for section 2 (default {DEFAULT_LSTM}; '' skips it)")
    ap.add_argument("--models-dir", default=None,
                    help="published models folder (default: $NPU_SHARED_MODELS or ../shared/models)")
    ap.add_argument("--no-models", action="store_true", help="skip the per-model table (section 3)")
    ap.add_argument("--model-runs", type=int, default=5,
                    help="timed TLM runs per model in the per-model table (default 5)")
    ap.add_argument("--breakdown", action="store_true",
                    help="also time the ordinary path (no plans, segments or traces) per NPU op type")
    ap.add_argument("--profile", action="store_true", help="cProfile one extra TLM run")
    ap.add_argument("--profile-top", type=int, default=15, help="functions shown by --profile (default 15)")
    ap.add_argument("--traceback", action="store_true", help="full traceback on failure")
    sim = ap.add_mutually_exclusive_group()
    sim.add_argument("--no-sim", action="store_true",
                     help="skip the simulation sections (bench throughput, RTL stand-in MACs/cycle)")
    sim.add_argument("--sim-only", action="store_true",
                     help="run only the simulation sections (4 and 5)")
    ap.add_argument("--no-rtl", action="store_true",
                    help="skip section 5 (the RTL stand-in's MACs/cycle and Yosys size)")
    ap.add_argument("--rtl-configs", default="",
                    help="configurations of section 5, comma-separated (default: --config)")
    ap.add_argument("--rtl-yosys", action="store_true",
                    help="section 5 with the Yosys size (cells, flip-flop bits, memory bits; tens of minutes)")
    ap.add_argument("--rtl-yosys-configs", default="all",
                    help="configurations of the Yosys size, comma-separated (default: all)")
    ap.add_argument("--rtl-yosys-mem-gb", type=float, default=None,
                    help="address-space limit of each Yosys run in GB (default: tools.bench_rtl's)")
    ap.add_argument("--sims", default="",
                    help="simulators of the throughput section, comma-separated (default: all, tb.core.simtools.SIMS)")
    ap.add_argument("--sim-net", default=DEFAULT_SIM_NET,
                    help=f"catalog network of the throughput section (default {DEFAULT_SIM_NET})")
    ap.add_argument("--sim-dut", default="rtl,tlm",
                    help="DUTs of the throughput section, comma-separated (default rtl,tlm)")
    ap.add_argument("--no-sim-profile", action="store_true",
                    help="no profiled run per simulator and DUT (the per-component share table)")
    ap.add_argument("--sim-baseline", default="",
                    help="another checkout of this project (e.g. `git worktree add ../base main`) "
                         "measured in the same run, interleaved, for a before/after table")
    ap.add_argument("--no-sim-bare", action="store_true",
                    help="leave out the bare-bench run (TB_BENCH_BARE) of each simulator and DUT")
    ap.add_argument("--sim-axi", default="lean",
                    help="the bench's AXI subordinates in the throughput section, comma-separated: lean "
                         "(tb/agents/axi/lean.py, the default), cocotbext (cocotbext-axi channel models, "
                         "TB_AXI_SUBORDINATE=cocotbext) or both, interleaved (default lean)")
    ap.add_argument("--sim-timeout", type=int, default=1800,
                    help="seconds per simulator run of the throughput section (default 1800)")
    args = ap.parse_args(argv)
    if args.runs < 1 or args.model_runs < 1:
        ap.error("--runs and --model-runs must be >= 1")
    if args.blas_threads:           # before numpy is imported: the BLAS reads these at load time
        for var in BLAS_THREAD_VARS:
            os.environ[var] = str(args.blas_threads)
    global np
    if "numpy" in sys.modules and args.blas_threads:
        print("bench: note: numpy was imported before --blas-threads took effect", file=sys.stderr)
    import numpy
    np = numpy
    try:
        code = 0 if args.sim_only else run(args)
        if not args.no_sim:
            code = max(code, sim_section(args))
            if not args.no_rtl:
                code = max(code, rtl_section(args))
        return code
    except BenchError as e:
        if args.traceback:
            raise
        print(str(e), file=sys.stderr)
        return e.code
    except KeyboardInterrupt:
        print("bench: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - one line unless --traceback
        if args.traceback:
            raise
        print(f"bench: FAIL: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} "
              f"(--traceback for details)", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
