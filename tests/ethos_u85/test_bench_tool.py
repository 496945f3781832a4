"""tools/bench.py's command line and its bench-throughput section; the bare AXI loopback
(tb/loopback) with the bench's AXI memory model on it.

* ``--help`` lists the sim-section options.
* ``test_loopback_icarus``: ``python -m tb.agents.loopback.run --sim icarus`` with a tiny beat count:
  the cocotbext-axi loopback moves and checks its data and writes its JSON, and the AXI
  subordinate tests on the same design pass (reads of different ARIDs reordered, same-ID
  order kept, fixed latency honoured).
* ``test_bench_sim_only_icarus``: ``tools/bench.py --sim-only --sims icarus`` on the small
  pooling network prints the throughput table with both figures and their ratio.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import tool_missing

REPO = Path(__file__).resolve().parents[2]
HAVE_ICARUS = bool(shutil.which("iverilog") and shutil.which("vvp"))


def _run(args, timeout=600):
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def test_help_lists_sim_options():
    p = _run(["-m", "tools.bench", "--help"], timeout=120)
    assert p.returncode == 0, p.stderr
    for opt in ("--no-sim", "--sim-only", "--sims", "--sim-net", "--sim-dut"):
        assert opt in p.stdout, opt


def test_sim_flags_are_exclusive():
    p = _run(["-m", "tools.bench", "--no-sim", "--sim-only"], timeout=120)
    assert p.returncode == 2 and "not allowed with" in p.stderr


@pytest.mark.sim
def test_loopback_icarus(tmp_path):
    if not HAVE_ICARUS:
        tool_missing("Icarus Verilog not installed (apt-get install -y iverilog)")
    out = tmp_path / "lb.json"
    p = _run(["-m", "tb.agents.loopback.run", "--sim", "icarus", "--beats", "64", "--out", str(out)])
    summary = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.startswith("tb.agents.loopback:")]
    assert p.returncode == 0, summary or (p.stdout + p.stderr)[-3000:]
    assert "3 tests, 0 failed" in summary[-1]
    r = json.loads(out.read_text())
    assert r["beats"] == 64 and r["wall_s"] > 0 and r["beats_per_s"] > 0
    assert r["cycles"] >= 64                       # one beat per cycle at best


@pytest.mark.sim
def test_bench_sim_only_icarus():
    if not HAVE_ICARUS:
        tool_missing("Icarus Verilog not installed (apt-get install -y iverilog)")
    p = _run(["-m", "tools.bench", "--sim-only", "--sims", "icarus", "--sim-net",
              "maxpool_2x2_s2_valid"], timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    row = [ln for ln in p.stdout.splitlines() if ln.strip().startswith("icarus ")]
    assert row, p.stdout
    cells = row[-1].split()
    assert re.fullmatch(r"[\d.]+x", cells[-1]), row[-1]          # bench/loopback ratio
    assert int(cells[1]) > 0 and int(cells[5]) > 0, row[-1]      # beats moved by both
