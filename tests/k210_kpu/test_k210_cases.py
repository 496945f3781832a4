"""Random single layers through the register path (tables in system memory, the input in KPU
RAM, twelve writes to layer_argument_fifo, the interrupt, KPU RAM and fifo_data_out read
back) against the reference of test_k210_reference.py.

``random_case`` draws a layer with every arithmetic field random inside the 36-bit ALU
range and an activation table whose 16 segments split the layer's own batch-norm outputs,
so every segment is used; ``run_case`` runs it on a trace target. Other files import them.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import pytest

from tests.k210_kpu import test_k210_reference as ref
from tlm.k210_kpu import convert
from tlm.k210_kpu.device import AI_IO_BASE_ADDR
from tlm.k210_kpu.layout import Fmap
from tlm.k210_kpu.registers import (
    OFFSET,
    POOL_TYPES,
    LayerArgument,
    encode_activation,
    encode_batchnorm,
    irq_bits,
    reg_value,
    words_to_bytes,
)
from tlm.k210_kpu.trace_target import K210TraceTarget

SEED = int(os.environ.get("K210_SEED", "20261125"))
WEIGHTS_AT, BN_AT, ACT_AT = 0x80010000, 0x80030000, 0x80040000


@dataclass
class Case:
    x: np.ndarray
    w: np.ndarray
    depthwise: bool
    eight_bit: bool
    pad_value: int
    arg_x: int
    shr_x: int
    arg_w: int
    shr_w: int
    arg_add: int
    bn: dict
    act: dict
    pool: int
    la: LayerArgument
    expect: np.ndarray
    segments: np.ndarray          # histogram of the activation segments used
    load_act: int = 1


def _bounded(rng, lim: int, top: int) -> int:
    lim = max(0, min(lim, top))
    return int(rng.integers(-lim, lim + 1))


def random_case(rng, kernel=3, depthwise=False, pool=0, eight_bit=True, c_in=3, c_out=4, h=8,
                w=8, src=0, dst=None, load_act=1, send_data_out=1) -> Case:
    k = kernel
    c_out = c_in if depthwise else c_out
    wmax = 255 if eight_bit else 65535
    x = rng.integers(0, 256, (c_in, h, w)).astype(np.uint8)
    wt = rng.integers(0, wmax + 1, (c_out, 1 if depthwise else c_in, k, k))
    n_ic = 1 if depthwise else c_in
    taps = k * k * n_ic
    pad_value = int(rng.integers(0, 256))
    shr_x, shr_w = int(rng.integers(0, 16)), int(rng.integers(0, 16))
    arg_x = _bounded(rng, (1 << 32 << shr_x) // (taps * 255), (1 << 23) - 1)
    arg_w = _bounded(rng, (1 << 32 << shr_w) // (taps * wmax), (1 << 23) - 1)
    arg_add = _bounded(rng, (1 << 32) // n_ic, (1 << 39) - 1)
    acc_max = taps * 255 * wmax + 3 * (1 << 32)
    shift = rng.integers(0, 16, c_out)
    mul = np.array([_bounded(rng, (1 << 33 << int(s)) // acc_max, (1 << 23) - 1) for s in shift])
    add = rng.integers(-(1 << 31), 1 << 31, c_out)
    bn = dict(norm_mul=mul, norm_shift=shift, norm_add=add)
    acc = ref.conv_acc(x, wt, depthwise, pad_value, arg_x, shr_x, arg_w, shr_w, arg_add)
    v = ref.batchnorm(acc, mul, shift, add)
    # 16 segments: x_start[0] = -2**35, the others at quantiles of v (every segment used)
    xs = np.empty(16, np.int64)
    xs[0] = -(1 << 35)
    q = np.quantile(v.ravel(), np.linspace(0, 1, 17)[1:16], method="lower").astype(np.int64)
    xs[1:] = q - rng.integers(0, 2, 15)          # some starts equal a v: "v > x_start" is strict
    xs[1:] = np.maximum.accumulate(xs[1:])
    ym = rng.integers(-(1 << 15), 1 << 15, 16)
    sh = rng.integers(0, 48, 16)
    sh[rng.integers(0, 16)] = int(rng.integers(48, 256))           # a shift past 47
    ties = rng.integers(1, 16, 3)
    ym[ties], sh[ties] = 1, 1                                       # exact halves happen
    bi = rng.integers(0, 256, 16)
    act = dict(x_start=xs, y_mul=ym, shift_number=sh, result_bias=bi)
    expect, _, _ = ref.layer(x, wt, depthwise, pad_value, arg_x, shr_x, arg_w, shr_w, arg_add,
                             bn, act, pool, load_act)
    segs = np.bincount(ref.segment(v, xs).ravel(), minlength=16)
    geo = convert.geometry((c_in, h, w), c_out, k, depthwise, pool, eight_bit, src=src,
                           dst=dst if dst is not None else src + Fmap.packed(0, c_in, h, w).lines)
    la = LayerArgument.from_fields(geo, pad_value=pad_value, arg_x=arg_x, shr_x=shr_x, arg_w=arg_w,
                                   shr_w=shr_w, arg_add=arg_add, int_en=1, load_act=load_act,
                                   send_data_out=send_data_out, para_start_addr=WEIGHTS_AT,
                                   bwsx_base_addr=BN_AT, active_addr=ACT_AT)
    return Case(x, wt, depthwise, eight_bit, pad_value, arg_x, shr_x, arg_w, shr_w, arg_add, bn,
                act, pool, la, expect, segs, load_act)


def ram_image(m: Fmap, data: np.ndarray) -> "tuple[int, bytes]":
    """(KPU RAM byte offset, bytes) placing data [C, H, W] with the reference's formula."""
    c, h, w = data.shape
    addr = {}
    for ci in range(c):
        for y in range(h):
            for x in range(w):
                addr[ref.kpu_address(m.base, ci, y, x, m.group, m.row_switch, m.channel_switch)] = data[ci, y, x]
    lo, hi = min(addr), max(addr) + 1
    buf = bytearray(hi - lo)
    for a, v in addr.items():
        buf[a - lo] = int(v)
    return lo, bytes(buf)


def src_map(la: LayerArgument) -> Fmap:
    return Fmap(la.image_src_addr, la.i_ch_num + 1, la.i_col_high + 1, la.i_row_wid + 1,
                la.coef_group, la.row_switch_addr, la.channel_switch_addr)


def dst_map(la: LayerArgument) -> Fmap:
    return Fmap(la.image_dst_addr, la.o_ch_num + 1, la.o_col_high + 1, la.o_row_wid + 1,
                la.wb_group, la.wb_row_switch_addr, la.wb_channel_switch_addr)


def read_ram_map(t, m: Fmap, shape) -> np.ndarray:
    c, h, w = shape
    out = np.zeros(shape, np.uint8)
    lo = ref.kpu_address(m.base, 0, 0, 0, m.group, m.row_switch, m.channel_switch)
    hi = ref.kpu_address(m.base, c - 1, h - 1, w - 1, m.group, m.row_switch, m.channel_switch) + 1
    raw = t.read_mem(AI_IO_BASE_ADDR + lo, hi - lo)
    for ci in range(c):
        for y in range(h):
            a = ref.kpu_address(m.base, ci, y, 0, m.group, m.row_switch, m.channel_switch) - lo
            out[ci, y] = np.frombuffer(raw[a:a + w], np.uint8)
    return out


def load_case(t, case: Case) -> None:
    wdt = "<u1" if case.eight_bit else "<u2"
    t.load_mem(WEIGHTS_AT, case.w.astype(wdt).tobytes())
    t.load_mem(BN_AT, words_to_bytes(encode_batchnorm(case.bn["norm_mul"], case.bn["norm_shift"],
                                                      case.bn["norm_add"])))
    t.load_mem(ACT_AT, words_to_bytes(encode_activation(case.act["x_start"], case.act["y_mul"],
                                                        case.act["shift_number"], case.act["result_bias"])))
    lo, img = ram_image(src_map(case.la), case.x)
    t.load_mem(AI_IO_BASE_ADDR + lo, img)


def run_case(case: Case, t=None) -> "tuple[np.ndarray, bytes, K210TraceTarget]":
    """Run on a trace target: (output read from KPU RAM, output stream, target)."""
    t = t or K210TraceTarget()
    load_case(t, case)
    t.write_reg(OFFSET["eight_bit_mode"], reg_value("eight_bit_mode", eight_bit_mode=int(case.eight_bit)))
    t.write_reg(OFFSET["interrupt_mask"], reg_value("interrupt_mask", layer_cfg_almost_empty_int=1,
                                                    layer_cfg_almost_full_int=1))
    for wd in case.la.words:
        t.write_reg(OFFSET["layer_argument_fifo"], wd)
    assert t.wait_irq(1), "calc_done not raised"
    assert t.read_reg(OFFSET["interrupt_status"]) == irq_bits(calc_done_int=1)
    out = read_ram_map(t, dst_map(case.la), case.expect.shape)
    n = case.expect.size
    stream = b"".join(t.read_reg(OFFSET["fifo_data_out"]).to_bytes(8, "little")
                      for _ in range(math.ceil(n / 8))) if case.la.send_data_out else b""
    return out, stream, t


def check(case: Case, label: str) -> None:
    out, stream, t = run_case(case)
    faults = t.faults()
    assert not faults, f"{label}: {faults}"
    assert np.array_equal(out, case.expect), \
        f"{label}: KPU RAM output differs at {np.argwhere(out != case.expect)[:3].tolist()}"
    if case.la.send_data_out:
        n = case.expect.size
        assert stream[:n] == case.expect.tobytes(), f"{label}: fifo_data_out stream differs"
        assert stream[n:] == bytes(len(stream) - n), f"{label}: stream padding not zero"


# ---- tests ------------------------------------------------------------------------------------
@pytest.mark.parametrize("pool", sorted(POOL_TYPES))
@pytest.mark.parametrize("kernel,depthwise", [(1, False), (3, False), (1, True), (3, True)])
def test_every_pool_kernel_depthwise_8bit(pool, kernel, depthwise):
    seed = SEED + 97 * pool + 7 * kernel + depthwise
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    h, w = (8, 12) if POOL_TYPES[pool].size < 4 else (12, 16)
    case = random_case(rng, kernel, depthwise, pool, True, c_in=3, c_out=5, h=h, w=w)
    check(case, f"pool {POOL_TYPES[pool].name} k{kernel} dw{int(depthwise)} seed {seed}")


@pytest.mark.parametrize("kernel,depthwise,pool", [(3, False, 1), (1, False, 0), (3, True, 2),
                                                   (1, True, 9), (3, False, 7)])
def test_16bit_weights(kernel, depthwise, pool):
    seed = SEED + 1000 + 13 * kernel + pool + depthwise
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    case = random_case(rng, kernel, depthwise, pool, False, c_in=4, c_out=3, h=8, w=8)
    check(case, f"16-bit k{kernel} dw{int(depthwise)} pool {pool} seed {seed}")


@pytest.mark.parametrize("w,h", [(4, 4), (16, 6), (17, 5), (32, 4), (33, 4), (64, 4), (65, 4),
                                 (130, 4)])
def test_widths_cover_every_line_layout(w, h):
    """coef_group 4/2/1, row_switch 1..3: the KPU RAM layout by width (seed formulas)."""
    seed = SEED + 3 * w + h
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    case = random_case(rng, 3, False, 0, True, c_in=5, c_out=6, h=h, w=w, src=17)
    check(case, f"{w}x{h} seed {seed}")


def test_every_activation_segment_used():
    """The random cases' tables put batch-norm outputs in all 16 segments."""
    used = np.zeros(16, np.int64)
    for i in range(6):
        rng = np.random.default_rng(SEED + 5000 + i)
        case = random_case(rng, 3, bool(i % 2), 0, bool(i % 3), c_in=2, c_out=2, h=8, w=8)
        check(case, f"segments seed {SEED + 5000 + i}")
        used += case.segments
    print(f"seeds {SEED + 5000}..{SEED + 5005}: segment use {used.tolist()}")
    assert (used > 0).all()


def test_random_mix():
    """Random shapes, positions, weight modes and pool types (seed printed)."""
    rng = np.random.default_rng(SEED + 7)
    print(f"seed {SEED + 7}")
    for n in range(12):
        pool = int(rng.choice(sorted(POOL_TYPES)))
        dw = bool(rng.integers(0, 2))
        case = random_case(rng, int(rng.choice([1, 3])), dw, pool, bool(rng.integers(0, 2)),
                           c_in=int(rng.integers(1, 7)), c_out=int(rng.integers(1, 7)),
                           h=int(rng.integers(4, 13)) * 4, w=int(rng.integers(1, 20)) * 4,
                           src=int(rng.integers(0, 4000)), dst=int(rng.integers(8000, 20000)))
        check(case, f"mix #{n} seed {SEED + 7}")


def test_load_act_zero_gives_zeros():
    """Seed: load_act must be 1; with 0 the output is all 0."""
    rng = np.random.default_rng(SEED + 11)
    case = random_case(rng, 3, False, 1, True, load_act=0)
    assert not case.expect.any()
    check(case, "load_act 0")


def test_first_stride_keeps_even_positions():
    """first_stride = 1 (MC reg_desc: only rows/columns 0, 2, 4... used): the 3x3 outputs at
    even positions, pool bypass (the model's reading; an open question in the docs)."""
    rng = np.random.default_rng(SEED + 12)
    case = random_case(rng, 3, False, 0, True, c_in=2, c_out=3, h=10, w=12)
    full = case.expect
    geo = convert.geometry((2, 10, 12), 3, 3, False, 0, True, first_stride=1, src=0, dst=100)
    la = case.la.replace(**{k: v for k, v in geo.items() if k not in ("image_src_addr",)})
    case.la = la
    case.expect = full[:, ::2, ::2].copy()
    check(case, "first_stride")


@pytest.mark.parametrize("eight_bit", [True, False], ids=["w8", "w16"])
def test_multiple_weight_loads(eight_bit):
    """o_ch_num_coef < output channels: load_time + 1 weight loads of para_size bytes."""
    seed = SEED + 21 + eight_bit
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    case = random_case(rng, 3, False, 2, eight_bit, c_in=64, c_out=70, h=4, w=6)
    assert case.la.load_time >= 1 and case.la.o_ch_num_coef + 1 < 70
    check(case, f"loads seed {seed}")


def test_unsorted_segment_starts():
    """x_start need not ascend: the segment is the highest index whose start v exceeds."""
    seed = SEED + 23
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    case = random_case(rng, 3, False, 0, True, c_in=3, c_out=4, h=8, w=8)
    a = case.act
    order = np.concatenate([[0], rng.permutation(np.arange(1, 16))])
    for k in ("x_start", "y_mul", "shift_number", "result_bias"):
        a[k] = np.asarray(a[k])[order]
    v = ref.batchnorm(ref.conv_acc(case.x, case.w, False, case.pad_value, case.arg_x, case.shr_x,
                                   case.arg_w, case.shr_w, case.arg_add),
                      case.bn["norm_mul"], case.bn["norm_shift"], case.bn["norm_add"])
    case.expect = ref.pool(ref.activation(v, a["x_start"], a["y_mul"], a["shift_number"],
                                          a["result_bias"]), 0)
    assert len(np.unique(ref.segment(v, a["x_start"]))) >= 3
    check(case, f"unsorted seed {seed}")
