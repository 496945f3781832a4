"""The RTL stand-in behind a wrapper with other port names (tests/ethos_u85/pinmap_fixture) runs
register tests and an IRQ job unchanged, given only the pin map (tb/core/pinmap.py); without
the map the bench refuses to bind, naming the pin (Icarus)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support import REPO, tool_missing


@pytest.mark.sim
def test_wrapped_standin_registers():
    """The stand-in behind other port names (and IRQ read through a hierarchical path):
    register tests and an IRQ job pass with the map; without it the bench names the missing
    pin."""
    from tb.core import simtools
    reason = simtools.sim_problem("icarus")
    if reason:
        tool_missing(reason)
    script = ("-m", "tests.ethos_u85.pinmap_fixture.run_wrapped")
    p = subprocess.run([sys.executable, *script, "--sim", "icarus"], cwd=REPO,
                       capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    summary = [ln for ln in out.splitlines() if ln.startswith("pinmap-run:")]
    assert p.returncode == 0, (summary or out[-3000:])
    assert "3 tests, 0 failed" in summary[-1]
    p = subprocess.run([sys.executable, *script, "--sim", "icarus", "--no-map",
                        "--tests", "test_reset_values"], cwd=REPO, capture_output=True,
                       text=True, timeout=600)
    out = p.stdout + p.stderr
    assert p.returncode != 0 and "npu_wrap: no signal CLK at 'CLK'" in out, out[-2000:]
