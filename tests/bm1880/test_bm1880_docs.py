"""docs/devices/bm1880.md against the code: generated tables up to date, the coverage table
names every call and only tests that exist, every choice id used is defined."""
import re
from pathlib import Path

from tlm.bm1880 import api
from tlm.bm1880.choices import IDS
from tlm.bm1880.descriptors import DEPENDENCY, KINDS
from tlm.bm1880.doc_tables import TABLES, refresh

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "devices" / "bm1880.md"
TESTS = Path(__file__).resolve().parent


def test_generated_tables_are_up_to_date():
    text = DOC.read_text()
    for name in TABLES:
        assert f"<!-- table: {name} -->" in text, name
    assert refresh(text) == text, "run: python -m tlm.bm1880.doc_tables --write docs/devices/bm1880.md"


def _coverage_rows():
    text = DOC.read_text()
    block = text.split("## API coverage", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in block.splitlines() if r.startswith("| `") or r.startswith("| fmt")]
    return [[c.strip() for c in r.strip("|").split("|")] for r in rows]


def test_coverage_table_names_every_call():
    named = set()
    for call, *_ in _coverage_rows():
        named |= set(re.findall(r"`(bmk1880_\w+)`", call))
        named |= {"bmk1880_dmabuf" + s for s in re.findall(r"`(_\w+)`", call)}
    functions = {n for n in api.__all__ if n.startswith("bmk1880_") and callable(getattr(api, n))
                 and not n.endswith("_param_t") and n not in ("bmk1880_current",)}
    missing = functions - named
    assert not missing, f"calls missing from the coverage table: {sorted(missing)}"
    for k in KINDS:
        row = next(r for r in _coverage_rows() if f"`{k.call}`" in r[0])
        if k is not DEPENDENCY:
            assert "E, R" in row[3], k.call


def test_coverage_table_tests_exist():
    defined = {}
    for f in TESTS.glob("test_bm1880_*.py"):
        defined[f.stem[len("test_bm1880_"):]] = set(re.findall(r"^def (test_\w+)", f.read_text(), re.M))
    refs = 0
    for row in _coverage_rows():
        for mod, fn in re.findall(r"(\w+)::(test_\w+)", row[3]):
            assert fn in defined.get(mod, ()), f"{mod}::{fn} (row {row[0]}) does not exist"
            refs += 1
    assert refs > 60


def test_choice_ids_are_defined_and_used():
    used = set()
    for f in list((ROOT / "tlm" / "bm1880").glob("*.py")) + [DOC] + list(TESTS.glob("*.py")):
        used |= set(re.findall(r"\bC-[A-Z0-9]+(?:-[A-Z0-9]+)*", f.read_text()))
    assert used - IDS == set(), f"undefined choice ids: {sorted(used - IDS)}"
    code = "".join(f.read_text() for f in (ROOT / "tlm" / "bm1880").glob("*.py") if f.name != "choices.py")
    unused = {i for i in IDS if i not in code and i not in DOC.read_text().split("## Choices", 1)[0]}
    assert not unused, f"choices never referenced outside their table: {sorted(unused)}"


def test_python_example_runs():
    code = DOC.read_text().split("## Running a program from Python", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    exec(compile(code, str(DOC), "exec"), {})                                      # noqa: S102


def test_error_example_is_real():
    import pytest
    from tests.bm1880.bm1880_harness import I8, U8, Rig
    from tlm.bm1880 import BmkError, bmk1880_tpu_mul
    example = re.search(r"`(bmk1880_tpu_mul: res_low: [^`]*)`", DOC.read_text()).group(1)
    rig = Rig()
    a, b, r = rig.alloc((1, 1, 1, 4), I8), rig.alloc((1, 1, 1, 4), U8), rig.alloc((1, 1, 1, 4), U8)
    with pytest.raises(BmkError) as e:
        bmk1880_tpu_mul(rig.ctx, res_high=None, res_low=r, a=a, b=b, rshift_width=0)
    assert str(e.value) == example
