#!/usr/bin/env python3
"""DTPU benchmark: the RTL's MACs per cycle on depthwise layers against its ROWS x COLUMNS
peak, and the bench's stream beats per second.

    python -m tools.bench_dtpu [--layers micro_speech person_detect:1,3] [--sim verilator]
                                         [--config dtpu-8x8-int8] [--json out.json]

Each layer is planned by the host library (tlm/dtpu/host.py) and executed on the RTL
stand-in through the cocotb bench (tb/dtpu/test_dtpu_host.py::test_layers_streams: packets
streamed straight into the adapter, the sink always ready, the TLM as scoreboard). Cycles
count from the first register write to the last output word, so they include every run's
CSR fetch, weight load, pipeline fill and drain and the host's commands.

Reported per layer: layer MACs (N*OH*OW*C*M*KH*KW), cycles, MACs/cycle and % of the
ROWS*COLUMNS peak (the useful work: a MAC of a padding tap or of an idle PE does not
count), array MACs/cycle (every PE's multiply), the planner's cycle estimate, and stream
beats per second of wall-clock time (all four streams; the machine's load changes it:
compare runs side by side). The target is 50 % of peak on micro_speech's layer.

Layers: `micro_speech` (its DEPTHWISE_CONV_2D, 10x8 kernel, stride 2, depth multiplier 8),
`person_detect[:i,j,...]` (its 14 depthwise layers, or those indices), read from
../shared/models; inputs are seeded random int8.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from tlm.dtpu import contract as C
from tlm.dtpu import host
from tlm.dtpu.layers import from_tflite, save_cases
from tools.shared import shared_dir

REPO = Path(__file__).resolve().parents[1]
FILES = {"micro_speech": "tflm_micro_speech.tflite", "person_detect": "tflm_person_detect.tflite"}


def _models() -> Path:
    d = shared_dir("models")
    if d is not None and d.is_dir():
        return d
    raise SystemExit("bench_dtpu: ../shared/models not found (set NPU_SHARED_MODELS)")


def _layers(specs: list[str]):
    out = []
    for spec in specs:
        name, _, idx = spec.partition(":")
        if name not in FILES:
            raise SystemExit(f"bench_dtpu: unknown layer set {name!r} (one of {', '.join(FILES)})")
        layers = from_tflite(_models() / FILES[name])
        pick = [int(i) for i in idx.split(",")] if idx else range(len(layers))
        for i in pick:
            L = layers[i]
            L.name = f"{name}[{i}] {L.name}"
            out.append(L)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", nargs="+", default=["micro_speech"])
    ap.add_argument("--sim", choices=("verilator", "icarus"), default="verilator")
    ap.add_argument("--config", choices=tuple(C.CONFIGS), default=C.DEFAULT_CONFIG)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", type=Path, help="write the report here")
    a = ap.parse_args(argv)
    from tools import dtpu_bench_runner as runner
    rng = np.random.default_rng(a.seed)
    cases = []
    for L in _layers(a.layers):
        x = rng.integers(-128, 128, L.input_shape).astype(np.int8)
        cases.append((L, x, host.run_layer(L, x, a.config)))        # the TLM's bytes: the RTL must match
    with tempfile.TemporaryDirectory() as tmp:
        cpath = save_cases(Path(tmp) / "cases.npz", cases)
        out = Path(tmp) / "report.json"
        n, failed = runner.run(a.sim, "rtl", a.config, "tb.dtpu.test_dtpu_host", test_filter="test_layers_streams",
                               env={"DTPU_CASES": str(cpath), "DTPU_BENCH_OUT": str(out)})
        if not n or failed or not out.is_file():
            print(f"bench_dtpu: the bench run failed ({n} tests, {failed} failed)", file=sys.stderr)
            return 1
        report = json.loads(out.read_text())
    peak = report[0]["peak"]
    print(f"DTPU {a.config} ({peak} MACs/cycle peak), {a.sim}, DUT=rtl")
    print(f"{'layer':58s} {'MACs':>9s} {'cycles':>8s} {'MACs/cyc':>8s} {'%peak':>6s} "
          f"{'array%':>6s} {'est.cyc':>8s} {'beats/s':>8s}")
    for r in report:
        print(f"{r['layer'][:58]:58s} {r['macs']:9d} {r['cycles']:8d} {r['macs'] / r['cycles']:8.2f} "
              f"{100 * r['macs'] / r['cycles'] / peak:6.1f} {100 * r['array_macs'] / r['cycles'] / peak:6.1f} "
              f"{r['estimated_cycles']:8d} {r['beats'] / r['wall_s']:8.0f}")
    tm, tc = sum(r["macs"] for r in report), sum(r["cycles"] for r in report)
    tb, tw = sum(r["beats"] for r in report), sum(r["wall_s"] for r in report)
    print(f"{'total':58s} {tm:9d} {tc:8d} {tm / tc:8.2f} {100 * tm / tc / peak:6.1f} {'':6s} {'':8s} {tb / tw:8.0f}")
    if a.json:
        a.json.write_text(json.dumps({"config": a.config, "sim": a.sim, "layers": report}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
