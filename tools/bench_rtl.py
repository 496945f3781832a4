"""Throughput and size of the RTL stand-in (``python -m tools.bench_rtl``).

MACs per cycle: a 3x3 CONV layer and a 1x1 CONV layer (int8, built with the project's TFLite
builder, compiled with Vela for each configuration) run through the stand-in's pins on
DUT=rtl with the scoreboard on (tools/bench_rtl_tb.py); the cycles the CONV unit is busy
(weight and scale/bias reads, IFM reads, MACs, output writes: the whole operation) against
the layer's MACs (every kernel tap of every output element) give MACs per cycle, reported
against the configuration's peak (MACS a cycle).

Size: Yosys, one hierarchical run (no -flatten) per configuration: a wrapper holds a kept
instance of ethosu85 with the configuration's MACS (yosys_stat takes several MACS values for
one run, every module then synthesised once per parameter set; all five at once had outgrown
6 GB in the coarse synthesis when stopped), and the per-module ``stat`` reports are totalled,
each submodule counted once per instance. ``synth -noshare -run begin:fine`` gives the
coarse netlist (proc, opt, fsm, wreduce, alumacc, ``memory -nomap``: memories stay ``$mem``
cells and are counted in bits, not expanded into flip-flops). Reported
per configuration: coarse cells, flip-flop bits (the widths of the $*dff* cells), memories and
memory bits (accumulator buffer, IFM buffer, scale/bias RAM, chaining FIFOs, LUT RAM, queues,
and the arrays Yosys keeps as memories). No latch may appear (the run fails otherwise).
``--yosys-gates`` also maps to Yosys's generic gates (techmap, no ABC; over 7 GB and not done
after 16 minutes of techmap at MACS 128 alone on the development host). ``-noshare``: the
SAT-based ``share`` pass does not finish on the SWD decoder's twelve variable shifts
(npu_swd.v, the activation patterns double per candidate, the memory grows with them). Each
run is limited to ``--yosys-mem-gb`` of address space; its time and peak RSS are reported.

  python -m tools.bench_rtl [--configs ethos-u85-128,ethos-u85-256] [--sim icarus]
                            [--yosys-configs all|NAME,...] [--yosys-mem-gb 8] [--yosys-gates]
                            [--no-yosys] [--no-sim] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RTL = REPO / "rtl_stub" / "ethos_u85"
DEVICE = "ethos-u85"
YOSYS_MEM_GB = 8.0                 # default address-space limit of one Yosys run

LAYERS = {
    # name: (input shape NHWC, output channels, kernel, stride, padding)
    "conv3x3_16x16x32to64": ((1, 16, 16, 32), 64, 3, 1, "SAME"),
    "conv1x1_16x16x64to64": ((1, 16, 16, 64), 64, 1, 1, "VALID"),
}


def build_layers(out_dir: Path, config: str) -> list[Path]:
    """The layers as TFLite files compiled with Vela for *config*: the .npz paths."""
    from tests import nets
    paths = []
    for name, (shape, cout, k, s, pad) in LAYERS.items():
        g = nets.Graph(1234, description=f"bench_rtl {name}")
        x = g.input(shape)
        g.output(g.conv2d(x, cout, k, s, pad, per_channel=True))
        tfl = out_dir / f"{name}.tflite"
        tfl.write_bytes(g.serialize())
        npz, _ = nets.compile_vela(tfl, config, out_dir / config)
        paths.append(npz)
    return paths


def run_sim(sim: str, config: str, macs: int, nets_: list[Path], work: Path) -> list[dict]:
    from tb.core import simtools
    out = work / f"bench-{config}.json"
    build_dir = REPO / "sim_build" / f"{sim}-bench-{macs}"
    runner = simtools.get_runner(sim)
    runner.build(sources=simtools.dut_sources(DEVICE, "rtl"), hdl_toplevel="ethosu85", build_dir=build_dir,
                 timescale=simtools.TIMESCALE, build_args=simtools.prepare_build(sim, os.environ),
                 includes=[RTL], parameters={"MACS": macs})
    results = build_dir / "results.xml"
    results.unlink(missing_ok=True)
    env = {"TB_DUT": "rtl", "NPU_CONFIG": config, "BENCH_NETS": ",".join(map(str, nets_)),
           "BENCH_OUT": str(out)}
    try:
        runner.test(test_module="tools.bench_rtl_tb", hdl_toplevel="ethosu85", build_dir=build_dir,
                    test_dir=build_dir, seed=1, extra_env=env, results_xml=str(results),
                    timescale=simtools.TIMESCALE)
    except SystemExit:
        pass
    from cocotb_tools.check_results import get_results
    n, failed = get_results(results)
    if n == 0 or failed or not out.exists():
        raise RuntimeError(f"bench simulation failed for {config} (see {build_dir})")
    return json.loads(out.read_text())


# the passes after reading the design (module docstring), with {top} and the stat reports
# {coarse}, {gates}, {mems} filled in: the coarse netlist (``stat -width``: flip-flop bits are
# the widths of the $*dff* cells), with ``gates`` the generic gates, then the memories
# (memory_unpack: stat counts the bits of unpacked memories only). ``stat`` without -top: one
# report per module, totalled per configuration by hierarchy_totals
YOSYS_COARSE = """synth -noshare -top {top} -run begin:fine
tee -q -o {coarse} stat -width
select -assert-none t:$dlatch t:$adlatch t:$dlatchsr t:$sr
"""
YOSYS_GATES = """opt -fast -full
techmap
opt -fast
tee -q -o {gates} stat
"""
YOSYS_MEMS = """memory_unpack
tee -q -o {mems} stat
"""
WRAPPER = "size_all"


def wrapper(module: str, param: str, values: list) -> str:
    """Verilog of the top level ``size_all``: one module ``size_<v>`` per value *v*, each with
    one instance of *module* with *param* = v (kept, ports unconnected: no flattening, so
    nothing is optimised away across the boundary), so the modules that do not depend on *param*
    are synthesised once for every configuration."""
    mods = [f"module size_{v};\n    (* keep *) {module} #(.{param}({v})) u ();\nendmodule\n" for v in values]
    inst = "".join(f"    (* keep *) size_{v} u{v} ();\n" for v in values)
    return "".join(mods) + f"module {WRAPPER};\n{inst}endmodule\n"


def size_passes(tmp: Path, gates: bool) -> str:
    """The size passes for the top level ``size_all``, reports to *tmp*/{coarse,gates,mems}.txt."""
    text = YOSYS_COARSE + (YOSYS_GATES if gates else "") + YOSYS_MEMS
    return text.format(top=WRAPPER, **{n: tmp / f"{n}.txt" for n in ("coarse", "gates", "mems")})


def yosys_script(macs: list, tmp: Path, gates: bool) -> str:
    """The Yosys script of the size measurement at each of *macs* (reports to *tmp*)."""
    from tb.core import simtools
    files = " ".join(str(p) for p in simtools.dut_sources(DEVICE, "rtl"))
    (tmp / "size_all.v").write_text(wrapper("ethosu85", "MACS", macs))
    return f"read_verilog -sv -I{RTL} {files} {tmp / 'size_all.v'}\n" + size_passes(tmp, gates)


def yosys_stat(macs: list, timeout: float = 7200, mem_gb: float = YOSYS_MEM_GB, gates: bool = False) -> dict:
    """Size of the stand-in at each of *macs* (module docstring; *gates*: also the generic
    gates), {macs: figures}: one Yosys process for all, limited to *mem_gb* GB of address space
    and *timeout* seconds; its wall time and peak RSS (``seconds``, ``peak_rss_mb``)."""
    import resource
    exe = shutil.which("yosys")
    if exe is None:
        raise RuntimeError("yosys not found")
    limit = int(mem_gb * 2**30)

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.txt"
        (Path(tmp) / "size.ys").write_text(yosys_script(macs, Path(tmp), gates))
        t0 = time.time()
        with open(log, "w") as out:
            p = subprocess.Popen([exe, "-q", "-s", str(Path(tmp) / "size.ys")], stdout=out,
                                 stderr=subprocess.STDOUT, preexec_fn=cap)
            while True:
                pid, status, usage = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    break
                if time.time() - t0 > timeout:
                    p.kill()
                    pid, status, usage = os.wait4(p.pid, 0)
                    break
                time.sleep(0.5)
        p.returncode = rc = os.waitstatus_to_exitcode(status)
        seconds, peak_mb = time.time() - t0, usage.ru_maxrss / 1024
        if rc != 0:
            why = (f"timed out after {timeout:.0f} s" if seconds > timeout else
                   f"killed by signal {-rc}" if rc < 0 else f"exit {rc}")
            errs = [ln for ln in log.read_text(errors="replace").splitlines() if "ERROR" in ln]
            raise RuntimeError(f"yosys failed for MACS={macs} ({why}, peak RSS {peak_mb:.0f} MB, "
                               f"limit {mem_gb:g} GB) {errs[-1] if errs else ''}".rstrip())
        rep = size_report(Path(tmp), macs)
        return dict(sizes=rep, seconds=round(seconds), peak_rss_mb=round(peak_mb))


def size_report(tmp: Path, values: list) -> dict:
    """{v: figures} from the stat reports of size_passes in *tmp* for the modules ``size_<v>``:
    coarse cells, flip-flop bits, memories and memory bits; generic gate cells ($mem_v2 cells
    among them; None without the gates pass)."""
    coarse = hierarchy_totals((tmp / "coarse.txt").read_text())
    mems = hierarchy_totals((tmp / "mems.txt").read_text())
    gates = tmp / "gates.txt"
    gate = hierarchy_totals(gates.read_text()) if gates.is_file() else None
    out = {}
    for v in values:
        c, m = coarse[f"size_{v}"], mems[f"size_{v}"]
        flops = sum(w * n for t, n in c["types"].items()
                    for w in [int(x) for x in re.findall(r"^\$\w*dff\w*_(\d+)$", t)])
        out[v] = dict(cells=c["cells"], flops=flops, memories=m["memories"], memory_bits=m["memory bits"],
                      gates=None if gate is None else gate[f"size_{v}"]["cells"])
    return out


def hierarchy_totals(text: str) -> dict:
    """Per module of a ``stat`` report (one section per module), its totals with every
    submodule instance replaced by that module's totals: {module: {"cells", "memories",
    "memory bits", "types": {cell type: count}}}."""
    own = {}
    for name, body in re.findall(r"^=== (\S+) ===\n(.*?)(?=^=== |\Z)", text, re.M | re.S):
        nums = dict(re.findall(r"Number of (memories|memory bits):\s+(\d+)", body))
        types = {t: int(n) for t, n in re.findall(r"^ {5}(\S+)\s+(\d+)$", body, re.M)}
        own[name] = ({k: int(v) for k, v in nums.items()}, types)
    done: dict = {}

    def total(name):
        if name not in done:
            nums, types = own[name]
            t = {"cells": 0, "memories": nums.get("memories", 0), "memory bits": nums.get("memory bits", 0),
                 "types": {}}
            for typ, n in types.items():
                if typ in own:
                    sub = total(typ)
                    for k in ("cells", "memories", "memory bits"):
                        t[k] += n * sub[k]
                    for k, m in sub["types"].items():
                        t["types"][k] = t["types"].get(k, 0) + n * m
                else:
                    t["cells"] += n
                    t["types"][typ] = t["types"].get(typ, 0) + n
            done[name] = t
        return done[name]

    for name in own:
        total(name)
    return done


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default="ethos-u85-128,ethos-u85-256")
    ap.add_argument("--yosys-configs", default="",
                    help="configurations for Yosys, comma-separated or 'all' (default: --configs)")
    ap.add_argument("--yosys-mem-gb", type=float, default=YOSYS_MEM_GB,
                    help=f"address-space limit of each Yosys run in GB (default {YOSYS_MEM_GB:g})")
    ap.add_argument("--yosys-gates", action="store_true",
                    help="also map to Yosys's generic gates (techmap; over 7 GB at MACS 128 alone)")
    ap.add_argument("--yosys-timeout", type=float, default=7200,
                    help="wall-clock limit of each Yosys run in seconds (default 7200)")
    ap.add_argument("--sim", default="icarus", choices=("icarus", "verilator"))
    ap.add_argument("--no-sim", action="store_true")
    ap.add_argument("--no-yosys", action="store_true")
    ap.add_argument("--json", default=str(REPO / "sim_build" / "bench_rtl.json"))
    args = ap.parse_args(argv)
    from tlm.ethos_u85.config import CONFIGS, get_config
    configs = [c for c in args.configs.split(",") if c]
    report = {"mac": [], "yosys": []}
    if not args.no_sim:
        with tempfile.TemporaryDirectory(prefix="bench-rtl-") as tmp:
            work = Path(tmp)
            for cfg in configs:
                macs = get_config(cfg).macs
                paths = build_layers(work, cfg)
                for r in run_sim(args.sim, cfg, macs, paths, work):
                    mpc = r["macs"] / r["conv_cycles"]
                    row = dict(config=cfg, peak=macs, **r, macs_per_cycle=round(mpc, 1),
                               of_peak=round(100 * mpc / macs, 1))
                    report["mac"].append(row)
                    print(f"{cfg:15s} {r['net']:24s} {r['macs']:9d} MACs {r['conv_cycles']:7d} cycles "
                          f"{mpc:7.1f} MACs/cycle = {100 * mpc / macs:5.1f} % of {macs}", flush=True)
    if not args.no_yosys:
        ycfg = args.yosys_configs or args.configs
        for cfg in list(CONFIGS) if ycfg == "all" else [c for c in ycfg.split(",") if c]:
            macs = get_config(cfg).macs            # one Yosys process per configuration (memory)
            run = yosys_stat([macs], timeout=args.yosys_timeout, mem_gb=args.yosys_mem_gb, gates=args.yosys_gates)
            st = run["sizes"][macs]
            report["yosys"].append(dict(config=cfg, macs=macs, **st, seconds=run["seconds"],
                                        peak_rss_mb=run["peak_rss_mb"]))
            gates = "" if st["gates"] is None else f", {st['gates']} generic gate cells"
            print(f"{cfg:15s} yosys: {st['cells']} coarse cells{gates}, {st['flops']} flip-flop bits, "
                  f"{st['memories']} memories ({st['memory_bits']} bits); {st['flops'] / macs:.1f} "
                  f"flip-flop bits and {st['memory_bits'] / macs:.0f} memory bits per MAC "
                  f"({run['seconds']} s, peak RSS {run['peak_rss_mb']} MB)", flush=True)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=1))
    print(f"bench_rtl: {args.json}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:                # a failed simulation or Yosys run: one line
        print(f"bench_rtl: {e}", file=sys.stderr)
        sys.exit(1)
