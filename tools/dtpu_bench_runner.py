"""Build and run the DTPU cocotb modules (tb/dtpu) with tb.simtools.run_fixture.

Until the shared runner (`make sim DEVICE=dtpu`) lands, tests/dtpu/test_dtpu_bench.py and
tools/bench_dtpu.py use `run(sim, dut, config, module, ...)`. A configuration is chosen by
compiling `config_defines(cfg)` (tools/gen_dtpu_rtl.py) before the sources: module dtpu's
parameters default to those DTPU_* macros. `bug=True` also defines DTPU_PLANTED_BUG.

    python tools/dtpu_bench_runner.py --sim icarus --dut rtl --module tb.dtpu.test_dtpu_streams
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RTL = REPO / "rtl_stub" / "dtpu"


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def sources(dut: str) -> list[Path]:
    if dut == "tlm":
        return [RTL / "dtpu_shell.v"]
    return [RTL / line.strip() for line in (RTL / "sources.f").read_text().splitlines() if line.strip()]


def build_name(dut: str, config: str, bug: bool = False) -> str:
    return f"dtpu-{config}-{dut}{'-bug' if bug else ''}"


def run(sim: str, dut: str, config: str, module: str, bug: bool = False,
        test_filter: "str | None" = None, env: "dict | None" = None) -> tuple[int, int]:
    """Build (incrementally) and run one cocotb module; returns (tests run, failed)."""
    from tb import simtools
    from tlm.dtpu import contract as C

    gen = _tool("gen_dtpu_rtl")
    name = build_name(dut, config, bug)
    build = REPO / "sim_build" / f"{sim}-{name}"
    build.mkdir(parents=True, exist_ok=True)
    defines = build / "dtpu_defines.v"
    text = gen.config_defines(C.CONFIGS[config], ("DTPU_PLANTED_BUG",) if bug else ())
    if not defines.is_file() or defines.read_text() != text:
        defines.write_text(text)
    extra = {"DTPU_CONFIG": config, "TB_DUT": dut, **(env or {})}
    return simtools.run_fixture(sim, name, [defines, *sources(dut)], "dtpu", module, extra,
                                test_filter=test_filter, includes=[RTL])


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
    from tb import simtools
    try:
        n, failed = run(a.sim, a.dut, a.config, a.module, a.bug, a.tests, env)
    except simtools.SetupError as e:
        print(f"dtpu-bench: {e}", file=sys.stderr)
        return 2
    print(f"dtpu-bench: {n} tests, {failed} failed ({a.sim}, DUT={a.dut}, {a.config}, {a.module})")
    return 0 if n and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
