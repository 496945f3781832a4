"""The K210 bench (tb/k210_kpu) with DUT=tlm on Verilator and Icarus, through
tb.simtools.run_fixture until `make sim DEVICE=k210-kpu` runs a registered device's
modules; and the shell's RTL checks (lint, Icarus, Yosys without latches)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import tool_missing
from tlm.core import registry

REPO = Path(__file__).resolve().parents[2]
INFO = registry.get("k210-kpu").bench
SHELL = REPO / INFO.tlm_sources[0]
EXPECTED_TESTS = 6          # cocotb tests in tb/k210_kpu/test_k210_cocotb.py


@pytest.mark.sim
@pytest.mark.parametrize("sim", ["verilator", "icarus"])
def test_bench_dut_tlm(sim):
    from tb.core import simtools
    why = simtools.sim_problem(sim)
    if why:
        tool_missing(why)
    n, failed = simtools.run_fixture(sim, "k210-kpu-tlm", [str(SHELL)], INFO.tlm_toplevel,
                                     INFO.test_modules[0], {**INFO.extra["env"]})
    assert n == EXPECTED_TESTS and failed == 0, f"{sim}: {n} tests run, {failed} failed"


def test_shell_verilator_lint():
    from tb.core import simtools
    env = dict(os.environ)
    try:
        exe = simtools.verilator_exe(env)
    except simtools.SetupError as e:
        tool_missing(str(e))
    p = subprocess.run([exe, "--lint-only", "-Wall", str(SHELL)], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr


def test_shell_icarus_and_yosys(tmp_path):
    if not shutil.which("iverilog"):
        tool_missing("iverilog not installed")
    p = subprocess.run(["iverilog", "-g2012", "-o", str(tmp_path / "a.vvp"), str(SHELL)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    if not shutil.which("yosys"):
        tool_missing("yosys not installed")
    p = subprocess.run(["yosys", "-q", "-p", f"read_verilog {SHELL}; synth -top {INFO.tlm_toplevel}; "
                        "select -assert-none t:$dlatch t:$_DLATCH_*"], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout + p.stderr


def test_port_table_drives_the_shell():
    from tb.k210_kpu.ports import PORTS, shell_verilog
    text = SHELL.read_text()
    assert text == shell_verilog()
    for p in PORTS:
        assert f" {p.name}" in text
    groups = {p.group for p in PORTS}
    assert groups == {"clock", "s_axi", "m_axi", "dma_out", "irq"}
    assert all(p.width == 64 for p in PORTS if p.name.endswith(("wdata", "rdata", "tdata")))
