"""Kernel operations of the RTL stand-in (rtl_stub/ethos_u85/npu_kernel.v, npu_conv.v) against the TLM.

Directed and seeded cases of NPU_OP_ELEMENTWISE (mul, add, sub, min, max) and NPU_OP_POOL
(max, min, average, sum) on 8-bit tensors (the stand-in's wider subset - every precision,
mode, LUT, chaining, RESIZE, CONV/DEPTHWISE - is exercised by
tb/ethos_u85/tests/test_random_ops.py and the Vela catalog sweep
tb/ethos_u85/tests/test_rtl_networks.py), streams built with tlm.ethos_u85.isa.encode from
seeded random parameters (shapes,
signedness, zero points, IFM/IFM2/OFM scales with every rounding mode and dbl_rnd,
activation clipping, broadcast and scalar operands, NHWC / NHCWB16, tile2x2 / tile3x1
single-tile storage, strides, padding, kernels). Every job runs with the scoreboard (the
reference TLM runs the same stream on a mirror of memory: STATUS, QREAD, IRQ edges and every
AXI write are compared); the tests also compare every OFM byte with the TLM's and check that
the TLM really executed the operation (no UNPREDICTABLE event), so a case never passes
vacuously.

* ``test_elementwise`` / ``test_pool``: random operations, several per job, with and
  without random AXI back-pressure (``KERNEL_CASES`` scales the count, default 12 / 10
  operations without back-pressure; ``KERNEL_SEED`` fixes the seed).
* ``test_pool_large_kernels``: max/min with kernels up to 256x1, 2x70, 16x16.
* ``test_kernel_round_modes``: every OFM round_mode with dbl_rnd 0, 15, 30.
* ``test_resize_integer_y_step``: NPU_OP_RESIZE (every mode) with an integer y step
  (downscale in y), OFM against a numpy formula of the position recurrence.
* ``test_sigmoid_rounding_tie``: lut_sigmoid (table DMAed into the LUT RAM) on inputs where
  its rounding constants decide (ties derived from the TRM formula, asserted present).
* ``test_kernel_unpredictable``: register-only TRM asserts: the command has no effect, as in
  the TLM (policy on_unpredictable='continue').
* ``test_kernel_unsupported`` (DUT=rtl only): each refused feature stops with
  cmd_parse_error + IRQ, QREAD at the operation, nothing written.
* ``test_kernel_bus_error``: an error response on the IFM, IFM2 or OFM channel.
* ``test_conv_streams`` (DUT=rtl only): NPU_OP_CONV / NPU_OP_DEPTHWISE read their
  scale/bias stream (rd_scale_bias) before their weight streams (rd_weights), whole
  streams, in legal bursts, and compute the OFM the TLM computes; the faults on those
  streams against the TLM are in tb/ethos_u85/tests/test_faults.py.
* ``test_conv_ifm_runs`` / ``test_conv_ofm_runs`` (DUT=rtl only): a contiguous NHWC IFM is
  read, a contiguous OFM written, as multi-beat INCR runs inside the max_beats windows.
* ``test_conv_ofm_stalled``: the same network with WREADY held low in long windows (the
  stand-in's OFM write queue full while the MAC array has the next block).
* ``test_kernel_stop_and_reset`` (DUT=rtl only): CMD.stop_request and a soft reset while an
  operation runs.
* ``test_vela_networks``: catalog networks made only of elementwise and pooling operations
  (tests/nets, Vela for ethos-u85-256, memory modes default and sram_only) through the
  driver flow of tlm.ethos_u85.runner (regions, guard bands, APB sequence), outputs against the TLM;
  a quick list by default, every one with ``KERNEL_NETS=all``.

Every burst of a kernel job (the kernel unit's) is also checked: channel ID (rd_ifm 1,
rd_ifm_stream 5, wr_ofm 8) inside that channel's tensor, on its region's port group, one
16-byte beat (DUT=rtl).

On DUT=tlm the same tests run against the TLM behind the pins (a check of the bench).
"""
from __future__ import annotations

import itertools
import os
import random
from dataclasses import dataclass, field

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles

from tb.ethos_u85.env import Env
from tb.ethos_u85.testlib.marks import DUT, TIMEOUT, named, skip_now
from tb.ethos_u85.testlib.memmap import MEM_ATTRS, REGION_BASE, STREAM_ADDR, program_regions, regioncfg
from tb.ethos_u85.testlib.netjob import check_litert, run_network, vela_model
from tb.ethos_u85.testlib.regs import OFF, status_fields
from tb.ethos_u85.testlib.streams import enc, fmap_cmds
from tlm.ethos_u85 import isa
from tlm.ethos_u85.memory import Channel

STATUS, CMD, QREAD = OFF["STATUS"], OFF["CMD"], OFF["QREAD"]
CASES = int(os.environ.get("KERNEL_CASES", "0") or 0)
SEED = os.environ.get("KERNEL_SEED")
LONG_TIMEOUT = dict(timeout_time=200, timeout_unit="ms")

NHWC, NHCWB16 = 0, 1
TILE2X2, TILE3X1, CHAINED, NONE = 0, 1, 2, 3
EW_MODES = {"mul": 0, "add": 1, "sub": 2, "min": 3, "max": 4}
POOL_MODES = {"max": 0, "average": 1, "sum": 3, "min": 5}
SCALAR = 8


def rng_for(name: str) -> random.Random:
    seed = int(SEED) if SEED else random.getrandbits(32)
    cocotb.log.info("%s: seed %d (KERNEL_SEED=%d reproduces)", name, seed, seed)
    return random.Random(seed)


# ============================================================================ tensors
@dataclass
class Fm:
    """One feature map as its NPU_SET_<p>_* registers describe it (elements of esize bytes;
    the cmds give precision b8 unless told otherwise)."""
    region: int
    base: int
    fmt: int
    signed: int
    h: int                       # extent addressed (1 on a broadcast axis)
    w: int
    d: int
    sx: int = 0
    sy: int = 0
    sc: int = 0
    storage: int = TILE2X2
    w0m1: int = 0
    h0m1: int = 0
    h1m1: int = 0
    zp: int = 0                  # raw 16 bits
    data: bytes | None = None    # contents of span() (None: random)
    esize: int = 1

    def span(self) -> tuple[int, int]:
        """Region offsets [lo, hi) of every byte the tensor can address."""
        if self.storage == NONE:
            return self.base, self.base
        ys, xs, cs = self.h - 1, self.w - 1, self.d - 1
        if self.fmt == NHWC:
            hi = self.base + ys * self.sy + xs * self.sx + (cs + 1) * self.esize
        else:
            hi = self.base + ys * self.sy + (cs >> 4) * self.sc + 16 * self.esize * (xs + 1)
        return self.base, hi

    def cmds(self, p: str, extra_prec: dict | None = None) -> list:
        prec = dict(activation_type=self.signed, activation_precision=0,
                    activation_format=self.fmt, activation_storage=self.storage)
        prec.update(extra_prec or {})
        return fmap_cmds(p, prec, self.region, [self.base & ((1 << 40) - 1)] * 4, self.sx, self.sy,
                         self.sc, self.w0m1, self.h0m1, self.h1m1, self.zp)


def zero_point(rng: random.Random, signed: int) -> int:
    if rng.random() < 0.25:
        return 0
    return rng.randint(-128, 127) & 0xFFFF if signed else rng.randint(0, 255)


def make_fm(rng: random.Random, region: int, h: int, w: int, d: int, *, signed=None,
            fmt=None, storage=None) -> Fm:
    """Random layout: NHWC (any base alignment, gaps) or NHCWB16 (16-byte aligned); tile2x2
    or tile3x1 with tile 0 covering the tensor."""
    fmt = rng.choice((NHWC, NHWC, NHCWB16)) if fmt is None else fmt
    signed = rng.randint(0, 1) if signed is None else signed
    if fmt == NHWC:
        base = rng.randrange(0, 0x200)
        sx = d + rng.choice((0, 0, 0, 1, 5, 16))
        sy = w * sx + rng.choice((0, 0, 3, 32))
        sc = rng.randrange(0, 64)                       # ignored for NHWC
    else:
        base = 16 * rng.randrange(0, 0x20)
        sc = 16 * w + 16 * rng.choice((0, 0, 1, 3))
        sy = ((d + 15) // 16) * sc + 16 * rng.choice((0, 0, 2))
        sx = rng.randrange(0, 64)                       # ignored for NHCWB16
    if storage is None:
        storage = TILE2X2 if rng.random() < 0.8 else TILE3X1
    w0m1 = w - 1 + rng.choice((0, 0, 0, 2, 100))
    h0m1 = h - 1 + rng.choice((0, 0, 0, 1, 7))
    h1m1 = h0m1 if rng.random() < 0.7 else h - 1 + rng.choice((0, 4))
    return Fm(region, base, fmt, signed, h, w, d, sx, sy, sc, storage, w0m1, h0m1, h1m1,
              zero_point(rng, signed))


def scale_fields(rng: random.Random, ofm: bool, typical_shift: int) -> dict:
    """A scale register: realistic (Vela-like) or wild values; every rounding mode."""
    if rng.random() < 0.9:
        scale = rng.randrange(1 << 29, 1 << 31)
        shift = max(0, min(63, typical_shift + rng.randint(-2, 2)))
    else:
        scale = rng.choice((0, 1, rng.randrange(0, 1 << 31), (1 << 31) - 1))
        shift = rng.randrange(0, 64)
    rnd = rng.randrange(0, 6) if ofm else rng.randrange(0, 2)
    dbl = rng.choice((0, 0, rng.randrange(0, 31), 30, 20))
    return dict(scale=scale, shift=shift, round_mode=rnd, dbl_rnd=dbl)


def activation_cmds(rng: random.Random, ofm_signed: int) -> list:
    """ACTIVATION (lut_none) with clip_range b16 and ACTIVATION_MIN/MAX: mostly the OFM type's
    range, sometimes a narrower window, clip_range none, or min > max (the literal order)."""
    r = rng.random()
    tlo, thi = (-128, 127) if ofm_signed else (0, 255)
    clip, lo, hi = 0, tlo, thi
    if r < 0.25:
        lo = rng.randint(tlo - 20, tlo + 60)
        hi = rng.randint(max(lo, thi - 60), thi + 40)
    elif r < 0.35:
        clip = 1                                         # none: the result wraps to 8 bits
    elif r < 0.38:
        lo, hi = hi, lo                                  # min > max
    return [("NPU_SET_ACTIVATION", dict(activation_function=0, table=0, activation_clip_range=clip)),
            ("NPU_SET_ACTIVATION_MIN", dict(clip_boundary=lo & 0xFFFF)),
            ("NPU_SET_ACTIVATION_MAX", dict(clip_boundary=hi & 0xFFFF))]


def ofm_cmds(ofm: Fm, h: int, w: int, d: int, **prec) -> list:
    p = dict(scale_mode=1, activation_reverse=0, activation_transpose=0)
    p.update(prec)
    return ofm.cmds("OFM", p) + [
        ("NPU_SET_OFM_HEIGHT_M1", dict(height_m1=h - 1)), ("NPU_SET_OFM_WIDTH_M1", dict(width_m1=w - 1)),
        ("NPU_SET_OFM_DEPTH_M1", dict(depth_m1=d - 1)),
        ("NPU_SET_OFM_BLK_HEIGHT_M1", dict(height_m1=min(h, 64) - 1)),
        ("NPU_SET_OFM_BLK_WIDTH_M1", dict(width_m1=min(w, 64) - 1)),
        ("NPU_SET_OFM_BLK_DEPTH_M1", dict(depth_m1=min(d, 512) - 1))]


@dataclass
class Op:
    """One kernel operation: its commands and the tensors it reads and writes."""
    name: str
    cmds: list
    reads: list = field(default_factory=list)      # Fm
    ofm: Fm | None = None
    desc: str = ""
    ifm2: Fm | None = None                         # elementwise: the IFM2 (if read)
    lut: Fm | None = None                          # the LUT table its commands DMA into the LUT RAM


# ============================================================================ operations
def elementwise_op(rng: random.Random, regions=(2, 4, 3), scalars: bool = True,
                   ofm_none: bool = True) -> Op:
    mode = rng.choice(list(EW_MODES))
    H, W, D = rng.randint(1, 4), rng.randint(1, 5), rng.choice((1, 3, 8, 16, 17, 24, 33, 40))
    r = rng.random() if scalars else 0.22 + 0.78 * rng.random()
    bm, bm2 = 0, 0
    if r < 0.15:
        bm2 = SCALAR
    elif r < 0.22:
        bm = SCALAR
    elif r < 0.6:
        bm2 = rng.randrange(1, 8)
        if rng.random() < 0.3:
            bm = rng.randrange(0, 8)
    def dims(b):
        return (1 if b & 1 else H, 1 if b & 2 else W, 1 if b & 4 else D)
    ifm = make_fm(rng, regions[0], *dims(bm))
    ifm2 = make_fm(rng, regions[1], *dims(bm2))
    reads = []
    if bm == SCALAR:
        ifm.storage = NONE
    else:
        reads.append(ifm)
    if bm2 == SCALAR:
        ifm2.storage = NONE
    else:
        reads.append(ifm2)
    ofm = make_fm(rng, regions[2], H, W, D, storage=NONE if ofm_none and rng.random() < 0.04 else None)
    scalar = 0
    if SCALAR in (bm, bm2):
        zp = (ifm if bm == SCALAR else ifm2).zp
        zps = zp - 0x10000 if (zp & 0x8000 and (ifm if bm == SCALAR else ifm2).signed) else zp
        # OP_SCALAR - zp must fit int16 for add/sub/min/max (scale_a/b assert); mul: any int32
        scalar = rng.randint(-200, 200) + zps if mode != "mul" or rng.random() < 0.7 \
            else rng.randint(-(1 << 31), (1 << 31) - 1)
    in_shift = rng.randint(18, 34)
    cmds = ifm.cmds("IFM") + ifm2.cmds("IFM2")
    cmds += [("NPU_SET_IFM_BROADCAST", dict(broadcast_mode=bm)),
             ("NPU_SET_IFM2_BROADCAST", dict(broadcast_mode=bm2)),
             ("NPU_SET_OP_SCALAR", dict(scalar=scalar)),
             ("NPU_SET_IFM_SCALE", scale_fields(rng, False, in_shift)),
             ("NPU_SET_IFM2_SCALE", scale_fields(rng, False, in_shift)),
             ("NPU_SET_IFM_UPSCALE", dict(mode=0))]
    # output scale: bring the result back to about 8 bits
    if mode == "mul":
        out_shift = rng.randint(36, 39)
    else:
        out_shift = max(0, 62 - in_shift + rng.randint(-1, 1))
    cmds += [("NPU_SET_OFM_SCALE", scale_fields(rng, True, out_shift))]
    cmds += ofm_cmds(ofm, H, W, D) + activation_cmds(rng, ofm.signed)
    cmds += [("NPU_SET_ACC_FORMAT", dict(acc_format=rng.randint(0, 1), acc_input=0, acc_output=0,
                                         microblock=1)),
             ("NPU_OP_ELEMENTWISE", dict(elementwise_mode=EW_MODES[mode]))]
    desc = (f"{mode} {H}x{W}x{D} bcast {bm}/{bm2} fmt {ifm.fmt}{ifm2.fmt}{ofm.fmt} "
            f"signed {ifm.signed}{ifm2.signed}{ofm.signed}")
    return Op("elementwise", cmds, reads, ofm, desc, ifm2 if bm2 != SCALAR else None)


def pool_op(rng: random.Random, regions=(5, 1), mode: str | None = None, big: bool = False,
            ofm_none: bool = True) -> Op:
    mode = mode or rng.choice(list(POOL_MODES))
    if mode == "average":
        kh, kw = rng.choice((1, 2, 3, 3, 4, 5, 8)), rng.choice((1, 2, 3, 3, 4, 7, 8))
    elif mode == "sum":
        kh, kw = rng.randint(1, 3), rng.randint(1, 3)
    else:
        kh, kw = rng.choice((1, 2, 3, 3, 5, 9)), rng.choice((1, 2, 3, 3, 4, 13))
        if big:
            kh, kw = rng.choice(((40, 3), (2, 70), (256, 1), (16, 16)))
    sy, sx = rng.choice((1, 1, 2, 2, 3, 3, 4)), rng.choice((1, 1, 2, 2, 3, 3, 4))
    oh, ow, od = rng.randint(1, 4), rng.randint(1, 4), rng.choice((1, 2, 5, 16, 19, 32, 35))
    if big:
        oh, ow, od = rng.randint(1, 2), rng.randint(1, 2), rng.choice((1, 5, 17))
    if mode == "average":
        pt, pb = rng.randrange(0, kh), rng.randrange(0, kh)
        pl, pr = rng.randrange(0, kw), rng.randrange(0, kw)
    else:
        pt, pb = rng.randint(0, min(kh, 4)), rng.randint(0, min(kh, 4))
        pl, pr = rng.randint(0, min(kw, 4)), rng.randint(0, min(kw, 4))
    ih = (oh - 1) * sy + kh - pt - pb
    iw = (ow - 1) * sx + kw - pl - pr
    while ih < 1:
        pb = max(0, pb - 1) if pb else pb
        pt = max(0, pt - 1) if not pb else pt
        ih = (oh - 1) * sy + kh - pt - pb
    while iw < 1:
        pr = max(0, pr - 1) if pr else pr
        pl = max(0, pl - 1) if not pr else pl
        iw = (ow - 1) * sx + kw - pl - pr
    ifm = make_fm(rng, regions[0], ih, iw, od)
    ofm = make_fm(rng, regions[1], oh, ow, od, storage=NONE if ofm_none and rng.random() < 0.04 else None)
    cmds = ifm.cmds("IFM") + [("NPU_SET_IFM_DEPTH_M1", dict(depth_m1=rng.randrange(0, 64))),
                              ("NPU_SET_IFM_UPSCALE", dict(mode=0)),
                              ("NPU_SET_IFM_PAD_TOP", dict(pad=pt)), ("NPU_SET_IFM_PAD_BOTTOM", dict(pad=pb)),
                              ("NPU_SET_IFM_PAD_LEFT", dict(pad=pl)), ("NPU_SET_IFM_PAD_RIGHT", dict(pad=pr)),
                              ("NPU_SET_KERNEL_HEIGHT_M1", dict(height_m1=kh - 1)),
                              ("NPU_SET_KERNEL_WIDTH_M1", dict(width_m1=kw - 1)),
                              ("NPU_SET_KERNEL_STRIDE", dict(stride_y_lsb=(sy - 1) & 1, stride_y_msb=(sy - 1) >> 1,
                                                             stride_x_lsb=(sx - 1) & 1, stride_x_msb=(sx - 1) >> 1))]
    if mode == "average":
        sc = dict(scale=rng.randrange(0, 1 << 31), shift=rng.randrange(0, 64),
                  round_mode=rng.randrange(0, 6), dbl_rnd=rng.choice((0, rng.randrange(0, 31))))
    elif mode == "sum":
        sc = scale_fields(rng, True, 31 + (kh * kw).bit_length() // 2)
    else:
        sc = scale_fields(rng, True, 31)
    cmds += [("NPU_SET_OFM_SCALE", sc)]
    cmds += ofm_cmds(ofm, oh, ow, od) + activation_cmds(rng, ofm.signed)
    cmds += [("NPU_SET_ACC_FORMAT", dict(acc_format=0, acc_input=0, acc_output=0, microblock=1)),
             ("NPU_OP_POOL", dict(pooling_mode=POOL_MODES[mode]))]
    desc = (f"{mode} k{kh}x{kw} s{sy}x{sx} pad {pt},{pl},{pb},{pr} ofm {oh}x{ow}x{od} "
            f"fmt {ifm.fmt}{ofm.fmt} signed {ifm.signed}{ofm.signed}")
    return Op("pool", cmds, [ifm], ofm, desc)


# ============================================================================ jobs
async def kernel_env(dut, reference: bool = True, backpressure: float | None = None,
                     seed: int = 0) -> Env:
    env = Env(dut, reference_model=reference)
    await env.start()
    if backpressure:
        env.axi.random_backpressure(seed, backpressure)
    env.kbursts = []
    env.axi.add_listener(env.kbursts.append)
    await program_regions(env)
    return env


CH_IFM, CH_IFM2, CH_OFM, CH_CMD, CH_DMA = (int(Channel[c]) for c in ("rd_ifm", "rd_ifm_stream", "wr_ofm", "rd_cmd",
                                                                    "rd_mem2mem"))


def check_bursts(env: Env, ops: list) -> None:
    """Every AXI burst of a kernel job: channel ID (rd_ifm 1, rd_ifm_stream 5, wr_ofm 8, or
    the command fetch) inside the tensor of that channel, on the port group of its region,
    one 16-byte beat (the stand-in's shape; DUT=rtl)."""
    spans = {CH_IFM: [], CH_IFM2: [], CH_OFM: [], CH_DMA: []}
    for op in ops:
        if op.lut is not None:
            spans[CH_DMA].append(op.lut)
        for _i, fm in enumerate(op.reads):
            ch = CH_IFM2 if (op.name == "elementwise" and fm is op.ifm2) else CH_IFM
            spans[ch].append(fm)
        if op.ofm is not None:
            spans[CH_OFM].append(op.ofm)
    for b in env.kbursts:
        if b.id == CH_CMD and not b.write:
            continue
        assert b.id in spans and b.write == (b.id == CH_OFM), f"burst with ID {b.id}: {b}"
        if DUT == "rtl" and b.id != CH_DMA:
            assert b.len == 0 and b.size == 4, f"not a single 16-byte beat: {b}"
        ok = False
        for fm in spans[b.id]:
            lo, hi = (REGION_BASE[fm.region] + x for x in fm.span())
            port = "SRAM0" if fm.region in (2, 3, 5, 7) else "EXT0"
            if (b.addr & ~15) < hi and b.addr >= (lo & ~15) and b.port == port:
                ok = True
        assert ok, f"burst ID {b.id} outside its tensors or on the wrong port: {b}"
    env.kbursts.clear()


def fill(env: Env, rng: random.Random, fm: Fm) -> None:
    lo, hi = fm.span()
    if hi > lo:
        base = REGION_BASE[fm.region]
        data = fm.data if fm.data is not None else bytes(rng.getrandbits(8) for _ in range(hi - lo))
        assert len(data) == hi - lo, "Fm.data does not cover the tensor's span"
        env.memory.write(base + lo, data)


async def run_ops(env: Env, rng: random.Random, ops: list, *, expect_written: bool = True,
                  max_cycles: int = 400_000) -> None:
    """Run *ops* as one job (one stream, NPU_OP_STOP at the end); compare with the TLM."""
    for op in ops:
        for fm in op.reads + ([op.lut] if op.lut is not None else []):
            fill(env, rng, fm)
        if op.ofm is not None:
            fill(env, rng, op.ofm)
    words = []
    for op in ops:
        words += enc(*op.cmds)
    words += enc(("NPU_OP_STOP", dict(mask=0x0001)))
    await env.write_ok(CMD, 0xC | 0x2)                          # clear_irq
    await env.load_stream(STREAM_ADDR, words)
    model = env.model
    n_events = len(model.events) if model is not None else 0
    env.kbursts.clear()
    status = await env.run_job(max_cycles=max_cycles, poll=32)
    check_bursts(env, ops)
    f = status_fields(status)
    for op in ops:
        cocotb.log.info("  %s %s", op.name, op.desc)
    assert not (f["cmd_parse_error"] or f["bus_status"]), f"STATUS 0x{status:08x}"
    assert await env.read_ok(QREAD) == 4 * len(words), "the job did not run to its NPU_OP_STOP"
    if model is None:
        return
    # the reference executed every operation (a skipped one would make the case vacuous)
    bad = [e for e in list(model.events)[n_events:] if e[0] in ("unpredictable", "op_unimplemented")]
    assert not bad, f"the TLM did not execute an operation: {bad[:2]}"
    job = env.scoreboard.close_job()
    assert job is not None and job.mismatches_in_job == 0, env.scoreboard.mismatches[-3:]
    mirror = model.memory
    for op in ops:
        if op.ofm is None or op.ofm.storage == NONE:
            continue
        lo, hi = op.ofm.span()
        a = REGION_BASE[op.ofm.region] + lo
        got = np.frombuffer(env.memory.read(a, hi - lo), np.uint8)
        want = np.frombuffer(mirror.read(a, hi - lo), np.uint8)
        diff = np.flatnonzero(got != want)
        assert diff.size == 0, (f"{op.desc}: {diff.size} OFM bytes differ from the TLM, first at "
                                f"+{diff[0]}: 0x{got[diff[0]]:02x} vs 0x{want[diff[0]]:02x}")
    if expect_written and any(op.ofm is not None and op.ofm.storage != NONE for op in ops):
        assert job.ref_all_writes(), "the reference wrote nothing"


def n_cases(default: int) -> int:
    return CASES if CASES > 0 else default


# ============================================================================ tests
@cocotb.parametrize(backpressure=named([None, 0.3], lambda v: "bp" if v else "none"))
@cocotb.test(**LONG_TIMEOUT)
async def test_elementwise(dut, backpressure):
    """Random 8-bit mul/add/sub/min/max with scales, zero points, clipping, broadcast and
    scalar operands, NHWC/NHCWB16, tile storage; several operations a job."""
    rng = rng_for("test_elementwise")
    env = await kernel_env(dut, backpressure=backpressure, seed=rng.getrandbits(16))
    total = n_cases(12 if backpressure is None else 4)
    done = 0
    while done < total:
        k = min(3, total - done)
        regions = [(2, 4, 3), (4, 4, 1), (3, 2, 7), (1, 5, 6)]
        ops = [elementwise_op(rng, regions[(done + i) % 4]) for i in range(k)]
        await run_ops(env, rng, ops)
        done += k
    env.finish()


@cocotb.parametrize(backpressure=named([None, 0.3], lambda v: "bp" if v else "none"))
@cocotb.test(**LONG_TIMEOUT)
async def test_pool(dut, backpressure):
    """Random 8-bit max/min/average/sum pooling: kernels, strides 1-3, padding, NHWC/NHCWB16."""
    rng = rng_for("test_pool")
    env = await kernel_env(dut, backpressure=backpressure, seed=rng.getrandbits(16))
    total = n_cases(10 if backpressure is None else 3)
    done = 0
    modes = list(POOL_MODES)
    while done < total:
        k = min(3, total - done)
        regions = [(5, 1), (0, 7), (6, 2)]
        ops = [pool_op(rng, regions[(done + i) % 3], modes[(done + i) % 4]) for i in range(k)]
        await run_ops(env, rng, ops)
        done += k
    env.finish()


@cocotb.test(**LONG_TIMEOUT)
async def test_pool_large_kernels(dut):
    """Max and min pooling with large kernels (40x3, 2x70, 256x1, 16x16) and padding."""
    rng = rng_for("test_pool_large_kernels")
    env = await kernel_env(dut)
    for i in range(n_cases(4)):
        ops = [pool_op(rng, (5, 1), ("max", "min")[i % 2], big=True)]
        await run_ops(env, rng, ops)
    env.finish()


@cocotb.test(**LONG_TIMEOUT)
async def test_pool_avg_kernel_limits(dut):
    """Average pooling at the TRM's kernel limit: 8x8, 8x1 and 1x8 kernels (padding below
    the kernel), which must run (a 9-tap side is UNPREDICTABLE, test_kernel_unpredictable)."""
    rng = rng_for("test_pool_avg_kernel_limits")
    env = await kernel_env(dut)
    for kh, kw in ((8, 8), (8, 1), (1, 8)):
        op = pool_op(rng, mode="average", ofm_none=False)
        op = _patch(op, {"NPU_SET_KERNEL_HEIGHT_M1": dict(height_m1=kh - 1),
                         "NPU_SET_KERNEL_WIDTH_M1": dict(width_m1=kw - 1),
                         "NPU_SET_KERNEL_STRIDE": dict(stride_y_lsb=0, stride_y_msb=0, stride_x_lsb=0,
                                                       stride_x_msb=0)})
        # the derived IFM must stay >= 1 and the padding below the kernel: pad 0 for simplicity
        op = _patch(op, {f"NPU_SET_IFM_PAD_{s}": dict(pad=0) for s in ("TOP", "BOTTOM", "LEFT", "RIGHT")})
        f = dict(op.cmds)
        oh, ow = f["NPU_SET_OFM_HEIGHT_M1"]["height_m1"] + 1, f["NPU_SET_OFM_WIDTH_M1"]["width_m1"] + 1
        ifm = op.reads[0]
        ifm = make_fm(rng, ifm.region, oh - 1 + kh, ow - 1 + kw, ifm.d, signed=ifm.signed, fmt=ifm.fmt)
        op.cmds = [c for c in op.cmds if not c[0].startswith("NPU_SET_IFM_") or c[0] in (
            "NPU_SET_IFM_DEPTH_M1", "NPU_SET_IFM_UPSCALE") or c[0].startswith("NPU_SET_IFM_PAD")]
        op.cmds = ifm.cmds("IFM") + op.cmds
        op.reads = [ifm]
        op.desc += f" -> kernel {kh}x{kw}"
        await run_ops(env, rng, [op])
    env.finish()


@cocotb.test(**LONG_TIMEOUT)
async def test_kernel_round_modes(dut):
    """Every OFM round_mode (and IFM round_mode) with dbl_rnd 0, 15, 30 on an add whose
    results land on rounding ties; a pooling max with each OFM round_mode."""
    rng = rng_for("test_kernel_round_modes")
    env = await kernel_env(dut)
    for rnd in range(6):
        ops = []
        for dbl in (0, 15, 30):
            op = elementwise_op(rng)
            cmds = []
            for name, f in op.cmds:
                if name == "NPU_SET_OFM_SCALE":
                    f = dict(scale=(1 << 30) + rng.randrange(0, 3), shift=rng.choice((1, 2, 31, 33, 36)),
                             round_mode=rnd, dbl_rnd=dbl)
                elif name in ("NPU_SET_IFM_SCALE", "NPU_SET_IFM2_SCALE"):
                    f = dict(scale=(1 << 30) + rng.randrange(0, 5), shift=rng.choice((29, 30, 31)),
                             round_mode=rnd & 1, dbl_rnd=dbl)
                cmds.append((name, f))
            op.cmds = cmds
            ops.append(op)
        p = pool_op(rng, mode="max")
        p.cmds = [(n, dict(f, round_mode=rnd) if n == "NPU_SET_OFM_SCALE" else f) for n, f in p.cmds]
        ops.append(p)
        await run_ops(env, rng, ops)
    env.finish()


def rsr_ref(p: np.ndarray, shift: int, mode: int, dbl: int, d_exp: int | None = None) -> np.ndarray:
    """TRM 3.6.6 rounded_shift_right on int64 values (numpy, written from the TRM's formula;
    shift >= 1): R = 2^(shift-1), D = 2^(30-dbl_rnd) when shift > 31-dbl_rnd; double_symmetric
    R +/- D by the sign, double_asymmetric R + D. *d_exp* replaces 30-dbl_rnd (a wrong D, to
    show a case depends on it)."""
    half = 1 << (shift - 1)
    d = (1 << (30 - dbl if d_exp is None else d_exp)) if shift > 31 - dbl else 0
    p = p.astype(object)                 # Python ints: p + R can pass 2^63 (R up to 2^62 + 2^31)
    r = np.where(p >= 0, half + d, half - d) if mode == 0 else np.full(p.shape, half + d, dtype=object)
    return np.array([int(x) for x in (p + r) >> shift], dtype=object)


@cocotb.test(**LONG_TIMEOUT)
async def test_round_double_term(dut):
    """The double-rounding term D of rounded_shift_right decides the result: a 1x1 max pool
    over every int8 value (OFM = rescaled IFM) with round_mode double_symmetric and
    double_asymmetric, dbl_rnd 0..30 and a (scale, shift) drawn until D and D/2 round at
    least 8 of the 256 values differently (asserted on the reference below, so the case
    can fail on a wrong D: the npu_rsr.v `30 - dbl` mutant of tools/mutate.py). OFM bytes
    against the numpy formula above and, via the scoreboard, the TLM."""
    rng = rng_for("test_round_double_term")
    env = await kernel_env(dut)
    vals = np.arange(-128, 128, dtype=np.int64)
    for mode in (0, 2):
        for dbl in (0, rng.randrange(1, 30), 30):
            for _ in range(1000):
                shift = rng.randint(max(1, 32 - dbl), min(63, 40 - dbl))
                scale = rng.randrange(1 << 29, 1 << 31)
                p = vals * scale
                want = rsr_ref(p, shift, mode, dbl)
                if np.count_nonzero(want != rsr_ref(p, shift, mode, dbl, d_exp=(29 - dbl) % 32)) >= 8:
                    break
            else:
                raise AssertionError(f"no (scale, shift) where D decides (mode {mode}, dbl_rnd {dbl})")
            ifm = Fm(5, 16 * rng.randrange(0, 8), NHWC, 1, 1, 4, 64, sx=64, sy=256, storage=TILE2X2,
                     w0m1=3, data=(vals & 0xFF).astype(np.uint8).tobytes())
            ofm = Fm(1, 16 * rng.randrange(0, 8), NHWC, 1, 1, 4, 64, sx=256, sy=1024, storage=TILE2X2, w0m1=3,
                     data=bytes(1024), esize=4)
            cmds = ifm.cmds("IFM") + [
                ("NPU_SET_IFM_DEPTH_M1", dict(depth_m1=63)), ("NPU_SET_IFM_UPSCALE", dict(mode=0)),
                *((f"NPU_SET_IFM_PAD_{s}", dict(pad=0)) for s in ("TOP", "BOTTOM", "LEFT", "RIGHT")),
                ("NPU_SET_KERNEL_HEIGHT_M1", dict(height_m1=0)), ("NPU_SET_KERNEL_WIDTH_M1", dict(width_m1=0)),
                ("NPU_SET_KERNEL_STRIDE", dict(stride_y_lsb=0, stride_y_msb=0, stride_x_lsb=0, stride_x_msb=0)),
                ("NPU_SET_OFM_SCALE", dict(scale=scale, shift=shift, round_mode=mode, dbl_rnd=dbl))]
            # b32 OFM, clip_range none: the low 32 bits of the rounded value are written
            cmds += ofm_cmds(ofm, 1, 4, 64, activation_precision=2) + [
                ("NPU_SET_ACTIVATION", dict(activation_function=0, table=0, activation_clip_range=1)),
                ("NPU_SET_ACTIVATION_MIN", dict(clip_boundary=0)), ("NPU_SET_ACTIVATION_MAX", dict(clip_boundary=0)),
                ("NPU_SET_ACC_FORMAT", dict(acc_format=0, acc_input=0, acc_output=0, microblock=1)),
                ("NPU_OP_POOL", dict(pooling_mode=POOL_MODES["max"]))]
            op = Op("pool", cmds, [ifm], ofm, f"max 1x1 round_mode {mode} dbl_rnd {dbl} scale {scale} shift {shift}")
            await run_ops(env, rng, [op])
            got = np.frombuffer(env.memory.read(REGION_BASE[1] + ofm.base, 1024), "<i4")
            want = np.array([((int(x) + (1 << 31)) % (1 << 32)) - (1 << 31) for x in want], dtype=np.int64)
            assert (got == want).all(), f"{op.desc}: OFM differs from the formula at {np.flatnonzero(got != want)[:4]}"
    env.finish()


RESIZE_Y_STEPS = {
    # name: (ifm height, scale_n, offset, one_step_int, one_step_mod, ofm height); every
    # one_step_int > 0 (the integer step of the y recurrence; the random RESIZE jobs of the fast
    # mutation regression rarely draw one: the npu_kernel.v y-step mutants of tools/mutate.py)
    "down2": (7, 1, 0, 2, 0, 4),              # rows 0, 2, 4, 6
    "down1.5": (7, 2, 0, 1, 1, 5),            # rows 0, 1+1/2, 3, 4+1/2, 6: the carry adds to the step
    "down3_off": (8, 4, -2, 3, 0, 3),         # start at -1 + 2/4, then 2 + 2/4, 5 + 2/4
}


def resize_y_ref(x: np.ndarray, mode: str, n: int, off: int, si: int, sm: int, oh: int) -> np.ndarray:
    """RESIZE along y only (x: scale 1, step 1, offset 0) from the TRM formula: the position
    recurrence (int, mod/n) from the offset, edges clamped; acc as in the TRM per mode;
    OFM_SCALE shift 16 makes the OFM the accumulator."""
    i, m = (-1, off + n) if off < 0 else (0, off)
    rows = []
    for _ in range(oh):
        y0, y1 = max(i, 0), min(i + 1, x.shape[0] - 1)
        if mode == "bilinear":
            rows.append((n - m) * x[y0] + m * x[y1])   # x weight: (1 - 0) * v, n_x = 1
        elif mode == "nearest":
            rows.append(x[y0] if 2 * m < n else x[y1])
        else:
            rows.append(x[y0])
        m += sm
        i += si
        if m >= n:
            m -= n
            i += 1
    return np.array(rows, dtype=np.int64)


@cocotb.parametrize(case=named(list(RESIZE_Y_STEPS)))
@cocotb.test(**LONG_TIMEOUT)
async def test_resize_integer_y_step(dut, case):
    """NPU_OP_RESIZE with an integer y step (one_step_int > 0: downscale in y), every mode, int8
    NHWC IFM, int16 OFM (OFM = accumulator, shift 16): OFM against the numpy formula above and,
    via the scoreboard, the TLM."""
    rng = rng_for(f"test_resize_integer_y_step[{case}]")
    env = await kernel_env(dut)
    ih, n, off, si, sm, oh = RESIZE_Y_STEPS[case]
    for mode in isa.resize_mode:
        iw, d = rng.randint(1, 4), rng.choice((1, 3, 8, 16))
        x = np.array([rng.randint(-128, 127) for _ in range(ih * iw * d)], np.int64).reshape(ih, iw, d)
        ifm = Fm(2, rng.randrange(0, 64), NHWC, 1, ih, iw, d, sx=d, sy=iw * d, storage=TILE2X2,
                 w0m1=iw - 1, h0m1=ih - 1, data=(x & 0xFF).astype(np.uint8).tobytes())
        ofm = Fm(1, 2 * rng.randrange(0, 32), NHWC, 1, oh, iw, d, sx=2 * d, sy=2 * iw * d, storage=TILE2X2,
                 w0m1=iw - 1, h0m1=oh - 1, esize=2, data=bytes(2 * oh * iw * d))
        cmds = ifm.cmds("IFM") + [
            ("NPU_SET_IFM_DEPTH_M1", dict(depth_m1=d - 1)), ("NPU_SET_IFM_UPSCALE", dict(mode=0)),
            ("NPU_SET_IFM2_ZERO_POINT", dict(zero_point=0)),
            ("NPU_SET_KERNEL_HEIGHT_M1", dict(height_m1=ih - 1)), ("NPU_SET_KERNEL_WIDTH_M1", dict(width_m1=iw - 1)),
            ("NPU_SET_RESIZE_Y_SCALE_N_M1", dict(resize_y_scale_n_m1=n - 1)),
            ("NPU_SET_RESIZE_X_SCALE_N_M1", dict(resize_x_scale_n_m1=0)),
            ("NPU_SET_RESIZE_Y_OFFSET", dict(resize_y_offset=off)),
            ("NPU_SET_RESIZE_X_OFFSET", dict(resize_x_offset=0)),
            ("NPU_SET_RESIZE_Y_STEP", dict(one_step_int=si, one_step_mod=sm, blk_step_int=0, blk_step_mod=0)),
            ("NPU_SET_RESIZE_X_STEP", dict(one_step_int=1, one_step_mod=0, blk_step_int=0, blk_step_mod=0)),
            ("NPU_SET_OFM_SCALE", dict(scale=rng.randrange(0, 1 << 31), shift=16,
                                       round_mode=rng.choice(list(isa.round_mode_ofm)), dbl_rnd=0))]
        cmds += ofm_cmds(ofm, oh, iw, d, activation_precision=int(isa.activation_precision.b16)) + [
            ("NPU_SET_ACTIVATION", dict(activation_function=int(isa.activation_function.lut_none), table=0,
                                        activation_clip_range=int(isa.activation_clip_range.none))),
            ("NPU_SET_ACTIVATION_MIN", dict(clip_boundary=0)), ("NPU_SET_ACTIVATION_MAX", dict(clip_boundary=0)),
            ("NPU_SET_ACC_FORMAT", dict(acc_format=rng.randint(0, 1), acc_input=0, acc_output=0,
                                        microblock=rng.randrange(6))),
            ("NPU_OP_RESIZE", dict(resize_mode=int(mode)))]
        op = Op("resize", cmds, [ifm], ofm, f"{mode.name} {ih}x{iw}x{d} -> {oh}x{iw} y n {n} off {off} "
                                            f"step {si}+{sm}/{n}")
        await run_ops(env, rng, [op])
        want = resize_y_ref(x, mode.name, n, off, si, sm, oh)
        got = np.frombuffer(env.memory.read(REGION_BASE[1] + ofm.base, 2 * oh * iw * d), "<i2").reshape(oh, iw, d)
        assert (got == want).all(), f"{op.desc}: OFM differs from the formula at {np.argwhere(got != want)[:3]}"
    env.finish()


SIG_RND = {True: 0x1000200, False: 0x10001FF}     # TRM lut_sigmoid rounding constant (acc >= 0 / < 0)


def sigmoid_ref(acc: np.ndarray, lut: bytes, rnd: "dict | None" = None) -> np.ndarray:
    """The TRM lut_sigmoid formula (acc inside the clamp range), written here from the TRM:
    index 256 + (acc >> 9), (base << 9) + frac * slope + rnd, >> 10; *rnd* replaces the
    rounding constants (to find the ties)."""
    rnd = rnd or SIG_RND
    t = np.frombuffer(lut, "<i2").astype(np.int64)
    idx = 256 + (acc >> 9)
    base, slope, frac = t[2 * idx], t[2 * idx + 1], acc & 0x1FF
    return ((base << 9) + frac * slope + np.where(acc >= 0, rnd[True], rnd[False])) >> 10


@cocotb.test(**LONG_TIMEOUT)
async def test_sigmoid_rounding_tie(dut):
    """lut_sigmoid where its rounding constants decide: a 1x1 max pool over every int8 value x
    with OFM scale 5 * 2^16 >> 16 (acc = 5x: LUT entries 254..257) and a random table whose
    entries 254..257 are chosen so that X = (base << 9) + frac * slope lands on each rounding
    tie: for acc < 0 (rnd 0x10001FF) X = 512 mod 1024 (entry 254: a constant one higher
    changes the result) and X = 513 (entry 255, one odd x: one lower changes it); for acc >= 0
    (rnd 0x1000200) X = 511 (entry 256, one odd x: one higher) and X = 512 (entry 257: one
    lower). Each tie is asserted on the formula, so the case cannot stop covering it (the
    npu_kernel_alu.v sigmoid mutants of tools/mutate.py). The table is DMAed into the LUT RAM;
    int16 OFM against the formula and, via the scoreboard, the TLM."""
    rng = rng_for("test_sigmoid_rounding_tie")
    env = await kernel_env(dut)
    vals = np.arange(-128, 128, dtype=np.int64)
    table = np.frombuffer(rng.randbytes(2048), "<i2").copy()

    def odd_base() -> int:
        return 2 * rng.randint(-200, 199) + 1

    # X = 512 for every frac: an odd base and a slope that is a multiple of 1024
    for idx in (254, 257):
        table[2 * idx], table[2 * idx + 1] = odd_base(), 1024 * rng.randint(-8, 8)
    # X = r (odd) at one frac f (odd: acc = 5x with x odd): slope = (r - 512 * base) / f mod 1024
    picks = {}
    for idx, r, lo, hi in ((255, 513, -101, -1), (256, 511, 1, 101)):
        x = rng.randrange(lo, hi + 1, 2)
        f = (5 * x) & 0x1FF
        base = rng.randint(-400, 399)
        table[2 * idx] = base
        table[2 * idx + 1] = ((r - 512 * base) * pow(f, -1, 1024)) % 1024 - 1024 * rng.randint(0, 1)
        picks[idx] = x
    lut = table.astype("<i2").tobytes()
    acc = 5 * vals
    want = sigmoid_ref(acc, lut)
    for sign, side in ((False, acc < 0), (True, acc >= 0)):
        for d in (-1, 1):
            rnd = dict(SIG_RND)
            rnd[sign] += d
            ties = vals[side & (want != sigmoid_ref(acc, lut, rnd))]
            what = f"acc {'>=' if sign else '<'} 0, constant {d:+d}"
            assert ties.size, f"no input hits the rounding tie ({what}): the case would not cover it"
            cocotb.log.info("sigmoid rounding ties (%s): x in %s", what, ties.tolist())
    src = Fm(4, 16 * rng.randrange(0, 16), NHWC, 0, 1, 1, 2048, sx=2048, sy=2048, storage=TILE2X2, data=lut)
    ifm = Fm(5, 16 * rng.randrange(0, 8), NHWC, 1, 1, 4, 64, sx=64, sy=256, storage=TILE2X2,
             w0m1=3, data=(vals & 0xFF).astype(np.uint8).tobytes())
    ofm = Fm(1, 16 * rng.randrange(0, 8), NHWC, 1, 1, 4, 64, sx=128, sy=512, storage=TILE2X2, w0m1=3,
             data=bytes(512), esize=2)
    cmds = [("NPU_SET_DMA0_SRC_REGION", dict(region=src.region, region_mode=0, stride_mode=0, idx_mode=0)),
            ("NPU_SET_DMA0_DST_REGION", dict(region=0, region_mode=1, idx_mode=0)),
            ("NPU_SET_DMA0_SRC", dict(addr=src.base)), ("NPU_SET_DMA0_DST", dict(addr=0)),
            ("NPU_SET_DMA0_LEN", dict(addr=2048)), "NPU_OP_DMA_START", ("NPU_OP_DMA_WAIT", dict(k=0))]
    cmds += ifm.cmds("IFM") + [
        ("NPU_SET_IFM_DEPTH_M1", dict(depth_m1=63)), ("NPU_SET_IFM_UPSCALE", dict(mode=0)),
        *((f"NPU_SET_IFM_PAD_{s}", dict(pad=0)) for s in ("TOP", "BOTTOM", "LEFT", "RIGHT")),
        ("NPU_SET_KERNEL_HEIGHT_M1", dict(height_m1=0)), ("NPU_SET_KERNEL_WIDTH_M1", dict(width_m1=0)),
        ("NPU_SET_KERNEL_STRIDE", dict(stride_y_lsb=0, stride_y_msb=0, stride_x_lsb=0, stride_x_msb=0)),
        ("NPU_SET_OFM_SCALE", dict(scale=5 << 16, shift=16, round_mode=rng.choice(list(isa.round_mode_ofm)),
                                   dbl_rnd=0))]
    cmds += ofm_cmds(ofm, 1, 4, 64, activation_precision=int(isa.activation_precision.b16)) + [
        ("NPU_SET_ACTIVATION", dict(activation_function=int(isa.activation_function.lut_sigmoid), table=0,
                                    activation_clip_range=int(isa.activation_clip_range.none))),
        ("NPU_SET_ACTIVATION_MIN", dict(clip_boundary=0)), ("NPU_SET_ACTIVATION_MAX", dict(clip_boundary=0)),
        ("NPU_SET_ACC_FORMAT", dict(acc_format=0, acc_input=0, acc_output=0, microblock=1)),
        ("NPU_OP_POOL", dict(pooling_mode=POOL_MODES["max"]))]
    op = Op("pool", cmds, [ifm], ofm, f"max 1x1 lut_sigmoid acc 5x, ties at x {picks}", lut=src)
    await run_ops(env, rng, [op])
    got = np.frombuffer(env.memory.read(REGION_BASE[1] + ofm.base, 512), "<i2")
    want16 = ((want + (1 << 15)) % (1 << 16)) - (1 << 15)
    assert (got == want16).all(), f"{op.desc}: OFM differs from the formula at {np.flatnonzero(got != want16)[:4]}"
    env.finish()


def _patch(op: Op, changes: dict) -> Op:
    """Replace fields of commands: {command: {field: value}} (added at the end if absent)."""
    cmds, seen = [], set()
    for name, f in op.cmds:
        if name in changes:
            f = dict(f, **changes[name])
            seen.add(name)
        cmds.append((name, f))
    last = cmds.pop()                      # the NPU_OP stays last
    for name, f in changes.items():
        if name not in seen:
            cmds.append((name, f))
    cmds.append(last)
    op.cmds = cmds
    return op


UNPREDICTABLE_CASES = {
    # elementwise
    "ew_precision_mismatch": ("ew", {"NPU_SET_IFM2_PRECISION": dict(activation_precision=1)}),
    "ew_reserved_mode": ("ew", {"NPU_OP_ELEMENTWISE": dict(elementwise_mode=12)}),
    "ew_per_channel_scale": ("ew", {"NPU_SET_OFM_PRECISION": dict(scale_mode=0)}),
    "ew_reverse": ("ew", {"NPU_SET_OFM_PRECISION": dict(activation_reverse=1)}),
    "ew_upscale": ("ew", {"NPU_SET_IFM_UPSCALE": dict(mode=1)}),
    "ew_ifm_zero_point": ("ew", {"NPU_SET_IFM_PRECISION": dict(activation_type=1),
                                 "NPU_SET_IFM_ZERO_POINT": dict(zero_point=300)}),
    "ew_ofm_zero_point": ("ew", {"NPU_SET_OFM_PRECISION": dict(activation_type=0),
                                 "NPU_SET_OFM_ZERO_POINT": dict(zero_point=0x1FF)}),
    "ew_round_mode": ("ew", {"NPU_SET_OFM_SCALE": dict(round_mode=6)}),
    "ew_dbl_rnd": ("ew", {"NPU_SET_OFM_SCALE": dict(dbl_rnd=31)}),
    "ew_acc_format": ("ew", {"NPU_SET_ACC_FORMAT": dict(acc_format=2)}),
    "ew_nhcwb16_align": ("ew", {"NPU_SET_OFM_PRECISION": dict(activation_format=1),
                                "NPU_SET_OFM_STRIDE_Y": dict(addr=0x108)}),
    "ew_both_scalar": ("ew", {"NPU_SET_IFM_BROADCAST": dict(broadcast_mode=8),
                              "NPU_SET_IFM2_BROADCAST": dict(broadcast_mode=8),
                              "NPU_SET_IFM_PRECISION": dict(activation_storage=3),
                              "NPU_SET_IFM2_PRECISION": dict(activation_storage=3)}),
    "ew_scalar_storage": ("ew", {"NPU_SET_IFM2_BROADCAST": dict(broadcast_mode=8),
                                 "NPU_SET_IFM2_PRECISION": dict(activation_storage=0)}),
    "ew_reserved_activation": ("ew", {"NPU_SET_ACTIVATION": dict(activation_function=2)}),
    "ew_lut_table": ("ew", {"NPU_SET_ACTIVATION": dict(activation_function=7, table=2)}),
    # pooling
    "pool_dilation": ("pool", {"NPU_SET_KERNEL_STRIDE": dict(dilation_x=1)}),
    "pool_avg_kernel": ("pool_avg", {"NPU_SET_KERNEL_WIDTH_M1": dict(width_m1=8)}),
    "pool_avg_padding": ("pool_avg", {"NPU_SET_IFM_PAD_TOP": dict(pad=9)}),
    "pool_acc_format": ("pool", {"NPU_SET_ACC_FORMAT": dict(acc_format=1)}),
    "pool_ifm_storage_none": ("pool", {"NPU_SET_IFM_PRECISION": dict(activation_storage=3)}),
    "pool_no_ifm": ("pool", {"NPU_SET_IFM_PAD_TOP": dict(pad=100), "NPU_SET_IFM_PAD_BOTTOM": dict(pad=100)}),
    "pool_max_upscale_zeros": ("pool", {"NPU_SET_IFM_UPSCALE": dict(mode=2)}),
    "pool_acc_input_reserved": ("pool", {"NPU_SET_ACC_FORMAT": dict(acc_input=3)}),
}


async def run_unpredictable_job(env, case: str, words: list, n0: int) -> None:
    """Run *words* + NPU_OP_STOP as one job whose first operation fails a register-only TRM
    assert: the job ends without cmd_parse_error or bus error, the whole stream is read,
    and the TLM (when there is one) logged an UNPREDICTABLE event after event *n0*."""
    words = words + enc(("NPU_OP_STOP", dict(mask=1)))
    await env.write_ok(CMD, 0xC | 0x2)
    await env.load_stream(STREAM_ADDR, words)
    status = await env.run_job(max_cycles=200_000, poll=32)
    f = status_fields(status)
    assert not (f["cmd_parse_error"] or f["bus_status"]), f"STATUS 0x{status:08x}"
    assert await env.read_ok(QREAD) == 4 * len(words)
    if env.model is not None:
        ev = [e for e in list(env.model.events)[n0:] if e[0] == "unpredictable"]
        assert ev, f"{case}: the TLM found no UNPREDICTABLE condition (the case is wrong)"
        cocotb.log.info("TLM: %s", ev[0][1].get("what"))


@cocotb.parametrize(case=named(list(UNPREDICTABLE_CASES)))
@cocotb.test(**TIMEOUT)
async def test_kernel_unpredictable(dut, case):
    """A failed register-only TRM assert: the operation completes without effect (the TLM's
    on_unpredictable='continue'); the next operation of the job still runs."""
    rng = rng_for(f"test_kernel_unpredictable[{case}]")
    env = await kernel_env(dut)
    kind, changes = UNPREDICTABLE_CASES[case]
    if kind == "ew":
        bad = elementwise_op(rng, scalars=False, ofm_none=False)
    else:
        bad = pool_op(rng, mode="average" if kind == "pool_avg" else "max", ofm_none=False)
    bad = _patch(bad, changes)
    good = pool_op(rng, regions=(0, 7), mode="max", ofm_none=False)   # regions the bad op does not use
    model = env.model
    n0 = len(model.events) if model is not None else 0
    for op in (bad, good):
        for fm in op.reads:
            fill(env, rng, fm)
        fill(env, rng, op.ofm)
    olo, ohi = (REGION_BASE[bad.ofm.region] + x for x in bad.ofm.span())
    before = env.memory.read(olo, ohi - olo)
    await run_unpredictable_job(env, case, enc(*bad.cmds) + enc(*good.cmds), n0)
    assert env.memory.read(olo, ohi - olo) == before, f"{case}: the skipped operation wrote its OFM"
    env.finish()


# CONV/DEPTHWISE register-only TRM asserts (tlm/ethos_u85/ops/conv.py): {case: (op, changes)}
CONV_UNPREDICTABLE_CASES = {
    "dw_fwd": ("dw", {"NPU_SET_WEIGHT_FORMAT": dict(weight_format=1)}),
    "dw_sparse": ("dw", {"NPU_SET_WEIGHT_FORMAT": dict(weight_sparsity=1)}),
    "conv_ifm_uint16": ("conv", {"NPU_SET_IFM_PRECISION": dict(activation_precision=1, activation_type=0)}),
    "conv_ifm_b32": ("conv", {"NPU_SET_IFM_PRECISION": dict(activation_precision=2, activation_type=1)}),
    "conv_ifm_storage_none": ("conv", {"NPU_SET_IFM_PRECISION": dict(activation_storage=3)}),
    "dw_reserved_upscale": ("dw", {"NPU_SET_IFM_UPSCALE": dict(mode=3)}),
    "conv_ifm_nhcwb16_misaligned": ("conv", {"NPU_SET_IFM_PRECISION": dict(activation_format=1),
                                             "NPU_SET_IFM_STRIDE_Y": dict(addr=0x108)}),
    # matrix multiply (weights_ifm2): its block of asserts, then read_ifm2's
    "mm_stride_x2": ("matmul", {"NPU_SET_KERNEL_STRIDE": dict(stride_x_lsb=1)}),
    "mm_stride_y3": ("matmul", {"NPU_SET_KERNEL_STRIDE": dict(stride_y_msb=1)}),
    "mm_dilation_x": ("matmul", {"NPU_SET_KERNEL_STRIDE": dict(dilation_x=1)}),
    "mm_dilation_y": ("matmul", {"NPU_SET_KERNEL_STRIDE": dict(dilation_y=1)}),
    "mm_part_kernel_first": ("matmul", {"NPU_SET_KERNEL_STRIDE": dict(weight_order=1)}),
    "mm_sparse": ("matmul", {"NPU_SET_WEIGHT_FORMAT": dict(weight_sparsity=1)}),
    "mm_kernel_height2": ("matmul", {"NPU_SET_KERNEL_HEIGHT_M1": dict(height_m1=1)}),
    "mm_ofm_height2": ("matmul", {"NPU_SET_OFM_HEIGHT_M1": dict(height_m1=1)}),
    "mm_pad_left": ("matmul", {"NPU_SET_IFM_PAD_LEFT": dict(pad=1), "NPU_SET_IFM_PAD_RIGHT": dict(pad=1)}),
    # (the IFM made b8: on DUT=tlm the generator also draws 16-bit matrix multiplies)
    "mm_ifm2_b16": ("matmul", {"NPU_SET_IFM_PRECISION": dict(activation_precision=0),
                               "NPU_SET_IFM2_PRECISION": dict(activation_precision=1, activation_type=1)}),
    "mm_ifm2_storage_none": ("matmul", {"NPU_SET_IFM2_PRECISION": dict(activation_storage=3)}),
    "mm_ifm2_chained": ("matmul", {"NPU_SET_IFM2_PRECISION": dict(activation_storage=2)}),
    "mm_ifm2_zero_point": ("matmul", {"NPU_SET_IFM2_PRECISION": dict(activation_type=0),
                                      "NPU_SET_IFM2_ZERO_POINT": dict(zero_point=256)}),
    "mm_ifm2_signed_zero_point": ("matmul", {"NPU_SET_IFM2_PRECISION": dict(activation_type=1),
                                             "NPU_SET_IFM2_ZERO_POINT": dict(zero_point=128)}),
    "mm_ifm2_nhcwb16_misaligned": ("matmul", {"NPU_SET_IFM2_PRECISION": dict(activation_format=1),
                                              "NPU_SET_IFM2_STRIDE_Y": dict(addr=0x108)}),
}


@cocotb.parametrize(case=named(list(CONV_UNPREDICTABLE_CASES)))
@cocotb.test(**TIMEOUT)
async def test_conv_unpredictable(dut, case):
    """A random CONV/DEPTHWISE (tb/ethos_u85/tests/test_random_ops.py OpGen) with one field
    made illegal (FWD or sparse weights on a DEPTHWISE, an unsigned b16 or a b32 IFM, IFM
    storage none, reserved upscale mode, a misaligned NHCWB16 IFM; a matrix multiply failing
    one of weights_ifm2's asserts or read_ifm2's): the
    operation completes without effect on the TLM and on the DUT (no cmd_parse_error, the
    job runs to its NPU_OP_STOP, the OFM untouched, the scoreboard clean)."""
    kind, changes = CONV_UNPREDICTABLE_CASES[case]
    await opgen_unpredictable(dut, f"test_conv_unpredictable[{case}]", case, kind, changes)


# write_ofm's register-only asserts (tlm/ethos_u85/fmap.py check_ofm_write, npu_ofm_addr.v):
# {case: (op, (transpose, reverse, OFM format) the generator draws, changes)}
OFM_UNPREDICTABLE_CASES = {
    "conv_reverse_transpose": ("conv", None, {"NPU_SET_OFM_PRECISION": dict(activation_reverse=1,
                                                                              activation_transpose=1)}),
    "dw_chained_transpose": ("dw", None, {"NPU_SET_OFM_PRECISION": dict(activation_storage=2, activation_transpose=2),
                                          "NPU_SET_OFM_REGION": dict(region=1)}),
    "conv_nhcwb16_hcw_blk_width": ("conv", ("HCW", 0, NHCWB16), {"NPU_SET_OFM_BLK_WIDTH_M1": dict(width_m1=4)}),
    "pool_reverse_transpose": ("pool", None, {"NPU_SET_OFM_PRECISION": dict(activation_reverse=2,
                                                                              activation_transpose=1)}),
    "pool_nhcwb16_cwh_blk_height": ("pool", ("CWH", 0, NHCWB16), {"NPU_SET_OFM_BLK_HEIGHT_M1": dict(height_m1=4)}),
}


@cocotb.parametrize(case=named(list(OFM_UNPREDICTABLE_CASES)))
@cocotb.test(**TIMEOUT)
async def test_ofm_write_unpredictable(dut, case):
    """A random CONV/DEPTHWISE/POOL whose OFM write fails one of write_ofm's register-only
    asserts (reverse with a transpose, a chained OFM with a transpose, an NHCWB16 transpose
    with OFM_BLK_WIDTH/HEIGHT not a multiple of 16): completes without effect on the TLM and
    on the DUT, as test_conv_unpredictable."""
    kind, force, changes = OFM_UNPREDICTABLE_CASES[case]
    await opgen_unpredictable(dut, f"test_ofm_write_unpredictable[{case}]", case, kind, changes, force)


async def opgen_unpredictable(dut, name: str, case: str, kind: str, changes: dict, force=None) -> None:
    """One operation of *kind* (conv, dw, pool) from tb/ethos_u85/tests/test_random_ops.py's
    OpGen (OFM mode *force*: OpGen.force; the OFM in memory), *changes* applied, run as a job
    that must complete without effect (run_unpredictable_job), the OFM untouched and the
    scoreboard clean."""
    from tb.ethos_u85.tests.test_random_ops import NONE, OpGen
    rng = rng_for(name)
    env = await kernel_env(dut)
    gen = OpGen(rng, 1 << (await env.read_ok(OFF["CONFIG"]) & 0xF), rtl=DUT == "rtl")
    gen.force = force
    for _ in range(100):
        op = gen.pool("max") if kind == "pool" else gen.conv(kind)
        if op.ofm.storage != NONE:
            break
    op.cmds = [(n, dict(f, **changes[n]) if n in changes else f) for n, f in op.cmds]
    for addr, data in op.image.items():
        env.memory.write(addr, data)
    spans = [(REGION_BASE[op.ofm.region] + lo, hi - lo) for lo, hi in op.ofm.spans()]
    before = [env.memory.read(a, n) for a, n in spans]
    model = env.model
    n0 = len(model.events) if model is not None else 0
    cocotb.log.info("%s, then %s", op.desc, changes)
    await run_unpredictable_job(env, case, enc(*op.cmds), n0)
    if model is not None:
        job = env.scoreboard.close_job()
        assert job is not None and job.mismatches_in_job == 0, env.scoreboard.mismatches[-3:]
    assert [env.memory.read(a, n) for a, n in spans] == before, f"{case}: the skipped operation wrote its OFM"
    env.finish()


UNSUPPORTED_CASES = {
    "ew_div": ("ew", {"NPU_OP_ELEMENTWISE": dict(elementwise_mode=11)}),
    "ew_ofm_b64": ("ew", {"NPU_SET_OFM_PRECISION": dict(activation_precision=3)}),
    "ew_ofm_chained_u32": ("ew", {"NPU_SET_OFM_PRECISION": dict(activation_storage=2, activation_precision=2,
                                                                activation_type=0),
                                  "NPU_SET_OFM_REGION": dict(region=0)}),
    # tile2x2 forced: with tile3x1 (chosen at random) WIDTH0 is unused and the OFM is one tile
    "ew_two_tiles": ("ew", {"NPU_SET_OFM_WIDTH0_M1": dict(width_m1=0),
                            "NPU_SET_OFM_WIDTH_M1": dict(width_m1=3),
                            "NPU_SET_OFM_PRECISION": dict(activation_storage=0)}),
    "pool_none": ("pool", {"NPU_OP_POOL": dict(pooling_mode=4)}),
    "pool_argmax": ("pool", {"NPU_OP_POOL": dict(pooling_mode=6)}),
    "pool_per_channel": ("pool", {"NPU_SET_OFM_PRECISION": dict(scale_mode=0)}),
    "pool_acc_keep": ("pool", {"NPU_SET_ACC_FORMAT": dict(acc_input=1)}),
    "pool_acc_disable": ("pool", {"NPU_SET_ACC_FORMAT": dict(acc_output=1)}),
    "pool_upscale": ("pool", {"NPU_SET_IFM_UPSCALE": dict(mode=1)}),
    "pool_max_kernel_300": ("pool", {"NPU_SET_KERNEL_WIDTH_M1": dict(width_m1=299),
                                     "NPU_SET_IFM_PAD_LEFT": dict(pad=100),
                                     "NPU_SET_IFM_PAD_RIGHT": dict(pad=190)}),
    "pool_ifm_chained": ("pool", {"NPU_SET_IFM_PRECISION": dict(activation_storage=2)}),
    "pool_ofm_chained": ("pool", {"NPU_SET_OFM_PRECISION": dict(activation_storage=2),
                                  "NPU_SET_OFM_REGION": dict(region=0)}),
    "conv_matmul_int16": ("conv", {"NPU_SET_IFM_PRECISION": dict(activation_precision=1, activation_type=1)}),
}


@cocotb.parametrize(case=named(list(UNSUPPORTED_CASES)))
@cocotb.test(**TIMEOUT)
async def test_kernel_unsupported(dut, case):
    """A configuration the stand-in does not implement: cmd_parse_error + IRQ, QREAD at the
    operation, nothing read for it and nothing written (no scoreboard: the TLM implements
    these)."""
    if DUT != "rtl":
        skip_now("the TLM implements every kernel operation")
    rng = rng_for(f"test_kernel_unsupported[{case}]")
    env = await kernel_env(dut, reference=False)
    kind, changes = UNSUPPORTED_CASES[case]
    if kind == "ew":
        op = elementwise_op(rng, ofm_none=False)
    elif kind in ("conv", "resize"):
        op = Op(kind, [("NPU_SET_IFM_PAD_TOP", dict(pad=0)),
                       ("NPU_OP_CONV", dict(weights_ifm2=1)) if kind == "conv" else ("NPU_OP_RESIZE", {})])
    else:
        op = pool_op(rng, mode="sum" if kind == "pool_sum" else "max", ofm_none=False)
    op = _patch(op, changes)
    words = enc(("NPU_OP_IRQ", dict(mask=0x0004))) + enc(*op.cmds) + enc(("NPU_OP_STOP", dict(mask=1)))
    op_at = 4 * (len(words) - 2)
    await env.load_stream(STREAM_ADDR, words)
    n_bursts = sum(s.counts["w"] for s in env.axi.ports.values())
    status = await env.run_job(max_cycles=50_000)
    f = status_fields(status)
    assert f["cmd_parse_error"] and f["irq_raised"] and not f["state"], f"STATUS 0x{status:08x}"
    assert f["irq_history_mask"] == 0x0004, "the NPU_OP_STOP after the operation ran"
    assert await env.read_ok(QREAD) == op_at, "QREAD is not at the refused operation"
    assert sum(s.counts["w"] for s in env.axi.ports.values()) == n_bursts, "something was written"
    await env.write_ok(CMD, 0xC | 0x2)
    assert status_fields(await env.read_ok(STATUS))["cmd_parse_error"], "cmd_parse_error not sticky"
    env.finish()


@cocotb.parametrize(where=named(["ifm", "ifm2", "ofm"]))
@cocotb.test(**TIMEOUT)
async def test_kernel_bus_error(dut, where):
    """SLVERR on the first IFM read (rd_ifm), the first IFM2 read (rd_ifm_stream) or on the OFM
    write (wr_ofm) of an elementwise add: bus_status, faulting channel and interface, IRQ;
    nothing written from a failed read."""
    rng = rng_for(f"test_kernel_bus_error[{where}]")
    env = await kernel_env(dut)
    while True:
        op = elementwise_op(rng, regions=(2, 4, 1), ofm_none=False)
        bm = [f["broadcast_mode"] for n, f in op.cmds if n == "NPU_SET_IFM_BROADCAST"][0]
        bm2 = [f["broadcast_mode"] for n, f in op.cmds if n == "NPU_SET_IFM2_BROADCAST"][0]
        if bm == 0 and bm2 == 0 and op.ofm.fmt == NHWC and op.ofm.sx == op.ofm.d \
                and op.ofm.sy == op.ofm.w * op.ofm.d:
            break
    ifm, ifm2 = op.reads
    for fm in op.reads:
        fill(env, rng, fm)
    fill(env, rng, op.ofm)
    target = {"ifm": ifm, "ifm2": ifm2, "ofm": op.ofm}[where]
    lo = REGION_BASE[target.region] + target.base
    lo16 = lo & ~15
    env.axi.inject_fault(lo16, lo16 + 16, "SLVERR", kind="w" if where == "ofm" else "r")
    words = enc(*op.cmds) + enc(("NPU_OP_STOP", dict(mask=1)))
    await env.write_ok(CMD, 0xC | 0x2)
    await env.load_stream(STREAM_ADDR, words)
    status = await env.run_job(max_cycles=100_000, poll=16)
    f = status_fields(status)
    chan = {"ifm": 1, "ifm2": 5, "ofm": 8}[where]
    iface = 0 if target.region in (2, 3, 5, 7) else 1
    assert f["bus_status"] and f["irq_raised"] and not f["state"], f"STATUS 0x{status:08x}"
    assert f["faulting_channel"] == chan, f"faulting_channel {f['faulting_channel']}"
    assert f["faulting_interface"] == iface, f"faulting_interface {f['faulting_interface']}"
    env.finish()


CH_WEIGHTS, CH_SCALE = int(Channel.rd_weights), int(Channel.rd_scale_bias)


@cocotb.parametrize(op=named(["conv", "depthwise"]),
                    backpressure=named([None, 0.3], lambda v: "bp" if v else "none"))
@cocotb.test(**TIMEOUT)
async def test_conv_streams(dut, op, backpressure):
    """The weight and scale/bias stream reads of NPU_OP_CONV / NPU_OP_DEPTHWISE on the stand-in
    (rtl_stub/ethos_u85/npu_wfetch.v), on random legal operations
    (tb/ethos_u85/tests/test_random_ops.py OpGen) with random regions, max_beats and back-
    pressure, checked by the scoreboard: the per-channel scale/bias stream (align_up(OFM
    depth, channels_in_set) * 10 bytes, TRM 3.7) is read once, before any weight, and the
    weight streams (num_wd of CONFIG with SWD, one with FWD) are read whole, once per
    spatial block; every rd_weights / rd_scale_bias burst lies in its stream (whole 16-byte
    beats), on its region's port group, inside one max_beats window; nothing but the command
    stream, the IFM, those streams and the OFM is accessed."""
    from tb.ethos_u85.tests.test_random_ops import OpGen
    from tb.ethos_u85.testlib.bursts import burst_error
    from tlm.ethos_u85.scale_bias import channels_in_set, stream_size
    if DUT != "rtl":
        skip_now("the stand-in's stream fetch")
    rng = rng_for(f"test_conv_streams[{op}]")
    env = await kernel_env(dut, backpressure=backpressure, seed=rng.getrandbits(16))
    mb = (rng.randrange(3), rng.randrange(3))
    await program_regions(env, max_beats=mb)
    cfg = await env.read_ok(OFF["CONFIG"])
    macs = 1 << (cfg & 0xF)
    gen = OpGen(rng, macs, rtl=True)
    for _ in range(200):
        o = gen.conv("dw" if op == "depthwise" else "conv")
        fields = {n: f for n, f in o.cmds if isinstance(f, dict)}
        if fields["NPU_SET_OFM_PRECISION"]["scale_mode"] == 0:
            break
    for addr, data in o.image.items():
        env.memory.write(addr, data)
    words = enc(*o.cmds) + enc(("NPU_OP_STOP", dict(mask=1)))
    await env.load_stream(STREAM_ADDR, words)
    cocotb.log.info("%s, max_beats %s", o.desc, mb)
    env.kbursts.clear()
    status = await env.run_job(max_cycles=500_000)
    f = status_fields(status)
    assert f["irq_raised"] and not (f["cmd_parse_error"] or f["bus_status"]), f"STATUS 0x{status:08x}"
    wr = fields["NPU_SET_WEIGHT_REGION"]["region"]
    streams = [(REGION_BASE[wr] + fields[f"NPU_SET_WEIGHT{n}_BASE"]["addr"],
                REGION_BASE[wr] + fields[f"NPU_SET_WEIGHT{n}_BASE"]["addr"]
                + fields[f"NPU_SET_WEIGHT{n}_LENGTH"]["length"])
               for n in ("", "1", "2", "3") if f"NPU_SET_WEIGHT{n}_BASE" in fields]
    sr = fields["NPU_SET_SCALE_REGION"]["region"]
    sbase = REGION_BASE[sr] + fields["NPU_SET_SCALE_BASE"]["addr"]
    depth = fields["NPU_SET_OFM_DEPTH_M1"]["depth_m1"] + 1
    need = stream_size(depth, channels_in_set(macs, fields["NPU_SET_ACC_FORMAT"]["microblock"]))

    def check(ch: int, region: int, spans: list, what: str) -> list:
        bursts = [b for b in env.kbursts if b.id == ch]
        port = "SRAM0" if region in (2, 3, 5, 7) else "EXT0"
        win = 64 << mb[port != "SRAM0"]
        got = set()
        for b in bursts:
            assert not b.write and b.port == port, f"{what}: {b}"
            err = burst_error(b, win)
            assert err is None, f"{what}: {err}"
            for a, d in b.runs:
                got.update(range(a, a + len(d)))
        want = set().union(*(range(lo, hi) for lo, hi in spans))
        allowed = set().union(*(range(lo & ~15, (hi + 15) & ~15) for lo, hi in spans))
        assert want <= got, f"{what}: {len(want - got)} stream byte(s) not read"
        assert got <= allowed, f"{what}: read 0x{min(got - allowed):x} outside the streams"
        return bursts

    wb = check(CH_WEIGHTS, wr, streams, "rd_weights")
    sb = check(CH_SCALE, sr, [(sbase, sbase + need)], "rd_scale_bias")
    assert wb and sb, "no weight or no scale/bias burst"
    assert max(b.end_ns for b in sb) <= min(b.start_ns for b in wb), "a weight read before the scale/bias stream"
    others = [b for b in env.kbursts if b.id not in (CH_CMD, CH_WEIGHTS, CH_SCALE, CH_IFM, CH_OFM)]
    assert not others, f"other bursts: {others[0]}"
    env.finish()


@cocotb.test(**LONG_TIMEOUT)
async def test_conv_scale_reserved_bits(dut):
    """A per-channel CONV/DEPTHWISE whose scale/bias stream has one reserved bit set in a
    random record (i32 and i48 records, bits that make tlm.ethos_u85.scale_bias raise
    ScaleBiasError): UNPREDICTABLE, so the operation completes without effect on the TLM
    and on the DUT - the job runs on to its NPU_OP_STOP (no hang, no cmd_parse_error), the
    reference reports the failed assert, the DUT writes no OFM byte and the scoreboard is
    clean. (The stand-in once hung on such a record.)"""
    from tb.ethos_u85.tests.test_random_ops import OpGen, reserved_scale_bit_job, start_bench
    rng = rng_for("test_conv_scale_reserved_bits")
    env, watch = await start_bench(dut, seed=rng.getrandbits(16))
    bursts = []
    env.axi.add_listener(bursts.append)
    gen = OpGen(rng, 1 << (await env.read_ok(OFF["CONFIG"]) & 0xF), rtl=DUT == "rtl")
    seen = set()
    for n in range(40):
        if len(seen) == 2 and n >= 4:
            break
        job, rec, bit = reserved_scale_bit_job(gen, rng)
        acc48 = bool(dict(job.ops[0].cmds)["NPU_SET_ACC_FORMAT"]["acc_format"])
        seen.add(acc48)
        tag = f"job {n}: record {rec} bit {bit} ({'i48' if acc48 else 'i32'}): {job.ops[0].desc}"
        cocotb.log.info("%s", tag)
        for addr, data in job.image.items():
            env.memory.write(addr, data)
        await env.write_ok(CMD, 0xC | 0x2)
        await env.load_stream(STREAM_ADDR, job.words)
        watch.clear()
        bursts.clear()
        status = await env.run_job(max_cycles=500_000, poll=32)
        f = status_fields(status)
        assert f["irq_raised"] and not (f["cmd_parse_error"] or f["bus_status"]), f"{tag}: STATUS 0x{status:08x}"
        assert await env.read_ok(QREAD) == 4 * len(job.words), f"{tag}: the job did not reach its NPU_OP_STOP"
        assert any("scale" in str(d).lower() for _, d in watch.bad), \
            f"{tag}: the reference did not refuse the record: {watch.bad[:2]}"
        assert not [b for b in bursts if b.write and b.id == CH_OFM], f"{tag}: the DUT wrote OFM data"
        job_sb = env.scoreboard.close_job()
        assert job_sb is not None and job_sb.mismatches_in_job == 0, env.scoreboard.mismatches[-3:]
    assert seen == {False, True}, f"accumulator formats covered: {seen}"
    env.finish()


def tlm_expect(env: Env, words: list):
    """The TLM (tlm.ethos_u85.device.Device) run of *words* on a copy of the bench memory, with the
    regions of program_regions; returns the device (its memory holds the expected result)."""
    from tlm.ethos_u85.device import Device
    dev = Device(config=env.config, memory=env.memory.snapshot())
    dev.wait_reset()
    for n, v in enumerate(MEM_ATTRS):
        dev.apb_write(OFF[f"MEM_ATTR{n}"], v)
    dev.apb_write(OFF["REGIONCFG"], regioncfg())
    for r, base in REGION_BASE.items():
        dev.apb_write(OFF[f"BASEP{r}_LO"], base & 0xFFFFFFFF)
        dev.apb_write(OFF[f"BASEP{r}_HI"], base >> 32)
    dev.apb_write(OFF["QCONFIG"], 2)
    data = b"".join((w & 0xFFFFFFFF).to_bytes(4, "little") for w in words)
    dev.memory.write(STREAM_ADDR, data)
    dev.apb_write(OFF["QBASE_LO"], STREAM_ADDR & 0xFFFFFFFF)
    dev.apb_write(OFF["QBASE_HI"], STREAM_ADDR >> 32)
    dev.apb_write(OFF["QSIZE"], len(data))
    dev.apb_write(OFF["CMD"], 1)
    dev.run()
    return dev


def ofm_bytes(mem, fm: Fm) -> bytes:
    lo, hi = (REGION_BASE[fm.region] + x for x in fm.span())
    return bytes(mem.read(lo, hi - lo))


async def wait_ofm_write(env: Env, limit: int = 20_000) -> None:
    """Wait until the running operation has written OFM data (an AWID 8 burst)."""
    for _ in range(limit):
        await ClockCycles(env.clock, 1)
        if any(b.write and b.id == CH_OFM for b in env.kbursts):
            return
    raise TimeoutError("no OFM write")


@cocotb.test(**LONG_TIMEOUT)
async def test_kernel_stop_and_reset(dut):
    """CMD.stop_request while a pooling operation runs: the operation completes (its OFM is
    the TLM's), the NPU stops before the next one (QREAD after the operation, irq_raised).
    Then a soft reset (RESET write) in the middle of an operation: the AXI transactions on
    the bus complete, STATUS comes back clean, and a following job is right. DUT=rtl: the
    scoreboard does not model stop_request."""
    if DUT != "rtl":
        skip_now("stop_request and soft reset mid-job are checked against the stand-in")
    rng = rng_for("test_kernel_stop_and_reset")
    env = await kernel_env(dut, reference=False)
    # op1 must still run when the stop lands: a pooling op whose OFM takes many bursts (a
    # one-burst OFM can complete before the APB write, and the NPU then legally goes on)
    op1 = pool_op(rng, (5, 1), "average", ofm_none=False)
    while op1.ofm.h * op1.ofm.w * op1.ofm.d < 128:
        op1 = pool_op(rng, (5, 1), "average", ofm_none=False)
    op2 = elementwise_op(rng, (2, 4, 3), scalars=False, ofm_none=False)
    for op in (op1, op2):
        for fm in op.reads:
            fill(env, rng, fm)
        fill(env, rng, op.ofm)
    w1 = enc(*op1.cmds)
    words = w1 + enc(*op2.cmds) + enc(("NPU_OP_STOP", dict(mask=1)))
    want1 = ofm_bytes(tlm_expect(env, w1 + enc(("NPU_OP_STOP", dict(mask=1)))).memory, op1.ofm)
    before2 = ofm_bytes(env.memory, op2.ofm)
    await env.load_stream(STREAM_ADDR, words)
    env.kbursts.clear()
    await env.start_npu()
    await wait_ofm_write(env)
    await env.write_ok(CMD, 0xC | 0x10)                          # stop_request
    status = await env.wait_stopped(max_cycles=200_000, poll=16)
    f = status_fields(status)
    assert f["irq_raised"] and not (f["cmd_parse_error"] or f["bus_status"]), f"STATUS 0x{status:08x}"
    assert await env.read_ok(QREAD) == 4 * len(w1), "the NPU did not stop right after the operation"
    if op1.ofm.storage != NONE:
        assert ofm_bytes(env.memory, op1.ofm) == want1, "the stopped operation's OFM is not the TLM's"
    assert ofm_bytes(env.memory, op2.ofm) == before2, "the operation after the stop ran"

    # soft reset while the pooling operation runs
    await env.write_ok(CMD, 0xC | 0x2)
    await env.load_stream(STREAM_ADDR, words)
    env.kbursts.clear()
    await env.start_npu()
    await wait_ofm_write(env)
    await env.write_ok(OFF["RESET"], 0b01)
    await env.wait_reset_done()
    assert await env.read_ok(STATUS) == 0, "STATUS after the soft reset"
    await ClockCycles(env.clock, 50)
    await program_regions(env)
    words2 = enc(*op2.cmds) + enc(("NPU_OP_STOP", dict(mask=1)))
    want2 = ofm_bytes(tlm_expect(env, words2).memory, op2.ofm)
    await env.load_stream(STREAM_ADDR, words2)
    status = await env.run_job(max_cycles=200_000, poll=16)
    f = status_fields(status)
    assert f["irq_raised"] and not (f["cmd_parse_error"] or f["bus_status"]), f"STATUS 0x{status:08x}"
    assert ofm_bytes(env.memory, op2.ofm) == want2, "the job after the soft reset is wrong"
    env.finish()


# ============================================================================ networks
VELA_NETS = ("add_8x8x16", "add_bcast_relu", "add_bcast_row", "add_const_scalar", "add_relu_n1_to_1",
             "sub_8x8x16", "sub_bcast_relu6", "mul_8x8x16", "mul_bcast_relu", "mul_bcast_hw",
             "mul_const_scalar", "maximum_8x8x16", "minimum_bcast",
             "maxpool_2x2_s2_valid", "maxpool_3x3_s1_same", "maxpool_3x3_s2_same",
             "maxpool_3x3_s2_valid_c21", "avgpool_2x2_s2_valid", "avgpool_3x3_s1_same",
             "avgpool_3x3_s2_same", "avgpool_5x5_s1_same_relu6", "avgpool_global_7x7",
             "avgpool_2x3_s2x3_c7", "relu_standalone", "relu6_standalone", "requantize_int8",
             "pad_hw", "pad_c", "concat_axis1", "concat_axis3")
VELA_QUICK = ("add_bcast_relu", "add_const_scalar", "mul_bcast_hw", "minimum_bcast",
              "maxpool_3x3_s2_same", "avgpool_3x3_s1_same", "avgpool_2x3_s2x3_c7", "pad_c")
VELA_ALL = os.environ.get("KERNEL_NETS", "") == "all"


@cocotb.parametrize(mode=named(["default", "sram_only"]))
@cocotb.test(timeout_time=2000, timeout_unit="ms")
async def test_vela_networks(dut, mode):
    """Vela networks of elementwise and pooling operations only (tests/nets catalog,
    ethos-u85-256), loaded and started as tlm.ethos_u85.runner does, on LiteRT's inputs;
    outputs against the TLM and against LiteRT (but for the known Vela/LiteRT disagreements,
    tests/nets VELA_VS_LITERT, whose reason is logged). The quick list by default, every one
    with KERNEL_NETS=all."""
    from tests import nets
    names = VELA_NETS if VELA_ALL else VELA_QUICK
    if mode == "sram_only" and not VELA_ALL:
        names = names[:4]
    rng = rng_for(f"test_vela_networks[{mode}]")
    env = Env(dut, reference_model=True)
    await env.start()
    for name in names:
        inputs, lit = nets.reference(nets.build(name))
        res = await run_network(env, vela_model(name, "ethos-u85-256", mode), rng, inputs=inputs)
        why = check_litert(name, res.outputs, lit)
        if why is not None:
            cocotb.log.warning("%s: not compared with LiteRT (tests/nets VELA_VS_LITERT): %s", name, why)
        cocotb.log.info("%s (%s): %d output bytes match the TLM%s; ops %s", name, mode,
                        res.output_bytes, "" if why else " and LiteRT", res.ops)
        await ClockCycles(env.clock, 4)
    env.finish()


async def _network_bursts(dut, test: str, name: str = "dwconv_3x3_s1_same_relu6_pc", w_pause=None):
    """Run catalog network *name* (Vela, ethos-u85-256; by default the DEPTHWISE
    dwconv_3x3_s1_same_relu6_pc: 9x9x16 int8 NHWC, SAME) through the pins with every AXI burst
    recorded; its output checked against the TLM's and LiteRT's. *w_pause*: a pause pattern
    (1: WREADY low) repeated on every port's W channel. Returns (env, bursts, name)."""
    from tests import nets
    rng = rng_for(test)
    env = Env(dut, reference_model=True)
    await env.start()
    bursts: list = []
    env.axi.add_listener(bursts.append)
    if w_pause is not None:
        for port in env.axi.ports.values():
            port.w.set_pause_generator(itertools.cycle(w_pause))
    inputs, lit = nets.reference(nets.build(name))
    res = await run_network(env, vela_model(name, "ethos-u85-256", "default"), rng, inputs=inputs)
    assert check_litert(name, res.outputs, lit) is None, f"{name}: not compared with LiteRT"
    return env, bursts, name


@cocotb.test(**LONG_TIMEOUT)
async def test_conv_ifm_runs(dut):
    """The stand-in reads a contiguous NHWC IFM patch row as multi-beat INCR runs
    (rtl_stub/ethos_u85/npu_conv_ifm.v): a Vela DEPTHWISE with SAME padding on a 9x9x16 int8
    NHWC input (16 bytes a position, IFM_STRIDE_X 16) gives rd_ifm bursts of more than one
    beat, none crossing a 256-byte window, fewer bursts than beats, and the output the TLM's
    and LiteRT's (every burst also checked by the scoreboard and the AXI rules)."""
    from tb.ethos_u85.testlib.bursts import burst_error
    if DUT != "rtl":
        skip_now("the stand-in's IFM loader")
    env, bursts, name = await _network_bursts(dut, "test_conv_ifm_runs")
    ifm = [b for b in bursts if b.id == CH_IFM and not b.write]
    assert ifm, "no rd_ifm burst"
    for b in ifm:
        err = burst_error(b)
        assert err is None, f"rd_ifm: {err}"
    beats = sum(b.beats for b in ifm)
    longest = max(b.beats for b in ifm)
    cocotb.log.info("%s: %d rd_ifm bursts, %d beats, longest %d", name, len(ifm), beats, longest)
    assert longest > 1 and len(ifm) < beats, f"rd_ifm: {len(ifm)} bursts for {beats} beats (no run)"
    env.finish()


@cocotb.test(**LONG_TIMEOUT)
async def test_conv_ofm_runs(dut):
    """The stand-in writes a contiguous OFM as multi-beat INCR runs (rtl_stub/ethos_u85/
    npu_conv_out.v): the Vela DEPTHWISE of test_conv_ifm_runs writes a 9x9x16 int8 NHWC
    OFM (16 bytes a position, OFM_STRIDE_X 16: 81 whole 16-byte lines), as wr_ofm bursts of
    up to 16 beats inside 256-byte windows with every byte strobed once, one burst per
    window the OFM touches, and the output the TLM's and LiteRT's (every burst also checked by the scoreboard
    and the AXI rules)."""
    from tb.ethos_u85.testlib.bursts import burst_error
    if DUT != "rtl":
        skip_now("the stand-in's OFM writer")
    env, bursts, name = await _network_bursts(dut, "test_conv_ofm_runs")
    ofm = [b for b in bursts if b.id == CH_OFM and b.write]
    assert ofm, "no wr_ofm burst"
    for b in ofm:
        err = burst_error(b)
        assert err is None, f"wr_ofm: {err}"
        assert b.nbytes == 16 * b.beats, f"wr_ofm: a contiguous OFM burst with partial beats: {b}"
    beats = sum(b.beats for b in ofm)
    lines = {b.addr // 16 + i for b in ofm for i in range(b.beats)}
    longest = max(b.beats for b in ofm)
    cocotb.log.info("%s: %d wr_ofm bursts, %d beats, longest %d", name, len(ofm), beats, longest)
    assert beats == len(lines) == 9 * 9 * 16 // 16, f"wr_ofm: {beats} beats on {len(lines)} lines, not 81 once each"
    # the OFM is one contiguous run of lines: as few bursts as the 256-byte windows it touches
    windows = {ln // 16 for ln in lines}
    assert longest > 1 and len(ofm) == len(windows), \
        f"wr_ofm: {len(ofm)} bursts for {beats} beats in {len(windows)} windows of 256 bytes"
    env.finish()


@cocotb.test(**LONG_TIMEOUT)
async def test_conv_ofm_stalled(dut):
    """A Vela CONV with three OFM blocks of 60 positions (conv2d_7x7_s2_rgb: 12x12x16 int8,
    OFM blocks 5x12) with WREADY low 300 of every 316 cycles on every port: the stand-in's OFM
    write queue (32 beats, npu_conv_out.v) fills within a block, its accumulator reader stalls
    there, and the MAC array must not start the next block into the AB before the reader is
    done (ab_busy); the output the TLM's and LiteRT's, with W beats held for most cycles."""
    env, bursts, name = await _network_bursts(dut, "test_conv_ofm_stalled", "conv2d_7x7_s2_rgb",
                                              [1] * 300 + [0] * 16)
    ofm = [b for b in bursts if b.id == CH_OFM and b.write]
    beats = sum(b.beats for b in ofm)
    assert DUT != "rtl" or beats == 12 * 12 * 16 // 16, f"wr_ofm: {beats} beats, not 144"
    cocotb.log.info("%s with W stalled: %d wr_ofm bursts, %d beats", name, len(ofm), beats)
    env.finish()
