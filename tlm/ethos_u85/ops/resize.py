"""NPU_OP_RESIZE (TRM r0p0 issue 05, 3.10.7): bilinear, replicate and nearest.

The IFM size lives in KERNEL_HEIGHT_M1/KERNEL_WIDTH_M1.  Per axis the scale is
``scale_n/scale_d`` with ``scale_n = RESIZE_*_SCALE_N_M1 + 1``; the sampling position of OFM
coordinate v is tracked as an integer part and a fraction ``mod/scale_n``, starting at
``offset`` (negative offsets start at int -1) and advanced by ``one_step_int +
one_step_mod/scale_n`` per output row/column (TRM pseudocode, literally).

Per element::

    v0..v3 = read_ifm at (iy0|iy1, ix0|ix1)        (edges clamped by max(., 0) / min(., ifm-1))
    bilinear:  acc = (sy_n - y_mod)*((sx_n - x_mod)*v0 + x_mod*v1) + y_mod*((sx_n - x_mod)*v2 + x_mod*v3)
    nearest:   acc = read_ifm(2*y_mod < sy_n ? iy0 : iy1, 2*x_mod < sx_n ? ix0 : ix1)
    replicate: acc = v0
    acc2 = rescale((int64)acc << 16, -1, shift_only)   (assert OFM_SCALE.shift >= 16)
    write_ofm(oy, ox, oc, activation(acc2))

Digest E-27 (followed): ``rescale()`` takes an ``int48_t`` and asserts that it fits 32 bits
(acc_format i32) or 48 bits and that the scale fits int16 (i48), although the shifted resize
accumulator is up to 47 (8-bit) or 55 (16-bit) bits wide and the scale is unused in
shift-only mode.  The rescale is done in int64 without those range asserts; ``shift >= 16``
and ``scale >= 0`` are kept.  E-17: the TRM's ``write_ofm`` call omits ``allowed_perms``;
allowed_perms_all is used (the transpose must be HWC anyway).

Asserts: all of the 3.10.11 pseudocode, literally, including ``IFM2_ZERO_POINT == 0`` although
RESIZE reads no IFM2: unlike the IFM2 asserts that the ELEMENTWISE and POOL pseudocode place
before their mode is known (applied only where the mode has the operand, elementwise.py
E-14, pool.py), this one is RESIZE's own, and Vela 5.2 programs IFM2_ZERO_POINT = 0 before
every RESIZE.  A stream that leaves another value there gets an UNPREDICTABLE warning.
"""
from __future__ import annotations

import numpy as np

from .. import isa
from ..fmap import Storage
from .common import ALLOWED_PERMS_ALL, RESCALE_SHIFT_ONLY, OpContext
from .registry import KernelOp, register

__all__ = ["op_resize", "resize_ref", "resize_positions", "BILINEAR", "REPLICATE", "NEAREST"]

# TRM enum values, from the ISA table
BILINEAR, REPLICATE, NEAREST = isa.resize_mode.bilinear, isa.resize_mode.replicate, isa.resize_mode.nearest
B8, B16 = isa.activation_precision.b8, isa.activation_precision.b16
SIGNED = isa.activation_type.signed


class _Params:
    def __init__(self, ctx: OpContext, mode: int):
        f = ctx.f
        self.mode = mode
        self.ifm_h_m1 = f("NPU_SET_KERNEL_HEIGHT_M1", "height_m1")
        self.ifm_w_m1 = f("NPU_SET_KERNEL_WIDTH_M1", "width_m1")
        self.sy_n = f("NPU_SET_RESIZE_Y_SCALE_N_M1", "resize_y_scale_n_m1") + 1
        self.sx_n = f("NPU_SET_RESIZE_X_SCALE_N_M1", "resize_x_scale_n_m1") + 1
        self.y_off = f("NPU_SET_RESIZE_Y_OFFSET", "resize_y_offset")
        self.x_off = f("NPU_SET_RESIZE_X_OFFSET", "resize_x_offset")
        self.step_y_mod = f("NPU_SET_RESIZE_Y_STEP", "one_step_mod")
        self.step_x_mod = f("NPU_SET_RESIZE_X_STEP", "one_step_mod")
        self.step_y_int = f("NPU_SET_RESIZE_Y_STEP", "one_step_int")
        self.step_x_int = f("NPU_SET_RESIZE_X_STEP", "one_step_int")


def _checks(ctx: OpContext, mode: int) -> _Params:
    chk = ctx.check
    chk(mode in (BILINEAR, REPLICATE, NEAREST), f"reserved resize_mode {mode}")
    p = _Params(ctx, mode)
    chk(-p.sy_n <= p.y_off < p.sy_n, f"-scale_y_n <= y_off < scale_y_n ({p.y_off}, {p.sy_n})")
    chk(-p.sx_n <= p.x_off < p.sx_n, f"-scale_x_n <= x_off < scale_x_n ({p.x_off}, {p.sx_n})")
    chk(p.step_y_mod < p.sy_n, "step_y_mod < scale_y_n")
    chk(p.step_x_mod < p.sx_n, "step_x_mod < scale_x_n")
    chk(ctx.state.chain_length == 0, "g_chain_length == 0 (resize cannot be chained)")
    chk(ctx.ofm.storage != Storage.CHAINED, "OFM activation_storage != chained")
    chk(ctx.ofm.transpose == 0, "OFM activation_transpose == HWC")
    chk(ctx.upscale == 0, "IFM_UPSCALE.mode == none")
    chk(ctx.ifm.zero_point == 0, "IFM_ZERO_POINT.zero_point == 0")
    chk(ctx.ifm2.zero_point == 0, "IFM2_ZERO_POINT.zero_point == 0")
    if ctx.ifm.precision != B8:
        chk(ctx.ifm.precision == B16, "IFM precision must be b8 or b16")
        chk(ctx.ifm.act_type == SIGNED, "16-bit IFM must be signed")
    return p


def _axis(n_out: int, off: int, scale_n: int, step_int: int, step_mod: int, size_m1: int):
    """The TRM position recurrence along one axis: (i0, i1, mod) int64 arrays of n_out."""
    i = -1 if off < 0 else 0
    m = off + scale_n if off < 0 else off
    i0 = np.empty(n_out, np.int64)
    i1 = np.empty(n_out, np.int64)
    mod = np.empty(n_out, np.int64)
    for v in range(n_out):
        i0[v] = max(i, 0)
        i1[v] = min(i + 1, size_m1)
        mod[v] = m
        m += step_mod
        i += step_int
        if m >= scale_n:
            m -= scale_n
            i += 1
    return i0, i1, mod


def resize_positions(p: _Params, ofm_h: int, ofm_w: int):
    """((iy0, iy1, y_mod), (ix0, ix1, x_mod)) for every OFM row / column."""
    return (_axis(ofm_h, p.y_off, p.sy_n, p.step_y_int, p.step_y_mod, p.ifm_h_m1),
            _axis(ofm_w, p.x_off, p.sx_n, p.step_x_int, p.step_x_mod, p.ifm_w_m1))


def _position_checks(ctx: OpContext, p: _Params, ys, xs) -> None:
    """The per-position asserts, reporting the first failure in the TRM loop order
    (row oy: iy0; then per column ox: ix0, then the last-column rule)."""
    iy0 = ys[0]
    ix0, ix1 = xs[0], xs[1]
    if iy0.size == 0 or ix0.size == 0:
        return
    bad_y = iy0 > p.ifm_h_m1
    ctx.check(not bad_y[0], "iy0 <= ifm_height_m1")
    bad_x0 = ix0 > p.ifm_w_m1
    bad_last = np.zeros(ix0.size, bool)
    bad_last[-1] = int(ix1[-1]) != p.ifm_w_m1          # assert(ox < ofm_width_m1 || ix1 == ifm_width_m1)
    bad_x = bad_x0 | bad_last
    if bad_x.any():
        ox = int(np.flatnonzero(bad_x)[0])
        ctx.check(not bad_x0[ox], "ix0 <= ifm_width_m1")
        ctx.check(False, f"last OFM column must read the last IFM column "
                         f"(ix1 {int(ix1[-1])} != ifm_width_m1 {p.ifm_w_m1})")
    ctx.check(not bad_y.any(), "iy0 <= ifm_height_m1")


def _output(ctx: OpContext, acc) -> None:
    ctx.check(ctx.f("NPU_SET_OFM_SCALE", "shift") >= 16, "OFM_SCALE.shift >= 16")
    acc2 = np.asarray(acc, dtype=np.int64) << np.int64(16)      # (int64_t)acc << 16
    v = ctx.rescale(acc2, RESCALE_SHIFT_ONLY, range_check=False)   # E-27
    v = ctx.activation(v)
    ctx.write_ofm(v, ALLOWED_PERMS_ALL)                          # E-17


def _output_ref(ctx: OpContext, acc: list) -> None:
    """_output as the literal per-element code (the literal model's path): per (oy, ox, oc)
    ``(int64_t)acc << 16``, ``arith.rescale_ref(., -1, shift_only)`` without the acc range
    asserts (E-27), ``arith.activation_ref`` on Python ints; then one write_ofm (E-17)."""
    from .. import arith
    from ...core.errors import Unpredictable
    ctx.check(ctx.f("NPU_SET_OFM_SCALE", "shift") >= 16, "OFM_SCALE.shift >= 16")
    f = ctx.f
    rs = dict(scale_mode=ctx.ofm.scale_mode, ofm_scale=f("NPU_SET_OFM_SCALE", "scale"),
              ofm_shift=f("NPU_SET_OFM_SCALE", "shift"), round_mode=f("NPU_SET_OFM_SCALE", "round_mode"),
              dbl_rnd=f("NPU_SET_OFM_SCALE", "dbl_rnd"), acc_format=ctx.acc_format, range_check=False)
    act = ctx.activation_ref_args()
    out = np.zeros((ctx.ofm_h, ctx.ofm_w, ctx.ofm_d), np.int64)
    try:
        for oy, row in enumerate(acc):
            for ox, col in enumerate(row):
                for oc, a in enumerate(col):
                    v = arith.rescale_ref(arith.sign_extend(a << 16, 64), -1, RESCALE_SHIFT_ONLY, **rs)
                    out[oy, ox, oc] = arith.activation_ref(v, **act)
    except Unpredictable as e:
        raise Unpredictable(f"NPU_OP_RESIZE: {e}") from None
    ctx.write_ofm(out, ALLOWED_PERMS_ALL)


def op_resize(snapshot, dataport, device) -> None:
    """NPU_OP_RESIZE: the device's kernel-op entry point."""
    ctx = OpContext(snapshot, dataport, device, "NPU_OP_RESIZE")
    mode = int(ctx.fields.get("resize_mode", 0))
    p = _checks(ctx, mode)
    oh, ow, od = ctx.ofm_h, ctx.ofm_w, ctx.ofm_d
    ys, xs = resize_positions(p, oh, ow)
    _position_checks(ctx, p, ys, xs)
    iy0, iy1, ymod = ys
    ix0, ix1, xmod = xs
    # read the IFM rows/columns that are sampled, once
    rows = np.unique(np.concatenate((iy0, iy1)) if mode != REPLICATE else iy0)
    cols = np.unique(np.concatenate((ix0, ix1)) if mode != REPLICATE else ix0)
    ctx.budget(rows.size * cols.size * od, "IFM elements read", ctx.policy.max_op_elements)
    ifm = ctx.read_ifm(rows, cols, np.arange(od))
    ry0, ry1 = np.searchsorted(rows, iy0), np.searchsorted(rows, iy1)
    rx0, rx1 = np.searchsorted(cols, ix0), np.searchsorted(cols, ix1)
    if mode == BILINEAR:
        v0 = ifm[ry0][:, rx0]
        v1 = ifm[ry0][:, rx1]
        v2 = ifm[ry1][:, rx0]
        v3 = ifm[ry1][:, rx1]
        wy = ymod[:, None, None]
        wx = xmod[None, :, None]
        acc = ((p.sy_n - wy) * ((p.sx_n - wx) * v0 + wx * v1)
               + wy * ((p.sx_n - wx) * v2 + wx * v3))
    elif mode == NEAREST:
        ry = np.where(2 * ymod < p.sy_n, ry0, ry1)
        rx = np.where(2 * xmod < p.sx_n, rx0, rx1)
        acc = ifm[ry][:, rx]
    else:
        acc = ifm[ry0][:, rx0]
    _output(ctx, acc)


def resize_ref(snapshot, dataport, device) -> None:
    """NPU_OP_RESIZE as the literal per-element TRM loop (the literal model's path): the
    position recurrence and the asserts as the TRM writes them, then per (oy, ox, oc) the
    interpolation on Python ints.  The IFM is read as one block of the rows and columns the
    positions sample (both neighbours except for replicate), as the fast path reads it."""
    ctx = OpContext(snapshot, dataport, device, "NPU_OP_RESIZE")
    mode = int(ctx.fields.get("resize_mode", 0))
    p = _checks(ctx, mode)
    H, W, D = ctx.ofm_h, ctx.ofm_w, ctx.ofm_d
    ypos, xpos = [], []                       # (i0, i1, mod) per OFM row / column
    y_int = -1 if p.y_off < 0 else 0
    y_mod = p.y_off + p.sy_n if p.y_off < 0 else p.y_off
    for _ in range(H):
        iy0 = max(y_int, 0)
        ypos.append((iy0, min(y_int + 1, p.ifm_h_m1), y_mod))
        y_mod += p.step_y_mod
        y_int += p.step_y_int
        if y_mod >= p.sy_n:
            y_mod -= p.sy_n
            y_int += 1
    x_int = -1 if p.x_off < 0 else 0
    x_mod = p.x_off + p.sx_n if p.x_off < 0 else p.x_off
    for _ in range(W):
        ix0 = max(x_int, 0)
        xpos.append((ix0, min(x_int + 1, p.ifm_w_m1), x_mod))
        x_mod += p.step_x_mod
        x_int += p.step_x_int
        if x_mod >= p.sx_n:
            x_mod -= p.sx_n
            x_int += 1
    for oy, (iy0, _, _) in enumerate(ypos):    # the asserts in the TRM loop's order
        ctx.check(iy0 <= p.ifm_h_m1, "iy0 <= ifm_height_m1")
        for ox, (ix0, ix1, _) in enumerate(xpos if oy == 0 else ()):   # (the same in every row)
            ctx.check(ix0 <= p.ifm_w_m1, "ix0 <= ifm_width_m1")
            ctx.check(ox < W - 1 or ix1 == p.ifm_w_m1, "last OFM column must read the last IFM column")
    both = mode != REPLICATE
    rows = sorted({q[0] for q in ypos} | ({q[1] for q in ypos} if both else set()))
    cols = sorted({q[0] for q in xpos} | ({q[1] for q in xpos} if both else set()))
    ctx.budget(len(rows) * len(cols) * D, "IFM elements read", ctx.policy.max_op_elements)
    block = ctx.read_ifm(rows, cols, range(D)).tolist()
    ri = {y: i for i, y in enumerate(rows)}
    ci = {x: i for i, x in enumerate(cols)}

    def rd(y, x, c):                          # read_ifm(y, x, c)
        return block[ri[y]][ci[x]][c]

    out = [[[0] * D for _ in range(W)] for _ in range(H)]
    for oy, (iy0, iy1, y_mod) in enumerate(ypos):
        for ox, (ix0, ix1, x_mod) in enumerate(xpos):
            for oc in range(D):
                if mode == BILINEAR:
                    v0, v1, v2, v3 = rd(iy0, ix0, oc), rd(iy0, ix1, oc), rd(iy1, ix0, oc), rd(iy1, ix1, oc)
                    acc = ((p.sy_n - y_mod) * ((p.sx_n - x_mod) * v0 + x_mod * v1)
                           + y_mod * ((p.sx_n - x_mod) * v2 + x_mod * v3))
                elif mode == NEAREST:
                    ix = ix0 if 2 * x_mod < p.sx_n else ix1
                    iy = iy0 if 2 * y_mod < p.sy_n else iy1
                    acc = rd(iy, ix, oc)
                else:
                    acc = rd(iy0, ix0, oc)
                out[oy][ox][oc] = acc
    _output_ref(ctx, out)


register(KernelOp("NPU_OP_RESIZE", op_resize, "resize_mode", isa.resize_mode, reference=resize_ref))
