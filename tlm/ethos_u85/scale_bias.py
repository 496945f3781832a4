"""Scale and bias stream of the Ethos-U85 (TRM r0p0 issue 05, section 3.7).

The stream holds one 80-bit (10-byte) record per OFM channel, LSB first (the weight-stream
bit order, TRM 3.9.3), grouped in channel sets of ``align_up(microblock_depth(), 16)``
records. The last set is padded with zero records. With ``activation_reverse == C`` the
sets come in reverse order, the channels within a set ascending (TRM 3.7.2).

Record layout (TRM 3.7.3, parse_scale_bias_channel_set):

=========== ============= ============= ============ =========== ==============
acc_format  bias          scale         reserved     shift       reserved
=========== ============= ============= ============ =========== ==============
i32         bits 0..31    bits 32..62   bit 63       bits 64..69 bits 70..79
i48         bits 0..47    bits 48..62   bit 63       bits 64..69 bits 70..79
=========== ============= ============= ============ =========== ==============

TRM vs digest: the TRM parses ``bias`` with SYMBOL_UINT, but it is a two's-complement
value (the digest's E-20, consistent with Vela's encoder): it is sign-extended here.
The reserved bits are SYMBOL_RESERVED, i.e. an assert: a set bit makes the stream
UNPREDICTABLE, reported as :class:`ScaleBiasError` (can be switched off).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..core.errors import Unpredictable

__all__ = [
    "RECORD_BYTES",
    "ScaleBias",
    "ScaleBiasError",
    "channels_in_set",
    "stream_size",
    "decode_scale_bias",
    "encode_scale_bias",
]

RECORD_BYTES = 10
_MB_DIV = (8, 16, 32, 32, 64, 128)   # TRM microblock_depth(): u1x1 u1x2 u1x4 u2x2 u2x4 u4x4


class ScaleBiasError(Unpredictable):
    """A scale/bias stream that cannot be parsed; ``offset`` is the byte offset."""

    def __init__(self, msg: str, offset: int):
        self.offset = int(offset)
        super().__init__(f"scale/bias stream: {msg} (byte offset {self.offset})")


class ScaleBias(NamedTuple):
    """Per original OFM channel (index = channel before reverse/transpose)."""
    bias: np.ndarray    # int64: int32 or int48 value
    scale: np.ndarray   # int64: uint31 (acc32) or uint15 (acc48)
    shift: np.ndarray   # int64: uint6


def channels_in_set(macs: int, microblock: int) -> int:
    """``align_up(microblock_depth(), 16)`` (TRM 3.7.1)."""
    mbd = macs // _MB_DIV[microblock]
    return (mbd + 15) // 16 * 16


def _n_sets(ofm_depth: int, set_channels: int) -> int:
    return -(-ofm_depth // set_channels)


def stream_size(ofm_depth: int, set_channels: int) -> int:
    """Bytes the NPU reads for ``ofm_depth`` channels."""
    return _n_sets(ofm_depth, set_channels) * set_channels * RECORD_BYTES


def _record_channels(ofm_depth: int, set_channels: int, reverse_c: bool) -> np.ndarray:
    """Original OFM channel of each record in stream order (TRM 3.7.2)."""
    n = _n_sets(ofm_depth, set_channels)
    s = np.arange(n)
    base = (n - 1 - s) if reverse_c else s
    return (base[:, None] * set_channels + np.arange(set_channels)[None, :]).ravel()


def decode_scale_bias(data, ofm_depth: int, *, acc48: bool, set_channels: int,
                      reverse_c: bool = False, check_reserved: bool = True) -> ScaleBias:
    """Parse a scale/bias stream (TRM 3.7) for ``ofm_depth`` channels.

    ``data``: the bytes at SCALE_BASE (at least :func:`stream_size` bytes; more is ignored).
    ``acc48``: ACC_FORMAT.acc_format == i48. ``set_channels``: :func:`channels_in_set`.
    ``reverse_c``: OFM_PRECISION.activation_reverse == C.
    """
    if ofm_depth < 1 or set_channels < 16 or set_channels % 16:
        raise ValueError("bad ofm_depth / set_channels")
    if reverse_c and not (ofm_depth <= 16 or ofm_depth % set_channels == 0):
        # TRM 3.7.2: assert(oc_size <= 16 || oc_size % channels_in_set == 0)
        raise ScaleBiasError(f"channel reverse with {ofm_depth} channels and sets of {set_channels}", 0)
    need = stream_size(ofm_depth, set_channels)
    data = bytes(data)
    if len(data) < need:
        raise ScaleBiasError(f"stream holds {len(data)} bytes, {need} needed", len(data))
    rec = np.frombuffer(data[:need], dtype=np.uint8).reshape(-1, RECORD_BYTES)
    lo = rec[:, :8].copy().view("<u8").ravel()                 # bits 0..63
    hi = rec[:, 8].astype(np.int64) | (rec[:, 9].astype(np.int64) << 8)   # bits 64..79
    if acc48:
        bias = (lo & np.uint64((1 << 48) - 1)).astype(np.int64)
        bias -= (bias >> 47 & 1) << 48
        scale = ((lo >> np.uint64(48)) & np.uint64(0x7FFF)).astype(np.int64)
    else:
        bias = (lo & np.uint64(0xFFFFFFFF)).astype(np.int64)
        bias -= (bias >> 31 & 1) << 32
        scale = ((lo >> np.uint64(32)) & np.uint64(0x7FFFFFFF)).astype(np.int64)
    shift = hi & 0x3F
    if check_reserved:
        bad = ((lo >> np.uint64(63)) != 0) | ((hi >> 6) != 0)
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            raise ScaleBiasError("reserved bit set in a channel record", r * RECORD_BYTES + 7)
    oc = _record_channels(ofm_depth, set_channels, reverse_c)
    keep = oc < ofm_depth
    out_b = np.zeros(ofm_depth, np.int64)
    out_s = np.zeros(ofm_depth, np.int64)
    out_h = np.zeros(ofm_depth, np.int64)
    out_b[oc[keep]] = bias[keep]
    out_s[oc[keep]] = scale[keep]
    out_h[oc[keep]] = shift[keep]
    return ScaleBias(out_b, out_s, out_h)


def encode_scale_bias(bias, scale, shift, *, acc48: bool, set_channels: int,
                      reverse_c: bool = False) -> bytes:
    """Inverse of :func:`decode_scale_bias` (for tests and tools); padding records are 0."""
    bias = np.asarray(bias, dtype=np.int64).ravel()
    scale = np.asarray(scale, dtype=np.int64).ravel()
    shift = np.asarray(shift, dtype=np.int64).ravel()
    n = bias.size
    if not (scale.size == shift.size == n) or n == 0:
        raise ValueError("bias, scale and shift must have the same non-zero length")
    bbits, sbits = (48, 15) if acc48 else (32, 31)
    if bias.min() < -(1 << (bbits - 1)) or bias.max() >= 1 << (bbits - 1):
        raise ValueError(f"bias does not fit int{bbits}")
    if scale.min() < 0 or scale.max() >= 1 << sbits:
        raise ValueError(f"scale does not fit uint{sbits}")
    if shift.min() < 0 or shift.max() > 63:
        raise ValueError("shift does not fit uint6")
    oc = _record_channels(n, set_channels, reverse_c)
    keep = oc < n
    lo = np.zeros(oc.size, np.uint64)
    hi = np.zeros(oc.size, np.uint16)
    b = (bias[oc[keep]] & ((1 << bbits) - 1)).astype(np.uint64)
    lo[keep] = b | (scale[oc[keep]].astype(np.uint64) << np.uint64(bbits))
    hi[keep] = shift[oc[keep]].astype(np.uint16)
    rec = np.zeros((oc.size, RECORD_BYTES), np.uint8)
    rec[:, :8] = lo.astype("<u8").view(np.uint8).reshape(-1, 8)
    rec[:, 8:] = hi.astype("<u2").view(np.uint8).reshape(-1, 2)
    return rec.tobytes()
