"""The bench beyond SRAM0/EXT0: tests/ethos_u85/multiport_fixture runs tb/ethos_u85/tests/multiport.py on a DUT=tlm
shell with the AXI ports SRAM0, SRAM1, EXT0 and EXT1 (ethos-u85-1024, hash striping): binding
by TRM name, subordinates, passive monitors, scoreboard port attribution and per-port PMU
events on all four ports. The generated shell passes ``verilator --lint-only -Wall``."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import tool_missing

REPO = Path(__file__).resolve().parents[2]


def test_multiport_shell_lints(tmp_path):
    from tb.core import simtools
    from tests.ethos_u85.multiport_fixture.run_multiport import PORTS, write_shell
    env = dict(os.environ)
    try:
        exe = simtools.verilator_exe(env)
    except simtools.SetupError as e:
        tool_missing(str(e))
    shell = write_shell(tmp_path / "ethosu85.v")
    text = shell.read_text()
    for port in PORTS:
        assert f"ARVALID{port}" in text and f"tlm_RREADY{port}" in text
    assert "CFGEXTHASH0" in text and "CFGSRAMHASH1" not in text      # 2 EXT, 2 SRAM ports
    p = subprocess.run([exe, "--lint-only", "-Wall", str(shell)], capture_output=True, text=True,
                       env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr


@pytest.mark.sim
def test_multiport_job():
    from tb.core import simtools
    reason = simtools.sim_problem("icarus")
    if reason:
        tool_missing(reason)
    p = subprocess.run([sys.executable, "-m", "tests.ethos_u85.multiport_fixture.run_multiport", "--sim", "icarus"],
                       cwd=REPO, capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    summary = [ln for ln in out.splitlines() if ln.startswith("multiport-run:")]
    assert p.returncode == 0 and summary and "1 tests, 0 failed" in summary[-1], \
        (summary or out[-3000:])
