"""Shared machinery of the kernel operations (TRM r0p0 issue 05, 3.6.4-3.6.7, 3.10).

Every kernel operation (CONV, DEPTHWISE, POOL, ELEMENTWISE, RESIZE) is called by the device
as ``KERNEL_OPS[name](snapshot, dataport, device)`` and builds an :class:`OpContext`:

* the derived geometry of TRM section 4 (OFM shape, strides, padding, kernel, derived IFM
  size);
* the TRM tensor-access functions, vectorised over whole blocks: :meth:`OpContext.read_ifm`,
  :meth:`OpContext.read_ifm2`, :meth:`OpContext.initial_acc` (read_accumulator),
  :meth:`OpContext.write_accumulator` (bias, rescale, activation, write_ofm) and
  :meth:`OpContext.write_ofm`;
* chaining (TRM 3.6.4): :meth:`OpContext.add_operation_to_chain` against the persistent
  :class:`OpState` (``device.op_state``), with the three chaining FIFOs modelled as unbounded
  FIFOs of truncated OFM values.

Memory traffic goes through the :class:`~tlm.ethos_u85.memory.DataPort` with the TRM channel of each
stream (``rd_ifm`` IFM, ``rd_ifm_stream`` IFM2 - "IFM to weights or elementwise" -,
``rd_scale_bias``, ``wr_ofm``), one transaction per contiguous byte run, so AXI errors
surface as :class:`~tlm.ethos_u85.memory.BusFault`.  Failed TRM asserts raise
:class:`~tlm.core.errors.Unpredictable` naming the operation and the check.

Fast paths (each bit-identical to the step-by-step code, tests/test_fast_paths.py): the
register-derived attributes of an OpContext, FeatureMaps and fused-epilogue parameters are
memoised by the register snapshot's contents (:func:`snapshot_key`); decoded scale/bias
streams by their bytes; ``read_ifm_padded(dtype=float32)`` reads b8/b16 IFMs straight into
the type the kernels compute in; ``write_accumulator(..., bound=)`` runs the common case
(per-channel scale, no LUT) as one blocked pass (:func:`fused_epilogue`, float64 where
every intermediate is provably exact, else int64) that writes the OFM type directly.

Value domains: everything is int64 numpy.  Reads return the zero-point-subtracted value as
read_ifm/read_ifm2 do; padding and upscale-inserted zeros are 0 in that domain.

Decisions where the TRM text is incomplete (digest E-nn numbers):

* E-02: the bare ``();`` after invalidating the FIFOs at chain start is read as "empty the
  FIFOs".
* E-04: accumulator restore from IFM2 reads b64 (i48) or b32 (i32) signed elements.
* E-11: ``write_accumulator`` always adds ``read_bias(oc)`` in the TRM; the bias comes from the
  scale/bias stream, which only exists for ``scale_mode == per_channel``, so the bias is 0 in
  global scale mode.
* COND_STATUS.result_flag is UNPREDICTABLE for an OFM with more than one element; the model
  sets it to bit 0 of the last element in (y, x, c) order.
* Scale/bias stream: E-23 - SCALE_BASE and SCALE_LENGTH must be multiples of 16.
* rescale(): the TRM asserts ``scale == sign_extend(scale, 16)`` when acc_format is i48.  It is
  applied only to per-channel scales (15-bit record fields, so it always holds): Vela 5.2
  programs int16 ELEMENTWISE ops with acc_format i48 and a 31-bit OFM_SCALE, and the exact
  product matches LiteRT bit for bit (add_int16, mul_int16, int16_net).  The accumulator range
  assert (32/48 bits) is kept, except for RESIZE (E-27) and the b32 MUL product (E-15).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

import numpy as np

from ...core.errors import BudgetExceeded, Unpredictable
from ...core.memo import Memo
from .. import arith
from .. import isa as _isa
from ..arith import AccFormat, ActType, Precision, RescaleMode, ScaleMode
from ..config import policy_of
from ..fmap import AllowedPerms, FeatureMap, Storage, check_ofm_write, read_fmap, write_fmap
from ..memory import Channel
from ..scale_bias import channels_in_set, decode_scale_bias, stream_size

__all__ = [
    "OpState", "OpContext", "get_op_state", "op_fields",
    "NUM_CHAINING_FIFO", "RESCALE_NONE", "RESCALE_NORMAL", "RESCALE_GLOBAL", "RESCALE_SHIFT_ONLY",
    "RESCALE_AVPOOL", "ALLOWED_PERMS_RTRANS", "ALLOWED_PERMS_ALL",
]

NUM_CHAINING_FIFO = 3
MAX_CHAIN_LENGTH = 4
# Work budgets of one operation (model limits, not architectural: beyond them the op stops
# with cmd_parse_error, event 'model_limit') are the device's Policy fields (config.Policy).

RESCALE_NONE = RescaleMode.NONE
RESCALE_NORMAL = RescaleMode.NORMAL
RESCALE_GLOBAL = RescaleMode.GLOBAL
RESCALE_SHIFT_ONLY = RescaleMode.SHIFT_ONLY
RESCALE_AVPOOL = RescaleMode.AVPOOL
ALLOWED_PERMS_RTRANS = AllowedPerms.RTRANS
ALLOWED_PERMS_ALL = AllowedPerms.ALL

# enum values (tlm.ethos_u85.isa has the IntEnums; plain ints here keep the hot path cheap)
UPSCALE_NONE, UPSCALE_NEAREST, UPSCALE_ZEROS = 0, 1, 2
ACC_RESET, ACC_KEEP, ACC_IFM2 = 0, 1, 2
ACC_OUT_ENABLE, ACC_OUT_DISABLE = 0, 1
_MB_DIV = (8, 16, 32, 32, 64, 128)   # microblock_depth(): u1x1 u1x2 u1x4 u2x2 u2x4 u4x4


def _coords(v):
    """A coordinate vector: ranges stay ranges (tlm.ethos_u85.fmap recognises them without a scan),
    anything else becomes a 1-D int64 array."""
    return v if isinstance(v, range) else np.atleast_1d(np.asarray(v, dtype=np.int64))


def _unpred(cond, msg: str) -> None:
    if not cond:
        raise Unpredictable(msg)


# =========================================================================== persistent state
class OpState:
    """State that persists across kernel operations (TRM 3.6.4, 3.6.5): the chaining FIFOs,
    g_chain_length / g_num_ifm / g_fifo_valid, and the accumulator storage used by
    acc_output = disable / acc_input = keep.  The device owns one (``device.op_state``) and
    replaces it at reset."""

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.chain_length = 0                               # g_chain_length
        self.num_ifm = 0                                    # g_num_ifm
        self.fifo_valid = [False] * NUM_CHAINING_FIFO       # g_fifo_valid
        self.fifo: list[list[np.ndarray]] = [[] for _ in range(NUM_CHAINING_FIFO)]
        self.fifo_count = [0] * NUM_CHAINING_FIFO           # head - tail
        self.acc_storage = np.zeros((0, 0, 0), np.int64)    # read/write_accumulator_storage

    # ---- chaining FIFOs (unbounded, in write order) -------------------------------------
    def clear_fifos(self) -> None:
        for i in range(NUM_CHAINING_FIFO):
            self.fifo[i] = []
            self.fifo_count[i] = 0

    def write_chaining_fifo(self, n: int, values) -> None:
        """Push values (in order) into FIFO n (TRM write_chaining_fifo)."""
        _unpred(0 <= n < NUM_CHAINING_FIFO, f"write_chaining_fifo: FIFO {n} outside 0..2")
        v = np.asarray(values, dtype=np.int64).ravel().copy()
        if v.size:
            self.fifo[n].append(v)
            self.fifo_count[n] += v.size

    def read_chaining_fifo(self, n: int, count: int, who: str = "read_chaining_fifo") -> np.ndarray:
        """Pop ``count`` values from FIFO n in FIFO order (TRM read_chaining_fifo, with its
        ``assert(head >= tail)``: an underflow is UNPREDICTABLE)."""
        _unpred(0 <= n < NUM_CHAINING_FIFO, f"{who}: chaining FIFO {n} outside 0..2")
        _unpred(self.fifo_count[n] >= count,
                f"{who}: chaining FIFO {n} underflow ({count} values read, {self.fifo_count[n]} held)")
        out = []
        need = count
        chunks = self.fifo[n]
        while need:
            c = chunks[0]
            if c.size <= need:
                out.append(c)
                need -= c.size
                chunks.pop(0)
            else:
                out.append(c[:need])
                chunks[0] = c[need:]
                need = 0
        self.fifo_count[n] -= count
        return np.concatenate(out) if out else np.zeros(0, np.int64)

    # ---- accumulator storage ---------------------------------------------------------------
    def store_acc(self, acc: np.ndarray) -> None:
        """write_accumulator_storage for the block [0:h, 0:w, 0:d] (coordinates are block
        relative; entries outside keep their old value)."""
        h, w, d = acc.shape
        s = self.acc_storage
        if s.shape[0] < h or s.shape[1] < w or s.shape[2] < d:
            n = np.zeros((max(h, s.shape[0]), max(w, s.shape[1]), max(d, s.shape[2])), np.int64)
            n[:s.shape[0], :s.shape[1], :s.shape[2]] = s
            self.acc_storage = s = n
        s[:h, :w, :d] = acc

    def load_acc(self, h: int, w: int, d: int) -> np.ndarray:
        """read_accumulator_storage for the block [0:h, 0:w, 0:d]; never-written entries
        read as 0 (reset value of the storage)."""
        out = np.zeros((h, w, d), np.int64)
        s = self.acc_storage
        hh, ww, dd = min(h, s.shape[0]), min(w, s.shape[1]), min(d, s.shape[2])
        out[:hh, :ww, :dd] = s[:hh, :ww, :dd]
        return out


def get_op_state(device) -> OpState:
    """The device's OpState (created on first use if the device has none)."""
    st = getattr(device, "op_state", None)
    if st is None:
        st = OpState()
        try:
            device.op_state = st
        except AttributeError:
            pass
    return st


def op_fields(device) -> dict:
    """The decoded payload fields of the NPU_OP being executed (``device.op_fields``)."""
    f = getattr(device, "op_fields", None)
    return dict(f) if f is not None else {}


class _RegionMem:
    """Byte accessor for tlm.ethos_u85.fmap: region-relative offsets -> DataPort transactions."""
    __slots__ = ("port", "region", "channel")

    def __init__(self, port, region: int, channel: Channel):
        self.port, self.region, self.channel = port, region, channel

    def read(self, addr: int, n: int):
        return self.port.read(self.region, int(addr), int(n), self.channel)

    def write(self, addr: int, data) -> None:
        self.port.write(self.region, int(addr), data, self.channel)

    # batched forms (tlm.ethos_u85.fmap uses them: all runs of a block in one DataPort call, with the
    # same transactions as one read/write per run)
    def read_span(self, lo: int, mask, runs=None):
        return self.port.read_span(self.region, lo, mask, self.channel, runs=runs)

    def write_span(self, lo: int, mask, buf, runs=None) -> None:
        self.port.write_span(self.region, lo, mask, buf, self.channel, runs=runs)

    def read_runs(self, starts, lengths):
        return self.port.read_runs(self.region, starts, lengths, self.channel)

    def write_runs(self, starts, lengths, data) -> None:
        self.port.write_runs(self.region, starts, lengths, data, self.channel)


@dataclass(eq=False)
class Scale:
    bias: np.ndarray
    scale: np.ndarray
    shift: np.ndarray
    memo: dict = field(default_factory=dict)     # derived per-op constants (fused epilogue)

    def epilogue(self, d: int, rm: int, dbl: int, bits: int) -> "EpilogueConsts":
        """The fused epilogue's constants for depth *d*, round mode, double-rounding shift
        and accumulator bits, made once per Scale."""
        key = (d, rm, dbl, bits)
        k = self.memo.get(key)
        if k is None:
            k = self.memo[key] = EpilogueConsts(self, d, rm, dbl, bits)
        return k


# Decoded per-channel scale/bias streams, keyed by (stream bytes, depth, acc48, channels per
# set, reverse C): the stream is read over the DataPort every time, decoded once.  The
# arrays are read-only.
_SB_CACHE = Memo(512)


# =========================================================================== fused epilogue
EPI_BLOCK = 32768            # elements per block of fused_epilogue (scratch stays in L2)
TYPE_RANGE = {np.dtype(t).char: (int(np.iinfo(t).min), int(np.iinfo(t).max))
               for t in (np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32)}
# the clip ufunc itself (np.clip adds a Python-level wrapper per call)
clip_ufunc = getattr(getattr(np, "_core", None) or getattr(np, "core", None), "umath", np).clip


class EpilogueConsts:
    """Per (scale/bias stream, depth, round mode, dbl_rnd, accumulator width) constants of
    the fused epilogue: the per-channel bias/scale/shift, the rounding terms R for a
    non-negative and a negative product (arith.round_terms), and their bounds."""
    __slots__ = ("bias", "scale", "shift", "rp", "diff", "bmax", "smax", "rmax", "bits", "rtot", "shmax", "qmax",
                 "rqmax")

    def __init__(self, sc: "Scale", d: int, mode: int, dbl: int, bits: int):
        self.bits = bits
        self.bias = np.ascontiguousarray(sc.bias[:d])
        self.scale = np.ascontiguousarray(sc.scale[:d])
        self.shift = np.ascontiguousarray(sc.shift[:d])
        rp, rn = arith.round_terms(self.shift, mode, dbl)
        self.rmax = max(int(rp.max()), int(rn.max())) if d else 0
        self.rp = rp.astype(np.int64)
        rn = rn.astype(np.int64)
        self.diff = None if np.array_equal(self.rp, rn) else self.rp - rn     # R = rp - diff if p < 0
        self.bmax = int(np.abs(self.bias).max()) if d else 0
        self.smax = int(self.scale.max()) if d else 0
        self.rtot = np.maximum(self.rp, rn)                                    # per channel max R
        self.shmax = int(self.shift.max()) if d else 0
        self.qmax = float(np.ldexp(self.scale.astype(np.float64), -self.shift).max()) if d else 0.0
        self.rqmax = float(np.ldexp(self.rtot.astype(np.float64), -self.shift).max()) if d else 0.0

    def tiles(self, rows: int):
        """(bias, scale, shift, rp, diff) repeated to [rows, d], contiguous: a block operation
        then runs as one flat loop instead of a loop of length d per row."""
        t = _tile_get(self, ("i", rows))
        if t is None:
            t = _tile_put(self, ("i", rows), tuple(
                None if v is None else np.ascontiguousarray(np.broadcast_to(v, (rows, v.size)))
                for v in (self.bias, self.scale, self.shift, self.rp, self.diff)))
        return t

    def ftiles(self, rows: int, zp: int = 0):
        """Tiles [rows, d] of the float path: -bias as float32 (clipped to +-2**25: the same
        comparisons with float32 accumulators below 2**24) and float64, scale*2**-shift,
        (bias*scale + rp)*2**-shift + zp and diff*2**-shift (None when R does not depend on
        the sign; 0 where scale is 0, whose product is 0 whatever the sign of the
        accumulator).  Exact under the float path's bound: integers below 2**53 times powers
        of two."""
        t = _tile_get(self, ("f", rows, zp))
        if t is None:
            sh = -self.shift
            diff = None
            if self.diff is not None:
                diff = np.ldexp(np.where(self.scale == 0, 0, self.diff).astype(np.float64), sh)
            scl = np.ldexp(self.scale.astype(np.float64), sh)
            vals = (np.clip(-self.bias, -(1 << 25), 1 << 25).astype(np.float32),     # sign threshold
                    (-self.bias).astype(np.float64), scl,
                    self.bias.astype(np.float64) * scl + np.ldexp(self.rp.astype(np.float64), sh) + zp, diff)
            t = _tile_put(self, ("f", rows, zp), tuple(
                None if v is None else np.ascontiguousarray(np.broadcast_to(v, (rows, v.size))) for v in vals))
        return t


# Tiles of EpilogueConsts (a few MB per op): one LRU with a byte budget across all ops.
_TILES: dict = {}
_TILES_BYTES = [0]
_TILES_MAX_BYTES = 1 << 26


def _tile_get(k: EpilogueConsts, what: tuple):
    e = _TILES.get((id(k),) + what)
    if e is None or e[0] is not k:
        return None
    return e[1]


def _tile_put(k: EpilogueConsts, what: tuple, tiles: tuple) -> tuple:
    size = sum(t.nbytes for t in tiles if t is not None)
    key = (id(k),) + what
    old = _TILES.pop(key, None)
    if old is not None:
        _TILES_BYTES[0] -= old[2]
    while _TILES and _TILES_BYTES[0] + size > _TILES_MAX_BYTES:
        _TILES_BYTES[0] -= _TILES.pop(next(iter(_TILES)))[2]
    _TILES[key] = (k, tiles, size)                      # holds k: its id is not reused meanwhile
    _TILES_BYTES[0] += size
    return tiles


def fused_epilogue(acc: np.ndarray, bound: int, k: EpilogueConsts, zp: int, amin: int, amax: int,
                    clamp: bool, odt: np.dtype) -> "np.ndarray | None":
    """write_accumulator for per-channel scaling, no LUT, in one blocked pass:
    ``a = sign_extend(acc + bias, bits)``, ``r = (a*scale + R) >> shift`` (rescale, R by the
    sign of the product), ``truncate(clamp((int32_t)(r + zp), amin, amax))`` into ``odt``.

    ``acc``: exact unwrapped sums (int or float array holding integers), ``bound`` >= max|acc|.
    Exactness: a*scale and a*scale + R stay below 2**63 (checked from the bounds; else None);
    with the clamp, r + zp must fit int32 (else None), so the int32_t cast is the identity;
    without it the final cast to odt keeps the low bits, as (int32_t) then truncate() do.
    The wrap is skipped when bound + max|bias| < 2**(bits-1) (it would be the identity)."""
    bits = k.bits
    half = 1 << (bits - 1)
    A = bound + k.bmax
    if acc.dtype.kind == "f" and A >= (1 << 53):
        acc = acc.astype(np.int64)                          # the float sum with the bias could round
    wrap = A >= half
    if wrap:
        A = half
    if A * k.smax + k.rmax >= (1 << 63):
        return None
    if clamp:
        # |r| <= ((A*scale + R) >> shift) + 1 per channel; bounded above by
        # A * max(scale/2**shift) + max(R/2**shift) + 1 (float, with a margin)
        rb = A * k.qmax * (1 + 2.0 ** -40) + k.rqmax + 2
        if rb + abs(zp) >= (1 << 31):
            return None
        lo, hi = np.int64(amin - zp), np.int64(amax - zp)
        tmin, tmax = TYPE_RANGE[odt.char]
        if (not wrap and tmin <= amin and amax <= tmax and k.scale.size
                and A * k.smax + k.rmax + (max(abs(zp), abs(zp - amin)) << k.shmax) < (1 << 53)):
            return fused_epilogue_f64(acc, bound, k, amin, amax, zp, odt)
    h, w, d = acc.shape
    M = h * w
    a2 = acc.reshape(M, d)
    out = np.empty((M, d), odt)
    rows = min(max(1, EPI_BLOCK // max(d, 1)), M)
    buf = np.empty((rows, d), np.int64)
    cbuf = np.empty((rows, d), np.int64) if k.diff is not None else None
    tb, ts, tsh, trp, tdiff = k.tiles(rows)
    sh = np.int64(64 - bits)
    zpv = np.int64(zp)
    for i in range(0, M, rows):
        x = a2[i:i + rows]
        n = x.shape[0]
        b = buf[:n]
        if n == rows:
            bias, scale, shift, rp, diff = tb, ts, tsh, trp, tdiff
        else:
            bias, scale, shift, rp, diff = tb[:n], ts[:n], tsh[:n], trp[:n], None if tdiff is None else tdiff[:n]
        np.copyto(b, x, casting="unsafe")                  # exact integers (float sums < 2**53)
        b += bias
        if wrap:
            b <<= sh                                        # sign_extend(., bits)
            b >>= sh
        b *= scale
        if diff is not None:
            c = cbuf[:n]
            np.right_shift(b, 63, out=c)                    # -1 where the product < 0
            c &= diff
            b += rp
            b -= c
        else:
            b += rp
        b >>= shift
        if clamp:
            np.maximum(b, lo, out=b)
            np.minimum(b, hi, out=b)
        np.add(b, zpv, out=out[i:i + n], casting="unsafe")  # truncating cast
    return out.reshape(h, w, d)


def fused_epilogue_f64(acc: np.ndarray, bound: int, k: EpilogueConsts, amin: int, amax: int, zp: int,
                        odt: np.dtype) -> np.ndarray:
    """fused_epilogue in float64 (SIMD multiplies instead of int64 multiplies and
    per-channel shifts), for the case the caller has checked: no wrap, a clamp whose bounds
    lie in odt's range and, per channel,
    |acc + bias| * scale + R + max(|zp|, |zp - amin|) * 2**shift < 2**53.
    Every value below is then an integer times a power of two with fewer than 53
    significant bits, so each operation is exact:
    ``acc * (scale * 2**-shift) + ((bias * scale + rp) * 2**-shift + zp)`` is
    ``(p + rp) * 2**-shift + zp`` (p = (acc + bias) * scale); minus ``diff * 2**-shift``
    where p < 0 (acc < -bias, scale != 0) it is ``y = (p + R) * 2**-shift + zp``, and
    ``floor(y) = ((p + R) >> shift) + zp``.  The clamp comes before the floor:
    ``floor(clip(y, amin, nextafter(amax + 1, -inf))) == clip(floor(y), amin, amax)`` for
    integer bounds.  The path computes y - amin (amin folded into the constant), clamps it to
    [0, amax - amin + 1), where truncation is the floor (one cast into the unsigned type of
    odt's width), and adds amin back modulo 2**bits: the bit pattern of the odt value."""
    h, w, d = acc.shape
    M = h * w
    a2 = acc.reshape(M, d)
    udt = np.dtype(f"<u{odt.itemsize}")
    out = np.empty((M, d), udt)
    rows = min(max(1, EPI_BLOCK // max(d, 1)), M)
    buf = np.empty((rows, d), np.float64)
    tthr32, tthr64, tsc, tc, tdiff = k.ftiles(rows, zp - amin)           # y - amin
    tthr = tthr32 if acc.dtype == np.float32 and bound < (1 << 24) else tthr64
    if tdiff is not None:
        neg = np.empty((rows, d), np.bool_)
        cbuf = np.empty((rows, d), np.float64)
    hi = float(np.nextafter(float(amax - amin) + 1.0, -np.inf))
    for i in range(0, M, rows):
        x = a2[i:i + rows]
        n = x.shape[0]
        b = buf[:n]
        if n == rows:
            thr, scale, c0, diff = tthr, tsc, tc, tdiff
        else:
            thr, scale, c0, diff = tthr[:n], tsc[:n], tc[:n], None if tdiff is None else tdiff[:n]
        np.multiply(x, scale, out=b)
        b += c0
        if diff is not None:
            m = neg[:n]
            np.less(x, thr, out=m)                          # acc + bias < 0
            c = cbuf[:n]
            np.multiply(m.view(np.uint8), diff, out=c)          # 0/1 times diff
            b -= c
        clip_ufunc(b, 0.0, hi, out=b)
        np.copyto(out[i:i + n], b, casting="unsafe")        # truncation: the floor (b >= 0)
    if amin % (1 << (8 * odt.itemsize)):
        out += udt.type(amin % (1 << (8 * odt.itemsize)))   # + amin, modulo 2**bits
    return out.view(odt).reshape(h, w, d)


# =========================================================================== snapshot memo
_STD_ORDER = tuple(_isa.RegisterFile()._raw)


def snapshot_key(snap):
    """A hashable key of an immutable register snapshot's contents (the raw NPU_SET
    payloads), or None when ``snap`` is not a tlm.ethos_u85.isa.RegisterSnapshot.  Register-derived
    values (geometry, feature maps, weight order) are memoised under it: an op that runs
    again with the same registers skips the decoding.  (RegisterFile.snapshot gives its
    snapshots the key: the values in the fixed register order.)"""
    if type(snap) is not _isa.RegisterSnapshot:
        return None
    key = snap.key
    if key is None:
        raw = snap._raw
        key = tuple(raw.values())
        if tuple(raw) != _STD_ORDER:
            key = (tuple(raw), key)
        object.__setattr__(snap, "key", key)
    return key


_CTX_STATIC = Memo(4096)     # (snapshot key, macs) -> OpContext attributes from the registers
_FUSED_PARAMS = Memo(4096)   # snapshot key -> OpContext.fused_params()
_CTX_STATIC_ATTRS = ("ofm_h", "ofm_w", "ofm_d", "ifm_depth", "stride_y", "stride_x", "dilation_y", "dilation_x",
                     "pad_top", "pad_left", "pad_bottom", "pad_right", "kernel_h", "kernel_w", "ifm_h", "ifm_w",
                     "upscale", "acc_format", "acc_input", "acc_output", "microblock", "ifm", "ofm", "macs",
                     "acc_bits")


# =========================================================================== per-op context
class OpContext:
    """One kernel operation: register snapshot, derived geometry and TRM tensor access.

    Attributes (TRM section 4 names): ``ofm_h, ofm_w, ofm_d, ifm_depth, stride_y, stride_x,
    dilation_y, dilation_x, pad_top, pad_left, pad_bottom, pad_right, kernel_h, kernel_w``
    (KERNEL_*_M1 + 1 as the registers say: the dilated extent for conv), ``ifm_h, ifm_w``
    (``(ofm - 1)*stride + kernel - pad``), ``fields`` (the op's payload fields), ``state``
    (the device's :class:`OpState`), ``ifm/ifm2/ofm`` (:class:`~tlm.ethos_u85.fmap.FeatureMap`, bases
    region-relative).
    """

    def __init__(self, snap, port, device, name: str):
        self.snap = snap
        self.port = port
        self.reference = getattr(port, "reference", False)   # DataPort(reference=...): literal fmap paths
        self.device = device
        self.name = name
        self.policy = policy_of(device)           # work budgets (max_op_*)
        self.state = get_op_state(device)
        self.fields = op_fields(device)
        f = snap.field
        self.f = f
        cfg = getattr(device, "config", None)
        macs = int(getattr(cfg, "macs", 256))
        key = snapshot_key(snap)
        static = _CTX_STATIC.get((key, macs)) if key is not None else None
        if static is not None:
            self.__dict__.update(static)
        else:
            self._decode(f, snap, name, macs)
            if key is not None:
                _CTX_STATIC.put((key, macs), {a: self.__dict__[a] for a in _CTX_STATIC_ATTRS})
        self.scale_cache: Scale | None = None
        n = self.ofm_h * self.ofm_w * self.ofm_d
        if n > self.policy.max_op_elements:
            raise BudgetExceeded(f"{name}: {n} OFM elements exceed the model's budget of {self.policy.max_op_elements}")

    def _decode(self, f, snap, name: str, macs: int) -> None:
        """The register-derived attributes (the same for every op with these registers)."""
        self.ofm_h = f("NPU_SET_OFM_HEIGHT_M1", "height_m1") + 1
        self.ofm_w = f("NPU_SET_OFM_WIDTH_M1", "width_m1") + 1
        self.ofm_d = f("NPU_SET_OFM_DEPTH_M1", "depth_m1") + 1
        self.ifm_depth = f("NPU_SET_IFM_DEPTH_M1", "depth_m1") + 1
        self.stride_y = 2 * f("NPU_SET_KERNEL_STRIDE", "stride_y_msb") + f("NPU_SET_KERNEL_STRIDE", "stride_y_lsb") + 1
        self.stride_x = 2 * f("NPU_SET_KERNEL_STRIDE", "stride_x_msb") + f("NPU_SET_KERNEL_STRIDE", "stride_x_lsb") + 1
        self.dilation_y = f("NPU_SET_KERNEL_STRIDE", "dilation_y") + 1
        self.dilation_x = f("NPU_SET_KERNEL_STRIDE", "dilation_x") + 1
        self.pad_top = f("NPU_SET_IFM_PAD_TOP", "pad")
        self.pad_left = f("NPU_SET_IFM_PAD_LEFT", "pad")
        self.pad_bottom = f("NPU_SET_IFM_PAD_BOTTOM", "pad")
        self.pad_right = f("NPU_SET_IFM_PAD_RIGHT", "pad")
        self.kernel_h = f("NPU_SET_KERNEL_HEIGHT_M1", "height_m1") + 1
        self.kernel_w = f("NPU_SET_KERNEL_WIDTH_M1", "width_m1") + 1
        self.ifm_h = (self.ofm_h - 1) * self.stride_y + self.kernel_h - (self.pad_top + self.pad_bottom)
        self.ifm_w = (self.ofm_w - 1) * self.stride_x + self.kernel_w - (self.pad_left + self.pad_right)
        self.upscale = f("NPU_SET_IFM_UPSCALE", "mode")
        self.acc_format = f("NPU_SET_ACC_FORMAT", "acc_format")
        self.acc_input = f("NPU_SET_ACC_FORMAT", "acc_input")
        self.acc_output = f("NPU_SET_ACC_FORMAT", "acc_output")
        self.microblock = f("NPU_SET_ACC_FORMAT", "microblock")
        self.ifm = FeatureMap.from_registers(snap, "IFM")
        self.ofm = FeatureMap.from_registers(snap, "OFM")
        self.macs = macs
        _unpred(self.acc_format in (0, 1), f"{name}: reserved acc_format {self.acc_format}")
        self.acc_bits = 32 if self.acc_format == AccFormat.I32 else 48

    @functools.cached_property
    def ifm2(self) -> FeatureMap:
        """The IFM2 feature map, decoded on first use (most ops never read IFM2)."""
        return FeatureMap.from_registers(self.snap, "IFM2")

    # ---------------------------------------------------------------- small helpers
    def check(self, cond, what: str) -> None:
        """TRM assert(): raise Unpredictable('<op>: <what>') when cond is false."""
        if not cond:
            raise Unpredictable(f"{self.name}: {what}")

    def budget(self, work: int, what: str, limit: "int | None" = None) -> None:
        limit = self.policy.max_op_work if limit is None else limit
        if work > limit:
            raise BudgetExceeded(f"{self.name}: {what} ({work}) exceeds the model's budget of {limit}")

    def microblock_depth(self) -> int:
        self.check(0 <= self.microblock < len(_MB_DIV), f"reserved microblock {self.microblock}")
        return self.macs // _MB_DIV[self.microblock]

    def accumulate(self, acc, value):
        """TRM accumulate(): acc + value wrapped at 32/48 bits."""
        return arith.accumulate(acc, value, self.acc_format)

    def sync_device(self) -> None:
        """Mirror g_chain_length into the device (a stop request waits for the chain end)."""
        try:
            self.device.chain_length = self.state.chain_length
        except AttributeError:
            pass

    # ---------------------------------------------------------------- chaining (3.6.4)
    def add_operation_to_chain(self, use_ifm: bool, use_ifm2: bool, append: bool) -> None:
        st = self.state
        n = self.name
        self.check(st.chain_length == 0 or append, "add_operation_to_chain: operation cannot be appended to a chain")
        if st.chain_length == 0:
            st.num_ifm = 0
            st.fifo_valid = [False] * NUM_CHAINING_FIFO
            st.clear_fifos()                          # the TRM's bare '();' (E-02)
        st.chain_length += 1
        try:
            _unpred(st.chain_length <= MAX_CHAIN_LENGTH, f"{n}: add_operation_to_chain: more than 4 operations")
            if use_ifm:
                if self.ifm.storage == Storage.CHAINED:
                    _unpred(self.ifm.region < NUM_CHAINING_FIFO, f"{n}: add_operation_to_chain: IFM FIFO >= 3")
                    _unpred(st.fifo_valid[self.ifm.region],
                            f"{n}: add_operation_to_chain: IFM chaining FIFO {self.ifm.region} not valid")
                else:
                    st.num_ifm += 1
            if use_ifm2:
                if self.ifm2.storage == Storage.CHAINED:
                    _unpred(self.ifm2.region < NUM_CHAINING_FIFO, f"{n}: add_operation_to_chain: IFM2 FIFO >= 3")
                    _unpred(st.fifo_valid[self.ifm2.region],
                            f"{n}: add_operation_to_chain: IFM2 chaining FIFO {self.ifm2.region} not valid")
                    if use_ifm and self.ifm.storage == Storage.CHAINED:
                        _unpred(self.ifm.region != self.ifm2.region,
                                f"{n}: add_operation_to_chain: IFM and IFM2 read the same chaining FIFO")
                else:
                    st.num_ifm += 1
            _unpred(st.num_ifm <= 3, f"{n}: add_operation_to_chain: more than 3 external IFMs in a chain")
            if self.ofm.storage == Storage.CHAINED:
                _unpred(self.ofm.region < NUM_CHAINING_FIFO, f"{n}: add_operation_to_chain: OFM FIFO >= 3")
                st.fifo_valid[self.ofm.region] = True
            else:
                st.chain_length = 0                   # end of the chain
        finally:
            self.sync_device()

    # ---------------------------------------------------------------- IFM / IFM2 reads
    def _read_fm(self, fm: FeatureMap, which: str, ys, xs, cs, channel: Channel, precision=None,
                 act_type=None, subtract_zp=True, dtype=None, out=None) -> np.ndarray:
        """The block ys x xs x cs of fm, zero point subtracted: int64 (uint64 bits for an
        unsigned b64 map), or ``dtype`` (a type that holds every value exactly, e.g. float32
        for b8/b16 maps), stored into ``out`` (a [len(ys), len(xs), len(cs)] view) if given."""
        ys, xs, cs = _coords(ys), _coords(xs), _coords(cs)
        shape = (len(ys), len(xs), len(cs))
        count = shape[0] * shape[1] * shape[2]
        owned = False
        self.budget(count, f"{which} elements read", self.policy.max_op_elements)
        if precision is not None:
            fm = replace(fm, precision=precision, act_type=act_type)
        direct = False
        if fm.storage == Storage.CHAINED:
            vals = self.state.read_chaining_fifo(fm.region, count, f"{self.name}: read_{which.lower()}")
            vals = vals.reshape(shape)
        elif fm.storage == Storage.NONE:
            raise Unpredictable(f"{self.name}: read_{which.lower()}: activation_storage none has no address")
        elif count == 0:
            vals = np.zeros(shape, np.int64)
        else:
            _unpred(fm.storage in (Storage.TILE2X2, Storage.TILE3X1),
                    f"{self.name}: reserved {which} activation_storage {fm.storage}")
            mem = _RegionMem(self.port, fm.region, channel)
            try:
                # with a float dtype the zero point is subtracted in the conversion (same
                # check, after the read); read_fmap's errors are worded as the ones below
                sub = subtract_zp and dtype is not None and np.dtype(dtype).kind == "f"
                vals = read_fmap(mem, fm, ys, xs, cs, dtype=dtype, out=out, subtract_zero_point=sub,
                                 reference=self.reference)
            except Unpredictable as e:
                raise Unpredictable(f"{self.name}: read_{which.lower()}: {e}") from None
            if sub:
                return vals
            if dtype is not None:
                direct = owned = True
            else:
                if vals.dtype == np.uint64:                    # unsigned b64: keep the bits
                    vals = vals.astype(np.int64)
                owned = vals.dtype == np.int64                 # read_fmap returns a fresh array
        if not direct and (dtype is not None or out is not None):
            if out is None:
                vals = vals.astype(dtype)
            else:
                out[...] = vals
                vals = out
            owned = True
        if subtract_zp and count:
            try:
                zp = arith.ifm_zero_point(fm.zero_point, fm.precision, fm.act_type)
            except Unpredictable as e:
                raise Unpredictable(f"{self.name}: read_{which.lower()}: {e}") from None
            if zp:
                if owned:
                    vals -= vals.dtype.type(zp)
                else:
                    vals = vals - np.int64(zp)
        return vals

    def read_ifm(self, ys, xs, cs) -> np.ndarray:
        """TRM read_ifm for the block ys x xs x cs (1-D coordinate vectors; any values, e.g.
        broadcast index vectors) -> int64 [len(ys), len(xs), len(cs)], zero point subtracted.

        IFM_UPSCALE is applied (nearest: (y>>1, x>>1); zeros: 0 at odd y or x).  A chained
        IFM pops len(ys)*len(xs)*len(cs) values in (y, x, c) order."""
        up = self.upscale
        if up != UPSCALE_NONE:
            ys = np.atleast_1d(np.asarray(ys, dtype=np.int64))
            xs = np.atleast_1d(np.asarray(xs, dtype=np.int64))
            cs = np.atleast_1d(np.asarray(cs, dtype=np.int64))
            self.check(up in (UPSCALE_NEAREST, UPSCALE_ZEROS), f"read_ifm: reserved IFM_UPSCALE mode {up}")
            self.check(self.stride_x == 1 and self.stride_y == 1, "read_ifm: upscale needs stride 1")
            self.check(self.ifm.storage != Storage.CHAINED, "read_ifm: upscale of a chained IFM")
            vals = self._read_fm(self.ifm, "IFM", ys >> 1, xs >> 1, cs, Channel.rd_ifm)
            if up == UPSCALE_ZEROS:
                odd = ((ys & 1) == 1)[:, None, None] | ((xs & 1) == 1)[None, :, None]
                vals = np.where(odd, np.int64(0), vals)
            return vals
        return self._read_fm(self.ifm, "IFM", ys, xs, cs, Channel.rd_ifm)

    def read_ifm_padded(self, depth: int | None = None, pad_value: int = 0, dtype=None) -> np.ndarray:
        """The whole padded IFM window the kernel sweeps: int64
        [pad_top + ifm_h + pad_bottom, pad_left + ifm_w + pad_right, depth] where the IFM part
        is read_ifm(0..ifm_h-1, 0..ifm_w-1, 0..depth-1) and the padding is ``pad_value``
        (0 = the zero point, in the zero-point-subtracted domain).  ``depth`` defaults to
        IFM_DEPTH (conv); depthwise/pool pass the OFM depth.  ``dtype``: the result type
        instead of int64 - the caller's promise that it holds every value exactly (float32
        for b8/b16 IFMs); the values are then converted straight from memory. A chained IFM
        (values of the producer's OFM, any width) is always int64."""
        d = self.ifm_depth if depth is None else int(depth)
        self.check(self.ifm_h >= 1 and self.ifm_w >= 1, "pad range: derived IFM size < 1")
        H = self.pad_top + self.ifm_h + self.pad_bottom
        W = self.pad_left + self.ifm_w + self.pad_right
        self.budget(H * W * d, "padded IFM elements", self.policy.max_op_elements)
        ys, xs, cs = range(self.ifm_h), range(self.ifm_w), range(d)
        if dtype is None or self.ifm.storage == Storage.CHAINED:
            core = self.read_ifm(ys, xs, cs)
            if H == self.ifm_h and W == self.ifm_w:
                return core
            out = np.full((H, W, d), np.int64(pad_value), np.int64)
            out[self.pad_top:self.pad_top + self.ifm_h, self.pad_left:self.pad_left + self.ifm_w] = core
            return out
        dt = np.dtype(dtype)
        out = np.empty((H, W, d), dt)
        t, l, ih, iw = self.pad_top, self.pad_left, self.ifm_h, self.ifm_w
        pv = dt.type(pad_value)
        out[:t] = pv                                    # the padding border only
        out[t + ih:] = pv
        out[t:t + ih, :l] = pv
        out[t:t + ih, l + iw:] = pv
        core = out[t:t + ih, l:l + iw]
        if self.upscale != UPSCALE_NONE:
            core[...] = self.read_ifm(ys, xs, cs)
        else:
            self._read_fm(self.ifm, "IFM", ys, xs, cs, Channel.rd_ifm, dtype=dt, out=core)
        return out

    def read_ifm2(self, ys, xs, cs, read_accumulator: bool = False) -> np.ndarray:
        """TRM read_ifm2 (no upscale).  read_accumulator: accumulator restore - the IFM2 must
        be b64 signed (acc_format i48) or b32 signed (i32) (E-04); the value is held at the
        accumulator width."""
        if read_accumulator:
            prec = Precision.B64 if self.acc_format == AccFormat.I48 else Precision.B32
            self.check(self.ifm2.precision == prec and self.ifm2.act_type == ActType.SIGNED,
                       f"read_ifm2: accumulator restore needs a signed {arith.number_of_bits(prec)}-bit IFM2")
            v = self._read_fm(self.ifm2, "IFM2", ys, xs, cs, Channel.rd_ifm_stream)
            return arith.sign_extend(v, self.acc_bits)
        return self._read_fm(self.ifm2, "IFM2", ys, xs, cs, Channel.rd_ifm_stream)

    # ---------------------------------------------------------------- accumulators
    def initial_acc(self, identity: int = 0, depth: int | None = None) -> np.ndarray:
        """TRM read_accumulator(oy, ox, oc, identity) for the whole OFM: int64
        [ofm_h, ofm_w, depth] (depth defaults to the OFM depth)."""
        d = self.ofm_d if depth is None else int(depth)
        h, w = self.ofm_h, self.ofm_w
        ai = self.acc_input
        if ai == ACC_RESET:
            return np.full((h, w, d), np.int64(identity), np.int64)
        if ai == ACC_KEEP:
            self._check_block(h, w, d, "read_accumulator")
            return self.state.load_acc(h, w, d)
        if ai == ACC_IFM2:
            return self.read_ifm2(np.arange(h), np.arange(w), np.arange(d), read_accumulator=True)
        raise Unpredictable(f"{self.name}: read_accumulator: reserved acc_input {ai}")

    def _check_block(self, h, w, d, what):
        bh = self.f("NPU_SET_OFM_BLK_HEIGHT_M1", "height_m1") + 1
        bw = self.f("NPU_SET_OFM_BLK_WIDTH_M1", "width_m1") + 1
        bd = self.f("NPU_SET_OFM_BLK_DEPTH_M1", "depth_m1") + 1
        self.check(h <= bh and w <= bw and d <= bd,
                   f"{what}: accumulator storage coordinates outside the OFM block "
                   f"({h}x{w}x{d} > {bh}x{bw}x{bd})")

    def scale_bias(self):
        """(bias, scale, shift) int64 arrays per OFM channel: from the scale/bias stream
        (TRM 3.7) when OFM scale_mode == per_channel, else bias 0 and OFM_SCALE (E-11)."""
        if self.scale_cache is None:
            d = self.ofm_d
            if self.ofm.scale_mode == ScaleMode.PER_CHANNEL:
                self.microblock_depth()
                cis = channels_in_set(self.macs, self.microblock)
                need = stream_size(d, cis)
                base = self.f("NPU_SET_SCALE_BASE", "addr")
                length = self.f("NPU_SET_SCALE_LENGTH", "length")
                region = self.f("NPU_SET_SCALE_REGION", "region")
                # E-23: the 16-byte alignment is stated under SCALE_LENGTH ("this offset");
                # both are required here.
                self.check(base % 16 == 0, f"SCALE_BASE 0x{base:x} not 16-byte aligned")
                self.check(length % 16 == 0, f"SCALE_LENGTH {length} not a multiple of 16")
                self.check(length >= need, f"scale/bias stream of {length} bytes, {need} needed "
                                           f"for {d} channels")
                data = self.port.read(region, base, need, Channel.rd_scale_bias).tobytes()
                reverse_c = self.ofm.reverse == 3
                key = (data, d, self.acc_format == AccFormat.I48, cis, reverse_c)
                sc = _SB_CACHE.get(key)
                if sc is None:
                    try:
                        sb = decode_scale_bias(data, d, acc48=self.acc_format == AccFormat.I48,
                                               set_channels=cis, reverse_c=reverse_c)
                    except Unpredictable as e:
                        raise Unpredictable(f"{self.name}: {e}") from None
                    for a in sb:
                        a.setflags(write=False)
                    sc = Scale(sb.bias, sb.scale, sb.shift)
                    _SB_CACHE.put(key, sc)
                self.scale_cache = sc
            else:
                sc = self.f("NPU_SET_OFM_SCALE", "scale")
                sh = self.f("NPU_SET_OFM_SCALE", "shift")
                self.scale_cache = Scale(np.zeros(d, np.int64), np.full(d, sc, np.int64),
                                           np.full(d, sh, np.int64))
        s = self.scale_cache
        return s.bias, s.scale, s.shift

    def rescale(self, acc, rescale_mode: int, *, divisor=None, range_check: bool = True) -> np.ndarray:
        """TRM rescale(acc, oc, rescale_mode) over an [h, w, c] block.

        rescale_mode: RESCALE_NONE / NORMAL / GLOBAL / SHIFT_ONLY, or RESCALE_AVPOOL with
        ``divisor`` (array broadcastable to acc: the per-element d = count of valid taps).
        NORMAL uses the per-channel stream when scale_mode == per_channel (channel axis = last).
        range_check=False skips the acc_format range asserts (RESIZE, E-27)."""
        acc = np.asarray(acc, dtype=np.int64)
        if rescale_mode == RESCALE_NONE:
            return acc
        rm = self.f("NPU_SET_OFM_SCALE", "round_mode")
        dbl = self.f("NPU_SET_OFM_SCALE", "dbl_rnd")
        if rescale_mode >= RESCALE_AVPOOL:
            self.check(divisor is not None, "rescale: avgpool without a divisor")
            scale, shift = arith.avgpool_scale(np.asarray(divisor, dtype=np.int64))
        elif self.ofm.scale_mode == ScaleMode.PER_CHANNEL:
            self.check(rescale_mode == RESCALE_NORMAL,
                       "rescale: per-channel scale_mode needs rescale_mode_normal (per-channel scale not permitted)")
            _, scale, shift = self.scale_bias()
            c = acc.shape[-1]
            scale, shift = scale[:c], shift[:c]
        else:
            scale = self.f("NPU_SET_OFM_SCALE", "scale")
            shift = self.f("NPU_SET_OFM_SCALE", "shift")
        lo_hi = None
        if range_check and acc.size:
            # assert(acc == sign_extend(acc, 32 | 48)) per acc_format.  The TRM also asserts
            # scale == sign_extend(scale, 16) under i48; that is only applied to the
            # per-channel stream (where the record field is 15 bits wide anyway): Vela 5.2
            # programs 31-bit OFM_SCALE values with acc_format i48 for int16 elementwise ops,
            # and the exact product reproduces LiteRT bit for bit.
            lo, hi = lo_hi = int(acc.min()), int(acc.max())
            b = self.acc_bits
            self.check(lo >= -(1 << (b - 1)) and hi < (1 << (b - 1)),
                       f"rescale: acc does not fit {b} bits (acc_format i{b})")
        try:
            return arith.rescale(acc, scale, shift, rm, dbl, shift_only=(rescale_mode == RESCALE_SHIFT_ONLY),
                                 acc_format=None, lo_hi=lo_hi)
        except Unpredictable as e:
            raise Unpredictable(f"{self.name}: {e}") from None

    def activation(self, acc) -> np.ndarray:
        """TRM activation() (without write_ofm's truncation)."""
        f = self.f
        try:
            return arith.activation(
                acc, precision=self.ofm.precision, act_type=self.ofm.act_type,
                zero_point=f("NPU_SET_OFM_ZERO_POINT", "zero_point"),
                act_min=f("NPU_SET_ACTIVATION_MIN", "clip_boundary"),
                act_max=f("NPU_SET_ACTIVATION_MAX", "clip_boundary"),
                function=f("NPU_SET_ACTIVATION", "activation_function"),
                clip_range=f("NPU_SET_ACTIVATION", "activation_clip_range"),
                table=f("NPU_SET_ACTIVATION", "table"), lut=getattr(self.device, "lut", None),
                truncate_ofm=False)
        except Unpredictable as e:
            raise Unpredictable(f"{self.name}: {e}") from None

    def write_accumulator(self, acc, rescale_mode: int = RESCALE_NORMAL, *, divisor=None,
                          bound: int | None = None) -> None:
        """TRM write_accumulator for the whole OFM (acc: int64 [ofm_h, ofm_w, depth]).

        acc_output == enable: bias add (wrapping at the accumulator width), rescale (per
        channel / global / avgpool with the per-element ``divisor`` array), activation,
        write_ofm(allowed_perms_all).  acc_output == disable: kept in the accumulator storage
        (block-relative coordinates asserted).

        ``bound``: the caller passes the *unwrapped* exact sums (any integer or float array
        holding integers, e.g. a float32 BLAS result) and a Python int >= max|acc|; they are
        wrapped to the accumulator width here (sign_extend(sum) == the per-MAC wraps).  The
        common case (per-channel scale, no LUT, b8/b16/b32 OFM) then runs as one fused,
        cache-blocked pass (:func:`fused_epilogue`) that is bit-identical to the steps
        above."""
        if bound is not None:
            if self._fused_write(acc, rescale_mode, int(bound)):
                return
            acc = arith.sign_extend(np.asarray(acc, dtype=np.int64), self.acc_bits)
        acc = np.asarray(acc, dtype=np.int64)
        h, w, d = acc.shape
        if self.acc_output == ACC_OUT_DISABLE:
            self._check_block(h, w, d, "write_accumulator")
            self.state.store_acc(arith.sign_extend(acc, self.acc_bits))
            return
        self.check(self.acc_output == ACC_OUT_ENABLE, f"reserved acc_output {self.acc_output}")
        if self.ofm.scale_mode == ScaleMode.PER_CHANNEL:
            bias = self.scale_bias()[0][:d]
            acc = self.accumulate(acc, bias)
        v = self.rescale(acc, rescale_mode, divisor=divisor)
        v = self.activation(v)
        self.write_ofm(v, ALLOWED_PERMS_ALL)

    def activation_ref_args(self) -> dict:
        """The keyword arguments of ``arith.activation_ref`` for this op's OFM (registers and LUT)."""
        f = self.f
        return dict(precision=self.ofm.precision, act_type=self.ofm.act_type,
                    zero_point=f("NPU_SET_OFM_ZERO_POINT", "zero_point"),
                    act_min=f("NPU_SET_ACTIVATION_MIN", "clip_boundary"),
                    act_max=f("NPU_SET_ACTIVATION_MAX", "clip_boundary"),
                    function=f("NPU_SET_ACTIVATION", "activation_function"),
                    clip_range=f("NPU_SET_ACTIVATION", "activation_clip_range"),
                    table=f("NPU_SET_ACTIVATION", "table"), lut=bytes(getattr(self.device, "lut", b"")))

    def write_accumulator_ref(self, acc, rescale_mode: int = RESCALE_NORMAL, *, divisor=None) -> None:
        """:meth:`write_accumulator` as the literal per-element TRM code on Python ints (the
        reference model's path, tlm.ethos_u85.literal): per (oy, ox, oc) bias add
        (``accumulate``), ``arith.rescale_ref``, ``arith.activation_ref`` (with write_ofm's
        truncation), then one write_ofm of the block.  ``acc``: the wrapped accumulators
        [ofm_h, ofm_w, depth]; RESCALE_AVPOOL with ``divisor`` (per element: the count d of
        valid taps, i.e. rescale_mode_avpool + d - 1).  Same reading of the TRM as the fast path: bias 0 in global
        scale mode (E-11); under i48 the ``scale == sign_extend(scale, 16)`` assert only for
        per-channel scales (module doc, arith.rescale_ref)."""
        acc = np.asarray(acc, dtype=np.int64)
        h, w, d = acc.shape
        if self.acc_output == ACC_OUT_DISABLE:
            self._check_block(h, w, d, "write_accumulator")
            self.state.store_acc(arith.sign_extend(acc, self.acc_bits))
            return
        self.check(self.acc_output == ACC_OUT_ENABLE, f"reserved acc_output {self.acc_output}")
        avpool = rescale_mode == RESCALE_AVPOOL
        self.check(rescale_mode in (RESCALE_NONE, RESCALE_NORMAL, RESCALE_GLOBAL, RESCALE_SHIFT_ONLY)
                   or (avpool and divisor is not None),
                   f"write_accumulator_ref: rescale mode {rescale_mode} not on the literal path")
        div = np.broadcast_to(np.asarray(divisor, dtype=np.int64), acc.shape).tolist() if avpool else None
        f = self.f
        per_channel = self.ofm.scale_mode == ScaleMode.PER_CHANNEL
        bias = scale = shift = None
        if per_channel:
            self.check(avpool or rescale_mode == RESCALE_NORMAL,
                       "rescale: per-channel scale_mode needs rescale_mode_normal (per-channel scale not permitted)")
            bias, scale, shift = (x.tolist() for x in self.scale_bias())
        rm, dbl = f("NPU_SET_OFM_SCALE", "round_mode"), f("NPU_SET_OFM_SCALE", "dbl_rnd")
        oscale, oshift = f("NPU_SET_OFM_SCALE", "scale"), f("NPU_SET_OFM_SCALE", "shift")
        act = self.activation_ref_args()
        out = np.zeros((h, w, d), np.int64)
        try:
            for oy in range(h):
                for ox in range(w):
                    for oc in range(d):
                        a = int(acc[oy, ox, oc])
                        if per_channel:
                            a = arith.accumulate(a, bias[oc], self.acc_format)
                        if rescale_mode != RESCALE_NONE:
                            rm_e = rescale_mode + div[oy][ox][oc] - 1 if avpool else rescale_mode
                            a = arith.rescale_ref(a, oc, rm_e, scale_mode=self.ofm.scale_mode,
                                                  ofm_scale=oscale, ofm_shift=oshift, round_mode=rm, dbl_rnd=dbl,
                                                  acc_format=self.acc_format, scale_arr=scale, shift_arr=shift)
                        out[oy, ox, oc] = arith.activation_ref(a, **act)
        except Unpredictable as e:
            if str(e).startswith(self.name):
                raise
            raise Unpredictable(f"{self.name}: {e}") from None
        self.write_ofm(out, ALLOWED_PERMS_ALL)

    def _fused_write(self, acc, rescale_mode: int, bound: int) -> bool:
        """write_accumulator's fused path (see write_accumulator); False (nothing done, no
        state changed) when the op is not the common case or a bound does not hold, so the
        step-by-step path runs (and raises whatever it raises)."""
        if (self.acc_output != ACC_OUT_ENABLE or rescale_mode != RESCALE_NORMAL
                or self.ofm.scale_mode != ScaleMode.PER_CHANNEL or acc.ndim != 3):
            return False
        skey = snapshot_key(self.snap)
        prm = _FUSED_PARAMS.get(skey, False) if skey is not None else False
        if prm is False:
            prm = self.fused_params()
            if skey is not None:
                _FUSED_PARAMS.put(skey, prm)
        if prm is None:
            return False
        rm, dbl, zp, amin, amax, clamp, odt = prm
        d = acc.shape[2]
        self.scale_bias()                                   # raises as the step-by-step path would
        sc = self.scale_cache
        k = sc.epilogue(d, rm, dbl, self.acc_bits)
        out = fused_epilogue(acc, bound, k, zp, amin, amax, clamp, odt)
        if out is None:
            return False
        self.write_ofm(out, ALLOWED_PERMS_ALL)
        return True

    def fused_params(self):
        """The register-only conditions and parameters of _fused_write: (round mode,
        dbl_rnd, OFM zero point, activation min/max, clamp, OFM value type), or None when
        the op is not the fused path's case (it then runs step by step)."""
        f = self.f
        fm = self.ofm
        if (f("NPU_SET_ACTIVATION", "activation_function") != arith.ActivationFunction.LUT_NONE
                or fm.precision not in (Precision.B8, Precision.B16, Precision.B32)):
            return None
        rm = f("NPU_SET_OFM_SCALE", "round_mode")
        dbl = f("NPU_SET_OFM_SCALE", "dbl_rnd")
        if not (0 <= rm <= 5 and 0 <= dbl <= 30):
            return None
        try:
            zp, amin, amax = arith.ofm_activation_params(
                fm.act_type, f("NPU_SET_OFM_ZERO_POINT", "zero_point"),
                f("NPU_SET_ACTIVATION_MIN", "clip_boundary"), f("NPU_SET_ACTIVATION_MAX", "clip_boundary"))
        except Unpredictable:
            return None
        clamp = f("NPU_SET_ACTIVATION", "activation_clip_range") == arith.ClipRange.B16
        if clamp and amin > amax:
            return None
        odt = np.dtype(f"<{'u' if fm.act_type == ActType.UNSIGNED else 'i'}{fm.bits // 8}")
        return rm, dbl, zp, amin, amax, clamp, odt

    # ---------------------------------------------------------------- OFM writes
    def write_ofm(self, values, allowed_perms: int = ALLOWED_PERMS_ALL) -> None:
        """TRM write_ofm for the whole OFM block (values: int64 [ofm_h, ofm_w, depth] after
        activation, or already truncated: an array of the OFM's own type, e.g. int8 for a
        signed b8 OFM): truncate to the OFM type, COND_STATUS.result_flag, then chained push /
        storage none / reverse+transpose+tiles memory write over wr_ofm."""
        fm = self.ofm
        v = np.asarray(values)
        h, w, d = v.shape
        if (fm.precision != Precision.B64 and v.dtype.kind in "iu" and v.dtype.itemsize * 8 == fm.bits
                and (v.dtype.kind == "u") == (fm.act_type == ActType.UNSIGNED)):
            tv = v                                           # truncate() is the identity
        elif fm.precision == Precision.B64 and fm.act_type == ActType.UNSIGNED:
            tv = np.asarray(v, dtype=np.int64)               # 64 bits: the bit pattern is the value
        else:
            tv = arith.truncate(np.asarray(v, dtype=np.int64), fm.bits, fm.act_type)
        if tv.size:
            self._set_result_flag(int(tv[-1, -1, -1]) & 1)     # last element (y, x, c order)
        if fm.storage == Storage.CHAINED:
            self.check(fm.reverse == 0 and fm.transpose == 0, "write_ofm: chained OFM with reverse/transpose")
            self.state.write_chaining_fifo(fm.region, tv)
            return
        mbd = self.microblock_depth() if fm.reverse == 3 else None
        try:
            if fm.storage == Storage.NONE:
                check_ofm_write(fm, allowed_perms, mbd)
                return
            self.check(fm.storage in (Storage.TILE2X2, Storage.TILE3X1),
                       f"reserved OFM activation_storage {fm.storage}")
            mem = _RegionMem(self.port, fm.region, Channel.wr_ofm)
            write_fmap(mem, fm, range(h), range(w), range(d), tv,
                       allowed_perms=allowed_perms, microblock_depth=mbd, reference=self.reference)
        except Unpredictable as e:
            if str(e).startswith(self.name):
                raise
            raise Unpredictable(f"{self.name}: {e}") from None

    def _set_result_flag(self, bit: int) -> None:
        fn = getattr(self.device, "set_result_flag", None)
        if fn is not None:
            fn(bit)
