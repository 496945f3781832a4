"""docs/devices/k210-kpu.md: its register tables are the generated ones, and its Python
example runs."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from tlm.k210_kpu.registers import markdown_tables

DOC = Path(__file__).resolve().parents[2] / "docs" / "devices" / "k210-kpu.md"


def test_doc_tables_are_generated_from_the_register_data():
    assert markdown_tables() in DOC.read_text()


def test_doc_example_runs():
    text = DOC.read_text()
    block = re.search(r"## Running a layer from Python\n\n```python\n(.*?)```", text, re.S).group(1)
    ns: dict = {}
    exec(compile(block, str(DOC), "exec"), ns)
    y, stream, kpu = ns["y"], ns["stream"], ns["kpu"]
    assert y.shape == (8, 8, 16) and y.dtype == np.uint8
    assert stream == y.tobytes() and kpu.faults() == []
