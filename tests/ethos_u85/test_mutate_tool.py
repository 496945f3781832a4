"""tools/mutate.py (`make mutate`): the mutants it enumerates and the table of mutants judged
equivalent. An equivalence entry is keyed by its code, not its line number, and must name a
mutant that still exists: an edit of that line makes the entry stale, and this test says so
(the judgement has to be made again)."""
from __future__ import annotations

import shutil
from collections import Counter

from tools import mutate as M


def _all():
    return [m for f in M.DATAPATH for m in M.sites(M.RTL / f)]


def test_equivalent_entries_name_existing_mutants():
    keys = Counter(m.key for m in _all())
    stale = [k for k in M.EQUIVALENT if keys[k] != 1]
    assert not stale, f"EQUIVALENT entries that name no mutant (or several): {stale}"


def test_keys_are_unique_and_survive_a_line_shift(tmp_path):
    muts = _all()
    assert len({m.key for m in muts}) == len(muts)
    f = M.DATAPATH[0]
    shutil.copy(M.RTL / f, tmp_path / f)
    text = (tmp_path / f).read_text()
    (tmp_path / f).write_text("// a new first line\n\n" + text)
    before = {m.key: m.line for m in M.sites(M.RTL / f)}
    after = {m.key: m.line for m in M.sites(tmp_path / f)}
    assert before.keys() == after.keys()
    assert all(after[k] == before[k] + 2 for k in before)


def test_apply_changes_exactly_one_token(tmp_path):
    m = next(x for x in _all() if x.file == "npu_conv.v" and x.old == "-")
    shutil.copytree(M.RTL, tmp_path / "src")
    M.apply(tmp_path / "src", m)
    a = (M.RTL / m.file).read_text().split("\n")
    b = (tmp_path / "src" / m.file).read_text().split("\n")
    diff = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    assert diff == [m.line - 1] and len(a) == len(b)
    assert b[m.line - 1] == a[m.line - 1][:m.col] + m.new + a[m.line - 1][m.col + len(m.old):]
