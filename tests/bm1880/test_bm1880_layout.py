"""Chip parameters, default strides, the lmem address formula (2.3), and lmem allocation (4.7-4.11)."""
import numpy as np
import pytest

from tests.bm1880 import bm1880_ref as ref
from tests.bm1880.bm1880_harness import I8, U8, Rig, rng_for, values
from tlm.bm1880 import (CHIP, CTRL_AL, CTRL_NULL, CTRL_TP, BmkError, bmk1880_chip_info, bmk1880_chip_info_t,
                        bmk1880_gdma_load, bmk1880_gdma_store, bmk1880_reset, bmk1880_tl_alloc, bmk1880_tl_alloc_bank,
                        bmk1880_tl_free, bmk1880_tl_prealloc, bmk1880_tl_prealloc_align, bmk1880_tl_shape_to_nchw,
                        bmk1880_tl_shape_to_size, bmk1880_tl_size, bmk1880_tg_shape_to_size, bmk1880_tpu_copy,
                        shape_t2, shape_t4)
from tlm.bm1880.chip import CHIP_PARAMS, lmem_default_stride, stride_t4
from tlm.bm1880.tensors import snapshot_tl


def test_chip_info_is_the_parameter_table():
    info = bmk1880_chip_info()
    assert info is CHIP
    for name, value, source, _ in CHIP_PARAMS:
        assert getattr(info, name) == value and source in ("guide", "EXT", "choice")
    assert info.lmem_total == info.npu_num * info.lmem_size
    assert info.lmem_banks * info.lmem_bank_size == info.lmem_size


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_default_strides_match_the_guide(seed):
    r = rng_for(seed)
    p = ref.params(CHIP)
    for _ in range(200):
        shape = tuple(int(v) for v in r.integers(1, 70, 4))
        for aligned in (False, True):
            assert lmem_default_stride(CHIP, shape, aligned) == ref.default_lmem_stride(p, shape, aligned)


def test_default_stride_worked_values():
    # (1, 40, 3, 5): S_C = 15 unaligned, align(15, 16) = 16 aligned; S_N = ceil(40/32) * S_C
    assert lmem_default_stride(CHIP, (1, 40, 3, 5), False) == (30, 15, 5, 1)
    assert lmem_default_stride(CHIP, (1, 40, 3, 5), True) == (32, 16, 5, 1)


@pytest.mark.parametrize("seed", [4, 5, 6, 7])
def test_lmem_addresses_match_the_formula(seed):
    """The model's vectorised addresses against 2.3 evaluated datum by datum, for bases in
    every slice and explicit strides."""
    r = rng_for(seed)
    rig = Rig()
    p = rig.p
    for _ in range(20):
        shape = tuple(int(v) for v in r.integers(1, 6, 4)) if r.integers(0, 2) else (1, int(r.integers(1, 70)), 2, 3)
        aligned = bool(r.integers(0, 2))
        stride = ref.default_lmem_stride(p, shape, aligned)
        la = int(r.integers(0, p["slices"])) * p["slice_size"] + int(r.integers(0, 64))
        t = (bmk1880_tl_prealloc_align if aligned else bmk1880_tl_prealloc)(rig.ctx, la, shape_t4(*shape), I8)
        assert t is not None, rig.ctx.last_error
        if r.integers(0, 2):                                         # explicit strides
            stride = tuple(int(v) for v in r.integers(0, 40, 4))
            t.stride = stride_t4(*stride)
        got = snapshot_tl(t).addresses(CHIP)
        for i in np.ndindex(*shape):
            assert got[i] == ref.lmem_addr(p, la, stride, *i)


def test_guide_example_one_megabyte_in_four_slices():
    """2.3: 1 MB in 4 slices of 256 KB; (n, c) and (n, c+1) are Size_slice apart, (n, c) and
    (n, c+slices) are in one slice S_C apart."""
    chip = bmk1880_chip_info_t(1880, 4, 16, 256 * 1024, 4, 64 * 1024)
    rig = Rig(chip)
    t = bmk1880_tl_prealloc(rig.ctx, 0x100, shape_t4(2, 9, 3, 3), U8)
    a = snapshot_tl(t).addresses(chip)
    s_c = 9
    for c in range(8):
        if (c + 1) % 4:
            assert a[0, c + 1, 0, 0] - a[0, c, 0, 0] == 256 * 1024
    assert a[0, 4, 0, 0] - a[0, 0, 0, 0] == s_c
    assert a[0, 8, 0, 0] // (256 * 1024) == a[0, 0, 0, 0] // (256 * 1024)
    # a base in slice 3: channel 0 in slice 3, channel 1 wraps to slice 0 one S_C further in
    t2 = bmk1880_tl_prealloc(rig.ctx, 3 * 256 * 1024 + 0x10, shape_t4(1, 2, 3, 3), U8)
    a2 = snapshot_tl(t2).addresses(chip)
    assert a2[0, 0, 0, 0] == 3 * 256 * 1024 + 0x10 and a2[0, 1, 0, 0] == 0x10 + s_c


@pytest.mark.parametrize("seed", [8, 9])
def test_gdma_through_a_tensor_in_a_high_slice(seed):
    """The model writes where the formula says, for a base outside slice 0."""
    r = rng_for(seed)
    rig = Rig()
    shape = (2, 40, 3, 4)
    la = 7 * rig.p["slice_size"] + 100
    t = bmk1880_tl_prealloc_align(rig.ctx, la, shape_t4(*shape), I8)
    v = values(r, shape, True)
    rig.gmem_put(0x1000, v)
    bmk1880_gdma_load(rig.ctx, t, 0x1000, CTRL_NULL)
    rig.run()
    stride = ref.default_lmem_stride(rig.p, shape, True)
    assert np.array_equal(ref.lmem_get(rig.m.lmem, rig.p, la, stride, shape, True), v)


def test_matrix_layout():
    rig = Rig()
    m = bmk1880_tl_alloc(rig.ctx, shape_t2(3, 37), I8, CTRL_AL)
    assert bmk1880_tl_shape_to_nchw(rig.ctx, shape_t2(3, 37)) == (3, 3, 1, 16)
    a = snapshot_tl(m).addresses(CHIP)
    assert a.shape == (3, 37)
    st = ref.default_lmem_stride(rig.p, (3, 3, 1, 16), True)
    for r_, c in np.ndindex(3, 37):
        assert a[r_, c] == ref.lmem_addr(rig.p, m.laddr, st, r_, c // 16, 0, c % 16)


# ---- allocation ----------------------------------------------------------------------------------------------------
def test_tl_alloc_is_a_stack():
    rig = Rig()
    ctx = rig.ctx
    a = bmk1880_tl_alloc(ctx, shape_t4(1, 32, 1, 3), I8, CTRL_NULL)
    b = bmk1880_tl_alloc(ctx, shape_t4(1, 33, 2, 2), I8, CTRL_AL)
    c = bmk1880_tl_alloc(ctx, shape_t4(2, 1, 1, 5), U8, CTRL_NULL)
    assert (a.laddr, b.laddr, c.laddr) == (0, 16, 16 + 2 * 16)      # b aligned to eu_num; size N x S_N
    assert not a.aligned and b.aligned
    assert bmk1880_tl_size(ctx, b) == 32 and bmk1880_tl_shape_to_size(ctx, shape_t4(2, 1, 1, 5), False, U8) == 10
    with pytest.raises(BmkError, match=r"bmk1880_tl_free: tlp: .* is not the last allocated tensor"):
        bmk1880_tl_free(ctx, b)
    bmk1880_tl_free(ctx, c)
    bmk1880_tl_free(ctx, b)
    d = bmk1880_tl_alloc(ctx, shape_t4(1, 1, 1, 1), I8, CTRL_NULL)
    assert d.laddr == 3                                                # the space is reused
    with pytest.raises(BmkError, match="already freed"):
        bmk1880_tl_free(ctx, c)


def test_tl_alloc_out_of_memory_returns_none():
    rig = Rig()
    ctx = rig.ctx
    big = bmk1880_tl_alloc(ctx, shape_t4(1, 32, 1, CHIP.lmem_size - 10), I8, CTRL_NULL)
    assert big is not None and big.laddr == 0
    assert bmk1880_tl_alloc(ctx, shape_t4(1, 1, 1, 11), I8, CTRL_NULL) is None
    assert "out of memory" in ctx.last_error and "bmk1880_tl_alloc" in ctx.last_error
    assert bmk1880_tl_alloc(ctx, shape_t4(1, 1, 1, 10), I8, CTRL_NULL) is not None
    assert bmk1880_tl_alloc(ctx, shape_t4(1, 1, 1, 1), 7, CTRL_NULL) is None and "fmt" in ctx.last_error
    assert bmk1880_tl_alloc(ctx, shape_t4(1, 1, 1, 1), I8, CTRL_TP) is None and "ctrl" in ctx.last_error
    assert bmk1880_tl_alloc(ctx, shape_t4(0, 1, 1, 1), I8, CTRL_NULL) is None and "s:" in ctx.last_error


def test_tl_alloc_bank():
    rig = Rig()
    ctx = rig.ctx
    bank = CHIP.lmem_bank_size
    a = bmk1880_tl_alloc(ctx, shape_t4(1, 1, 1, 10), I8, CTRL_NULL)
    b = bmk1880_tl_alloc_bank(ctx, 2, shape_t4(1, 32, 4, 4), I8, CTRL_AL)
    assert a.laddr == 0 and b.laddr == 2 * bank
    assert bmk1880_tl_alloc_bank(ctx, 1, shape_t4(1, 1, 1, 1), I8, CTRL_NULL) is None
    assert "past bank 1" in ctx.last_error
    assert bmk1880_tl_alloc_bank(ctx, 3, shape_t4(1, 1, 1, bank + 1), I8, CTRL_NULL) is None
    assert "bank 3" in ctx.last_error
    assert bmk1880_tl_alloc_bank(ctx, CHIP.lmem_banks, shape_t4(1, 1, 1, 1), I8, CTRL_NULL) is None
    assert "bank_id" in ctx.last_error
    bmk1880_tl_free(ctx, b)
    c = bmk1880_tl_alloc(ctx, shape_t4(1, 1, 1, 1), I8, CTRL_NULL)
    assert c.laddr == 10                                            # freeing b released the gap too


def test_prealloc_rules():
    rig = Rig()
    ctx = rig.ctx
    S = CHIP.lmem_size
    t = bmk1880_tl_prealloc(ctx, S - 16, shape_t4(1, 32, 1, 16), I8)
    assert t is not None and not t.aligned
    assert bmk1880_tl_prealloc(ctx, S - 15, shape_t4(1, 32, 1, 16), I8) is None
    assert "leaves its lmem slice" in ctx.last_error and "la:" in ctx.last_error
    assert bmk1880_tl_prealloc(ctx, CHIP.lmem_total, shape_t4(1, 1, 1, 1), I8) is None
    assert "outside lmem" in ctx.last_error
    a = bmk1880_tl_prealloc_align(ctx, 3, shape_t4(1, 1, 3, 3), U8)
    assert a.aligned and a.laddr == 3
    bmk1880_tl_free(ctx, a)                                          # prealloc tensors free in any order
    bmk1880_tl_free(ctx, t)


def test_reset_releases_allocations():
    rig = Rig()
    ctx = rig.ctx
    a = bmk1880_tl_alloc(ctx, shape_t4(1, 2, 2, 2), I8, CTRL_AL)
    p = bmk1880_tl_prealloc(ctx, 0x100, shape_t4(1, 2, 2, 2), I8)
    bmk1880_gdma_load(ctx, a, 0, CTRL_NULL)
    bmk1880_reset(ctx)
    assert rig.cmdbuf() == b""
    with pytest.raises(BmkError, match=r"bmk1880_gdma_store: t: was allocated before bmk1880_reset"):
        bmk1880_gdma_store(ctx, a, 0, CTRL_NULL)
    bmk1880_gdma_store(ctx, p, 0, CTRL_NULL)                         # prealloc tensors stay valid
    b = bmk1880_tl_alloc(ctx, shape_t4(1, 1, 1, 1), I8, CTRL_NULL)
    assert b.laddr == 0
    with pytest.raises(BmkError, match="before bmk1880_reset"):
        bmk1880_tl_free(ctx, a)


def test_freed_tensor_cannot_be_used():
    rig = Rig()
    a = rig.alloc((1, 1, 2, 2))
    b = rig.alloc((1, 1, 2, 2))
    bmk1880_tl_free(rig.ctx, b)
    with pytest.raises(BmkError, match=r"bmk1880_tpu_copy: dst: was freed by bmk1880_tl_free"):
        bmk1880_tpu_copy(rig.ctx, dst=b, src=a)


def test_size_helpers():
    assert bmk1880_tg_shape_to_size(shape_t4(2, 3, 4, 5), I8) == 120
    assert bmk1880_tg_shape_to_size(shape_t2(7, 9), U8) == 63
    with pytest.raises(BmkError, match="bmk1880_tg_shape_to_size: fmt"):
        bmk1880_tg_shape_to_size(shape_t2(7, 9), 3)
    rig = Rig()
    with pytest.raises(BmkError, match="bmk1880_tl_shape_to_size: s: must be a shape_t"):
        bmk1880_tl_shape_to_size(rig.ctx, (1, 2, 3, 4), False, I8)
    assert CTRL_TP == 32


@pytest.mark.parametrize("seed", [10, 11])
def test_slice_rule_against_brute_force(seed):
    """The first channel with a datum outside the slice of its (0, c, 0, 0) (2.3's formal rule)
    or outside lmem, against every datum."""
    from tlm.bm1880.chip import lmem_slice_overflow
    r = rng_for(seed)
    chip = bmk1880_chip_info_t(1880, 4, 4, 64, 2, 32)
    p = ref.params(chip)
    for _ in range(300):
        shape = tuple(int(v) for v in r.integers(1, 5, 4)) if r.integers(0, 2) else (1, int(r.integers(1, 20)), 1, 2)
        stride = tuple(int(v) for v in r.integers(0, 12, 4))
        la = int(r.integers(0, p["total"]))
        bad = None
        for c in range(shape[1]):
            home = ref.lmem_addr(p, la, stride, 0, c, 0, 0) // p["slice_size"]
            if any(ref.lmem_addr(p, la, stride, n, c, h, w) // p["slice_size"] != home
                   or ref.lmem_addr(p, la, stride, n, c, h, w) >= p["total"]
                   for n, h, w in np.ndindex(shape[0], shape[2], shape[3])):
                bad = c
                break
        assert lmem_slice_overflow(chip, la, shape, stride) == bad, (shape, stride, la)


def test_operand_size_limit():
    """Choice C-LIMIT: zero strides cannot make an lmem operand larger than lmem."""
    rig = Rig()
    t = bmk1880_tl_prealloc(rig.ctx, 0, shape_t4(1, 1, 1 << 20, 1 << 20), I8)
    assert t is None and "choice C-LIMIT" in rig.ctx.last_error
    t = bmk1880_tl_prealloc(rig.ctx, 0, shape_t4(1, 1, 1, 1), I8)
    t.shape = shape_t4(1, 1, 1 << 31, 1 << 31)
    t.stride = stride_t4(0, 0, 0, 0)
    with pytest.raises(BmkError, match=r"bmk1880_tpu_copy: src: shape .* more than lmem's 2097152 bytes"):
        bmk1880_tpu_copy(rig.ctx, dst=rig.alloc((1, 1, 1, 1)), src=t)
