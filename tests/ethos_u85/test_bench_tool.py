"""tools/bench.py's command line and its bench-throughput section; the bare AXI loopback
(tb/loopback) with the bench's AXI memory model on it.

* ``--help`` lists the sim-section options.
* ``test_loopback_icarus``: ``python -m tb.agents.loopback.run --sim icarus`` with a tiny beat count:
  the cocotbext-axi loopback moves and checks its data and writes its JSON, and the AXI
  subordinate tests on the same design pass for both subordinates, the lean one and the
  cocotbext-axi one (reads of different ARIDs reordered, same-ID order kept, fixed latency
  honoured).
* ``test_bench_sim_only_icarus``: ``tools/bench.py --sim-only --no-rtl --sims icarus --sim-dut rtl``
  on a small pooling network prints the throughput table with both figures and their ratios,
  the bare bench's row (same beats) and the full bench's ratio to it, and the per-component
  share table of the profiled run (the shares add up to 100 %).
* ``test_bench_networks_and_model_table``: the network sections on a small catalog network
  and a models folder holding one published model: both engine tables with us/NPU op and
  M MAC/s for BUILTIN_REF and the TLM, bit-exact, and the per-model table row (TLM ms, REF
  ms, ratio); an unreadable model gets a row with the reason, not a traceback.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import require, tool_missing

REPO = Path(__file__).resolve().parents[2]
HAVE_ICARUS = bool(shutil.which("iverilog") and shutil.which("vvp"))


def _run(args, timeout=600):
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def test_help_lists_sim_options():
    p = _run(["-m", "tools.bench", "--help"], timeout=120)
    assert p.returncode == 0, p.stderr
    for opt in ("--no-sim", "--sim-only", "--sims", "--sim-net", "--sim-dut", "--no-rtl", "--rtl-configs",
                "--rtl-yosys", "--no-sim-profile", "--sim-baseline", "--sim-axi", "--no-sim-bare"):
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
    assert "5 tests, 0 failed" in summary[-1]     # throughput; reorder, latency x (lean, cocotbext)
    r = json.loads(out.read_text())
    assert r["beats"] == 64 and r["wall_s"] > 0 and r["beats_per_s"] > 0
    assert r["cycles"] >= 64                       # one beat per cycle at best


@pytest.mark.sim
def test_bench_sim_only_icarus():
    if not HAVE_ICARUS:
        tool_missing("Icarus Verilog not installed (apt-get install -y iverilog)")
    p = _run(["-m", "tools.bench", "--sim-only", "--no-rtl", "--sims", "icarus", "--sim-dut", "rtl",
              "--sim-net", "maxpool_2x2_s2_valid"], timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    rows = {tuple(ln.split()[1:3]): ln.split() for ln in p.stdout.splitlines()
            if ln.split()[:2] in (["icarus", "rtl"], ["icarus", "tlm"])}              # table rows
    assert set(rows) == {("rtl", "this"), ("rtl", "bare")}, p.stdout
    cells, bare = rows["rtl", "this"], rows["rtl", "bare"]
    assert all(re.fullmatch(r"[\d.]+x", c) for c in cells[-3:]), cells      # CPU ratios, vs bare
    assert int(cells[3]) > 0 and float(cells[8].replace(",", "")) > 0, cells  # beats, loopback beats/s
    # the bare bench (TB_BENCH_BARE: AxiRam, no checks; outputs compared with the TLM) moves
    # the stand-in's same beats
    assert bare[3] == cells[3] and re.fullmatch(r"[\d.]+x", bare[-1]), bare
    shares = {}
    for ln in p.stdout.split("Share of the bench's time per component")[1].splitlines()[3:]:
        m = re.fullmatch(r"\s*(\S.*?)\s+([\d.]+)", ln)
        if m and "/ cycle" not in m[1]:
            shares[m[1]] = float(m[2])
    assert {"AXI channel models", "AXI monitors", "simulator (outside Python)"} <= set(shares), p.stdout
    assert abs(sum(shares.values()) - 100) < 1.5, shares
    # the bound with no bench Python: the beats/CPU-s ratio over the simulator's share
    bound = re.search(r"^\s*bound, no bench Python \(beats/CPU-s ratio\)\s+([\d.]+)x\s*$", p.stdout, re.M)
    assert bound, p.stdout
    want = float(cells[-3].rstrip("x")) / (shares["simulator (outside Python)"] / 100)
    assert abs(float(bound[1]) - want) <= 0.02 + 0.02 * want, (bound[1], want)


def test_bench_networks_and_model_table(tmp_path):
    require("ethosu.vela")
    require("ai_edge_litert")
    from tests import nets

    models = tmp_path / "models"
    models.mkdir()
    (models / "tiny_add.tflite").write_bytes(nets.build("add_int16"))
    (models / "broken.tflite").write_bytes(b"TFL3 not a model")
    p = _run(["-m", "tools.bench", "--no-sim", "--model", "tinynet", "--runs", "2", "--model-runs", "2",
              "--models-dir", str(models), "--lstm", "tiny_add"], timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    out = p.stdout
    assert "Traceback" not in out + p.stderr
    for section in ("1. tinynet", "2. tiny_add", "3. published models"):
        assert section in out, section
    ref_rows = [ln for ln in out.splitlines() if ln.strip().startswith("LiteRT BUILTIN_REF")]
    tlm_rows = [ln for ln in out.splitlines() if ln.strip().startswith("TLM (first run = cold)")]
    assert len(ref_rows) == 2 and len(tlm_rows) == 2, out
    for row in ref_rows + tlm_rows:                      # ... median, min, max, CPU, us/NPU op, M MAC/s, / REF
        cells = row.split()
        assert re.fullmatch(r"[\d,.]+", cells[-3]) and float(cells[-3].replace(",", "")) > 0, row
    assert out.count("bit-exact vs REF      yes") == 2, out
    row = [ln for ln in out.splitlines() if ln.strip().startswith("tiny_add ")]
    assert row and row[-1].split()[-1] == "yes", row               # bit-exact column
    tlm_ms, ref_ms, ratio = (float(c.replace(",", "")) for c in row[-1].split()[2:5])
    # the printed times are rounded to 0.001 ms: the ratio agrees with them within that
    slack = ratio * (0.0006 / ref_ms + 0.0006 / tlm_ms) + 0.06
    assert tlm_ms > 0 and ref_ms > 0 and abs(ratio - tlm_ms / ref_ms) <= slack, row
    broken = [ln for ln in out.splitlines() if ln.strip().startswith("broken ")]
    assert broken and "not run:" in broken[-1], out
