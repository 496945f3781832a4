"""Static checks of the NE16 DUT=tlm shell (rtl_stub/ne16/ne16_shell.v, generated from
tb/ne16/ports.py by tools/gen_ne16.py): Verilator -Wall lint, Icarus -g2012, Yosys synthesis
without latches, and its ports equal the table."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from tests.support import tool_missing

from tb.core import simtools
from tb.ne16.ports import PORTS, TOPLEVEL

REPO = Path(__file__).resolve().parents[2]
SHELL = REPO / "rtl_stub" / "ne16" / "ne16_shell.v"


def _run(cmd, env=None):
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=600)


def test_shell_ports_equal_the_table():
    text = SHELL.read_text()
    found = re.findall(r"^\s*(input|output)\s+wire\s+(?:\[(\d+):0\]\s+)?(\w+)", text, re.M)
    got = [(n, d, int(w) + 1 if w else 1) for d, w, n in found]
    assert got == [(p.name, p.direction, p.width) for p in PORTS]
    assert f"module {TOPLEVEL} (" in text


def test_verilator_lint_wall():
    env = dict(os.environ)
    try:
        exe = simtools.verilator_exe(env)
    except simtools.SetupError as e:
        tool_missing(str(e))
    r = _run([exe, "--lint-only", "-Wall", "--top-module", TOPLEVEL, SHELL], env)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "%Warning" not in out and "%Error" not in out, out[-3000:]


def test_iverilog_compiles(tmp_path):
    exe = shutil.which("iverilog")
    if exe is None:
        tool_missing("Icarus Verilog not installed (apt-get install -y iverilog)")
    r = _run([exe, "-g2012", "-o", tmp_path / "shell.vvp", "-s", TOPLEVEL, SHELL])
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 0 and out == "", out[-3000:]


def test_yosys_synth_no_latch(tmp_path):
    exe = shutil.which("yosys")
    if exe is None:
        tool_missing("Yosys not installed (apt-get install -y yosys)")
    script = (f"read_verilog -sv {SHELL}; synth -top {TOPLEVEL}; "
              f"select -assert-none t:$dlatch t:$adlatch t:$_DLATCH_* t:$sr t:$_SR_*")
    r = _run([exe, "-q", "-p", script])
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
