"""The NE16 register table (tlm/ne16/registers.py) against itself and against the seed."""
import re
from pathlib import Path

import pytest

from tests.support import tool_missing
from tools.shared import shared_dir
from tlm.core import registry
from tlm.ne16 import registers as R

REPO = Path(__file__).resolve().parents[2]
SEED_NAME = "001_19fb3d0a0439b3b1.txt"
SEED_DIRS = [d for d in [shared_dir("seeds")] if d is not None]


def _seed_text():
    for d in SEED_DIRS:
        if (d / SEED_NAME).is_file():
            return (d / SEED_NAME).read_text()
    tool_missing(f"seed {SEED_NAME} not found next to the repository (source document; "
                 f"tools/shared.py; NPU_SHARED_MODELS moves it)")


def test_table_is_consistent():
    offs = [r.offset for r in R.REGISTERS]
    assert len(set(offs)) == len(offs) and offs == sorted(offs)
    assert len({r.name for r in R.REGISTERS}) == len(R.REGISTERS)
    for r in R.REGISTERS:
        used = 0
        for f in r.fields:
            assert f.lsb + f.width <= R.REG_BITS, (r.name, f.name)
            assert not used & f.mask, f"{r.name}.{f.name} overlaps another field"
            used |= f.mask
    assert R.N_JOB_REGS == 24
    assert [r.index for r in R.JOB_REGS] == list(range(24))
    assert R.JOB_REGS[0].offset == R.JOB_BASE


def test_field_encode_decode_roundtrip():
    cfg = R.by_name("CONFIG0")
    values = {f.name: (1 << f.width) - 1 for f in cfg.fields}
    word = cfg.encode(**values)
    assert cfg.decode(word) == values
    assert word == sum(f.mask for f in cfg.fields)
    with pytest.raises(ValueError):
        cfg.encode(QWM1=8)
    with pytest.raises(KeyError):
        cfg.field("NOPE")
    with pytest.raises(KeyError):
        R.by_name("NOPE")


def test_registry_entry():
    dev = registry.get("ne16")
    assert dev.package == "tlm.ne16"
    assert registry.resolve(dev.registers) is R.REGISTERS
    t = dev.make_target()
    assert t.device == "ne16" and t.reg_bits == 32 and t.addr_bits == 32
    assert dev.bench is not None and dev.bench.tlm_toplevel == "ne16_top_wrap"
    for src in dev.bench.tlm_sources:
        assert (REPO / src).is_file(), src


def test_markdown_table_lists_every_register():
    md = R.markdown_table()
    for r in R.REGISTERS:
        assert f"| {r.name} |" in md


def test_table_matches_the_seed():
    """Every register, offset, field name and bit range of the seed is in the table, and the
    table has nothing else except what is marked EXT."""
    text = _seed_text()
    overview = dict(re.findall(r"\|:ref:`(\w+)<ne16__\w+>`\s*\|(0x[0-9A-Fa-f]+)\s*\|", text))
    assert len(overview) == 29
    seed_fields = {}
    for name, body in re.findall(r"\.\. _ne16__(\w+):(.*?)(?=\.\. _ne16__|\Z)", text, re.S):
        rows = re.findall(r"^\s*\|\s*(\d+(?::\d+)?)\s*\|(R/W|R|W)\s*\|\s*(\w+)\s*\|", body, re.M)
        seed_fields[name] = {(f, bits, acc) for bits, acc, f in rows}
    ours = {r.name: r for r in R.REGISTERS}
    for name, off in overview.items():
        r = ours[name]
        assert r.offset == int(off, 16), name
        mine = {(f.name, f.bits, r.access) for f in r.fields if f.source == "seed"}
        assert mine == seed_fields[name], name
    extra = {n for n in ours if n not in overview}
    assert extra == {r.name for r in R.REGISTERS if r.source == "EXT"}
