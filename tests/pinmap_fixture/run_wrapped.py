"""Run bench tests against ``npu_wrap`` (the RTL stand-in behind other port names) with the
pin map ``npu_wrap_pinmap.json``: the proof that another netlist needs only a map.

    python tests/pinmap_fixture/run_wrapped.py --sim icarus [--tests REGEX] [--no-map]

Builds ``npu_wrap.v`` (generated, see wrapper.py) and the stand-in sources (``tb.run``'s
list) into ``sim_build/<sim>-pinmap/`` and runs ``tb.tests.test_registers`` (default: the
reset values, Q-Channels and the IRQ job, which fetches its stream over AXI) with
``TB_PINMAP`` set. ``--no-map`` runs without the map (the bench must then fail to bind).
Prints one ``pinmap-run:`` summary line; exit 0 when tests ran and none failed.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DEFAULT_TESTS = "test_reset_values|test_qchannel_accept_deny|test_irq_pin_stop_and_clear"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", choices=("icarus", "verilator"), default="icarus")
    ap.add_argument("--tests", default=DEFAULT_TESTS)
    ap.add_argument("--no-map", action="store_true")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(HERE))
    os.environ.pop("PYTEST_CURRENT_TEST", None)
    from tb import simtools
    from wrapper import MAP, write_wrapper
    build_args = simtools.prepare_build(a.sim, os.environ)
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    build_dir = REPO / "sim_build" / f"{a.sim}-pinmap"
    build_dir.mkdir(parents=True, exist_ok=True)
    wrapper = write_wrapper(build_dir / "npu_wrap.v")
    sources = simtools.dut_sources("rtl") + [wrapper]
    runner = get_runner(a.sim)
    runner.build(sources=sources, hdl_toplevel="npu_wrap", build_dir=build_dir,
                 timescale=simtools.TIMESCALE, build_args=build_args, includes=[simtools.RTL])
    results = build_dir / "results.xml"
    results.unlink(missing_ok=True)
    extra = {"TB_DUT": "rtl", "NPU_CONFIG": "ethos-u85-256", "TB_PINMAP": "" if a.no_map else str(MAP)}
    try:
        runner.test(test_module="tb.tests.test_registers", hdl_toplevel="npu_wrap",
                    build_dir=build_dir, test_dir=build_dir, test_filter=a.tests, seed=1,
                    extra_env=extra, results_xml=str(results), timescale=simtools.TIMESCALE)
    except SystemExit:
        pass
    try:
        n, failed = get_results(results)
    except RuntimeError:
        n, failed = 0, 0
    print(f"pinmap-run: {n} tests, {failed} failed (sim {a.sim}, map "
          f"{'none' if a.no_map else MAP.name})", flush=True)
    return 0 if n and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
