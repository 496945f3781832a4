#!/usr/bin/env python3
"""Benchmark: the TLM against LiteRT on one MobileNet-sized int8 network, side by side.

    python tools/bench.py                        # ethos-u85-256, 3 timed runs per engine
    python tools/bench.py --config ethos-u85-512 --runs 5
    python tools/bench.py --profile              # + cProfile of one TLM run (top 15, cumulative)
    python tools/bench.py --blas-threads 0       # numpy's BLAS at its own thread count (default 1)
    python tools/bench.py --sim-only             # only the bench-throughput section (7. below)
    python tools/bench.py --no-sim               # without it

(`make bench` runs the first form; `make bench BENCH_ARGS=--sim-only`.)  Performance figures live here, never in timed unit
tests: every number below is measured in this one process, side by side.

What it does:

1. Builds the catalog network (``--model``, default ``mobilenet_v2_0p5_224``, tag 'bench')
   and compiles it with Vela (``nets.compiled``: cached under build/vela-cache).
2. Makes the deterministic input (``nets.make_inputs``, seed 1235).
3. Checks that the TLM implements every kernel operation in the command stream; if not, it
   stops with one line naming the missing op(s) (exit 2), before timing anything.
4. Runs LiteRT with the BUILTIN_REF op resolver, LiteRT default (XNNPACK) and the TLM
   (``tlm.ethos_u85.runner.run_model`` on the preloaded VelaModel), each once untimed-for-the-median
   ("first": for the TLM the cold run, before any cache in the model is warm) and then
   ``--runs`` times; the median of those is the figure used for the ratios.
   LiteRT interpreters are built once outside the timing (set_tensor + invoke + get_tensor
   are timed); a TLM inference is one ``run_model`` call (device, memory map, command
   stream execution, output read-back), the .npz parse is timed separately.
   numpy's BLAS runs single-threaded by default (``--blas-threads``), as BUILTIN_REF does:
   multi-threaded OpenBLAS on the TLM's small matrix products is slow and erratic on a
   shared host.  Wall and CPU time are both reported (CPU time is steadier under load).
5. Compares every TLM output with BUILTIN_REF bit for bit (exit 1 on any mismatch).
6. Prints the table: time per inference, TLM/BUILTIN_REF and TLM/default ratios, the
   network's MACs (CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED, from the TFLite graph), the
   TLM's MAC/s, the NPU operations executed by type, and the TLM time per NPU op type
   (the device's kernel-op dispatch table and the DMA entry point are wrapped with timers,
   so the breakdown comes from the timed runs themselves; the wrapper costs ~1 us per op).

7. Bench throughput (``--no-sim`` skips it, ``--sim-only`` runs only it): on each simulator
   (``--sims``, default verilator,icarus) runs one Vela network (``--sim-net``, default
   ``avgpool_5x5_s1_same_relu6``: a pooling network the RTL stand-in implements) through
   the cocotb bench (``python -m tb.core.run --npu-model ... --dut rtl``: APB driver flow, AXI
   subordinates, scoreboard with its reference TLM) and counts the AXI beats (R + W, every
   port) moved between the first register write and the stop, per wall-clock second of
   that phase. Next to it, in the same run, the bare loopback (tb/loopback: a Verilog
   module wiring an AXI port straight through, cocotbext-axi ``AxiMaster`` -> ``AxiRam``)
   moves a comparable number of beats (writes then reads, 16-beat bursts) on the same
   simulator. Printed: beats/s of each and bench/loopback. Builds are reused from
   sim_build/; numbers are printed, not asserted (a failing run is an error).

Exit status: 0 = bit-exact, 1 = mismatch, 2 = the TLM cannot run the network (missing op,
TLM error) or a setup problem; each failure is one line on stderr (``--traceback`` for
details).
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

REPO = Path(__file__).resolve().parents[1]

np = None  # numpy is imported by main() after the BLAS thread count is set (see --blas-threads)

DEFAULT_MODEL = "mobilenet_v2_0p5_224"
DEFAULT_SIM_NET = "avgpool_5x5_s1_same_relu6"
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

    def infer(inputs):
        for d, x in zip(ins, inputs):
            it.set_tensor(d["index"], x)
        it.invoke()
        return [it.get_tensor(d["index"]).copy() for d in outs]
    return infer


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
    from tlm.ethos_u85.device import KERNEL_OP_NAMES        # the device executes every other NPU_OP

    used = Counter(d.cmd.name for d in isa.decode(vm.command_words) if d.cmd.is_op)
    return Counter({n: c for n, c in used.items()
                    if n in KERNEL_OP_NAMES and n not in ops.KERNEL_OPS})


def _tlm_failure(e) -> BenchError:
    kind = getattr(e, "kind", None)
    if kind == "unimplemented":
        at = f" (command offset 0x{e.offset:x})" if e.offset is not None else ""
        detail = (e.detail or "").strip()
        why = "kernel op missing in tlm/ops" if not detail or detail.endswith("not implemented") \
            else detail
        return BenchError(f"bench: FAIL: the TLM does not implement {e.op or detail}{at}: {why}")
    where = f" in {e.op} at command offset 0x{e.offset:x}" if getattr(e, "offset", None) is not None \
        and getattr(e, "op", None) else ""
    msg = str(e).splitlines()[0] if str(e) else repr(e)
    return BenchError(f"bench: FAIL: TLM run failed{where} [{kind or type(e).__name__}]: {msg}")


# ============================================================================ formatting
def fmt_ms(s: float | None) -> str:
    return "-" if s is None else (f"{s * 1e3:,.1f}" if s < 100 else f"{s * 1e3:,.0f}")


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


# ============================================================================ main
def run(args) -> int:
    from tests import nets
    from tests.nets import catalog

    if args.model not in catalog.MODELS:
        raise BenchError(f"bench: unknown model {args.model!r} (bench models: "
                         f"{', '.join(getattr(catalog, 'BENCH_NAMES', [])) or 'none'})")
    t0 = time.perf_counter()
    tfl = nets.build(args.model)
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    try:
        npz = nets.compiled(args.model, args.config, memory_mode=args.memory_mode)
    except Exception as e:  # noqa: BLE001 - vela failure, one line
        text = str(e)
        why = text.split("--- stderr ---", 1)[-1].strip().splitlines()
        why = [w for w in why if w.strip() and not w.startswith("---")]
        raise BenchError(f"bench: vela failed for {args.model} ({args.config}): "
                         f"{(why or text.splitlines() or [repr(e)])[-1].strip()}") from e
    t_vela = time.perf_counter() - t0
    inputs = nets.make_inputs(tfl, args.seed)
    total_macs, per_type, n_tfl_ops = tflite_macs(tfl)

    try:
        from tlm.ethos_u85 import runner, vela
    except Exception as e:  # noqa: BLE001 - a module being edited, one line
        raise BenchError(f"bench: FAIL: cannot import the TLM runner: {type(e).__name__}: {e}") from e
    t0 = time.perf_counter()
    vm = vela.load(npz)
    t_load = time.perf_counter() - t0
    missing = missing_ops(vm)
    if missing:
        ops = ", ".join(f"{n} (x{c})" for n, c in sorted(missing.items()))
        raise BenchError(f"bench: FAIL: the TLM does not implement {ops}, needed by {args.model} "
                         f"- no entry in tlm.ethos_u85.ops.KERNEL_OPS")

    # ---------------------------------------------------------------- LiteRT
    ref_fn = litert_engine(tfl, True, args.threads)
    xnn_fn = litert_engine(tfl, False, args.threads)
    ref_first, ref_times, ref_cpu, ref_outs = timed_runs(lambda: ref_fn(inputs), args.runs)
    xnn_first, xnn_times, xnn_cpu, xnn_outs = timed_runs(lambda: xnn_fn(inputs), args.runs)
    ref = ref_outs[0]
    if any(any(not np.array_equal(a, b) for a, b in zip(o, ref)) for o in ref_outs[1:]):
        raise BenchError("bench: FAIL: LiteRT BUILTIN_REF is not deterministic across runs")

    # ---------------------------------------------------------------- TLM
    timer = OpTimer()
    results = []

    def tlm_once():
        r = runner.run_model(vm, inputs, config=args.config)
        results.append(r)
        return r.outputs

    def after(i):
        if i == 0:      # the cold run's breakdown; the timed warm runs run without the timers
            cold_breakdown.update(time=dict(timer.time), count=Counter(timer.count))
            timer.reset()
            timer.__exit__(None, None, None)
    cold_breakdown: dict = {}
    try:
        timer.__enter__()
        try:
            tlm_first, tlm_times, tlm_cpu, tlm_outs = timed_runs(tlm_once, args.runs, after)
        finally:
            timer.__exit__(None, None, None)
        with timer:     # the per-op breakdown: as many warm runs again, with the op timers
            bd_first, bd_times, _, _ = timed_runs(tlm_once, max(0, args.runs - 1))
        bd_times = [bd_first] + bd_times
    except runner.RunError as e:
        raise _tlm_failure(e) from e

    # ---------------------------------------------------------------- bit-exactness
    mism_runs = []
    for o in tlm_outs:
        if len(o) != len(ref):
            raise BenchError(f"bench: FAIL: the TLM returned {len(o)} outputs, LiteRT {len(ref)}", 1)
        n = 0
        for a, b in zip(o, ref):
            a, b = np.asarray(a).reshape(-1), np.asarray(b).reshape(-1)
            n += int(np.count_nonzero(a != b)) if a.size == b.size else max(a.size, b.size)
        mism_runs.append(n)
    n_elems = sum(int(np.asarray(b).size) for b in ref)
    xnn_mism = sum(int(np.count_nonzero(np.asarray(a).reshape(-1) != np.asarray(b).reshape(-1)))
                   for a, b in zip(xnn_outs[0], ref))

    # ---------------------------------------------------------------- report
    med = {k: statistics.median(v) for k, v in
           (("ref", ref_times), ("xnn", xnn_times), ("tlm", tlm_times))}
    dev = results[-1].device
    op_counts = Counter(dev.op_counts)

    print(f"bench: {args.model} on {args.config} (memory mode {args.memory_mode}, vela "
          f"{nets.vela_version()}), input seed {args.seed}, {args.runs} timed runs per engine")
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    print(f"  host: Python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs"
          f"{load}; LiteRT num_threads={args.threads or 'default'}; BLAS threads "
          f"{args.blas_threads or 'default'}")
    print(f"  build {t_build * 1e3:.0f} ms, vela compile/cache {t_vela * 1e3:.0f} ms, npz load "
          f"{t_load * 1e3:.0f} ms (not in the TLM times)")
    print()
    kinds = ", ".join(f"{k} {c}x {fmt_macs(m)}MAC" if m else f"{k} {c}x"
                      for k, (c, m) in sorted(per_type.items(), key=lambda kv: -kv[1][1]))
    print(f"  network: {total_macs:,} MACs ({fmt_macs(total_macs)}MAC), {n_tfl_ops} TFLite ops: {kinds}")
    npu_ops = ", ".join(f"{n.replace('NPU_OP_', '')} {c}" for n, c in op_counts.most_common())
    print(f"  NPU ops executed: {sum(op_counts.values())} ({npu_ops})")
    print()

    def row(name, first, times, cpu, ratio_ref, ratio_xnn):
        return [name, fmt_ms(first), fmt_ms(statistics.median(times)), fmt_ms(min(times)),
                fmt_ms(max(times)), fmt_ms(statistics.median(cpu)), ratio_ref, ratio_xnn]
    rows = [
        row("LiteRT BUILTIN_REF", ref_first, ref_times, ref_cpu, "1.00", f"{med['ref'] / med['xnn']:.2f}"),
        row("LiteRT default (XNNPACK)", xnn_first, xnn_times, xnn_cpu, f"{med['xnn'] / med['ref']:.2f}",
            "1.00"),
        row("TLM (first run = cold)", tlm_first, tlm_times, tlm_cpu, f"{med['tlm'] / med['ref']:.2f}",
            f"{med['tlm'] / med['xnn']:.2f}"),
    ]
    print(table(rows, ["engine", "first ms", "median ms", "min ms", "max ms", "CPU ms", "/ REF",
                       "/ default"], "lrrrrrrr"))
    print()
    reached = "reached" if med["tlm"] < med["ref"] else "NOT reached"
    cpu_ratio = statistics.median(tlm_cpu) / max(statistics.median(ref_cpu), 1e-9)
    print(f"  TLM / BUILTIN_REF     {med['tlm'] / med['ref']:10.2f}x   (target < 1.00: {reached}; "
          f"by CPU time {cpu_ratio:.2f}x)")
    print(f"  TLM / default         {med['tlm'] / med['xnn']:10.2f}x")
    print(f"  TLM cold / warm       {tlm_first / med['tlm']:10.2f}x")
    print(f"  TLM throughput        {total_macs / med['tlm'] / 1e6:10.1f} M MAC/s   "
          f"(BUILTIN_REF {total_macs / med['ref'] / 1e6:.1f}, default {total_macs / med['xnn'] / 1e6:.1f})")
    exact = all(m == 0 for m in mism_runs)
    print(f"  bit-exact vs REF      {'yes' if exact else 'NO'}: mismatches per TLM run "
          f"{mism_runs} of {n_elems} elements (XNNPACK vs REF: {xnn_mism}, for information)")
    print()

    # per NPU op type
    runs = len(bd_times)
    bd_med = statistics.median(bd_times)
    tot_ops = sum(timer.time.values())
    rows = []
    for label in sorted(timer.time, key=lambda k: -timer.time[k]):
        t = timer.time[label] / runs
        macs = timer.macs[label] / runs
        rows.append([label, f"{timer.count[label] // runs}", f"{t * 1e3:,.1f}",
                     f"{100 * t / bd_med:.1f}", fmt_macs(macs) if macs else "-",
                     f"{macs / t / 1e6:,.1f}" if macs and t else "-"])
    other = bd_med - tot_ops / runs
    rows.append(["other (driver, fetch/decode, memory)", "", f"{other * 1e3:,.1f}",
                 f"{100 * other / bd_med:.1f}", "", ""])
    print(f"  TLM time per NPU op type ({runs} more warm runs with per-op timers, which cost time "
          f"themselves; median run {fmt_ms(bd_med)} ms):")
    print(table(rows, ["op", "count", "ms", "%", "MACs", "M MAC/s"], "lrrrrr"))
    if cold_breakdown:
        extra = {k: cold_breakdown["time"][k] - timer.time.get(k, 0) / runs for k in cold_breakdown["time"]}
        top = [kv for kv in sorted(extra.items(), key=lambda kv: -kv[1])[:3] if kv[1] > 0.0005]
        if top:
            print("  cold-run extra time: " + ", ".join(f"{k} +{v * 1e3:,.1f} ms" for k, v in top))

    if args.profile:
        print()
        pr = cProfile.Profile()
        pr.enable()
        t0 = time.perf_counter()
        runner.run_model(vm, inputs, config=args.config)
        t_prof = time.perf_counter() - t0
        pr.disable()
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(args.profile_top)
        print(f"  cProfile of one warm TLM run ({t_prof * 1e3:,.0f} ms under the profiler), "
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

    if not exact:
        print(f"bench: FAIL: TLM output differs from BUILTIN_REF in {max(mism_runs)} of {n_elems} "
              f"elements", file=sys.stderr)
        return 1
    return 0



# ============================================================================ bench throughput
def _run_json(cmd: list, out: Path, env_extra: dict, timeout: int) -> "tuple[dict | None, str, float]":
    """Run *cmd* (cwd = repo); return (the JSON it wrote to *out*, a failure line, seconds)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env.update(env_extra)
    out.unlink(missing_ok=True)
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s", time.perf_counter() - t0
    dt = time.perf_counter() - t0
    if p.returncode != 0 or not out.is_file():
        text = (p.stdout + p.stderr).splitlines()
        errs = [ln.strip() for ln in text if "Error:" in ln or "error:" in ln]
        lines = errs or [ln.strip() for ln in text if ln.startswith(("tb.run", "tb.agents.loopback"))]
        return None, (lines[0] if errs else lines[-1]) if lines else f"exit {p.returncode}", dt
    return json.loads(out.read_text()), "", dt


def sim_section(args) -> int:
    """Section 7 of the module docstring. Returns 0, or 1 if a run failed."""
    from tests import nets
    from tb.core.simtools import SIMS, sim_problem
    sims = [s.strip() for s in args.sims.split(",") if s.strip()] if args.sims else list(SIMS)
    bad = [s for s in sims if s not in SIMS]
    if bad:
        raise BenchError(f"bench: unknown simulator(s) {bad} ({', '.join(SIMS)})")
    try:
        npz = Path(nets.compiled(args.sim_net, "ethos-u85-256", "default", "raw"))
    except Exception as e:  # noqa: BLE001 - vela failure, one line
        raise BenchError(f"bench: vela failed for {args.sim_net}: {str(e).splitlines()[-1:]}") from e
    print(f"\nBench throughput: {args.sim_net} (Vela, ethos-u85-256) through the cocotb bench "
          f"(DUT={args.sim_dut}, scoreboard on) vs a bare cocotbext-axi loopback "
          f"(AxiMaster -> wires -> AxiRam), same simulator, this run", flush=True)
    rows, failed = [], 0
    with tempfile.TemporaryDirectory(prefix="bench-sim-") as tmp:
        for sim in sims:
            why = sim_problem(sim)
            if why:
                rows.append([sim, "skipped: " + why] + [""] * 7)
                continue
            out = Path(tmp) / f"net-{sim}.json"
            net, err, t_net = _run_json(
                [sys.executable, "-m", "tb.core.run", "--device", "ethos-u85", "--sim", sim, "--dut", args.sim_dut,
                 "--npu-model", str(npz), "--seed", "1"],
                out, {"TB_BENCH_OUT": str(out)}, timeout=900)
            if net is None:
                failed += 1
                rows.append([sim, f"bench run FAILED: {err}"] + [""] * 7)
                continue
            beats = int(net["beats"])
            out = Path(tmp) / f"loop-{sim}.json"
            lb, err, t_lb = _run_json(
                [sys.executable, "-m", "tb.agents.loopback.run", "--sim", sim, "--tests",
                 "test_loopback_throughput", "--beats", str(beats), "--out", str(out)],
                out, {}, timeout=900)
            if lb is None:
                failed += 1
            ratio = (net["beats_per_s"] / lb["beats_per_s"]) if lb and lb["beats_per_s"] else None
            rows.append([sim, f"{beats}", f"{net['wall_s']:.2f}", f"{net['beats_per_s']:,.0f}",
                         f"{net['cycles'] / net['wall_s']:,.0f}" if net["wall_s"] else "-",
                         f"{lb['beats']}" if lb else "FAILED",
                         f"{lb['wall_s']:.2f}" if lb else err[:40],
                         f"{lb['beats_per_s']:,.0f}" if lb else "",
                         f"{ratio:.2f}x" if ratio is not None else ""])
            print(f"  {sim}: bench run {t_net:.1f} s, loopback run {t_lb:.1f} s (incl. build/start)",
                  flush=True)
    print(table(rows, ["simulator", "bench beats", "wall s", "beats/s", "cycles/s",
                       "loopback beats", "wall s", "beats/s", "bench/loopback"],
                "lrrrrrrrr"))
    print("  (bench: beats from the first register write to the stop, DUT's cycles at 100 MHz "
          "in the same interval; loopback: writes then reads, 16-beat bursts)")
    return 1 if failed else 0

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
    ap.add_argument("--profile", action="store_true", help="cProfile one extra TLM run")
    ap.add_argument("--profile-top", type=int, default=15, help="functions shown by --profile (default 15)")
    ap.add_argument("--traceback", action="store_true", help="full traceback on failure")
    sim = ap.add_mutually_exclusive_group()
    sim.add_argument("--no-sim", action="store_true",
                     help="skip the bench-throughput section (cocotb bench vs bare AXI loopback)")
    sim.add_argument("--sim-only", action="store_true", help="run only the bench-throughput section")
    ap.add_argument("--sims", default="",
                    help="simulators of the throughput section, comma-separated (default: all, tb.core.simtools.SIMS)")
    ap.add_argument("--sim-net", default=DEFAULT_SIM_NET,
                    help=f"catalog network of the throughput section (default {DEFAULT_SIM_NET})")
    ap.add_argument("--sim-dut", default="rtl", choices=("rtl", "tlm"),
                    help="DUT of the throughput section (default rtl)")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be >= 1")
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
