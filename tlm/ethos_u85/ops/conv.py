"""NPU_OP_CONV and NPU_OP_DEPTHWISE (TRM r0p0 issue 05, 3.10.2 and 3.10.3).

The TRM pseudocode, per OFM element (oy, ox, oc)::

    acc = read_accumulator(oy, ox, oc, 0)
    for ky, kx (undilated taps, ky*dilation_y < dilated_height ...), for ic:
        v = 0 if (iy, ix) is outside the IFM else read_ifm(iy, ix, ic)   # zero-point subtracted
        w = IFM2 (0, x=oc, c=ic) if weights_ifm2 else read_weight(oc, ky, kx, ic)   # see below
        acc = accumulate(acc, v * w)                                     # wraps at 32/48 bits
    write_accumulator(oy, ox, oc, acc, rescale_mode_normal)

is computed here in bulk:

* the zero-point-subtracted, upscaled and zero-padded IFM comes from
  ``OpContext.read_ifm_padded()`` as an int64 array ``[ifm_h + pad_h, ifm_w + pad_w, C]``;
* a strided, dilated *patch view* of it (numpy stride tricks, no copy) has shape
  ``[ofm_h, ofm_w, kh, kw, C]``;
* CONV reduces it against the weight tensor ``[ofm_d, kh, kw, ifm_d]`` as a matrix product
  (im2col, tile by tile of output pixels).  numpy's integer matmul does not use BLAS, so the product is done
  in float32/float64 (BLAS) whenever that is provably exact: every partial sum of the dot
  products is bounded by ``max|a| * max|w| * K``; when that bound is below 2**24 (float32)
  or 2**53 (float64) every partial sum is an integer the format represents exactly, so
  the float result is the exact integer sum whatever order BLAS adds in.  Larger
  reductions are split along K into pieces that satisfy the bound, summed in int64;
* DEPTHWISE accumulates per kernel tap (a short loop over kh*kw taps, each one flat
  operation over [ofm_h, ofm_w * C]) in the narrowest exact type: float32 when every partial
  sum is an integer below 2**24, else int32 or int64.
* Both hand the *unwrapped* exact sums (in that type) and their bound to
  ``OpContext.write_accumulator(..., bound=)``, whose fused epilogue applies the accumulator
  wrap (only when the bound says it can happen), bias, rescale, activation and truncation in
  one cache-blocked pass (tlm.ethos_u85.ops.common.fused_epilogue), writing the OFM type directly.
* Register-derived values (geometry, weight order) are memoised by the register snapshot's
  contents, decoded weights by their stream bytes (compared in full on every hit), and the
  float weight matrices by the cached tensor.

The accumulator wrap: ``accumulate()`` wraps to 32 or 48 bits (ACC_FORMAT.acc_format) after
*every* MAC.  Addition modulo 2**n is associative and commutative, and sign_extend(., n) is a
ring homomorphism from the integers onto that residue system, so wrapping the exact sum once
(``sign_extend(acc0 + sum(v*w), n)``) equals wrapping after every step in any order.  The
exact sums fit int64 (|v| <= 2**15, |w| <= 2**15, K <= 2**28, acc0 < 2**47), and even if they did not,
int64 arithmetic is exact modulo 2**64, which keeps the low 48 bits.

Every ``assert()`` of the TRM pseudocode raises :class:`Unpredictable` naming the op and the
check; absurd sizes raise :class:`BudgetExceeded` before any data is read.  The IFM2 asserts
apply only to the operand combinations that read IFM2, as the pseudocode places them:
``weights_ifm2`` (its block of nine, IFM/IFM2 precision equality included) and
``acc_input == ifm2`` (read_ifm2's accumulator-restore precision/type asserts); a plain
CONV or DEPTHWISE checks nothing of IFM2.

Weights come from the weight stream(s) over the DataPort (channel rd_weights): SWD with
``num_wd`` decoders (WEIGHT_BASE/LENGTH, WEIGHT1..3_BASE/LENGTH) or one FWD stream, decoded
and un-ordered by :mod:`tlm.ethos_u85.weights` into ``[ofm_d, kh, kw, ifm_d]`` (undilated kernel).
With ``weights_ifm2`` (matrix multiply) the weights are IFM2 elements ``(y=0, x=oc, c=ic)``,
i.e. IFM2 holds B as ``[1, ofm_depth, ifm_depth]`` and the op computes ``A . B^T``.  TRM
inconsistency: the 3.10.2 pseudocode writes ``w = read_ifm2(0, ic, oc)`` (x=ic, c=oc), but
TRM 4.1 says "the width and channel dimensions form the 2D matrix rows and columns ... a 1x1
kernel convolution performs the multiply of a matrix A by the transpose of a second matrix
B", which is (x=oc, c=ic); Vela 5.2 BATCH_MATMUL streams transpose B (a POOL with
activation_transpose HCW) into exactly that layout (IFM2_WIDTH0 = ofm_depth) and only match
LiteRT with (x=oc, c=ic).  The prose and the compiler are followed here.
"""
from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ...core.errors import BudgetExceeded, Unpredictable
from ...core.memo import Memo
from .. import isa
from ..arith import AccFormat, RescaleMode, ifm_zero_point, sign_extend
from ..config import Policy, policy_of
from ..fmap import Storage
from ..memory import Channel
from ..weights import WeightOrder, decode_weight_tensor
from .common import OpContext, snapshot_key
from .registry import KernelOp, register

__all__ = [
    "op_conv", "op_depthwise", "conv_sums", "depthwise_sums", "conv_acc", "depthwise_acc", "patch_view", "exact_matmul",
    "wrap_acc", "read_weight_tensor", "read_weight_streams", "checked_weight_order", "conv_ref", "depthwise_ref",
]

# decoded-weight cache (entries): see read_weight_tensor
_WEIGHT_CACHE: dict = {}
_WEIGHT_CACHE_SIZE = [0, 0]         # weight elements, stream bytes held by _WEIGHT_CACHE
_WEIGHT_CACHE_ENTRIES = 1024        # (a network has one entry per weight tensor)
_WEIGHT_CACHE_ELEMENTS = 1 << 24
_WEIGHT_CACHE_BYTES = 1 << 26       # stream bytes kept for the hit comparison

# im2col working-set size (elements of the patch matrix per chunk).
_CHUNK_ELEMENTS = 1 << 21

_F32_EXACT = 1 << 24
_F64_EXACT = 1 << 53
_MIN_F32_CHUNK = 256       # shortest K-chunk worth splitting a float32 product into

# TRM enum values used here, from the ISA table
_B8, _B16 = isa.activation_precision.b8, isa.activation_precision.b16
_SIGNED = isa.activation_type.signed
_ACC_INPUT_IFM2 = isa.acc_input.ifm2
_FWD = isa.weight_format.fwd
SPARSE = isa.weight_sparsity.sparse_2_4
_DEPTH_FIRST = isa.weight_order.depth_first

_WEIGHT_STREAMS = (("NPU_SET_WEIGHT_BASE", "NPU_SET_WEIGHT_LENGTH"),
                   ("NPU_SET_WEIGHT1_BASE", "NPU_SET_WEIGHT1_LENGTH"),
                   ("NPU_SET_WEIGHT2_BASE", "NPU_SET_WEIGHT2_LENGTH"),
                   ("NPU_SET_WEIGHT3_BASE", "NPU_SET_WEIGHT3_LENGTH"))


# ------------------------------------------------------------------------------------------
# Pure compute kernels
# ------------------------------------------------------------------------------------------

def wrap_acc(x, acc_format: int) -> np.ndarray:
    """Wrap an (exact or mod-2**64) int64 sum to the accumulator width: 32 (i32) or 48 (i48)
    bits, as ``accumulate()`` does after every MAC (see the module doc for why once is enough)."""
    return sign_extend(np.asarray(x, dtype=np.int64), 32 if int(acc_format) == AccFormat.I32 else 48)


def _check_patch(shape, kh: int, kw: int, stride_y: int, stride_x: int, dilation_y: int, dilation_x: int,
                 ofm_h: int, ofm_w: int) -> None:
    Hp, Wp = shape[0], shape[1]
    if ofm_h < 1 or ofm_w < 1 or kh < 1 or kw < 1:
        raise ValueError("empty patch view")
    if (ofm_h - 1) * stride_y + (kh - 1) * dilation_y >= Hp or (ofm_w - 1) * stride_x + (kw - 1) * dilation_x >= Wp:
        raise ValueError(f"padded IFM {tuple(shape)} too small for {ofm_h}x{ofm_w} outputs of a "
                         f"{kh}x{kw} kernel, stride {stride_y}x{stride_x}, dilation {dilation_y}x{dilation_x}")


def patch_view(xp: np.ndarray, kh: int, kw: int, stride_y: int, stride_x: int,
               dilation_y: int, dilation_x: int, ofm_h: int, ofm_w: int) -> np.ndarray:
    """Read-only view ``[ofm_h, ofm_w, kh, kw, C]`` of the padded IFM ``xp [Hp, Wp, C]``:
    element ``[oy, ox, ky, kx, c] = xp[oy*stride_y + ky*dilation_y, ox*stride_x + kx*dilation_x, c]``
    (padded coordinates, i.e. the TRM's ``iy + pad_y``)."""
    Hp, Wp, C = xp.shape
    _check_patch(xp.shape, kh, kw, stride_y, stride_x, dilation_y, dilation_x, ofm_h, ofm_w)
    s0, s1, s2 = xp.strides
    shape, strides = (ofm_h, ofm_w, kh, kw, C), (s0 * stride_y, s1 * stride_x, s0 * dilation_y, s1 * dilation_x, s2)
    if xp.flags.c_contiguous:                            # (np.ndarray is cheaper than as_strided)
        v = np.ndarray(shape, xp.dtype, buffer=xp, strides=strides)
        v.flags.writeable = False
        return v
    return as_strided(xp, shape=shape, strides=strides, writeable=False)


def _absmax(a: np.ndarray) -> int:
    if a.size == 0:
        return 0
    return max(abs(int(a.max())), abs(int(a.min())))


def float_plan(amax: int, bmax: int, K: int):
    """(dtype, K-chunk) such that every partial sum of a K-chunk dot product is an integer
    below 2**24 (float32) or 2**53 (float64), hence exact. float32 (twice the BLAS speed) is
    chosen whenever the chunks it needs are not too short; chunk results are summed in int64."""
    per = amax * bmax
    if per == 0 or per * K < _F32_EXACT:
        return np.float32, max(K, 1)
    kc32 = (_F32_EXACT - 1) // per
    if kc32 >= _MIN_F32_CHUNK:
        return np.float32, kc32
    if per * K < _F64_EXACT:
        return np.float64, K
    return np.float64, max(1, (_F64_EXACT - 1) // per)


def _exact_product(a: np.ndarray, b: np.ndarray, kc: int, keep_float: bool = False) -> np.ndarray:
    """a @ b for float matrices holding integers, exact when every length-kc partial dot
    product is (see float_plan); K-chunks are summed in int64.  ``keep_float``: a
    single-chunk product is returned as the float result itself (exact integers)."""
    K = a.shape[1]
    if kc >= K:
        r = a @ b
        return r if keep_float else r.astype(np.int64)
    out = (a[:, :kc] @ b[:kc]).astype(np.int64)
    for k0 in range(kc, K, kc):
        out += (a[:, k0:k0 + kc] @ b[k0:k0 + kc]).astype(np.int64)
    return out


def exact_matmul(a: np.ndarray, b: np.ndarray, amax: int | None = None, bmax: int | None = None) -> np.ndarray:
    """Exact integer product ``a @ b`` (int64 result) of integer matrices ``a [M, K]``,
    ``b [K, N]`` through float BLAS (see the module doc for the exactness argument).
    ``amax``/``bmax`` are bounds on ``|a|``/``|b|`` (computed when omitted)."""
    a = np.asarray(a)
    b = np.asarray(b)
    M, K = a.shape
    K2, N = b.shape
    if K != K2:
        raise ValueError("inner dimensions differ")
    if amax is None:
        amax = _absmax(a)
    if bmax is None:
        bmax = _absmax(b)
    dt, kc = float_plan(int(amax), int(bmax), K)
    return _exact_product(a.astype(dt), b.astype(dt), kc)


def weight_max(w: np.ndarray) -> int:
    d = _derived(w)
    if d is None:
        return _absmax(w)
    v = d.get("absmax")
    if v is None:
        v = d["absmax"] = _absmax(w)
    return v


def weight_matrix(w: np.ndarray, dt, ky=None, kx=None, i0=0, i1=None) -> np.ndarray:
    """The weight matrix [K, O] in float type dt: all taps in (ky, kx, ic) order, or one tap
    and IFM-channel range.  Cached for read-only (decoded, cached) weight tensors."""
    d = _derived(w)
    key = (np.dtype(dt).char, ky, kx, i0, i1)
    if d is not None:
        m = d.get(key)
        if m is not None:
            return m
    O, kh, kw, I = w.shape
    if ky is None:
        m = np.ascontiguousarray(w.reshape(O, kh * kw * I).T, dtype=dt)
    else:
        m = np.ascontiguousarray(w[:, ky, kx, i0:i1].T, dtype=dt)
    if d is not None:
        m.setflags(write=False)
        d[key] = m
    return m


def _conv_parts(view, w, dt):
    """(patch view [oh, ow, L...], weight matrix [L, O]) pairs whose products sum to the conv.
    One im2col part when K = kh*kw*ifm_d fits the working set, else one part per kernel tap
    and IFM-channel chunk (so no patch matrix exceeds _CHUNK_ELEMENTS columns)."""
    O, kh, kw, I = w.shape
    K = kh * kw * I
    if K <= _CHUNK_ELEMENTS:
        yield view, weight_matrix(w, dt)                  # (ky, kx, ic) order
        return
    L = min(I, _CHUNK_ELEMENTS)
    for ky in range(kh):
        for kx in range(kw):
            for i0 in range(0, I, L):
                yield view[:, :, ky, kx, i0:i0 + L], weight_matrix(w, dt, ky, kx, i0, i0 + L)


def conv_sums(xp: np.ndarray, w: np.ndarray, stride_y: int, stride_x: int, dilation_y: int,
              dilation_x: int, ofm_h: int, ofm_w: int) -> np.ndarray:
    """Exact (mod 2**64) sums ``sum_{ky,kx,ic} xp[...] * w[oc, ky, kx, ic]`` as int64
    ``[ofm_h, ofm_w, ofm_d]``.

    ``xp``: padded IFM ``[Hp, Wp, C]`` (integers, zero-point subtracted, pads 0), C >= ifm_d.
    ``w``: weights ``[ofm_d, kh, kw, ifm_d]`` (undilated kernel).
    The patch matrix is built (im2col) tile by tile of output pixels, so that no temporary
    exceeds about _CHUNK_ELEMENTS elements.
    """
    s, _ = conv_acc(xp, w, stride_y, stride_x, dilation_y, dilation_x, ofm_h, ofm_w)
    return s.astype(np.int64)


def conv_acc(xp: np.ndarray, w: np.ndarray, stride_y: int, stride_x: int, dilation_y: int,
             dilation_x: int, ofm_h: int, ofm_w: int, amax: int | None = None):
    """:func:`conv_sums` as ``(sums, bound)``: the sums are exact integers held in float32,
    float64 (one BLAS product per output tile) or int64 (K-chunked products, or sums beyond
    2**53), ``bound`` is a Python int >= max |sum| (max|x| * max|w| * K), so the caller knows
    whether the accumulator can wrap.  ``xp`` may be any integer or float array holding
    integers (a float32 IFM with C == ifm_d is used without a copy); ``amax``: a bound on
    |xp| if the caller has one (computed otherwise)."""
    O, kh, kw, I = w.shape
    if xp.shape[2] < I:
        raise ValueError(f"IFM has {xp.shape[2]} channels, the weights {I}")
    K = kh * kw * I
    if amax is None:
        amax = _absmax(xp)
    wmax = weight_max(w)
    bound = int(amax) * int(wmax) * K
    dt, kc = float_plan(int(amax), int(wmax), K)
    xf = np.asarray(xp[:, :, :I] if xp.shape[2] != I else xp, dtype=dt)   # patches are views of it
    view = patch_view(xf, kh, kw, stride_y, stride_x, dilation_y, dilation_x, ofm_h, ofm_w)
    keep = kc >= K and bound < _F64_EXACT
    out = None
    for pv, wm in _conv_parts(view, w, dt):
        L = wm.shape[0]
        pix = max(1, _CHUNK_ELEMENTS // max(L, O))
        rows, cols = (max(1, pix // ofm_w), ofm_w) if pix >= ofm_w else (1, pix)
        if rows >= ofm_h and cols >= ofm_w:                 # one tile: no output copy
            part = _exact_product(pv.reshape(ofm_h * ofm_w, L), wm, kc, keep).reshape(ofm_h, ofm_w, O)
        else:
            part = np.empty((ofm_h, ofm_w, O), dt if keep else np.int64)
            for r0 in range(0, ofm_h, rows):
                for c0 in range(0, ofm_w, cols):
                    blk = pv[r0:r0 + rows, c0:c0 + cols]
                    bh, bw = blk.shape[:2]
                    pm = blk.reshape(bh * bw, L)                    # im2col (copies when strided)
                    part[r0:r0 + bh, c0:c0 + bw] = _exact_product(pm, wm, kc, keep).reshape(bh, bw, O)
        if out is None:
            out = part
        else:
            if out.dtype != np.int64:
                out = out.astype(np.int64)
            out += part.astype(np.int64, copy=False)
    return out, bound


def depthwise_sums(xp: np.ndarray, w: np.ndarray, stride_y: int, stride_x: int, dilation_y: int,
                   dilation_x: int, ofm_h: int, ofm_w: int) -> np.ndarray:
    """Exact (mod 2**64) depthwise sums ``sum_{ky,kx} xp[..., c] * w[c, ky, kx, 0]`` as int64
    ``[ofm_h, ofm_w, C]``; ``w``: ``[C, kh, kw, 1]``; ``xp`` has >= C channels."""
    s, _ = depthwise_acc(xp, w, stride_y, stride_x, dilation_y, dilation_x, ofm_h, ofm_w)
    return s.astype(np.int64)


def depthwise_acc(xp: np.ndarray, w: np.ndarray, stride_y: int, stride_x: int, dilation_y: int,
                  dilation_x: int, ofm_h: int, ofm_w: int, amax: int | None = None):
    """:func:`depthwise_sums` as ``(sums, bound)`` (see :func:`conv_acc`).

    One multiply-add per kernel tap over the whole OFM, in float32 when every partial sum is
    an integer below 2**24 (``max|x| * max|w| * taps``: exact, whatever the order), else int32
    (below 2**31) or int64 - the narrowest exact type; ``xp`` may be an integer or float array
    holding integers.  Each tap is one flat operation over [ofm_h, ofm_w * C]: the IFM is
    split into ``stride_x`` column phases (x = phase + stride_x * column, contiguous copies
    when stride_x > 1), in which a tap's (ox, c) elements are consecutive, and the tap's
    weights are repeated along ofm_w."""
    C, kh, kw, one = w.shape
    if one != 1:
        raise ValueError("depthwise weights must be [C, kh, kw, 1]")
    if xp.shape[2] < C:
        raise ValueError(f"IFM has {xp.shape[2]} channels, the op {C}")
    xc = xp[:, :, :C] if xp.shape[2] != C else xp
    _check_patch(xc.shape, kh, kw, stride_y, stride_x, dilation_y, dilation_x, ofm_h, ofm_w)
    if amax is None:
        amax = _absmax(xc)
    bound = int(amax) * weight_max(w) * kh * kw
    dt = np.dtype(np.float32 if bound < _F32_EXACT else np.int32 if bound < (1 << 31) else np.int64)
    x = np.ascontiguousarray(xc, dtype=dt)
    d = _derived(w)
    wkey = ("dw", dt.char, ofm_w)
    wt = None if d is None else d.get(wkey)
    if wt is None:                                       # [kh, kw, ofm_w * C]: w[c] at ox*C + c
        wt = np.ascontiguousarray(np.tile(w[:, :, :, 0].transpose(1, 2, 0), (1, 1, ofm_w)), dtype=dt)
        if d is not None:
            wt.setflags(write=False)
            d[wkey] = wt
    phases = {}
    n = ofm_w * C
    acc = tmp = None
    for ky in range(kh):
        for kx in range(kw):
            ph, q = divmod(kx * dilation_x, stride_x)[::-1]
            xph = phases.get(ph)
            if xph is None:
                xph = phases[ph] = x if stride_x == 1 else np.ascontiguousarray(x[:, ph::stride_x])
            y0 = ky * dilation_y                       # rows y0 + oy*stride_y, columns q .. q+ofm_w-1
            v = xph[y0:y0 + (ofm_h - 1) * stride_y + 1:stride_y, q:q + ofm_w].reshape(ofm_h, n)
            if acc is None:
                acc = np.multiply(v, wt[ky, kx])
                tmp = np.empty_like(acc) if kh * kw > 1 else None
            else:
                np.multiply(v, wt[ky, kx], out=tmp)
                acc += tmp
    return acc.reshape(ofm_h, ofm_w, C), bound


# ------------------------------------------------------------------------------------------
# Register-level helpers
# ------------------------------------------------------------------------------------------

def read_weight_tensor(snap, port, macs: int, depthwise: bool, op: str = "NPU_OP_CONV",
                       policy: "Policy | None" = None) -> np.ndarray:
    """Read the weight stream(s) of the op over the DataPort (channel rd_weights, region
    WEIGHT_REGION) and decode them into the weight tensor ``[ofm_d, kh, kw, ifm_d]``
    (``[C, kh, kw, 1]`` for depthwise), int16, undilated kernel, read-only.

    The streams are always read (the AXI traffic is modelled); the decoded tensor is cached
    by (ordering parameters, stream contents), since Vela re-reads the same weights for
    every stripe of a layer and decoding is the costliest part of a small op.  A cache hit
    compares the stored stream bytes with the ones just read in full (no hash collision
    can return the wrong tensor); the lookup key holds the lengths and a sample of bytes."""
    skey = snapshot_key(snap)
    p = _ORDERS.get((skey, macs, depthwise)) if skey is not None else None
    if p is None:
        p = checked_weight_order(snap, macs, depthwise, op)
        if skey is not None:                             # checked orders only
            _ORDERS.put((skey, macs, depthwise), p)
    pol = policy if policy is not None else policy_of(None)
    fwd, streams = read_weight_streams(snap, port, p, op, pol)
    last = _LAST_WEIGHTS.get((skey, macs, depthwise)) if skey is not None else None
    if last is not None and last[0] == streams:             # this op's weights, unchanged
        return last[1]
    key = (p, fwd, tuple(_sample(x) for x in streams))
    hit = _WEIGHT_CACHE.get(key)
    if hit is not None and hit[0] == streams:               # full byte comparison
        _WEIGHT_CACHE[key] = _WEIGHT_CACHE.pop(key)          # most recently used last
        _remember(skey, macs, depthwise, hit)
        return hit[1]
    try:
        w = decode_weight_tensor(p, streams, fwd=fwd, max_entries=pol.max_weight_stream_entries)
    except Unpredictable as e:          # WeightStreamError: corrupt or short stream
        raise Unpredictable(f"{op}: weight stream: {e}") from e
    w.setflags(write=False)
    if w.size <= _WEIGHT_CACHE_ELEMENTS:
        _cache_drop(key)
        _WEIGHT_CACHE[key] = (streams, w)
        _cache_size(streams, w, +1)
        _remember(skey, macs, depthwise, (streams, w))
        while (len(_WEIGHT_CACHE) > _WEIGHT_CACHE_ENTRIES or _WEIGHT_CACHE_SIZE[0] > _WEIGHT_CACHE_ELEMENTS
               or _WEIGHT_CACHE_SIZE[1] > _WEIGHT_CACHE_BYTES):
            _cache_drop(next(iter(_WEIGHT_CACHE)))
            _LAST_WEIGHTS.clear()                           # holds only cached entries
    return w


def checked_weight_order(snap, macs: int, depthwise: bool, op: str) -> WeightOrder:
    """The op's WeightOrder from its registers, its TRM asserts checked (Unpredictable names the op)."""
    p = WeightOrder.from_registers(snap, macs, depthwise)
    try:
        p.check()
    except Unpredictable as e:
        raise Unpredictable(f"{op}: {e.what}") from e
    return p


def read_weight_streams(snap, port, p: WeightOrder, op: str, pol: Policy) -> tuple:
    """(fwd, stream bytes): the op's weight stream(s) read over the DataPort (channel
    rd_weights, region WEIGHT_REGION): WEIGHT_BASE/LENGTH .. WEIGHT3 for the ``num_wd``
    decoders, or the one FWD stream; the model's budgets checked first."""
    f = snap.field
    n = math.prod(p.shape)
    max_bytes = pol.max_weight_bytes
    if n > pol.max_op_weights:
        raise BudgetExceeded(f"{op}: weight tensor of {n} elements exceeds the model's budget ({pol.max_op_weights})")
    fwd = f("NPU_SET_WEIGHT_FORMAT", "weight_format") == _FWD
    region = f("NPU_SET_WEIGHT_REGION", "region")
    regs = _WEIGHT_STREAMS[:1] if fwd else _WEIGHT_STREAMS[:p.num_wd]
    lengths = [f(ln, "length") for _, ln in regs]
    if sum(lengths) > max_bytes:
        raise BudgetExceeded(f"{op}: weight streams of {sum(lengths)} bytes exceed the model's budget ({max_bytes})")
    return fwd, tuple(port.read(region, f(base, "addr"), length, Channel.rd_weights).tobytes()
                      for (base, _), length in zip(regs, lengths))


def _cache_size(streams: tuple, w: np.ndarray, sign: int) -> None:
    _WEIGHT_CACHE_SIZE[0] += sign * w.size
    _WEIGHT_CACHE_SIZE[1] += sign * sum(len(x) for x in streams)


def _cache_drop(key) -> None:
    e = _WEIGHT_CACHE.pop(key, None)
    if e is not None:
        _cache_size(e[0], e[1], -1)


_ORDERS = Memo(4096)      # (snapshot key, macs, depthwise) -> checked WeightOrder
# (snapshot key, macs, depthwise) -> the (streams, tensor) entry the op used last: an op that
# runs again with the same registers and stream bytes skips the cache-key computation
_LAST_WEIGHTS = Memo(_WEIGHT_CACHE_ENTRIES)


def _remember(skey, macs: int, depthwise: bool, entry) -> None:
    if skey is not None:
        _LAST_WEIGHTS.put((skey, macs, depthwise), entry)


def _sample(x: bytes) -> tuple:
    """Cache-lookup fingerprint of a weight stream: its length, both ends and up to 256
    bytes spread over it (the hit is confirmed by comparing the whole stream)."""
    n = len(x)
    step = max(1, n // 256)
    return n, x[:32], x[-32:], x[::step]


# Derived forms of read-only weight tensors (conv_sums): id(w) -> (w, {what: value}).  The
# entry holds w itself, so the id cannot be reused while the entry exists.
_DERIVED: dict = {}
_DERIVED_ENTRIES = 1024
_DERIVED_BYTES = 1 << 28        # float weight matrices etc. (checked when a tensor is added)


def _derived(w: np.ndarray) -> dict | None:
    """A per-tensor memo for read-only weight tensors (None for writeable arrays)."""
    if w.flags.writeable:
        return None
    e = _DERIVED.get(id(w))
    if e is not None and e[0] is w:
        return e[1]
    d: dict = {}
    _DERIVED[id(w)] = (w, d)
    while len(_DERIVED) > _DERIVED_ENTRIES or (
            len(_DERIVED) > 1 and sum(v.nbytes for _, e in _DERIVED.values() for v in e.values()
                                      if isinstance(v, np.ndarray)) > _DERIVED_BYTES):
        _DERIVED.pop(next(iter(_DERIVED)))
    return d


def check_sparse(w: np.ndarray, op: str) -> None:
    """WEIGHT_FORMAT.weight_sparsity == sparse_2_4 (TRM 3.3 NPU_SET_WEIGHT_FORMAT): weights in
    -127..127 and at least 2 zeros in every group of 4 along the input channels (channels past
    ifm_depth are the stream's zero padding)."""
    if w.size == 0:
        return
    if _absmax(w) > 127:
        raise Unpredictable(f"{op}: sparse_2_4 weight outside -127..127")
    O, kh, kw, I = w.shape
    pad = (-I) % 4
    wz = np.concatenate([w != 0, np.zeros((O, kh, kw, pad), bool)], axis=3) if pad else (w != 0)
    if (wz.reshape(O, kh, kw, -1, 4).sum(axis=4) > 2).any():
        raise Unpredictable(f"{op}: sparse_2_4 weights with fewer than 2 zeros in a group of 4 input channels")


_GEOMETRY = Memo(4096)


def conv_geometry(snap) -> "_Geometry":
    """_Geometry(snap), memoised by the snapshot's contents (tlm.ethos_u85.ops.common.snapshot_key)."""
    key = snapshot_key(snap)
    if key is None:
        return _Geometry(snap)
    g = _GEOMETRY.get(key)
    if g is None:
        g = _GEOMETRY.put(key, _Geometry(snap))
    return g


class _Geometry:
    """Derived values of TRM 3.10.2 / 3.10.3 straight from the registers (read-only)."""

    def __init__(self, snap):
        f = snap.field
        ks = "NPU_SET_KERNEL_STRIDE"
        self.dilated_h = f("NPU_SET_KERNEL_HEIGHT_M1", "height_m1") + 1
        self.dilated_w = f("NPU_SET_KERNEL_WIDTH_M1", "width_m1") + 1
        self.ofm_h = f("NPU_SET_OFM_HEIGHT_M1", "height_m1") + 1
        self.ofm_w = f("NPU_SET_OFM_WIDTH_M1", "width_m1") + 1
        self.ofm_d = f("NPU_SET_OFM_DEPTH_M1", "depth_m1") + 1
        self.ifm_d = f("NPU_SET_IFM_DEPTH_M1", "depth_m1") + 1
        self.stride_y = 2 * f(ks, "stride_y_msb") + f(ks, "stride_y_lsb") + 1
        self.stride_x = 2 * f(ks, "stride_x_msb") + f(ks, "stride_x_lsb") + 1
        self.dil_y = f(ks, "dilation_y") + 1
        self.dil_x = f(ks, "dilation_x") + 1
        self.weight_order = f(ks, "weight_order")
        self.pad_y = f("NPU_SET_IFM_PAD_TOP", "pad")
        self.pad_x = f("NPU_SET_IFM_PAD_LEFT", "pad")
        self.pad_h = self.pad_y + f("NPU_SET_IFM_PAD_BOTTOM", "pad")
        self.pad_w = self.pad_x + f("NPU_SET_IFM_PAD_RIGHT", "pad")
        self.ifm_h = (self.ofm_h - 1) * self.stride_y + self.dilated_h - self.pad_h
        self.ifm_w = (self.ofm_w - 1) * self.stride_x + self.dilated_w - self.pad_w
        # undilated taps: ky*dilation_y < dilated_height
        self.kh = -(-self.dilated_h // self.dil_y)
        self.kw = -(-self.dilated_w // self.dil_x)
        self.precision = f("NPU_SET_IFM_PRECISION", "activation_precision")
        self.ifm_type = f("NPU_SET_IFM_PRECISION", "activation_type")
        self.acc_format = f("NPU_SET_ACC_FORMAT", "acc_format")
        self.acc_input = f("NPU_SET_ACC_FORMAT", "acc_input")
        self.weight_format = f("NPU_SET_WEIGHT_FORMAT", "weight_format")
        self.sparsity = f("NPU_SET_WEIGHT_FORMAT", "weight_sparsity")


def _common_checks(g: _Geometry, op: str) -> None:
    """The asserts shared by CONV and DEPTHWISE (after add_operation_to_chain)."""
    if not (g.ifm_h >= 1 and g.ifm_w >= 1):
        raise Unpredictable(f"{op}: ifm_height >= 1 && ifm_width >= 1 (pad range): IFM {g.ifm_h}x{g.ifm_w}")
    if not g.dilated_h * g.dilated_w <= 64 * 64:
        raise Unpredictable(f"{op}: dilated_height*dilated_width <= 64*64 (kernel range): "
                            f"{g.dilated_h}x{g.dilated_w}")
    if not (g.dilated_h <= 64 or g.dilated_w <= 64):
        raise Unpredictable(f"{op}: dilated_height <= 64 || dilated_width <= 64: {g.dilated_h}x{g.dilated_w}")
    if not (g.precision == _B8 or (g.precision == _B16 and g.ifm_type == _SIGNED)):
        raise Unpredictable(f"{op}: IFM precision must be b8 or signed b16 "
                            f"(precision {g.precision}, type {g.ifm_type})")


def _budget(g: _Geometry, op: str, depthwise: bool, pol: Policy) -> None:
    ofm = g.ofm_h * g.ofm_w * g.ofm_d
    if ofm > pol.max_op_elements:
        raise BudgetExceeded(f"{op}: {ofm} OFM elements exceed the model's budget ({pol.max_op_elements})")
    macs = ofm * g.kh * g.kw * (1 if depthwise else g.ifm_d)
    if macs > pol.max_op_macs:
        raise BudgetExceeded(f"{op}: {macs} MACs exceed the model's budget ({pol.max_op_macs})")
    ifm = (g.ifm_h + g.pad_h) * (g.ifm_w + g.pad_w) * (g.ofm_d if depthwise else g.ifm_d)
    if ifm > pol.max_op_elements:
        raise BudgetExceeded(f"{op}: padded IFM of {ifm} elements exceeds the model's budget ({pol.max_op_elements})")


def _context(snapshot, dataport, device, name):
    return OpContext(snapshot, dataport, device, name)


def macs_of(device) -> int:
    cfg = getattr(device, "config", None)
    return int(cfg.macs) if cfg is not None else 256


def _count(device, macs: int) -> None:
    """Statistics hook: total MACs executed by conv/depthwise (device.mac_count if present)."""
    if device is not None and hasattr(device, "mac_count"):
        device.mac_count += macs


# ------------------------------------------------------------------------------------------
# The operations
# ------------------------------------------------------------------------------------------

def _conv_asserts(ctx, g: _Geometry, op: str) -> int:
    """NPU_OP_CONV's asserts in TRM order (after add_operation_to_chain); returns weights_ifm2."""
    weights_ifm2 = int(ctx.fields.get("weights_ifm2", 0))       # payload set by the executor
    use_ifm2 = bool(weights_ifm2) or g.acc_input == _ACC_INPUT_IFM2
    ctx.add_operation_to_chain(True, use_ifm2, False)
    _common_checks(g, op)
    f = ctx.snap.field
    if weights_ifm2:
        if not (g.dilated_w == 1 and g.dilated_h == 1):
            raise Unpredictable(f"{op} weights_ifm2: dilated_width == 1 && dilated_height == 1")
        if not g.ofm_h == 1:
            raise Unpredictable(f"{op} weights_ifm2: ofm_height == 1")
        if not (g.pad_x == 0 and g.pad_y == 0):
            raise Unpredictable(f"{op} weights_ifm2: pad_x == 0 && pad_y == 0")
        if not (g.dil_x == 1 and g.dil_y == 1):
            raise Unpredictable(f"{op} weights_ifm2: dilation_x == 1 && dilation_y == 1")
        if not (g.stride_x == 1 and g.stride_y == 1):
            raise Unpredictable(f"{op} weights_ifm2: stride_x == 1 && stride_y == 1")
        if g.precision != f("NPU_SET_IFM2_PRECISION", "activation_precision"):
            raise Unpredictable(f"{op} weights_ifm2: IFM_PRECISION.activation_precision == "
                                f"IFM2_PRECISION.activation_precision")
        if g.acc_input == _ACC_INPUT_IFM2:
            raise Unpredictable(f"{op} weights_ifm2: ACC_FORMAT.acc_input != ifm2")
        if g.sparsity != 0:
            raise Unpredictable(f"{op} weights_ifm2: WEIGHT_FORMAT.weight_sparsity == none")
        if g.weight_order != _DEPTH_FIRST:
            raise Unpredictable(f"{op} weights_ifm2: KERNEL_STRIDE.weight_order == depth_first")
    _budget(g, op, False, ctx.policy)
    return weights_ifm2


def _depthwise_asserts(ctx, g: _Geometry, op: str) -> None:
    """NPU_OP_DEPTHWISE's asserts in TRM order (after add_operation_to_chain)."""
    ctx.add_operation_to_chain(True, g.acc_input == _ACC_INPUT_IFM2, False)
    _common_checks(g, op)
    if g.weight_format == _FWD:
        raise Unpredictable(f"{op}: WEIGHT_FORMAT.weight_format != fwd")
    if g.sparsity != 0:
        raise Unpredictable(f"{op}: WEIGHT_FORMAT.weight_sparsity == none")
    _budget(g, op, True, ctx.policy)


def op_conv(snapshot, dataport, device) -> None:
    """NPU_OP_CONV (TRM 3.10.2), including ``weights_ifm2`` (matrix multiply) and
    ``acc_input == ifm2``."""
    op = "NPU_OP_CONV"
    ctx = _context(snapshot, dataport, device, op)
    g = conv_geometry(snapshot)
    weights_ifm2 = _conv_asserts(ctx, g, op)

    if weights_ifm2:
        # w = IFM2 element (y=0, x=oc, c=ic): IFM2 is the [1, ofm_depth, ifm_depth] matrix B and
        # the op computes A . B^T (TRM 4.1 "Matrix multiply performance"; what Vela emits).
        # The 3.10.2 pseudocode's read_ifm2(0, ic, oc) contradicts both (see module doc).
        b = np.asarray(ctx.read_ifm2(np.arange(1), np.arange(g.ofm_d), np.arange(g.ifm_d)), dtype=np.int64)
        w = b.reshape(g.ofm_d, 1, 1, g.ifm_d)
    else:
        w = read_weight_tensor(snapshot, dataport, macs_of(device), False, op, policy=ctx.policy)
        if g.sparsity == SPARSE:
            check_sparse(w, op)
    if w.shape != (g.ofm_d, g.kh, g.kw, g.ifm_d):
        raise RuntimeError(f"{op}: weight tensor {w.shape}, expected {(g.ofm_d, g.kh, g.kw, g.ifm_d)}")
    # b8/b16 IFM values (zero point subtracted) are exact in float32: read straight into it
    xp = ctx.read_ifm_padded(dtype=np.float32)
    acc0 = ctx.initial_acc(0) if g.acc_input != 0 else None   # reset: 0 (not materialised)
    # the IFM's domain bound saves two passes over the data when it already allows one float32
    # product; otherwise the data's own maximum may allow a cheaper plan than the domain's
    amax = ifm_domain_bound(ctx)
    if amax is not None and amax * weight_max(w) * g.kh * g.kw * g.ifm_d >= _F32_EXACT:
        amax = None
    s, bound = conv_acc(xp, w, g.stride_y, g.stride_x, g.dil_y, g.dil_x, g.ofm_h, g.ofm_w, amax=amax)
    _count(device, g.ofm_h * g.ofm_w * g.ofm_d * g.kh * g.kw * g.ifm_d)
    _finish(ctx, g, s, bound, acc0)


def op_depthwise(snapshot, dataport, device) -> None:
    """NPU_OP_DEPTHWISE (TRM 3.10.3): channel multiplier 1, IFM channel = OFM channel."""
    op = "NPU_OP_DEPTHWISE"
    ctx = _context(snapshot, dataport, device, op)
    g = conv_geometry(snapshot)
    _depthwise_asserts(ctx, g, op)
    w = read_weight_tensor(snapshot, dataport, macs_of(device), True, op, policy=ctx.policy)
    if w.shape != (g.ofm_d, g.kh, g.kw, 1):
        raise RuntimeError(f"{op}: weight tensor {w.shape}, expected {(g.ofm_d, g.kh, g.kw, 1)}")
    xp = ctx.read_ifm_padded(depth=g.ofm_d, dtype=np.float32)   # read_ifm(iy, ix, oc)
    acc0 = ctx.initial_acc(0) if g.acc_input != 0 else None   # reset: 0 (not materialised)
    s, bound = depthwise_acc(xp, w, g.stride_y, g.stride_x, g.dil_y, g.dil_x, g.ofm_h, g.ofm_w,
                             amax=ifm_domain_bound(ctx))
    _count(device, g.ofm_h * g.ofm_w * g.ofm_d * g.kh * g.kw)
    _finish(ctx, g, s, bound, acc0)


def ifm_domain_bound(ctx) -> "int | None":
    """A bound on |read_ifm| known without looking at the data: the raw values of an IFM
    read from memory lie in its type's range, so |raw - zero point| is at most the larger
    distance from the zero point to that range's ends (upscale zeros and padding are 0).
    None for a chained IFM (its values are whatever the producing op pushed) or a precision
    without such a small range."""
    fm = ctx.ifm
    if fm.storage not in (Storage.TILE2X2, Storage.TILE3X1) or fm.precision not in (_B8, _B16):
        return None
    bits = 8 if fm.precision == _B8 else 16
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if fm.act_type == _SIGNED else (0, (1 << bits) - 1)
    zp = ifm_zero_point(fm.zero_point, fm.precision, fm.act_type, check=False)
    return max(abs(lo - zp), abs(hi - zp))


def _finish(ctx, g: _Geometry, s: np.ndarray, bound: int, acc0) -> None:
    """acc = read_accumulator + the exact sums, wrapped once (module doc), then
    write_accumulator.  With acc_input reset the initial value is 0 and the unwrapped sums
    go to write_accumulator with their bound (its fused path wraps them when needed)."""
    if g.acc_input == 0:                               # acc_input reset: acc0 is all 0
        ctx.write_accumulator(s, RescaleMode.NORMAL, bound=bound)
        return
    s = s.astype(np.int64)
    s += np.asarray(acc0, dtype=np.int64)
    ctx.write_accumulator(wrap_acc(s, g.acc_format), RescaleMode.NORMAL)


# ------------------------------------------------------------------------------------------
# Literal reference (slow): the TRM pseudocode per OFM element, on Python ints
# ------------------------------------------------------------------------------------------

def _literal(snapshot, dataport, device, depthwise: bool) -> None:
    """CONV / DEPTHWISE as the TRM loop of the module doc, per OFM element and per MAC on
    Python ints: ``accumulate`` (wrap to 32/48 bits) after every MAC, padding taps read as 0.
    Shared with the fast path: the register decoding (_Geometry, without its memo), the TRM
    asserts, the stream reads, ``OpContext.read_ifm``/``read_ifm2``/``initial_acc`` (one block
    read each, through the device's DataPort: with ``reference_paths`` the literal fmap
    gather), the scale/bias stream decoder.  Not shared: the weight decode (reference_order,
    the symbol-by-symbol SWD decoder), the MAC loop, the output stage
    (``OpContext.write_accumulator_ref``)."""
    from ..arith import accumulate
    from ..weights import decode_weight_tensor_ref
    op = "NPU_OP_DEPTHWISE" if depthwise else "NPU_OP_CONV"
    ctx = _context(snapshot, dataport, device, op)
    g = _Geometry(snapshot)
    weights_ifm2 = 0
    if depthwise:
        _depthwise_asserts(ctx, g, op)
    else:
        weights_ifm2 = _conv_asserts(ctx, g, op)
    in_d = g.ofm_d if depthwise else g.ifm_d
    if weights_ifm2:
        # w = IFM2 element (y=0, x=oc, c=ic) (TRM 4.1 and Vela; see the module doc)
        b = ctx.read_ifm2(range(1), range(g.ofm_d), range(g.ifm_d)).tolist()[0]

        def weight(oc, ky, kx, ic):
            return b[oc][ic]
    else:
        p = checked_weight_order(snapshot, macs_of(device), depthwise, op)
        fwd, streams = read_weight_streams(snapshot, dataport, p, op, ctx.policy)
        try:
            wt = decode_weight_tensor_ref(p, streams, fwd=fwd).tolist()
        except Unpredictable as e:
            raise Unpredictable(f"{op}: weight stream: {e}") from e
        if g.sparsity == SPARSE:
            for o in range(g.ofm_d):
                for ky in range(g.kh):
                    for kx in range(g.kw):
                        row = wt[o][ky][kx]
                        if any(abs(v) > 127 for v in row):
                            raise Unpredictable(f"{op}: sparse_2_4 weight outside -127..127")
                        for i0 in range(0, len(row), 4):
                            if sum(1 for v in row[i0:i0 + 4] if v != 0) > 2:
                                raise Unpredictable(f"{op}: sparse_2_4 weights with fewer than 2 zeros in "
                                                    f"a group of 4 input channels")

        def weight(oc, ky, kx, ic):
            return wt[oc][ky][kx][0 if depthwise else ic]
    # read_ifm(iy, ix, c) for the derived IFM (one block read: a chained IFM pops in (y, x, c) order)
    ifm = ctx.read_ifm(range(g.ifm_h), range(g.ifm_w), range(in_d)).tolist()
    acc0 = ctx.initial_acc(0).tolist()                   # read_accumulator(oy, ox, oc, 0)
    af = g.acc_format
    out = np.zeros((g.ofm_h, g.ofm_w, g.ofm_d), np.int64)
    for oy in range(g.ofm_h):
        for ox in range(g.ofm_w):
            for oc in range(g.ofm_d):
                acc = acc0[oy][ox][oc]
                for ky in range(g.kh):                   # undilated taps: ky*dilation_y < dilated_height
                    for kx in range(g.kw):
                        iy = -g.pad_y + oy * g.stride_y + ky * g.dil_y
                        ix = -g.pad_x + ox * g.stride_x + kx * g.dil_x
                        inside = 0 <= iy < g.ifm_h and 0 <= ix < g.ifm_w
                        for ic in ((oc,) if depthwise else range(g.ifm_d)):
                            v = ifm[iy][ix][ic] if inside else 0
                            acc = accumulate(acc, v * weight(oc, ky, kx, ic), af)
                out[oy, ox, oc] = acc
    _count(device, g.ofm_h * g.ofm_w * g.ofm_d * g.kh * g.kw * (1 if depthwise else g.ifm_d))
    ctx.write_accumulator_ref(out, RescaleMode.NORMAL)


def conv_ref(snapshot, dataport, device) -> None:
    """NPU_OP_CONV (incl. weights_ifm2, acc_input ifm2/keep) as the literal TRM loop (slow)."""
    _literal(snapshot, dataport, device, False)


def depthwise_ref(snapshot, dataport, device) -> None:
    """NPU_OP_DEPTHWISE as the literal TRM loop (slow)."""
    _literal(snapshot, dataport, device, True)


register(KernelOp("NPU_OP_CONV", op_conv, reference=conv_ref, fuzz_weight=1.0))
register(KernelOp("NPU_OP_DEPTHWISE", op_depthwise, reference=depthwise_ref, fuzz_weight=1.0))
