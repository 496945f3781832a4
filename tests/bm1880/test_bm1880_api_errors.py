"""Argument errors: every call rejects what the guide forbids with one BmkError naming the
call and the argument, and records nothing. A valid baseline per computation call, then
one broken rule at a time."""
import re

import pytest

from tests.bm1880.bm1880_cases import COMPUTE, T, baseline, call, tg
from tests.bm1880.bm1880_harness import I8, U8, Rig
from tlm.bm1880 import (CTRL_AL, CTRL_NULL, CTRL_RA, CTRL_RELU, CTRL_TP, PARAM_TYPES, BmkError,
                        bmk1880_acquire_cmdbuf, bmk1880_add_dependency, bmk1880_cleanup, bmk1880_create_streams,
                        bmk1880_destroy_streams, bmk1880_enter, bmk1880_exit, bmk1880_gdma_load, bmk1880_info_t,
                        bmk1880_parallel_disable, bmk1880_parallel_enable, bmk1880_register, bmk1880_reset,
                        bmk1880_set_stream, bmk1880_tl_alloc, bmk1880_tl_free, bmk1880_tl_prealloc, shape_t4, stride_t4,
                        tensor_gmem)
from tlm.bm1880 import api



@pytest.mark.parametrize("name", COMPUTE)
def test_baseline_is_valid_and_records_one_command(name):
    rig = Rig()
    op = call(rig, name, baseline(rig, name))
    assert op.kind.name == name and op.index == 0
    res = rig.run()
    assert res.executed == 1


def _u(rig, shape=T, fmt=U8):
    return rig.alloc(shape, fmt)


# (call, mutation(rig, args) -> None, argument named in the error, regex for the reason)
CASES = [
    ("gdma_copy_gmem", lambda r, a: a.update(dst=tg(0x1000, (1, 3, 2, 3))), "dst", "totals must be equal"),
    ("gdma_copy_gmem", lambda r, a: a.update(dst=tg(0x1000, (3, 4))), "dst", "both tensors or both matrices"),
    ("gdma_copy_gmem", lambda r, a: a.update(dst=tg(0, (3, 4)), src=tg(0x100, (4, 3)), ctrls=CTRL_TP), "ctrls",
     "CTRL_TP is not allowed"),
    ("gdma_copy_gmem", lambda r, a: a.update(ctrls=CTRL_RELU), "ctrls", "CTRL_RELU is not allowed"),
    ("gdma_copy_gmem", lambda r, a: a.update(src=tg((1 << 40) - 4, T)), "src", "beyond the 40-bit gmem"),
    ("gdma_copy_gmem", lambda r, a: a.update(dst=tensor_gmem(0, shape_t4(*T), stride_t4(0, 0, 0, 1))), "dst",
     "two elements at one gmem address"),
    ("gdma_copy_gmem", lambda r, a: a.update(src=None), "src", "is NULL"),
    ("gdma_copy_lmem", lambda r, a: a.update(dst=r.alloc((1, 1, 1, 5))), "dst", "totals must be equal"),
    ("gdma_copy_lmem", lambda r, a: a.update(src=r.alloc((3, 4))), "src", "is a matrix"),
    ("gdma_load", lambda r, a: a.update(ctrls=CTRL_AL), "ctrls", "CTRL_AL is not allowed"),
    ("gdma_load", lambda r, a: a.update(gaddr=(1 << 40) - 2), "gaddr", "beyond the 40-bit gmem"),
    ("gdma_load", lambda r, a: a.update(gaddr=-1), "gaddr", "does not fit"),
    ("gdma_load", lambda r, a: a.update(t=None), "t", "is NULL"),
    ("gdma_store", lambda r, a: a.update(t="tensor"), "t", "must be a tensor_lmem"),
    ("gdma_load_stride", lambda r, a: a.update(stride=(1, 2, 3, 4)), "stride", "must be a stride_t"),
    ("gdma_store_stride", lambda r, a: a.update(stride=stride_t4(0, 1, 1, 1)), "stride",
     "two elements at one gmem address"),
    ("gdma_lrn_shift", lambda r, a: a.update(dst=r.alloc((1, 4, 2, 2))), "dst", "same shape"),
    ("gdma_lrn_shift", lambda r, a: a.update(lrn_step=-1), "lrn_step", r"outside 0\.\."),
    ("gdma_lrn_shift", lambda r, a: a.update(right_shift=2), "right_shift", "must be a bool"),
    ("tpu_mul", lambda r, a: a.update(rshift_width=32), "rshift_width", "outside 0..31"),
    ("tpu_mul", lambda r, a: a.update(res_low=_u(r)), "res_low", "is FMT_U8 but the result is signed"),
    ("tpu_mul", lambda r, a: a.update(res_high=_u(r)), "res_high", "both planes"),
    ("tpu_mul", lambda r, a: a.update(res_high=a["res_low"]), "res_high", "overlaps res_low"),
    ("tpu_mac", lambda r, a: a.update(res_high=bmk1880_tl_prealloc(r.ctx, a["res_low"].laddr + 1, shape_t4(*T), I8)),
     "res_high", "overlaps res_low at lmem"),
    ("tpu_mul", lambda r, a: a.update(b=r.alloc((1, 3, 2, 1))), "b", "same shape"),
    ("tpu_mul", lambda r, a: a.update(a=r.alloc((3, 4))), "a", "is a matrix"),
    ("tpu_mul", lambda r, a: a.update(res_low=None), "res_low", "is NULL"),
    ("tpu_mul_const", lambda r, a: a.update(b=200), "b", r"outside -128\.\.127"),
    ("tpu_mul_const", lambda r, a: a.update(b=-129, b_is_signed=False), "b", "does not fit"),
    ("tpu_mul_const", lambda r, a: a.update(b=256, b_is_signed=False), "b", "does not fit"),
    ("tpu_mac", lambda r, a: a.update(res_high=None), "res_high", "is NULL"),
    ("tpu_mac", lambda r, a: a.update(lshift_width=-1), "lshift_width", "outside 0..31"),
    ("tpu_mac", lambda r, a: a.update(res_high=_u(r), res_low=_u(r)), "res_low", "is FMT_U8 but the result is signed"),
    ("tpu_mac_const", lambda r, a: a.update(b=128), "b", "outside"),
    ("tpu_add", lambda r, a: a.update(a_high=None), "a_high", "is NULL"),
    ("tpu_add", lambda r, a: a.update(res_high=_u(r), res_low=_u(r)), "res_low", "result is signed"),
    ("tpu_add_const", lambda r, a: a.update(b=70000), "b", "does not fit"),
    ("tpu_add_const", lambda r, a: a.update(b=40000), "b", r"outside -32768\.\.32767"),
    ("tpu_sub", lambda r, a: [a.update({k: _u(r)})
                              for k in ("res_high", "res_low", "a_high", "a_low", "b_high", "b_low")],
     "res_low", "the result of sub must be signed"),
    ("tpu_max", lambda r, a: a.update(b=_u(r)), "b", "both be signed or unsigned"),
    ("tpu_max", lambda r, a: a.update(max=_u(r)), "max", "is FMT_U8 but the result is signed"),
    ("tpu_max_const", lambda r, a: a.update(b_is_signed=False, b=1), "b_is_signed", "both be signed or unsigned"),
    ("tpu_min", lambda r, a: a.update(min=None), "min", "is NULL"),
    ("tpu_min_const", lambda r, a: a.update(b=-200), "b", "does not fit"),
    ("tpu_arith_shift", lambda r, a: a.update(a_high=_u(r), a_low=_u(r)), "a_high", "16-bit signed"),
    ("tpu_arith_shift", lambda r, a: a.update(bits=_u(r)), "bits", "bits must be signed"),
    ("tpu_arith_shift", lambda r, a: a.update(res_high=None), "res_high", "is NULL"),
    ("tpu_and_int8", lambda r, a: a.update(res=_u(r)), "res", "result is signed"),
    ("tpu_or_int8", lambda r, a: a.update(b=r.alloc((1, 1, 2, 2))), "b", "same shape"),
    ("tpu_xor_int8", lambda r, a: a.update(a=None), "a", "is NULL"),
    ("tpu_and_int16", lambda r, a: a.update(b_high=None), "b_high", "is NULL"),
    ("tpu_or_int16", lambda r, a: a.update(a_low=_u(r)), "a_high", "both planes"),
    ("tpu_xor_int16", lambda r, a: a.update(res_high=None), "res_high", "is NULL"),
    ("tpu_copy", lambda r, a: a.update(dst=_u(r)), "dst", "is FMT_U8 but src is FMT_I8"),
    ("tpu_copy", lambda r, a: a.update(dst=r.alloc((1, 3, 1, 4))), "dst", "same shape"),
    ("tpu_copy_with_stride", lambda r, a: a.update(dst_stride=None), "dst_stride", "must be a stride_t"),
    ("tpu_copy_with_stride", lambda r, a: a.update(dst_stride=stride_t4(4, 4, 70000, 1)), "dst",
     "leaves its lmem slice"),
    ("tpu_copy_with_stride", lambda r, a: a.update(dst_stride=stride_t4(0, 0, 0, 0)), "dst",
     "two elements at one address"),
    ("tpu_mdsum", lambda r, a: a.update(res_low=r.alloc((1, 3, 1, 2))), "res_low", r"\(1, 3, 1, 1\)"),
    ("tpu_mdsum", lambda r, a: a.update(res_low=r.alloc((1, 3, 1, 1), U8)), "res_low", "both be signed or unsigned"),
    ("tpu_lut", lambda r, a: a.update(table=r.alloc((1, 32, 1, 256))), "table", r"\(1, 32, 16, 16\)"),
    ("tpu_lut", lambda r, a: a.update(ofmap=_u(r)), "ofmap", "table is FMT_I8"),
    ("tpu_relu", lambda r, a: a.update(ofmap=_u(r)), "ofmap", "result is signed"),
    ("tpu_conv", lambda r, a: a.update(ifmap=r.alloc((1, 2, 4, 5), aligned=False)), "ifmap", "must be aligned"),
    ("tpu_conv", lambda r, a: a.update(ofmap=r.alloc((1, 3, 2, 3), aligned=False)), "ofmap", "must be aligned"),
    ("tpu_conv", lambda r, a: a.update(ifmap=r.alloc((1, 4, 4, 5))), "weight", r"\(4, 3, Kh, Kw\)"),
    ("tpu_conv", lambda r, a: a.update(bias=r.alloc((2, 3, 1, 1))), "bias", "must be unaligned"),
    ("tpu_conv", lambda r, a: a.update(bias=r.alloc((1, 3, 1, 1), aligned=False)), "bias", r"\(2, 3, 1, 1\)"),
    ("tpu_conv", lambda r, a: a.update(stride_h=0), "stride_h", ">= 1"),
    ("tpu_conv", lambda r, a: a.update(dilation_w=0), "dilation_w", ">= 1"),
    ("tpu_conv", lambda r, a: a.update(pad_top=1), "ofmap", "3 x 3"),
    ("tpu_conv", lambda r, a: a.update(dilation_h=3), "ifmap", "does not fit"),
    ("tpu_conv", lambda r, a: a.update(pad_left=256), "pad_left", "does not fit"),
    ("tpu_conv", lambda r, a: a.update(rshift_width=40), "rshift_width", "outside"),
    ("tpu_conv", lambda r, a: setattr(a["weight"], "stride", stride_t4(1, 1, 1, 1)), "weight", "layout of 4.41"),
    ("tpu_conv", lambda r, a: a.update(ofmap=_u(r, (1, 3, 2, 3))), "ofmap", "result is signed"),
    ("tpu_winograd", lambda r, a: a.update(weight=r.alloc((2, 3, 2, 2), aligned=False)), "weight", "3x3 kernels"),
    ("tpu_winograd", lambda r, a: setattr(a["weight"], "stride", stride_t4(27, 9, 3, 2)), "weight",
     "default strided"),
    ("tpu_depthwise", lambda r, a: a.update(weight=r.alloc((2, 3, 3, 3), aligned=False)), "weight",
     r"\(1, 3, Kh, Kw\)"),
    ("tpu_depthwise", lambda r, a: a.update(ofmap=r.alloc((1, 2, 2, 3))), "ofmap", "keeps the channels"),
    ("tpu_max_pooling", lambda r, a: a.update(kh=0), "kh", ">= 1"),
    ("tpu_max_pooling", lambda r, a: a.update(ofmap=r.alloc((1, 3, 3, 2))), "ofmap", "2 x 2"),
    ("tpu_max_pooling", lambda r, a: a.update(ifmap=r.alloc((1, 3, 4, 5), aligned=False)), "ifmap", "must be aligned"),
    ("tpu_avg_pooling", lambda r, a: a.update(avg_pooling_const=300), "avg_pooling_const", "does not fit"),
    ("tpu_avg_pooling", lambda r, a: a.update(rshift_width=-1), "rshift_width", "outside"),
    ("tpu_matrix_mac", lambda r, a: a.update(ctrls=CTRL_RELU | CTRL_RA), "ctrls", "not both"),
    ("tpu_matrix_mac", lambda r, a: a.update(res_is_int8=False), "res", r"\(4, 5\)"),
    ("tpu_matrix_mac", lambda r, a: a.update(ctrls=CTRL_RA), "res", r"\(4, 5\)"),
    ("tpu_matrix_mac", lambda r, a: a.update(left=r.alloc((1, 2, 1, 4))), "left", "this call takes matrices"),
    ("tpu_matrix_mac", lambda r, a: setattr(a["right"], "stride", stride_t4(32, 32, 16, 1)), "right",
     "must be aligned"),
    ("tpu_matrix_mac", lambda r, a: a.update(bias=r.alloc((1, 5))), "bias", r"\(2, 5\)"),
    ("tpu_matrix_mac", lambda r, a: a.update(lshift_width=32), "lshift_width", "outside 0..31"),
    ("tpu_matrix_mac", lambda r, a: a.update(right=r.alloc((3, 5))), "right", "needs 4 rows"),
    ("tpu_matrix_mac_2", lambda r, a: a.update(left=r.alloc((1, 256, 1, 255))), "left", r"\(1, 256, 1, 256\)"),
    ("tpu_matrix_mac_2", lambda r, a: a.update(res=_u(r, (1, 256, 1, 256))), "res", "result is signed"),
]


@pytest.mark.parametrize("name,mutate,arg,why", CASES, ids=[f"{c[0]}-{c[2]}-{i}" for i, c in enumerate(CASES)])
def test_argument_error(name, mutate, arg, why):
    rig = Rig()
    args = baseline(rig, name)
    mutate(rig, args)
    with pytest.raises(BmkError) as e:
        call(rig, name, args)
    msg = str(e.value)
    assert msg.startswith(f"bmk1880_{name}: {arg}: "), msg
    assert re.search(why, msg), msg
    assert "\n" not in msg
    assert rig.cmdbuf() == b""                                  # nothing recorded


def test_every_computation_call_has_error_cases():
    assert {c[0] for c in CASES} == set(COMPUTE)


def test_param_struct_and_keywords():
    rig = Rig()
    args = baseline(rig, "tpu_relu")
    p = PARAM_TYPES["tpu_relu"](**args)
    assert type(p).__name__ == "bmk1880_relu_param_t"
    api.bmk1880_tpu_relu(rig.ctx, p)
    with pytest.raises(BmkError, match="bmk1880_tpu_relu: p: give a bmk1880_relu_param_t or keyword fields, not both"):
        api.bmk1880_tpu_relu(rig.ctx, p, ofmap=args["ofmap"])
    with pytest.raises(BmkError, match="bmk1880_tpu_relu: ofmapp: bmk1880_relu_param_t has no such field"):
        api.bmk1880_tpu_relu(rig.ctx, ofmapp=args["ofmap"])
    with pytest.raises(BmkError, match="bmk1880_tpu_relu: p: must be a bmk1880_relu_param_t, got bmk1880_mul_param_t"):
        api.bmk1880_tpu_relu(rig.ctx, PARAM_TYPES["tpu_mul"]())


# ---- system API --------------------------------------------------------------------------------------------------
def test_register_errors():
    with pytest.raises(BmkError, match="bmk1880_register: info: must be a bmk1880_info_t"):
        bmk1880_register({"chip_version": 1880})
    with pytest.raises(BmkError, match=r"bmk1880_register: info.chip_version: 1881; it must be 1880"):
        bmk1880_register(bmk1880_info_t(1881, bytearray(16), 16))
    with pytest.raises(BmkError, match="bmk1880_register: info.cmdbuf: must be a writable buffer"):
        bmk1880_register(bmk1880_info_t(1880, None, 16))
    with pytest.raises(BmkError, match="bmk1880_register: info.cmdbuf: must be a writable buffer"):
        bmk1880_register(bmk1880_info_t(1880, b"\0" * 16, 16))
    with pytest.raises(BmkError, match="holds 8 bytes, cmdbuf_size says 16"):
        bmk1880_register(bmk1880_info_t(1880, bytearray(8), 16))
    with pytest.raises(BmkError, match="cmdbuf_size: -1"):
        bmk1880_register(bmk1880_info_t(1880, bytearray(8), -1))


def test_cleanup_ends_the_context():
    rig = Rig()
    t = rig.alloc(T)
    bmk1880_cleanup(rig.ctx)
    for fn, args in ((bmk1880_acquire_cmdbuf, ()), (bmk1880_reset, ()), (bmk1880_cleanup, ()),
                     (bmk1880_gdma_load, (t, 0, CTRL_NULL)), (bmk1880_tl_alloc, (shape_t4(*T), I8, CTRL_NULL))):
        with pytest.raises(BmkError, match=rf"{fn.__name__}: ctx: was freed by bmk1880_cleanup"):
            fn(rig.ctx, *args)
    with pytest.raises(BmkError, match="bmk1880_gdma_load: ctx: must be a bmk1880_context_t"):
        bmk1880_gdma_load(None, t, 0, CTRL_NULL)


def test_mode_errors():
    rig = Rig()
    ctx = rig.ctx
    with pytest.raises(BmkError, match="bmk1880_parallel_disable: ctx: no parallel group is open"):
        bmk1880_parallel_disable(ctx)
    bmk1880_parallel_enable(ctx)
    with pytest.raises(BmkError, match="bmk1880_parallel_enable: ctx: a parallel group is already open"):
        bmk1880_parallel_enable(ctx)
    with pytest.raises(BmkError, match="bmk1880_create_streams: ctx: a parallel group is open"):
        bmk1880_create_streams(ctx, 2)
    bmk1880_parallel_disable(ctx)
    with pytest.raises(BmkError, match="bmk1880_set_stream: ctx: no streams exist"):
        bmk1880_set_stream(ctx, 0)
    with pytest.raises(BmkError, match="bmk1880_destroy_streams: ctx: no streams exist"):
        bmk1880_destroy_streams(ctx)
    for bad in (0, 255, "2", True):
        with pytest.raises(BmkError, match="bmk1880_create_streams: nr_streams"):
            bmk1880_create_streams(ctx, bad)
    bmk1880_create_streams(ctx, 2)
    with pytest.raises(BmkError, match="bmk1880_create_streams: ctx: streams already exist"):
        bmk1880_create_streams(ctx, 2)
    with pytest.raises(BmkError, match="bmk1880_parallel_enable: ctx: streams are active"):
        bmk1880_parallel_enable(ctx)
    with pytest.raises(BmkError, match=r"bmk1880_set_stream: i: 2; the streams are 0..1"):
        bmk1880_set_stream(ctx, 2)
    bmk1880_set_stream(ctx, 1)
    bmk1880_destroy_streams(ctx)


def test_dependency_errors():
    rig = Rig()
    ctx = rig.ctx
    a, b = rig.alloc(T), rig.alloc(T)
    op1 = bmk1880_gdma_load(ctx, a, 0, CTRL_NULL)
    op2 = bmk1880_gdma_load(ctx, b, 0x100, CTRL_NULL)
    with pytest.raises(BmkError, match="bmk1880_add_dependency: before: must be a bmk1880_op_t"):
        bmk1880_add_dependency(ctx, 1, op2)
    with pytest.raises(BmkError, match="bmk1880_add_dependency: after: is the same command as before"):
        bmk1880_add_dependency(ctx, op1, op1)
    with pytest.raises(BmkError, match=r"bmk1880_add_dependency: after: .*#0.* already takes place before .*#1"):
        bmk1880_add_dependency(ctx, op2, op1)
    other = Rig()
    op3 = bmk1880_gdma_load(other.ctx, other.alloc(T), 0, CTRL_NULL)
    with pytest.raises(BmkError, match="bmk1880_add_dependency: after: .* belongs to another context"):
        bmk1880_add_dependency(ctx, op1, op3)
    size = len(rig.cmdbuf())
    bmk1880_reset(ctx)
    with pytest.raises(BmkError, match="bmk1880_add_dependency: before: .* was recorded before bmk1880_reset"):
        bmk1880_add_dependency(ctx, op1, op2)
    assert size > 0 and rig.cmdbuf() == b""


def test_command_buffer_full():
    rig = Rig(cmdbuf_size=64)
    t = rig.alloc(T)
    bmk1880_gdma_load(rig.ctx, t, 0, CTRL_NULL)                   # 6 + 22 + 8 + 4 = 40 bytes
    with pytest.raises(BmkError, match=r"bmk1880_gdma_load: the command buffer is full: 40 of 64 bytes used, "
                                       r"this command needs 40"):
        bmk1880_gdma_load(rig.ctx, t, 0, CTRL_NULL)
    assert len(rig.cmdbuf()) == 40


def test_tl_free_errors():
    rig = Rig()
    with pytest.raises(BmkError, match="bmk1880_tl_free: tlp: must be a tensor_lmem"):
        bmk1880_tl_free(rig.ctx, None)
    t = rig.alloc(T)
    other = Rig()
    with pytest.raises(BmkError, match="bmk1880_tl_free: tlp: .* was allocated by another context"):
        bmk1880_tl_free(other.ctx, t)


def test_enter_exit_errors():
    rig = Rig()
    with pytest.raises(BmkError, match="bmk1880_exit: no context is entered"):
        bmk1880_exit()
    bmk1880_enter(rig.ctx)
    try:
        with pytest.raises(BmkError, match="bmk1880_enter: ctx: another context is entered"):
            bmk1880_enter(Rig().ctx)
    finally:
        bmk1880_exit()
    assert api.bmk1880_current() is None


def test_alloc_failure_is_none_not_an_exception():
    rig = Rig()
    assert bmk1880_tl_alloc(rig.ctx, "(1, 2, 3, 4)", I8, CTRL_AL) is None
    assert rig.ctx.last_error.startswith("bmk1880_tl_alloc: s: must be a shape_t")


def test_hostile_values_are_always_bmk_errors():
    """Every field of every call set to values of the wrong type or range: a BmkError or a
    valid command, never another exception (seeded)."""
    from tlm.bm1880 import shape_t, stride_t, tensor_lmem
    from tlm.bm1880.descriptors import BY_NAME
    bad_values = [None, "x", 1.5, -1, 1 << 40, True, (1, 2), stride_t4(1, 2, 3, 4), shape_t(4, 1, 1, 1.5, 1),
                  tensor_lmem(I8, (1, 2, 3, 4)), tensor_lmem(I8, shape_t4(1, 1, 1, 1), stride=(1, 1, 1, 1)),
                  tensor_lmem(I8, shape_t4(1, 1, 1, 1), laddr=-5), tensor_lmem("I8", shape_t4(1, 1, 1, 1)),
                  tensor_lmem(I8, shape_t(3, 1, 1, 1, 1)), tensor_gmem(0, shape_t4(1, 1, 1, 1), stride_t(1, 1, 1, 0.5)),
                  tensor_gmem(-1, shape_t4(1, 1, 1, 1), stride_t4(1, 1, 1, 1)), stride_t(-1, 1, 1, 1)]
    n = 0
    for name in COMPUTE:
        for f in BY_NAME[name].fields:
            for v in bad_values:
                rig = Rig()
                args = baseline(rig, name)
                args[f.name] = v
                try:
                    call(rig, name, args)
                except BmkError as e:
                    assert str(e).startswith(f"bmk1880_{name}: ") and "\n" not in str(e)
                    n += 1
    assert n > 1000


@pytest.mark.parametrize("seed", [501, 502, 503, 504])
def test_random_call_sequences_never_raise(seed):
    """Random sequences of every call (system, allocation, computation) with valid arguments,
    one argument replaced, or arguments drawn from wrong types and values: each call returns
    or raises one BmkError (allocators: None); each buffer then runs to its end or stops with a
    documented fault. Rounds of 60 calls, each ended by a run and bmk1880_reset."""
    import numpy as np
    from tests.bm1880.bm1880_harness import rng_for
    from tlm.bm1880 import Bm1880, shape_t2, stride_t2, tensor_gmem_default
    from tlm.bm1880.descriptors import BY_NAME
    r = rng_for(seed)
    pick = lambda xs: xs[int(r.integers(0, len(xs)))]                          # noqa: E731
    rig = Rig()
    ctx = rig.ctx
    shapes = [shape_t4(1, 3, 2, 2), shape_t4(2, 37, 3, 5), shape_t4(1, 32, 16, 16), shape_t4(1, 1, 1, 1),
              shape_t2(5, 4), shape_t2(2, 4), shape_t4(2, 3, 1, 1)]
    weird = [None, 0, -1, 1.5, "x", True, 1 << 40, stride_t4(1, 1, 1, 1), np.int64(2)]
    gm = [tensor_gmem_default(0x1000, shape_t4(1, 3, 2, 2)), tensor_gmem_default(0x8000, shape_t2(4, 3)),
          tensor_gmem(0, shape_t4(1, 3, 2, 2), stride_t4(0, 0, 0, 0))]
    tensors, ops = [], []

    def value(ftype):
        if r.random() < 0.2:
            return pick(weird)
        if ftype == "tl":
            return pick(tensors + [None]) if tensors else None
        if ftype == "tg":
            return pick(gm)
        if ftype == "stride":
            return pick([stride_t4(12, 4, 2, 1), stride_t2(4, 1), stride_t4(0, 0, 0, 0), stride_t4(64, 16, 4, 1)])
        if ftype in ("u8", "c8"):
            return pick([0, 1, 2, 3, 255, -1, 200])
        if ftype == "bool":
            return bool(r.integers(0, 2))
        if ftype == "c16":
            return pick([0, 5, -1, 40000])
        if ftype == "int":
            return pick([0, 1, 3, 31, 32, -1])
        if ftype in ("u32", "ctrl"):
            return pick([0, 1, 4, 32, 256, 260])
        return pick([0, 0x100, 0x2000, (1 << 40) - 1])
    system = ["parallel_enable", "parallel_disable", "create_streams", "destroy_streams", "set_stream",
              "add_dependency", "tl_alloc", "tl_alloc_bank", "tl_prealloc", "tl_free", "acquire_cmdbuf"]
    compute = [k for k in BY_NAME if k != "add_dependency"]
    outcomes, valid = set(), 0
    for _ in range(6):
        for _ in range(60):
            name = pick(system) if r.random() < 0.3 else pick(compute)
            fn = getattr(api, f"bmk1880_{name}")
            try:
                if name in ("parallel_enable", "parallel_disable", "destroy_streams", "acquire_cmdbuf"):
                    fn(ctx)
                elif name in ("create_streams", "set_stream"):
                    fn(ctx, pick([0, 1, 2, 3, -1, 300, "x"]))
                elif name == "add_dependency":
                    fn(ctx, pick(ops + [None]), pick(ops + [None]))
                elif name in ("tl_alloc", "tl_alloc_bank", "tl_prealloc"):
                    lead = [pick([0, 1, 7, 8, -1])] if name == "tl_alloc_bank" else \
                        [pick([0, 0x100, 0x10000 * 5 + 3, 1 << 30])] if name == "tl_prealloc" else []
                    tail = [] if name == "tl_prealloc" else [pick([CTRL_AL, CTRL_NULL, CTRL_TP])]
                    t = fn(ctx, *lead, pick(shapes), pick([I8, U8, 7]), *tail)
                    if t is not None:
                        tensors.append(t)
                    else:
                        assert ctx.last_error.startswith(f"bmk1880_{name}: ")
                elif name == "tl_free":
                    if tensors:
                        t = pick(tensors)
                        tensors.remove(t)
                        fn(ctx, t)
                else:
                    kind = BY_NAME[name]
                    u = r.random()
                    args = {f.name: value(f.type) for f in kind.fields}
                    if u < 0.6:
                        try:
                            args = baseline(rig, name)              # the rig asserts on a full lmem
                        except AssertionError:
                            pass
                        if u < 0.2:
                            f = pick(kind.fields)
                            args[f.name] = value(f.type)
                    ops.append(call(rig, name, args))
                    valid += 1
            except BmkError as e:
                assert str(e).startswith(f"bmk1880_{name}: ") and "\n" not in str(e)
        for close in (api.bmk1880_parallel_disable, api.bmk1880_destroy_streams):
            try:
                close(ctx)
            except BmkError:
                pass
        res = Bm1880().run(rig.cmdbuf())
        assert res.ok or res.fault.code in ("HAZARD", "DATA"), res
        outcomes.add("ok" if res.ok else res.fault.code)
        api.bmk1880_reset(ctx)
        tensors, ops = [t for t in tensors if t.alloc_kind == "prealloc"], []
    assert valid > 50 and "ok" in outcomes
