"""Build and run one DTPU cocotb module (tb/dtpu) with tb.core.simtools.run_fixture.

`make sim DEVICE=dtpu` (tb/core/run.py) runs the registered test modules; the pytest bench
(tests/dtpu/test_dtpu_bench.py) and tools/bench_dtpu.py use `run(sim, dut, config, module,
...)` to run one module with its own environment. A configuration is chosen by the macros of
tb/dtpu/build.py (`defines(config)`, the registry entry's BenchInfo.defines): module dtpu's
parameters default to those DTPU_* macros. `bug=True` also defines DTPU_PLANTED_BUG.

    python -m tools.dtpu_bench_runner --sim icarus --dut rtl --module tb.dtpu.test_dtpu_streams
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tb.core import simtools

REPO = Path(__file__).resolve().parents[1]
DEVICE = "dtpu"


def build_name(dut: str, config: str, bug: bool = False) -> str:
    return f"dtpu-{config}-{dut}{'-bug' if bug else ''}"


def run(sim: str, dut: str, config: str, module: str, bug: bool = False,
        test_filter: "str | None" = None, env: "dict | None" = None) -> tuple[int, int]:
    """Build (incrementally) and run one cocotb module; returns (tests run, failed)."""
    from tb.dtpu.build import defines

    extra = {"NPU_CONFIG": config, "TB_DEVICE": DEVICE, "TB_DUT": dut, **(env or {})}
    return simtools.run_fixture(sim, build_name(dut, config, bug), simtools.dut_sources(DEVICE, dut),
                                simtools.dut_toplevel(DEVICE, dut), module, extra,
                                test_filter=test_filter, includes=simtools.dut_includes(DEVICE, dut),
                                defines=defines(config, bug))


def main(argv=None) -> int:
    from tlm.dtpu import contract as C
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", choices=("verilator", "icarus"), default="verilator")
    ap.add_argument("--dut", choices=("rtl", "tlm"), default="rtl")
    ap.add_argument("--config", choices=tuple(C.CONFIGS), default=C.DEFAULT_CONFIG)
    ap.add_argument("--module", default="tb.dtpu.test_dtpu_streams")
    ap.add_argument("--tests", default=None, help="test name filter (regex)")
    ap.add_argument("--bug", action="store_true", help="define DTPU_PLANTED_BUG")
    a = ap.parse_args(argv)
    env = dict(os.environ)
    for k in ("TRACE", "DTPU_CASES", "DTPU_BENCH_OUT", "DTPU_TRACE_RESULT", "DTPU_COVERAGE_FILE"):
        if env.get(k):
            env[k] = os.environ[k] = str(Path(env[k]).resolve())   # the simulation runs in its build folder
    try:
        n, failed = run(a.sim, a.dut, a.config, a.module, a.bug, a.tests, env)
    except simtools.SetupError as e:
        print(f"dtpu-bench: {e}", file=sys.stderr)
        return 2
    print(f"dtpu-bench: {n} tests, {failed} failed ({a.sim}, DUT={a.dut}, {a.config}, {a.module})")
    return 0 if n and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
