"""NPU_OP_ELEMENTWISE (TRM r0p0 issue 05, 3.10.6).

Binary modes (mul, add, sub, min, max, shr, shl, lshr, div, cmp_eq/ne/ge/gt, and, or, xor,
and_not) and unary modes (lrelu, abs, clz, not); an operand can be the scalar
NPU_SET_OP_SCALAR.scalar (broadcast_mode scalar: int32, no precision truncation; see below
for its zero point), the others broadcast along h/w/c (index 0 on a broadcast axis).  IFM/IFM2 may
come from chaining FIFOs (an elementwise op can be appended to a chain).

Per element (TRM)::

    a = scalar or read_ifm(bcast(oy, ox, oc)); b = scalar or read_ifm2(...) (binary only)
    acc = mode(a, b)            # scale_a/scale_b input scaling except for mul and div
    acc = rescale(acc, -1, rescale_mode_global | shift_only (b32 mul) | none (shifts))
    write_ofm(oy, ox, oc, activation(acc), allowed_perms_rtrans)

The fast path computes whole [ofm_h, ofm_w, ofm_d] arrays in int64; :func:`elementwise_ref`
is the literal per-element loop on Python ints (tests only).

TRM-vs-digest decisions:

* E-14: the TRM asserts IFM/IFM2 precision equality before it knows the mode, so also for
  the unary modes (lrelu, abs, clz, not), which have no IFM2.  The model asserts it only
  when the mode has an IFM2 operand (every binary mode, a scalar IFM2 included: scale_b
  interprets it by IFM2_PRECISION, and Vela programs IFM2_PRECISION for it).  Reasons:
  TRM 3.5.5.1 forbids SET_IFM2_PRECISION in a chain interval whose op does not use IFM2, so
  a chained unary op could never meet the assert except by stale state, and Vela 5.2 does
  not program IFM2_PRECISION for lrelu (an int16 LEAKY_RELU after the reset value b8 failed
  the assert, the op was skipped and the OFM kept the IFM's values).
* LRELU's negative branch is ``scale_b(a)``: IFM2_SCALE applied to the IFM value ``a``.
  scale_b decides by IFM2_PRECISION whether to scale; for lrelu the model takes the
  precision and type of the operand it scales, the IFM's (the two agree whenever the
  literal assert holds and the types match; IFM2_PRECISION is not programmed for lrelu).
* E-15: the TRM declares ``int32_t acc``.  Results are wrapped to int32, except the b32 MUL
  product, which is kept in int64 for the shift-only rescale that follows (digest); the
  acc_format range assert of rescale() is not applied to that product (it is 64-bit by
  construction).  For shift 0 both readings agree after activation's (int32_t) cast.
* E-16: SHL's undefined ``ACTIVATION_MASK`` masks to the IFM precision width (b8 0xFF, b16
  0xFFFF, b32 none) - tlm.ethos_u85.arith.shift_left.
* E-25: mode 10 is ``lshr`` in the enum, ``lsr`` in the pseudocode: a logical shift right.
* E-28: the MUL zero-point assert compares the raw 16-bit fields with 32768.
* E-29: the TRM calls ``add_operation_to_chain(true, use_ifm2, true)``, so a scalar IFM
  (storage none, nothing read) counts as an external IFM.  Vela 5.2 builds softmax chains of
  four operations whose second one has a scalar IFM and whose four ops read three IFMs from
  memory; taken literally that fails ``g_num_ifm <= 3``.  The model does not count a scalar
  IFM (``SCALAR_IS_NOT_AN_IFM``), which is what ``use_ifm2`` already does for a scalar IFM2.

Scalar zero point (deviation from the TRM pseudocode and the digest, ``SCALAR_SUBTRACTS_ZERO_POINT``):
the pseudocode assigns ``a = NPU_SET_OP_SCALAR.scalar`` without subtracting a zero point, but
Vela 5.2 (like the U55 generator, which emits ``quantise(scalar)``) programs the *quantised*
scalar together with that operand's zero point (e.g. scalar 57 with IFM2_ZERO_POINT 3 for an
int8 ADD), and only ``scalar - zero_point`` reproduces LiteRT (add/mul_const_scalar: 0 of
1024 elements differ, versus all of them without the subtraction).  The zero point is read
with read_ifm's rules (int16/uint16 by the operand's type).
"""

from __future__ import annotations

import numpy as np

from ...core.memo import Memo
from .. import arith, isa
from ..arith import sign_extend
from ..fmap import Storage
from .common import ALLOWED_PERMS_RTRANS, RESCALE_GLOBAL, RESCALE_NONE, RESCALE_SHIFT_ONLY, OpContext, snapshot_key
from .registry import KernelOp, register

SCALAR_SUBTRACTS_ZERO_POINT = True
SCALAR_IS_NOT_AN_IFM = True

__all__ = ["op_elementwise", "elementwise_ref", "MODES", "UNARY"]

# TRM enum values, from the ISA table
_M = isa.elementwise_mode
MUL, ADD, SUB, MIN, MAX, LRELU, ABS, CLZ, SHR, SHL, LSHR, DIV = (
    _M.mul, _M.add, _M.sub, _M.min, _M.max, _M.lrelu, _M.abs, _M.clz, _M.shr, _M.shl, _M.lshr, _M.div)
CMP_EQ, CMP_NE, CMP_GE, CMP_GT = _M.cmp_eq, _M.cmp_ne, _M.cmp_ge, _M.cmp_gt
AND, OR, XOR, NOT, AND_NOT = _M["and"], _M["or"], _M.xor, _M["not"], _M.and_not
MODES = {int(m): m.name for m in _M}
UNARY = (LRELU, ABS, CLZ, NOT)
SCALAR = isa.broadcast_mode.scalar
BCAST_H, BCAST_W, BCAST_C = isa.broadcast_mode.h, isa.broadcast_mode.w, isa.broadcast_mode.c
B8, B16, B32 = isa.activation_precision.b8, isa.activation_precision.b16, isa.activation_precision.b32
SIGNED = isa.activation_type.signed
HWC, HCW, CHW = isa.activation_transpose.HWC, isa.activation_transpose.HCW, isa.activation_transpose.CHW


class Params:
    """Register values of one elementwise op (shared by the fast and the literal paths)."""

    def __init__(self, ctx: OpContext, mode: int):
        f = ctx.f
        self.mode = mode
        self.unary = mode in UNARY
        self.bm = f("NPU_SET_IFM_BROADCAST", "broadcast_mode")
        self.bm2 = f("NPU_SET_IFM2_BROADCAST", "broadcast_mode")
        self.use_ifm2 = not (self.unary or self.bm2 == SCALAR)
        self.scalar = f("NPU_SET_OP_SCALAR", "scalar")
        self.precision = ctx.ifm.precision
        self.act_type = ctx.ifm.act_type
        self.sa = (ctx.ifm.precision, ctx.ifm.act_type, f("NPU_SET_IFM_SCALE", "scale"),
                   f("NPU_SET_IFM_SCALE", "shift"), f("NPU_SET_IFM_SCALE", "round_mode"),
                   f("NPU_SET_IFM_SCALE", "dbl_rnd"))
        b_fm = ctx.ifm if self.unary else ctx.ifm2      # scale_b's operand: lrelu's is the IFM (E-14)
        self.sb = (b_fm.precision, b_fm.act_type, f("NPU_SET_IFM2_SCALE", "scale"),
                   f("NPU_SET_IFM2_SCALE", "shift"), f("NPU_SET_IFM2_SCALE", "round_mode"),
                   f("NPU_SET_IFM2_SCALE", "dbl_rnd"))
        self.ofm_round = f("NPU_SET_OFM_SCALE", "round_mode")
        self.ofm_dbl = f("NPU_SET_OFM_SCALE", "dbl_rnd")


def _checks(ctx: OpContext, mode: int) -> Params:
    """The TRM asserts that do not depend on operand values, in TRM order."""
    chk = ctx.check
    chk(mode in MODES, f"reserved elementwise_mode {mode}")
    if mode not in UNARY:                                     # only with an IFM2 operand (E-14)
        chk(ctx.ifm.precision == ctx.ifm2.precision,
            "IFM_PRECISION.activation_precision == IFM2_PRECISION.activation_precision")
    p = Params(ctx, mode)
    ctx.add_operation_to_chain(p.bm != SCALAR or not SCALAR_IS_NOT_AN_IFM, p.use_ifm2, True)
    prec, typ = p.precision, p.act_type
    chk(prec in (B8, B16) or (prec == B32 and typ == SIGNED),
        f"IFM precision must be b8, b16 or signed b32 (precision {prec}, type {typ})")
    chk(ctx.ofm.reverse == 0, "OFM activation_reverse == none")
    chk(ctx.ofm.transpose in (HWC, HCW, CHW), "OFM activation_transpose must be HWC, HCW or CHW")
    chk(ctx.upscale == 0, "IFM_UPSCALE.mode == none")
    # per-element asserts that only depend on registers (hoisted; checked once)
    if p.bm == SCALAR:
        chk(ctx.ifm.storage == Storage.NONE, "scalar IFM needs activation_storage none")
    elif p.bm != 0:
        chk(ctx.ifm.storage != Storage.CHAINED, "broadcast is not permitted from a chaining FIFO (IFM)")
    if not p.unary:
        if p.bm2 == SCALAR:
            chk(p.bm != SCALAR, "IFM and IFM2 cannot both be scalar")
            chk(ctx.ifm2.storage == Storage.NONE, "scalar IFM2 needs activation_storage none")
        elif p.bm2 != 0:
            chk(ctx.ifm2.storage != Storage.CHAINED, "broadcast is not permitted from a chaining FIFO (IFM2)")
    if mode == MUL:
        zp, zp2 = ctx.ifm.zero_point, ctx.ifm2.zero_point
        chk(prec == B8 or typ == SIGNED or (zp == 32768 and zp2 == 32768),
            "mul: uint16 operands need zero points of 32768")
    elif mode == DIV:
        f = ctx.f
        chk(f("NPU_SET_IFM_SCALE", "scale") == 1 and f("NPU_SET_IFM_SCALE", "shift") == 0,
            "div: IFM_SCALE must be scale 1, shift 0")
        chk(ctx.ifm.zero_point == 0, "div: IFM_ZERO_POINT == 0")
        chk(f("NPU_SET_IFM2_SCALE", "scale") == 1 and f("NPU_SET_IFM2_SCALE", "shift") == 0,
            "div: IFM2_SCALE must be scale 1, shift 0")
        chk(ctx.ifm2.zero_point == 0, "div: IFM2_ZERO_POINT == 0")
        chk(f("NPU_SET_OFM_SCALE", "scale") == 1 and f("NPU_SET_OFM_SCALE", "shift") == 0,
            "div: OFM_SCALE must be scale 1, shift 0")
        chk(f("NPU_SET_OFM_ZERO_POINT", "zero_point") == 0, "div: OFM_ZERO_POINT == 0")
    return p


def bcast_index(n: int, bit: int, bm: int) -> np.ndarray:
    return np.zeros(1, np.int64) if bm & bit else np.arange(n, dtype=np.int64)


def scalar_operand(ctx: OpContext, which: str, scalar: int) -> int:
    """The value a scalar operand enters the datapath with: OP_SCALAR minus the operand's
    zero point when SCALAR_SUBTRACTS_ZERO_POINT (see the module docstring)."""
    if not SCALAR_SUBTRACTS_ZERO_POINT:
        return int(scalar)
    fm = ctx.ifm if which == "IFM" else ctx.ifm2
    return int(scalar) - arith.ifm_zero_point(fm.zero_point, fm.precision, fm.act_type, check=False)


def _operand(ctx: OpContext, which: str, bm: int, scalar: int) -> np.ndarray:
    """The operand array, broadcastable to [ofm_h, ofm_w, ofm_d]."""
    if bm == SCALAR:
        return np.full((1, 1, 1), np.int64(scalar_operand(ctx, which, scalar)))
    ys = bcast_index(ctx.ofm_h, BCAST_H, bm)
    xs = bcast_index(ctx.ofm_w, BCAST_W, bm)
    cs = bcast_index(ctx.ofm_d, BCAST_C, bm)
    if which == "IFM":
        return ctx.read_ifm(ys, xs, cs)
    return ctx.read_ifm2(ys, xs, cs)


def _scale(ctx: OpContext, x, params) -> np.ndarray:
    try:
        return arith.scale_input(x, *params)
    except arith.Unpredictable as e:
        raise arith.Unpredictable(f"{ctx.name}: {e}") from None


def compute(ctx: OpContext, p: Params, a, b):
    """acc and rescale_mode for operand arrays a, b (b ignored for unary modes)."""
    mode = p.mode
    sa = lambda x: _scale(ctx, x, p.sa)      # noqa: E731 - scale_a
    sb = lambda x: _scale(ctx, x, p.sb)      # noqa: E731 - scale_b
    rm = RESCALE_GLOBAL
    if mode == MUL:
        acc = a * b                                            # no input scaling
        if p.precision not in (B8, B16):
            rm = RESCALE_SHIFT_ONLY                            # b32: 64-bit product (E-15)
            return acc, rm
    elif mode == ADD:
        acc = sa(a) + sb(b)
    elif mode == SUB:
        acc = sa(a) - sb(b)
    elif mode == MIN:
        acc = np.minimum(sa(a), sb(b))
    elif mode == MAX:
        acc = np.maximum(sa(a), sb(b))
    elif mode == LRELU:
        acc = np.where(a >= 0, sa(a), sb(a))
    elif mode == ABS:
        acc = np.abs(sa(a))
    elif mode == CLZ:
        acc = arith.clz(sa(a), 32)
    elif mode == SHR:
        shift = sb(b) & 31
        acc = arith.rounded_shift_right(sa(a), shift, p.ofm_round, p.ofm_dbl)
        rm = RESCALE_NONE
    elif mode == SHL:
        acc = arith.shift_left(sa(a), sb(b), p.precision)
        rm = RESCALE_NONE
    elif mode == LSHR:
        acc = arith.logical_shift_right(sa(a), sb(b), p.precision)
        rm = RESCALE_NONE
    elif mode == DIV:
        a, b = np.broadcast_arrays(a, b)
        ctx.check(not (b == 0).any(), "div: b != 0")
        ctx.check(not ((b == -1) & (a == -0x80000000)).any(), "div: !(b == -1 && a == -0x80000000)")
        acc = arith.div_trunc(a, b)
    elif mode == CMP_EQ:
        acc = np.where(sa(a) == sb(b), -1, 0)
    elif mode == CMP_NE:
        acc = np.where(sa(a) != sb(b), -1, 0)
    elif mode == CMP_GE:
        acc = np.where(sa(a) >= sb(b), -1, 0)
    elif mode == CMP_GT:
        acc = np.where(sa(a) > sb(b), -1, 0)
    elif mode == NOT:
        acc = ~sa(a)
    elif mode == AND:
        acc = sa(a) & sb(b)
    elif mode == OR:
        acc = sa(a) | sb(b)
    elif mode == XOR:
        acc = sa(a) ^ sb(b)
    else:                                                      # AND_NOT
        acc = sa(a) & ~sb(b)
    return sign_extend(np.asarray(acc, dtype=np.int64), 32), rm   # int32_t acc (E-15)


def op_elementwise(snapshot, dataport, device) -> None:
    """NPU_OP_ELEMENTWISE: the device's kernel-op entry point."""
    ctx = OpContext(snapshot, dataport, device, "NPU_OP_ELEMENTWISE")
    mode = int(ctx.fields.get("elementwise_mode", 0))
    p = _checks(ctx, mode)
    shape = (ctx.ofm_h, ctx.ofm_w, ctx.ofm_d)
    a = _operand(ctx, "IFM", p.bm, p.scalar)
    b = _operand(ctx, "IFM2", p.bm2, p.scalar) if not p.unary else np.zeros((1, 1, 1), np.int64)
    v = _by_table(ctx, p, mode, a, b, shape)
    if v is None:
        v = np.broadcast_to(evaluate(ctx, p, mode, a, b), shape)
    ctx.write_ofm(v, ALLOWED_PERMS_RTRANS)


def evaluate(ctx: OpContext, p: Params, mode: int, a, b) -> np.ndarray:
    """activation(rescale(mode(a, b))) elementwise over the broadcast of a and b (no side
    effects: the operands are already read)."""
    acc, rm = compute(ctx, p, a, b)
    acc = np.broadcast_to(acc, np.broadcast_shapes(np.shape(a), np.shape(b)))
    v = ctx.rescale(acc, rm, range_check=not (mode == MUL and rm == RESCALE_SHIFT_ONLY))
    return ctx.activation(v)


# Result tables: the output of an elementwise op is a function of its two operand values
# only, so for operands with few distinct values (8-bit data) it is computed once for every
# (a, b) pair in their ranges - by evaluate itself, hence bit for bit the same - and then
# looked up.  Keyed by everything the function depends on: the register snapshot, the mode,
# the LUT contents and the operand ranges.  A table whose evaluation raises (a check that
# values outside the data could fail) is not used: the direct path decides.
_TABLES = Memo(64)
_TABLE_MAX = 1 << 17          # table size limit (operand value pairs)
_TABLE_MIN_ELEMENTS = 1024    # below this the direct evaluation is as cheap


def _domain(fm, bm: int, x) -> tuple[int, int]:
    """(min, max) of the operand values a table must cover: all values an 8-bit operand
    can take (raw value minus zero point) when the data lies within them (always for an
    operand read from memory; checked for a chaining FIFO or scalar operand), so that the
    table does not depend on the data; else the data's own range."""
    if fm.precision == B8 and bm != SCALAR:
        lo, hi = (-128, 127) if fm.act_type == SIGNED else (0, 255)
        zp = arith.ifm_zero_point(fm.zero_point, fm.precision, fm.act_type, check=False)
        lo, hi = lo - zp, hi - zp
        if fm.storage != Storage.CHAINED:
            return lo, hi
        xmin, xmax = int(x.min()), int(x.max())
        if lo <= xmin and xmax <= hi:
            return lo, hi
        return xmin, xmax
    return int(x.min()), int(x.max())


def _by_table(ctx: OpContext, p: Params, mode: int, a, b, shape):
    """The truncated OFM values [shape] via a result table, or None (direct path)."""
    n = shape[0] * shape[1] * shape[2]
    ofm = ctx.ofm
    if n < _TABLE_MIN_ELEMENTS or ofm.precision not in (B8, B16) or a.size == 0 or b.size == 0:
        return None
    skey = snapshot_key(ctx.snap)
    if skey is None:
        return None
    amin, amax = _domain(ctx.ifm, p.bm, a)
    bmin, bmax = _domain(ctx.ifm2, p.bm2, b) if not p.unary else (0, 0)
    na, nb = amax - amin + 1, bmax - bmin + 1
    if na * nb > _TABLE_MAX:
        return None
    lut = getattr(ctx.device, "lut", None)
    fn = ctx.f("NPU_SET_ACTIVATION", "activation_function")
    key = (skey, mode, amin, na, bmin, nb, None if fn == 0 or lut is None else bytes(np.asarray(lut, np.uint8)))
    t = _TABLES.get(key)
    if t is None:
        try:
            v = evaluate(ctx, p, mode, np.arange(amin, amax + 1, dtype=np.int64).reshape(na, 1, 1),
                          np.arange(bmin, bmax + 1, dtype=np.int64).reshape(1, nb, 1))
        except arith.Unpredictable:
            return None
        es = ofm.bits // 8
        t = arith.truncate(v.reshape(-1), ofm.bits, ofm.act_type).astype(
            f"<{'u' if ofm.act_type == isa.activation_type.unsigned else 'i'}{es}")
        t.setflags(write=False)
        _TABLES.put(key, t)
    ia = a - amin if amin else a
    if nb != 1:
        ia = ia * nb
    ib = b - bmin if bmin else b
    idx = ia + ib
    return np.broadcast_to(t[idx], shape)


# ------------------------------------------------------------------------------------------
# Literal reference (slow): per element on Python ints.
# ------------------------------------------------------------------------------------------

def elementwise_ref(snapshot, dataport, device) -> None:
    """NPU_OP_ELEMENTWISE as the literal per-element TRM loop on Python ints (the literal
    model's path, tlm.ethos_u85.literal; the operands read as one block each)."""
    ctx = OpContext(snapshot, dataport, device, "NPU_OP_ELEMENTWISE")
    mode = int(ctx.fields.get("elementwise_mode", 0))
    p = _checks(ctx, mode)
    f = ctx.f
    H, W, D = ctx.ofm_h, ctx.ofm_w, ctx.ofm_d

    def sa(x):
        return arith.scale_input_ref(x, *p.sa)

    def sb(x):
        return arith.scale_input_ref(x, *p.sb)

    def block(read, bm):
        """The operand's elements as one block read (broadcast axes of extent 1), as the fast
        path reads them (a chained operand pops its values in (y, x, c) order)."""
        return read(range(1 if bm & BCAST_H else H), range(1 if bm & BCAST_W else W),
                    range(1 if bm & BCAST_C else D)).tolist()

    fa = None if p.bm == SCALAR else block(ctx.read_ifm, p.bm)
    fb = None if p.unary or p.bm2 == SCALAR else block(ctx.read_ifm2, p.bm2)
    out = np.zeros((H, W, D), np.int64)
    for oy in range(H):
        for ox in range(W):
            for oc in range(D):
                if p.bm == SCALAR:
                    a = scalar_operand(ctx, "IFM", p.scalar)
                else:
                    a = fa[0 if p.bm & BCAST_H else oy][0 if p.bm & BCAST_W else ox][0 if p.bm & BCAST_C else oc]
                b = 0
                if not p.unary:
                    if p.bm2 == SCALAR:
                        b = scalar_operand(ctx, "IFM2", p.scalar)
                    else:
                        b = fb[0 if p.bm2 & BCAST_H else oy][0 if p.bm2 & BCAST_W else ox][
                            0 if p.bm2 & BCAST_C else oc]
                rm = RESCALE_GLOBAL
                wrap = True
                if mode == MUL:
                    acc = a * b
                    if p.precision not in (B8, B16):
                        rm = RESCALE_SHIFT_ONLY
                        wrap = False
                elif mode == ADD:
                    acc = sa(a) + sb(b)
                elif mode == SUB:
                    acc = sa(a) - sb(b)
                elif mode == MIN:
                    acc = min(sa(a), sb(b))
                elif mode == MAX:
                    acc = max(sa(a), sb(b))
                elif mode == LRELU:
                    acc = sa(a) if a >= 0 else sb(a)
                elif mode == ABS:
                    acc = abs(sa(a))
                elif mode == CLZ:
                    acc = arith.clz(sa(a), 32)
                elif mode == SHR:
                    acc = arith.rounded_shift_right_ref(sa(a), sb(b) & 31, p.ofm_round, p.ofm_dbl)
                    rm = RESCALE_NONE
                elif mode == SHL:
                    acc = sign_extend(sa(a) << (sb(b) & 31), 32)
                    acc &= {B8: 0xFF, B16: 0xFFFF}.get(p.precision, -1)
                    rm = RESCALE_NONE
                elif mode == LSHR:
                    acc = sa(a)
                    shift = sb(b) & 31
                    if p.precision == B8:
                        acc &= 0xFF
                    elif p.precision == B16:
                        acc &= 0xFFFF
                    acc = (acc & 0xFFFFFFFF) >> shift
                    rm = RESCALE_NONE
                elif mode == DIV:
                    ctx.check(b != 0, "div: b != 0")
                    ctx.check(not (b == -1 and a == -0x80000000), "div: !(b == -1 && a == -0x80000000)")
                    q = abs(a) // abs(b)
                    acc = -q if (a < 0) != (b < 0) else q
                elif mode == CMP_EQ:
                    acc = -1 if sa(a) == sb(b) else 0
                elif mode == CMP_NE:
                    acc = -1 if sa(a) != sb(b) else 0
                elif mode == CMP_GE:
                    acc = -1 if sa(a) >= sb(b) else 0
                elif mode == CMP_GT:
                    acc = -1 if sa(a) > sb(b) else 0
                elif mode == NOT:
                    acc = ~sa(a)
                elif mode == AND:
                    acc = sa(a) & sb(b)
                elif mode == OR:
                    acc = sa(a) | sb(b)
                elif mode == XOR:
                    acc = sa(a) ^ sb(b)
                else:
                    acc = sa(a) & ~sb(b)
                if wrap:
                    acc = sign_extend(acc, 32)
                if rm != RESCALE_NONE:
                    acc = arith.rescale_ref(
                        acc, -1, rm, scale_mode=ctx.ofm.scale_mode, ofm_scale=f("NPU_SET_OFM_SCALE", "scale"),
                        ofm_shift=f("NPU_SET_OFM_SCALE", "shift"), round_mode=p.ofm_round, dbl_rnd=p.ofm_dbl,
                        acc_format=ctx.acc_format, check=wrap)
                acc = arith.activation_ref(
                    acc, precision=ctx.ofm.precision, act_type=ctx.ofm.act_type,
                    zero_point=f("NPU_SET_OFM_ZERO_POINT", "zero_point"),
                    act_min=f("NPU_SET_ACTIVATION_MIN", "clip_boundary"),
                    act_max=f("NPU_SET_ACTIVATION_MAX", "clip_boundary"),
                    function=f("NPU_SET_ACTIVATION", "activation_function"),
                    clip_range=f("NPU_SET_ACTIVATION", "activation_clip_range"),
                    table=f("NPU_SET_ACTIVATION", "table"), lut=bytes(ctx.device.lut), truncate_ofm=False)
                out[oy, ox, oc] = acc
    ctx.write_ofm(out, ALLOWED_PERMS_RTRANS)


register(KernelOp("NPU_OP_ELEMENTWISE", op_elementwise, "elementwise_mode", isa.elementwise_mode,
                  reference=elementwise_ref))
