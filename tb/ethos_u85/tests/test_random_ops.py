"""Constrained-random kernel operations through the pins, every byte against the scoreboard.

Each test builds random but TRM-legal command streams with ``tlm.ethos_u85.isa.encode`` (TRM register
and field names), writes random inputs into the bench memory, runs every stream as one job
through the pins (tb.ethos_u85.env.Env) and lets the scoreboard's reference TLM check STATUS, QREAD,
IRQ edges and every byte written. On DUT=tlm that reference is the literal model
(tlm.ethos_u85.literal: every kernel op's literal TRM loop, the literal fmap paths, no batching,
plans or traces), so the TLM's fast paths behind the pins are checked against it; on DUT=rtl
it is the ordinary TLM. The value of the module is the stimulus and the functional
coverage it reaches (tb/ethos_u85/coverage.py); the checks here make sure no case passes vacuously:

* the job stops at its final NPU_OP_STOP (no cmd_parse_error, bus_status or branch_fault);
* the reference executed every kernel operation of the job and none of them hit a failed TRM
  assert (no ``unpredictable`` / ``op_unimplemented`` event: the generator only emits legal
  operations, so such an event is a generator bug and fails the test);
* the scoreboard closed the job with no mismatch and the reference's write footprint is not
  empty; each OFM written is also compared with the reference's mirror byte for byte.

What the generator emits (``OpGen``):

* NPU_OP_CONV (SWD in every weight-decoder count of the configuration - WEIGHT_BASE ..
  WEIGHT3_BASE -, FWD, sparse 2:4, depth-first / part-kernel-first, d8x8 / d4x4, every
  microblock the weight ordering accepts, stride 1-3, dilation, padding, IFM upscale
  nearest/zeros, matrix multiply ``weights_ifm2``, accumulator restore ``acc_input=ifm2``)
  and NPU_OP_DEPTHWISE, with per-channel scale/bias streams (tlm.ethos_u85.scale_bias) or OFM_SCALE;
  weights encoded with tlm.ethos_u85.weights (streams_from_weights/encode_swd, fwd_from_weights/
  encode_fwd);
* NPU_OP_POOL, all eight modes (kernels, strides 1-4, padding, upscale, i32/i48, global or
  per-channel scale);
* NPU_OP_ELEMENTWISE, all 21 binary/unary modes, scalar and broadcast operands (h/w/c and
  their combinations, on either side), IFM/IFM2 input scales;
* NPU_OP_RESIZE bilinear/replicate/nearest with legal position recurrences (the last OFM
  column reads the last IFM column);
* IFMs int8/uint8/int16/uint16/int32 and OFMs int8..uint32 where the operation allows them
  (no kernel operation accepts an unsigned 32-bit IFM), NHWC and NHCWB16, random strides and
  gaps, tile2x2/tile3x1 with one to four tiles, OFM reverse and transposes where legal, OFM
  storage none now and then;
* activation lut_none (clip b16 with random windows, or none), every LUT function with a
  random table loaded by DMA into the LUT RAM (1D, 2D or a 3D gather with IDX_SKIP1),
  lut_tanh and lut_sigmoid; every OFM/IFM rounding mode and dbl_rnd;
* between operations: NPU_OP_BRANCH always (over a dead block holding a STOP, an IRQ and a
  reserved word that must never execute) and rf_true (over an NPU_OP_IRQ, on
  COND_STATUS.result_flag of the operation before), NPU_OP_PMU_MASK, NPU_OP_KERNEL_WAIT.

The operation kinds/modes, the IFM and OFM type x format and the activation function are
drawn from coverage-balanced decks (``Deck``: random order, without replacement), so one run
visits every bin of those cover points; everything else is drawn freely.

On DUT=rtl the generator emits only what the stand-in implements (rtl_stub/ethos_u85/README.md,
tb/ethos_u85/testlib/rtl_support.py): no elementwise div, no pooling none/argmax, single-tile storage,
global scale for pooling, no upscale; CONV/DEPTHWISE with 8-bit or signed 16-bit IFM,
8/16/32-bit OFM, no accumulator restore, FWD only with one weight decoder; plus the branches, PMU_MASK and LUT DMAs, so
``test_random_ops`` and ``test_random_conv`` pass there too.

Tests:

* ``test_random_ops[backpressure=none|bp]``: 60-90 (20-30 with random AXI back-pressure)
  operations of every kind in jobs of one to four, the bench's configuration.
* ``test_ofm_perms[kind=conv|dw|pool|ew|resize]``: each write_ofm transpose (NHWC and
  NHCWB16) and reverse (H, W on both formats, C on NHWC) the operation allows, twice
  (``OFM_PERMS_REPS=n`` times), on random operations of that kind (``OpGen.force``).
* ``test_ofm_bursts[kind=conv|dw]``: CONV/DEPTHWISE OFMs contiguous or not (strided NHWC,
  reverses, transposes) under 64- and 256-byte max_beats windows: bytes, and on DUT=rtl the
  shape of every wr_ofm burst (multi-beat runs on the contiguous ones).
* ``test_random_conv[wd=2wd|4wd]``: 12-18 CONV/DEPTHWISE/matrix-multiply operations on a
  configuration with 2 (ethos-u85-512) or 4 (ethos-u85-1024/2048, by the seed) weight
  decoders on DUT=tlm; on DUT=rtl CONV/DEPTHWISE on the bench's configuration
  (``make sim CONFIG=ethos-u85-N`` picks it, and the stand-in's MACS).

Seeds and size: every test draws its own seed from cocotb's random seed (``make sim SEED=n``
reproduces a run; the test logs both); ``RANDOM_OPS_SEED=s`` fixes the test seed directly.
The number of operations per test is drawn from the seed within bounds that keep the module
well under a minute of simulation per simulator on DUT=tlm; ``RANDOM_OPS_N=n`` sets it.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass, field

import cocotb
import numpy as np

from tb.ethos_u85.env import Env
from tb.ethos_u85.scoreboard import IntervalSet
from tb.ethos_u85.testlib.marks import DUT, named
from tb.ethos_u85.testlib.bursts import burst_error
from tb.ethos_u85.testlib.memmap import REGION_BASE, STREAM_ADDR, program_regions
from tb.ethos_u85.testlib.regs import OFF, status_fields
from tb.ethos_u85.testlib.rtl_support import first_unsupported
from tb.ethos_u85.testlib.streams import enc, fmap_cmds
from tlm.ethos_u85 import isa
from tlm.ethos_u85.config import get_config
from tlm.ethos_u85.fmap import MAX_BLOCK_HEIGHT, MAX_BLOCK_WIDTH
from tlm.ethos_u85.literal import LITERAL_OPS, literal_device
from tlm.ethos_u85.memory import Channel
from tlm.ethos_u85.ops import KERNEL_OP_NAMES
from tlm.core.errors import Unpredictable
from tlm.ethos_u85.scale_bias import channels_in_set, encode_scale_bias
from tlm.ethos_u85.weights import (WeightOrder, encode_fwd, encode_swd, fwd_from_weights, num_wd,
                                   streams_from_weights)

STATUS, CMD, QREAD = OFF["STATUS"], OFF["CMD"], OFF["QREAD"]
RTL = DUT == "rtl"
TIMEOUT = dict(timeout_time=2000, timeout_unit="ms")
N_OPS = int(os.environ.get("RANDOM_OPS_N", "0") or 0)
SEED = os.environ.get("RANDOM_OPS_SEED")
PERM_REPS = int(os.environ.get("OFM_PERMS_REPS", "2") or 2)     # test_ofm_perms: jobs per mode

NHWC, NHCWB16 = 0, 1
TILE2X2, TILE3X1, CHAINED, NONE = 0, 1, 2, 3
B8, B16, B32, B64 = 0, 1, 2, 3
SCALAR = int(isa.broadcast_mode.scalar)
EW = {m.name: int(m) for m in isa.elementwise_mode}
POOL = {m.name: int(m) for m in isa.pooling_mode}
RESIZE = {m.name: int(m) for m in isa.resize_mode}
AF = {m.name: int(m) for m in isa.activation_function}
TRANSPOSE = {m.name: int(m) for m in isa.activation_transpose}
UNARY = ("lrelu", "abs", "clz", "not")
# (precision, signed) of IFMs: an unsigned b32 IFM is legal for no kernel operation
IFM_TYPES = ((B8, 1), (B8, 0), (B16, 1), (B16, 0), (B32, 1))
RTL_EW = tuple(m for m in EW if m != "div")
RTL_POOL = ("max", "min", "average", "sum", "reduce_sum")
CONV_BLK_DEPTHS = (8, 16, 32, 64)      # CONV/DEPTHWISE OFM block depths (the weights are encoded for one)
# region offsets the generator may use in one job (REGION_BASE spacing is >= 0x30000)
REGION_LIMIT = 0x2_F000
MAX_WEIGHT_BYTES = 6144             # weight streams of one operation (bounds the AXI traffic)


def seeded(name: str) -> random.Random:
    """The test's generator: from RANDOM_OPS_SEED, else drawn from cocotb's seeded ``random``."""
    seed = int(SEED) if SEED else random.getrandbits(32)
    cocotb.log.info("%s: cocotb's seed of this test %s (make sim SEED=... reproduces the run), "
                    "test seed %d (RANDOM_OPS_SEED=%d reproduces this test alone)",
                    name, getattr(cocotb, "RANDOM_SEED", "?"), seed, seed)
    return random.Random(seed)


# ================================================================================ tensors
def _dtype(prec: int, signed: int) -> np.dtype:
    return np.dtype(f"<{'i' if signed else 'u'}{1 << prec}")


def type_name(prec: int, signed: int) -> str:
    return f"{'' if signed else 'u'}int{8 << prec}"


@dataclass
class Tensor:
    """One feature map as its NPU_SET_<IFM|IFM2|OFM>_* registers describe it. ``h, w, d`` are
    the dimensions in memory (for an OFM: after reverse/transpose); ``tiles`` lists
    (tile index, y0, y1, x0, x1) with the tile's bounds in those coordinates (TRM 3.6.5:
    element (y, x) of tile t sits at BASE<t> + (y - y0, x - x0))."""
    region: int
    prec: int
    signed: int
    fmt: int
    h: int
    w: int
    d: int
    sx: int = 0
    sy: int = 0
    sc: int = 0
    storage: int = TILE2X2
    bases: list = field(default_factory=lambda: [0, 0, 0, 0])
    w0m1: int = 0
    h0m1: int = 0
    h1m1: int = 0
    tiles: list = field(default_factory=list)
    zp: int = 0                                   # raw 16 bits

    @property
    def es(self) -> int:
        return 1 << self.prec

    @property
    def name(self) -> str:
        fmt = "nhwc" if self.fmt == NHWC else "nhcwb16"
        return f"{type_name(self.prec, self.signed)}/{fmt}{'/none' if self.storage == NONE else ''}"

    def tile_addresses(self, tile) -> np.ndarray:
        """Region offsets of every element of one tile, [ty, tx, d]."""
        t, y0, y1, x0, x1 = tile
        y = np.arange(y1 - y0, dtype=np.int64)[:, None, None]
        x = np.arange(x1 - x0, dtype=np.int64)[None, :, None]
        c = np.arange(self.d, dtype=np.int64)[None, None, :]
        if self.fmt == NHWC:
            a = self.bases[t] + y * self.sy + x * self.sx + c * self.es
        else:
            a = self.bases[t] + y * self.sy + (c >> 4) * self.sc + (16 * x + (c & 15)) * self.es
        return np.broadcast_to(a, (y1 - y0, x1 - x0, self.d))

    def spans(self) -> list:
        """[(lo, hi)] region offsets each tile can address."""
        if self.storage == NONE:
            return []
        out = []
        for tile in self.tiles:
            a = self.tile_addresses(tile)
            out.append((int(a.min()), int(a.max()) + self.es))
        return out

    def image(self, values: "np.ndarray | None", rng: random.Random) -> dict:
        """{absolute address: bytes}: each tile's span with random gap bytes and the
        elements of *values* ([h, w, d] in memory coordinates; None: random bytes)."""
        out = {}
        base = REGION_BASE[self.region]
        for tile, (lo, hi) in zip(self.tiles, self.spans()):
            buf = np.frombuffer(rng.randbytes(hi - lo), np.uint8).copy()
            if values is not None:
                t, y0, y1, x0, x1 = tile
                v = np.ascontiguousarray(values[y0:y1, x0:x1, :].astype(_dtype(self.prec, self.signed)))
                offs = (self.tile_addresses(tile) - lo).reshape(-1)
                b = v.view(np.uint8).reshape(-1, self.es)
                for k in range(self.es):
                    buf[offs + k] = b[:, k]
            out[base + lo] = buf.tobytes()
        return out

    def cmds(self, p: str, **extra) -> list:
        prec = dict(activation_type=self.signed, activation_precision=self.prec,
                    activation_format=self.fmt, activation_storage=self.storage)
        prec.update(extra)
        return fmap_cmds(p, prec, self.region, self.bases, self.sx, self.sy, self.sc, self.w0m1,
                         self.h0m1, self.h1m1, self.zp)


class Alloc:
    """Bump allocator of region offsets for one job (every tensor gets its own bytes)."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.next = {r: 16 * rng.randrange(0, 8) for r in range(8)}

    def take(self, region: int, nbytes: int, align: int = 16, skew: int = 0) -> int:
        off = -(-self.next[region] // align) * align + skew
        self.next[region] = off + max(nbytes, 1) + 16 * self.rng.choice((0, 0, 1, 3))
        assert self.next[region] < REGION_LIMIT, "random tensors overflow the region"
        return off


# ================================================================================ generator
class Deck:
    """Coverage-balanced choice: items are drawn without replacement from a shuffled deck
    (refilled when no allowed item is left), so a few dozen operations visit every bin of a
    cover point instead of the most likely ones. ``draw(allowed)`` takes the next allowed
    item (an item may appear several times in the deck to weigh it)."""

    def __init__(self, rng: random.Random, items):
        self.rng = rng
        self.items = list(items)
        self.cur: list = []

    def draw(self, allowed=None):
        ok = (lambda x: True) if allowed is None else (lambda x: x in allowed)
        for _ in range(2):
            for i, x in enumerate(self.cur):
                if ok(x):
                    return self.cur.pop(i)
            self.cur = list(self.items)
            self.rng.shuffle(self.cur)
        raise ValueError(f"no item of the deck is allowed: {allowed}")


@dataclass
class Op:
    """One kernel operation: its commands, the memory it needs and the tensors it writes."""
    kind: str                          # the NPU_OP_* name
    cmds: list
    image: dict = field(default_factory=dict)
    ofm: "Tensor | None" = None
    desc: str = ""
    lut: bool = False                  # its activation reads the LUT RAM


class OpGen:
    """Random legal kernel operations (see the module docstring). *rtl*: only what the RTL
    stand-in implements. *macs*: MACs per cycle of the configuration (weight ordering,
    scale-stream channel sets)."""

    def __init__(self, rng: random.Random, macs: int, rtl: bool = False):
        self.rng = rng
        self.macs = macs
        self.rtl = rtl
        self.alloc = Alloc(rng)
        self.lut_loaded = False
        self.force = None           # (transpose name, reverse, OFM format) for test_ofm_perms
        ops = [("elementwise", m) for m in (RTL_EW if rtl else EW)]
        ops += [("pool", m) for m in (RTL_POOL if rtl else POOL)]
        ops += [("resize", m) for m in RESIZE]
        ops += [("conv", "conv"), ("conv", "conv"), ("conv", "dw"), ("conv", "dw"), ("conv", "matmul")]
        self.op_deck = Deck(rng, ops)
        self.ifm_deck = Deck(rng, [(p, s, f) for p, s in IFM_TYPES for f in (NHWC, NHCWB16)])
        self.ofm_deck = Deck(rng, [(p, s, f) for p in (B8, B16, B32) for s in (0, 1) for f in (NHWC, NHCWB16)])
        self.act_deck = Deck(rng, ["lut_none"] * 4 + [n for n in AF if n != "lut_none"])

    def new_job(self) -> None:
        self.alloc = Alloc(self.rng)

    def ifm_type(self, types) -> tuple:
        """(precision, signed, format) of an IFM from the balanced deck, among *types*
        ((precision, signed) pairs the operation accepts)."""
        return self.ifm_deck.draw({(p, s, f) for p, s in types for f in (NHWC, NHCWB16)})

    # ---------------------------------------------------------------- tensors
    def region(self) -> int:
        return self.rng.randrange(8)

    def zero_point(self, prec: int, signed: int, ofm: bool = False) -> int:
        """A legal zero point (raw 16 bits): read_ifm / activation rules of tlm.ethos_u85.arith."""
        r = self.rng
        if r.random() < 0.3:
            return 0
        if prec == B8:
            return r.randint(-128, 127) & 0xFFFF if signed else r.randint(0, 255)
        if ofm:
            return r.randint(-128, 127) & 0xFFFF if signed else r.choice((r.randint(0, 255), 32768))
        return 32768 if (prec == B16 and not signed) else 0

    def tensor(self, h: int, w: int, d: int, prec: int, signed: int, *, fmt=None, region=None,
               tiles: bool = True, zp: "int | None" = None, ofm: bool = False,
               storage_none: bool = False) -> Tensor:
        r = self.rng
        es = 1 << prec
        fmt = (NHCWB16 if r.random() < 0.35 else NHWC) if fmt is None else fmt
        region = self.region() if region is None else region
        t = Tensor(region, prec, int(signed), fmt, h, w, d)
        t.zp = self.zero_point(prec, signed, ofm) if zp is None else zp
        if fmt == NHWC:
            t.sx = d * es + es * r.choice((0, 0, 0, 1, 3))
            t.sy = w * t.sx + es * r.choice((0, 0, 2, 8))
            t.sc = 16 * r.randrange(0, 8)                       # unused for NHWC
        else:
            t.sc = 16 * es * (w + r.choice((0, 0, 1)))
            t.sy = -(-d // 16) * t.sc + 16 * es * r.choice((0, 0, 2))
            t.sx = es * r.randrange(0, 8)                       # unused for NHCWB16
        # storage and tiles (multi-tile only on the TLM: the stand-in addresses tile 0)
        split = tiles and not self.rtl and r.random() < 0.25
        if storage_none:
            t.storage = NONE
            t.w0m1, t.h0m1, t.h1m1 = w - 1, h - 1, h - 1
            t.tiles = []
        elif r.random() < 0.7:
            t.storage = TILE2X2
            w0 = r.randint(1, w - 1) if split and w > 1 and r.random() < 0.6 else w + r.choice((0, 0, 3))
            h0 = r.randint(1, h - 1) if split and h > 1 and r.random() < 0.6 else h + r.choice((0, 0, 1))
            h1 = r.randint(1, h - 1) if split and h > 1 and w0 < w and r.random() < 0.6 else h + r.choice((0, 2))
            t.w0m1, t.h0m1, t.h1m1 = w0 - 1, h0 - 1, h1 - 1
            xl, hl, hr = min(w0, w), min(h0, h), min(h1, h)
            t.tiles = [(0, 0, hl, 0, xl)]
            if hl < h:
                t.tiles.append((2, hl, h, 0, xl))
            if xl < w:
                t.tiles.append((1, 0, hr, xl, w))
                if hr < h:
                    t.tiles.append((3, hr, h, xl, w))
        else:
            t.storage = TILE3X1
            if split and h > 2 and r.random() < 0.7:
                h0 = r.randint(1, h - 1)
                h1 = r.randint(h0 + 1, h) if r.random() < 0.7 else h + 1
            else:
                h0, h1 = h + r.choice((0, 0, 2)), h + r.choice((0, 1))
            t.w0m1, t.h0m1, t.h1m1 = r.randrange(0, 64), h0 - 1, h1 - 1
            a, b = min(h0, h), min(max(h1, h0), h)
            t.tiles = [(0, 0, a, 0, w)]
            if b > a:
                t.tiles.append((1, a, b, 0, w))
            if h > b:
                t.tiles.append((2, b, h, 0, w))
        # memory for every tile (each tile with its own extent)
        align = 16 if fmt == NHCWB16 else es
        skew = 0 if fmt == NHCWB16 else es * r.randrange(0, 16 // es)
        for tile in t.tiles:
            t.bases[tile[0]] = 0
            ext = int(t.tile_addresses(tile).max()) + es
            t.bases[tile[0]] = self.alloc.take(region, ext, align, skew)
        used = {tile[0] for tile in t.tiles}
        for i in range(4):
            if i not in used:
                t.bases[i] = t.bases[t.tiles[0][0]] if t.tiles else self.alloc.take(region, 16)
        return t

    def values(self, t: Tensor, lo=None, hi=None, exclude=()) -> np.ndarray:
        """Random element values of *t*'s type ([h, w, d], memory coordinates)."""
        g = np.random.default_rng(self.rng.getrandbits(32))
        info = np.iinfo(_dtype(t.prec, t.signed))
        lo = int(info.min) if lo is None else lo
        hi = int(info.max) if hi is None else hi
        v = g.integers(lo, hi, size=(t.h, t.w, t.d), endpoint=True, dtype=np.int64)
        for x in exclude:
            v[v == x] = x + 1 if x + 1 <= hi else x - 1
        return v

    # ---------------------------------------------------------------- common register groups
    def scale(self, ofm: bool, shift: int, wild: float = 0.1, max_scale: int = 1 << 31) -> dict:
        r = self.rng
        if r.random() >= wild:
            sc = r.randrange(max(1, max_scale >> 2), max_scale)
            sh = max(0, min(63, shift + r.randint(-2, 2)))
        else:
            sc = r.choice((0, 1, r.randrange(0, max_scale), max_scale - 1))
            sh = r.randrange(0, 64)
        return dict(scale=sc, shift=sh, round_mode=r.randrange(0, 6) if ofm else r.randrange(0, 2),
                    dbl_rnd=r.choice((0, 0, r.randrange(0, 31), 30)))

    def activation(self, ofm: Tensor, lut_ok: bool = True) -> tuple:
        """(commands, uses the LUT): lut_none with clip b16/none, or a LUT function."""
        r = self.rng
        tlo, thi = (-32768, 32767) if ofm.signed else (0, 65535)
        if ofm.prec == B8:
            tlo, thi = (-128, 127) if ofm.signed else (0, 255)
        fn, table, clip = "lut_none", 0, 0
        if lut_ok:
            fn = self.act_deck.draw()
            table = {"lut_u8_u8": r.randrange(8), "lut_s8_s8": r.randrange(8),
                     "lut_s8_s16": r.randrange(4), "lut_s8_s32": r.randrange(2)}.get(fn, 0)
        lo, hi = tlo, thi
        x = r.random()
        if x < 0.3:                                      # a window around the zero point
            zp = ofm.zp - 0x10000 if (ofm.signed and ofm.zp & 0x8000) else ofm.zp
            zp = max(tlo, min(thi, zp))
            lo = r.randint(tlo, zp)
            hi = r.randint(zp, thi)
        elif x < 0.4 and fn == "lut_none":
            clip = 1                                     # none: the result wraps
        elif x < 0.43 and fn == "lut_none":
            lo, hi = hi, lo                              # min > max (TRM clamp order)
        if fn in ("lut_s16_s16", "lut_s16_s32") and not ofm.signed:
            # the interpolating tables index with acc >> 7: keep the clamp inside int16
            clip, hi = 0, min(hi, 32767)
            lo = min(lo, hi)
        cmds = [("NPU_SET_ACTIVATION", dict(activation_function=AF[fn], table=table,
                                            activation_clip_range=clip)),
                ("NPU_SET_ACTIVATION_MIN", dict(clip_boundary=lo & 0xFFFF)),
                ("NPU_SET_ACTIVATION_MAX", dict(clip_boundary=hi & 0xFFFF))]
        return cmds, fn != "lut_none"

    def ofm_out(self, oh: int, ow: int, od: int, *, transposes=("HWC",), reverse: bool = False,
                storage_none: float = 0.04, precs=(B8, B16, B32)):
        """An OFM for a logical [oh, ow, od] result, its type and format from the balanced
        deck: (tensor, OFM_PRECISION extras, block dims, transpose name)."""
        r = self.rng
        tr = "HWC"
        if r.random() < 0.3:
            tr = r.choice(transposes)
        rev = 0
        if reverse and tr == "HWC" and r.random() < 0.25:
            rev = r.randrange(1, 4)
        fmts = (NHWC, NHCWB16)
        if self.force is not None:                       # test_ofm_perms: this mode if allowed
            ftr, frev, ffmt = self.force
            tr = ftr if ftr in transposes else "HWC"
            rev = frev if reverse and tr == "HWC" else 0
            fmts = (ffmt,)
        mem = {"HWC": (oh, ow, od), "WHC": (ow, oh, od), "HCW": (oh, od, ow), "CWH": (od, ow, oh),
               "CHW": (od, oh, ow), "WCH": (ow, od, oh)}[tr]
        if rev == 3:
            fmts = (NHWC,)                               # simple block rules
        prec, signed, fmt = self.ofm_deck.draw({(p, s, f) for p in precs
                                                for s in (0, 1) for f in fmts})
        none = r.random() < storage_none
        t = self.tensor(*mem, prec, signed, ofm=True, fmt=fmt, storage_none=none)
        extra = dict(scale_mode=1, activation_reverse=rev, activation_transpose=TRANSPOSE[tr])
        bh, bw = min(oh, 64), min(ow, 64)
        if fmt == NHCWB16 and tr in ("HCW", "CHW"):      # write_ofm: NHCWB16 transposes
            bw = 16 * r.randint(1, 4)
        if fmt == NHCWB16 and tr in ("CWH", "WCH"):
            bh = 16 * r.randint(1, 4)
        blk = (bh, bw, min(od, 16) if rev == 3 else min(od, 64))
        return t, extra, blk, tr

    def ofm_cmds(self, t: Tensor, extra: dict, oh: int, ow: int, od: int, blk) -> list:
        return t.cmds("OFM", **extra) + [
            ("NPU_SET_OFM_HEIGHT_M1", dict(height_m1=oh - 1)),
            ("NPU_SET_OFM_WIDTH_M1", dict(width_m1=ow - 1)),
            ("NPU_SET_OFM_DEPTH_M1", dict(depth_m1=od - 1)),
            ("NPU_SET_OFM_BLK_HEIGHT_M1", dict(height_m1=blk[0] - 1)),
            ("NPU_SET_OFM_BLK_WIDTH_M1", dict(width_m1=blk[1] - 1)),
            ("NPU_SET_OFM_BLK_DEPTH_M1", dict(depth_m1=blk[2] - 1))]

    def kernel_cmds(self, kh, kw, sy=1, sx=1, pads=(0, 0, 0, 0), dil=(1, 1), order=0, d4x4=0,
                    upscale=0) -> list:
        t, l, b, rr = pads
        return [("NPU_SET_KERNEL_HEIGHT_M1", dict(height_m1=kh - 1)),
                ("NPU_SET_KERNEL_WIDTH_M1", dict(width_m1=kw - 1)),
                ("NPU_SET_KERNEL_STRIDE", dict(stride_y_lsb=(sy - 1) & 1, stride_y_msb=(sy - 1) >> 1,
                                               stride_x_lsb=(sx - 1) & 1, stride_x_msb=(sx - 1) >> 1,
                                               dilation_y=dil[0] - 1, dilation_x=dil[1] - 1,
                                               weight_order=order, decomposition=d4x4)),
                ("NPU_SET_IFM_PAD_TOP", dict(pad=t)), ("NPU_SET_IFM_PAD_LEFT", dict(pad=l)),
                ("NPU_SET_IFM_PAD_BOTTOM", dict(pad=b)), ("NPU_SET_IFM_PAD_RIGHT", dict(pad=rr)),
                ("NPU_SET_IFM_UPSCALE", dict(mode=upscale))]

    def microblock_depth(self, mb: int) -> int:
        return self.macs // (8, 16, 32, 32, 64, 128)[mb]

    def scale_stream(self, od: int, mb: int, acc48: bool, reverse_c: bool, shift: int) -> tuple:
        """Per-channel scale/bias: (commands, image) of a stream for *od* channels."""
        r = self.rng
        g = np.random.default_rng(r.getrandbits(32))
        smax = (1 << 15) if acc48 else (1 << 31)
        bias = g.integers(-(1 << 20), 1 << 20, od)
        scale = g.integers(max(1, smax >> 3), smax, od)
        sh = np.clip(g.integers(shift - 3, shift + 4, od), 0, 63)
        data = encode_scale_bias(bias, scale, sh, acc48=acc48,
                                 set_channels=channels_in_set(self.macs, mb), reverse_c=reverse_c)
        length = -(-len(data) // 16) * 16 + 16 * r.choice((0, 0, 1))
        region = self.region()
        off = self.alloc.take(region, length)
        pad = r.randbytes(length - len(data))
        cmds = [("NPU_SET_SCALE_REGION", dict(region=region)), ("NPU_SET_SCALE_BASE", dict(addr=off)),
                ("NPU_SET_SCALE_LENGTH", dict(length=length))]
        return cmds, {REGION_BASE[region] + off: data + pad}

    def lut_ok(self) -> bool:
        return self.lut_loaded

    # ---------------------------------------------------------------- ELEMENTWISE
    def elementwise(self, mode: str, shape: "tuple | None" = None) -> Op:
        """*shape*: the OFM's (H, W, D) (random if None)."""
        r = self.rng
        unary = mode in UNARY
        H, W, D = shape or (r.randint(1, 4), r.randint(1, 5), r.choice((1, 3, 8, 16, 17, 24, 33)))
        # operand types: the same precision for IFM and IFM2 (TRM assert), signedness free
        prec, s1, fmt1 = self.ifm_type(IFM_TYPES)
        s2 = r.randint(0, 1)
        if prec == B32:
            s2 = 1                                       # b32 operands are signed
        if (mode == "mul" and prec == B16 and not s1) or mode == "lrelu":
            s2 = s1            # uint16 mul: both zero points 32768; lrelu scales IFM with IFM2_SCALE
        # broadcast / scalar
        x = r.random()
        bm = bm2 = 0
        if x < 0.15 and not unary:
            bm2 = SCALAR
        elif x < 0.22:
            bm = SCALAR
        elif x < 0.6:
            if unary or r.random() < 0.4:
                bm = r.randrange(1, 8)
            else:
                bm2 = r.randrange(1, 8)
                if r.random() < 0.3:
                    bm = r.randrange(0, 8)

        def dims(b):
            return (1 if b & 1 else H, 1 if b & 2 else W, 1 if b & 4 else D)

        zp1 = zp2 = None
        if mode == "div":
            zp1 = zp2 = 0
        if mode == "mul" and prec == B16 and not s1:
            zp1 = zp2 = 32768
        ifm = self.tensor(*dims(bm if bm != SCALAR else 0), prec, s1, zp=zp1, fmt=fmt1,
                          storage_none=bm == SCALAR)
        ifm2 = self.tensor(*dims(bm2 if bm2 != SCALAR else 0), prec, s2, zp=zp2,
                           storage_none=bm2 == SCALAR or (unary and r.random() < 0.8))
        image = {}
        v1 = self.values(ifm)
        if bm != SCALAR:
            image.update(ifm.image(v1, r))
        if not unary and bm2 != SCALAR:
            excl = (0, -1) if prec == B32 else (0,)
            v2 = self.values(ifm2, exclude=excl if mode == "div" else ())
            if mode in ("cmp_eq", "cmp_ne") and v1.shape == v2.shape and s1 == s2 and ifm.zp == ifm2.zp:
                same = np.random.default_rng(r.getrandbits(32)).random(v1.shape) < 0.5
                v2 = np.where(same, v1, v2)              # equal operands half the time
            image.update(ifm2.image(v2, r))
        # the scalar: OP_SCALAR - zero point must fit int16 for the scaled modes
        scalar = 0
        if SCALAR in (bm, bm2):
            t = ifm if bm == SCALAR else ifm2
            zps = t.zp - 0x10000 if (t.signed and t.zp & 0x8000) else t.zp
            if mode in ("mul", "div") and r.random() < 0.5:
                scalar = r.randint(-(1 << 31), (1 << 31) - 1)
            else:
                scalar = r.randint(-300, 300) + zps
                scalar = max(-32768 + zps, min(32767 + zps, scalar))
            if mode == "div" and bm2 == SCALAR and scalar in (0, -1):
                scalar = 7
        # scales: inputs bring operands to ~2**(31-in_shift) units, the output back to the OFM
        ofm, extra, blk, tr = self.ofm_out(H, W, D, transposes=("HWC", "HCW", "CHW"))
        ebits = 8 << ofm.prec
        if mode == "div":
            isc = dict(scale=1, shift=0, round_mode=r.randrange(2), dbl_rnd=0)
            isc2 = dict(isc)
            osc = dict(scale=1, shift=0, round_mode=r.randrange(6), dbl_rnd=r.randrange(31))
            ofm.zp = 0
        else:
            # input scales take an operand of 2**pbits to about 2**(pbits + 30 - in_shift); the
            # output scale brings the result back to about the OFM's width
            pbits = 8 << prec
            in_shift = r.randint(16, 30) if prec == B8 else r.randint(24, 34)
            isc = self.scale(False, in_shift)
            isc2 = self.scale(False, in_shift)
            if prec == B32 or prec == B16 and not s1:
                in_shift = 30                            # scale_a/b pass these through
            exact = mode in ("clz", "shr", "shl", "lshr", "and", "or", "xor", "and_not", "not",
                             "cmp_eq", "cmp_ne", "cmp_ge", "cmp_gt") and r.random() < 0.7
            if exact:
                # bit-exact operands and result (scale 1, shift 0): the logic itself shows
                isc = dict(scale=1, shift=0, round_mode=r.randrange(2), dbl_rnd=0)
                isc2 = dict(isc)
                out_shift = 30 if mode.startswith("cmp") or mode == "clz" else 30 + max(0, pbits - ebits)
                osc = dict(scale=1 << 30, shift=out_shift, round_mode=r.randrange(6), dbl_rnd=0)
            else:
                if mode == "mul":
                    out_shift = 2 * pbits + 30 - ebits if prec != B32 else 62 - ebits - 30
                elif mode.startswith("cmp") or mode == "clz":
                    out_shift = 30
                else:
                    out_shift = pbits + 60 - in_shift - ebits
                osc = self.scale(True, max(0, min(63, out_shift)))
            if mode in ("shr", "shl", "lshr") and r.random() < 0.7:
                # small shift amounts from IFM2: scale IFM2 down to a few bits
                isc2 = dict(scale=1, shift=r.choice((0, 4, 5)) if prec == B8 else r.randint(11, 13),
                            round_mode=r.randrange(2), dbl_rnd=0)
        act, lut = self.activation(ofm, self.lut_ok())
        mb = r.randrange(6)
        cmds = ifm.cmds("IFM") + ifm2.cmds("IFM2")
        cmds += [("NPU_SET_IFM_BROADCAST", dict(broadcast_mode=bm)),
                 ("NPU_SET_IFM2_BROADCAST", dict(broadcast_mode=bm2)),
                 ("NPU_SET_OP_SCALAR", dict(scalar=scalar)),
                 ("NPU_SET_IFM_SCALE", isc), ("NPU_SET_IFM2_SCALE", isc2),
                 ("NPU_SET_OFM_SCALE", osc), ("NPU_SET_IFM_UPSCALE", dict(mode=0))]
        cmds += self.ofm_cmds(ofm, extra, H, W, D, blk) + act
        cmds += [("NPU_SET_ACC_FORMAT", dict(acc_format=r.randint(0, 1), acc_input=0, acc_output=0,
                                             microblock=mb)),
                 ("NPU_OP_ELEMENTWISE", dict(elementwise_mode=EW[mode]))]
        desc = (f"ELEMENTWISE {mode} {H}x{W}x{D} bcast {bm}/{bm2} ifm {ifm.name} ifm2 {ifm2.name} "
                f"ofm {ofm.name} {tr}{' none' if ofm.storage == NONE else ''} "
                f"tiles {len(ifm.tiles)}/{len(ofm.tiles)} act {act[0][1]['activation_function']}")
        return Op("NPU_OP_ELEMENTWISE", cmds, image, ofm, desc, lut)

    # ---------------------------------------------------------------- POOL
    def pool(self, mode: str) -> Op:
        r = self.rng
        # IFM precision: b8, or signed b16/b32 (b32 not for average/sum/argmax)
        types = [(B8, 0), (B8, 1), (B16, 1)]
        if mode not in ("average", "sum", "argmax_x", "argmax_y"):
            types.append((B32, 1))
        prec, signed, fmt1 = self.ifm_type(types)
        sy = sx = 1
        pads = [0, 0, 0, 0]
        oh, ow, od = r.randint(1, 4), r.randint(1, 4), r.choice((1, 2, 5, 16, 19, 32))
        if mode == "average":
            kh, kw = r.choice((1, 2, 3, 4, 8)), r.choice((1, 2, 3, 5, 8))
        elif mode in ("max", "min"):
            kh, kw = r.choice((1, 2, 3, 5)), r.choice((1, 2, 3, 4, 9))
        elif mode in ("sum", "none"):
            kh, kw = r.randint(1, 3), r.randint(1, 3)
        elif mode == "reduce_sum":
            kh = kw = 1
        elif mode == "argmax_x":
            kh, kw, ow = 1, r.randint(1, 8), 1
        else:
            kh, kw, oh = r.randint(1, 8), 1, 1
        if mode not in ("reduce_sum", "argmax_x", "argmax_y"):
            sy, sx = r.choice((1, 1, 2, 3, 4)), r.choice((1, 1, 2, 3, 4))
            if mode == "average":
                pads = [r.randrange(kh), r.randrange(kw), r.randrange(kh), r.randrange(kw)]
            else:
                pads = [r.randint(0, min(kh, 3)), r.randint(0, min(kw, 3)),
                        r.randint(0, min(kh, 3)), r.randint(0, min(kw, 3))]
        upscale = 0
        if (not self.rtl and mode in ("max", "min", "average", "sum") and r.random() < 0.15):
            upscale = 1 if mode in ("max", "min") else r.choice((1, 2))
            sy = sx = 1

        def fit(n_out, s, k, a, b):             # pads keep the derived IFM size >= 1
            while (n_out - 1) * s + k - a - b < 1:
                if b:
                    b -= 1
                else:
                    a -= 1
            return a, b
        pads[0], pads[2] = fit(oh, sy, kh, pads[0], pads[2])
        pads[1], pads[3] = fit(ow, sx, kw, pads[1], pads[3])
        ih = (oh - 1) * sy + kh - pads[0] - pads[2]
        iw = (ow - 1) * sx + kw - pads[1] - pads[3]
        sh, sw = ((ih + 1) // 2, (iw + 1) // 2) if upscale else (ih, iw)
        id_ = r.randint(1, 24) if mode == "reduce_sum" else od
        if mode == "reduce_sum":
            od = 1
        ifm = self.tensor(sh, sw, id_, prec, signed, zp=0 if mode == "reduce_sum" else None, fmt=fmt1)
        image = {}
        if mode != "none":
            image.update(ifm.image(self.values(ifm), r))
        acc48 = mode in ("sum", "reduce_sum", "none") and r.random() < 0.4
        ofm, extra, blk, tr = self.ofm_out(oh, ow, od, transposes=tuple(TRANSPOSE), reverse=True)
        mb = r.randrange(6)
        per_channel = not self.rtl and mode != "average" and r.random() < 0.3
        cmds = ifm.cmds("IFM") + [("NPU_SET_IFM_DEPTH_M1", dict(depth_m1=id_ - 1 if mode == "reduce_sum"
                                                                else r.randrange(0, 64)))]
        cmds += self.kernel_cmds(kh, kw, sy, sx, pads, d4x4=0 if mode in ("average", "argmax_x", "argmax_y")
                                 else int(r.random() < 0.2), upscale=upscale)
        ebits = 8 << ofm.prec
        if mode == "average":
            osc = dict(scale=r.randrange(0, 1 << 31), shift=r.randrange(0, 64), round_mode=r.randrange(6),
                       dbl_rnd=r.choice((0, r.randrange(31))))
        else:
            bits = (8 << prec) + (kh * kw).bit_length() if mode in ("sum", "reduce_sum") else 8 << prec
            if mode in ("argmax_x", "argmax_y"):
                bits = 20
            if mode == "reduce_sum":
                bits = (8 << prec) + id_.bit_length()
            osc = self.scale(True, max(0, 30 + bits - ebits))
        if per_channel:
            extra["scale_mode"] = 0
            bits = {"sum": (8 << prec) + 4, "reduce_sum": (8 << prec) + 5}.get(mode, 8 << prec)
            if extra["activation_reverse"] == 3 and not (od <= 16 or od % channels_in_set(self.macs, mb) == 0):
                extra["activation_reverse"] = 0          # TRM 3.7.2: reversed channel sets
            sc_cmds, sc_img = self.scale_stream(od, mb, acc48, extra["activation_reverse"] == 3,
                                                max(0, (15 if acc48 else 30) + bits - ebits))
            cmds += sc_cmds
            image.update(sc_img)
        cmds += [("NPU_SET_OFM_SCALE", osc)]
        act, lut = self.activation(ofm, self.lut_ok())
        cmds += self.ofm_cmds(ofm, extra, oh, ow, od, blk) + act
        cmds += [("NPU_SET_ACC_FORMAT", dict(acc_format=int(acc48), acc_input=0, acc_output=0, microblock=mb)),
                 ("NPU_OP_POOL", dict(pooling_mode=POOL[mode]))]
        desc = (f"POOL {mode} k{kh}x{kw} s{sy}x{sx} pad {pads} up {upscale} ofm {oh}x{ow}x{od} "
                f"ifm {ifm.name} ofm {ofm.name} {tr} rev {extra['activation_reverse']} "
                f"{'per-channel' if per_channel else 'global'} acc48 {int(acc48)} "
                f"tiles {len(ifm.tiles)}/{len(ofm.tiles)}")
        return Op("NPU_OP_POOL", cmds, image, ofm, desc, lut)

    # ---------------------------------------------------------------- RESIZE
    def _resize_axis(self, n_in: int, last_rule: bool):
        """(scale_n, offset, step_int, step_mod, n_out) of one axis whose positions all read
        inside the IFM; with *last_rule* the last output also reads the last input (x axis)."""
        r = self.rng
        for _ in range(200):
            n = r.choice((1, 2, 3, 4, 5, 8, 16, 64, 2048)) if r.random() < 0.9 else r.randint(1, 2048)
            if r.random() < 0.7:                     # upscale: step < 1
                si, sm = 0, r.randint(1, n - 1) if n > 1 else 0
                if n == 1:
                    si = 1
            else:                                    # 1 <= step < 3
                si, sm = r.randint(1, 2), r.randrange(0, n)
            off = r.randint(-n, n - 1)
            i, m = (-1, off + n) if off < 0 else (0, off)
            good = []
            for v in range(1, 40):
                if max(i, 0) > n_in - 1:
                    break
                if not last_rule or min(i + 1, n_in - 1) == n_in - 1:
                    good.append(v)
                m += sm
                i += si
                if m >= n:
                    m -= n
                    i += 1
            good = [g for g in good if g <= 12]
            if good:
                return n, off, si, sm, r.choice(good)
        return 1, 0, 1, 0, n_in                       # identity: always legal

    def resize(self, mode: str) -> Op:
        r = self.rng
        prec, signed, fmt1 = self.ifm_type([(B8, 0), (B8, 1), (B16, 1)])
        ih, iw, d = r.randint(1, 5), r.randint(1, 5), r.choice((1, 3, 8, 16, 20))
        ny, yoff, ysi, ysm, oh = self._resize_axis(ih, False)
        nx, xoff, xsi, xsm, ow = self._resize_axis(iw, True)
        ifm = self.tensor(ih, iw, d, prec, signed, zp=0, fmt=fmt1)
        image = ifm.image(self.values(ifm), r)
        ofm, extra, blk, tr = self.ofm_out(oh, ow, d, reverse=True)
        ebits = 8 << ofm.prec
        gain = (ny * nx).bit_length() - 1 if mode == "bilinear" else 0
        shift = max(16, 16 + gain + (8 << prec) - ebits + r.randint(-1, 1))
        osc = dict(scale=r.randrange(0, 1 << 31), shift=min(63, shift), round_mode=r.randrange(6),
                   dbl_rnd=r.choice((0, r.randrange(31))))
        act, lut = self.activation(ofm, self.lut_ok())
        cmds = ifm.cmds("IFM") + [("NPU_SET_IFM2_ZERO_POINT", dict(zero_point=0)),
                                  ("NPU_SET_IFM_UPSCALE", dict(mode=0)),
                                  ("NPU_SET_KERNEL_HEIGHT_M1", dict(height_m1=ih - 1)),
                                  ("NPU_SET_KERNEL_WIDTH_M1", dict(width_m1=iw - 1)),
                                  ("NPU_SET_RESIZE_Y_SCALE_N_M1", dict(resize_y_scale_n_m1=ny - 1)),
                                  ("NPU_SET_RESIZE_X_SCALE_N_M1", dict(resize_x_scale_n_m1=nx - 1)),
                                  ("NPU_SET_RESIZE_Y_OFFSET", dict(resize_y_offset=yoff)),
                                  ("NPU_SET_RESIZE_X_OFFSET", dict(resize_x_offset=xoff)),
                                  ("NPU_SET_RESIZE_Y_STEP", dict(one_step_int=ysi, one_step_mod=ysm,
                                                                 blk_step_int=0, blk_step_mod=0)),
                                  ("NPU_SET_RESIZE_X_STEP", dict(one_step_int=xsi, one_step_mod=xsm,
                                                                 blk_step_int=0, blk_step_mod=0)),
                                  ("NPU_SET_OFM_SCALE", osc)]
        cmds += self.ofm_cmds(ofm, extra, oh, ow, d, blk) + act
        cmds += [("NPU_SET_ACC_FORMAT", dict(acc_format=r.randint(0, 1), acc_input=0, acc_output=0,
                                             microblock=r.randrange(6))),
                 ("NPU_OP_RESIZE", dict(resize_mode=RESIZE[mode]))]
        desc = (f"RESIZE {mode} {ih}x{iw}x{d} -> {oh}x{ow} n {ny}/{nx} off {yoff}/{xoff} step "
                f"{ysi}+{ysm}/{xsi}+{xsm} ifm {ifm.name} ofm {ofm.name} rev {extra['activation_reverse']}")
        return Op("NPU_OP_RESIZE", cmds, image, ofm, desc, lut)

    # ---------------------------------------------------------------- CONV / DEPTHWISE
    def conv(self, variant: str) -> Op:
        # the stand-in's CONV/DEPTHWISE: 8-bit or signed 16-bit IFM, 8/16/32-bit OFM
        if variant == "matmul":
            # the stand-in's matrix multiply: 8-bit operands (its MACs are 16x9 bits)
            types = [(B8, 0), (B8, 1)] if self.rtl else [(B8, 0), (B8, 1), (B16, 1)]
            for _ in range(100):
                op = self.matmul(self.ifm_type(types))
                if not (self.rtl and first_unsupported(enc(*op.cmds), self.macs)):
                    return op
            raise RuntimeError("no matrix multiply within the stand-in's limits in 100 tries")
        ifm_t = self.ifm_type([(B8, 0), (B8, 1), (B16, 1)])
        for _ in range(100):
            op = self._conv_try(variant == "dw", ifm_t)
            # on DUT=rtl also within the stand-in's implementation limits (e.g. a depthwise
            # microblock deeper than 64 channels on MACS 1024/2048)
            if op is not None and not (self.rtl and first_unsupported(enc(*op.cmds), self.macs)):
                return op
        raise RuntimeError("no legal weight ordering found")

    def _conv_try(self, dw: bool, ifm_t: tuple) -> "Op | None":
        r = self.rng
        ifm16 = ifm_t[0] == B16
        dil = (r.randint(1, 2), r.randint(1, 2)) if r.random() < 0.3 else (1, 1)
        stride = (r.randint(1, 3), r.randint(1, 3))
        upscale = 0
        if r.random() < 0.15 and not self.rtl:
            upscale, stride = r.randint(1, 2), (1, 1)
        kh, kw = r.randint(1, 4), r.randint(1, 4)
        oh, ow = r.randint(1, 4), r.randint(1, 4)
        ext = ((kh - 1) * dil[0] + 1, (kw - 1) * dil[1] + 1)
        pads = [r.randint(0, 2) for _ in range(4)]
        for a, b, n, s, k in ((0, 2, oh, stride[0], ext[0]), (1, 3, ow, stride[1], ext[1])):
            while (n - 1) * s + k - pads[a] - pads[b] < 1:
                if pads[b]:
                    pads[b] -= 1
                else:
                    pads[a] -= 1
        od = r.randint(1, 40) if r.random() < 0.2 else r.randint(1, 20)
        idp = od if dw else (r.randint(1, 40) if r.random() < 0.2 else r.randint(1, 20))
        fwd = not dw and r.random() < 0.3 and not (self.rtl and num_wd(self.macs) > 1)
        sparse = not dw and not fwd and r.random() < 0.15
        order = int(not dw and r.random() < 0.4)
        d4x4 = int(r.random() < 0.3)
        acc48 = ifm16 or r.random() < 0.3
        blk_d = r.choice(CONV_BLK_DEPTHS)
        wo = dict(macs=self.macs, depthwise=dw, part_kernel_first=bool(order), sparse=sparse,
                  ifm16bit=ifm16, ofm_depth=od, ifm_depth=idp, ofm_block_depth=blk_d,
                  kernel_height=ext[0], kernel_width=ext[1], dilation_x=dil[1] - 1,
                  dilation_y=dil[0] - 1, stride_x=stride[1], stride_y=stride[0], d8x8=not d4x4)
        valid = []
        for mb in range(6):
            try:
                WeightOrder(microblock=mb, **wo).check()
                valid.append(mb)
            except Unpredictable:
                pass
        if not valid:
            return None
        mb = r.choice(valid)
        p = WeightOrder(microblock=mb, **wo)
        g = np.random.default_rng(r.getrandbits(32))
        wlo = 127 if (fwd or sparse) else 255
        w = g.integers(-wlo, wlo + 1, p.shape)
        palette = r.random() < 0.25         # few distinct values: FWD lut2/lut4 words, SWD palettes
        if palette:
            pal = g.integers(-wlo, wlo + 1, r.choice((2, 4, 9, 16)))
            w = pal[g.integers(0, len(pal), p.shape)]
        if r.random() < 0.2:
            w[g.random(p.shape) < 0.6] = 0                          # many zeros: zero runs
        if sparse:
            I = p.shape[3]
            for i0 in range(0, I, 4):                              # at most 2 non-zeros of 4
                for o, y, x in np.ndindex(*p.shape[:3]):
                    grp = list(range(i0, min(I, i0 + 4)))
                    keep = set(g.choice(grp, size=min(2, len(grp)), replace=False).tolist())
                    for i in grp:
                        if i not in keep:
                            w[o, y, x, i] = 0
        # weight streams: one per weight decoder (SWD) or one FWD stream
        if fwd:
            blobs = [encode_fwd(fwd_from_weights(p, w))]
        else:
            blobs = [self.encode_swd(s) for s in streams_from_weights(p, w)]
        if sum(len(b) for b in blobs) > MAX_WEIGHT_BYTES:
            return None                # padding of a wide microblock: too much AXI traffic
        # IFM (stored size: upscaled IFMs are half the logical size)
        ih = (oh - 1) * stride[0] + ext[0] - pads[0] - pads[2]
        iw = (ow - 1) * stride[1] + ext[1] - pads[1] - pads[3]
        sh, sw = ((ih + 1) // 2, (iw + 1) // 2) if upscale else (ih, iw)
        prec, signed, fmt1 = ifm_t
        ifm = self.tensor(sh, sw, idp, prec, signed, fmt=fmt1)
        image = ifm.image(self.values(ifm), r)
        ofm, extra, blk, tr = self.ofm_out(oh, ow, od, transposes=tuple(TRANSPOSE),
                                           reverse=True, precs=(B8, B16, B32))
        ebits = 8 << ofm.prec
        taps = kh * kw * (1 if dw else idp)
        bits = (16 if ifm16 else 8) + 8 + max(1, taps.bit_length())
        blk = (blk[0], blk[1], blk_d)
        if extra["activation_reverse"] == 3:
            mbd = max(16, self.microblock_depth(mb))
            if od % mbd and blk_d > 16:
                extra["activation_reverse"] = 0
        cmds = ifm.cmds("IFM") + [("NPU_SET_IFM_DEPTH_M1", dict(depth_m1=idp - 1))]
        cmds += self.kernel_cmds(ext[0], ext[1], stride[0], stride[1], pads, dil, order, d4x4, upscale)
        per_channel = r.random() < 0.6
        if per_channel:
            extra["scale_mode"] = 0
            rev_c = extra["activation_reverse"] == 3
            if rev_c and not (od <= 16 or od % channels_in_set(self.macs, mb) == 0):
                extra["activation_reverse"], rev_c = 0, False
            sc_cmds, sc_img = self.scale_stream(od, mb, acc48, rev_c,
                                                max(0, (15 if acc48 else 30) + bits - ebits))
            cmds += sc_cmds
            image.update(sc_img)
            osc = dict(scale=r.randrange(1 << 31), shift=r.randrange(64), round_mode=r.randrange(6),
                       dbl_rnd=r.choice((0, r.randrange(31))))
        else:
            osc = self.scale(True, max(0, (15 if acc48 else 30) + bits - ebits),
                             max_scale=(1 << 15) if acc48 else (1 << 31))
        # acc_input = ifm2: the accumulators start from a signed b32 (i32) / b64 (i48) IFM2
        acc_input = 0
        if r.random() < 0.1 and not self.rtl:
            acc_input = 2
            ifm2 = self.tensor(oh, ow, od, B64 if acc48 else B32, 1, zp=0)
            image.update(ifm2.image(self.values(ifm2, -(1 << 24), 1 << 24), r))
            cmds += ifm2.cmds("IFM2")
        wregion = self.region()
        names = ("", "1", "2", "3")
        cmds += [("NPU_SET_WEIGHT_FORMAT", dict(weight_format=int(fwd), weight_sparsity=int(sparse))),
                 ("NPU_SET_WEIGHT_REGION", dict(region=wregion))]
        for k, blob in enumerate(blobs):
            off = self.alloc.take(wregion, len(blob), 16, 0)
            image[REGION_BASE[wregion] + off] = bytes(blob)
            cmds += [(f"NPU_SET_WEIGHT{names[k]}_BASE", dict(addr=off)),
                     (f"NPU_SET_WEIGHT{names[k]}_LENGTH", dict(length=len(blob)))]
        cmds += [("NPU_SET_OFM_SCALE", osc)]
        act, lut = self.activation(ofm, self.lut_ok())
        cmds += self.ofm_cmds(ofm, extra, oh, ow, od, blk) + act
        cmds += [("NPU_SET_ACC_FORMAT", dict(acc_format=int(acc48), acc_input=acc_input, acc_output=0,
                                             microblock=mb))]
        cmds += [("NPU_OP_DEPTHWISE", {})] if dw else [("NPU_OP_CONV", dict(weights_ifm2=0))]
        kind = "NPU_OP_DEPTHWISE" if dw else "NPU_OP_CONV"
        desc = (f"{kind[7:]} k{kh}x{kw} s{stride} dil{dil} pad {pads} up {upscale} {idp}->{od} "
                f"ofm {oh}x{ow} ifm {ifm.name} ofm {ofm.name} {tr} rev {extra['activation_reverse']} "
                f"{'fwd' if fwd else 'swd'}x{len(blobs)}{' sparse' if sparse else ''}{' palette' if palette else ''} "
                f"{'pkf' if order else 'df'} mb {mb} {'d4x4' if d4x4 else 'd8x8'} acc48 {int(acc48)} "
                f"{'per-channel' if per_channel else 'global'} acc_in {acc_input}")
        return Op(kind, cmds, image, ofm, desc, lut)

    def encode_swd(self, stream) -> bytes:
        """One SWD stream, sometimes with a forced coding (direct mode, Golomb-Rice divisor,
        zero-run divisor); the automatic choice if the forced one cannot code the stream."""
        r = self.rng
        if r.random() < 0.5:
            kw = r.choice((dict(palette=None), dict(wdiv=r.randrange(0, 6)), dict(wdiv=7),
                           dict(zdiv=r.randrange(0, 4)), dict(zdiv=6)))
            try:
                return encode_swd(stream, **kw)
            except (ValueError, Unpredictable):
                pass
        return encode_swd(stream)

    def matmul(self, ifm_t: tuple) -> Op:
        """NPU_OP_CONV weights_ifm2=1: OFM[1, W, O] = IFM[1, W, I] . IFM2[1, O, I]^T; global
        OFM_SCALE (as Vela programs BATCH_MATMUL) or a per-channel scale/bias stream."""
        r = self.rng
        prec, s1, fmt1 = ifm_t
        ifm16 = prec == B16
        # now and then several IFM blocks (zig-zag), OFM depth blocks and spatial blocks
        big = r.random() < 0.25
        W = r.randint(1, 24 if big else 8)
        I = r.randint(1, 150 if big else 40)
        O = r.randint(1, 80 if big else 30)
        s2 = 1 if ifm16 else r.randint(0, 1)
        acc48 = ifm16 or r.random() < 0.3
        ifm = self.tensor(1, W, I, prec, s1, fmt=fmt1)
        ifm2 = self.tensor(1, O, I, prec, s2)
        image = ifm.image(self.values(ifm), r)
        image.update(ifm2.image(self.values(ifm2), r))
        ofm, extra, blk, tr = self.ofm_out(1, W, O, transposes=tuple(TRANSPOSE))
        blk = (blk[0], blk[1], r.choice([d for d in (8, 16, 32) if d < O] + [blk[2]]))
        ebits = 8 << ofm.prec
        bits = 2 * (8 << prec) + I.bit_length()
        valid = [mb for mb in range(6) if self.microblock_depth(mb) >= 4]
        mb = r.choice(valid)
        cmds = ifm.cmds("IFM") + ifm2.cmds("IFM2") + [("NPU_SET_IFM_DEPTH_M1", dict(depth_m1=I - 1))]
        cmds += self.kernel_cmds(1, 1)
        cmds += [("NPU_SET_WEIGHT_FORMAT", dict(weight_format=0, weight_sparsity=0))]
        per_channel = r.random() < 0.35
        shift = max(0, (15 if acc48 else 30) + bits - ebits)
        if per_channel:
            extra["scale_mode"] = 0
            sc_cmds, sc_img = self.scale_stream(O, mb, acc48, False, shift)
            cmds += sc_cmds
            image.update(sc_img)
            osc = dict(scale=r.randrange(1 << 31), shift=r.randrange(64), round_mode=r.randrange(6),
                       dbl_rnd=r.choice((0, r.randrange(31))))
        else:
            osc = self.scale(True, shift, max_scale=(1 << 15) if acc48 else (1 << 31))
        cmds += [("NPU_SET_OFM_SCALE", osc)]
        act, lut = self.activation(ofm, self.lut_ok())
        cmds += self.ofm_cmds(ofm, extra, 1, W, O, blk) + act
        cmds += [("NPU_SET_ACC_FORMAT", dict(acc_format=int(acc48), acc_input=0, acc_output=0, microblock=mb)),
                 ("NPU_OP_CONV", dict(weights_ifm2=1))]
        desc = (f"CONV matmul {W}x{I} . ({O}x{I})^T ifm {ifm.name} ifm2 {ifm2.name} ofm {ofm.name} {tr} "
                f"{'per-channel' if per_channel else 'global'} mb {mb} blk {blk} acc48 {int(acc48)}")
        return Op("NPU_OP_CONV", cmds, image, ofm, desc, lut)

    # ---------------------------------------------------------------- whole jobs
    def any_op(self, kinds=None) -> Op:
        """The next operation from the balanced deck of (kind, mode), among *kinds* (kinds,
        or (kind, mode) pairs)."""
        allowed = None if kinds is None else {x for x in self.op_deck.items if x[0] in kinds or x in kinds}
        kind, mode = self.op_deck.draw(allowed)
        return {"elementwise": self.elementwise, "pool": self.pool, "conv": self.conv,
                "resize": self.resize}[kind](mode)

    def lut_load(self) -> tuple:
        """(commands, image): a random 2048-byte table DMAed into the LUT RAM (internal
        destination): 1D, 2D in chunks, or a 3D gather through an index list with IDX_SKIP1
        (entries outside 0..IDX_MAX are skipped: those LUT bytes keep their old values)."""
        r = self.rng
        self.lut_loaded = True
        src_r, idx_r = self.region(), self.region()
        kind = r.choice(("1d", "2d", "gather"))
        if kind == "1d":
            off = self.alloc.take(src_r, 2048)
            img = {REGION_BASE[src_r] + off: r.randbytes(2048)}
            cmds = [("NPU_SET_DMA0_SRC_REGION", dict(region=src_r, region_mode=0, stride_mode=0, idx_mode=0)),
                    ("NPU_SET_DMA0_DST_REGION", dict(region=0, region_mode=1, idx_mode=0)),
                    ("NPU_SET_DMA0_SRC", dict(addr=off)), ("NPU_SET_DMA0_DST", dict(addr=0)),
                    ("NPU_SET_DMA0_LEN", dict(addr=2048))]
        elif kind == "2d":
            ln = r.choice((64, 128, 256, 512))
            gap = r.choice((0, 16, 100))
            n = 2048 // ln
            off = self.alloc.take(src_r, n * (ln + gap))
            img = {REGION_BASE[src_r] + off: r.randbytes(n * (ln + gap))}
            cmds = [("NPU_SET_DMA0_SRC_REGION", dict(region=src_r, region_mode=0, stride_mode=1, idx_mode=0)),
                    ("NPU_SET_DMA0_DST_REGION", dict(region=0, region_mode=1, idx_mode=0)),
                    ("NPU_SET_DMA0_SRC", dict(addr=off)), ("NPU_SET_DMA0_DST", dict(addr=0)),
                    ("NPU_SET_DMA0_LEN", dict(addr=ln)), ("NPU_SET_DMA0_SIZE0", dict(size=n)),
                    ("NPU_SET_DMA0_SRC_STRIDE0", dict(addr=ln + gap)),
                    ("NPU_SET_DMA0_DST_STRIDE0", dict(addr=ln))]
        else:
            # 4 slices (SIZE1) of 4 gathered lines (SIZE0) of 128 bytes = 2048 bytes
            ln, nsrc, idx_max = 128, 12, 9
            off = self.alloc.take(src_r, ln * nsrc)
            img = {REGION_BASE[src_r] + off: r.randbytes(ln * nsrc)}
            skip = 4 * r.choice((0, 1, 3))
            idx = []
            for _ in range(4):
                idx += [r.choice((r.randint(0, idx_max), r.randint(0, idx_max), -1, idx_max + 1))
                        for _ in range(4)] + [r.randint(-5, 20) for _ in range(skip // 4)]
            ioff = self.alloc.take(idx_r, 4 * len(idx))
            img[REGION_BASE[idx_r] + ioff] = b"".join(v.to_bytes(4, "little", signed=True) for v in idx)
            cmds = [("NPU_SET_DMA0_SRC_REGION", dict(region=src_r, region_mode=0, stride_mode=2, idx_mode=1)),
                    ("NPU_SET_DMA0_DST_REGION", dict(region=0, region_mode=1, idx_mode=0)),
                    ("NPU_SET_DMA0_IDX_REGION", dict(region=idx_r)), ("NPU_SET_DMA0_IDX", dict(addr=ioff)),
                    ("NPU_SET_DMA0_IDX_MAX", dict(idx_max=idx_max)),
                    ("NPU_SET_DMA0_IDX_SKIP1", dict(addr=skip)),
                    ("NPU_SET_DMA0_SRC", dict(addr=off)), ("NPU_SET_DMA0_DST", dict(addr=0)),
                    ("NPU_SET_DMA0_LEN", dict(addr=ln)), ("NPU_SET_DMA0_SIZE0", dict(size=4)),
                    ("NPU_SET_DMA0_SIZE1", dict(size=4)),
                    ("NPU_SET_DMA0_SRC_STRIDE0", dict(addr=ln)), ("NPU_SET_DMA0_SRC_STRIDE1", dict(addr=0)),
                    ("NPU_SET_DMA0_DST_STRIDE0", dict(addr=ln)),
                    ("NPU_SET_DMA0_DST_STRIDE1", dict(addr=4 * ln))]
        cmds += ["NPU_OP_DMA_START", ("NPU_OP_DMA_WAIT", dict(k=0))]
        return cmds, img, kind


@dataclass
class Job:
    words: list
    image: dict
    ops: list
    notes: list


def reserved_scale_bit_job(gen: OpGen, rng: random.Random | None = None) -> "tuple[Job, int, int]":
    """A per-channel CONV/DEPTHWISE job (one operation) with one reserved bit of one
    scale/bias record set: a bit whose flip makes the TLM's decoder (tlm.ethos_u85.scale_bias)
    raise ScaleBiasError for the operation's accumulator format, so the operation is
    UNPREDICTABLE and ends without effect. *rng*: record and bit drawn at random (else the
    first record and its lowest such bit). Returns (job, record, bit)."""
    from tlm.ethos_u85.scale_bias import RECORD_BYTES, ScaleBiasError, decode_scale_bias
    for _ in range(100):
        job = build_job(gen, 1, kinds=("conv",))
        cmds = dict(job.ops[0].cmds)
        if "NPU_SET_SCALE_BASE" not in cmds:
            continue
        acc48 = bool(cmds["NPU_SET_ACC_FORMAT"]["acc_format"])
        addr = REGION_BASE[cmds["NPU_SET_SCALE_REGION"]["region"]] + cmds["NPU_SET_SCALE_BASE"]["addr"]
        data = bytearray(job.image[addr])
        depth = cmds["NPU_SET_OFM_DEPTH_M1"]["depth_m1"] + 1
        n = rng.randrange(depth) if rng else 0
        bits = list(range(8 * RECORD_BYTES))
        if rng:
            rng.shuffle(bits)
        for bit in bits:
            rec = bytearray(data[n * RECORD_BYTES:(n + 1) * RECORD_BYTES])
            rec[bit // 8] ^= 1 << (bit % 8)
            try:
                decode_scale_bias(bytes(rec) + bytes(15 * RECORD_BYTES), 1, acc48=acc48, set_channels=16)
            except ScaleBiasError:
                data[n * RECORD_BYTES:(n + 1) * RECORD_BYTES] = rec
                job.image[addr] = bytes(data)
                return job, n, bit
    raise RuntimeError("no per-channel CONV job drawn")


def build_job(gen: OpGen, n_ops: int, kinds=None) -> Job:
    """One stream: [PMU_MASK] [LUT DMA] op (branch block | KERNEL_WAIT)* ... NPU_OP_STOP.

    Branch blocks between operations: ``always`` over a dead block (an NPU_OP_STOP, an
    NPU_OP_IRQ and a reserved word: executing any of them fails the job) or ``rf_true`` over
    an NPU_OP_IRQ (either way is legal; the scoreboard checks the IRQ history against the
    reference's choice, i.e. COND_STATUS.result_flag of the operation before)."""
    r = gen.rng
    gen.new_job()
    words, image, ops, notes = [], {}, [], []
    if r.random() < 0.4:
        words += enc(("NPU_OP_PMU_MASK", dict(enable=r.randint(0, 1))))
        notes.append("pmu_mask")
    # reload the LUT now and then (a LUT activation needs one loaded in this test)
    if not gen.lut_loaded or r.random() < 0.25:
        cmds, img, kind = gen.lut_load()
        words += enc(*cmds)
        image.update(img)
        notes.append(f"lut_dma_{kind}")
    for i in range(n_ops):
        op = gen.any_op(kinds)
        ops.append(op)
        image.update(op.image)
        if r.random() < 0.4:                 # as Vela does before an operation (no effect here)
            words += enc(("NPU_SET_BLOCKDEP", dict(blockdep=r.randrange(4))))
        words += enc(*op.cmds)
        if i == n_ops - 1:
            break
        x = r.random()
        if x < 0.15:
            dead = enc(("NPU_OP_STOP", dict(mask=0x8000)), ("NPU_OP_IRQ", dict(mask=0x4000))) + [0x0000_0004]
            target = 4 * (len(words) + 2 + len(dead))
            words += enc(("NPU_OP_BRANCH", dict(branch_cond=0, branch_target=target))) + dead
            notes.append("branch_always")
        elif x < 0.3:
            block = enc(("NPU_OP_IRQ", dict(mask=1 << r.randrange(1, 14))))
            target = 4 * (len(words) + 2 + len(block))
            words += enc(("NPU_OP_BRANCH", dict(branch_cond=1, branch_target=target))) + block
            notes.append("branch_rf_true")
        elif x < 0.4:
            words += enc(("NPU_OP_KERNEL_WAIT", dict(n=0)))
        elif x < 0.45:
            words += enc(("NPU_OP_PMU_MASK", dict(enable=r.randint(0, 1))))
            notes.append("pmu_mask")
    words += enc(("NPU_OP_STOP", dict(mask=0x0001)))
    return Job(words, image, ops, notes)


# ================================================================================ running
class RefWatch:
    """A hook on the reference device: kernel operations executed and failed TRM asserts."""

    def __init__(self):
        self.ops: list = []
        self.bad: list = []

    def clear(self) -> None:
        self.ops.clear()
        self.bad.clear()

    def __call__(self, event: str, details: dict) -> None:
        if event == "op" and details.get("name") in KERNEL_OP_NAMES:
            self.ops.append(details.get("name"))
        elif event in ("unpredictable", "op_unimplemented", "internal_error"):
            self.bad.append((event, details))


async def start_bench(dut, config: "str | None" = None, backpressure: "float | None" = None,
                seed: int = 0) -> "tuple[Env, RefWatch]":
    # DUT=tlm: the TLM behind the pins runs its fast paths, the scoreboard the literal model
    env = Env(dut, reference_model=True, config=config, reference_factory=None if RTL else literal_device)
    await env.start()
    if not RTL:
        assert getattr(env.model, "kernel_ops", None) is LITERAL_OPS and env.model.reference_paths, \
            "the scoreboard's reference is not the literal model"
        assert env.tlm.device is not None and env.tlm.device.kernel_ops is not LITERAL_OPS, \
            "the TLM behind the pins is not on its fast paths"
    if backpressure:
        env.axi.random_backpressure(seed, backpressure)
    rng = random.Random(seed)
    await program_regions(env, (rng.randrange(3), rng.randrange(3)))
    watch = RefWatch()
    env.model.hooks.append(watch)
    return env, watch


async def run(env: Env, watch: RefWatch, job: Job, tag: str) -> None:
    """Run one job through the pins and check it (see the module docstring)."""
    for addr, data in job.image.items():
        env.memory.write(addr, data)
    await env.write_ok(CMD, 0xC | 0x2)                           # clear_irq before the job
    await env.load_stream(STREAM_ADDR, job.words)
    watch.clear()
    cocotb.log.info("%s: %d ops, %d command words, %s", tag, len(job.ops), len(job.words),
                    ", ".join(job.notes) or "-")
    for op in job.ops:
        cocotb.log.info("  %s", op.desc)
    status = await env.run_job(max_cycles=2_000_000, poll=32)
    f = status_fields(status)
    assert not (f["cmd_parse_error"] or f["bus_status"] or f["branch_fault"]), \
        f"{tag}: STATUS 0x{status:08x}"
    assert await env.read_ok(QREAD) == 4 * len(job.words), f"{tag}: the job did not reach its NPU_OP_STOP"
    assert not watch.bad, f"{tag}: the reference hit a failed TRM assert (generator bug): {watch.bad[:2]}"
    want = [op.kind for op in job.ops]
    assert watch.ops == want, f"{tag}: the reference executed {watch.ops}, the stream holds {want}"
    sb = env.scoreboard
    job_sb = sb.close_job()
    assert job_sb is not None and job_sb.closed, f"{tag}: the scoreboard saw no job"
    assert job_sb.mismatches_in_job == 0, f"{tag}: scoreboard mismatches: {sb.mismatches[-3:]}"
    assert job_sb.ref_txn_count > 0, f"{tag}: the reference made no memory access"
    written = job_sb.ref_all_writes()
    mirror = sb.ref.memory
    for op in job.ops:
        if op.ofm is None or op.ofm.storage == NONE:
            continue
        spans = IntervalSet((REGION_BASE[op.ofm.region] + lo, REGION_BASE[op.ofm.region] + hi)
                            for lo, hi in op.ofm.spans())
        assert written & spans, f"{tag}: {op.desc}: the reference wrote none of its OFM (nothing compared)"
        for lo, hi in op.ofm.spans():
            a = REGION_BASE[op.ofm.region] + lo
            got = np.frombuffer(env.memory.read(a, hi - lo), np.uint8)
            ref = np.frombuffer(mirror.read(a, hi - lo), np.uint8)
            diff = np.flatnonzero(got != ref)
            assert diff.size == 0, (f"{tag}: {op.desc}: {diff.size} OFM bytes differ from the "
                                    f"reference, first at 0x{a + int(diff[0]):010x}")


def op_field(op: Op, cmd: str, name: str) -> int:
    """Field *name* of command *cmd* in *op* (the last one)."""
    return [f for n, f in op.cmds if n == cmd][-1][name]


def patched(op: Op, changes: dict) -> Op:
    """*op* with fields of its commands replaced ({command: {field: value}})."""
    op.cmds = [(n, dict(f, **changes[n]) if n in changes else f) for n, f in op.cmds]
    return op


def conv_lut_job(gen: OpGen, fn: str, kind: str) -> Job:
    """A LUT DMA (random table), then one CONV/DEPTHWISE whose activation is the LUT
    function *fn* (drawn by the generator, which picks legal tables and clamps)."""
    gen.new_job()
    cmds, image, lkind = gen.lut_load()
    words = enc(*cmds)
    for _ in range(500):
        op = gen.conv(kind)
        if op_field(op, "NPU_SET_ACTIVATION", "activation_function") == AF[fn]:
            break
    else:
        raise RuntimeError(f"the generator drew no {fn} CONV in 500 tries")
    image.update(op.image)
    words += enc(*op.cmds) + enc(("NPU_OP_STOP", dict(mask=0x0001)))
    return Job(words, image, [op], [f"lut_dma_{lkind}", fn])


def conv_chain_job(gen: OpGen, kind: str, modes: tuple) -> Job:
    """A chain (TRM 3.6.4): a CONV/DEPTHWISE whose OFM goes to a chaining FIFO (random FIFO
    0..2, at most rtl_support.CHAIN_DEPTH values), then one ELEMENTWISE per mode of *modes*
    of the same OFM shape, each reading its IFM from the FIFO the operation before wrote;
    all but the last write their OFM to a random FIFO (an HWC OFM, not unsigned b32), the last
    to memory. The chain of the Vela networks (DEPTHWISE -> ELEMENTWISE of the mean lowering)
    with one mode; up to 4 operations (the chain limit), at most 3 external IFMs (the CONV's
    and the binary modes' IFM2s)."""
    from tb.ethos_u85.testlib.rtl_support import CHAIN_DEPTH
    r = gen.rng
    gen.new_job()
    words, image, notes = [], {}, [kind, *modes]
    if r.random() < 0.5:
        cmds, img, lkind = gen.lut_load()
        words += enc(*cmds)
        image.update(img)
        notes.append(f"lut_dma_{lkind}")
    chained = int(isa.activation_storage.chained)
    fifo = r.randrange(3)
    for _ in range(500):
        conv = gen.conv(kind)
        o = conv.ofm
        if (o.h * o.w * o.d <= CHAIN_DEPTH and not (o.prec == B32 and not o.signed)
                and op_field(conv, "NPU_SET_OFM_PRECISION", "activation_transpose") == 0
                and op_field(conv, "NPU_SET_OFM_PRECISION", "activation_reverse") == 0):
            break                                    # (a chained OFM is HWC, not reversed)
    else:
        raise RuntimeError("no CONV with a small enough HWC OFM in 500 tries")
    patched(conv, {"NPU_SET_OFM_PRECISION": dict(activation_storage=chained),
                   "NPU_SET_OFM_REGION": dict(region=fifo)})
    image.update(conv.image)
    conv.desc += f" -> chaining FIFO {fifo}"
    conv.ofm = None                                  # nothing of it in memory
    ops, prev = [conv], (o.prec, o.signed)
    for j, mode in enumerate(modes):
        last = j == len(modes) - 1
        for _ in range(4000):
            ew = gen.elementwise(mode, shape=(o.h, o.w, o.d))
            oprec = op_field(ew, "NPU_SET_OFM_PRECISION", "activation_precision")
            osgn = op_field(ew, "NPU_SET_OFM_PRECISION", "activation_type")
            if (op_field(ew, "NPU_SET_IFM_BROADCAST", "broadcast_mode") == 0
                    and (op_field(ew, "NPU_SET_IFM_PRECISION", "activation_precision"),
                         op_field(ew, "NPU_SET_IFM_PRECISION", "activation_type")) == prev
                    and (last or (op_field(ew, "NPU_SET_OFM_PRECISION", "activation_transpose") == 0
                                  and op_field(ew, "NPU_SET_OFM_PRECISION", "activation_reverse") == 0
                                  and not (oprec == B32 and not osgn)))):
                break
        else:
            raise RuntimeError(f"no ELEMENTWISE {mode} reading a b{8 << prev[0]} IFM in 4000 tries")
        changes = {"NPU_SET_IFM_PRECISION": dict(activation_storage=chained),
                   "NPU_SET_IFM_REGION": dict(region=fifo)}
        ew.desc += f" <- chaining FIFO {fifo}"
        if not last:
            fifo = r.randrange(3)
            changes.update({"NPU_SET_OFM_PRECISION": dict(activation_storage=chained),
                            "NPU_SET_OFM_REGION": dict(region=fifo)})
            ew.desc += f" -> chaining FIFO {fifo}"
            ew.ofm = None
            prev = (oprec, osgn)
        patched(ew, changes)
        image.update(ew.image)
        ops.append(ew)
    for op in ops:
        words += enc(*op.cmds)
    words += enc(("NPU_OP_STOP", dict(mask=0x0001)))
    return Job(words, image, ops, notes)


def n_ops(rng: random.Random, lo: int, hi: int) -> int:
    return N_OPS if N_OPS > 0 else rng.randint(lo, hi)


# ================================================================================ tests
@cocotb.parametrize(backpressure=named([None, 0.3], lambda v: "bp" if v else "none"))
@cocotb.test(**TIMEOUT)
async def test_random_ops(dut, backpressure):
    """Random legal jobs of every kernel operation (the stand-in's subset on DUT=rtl), with
    LUT loads, branches and PMU_MASK between the operations; every byte against the
    scoreboard's reference."""
    rng = seeded(f"test_random_ops[{'bp' if backpressure else 'none'}]")
    env, watch = await start_bench(dut, backpressure=backpressure, seed=rng.getrandbits(16))
    gen = OpGen(rng, get_config(env.config).macs, rtl=RTL)
    total = n_ops(rng, 60, 90) if backpressure is None else n_ops(rng, 20, 30)
    done = j = 0
    while done < total:
        k = min(total - done, rng.randint(1, 4))
        await run(env, watch, build_job(gen, k), f"job {j}")
        done += k
        j += 1
    cocotb.log.info("%d operations in %d jobs", done, j)
    env.finish()


@cocotb.parametrize(wd=named([2, 4], lambda v: f"{v}wd"))
@cocotb.test(**TIMEOUT)
async def test_random_conv(dut, wd):
    """Random CONV/DEPTHWISE jobs (SWD weight streams for each of the 2 or 4 weight
    decoders, FWD, scale/bias streams) on a configuration with *wd* weight decoders
    (ethos-u85-512, or -1024/-2048) on DUT=tlm; on DUT=rtl the bench's configuration."""
    rng = seeded(f"test_random_conv[{wd}wd]")
    config = None if RTL else ("ethos-u85-512" if wd == 2 else rng.choice(("ethos-u85-1024", "ethos-u85-2048")))
    env, watch = await start_bench(dut, config=config, seed=rng.getrandbits(16))
    cocotb.log.info("configuration %s", env.config)
    gen = OpGen(rng, get_config(env.config).macs, rtl=RTL)
    total = n_ops(rng, 12, 18)
    done = j = 0
    while done < total:
        k = min(total - done, rng.randint(1, 3))
        await run(env, watch, build_job(gen, k, kinds=("conv",)), f"job {j}")
        done += k
        j += 1
    env.finish()


@cocotb.test(**TIMEOUT)
async def test_random_matmul(dut):
    """Random matrix multiplies (NPU_OP_CONV weights_ifm2: OFM[1, W, O] = IFM[1, W, I] .
    IFM2[1, O, I]^T; int8/uint8 operands with random zero points, NHWC and NHCWB16 IFM/IFM2,
    every microblock of at least 4 channels, random OFM types and write_ofm modes), jobs of
    1-3; every byte against the scoreboard's reference (the literal model on DUT=tlm)."""
    rng = seeded("test_random_matmul")
    env, watch = await start_bench(dut, seed=rng.getrandbits(16))
    gen = OpGen(rng, get_config(env.config).macs, rtl=RTL)
    total = n_ops(rng, 12, 18)
    done = j = 0
    while done < total:
        k = min(total - done, rng.randint(1, 3))
        await run(env, watch, build_job(gen, k, kinds=(("conv", "matmul"),)), f"job {j}")
        done += k
        j += 1
    env.finish()


@cocotb.test(**TIMEOUT)
async def test_conv_lut(dut):
    """Every LUT function (ACTIVATION.activation_function) on CONV and DEPTHWISE OFMs, after a
    random table DMAed into the LUT RAM: every OFM byte against the scoreboard's reference
    (the table is random, so an activation that ignores or misreads the LUT shows)."""
    rng = seeded("test_conv_lut")
    env, watch = await start_bench(dut, seed=rng.getrandbits(16))
    gen = OpGen(rng, get_config(env.config).macs, rtl=RTL)
    fns = [n for n in AF if n != "lut_none"]
    for j, fn in enumerate(fns):
        await run(env, watch, conv_lut_job(gen, fn, "dw" if j % 2 else "conv"), f"{fn}")
    env.finish()


# write_ofm's modes: every transpose but HWC, every reverse; (transpose, reverse, OFM format)
OFM_PERMS = ([(t, 0, f) for t in TRANSPOSE if t != "HWC" for f in (NHWC, NHCWB16)]
             + [("HWC", v, f) for v in (1, 2) for f in (NHWC, NHCWB16)] + [("HWC", 3, NHWC)])


def perm_job(gen: OpGen, kind: str, perm: tuple, accept=None, changes: "dict | None" = None) -> "Job | None":
    """A LUT DMA, then one operation of *kind* (conv, dw, pool, ew, resize; random mode)
    whose OFM is written to memory with write_ofm mode *perm* (OFM_PERMS), or None when the
    operation does not allow the mode (ELEMENTWISE: HCW, CHW; RESIZE: no transpose; none
    reversed on ELEMENTWISE). *accept*: a further condition on the drawn operation;
    *changes*: fields replaced afterwards (patched)."""
    tr, rev, fmt = perm
    if (kind == "ew" and (rev or tr not in ("HCW", "CHW"))) or (kind == "resize" and tr != "HWC"):
        return None
    r = gen.rng
    gen.new_job()
    cmds, image, lkind = gen.lut_load()
    gen.force = perm
    try:
        for _ in range(200):
            if kind in ("conv", "dw"):
                op = gen.conv(kind)
            elif kind == "pool":
                op = gen.pool(r.choice(RTL_POOL))
            elif kind == "ew":
                op = gen.elementwise(r.choice(RTL_EW))
            else:
                op = gen.resize(r.choice(tuple(RESIZE)))
            got = (op_field(op, "NPU_SET_OFM_PRECISION", "activation_transpose"),
                   op_field(op, "NPU_SET_OFM_PRECISION", "activation_reverse"),
                   op_field(op, "NPU_SET_OFM_PRECISION", "activation_format"))
            if got == (TRANSPOSE[tr], rev, fmt) and op.ofm.storage != NONE and (accept is None or accept(op)):
                break
        else:
            raise RuntimeError(f"the generator drew no {kind} with OFM mode {perm} in 200 tries")
    finally:
        gen.force = None
    if changes:
        patched(op, changes)
    image.update(op.image)
    words = enc(*cmds) + enc(*op.cmds) + enc(("NPU_OP_STOP", dict(mask=0x0001)))
    return Job(words, image, [op], [f"lut_dma_{lkind}"])


@cocotb.parametrize(kind=named(["conv", "dw", "pool", "ew", "resize"]))
@cocotb.test(**TIMEOUT)
async def test_ofm_perms(dut, kind):
    """write_ofm's transposes (WHC, HCW, CWH, CHW, WCH) on NHWC and NHCWB16 OFMs and its
    reverses (H, W on both formats, C on NHWC) on each operation that allows them (CONV,
    DEPTHWISE, POOL: all; ELEMENTWISE: HCW, CHW; RESIZE: the reverses), random otherwise:
    every OFM byte against the scoreboard's reference (npu_ofm_addr.v on DUT=rtl)."""
    rng = seeded(f"test_ofm_perms[{kind}]")
    env, watch = await start_bench(dut, seed=rng.getrandbits(16))
    gen = OpGen(rng, get_config(env.config).macs, rtl=RTL)
    n = 0
    for perm in OFM_PERMS:
        for k in range(PERM_REPS):
            job = perm_job(gen, kind, perm)
            if job is None:
                break
            await run(env, watch, job, f"{kind} {perm[0]} rev {perm[1]} fmt {perm[2]} #{k}")
            n += 1
    assert n >= 4, f"only {n} jobs"
    cocotb.log.info("%d jobs", n)
    env.finish()


# test_ofm_bursts: write_ofm modes; ("HWC", 0, NHWC) twice: a contiguous OFM (OFM_STRIDE_X =
# depth * element bytes), then a strided one
OFM_BURST_MODES = [("HWC", 0, NHWC), ("HWC", 0, NHWC), ("HWC", 0, NHCWB16), ("HWC", 1, NHWC), ("HWC", 2, NHWC),
                   ("HWC", 2, NHCWB16), ("HWC", 3, NHWC), ("WHC", 0, NHWC), ("CHW", 0, NHCWB16),
                   ("WCH", 0, NHWC)]
CH_OFM = int(Channel.wr_ofm)


@cocotb.parametrize(kind=named(["conv", "dw"]))
@cocotb.test(**TIMEOUT)
async def test_ofm_bursts(dut, kind):
    """CONV/DEPTHWISE OFM writes as INCR runs (rtl_stub/ethos_u85/npu_conv_out.v): contiguous
    OFMs (NHWC with OFM_STRIDE_X = depth * element bytes, NHCWB16) and ones whose beats do not
    follow (a strided NHWC OFM, reverse H/W/C, transposes), SRAM with 64-byte and EXT with
    256-byte max_beats windows: every OFM byte against the scoreboard's reference, and on
    DUT=rtl every wr_ofm burst legal (tb/ethos_u85/testlib/bursts.py: INCR, <= 16 beats,
    inside its port's window, a strobed byte in each beat) with multi-beat runs on the
    contiguous OFMs."""
    rng = seeded(f"test_ofm_bursts[{kind}]")
    env, watch = await start_bench(dut, seed=rng.getrandbits(16))
    await program_regions(env, (0, 2))
    window = {"SRAM0": 64, "EXT0": 256}
    bursts: list = []
    env.axi.add_listener(bursts.append)
    gen = OpGen(rng, get_config(env.config).macs, rtl=RTL)
    seen = []
    multi = 0
    for k, perm in enumerate(OFM_BURST_MODES):
        accept = None
        if perm == ("HWC", 0, NHWC):             # the first contiguous, the second strided
            want = "strided" if "contiguous" in seen else "contiguous"
            accept = (lambda op, w=want: (op.ofm.sx == op.ofm.d * op.ofm.es) == (w == "contiguous"))
        job = perm_job(gen, kind, perm, accept)
        ofm = job.ops[0].ofm
        contiguous = perm[:2] == ("HWC", 0) and (ofm.fmt == NHCWB16 or ofm.sx == ofm.d * ofm.es)
        what = ("contiguous" if contiguous else "strided") if perm == ("HWC", 0, NHWC) else str(perm)
        bursts.clear()
        await run(env, watch, job, f"{kind} {perm} {what} #{k}")
        ofm_b = [b for b in bursts if b.id == CH_OFM and b.write]
        if RTL:
            for b in ofm_b:
                err = burst_error(b, window[b.port])
                assert err is None, f"{kind} {perm} #{k}: wr_ofm {err}"
            multi += contiguous and any(b.beats > 1 for b in ofm_b)
        cocotb.log.info("  %s: %d wr_ofm bursts, %d beats", what, len(ofm_b), sum(b.beats for b in ofm_b))
        seen.append(what)
    assert {"contiguous", "strided"} <= set(seen), f"HWC NHWC OFMs drawn: {seen}"
    assert multi or not RTL, "no contiguous OFM was written with a multi-beat burst"
    env.finish()


def ofm_depth_aligned(gen: OpGen, op: Op) -> bool:
    """write_ofm reverse C: the OFM depth is a multiple of max(16, microblock depth)."""
    od = op_field(op, "NPU_SET_OFM_DEPTH_M1", "depth_m1") + 1
    return od % max(16, gen.microblock_depth(op_field(op, "NPU_SET_ACC_FORMAT", "microblock"))) == 0


# test_ofm_blk_depth: (transpose, reverse, OFM format, OFM_BLK_DEPTH, OFM_BLK_HEIGHT and _WIDTH (None:
# the generator's), legal, words of the TLM's reason when not); reverse C with an OFM depth not a
# multiple of max(16, microblock depth) (NHWC, OFM_BLK_DEPTH <= 16), the transposes that move C to
# H or W (OFM_BLK_DEPTH <= 128), then every transpose with all three block sizes at 128 (legal: the
# 7-bit height and width fields reach the 128 limits, never beyond)
BLK_DEPTH_CASES = ([("HWC", 3, NHWC, d, None, d <= 16, ("reverse C", "blk_depth")) for d in (15, 16, 17)]
                   + [(t, 0, f, d, None, d <= lim, ("block limits", t))
                      for t, lim in (("HCW", MAX_BLOCK_WIDTH), ("CWH", MAX_BLOCK_HEIGHT), ("CHW", MAX_BLOCK_HEIGHT),
                                     ("WCH", MAX_BLOCK_WIDTH))
                      for f in (NHWC, NHCWB16) for d in (lim, lim + 1)]
                   + [(t, 0, f, MAX_BLOCK_HEIGHT, MAX_BLOCK_HEIGHT, True, ())
                      for t in TRANSPOSE if t != "HWC" for f in (NHWC, NHCWB16)])


def blk_depth_job(gen: OpGen, kind: str, tr: str, rev: int, fmt: int, depth: int,
                  hw: "int | None" = None) -> "Job | None":
    """A perm_job of *kind* with write_ofm mode (tr, rev, fmt), OFM_BLK_DEPTH *depth* and
    OFM_BLK_HEIGHT/WIDTH *hw* (None: the generator's) (reverse C: an OFM depth not a multiple
    of max(16, microblock depth)), or None when *kind* cannot have it. CONV: its weight
    stream is encoded for the block depth, so it is drawn (CONV_BLK_DEPTHS), never patched;
    an illegal reverse-C depth is the next one drawn above 16 with the reverse set afterwards
    (the generator never pairs them); no *hw*."""
    unaligned = (lambda op: not ofm_depth_aligned(gen, op)) if rev == 3 else (lambda op: True)
    if kind not in ("conv", "dw"):
        changes = {"NPU_SET_OFM_BLK_DEPTH_M1": dict(depth_m1=depth - 1)}
        if hw is not None:
            changes.update({"NPU_SET_OFM_BLK_HEIGHT_M1": dict(height_m1=hw - 1),
                            "NPU_SET_OFM_BLK_WIDTH_M1": dict(width_m1=hw - 1)})
        return perm_job(gen, kind, (tr, rev, fmt), unaligned, changes)
    d = min((x for x in CONV_BLK_DEPTHS if x >= depth), default=None)
    if hw is not None or d is None or (d != depth and not (rev == 3 and d > 16)):
        return None

    def accept(op):
        return op_field(op, "NPU_SET_OFM_BLK_DEPTH_M1", "depth_m1") + 1 == d and unaligned(op)
    if rev == 3 and d > 16:
        # global scale: a per-channel scale/bias stream is encoded for the reverse (scale_stream)
        def accept_global(op):
            return accept(op) and op_field(op, "NPU_SET_OFM_PRECISION", "scale_mode") == 1
        job = perm_job(gen, kind, (tr, 0, fmt), accept_global, {"NPU_SET_OFM_PRECISION": dict(activation_reverse=3)})
        job.ops[0].desc += ", then activation_reverse 3"
        return job
    return perm_job(gen, kind, (tr, rev, fmt), accept)


async def run_skipped(env: Env, watch: RefWatch, job: Job, tag: str, why: tuple) -> None:
    """Run *job* whose one operation fails a register-only write_ofm assert: the job ends
    without error at its NPU_OP_STOP, the reference logs UNPREDICTABLE, its reason holding the words *why*, and
    skips the operation (on_unpredictable='continue'), the OFM stays untouched, the
    scoreboard clean (test_ofm_write_unpredictable's outcome)."""
    op = job.ops[0]
    for addr, data in job.image.items():
        env.memory.write(addr, data)
    spans = [(REGION_BASE[op.ofm.region] + lo, hi - lo) for lo, hi in op.ofm.spans()]
    before = [env.memory.read(a, n) for a, n in spans]
    await env.write_ok(CMD, 0xC | 0x2)
    await env.load_stream(STREAM_ADDR, job.words)
    watch.clear()
    cocotb.log.info("%s (skipped): %s", tag, op.desc)
    status = await env.run_job(max_cycles=2_000_000, poll=32)
    f = status_fields(status)
    assert not (f["cmd_parse_error"] or f["bus_status"] or f["branch_fault"]), f"{tag}: STATUS 0x{status:08x}"
    assert await env.read_ok(QREAD) == 4 * len(job.words), f"{tag}: the job did not reach its NPU_OP_STOP"
    whats = [d.get("what", "") for e, d in watch.bad if e == "unpredictable"]
    assert any(all(s in w for s in why) for w in whats), \
        f"{tag}: the reference did not find {why} (the case is wrong): {watch.bad}"
    job_sb = env.scoreboard.close_job()
    assert job_sb is not None and job_sb.mismatches_in_job == 0, f"{tag}: {env.scoreboard.mismatches[-3:]}"
    assert [env.memory.read(a, n) for a, n in spans] == before, f"{tag}: the skipped operation wrote its OFM"


@cocotb.parametrize(kind=named(["conv", "pool", "ew"]))
@cocotb.test(**TIMEOUT)
async def test_ofm_blk_depth(dut, kind):
    """write_ofm's OFM_BLK_DEPTH rules at their boundaries (BLK_DEPTH_CASES): reverse C with
    an unaligned OFM depth at block depths 15, 16 (legal) and 17, the C-moving transposes at
    128 (legal) and 129, every transpose with 128 x 128 x 128 blocks (legal), on random
    operations of *kind* (ELEMENTWISE: HCW, CHW; CONV: reverse C at 16 and at 32, the block
    depths its weights allow: blk_depth_job). Legal ones:
    every OFM byte against the reference; the others: UNPREDICTABLE, without effect. A stand-in
    computing the block depth off by one (npu_kernel.v, npu_conv.v) fails one side."""
    rng = seeded(f"test_ofm_blk_depth[{kind}]")
    env, watch = await start_bench(dut, seed=rng.getrandbits(16))
    gen = OpGen(rng, get_config(env.config).macs, rtl=RTL)
    n = 0
    for tr, rev, fmt, depth, hw, legal, why in BLK_DEPTH_CASES:
        job = blk_depth_job(gen, kind, tr, rev, fmt, depth, hw)
        if job is None:
            continue
        got = op_field(job.ops[0], "NPU_SET_OFM_BLK_DEPTH_M1", "depth_m1") + 1
        tag = f"{kind} {tr} rev {rev} fmt {fmt} blk_depth {got}" + (f" blk_height/width {hw}" if hw else "")
        if legal:
            await run(env, watch, job, tag)
        else:
            await run_skipped(env, watch, job, tag, why)
        n += 1
    assert n >= (2 if kind == "conv" else 8), f"only {n} jobs"
    cocotb.log.info("%d jobs", n)
    env.finish()


@cocotb.parametrize(kind=named(["conv", "dw"]))
@cocotb.test(**TIMEOUT)
async def test_conv_chained(dut, kind):
    """CONV / DEPTHWISE with a chained OFM (a chaining FIFO, TRM 3.6.4) read by the next
    ELEMENTWISE as its chained IFM, in chains of 2 to 4 operations (ELEMENTWISEs passing the
    values on through random FIFOs, the same one too; LUT activations among the random
    ones): the chain's OFM bytes, STATUS and QREAD against the scoreboard's reference."""
    rng = seeded(f"test_conv_chained[{kind}]")
    env, watch = await start_bench(dut, seed=rng.getrandbits(16))
    gen = OpGen(rng, get_config(env.config).macs, rtl=RTL)
    # chains of 2 to 4 operations (3 external IFMs at most: unary modes in the middle)
    chains = (("add",), ("abs",), ("mul",), ("max",), ("lrelu", "sub"), ("abs", "add"),
              ("abs", "lrelu", "max"), ("not", "abs", "add"))
    for j, modes in enumerate(chains):
        await run(env, watch, conv_chain_job(gen, kind, modes), f"chain {j} {'+'.join(modes)}")
    env.finish()
