"""tools/sweep_rtl.py reads test_catalog_networks' closing log line per memory mode; the
format it parses is the one the cocotb test prints (a wording change there would silently
empty the table)."""
from __future__ import annotations

from pathlib import Path

from tools import sweep_rtl as S

REPO = Path(__file__).resolve().parents[2]


def test_parses_the_line_the_cocotb_test_prints():
    src = (REPO / "tb/ethos_u85/tests/test_rtl_networks.py").read_text()
    fmt = '"%d networks ran to their end, %d refused as claimed (%s, %s)"'
    assert fmt in src
    line = fmt.strip('"') % (121, 3, "ethos-u85-128", "sram_only")
    m = S.DONE.search("  12.0ns INFO  cocotb  " + line)
    assert m and m.groups() == ("121", "3", "ethos-u85-128", "sram_only")


def test_table_marks_a_missing_mode_and_a_failed_run():
    ok = dict(sim="icarus", config="ethos-u85-256", rc=0, tests=2, failed=0, minutes=3.0,
              modes={"default": (5, 1), "sram_only": (5, 1)})
    bad = dict(ok, sim="verilator", rc=1, failed=1, modes={"default": (5, 1)})
    t = S.table([ok, bad], "abc1234")
    assert "| icarus | ethos-u85-256 | sram_only | 5 | 1 | pass | 3 |" in t
    assert "| verilator | ethos-u85-256 | default | 5 | 1 | FAIL |" in t
    assert "| verilator | ethos-u85-256 | sram_only | - | - | FAIL |" in t
