"""Markdown tables for docs/devices/bm1880.md, generated from the model's data tables.

`python -m tlm.bm1880.doc_tables` prints them; `... --write docs/devices/bm1880.md` refreshes
the table after each `<!-- table: NAME -->` marker; tests/bm1880/test_bm1880_docs.py checks
that the document is up to date, so the docs cannot drift from the code.
"""
from __future__ import annotations

from . import regs
from .chip import CHIP_PARAMS, ENGINE_NAMES
from .choices import CHOICES
from .descriptors import FIELD_TYPES, HEADER, KINDS


def _table(head: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(out)


def chip_params() -> str:
    return _table(["bmk1880_chip_info_t field", "value", "source", "note"],
                  [[f"`{n}`", str(v), s, note] for n, v, s, note in CHIP_PARAMS])


def choices() -> str:
    return _table(["id", "topic", "the model's choice", "why"], [[f"{i}", t, c, w] for i, t, c, w in CHOICES])


def kinds() -> str:
    rows = []
    for k in KINDS:
        fields = ", ".join(f"{f.name}:{f.type}" for f in k.fields)
        rows.append([f"0x{k.code:02x}", f"`{k.call}`", ENGINE_NAMES[k.engine], f"`{k.param}`" if k.param else "-",
                     fields, k.section])
    return _table(["code", "call", "engine", "parameter structure", "fields (in payload order)", "guide"], rows)


def header() -> str:
    return _table(["field", "byte", "bits", "meaning"],
                  [[f"`{n}`", str(b), f"{lsb + w - 1}:{lsb}", m] for n, b, lsb, w, m in HEADER])


def field_types() -> str:
    return _table(["type", "encoding"], [[f"`{t}`", d] for t, d in FIELD_TYPES.items()])


def registers() -> str:
    rows = []
    for r in regs.REGISTERS:
        fields = "; ".join(f"{f.name} [{f.lsb + f.width - 1}:{f.lsb}]" + (f" {f.doc}" if f.doc else "")
                           for f in r.fields)
        rows.append([f"0x{r.offset:02x}", f"`{r.name}`", r.access, f"0x{r.reset:08x}", fields, r.doc])
    return _table(["offset", "register", "access", "reset", "fields", "meaning"], rows)


def faults() -> str:
    return _table(["fault_code", "name", "meaning"],
                  [[str(c), f"`FAULT_{n}`" if c else "-", m] for c, n, m in regs.FAULTS])


TABLES = {"chip parameters": chip_params, "choices": choices, "descriptor kinds": kinds, "cmd_hdr_t": header,
          "field types": field_types, "registers": registers, "faults": faults}


def refresh(text: str) -> str:
    """Replace the block after each `<!-- table: NAME -->` marker with the generated table
    (the block: the following non-empty lines, up to a blank line)."""
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        out.append(lines[i])
        m = lines[i].strip()
        if m.startswith("<!-- table: ") and m.endswith("-->"):
            name = m[len("<!-- table: "):-3].strip()
            if name not in TABLES:
                raise KeyError(f"unknown table {name!r} (tables: {', '.join(TABLES)})")
            i += 1
            while i < len(lines) and lines[i].strip():
                i += 1
            out.extend(TABLES[name]().split("\n"))
            continue
        i += 1
    return "\n".join(out)


if __name__ == "__main__":
    import sys
    if len(sys.argv) == 3 and sys.argv[1] == "--write":
        from pathlib import Path
        path = Path(sys.argv[2])
        path.write_text(refresh(path.read_text()))
    else:
        for name, fn in TABLES.items():
            print(f"<!-- table: {name} -->\n{fn()}\n")
