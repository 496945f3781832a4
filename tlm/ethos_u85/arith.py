"""Arithmetic library of the Ethos-U85 (TRM r0p0 issue 05, section 3.6.2, 3.6.6, 3.6.7).

Two implementations of everything:

* the *fast path*: numpy, vectorised, exact (int64 / uint64 arithmetic arranged so that
  nothing overflows silently), used by the kernels;
* the *reference path* (functions ending in ``_ref``): a literal transcription of the TRM
  pseudocode on Python ``int`` (unbounded, like the TRM type ``integer``), scalar, slow,
  used by the tests to cross-check the fast path.

Names follow the TRM.  Register values are passed in as plain ints (decoded fields), so this
module does not depend on ``tlm.ethos_u85.isa``.  Enumerations below have the TRM numeric values
(``IntEnum``, so plain ints compare equal).

Failed TRM ``assert()`` statements (UNPREDICTABLE behaviour, TRM 3.6.1) raise
:class:`Unpredictable` when ``check=True`` (the default).  With ``check=False`` the
computation carries on with the literal arithmetic where that is defined.

Where the digest (docs/u85-command-stream.md) and the TRM differ, the comment says which one
is followed and why.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

from . import isa
from ..core.errors import Unpredictable
from ..core.memo import Memo
from .isa import upper_enum

__all__ = [
    "Unpredictable", "RoundMode", "Precision", "ActType", "AccFormat", "ActivationFunction",
    "ClipRange", "RescaleMode", "ScaleMode",
    "align_up", "number_of_bits", "zero_extend", "sign_extend", "truncate", "saturate", "clamp", "clz",
    "accumulate", "rounded_shift_right", "rounded_shift_right_ref", "avgpool_scale",
    "rescale", "rescale_ref", "scale_input", "scale_input_ref", "ifm_zero_point",
    "ofm_activation_params", "activation", "activation_ref", "lut_views", "pack_interp_lut",
    "shift_left", "logical_shift_right", "div_trunc", "wrap32",
]

INT32_MIN = -(1 << 31)
LUT_BYTES = 2048                     # lookup_table_storage (TRM 2.6.2: 2048 bytes)


def _unpred(cond, msg: str) -> None:
    if not cond:
        raise Unpredictable(msg)


# TRM enums, derived from the ISA table (tlm/isa.py)
RoundMode = upper_enum("RoundMode", isa.round_mode_ofm,
                       "round_mode_ofm (3 bits); round_mode_ifm (1 bit) uses values 0 and 1 only.")
Precision = upper_enum("Precision", isa.activation_precision)
ActType = upper_enum("ActType", isa.activation_type)
AccFormat = upper_enum("AccFormat", isa.acc_format)
ActivationFunction = upper_enum("ActivationFunction", isa.activation_function)
ClipRange = upper_enum("ClipRange", isa.activation_clip_range)
ScaleMode = upper_enum("ScaleMode", isa.ofm_scale_mode)


class RescaleMode(IntEnum):
    """rescale_mode_t (TRM 3.6.6).  Values >= AVPOOL encode the average-pool divisor."""
    NONE = 0
    NORMAL = 1
    GLOBAL = 2
    SHIFT_ONLY = 3
    AVPOOL = 64


_U64 = np.uint64
_ONE = np.uint64(1)
_M32 = np.uint64(0xFFFFFFFF)


# ----------------------------------------------------------------------------------------
# Data types (TRM 3.6.2).  These accept Python ints (exact) or numpy arrays (int64 result).
# ----------------------------------------------------------------------------------------

def align_up(value: int, alignment: int) -> int:
    """TRM align_up: next multiple of ``alignment`` (assert(r >= 0))."""
    r = value % alignment
    return value + ((alignment - r) if r != 0 else 0)


def number_of_bits(precision: int) -> int:
    """TRM number_of_bits: b8->8, b16->16, b32->32, b64->64."""
    bits = {0: 8, 1: 16, 2: 32, 3: 64}.get(int(precision), 0)
    _unpred(bits != 0, f"number_of_bits: bad precision {precision}")
    return bits


def _is_scalar(v) -> bool:
    return isinstance(v, (int, np.integer))


def zero_extend(value, n: int):
    """TRM zero_extend: the lower n bits.  Arrays: int64 result (n <= 63) or uint64 (n == 64)."""
    if _is_scalar(value):
        return int(value) & ((1 << n) - 1)
    v = np.asarray(value)
    if n >= 64:
        return v.astype(np.int64).astype(np.uint64)
    return (v.astype(np.int64) & np.int64((1 << n) - 1))


def sign_extend(value, n: int):
    """TRM sign_extend: lower n bits, then two's complement sign-extend (wrap to n bits)."""
    if _is_scalar(value):
        value = int(value) & ((1 << n) - 1)
        return value - (1 << n) if value >= (1 << (n - 1)) else value
    v = np.asarray(value)
    if n >= 64:
        return v.astype(np.int64)
    narrow = _NARROW_INT.get(n)
    if narrow is not None and v.dtype.kind in "iu":
        return v.astype(narrow).astype(np.int64)      # C integer casts wrap modulo 2**n
    v = v.astype(np.int64)
    sh = np.int64(64 - n)
    v <<= sh                                          # int64 shifts wrap; '>>' is arithmetic
    v >>= sh
    return v


_NARROW_INT = {8: np.dtype(np.int8), 16: np.dtype(np.int16), 32: np.dtype(np.int32)}


def wrap32(value):
    """(int32_t) cast: wrap to 32 bits."""
    return sign_extend(value, 32)


def saturate(value, n: int, act_type: int):
    """Saturating cast to an n-bit signed/unsigned range (a helper; the TRM datapath itself
    never saturates implicitly - it clamps in activation() and wraps in truncate())."""
    if int(act_type) == ActType.UNSIGNED:
        lo, hi = 0, (1 << n) - 1
    else:
        lo, hi = -(1 << (n - 1)), (1 << (n - 1)) - 1
    if _is_scalar(value):
        return max(lo, min(hi, int(value)))
    return np.clip(np.asarray(value, dtype=np.int64), lo, min(hi, 2**63 - 1))


def truncate(value, n: int, act_type: int):
    """TRM truncate(value, n, type): zero-extend if unsigned else sign-extend."""
    if int(act_type) == ActType.UNSIGNED:
        return zero_extend(value, n)
    return sign_extend(value, n)


def clamp(acc, acc_min, acc_max):
    """TRM clamp (works on ints and arrays)."""
    if _is_scalar(acc):
        return acc_min if acc < acc_min else (acc_max if acc > acc_max else acc)
    a = np.asarray(acc)
    if not (a.dtype == np.int32 and -(1 << 31) <= min(acc_min, acc_max) and max(acc_min, acc_max) < (1 << 31)):
        a = a.astype(np.int64, copy=False)            # int32 stays int32 when the bounds fit
    lo, hi = a.dtype.type(acc_min), a.dtype.type(acc_max)
    if lo <= hi:
        return np.clip(a, lo, hi)                     # = the if/else below when min <= max
    # literal if/else order, which also defines the result when acc_min > acc_max
    return np.where(a < lo, lo, np.where(a > hi, hi, a))


def clz(a, n: int = 32):
    """TRM clz(a, n): leading zeros of ``a`` viewed as an n-bit unsigned value (0..n).

    The TRM loop ``while (a != 0) { n--; a = (unsigned)a >> 1; }`` is applied to the n-bit
    unsigned view of ``a`` (the elementwise CLZ passes an int32 as ``unsigned``: a negative
    value has 0 leading zeros).
    """
    if _is_scalar(a):
        a = int(a) & ((1 << n) - 1)
        while a != 0:
            n -= 1
            a >>= 1
        return n
    v = np.asarray(a).astype(np.int64).astype(np.uint64)
    if n < 64:
        v = v & np.uint64((1 << n) - 1)
    # bit length by binary search on the uint64 value (exact; no float rounding)
    bl = np.zeros(v.shape, dtype=np.int64)
    for step in (32, 16, 8, 4, 2, 1):
        big = v >= (_ONE << np.uint64(step))
        v = np.where(big, v >> np.uint64(step), v)
        bl = bl + np.where(big, step, 0)
    bl = bl + (v != 0)
    return np.int64(n) - bl


def accumulate(acc, value, acc_format: int):
    """TRM accumulate: acc + value, wrapping at 32 (i32) or 48 (i48) bits."""
    bits = 32 if int(acc_format) == AccFormat.I32 else 48
    if _is_scalar(acc) and _is_scalar(value):
        return sign_extend(int(acc) + int(value), bits)
    a, v = np.asarray(acc, dtype=np.int64), np.asarray(value, dtype=np.int64)
    if bits == 32:
        # the int32 sum of the low 32 bits wraps modulo 2**32: no int64 temporary for the sum
        return np.add(a.astype(np.int32), v.astype(np.int32)).astype(np.int64)
    # int64 addition wraps modulo 2**64, which leaves the low 48 bits exact.
    return sign_extend(a + v, bits)


# ----------------------------------------------------------------------------------------
# rounded_shift_right (TRM 3.6.6)
# ----------------------------------------------------------------------------------------

def rounded_shift_right_ref(acc: int, shift: int, mode: int, dbl_rnd: int, check: bool = True) -> int:
    """Literal TRM rounded_shift_right on unbounded ints (``integer R`` / ``integer D``)."""
    _unpred(0 <= shift <= 63, f"rounded_shift_right: shift {shift} outside 0..63")
    _unpred(0 <= dbl_rnd <= 30, f"rounded_shift_right: dbl_rnd {dbl_rnd} outside 0..30")
    if check:
        _unpred(0 <= mode <= 5, f"rounded_shift_right: reserved round mode {mode}")
    if shift != 0:
        R = 1 << (shift - 1)                                     # natural round
        D = (1 << (30 - dbl_rnd)) if shift > 31 - dbl_rnd else 0  # double round
        if mode == RoundMode.DOUBLE_SYMMETRIC:
            R = (R + D) if acc >= 0 else (R - D)
        elif mode == RoundMode.DOUBLE_ASYMMETRIC:
            R = R + D
        elif mode == RoundMode.TRUNCATE_TO_ZERO:
            R = 0 if acc >= 0 else (1 << shift) - 1
        elif mode == RoundMode.TRUNCATE_TO_LOWER:
            R = 0
        elif mode == RoundMode.NATURAL:
            pass
        elif mode == RoundMode.SYMMETRIC:
            R = R if acc >= 0 else R - 1
        # reserved modes (6, 7): no case in the switch, R stays natural (check=False only)
        acc = (acc + R) >> shift                                  # arithmetic (floor) shift
    return acc


def _round_term(neg, s1u, mode: int, dbl_rnd: int):
    """The rounding term R (as uint64, always >= 0 and < 2**s) for shifts s1u >= 1.

    Bounds: D = 2**(30-dbl_rnd) is only non-zero when s > 31-dbl_rnd, so D <= 2**(s-2) and
    R <= 2**(s-1) + 2**(s-2) < 2**s; R - D > 0.  Hence low + R < 2**(s+1) <= 2**64.
    """
    R = _ONE << (s1u - _ONE)
    D = np.where(s1u.astype(np.int64) > 31 - dbl_rnd, _U64(1 << (30 - dbl_rnd)), _U64(0))
    if mode == RoundMode.DOUBLE_SYMMETRIC:
        R = np.where(neg, R - D, R + D)
    elif mode == RoundMode.DOUBLE_ASYMMETRIC:
        R = R + D
    elif mode == RoundMode.TRUNCATE_TO_ZERO:
        R = np.where(neg, (_ONE << s1u) - _ONE, _U64(0))
    elif mode == RoundMode.TRUNCATE_TO_LOWER:
        R = np.zeros_like(R)
    elif mode == RoundMode.SYMMETRIC:
        R = np.where(neg, R - _ONE, R)
    return np.asarray(R, dtype=np.uint64)


_ROUND_TERMS: dict = {}       # (shift, shape, mode, dbl_rnd) -> (rp, rn) for a single shift


def round_terms(shift, mode: int, dbl_rnd: int):
    """The rounding terms (R for a >= 0, R for a < 0) of rounded_shift_right per shift, as
    uint64 arrays (0 where the shift is 0: no rounding).  For a single shift value the
    (read-only) arrays are memoised: elementwise and pooling ops rescale by one shift."""
    s = np.asarray(shift)
    if s.size == 1 and s.dtype.kind in "iu":
        key = (int(s.reshape(-1)[0]), s.shape, int(mode), int(dbl_rnd))
        r = _ROUND_TERMS.get(key)
        if r is None:
            r = _round_terms(s, mode, dbl_rnd)
            for v in r:
                v.setflags(write=False)
            if len(_ROUND_TERMS) >= 4096:
                _ROUND_TERMS.clear()
            _ROUND_TERMS[key] = r
        return r
    return _round_terms(s, mode, dbl_rnd)


def _round_terms(s: np.ndarray, mode: int, dbl_rnd: int):
    s1u = np.maximum(s, 1).astype(np.uint64)
    rp = _round_term(False, s1u, mode, dbl_rnd)
    rn = _round_term(True, s1u, mode, dbl_rnd)
    zero = s == 0
    if zero.any():
        rp = np.where(zero, _U64(0), rp)
        rn = np.where(zero, _U64(0), rn)
    return rp, rn


def _check_rsr_args(shift, mode, dbl_rnd, check):
    _unpred(0 <= int(dbl_rnd) <= 30, f"rounded_shift_right: dbl_rnd {dbl_rnd} outside 0..30")
    if check:
        _unpred(0 <= int(mode) <= 5, f"rounded_shift_right: reserved round mode {mode}")
    s = np.asarray(shift, dtype=np.int64)
    if s.size:
        _unpred(int(s.min()) >= 0 and int(s.max()) <= 63, "rounded_shift_right: shift outside 0..63")
    return s


def _rsr_int64(a: np.ndarray, s: np.ndarray, mode: int, dbl_rnd: int, amax: "int | None" = None,
               inplace: bool = False):
    """``(a + R) >> s`` directly in int64 when that cannot overflow, else None.

    The rounding term is formed on the (un-broadcast) shift array only - one value for
    a >= 0 and one for a < 0 per shift - so the full-size work is an add, a shift and, for
    the sign-dependent modes, a sign mask (a >> 63) times the difference.  (A masked
    ``np.subtract(..., where=)`` would be an order of magnitude slower.)  ``amax``: an upper
    bound of a.max() if the caller knows one; ``inplace``: a may be overwritten."""
    if a.size == 0 or (a.ndim == 0 and s.ndim == 0):
        return None
    rp, rn = round_terms(s, mode, dbl_rnd)
    rmax = max(int(rp.max()), int(rn.max())) if rp.size else 0
    if amax is None:
        amax = int(a.max())
    if amax + rmax >= (1 << 63):                            # a + R could overflow int64
        return None
    rp = rp.astype(np.int64)
    rn = rn.astype(np.int64)
    corr = None
    if not np.array_equal(rp, rn):
        corr = a >> np.int64(63)                            # -1 where a < 0, else 0
        if corr.shape == np.broadcast_shapes(corr.shape, rp.shape):
            corr *= rp - rn
        else:                                               # shift array larger than a
            corr = corr * (rp - rn)
    if inplace and a.flags.writeable and np.broadcast_shapes(a.shape, rp.shape, s.shape) == a.shape:
        out = a
        out += rp
    else:
        out = np.add(a, rp)
    if corr is not None:
        out += corr                                         # a < 0: R = rn
    np.right_shift(out, s, out=out)
    return out


def rounded_shift_right(acc, shift, mode: int, dbl_rnd: int = 0, *, check: bool = True) -> np.ndarray:
    """Vectorised TRM rounded_shift_right.

    acc:     int64 array (``int64_t acc``).
    shift:   0..63, scalar or array broadcastable against acc (elementwise SHR uses a
             per-element shift).
    mode:    round_mode_ofm_t / round_mode_ifm_t (scalar).
    dbl_rnd: 0..30 (scalar).

    Exact for every int64 input: ``(acc + R) >> s`` is computed as
    ``(acc >> s) + (((acc mod 2**s) + R) >> s)`` in uint64, with no intermediate overflow.
    """
    s = _check_rsr_args(shift, mode, dbl_rnd, check)
    a = np.asarray(acc, dtype=np.int64)
    fast = _rsr_int64(a, s, int(mode), int(dbl_rnd))
    if fast is not None:
        return fast
    a, s = np.broadcast_arrays(a, s)
    s1 = np.maximum(s, 1)
    s1u = s1.astype(np.uint64)
    R = _round_term(a < 0, s1u, int(mode), int(dbl_rnd))
    low = a.astype(np.uint64) & ((_ONE << s1u) - _ONE)       # acc mod 2**s, in [0, 2**s)
    carry = ((low + R) >> s1u).astype(np.int64)               # 0 or 1
    res = (a >> s1) + carry
    return np.where(s == 0, a, res)


# ----------------------------------------------------------------------------------------
# rescale (TRM 3.6.6)
# ----------------------------------------------------------------------------------------

def avgpool_scale(d):
    """Built-in average-pool scale for a divisor d (rescale_mode = rescale_mode_avpool + d - 1).

    TRM: ``k = 32 - clz(d - 1)`` (the TRM omits clz's n argument, E-06: n = 32), so
    (1<<k)/2 < d <= (1<<k); ``scale = (((1<<30)+1) << k) / d``; ``shift = 30 + k``.
    Returns (scale, shift) as ints for scalar d, int64 arrays for array d.
    """
    if _is_scalar(d):
        d = int(d)
        _unpred(d >= 1, f"avgpool divisor {d} < 1")
        k = 32 - clz(d - 1, 32)
        numerator = ((1 << 30) + 1) << k
        return numerator // d, 30 + k
    dd = np.asarray(d, dtype=np.int64)
    _unpred(dd.size == 0 or int(dd.min()) >= 1, "avgpool divisor < 1")
    k = 32 - clz(dd - 1, 32)
    numerator = np.int64((1 << 30) + 1) << k                   # < 2**62 for d < 2**31
    return numerator // dd, 30 + k


def _check_rescale(acc, scale, acc_format, lo_hi=None):
    sc = np.asarray(scale, dtype=np.int64)
    _unpred(sc.size == 0 or int(sc.min()) >= 0, "rescale: scale < 0")
    a = np.asarray(acc, dtype=np.int64)
    if a.size == 0 or acc_format is None:
        return
    lo, hi = lo_hi if lo_hi is not None else (int(a.min()), int(a.max()))
    if int(acc_format) == AccFormat.I32:
        _unpred(lo >= -(1 << 31) and hi < (1 << 31), "rescale: acc does not fit 32 bits (acc_format i32)")
    else:
        _unpred(lo >= -(1 << 47) and hi < (1 << 47), "rescale: acc does not fit 48 bits (acc_format i48)")
        _unpred(sc.size == 0 or int(sc.max()) < (1 << 15),
                "rescale: scale does not fit int16 with acc_format i48")


def _mul_round_shift_wide(acc, scale, shift, mode: int, dbl_rnd: int) -> np.ndarray:
    """Exact ``rounded_shift_right(acc * scale, shift)`` for any int64 acc and 0 <= scale < 2**31,
    where the product may need up to 94 bits.  The result is wrapped to int64 (the
    ``int64_t`` return type of rescale()).

    The product is held as H * 2**32 + L with 0 <= L < 2**32 and H an int64.
    """
    a, sc, s = np.broadcast_arrays(np.asarray(acc, dtype=np.int64), np.asarray(scale, dtype=np.int64),
                                   np.asarray(shift, dtype=np.int64))
    a_hi = a >> np.int64(32)                                    # |a_hi| <= 2**31
    a_lo = (a.astype(np.uint64) & _M32).astype(np.int64)        # [0, 2**32)
    p_lo = a_lo * sc                                            # < 2**63
    H = a_hi * sc + (p_lo >> np.int64(32))                      # |H| < 2**62 + 2**31
    L = p_lo & np.int64(0xFFFFFFFF)
    neg = (a < 0) & (sc != 0)                                   # sign of the product
    s1 = np.maximum(s, 1)
    R = _round_term(neg, s1.astype(np.uint64), int(mode), int(dbl_rnd))
    R = np.where(s == 0, _U64(0), R)
    R_hi = (R >> _U64(32)).astype(np.int64)                     # < 2**31
    R_lo = (R & _M32).astype(np.int64)
    L2 = L + R_lo                                               # < 2**33
    H2 = H + R_hi + (L2 >> np.int64(32))
    L2 = L2 & np.int64(0xFFFFFFFF)
    # s >= 32: floor((H2*2**32 + L2) / 2**s) = H2 >> (s-32)
    big = H2 >> np.clip(s - 32, 0, 63)
    # s < 32: H2 * 2**(32-s) + (L2 >> s), computed modulo 2**64 (wrap to int64)
    sh_small = np.clip(32 - s, 0, 32).astype(np.uint64)
    small = ((H2.astype(np.uint64) << sh_small) + (L2 >> np.clip(s, 0, 31)).astype(np.uint64)).astype(np.int64)
    return np.where(s >= 32, big, small)


_BLOCK_ELEMS = 16384          # elements per block of _rescale_blocked (a few 100 KB: cache resident)


def _rescale_blocked(a, sc, s, mode: int, dbl_rnd: int, pmax: int):
    """``rounded_shift_right(a * sc, s)`` for a large array with per-channel (last axis) or
    scalar scale/shift, computed block by block through two small scratch buffers, so the
    intermediate products never leave the cache.  None when not applicable (shapes, or the
    int64 sum a*sc + R could overflow: pmax bounds |a*sc|)."""
    if a.ndim == 0 or a.size < 4 * _BLOCK_ELEMS or sc.ndim > 1 or s.ndim > 1:
        return None
    c = a.shape[-1]
    if sc.size not in (1, c) or s.size not in (1, c) or not a.flags.c_contiguous:
        return None
    rp, rn = round_terms(s, mode, dbl_rnd)
    if pmax + max(int(rp.max()), int(rn.max())) >= (1 << 63):
        return None
    rp = rp.astype(np.int64)
    rn = rn.astype(np.int64)
    diff = None if np.array_equal(rp, rn) else rp - rn
    a2 = a.reshape(-1, c)
    out = np.empty(a2.shape, np.int64)
    rows = max(1, _BLOCK_ELEMS // c)
    buf = np.empty((rows, c), np.int64)
    cbuf = np.empty((rows, c), np.int64) if diff is not None else None
    sh63 = np.int64(63)
    for i in range(0, a2.shape[0], rows):
        x = a2[i:i + rows]
        n = x.shape[0]
        b = buf[:n]
        np.multiply(x, sc, out=b)
        if diff is not None:
            corr = cbuf[:n]
            np.right_shift(b, sh63, out=corr)              # -1 where the product < 0
            corr *= diff
            b += rp
            b += corr
        else:
            b += rp
        np.right_shift(b, s, out=out[i:i + rows])
    return out.reshape(a.shape)


def rescale(acc, scale, shift, round_mode: int, dbl_rnd: int = 0, *, shift_only: bool = False,
            acc_format: int | None = AccFormat.I32, check: bool = True, lo_hi=None) -> np.ndarray:
    """Vectorised TRM rescale() once the (scale, shift) source has been chosen.

    acc:        accumulator values (int64 array; int32/int48 range per acc_format).
    scale:      OFM_SCALE.scale (global), the per-channel scale[] (array broadcast on the
                channel axis), or the avgpool scale (see :func:`avgpool_scale`).  31-bit, >= 0.
    shift:      likewise, 0..63 (uint6).
    round_mode, dbl_rnd: always NPU_SET_OFM_SCALE.round_mode / .dbl_rnd (TRM: also for the
                per-channel and avgpool paths).
    shift_only: rescale_mode_shift_only (no multiply).
    acc_format: for the TRM range asserts (i32: acc fits 32 bits; i48: acc fits 48 bits and
                scale fits int16).  None skips them (e.g. RESIZE, E-27).
    rescale_mode_none is simply "don't call this".

    Exact: the product is formed in int64 when |acc| * scale < 2**63 (always the case for
    inputs the TRM permits), otherwise via a 96-bit split; the result is wrapped to int64.
    lo_hi:      (min, max) of acc when the caller already has them (saves two passes).
    """
    a = np.asarray(acc, dtype=np.int64)
    if lo_hi is None:
        lo_hi = (int(a.min()), int(a.max())) if a.size else (0, 0)
    if check:
        _check_rescale(a, scale, acc_format, lo_hi)
    if shift_only:
        return rounded_shift_right(a, shift, round_mode, dbl_rnd, check=check)
    sc = np.asarray(scale, dtype=np.int64)
    amax = max(abs(lo_hi[0]), abs(lo_hi[1]))
    smax = int(np.abs(sc).max()) if sc.size else 0
    if amax * smax < (1 << 63):
        s = _check_rsr_args(shift, round_mode, dbl_rnd, check)
        fast = _rescale_blocked(a, sc, s, int(round_mode), int(dbl_rnd), amax * smax)
        if fast is not None:
            return fast
        prod = a * sc
        fast = _rsr_int64(prod, s, int(round_mode), int(dbl_rnd), amax * smax, inplace=True)
        if fast is not None:
            return fast
        return rounded_shift_right(prod, s, round_mode, dbl_rnd, check=check)
    _unpred(int(sc.min()) >= 0 and smax < (1 << 31), "rescale: scale outside 0..2**31-1")
    _check_rsr_args(shift, round_mode, dbl_rnd, check)
    return _mul_round_shift_wide(a, sc, shift, round_mode, dbl_rnd)


def rescale_ref(acc: int, oc: int, rescale_mode: int, *, scale_mode: int = ScaleMode.GLOBAL,
                ofm_scale: int = 0, ofm_shift: int = 0, round_mode: int = 0, dbl_rnd: int = 0,
                acc_format: int = AccFormat.I32, scale_arr=None, shift_arr=None,
                check: bool = True, range_check: bool = True) -> int:
    """Literal TRM rescale(acc, oc, rescale_mode) on Python ints.

    range_check=False skips the acc_format range asserts (RESIZE's shifted accumulator,
    digest E-27; the other asserts stay).

    scale_mode = NPU_SET_OFM_PRECISION.scale_mode; ofm_scale/ofm_shift/round_mode/dbl_rnd =
    NPU_SET_OFM_SCALE fields; scale_arr/shift_arr = the parsed scale/bias stream
    (read_scale).  The TRM writes ``assert(scale_mode == rescale_mode_normal)`` in the
    per-channel branch; it means ``rescale_mode`` (E-06).
    """
    if rescale_mode == RescaleMode.NONE:
        return acc
    if rescale_mode >= RescaleMode.AVPOOL:
        d = 1 + (rescale_mode - RescaleMode.AVPOOL)
        k = 32 - clz(d - 1, 32)
        numerator = ((1 << 30) + 1) << k
        scale = numerator // d
        shift = 30 + k
    elif scale_mode == ScaleMode.PER_CHANNEL:
        if check:
            _unpred(rescale_mode == RescaleMode.NORMAL, "rescale: per-channel scale needs rescale_mode_normal")
            _unpred(oc >= 0, "rescale: per-channel scale without an output channel")
        scale, shift = int(scale_arr[oc]), int(shift_arr[oc])
    else:
        scale, shift = ofm_scale, ofm_shift
    if check:
        _unpred(scale >= 0, "rescale: scale < 0")
    if check and range_check:
        if acc_format == AccFormat.I32:
            _unpred(acc == sign_extend(acc, 32), "rescale: acc does not fit 32 bits")
        else:
            _unpred(acc == sign_extend(acc, 48), "rescale: acc does not fit 48 bits")
            # the TRM's i48 assert scale == sign_extend(scale, 16) is applied to per-channel
            # scales only, as the fast path does (tlm.ethos_u85.ops.common module doc: Vela 5.2
            # programs 31-bit OFM_SCALE values with i48 for int16 ELEMENTWISE, exact vs LiteRT)
            if scale_mode == ScaleMode.PER_CHANNEL and rescale_mode == RescaleMode.NORMAL:
                _unpred(scale == sign_extend(scale, 16), "rescale: scale does not fit int16 (i48)")
    result = acc * scale if rescale_mode != RescaleMode.SHIFT_ONLY else acc
    result = rounded_shift_right_ref(result, shift, round_mode, dbl_rnd, check)
    return sign_extend(result, 64)           # int64_t return type


# ----------------------------------------------------------------------------------------
# scale_a / scale_b (TRM 3.6.6) and zero points
# ----------------------------------------------------------------------------------------

def scale_input_ref(a: int, precision: int, act_type: int, scale: int, shift: int,
                    round_mode: int, dbl_rnd: int, check: bool = True) -> int:
    """Literal TRM scale_a (IFM_* registers) / scale_b (IFM2_* registers)."""
    if precision == Precision.B8 or (precision == Precision.B16 and act_type == ActType.SIGNED):
        if check:
            _unpred(a == sign_extend(a, 16), "scale_a/b: operand does not fit int16")
            _unpred(scale >= 0, "scale_a/b: scale < 0")
        result = a * scale                                       # int48_t (16 x 31 bits fits)
        a = rounded_shift_right_ref(result, shift, round_mode, dbl_rnd, check)
        # Return type is int32_t: e.g. shift 0 with a large scale wraps (TRM types followed).
        a = sign_extend(a, 32)
    return a


def scales_input(precision: int, act_type: int) -> bool:
    """Whether scale_a / scale_b scale an operand of this type: b8 and signed b16 are scaled;
    b32 and unsigned b16 pass through unchanged."""
    return precision == Precision.B8 or (precision == Precision.B16 and act_type == ActType.SIGNED)


def scale_input(a, precision: int, act_type: int, scale: int, shift: int, round_mode: int,
                dbl_rnd: int = 0, *, check: bool = True) -> np.ndarray:
    """Vectorised scale_a / scale_b (scales_input: which types are scaled).  The result is
    wrapped to int32 (``int32_t`` return type)."""
    x = np.asarray(a, dtype=np.int64)
    if not scales_input(precision, act_type):
        return x
    if check:
        _unpred(x.size == 0 or (int(x.min()) >= -(1 << 15) and int(x.max()) < (1 << 15)),
                "scale_a/b: operand does not fit int16")
        _unpred(scale >= 0, "scale_a/b: scale < 0")
    # int48_t result = a * scale, then rounded_shift_right; exact even for unchecked operands.
    r = rescale(x, scale, shift, round_mode, dbl_rnd, acc_format=None, check=check)
    return sign_extend(r, 32)


def ifm_zero_point(raw: int, precision: int, act_type: int, check: bool = True) -> int:
    """IFM/IFM2 zero point as read_ifm/read_ifm2 interpret NPU_SET_IFM*_ZERO_POINT.zero_point."""
    if act_type == ActType.UNSIGNED:
        zp = int(raw) & 0xFFFF                                   # (uint16_t)
        if check:
            _unpred((precision == Precision.B8 and zp < 256) or (precision == Precision.B16 and zp == 32768)
                    or zp == 0, f"read_ifm: bad unsigned zero point {zp}")
    else:
        zp = sign_extend(int(raw), 16)                           # (int16_t)
        if check:
            _unpred((precision == Precision.B8 and -128 <= zp < 128) or zp == 0,
                    f"read_ifm: bad signed zero point {zp}")
    return zp


# ----------------------------------------------------------------------------------------
# activation (TRM 3.6.7)
# ----------------------------------------------------------------------------------------

def ofm_activation_params(act_type: int, zero_point: int, act_min: int, act_max: int,
                          check: bool = True):
    """(zero_point, act_min, act_max) as activation() interprets the untyped 16-bit fields
    NPU_SET_OFM_ZERO_POINT.zero_point / NPU_SET_ACTIVATION_MIN/MAX.clip_boundary."""
    if act_type == ActType.UNSIGNED:
        zp, amin, amax = int(zero_point) & 0xFFFF, int(act_min) & 0xFFFF, int(act_max) & 0xFFFF
        if check:
            _unpred(zp < 256 or zp == 32768, f"activation: bad unsigned OFM zero point {zp}")
    else:
        zp, amin, amax = sign_extend(int(zero_point), 16), sign_extend(int(act_min), 16), sign_extend(int(act_max), 16)
        if check:
            # TRM prints "-128 <= zero_point || zero_point < 128" (always true); read as && (E-09).
            _unpred(-128 <= zp < 128, f"activation: bad signed OFM zero point {zp}")
    return zp, amin, amax


_LUT_VIEWS = Memo(16)          # LUT bytes -> lut_views (read-only arrays)


_ACT_FUNCTIONS = frozenset(int(v) for v in ActivationFunction)


def lut_views(lut):
    """The four views of lookup_table_storage (2048 bytes): (u8, s8, s16, s32), little-endian,
    as read-only int64 arrays (kept for the last few LUT contents)."""
    buf = np.frombuffer(bytes(lut), dtype=np.uint8) if not isinstance(lut, np.ndarray) else lut.astype(np.uint8).ravel()
    _unpred(buf.size == LUT_BYTES, f"LUT storage must be {LUT_BYTES} bytes, got {buf.size}")
    b = buf.tobytes()
    v = _LUT_VIEWS.get(b)
    if v is None:
        v = (np.frombuffer(b, dtype=np.uint8).astype(np.int64), np.frombuffer(b, dtype=np.int8).astype(np.int64),
             np.frombuffer(b, dtype="<i2").astype(np.int64), np.frombuffer(b, dtype="<i4").astype(np.int64))
        for a in v:
            a.setflags(write=False)
        _LUT_VIEWS.put(b, v)
    return v


def pack_interp_lut(base, slope) -> bytes:
    """Pack 512 (base, slope) int16 pairs into the 2048-byte LUT layout used by lut_s16_s16,
    lut_s16_s32, lut_tanh and lut_sigmoid (entry i = int16 base at byte 4i, slope at 4i+2).

    The TRM does not define table *contents* (software loads them with DMA); this is a
    convenience for tests and for building tables from knot values."""
    b = np.asarray(base, dtype=np.int64)
    s = np.asarray(slope, dtype=np.int64)
    _unpred(b.shape == (512,) and s.shape == (512,), "pack_interp_lut: need 512 bases and 512 slopes")
    out = np.empty(1024, dtype="<i2")
    out[0::2] = sign_extend(b, 16)
    out[1::2] = sign_extend(s, 16)
    return out.tobytes()


def _lut_index_check(idx, lo, hi, what):
    if idx.size and (int(idx.min()) < lo or int(idx.max()) > hi):
        raise Unpredictable(f"activation {what}: LUT index outside {lo}..{hi} (E-10)")


def activation_clamp(function: int, clip_range: int, amin: int, amax: int) -> "tuple[int, int] | None":
    """The range activation() clamps (int32_t)(acc64 + zp) to before the LUT: tanh's and
    sigmoid's own, else [amin, amax] with clip_range b16, else None (no clamp)."""
    f = int(function)
    if f == ActivationFunction.LUT_TANH:
        return -0x10000, 0xFFFF
    if f == ActivationFunction.LUT_SIGMOID:
        return -0x1F000, 0x1EFFF
    if int(clip_range) == ClipRange.B16:
        return amin, amax
    return None


def activation(acc64, *, precision: int, act_type: int, zero_point: int = 0, act_min: int = 0,
               act_max: int = 0, function: int = ActivationFunction.LUT_NONE,
               clip_range: int = ClipRange.NONE, table: int = 0, lut=None,
               truncate_ofm: bool = True, check: bool = True) -> np.ndarray:
    """Vectorised TRM activation(acc64), optionally followed by write_ofm's truncation.

    precision, act_type:   NPU_SET_OFM_PRECISION.activation_precision / activation_type.
    zero_point:            NPU_SET_OFM_ZERO_POINT.zero_point (raw 16 bits).
    act_min, act_max:      NPU_SET_ACTIVATION_MIN/MAX.clip_boundary (raw 16 bits; read as
                           uint16 for unsigned OFM, int16 for signed).
    function, clip_range, table: NPU_SET_ACTIVATION fields.
    lut:                   lookup_table_storage, 2048 bytes (needed for LUT modes).
    truncate_ofm:          apply ``truncate(value, number_of_bits(precision), type)`` as the
                           first step of write_ofm does (so the result is what is stored /
                           pushed into a chaining FIFO).  False gives the literal activation().

    Order (TRM): b64 -> return acc64 unchanged.  Otherwise acc = (int32_t)(acc64 + zp) (wraps),
    then clamp (tanh/sigmoid ranges, else ACTIVATION_MIN/MAX if clip_range == b16), then LUT.
    """
    a = np.asarray(acc64, dtype=np.int64)
    if precision == Precision.B64:
        return a.copy()
    zp, amin, amax = ofm_activation_params(act_type, zero_point, act_min, act_max, check)
    # (int32_t)(acc64 + zp) computed in int32: the cast keeps the low 32 bits and int32 array
    # addition wraps modulo 2**32 (half the memory traffic of int64); widened after the clamp
    acc = a.astype(np.int32)
    acc += np.int32(zp)
    f = int(function)
    rng = activation_clamp(f, clip_range, amin, amax)
    if rng is not None:
        acc = clamp(acc, *rng)
    acc = np.asarray(acc, dtype=np.int64)
    t = int(table)
    if f != ActivationFunction.LUT_NONE:
        if f not in _ACT_FUNCTIONS:
            raise Unpredictable(f"activation: reserved activation_function {f}")
        _unpred(lut is not None, "activation: LUT mode without lookup_table_storage")
        u8, s8, s16, s32 = lut_views(lut)
        if f == ActivationFunction.LUT_U8_U8:
            acc = u8[(t << 8) + (acc & 0xFF)]
        elif f == ActivationFunction.LUT_S8_S8:
            acc = s8[(t << 8) + ((acc + 128) & 0xFF)]
        elif f == ActivationFunction.LUT_S8_S16:
            _unpred(t < 4, "activation lut_s8_s16: table >= 4")
            acc = s16[(t << 8) + ((acc + 128) & 0xFF)]
        elif f == ActivationFunction.LUT_S8_S32:
            _unpred(t < 2, "activation lut_s8_s32: table >= 2")
            acc = s32[(t << 8) + ((acc + 128) & 0xFF)]
        else:
            _unpred(t == 0, f"activation function {f}: table != 0")
            shift = {ActivationFunction.LUT_S16_S16: 7, ActivationFunction.LUT_S16_S32: 7,
                     ActivationFunction.LUT_TANH: 8, ActivationFunction.LUT_SIGMOID: 9}[f]
            index = 256 + (acc >> shift)
            _lut_index_check(index, 0, 511, ActivationFunction(f).name)
            base = s16[2 * index]
            slope = s16[2 * index + 1]
            frac = acc & ((1 << shift) - 1)
            if f == ActivationFunction.LUT_S16_S16:
                acc = sign_extend(((base << 7) + frac * slope + 64) >> 7, 16)   # (int16_t)
            elif f == ActivationFunction.LUT_S16_S32:
                acc = (base << 7) + frac * slope                               # 16.7 fixed point
            elif f == ActivationFunction.LUT_TANH:
                rnd = np.where(acc >= 0, 0x80, 0x7F)
                acc = ((base << 8) + frac * slope + rnd) >> 8
            else:                                                              # LUT_SIGMOID
                # constants used literally; the comment "input bias of 1<<15" is loose (E-10)
                rnd = np.where(acc >= 0, 0x1000200, 0x10001FF)
                acc = ((base << 9) + frac * slope + rnd) >> 10
    acc = np.asarray(acc, dtype=np.int64)
    if truncate_ofm:
        acc = truncate(acc, number_of_bits(precision), act_type)
    return acc


def activation_ref(acc64: int, *, precision: int, act_type: int, zero_point: int = 0, act_min: int = 0,
                   act_max: int = 0, function: int = ActivationFunction.LUT_NONE,
                   clip_range: int = ClipRange.NONE, table: int = 0, lut=None,
                   truncate_ofm: bool = True, check: bool = True) -> int:
    """Literal scalar TRM activation() (+ write_ofm's truncate when truncate_ofm)."""
    if precision == Precision.B64:
        return acc64
    if act_type == ActType.UNSIGNED:
        zp = zero_point & 0xFFFF
        amin = act_min & 0xFFFF
        amax = act_max & 0xFFFF
        if check:
            _unpred(zp < 256 or zp == 32768, "activation: bad unsigned OFM zero point")
    else:
        zp = sign_extend(zero_point, 16)
        amin = sign_extend(act_min, 16)
        amax = sign_extend(act_max, 16)
        if check:
            _unpred(-128 <= zp and zp < 128, "activation: bad signed OFM zero point")   # E-09
    acc = sign_extend(acc64 + zp, 32)                    # (int32_t)(acc64 + zero_point)
    if function == ActivationFunction.LUT_TANH:
        acc = clamp(acc, -0x10000, 0xffff)
    elif function == ActivationFunction.LUT_SIGMOID:
        acc = clamp(acc, -0x1f000, 0x1efff)
    elif clip_range == ClipRange.B16:
        acc = clamp(acc, amin, amax)
    if function != ActivationFunction.LUT_NONE:
        lb = bytes(lut)

        def u8(i): return lb[i]
        def s8(i): return sign_extend(lb[i], 8)
        def s16(i):
            _unpred(0 <= 2 * i and 2 * i + 2 <= len(lb), "LUT index out of range")
            return sign_extend(lb[2 * i] | lb[2 * i + 1] << 8, 16)
        def s32(i): return sign_extend(int.from_bytes(lb[4 * i:4 * i + 4], "little"), 32)
        t = table
        if function == ActivationFunction.LUT_U8_U8:
            acc = u8((t << 8) + (acc & 0xFF))
        elif function == ActivationFunction.LUT_S8_S8:
            acc = s8((t << 8) + ((acc + 128) & 0xFF))
        elif function == ActivationFunction.LUT_S8_S16:
            _unpred(t < 4, "table < 4")
            acc = s16((t << 8) + ((acc + 128) & 0xFF))
        elif function == ActivationFunction.LUT_S8_S32:
            _unpred(t < 2, "table < 2")
            acc = s32((t << 8) + ((acc + 128) & 0xFF))
        elif function == ActivationFunction.LUT_S16_S16:
            _unpred(t == 0, "table == 0")
            index = 256 + (acc >> 7)
            _unpred(0 <= index < 512, "LUT index (E-10)")
            base = s16(2 * index + 0)
            slope = s16(2 * index + 1)
            acc = ((base << 7) + (acc & 0x7F) * slope + 64) >> 7
            acc = sign_extend(acc, 16)                   # (int16_t)acc
        elif function == ActivationFunction.LUT_S16_S32:
            _unpred(t == 0, "table == 0")
            index = 256 + (acc >> 7)
            _unpred(0 <= index < 512, "LUT index (E-10)")
            base = s16(2 * index + 0)
            slope = s16(2 * index + 1)
            acc = (base << 7) + (acc & 0x7F) * slope
        elif function == ActivationFunction.LUT_TANH:
            _unpred(t == 0, "table == 0")
            index = 256 + (acc >> 8)
            base = s16(2 * index + 0)
            slope = s16(2 * index + 1)
            rnd = 0x80 if acc >= 0 else 0x7F
            acc = ((base << 8) + (acc & 0xFF) * slope + rnd) >> 8
        elif function == ActivationFunction.LUT_SIGMOID:
            _unpred(t == 0, "table == 0")
            index = 256 + (acc >> 9)
            base = s16(2 * index + 0)
            slope = s16(2 * index + 1)
            rnd = 0x1000200 if acc >= 0 else 0x10001FF
            acc = ((base << 9) + (acc & 0x1FF) * slope + rnd) >> 10
        else:
            raise Unpredictable(f"reserved activation_function {function}")
    if truncate_ofm:
        acc = truncate(acc, number_of_bits(precision), act_type)
    return acc


# ----------------------------------------------------------------------------------------
# Elementwise helpers (NPU_OP_ELEMENTWISE, TRM 3.10): shifts, division
# ----------------------------------------------------------------------------------------

def shift_left(a, shift, precision: int):
    """Elementwise SHL: ``acc = scale_a(a) << (scale_b(b) & 31); acc = acc & ACTIVATION_MASK``.

    ``acc`` is ``int32_t``, so the shifted value wraps to 32 bits.  ACTIVATION_MASK is not
    defined by the TRM (E-16); following the digest it masks to the IFM precision width
    (b8: 0xFF, b16: 0xFFFF; b32: no-op on the int32 value).  ``shift`` is the raw scale_b(b)
    value; the ``& 31`` is applied here.
    """
    a = np.asarray(a, dtype=np.int64)
    sh = np.asarray(shift, dtype=np.int64) & 31
    acc = sign_extend(a << sh, 32)
    if precision == Precision.B8:
        acc = acc & 0xFF
    elif precision == Precision.B16:
        acc = acc & 0xFFFF
    return acc


def logical_shift_right(a, shift, precision: int):
    """Elementwise LSR (``lshr``): mask to the IFM width (b8/b16), ``(uint32_t)acc >> (shift & 31)``,
    assigned back to the ``int32_t`` acc (so b32 with shift 0 stays negative)."""
    acc = np.asarray(a, dtype=np.int64)
    sh = np.asarray(shift, dtype=np.int64) & 31
    if precision == Precision.B8:
        acc = acc & 0xFF
    elif precision == Precision.B16:
        acc = acc & 0xFFFF
    return sign_extend((acc & 0xFFFFFFFF) >> sh, 32)


def div_trunc(a, b, *, check: bool = True):
    """Elementwise DIV: ``acc = a / b`` (C division, truncates toward zero).
    TRM asserts b != 0 and !(b == -1 && a == -0x80000000)."""
    x = np.asarray(a, dtype=np.int64)
    y = np.asarray(b, dtype=np.int64)
    x, y = np.broadcast_arrays(x, y)
    bad0 = y == 0
    badov = (y == -1) & (x == INT32_MIN)
    if check:
        _unpred(not bad0.any(), "div: b == 0")
        _unpred(not badov.any(), "div: -2**31 / -1")
    ys = np.where(bad0, 1, y)
    q = np.abs(x) // np.abs(ys)
    q = np.where((x < 0) != (ys < 0), -q, q)
    return sign_extend(q, 32)
