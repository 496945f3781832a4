"""Throughput and size of the RTL stand-in (``python -m tools.bench_rtl``).

MACs per cycle: a 3x3 CONV layer and a 1x1 CONV layer (int8, built with the project's TFLite
builder, compiled with Vela for each configuration) run through the stand-in's pins on
DUT=rtl with the scoreboard on (tools/bench_rtl_tb.py); the cycles the CONV unit is busy
(weight and scale/bias reads, IFM reads, MACs, output writes: the whole operation) against
the layer's MACs (every kernel tap of every output element) give MACs per cycle, reported
against the configuration's peak (MACS a cycle).

Size: Yosys per configuration, hierarchical (no -flatten: each module is synthesised once per
parameter set and ``stat -top ethosu85`` multiplies its counts by its instances): ``synth
-noshare -run begin:fine`` (the coarse netlist: proc, opt, wreduce, alumacc, ``memory -nomap``,
so memories stay ``$mem`` cells and are counted in bits, not expanded into flip-flops), then
``techmap`` to Yosys's generic gates (no ABC). Reported: coarse cells, generic gate cells,
flip-flop bits (one ``$_*DFF*_`` cell a bit) and the memories and their bits (accumulator
buffer, IFM buffer, scale/bias RAM, chaining FIFOs, LUT RAM, queues). No latch may appear (the
synthesis fails otherwise). ``-noshare``: the SAT-based ``share`` pass does not finish on the
SWD decoder's twelve variable shifts (npu_swd.v, its activation patterns double per candidate;
it ran out of memory, with or without -flatten). Each run is limited to ``--yosys-mem-gb`` of
address space; its time and peak RSS are reported.

  python -m tools.bench_rtl [--configs ethos-u85-128,ethos-u85-256] [--sim icarus]
                            [--yosys-configs all|NAME,...] [--yosys-mem-gb 8]
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
    from cocotb_tools.runner import get_runner

    from tb.core import simtools
    out = work / f"bench-{config}.json"
    build_dir = REPO / "sim_build" / f"{sim}-bench-{macs}"
    runner = get_runner(sim)
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


# the passes after reading the design (module docstring); {top} and the stat reports {coarse},
# {fine} and {mems} filled in. memory_unpack only for the last report: stat counts memory bits
# of unpacked memories only (the $mem_v2 cells of the netlist are counted in {fine})
YOSYS_SIZE = """synth -noshare -top {top} -run begin:fine
tee -q -o {coarse} stat -top {top}
opt -fast -full
techmap
opt -fast
tee -q -o {fine} stat -top {top}
select -assert-none t:$dlatch t:$adlatch t:$dlatchsr t:$sr t:$_DLATCH_* t:$_DLATCHSR_* t:$_SR_*
memory_unpack
tee -q -o {mems} stat -top {top}
"""


def yosys_script(macs: int, coarse: Path, fine: Path, mems: Path) -> str:
    """The Yosys script of the size measurement at *macs* (stat reports to *coarse*, *fine*, *mems*)."""
    from tb.core import simtools
    files = " ".join(str(p) for p in simtools.dut_sources(DEVICE, "rtl"))
    return (f"read_verilog -sv -I{RTL} {files}\nchparam -set MACS {macs} ethosu85\n"
            + YOSYS_SIZE.format(top="ethosu85", coarse=coarse, fine=fine, mems=mems))


def yosys_stat(macs: int, timeout: float = 7200, mem_gb: float = 8.0) -> dict:
    """Size of the stand-in at *macs* (module docstring): one Yosys process limited to
    *mem_gb* GB of address space and *timeout* seconds; its wall time and peak RSS."""
    import resource
    exe = shutil.which("yosys")
    if exe is None:
        raise RuntimeError("yosys not found")
    limit = int(mem_gb * 2**30)

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    with tempfile.TemporaryDirectory() as tmp:
        coarse, fine, mems, log = (Path(tmp) / f"{n}.txt" for n in ("coarse", "fine", "mems", "log"))
        (Path(tmp) / "size.ys").write_text(yosys_script(macs, coarse, fine, mems))
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
        st = size_report(coarse.read_text(), fine.read_text(), mems.read_text(), seconds)
        st["peak_rss_mb"] = round(peak_mb)
        return st


def size_report(coarse: str, fine: str, mems: str, seconds: float = 0.0) -> dict:
    """The size figures from the three ``stat -top`` reports of YOSYS_SIZE: coarse cells,
    generic gate cells (the $mem_v2 cells among them), flip-flop bits, memories, memory bits."""
    st = parse_stat(fine, seconds)
    m = parse_stat(mems)
    st.update(coarse_cells=parse_stat(coarse)["cells"], memories=m["memories"], memory_bits=m["memory_bits"])
    return st


def parse_stat(text: str, seconds: float = 0.0) -> dict:
    """Totals of a ``stat -top`` report (its design hierarchy section; the module's own
    section for a design of one module): cells, flip-flop bits (generic ``$_*DFF*_`` cells,
    one bit each), memories and memory bits (of unpacked memories only)."""
    body = text.split("=== design hierarchy ===")[-1]

    def total(key: str) -> int:
        found = re.findall(rf"Number of {key}:\s+(\d+)", body)
        return int(found[-1]) if found else 0

    flops = sum(int(n) for n in re.findall(r"\$_(?:S|AL)?DFF\w*\s+(\d+)", body))
    return dict(cells=total("cells"), flops=flops, memories=total("memories"),
                memory_bits=total("memory bits"), seconds=round(seconds))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default="ethos-u85-128,ethos-u85-256")
    ap.add_argument("--yosys-configs", default="",
                    help="configurations for Yosys, comma-separated or 'all' (default: --configs)")
    ap.add_argument("--yosys-mem-gb", type=float, default=8.0,
                    help="address-space limit of each Yosys run in GB (default 8)")
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
            macs = get_config(cfg).macs
            st = yosys_stat(macs, timeout=args.yosys_timeout, mem_gb=args.yosys_mem_gb)
            report["yosys"].append(dict(config=cfg, macs=macs, **st))
            print(f"{cfg:15s} yosys: {st['coarse_cells']} coarse cells, {st['cells']} generic gate cells, "
                  f"{st['flops']} flip-flop bits, {st['memories']} memories ({st['memory_bits']} bits); "
                  f"{st['cells'] / macs:.0f} gates and {st['flops'] / macs:.1f} flip-flop bits per MAC "
                  f"({st['seconds']} s, peak RSS {st['peak_rss_mb']} MB)", flush=True)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=1))
    print(f"bench_rtl: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
