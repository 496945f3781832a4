"""Throughput and size of the RTL stand-in (``python -m tools.bench_rtl``).

MACs per cycle: a 3x3 CONV layer and a 1x1 CONV layer (int8, built with the project's TFLite
builder, compiled with Vela for each configuration) run through the stand-in's pins on
DUT=rtl with the scoreboard on (tools/bench_rtl_tb.py); the cycles the CONV unit is busy
(weight and scale/bias reads, IFM reads, MACs, output writes: the whole operation) against
the layer's MACs (every kernel tap of every output element) give MACs per cycle, reported
against the configuration's peak (MACS a cycle).

Size: Yosys (synth -flatten up to the fine-grained step, without mapping the memories to
flip-flops, then techmap to Yosys's generic gates; no ABC, which takes far longer on the MAC
array than the rest) per configuration: cells (generic gates), flip-flops, and the bits of
the memories kept as $mem cells (AB, IFM buffer, scale/bias RAM, chaining FIFOs, LUT RAM,
queues). No latch may appear (the synthesis fails otherwise).

  python -m tools.bench_rtl [--configs ethos-u85-128,ethos-u85-256] [--sim icarus]
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


def yosys_stat(macs: int, timeout: float = 7200) -> dict:
    from tb.core import simtools
    exe = shutil.which("yosys")
    if exe is None:
        raise RuntimeError("yosys not found")
    with tempfile.TemporaryDirectory() as tmp:
        stat = Path(tmp) / "stat.txt"
        files = " ".join(str(p) for p in simtools.dut_sources(DEVICE, "rtl"))
        script = (f"read_verilog -sv -I{RTL} {files}; chparam -set MACS {macs} ethosu85; "
                  f"synth -flatten -top ethosu85 -run begin:fine; opt -fast -full; techmap; opt -fast; "
                  f"tee -o {stat} stat; "
                  f"select -assert-none t:$dlatch t:$adlatch t:$_DLATCH_* t:$sr t:$_SR_*")
        t0 = time.time()
        r = subprocess.run([exe, "-q", "-p", script], capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            # a signal is typically the OOM killer: the flattened techmap took > 12 GB at MACS 128
            why = f"killed by signal {-r.returncode}" if r.returncode < 0 else f"exit {r.returncode}"
            errs = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.startswith("ERROR")]
            raise RuntimeError(f"yosys failed for MACS={macs} ({why}) {errs[-1] if errs else ''}")
        return parse_stat(stat.read_text(), time.time() - t0)


def parse_stat(text: str, seconds: float = 0.0) -> dict:
    body = text.split("=== design hierarchy ===")[-1]
    cells = int(re.findall(r"Number of cells:\s+(\d+)", body)[-1])
    flops = sum(int(n) for n in re.findall(r"\$_S?DFFE?_\w+\s+(\d+)", body))
    mem_bits = sum(int(n) for n in re.findall(r"Number of memory bits:\s+(\d+)", body)[-1:])
    mems = sum(int(n) for n in re.findall(r"Number of memories:\s+(\d+)", body)[-1:])
    return dict(cells=cells, flops=flops, memories=mems, memory_bits=mem_bits, seconds=round(seconds))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configs", default="ethos-u85-128,ethos-u85-256")
    ap.add_argument("--yosys-configs", default="", help="configurations for Yosys (default: --configs)")
    ap.add_argument("--sim", default="icarus", choices=("icarus", "verilator"))
    ap.add_argument("--no-sim", action="store_true")
    ap.add_argument("--no-yosys", action="store_true")
    ap.add_argument("--json", default=str(REPO / "sim_build" / "bench_rtl.json"))
    args = ap.parse_args(argv)
    from tlm.ethos_u85.config import get_config
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
        for cfg in [c for c in (args.yosys_configs or args.configs).split(",") if c]:
            macs = get_config(cfg).macs
            st = yosys_stat(macs)
            report["yosys"].append(dict(config=cfg, macs=macs, **st))
            print(f"{cfg:15s} yosys: {st['cells']} cells, {st['flops']} flip-flops, {st['memories']} memories "
                  f"({st['memory_bits']} bits), {st['cells'] / macs:.0f} cells and {st['flops'] / macs:.1f} "
                  f"flip-flops per MAC ({st['seconds']} s)", flush=True)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=1))
    print(f"bench_rtl: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
