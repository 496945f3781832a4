"""Mutation testing of an RTL stand-in's datapath (``make mutate [DEVICE=dtpu]``).

Devices (``--device``, DEVICES below: each one's RTL folder, top level, datapath files, fast
regression, reset-branch pattern, test-only bug block, lint parameters and EQUIVALENT table
in one entry): ``ethos-u85`` (the default; described below) and ``dtpu`` (rtl_stub/dtpu/ against
tools/mutate_dtpu_tb.py in three configurations; see DTPU below). The engine (sites, apply,
compile, lint, run, score) is the same for both.

Each mutant changes one operator or one constant at one place of one datapath file
(DATAPATH below): ``+``/``-``, ``==``/``!=``, ``<``/``<=``/``>``/``>=``, ``&&``/``||``,
``&``/``|``/``^``, ``<<``/``>>``, a dropped ``!`` or ``~``, a sized constant (``4'd3`` ->
``4'd2``/``4'd4``, ``1'b1`` <-> ``1'b0``) or a plain decimal constant (n -> n+1, n-1).
Sites are the expressions of assignments, conditions and case items; declarations,
parameters, port lists, bit ranges ``[...]``, ``for`` headers, reset values (the
``if (!rst_n)`` branches; DTPU: ``if (reset)``), the test-only ``PLANT_CONV_BUG`` block
(DTPU: ``DTPU_PLANTED_BUG``) and ``unused_ok`` sinks are left alone.

For each mutant (a seeded sample of all sites, or all of them with ``--all``): the sources
are copied with the change, compiled with Icarus (a mutant that does not compile is
"stillborn" and not counted), and the fast regression tools/mutate_tb.py runs on it: fixed
CONV/DEPTHWISE and ELEMENTWISE/POOL jobs of the bench's generator and a Vela network, every
byte checked by the scoreboard's TLM, every job bounded in simulated cycles. The mutant is
killed when the regression fails; a run that exceeds the wall-clock bound (--timeout) counts
as killed with a reported timeout (a hang), never a stuck run.

Report: per mutant its place, change and outcome, then the kill rate over the mutants that
compiled, minus those judged equivalent (EQUIVALENT below: a change that cannot alter any
output, with the reason), and the survivors left to examine. With ``--lint`` a mutant is
first linted as tests/ethos_u85/test_rtl_lint.py lints the stand-in (``verilator --lint-only
-Wall``); one with a warning is reported as refused by the lint and not scored (the project's
checks reject it before any simulation).

The unmutated sources run the same regression first; if they fail, no mutant runs (exit 2).

  python -m tools.mutate [--device ethos-u85|dtpu] [-n 40] [--seed 1] [--all] [--timeout S] [--list]
                         [--lint] [--no-baseline] [--only ID,...]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parents[1]
RTL = REPO / "rtl_stub" / "ethos_u85"
DEVICE = "ethos-u85"

# the datapath of CONV/DEPTHWISE and of the kernel unit
DATAPATH = ("npu_swd.v", "npu_fwd.v", "npu_wfetch.v", "npu_conv.v", "npu_conv_wi2.v", "npu_conv_walk.v",
            "npu_conv_ifm.v", "npu_conv_mac.v", "npu_conv_out.v", "npu_conv_rescale.v", "npu_rsr.v",
            "npu_kernel.v", "npu_kernel_alu.v", "npu_act.v", "npu_ofm_addr.v")
KERNEL_FILES = ("npu_kernel.v", "npu_kernel_alu.v", "npu_act.v", "npu_ofm_addr.v")

# judged equivalent, by (file, code line, change, n-th such site in the file): line numbers move
EQUIVALENT: dict[tuple, str] = {
    ('npu_act.v', "F_S8S16:    byte_a = {e8[9:0], 1'b0};",
     "1'b0->1'b1", 0):
        "bit 0 of a lut_s8_s16 entry's byte address: the 16-bit word is selected by bits [3:1] "
        'and the LUT RAM line by [10:4], bit 0 is never read',
    ('npu_kernel.v', '(k_mode[2:0] == P_MIN) ? {{16{NPU_POOL_IDENTITY_MIN[31]}}, NPU_POOL_IDENTITY_MIN} :',
     '16->17', 0):
        'a 17-bit sign extension of the 32-bit MIN identity in a 48-bit wire: the extra top bit '
        'is truncated, the value is the same',
    ('npu_kernel.v', "(op_mode[2:0] == P_MIN) ? {{16{NPU_POOL_IDENTITY_MIN[31]}}, NPU_POOL_IDENTITY_MIN} : 48'd0;",
     '16->17', 0):
        'a 17-bit sign extension of the 32-bit MIN identity assigned to a 48-bit accumulator: the'
        ' extra top bit is truncated, the value is the same',
    ('npu_conv.v', "wire [15:0] kwu = 16'((kw + {16'd0, dil_xb}) >> dil_xb);",
     '16->17', 0):
        'a 17-bit size cast assigned to the 16-bit wire kwu: truncated to the same 16 bits',
    ('npu_kernel.v', "wire           tap_go = (g == G_TAP) && !abort && (tok_cnt != 3'd4)",
     "3'd4->3'd3", 0):
        'the request token queue (4 entries, tok_cnt moves by one) admits 3 requests in flight '
        'instead of 4: slower, the same results',
    ('npu_conv_mac.v', "wq = dw_wide ? 5'(q & ((1 << (lwo - 4'd4)) - 1)) : 5'd0;",
     '-->+', 1):
        "equivalent at MACS 256 only (the fast regression's configuration): the word mask of wide"
        ' depthwise bricks, (1 << (lwo-4)) + 1 instead of - 1, selects the same word for every '
        'read port a 256-MAC array uses (lwo 4: ports 0-1, lwo 5: ports 0-1); MACS 512+ would '
        'tell',
    ('npu_conv.v', "rup = (n + {5'd0, m} - 8'd1) & ~({5'd0, m} - 8'd1);",
     '-->+', 0):
        'rup() rounds the first spatial block up one step further (n + m + 1 instead of n + m - '
        '1, still a multiple of the microblock): a larger block, halved until it fits the AB and '
        'the IFM buffer as before; the spatial blocking is a schedule, every OFM element is '
        'computed the same',
    ('npu_conv.v', "wire [7:0]  mh0 = (oh_m1 > {9'd0, blkh_m1}) ? {1'b0, blkh_m1} : oh_m1[7:0];",
     '>->>=', 0):
        'min(OFM_HEIGHT_M1, OFM_BLK_HEIGHT_M1) with >= instead of >: both arms are equal when the'
        ' operands are',
    ('npu_conv.v', ".dw_pad_k(dw_q ? (ifm16 ? DW16_PAD : DW8_PAD) : 3'd0),",
     "3'd0->3'd1", 0):
        'dw_pad_k of a CONV (not DEPTHWISE): npu_conv_walk.v reads it only with dw',
    ('npu_conv_mac.v', "pq = 5'd0; wq = 5'd0; lr = 3'd0; lc = 3'd0; prow = 16'd0; pcol = 16'd0; pos = 32'd0;",
     "5'd0->5'd1", 0):
        'the default of pq before the loop over the read ports, which assigns it before every use',
    ('npu_conv_out.v', "wire [127:0] e_d  = {96'd0, e_v} << {a1[3:0], 3'b000};",
     "96'd0->96'd1", 0):
        "a 1 in bit 32 of the element word before its shift into the beat: it lands in a byte "
        "lane the beat's strobes do not write",
    ('npu_conv_walk.v', "if (bq_push) fcnt[b] <= {(LBW+1){1'b0}};",
     '1->2', 0):
        "the reset value {(LBW+1){1'b0}} -> {(LBW+2){1'b0}} of the (LBW+1)-bit fill count: zero "
        'either way',
    ('npu_swd.v', "wire         rf_room12 = (rf_cnt <= 6'(RFN - 12));",
     '6->7', 0):
        "the size cast 6'(RFN - 12) -> 7'(RFN - 12): the same value (20), compared with a 6-bit "
        'count',
    ('npu_act.v', "sgv = {{1{base[31]}}, base, 9'd0} + fs + (t[31] ? 42'sh10001FF : 42'sh1000200);",
     '1->2', 0):
        "lut_sigmoid's {{1{base[31]}}, base, 9'd0} -> {{2{...}}, ...}: a 43-bit concatenation in "
        'an unsigned sum assigned to the 42-bit sgv; the extra top bit is truncated, the low 42 '
        'bits of the sum are the same',
    ('npu_conv_wi2.v', "wire [3:0]  r_n = (left > 17'd8) ? 4'd8 : left[3:0];",
     '>->>=', 0):
        'min(8, IFM channels left): at left == 8 both arms are 8',
}

# write_ofm's block limits (npu_ofm_addr.v lim_ok): 11'(NPU_MAX_BLOCK_*) -> 12'(...)
EQUIVALENT.update({
    ('npu_ofm_addr.v', code, '11->12', nth):
        "the size cast 11'(NPU_MAX_BLOCK_*) -> 12'(...) of a block limit (128 or 1024, both below "
        "2048), compared with an 11-bit block size: the same value, the same comparison"
    for code, nth in (
        ("!(tr == WHC && (blk_w > 11'(NPU_MAX_BLOCK_HEIGHT) || blk_h > 11'(NPU_MAX_BLOCK_WIDTH)))", 0),
        ("!(tr == WHC && (blk_w > 11'(NPU_MAX_BLOCK_HEIGHT) || blk_h > 11'(NPU_MAX_BLOCK_WIDTH)))", 1),
        ("&& !(tr == HCW && (blk_d > 11'(NPU_MAX_BLOCK_WIDTH) || blk_w > 11'(NPU_MAX_BLOCK_DEPTH)))", 0),
        ("&& !(tr == HCW && (blk_d > 11'(NPU_MAX_BLOCK_WIDTH) || blk_w > 11'(NPU_MAX_BLOCK_DEPTH)))", 1),
        ("&& !(tr == CWH && (blk_d > 11'(NPU_MAX_BLOCK_HEIGHT) || blk_h > 11'(NPU_MAX_BLOCK_DEPTH)))", 0),
        ("&& !(tr == CWH && (blk_d > 11'(NPU_MAX_BLOCK_HEIGHT) || blk_h > 11'(NPU_MAX_BLOCK_DEPTH)))", 1),
        ("&& !(tr == CHW && (blk_d > 11'(NPU_MAX_BLOCK_HEIGHT) || blk_h > 11'(NPU_MAX_BLOCK_WIDTH)", 0),
        ("&& !(tr == CHW && (blk_d > 11'(NPU_MAX_BLOCK_HEIGHT) || blk_h > 11'(NPU_MAX_BLOCK_WIDTH)", 1),
        ("|| blk_w > 11'(NPU_MAX_BLOCK_DEPTH)))", 0),
        ("&& !(tr == WCH && (blk_w > 11'(NPU_MAX_BLOCK_HEIGHT) || blk_d > 11'(NPU_MAX_BLOCK_WIDTH)", 0),
        ("&& !(tr == WCH && (blk_w > 11'(NPU_MAX_BLOCK_HEIGHT) || blk_d > 11'(NPU_MAX_BLOCK_WIDTH)", 1),
        ("|| blk_h > 11'(NPU_MAX_BLOCK_DEPTH)));", 0),
    )})

# lim_ok: OFM_BLK_HEIGHT/WIDTH are 7-bit fields + 1 on both instances (npu_kernel.v, npu_conv.v),
# so blk_h, blk_w <= 128: compared with 1024 (NPU_MAX_BLOCK_DEPTH), > and >= are both false
_LIM_HW = "blk_h, blk_w <= 128 (7-bit fields + 1): '> 1024' and '>= 1024' are both always false"
EQUIVALENT.update({
    ('npu_ofm_addr.v', "&& !(tr == HCW && (blk_d > 11'(NPU_MAX_BLOCK_WIDTH) || blk_w > 11'(NPU_MAX_BLOCK_DEPTH)))",
     '>->>=', 1): _LIM_HW,
    ('npu_ofm_addr.v', "&& !(tr == CWH && (blk_d > 11'(NPU_MAX_BLOCK_HEIGHT) || blk_h > 11'(NPU_MAX_BLOCK_DEPTH)))",
     '>->>=', 1): _LIM_HW,
    ('npu_ofm_addr.v', "|| blk_w > 11'(NPU_MAX_BLOCK_DEPTH)))", '>->>=', 0): _LIM_HW,
    ('npu_ofm_addr.v', "|| blk_h > 11'(NPU_MAX_BLOCK_DEPTH)));", '>->>=', 0): _LIM_HW,
    ('npu_ofm_addr.v', "!(tr == WHC && (blk_w > 11'(NPU_MAX_BLOCK_HEIGHT) || blk_h > 11'(NPU_MAX_BLOCK_WIDTH)))",
     '||->&&', 0):
        "WHC's limits: blk_w > 128 and blk_h > 128 are both always false (7-bit fields + 1), so are their || and &&",
    ('npu_ofm_addr.v', "|| blk_w > 11'(NPU_MAX_BLOCK_DEPTH)))", '||->&&', 0):
        "CHW's limits: blk_d > 128 || (blk_h > 128 && blk_w > 1024) for blk_d > 128 || blk_h > 128 || "
        "blk_w > 1024: blk_h > 128 and blk_w > 1024 are always false (7-bit fields + 1), both are blk_d > 128",
})

# the CONV output stage's OFM write queue (npu_conv_out.v): run lengths are at most 16
EQUIVALENT.update({
    ('npu_conv_out.v', "if (go) rk = 5'(i + 1);", '5->6', 0):
        "a 6-bit cast of i + 1 (at most 16) assigned to the 5-bit rk: the same value",
    ('npu_conv_out.v', "wire          q_close = (rk >= rmax) || ((QA+1)'(rk) < q_av) || q_idle;", '+->-', 0):
        "a 4-bit instead of 6-bit cast of rk (1..16) differs only at rk = 16, where rk >= rmax "
        "(rmax <= 16) already closes the run",
})

# ---------------------------------------------------------------- DTPU
# The DTPU stand-in (rtl_stub/dtpu/): what computes and moves a run's data. dtpu_core.v (the
# wiring and the pipeline stall), dtpu_control_unit.v (CSR decoding and its errors, weight
# load, input reads, step issue, run end), dtpu_ls_array.v (weight/activation units,
# Filter&Select, Compact&Select, output staging), dtpu_mxu.v and dtpu_pe.v (the systolic array,
# skew/deskew, the row-group chain), dtpu_arg_buf.v (the input arguments' buffers: packet
# fill, ring order, the core's memory and FIFO reads, OVERFLOW/UNDERRUN) and dtpu_out_fifo.v
# (the output FIFO, held word and TLAST). Left out: dtpu.v (the adapter's AXI4-Lite register
# map, command queue and STATUS: control, judged by test_register_map/test_command_errors,
# not by this data regression) and dtpu_shell.v (DUT=tlm, no logic).
DTPU_DATAPATH = ("dtpu_pe.v", "dtpu_mxu.v", "dtpu_ls_array.v", "dtpu_control_unit.v", "dtpu_core.v",
                 "dtpu_arg_buf.v", "dtpu_out_fifo.v")
# The configurations the fast regression runs, in this order (the first failing one ends the
# mutant's run): 4x4 with all four precisions (P > 1 words a vector, 64-bit lanes, the wide
# PEs); 3x5 int8/int16 (odd ROWS and COLUMNS, int8's 32-bit lanes in 64-bit staging; 3 argument
# buffers, a 3-command queue, a 24-word output FIFO and a 200-word input FIFO: the ring and
# address arithmetic off powers of two); 8x8 int8 (the deployed overlay: 32-bit lanes,
# single-word vectors). dtpu-8x8-int8-16-32 is left out: it builds no generate branch these
# three do not (33-bit PEs truncate as 4x4's 65-bit ones) and costs 105 s on Icarus, four times
# the other three together.
DTPU_CONFIGS = ("dtpu-4x4-all", "dtpu-3x5-odd", "dtpu-8x8-int8")

# judged equivalent (as EQUIVALENT, for --device dtpu)
_DTPU_UNWIRED = ("dtpu_core's {} output: module dtpu (the DUT) connects it to a wire that only its unused_top "
                 "sink reads ({})")
_DTPU_ARG_MEMS = "the adapter's argument memories are written by the streams, never by the core"
# dtpu_ls_array's output word: the 64-bit lane's arm and its guard, with why its else arm is never written
_DTPU_LANE64 = "outfifo_din = lane32 ? word32 : (stg_idx < ROWS_P) ? stg[stg_idx*ACCW +: 64] : 64'd0;"
_DTPU_STG_IN_RANGE = "a step writes q_words = NG <= ROWS words, so stg_idx < ROWS whenever outfifo_write is high"
EQUIVALENT_DTPU: dict[tuple, str] = {
    ('dtpu_pe.v', 'if (PW > ACCW) begin : g_unused', '>->>=', 0):
        'the generate condition of the unused_hi lint sink (it drives nothing); PW == ACCW never '
        'occurs either (PW = 2*AW with AW = widest operand + 1 odd, so PW is 18, 34, 66 or 130; '
        'ACCW is 32 or 64)',
    ('dtpu_core.v', "assign csr_we = 1'b0;", "1'b0->1'b1", 0): _DTPU_UNWIRED.format("csr_we", _DTPU_ARG_MEMS),
    ('dtpu_core.v', "assign wm_we = 1'b0;", "1'b0->1'b1", 0): _DTPU_UNWIRED.format("wm_we", _DTPU_ARG_MEMS),
    ('dtpu_mxu.v', "wire [ACCW-1:0] p_in = (c == 0) ? {ACCW{1'b0}} : p_grid[(r*COLUMNS+c-1)*ACCW +: ACCW];",
     "1'b0->1'b1", 0):
        "the partial-sum input of a first-column PE: dtpu_pe with FIRST=1 never reads p_in (acc_in is 0)",
    ('dtpu_mxu.v', 'up = (i > 0) ? i - 1 : 0;', '0->1', 1):
        'the row above row 0 (up = 1 instead of 0): h_new of row 0 takes 0, not h[up] (i == 0 selects the '
        'zero arm), so up is never read for i = 0',
    ('dtpu_ls_array.v', _DTPU_LANE64, "64'd0->64'd1", 0):
        f'the 64-bit lane past the last row: {_DTPU_STG_IN_RANGE}; the other arm is never written',
    ('dtpu_control_unit.v', "if (cnt >= 4'd1 && cnt <= 4'd8)", '&&->||', 0):
        "CSR fetch steps 0 and 9 also write csr_word[(cnt-1)*8 +: 8]: bytes -1 and 8 of the 64-bit "
        "word, out of range, so the writes are dropped (FETCH_CSR leaves at step 9, so no later step)",
    ('dtpu_arg_buf.v', "filling <= 1'b1;", "1'b1->1'b0", 0):
        "TREADY = filling || nready < NBUF: while a packet is being filled its buffer is not ready, so "
        "nready < NBUF already holds (nready only grows at TLAST, which ends the filling)",
    ('dtpu_control_unit.v', 'assign cs_idle = (state == DTPU_ST_IDLE);', '==->!=', 0):
        _DTPU_UNWIRED.format("cs_idle", "STATUS.IDLE is the adapter's own !run_active"),
    ('dtpu_control_unit.v', 'assign load_weight = (state == DTPU_ST_LOAD) && (wcnt != 0);', '&&->||', 0):
        'load_weight also outside LOAD (and at wcnt 0): load_idx is then -1 (out of range, the write is '
        'dropped) or n_weights = ROWS*P (the word after the run\'s block: no PE of its precision reads it, '
        'and a later run loads every word of its own block in LOAD before COMPUTE)',
    ('dtpu_control_unit.v',
     "wm_address = wm_start[ADDRESS_SIZE_WMEMORY-1:0] + {{(ADDRESS_SIZE_WMEMORY-IDXW-1){1'b0}}, wcnt};", '1->2', 0):
        'wcnt (IDXW+1 bits) zero-extended to 31 instead of 32 bits in a 32-bit sum: the same value',
    ('dtpu_ls_array.v', _DTPU_LANE64, '<-><=', 0):
        f'the guard of the 64-bit lane at stg_idx == ROWS: {_DTPU_STG_IN_RANGE}',
}
# the last rows of the row groups (dtpu_control_unit.v last_d): only acc[7:0] is read, a 1 in
# bit 9 of the 16-bit acc (7'd1 at [15:9]) adds 512 and leaves the low byte as it was
EQUIVALENT_DTPU.update({
    ('dtpu_control_unit.v', code, "7'd0->7'd1", 0):
        "a 1 in bit 9 of last_d's 16-bit accumulator acc (512 more): only acc[7:0] is read, so "
        "every group's last row is the same"
    for code in ("acc = {7'd0, g_eff} - 16'd1;", "acc = acc + {7'd0, g_eff};")})


@dataclass(frozen=True)
class Device:
    """What tools.mutate needs of one stand-in: the one place per-device settings live."""
    name: str                       # the registry's device name (--device)
    rtl: Path                       # the RTL folder (copied whole for each mutant)
    top: str                        # the HDL top level
    datapath: tuple                 # the mutated files (names in rtl)
    tb_module: str                  # the cocotb module of the fast regression
    equivalent: dict                # judged-equivalent mutants (Mutant.key -> reason)
    runs: Callable                  # (first, seed) -> [(build folder suffix, env, Verilog defines)]
    first: Callable                 # mutated file -> MUTATE_FIRST of the regression
    lint_params: Callable           # () -> [parameter sets] verilator -Wall must pass on
    reset_branch: str               # an `if` that opens the reset branch (left alone)
    plant: str                      # the test-only bug block's `ifdef line (left alone)
    timeout: float                  # the default wall-clock bound per mutant, s
    report: str = "mutate_report.json"
    compile_defines: Callable = field(default=lambda: [{}])   # () -> macro sets it must compile with


def _ethos_runs(first: str, seed: int) -> list:
    return [("", {"TB_DUT": "rtl", "MUTATE_FIRST": first, "MUTATE_SEED": str(seed), "OFM_PERMS_REPS": "1"}, {})]


def _dtpu_defines(config: str) -> dict:
    from tb.dtpu.build import defines
    return defines(config)


def _dtpu_runs(first: str, seed: int) -> list:
    return [(f"-{c}", {"NPU_CONFIG": c, "TB_DEVICE": "dtpu", "TB_DUT": "rtl", "DTPU_SEED": str(seed)},
             _dtpu_defines(c)) for c in DTPU_CONFIGS]


def _dtpu_lint_params() -> list:
    from tb.dtpu.build import lint_cases
    return lint_cases()


DEVICES: dict[str, Device] = {d.name: d for d in (
    Device(DEVICE, RTL, "ethosu85", DATAPATH, "tools.mutate_tb", EQUIVALENT, _ethos_runs,
           lambda f: "kernel" if f in KERNEL_FILES else "conv", lambda: [{"MACS": 256}],
           r"\bif\s*\(\s*!\s*rst_n\s*\)", "`ifdef PLANT_CONV_BUG", 900.0),
    Device("dtpu", REPO / "rtl_stub" / "dtpu", "dtpu", DTPU_DATAPATH, "tools.mutate_dtpu_tb", EQUIVALENT_DTPU,
           _dtpu_runs, lambda f: "", _dtpu_lint_params, r"\bif\s*\(\s*reset\s*\)", "`ifdef DTPU_PLANTED_BUG",
           300.0, report="mutate_report_dtpu.json",
           compile_defines=lambda: [_dtpu_defines(c) for c in DTPU_CONFIGS]),
)}


# operator replacements (tried in this order at each site)
OPS = {
    "===": (), "!==": (),
    "<<<": (">>>",), ">>>": (">>",),
    "<<": (">>",), ">>": ("<<",),
    "==": ("!=",), "!=": ("==",),
    "<=": ("<",), ">=": (">",),
    "&&": ("||",), "||": ("&&",),
    "<": ("<=",), ">": (">=",),
    "+": ("-",), "-": ("+",),
    "&": ("|",), "|": ("&",), "^": ("&",),
    "!": ("",), "~": ("",),
}
_TOKEN = re.compile(r"(\d+'[sS]?[bBdDhH][0-9a-fA-F_xXzZ]+)|('[01])|(\b\d+\b)"
                    r"|(===|!==|<<<|>>>|<<|>>|==|!=|<=|>=|&&|\|\||[-+<>&|^!~])"
                    r"|([A-Za-z_$][\w$]*)|(\S)")


@dataclass
class Mutant:
    file: str
    line: int          # 1-based
    col: int           # 0-based column of the token
    old: str
    new: str
    code: str = ""     # the line without comments and indentation
    nth: int = 0       # how many sites of the same change on the same code precede it in the file

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}:{self.col}:{self.old}->{self.new}"

    @property
    def key(self) -> tuple:
        """Names the mutant by its code, not its line number (EQUIVALENT's keys): edits
        elsewhere in the file leave it valid."""
        return (self.file, self.code, f"{self.old}->{self.new}", self.nth)


def _strip_comments(text: str) -> list[str]:
    """Lines with comments blanked (columns kept)."""
    out = []
    in_block = False
    for line in text.split("\n"):
        buf = list(line)
        i = 0
        while i < len(line):
            if in_block:
                if line.startswith("*/", i):
                    buf[i] = buf[i + 1] = " "
                    in_block = False
                    i += 2
                    continue
                buf[i] = " "
                i += 1
                continue
            if line.startswith("//", i):
                for k in range(i, len(line)):
                    buf[k] = " "
                break
            if line.startswith("/*", i):
                in_block = True
                buf[i] = buf[i + 1] = " "
                i += 2
                continue
            if line[i] == '"':
                j = line.find('"', i + 1)
                j = len(line) - 1 if j < 0 else j
                for k in range(i, j + 1):
                    buf[k] = " "
                i = j + 1
                continue
            i += 1
        out.append("".join(buf))
    return out


def _const_variants(tok: str) -> list[str]:
    m = re.match(r"(\d+)'([sS]?)([bBdDhH])([0-9a-fA-F_]+)$", tok)
    if not m:
        return []
    width, sgn, base, digits = m.groups()
    radix = {"b": 2, "d": 10, "h": 16}[base.lower()]
    try:
        v = int(digits.replace("_", ""), radix)
    except ValueError:
        return []
    w = int(width)
    fmt = {2: "b", 10: "d", 16: "h"}[radix]

    def enc(x):
        x &= (1 << w) - 1
        return f"{width}'{sgn}{base}{format(x, fmt if fmt != 'h' else 'X')}"
    if w == 1:
        return [enc(1 - v)]
    out = [enc(v + 1)]
    if v > 0:
        out.append(enc(v - 1))
    return [o for o in dict.fromkeys(out) if o != tok]


_SKIP_START = re.compile(r"^\s*(input|output|inout|localparam|parameter|integer|genvar|logic\b|reg\b|"
                         r"wire\s+(\[[^\]]*\]\s*)?[A-Za-z_]\w*\s*(,|;))")
_SKIP_LINE = re.compile(r"^\s*(`|module|endmodule|function|endfunction|task|endtask|generate|endgenerate|"
                        r"for\s*\(|wire\s+unused_ok|.*#\()")
_LV_TAIL = re.compile(r"(\{[^}]*\}|[A-Za-z_]\w*(\s*\[[^\]]*\])*)\s*$")


def _is_assignment(line: str, col: int) -> bool:
    """Whether the '<=' at col assigns (nonblocking) rather than compares: an lvalue right
    before it, and before that nothing or a statement boundary."""
    head = line[:col]
    m = _LV_TAIL.search(head)
    if not m:
        return False
    before = head[:m.start()].rstrip()
    return (before == "" or before.endswith((")", ";", ":")) or re.search(r"\b(begin|else)$", before) is not None)


def sites(path: Path, dev: "Device | None" = None) -> list[Mutant]:
    """Every mutant of one file (of *dev*'s stand-in; default the Ethos-U85's)."""
    dev = dev or DEVICES[DEVICE]
    reset_re = re.compile(dev.reset_branch)
    text = path.read_text()
    lines = _strip_comments(text)
    raw = text.split("\n")
    out: list[Mutant] = []
    plant = in_ports = skipping = False
    reset_indent = None                 # inside the asynchronous reset branch
    for n, line in enumerate(lines, 1):
        s = line.strip()
        r = raw[n - 1].lstrip()
        ind = len(line) - len(line.lstrip())
        if reset_indent is not None:
            if s.startswith("end") and ind <= reset_indent:
                reset_indent = None
            continue
        if reset_re.search(line):
            reset_indent = ind
            continue
        if r.startswith(dev.plant):
            plant = True
        if plant:
            if r.startswith("`endif"):
                plant = False
            continue
        if s.startswith("module"):
            in_ports = True
        if in_ports:
            if s.endswith(");"):
                in_ports = False
            continue
        if skipping or _SKIP_START.match(line):
            skipping = not s.endswith(";")
            continue
        if not s or _SKIP_LINE.match(line):
            continue
        depth = 0                       # inside [...] (bit/part selects, widths)
        prev = ""
        for t in _TOKEN.finditer(line):
            tok = t.group(0)
            col = t.start()
            if tok == "[":
                depth += 1
            elif tok == "]":
                depth = max(0, depth - 1)
            if depth or tok in ("[", "]"):
                prev = tok
                continue
            if t.group(1):                                   # sized constant
                for new in _const_variants(tok):
                    out.append(Mutant(path.name, n, col, tok, new))
            elif t.group(3):                                 # plain decimal
                v = int(tok)
                if prev not in ("'", "#") and v < 1 << 20:
                    out.append(Mutant(path.name, n, col, tok, str(v + 1)))
            elif t.group(4):
                unary_pos = prev in ("", "(", "=", "<=", ",", "?", ":", "{", "!", "~", "&&", "||", "return")
                if tok == "<=" and _is_assignment(line, col):
                    pass
                elif tok in ("-", "+") and unary_pos:
                    pass                                     # a sign
                elif tok in ("&", "|", "^") and unary_pos:
                    pass                                     # a reduction
                else:
                    for new in OPS.get(tok, ()):
                        out.append(Mutant(path.name, n, col, tok, new))
            prev = tok
    seen: dict = {}
    for m in out:
        m.code = lines[m.line - 1].strip()
        k = (m.code, m.old, m.new)
        m.nth = seen.get(k, 0)
        seen[k] = m.nth + 1
    return out


def apply(src_dir: Path, m: Mutant) -> None:
    p = src_dir / m.file
    lines = p.read_text().split("\n")
    line = lines[m.line - 1]
    assert line[m.col:m.col + len(m.old)] == m.old, (m.id, line)
    lines[m.line - 1] = line[:m.col] + m.new + line[m.col + len(m.old):]
    p.write_text("\n".join(lines))


def _sources(src_dir: Path, dev: "Device | None" = None) -> list[Path]:
    from tb.core import simtools
    return [src_dir / Path(p).name for p in simtools.dut_sources((dev or DEVICES[DEVICE]).name, "rtl")]


def _compiles(src_dir: Path, dev: "Device | None" = None) -> bool:
    """Whether Icarus compiles the sources, with each macro set of the device (DTPU: each
    configuration the regression builds)."""
    dev = dev or DEVICES[DEVICE]
    exe = shutil.which("iverilog")
    for defs in dev.compile_defines():
        r = subprocess.run([exe, "-g2012", "-I", str(src_dir), *[f"-D{k}={v}" for k, v in defs.items()],
                            "-s", dev.top, "-o", str(src_dir / "chk.vvp"),
                            *map(str, _sources(src_dir, dev))], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            return False
    return True


def _lint(src_dir: Path, dev: "Device | None" = None) -> str:
    """The first warning of ``verilator --lint-only -Wall`` on the sources, '' if clean, as the
    project's lint requires of the stand-in (Ethos-U85: MACS 256, tests/ethos_u85/test_rtl_lint.py;
    DTPU: every parameter set of tb/dtpu/build.py lint_cases, tests/dtpu/test_dtpu_rtl.py)."""
    from tb.core import simtools
    dev = dev or DEVICES[DEVICE]
    env = dict(os.environ)
    exe = simtools.verilator_exe(env)
    for params in dev.lint_params():
        r = subprocess.run([exe, "--lint-only", "-Wall", f"-I{src_dir}", "--top-module", dev.top,
                            *[f"-G{k}={v}" for k, v in params.items()],
                            *map(str, _sources(src_dir, dev))], capture_output=True, text=True, timeout=600, env=env)
        out = r.stdout + r.stderr
        if r.returncode == 0 and "%Warning" not in out and "%Error" not in out:
            continue
        first = [ln for ln in out.splitlines() if ln.startswith(("%Warning", "%Error"))]
        return (first[0] if first else f"exit {r.returncode}")[:200]
    return ""


# the mutants' build folder (sim_build/icarus-<this>), one per process: two runs in one
# checkout would otherwise delete each other's builds and score the crash as a kill
_BUILD = f"mutant-{os.getpid()}"


def _builds(dev: Device, first: str = "", seed: int = 1) -> list:
    """The regression's runs of *dev*: (build folder name, env, defines)."""
    return [(_BUILD + suffix, env, defs) for suffix, env, defs in dev.runs(first, seed)]


def run_one(src_dir: Path, first: str, timeout: float, seed: int, dev: "Device | None" = None) -> tuple[str, str]:
    """Run the fast regression on the sources in src_dir: (outcome, detail). A device with
    several runs (DTPU: one a configuration) stops at the first that fails."""
    import signal
    dev = dev or DEVICES[DEVICE]
    runs = _builds(dev, first, seed)
    code = (
        "import json\n"
        "from pathlib import Path\n"
        "from tb.core import simtools\n"
        "for name, env, defs in %r:\n"
        "    n, f = simtools.run_fixture('icarus', name, [Path(p) for p in %r], %r,"
        " %r, env, includes=[Path(%r)], defines=defs)\n"
        "    print('MUTANT_RESULT', json.dumps([name, n, f]), flush=True)\n"
        "    if n == 0 or f:\n"
        "        break\n"
    ) % (runs, [str(p) for p in _sources(src_dir, dev)], dev.top, dev.tb_module, str(src_dir))
    # a fresh build: the copied sources keep their modification times, so a build folder
    # of an earlier mutant could look up to date
    for name, _, _ in runs:
        shutil.rmtree(REPO / "sim_build" / f"icarus-{name}", ignore_errors=True)
    t0 = time.time()
    # the simulator imports tools.mutate_tb: the cocotb runner hands the simulator this
    # process's module search path, where `-c` puts '' (the simulator's own folder), so the repository
    # goes in by PYTHONPATH; its own session: on a timeout the whole group (python, vvp) ends
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, cwd=REPO, env=env, start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return "killed", f"timeout after {timeout:.0f} s (hang)"
    res = [json.loads(x) for x in re.findall(r"MUTANT_RESULT (\[.*\])", out)]
    if not res:
        return "error", out[-800:]
    name, n, f = res[-1]
    where = f" [{name[len(_BUILD) + 1:]}]" if len(runs) > 1 else ""
    if n == 0:
        errs = re.findall(r"^\S*(?:Error|error)[^\n]{0,160}", out, re.M)
        crash = f": {errs[-1]}" if errs else ""
        return "killed", f"the simulation ended without a result (crash{crash}){where}"
    if f:
        why = re.findall(r"AssertionError: ([^\n]{0,160})", out) or re.findall(r"(SimTimeoutError[^\n]{0,120})", out)
        return "killed", (why[0] if why else "regression failed") + where + f" ({time.time() - t0:.0f} s)"
    if len(res) < len(runs):
        return "error", out[-800:]
    return "survived", f"{time.time() - t0:.0f} s"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=tuple(DEVICES), default=DEVICE,
                    help=f"the stand-in to mutate (default {DEVICE}; make mutate DEVICE=...)")
    ap.add_argument("-n", type=int, default=int(os.environ.get("MUTANTS", "40") or 40),
                    help="mutants to sample (default 40, MUTANTS=n)")
    ap.add_argument("--seed", type=int, default=int(os.environ.get("MUTATE_SEED", "1") or 1))
    ap.add_argument("--all", action="store_true", help="every mutant (hours)")
    ap.add_argument("--timeout", type=float, default=None,
                    help="wall-clock bound per mutant, s (default ethos-u85 900, dtpu 300)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--lint", action="store_true",
                    help="run verilator --lint-only -Wall on each mutant first: a mutant with a warning is "
                         "'lint' (the project's lint refuses it; e.g. a widened sign extension that is "
                         "truncated again), not run and not scored")
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip the first run on the unmutated sources (it must pass)")
    ap.add_argument("--only", default="", help="comma-separated mutant ids to run")
    ap.add_argument("--report", default=None,
                    help="JSON report (default sim_build/mutate_report.json; dtpu: mutate_report_dtpu.json)")
    args = ap.parse_args(argv)
    dev = DEVICES[args.device]
    timeout = dev.timeout if args.timeout is None else args.timeout
    report = Path(args.report or REPO / "sim_build" / dev.report)

    # a snapshot of the sources: edits made while the run goes on do not mix in
    tmp_root = Path(tempfile.mkdtemp(prefix="mutate-"))
    base = tmp_root / "base"
    shutil.copytree(dev.rtl, base)
    all_m = [m for f in dev.datapath for m in sites(base / f, dev)]
    if args.only:
        want = set(args.only.split(","))
        chosen = [m for m in all_m if m.id in want]
    elif args.all:
        chosen = all_m
    else:
        chosen = random.Random(args.seed).sample(all_m, min(args.n, len(all_m)))
    label = "" if dev.name == DEVICE else f" {dev.name}"
    print(f"mutate{label}: {len(all_m)} mutants in {len(dev.datapath)} datapath files; running {len(chosen)}")
    if args.list:
        for m in chosen:
            print(m.id)
        shutil.rmtree(tmp_root, ignore_errors=True)
        return 0
    if not shutil.which("iverilog"):
        print("mutate: iverilog not found", file=sys.stderr)
        return 2
    results = []
    counts = {"killed": 0, "lint": 0, "survived": 0, "stillborn": 0, "error": 0, "equivalent": 0}
    try:
        work = tmp_root / "src"
        if not args.no_baseline:
            # the unmutated sources must pass, else every mutant would count as killed
            shutil.copytree(base, work)
            outcome, detail = run_one(work, dev.first(dev.datapath[0]), timeout, args.seed, dev)
            if outcome != "survived":
                print(f"mutate: the unmutated stand-in fails the fast regression ({outcome}: {detail}); "
                      f"no mutant run", file=sys.stderr)
                return 2
            print(f"mutate: the unmutated stand-in passes the fast regression ({detail})", flush=True)
        for i, m in enumerate(chosen, 1):
            if work.exists():
                shutil.rmtree(work)
            shutil.copytree(base, work)
            apply(work, m)
            if not _compiles(work, dev):
                outcome, detail = "stillborn", "does not compile"
            elif args.lint and (why := _lint(work, dev)):
                outcome, detail = "lint", why
            else:
                outcome, detail = run_one(work, dev.first(m.file), timeout, args.seed, dev)
                if outcome == "survived" and m.key in dev.equivalent:
                    outcome, detail = "equivalent", dev.equivalent[m.key]
            counts[outcome] += 1
            results.append(dict(id=m.id, outcome=outcome, detail=detail))
            print(f"[{i}/{len(chosen)}] {m.id}: {outcome} - {detail}", flush=True)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)
        for name, _, _ in _builds(dev):
            shutil.rmtree(REPO / "sim_build" / f"icarus-{name}", ignore_errors=True)
            (REPO / "sim_build" / f".icarus-{name}.lock").unlink(missing_ok=True)
    scored = counts["killed"] + counts["survived"]
    rate = counts["killed"] / scored if scored else 1.0
    print(f"\nmutate: {counts['killed']} killed by the regression, {counts['lint']} refused by the lint, "
          f"{counts['survived']} survived, {counts['equivalent']} equivalent, {counts['stillborn']} stillborn, "
          f"{counts['error']} errors; regression kill rate {100 * rate:.1f} % of the {scored} "
          f"non-equivalent mutants that compiled and passed the lint")
    for r in results:
        if r["outcome"] in ("survived", "error"):
            print(f"  {r['outcome']}: {r['id']}")
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps(dict(counts=counts, kill_rate=rate, results=results), indent=1))
    print(f"mutate: report {report}")
    return 0 if counts["error"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
