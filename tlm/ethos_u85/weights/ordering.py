"""Weight ordering of the Ethos-U85 (TRM r0p0 issue 05, section 3.9.2).

The weight decoders deliver weights in a brick order that depends on the MAC
configuration, microblock, OFM block depth, IFM precision, weight order
(depth-first / part-kernel-first), sparsity, stride, dilation and kernel decomposition.
With ``num_wd > 1`` the OFM channels are split over the decoders in groups of four
(stream ``(o >> 2) % num_wd`` of each microblock), each decoder reading its own stream
(WEIGHT_BASE, WEIGHT1_BASE, ...). FWD merges the per-decoder streams block by block into
one stream.

This module computes, for every element of every stream, the flat index of the weight it
carries in the tensor ``weight[ofm][ky][kx][ifm]`` (undilated kernel; ``ifm`` extent 1 for
depthwise), or -1 for an inserted padding zero; then it scatters decoded streams into
that tensor (and gathers a tensor into streams, for the encoder and tests).

TRM pseudocode defects (digest erratum E-21) and how they are read here:

* ``kernel_x``/``kernel_y`` in the ``subk_w``/``subk_h`` lines are ``subk_x``/``subk_y``;
  ``ifm_blk_z`` is ``iblk_z``; ``ublk_depth`` is ``wblk_o``; ``strided_kw`` in
  ``depthfirst_order`` is ``kw``; the call sites pass arguments in a different order
  from the definitions: they are matched by name.
* The calls pass ``iblk_z`` where the IFM offset must be ``iblk_z + wblk_iz`` (otherwise
  the second ``wblk_iz`` pass of 16-bit part-kernel, wblk_i = 8 < 16, would repeat the
  first 8 channels). We follow the digest, which checked this against Vela.
* The ``mb_i16only`` assert is applied to convolutions only: the digest reports Vela uses
  the 1x1x16 (U85-128) and 1x2x16 (U85-256) microblocks for 8-bit depthwise.
All three choices follow the digest (verified there against Vela on 428 configurations);
the tests here recheck them against Vela-compiled networks.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..config import Policy
from ...core.errors import BudgetExceeded, Unpredictable

__all__ = [
    "WeightOrder",
    "NUM_WD",
    "num_wd",
    "microblock_depth",
    "reference_order",
    "stream_indices",
    "fwd_indices",
    "weights_from_streams",
    "weights_from_fwd",
    "streams_from_weights",
    "fwd_from_weights",
    "decode_weight_tensor",
    "decode_weight_tensor_ref",
]

# TRM Table 3-90: macs_per_cc -> (num_wd, dw8_pad_k, dw16_pad_k)
NUM_WD = {128: (1, 0, 2), 256: (1, 0, 2), 512: (2, 2, 2), 1024: (4, 6, 6), 2048: (4, 6, 6)}
# TRM microblock_depth(): microblock enum (u1x1, u1x2, u1x4, u2x2, u2x4, u4x4) -> divisor
_MB_DIV = (8, 16, 32, 32, 64, 128)


def num_wd(macs: int) -> int:
    return NUM_WD[macs][0]


def microblock_depth(macs: int, microblock: int) -> int:
    return macs // _MB_DIV[microblock]


@dataclass(frozen=True)
class WeightOrder:
    """The op parameters that determine the weight order (all from registers).

    ``macs``: 1 << CONFIG.macs_per_cc (128..2048). ``microblock``: ACC_FORMAT.microblock
    (0..5). ``depthwise``: NPU_OP_DEPTHWISE. ``part_kernel_first``: KERNEL_STRIDE.weight_order.
    ``sparse``: WEIGHT_FORMAT.weight_sparsity == sparse_2_4. ``ifm16bit``: IFM precision b16.
    ``ofm_depth``/``ifm_depth``/``ofm_block_depth``: the *_M1 registers + 1.
    ``kernel_height``/``kernel_width``: KERNEL_HEIGHT/WIDTH_M1 + 1 (dilated extent).
    ``dilation_x``/``dilation_y``: the KERNEL_STRIDE register bits (0 or 1).
    ``stride_x``/``stride_y``: 1..3. ``d8x8``: KERNEL_STRIDE.decomposition == d8x8.
    """
    macs: int
    microblock: int
    depthwise: bool
    part_kernel_first: bool
    sparse: bool
    ifm16bit: bool
    ofm_depth: int
    ifm_depth: int
    ofm_block_depth: int
    kernel_height: int
    kernel_width: int
    dilation_x: int = 0
    dilation_y: int = 0
    stride_x: int = 1
    stride_y: int = 1
    d8x8: bool = True

    @classmethod
    def from_registers(cls, regs, macs: int, depthwise: bool) -> "WeightOrder":
        """Build from the sticky register state: any object with
        ``field(command_name, field_name) -> int`` (e.g. ``tlm.ethos_u85.isa.RegisterSnapshot``).
        ``macs``: 1 << CONFIG.macs_per_cc. ``depthwise``: the op is NPU_OP_DEPTHWISE."""
        f = regs.field
        ks = "NPU_SET_KERNEL_STRIDE"
        return cls(
            macs=macs,
            microblock=f("NPU_SET_ACC_FORMAT", "microblock"),
            depthwise=bool(depthwise),
            part_kernel_first=f(ks, "weight_order") == 1,
            sparse=f("NPU_SET_WEIGHT_FORMAT", "weight_sparsity") == 1,
            ifm16bit=f("NPU_SET_IFM_PRECISION", "activation_precision") == 1,
            ofm_depth=f("NPU_SET_OFM_DEPTH_M1", "depth_m1") + 1,
            ifm_depth=f("NPU_SET_IFM_DEPTH_M1", "depth_m1") + 1,
            ofm_block_depth=f("NPU_SET_OFM_BLK_DEPTH_M1", "depth_m1") + 1,
            kernel_height=f("NPU_SET_KERNEL_HEIGHT_M1", "height_m1") + 1,
            kernel_width=f("NPU_SET_KERNEL_WIDTH_M1", "width_m1") + 1,
            dilation_x=f(ks, "dilation_x"),
            dilation_y=f(ks, "dilation_y"),
            stride_x=2 * f(ks, "stride_x_msb") + f(ks, "stride_x_lsb") + 1,
            stride_y=2 * f(ks, "stride_y_msb") + f(ks, "stride_y_lsb") + 1,
            d8x8=f(ks, "decomposition") == 0,
        )

    # derived values ----------------------------------------------------------------------
    @property
    def num_wd(self) -> int:
        return NUM_WD[self.macs][0]

    @property
    def kh(self) -> int:
        """Undilated kernel height (the weight tensor's)."""
        return (self.kernel_height + (1 << self.dilation_y) - 1) >> self.dilation_y

    @property
    def kw(self) -> int:
        return (self.kernel_width + (1 << self.dilation_x) - 1) >> self.dilation_x

    @property
    def in_depth(self) -> int:
        return 1 if self.depthwise else self.ifm_depth

    @property
    def shape(self) -> tuple:
        """Shape of the weight tensor: [OFM, KH, KW, IFM] ([C, KH, KW, 1] for depthwise)."""
        return (self.ofm_depth, self.kh, self.kw, self.in_depth)

    def check(self):
        """The TRM's asserts on the parameters (UNPREDICTABLE when violated)."""
        if self.macs not in NUM_WD:
            raise Unpredictable(f"weight order: macs_per_cc {self.macs}")
        if not 0 <= self.microblock <= 5:
            raise Unpredictable(f"weight order: microblock {self.microblock}")
        if min(self.ofm_depth, self.ifm_depth, self.ofm_block_depth,
               self.kernel_height, self.kernel_width) < 1:
            raise Unpredictable("weight order: zero-sized dimension")
        if not (1 <= self.stride_x <= 3 and 1 <= self.stride_y <= 3):
            raise Unpredictable("weight order: stride outside 1..3")     # E-26
        if self.dilation_x not in (0, 1) or self.dilation_y not in (0, 1):
            raise Unpredictable("weight order: dilation bit not 0/1")
        mbd = microblock_depth(self.macs, self.microblock)
        if mbd < 4 * self.num_wd:
            raise Unpredictable(f"weight order: microblock depth {mbd} with {self.num_wd} weight decoders")
        mb_i16only = mbd == 16 and self.microblock in (0, 1)
        # E-21: the TRM asserts this for every op; applied to convolutions only (see module doc).
        if (not self.depthwise and mb_i16only
                and not (self.ifm16bit and self.kernel_height == 1 and self.kernel_width == 1)):
            raise Unpredictable("weight order: mb_i16only microblock needs 16-bit IFM and a 1x1 kernel")

    def _blocking(self):
        mbd = microblock_depth(self.macs, self.microblock)
        partkernel = self.part_kernel_first or self.depthwise
        mb_i16only = mbd == 16 and self.microblock in (0, 1)
        if partkernel:
            ifm_block_depth = 16                        # unused for depthwise
        elif not self.sparse and mb_i16only:
            ifm_block_depth = 32
        elif not self.sparse or self.ifm16bit:
            ifm_block_depth = 64
        else:
            ifm_block_depth = 128                       # sparse with 8-bit IFM
        if partkernel:
            wblk_k = 5 if (not self.ifm16bit and not self.sparse and not self.depthwise) else 10
        else:
            wblk_k = 1
        wblk_o = mbd
        if self.depthwise:
            wblk_i = 1
        elif partkernel and self.ifm16bit and not self.sparse:
            wblk_i = 8
        else:
            wblk_i = ifm_block_depth
        if self.depthwise:
            i_sz = 1
        else:
            i_sz = 16 if self.sparse else 8
        _, dw8, dw16 = NUM_WD[self.macs]
        dw_pad_k = dw16 if self.ifm16bit else dw8
        return partkernel, ifm_block_depth, wblk_k, wblk_o, wblk_i, i_sz, dw_pad_k

    @property
    def fwd_block(self) -> int:
        """FWD interleave block: wblk_k * wblk_o * wblk_i / num_wd elements per decoder."""
        _, _, wblk_k, wblk_o, wblk_i, _, _ = self._blocking()
        return wblk_k * wblk_o * wblk_i // self.num_wd

    def _calls(self):
        """The sequence of (subk_x, subk_y, oz, iz, subk_w, subk_h) brick calls of the TRM's
        outer loops (with the E-21 corrections)."""
        partkernel, ifm_block_depth, wblk_k, wblk_o, wblk_i, i_sz, dw_pad_k = self._blocking()
        decomp = 8 if self.d8x8 else 4
        decomp_w, decomp_h = decomp >> self.dilation_x, decomp >> self.dilation_y
        kwu, khu = self.kw, self.kh
        calls = []
        start, end = 0, (1 if self.depthwise else self.ifm_depth)
        inc = -ifm_block_depth
        for oblk_z in range(0, self.ofm_depth, self.ofm_block_depth):
            inc = -inc                                   # zig-zag over IFM blocks
            iblk_z = start
            while 0 <= iblk_z < end:
                start = iblk_z
                for subk_x in range(0, kwu, decomp_w):
                    for subk_y in range(0, khu, decomp_h):
                        subk_w = min(kwu - subk_x, decomp_w)
                        subk_h = min(khu - subk_y, decomp_h)
                        iblk_depth = 1 if self.depthwise else min(ifm_block_depth, self.ifm_depth - iblk_z)
                        for wblk_iz in range(0, iblk_depth, wblk_i):
                            oblk_depth = min(self.ofm_block_depth, self.ofm_depth - oblk_z)
                            for ublk_z in range(0, oblk_depth, wblk_o):
                                calls.append((subk_x, subk_y, oblk_z + ublk_z, iblk_z + wblk_iz,
                                              subk_w, subk_h))
                iblk_z += inc
        return calls


# --- reference (element by element, follows the TRM pseudocode) -----------------------------

def reference_order(p: WeightOrder):
    """Plain-Python transcription of TRM 3.9.2 (with the E-21 corrections). Returns one list
    per weight decoder whose entries are (ofm, ky, kx, ifm) or None for padding. Slow: used
    by the tests to check :func:`stream_indices`."""
    p.check()
    partkernel, ifm_block_depth, wblk_k, wblk_o, wblk_i, i_sz, dw_pad_k = p._blocking()
    nwd = p.num_wd
    streams = [[] for _ in range(nwd)]
    in_depth = p.in_depth

    def put(ws, o, y, x, i):
        streams[ws].append((o, y, x, i) if (o < p.ofm_depth and i < in_depth) else None)

    for (kx0, ky0, oz, iz, kw, kh) in p._calls():
        if partkernel:
            subk_num = -(-(kw * kh) // wblk_k) * wblk_k
            for sy in range(p.stride_y):
                for sx in range(p.stride_x):
                    skh = (kh + p.stride_y - 1 - sy) // p.stride_y
                    for ky in range(skh):
                        skw = (kw + p.stride_x - 1 - sx) // p.stride_x
                        for kx in range(skw):
                            x = kx if ky % 2 == 0 else skw - 1 - kx
                            subk_num -= 1
                            for i in range(0, wblk_i, i_sz):
                                for o in range(wblk_o):
                                    ws = (o >> 2) & (nwd - 1)
                                    for ii in range(i_sz):
                                        put(ws, oz + o, ky0 + sy + ky * p.stride_y,
                                            kx0 + sx + x * p.stride_x, iz + i + ii)
                            if p.depthwise and subk_num % wblk_k == 0:
                                for ws in range(nwd):
                                    streams[ws].extend([None] * (dw_pad_k * wblk_o // nwd))
            if subk_num > 0:
                n = (subk_num + (dw_pad_k if p.depthwise else 0)) * wblk_i * wblk_o // nwd
                for ws in range(nwd):
                    streams[ws].extend([None] * n)
        else:
            for ky in range(kh):
                for kx in range(kw):
                    x = kx if ky % 2 == 0 else kw - 1 - kx
                    for i in range(0, wblk_i, i_sz):
                        for o in range(wblk_o):
                            ws = (o >> 2) & (nwd - 1)
                            for ii in range(i_sz):
                                put(ws, oz + o, ky0 + ky, kx0 + x, iz + i + ii)
    return streams


# --- vectorised ------------------------------------------------------------------------------

def _slots(p: WeightOrder, kw: int, kh: int, partkernel: bool, wblk_k: int, dw_pad_k: int):
    """Kernel positions of one brick call, in stream order, as (y, x) relative to the
    sub-kernel origin; (-1, -1) is a padding slot (a whole position of zeros)."""
    ys, xs = [], []
    if partkernel:
        count = 0
        for sy in range(p.stride_y):
            for sx in range(p.stride_x):
                skh = (kh + p.stride_y - 1 - sy) // p.stride_y
                skw = (kw + p.stride_x - 1 - sx) // p.stride_x
                for ky in range(skh):
                    for kx in range(skw):
                        x = kx if ky % 2 == 0 else skw - 1 - kx
                        ys.append(sy + ky * p.stride_y)
                        xs.append(sx + x * p.stride_x)
                        count += 1
                        if p.depthwise and count % wblk_k == 0:
                            ys += [-1] * dw_pad_k
                            xs += [-1] * dw_pad_k
        rem = (-count) % wblk_k
        if rem:
            n = rem + (dw_pad_k if p.depthwise else 0)
            ys += [-1] * n
            xs += [-1] * n
    else:
        for ky in range(kh):
            for kx in range(kw):
                ys.append(ky)
                xs.append(kx if ky % 2 == 0 else kw - 1 - kx)
    return np.asarray(ys, np.int64), np.asarray(xs, np.int64)


MAX_STREAM_ENTRIES = Policy.max_weight_stream_entries   # default budget: weight-stream positions of one op


@lru_cache(maxsize=256)
def _stream_indices_cached(p: WeightOrder, max_entries: int = MAX_STREAM_ENTRIES):
    p.check()
    partkernel, ifm_block_depth, wblk_k, wblk_o, wblk_i, i_sz, dw_pad_k = p._blocking()
    nwd = p.num_wd
    O, KH, KW, I = p.shape
    calls = np.asarray(p._calls(), dtype=np.int64).reshape(-1, 6)
    # Group the calls by sub-kernel size; each group shares one slot template.
    templates = {}
    key = calls[:, 4] * 4096 + calls[:, 5]
    n_slots = np.empty(calls.shape[0], np.int64)
    for k in np.unique(key).tolist():
        kw, kh = k >> 12, k & 4095
        templates[(kw, kh)] = t = _slots(p, kw, kh, partkernel, wblk_k, dw_pad_k)
        n_slots[key == k] = t[0].size
    entries = int(n_slots.sum()) * wblk_i * wblk_o          # all decoders, padding included
    if entries > max_entries:
        raise BudgetExceeded(f"weight order: {entries} stream positions (padding included) exceed the "
                             f"model's budget ({max_entries})")
    # Inner order within a slot, per decoder: IFM group, then OFM channel, then IFM channel.
    # The flat index is linear in (o, y, x, i): per call a base, plus a per-slot offset,
    # plus a per-element offset within the slot; only calls at the tensor's OFM/IFM edges
    # and padding slots need the -1 marking.
    ig = np.arange(0, wblk_i, i_sz)
    o_all = np.arange(wblk_o)
    ii = np.arange(i_sz)
    so, sy, sx = KH * KW * I, KW * I, I
    base = calls[:, 2] * so + calls[:, 1] * sy + calls[:, 0] * sx + calls[:, 3]
    edge = (calls[:, 2] + wblk_o > O) | (calls[:, 3] + wblk_i > I)
    single = len(templates) == 1
    out = []
    for ws in range(nwd):
        o_ws = o_all[((o_all >> 2) & (nwd - 1)) == ws]
        o_in = np.broadcast_to(o_ws[None, :, None], (ig.size, o_ws.size, i_sz)).ravel()
        i_in = (ig[:, None, None] + ii[None, None, :] + 0 * o_ws[None, :, None]).ravel()
        S = o_in.size                                # = wblk_i * wblk_o / num_wd
        inner = o_in * so + i_in
        seg = n_slots * S
        offs = np.concatenate(([0], np.cumsum(seg)[:-1]))
        res = np.empty(int(seg.sum()), np.int64)
        for (kw, kh), (ys, xs) in templates.items():
            sel = slice(None) if single else np.flatnonzero((calls[:, 4] == kw) & (calls[:, 5] == kh))
            nc = calls.shape[0] if single else sel.size
            tmpl = ((ys * sy + xs * sx)[:, None] + inner[None, :]).ravel()     # [ns * S]
            idx = np.add(base[sel][:, None], tmpl[None, :])
            pad = np.flatnonzero(ys < 0)
            if pad.size:
                idx.reshape(nc, ys.size, S)[:, pad, :] = -1
            ecalls = np.flatnonzero(edge[sel])
            if ecalls.size:
                c = calls[sel][ecalls]
                bad = ((c[:, 2, None] + o_in[None, :]) >= O) | ((c[:, 3, None] + i_in[None, :]) >= I)
                sub = idx[ecalls].reshape(ecalls.size, ys.size, S)
                sub[np.broadcast_to(bad[:, None, :], sub.shape)] = -1
                idx[ecalls] = sub.reshape(ecalls.size, -1)
            if single:
                res = idx.reshape(-1)
            else:
                pos = offs[sel][:, None] + np.arange(idx.shape[1])[None, :]
                res[pos.ravel()] = idx.ravel()
        res.setflags(write=False)
        out.append(res)
    return tuple(out)


def stream_indices(p: WeightOrder, max_entries: int = MAX_STREAM_ENTRIES) -> tuple:
    """Per weight decoder: int64 array, one entry per stream element, holding the flat index
    into the weight tensor of shape ``p.shape`` or -1 for an inserted zero. Cached."""
    return _stream_indices_cached(p, max_entries)


@lru_cache(maxsize=64)
def _fwd_cached(p: WeightOrder, max_entries: int = MAX_STREAM_ENTRIES):
    if p.depthwise:
        # TRM 2.4 / 3.9.11: the FWD supports convolution only, not depthwise.
        raise Unpredictable("FWD weight format with NPU_OP_DEPTHWISE")
    streams = stream_indices(p, max_entries)
    blk = p.fwd_block
    n = streams[0].size
    if any(s.size != n for s in streams) or n % blk:
        raise Unpredictable("FWD merge: streams not whole weight blocks")
    if len(streams) == 1:
        return streams[0]                # read-only already; the merge is the identity
    # TRM 3.9.2: for each block i: for each ws: block i of stream ws.
    res = np.stack([s.reshape(-1, blk) for s in streams], axis=1).ravel()
    res.setflags(write=False)
    return res


def fwd_indices(p: WeightOrder, max_entries: int = MAX_STREAM_ENTRIES) -> np.ndarray:
    """The merged FWD stream order (TRM 3.9.2 'fwd_weight_stream'), as flat indices / -1."""
    return _fwd_cached(p, max_entries)


def _scatter(p: WeightOrder, parts, values, check_padding: bool):
    W = np.zeros(int(np.prod(p.shape)), dtype=np.int16)
    for k, (idx, v) in enumerate(zip(parts, values)):
        v = np.asarray(v)
        if v.size < idx.size:
            raise ValueError(f"weight stream {k} holds {v.size} weights, {idx.size} needed")
        v = v[:idx.size]
        if not check_padding and idx.size and int(idx.min()) >= 0:
            W[idx] = v                   # no padding positions (the common 1x1 case)
            continue
        ok = idx >= 0
        W[idx[ok]] = v[ok]
        if check_padding and np.any(v[~ok] != 0):
            raise ValueError(f"weight stream {k}: non-zero value in a padding position")
    return W.reshape(p.shape)


def weights_from_streams(p: WeightOrder, streams, check_padding: bool = False) -> np.ndarray:
    """Decoded SWD streams (one per weight decoder, stream order) -> weight tensor
    [OFM, KH, KW, IFM] (depthwise: [C, KH, KW, 1]), int16. Extra trailing values are
    ignored; a short stream raises ValueError."""
    idx = stream_indices(p)
    if len(streams) != len(idx):
        raise ValueError(f"{len(idx)} weight streams expected, got {len(streams)}")
    return _scatter(p, idx, streams, check_padding)


def weights_from_fwd(p: WeightOrder, values, check_padding: bool = False) -> np.ndarray:
    """Decoded FWD stream -> weight tensor (see :func:`weights_from_streams`)."""
    return _scatter(p, [fwd_indices(p)], [values], check_padding)


def _gather(idx, W):
    flat = np.asarray(W).ravel()
    return np.where(idx >= 0, flat[np.maximum(idx, 0)], 0).astype(np.int16)


def streams_from_weights(p: WeightOrder, W) -> list:
    """Weight tensor of shape ``p.shape`` -> the per-decoder streams (padding zeros
    included), each an int16 array in stream order."""
    W = np.asarray(W)
    if W.shape != p.shape:
        raise ValueError(f"weight tensor shape {W.shape}, expected {p.shape}")
    return [_gather(i, W) for i in stream_indices(p)]


def fwd_from_weights(p: WeightOrder, W) -> np.ndarray:
    W = np.asarray(W)
    if W.shape != p.shape:
        raise ValueError(f"weight tensor shape {W.shape}, expected {p.shape}")
    return _gather(fwd_indices(p), W)


def decode_weight_tensor(p: WeightOrder, streams, fwd: bool = False,
                         check_padding: bool = False, max_entries: int = MAX_STREAM_ENTRIES) -> np.ndarray:
    """One call for the executor: the raw stream bytes of an op -> weight tensor.

    ``streams``: for SWD, ``p.num_wd`` byte strings (WEIGHT_BASE/LENGTH, WEIGHT1_..., ...);
    for FWD (``fwd=True``) one byte string. Raises :class:`WeightStreamError` for a corrupt
    or short stream and :class:`Unpredictable` for parameters the TRM asserts against.
    """
    from .codec import WeightStreamError, decode_fwd, decode_swd
    if fwd:
        if len(streams) != 1:
            raise ValueError("FWD uses a single weight stream")
        idx = fwd_indices(p, max_entries)
        vals = decode_fwd(streams[0], idx.size)
        return _scatter(p, [idx], [vals], check_padding)
    idx = stream_indices(p, max_entries)
    if len(streams) != len(idx):
        raise ValueError(f"{len(idx)} weight streams expected, got {len(streams)}")
    vals = []
    for k, (i, data) in enumerate(zip(idx, streams)):
        try:
            vals.append(decode_swd(data, i.size))
        except WeightStreamError as e:
            raise WeightStreamError(f"decoder {k}: {e.msg}", e.bit) from None
    return _scatter(p, idx, vals, check_padding)


def decode_weight_tensor_ref(p: WeightOrder, streams, fwd: bool = False) -> np.ndarray:
    """:func:`decode_weight_tensor` on the literal path only (the TLM's reference model,
    tlm.ethos_u85.literal): the stream order from :func:`reference_order` (TRM 3.9.2 in plain
    Python), the SWD streams decoded symbol by symbol (``decode_swd_ref``), the FWD merge
    written out block by block, each weight placed one at a time.  Returns int64
    ``[OFM, KH, KW, IFM]`` (depthwise ``[C, KH, KW, 1]``); errors as decode_weight_tensor."""
    from .codec import WeightStreamError, decode_fwd, decode_swd_ref
    order = reference_order(p)
    O, KH, KW, I = p.shape
    W = np.zeros((O, KH, KW, I), np.int64)
    if fwd:
        if p.depthwise:
            raise Unpredictable("FWD weight format with NPU_OP_DEPTHWISE")
        if len(streams) != 1:
            raise ValueError("FWD uses a single weight stream")
        blk = p.fwd_block
        n = len(order[0])
        if any(len(s) != n for s in order) or n % blk:
            raise Unpredictable("FWD merge: streams not whole weight blocks")
        merged = []                          # TRM 3.9.2: for each block i: for each ws: block i of ws
        for i in range(n // blk):
            for s in order:
                merged.extend(s[i * blk:(i + 1) * blk])
        vals = decode_fwd(streams[0], len(merged))
        parts = [(merged, vals)]
    else:
        if len(streams) != len(order):
            raise ValueError(f"{len(order)} weight streams expected, got {len(streams)}")
        parts = []
        for k, (o, data) in enumerate(zip(order, streams)):
            try:
                parts.append((o, decode_swd_ref(data, len(o))))
            except WeightStreamError as e:
                raise WeightStreamError(f"decoder {k}: {e.msg}", e.bit) from None
    for o, vals in parts:
        for pos, v in zip(o, vals.tolist()):
            if pos is not None:
                W[pos] = v
    return W
