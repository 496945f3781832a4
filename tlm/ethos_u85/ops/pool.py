"""NPU_OP_POOL (TRM r0p0 issue 05, 3.10.5): max, average, reduce_sum, sum, none, min,
argmax_x, argmax_y.

The TRM pseudocode (per OFM element, depthwise over channels)::

    identity = -(1<<31) for max/argmax, (1<<31)-1 for min, else 0
    acc = read_accumulator(oy, ox, c, identity); count = 0
    for ky, kx:  iy = -pad_y + oy*stride_y + ky; ix = -pad_x + ox*stride_x + kx
                 pad = outside [0, ifm_height) x [0, ifm_width); count += !pad
                 v = identity if pad (or mode none) else read_ifm(iy, ix, c)
                 max: acc = max(acc, v); average/sum: acc = accumulate(acc, v); none: -
                 min: acc = min(acc, v)
                 argmax_x: if v > sign_extend(acc, 16): acc = v + 65536*kx   (argmax_y: ky)
    write_accumulator(oy, ox, c, acc, average ? rescale_mode_avpool + count - 1 : normal)

reduce_sum instead sums read_ifm(oy, ox, c) over the IFM_DEPTH channels into channel 0.

Fast path: the padded IFM window is read once (padding = the identity), and each kernel tap
(ky, kx) is one strided slice ``[ofm_h, ofm_w, C]`` combined into the accumulator array.
Sums are taken exactly in int64 and wrapped once: ``accumulate`` wraps modulo 2**32/2**48
after every step, and modular addition is associative, so one final wrap is identical.
:func:`pool_ref` is the literal per-element pseudocode (slow; for the tests).

ARGMAX follows the TRM literally (digest E-12): the identity -(1<<31) has zero low 16 bits,
so a window whose values are all <= 0 keeps the identity, and ``acc = v + 65536*k`` with a
negative v borrows from the index field.  Open question for hardware/FVP verification.
``write_accumulator(oy, ox, oc, ...)`` in the TRM uses ``oc`` where the loop variable is
``c`` (E-13): c is used.

Asserts: every assert of the 3.10.10 pseudocode, per mode as the TRM lists them, with one
reading: the "Check IFM precision" assert applies only when the op reads the IFM
(``use_ifm``, every mode but none).  Pooling mode none never reads the IFM, and TRM 3.5.5.1
does not require (within a chain even forbids) SET_IFM_PRECISION before an operation that
does not use the IFM, so the register may hold another op's value; the same rule the
ELEMENTWISE unary modes follow for IFM2 (elementwise.py, E-14).
"""
from __future__ import annotations

import numpy as np

from .. import isa
from ..arith import sign_extend
from ..fmap import Storage
from .common import RESCALE_AVPOOL, RESCALE_NORMAL, OpContext
from .registry import KernelOp, register

__all__ = ["op_pool", "pool_ref", "MAX", "AVERAGE", "REDUCE_SUM", "SUM", "NONE", "MIN", "ARGMAX_X",
           "ARGMAX_Y"]

# TRM enum values, from the ISA table
_P = isa.pooling_mode
MAX, AVERAGE, REDUCE_SUM, SUM, NONE, MIN, ARGMAX_X, ARGMAX_Y = (
    _P.max, _P.average, _P.reduce_sum, _P.sum, _P.none, _P.min, _P.argmax_x, _P.argmax_y)
_NAMES = tuple(m.name for m in _P)
B8, B16, B32 = isa.activation_precision.b8, isa.activation_precision.b16, isa.activation_precision.b32
SIGNED = isa.activation_type.signed
D8X8 = isa.kernel_decomposition.d8x8
DEPTH_FIRST = isa.weight_order.depth_first
I32 = isa.acc_format.i32
UPSCALE_NONE, UPSCALE_ZEROS = isa.ifm_upscale_mode.none, isa.ifm_upscale_mode.zeros


def _identity(mode: int) -> int:
    if mode in (MAX, ARGMAX_X, ARGMAX_Y):
        return -(1 << 31)
    if mode == MIN:
        return (1 << 31) - 1
    return 0


def _checks(ctx: OpContext, mode: int) -> bool:
    """The TRM asserts of NPU_OP_POOL, in TRM order; returns use_ifm."""
    f = ctx.f
    chk = ctx.check
    kh, kw = ctx.kernel_h, ctx.kernel_w
    chk(mode in range(8), f"reserved pooling_mode {mode}")
    chk(f("NPU_SET_KERNEL_STRIDE", "dilation_y") == 0, "dilation_y + 1 == 1")
    chk(f("NPU_SET_KERNEL_STRIDE", "dilation_x") == 0, "dilation_x + 1 == 1")
    use_ifm = mode != NONE
    use_ifm2 = ctx.acc_input == 2
    ctx.add_operation_to_chain(use_ifm, use_ifm2, False)
    if mode == NONE:
        chk(ctx.ofm.storage != Storage.CHAINED, "a pooling mode of none cannot be chained")
    chk(ctx.ifm_h >= 1 and ctx.ifm_w >= 1, f"ifm_height >= 1 && ifm_width >= 1 (pad range): "
                                           f"{ctx.ifm_h}x{ctx.ifm_w}")
    prec, typ = ctx.ifm.precision, ctx.ifm.act_type
    if use_ifm:                                   # none reads no IFM (module docstring)
        chk(prec == B8 or (prec in (B16, B32) and typ == SIGNED),
            f"IFM precision must be b8, signed b16 or signed b32 (precision {prec}, type {typ})")
    up = ctx.upscale
    decomp = f("NPU_SET_KERNEL_STRIDE", "decomposition")
    sx, sy = ctx.stride_x, ctx.stride_y
    if mode in (MAX, MIN):
        chk(kh * kw <= 65536, "kernel_height*kernel_width <= 65536")
        chk(kh <= 256 or kw <= 256, "kernel_height <= 256 || kernel_width <= 256")
        chk(up != UPSCALE_ZEROS, "IFM_UPSCALE.mode != zeros")
    elif mode == AVERAGE:
        chk(kh <= 8 and kw <= 8, "kernel_height <= 8 && kernel_width <= 8")
        chk(max(ctx.pad_top, ctx.pad_bottom) < kh, "max(pad_top, pad_bottom) < kernel_height")
        chk(max(ctx.pad_left, ctx.pad_right) < kw, "max(pad_left, pad_right) < kernel_width")
        chk(decomp == D8X8, "decomposition == d8x8")
        chk(prec != B32, "IFM precision != b32")
    elif mode == REDUCE_SUM:
        chk(kh == 1 and kw == 1, "kernel_height == 1 && kernel_width == 1")
        chk(sx == 1 and sy == 1, "stride_x == 1 && stride_y == 1")
        chk(up == UPSCALE_NONE, "IFM_UPSCALE.mode == none")
        chk(f("NPU_SET_KERNEL_STRIDE", "weight_order") == DEPTH_FIRST, "weight_order == depth_first")
        chk(ctx.ifm.zero_point == 0, "IFM_ZERO_POINT.zero_point == 0")
    elif mode == SUM:
        chk(prec != B32, "IFM precision != b32")
        chk(kh <= 65536 and kw <= 65536, "kernel_height <= 65536 && kernel_width <= 65536")
    elif mode == ARGMAX_X:
        chk(prec != B32, "IFM precision != b32")
        chk(decomp == D8X8, "decomposition == d8x8")
        chk(kh == 1, "kernel_height == 1")
        chk(kw <= 65536, "kernel_width <= 65536")
        chk(sx == 1 and sy == 1, "stride_x == 1 && stride_y == 1")
        chk(ctx.ofm_w == 1, "ofm_width == 1")
        chk(up == UPSCALE_NONE, "IFM_UPSCALE.mode == none")
    elif mode == ARGMAX_Y:
        chk(prec != B32, "IFM precision != b32")
        chk(decomp == D8X8, "decomposition == d8x8")
        chk(kh <= 65536, "kernel_height <= 65536")
        chk(kw == 1, "kernel_width == 1")
        chk(ctx.ofm_h == 1, "ofm_height == 1")
        chk(sx == 1 and sy == 1, "stride_x == 1 && stride_y == 1")
        chk(up == UPSCALE_NONE, "IFM_UPSCALE.mode == none")
    chk(mode in (SUM, REDUCE_SUM, NONE) or ctx.acc_format == I32,
        "accumulator format must be i32 except for sum, reduce_sum and none")
    return use_ifm


def _valid_counts(n_out: int, stride: int, pad: int, k: int, size: int) -> np.ndarray:
    """Per output position: number of kernel taps inside [0, size)."""
    start = np.arange(n_out, dtype=np.int64) * stride - pad
    lo = np.maximum(start, 0)
    hi = np.minimum(start + k, size)
    return np.maximum(hi - lo, 0)


def op_pool(snapshot, dataport, device) -> None:
    """NPU_OP_POOL: the device's kernel-op entry point."""
    ctx = OpContext(snapshot, dataport, device, "NPU_OP_POOL")
    mode = int(ctx.fields.get("pooling_mode", 0))
    use_ifm = _checks(ctx, mode)
    oh, ow, od = ctx.ofm_h, ctx.ofm_w, ctx.ofm_d
    kh, kw, sy, sx = ctx.kernel_h, ctx.kernel_w, ctx.stride_y, ctx.stride_x

    if mode == REDUCE_SUM:
        ctx.check(od == 1, "reduce_sum: ofm_depth == 1")
        ctx.budget(oh * ow * ctx.ifm_depth, "IFM elements read")
        acc = ctx.initial_acc(0, depth=1)
        v = ctx.read_ifm(np.arange(oh), np.arange(ow), np.arange(ctx.ifm_depth))
        acc = ctx.accumulate(acc, v.sum(axis=2, keepdims=True))
        ctx.write_accumulator(acc, RESCALE_NORMAL)
        return

    ctx.budget(oh * ow * od * kh * kw, "pooling element-taps", ctx.policy.max_op_work)
    ident = _identity(mode)
    acc = ctx.initial_acc(ident)
    if use_ifm:
        xp = ctx.read_ifm_padded(depth=od, pad_value=ident)
    ye = (oh - 1) * sy + 1
    xe = (ow - 1) * sx + 1

    def tap(ky, kx):
        return xp[ky:ky + ye:sy, kx:kx + xe:sx, :]

    if mode in (MAX, MIN):
        red = np.maximum if mode == MAX else np.minimum
        for ky in range(kh):
            for kx in range(kw):
                acc = red(acc, tap(ky, kx))
    elif mode in (AVERAGE, SUM):
        total = np.zeros_like(acc)
        for ky in range(kh):
            for kx in range(kw):
                total += tap(ky, kx)                   # padding taps add the identity 0
        acc = ctx.accumulate(acc, total)
    elif mode in (ARGMAX_X, ARGMAX_Y):
        for ky in range(kh):
            for kx in range(kw):
                v = tap(ky, kx)
                k = kx if mode == ARGMAX_X else ky
                acc = np.where(v > sign_extend(acc, 16), v + np.int64(65536 * k), acc)
    # NONE: the accumulator keeps the read_accumulator() value

    if mode == AVERAGE:
        cy = _valid_counts(oh, sy, ctx.pad_top, kh, ctx.ifm_h)
        cx = _valid_counts(ow, sx, ctx.pad_left, kw, ctx.ifm_w)
        count = (cy[:, None] * cx[None, :])[:, :, None]
        # count >= 1 always: the pad asserts (pad < kernel) keep a valid tap in every window
        ctx.check(int(count.min()) >= 1, "average pool window without a valid tap")
        ctx.write_accumulator(acc, RESCALE_AVPOOL, divisor=count)
    else:
        ctx.write_accumulator(acc, RESCALE_NORMAL)


# ------------------------------------------------------------------------------------------
# Literal reference (slow): the TRM pseudocode per element, with scalar read_ifm.
# ------------------------------------------------------------------------------------------

def pool_ref(snapshot, dataport, device) -> None:
    """NPU_OP_POOL as the literal per-element TRM loop (the literal model's path): the same
    asserts, then per (oy, ox, c) the reads / accumulate of single elements and the output stage
    (OpContext.write_accumulator_ref) on Python ints."""
    from ..arith import accumulate
    ctx = OpContext(snapshot, dataport, device, "NPU_OP_POOL")
    mode = int(ctx.fields.get("pooling_mode", 0))
    use_ifm = _checks(ctx, mode)
    oh, ow, od = ctx.ofm_h, ctx.ofm_w, ctx.ofm_d
    af = ctx.acc_format
    out_acc = np.zeros((oh, ow, 1 if mode == REDUCE_SUM else od), np.int64)
    out_div = np.ones_like(out_acc)
    init = ctx.initial_acc(_identity(mode), depth=out_acc.shape[2])

    # read_ifm(y, x, c) of the derived IFM, read as one block as the fast path reads it (a
    # chained IFM pops its values in (y, x, c) order; the footprint is the fast path's)
    if mode == REDUCE_SUM:
        block = ctx.read_ifm(range(oh), range(ow), range(ctx.ifm_depth)).tolist()
    elif use_ifm:
        ctx.check(ctx.ifm_h >= 1 and ctx.ifm_w >= 1, "pad range: derived IFM size < 1")
        block = ctx.read_ifm(range(ctx.ifm_h), range(ctx.ifm_w), range(od)).tolist()

    def rd(y, x, c):
        return block[y][x][c]

    for oy in range(oh):
        for ox in range(ow):
            if mode == REDUCE_SUM:
                acc = int(init[oy, ox, 0])
                for c in range(ctx.ifm_depth):
                    acc = accumulate(acc, rd(oy, ox, c), af)
                out_acc[oy, ox, 0] = acc
                continue
            for c in range(od):
                identity = _identity(mode)
                acc = int(init[oy, ox, c])
                count = 0
                for ky in range(ctx.kernel_h):
                    for kx in range(ctx.kernel_w):
                        iy = -ctx.pad_top + oy * ctx.stride_y + ky
                        ix = -ctx.pad_left + ox * ctx.stride_x + kx
                        pad = iy < 0 or iy >= ctx.ifm_h or ix < 0 or ix >= ctx.ifm_w
                        if not pad:
                            count += 1
                        v = identity
                        if use_ifm and not pad:
                            v = rd(iy, ix, c)
                        if mode == MAX:
                            acc = max(acc, v)
                        elif mode in (AVERAGE, SUM):
                            acc = accumulate(acc, v, af)
                        elif mode == MIN:
                            acc = min(acc, v)
                        elif mode == ARGMAX_X:
                            if v > sign_extend(acc, 16):
                                acc = v + 65536 * kx
                        elif mode == ARGMAX_Y:
                            if v > sign_extend(acc, 16):
                                acc = v + 65536 * ky
                out_acc[oy, ox, c] = acc
                out_div[oy, ox, c] = count
    if mode == AVERAGE:
        ctx.write_accumulator_ref(out_acc, RESCALE_AVPOOL, divisor=out_div)
    else:
        ctx.write_accumulator_ref(out_acc, RESCALE_NORMAL)


register(KernelOp("NPU_OP_POOL", op_pool, "pooling_mode", isa.pooling_mode, reference=pool_ref))
