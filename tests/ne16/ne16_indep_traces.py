#!/usr/bin/env python3
"""Acceptance-style NE16 traces, written independently of the TLM.

    python -m tests.ne16.ne16_indep_traces            # (re)write tests/ne16/traces/independent/
    python -m tests.ne16.ne16_indep_traces --check    # exit 1 if a file on disk is out of date

Each trace is what a host following pulp-nnx (or the GAP SDK kernels) does: SOFT_CLEAR, ACQUIRE
read (job ID expected), the 24 job registers written in order, TRIGGER, ``wait_irq`` on the
end-of-job event, STATUS / RUNNING_JOB read, and the output memory checked (with guard bytes
on both sides). Register programming follows pulp-nnx ``ne16_task.c`` (strides, subtile
counters with remainders never 0, PADDING, pre-offset input pointer, stride-2x2 re-tiling)
or the GAP SDK ``CNN_BasicKernels_NE16.c`` (full remainder 0, input remainder = output
remainder + 2, PADDING.BOTTOM/RIGHT counted from 5 pixels), as re-implemented here from the
digest's facts. Expected memory comes from ``ne16_indep_ref`` (which does not import
``tlm.ne16``); only the register *table* (offsets, field positions, checked against the seed
by test_ne16_registers.py) is taken from ``tlm.ne16.registers``.
"""
from __future__ import annotations

import argparse
import math
import sys
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from tests.ne16 import ne16_indep_ref as ref
from tlm.core.trace import TraceWriter
from tlm.ne16 import registers as R
from tools import genfiles

OUT = Path(__file__).resolve().parent / "traces" / "independent"
L1 = 0x10000000          # GAP9 cluster L1 (TCDM, 128 KiB); every trace stays inside it
GUARD = 16               # guard bytes checked on both sides of every output
GUARD_BYTE = 0xA5
STATUS_EMPTY = 0
STATUS_SLOT = (R.field("STATUS", "STATUS0").mask, R.field("STATUS", "STATUS1").mask)
STATUS_FULL = STATUS_SLOT[0] | STATUS_SLOT[1]
ACQUIRE_FULL = 0xFFFFFFFF         # EXT hwpe-ctrl: -1, all contexts busy

OFF = R.OFFSETS
CFG = R.by_name("CONFIG0")


def _enc(reg: str, **fields) -> int:
    return R.by_name(reg).encode(**fields)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _last(a: int, b: int) -> int:
    """pulp-nnx nnx_calculate_last_tile_size: never 0."""
    return (a - 1) % b + 1


# ---- layers --------------------------------------------------------------------------------
@dataclass
class Layer:
    name: str
    seed: int
    kind: str = "3x3"                 # "3x3", "dw", "1x1", "linear"
    h_in: int = 1
    w_in: int = 1
    k_in: int = 16
    k_out: int = 16
    stride: int = 1
    pad: tuple = (0, 0, 0, 0)         # top, bottom, left, right
    pad_value: int = 0
    qw: int = 8
    offset: "int | None" = None       # layer-wise weight offset; None: -(2**(qw-1)) (pulp-nnx)
    offset_bit: int = 1               # CONFIG0.WEIGHT_OFFS
    in_bits: int = 8
    quantize: bool = True
    out_bits: int = 8
    norm_bits: int = 8
    bias: bool = False
    channel_shift: bool = False
    relu: bool = False
    streamin: bool = False
    rect_bit: "int | None" = None     # CONFIG0.QUANT_RECT override (raw outputs)
    rounding_bit: int = 0
    style: str = "pulpnnx"            # "pulpnnx" or "gapsdk"
    linear_mode_bits: int = 3         # FILTER_MODE programmed with LINEAR (GAP SDK: 11)
    scale_max: "int | None" = None
    shift: "int | None" = None        # global RIGHT_SHIFT; None: from the output's spread
    # filled by make()
    data: dict = field(default_factory=dict)

    @property
    def woff(self) -> int:
        return -(1 << (self.qw - 1)) if self.offset is None else self.offset

    @property
    def h_out(self) -> int:
        k = 1 if self.kind in ("1x1", "linear") else 3
        return (self.h_in + self.pad[0] + self.pad[1] - k) // self.stride + 1

    @property
    def w_out(self) -> int:
        k = 1 if self.kind in ("1x1", "linear") else 3
        return (self.w_in + self.pad[2] + self.pad[3] - k) // self.stride + 1


def make(L: Layer) -> Layer:
    """Random logical tensors (seeded) and the expected output from the independent reference."""
    rng = np.random.default_rng(L.seed)
    ib = L.in_bits
    if L.kind == "linear":
        x = rng.integers(0, 1 << ib, size=(L.k_in,))
        stored = rng.integers(0, 1 << L.qw, size=(L.k_out, L.k_in))
    else:
        x = rng.integers(0, 1 << ib, size=(L.h_in, L.w_in, L.k_in))
        k = 1 if L.kind == "1x1" else 3
        stored = rng.integers(0, 1 << L.qw, size=(L.k_out, 1 if L.kind == "dw" else L.k_in, k, k))
    w = stored + L.woff
    if L.kind == "linear":
        acc = ref.linear(x, w)
    else:
        acc = ref.conv(x, w, depthwise=L.kind == "dw", stride=L.stride, pad=L.pad,
                       pad_value=L.pad_value)
    sin = None
    if L.streamin:
        sin = rng.integers(-(1 << 20), 1 << 20, size=acc.shape)
        acc = acc + sin
    d = dict(x=x, stored=stored, w=w, streamin=sin)
    if L.quantize:
        smax = L.scale_max or ((1 << L.norm_bits) - 1)
        scale = rng.integers(1, smax + 1, size=(L.k_out,))
        bias = rng.integers(-(1 << 22), 1 << 22, size=(L.k_out,)) if L.bias else None
        pre = ref.normalize(acc, scale, bias)
        std = float(np.std(pre.astype(np.float64))) or 1.0
        g = int(min(31, max(0, math.ceil(math.log2(std / (1 << (L.out_bits - 1)))))))
        g = g if L.shift is None else L.shift
        shift = rng.integers(max(0, g - 3), min(31, g + 3) + 1, size=(L.k_out,)) \
            if L.channel_shift else g
        d.update(scale=scale, bias=bias, shift=shift)
        out = ref.norm_quant(acc, scale=scale, bias=bias, shift=shift, relu=L.relu,
                             out_bits=L.out_bits)
    else:
        out = ref.norm_quant(acc, quantize=False)
    d["out"] = out
    L.data = d
    return L


# ---- memory --------------------------------------------------------------------------------
class Alloc:
    def __init__(self, base: int):
        self.p = base

    def take(self, n: int, align: int = 4) -> int:
        self.p = (self.p + align - 1) // align * align
        a, self.p = self.p, self.p + n
        return a


@dataclass
class Placed:
    layer: Layer
    x: int
    w: int
    out: int
    out_bytes: bytes
    scale: int = 0
    shift: int = 0
    bias: int = 0
    blobs: list = field(default_factory=list)       # (addr, bytes) to load
    fills: list = field(default_factory=list)       # (addr, len, byte)


def place(L: Layer, base: int, out: "int | None" = None, load_streamin: bool = True) -> Placed:
    """Lay the layer's tensors out from `base` (the output at `out` if given)."""
    d = L.data
    a = Alloc(base)
    ib, ob = L.in_bits, L.out_bits
    xb = ref.to_bytes(d["x"], ib)
    if L.kind == "linear":
        wb = ref.encode_linear(d["stored"] - 0, L.qw)
    else:
        wb = ref.encode_bitplanes(d["stored"], L.qw, depthwise=L.kind == "dw",
                                  cin_subtile=8 if ib == 16 else 16)
    obytes = ref.to_bytes(d["out"], ob if L.quantize else 32)
    x = a.take(len(xb))
    w = a.take(len(wb))
    if out is None:
        a.take(GUARD)
        out = a.take(len(obytes))
        a.take(GUARD)
    p = Placed(L, x, w, out, obytes)
    p.blobs += [(x, xb), (w, wb)]
    if L.streamin and load_streamin:
        p.blobs.append((out, ref.to_bytes(d["streamin"], 32)))
        p.fills += [(out - GUARD, GUARD, GUARD_BYTE), (out + len(obytes), GUARD, GUARD_BYTE)]
    elif not L.streamin:
        p.fills.append((out - GUARD, len(obytes) + 2 * GUARD, GUARD_BYTE))
    if L.quantize:
        sb = ref.to_bytes(d["scale"], L.norm_bits)
        p.scale = a.take(len(sb))
        p.blobs.append((p.scale, sb))
        if L.channel_shift:
            hb = ref.to_bytes(d["shift"], 8)
            p.shift = a.take(len(hb))
            p.blobs.append((p.shift, hb))
        if L.bias:
            bb = ref.to_bytes(d["bias"], 32)
            p.bias = a.take(len(bb))
            p.blobs.append((p.bias, bb))
    return p


def expected_window(p: Placed) -> tuple:
    g = bytes([GUARD_BYTE]) * GUARD
    return p.out - GUARD, g + p.out_bytes + g


# ---- register programming (pulp-nnx / GAP SDK recipes) -------------------------------------
def config0(L: Layer) -> int:
    fm = {"3x3": 0, "dw": 1, "1x1": 2, "linear": L.linear_mode_bits}[L.kind]
    qb = {8: 0, 16: 1, 32: 2}[L.out_bits if L.quantize else 32]
    rect = (0 if L.relu else 1) if L.rect_bit is None else L.rect_bit
    v = dict(QWM1=L.qw - 1, MODE16=int(L.in_bits == 16), STREAMOUT=int(L.quantize),
             FILTER_MODE=fm, LINEAR=int(L.kind == "linear"), STRIDED_2X2=int(L.stride == 2),
             ROUNDING=L.rounding_bit, STREAMIN=int(L.streamin), WEIGHT_OFFS=L.offset_bit,
             QUANT_BITS=qb, QUANT_RECT=rect)
    if L.quantize:
        shift = 0 if L.channel_shift else int(L.data["shift"])
        v.update(NORM_BITS={8: 0, 16: 1, 32: 2}[L.norm_bits], RIGHT_SHIFT=shift,
                 NORM_SHIFT=int(L.channel_shift), NORM_BIAS=int(L.bias))
    return CFG.encode(**v)


def job_regs(p: Placed, *, infeat: int, outfeat: int, h_out: int, w_out: int,
             pad: tuple, out_d1: int, out_d2: int, bottom_for_rem: "int | None" = None,
             right_for_rem: "int | None" = None) -> dict:
    """The 24 job registers of one job (by register name)."""
    L = p.layer
    ib, ob = L.in_bits // 8, (L.out_bits if L.quantize else 32) // 8
    kib = L.k_in * ib                                   # §9: MODE16 counts Ki in bytes
    wd0u = 1 if L.in_bits == 16 else 2
    n_ki = _ceil(kib, 16)
    t, b, l, r = pad
    regs = dict(WEIGHTS_PTR=p.w, INFEAT_PTR=infeat, OUTFEAT_PTR=outfeat, SCALE_PTR=p.scale,
                SCALE_SHIFT_PTR=p.shift, SCALE_BIAS_PTR=p.bias, FILTER_MASK=0,
                WEIGHT_OFFSET=L.woff & 0xFFFFFFFF, CONFIG0=config0(L))
    if L.kind == "linear":                               # GAP SDK SetupNE16Job
        d1 = L.qw * L.k_in // 8
        regs.update(INFEAT_D0_STRIDE=16, INFEAT_D1_STRIDE=0, INFEAT_D2_STRIDE=0,
                    OUTFEAT_D0_STRIDE=ob * 8, OUTFEAT_D1_STRIDE=ob * L.k_out,
                    OUTFEAT_D2_STRIDE=ob * L.k_out,
                    WEIGHTS_D0_STRIDE=L.k_in // 8, WEIGHTS_D1_STRIDE=d1, WEIGHTS_D2_STRIDE=32 * d1)
        rem_ki = (L.k_in % 256) // 16 or 16
        regs.update(SUBTILE_REM0=_enc("SUBTILE_REM0", KO=_last(L.k_out, 32), KI=rem_ki),
                    SUBTILE_REM1=_enc("SUBTILE_REM1", HO=1, WO=1), SUBTILE_REM2=0,
                    SUBTILE_NB0=_enc("SUBTILE_NB0", KO=_ceil(L.k_out, 32), KI=_ceil(L.k_in, 256)),
                    SUBTILE_NB1=_enc("SUBTILE_NB1", HO=1, WO=1), PADDING=0)
        return regs
    tpo = 16 if L.kind == "dw" else 32
    one = L.kind == "1x1"
    if one:
        wd0, wd1 = wd0u * L.qw, wd0u * L.qw * n_ki
    elif L.kind == "dw":
        wd0, wd1 = 9 * wd0u, 0
    else:
        wd0, wd1 = 9 * wd0u, 9 * wd0u * L.qw * n_ki
    regs.update(INFEAT_D0_STRIDE=kib, INFEAT_D1_STRIDE=kib * L.w_in,
                OUTFEAT_D1_STRIDE=out_d1, OUTFEAT_D2_STRIDE=out_d2,
                WEIGHTS_D0_STRIDE=wd0, WEIGHTS_D1_STRIDE=wd1, WEIGHTS_D2_STRIDE=0)
    if L.style == "pulpnnx":
        rho, rwo = _last(h_out, 3), _last(w_out, 3)
        bb = b if bottom_for_rem is None else bottom_for_rem
        rhi = (rho if one else rho + 2) - bb
        rwi = (rwo if one else rwo + 2) - (r if right_for_rem is None else right_for_rem)
        regs.update(INFEAT_D2_STRIDE=0, OUTFEAT_D0_STRIDE=32,
                    SUBTILE_REM0=_enc("SUBTILE_REM0", KO=_last(L.k_out, tpo), KI=_last(kib, 16)),
                    SUBTILE_REM1=_enc("SUBTILE_REM1", HO=rho, WO=rwo),
                    SUBTILE_REM2=_enc("SUBTILE_REM2", HI=rhi, WI=rwi),
                    PADDING=_enc("PADDING", TOP=t, RIGHT=r, BOTTOM=b, LEFT=l,
                                 VALUE=L.pad_value))
    else:                                                # GAP SDK NE16 kernels
        rho, rwo = h_out % 3, w_out % 3
        if one:
            rhi, rwi, pb, pr = rho, rwo, 0, 0
        else:
            rhi, rwi = (rho + 2 if rho else 0), (rwo + 2 if rwo else 0)
            if L.kind == "dw":
                pr = (5 - rwi if rwi else 0) + r
                pb = (5 - rhi if rhi else 0) + b
            else:
                pr = ((5 - rwi if rwi else 0) + r) if r else 0
                pb = ((5 - rhi if rhi else 0) + b) if b else 0
        regs.update(INFEAT_D2_STRIDE=25 * kib,
                    OUTFEAT_D0_STRIDE={1: 0, 2: 16, 4: 32}[ob],
                    SUBTILE_REM0=_enc("SUBTILE_REM0", KO=L.k_out % tpo or tpo, KI=kib % 16 or 16),
                    SUBTILE_REM1=_enc("SUBTILE_REM1", HO=rho, WO=rwo),
                    SUBTILE_REM2=_enc("SUBTILE_REM2", HI=rhi, WI=rwi),
                    PADDING=_enc("PADDING", TOP=t, RIGHT=pr, BOTTOM=pb, LEFT=l,
                                 VALUE=L.pad_value))
    regs.update(SUBTILE_NB0=_enc("SUBTILE_NB0", KO=_ceil(L.k_out, tpo), KI=n_ki),
                SUBTILE_NB1=_enc("SUBTILE_NB1", HO=_ceil(h_out, 3), WO=_ceil(w_out, 3)))
    return regs


def jobs_for(p: Placed) -> list:  # noqa: C901
    """Register sets of every job the host offloads for this layer."""
    L = p.layer
    ib, ob = L.in_bits // 8, (L.out_bits if L.quantize else 32) // 8
    w_in_stride = L.k_in * ib
    h_in_stride = L.w_in * w_in_stride
    w_out_stride = L.k_out * ob
    h_out_stride = L.w_out * w_out_stride
    t, b, l, r = L.pad
    infeat = p.x - (t * L.w_in + l) * w_in_stride        # ne16_pad_addr
    if L.stride == 1:
        return [job_regs(p, infeat=infeat, outfeat=p.out, h_out=L.h_out, w_out=L.w_out,
                         pad=L.pad, out_d1=w_out_stride, out_d2=h_out_stride)]
    # pulp-nnx ne16_task_set_dims_stride2x2 + ne16_nnx_dispatch_stride2x2
    assert L.kind in ("3x3", "dw", "1x1") and L.style == "pulpnnx"
    kh = kw = 1 if L.kind == "1x1" else 3
    h_out, w_out = L.h_out, L.w_out
    pb_rem = 0 if L.h_in + t >= 5 else b
    pb_new = 0 if (L.h_in + t - kh) % 2 == 0 else b
    pr_new = 0 if (L.w_in + l - kw) % 2 == 0 else r
    n_h, n_w = _ceil(h_out, 2), _ceil(w_out, 2)
    ih_off, iw_off = (2 if h_out % 2 else 0), (2 if w_out % 2 else 0)
    oh_off, ow_off = (1 if h_out % 2 else 0), (1 if w_out % 2 else 0)
    jobs = []
    for i in range(n_h):
        for j in range(n_w):
            inp = infeat + (i * 4 - (ih_off if i else 0)) * h_in_stride \
                + (j * 4 - (iw_off if j else 0)) * w_in_stride
            outp = p.out + (i * 2 - (oh_off if i else 0)) * h_out_stride \
                + (j * 2 - (ow_off if j else 0)) * w_out_stride
            tp = (t if i == 0 else 0, pb_new if i == n_h - 1 else 0,
                  l if j == 0 else 0, pr_new if j == n_w - 1 else 0)
            jobs.append(job_regs(p, infeat=inp, outfeat=outp,
                                 h_out=3 if h_out > 1 else 1, w_out=3 if w_out > 1 else 1,
                                 pad=tp, out_d1=w_out_stride >> 1, out_d2=h_out_stride >> 1,
                                 bottom_for_rem=pb_rem, right_for_rem=0))
    return jobs


# ---- trace assembly ------------------------------------------------------------------------
class Script:
    """A host program recorded as a trace."""

    def __init__(self, comment: str):
        self.w = TraceWriter("ne16", "ne16")
        self.w.comment(comment)
        self.next_id = 0

    def soft_clear(self) -> None:
        self.w.write_reg(OFF["SOFT_CLEAR"], 0)
        self.next_id = 0

    def load(self, p: Placed) -> None:
        for a, n, v in p.fills:
            self.w.fill_mem(a, n, v)
        for a, blob in p.blobs:
            self.w.load_mem(a, blob)

    def offload(self, regs: dict, trigger: int = 0, readback: bool = False) -> int:
        jid = self.next_id
        self.w.read_reg(OFF["ACQUIRE"], jid)
        self.next_id = (self.next_id + 1) & 0xFF
        for r in R.JOB_REGS:
            self.w.write_reg(r.offset, regs[r.name])
        if readback:
            self.w.read_reg(OFF["CONFIG0"], regs["CONFIG0"])
            self.w.read_reg(OFF["WEIGHT_OFFSET"], regs["WEIGHT_OFFSET"])
        self.w.write_reg(OFF["TRIGGER"], trigger)
        return jid

    def done(self, last_id: int) -> None:
        """After the last event: queue empty, RUNNING_JOB = the last job run (seed)."""
        self.w.read_reg(OFF["STATUS"], STATUS_EMPTY)
        self.w.read_reg(OFF["RUNNING_JOB"], last_id)

    def check(self, p: Placed) -> None:
        self.w.check_mem(*expected_window(p))

    def run_layer(self, p: Placed, readback: bool = False) -> None:
        """Offload every job of a layer keeping at most two in flight (pulp-nnx dispatch:
        a job is acquired only when the queue has room), one wait_irq per job."""
        jobs = jobs_for(p)
        inflight = 0
        last = None
        for k, regs in enumerate(jobs):
            if inflight == 2:
                self.w.read_reg(OFF["STATUS"], STATUS_FULL)
                self.w.read_reg(OFF["ACQUIRE"], ACQUIRE_FULL)
                self.w.wait_irq()
                inflight -= 1
            last = self.offload(regs, readback=readback and k == 0)
            inflight += 1
        for _ in range(inflight):
            self.w.wait_irq()
        self.done(last)
        self.check(p)


def single(comment: str, L: Layer, base: int, readback: bool = False,
           clear: bool = True) -> Script:
    s = Script(comment)
    if clear:
        s.soft_clear()
    p = place(make(L), base)
    s.load(p)
    s.run_layer(p, readback=readback)
    return s


# ---- the traces ----------------------------------------------------------------------------
def scripts() -> dict:
    S = {}
    S["conv3x3_l1_relu_bias"] = single(
        "3x3 conv, pulp-nnx flow: 7x8x20 -> 7x8x40, padding 1, Qw 8 offset -128 (CONFIG0 bit 15),\n"
        "scale u8, bias, ReLU, uint8 out; input at the very start of L1 (pre-offset pointer\n"
        "below 0x10000000)",
        Layer("a", 101, kind="3x3", h_in=7, w_in=8, k_in=20, k_out=40, pad=(1, 1, 1, 1),
              bias=True, relu=True), L1, readback=True)
    S["dw3x3_gapsdk_padvalue_low"] = single(
        "3x3 depthwise, GAP SDK remainders (full 0, Hi=Ho+2, PADDING counted from 5), padding\n"
        "value 7 on all borders, Qw 8, bias, int8 out, low addresses",
        Layer("b", 102, kind="dw", h_in=5, w_in=7, k_in=20, k_out=20, pad=(1, 1, 1, 1),
              pad_value=7, bias=True, style="gapsdk"), 0x400)
    S["conv1x1_int8_l1"] = single(
        "1x1 conv 4x7x40 -> 4x7x33, Qw 8, scale u8, no bias, int8 out (no ReLU), GAP9 L1",
        Layer("c", 103, kind="1x1", h_in=4, w_in=7, k_in=40, k_out=33), L1 + 0x4000)
    # Qw sweep: one job per Qw, alternating modes, IDs 0..7 (ACQUIRE counts per acquire)
    s = Script("weight widths Qw 1..8 (layer-wise offset -(2**(Qw-1))), one job each,\n"
               "job IDs 0..7, RUNNING_JOB follows")
    s.soft_clear()
    base = L1 + 0x8000
    for qw in range(1, 9):
        kind = ["1x1", "3x3", "dw"][qw % 3]
        L = make(Layer(f"q{qw}", 200 + qw, kind=kind, h_in=4, w_in=5, k_in=18,
                       k_out=18 if kind == "dw" else 35, pad=(0, 0, 0, 0) if kind == "1x1"
                       else (1, 0, 0, 1), qw=qw, bias=qw % 2 == 0, relu=qw % 2 == 1,
                       style="pulpnnx" if qw < 5 else "gapsdk"))
        p = place(L, base)
        base = (base + 0x1000)
        s.load(p)
        s.run_layer(p)
    S["qw_sweep"] = s
    S["linear_gapsdk_norm16"] = single(
        "linear (fully connected) 288 -> 40, GAP SDK SetupNE16Job programming (FILTER_MODE 11\n"
        "with LINEAR, In D0 16, Ki remainder in 16-channel groups), Qw 4, scale u16, bias, int8",
        Layer("d", 104, kind="linear", k_in=288, k_out=40, qw=4, norm_bits=16, bias=True,
              style="gapsdk"), L1 + 0x4100)
    S["linear_mode00_relu_out32"] = single(
        "linear 64 -> 20 with FILTER_MODE 00 and LINEAR, Qw 8, scale u8, ReLU, 32-bit outputs",
        Layer("d2", 105, kind="linear", k_in=64, k_out=20, relu=True, out_bits=32,
              linear_mode_bits=0, style="gapsdk"), 0x2000)
    S["stride2_pulpnnx_tiles"] = single(
        "3x3 stride 2 as pulp-nnx offloads it: one job per 2x2 output block (output D1/D2\n"
        "halved, padding per tile), 9x7x17 -> 5x4x24, padding 1, at most two jobs in flight\n"
        "(STATUS full, ACQUIRE refused while full)",
        Layer("e", 106, kind="3x3", h_in=9, w_in=7, k_in=17, k_out=24, stride=2,
              pad=(1, 1, 1, 1), bias=True), L1 + 0x8100)
    S["conv1x1_stride2_pulpnnx"] = single(
        "1x1 stride 2 as pulp-nnx offloads it (its test set has one): one job per 2x2 output\n"
        "block over a 3x3 window, 6x7x14 -> 3x4x24, int8",
        Layer("e3", 108, kind="1x1", h_in=6, w_in=7, k_in=14, k_out=24, stride=2),
        L1 + 0x4000)
    S["dw_stride2_pulpnnx"] = single(
        "3x3 depthwise stride 2 (pulp-nnx tiles), 6x8x32, padding top/left 1, ReLU uint8",
        Layer("e2", 107, kind="dw", h_in=6, w_in=8, k_in=32, k_out=32, stride=2,
              pad=(1, 0, 1, 0), relu=True), L1 + 0x100)
    S["out32_norm32_channel_shift"] = single(
        "3x3 conv, 32-bit outputs (OUTFEAT D0 32), scale u32, per-channel shift (NORM_SHIFT),\n"
        "bias, no ReLU (signed saturation)",
        Layer("f", 108, kind="3x3", h_in=4, w_in=4, k_in=16, k_out=36, pad=(1, 1, 1, 1),
              out_bits=32, norm_bits=32, scale_max=4095, bias=True, channel_shift=True),
        L1 + 0x4100)
    S["dw_norm16_shift_relu"] = single(
        "3x3 depthwise, scale u16, per-channel shift, ReLU uint8, GAP SDK style",
        Layer("k", 109, kind="dw", h_in=6, w_in=4, k_in=24, k_out=24, pad=(1, 1, 1, 1),
              norm_bits=16, channel_shift=True, relu=True, style="gapsdk"), 0x6000)
    S["raw32_then_streamin"] = _streamin_pair()
    S["streamin_quant32"] = single(
        "STREAMIN of int32 accumulators from OUTFEAT_PTR, then quantisation to 32-bit outputs in\n"
        "the same buffer: 1x1 conv 3x3x16 -> 3x3x12, scale u8, bias, no ReLU",
        Layer("g2", 121, kind="1x1", h_in=3, w_in=3, k_in=16, k_out=12, out_bits=32,
              bias=True, streamin=True), L1 + 0x8100)
    S["mode16_conv3x3"] = single(
        "MODE16: uint16 inputs (strides and Ki counts in bytes, weight D0 unit 1), 3x3 conv\n"
        "5x5x12 -> 5x5x20, padding 1, Qw 8, scale u8, bias, int8",
        Layer("h", 110, kind="3x3", h_in=5, w_in=5, k_in=12, k_out=20, pad=(1, 1, 1, 1),
              in_bits=16, bias=True), L1 + 0x8100)
    S["mode16_conv1x1_gapsdk"] = single(
        "MODE16 1x1 conv (GAP SDK remainders), 3x4x20 -> 3x4x16, Qw 6, ReLU uint8",
        Layer("h2", 111, kind="1x1", h_in=3, w_in=4, k_in=20, k_out=16, qw=6,
              in_bits=16, relu=True, style="gapsdk"), 0x8000)
    S["symmetric_offset0"] = single(
        "CONFIG0 bit 15 = 0 (symmetric) with WEIGHT_OFFSET 0: unsigned weights as stored",
        Layer("j", 112, kind="1x1", h_in=3, w_in=3, k_in=16, k_out=8, qw=3, offset=0,
              offset_bit=0), L1 + 0x100)
    S["rounding_bit_set"] = single(
        "CONFIG0 bit 11 set (RTL: rounding disabled) and a positive 9-bit offset: truncating\n"
        "shift as with bit 11 = 0 (digest §9)",
        Layer("m", 113, kind="3x3", h_in=3, w_in=3, k_in=8, k_out=8, pad=(1, 1, 1, 1), qw=5,
              offset=100, rounding_bit=1), L1 + 0x1100)
    S["asym_pad_pulpnnx"] = single(
        "3x3 conv 8x5x14 -> 7x4x25 with padding top 0, bottom 1, left 1, right 0 (pulp-nnx\n"
        "test_0 shape), no soft clear first",
        Layer("l", 114, kind="3x3", h_in=8, w_in=5, k_in=14, k_out=25, pad=(0, 1, 1, 0)),
        L1 + 0x2100, clear=False)
    S["commit_without_trigger"] = _commit_no_trigger()
    S["poll_status_completion"] = _poll_completion()
    S["offset_bit15_clear"] = single(
        "CONFIG0 bit 15 = 0 but WEIGHT_OFFSET = -128 with pulp-nnx weights (stored = w + 128):\n"
        "the offset is applied as the open RTL and the GAP9 simulator do (bit 15 gates nothing)",
        Layer("p", 140, kind="3x3", h_in=4, w_in=4, k_in=16, k_out=16, pad=(1, 1, 1, 1),
              offset_bit=0, bias=True), L1 + 0x8100)
    S["norm32_wide_product"] = single(
        "scale u32 over the full range: acc*scale beyond 48 bits, exact as in the digest (int64),\n"
        "pulp-nnx's functional model and the GAP9 simulator; 32-bit signed outputs saturate",
        Layer("q", 141, kind="1x1", h_in=3, w_in=3, k_in=32, k_out=16, out_bits=32,
              norm_bits=32), L1 + 0xA100)
    S["relu_out32_saturates"] = single(
        "ReLU with 32-bit outputs and shift 0, scale u32 below 2**20: values above 2**32-1\n"
        "saturate to"
        "0xFFFFFFFF (unsigned saturation, as the GAP9 simulator clips), negatives give 0",
        Layer("r", 142, kind="1x1", h_in=2, w_in=3, k_in=64, k_out=8, out_bits=32,
              norm_bits=32, scale_max=(1 << 20) - 1, relu=True, shift=0), 0x9000)
    S["out16_seed_reading"] = single(
        "QUANT_BITS 16 (seed; broken in the open RTL): int16 outputs, HWC, D0 32, no ReLU",
        Layer("s", 143, kind="3x3", h_in=3, w_in=4, k_in=16, k_out=20, pad=(1, 1, 1, 1),
              out_bits=16, bias=True), L1 + 0x100)
    S["out16_gapsdk_d0_16"] = single(
        "QUANT_BITS 16 as the GAP SDK kernels program it (OUTFEAT D0 16): int16 outputs, HWC,\n"
        "ReLU uint16, 3x3 conv 4x5x16 -> 4x5x40",
        Layer("t", 144, kind="3x3", h_in=4, w_in=5, k_in=16, k_out=40, pad=(1, 1, 1, 1),
              out_bits=16, relu=True, style="gapsdk"), L1 + 0x2100)
    return S


def _streamin_pair() -> Script:
    """Ki split over two jobs: raw 32-bit accumulators (QUANT_RECT 0 as pulp-nnx leaves it),
    then STREAMIN of those accumulators from the output buffer plus the second Ki half."""
    s = Script("Ki tiling with STREAMIN: job 0 writes raw int32 accumulators of Ki 0..15 (CONFIG0\n"
               "STREAMOUT 0, QUANT_BITS 32, QUANT_RECT left 0); job 1 streams them in from\n"
               "OUTFEAT_PTR and adds Ki 16..27; the output is the raw full-Ki convolution")
    s.soft_clear()
    full = make(Layer("g", 120, kind="3x3", h_in=4, w_in=5, k_in=28, k_out=40,
                      pad=(1, 1, 1, 1), quantize=False, rect_bit=0))
    x, st = full.data["x"], full.data["stored"]
    a = replace(full, k_in=16)
    b = replace(full, k_in=12, streamin=True, rect_bit=1, style="gapsdk")
    a.data = dict(full.data, x=x[:, :, :16], stored=st[:, :16])
    b.data = dict(full.data, x=x[:, :, 16:], stored=st[:, 16:])
    base = L1 + 0x100
    acc = base + 0x6000                                 # one accumulator buffer for both jobs
    pa = place(a, base, out=acc)
    pb = place(b, base + 0x2000, out=acc, load_streamin=False)
    s.load(pa)
    s.load(pb)
    j0 = s.offload(jobs_for(pa)[0])
    s.w.wait_irq()
    s.done(j0)
    j1 = s.offload(jobs_for(pb)[0])
    s.w.wait_irq()
    s.done(j1)
    s.check(pb)
    return s


def _poll_completion() -> Script:
    """pulp-nnx's resolve loop without the event: poll STATUS until the queue is empty."""
    s = Script("completion by polling (no wait_irq): two jobs in flight, poll_reg STATUS until\n"
               "0, then RUNNING_JOB is the last job and both outputs are checked")
    s.soft_clear()
    A = place(make(Layer("u", 150, kind="1x1", h_in=3, w_in=3, k_in=20, k_out=20, qw=7)),
              L1 + 0x8100)
    B = place(make(Layer("v", 151, kind="3x3", h_in=3, w_in=3, k_in=8, k_out=12,
                         pad=(1, 1, 1, 1), relu=True)), L1 + 0xA100)
    s.load(A)
    s.load(B)
    s.offload(jobs_for(A)[0])
    jb = s.offload(jobs_for(B)[0])
    s.w.poll_reg(OFF["STATUS"], STATUS_EMPTY, STATUS_FULL)
    s.done(jb)
    s.check(A)
    s.check(B)
    return s


def _commit_no_trigger() -> Script:
    """TRIGGER non-0 commits job 0 without starting it; job 1's TRIGGER 0 starts both."""
    s = Script("commit without trigger: job 0 committed with TRIGGER 1 (STATUS0 = enqueued,\n"
               "nothing runs), job 1 committed with TRIGGER 0; both run in order, one event each")
    s.soft_clear()
    A = place(make(Layer("n", 130, kind="3x3", h_in=3, w_in=6, k_in=16, k_out=16,
                         pad=(1, 1, 1, 1), relu=True, bias=True)), L1 + 0x4100)
    B = place(make(Layer("o", 131, kind="1x1", h_in=2, w_in=5, k_in=24, k_out=40, qw=4,
                         style="gapsdk")), L1 + 0x6100)
    s.load(A)
    s.load(B)
    j0 = s.offload(jobs_for(A)[0], trigger=1)
    s.w.read_reg(OFF["STATUS"], STATUS_SLOT[0])
    s.w.read_reg(OFF["RUNNING_JOB"], 0)
    s.w.check_mem(A.out - GUARD, bytes([GUARD_BYTE]) * (len(A.out_bytes) + 2 * GUARD))
    j1 = s.offload(jobs_for(B)[0], trigger=0)
    assert (j0, j1) == (0, 1)
    s.w.read_reg(OFF["STATUS"], STATUS_FULL)
    s.w.wait_irq()
    s.w.wait_irq()
    s.done(j1)
    s.check(A)
    s.check(B)
    return s


# ---- files ---------------------------------------------------------------------------------
def write_all(root: Path) -> list:
    out = []
    for name, s in scripts().items():
        out.append(s.w.save(root / name))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only check the files are current")
    a = ap.parse_args(argv)
    if a.check:
        with tempfile.TemporaryDirectory() as tmp:
            write_all(Path(tmp))
            if OUT.is_dir() and genfiles.same_tree(Path(tmp), OUT):
                return 0
        print(f"ne16_indep_traces: {OUT} is out of date", file=sys.stderr)
        return 1
    for p in write_all(OUT):
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
