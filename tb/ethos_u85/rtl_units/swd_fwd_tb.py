"""cocotb tests of the weight decoders (rtl_stub/ethos_u85/npu_swd.v, npu_fwd.v) on their own:
random weight streams made by the TLM's encoders (tlm.weights.encode_swd / encode_fwd, every
coding mode forced in turn: palette or direct, Golomb-Rice divisors, truncated unary,
uncompressed, zero runs, many slices), fed beat by beat with random stalls and taken with a
random consumer space; every weight against tlm.weights.decode_swd / decode_fwd, and corrupt or
short streams end in stop_err / stop_end as the TLM's decoder raises.

Seed: UNIT_SEED (printed); UNIT_CASES sets the number of streams (default 120)."""
from __future__ import annotations

import os
import random

import numpy as np

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from tlm.ethos_u85.weights import WeightStreamError, decode_fwd, decode_swd, encode_fwd, encode_swd

SEED = int(os.environ.get("UNIT_SEED") or random.randrange(1 << 30))
CASES = int(os.environ.get("UNIT_CASES", "120"))
OW = 8


def _weights(rng: random.Random, n: int) -> np.ndarray:
    g = np.random.default_rng(rng.getrandbits(32))
    kind = rng.choice(("dense", "small", "sparse", "palette", "zeros", "wide"))
    if kind == "dense":
        w = g.integers(-255, 256, n)
    elif kind == "small":
        w = g.integers(-6, 7, n)
    elif kind == "sparse":
        w = g.integers(-40, 41, n) * (g.random(n) < 0.3)
    elif kind == "palette":
        w = g.choice(g.integers(-255, 256, rng.randint(2, 40)), n)
    elif kind == "zeros":
        w = np.zeros(n, np.int64)
        w[g.integers(0, n, max(1, n // 50))] = g.integers(-255, 256, max(1, n // 50))
    else:
        w = np.where(g.random(n) < 0.5, 255, -255) * (g.random(n) < 0.8)
    return w.astype(np.int64)


def _stream(rng: random.Random):
    n = rng.choice((1, 2, 5, 12, 13, 40, 100, 300, 1000, rng.randint(1, 3000)))
    for _ in range(50):
        w = _weights(rng, n)
        kw = rng.choice((
            {}, dict(palette=None), dict(wdiv=rng.randrange(6)), dict(wdiv=rng.randrange(6), wtrunc=1),
            dict(wdiv=7), dict(zdiv=rng.randrange(4)), dict(zdiv=6), dict(zdiv=rng.randrange(4), wdiv=7),
            dict(max_slice_len=rng.randint(1, 40)),
            dict(slice_modes=[(rng.choice((0, 1, 2, 3, 6)), rng.choice((0, 1, 3, 5, 7)), 0) for _ in range(3)],
                 max_slice_len=rng.randint(3, 60)),
            dict(newpal_every=2, max_slice_len=rng.randint(2, 30)),
            dict(palette=None, wdiv=7, palbits=9)))
        try:
            return w, encode_swd(w, **kw), kw
        except ValueError:
            continue
    return w, encode_swd(w), {}


async def _reset(dut):
    dut.rst_n.value = 0
    dut.start.value = 0
    dut.in_valid.value = 0
    dut.in_data.value = 0
    dut.out_space.value = 0
    dut.len_bytes.value = 0
    for _ in range(3):
        await RisingEdge(dut.CLK)
    dut.rst_n.value = 1
    await RisingEdge(dut.CLK)


async def _decode(dut, rng, data: bytes, count: int, max_cycles: int):
    """Drive one stream through the unit; returns (weights, how it stopped)."""
    dut.len_bytes.value = len(data)
    dut.start.value = 1
    await RisingEdge(dut.CLK)
    dut.start.value = 0
    beats = [data[i:i + 16].ljust(16, b"\xa5") for i in range(0, len(data), 16)]
    bi = 0
    got: list = []
    stall = rng.choice((0.0, 0.3, 0.8))
    for _ in range(max_cycles):
        dut.in_valid.value = int(bi < len(beats) and rng.random() >= stall)
        dut.in_data.value = int.from_bytes(beats[bi], "little") if bi < len(beats) else 0
        space = min(OW, count - len(got)) if rng.random() >= stall else rng.randint(0, 2)
        space = max(0, min(space, count - len(got)))
        dut.out_space.value = space
        await ReadOnly()
        n = int(dut.out_n.value)
        assert n <= space, f"gave {n} weights with space {space}"
        w = int(dut.out_w.value)
        for k in range(n):
            v = (w >> (9 * k)) & 0x1FF
            got.append(v - 512 if v & 0x100 else v)
        took = int(dut.in_valid.value) and int(dut.in_ready.value)
        err, end = int(dut.stop_err.value), int(dut.stop_end.value)
        await RisingEdge(dut.CLK)
        bi += took
        if len(got) >= count:
            return got, "done"
        if err or end:
            return got, "err" if err else "end"
    return got, "timeout"


@cocotb.test()
async def test_swd_random_streams(dut):
    """Random SWD streams of every coding mode: every weight as tlm.weights.decode_swd."""
    rng = random.Random(SEED)
    cocotb.log.info("UNIT_SEED=%d, %d streams", SEED, CASES)
    cocotb.start_soon(Clock(dut.CLK, 10, unit="ns").start())
    await _reset(dut)
    for case in range(CASES):
        w, data, kw = _stream(rng)
        ref = decode_swd(data, len(w))
        assert np.array_equal(ref, w), "encoder/decoder self-check"
        got, how = await _decode(dut, rng, data, len(w), 40 * len(data) + 20 * len(w) + 200)
        assert how == "done", f"case {case} ({kw}, {len(w)} weights, {len(data)} bytes): {how} after {len(got)}"
        bad = np.flatnonzero(np.asarray(got[:len(w)]) != w)
        assert bad.size == 0, (f"case {case} ({kw}): {bad.size} weights differ, first at {bad[0]}: "
                               f"{got[bad[0]]} vs {w[bad[0]]}")


@cocotb.test()
async def test_swd_corrupt_streams(dut):
    """Cut, bit-flipped and garbage streams: the unit delivers what the TLM's decoder can decode
    and stops (stop_err / stop_end) where the TLM raises; never a hang, never more weights."""
    rng = random.Random(SEED + 1)
    cocotb.start_soon(Clock(dut.CLK, 10, unit="ns").start())
    await _reset(dut)
    stats = {"ok": 0, "stopped": 0}
    for case in range(CASES // 2):
        w, data, kw = _stream(rng)
        b = bytearray(data)
        how_c = rng.choice(("cut", "flip", "junk"))
        if how_c == "cut":
            b = b[:rng.randrange(0, len(b))]
        elif how_c == "flip":
            for _ in range(rng.randint(1, 4)):
                i = rng.randrange(len(b))
                b[i] ^= 1 << rng.randrange(8)
        else:
            b = bytearray(rng.randbytes(rng.randint(1, 64)))
        data = bytes(b)
        try:
            ref = decode_swd(data, len(w))
        except WeightStreamError:
            ref = None
        got, how = await _decode(dut, rng, data, len(w), 40 * len(data) + 20 * len(w) + 400)
        assert how != "timeout", f"case {case} ({how_c}): hang after {len(got)} weights"
        if ref is not None:
            assert how == "done" and np.array_equal(np.asarray(got[:len(w)]), ref), \
                f"case {case} ({how_c}): TLM decodes {len(w)} weights, the unit {how} after {len(got)}"
            stats["ok"] += 1
        else:
            # the TLM raises: the unit stops before giving all weights, or gives them all when the
            # TLM's error lies after the last weight needed (the TLM parses that whole slice
            # first; the unit checks each chunk as it parses it: rtl_stub/ethos_u85/README.md)
            assert how in ("err", "end", "done"), f"case {case} ({how_c}): TLM raises, the unit {how}"
            stats["stopped" if how != "done" else "late"] = stats.get("late", 0) + 1 if how == "done" \
                else stats["stopped"] + 1
    cocotb.log.info("corrupt streams: %s", stats)
    assert stats["stopped"] > 0


def _fwd_stream(rng: random.Random):
    n = rng.choice((1, 31, 32, 33, 64, 100, 129, rng.randint(1, 1500)))
    for _ in range(50):
        w = _weights(rng, n)
        mode = rng.choice(("auto", "raw", "lut4", "lut2"))
        kw = {}
        if mode == "raw" and rng.random() < 0.5 and w.size:
            lo, hi = int(w.min()), int(w.max())
            if hi - lo <= 255:
                kw["zero_point"] = rng.randint(max(-128, -128 - lo), min(127, 127 - hi))
        if mode != "raw":
            w = np.asarray(rng.choices(sorted(set(w.tolist()))[:16 if mode == "lut4" else 4] or [0], k=n))
        try:
            return w, encode_fwd(w, mode=mode, **kw), mode
        except ValueError:
            continue
    return w, encode_fwd(np.zeros(n, np.int64)), "auto"


@cocotb.test()
async def test_fwd_random_streams(dut):
    """Random FWD streams (raw with zero points, LUT4, LUT2): every weight as
    tlm.weights.decode_fwd; cut streams stop where the TLM raises."""
    rng = random.Random(SEED + 2)
    cocotb.log.info("UNIT_SEED=%d", SEED)
    cocotb.start_soon(Clock(dut.CLK, 10, unit="ns").start())
    await _reset(dut)
    for case in range(CASES):
        w, data, mode = _fwd_stream(rng)
        cut = rng.random() < 0.15
        if cut:
            data = data[:rng.randrange(0, len(data))]
        try:
            ref = decode_fwd(data, len(w))
        except WeightStreamError:
            ref = None
        got, how = await _decode(dut, rng, data, len(w), 40 * len(data) + 20 * len(w) + 200)
        if ref is None:
            assert how in ("err", "end"), f"case {case} ({mode}, cut): the TLM raises, the unit {how}"
            continue
        assert how == "done", f"case {case} ({mode}, {len(w)} weights, {len(data)} bytes): {how} after {len(got)}"
        bad = np.flatnonzero(np.asarray(got[:len(w)]) != ref)
        assert bad.size == 0, (f"case {case} ({mode}): {bad.size} weights differ, first at {bad[0]}: "
                               f"{got[bad[0]]} vs {ref[bad[0]]}")
