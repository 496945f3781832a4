"""Every computation call of the guide on the chip model, against bm1880_ref (formulas written
from the guide) with random cases (seeds printed), plus hand-computed cases."""
import numpy as np
import pytest

from tests.bm1880 import bm1880_ref as ref
from tests.bm1880.bm1880_harness import I8, U8, Rig, rng_for, values
from tlm.bm1880 import (CTRL_NULL, CTRL_RA, CTRL_RELU, CTRL_TP, BmkError, bmk1880_gdma_copy_gmem,
                        bmk1880_gdma_copy_lmem, bmk1880_gdma_load, bmk1880_gdma_load_stride, bmk1880_gdma_lrn_shift,
                        bmk1880_gdma_store,
                        bmk1880_gdma_store_stride, bmk1880_tl_prealloc, bmk1880_tpu_add, bmk1880_tpu_add_const,
                        bmk1880_tpu_and_int8, bmk1880_tpu_and_int16, bmk1880_tpu_arith_shift, bmk1880_tpu_avg_pooling,
                        bmk1880_tpu_conv, bmk1880_tpu_copy, bmk1880_tpu_copy_with_stride, bmk1880_tpu_depthwise,
                        bmk1880_tpu_lut, bmk1880_tpu_mac, bmk1880_tpu_mac_const, bmk1880_tpu_matrix_mac,
                        bmk1880_tpu_matrix_mac_2, bmk1880_tpu_max, bmk1880_tpu_max_const, bmk1880_tpu_max_pooling,
                        bmk1880_tpu_mdsum, bmk1880_tpu_min, bmk1880_tpu_min_const, bmk1880_tpu_mul,
                        bmk1880_tpu_mul_const, bmk1880_tpu_or_int8, bmk1880_tpu_or_int16, bmk1880_tpu_relu,
                        bmk1880_tpu_sub, bmk1880_tpu_winograd, bmk1880_tpu_xor_int8, bmk1880_tpu_xor_int16,
                        shape_t2, shape_t4, stride_t2, stride_t4, tensor_gmem, tensor_gmem_default)

SHAPE = (2, 37, 3, 5)              # 37 channels: 5 wrap past the 32 slices
SEEDS = [11, 12, 13]


def fmt(signed):
    return I8 if signed else U8


def res_signed(*signs):
    return any(signs)


# ---- element-wise --------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("sa,sb", [(True, True), (False, False), (True, False)])
@pytest.mark.parametrize("wide", [False, True])
def test_mul(seed, sa, sb, wide):
    r = rng_for(seed)
    rig = Rig()
    a, b = rig.alloc(SHAPE, fmt(sa)), rig.alloc(SHAPE, fmt(sb))
    sr = res_signed(sa, sb)
    lo = rig.alloc(SHAPE, fmt(sr))
    hi = rig.alloc(SHAPE, fmt(sr)) if wide else None
    av, bv = values(r, SHAPE, sa), values(r, SHAPE, sb)
    rig.put(a, av)
    rig.put(b, bv)
    sh = int(r.integers(0, 10))
    bmk1880_tpu_mul(rig.ctx, res_high=hi, res_low=lo, a=a, b=b, rshift_width=sh)
    rig.run()
    got = rig.get16(hi, lo) if wide else rig.get(lo)
    assert np.array_equal(got, ref.mul(av, bv, sh, 16 if wide else 8, sr))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("sa,sb", [(True, True), (False, False), (False, True)])
def test_mul_const(seed, sa, sb):
    r = rng_for(seed)
    rig = Rig()
    a = rig.alloc(SHAPE, fmt(sa))
    sr = res_signed(sa, sb)
    lo, hi = rig.alloc(SHAPE, fmt(sr)), rig.alloc(SHAPE, fmt(sr))
    av = values(r, SHAPE, sa)
    rig.put(a, av)
    b = int(r.integers(-128, 128) if sb else r.integers(0, 256))
    sh = int(r.integers(0, 6))
    bmk1880_tpu_mul_const(rig.ctx, res_high=hi, res_low=lo, a=a, b=b, b_is_signed=sb, rshift_width=sh)
    rig.run()
    assert np.array_equal(rig.get16(hi, lo), ref.mul(av, b, sh, 16, sr))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("const", [False, True])
@pytest.mark.parametrize("int8", [False, True])
def test_mac(seed, const, int8):
    r = rng_for(seed)
    rig = Rig()
    a = rig.alloc(SHAPE, I8)
    b = None if const else rig.alloc(SHAPE, I8)
    hi, lo = rig.alloc(SHAPE, I8), rig.alloc(SHAPE, I8)
    av, rv = values(r, SHAPE, True), values(r, SHAPE, True, 16)
    bv = int(r.integers(-128, 128)) if const else values(r, SHAPE, True)
    rig.put(a, av)
    if not const:
        rig.put(b, bv)
    rig.put16(hi, lo, rv)
    ls, rs = int(r.integers(0, 8)), int(r.integers(0, 12))
    if const:
        bmk1880_tpu_mac_const(rig.ctx, res_high=hi, res_low=lo, res_is_int8=int8, a=a, b=bv, b_is_signed=True,
                              lshift_width=ls, rshift_width=rs)
    else:
        bmk1880_tpu_mac(rig.ctx, res_high=hi, res_low=lo, res_is_int8=int8, a=a, b=b, lshift_width=ls, rshift_width=rs)
    old_hi = rig.get(hi)
    rig.run()
    want = ref.mac(av, bv, rv, ls, rs, 8 if int8 else 16, True)
    if int8:
        assert np.array_equal(rig.get(lo), want)
        assert np.array_equal(rig.get(hi), old_hi)          # 4.21: an 8-bit result goes to res_low only
    else:
        assert np.array_equal(rig.get16(hi, lo), want)


def test_mac_unsigned_overflow_wraps():
    """Choice C-WRAP: a 32-bit intermediate that overflows wraps before the shift."""
    rig = Rig()
    shape = (1, 1, 1, 2)
    a, b = rig.alloc(shape, U8), rig.alloc(shape, U8)
    hi, lo = rig.alloc(shape, U8), rig.alloc(shape, U8)
    rig.put(a, np.array([[[[255, 1]]]]))
    rig.put(b, np.array([[[[255, 1]]]]))
    rig.put16(hi, lo, np.array([[[[65535, 0]]]]))
    bmk1880_tpu_mac(rig.ctx, res_high=hi, res_low=lo, res_is_int8=False, a=a, b=b, lshift_width=16, rshift_width=0)
    rig.run()
    # 255*255 + 65535 << 16 = 4294901760 + 65025 = 4294966785 -> wraps to -511 -> saturates to 0 (unsigned)
    assert rig.get16(hi, lo).tolist() == [[[[0, 1]]]]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("op", ["add", "sub", "add_const"])
@pytest.mark.parametrize("wide", [False, True])
def test_add_sub(seed, op, wide):
    r = rng_for(seed)
    rig = Rig()
    sa, sb = bool(r.integers(0, 2)), bool(r.integers(0, 2))
    ah, al = rig.alloc(SHAPE, fmt(sa)), rig.alloc(SHAPE, fmt(sa))
    av = values(r, SHAPE, sa, 16)
    rig.put16(ah, al, av)
    sr = True if op == "sub" else res_signed(sa, sb)
    lo = rig.alloc(SHAPE, fmt(sr))
    hi = rig.alloc(SHAPE, fmt(sr)) if wide else None
    bits = 16 if wide else 8
    if op == "add_const":
        b = int(r.integers(-32768, 32768) if sb else r.integers(0, 65536))
        bmk1880_tpu_add_const(rig.ctx, res_high=hi, res_low=lo, a_high=ah, a_low=al, b=b, b_is_signed=sb)
        want = ref.add(av, b, bits, sr)
    else:
        bh, bl = rig.alloc(SHAPE, fmt(sb)), rig.alloc(SHAPE, fmt(sb))
        bv = values(r, SHAPE, sb, 16)
        rig.put16(bh, bl, bv)
        call = bmk1880_tpu_add if op == "add" else bmk1880_tpu_sub
        call(rig.ctx, res_high=hi, res_low=lo, a_high=ah, a_low=al, b_high=bh, b_low=bl)
        want = ref.add(av, bv, bits, sr) if op == "add" else ref.sub(av, bv, bits)
    rig.run()
    assert np.array_equal(rig.get16(hi, lo) if wide else rig.get(lo), want)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("signed", [True, False])
def test_max_min(seed, signed):
    r = rng_for(seed)
    rig = Rig()
    a, b = rig.alloc(SHAPE, fmt(signed)), rig.alloc(SHAPE, fmt(signed))
    outs = [rig.alloc(SHAPE, fmt(signed)) for _ in range(4)]
    av, bv = values(r, SHAPE, signed), values(r, SHAPE, signed)
    rig.put(a, av)
    rig.put(b, bv)
    k = int(r.integers(-128, 128) if signed else r.integers(0, 256))
    bmk1880_tpu_max(rig.ctx, max=outs[0], a=a, b=b)
    bmk1880_tpu_min(rig.ctx, min=outs[1], a=a, b=b)
    bmk1880_tpu_max_const(rig.ctx, max=outs[2], a=a, b=k, b_is_signed=signed)
    bmk1880_tpu_min_const(rig.ctx, min=outs[3], a=a, b=k, b_is_signed=signed)
    rig.run()
    assert np.array_equal(rig.get(outs[0]), ref.elementwise(max, av, bv))
    assert np.array_equal(rig.get(outs[1]), ref.elementwise(min, av, bv))
    assert np.array_equal(rig.get(outs[2]), ref.elementwise(max, av, k))
    assert np.array_equal(rig.get(outs[3]), ref.elementwise(min, av, k))


@pytest.mark.parametrize("seed", SEEDS)
def test_arith_shift(seed):
    r = rng_for(seed)
    rig = Rig()
    ah, al, bits, rh, rl = (rig.alloc(SHAPE, I8) for _ in range(5))
    av, bv = values(r, SHAPE, True, 16), r.integers(-16, 17, SHAPE)
    rig.put16(ah, al, av)
    rig.put(bits, bv)
    bmk1880_tpu_arith_shift(rig.ctx, res_high=rh, res_low=rl, a_high=ah, a_low=al, bits=bits)
    rig.run()
    assert np.array_equal(rig.get16(rh, rl), ref.arith_shift(av, bv))


def test_arith_shift_bits_out_of_range_is_a_data_fault():
    rig = Rig()
    shape = (1, 2, 1, 2)
    ah, al, bits, rh, rl = (rig.alloc(shape, I8) for _ in range(5))
    rig.put(bits, np.array([[[[1, 2]], [[17, 0]]]]))
    rig.put16(rh, rl, np.full(shape, 0x1234))
    bmk1880_tpu_arith_shift(rig.ctx, res_high=rh, res_low=rl, a_high=ah, a_low=al, bits=bits)
    res = rig.run(expect_ok=False)
    assert res.fault.code == "DATA" and "17" in res.fault.message and "(0, 1, 0, 0)" in res.fault.message
    assert np.all(rig.get16(rh, rl) == 0x1234)               # nothing written


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("op", ["and", "or", "xor"])
@pytest.mark.parametrize("sa,sb", [(True, True), (False, False), (True, False)])
def test_logic(seed, op, sa, sb):
    r = rng_for(seed)
    rig = Rig()
    sr = res_signed(sa, sb)
    a, b, res = rig.alloc(SHAPE, fmt(sa)), rig.alloc(SHAPE, fmt(sb)), rig.alloc(SHAPE, fmt(sr))
    av, bv = values(r, SHAPE, sa), values(r, SHAPE, sb)
    rig.put(a, av)
    rig.put(b, bv)
    t = [rig.alloc(SHAPE, fmt(s)) for s in (sa, sa, sb, sb, sr, sr)]
    a16, b16 = values(r, SHAPE, sa, 16), values(r, SHAPE, sb, 16)
    rig.put16(t[0], t[1], a16)
    rig.put16(t[2], t[3], b16)
    c8 = {"and": bmk1880_tpu_and_int8, "or": bmk1880_tpu_or_int8, "xor": bmk1880_tpu_xor_int8}[op]
    c16 = {"and": bmk1880_tpu_and_int16, "or": bmk1880_tpu_or_int16, "xor": bmk1880_tpu_xor_int16}[op]
    c8(rig.ctx, res=res, a=a, b=b)
    c16(rig.ctx, res_high=t[4], res_low=t[5], a_high=t[0], a_low=t[1], b_high=t[2], b_low=t[3])
    rig.run()
    assert np.array_equal(rig.get(res), ref.logic(op, av, bv, 8, sr))
    assert np.array_equal(rig.get16(t[4], t[5]), ref.logic(op, a16, b16, 16, sr))


def test_logic_same_signedness_is_bytewise():
    rig = Rig()
    a, b, res = (rig.alloc((1, 1, 1, 4), I8) for _ in range(3))
    rig.put(a, np.array([[[[-1, 0x55, -128, 7]]]]))
    rig.put(b, np.array([[[[0x0F, 0x0F, -1, -8]]]]))
    bmk1880_tpu_xor_int8(rig.ctx, res=res, a=a, b=b)
    rig.run()
    assert rig.get(res, signed=False).tolist() == [[[[0xF0, 0x5A, 0x7F, 0xFF]]]]


@pytest.mark.parametrize("seed", SEEDS)
def test_copy_and_copy_with_stride(seed):
    r = rng_for(seed)
    rig = Rig()
    src, dst = rig.alloc(SHAPE), rig.alloc(SHAPE)
    v = values(r, SHAPE, True)
    rig.put(src, v)
    bmk1880_tpu_copy(rig.ctx, dst=dst, src=src)
    # a strided view: the (2, 37, 3, 5) source read with its own strides, written transposed in H/W
    d2 = bmk1880_tl_prealloc(rig.ctx, 0x800, shape_t4(*SHAPE), I8)
    st_src = stride_t4(*rig.stride(src))
    st_dst = stride_t4(32, 16, 1, 3)                      # h and w swapped places, in-slice
    bmk1880_tpu_copy_with_stride(rig.ctx, dst=d2, dst_stride=st_dst, src=src, src_stride=st_src)
    rig.run()
    assert np.array_equal(rig.get(dst), v)
    assert np.array_equal(rig.get(d2, stride=st_dst.as4()), v)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("signed,wide", [(True, True), (False, True), (True, False), (False, False)])
def test_mdsum(seed, signed, wide):
    r = rng_for(seed)
    rig = Rig()
    a = rig.alloc(SHAPE, fmt(signed))
    lo = rig.alloc((1, SHAPE[1], 1, 1), fmt(signed), aligned=False)
    hi = rig.alloc((1, SHAPE[1], 1, 1), fmt(signed), aligned=False) if wide else None
    v = values(r, SHAPE, signed)
    rig.put(a, v)
    bmk1880_tpu_mdsum(rig.ctx, res_high=hi, res_low=lo, a=a)
    rig.run()
    assert np.array_equal(rig.get16(hi, lo) if wide else rig.get(lo), ref.mdsum(v, 16 if wide else 8, signed))


@pytest.mark.parametrize("seed", SEEDS)
def test_lut_uses_the_table_copy_of_each_slice(seed):
    r = rng_for(seed)
    rig = Rig()
    n = rig.p["slices"]
    ifmap, ofmap = rig.alloc(SHAPE, U8), rig.alloc(SHAPE, I8)
    table = rig.alloc((1, n, 16, 16), I8)
    tv = values(r, (1, n, 16, 16), True)          # different per slice: the slice decides (4.39)
    idx = values(r, SHAPE, False)
    rig.put(table, tv)
    rig.put(ifmap, idx)
    bmk1880_tpu_lut(rig.ctx, ofmap=ofmap, ifmap=ifmap, table=table)
    rig.run()
    want = np.zeros(SHAPE, np.int64)
    st = rig.stride(ifmap)
    for i in np.ndindex(*SHAPE):
        slice_ = ref.lmem_addr(rig.p, ifmap.laddr, st, *i) // rig.p["slice_size"]
        want[i] = tv[0, slice_, idx[i] // 16, idx[i] % 16]
    assert np.array_equal(rig.get(ofmap), want)


@pytest.mark.parametrize("signed", [True, False])
def test_relu(signed):
    rig = Rig()
    r = rng_for(5)
    a, o = rig.alloc(SHAPE, fmt(signed)), rig.alloc(SHAPE, fmt(signed))
    v = values(r, SHAPE, signed)
    rig.put(a, v)
    bmk1880_tpu_relu(rig.ctx, ofmap=o, ifmap=a)
    rig.run()
    assert np.array_equal(rig.get(o), np.maximum(v, 0))


def test_hand_cases_elementwise():
    """Hand-computed values for the saturation rule and the shifts (ch.4's FMT_U8 example)."""
    rig = Rig()
    shape = (1, 1, 1, 4)
    a, b = rig.alloc(shape, I8), rig.alloc(shape, I8)
    r8, hi, lo = rig.alloc(shape, I8), rig.alloc(shape, I8), rig.alloc(shape, I8)
    rig.put(a, np.array([[[[100, -7, -128, 3]]]]))
    rig.put(b, np.array([[[[3, 1, -128, -2]]]]))
    bmk1880_tpu_mul(rig.ctx, res_high=None, res_low=r8, a=a, b=b, rshift_width=1)
    bmk1880_tpu_mul(rig.ctx, res_high=hi, res_low=lo, a=a, b=b, rshift_width=0)
    ua, ub, ur = rig.alloc(shape, U8), rig.alloc(shape, U8), rig.alloc(shape, U8)
    rig.put(ua, np.array([[[[200, 255, 0, 128]]]]))
    zh = rig.alloc(shape, U8)
    rig.put(ub, np.array([[[[100, 255, 0, 127]]]]))
    bmk1880_tpu_add(rig.ctx, res_high=None, res_low=ur, a_high=zh, a_low=ua, b_high=zh, b_low=ub)
    rig.run()
    # 300 >> 1 = 150 -> 127; -7 >> 1 = -4 (floor); 16384 >> 1 = 8192 -> 127; -6 >> 1 = -3
    assert rig.get(r8).tolist() == [[[[127, -4, 127, -3]]]]
    assert rig.get16(hi, lo).tolist() == [[[[300, -7, 16384, -6]]]]
    assert rig.get(hi).tolist() == [[[[1, -1, 64, -1]]]]
    assert rig.get(lo, signed=False).tolist() == [[[[44, 249, 0, 250]]]]
    # FMT_U8: 'any value bigger than 255 becomes 255'
    assert rig.get(ur).tolist() == [[[[255, 255, 0, 255]]]]


def test_hand_case_hw_sum():
    """2.2's summation example b[n, c, 0, 0] = sum_h sum_w a[n, c, h, w] (N = 1), by mdsum."""
    rig = Rig()
    a = rig.alloc((1, 2, 2, 2))
    lo, hi = rig.alloc((1, 2, 1, 1), aligned=False), rig.alloc((1, 2, 1, 1), aligned=False)
    rig.put(a, np.array([[[[1, 2], [3, 4]], [[-100, -100], [-100, 50]]]]))
    bmk1880_tpu_mdsum(rig.ctx, res_high=hi, res_low=lo, a=a)
    r8 = rig.alloc((1, 2, 1, 1), aligned=False)
    bmk1880_tpu_mdsum(rig.ctx, res_high=None, res_low=r8, a=a)
    rig.run()
    assert rig.get16(hi, lo).reshape(-1).tolist() == [10, -250]
    assert rig.get(r8).reshape(-1).tolist() == [10, -128]


# ---- convolution, pooling -----------------------------------------------------------------------------------
def _conv_rig(r, n, cin, h, w, cout, kh, kw, *, bias=True, sig=(True, True, True)):
    rig = Rig()
    x = rig.alloc((n, cin, h, w), fmt(sig[0]))
    wt_l = rig.alloc((1, cout, kh * kw, cin), fmt(sig[1]), aligned=False)      # the layout of 4.41
    wt = bmk1880_tl_prealloc(rig.ctx, wt_l.laddr, shape_t4(cin, cout, kh, kw), fmt(sig[1]))
    xv, wv = values(r, (n, cin, h, w), sig[0]), values(r, (cin, cout, kh, kw), sig[1])
    rig.put(x, xv)
    # place w[ci, co, i, j] at (0, co, i * kw + j, ci) of the (1, C_out, Kh*Kw, C_in) view
    rig.put(wt_l, wv.transpose(1, 2, 3, 0).reshape(1, cout, kh * kw, cin))
    b = bv = None
    if bias:
        b = rig.alloc((2, cout, 1, 1), fmt(sig[2]), aligned=False)
        bv = values(r, (cout,), sig[2], 16)
        u = bv & 0xFFFF
        rig.put(b, np.stack([u & 0xFF, u >> 8]).reshape(2, cout, 1, 1))        # n = 0 low (choice C-BIAS)
    return rig, x, wt, b, xv, wv, bv


@pytest.mark.parametrize("seed", [21, 22, 23, 24])
def test_conv(seed):
    r = rng_for(seed)
    n, cin, h, w, cout = 2, int(r.integers(1, 6)), int(r.integers(3, 7)), int(r.integers(3, 7)), int(r.integers(1, 40))
    kh, kw = int(r.integers(1, 4)), int(r.integers(1, 4))
    ins = tuple(int(v) for v in r.integers(0, 2, 4))
    pad = tuple(int(v) for v in r.integers(0, 3, 4))
    stride, dil = tuple(int(v) for v in r.integers(1, 3, 2)), tuple(int(v) for v in r.integers(1, 3, 2))
    relu, rshift = bool(r.integers(0, 2)), int(r.integers(0, 12))
    signs = (bool(r.integers(0, 2)), bool(r.integers(0, 2)), bool(r.integers(0, 2)))
    rig, x, wt, b, xv, wv, bv = _conv_rig(r, n, cin, h, w, cout, kh, kw, sig=signs)
    want = ref.conv(xv, wv, bv, ins=ins, pad=pad, stride=stride, dilation=dil, relu=relu, rshift=rshift,
                    signed=any(signs))
    o = rig.alloc(want.shape, fmt(any(signs)))
    bmk1880_tpu_conv(rig.ctx, ofmap=o, ifmap=x, weight=wt, bias=b, ins_h=ins[0], ins_last_h=ins[1], ins_w=ins[2],
                     ins_last_w=ins[3], pad_top=pad[0], pad_bottom=pad[1], pad_left=pad[2], pad_right=pad[3],
                     stride_h=stride[0], stride_w=stride[1], dilation_h=dil[0], dilation_w=dil[1],
                     relu_enable=relu, rshift_width=rshift)
    rig.run()
    assert np.array_equal(rig.get(o), want)


def test_conv_hand_case():
    rig = Rig()
    x = rig.alloc((1, 1, 3, 3))
    wl = rig.alloc((1, 1, 4, 1), aligned=False)
    wt = bmk1880_tl_prealloc(rig.ctx, wl.laddr, shape_t4(1, 1, 2, 2), I8)
    o, o2 = rig.alloc((1, 1, 2, 2)), rig.alloc((1, 1, 3, 2))
    rig.put(x, np.arange(1, 10).reshape(1, 1, 3, 3))
    rig.put(wl, np.ones((1, 1, 4, 1), np.int64))
    bmk1880_tpu_conv(rig.ctx, ofmap=o, ifmap=x, weight=wt, bias=None, stride_h=1, stride_w=1, dilation_h=1,
                     dilation_w=1)
    # ins_h = 1: rows 1,0,4... -> H' = 5; 2x2 kernel with dilation_w 2 -> taps at w and w+2; stride_h 2
    bmk1880_tpu_conv(rig.ctx, ofmap=o2, ifmap=x, weight=wt, bias=None, ins_h=1, pad_top=1, stride_h=2, stride_w=1,
                     dilation_h=1, dilation_w=2, pad_left=1)
    rig.run()
    assert rig.get(o).tolist() == [[[[12, 16], [24, 28]]]]
    # x' (ins_h=1, pad_top=1, pad_left=1):       rows: [0 0 0 0], [0 1 2 3], [0 0 0 0], [0 4 5 6], [0 0 0 0], [0 7 8 9]
    # output row i uses rows 2i, 2i+1; column j uses columns j, j+2
    xp = ref.insert_and_pad(np.arange(1, 10).reshape(1, 1, 3, 3), 1, 0, 0, 0, 1, 0, 1, 0)
    hand = [[int(xp[0, 0, 2 * i, j] + xp[0, 0, 2 * i, j + 2] + xp[0, 0, 2 * i + 1, j] + xp[0, 0, 2 * i + 1, j + 2])
             for j in range(2)] for i in range(3)]
    assert hand == [[2, 4], [5, 10], [8, 16]]
    assert rig.get(o2)[0, 0].tolist() == hand


def test_conv_large_insertion_is_not_materialised():
    """ins 254 with stride 255 picks every datum: out = x . w >> 2 on a 100 x 100 ifmap whose
    expanded form would hold about 25500^2 values."""
    r = rng_for(25)
    rig = Rig()
    x, o = rig.alloc((1, 1, 100, 100)), rig.alloc((1, 1, 100, 100))
    wl = rig.alloc((1, 1, 1, 1), aligned=False)
    xv = values(r, (1, 1, 100, 100), True)
    rig.put(x, xv)
    rig.put(wl, np.array([[[[-3]]]]))
    bmk1880_tpu_conv(rig.ctx, ofmap=o, ifmap=x, weight=wl, bias=None, ins_h=254, ins_w=254, ins_last_h=254,
                     stride_h=255, stride_w=255, dilation_h=1, dilation_w=1, rshift_width=2)
    rig.run()
    assert np.array_equal(rig.get(o), ref.elementwise(lambda v: ref.sat(ref.shr(-3 * v, 2), 8, True), xv))


@pytest.mark.parametrize("seed", [31, 32])
def test_winograd_equals_conv(seed):
    r = rng_for(seed)
    cin, cout, h, w = 3, 5, 5, 6
    rig, x, wt, b, xv, wv, bv = _conv_rig(r, 1, cin, h, w, cout, 3, 3)
    wg = rig.alloc((cin, cout, 3, 3), I8, aligned=False)           # default strides (4.42)
    rig.put(wg, wv)
    pad = (1, 0, 2, 1)
    o1, o2 = rig.alloc((1, cout, h + 1 - 2, w + 3 - 2)), rig.alloc((1, cout, h + 1 - 2, w + 3 - 2))
    common = dict(ifmap=x, bias=b, pad_top=pad[0], pad_bottom=pad[1], pad_left=pad[2], pad_right=pad[3],
                  relu_enable=True, rshift_width=3)
    bmk1880_tpu_conv(rig.ctx, ofmap=o1, weight=wt, stride_h=1, stride_w=1, dilation_h=1, dilation_w=1, **common)
    bmk1880_tpu_winograd(rig.ctx, ofmap=o2, weight=wg, **common)
    rig.run()
    want = ref.conv(xv, wv, bv, pad=pad, relu=True, rshift=3)
    assert np.array_equal(rig.get(o1), want) and np.array_equal(rig.get(o2), want)


@pytest.mark.parametrize("seed", [41, 42, 43])
def test_depthwise(seed):
    r = rng_for(seed)
    c, h, w, kh, kw = int(r.integers(1, 40)), 5, 4, int(r.integers(1, 4)), int(r.integers(1, 4))
    rig = Rig()
    x = rig.alloc((2, c, h, w))
    wt = rig.alloc((1, c, kh, kw), aligned=False)
    b = rig.alloc((2, c, 1, 1), aligned=False)
    xv, wv, bv = values(r, (2, c, h, w), True), values(r, (1, c, kh, kw), True), values(r, (c,), True, 16)
    rig.put(x, xv)
    rig.put(wt, wv)
    u = bv & 0xFFFF
    rig.put(b, np.stack([u & 0xFF, u >> 8]).reshape(2, c, 1, 1))
    ins, pad, stride = (1, 0, 0, 1), (1, 0, 0, 2), (1, 2)
    want = ref.depthwise(xv, wv[0], bv, ins=ins, pad=pad, stride=stride, rshift=5)
    o = rig.alloc(want.shape)
    bmk1880_tpu_depthwise(rig.ctx, ofmap=o, ifmap=x, weight=wt, bias=b, ins_h=ins[0], ins_last_h=ins[1],
                          ins_w=ins[2], ins_last_w=ins[3], pad_top=pad[0], pad_bottom=pad[1], pad_left=pad[2],
                          pad_right=pad[3], stride_h=stride[0], stride_w=stride[1], rshift_width=5)
    rig.run()
    assert np.array_equal(rig.get(o), want)


@pytest.mark.parametrize("seed", [51, 52, 53])
@pytest.mark.parametrize("signed", [True, False])
def test_pooling(seed, signed):
    r = rng_for(seed)
    rig = Rig()
    shape = (2, 35, 6, 7)
    x = rig.alloc(shape, fmt(signed))
    xv = values(r, shape, signed)
    rig.put(x, xv)
    kh, kw = int(r.integers(1, 4)), int(r.integers(1, 4))
    pad = tuple(int(v) for v in r.integers(0, 2, 4))
    stride = tuple(int(v) for v in r.integers(1, 3, 2))
    want_max = ref.max_pool(xv, kh, kw, pad, stride, signed)
    ins = tuple(int(v) for v in r.integers(0, 2, 4))
    const, rs = int(r.integers(0, 256)), int(r.integers(0, 10))
    want_avg = ref.avg_pool(xv, kh, kw, ins, pad, stride, const, rs, signed)
    om, oa = rig.alloc(want_max.shape, fmt(signed)), rig.alloc(want_avg.shape, fmt(signed))
    pads = dict(pad_top=pad[0], pad_bottom=pad[1], pad_left=pad[2], pad_right=pad[3])
    bmk1880_tpu_max_pooling(rig.ctx, ofmap=om, ifmap=x, kh=kh, kw=kw, stride_h=stride[0], stride_w=stride[1], **pads)
    bmk1880_tpu_avg_pooling(rig.ctx, ofmap=oa, ifmap=x, kh=kh, kw=kw, ins_h=ins[0], ins_last_h=ins[1], ins_w=ins[2],
                            ins_last_w=ins[3], stride_h=stride[0], stride_w=stride[1], avg_pooling_const=const,
                            rshift_width=rs, **pads)
    rig.run()
    assert np.array_equal(rig.get(om), want_max)
    assert np.array_equal(rig.get(oa), want_avg)


def test_max_pooling_padding_never_wins():
    rig = Rig()
    x, o = rig.alloc((1, 1, 2, 2)), rig.alloc((1, 1, 3, 3))
    rig.put(x, np.full((1, 1, 2, 2), -100))
    bmk1880_tpu_max_pooling(rig.ctx, ofmap=o, ifmap=x, kh=2, kw=2, pad_top=1, pad_bottom=1, pad_left=1,
                            pad_right=1, stride_h=1, stride_w=1)
    rig.run()
    assert np.all(rig.get(o) == -100)


# ---- matrices ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [61, 62, 63])
@pytest.mark.parametrize("mode", ["plain8", "plain16", "relu", "ra16", "ra8"])
def test_matrix_mac(seed, mode):
    r = rng_for(seed)
    R, K, C = int(r.integers(1, 6)), int(r.integers(1, 40)), int(r.integers(1, 40))
    rig = Rig()
    left, right = rig.alloc((R, K)), rig.alloc((K, C))
    bias = rig.alloc((2, C))
    lv, rv, bv = values(r, (R, K), True), values(r, (K, C), True), values(r, (C,), True, 16)
    rig.put(left, lv)
    rig.put(right, rv)
    u = bv & 0xFFFF
    rig.put(bias, np.stack([u & 0xFF, u >> 8]))                           # row 0 low (choice C-16BIT-MATRIX)
    wide = mode != "plain8"
    res = rig.alloc((2 * R, C) if wide else (R, C))
    orig = values(r, (R, C), True, 16)
    if wide:
        ou = orig & 0xFFFF
        rig.put(res, np.concatenate([ou & 0xFF, ou >> 8]))
    ctrls = {"relu": CTRL_RELU, "ra16": CTRL_RA, "ra8": CTRL_RA}.get(mode, CTRL_NULL)
    ls = int(r.integers(0, 6)) if ctrls == CTRL_RA else 0
    rs = int(r.integers(0, 12))
    int8 = mode in ("plain8", "relu", "ra8")
    if mode == "relu":
        res = rig.alloc((R, C))
    bmk1880_tpu_matrix_mac(rig.ctx, res=res, left=left, right=right, bias=bias, lshift_width=ls, rshift_width=rs,
                           res_is_int8=int8, ctrls=ctrls)
    old_hi = rig.get(res)[R:] if mode == "ra8" else None
    rig.run()
    want = ref.matrix_mac(lv, rv, bv, relu=mode == "relu", ra=orig if ctrls == CTRL_RA else None, lshift=ls,
                          rshift=rs, bits=8 if int8 else 16)
    got = rig.get(res)
    if int8 and res.shape.h == R:
        assert np.array_equal(got, want)
    elif mode == "ra8":
        assert np.array_equal(got[:R], want) and np.array_equal(got[R:], old_hi)   # only the low part written
    else:
        lo, hi = rig.get(res, signed=False)[:R], got[R:]
        assert np.array_equal(hi * 256 + lo, want)


def test_matrix_mac_2():
    r = rng_for(71)
    rig = Rig()
    left, res = rig.alloc((1, 256, 1, 256)), rig.alloc((1, 256, 1, 256))
    right = rig.alloc((256, 16, 1, 16))
    lv, rv = values(r, (1, 256, 1, 256), True), values(r, (256, 16, 1, 16), True)
    rig.put(left, lv)
    rig.put(right, rv)
    bmk1880_tpu_matrix_mac_2(rig.ctx, res=res, left=left, right=right)
    rig.run()
    L, Rm = lv[0, :, 0, :], rv.reshape(256, 256)
    want = np.array([[ref.sat(ref.wrap32(int(np.dot(L[i], Rm[:, j]))), 8, True) for j in range(256)]
                     for i in range(256)])
    assert np.array_equal(rig.get(res)[0, :, 0, :], want)


# ---- GDMA ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("tp", [False, True])
def test_gdma_load_store(seed, tp):
    r = rng_for(seed)
    rig = Rig()
    t = rig.alloc(SHAPE)
    n, c, h, w = SHAPE
    gshape = (c, n, h, w) if tp else SHAPE
    g = values(r, gshape, True)
    rig.gmem_put(0x10000, g)
    bmk1880_gdma_load(rig.ctx, t, 0x10000, CTRL_TP if tp else CTRL_NULL)
    bmk1880_gdma_store(rig.ctx, t, 0x20000, CTRL_TP if tp else CTRL_NULL)
    rig.run()
    logical = g.transpose(1, 0, 2, 3) if tp else g                       # (n, c) <- (c, n) (choice C-TP)
    assert np.array_equal(rig.get(t), logical)
    assert np.array_equal(rig.gmem_get(0x20000, gshape, True), g)


@pytest.mark.parametrize("seed", SEEDS)
def test_gdma_strided_and_matrix(seed):
    r = rng_for(seed)
    rig = Rig()
    t = rig.alloc(SHAPE, U8)
    st = (2000, 40, 12, 2)                                               # a sparse gmem tensor
    g = np.zeros(8000, np.int64)
    v = values(r, SHAPE, False)
    for i in np.ndindex(*SHAPE):
        g[sum(a * b for a, b in zip(i, st))] = v[i]
    rig.gmem_put(0x4000, g)
    bmk1880_gdma_load_stride(rig.ctx, t, 0x4000, stride_t4(*st), CTRL_NULL)
    bmk1880_gdma_store_stride(rig.ctx, t, 0x9000, stride_t4(*st), CTRL_NULL)
    m = rig.alloc((5, 37), U8)                                           # a matrix: (5, 3, 1, 16) in lmem
    mv = values(r, (37, 5), False)
    rig.gmem_put(0x20000, mv)
    bmk1880_gdma_load(rig.ctx, m, 0x20000, CTRL_TP)                      # row/column transposition
    bmk1880_gdma_store_stride(rig.ctx, m, 0x30000, stride_t2(64, 1), CTRL_NULL)
    rig.run()
    assert np.array_equal(rig.get(t), v)
    back = rig.gmem_get(0x9000, (8000,), False)
    assert np.array_equal(back, g)
    assert np.array_equal(rig.get(m), mv.T)
    got = rig.gmem_get(0x30000, (5 * 64,), False).reshape(5, 64)
    assert np.array_equal(got[:, :37], mv.T) and not got[:, 37:].any()


def test_gdma_copy_gmem_reshape_example_and_transpose():
    """2.2's examples: (N, C, H, W) -> (N, C, 2H, W/2) keeps the order; N/C transposition."""
    rig = Rig()
    N, C, H, W = 2, 3, 2, 4
    v = np.arange(N * C * H * W).reshape(N, C, H, W)
    rig.gmem_put(0x100, v)
    src = tensor_gmem_default(0x100, shape_t4(N, C, H, W))
    bmk1880_gdma_copy_gmem(rig.ctx, tensor_gmem_default(0x1000, shape_t4(N, C, 2 * H, W // 2)), src, CTRL_NULL)
    bmk1880_gdma_copy_gmem(rig.ctx, tensor_gmem_default(0x2000, shape_t4(C, N, H, W)), src, CTRL_TP)
    mat = tensor_gmem(0x3000, shape_t2(3, 5), stride_t2(8, 1))
    rig.gmem_put(0x3000, np.arange(24))
    bmk1880_gdma_copy_gmem(rig.ctx, tensor_gmem_default(0x4000, shape_t2(5, 3)), mat, CTRL_NULL)
    rig.run()
    b = rig.gmem_get(0x1000, (N, C, 2 * H, W // 2), False)
    for n, c, h, w in np.ndindex(N, C, H, W):
        hh, ww = (2 * h, w) if w < W // 2 else (2 * h + 1, w - W // 2)
        assert b[n, c, hh, ww] == v[n, c, h, w]
    assert np.array_equal(rig.gmem_get(0x2000, (C, N, H, W), False), v.transpose(1, 0, 2, 3))
    assert rig.gmem_get(0x4000, (15,), False).tolist() == [0, 1, 2, 3, 4, 8, 9, 10, 11, 12, 16, 17, 18, 19, 20]


@pytest.mark.parametrize("right", [True, False])
@pytest.mark.parametrize("step", [0, 1, 3, 37, 40])
def test_gdma_lrn_shift_and_copy_lmem(right, step):
    r = rng_for(81 + step)
    rig = Rig()
    src, dst = rig.alloc(SHAPE), rig.alloc(SHAPE)
    v = values(r, SHAPE, True)
    rig.put(src, v)
    rig.put(dst, np.full(SHAPE, 99))
    bmk1880_gdma_lrn_shift(rig.ctx, dst, src, right, step)
    flat = rig.alloc((1, 1, 1, int(np.prod(SHAPE))))
    bmk1880_gdma_copy_lmem(rig.ctx, flat, src)
    rig.run()
    want = np.zeros(SHAPE, np.int64)
    C = SHAPE[1]
    for c in range(C):
        if right and c + step < C:
            want[:, c + step] = v[:, c]
        if not right and c >= step:
            want[:, c - step] = v[:, c]
    assert np.array_equal(rig.get(dst), want)
    assert np.array_equal(rig.get(flat).reshape(-1), v.reshape(-1))


# ---- review: cases written afresh from the guide's text ---------------------------------------------------------
def test_unsigned_constant_given_as_its_s8_field():
    """4.20 / 4.24 / 4.28 declare 's8 b' ('s16 b') and read it unsigned when b_is_signed is
    false: the field value -1 is the constant 255 (65535), -56 is 200 (choice C-CONST-SIGN)."""
    rig = Rig()
    shape = (1, 1, 1, 4)
    a, hi, lo = rig.alloc(shape, U8), rig.alloc(shape, U8), rig.alloc(shape, U8)
    rig.put(a, np.array([[[[2, 255, 0, 100]]]]))
    bmk1880_tpu_mul_const(rig.ctx, res_high=hi, res_low=lo, a=a, b=-1, b_is_signed=False, rshift_width=0)
    m = rig.alloc(shape, U8)
    bmk1880_tpu_min_const(rig.ctx, min=m, a=a, b=-56, b_is_signed=False)
    ah, al, rh, rl = (rig.alloc(shape, U8) for _ in range(4))
    rig.put16(ah, al, np.array([[[[0, 1, 2, 3]]]]))
    bmk1880_tpu_add_const(rig.ctx, res_high=rh, res_low=rl, a_high=ah, a_low=al, b=-1, b_is_signed=False)
    m2 = rig.alloc(shape, U8)
    bmk1880_tpu_min_const(rig.ctx, min=m2, a=a, b=200, b_is_signed=False)
    rig.run()
    assert rig.get16(hi, lo).tolist() == [[[[510, 65025, 0, 25500]]]]
    assert rig.get(m).tolist() == [[[[2, 200, 0, 100]]]] == rig.get(m2).tolist()
    assert rig.get16(rh, rl).tolist() == [[[[65535] * 4]]]                   # 65535 + a saturates (FMT_U8)
    with pytest.raises(BmkError, match=r"bmk1880_tpu_mul_const: b: 200 is outside -128\.\.127"):
        bmk1880_tpu_mul_const(rig.ctx, res_high=None, res_low=lo, a=a, b=200, b_is_signed=True, rshift_width=0)


def test_matrix_mac_lshift_is_unused_without_ra():
    """4.46: the original res is shifted by lshift_width and added only 'if ctrls is CTRL_RA';
    otherwise lshift_width takes no part. Hand values: [3, -4] x [[1, 2], [3, 4]] = [-9, -10],
    >> 1 rounds toward minus infinity (choice C-SHIFT)."""
    rig = Rig()
    left, right = rig.alloc((1, 2)), rig.alloc((2, 2))
    rig.put(left, np.array([[3, -4]]))
    rig.put(right, np.array([[1, 2], [3, 4]]))
    plain, relu = rig.alloc((1, 2)), rig.alloc((1, 2))
    rig.put(plain, np.array([[99, 99]]))
    for res, ctrls in ((plain, CTRL_NULL), (relu, CTRL_RELU)):
        bmk1880_tpu_matrix_mac(rig.ctx, res=res, left=left, right=right, bias=None, lshift_width=7, rshift_width=1,
                               res_is_int8=True, ctrls=ctrls)
    rig.run()
    assert rig.get(plain).tolist() == [[-5, -5]]
    assert rig.get(relu).tolist() == [[0, 0]]


def test_lut_with_the_table_and_index_in_high_slices():
    """4.39 literally: res = table(0, c_t, idx / 16, idx mod 16), c_t the slice the idx datum is
    in, with the table's base in slice 3 and the ifmap's in slice 30 (so c_t is not the
    ifmap's channel, and table channel c_t lives in slice (3 + c_t) mod slices)."""
    r = rng_for(91)
    rig = Rig()
    S, n = rig.p["slice_size"], rig.p["slices"]
    table = bmk1880_tl_prealloc(rig.ctx, 3 * S + 0x100, shape_t4(1, n, 16, 16), I8)
    ifmap = bmk1880_tl_prealloc(rig.ctx, 30 * S + 0x2000, shape_t4(2, 5, 2, 3), U8)
    ofmap = bmk1880_tl_prealloc(rig.ctx, 30 * S + 0x3000, shape_t4(2, 5, 2, 3), I8)
    tv, idx = values(r, (1, n, 16, 16), True), values(r, (2, 5, 2, 3), False)
    rig.put(table, tv)
    rig.put(ifmap, idx)
    bmk1880_tpu_lut(rig.ctx, ofmap=ofmap, ifmap=ifmap, table=table)
    rig.run()
    got = rig.get(ofmap)
    for i in np.ndindex(2, 5, 2, 3):
        c_t = ref.lmem_addr(rig.p, ifmap.laddr, rig.stride(ifmap), *i) // S
        assert c_t == (30 + i[1]) % n
        assert got[i] == tv[0, c_t, idx[i] // 16, idx[i] % 16]


@pytest.mark.parametrize("seed", range(111, 121))
def test_windows_reaching_far_into_padding_and_insertion(seed):
    """conv, depthwise and both poolings with paddings up to twice the kernel (outputs whose
    window holds only padding), insertions and strides up to 3, against the reference."""
    r = rng_for(seed)
    n, c, h, w = 1, int(r.integers(1, 4)), int(r.integers(1, 5)), int(r.integers(1, 5))
    kh, kw = int(r.integers(1, 4)), int(r.integers(1, 4))
    ins = tuple(int(v) for v in r.integers(0, 3, 4))
    pad = tuple(int(v) for v in r.integers(0, 2 * max(kh, kw) + 1, 4))
    stride, dil = tuple(int(v) for v in r.integers(1, 4, 2)), tuple(int(v) for v in r.integers(1, 3, 2))
    rs = int(r.integers(0, 4))
    rig, x, wt, b, xv, wv, bv = _conv_rig(r, n, c, h, w, 2, kh, kw)
    kw_ = dict(ins_h=ins[0], ins_last_h=ins[1], ins_w=ins[2], ins_last_w=ins[3], pad_top=pad[0], pad_bottom=pad[1],
               pad_left=pad[2], pad_right=pad[3], stride_h=stride[0], stride_w=stride[1])
    try:
        want = ref.conv(xv, wv, bv, ins=ins, pad=pad, stride=stride, dilation=dil, rshift=rs)
    except ValueError:
        want = None
    if want is not None and min(want.shape[2:]) > 0:
        o = rig.alloc(want.shape)
        bmk1880_tpu_conv(rig.ctx, ofmap=o, ifmap=x, weight=wt, bias=b, dilation_h=dil[0], dilation_w=dil[1],
                         relu_enable=False, rshift_width=rs, **kw_)
    dw = rig.alloc((1, c, kh, kw), aligned=False)
    dwv = values(r, (1, c, kh, kw), True)
    rig.put(dw, dwv)
    want_dw = ref.depthwise(xv, dwv[0], None, ins=ins, pad=pad, stride=stride, rshift=rs)
    want_avg = ref.avg_pool(xv, kh, kw, ins, pad, stride, 3, rs, True)
    want_max = ref.max_pool(xv, kh, kw, pad, stride, True)
    outs = []
    if min(want_dw.shape[2:]) > 0:
        od, oa = rig.alloc(want_dw.shape), rig.alloc(want_avg.shape)
        bmk1880_tpu_depthwise(rig.ctx, ofmap=od, ifmap=x, weight=dw, bias=None, rshift_width=rs, **kw_)
        bmk1880_tpu_avg_pooling(rig.ctx, ofmap=oa, ifmap=x, kh=kh, kw=kw, avg_pooling_const=3, rshift_width=rs, **kw_)
        outs += [(od, want_dw), (oa, want_avg)]
    if min(want_max.shape[2:]) > 0:
        om = rig.alloc(want_max.shape)
        bmk1880_tpu_max_pooling(rig.ctx, ofmap=om, ifmap=x, kh=kh, kw=kw, pad_top=pad[0], pad_bottom=pad[1],
                                pad_left=pad[2], pad_right=pad[3], stride_h=stride[0], stride_w=stride[1])
        outs.append((om, want_max))
    rig.run()
    if want is not None and min(want.shape[2:]) > 0:
        assert np.array_equal(rig.get(o), want)
    for t, v in outs:
        assert np.array_equal(rig.get(t), v)


def test_planes_in_either_address_order():
    """A 16-bit operand given as x_high / x_low may have its high plane at the lower address
    (choice C-PLANES): 4.21's mac with res_high below res_low, hand values."""
    rig = Rig()
    shape = (1, 1, 1, 3)
    hi = rig.alloc(shape)                                            # allocated first: the lower address
    lo = rig.alloc(shape)
    a, b = rig.alloc(shape), rig.alloc(shape)
    assert hi.laddr < lo.laddr
    rig.put16(hi, lo, np.array([[[[1000, -1000, 32767]]]]))
    rig.put(a, np.array([[[[10, -3, 127]]]]))
    rig.put(b, np.array([[[[-20, 7, 127]]]]))
    bmk1880_tpu_mac(rig.ctx, res_high=hi, res_low=lo, res_is_int8=False, a=a, b=b, lshift_width=1, rshift_width=1)
    rig.run()
    # (10 * -20 + 2000) >> 1 = 900; (-21 - 2000) >> 1 = -1011 (floor); (16129 + 65534) >> 1 = 40831 -> 32767
    assert rig.get16(hi, lo).tolist() == [[[[900, -1011, 32767]]]]
