"""Static checks of the DTPU stand-in (rtl_stub/dtpu): generated files current, lint,
Icarus, Yosys (no latch; cells and flip-flops of dtpu_core 8x8 reported), ports.

* the generated includes and the documentation's contract tables equal what
  tools/gen_dtpu_rtl.py makes now from tlm/dtpu/contract.py;
* a few generated numbers against the thesis' library (independent of the generator);
* Verilator ``--lint-only -Wall``: no warning, for every configuration of the contract and
  two edge configurations (1x1, buffers 3, queue 1);
* Icarus 11 ``-g2012``: no message; the DUT=tlm shell too;
* Yosys ``synth``: dtpu_core 8x8 int8 maps without latches (cells and flip-flops printed);
  the adapter top (small memories) without latches;
* the shell's and the stand-in's port lists are contract.top_ports().
A missing tool skips locally and fails under CI (tests/support.py tool_missing).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tb.dtpu.build import lint_cases
from tests.support import tool_missing
from tlm.dtpu import contract as C
from tools import gen_dtpu_rtl as GEN

REPO = Path(__file__).resolve().parents[2]
RTL = REPO / "rtl_stub" / "dtpu"


def sources() -> list[Path]:
    return [RTL / s.strip() for s in (RTL / "sources.f").read_text().splitlines() if s.strip()]


def _run(cmd, env=None, timeout=1800) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=timeout)


def test_generated_files_are_current():
    stale = GEN.stale()
    assert not stale, (f"{', '.join(str(p.relative_to(REPO)) for p in stale)} out of date with "
                       f"tlm/dtpu/contract.py: run `python -m tools.gen_dtpu_rtl`")


def test_generated_values_spot_check():
    """Numbers of the thesis' DTPU_delegate.py (register offsets, command codes, the CSR
    word's layout) as they must appear in the generated include."""
    text = (RTL / "gen" / "dtpu_contract.vh").read_text()
    for line in ("localparam [15:0] DTPU_REG_CMD = 16'h0028;",
                 "localparam [15:0] DTPU_REG_OARG_LENGTH_MODE = 16'h003C;",
                 "localparam [15:0] DTPU_REG_OARG0_LENGTH = 16'h0200;",
                 "localparam [15:0] DTPU_REG_IARG2_STATUS = 16'h0108;",
                 "localparam [3:0] DTPU_OP_EXECUTE_STEP = 4'h2;",
                 "localparam [3:0] DTPU_OP_STOP_EXECUTE_CONTINOUS = 4'h5;",
                 "localparam integer DTPU_CSR_ACTIVATE_CHAIN_LSB = 4;",
                 "localparam integer DTPU_CSR_WM_START_LSB = 32;",
                 "localparam [3:0] DTPU_PREC2_CODE = 4'h7;"):
        assert line in text, line


def _verilator():
    from tb.core import simtools
    env = dict(os.environ)
    try:
        return simtools.verilator_exe(env), env
    except simtools.SetupError as e:
        tool_missing(str(e))


LINT_CASES = lint_cases()        # also what tools/mutate.py --device dtpu --lint lints


@pytest.mark.parametrize("params", LINT_CASES, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()
                                                                       if k in ("ROWS", "COLUMNS", "PRECISIONS")))
def test_verilator_lint_wall(params):
    exe, env = _verilator()
    r = _run([exe, "--lint-only", "-Wall", f"-I{RTL}", "--top-module", "dtpu",
              *[f"-G{k}={v}" for k, v in params.items()], *sources()], env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "%Warning" not in out and "%Error" not in out, out[-4000:]


def test_verilator_lint_shell():
    exe, env = _verilator()
    r = _run([exe, "--lint-only", "-Wall", f"-I{RTL}", "--top-module", "dtpu", RTL / "dtpu_shell.v"], env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "%Warning" not in out and "%Error" not in out, out[-4000:]


@pytest.mark.parametrize("top", ["rtl", "shell"])
def test_iverilog_compiles(tmp_path, top):
    exe = shutil.which("iverilog")
    if exe is None:
        tool_missing("Icarus Verilog not installed (apt-get install -y iverilog)")
    files = sources() if top == "rtl" else [RTL / "dtpu_shell.v"]
    r = _run([exe, "-g2012", "-I", RTL, "-s", "dtpu", "-o", tmp_path / "dtpu.vvp", *files])
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 0 and out == "", out[-4000:]
    assert (tmp_path / "dtpu.vvp").stat().st_size > 0


def _yosys(script: str, stat: Path) -> str:
    exe = shutil.which("yosys")
    if exe is None:
        tool_missing("Yosys not installed (apt-get install -y yosys)")
    r = _run([exe, "-q", "-p", script + f"; tee -o {stat} stat; select -assert-none t:$dlatch "
              "t:$adlatch t:$_DLATCH_* t:$sr t:$_SR_*"], timeout=3600)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "latch" not in out.lower(), out[-4000:]
    return stat.read_text()


def _cells_flops(text: str) -> tuple[int, int]:
    cells = int(re.findall(r"Number of cells:\s+(\d+)", text)[-1])
    flops = sum(int(n) for n in re.findall(r"\$_S?DFFE?_\w+\s+(\d+)", text))
    return cells, flops


@pytest.mark.long
def test_yosys_core_8x8_no_latch(tmp_path):
    core = [p for p in sources() if p.name.startswith(("dtpu_pe", "dtpu_mxu", "dtpu_control", "dtpu_ls", "dtpu_core"))]
    text = _yosys(f"read_verilog -sv -I{RTL} {' '.join(map(str, core))}; chparam -set ROWS 8 -set COLUMNS 8 "
                  f"-set PRECISIONS 1 dtpu_core; synth -flatten -top dtpu_core", tmp_path / "stat.txt")
    cells, flops = _cells_flops(text)
    print(f"yosys: dtpu_core 8x8 int8: {cells} cells, {flops} flip-flops, no latches")
    # 64 PEs: an operand and a partial sum register each, plus the skew/deskew/chain rows
    assert cells > 20_000 and flops > 64 * (9 + 32), (cells, flops)


@pytest.mark.long
def test_yosys_adapter_no_latch(tmp_path):
    text = _yosys(f"read_verilog -sv -I{RTL} {' '.join(map(str, sources()))}; chparam -set ROWS 2 "
                  "-set COLUMNS 2 -set PRECISIONS 3 -set SIZE_CSR 16 -set SIZE_WMEMORY 16 -set INFIFO_DEPTH 8 "
                  "-set OUTFIFO_DEPTH 4 dtpu; synth -flatten -top dtpu", tmp_path / "stat.txt")
    cells, flops = _cells_flops(text)
    print(f"yosys: dtpu (2x2, small memories): {cells} cells, {flops} flip-flops, no latches")
    assert flops > 500


_PORT = re.compile(r"^\s*(input|output)\s+wire\s*(?:\[\s*(\d+)\s*:\s*(\d+)\s*\])?\s*([A-Za-z_]\w*)\s*,?\s*$")


def _ports(path: Path) -> list[tuple[str, str, int]]:
    text = re.sub(r'^\s*`include\s+"([^"]+)"', lambda m: (RTL / m.group(1)).read_text(), path.read_text(), flags=re.M)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    m = re.search(r"\bmodule\s+dtpu\b\s*#\s*\((?:[^()]|\([^()]*\))*\)\s*\((.*?)\);", text, re.S)
    assert m, path
    out = []
    for line in m.group(1).splitlines():
        if line.strip():
            pm = _PORT.match(line)
            assert pm, line
            d, msb, lsb, name = pm.groups()
            out.append((name, d, abs(int(msb) - int(lsb)) + 1 if msb else 1))
    return out


def test_ports_of_stand_in_and_shell():
    want = C.top_ports()
    assert _ports(RTL / "dtpu.v") == want
    assert _ports(RTL / "dtpu_shell.v") == want
    core = (RTL / "dtpu_core.v").read_text()
    for port in ("csr_ce", "csr_dout", "wm_address", "infifo_is_empty", "outfifo_is_full", "cs_start",
                 "cs_ready", "cs_done", "cs_continue", "cs_idle", "state", "d_out", "test_mode", "enable"):
        assert re.search(rf"\b(input|output)\s+wire\b[^\n]*\b{port}\b", core), port
