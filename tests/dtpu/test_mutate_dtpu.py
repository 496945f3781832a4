"""tools/mutate.py --device dtpu (`make mutate DEVICE=dtpu`): the DTPU's settings (datapath
files, configurations of the fast regression, reset branches left alone), the table of
mutants judged equivalent (each entry must name one existing mutant: an edit of its line
makes it stale and this test says so), --list, and one real mutant killed by the fast
regression (tools/mutate_dtpu_tb.py on Icarus, stopped at its first failing configuration)."""
from __future__ import annotations

import re
import shutil
from collections import Counter

import pytest

from tests.support import tool_missing
from tlm.dtpu import contract as C
from tools import mutate as M

DEV = M.DEVICES["dtpu"]


def _all():
    return [m for f in DEV.datapath for m in M.sites(DEV.rtl / f, DEV)]


def test_equivalent_entries_name_existing_mutants():
    keys = Counter(m.key for m in _all())
    stale = [k for k in DEV.equivalent if keys[k] != 1]
    assert not stale, f"EQUIVALENT_DTPU entries that name no mutant (or several): {stale}"
    assert all(isinstance(why, str) and why for why in DEV.equivalent.values())


def test_settings():
    from tb.core import simtools
    names = {p.name for p in simtools.dut_sources("dtpu", "rtl")}
    assert set(DEV.datapath) <= names and "dtpu.v" not in DEV.datapath
    assert all(c in C.CONFIGS for c in M.DTPU_CONFIGS)
    # the configurations run build every precision's PEs and an odd array
    built = {p for c in M.DTPU_CONFIGS for p in C.CONFIGS[c].precisions}
    assert built == {p.name for p in C.PRECISIONS}
    assert any(C.CONFIGS[c].rows % 2 for c in M.DTPU_CONFIGS)
    assert [env["NPU_CONFIG"] for _, env, _ in DEV.runs("", 1)] == list(M.DTPU_CONFIGS)


def test_sites_leave_reset_and_planted_bug_alone():
    muts = _all()
    assert len({m.key for m in muts}) == len(muts)
    assert Counter(m.file for m in muts).keys() == set(DEV.datapath)
    text = (DEV.rtl / "dtpu_control_unit.v").read_text().split("\n")
    reset = next(i for i, ln in enumerate(text, 1) if re.search(DEV.reset_branch, ln))
    end = next(i for i in range(reset, len(text)) if text[i - 1].strip() == "end else begin")
    assert not [m for m in muts if m.file == "dtpu_control_unit.v" and reset <= m.line <= end]
    plant = [i for i, ln in enumerate((DEV.rtl / "dtpu_ls_array.v").read_text().split("\n"), 1)
             if "DTPU_PLANTED_BUG" in ln and ln.startswith("`")]
    assert plant and not [m for m in muts if m.file == "dtpu_ls_array.v" and plant[0] <= m.line <= plant[0] + 4]


def test_list(capsys):
    assert M.main(["--device", "dtpu", "--list", "-n", "5", "--seed", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"mutate dtpu: {len(_all())} mutants in {len(DEV.datapath)} datapath files")
    ids = {m.id for m in _all()}
    assert len(out) == 6 and all(line in ids for line in out[1:])


@pytest.mark.sim
def test_a_mutant_is_killed(tmp_path):
    """The PE's accumulate made a subtract: the first configuration's scoreboard fails."""
    if shutil.which("iverilog") is None:
        tool_missing("Icarus Verilog not installed (apt-get install -y iverilog)")
    m = next(x for x in _all() if x.file == "dtpu_pe.v" and x.old == "+" and x.new == "-")
    src = tmp_path / "src"
    shutil.copytree(DEV.rtl, src)
    M.apply(src, m)
    assert M._compiles(src, DEV)
    try:
        outcome, detail = M.run_one(src, "", 300, 1, DEV)
    finally:
        for name, _, _ in M._builds(DEV):
            shutil.rmtree(M.REPO / "sim_build" / f"icarus-{name}", ignore_errors=True)
            (M.REPO / "sim_build" / f".icarus-{name}.lock").unlink(missing_ok=True)
    assert outcome == "killed", detail
    assert "scoreboard mismatch" in detail and f"[{M.DTPU_CONFIGS[0]}]" in detail, detail
