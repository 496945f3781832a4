"""Run bench tests against ``npu_wrap`` (the RTL stand-in behind other port names) with the
pin map ``npu_wrap_pinmap.json``: the proof that another netlist needs only a map.

    python -m tests.ethos_u85.pinmap_fixture.run_wrapped --sim icarus [--tests REGEX] [--no-map]

Builds ``npu_wrap.v`` (generated, see wrapper.py) and the stand-in sources (``tb.core.run``'s
list) into ``sim_build/<sim>-pinmap/`` and runs ``tb.ethos_u85.tests.test_registers`` (default: the
reset values, Q-Channels and the IRQ job, which fetches its stream over AXI) with
``TB_PINMAP`` set. ``--no-map`` runs without the map (the bench must then fail to bind).
Prints one ``pinmap-run:`` summary line; exit 0 when tests ran and none failed.
"""
from __future__ import annotations

import argparse
import sys

DEFAULT_TESTS = "test_reset_values|test_qchannel_accept_deny|test_irq_pin_stop_and_clear"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", choices=("icarus", "verilator"), default="icarus")
    ap.add_argument("--tests", default=DEFAULT_TESTS)
    ap.add_argument("--no-map", action="store_true")
    a = ap.parse_args(argv)
    from tb.core import simtools
    from tests.ethos_u85.pinmap_fixture.wrapper import MAP, write_wrapper
    extra = {"TB_DUT": "rtl", "NPU_CONFIG": "ethos-u85-256", "TB_PINMAP": "" if a.no_map else str(MAP)}
    n, failed = simtools.run_fixture(a.sim, "pinmap", simtools.dut_sources("ethos-u85", "rtl"), "npu_wrap",
                                     "tb.ethos_u85.tests.test_registers", extra,
                                     write_top=lambda d: write_wrapper(d / "npu_wrap.v"),
                                     test_filter=a.tests, includes=simtools.dut_includes("ethos-u85", "rtl"))
    print(f"pinmap-run: {n} tests, {failed} failed (sim {a.sim}, map "
          f"{'none' if a.no_map else MAP.name})", flush=True)
    return 0 if n and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
