"""One source of truth on the Python side: no Ethos-U85 register offset or bit position is
typed outside the tables (tlm/ethos_u85/registers.py, tlm/ethos_u85/isa.py,
tb/ethos_u85/ports.py), tests included; everything else derives them from the tables
(`tlm.ethos_u85.registers.OFFSET`, `REGS.X`, field masks/shifts by TRM name).

The check is an AST scan of every tracked Python file except the table modules; it reports
file:line of

* OFFSET: an integer literal equal to a register offset where a register offset is meant:
  the first argument of an APB/register access call (apb_read, apb_write, read, write,
  read_ok, write_ok, rd, wr, read_reg, write_reg, poll_reg, ...), a value compared with a
  name that holds an address or offset, a constant named after a register (``PMCR =
  0x1180``), or a ``0x80 + 8 * n`` BASEP formula;
* BITS: a constant named like a STATUS/CMD bit (``ST_*``, ``CMD_*``) or a TRM channel / port
  group (``CH_*``, ``IF_*``) bound to an integer literal, and an integer literal mask or
  shift applied to a value named status/cmd/prot/regioncfg/mem_attr (``status & 0x4``,
  ``(attr >> 2) & 1``), or a literal field encoding of those registers written to them.

It is a heuristic (the patterns this code base used to retype table facts), not a proof;
`test_checker_catches_retyped_facts` shows it catches each pattern.
"""
from __future__ import annotations

import ast
import re
import subprocess

from tests.support import REPO

TABLES = {"tb/ethos_u85/ports.py", "tlm/ethos_u85/registers.py", "tlm/ethos_u85/isa.py",
          "tests/ethos_u85/test_one_source.py"}
ACCESS_CALLS = {"apb_read", "apb_write", "read", "write", "read_ok", "write_ok", "rd", "wr", "read_reg",
                "write_reg", "poll_reg", "read_expect", "_apb_read", "_apb_write", "reg", "expect_read"}
ADDR_NAME = re.compile(r"(addr|offset|^off$|^a$|paddr)", re.I)
BIT_CONST = re.compile(r"^(ST|CMD|CH|IF)_(?![A-Z0-9_]*(ADDR|BASE)$)[A-Z0-9_]+$")
# values that hold a register word (PPROT/AxPROT are AMBA signals, not table facts)
REG_VALUE = re.compile(r"(status|^st$|^cmd$|cmd_word|regioncfg|mem_?attr|^attrs?$)", re.I)


def _offsets() -> dict:
    from tlm.ethos_u85 import registers as R
    return {r.offset: r.ident for r in R.iter_registers()}


def _names(node) -> list:
    return [n.id.lower() if isinstance(n, ast.Name) else n.attr.lower()
            for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))]


def _int(node) -> "int | None":
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return None


def scan(text: str, path: str, offsets: dict) -> list:
    """[(path, line, rule, text)] of the retyped table facts in Python source *text*."""
    out = []
    idents = {v.lower() for v in offsets.values()} | {v.split("_")[0].lower() for v in offsets.values()}
    src = text.splitlines()

    def hexlit(node) -> bool:
        seg = ast.get_source_segment(text, node) or ""
        return seg.lower().startswith("0x")

    def hit(node, rule):
        out.append((path, node.lineno, rule, src[node.lineno - 1].strip()[:100]))

    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call):
            fn = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if fn in ACCESS_CALLS and node.args:
                a0 = node.args[0]
                if _int(a0) in offsets and _int(a0) >= 4:
                    hit(a0, "OFFSET")
                elif isinstance(a0, ast.BinOp) and _int(a0.left) in offsets and _int(a0.left) >= 4:
                    hit(a0, "OFFSET")
        elif isinstance(node, ast.Compare) and len(node.comparators) == 1:
            left, right = node.left, node.comparators[0]
            for lit, other in ((right, left), (left, right)):
                v = _int(lit)
                names = _names(other)
                if v is not None and v in offsets and v >= 0x10 and hexlit(lit) \
                        and any(ADDR_NAME.search(n) for n in names) and not any(n.startswith("npu_") for n in names):
                    hit(node, "OFFSET")
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                pairs = []
                if isinstance(t, ast.Name):
                    pairs = [(t.id, node.value)]
                elif isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs = [(e.id, v) for e, v in zip(t.elts, node.value.elts) if isinstance(e, ast.Name)]
                for name, val in pairs:
                    v = _int(val)
                    if v is None:
                        continue
                    if BIT_CONST.match(name):
                        hit(node, "BITS")
                    elif name.isupper() and name.lower() in idents and v in offsets and v >= 4:
                        hit(node, "OFFSET")
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.BitAnd, ast.RShift, ast.LShift)):
            if _int(node.right) is not None:
                lit, other = node.right, node.left
            elif isinstance(node.op, ast.BitAnd):
                lit, other = node.left, node.right
            else:
                continue                             # literal << x: a scale, not a field
            v = _int(lit)
            if v is None or v in (0, -1) or (isinstance(node.op, ast.BitAnd) and v in (0xFF, 0xFFFF, 0xFFFFFFFF)):
                continue
            if isinstance(node.op, ast.BitAnd) and isinstance(other, ast.BinOp) \
                    and isinstance(other.op, ast.RShift) and _int(other.right) is not None:
                other = other.left                   # (x >> n) & m
            if any(REG_VALUE.search(n) for n in _names(other)):
                hit(node, "BITS")
    return out


def tracked_python() -> list:
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    # tests/core uses fake devices of its own; device packages of other NPUs have their own tables
    return [f for f in files if f not in TABLES and (REPO / f).is_file() and not f.startswith("tests/core/")
            and (not f.startswith(("tlm/", "tb/", "tests/")) or f.split("/")[1] in ("ethos_u85", "core", "agents")
                 or f.count("/") == 1)]


def test_no_register_offset_or_bit_position_outside_the_tables():
    offsets = _offsets()
    found = []
    for f in tracked_python():
        found += scan((REPO / f).read_text(), f, offsets)
    assert not found, (f"{len(found)} retyped register offsets / bit positions (derive them from "
                       "tlm/ethos_u85/registers.py and tlm/ethos_u85/isa.py):\n"
                       + "\n".join(f"  {p}:{n}: {r}: {t}" for p, n, r, t in found[:60]))


def test_checker_catches_retyped_facts():
    src = '''
PMCR = 0x1180
ST_RUN, ST_IRQ = 0x1, 0x2
CH_RD_M2M = 4
def f(dev, env, status, data, attr, addr, n):
    dev.apb_write(0x3C, 1)
    env.read_ok(0x80 + 8 * n)
    if addr == 0x1180:
        pass
    x = status & 0x4
    y = (attr >> 2) & 1
'''
    lines = {(n, r) for _, n, r, _ in scan(src, "x.py", _offsets())}
    rules = [r for _, r in lines]
    assert rules.count("OFFSET") == 4 and rules.count("BITS") == 4, sorted(lines)
    clean = '''
from tlm.ethos_u85 import registers as R
def f(dev, status):
    dev.apb_write(R.OFFSET["REGIONCFG"], 1)
    return R.REGS.STATUS.bus_status.get(status)
'''
    assert scan(clean, "y.py", _offsets()) == []
