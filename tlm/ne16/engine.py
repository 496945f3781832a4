"""The NE16 job executor: walks the subtiles of one job as the hardware does and performs every
memory access as a `tlm.core.memory.Transaction` on the TCDM port.

Walk (EXT: the RTL's uloop microcode `ucode/code*.yml` and the GAP9 simulator model agree):
* 3x3, 1x1: for Ko subtile, for Ho subtile, for Wo subtile, for Ki subtile (innermost);
* 3x3 depthwise: for Ko, for Ho, for Wo (the Ki subtile is the Ko subtile);
* linear: for Ko, for Ki (one output pixel).
`Engine.run()` is a generator: one `next()` is one output subtile (all its Ki subtiles, its
normalization and its streamout), which is the device's step.

Addresses (bytes, 32-bit wrap-around):
* input window pixel (r, c) of subtile (i, j, ki): INFEAT_PTR + 3*i*D1 + 3*j*D0 + 16*ki
  + r*D1 + c*D0; linear row r of subtile ki: INFEAT_PTR + ki*256 (512 in MODE16) + r*D0;
* weights of output channel k, bit-plane q: base + k*WD1 + q*WD0 with base
  WEIGHTS_PTR + (ko*32*NB_KI*Qw + ki*Qw)*9*wd0 (3x3), (...)*wd0 (1x1),
  WEIGHTS_PTR + ko*Qw*9*2 (depthwise), WEIGHTS_PTR + ko*WD2 + ki*32 (linear; EXT RTL:
  linear uses the three weight strides, the GAP9 simulator model computes the same layout);
* output/streamin pixel (r, c), word w: OUTFEAT_PTR + 3*i*OD2 + 3*j*OD1 + ko*TP*bytes
  + r*OD2 + c*OD1 + w*OD0;
* scale / shift / bias of Ko subtile ko: PTR + ko*TP*bytes (TP 32, 16 in depthwise).

Read sizes follow the GAP9 simulator model's streams: an input pixel is the Ki subtile's
bytes, a 3x3 weight record 18 bytes (9 taps x 16 channel bits), a 1x1 record Qw*2 bytes, a
linear record 32 bytes. Writes: 8-bit output one transaction per pixel (Ko subtile bytes),
16/32-bit outputs one per group of `JobConfig.out_group` channels (a 32-byte word of 16/8
channels; 8 channels for 16-bit outputs with OUTFEAT_D0 16). Parameter vectors are read in
pieces of at most 32 bytes.

Arithmetic (digest §6.7 and §9, EXT RTL): 8-bit inputs unsigned, MODE16 inputs unsigned
16-bit; weights unsigned bit-planes plus the layer offset (always applied, see
`JobConfig.weight_offset`); accumulators 32-bit, wrapping; normalization p = acc*scale exact
(scale unsigned; int64 as the digest's §6.7, pulp-nnx's functional model and the GAP9
simulator model compute it; the open RTL's 48-bit product differs only past 2**47, i.e. with
32-bit scales); without bias v = p >> shift, with bias v = wrap32(wrap32(p) + bias) >> shift
(arithmetic); no rounding for either value of CONFIG0 bit 11 (§9); saturation to QUANT_BITS,
unsigned with rectification (QUANT_RECT=0) else signed.
"""
from __future__ import annotations

import enum

import numpy as np

from ..core.memory import Memory, Resp, Transaction
from . import job as J

PORT = "TCDM"
ADDR_BITS = 32
ADDR_MASK = (1 << ADDR_BITS) - 1
PIECE = 32                           # largest transaction of a parameter vector


class Stream(enum.IntEnum):
    """The streamer an access belongs to (Transaction.channel of an NE16 access)."""
    infeat = 0
    weights = 1
    scale = 2
    scale_shift = 3
    scale_bias = 4
    streamin = 5
    outfeat = 6

    @property
    def is_write(self) -> bool:
        return self is Stream.outfeat


class MemoryFault(Exception):
    """A TCDM access answered with an error (an injected fault): the job is aborted."""

    def __init__(self, txn: Transaction):
        super().__init__(f"{txn.resp.name} on {txn.channel.name} "
                         f"{'write' if txn.write else 'read'} @0x{txn.addr:08x}+{txn.length}")
        self.txn = txn


class TcdmPort:
    """The NE16's data port: every access is one Transaction on `memory.access` (an access
    that wraps past 0xFFFFFFFF is two).

    `read_many` performs a run of equal-sized reads. When nobody can observe the individual
    transactions (a plain `Memory`: its own `access`, no log, no listener, no injected fault)
    it gathers the bytes with one vectorised read, which has exactly the effect of the
    transactions one by one; otherwise (the bench's pin memory, a logging or faulting memory)
    it performs them one by one. `fast=False` forces the per-transaction path."""

    def __init__(self, memory, fast: bool = True):
        self.memory = memory
        self.fast = fast
        self.transactions = 0

    def _unobserved(self) -> bool:
        m = self.memory
        return (self.fast and type(m).access is Memory.access and not m.log_enabled
                and not m.listeners and not m.faults)

    def read_many(self, stream: Stream, addrs, n: int) -> np.ndarray:
        """(len(addrs), n) bytes: one read of n bytes at each address, in order."""
        a = np.asarray(addrs, np.int64).reshape(-1) & ADDR_MASK
        if a.size and self._unobserved() and int(a.max()) + n <= (1 << ADDR_BITS):
            lo, hi = int(a.min()), int(a.max()) + n
            if hi - lo <= 4 * a.size * n + (1 << 16):
                span = self.memory.read_array(lo, hi - lo)
                self.transactions += a.size
                return span[(a - lo)[:, None] + np.arange(n)]
        out = np.empty((a.size, n), np.uint8)
        for i, ad in enumerate(a.tolist()):
            out[i] = self.read(stream, ad, n)
        return out

    def _pieces(self, addr: int, n: int):
        addr &= ADDR_MASK
        first = min(n, (1 << ADDR_BITS) - addr)
        yield addr, 0, first
        if first < n:
            yield 0, first, n - first

    def read(self, stream: Stream, addr: int, n: int) -> np.ndarray:
        out = np.empty(n, np.uint8)
        for a, pos, m in self._pieces(addr, n):
            txn, data = self.memory.access(Transaction(PORT, stream, False, a, m))
            self.transactions += 1
            if txn.resp != Resp.OKAY:
                raise MemoryFault(txn)
            out[pos:pos + m] = data
        return out

    def write(self, stream: Stream, addr: int, data: np.ndarray) -> None:
        buf = np.ascontiguousarray(data, dtype=np.uint8).reshape(-1)
        for a, pos, m in self._pieces(addr, buf.size):
            txn, _ = self.memory.access(Transaction(PORT, stream, True, a, m), buf[pos:pos + m])
            self.transactions += 1
            if txn.resp != Resp.OKAY:
                raise MemoryFault(txn)


# ---- arithmetic helpers ---------------------------------------------------------------------
def wrap(v: np.ndarray, bits: int) -> np.ndarray:
    """Two's complement wrap of int64 values to `bits` bits."""
    m = np.int64(1) << np.int64(bits)
    v = np.asarray(v, np.int64) & (m - 1)
    return np.where(v >= (m >> 1), v - m, v)


def saturate(v: np.ndarray, bits: int, signed: bool) -> np.ndarray:
    if signed:
        lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    else:
        lo, hi = 0, (1 << bits) - 1
    return np.clip(v, lo, hi)


def normquant(acc: np.ndarray, scale: np.ndarray, shift: np.ndarray, bias: "np.ndarray | None",
              bits: int, signed: bool) -> np.ndarray:
    """acc (K, P) int64 wrapped to 32 bits; scale, shift (K,) ; bias (K,) int32 or None.
    |acc*scale| < 2**63 (int32 x uint32), so the int64 product is exact."""
    p = acc * scale[:, None].astype(np.int64)
    if bias is not None:
        p = wrap(wrap(p, 32) + bias[:, None].astype(np.int64), 32)
    v = p >> np.minimum(shift.astype(np.int64), 63)[:, None]
    return saturate(v, bits, signed)


def _bits(records: np.ndarray) -> np.ndarray:
    """Little-endian bit unpacking of the last axis (byte b bit i -> channel 8*b + i)."""
    return np.unpackbits(records, axis=-1, bitorder="little")


# Patches of a 3x3 output subtile over a 5x5 window: PATCH[p, t] = (r + dr, c + dc)
_P = np.arange(9)
_PR = (_P // 3)[:, None] + (_P // 3)[None, :]
_PC = (_P % 3)[:, None] + (_P % 3)[None, :]
STRIDED_PIXELS = np.array([1, 0, 1, 0, 0, 0, 1, 0, 1], bool)     # EXT RTL enable_column_strided


class Engine:
    """Executes one job (a `JobConfig` without `problem()`) on a `TcdmPort`.

    `literal=True` computes every subtile with plain Python loops over pixels, taps, channels
    and bits instead of numpy (same transactions, same results; for cross-checks)."""

    def __init__(self, cfg: J.JobConfig, port: TcdmPort, literal: bool = False):
        self.cfg = cfg
        self.port = port
        self.literal = literal
        self.outputs = 0                 # output subtiles done

    # ---- the walk ----------------------------------------------------------------------------
    def run(self):
        c = self.cfg
        if c.linear:
            for ko in range(c.nb_ko):
                self._output_subtile(ko, 0, 0)
                yield ko
        else:
            for ko in range(c.nb_ko):
                for i in range(c.nb_ho):
                    for j in range(c.nb_wo):
                        self._output_subtile(ko, i, j)
                        yield ko, i, j

    def _output_subtile(self, ko: int, i: int, j: int) -> None:
        c = self.cfg
        k = c.ko_lim(ko)
        hout, wout = (1, 1) if c.linear else (c.ho_lim(i), c.wo_lim(j))
        acc = np.zeros((k, 9), np.int64)
        if c.streamin:
            self._streamin(acc, ko, i, j, hout, wout)
        if c.linear:
            for ki in range(c.nb_ki):
                acc[:, 0] += self._linear(ko, ki, k)
        elif c.depthwise:
            acc += self._depthwise(ko, i, j, k)
        else:
            for ki in range(c.nb_ki):
                acc += self._conv(ko, i, j, ki, k)
        acc = wrap(acc, 32)
        self._streamout(acc, ko, i, j, hout, wout)
        self.outputs += 1

    # ---- loads -------------------------------------------------------------------------------
    def _window(self, i: int, j: int, ki: int) -> tuple[np.ndarray, int]:
        """The padded input window of subtile (i, j, ki) as channel values (win, win, C)."""
        c = self.cfg
        kbytes = c.ki_lim(ki)
        hin, win = c.hi_lim(i), c.wi_lim(j)
        x = np.zeros((J.FBUF, J.FBUF, J.TP_IN), np.uint8)
        base = c.infeat_ptr + J.FILTER * i * c.in_d1 + J.FILTER * j * c.in_d0 + J.TP_IN * ki
        rr, ccs = np.divmod(np.arange(hin * win), win)                 # row-major order
        x[rr, ccs, :kbytes] = self.port.read_many(Stream.infeat, base + rr * c.in_d1 + ccs * c.in_d0,
                                                  kbytes)
        # explicit padding: border subtiles only; bottom/right counted from 5 (seed, EXT RTL)
        rows, cols = np.arange(J.FBUF)[:, None], np.arange(J.FBUF)[None, :]
        pad = np.zeros((J.FBUF, J.FBUF), bool)
        if i == 0:
            pad |= rows < c.pad_top
        if i == c.nb_ho - 1:
            pad |= rows >= J.FBUF - c.pad_bottom
        if j == 0:
            pad |= cols < c.pad_left
        if j == c.nb_wo - 1:
            pad |= cols >= J.FBUF - c.pad_right
        pad &= (rows < hin) & (cols < win)
        if pad.any():
            fill = np.zeros(J.TP_IN, np.uint8)
            if c.mode16:
                fill[0:kbytes:2] = c.pad_value & 0xFF
                fill[1:kbytes:2] = c.pad_value >> 8
            else:
                fill[:kbytes] = c.pad_value & 0xFF          # 8-bit mode: the low byte (A8)
            x[pad] = fill
        if c.mode16:
            v = x[..., 0::2].astype(np.int64) | (x[..., 1::2].astype(np.int64) << 8)
        else:
            v = x.astype(np.int64)
        return v, kbytes

    def _tap_enable(self) -> np.ndarray:
        """FILTER_MASK as 9 tap enables (3x3 modes; EXT: ignored in 1x1 and linear)."""
        c = self.cfg
        dr, dc = np.arange(9) // 3, np.arange(9) % 3
        masked = (dr < c.mask_top) | (dc >= 3 - c.mask_right) | (dr >= 3 - c.mask_bottom) | (dc < c.mask_left)
        return ~masked

    def _records(self, base: int, k: int, qw: int, size: int, d1: int, d0: int) -> np.ndarray:
        """Weight records of k output channels x qw bit-planes (bit-plane inner)."""
        kk, q = np.divmod(np.arange(k * qw), qw)
        return self.port.read_many(Stream.weights, base + kk * d1 + q * d0, size).reshape(k, qw, size)

    def _planes(self, bits: np.ndarray) -> np.ndarray:
        """(..., qw, ...C) bit-planes on axis 1 -> unsigned weights, plus the offset."""
        qw = bits.shape[1]
        scale = (np.int64(1) << np.arange(qw, dtype=np.int64)).reshape((1, qw) + (1,) * (bits.ndim - 2))
        return (bits.astype(np.int64) * scale).sum(axis=1) + self.cfg.weight_offset

    # ---- compute -----------------------------------------------------------------------------
    def _conv(self, ko: int, i: int, j: int, ki: int, k: int) -> np.ndarray:
        c = self.cfg
        x, _ = self._window(i, j, ki)
        ch = c.channels
        if c.fs == 3:
            base = c.weights_ptr + (ko * J.TP_OUT * c.nb_ki * c.qw + ki * c.qw) * 9 * c.wd0
            rec = self._records(base, k, c.qw, 18, c.w_d1, c.w_d0)
            rec = rec[..., :9 * c.wd0].reshape(k, c.qw, 9, c.wd0)
            w = self._planes(_bits(rec))                      # (k, 9 taps, ch)
            w = w * self._tap_enable()[None, :, None]
            patches = x[_PR, _PC]                             # (9 pix, 9 taps, ch)
            if self.literal:
                return _literal_conv(w, patches)
            return w.reshape(k, 9 * ch) @ patches.reshape(9, 9 * ch).T
        base = c.weights_ptr + (ko * J.TP_OUT * c.nb_ki * c.qw + ki * c.qw) * c.wd0
        rec = self.port.read_many(Stream.weights, base + np.arange(k) * c.w_d1, c.qw * 2)
        rec = rec[:, :c.qw * c.wd0].reshape(k, c.qw, c.wd0)
        w = self._planes(_bits(rec))                          # (k, ch)
        pix = x[:3, :3].reshape(9, 1, ch)                     # 1x1: the 3x3 window pixels
        if self.literal:
            return _literal_conv(w[:, None, :], pix)
        return w @ pix[:, 0, :].T

    def _depthwise(self, ko: int, i: int, j: int, k: int) -> np.ndarray:
        c = self.cfg
        x, _ = self._window(i, j, ko)
        base = c.weights_ptr + ko * c.qw * 9 * 2
        # the GAP9 simulator model streams the Qw records again for every channel
        rec = self._records(base, k, c.qw, 18, 0, c.w_d0)     # (k, qw, 18): one set per channel
        bits = _bits(rec.reshape(k, c.qw, 9, 2))              # (k, qw, 9, 16)
        own = bits[np.arange(k), :, :, np.arange(k)]          # (k, qw, 9): channel kk's bits
        w = self._planes(own) * self._tap_enable()[None, :]   # (k, 9)
        patches = x[_PR, _PC][:, :, :k]                       # (9 pix, 9 taps, k)
        if self.literal:
            return _literal_dw(w, patches)
        return np.einsum("kt,ptk->kp", w, patches)

    def _linear(self, ko: int, ki: int, k: int) -> np.ndarray:
        c = self.cfg
        rows = c.ki_lim(ki) * (2 if c.mode16 else 1)
        base = c.infeat_ptr + ki * J.LINEAR_KI_BYTES * (2 if c.mode16 else 1)
        xb = np.zeros(J.LINEAR_ROWS * 2 * J.TP_IN if c.mode16 else J.LINEAR_ROWS * J.TP_IN, np.uint8)
        xb[:rows * J.TP_IN] = self.port.read_many(Stream.infeat, base + np.arange(rows) * c.in_d0,
                                                  J.TP_IN).reshape(-1)
        x = (xb[0::2].astype(np.int64) | (xb[1::2].astype(np.int64) << 8)) if c.mode16 \
            else xb.astype(np.int64)                          # (256,) channel values
        wbase = c.weights_ptr + ko * c.w_d2 + ki * 32
        rec = self._records(wbase, k, c.qw, 32, c.w_d1, c.w_d0)
        w = self._planes(_bits(rec))                          # (k, 256)
        if self.literal:
            return _literal_conv(w[:, None, :], x.reshape(1, 1, -1))[:, 0]
        return w @ x

    # ---- streamin / normalization / streamout --------------------------------------------------
    def _pixels(self, hout: int, wout: int, strided: bool) -> list:
        if self.cfg.linear:
            return [0]
        ok = [p for p in range(9) if p // 3 < hout and p % 3 < wout]
        return [p for p in ok if STRIDED_PIXELS[p]] if strided else ok

    def _out_base(self, ko: int, i: int, j: int, nbytes: int) -> int:
        c = self.cfg
        return (c.outfeat_ptr + J.FILTER * i * c.out_d2 + J.FILTER * j * c.out_d1
                + ko * c.tp_out * nbytes)

    def _streamin(self, acc, ko, i, j, hout, wout) -> None:
        c = self.cfg
        k = acc.shape[0]
        base = self._out_base(ko, i, j, 4)
        for p in self._pixels(hout, wout, strided=False):
            for w in range((k + 7) // 8):
                n = min(8, k - 8 * w)
                raw = self.port.read(Stream.streamin, base + (p // 3) * c.out_d2 + (p % 3) * c.out_d1
                                     + w * c.out_d0, 4 * n)
                acc[8 * w:8 * w + n, p] = raw.view("<i4")

    def _params(self, stream: Stream, base: int, nbytes: int) -> np.ndarray:
        out = np.empty(nbytes, np.uint8)
        for pos in range(0, nbytes, PIECE):
            m = min(PIECE, nbytes - pos)
            out[pos:pos + m] = self.port.read(stream, base + pos, m)
        return out

    def _streamout(self, acc, ko, i, j, hout, wout) -> None:
        c = self.cfg
        k = acc.shape[0]
        bits = c.out_bits
        if c.quant:
            tp = c.tp_out
            if c.norm_shift:
                shift = self._params(Stream.scale_shift, c.scale_shift_ptr + ko * tp, k) & 0x3F
            else:
                shift = np.full(k, c.right_shift, np.uint8)
            nb = c.norm_bits // 8
            raw = self._params(Stream.scale, c.scale_ptr + ko * tp * nb, k * nb)
            scale = raw.view({1: "u1", 2: "<u2", 4: "<u4"}[nb]).astype(np.int64)
            bias = None
            if c.norm_bias:
                bias = self._params(Stream.scale_bias, c.scale_bias_ptr + ko * tp * 4, 4 * k).view("<i4")
            if self.literal:
                out = _literal_normquant(acc, scale, shift, bias, bits, c.quant_rect)
            else:
                out = normquant(acc, scale, shift, bias, bits, c.quant_rect)
        else:   # streamout of the raw accumulators (saturated to 8/16 bits when narrower)
            out = acc if bits == 32 else saturate(acc, bits, c.quant_rect)
        nbytes = bits // 8
        dtype = {1: "u1", 2: "<u2", 4: "<u4"}[nbytes]
        data = (out & ((1 << bits) - 1)).astype(dtype)        # (k, 9) two's complement
        base = self._out_base(ko, i, j, nbytes)
        per_word = c.out_group
        for p in self._pixels(hout, wout, c.strided):
            pix = base + (p // 3) * c.out_d2 + (p % 3) * c.out_d1
            for w in range((k + per_word - 1) // per_word):
                vals = np.ascontiguousarray(data[w * per_word:(w + 1) * per_word, p])
                self.port.write(Stream.outfeat, pix + w * c.out_d0, vals.view(np.uint8))


# ---- the literal path (Python loops; cross-checks only) ------------------------------------
def _literal_conv(w: np.ndarray, patches: np.ndarray) -> np.ndarray:
    """w (K, T, C), patches (P, T, C) -> (K, P), one multiply-accumulate at a time."""
    kk, tt, cc = w.shape
    pp = patches.shape[0]
    out = np.zeros((kk, pp), np.int64)
    wl, xl = w.tolist(), patches.tolist()
    for k in range(kk):
        for p in range(pp):
            s = 0
            for t in range(tt):
                for ch in range(cc):
                    s += wl[k][t][ch] * xl[p][t][ch]
            out[k, p] = s
    return out


def _literal_dw(w: np.ndarray, patches: np.ndarray) -> np.ndarray:
    kk, tt = w.shape
    out = np.zeros((kk, 9), np.int64)
    for k in range(kk):
        for p in range(9):
            out[k, p] = sum(int(w[k, t]) * int(patches[p, t, k]) for t in range(tt))
    return out


def _literal_normquant(acc, scale, shift, bias, bits, signed) -> np.ndarray:
    out = np.zeros(acc.shape, np.int64)

    def wrapn(v: int, n: int) -> int:
        v &= (1 << n) - 1
        return v - (1 << n) if v >> (n - 1) else v
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    for k in range(acc.shape[0]):
        for p in range(acc.shape[1]):
            v = int(acc[k, p]) * int(scale[k])
            if bias is not None:
                v = wrapn(wrapn(v, 32) + int(bias[k]), 32)
            v >>= min(int(shift[k]), 63)
            out[k, p] = min(max(v, lo), hi)
    return out
