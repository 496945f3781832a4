"""NPU_OP_ELEMENTWISE (TRM 3.10.6): every binary and unary mode, scalar and broadcast
operands, IFM/IFM2 input scaling, shifts, division, compares, bitwise ops, LeakyReLU via
IFM2_SCALE, LUT activation, chaining; hand-computed cases, fast path against the literal
per-element loop (``elementwise_ref``), the TRM asserts, and end-to-end Vela networks."""
from __future__ import annotations

import numpy as np
import pytest

from tests.ethos_u85.support.opbench import REGION_BASE, OpBench, clean, e2e, e2e_names, unlayout, unpredictable
from tlm.ethos_u85.memory import Channel
from tlm.ethos_u85.ops import KERNEL_OPS
from tlm.ethos_u85.ops.elementwise import MODES, UNARY, elementwise_ref

REF_OPS = dict(KERNEL_OPS, NPU_OP_ELEMENTWISE=elementwise_ref)
M = {v: k for k, v in MODES.items()}          # name -> elementwise_mode


def ew_bench(a, b=None, *, out_dtype=None, shape=None, zp=0, zp2=0, ofm_zp=0, sa=(1, 0), sb=(1, 0),
             so=(1, 0), ofm_round=1, bm=0, bm2=0, scalar=None, clip=True, acc_format=0, ifm2_dtype=None):
    """A one-op bench. A unary mode (b None) leaves the IFM2 registers as they are, as Vela
    does (reset values), unless ifm2_dtype programs an IFM2 of that type (stale state)."""
    a = np.asarray(a)
    shape = shape or a.shape
    out_dtype = np.dtype(out_dtype or a.dtype)
    bb = OpBench()
    if bm == 8:
        bb.fmap("IFM", shape=(1, 1, 1), dtype=a.dtype, region=1, zp=zp, storage="none")
    else:
        bb.fmap("IFM", a, region=1, zp=zp)
    if bm2 == 8:
        bb.fmap("IFM2", shape=(1, 1, 1), dtype=a.dtype, region=3, zp=zp2, storage="none")
    elif b is not None:
        bb.fmap("IFM2", np.asarray(b), region=3, zp=zp2)
    elif ifm2_dtype is not None:                   # unary: another op's IFM2 left behind
        bb.fmap("IFM2", shape=(1, 1, 1), dtype=ifm2_dtype, region=3, zp=zp2)
    bb.fmap("OFM", shape=shape, dtype=out_dtype, region=2)
    if not clip:
        bb.set("NPU_SET_ACTIVATION", activation_function=0, table=0, activation_clip_range=1)
    bb.set("NPU_SET_OFM_ZERO_POINT", zero_point=ofm_zp & 0xFFFF)
    bb.set("NPU_SET_IFM_SCALE", scale=sa[0], shift=sa[1], round_mode=0, dbl_rnd=0)
    bb.set("NPU_SET_IFM2_SCALE", scale=sb[0], shift=sb[1], round_mode=0, dbl_rnd=0)
    bb.ofm_scale(so[0], so[1], ofm_round)
    bb.set("NPU_SET_IFM_BROADCAST", broadcast_mode=bm)
    bb.set("NPU_SET_IFM2_BROADCAST", broadcast_mode=bm2)
    if scalar is not None:
        bb.set("NPU_SET_OP_SCALAR", scalar=scalar)
    bb.acc(acc_format=acc_format)
    return bb


def run_ew(bb, mode, **kw):
    d = bb.run("NPU_OP_ELEMENTWISE", elementwise_mode=M[mode] if isinstance(mode, str) else mode, **kw)
    return d


A8 = np.array([[[-128, -5, 0, 7]], [[100, 127, -1, 3]]], np.int8)        # [2, 1, 4]
B8 = np.array([[[3, 5, -2, 7]], [[-100, 1, -1, 2]]], np.int8)


# =========================================================================== hand-computed
@pytest.mark.parametrize("mode, want", [
    ("add", A8.astype(int) + B8),
    ("sub", A8.astype(int) - B8),
    ("mul", A8.astype(int) * B8),
    ("min", np.minimum(A8, B8)),
    ("max", np.maximum(A8, B8)),
    ("cmp_eq", np.where(A8 == B8, -1, 0)),
    ("cmp_ne", np.where(A8 != B8, -1, 0)),
    ("cmp_ge", np.where(A8 >= B8, -1, 0)),
    ("cmp_gt", np.where(A8 > B8, -1, 0)),
    ("and", A8.astype(int) & B8),
    ("or", A8.astype(int) | B8),
    ("xor", A8.astype(int) ^ B8),
    ("and_not", A8.astype(int) & ~B8.astype(int)),
])
def test_binary_modes_int8_to_int32(mode, want):
    bb = ew_bench(A8, B8, out_dtype=np.int32, clip=False)
    clean(run_ew(bb, mode))
    assert np.array_equal(bb.output(), want)


@pytest.mark.parametrize("mode, want", [
    ("abs", np.abs(A8.astype(int))),
    ("not", ~A8.astype(int)),
    ("clz", np.array([[[0, 0, 32, 29]], [[25, 25, 0, 30]]])),
])
def test_unary_modes(mode, want):
    bb = ew_bench(A8, out_dtype=np.int32, clip=False)
    clean(run_ew(bb, mode))
    assert np.array_equal(bb.output(), want)


def test_add_with_zero_points_input_scales_and_saturation():
    a = np.array([[[10, 200, 0, 255]]], np.uint8)
    b = np.array([[[1, 2, 3, 4]]], np.int8)          # same precision (b8), different signedness
    # scale_a: x * (1<<30) >> 29 = 2x; scale_b: x * 3 >> 1 (round half up, double_symmetric)
    bb = ew_bench(a, b, out_dtype=np.uint8, zp=100, zp2=-2, sa=(1 << 30, 29), sb=(3, 1), ofm_zp=50)
    clean(run_ew(bb, "add"))
    av = 2 * (a.astype(int) - 100)
    bv = np.floor((b.astype(int) + 2) * 3 / 2 + 0.5).astype(int)
    assert np.array_equal(bb.output(), np.clip(av + bv + 50, 0, 255))


def test_mul_global_scale_and_rounding():
    a = np.array([[[3, -3, 7, -7]]], np.int8)
    b = np.array([[[1, 1, 1, 1]]], np.int8)
    # (a*b) * 1 >> 1 with natural rounding: 1.5 -> 2, -1.5 -> -1, 3.5 -> 4, -3.5 -> -3
    bb = ew_bench(a, b, so=(1, 1), ofm_round=1)
    clean(run_ew(bb, "mul"))
    assert bb.output().ravel().tolist() == [2, -1, 4, -3]
    bb = ew_bench(a, b, so=(1, 1), ofm_round=3)       # symmetric: away from zero
    clean(run_ew(bb, "mul"))
    assert bb.output().ravel().tolist() == [2, -2, 4, -4]


def test_lrelu_uses_ifm2_scale_for_negative_inputs():
    a = np.array([[[-8, -6, -1, 0, 5, 100]]], np.int8)
    # positive: x*1, negative: x * 1 >> 2 (alpha 1/4, round half up)
    bb = ew_bench(a, sa=(1, 0), sb=(1, 2))
    clean(run_ew(bb, "lrelu"))
    assert bb.output().ravel().tolist() == [-2, -1, 0, 0, 5, 100]


# ---- unary modes have no IFM2 (E-14): no IFM2 assert, lrelu's scale_b by the IFM's type
def _rshr(x, shift):
    """TRM rounded_shift_right, double_symmetric, dbl_rnd 0 (numpy, from the TRM text):
    R = 1 << (shift-1), plus (acc >= 0) or minus (acc < 0) 1 << 30 when shift > 31."""
    x = np.asarray(x, np.int64)
    if shift == 0:
        return x
    d = (1 << 30) if shift > 31 else 0
    return (x + np.where(x >= 0, (1 << (shift - 1)) + d, (1 << (shift - 1)) - d)) >> shift


def _clz32(v):
    v = np.asarray(v, np.int64) & 0xFFFFFFFF
    return np.array([32 - int(x).bit_length() for x in v.ravel()]).reshape(v.shape)


@pytest.mark.parametrize("ifm2", [None, np.int32, np.uint16, np.int8])
@pytest.mark.parametrize("mode", ["lrelu", "abs", "clz", "not"])
def test_unary_modes_do_not_depend_on_ifm2_precision(mode, ifm2):
    """IFM2_PRECISION never programmed (reset value) or left by another op with another
    precision/type: the unary op runs (no UNPREDICTABLE) and gives the TRM result
    (numpy reference: scale_a / scale_b with the IFM's int16 type)."""
    a = np.array([[[-32768, -1000, -7, -1, 0, 1, 9, 32767]]], np.int16)
    sa, sb = (3, 1), (5, 4)
    bb = ew_bench(a, out_dtype=np.int32, clip=False, sa=sa, sb=sb, ifm2_dtype=ifm2)
    clean(run_ew(bb, mode))
    x = a.astype(np.int64)
    ax = _rshr(x * sa[0], sa[1])
    want = {"lrelu": np.where(x >= 0, ax, _rshr(x * sb[0], sb[1])), "abs": np.abs(ax),
            "clz": _clz32(ax), "not": ~ax}[mode]
    assert np.array_equal(bb.output(), want)


def test_int16_lrelu_as_vela_programs_it_is_bit_exact():
    """The headline bug: Vela 5.2 compiles an int16 LEAKY_RELU (SEANet leaky_relu1) to
    NPU_OP_ELEMENTWISE lrelu with IFM_SCALE (identity multiplier) and IFM2_SCALE (alpha),
    and never programs IFM2_PRECISION. The model used to assert IFM/IFM2 precision
    equality, log UNPREDICTABLE and skip the op (OFM = IFM in place). Every int16 value,
    registers of that stream, against the TRM arithmetic in numpy."""
    a = np.arange(-32768, 32768, dtype=np.int64).astype(np.int16).reshape(256, 1, 256)
    sa, sb = (1350044032, 30), (1620052864, 32)
    bb = ew_bench(a, sa=sa, sb=sb, so=(1, 0), ofm_round=0, acc_format=1)
    bb.set("NPU_SET_IFM_SCALE", scale=sa[0], shift=sa[1], round_mode=0, dbl_rnd=0)
    bb.set("NPU_SET_IFM2_SCALE", scale=sb[0], shift=sb[1], round_mode=0, dbl_rnd=0)
    clean(run_ew(bb, "lrelu"))
    x = a.astype(np.int64)
    want = np.clip(np.where(x >= 0, _rshr(x * sa[0], sa[1]), _rshr(x * sb[0], sb[1])), -32768, 32767)
    got = bb.output()
    assert np.array_equal(got, want), np.flatnonzero(got != want)[:5]
    assert not np.array_equal(got, a)                 # not the identity it used to be


def test_binary_mode_with_scalar_ifm2_still_asserts_precision():
    """A scalar IFM2 is an operand (scale_b reads IFM2_PRECISION), so the assert stays."""
    a = np.zeros((1, 1, 4), np.int16)
    bb = ew_bench(a, bm2=8, scalar=3)
    bb.set("NPU_SET_IFM2_PRECISION", activation_type=1, activation_precision=0, activation_format=0,
           activation_storage=3)
    bb.run("NPU_OP_ELEMENTWISE", elementwise_mode=M["add"])
    assert any("IFM2_PRECISION" in w for w in unpredictable(bb.dev))


def test_shifts():
    a = np.array([[[-7, 7, 64, -128]]], np.int8)
    sh = np.array([[[1, 1, 3, 7]]], np.int8)
    bb = ew_bench(a, sh, out_dtype=np.int32, clip=False, ofm_round=1)
    clean(run_ew(bb, "shr"))                              # natural rounding: -3.5 -> -3, 3.5 -> 4
    assert bb.output().ravel().tolist() == [-3, 4, 8, -1]
    bb = ew_bench(a, sh, out_dtype=np.int32, clip=False, ofm_round=5)
    clean(run_ew(bb, "shr"))                              # truncate to lower
    assert bb.output().ravel().tolist() == [-4, 3, 8, -1]
    bb = ew_bench(a, sh, out_dtype=np.int32, clip=False)
    clean(run_ew(bb, "shl"))                              # masked to the 8-bit IFM width (E-16)
    assert bb.output().ravel().tolist() == [(-14) & 0xFF, 14, 0, 0]
    bb = ew_bench(a, sh, out_dtype=np.int32, clip=False)
    clean(run_ew(bb, "lshr"))                             # logical: the 8-bit pattern, unsigned
    assert bb.output().ravel().tolist() == [(-7 & 0xFF) >> 1, 3, 8, 1]


def test_int32_div_and_shift_amount_masking():
    a = np.array([[[7, -7, 100, -2147483648]]], np.int32)
    b = np.array([[[2, 2, -3, 7]]], np.int32)
    bb = ew_bench(a, b, clip=False)
    clean(run_ew(bb, "div"))
    assert bb.output().ravel().tolist() == [3, -3, -33, -306783378]
    bb = ew_bench(a, np.array([[[33, 1, 32, 31]]], np.int32), clip=False)
    clean(run_ew(bb, "shr"))                              # shift & 31
    assert bb.output().ravel().tolist() == [4, -3, 100, -1]


def test_div_by_zero_is_unpredictable():
    a = np.array([[[7]]], np.int32)
    bb = ew_bench(a, np.array([[[0]]], np.int32), clip=False)
    run_ew(bb, "div")
    assert any("div: b != 0" in w for w in unpredictable(bb.dev))


def test_int32_mul_keeps_64_bit_product_for_shift_only_rescale():
    a = np.array([[[1 << 20, -(1 << 20), 123456, 7]]], np.int32)
    b = np.array([[[1 << 20, 1 << 19, -654321, 3]]], np.int32)
    bb = ew_bench(a, b, so=(12345, 16), ofm_round=5, clip=False)     # scale is ignored (shift only)
    clean(run_ew(bb, "mul"))
    want = (a.astype(object) * b.astype(object)) // (1 << 16)
    assert bb.output().ravel().tolist() == [int(v) for v in want.ravel()]


def test_uint16_mul_needs_zero_point_32768():
    a = np.array([[[32768, 40000, 1000]]], np.uint16)
    b = np.array([[[32770, 32768, 32769]]], np.uint16)
    bb = ew_bench(a, b, out_dtype=np.int32, zp=32768, zp2=32768, clip=False)
    clean(run_ew(bb, "mul"))
    assert bb.output().ravel().tolist() == [0, 0, (1000 - 32768) * 1]
    bb = ew_bench(a, b, out_dtype=np.int32, zp=0, zp2=0, clip=False)
    run_ew(bb, "mul")
    assert any("zero points of 32768" in w for w in unpredictable(bb.dev))


def test_int16_add_with_acc48_and_31_bit_ofm_scale():
    # Vela programs int16 ADD with acc_format i48 and a 31-bit OFM_SCALE (the TRM's int16 scale
    # assert is only applied to per-channel scales; see tlm/ops/common.py)
    a = np.array([[[1000, -1000, 32767, -32768]]], np.int16)
    b = np.array([[[1, 2, 3, 4]]], np.int16)
    bb = ew_bench(a, b, so=(1 << 30, 30), acc_format=1)
    clean(run_ew(bb, "add"))
    assert bb.output().ravel().tolist() == [1001, -998, 32767, -32764]


# =========================================================================== scalars, broadcast
def test_ifm2_scalar_subtracts_its_zero_point():
    a = np.array([[[1, 2, 3]]], np.int8)
    bb = ew_bench(a, bm2=8, scalar=57, zp2=3)
    d = clean(run_ew(bb, "add"))
    assert bb.output().ravel().tolist() == [55, 56, 57]
    assert Channel.rd_ifm_stream not in {t.channel for t in d.memory.log}


def test_ifm_scalar_minus_tensor():
    b = np.array([[[1, 2, 3]]], np.int8)
    bb = ew_bench(np.zeros((1, 1, 1), np.int8), b, shape=(1, 1, 3), bm=8, scalar=10)
    clean(run_ew(bb, "sub"))
    assert bb.output().ravel().tolist() == [9, 8, 7]


def test_both_scalar_is_unpredictable():
    bb = ew_bench(np.zeros((1, 1, 1), np.int8), shape=(1, 1, 3), bm=8, bm2=8, scalar=1)
    run_ew(bb, "add")
    assert any("both be scalar" in w for w in unpredictable(bb.dev))


@pytest.mark.parametrize("bm2", range(8))
def test_ifm2_broadcast_modes(bm2):
    rng = np.random.default_rng(bm2)
    a = rng.integers(-50, 50, size=(3, 4, 5)).astype(np.int8)
    shp = (1 if bm2 & 1 else 3, 1 if bm2 & 2 else 4, 1 if bm2 & 4 else 5)
    b = rng.integers(-50, 50, size=shp).astype(np.int8)
    bb = ew_bench(a, b, bm2=bm2)
    clean(run_ew(bb, "sub"))
    assert np.array_equal(bb.output(), a.astype(int) - b)


def test_ifm_broadcast_c():
    a = np.array([[[5]], [[-5]]], np.int8)                   # [2, 1, 1] broadcast along C
    b = np.arange(6, dtype=np.int8).reshape(2, 1, 3)
    bb = ew_bench(a, b, shape=(2, 1, 3), bm=4)
    clean(run_ew(bb, "add"))
    assert np.array_equal(bb.output(), a.astype(int) + b)


# =========================================================================== activation, LUT
def test_lut_s8_s8_activation():
    table = np.arange(256, dtype=np.int16)[::-1].astype(np.int8)   # index (acc+128)&255 -> 127-index
    lut = np.zeros(2048, np.uint8)
    lut[:256] = table.view(np.uint8)
    a = np.array([[[-128, 0, 1, 127]]], np.int8)
    bb = ew_bench(a, np.zeros_like(a))
    bb.set("NPU_SET_ACTIVATION", activation_function=4, table=0, activation_clip_range=0)
    bb.lut(lut.tobytes())
    clean(run_ew(bb, "add"))
    assert bb.output().ravel().tolist() == [table[0], table[128], table[129], table[255]]


# =========================================================================== asserts
def _asserting(mode, what, **kw):
    a = np.zeros((2, 2, 2), np.int8)
    bb = ew_bench(a, a, **kw.pop("bench", {}))
    for name, f in kw.pop("extra", []):
        bb.set(name, **f)
    run_ew(bb, mode)
    msgs = unpredictable(bb.dev)
    assert msgs and msgs[0].startswith("NPU_OP_ELEMENTWISE") and what in msgs[0], msgs


def test_elementwise_asserts():
    _asserting("add", "IFM2_PRECISION", extra=[("NPU_SET_IFM2_PRECISION", dict(activation_type=1,
               activation_precision=1, activation_format=0, activation_storage=0))])
    _asserting("add", "activation_reverse == none", extra=[("NPU_SET_OFM_PRECISION", dict(
        activation_type=1, activation_precision=0, activation_format=0, activation_storage=0, scale_mode=1,
        activation_reverse=1))])
    _asserting("add", "transpose must be HWC, HCW or CHW", extra=[("NPU_SET_OFM_PRECISION", dict(
        activation_type=1, activation_precision=0, activation_format=0, activation_storage=0, scale_mode=1,
        activation_transpose=1))])
    _asserting("add", "per-channel", extra=[("NPU_SET_OFM_PRECISION", dict(
        activation_type=1, activation_precision=0, activation_format=0, activation_storage=0, scale_mode=0))])
    _asserting("add", "IFM_UPSCALE", extra=[("NPU_SET_IFM_UPSCALE", dict(mode=1))])
    _asserting("div", "IFM_SCALE must be scale 1", bench=dict(sa=(2, 0)))
    bb = ew_bench(np.zeros((1, 1, 1), np.int8), np.zeros((1, 1, 1), np.int8))
    bb.run("NPU_OP_ELEMENTWISE", elementwise_mode=12)
    assert any("reserved elementwise_mode" in w for w in unpredictable(bb.dev))
    _asserting("add", "operand does not fit int16", bench=dict(bm2=8, scalar=40000))


def test_hcw_transpose_allowed():
    a = np.arange(2 * 3 * 4, dtype=np.int8).reshape(2, 3, 4)
    bb = ew_bench(a, np.zeros_like(a))
    bb.set("NPU_SET_OFM_PRECISION", activation_type=1, activation_precision=0, activation_format=0,
           activation_storage=0, scale_mode=1, activation_transpose=2)    # HCW
    bb.set("NPU_SET_OFM_STRIDE_X", addr=3)            # the memory tensor is [2, 4, 3] (after transpose):
    bb.set("NPU_SET_OFM_WIDTH0_M1", width_m1=3)       # strides and tile sizes are post-transpose
    clean(run_ew(bb, "add"))
    got = unlayout(bb.dev.memory.read(REGION_BASE[2], a.size), (2, 4, 3), np.int8, "nhwc")
    assert np.array_equal(got, a.transpose(0, 2, 1))


# =========================================================================== chaining
def _chain_ops(n, fifo_in=None, fifo_out=None, mode="add", scalar=None):
    p = []
    if fifo_in is not None:
        p += [("NPU_SET_IFM_PRECISION", dict(activation_type=1, activation_precision=0, activation_format=0,
                                             activation_storage=2)), ("NPU_SET_IFM_REGION", dict(region=fifo_in))]
    else:
        p += [("NPU_SET_IFM_PRECISION", dict(activation_type=1, activation_precision=0, activation_format=0,
                                             activation_storage=0)), ("NPU_SET_IFM_REGION", dict(region=1))]
    if scalar is not None:
        p += [("NPU_SET_IFM2_PRECISION", dict(activation_type=1, activation_precision=0, activation_format=0,
                                              activation_storage=3)),
              ("NPU_SET_IFM2_BROADCAST", dict(broadcast_mode=8)), ("NPU_SET_OP_SCALAR", dict(scalar=scalar))]
    else:
        p += [("NPU_SET_IFM2_PRECISION", dict(activation_type=1, activation_precision=0, activation_format=0,
                                              activation_storage=0)),
              ("NPU_SET_IFM2_BROADCAST", dict(broadcast_mode=0))]
    st = 2 if fifo_out is not None else 0
    p += [("NPU_SET_OFM_PRECISION", dict(activation_type=1, activation_precision=0, activation_format=0,
                                         activation_storage=st, scale_mode=1)),
          ("NPU_SET_OFM_REGION", dict(region=fifo_out if fifo_out is not None else 2)),
          ("NPU_OP_ELEMENTWISE", dict(elementwise_mode=M[mode]))]
    return p


def test_chain_of_four_elementwise_ops():
    a = (np.arange(24) % 9 - 4).astype(np.int8).reshape(2, 3, 4)
    b = (np.arange(24) % 5 - 2).astype(np.int8).reshape(2, 3, 4)
    bb = ew_bench(a, b)
    ops = _chain_ops(0, fifo_out=0) + _chain_ops(1, fifo_in=0, fifo_out=1, mode="sub") + \
        _chain_ops(2, fifo_in=1, fifo_out=2, mode="max", scalar=1) + _chain_ops(3, fifo_in=2, mode="add", scalar=-3)
    d = clean(bb.run(None, ops=ops))
    want = np.maximum((a.astype(int) + b) - b, 1) - 3
    assert np.array_equal(bb.output(), want)
    assert d.op_state.chain_length == 0 and d.chain_length == 0
    # the external-IFM limit: a third memory IFM2 in the same chain
    ops = _chain_ops(0, fifo_out=0) + _chain_ops(1, fifo_in=0, fifo_out=1) + _chain_ops(2, fifo_in=1)
    bb.run(None, ops=ops)
    assert any("more than 3 external IFMs" in w for w in unpredictable(bb.dev))


def test_chain_rules():
    a = np.zeros((2, 2, 2), np.int8)
    # a fifth operation in a chain
    bb = ew_bench(a, a)
    ops = _chain_ops(0, fifo_out=0) + _chain_ops(0, fifo_in=0, fifo_out=1) + _chain_ops(0, fifo_in=1, fifo_out=0) \
        + _chain_ops(0, fifo_in=0, fifo_out=1) + _chain_ops(0, fifo_in=1)
    bb.run(None, ops=ops)
    assert any("more than 4 operations" in w for w in unpredictable(bb.dev))
    # reading a FIFO nobody wrote in this chain
    bb = ew_bench(a, a)
    bb.run(None, ops=_chain_ops(0, fifo_in=2))
    assert any("FIFO 2 not valid" in w for w in unpredictable(bb.dev))
    # broadcast from a FIFO
    bb = ew_bench(a, a, bm=1)
    bb.run(None, ops=_chain_ops(0, fifo_out=0) + _chain_ops(0, fifo_in=0))
    assert any("broadcast is not permitted" in w for w in unpredictable(bb.dev))
    # resize and pool cannot read a chained input / be appended
    bb = ew_bench(a, a)
    bb.run(None, ops=_chain_ops(0, fifo_out=0) + [("NPU_OP_POOL", dict(pooling_mode=0))])
    assert any("cannot be appended" in w for w in unpredictable(bb.dev))


# =========================================================================== fast vs literal
def _random_case(rng):
    mode = int(rng.choice(sorted(MODES)))
    prec = int(rng.integers(0, 3))
    if prec == 0:
        dt = np.dtype(rng.choice([np.int8, np.uint8]))
    elif prec == 1:
        dt = np.dtype(rng.choice([np.int16, np.uint16]))
    else:
        dt = np.dtype(np.int32)
    if mode == M["mul"] and dt == np.uint16:
        zp = zp2 = 32768
    elif mode == M["div"] or prec == 2 or dt == np.int16:
        zp = zp2 = 0
    elif dt == np.uint16:
        zp = zp2 = int(rng.choice([0, 32768]))
    elif dt == np.uint8:
        zp, zp2 = int(rng.integers(0, 256)), int(rng.integers(0, 256))
    else:
        zp, zp2 = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
    H, W, C = (int(v) for v in rng.integers(1, 5, size=3))
    info = np.iinfo(dt)
    lo, hi = max(info.min, -(1 << 31)), min(info.max, (1 << 31) - 1)
    a = rng.integers(lo, hi + 1, size=(H, W, C), dtype=np.int64).astype(dt)
    bm = int(rng.choice([0, 0, 1, 2, 4, 7]))
    bm2 = int(rng.choice([0, 0, 3, 5, 8]))
    b_shape = tuple(1 if bm2 & bit else n for bit, n in ((1, H), (2, W), (4, C)))
    b = rng.integers(lo, hi + 1, size=b_shape, dtype=np.int64).astype(dt)
    if mode == M["div"]:
        b[b == 0] = 1
        b[b == -1] = 2
    a_shape = tuple(1 if bm & bit else n for bit, n in ((1, H), (2, W), (4, C)))
    a = a[:a_shape[0], :a_shape[1], :a_shape[2]]
    if bm2 == 8 and mode in UNARY:
        bm2 = 0
    scalar = int(rng.integers(-100, 100))
    if mode == M["div"] and scalar in (0, -1):
        scalar = 3
    if bm2 == 8 and (dt == np.uint8):
        scalar = int(rng.integers(zp2 - 100, zp2 + 100))
    scaled = mode not in (M["mul"], M["div"])
    sa = (int(rng.integers(0, 1 << 16)), int(rng.integers(0, 20))) if scaled else (1, 0)
    sb = (int(rng.integers(0, 1 << 16)), int(rng.integers(0, 20))) if scaled else (1, 0)
    so = (int(rng.integers(1, 1 << 20)), int(rng.integers(0, 40)))
    if mode == M["div"]:
        so = (1, 0)
    odt = np.dtype(rng.choice([np.int8, np.uint8, np.int16, np.int32]))
    bb = ew_bench(a, b if bm2 != 8 else None, shape=(H, W, C), out_dtype=odt, zp=zp, zp2=zp2,
                  ofm_zp=0 if mode == M["div"] else (int(rng.integers(-3, 3)) if odt != np.uint8 else 3),
                  sa=sa, sb=sb, so=so, ofm_round=int(rng.integers(0, 6)), bm=bm, bm2=bm2, scalar=scalar,
                  clip=bool(rng.integers(0, 2)) and odt != np.int32)
    return bb, mode


@pytest.mark.parametrize("seed", range(80))
def test_fast_path_matches_literal_pseudocode(seed):
    rng = np.random.default_rng(1000 + seed)
    bb, mode = _random_case(rng)
    fast = run_ew(bb, mode)
    ref = run_ew(bb, mode, kernel_ops=REF_OPS)
    uf, ur = unpredictable(fast), unpredictable(ref)
    assert uf == ur, (MODES[mode], uf, ur)
    assert np.array_equal(bb.output(fast), bb.output(ref)), (seed, MODES[mode])


@pytest.mark.parametrize("seed", range(60))
def test_result_table_matches_direct(seed, monkeypatch):
    """The result-table path (tlm.ethos_u85.ops.elementwise._by_table, forced here on small blocks)
    gives the outputs and UNPREDICTABLE reports of the direct evaluation."""
    from tlm.ethos_u85.ops import elementwise as ew

    rng = np.random.default_rng(5000 + seed)
    bb, mode = _random_case(rng)
    monkeypatch.setattr(ew, "_TABLE_MAX", 0)
    direct = run_ew(bb, mode, plans=False)              # the ordinary path
    out_direct = bb.output(direct)
    monkeypatch.setattr(ew, "_TABLE_MAX", 1 << 17)
    monkeypatch.setattr(ew, "_TABLE_MIN_ELEMENTS", 0)
    by_table, used = ew._by_table, []

    def counted(*a, **k):
        r = by_table(*a, **k)
        used.append(r is not None)
        return r

    monkeypatch.setattr(ew, "_by_table", counted)
    for _ in range(2):                                  # builds the table, then uses it
        table = run_ew(bb, mode, plans=False)           # (a plan would bypass the ordinary op)
        assert unpredictable(table) == unpredictable(direct), MODES[mode]
        assert np.array_equal(bb.output(table), out_direct), (seed, MODES[mode])
    TABLE_USES[seed] = any(used)


TABLE_USES: dict = {}


def test_result_table_path_was_exercised():
    """The cross-check above is not vacuous: the table path served a good share of its
    cases (24 of 60 when written; the rest are b32 OFMs, unary modes or wide domains)."""
    if len(TABLE_USES) < 60:
        pytest.skip("run with test_result_table_matches_direct")
    assert sum(TABLE_USES.values()) >= 15, TABLE_USES


def test_random_cases_mostly_run():
    """The random generator above produces mostly legal operations (so the cross-check is
    not vacuous)."""
    ok = 0
    for seed in range(80):
        bb, mode = _random_case(np.random.default_rng(1000 + seed))
        if not unpredictable(run_ew(bb, mode)):
            ok += 1
    assert ok >= 60


# =========================================================================== end to end
EW_NETS = e2e_names("elementwise", "concat", "pad", "transpose", "activation", "quantize", "softmax",
                    "network", exclude=("reshape_fc",))


@pytest.mark.vela
@pytest.mark.parametrize("name", EW_NETS)
def test_e2e_elementwise_networks(name):
    e2e(name)


@pytest.mark.vela
@pytest.mark.parametrize("accel", ["ethos-u85-128", "ethos-u85-512", "ethos-u85-1024", "ethos-u85-2048"])
@pytest.mark.parametrize("name", ["add_bcast_relu", "mul_const_scalar", "softmax_4x4x33", "add_int16",
                                  "leaky_relu_0p1", "logistic_int16", "unet_mini"])
def test_e2e_elementwise_other_configs(name, accel):
    e2e(name, accel)


@pytest.mark.vela
@pytest.mark.parametrize("mode", ["shared_sram", "sram_only", "separate_io"])
@pytest.mark.parametrize("name", ["classifier", "int16_net", "hard_swish"])
def test_e2e_elementwise_memory_modes(name, mode):
    e2e(name, mode=mode)
