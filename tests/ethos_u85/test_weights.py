"""Weight streams (TRM 3.9): SWD/FWD codecs, weight ordering, and cross-checks against
Arm's tools (ethosu.mlw_codec for the SWD bitstream, Vela-compiled networks for the
ordering and FWD)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from tests.support import require

from tests.ethos_u85.support.stream_state import kernel_op_states
from tlm.core.errors import Unpredictable
from tlm.ethos_u85.weights import (
    NUM_WD,
    WeightOrder,
    WeightStreamError,
    codec,
    decode_fwd,
    decode_swd,
    decode_swd_slices,
    decode_weight_tensor,
    encode_fwd,
    encode_swd,
    fold,
    fwd_from_weights,
    fwd_indices,
    microblock_depth,
    parse_fwd_header,
    reference_order,
    stream_indices,
    streams_from_weights,
    unfold,
    weights_from_fwd,
    weights_from_streams,
)
from tlm.ethos_u85.weights.codec import BitWriter

mlw = require("ethosu.mlw_codec")

CONFIGS = ["ethos-u85-128", "ethos-u85-256", "ethos-u85-512", "ethos-u85-1024", "ethos-u85-2048"]


def mlw_decode(data: bytes) -> list:
    return list(mlw.decode(bytearray(data)))


def mlw_encode(w) -> bytes:
    return bytes(mlw.encode([int(x) for x in w], 0))


# ------------------------------------------------------------------ bit order and basics

def test_bit_order_trm_example():
    # TRM 3.9.3: 0b10010, then 0b1011, then 0b1010101 -> bytes 0x72, 0xAB.
    bw = BitWriter()
    bw.put(5, 0x12)
    bw.put(4, 0xB)
    bw.put(7, 0x55)
    assert bw.getvalue() == bytes([0x72, 0xAB])


def test_fold_unfold():
    w = np.arange(-255, 256)
    f = fold(w)
    assert f.min() == 0 and f.max() == 511
    assert len(set(f.tolist())) == 511
    assert fold(-1) == 3 and fold(1) == 2 and fold(0) == 0
    assert np.array_equal(unfold(f), w)


def test_trm_alternating_example():
    # TRM 3.9.9 example sequence, encoded by Arm's encoder, decoded by ours and vice versa.
    w = [0, 5, 6, 0, 0, 0, 7, 0]
    assert decode_swd(mlw_encode(w)).tolist() == w
    for zdiv in (0, 1, 2, 3):
        s = encode_swd(w, zdiv=zdiv)
        assert mlw_decode(s) == w
        _, sl = decode_swd_slices(s)
        assert sl[0].zdiv == zdiv and sl[0].slicelen == 3       # slicelen = non-zero count


def test_three_slice_structure():
    # Like TRM 3.9.9's three-slice example: alternating slices with and without newpal.
    w = [0, 5, 6, 0, 0, 0, 7, 0, 8, 9, 10, 0, 11, 12, 13, 14, 15]
    s = encode_swd(w, zdiv=0, wdiv=0, max_slice_len=2, newpal_every=3)
    out, sl = decode_swd_slices(s)
    assert out.tolist() == w and mlw_decode(s) == w
    assert [x.newpal for x in sl] == [1, 0, 0, 1, 0, 0]
    assert [x.slicelen for x in sl] == [2, 2, 2, 2, 2, 1]


def test_empty_and_all_zero():
    assert decode_swd(encode_swd([])).size == 0
    for n in (1, 7, 100, 40000):
        z = [0] * n
        for kw in ({}, {"zdiv": 0}, {"zdiv": 3}, {"zdiv": 6}):
            s = encode_swd(z, **kw)
            assert decode_swd(s).tolist() == z
            assert mlw_decode(s) == z
        assert decode_swd(mlw_encode(z)).tolist() == z


# ------------------------------------------------------------------ forced coding modes

def _max_index(wdiv, wtrunc):
    if wdiv == 7:
        return 511
    return ((3 if wtrunc else 32) << wdiv) - 1


@pytest.mark.parametrize("zdiv", [0, 1, 2, 3, 6])
@pytest.mark.parametrize("wdiv,wtrunc", [(d, t) for d in range(6) for t in (0, 1)] + [(7, 0)])
@pytest.mark.parametrize("palette_mode", ["direct", "palette"])
def test_forced_mode_roundtrip(zdiv, wdiv, wtrunc, palette_mode):
    rng = np.random.default_rng(zdiv * 100 + wdiv * 10 + wtrunc)
    alt = zdiv < 4
    mx = _max_index(wdiv, wtrunc)
    if palette_mode == "palette":
        entries = [0, 3, -7, 12, -1, 100, -255, 255][:min(8, mx + 1 + alt)]
        palette = entries[1:] if alt else entries           # 0 is never coded in alt mode
        w = rng.choice(entries, 700)
    else:
        palette = None
        allowed = unfold(np.arange(min(mx, 511) + 1))          # index = fold(w) (dirofs 0)
        w = rng.choice(allowed, 700) * (rng.random(700) < 0.6)
        w[:2] = allowed[-2:]
    s = encode_swd(w, zdiv=zdiv, wdiv=wdiv, wtrunc=wtrunc, palette=palette,
                   dirofs=0, max_slice_len=100)
    assert len(s) % 16 == 0
    out, sl = decode_swd_slices(s)
    assert out.tolist() == w.tolist()
    assert mlw_decode(s) == w.tolist()
    fast = codec._decode_swd_fast(s, None, codec.MAX_WEIGHTS_DEFAULT)    # the vectorised decoder
    assert fast is not None and fast.dtype == out.dtype and fast.tolist() == w.tolist()
    assert all(x.zdiv == zdiv and x.wdiv == wdiv and x.wtrunc == wtrunc for x in sl)
    assert (sl[0].palette_size > 0) == (palette is not None)
    assert sl[0].newpal == 1 and len(sl) >= 2


def test_uncompressed_direct_palbits():
    # Direct mode uncompressed: palette_bits gives the index precision (TRM 3.9.8);
    # > 5 bits means 8 indices per chunk instead of 12.
    rng = np.random.default_rng(3)
    for hi, zdiv in ((1, 6), (7, 6), (15, 0), (100, 6), (255, 2)):
        w = rng.integers(-hi, hi + 1, 500)
        s = encode_swd(w, zdiv=zdiv, wdiv=7, palette=None, dirofs=0)
        out, sl = decode_swd_slices(s)
        assert out.tolist() == w.tolist() and mlw_decode(s) == w.tolist()
        assert sl[0].palette_bits == max(2, int(fold(w).max()).bit_length())


def test_dirofs():
    # Alternating mode never codes 0, so direct values can start at fold(+1) = 2.
    rng = np.random.default_rng(4)
    w = rng.integers(1, 60, 400) * rng.choice([-1, 1], 400) * (rng.random(400) < 0.5)
    for dirofs in (1, 2):
        s = encode_swd(w, zdiv=1, wdiv=2, palette=None, dirofs=dirofs)
        out, sl = decode_swd_slices(s)
        assert sl[0].dirofs == dirofs
        assert out.tolist() == w.tolist() and mlw_decode(s) == w.tolist()
    with pytest.raises(ValueError):
        encode_swd(w, zdiv=6, palette=None, dirofs=2)      # 0 and +-... not reachable


def test_mode_switch_slices():
    # Alternating and non-alternating slices mixed in one stream (newpal set at each kind
    # change), several divisors, long zero runs spanning chunks.
    rng = np.random.default_rng(5)
    w = rng.integers(-15, 16, 5000) * (rng.random(5000) < 0.3)
    w[1000:1900] = 0
    modes = [(0, 3, 0), (2, 4, 1), (6, 4, 0), (6, 7, 0), (3, 1, 0), (1, 7, 0)]
    for pal in ("auto", None):
        s = encode_swd(w, slice_modes=modes, max_slice_len=257, palette=pal)
        out, sl = decode_swd_slices(s)
        assert out.tolist() == w.tolist() and mlw_decode(s) == w.tolist()
        kinds = [x.zdiv < 4 for x in sl]
        for a, b, x in zip(kinds, kinds[1:], sl[1:]):
            assert a == b or x.newpal
        assert {x.zdiv for x in sl} == {0, 1, 2, 3, 6}


def test_forced_mode_rejected():
    w = [255, -255, 3]
    with pytest.raises(ValueError):
        encode_swd(w, zdiv=6, wdiv=0, palette=None)            # quotient 511 > 31
    with pytest.raises(ValueError):
        encode_swd(w, zdiv=6, wdiv=3, wtrunc=1, palette=None)  # quotient > 2
    with pytest.raises(ValueError):
        encode_swd([256])
    with pytest.raises(ValueError):
        encode_swd(w, palette=[1])                            # 1-entry palette impossible
    with pytest.raises(ValueError):
        encode_swd([7], wdiv=7, palette=[1, 2, 3], zdiv=6, dirofs=0)  # index 17 > 2 bits


# ------------------------------------------------------------------ cross-check with Arm's codec

def _distributions(rng, n):
    yield rng.integers(-255, 256, n)
    yield rng.integers(-128, 128, n)
    yield np.clip(np.round(rng.normal(0, 12, n)), -255, 255).astype(int)
    yield rng.integers(-9, 10, n) * (rng.random(n) < 0.25)
    yield rng.choice([-100, -3, 0, 1, 17, 64], n)
    w = np.zeros(n, int)
    w[rng.integers(0, n, 3)] = rng.integers(-255, 256, 3)
    yield w


def test_decode_arm_encoded_streams():
    rng = np.random.default_rng(11)
    count = 0
    for n in (1, 2, 13, 100, 1000, 5000, 40000):
        for w in _distributions(rng, n):
            w = [int(x) for x in w]
            assert decode_swd(mlw_encode(w)).tolist() == w
            count += 1
    assert count == 42


def test_arm_decodes_our_streams_auto():
    rng = np.random.default_rng(12)
    for n in (1, 3, 100, 3000, 40000):
        for w in _distributions(rng, n):
            s = encode_swd(w)
            assert mlw_decode(s) == [int(x) for x in w]


# ------------------------------------------------------------------ robustness

def test_truncated_prefixes_raise():
    rng = np.random.default_rng(13)
    w = rng.integers(-20, 21, 300) * (rng.random(300) < 0.5)
    s = encode_swd(w)
    eos_end = None
    for k in range(len(s)):
        try:
            out = decode_swd(s[:k])
        except WeightStreamError as e:
            assert 0 <= e.offset <= k
            continue
        # Only a prefix that keeps the EOS symbol may decode, and then correctly.
        assert out.tolist() == w.tolist()
        eos_end = k if eos_end is None else eos_end
    assert eos_end is not None and eos_end > len(s) - 17


def test_random_corruption_never_crashes():
    rng = np.random.default_rng(14)
    base = [encode_swd(rng.integers(-30, 31, 500) * (rng.random(500) < 0.4)),
            mlw_encode(rng.integers(-255, 256, 500)),
            encode_swd(rng.integers(-5, 6, 500), zdiv=6, wdiv=7, palette=None)]
    outcomes = {"ok": 0, "err": 0}
    t0 = time.perf_counter()
    for i in range(600):
        s = bytearray(base[i % 3])
        for _ in range(rng.integers(1, 4)):
            s[rng.integers(0, len(s))] ^= 1 << int(rng.integers(0, 8))
        try:
            out = decode_swd(bytes(s), max_weights=1 << 20)
            assert out.dtype == np.int16 and np.abs(out).max(initial=0) <= 255
            outcomes["ok"] += 1
        except WeightStreamError:
            outcomes["err"] += 1
    for _ in range(200):
        s = rng.integers(0, 256, int(rng.integers(0, 300)), dtype=np.uint8).tobytes()
        try:
            decode_swd(s, max_weights=1 << 20)
            outcomes["ok"] += 1
        except WeightStreamError:
            outcomes["err"] += 1
    assert outcomes["err"] > 0 and outcomes["ok"] > 0
    assert time.perf_counter() - t0 < 60


def _stream(*fields):
    bw = BitWriter()
    for n, v in fields:
        bw.put(n, v)
    bw.put(3, 7)
    bw.align(128, 1)
    return bw.getvalue()


HDR = [(15, 0), (3, 0), (1, 0), (1, 1), (5, 0), (5, 0), (3, 0)]   # slicelen 1, wdiv 0, newpal


def test_reserved_and_illegal_encodings():
    with pytest.raises(WeightStreamError, match="reserved zdiv"):
        decode_swd(_stream((3, 4), *HDR))
    with pytest.raises(WeightStreamError, match="reserved zdiv"):
        decode_swd(_stream((3, 5), *HDR))
    with pytest.raises(WeightStreamError, match="reserved wdiv"):
        decode_swd(_stream((3, 6), (15, 0), (3, 6), (1, 0), (1, 1), (13, 0), (12, 0), (12, 0)))
    with pytest.raises(WeightStreamError, match="newpal"):
        decode_swd(_stream((3, 6), (15, 0), (3, 0), (1, 0), (1, 0), (12, 0), (12, 0)))
    # Non-alternating slice (value 0, index 0) then an alternating slice without newpal.
    with pytest.raises(WeightStreamError, match="mode change"):
        decode_swd(_stream((3, 6), *HDR, (12, 0), (3, 0), (15, 0), (3, 0), (1, 0), (1, 0),
                           (12, 0), (12, 0), (12, 0)))
    # A quotient of 32: 16 codes of 2 then a 0 -> wunary0 all ones twice with wunary1 ones.
    with pytest.raises(WeightStreamError, match="quotient"):
        decode_swd(_stream((3, 6), *HDR, (12, 0xFFF), (12, 0xFFF), (12, 0xFFF), (12, 0xFFF)))
    # Index 31 << 5 = 992 > 511.
    q31 = [(12, 0xFFF), (12, 0xFFF), (12, 0xF), (4, 0x7)]    # 15 twos + 1 one, then 0
    with pytest.raises(WeightStreamError, match="index"):
        decode_swd(_stream((3, 6), (15, 0), (3, 5), (1, 0), (1, 1), (5, 0), (5, 0), (3, 0),
                           *q31, (12, 0), (5, 0)))
    # Direct value out of range: dirofs 31, index 511 (uncompressed, 9 bits) -> |v| = 271.
    with pytest.raises(WeightStreamError, match="outside"):
        decode_swd(_stream((3, 6), (15, 0), (3, 7), (1, 0), (1, 1), (5, 31), (5, 0), (3, 7),
                           (9, 511)))


def test_fast_swd_decoder_equals_reference():
    """codec._decode_swd_fast (per-symbol work vectorised) returns the reference decoder's
    weights for every stream it accepts, accepts every valid stream, and leaves every error
    to the reference (decode_swd raises exactly what the reference raises)."""
    rng = np.random.default_rng(4242)
    accepted = 0
    for it in range(300):
        size = int(rng.choice([1, 3, 12, 13, 100, 777, 3000]))
        w = [rng.integers(-255, 256, size), rng.choice([0, 0, 0, 1, -1, 2, 5, -7], size),
             rng.integers(-3, 4, size) * (rng.random(size) < 0.3), rng.integers(-40, 40, size)][it % 4]
        kw = {}
        if rng.random() < 0.7:
            kw = dict(zdiv=int(rng.choice([0, 1, 2, 3, 6])), wdiv=int(rng.choice([0, 1, 2, 3, 4, 5, 7])),
                      wtrunc=int(rng.integers(0, 2)))
            if rng.random() < 0.4:
                kw["max_slice_len"] = int(rng.integers(1, 40))
        try:
            s = encode_swd(w, **kw)
        except ValueError:
            continue
        ref = codec._decode_swd_ref(s, None, codec.MAX_WEIGHTS_DEFAULT, None)
        fast = codec._decode_swd_fast(s, None, codec.MAX_WEIGHTS_DEFAULT)
        assert fast is not None and fast.dtype == ref.dtype and np.array_equal(fast, ref), (it, kw)
        accepted += 1
        cnt = int(rng.integers(0, ref.size + 2))
        try:
            want = codec._decode_swd_ref(s, cnt, codec.MAX_WEIGHTS_DEFAULT, None)
        except WeightStreamError:
            assert codec._decode_swd_fast(s, cnt, codec.MAX_WEIGHTS_DEFAULT) is None
        else:
            assert np.array_equal(decode_swd(s, cnt), want)
        # corruption: the fast decoder either agrees or declines; decode_swd == reference
        bad = bytearray(s)
        for _ in range(int(rng.integers(1, 4))):
            bad[int(rng.integers(0, len(bad)))] ^= 1 << int(rng.integers(0, 8))
        bad = bytes(bad[:int(rng.integers(1, len(bad) + 1))])
        try:
            want = codec._decode_swd_ref(bad, None, 1 << 16, None)
        except WeightStreamError as e:
            with pytest.raises(WeightStreamError) as got:
                decode_swd(bad, max_weights=1 << 16)
            assert (got.value.msg, got.value.bit) == (e.msg, e.bit)
        else:
            got = decode_swd(bad, max_weights=1 << 16)
            assert np.array_equal(got, want)
    assert accepted > 200


def test_hand_assembled_stream():
    # One non-alternating slice, direct mode, wdiv 1: values 3 (index 6: q 3, r 0) and -1
    # (index 3: q 1, r 1). Codes: q3 = [2, 1], q1 = [1] -> wunary0 0b111, wunary1 0b001.
    s = _stream((3, 6), (15, 1), (3, 1), (1, 0), (1, 1), (5, 0), (5, 0), (3, 0),
                (12, 0b111), (3, 0b001), (1, 0), (1, 1))
    assert decode_swd(s).tolist() == [3, -1]
    assert mlw_decode(s) == [3, -1]


def test_count_and_limits():
    rng = np.random.default_rng(15)
    w = rng.integers(-9, 10, 3000) * (rng.random(3000) < 0.3)
    s = encode_swd(w, max_slice_len=100)
    assert decode_swd(s, 3000).tolist() == w.tolist()
    assert decode_swd(s, 1234).tolist() == w[:1234].tolist()
    with pytest.raises(WeightStreamError):
        decode_swd(s, 3001)
    # With a count the EOS is not needed once enough weights are decoded.
    _, sl = decode_swd_slices(s)
    cut = (sl[3].bit + 7) // 8 + 8                      # inside the 4th slice
    assert decode_swd(s[:cut], 50).tolist() == w[:50].tolist()
    with pytest.raises(WeightStreamError):
        decode_swd(s[:cut])
    # A stream whose zero runs expand past max_weights is rejected.
    big = encode_swd(np.r_[np.zeros(100000, int), 5])
    with pytest.raises(WeightStreamError, match="more than"):
        decode_swd(big, max_weights=50000)
    assert decode_swd(big, 10).tolist() == [0] * 10


# ------------------------------------------------------------------ FWD

@pytest.mark.parametrize("mode", ["raw", "lut4", "lut2"])
def test_fwd_roundtrip(mode):
    rng = np.random.default_rng(16)
    vals = {"raw": None, "lut4": rng.choice(np.arange(-255, 256), 16, replace=False),
            "lut2": np.array([-255, 0, 7, 255])}[mode]
    for n in (1, 31, 32, 33, 1000):
        if mode == "raw":
            w = rng.integers(-128, 128, n)
        else:
            w = rng.choice(vals, n)
        s = encode_fwd(w, mode)
        assert len(s) % 32 == 0
        h = parse_fwd_header(s)
        assert (h.raw, h.small_lut) == {"raw": (1, 0), "lut4": (0, 0), "lut2": (0, 1)}[mode]
        assert decode_fwd(s, n).tolist() == w.tolist()
        per = {"raw": 32, "lut4": 64, "lut2": 128}[mode]
        assert len(s) == 32 * (1 + -(-n // per))


def test_fwd_raw_zero_point():
    # value = stored_int8 - zero_point, so the stored value is w + zero_point.
    w = np.array([-255, -200, -128, 0])
    s = encode_fwd(w, "raw")
    h = parse_fwd_header(s)
    assert h.zero_point == 127 and decode_fwd(s, 4).tolist() == w.tolist()
    w = np.array([255, 200, 0, 127])
    s = encode_fwd(w, "raw")
    assert parse_fwd_header(s).zero_point == -128 and decode_fwd(s, 4).tolist() == w.tolist()
    with pytest.raises(ValueError):
        encode_fwd([-255, 255], "raw")


def test_fwd_header_bitmap():
    # Header by hand: raw 0, small 0, zero_point 0, lut[i]: sign at 112+9i, magnitude above.
    h = 0
    lut = [0, -1, 2, -3, 255, -255] + [0] * 10
    for i, v in enumerate(lut):
        h |= (int(v < 0) | (abs(v) << 1)) << (112 + 9 * i)
    body = bytes([0x10, 0x32, 0x54]) + bytes(29)       # indices 0,1,2,3,4,5,0...
    s = h.to_bytes(32, "little") + body
    assert decode_fwd(s, 7).tolist() == [0, -1, 2, -3, 255, -255, 0]
    raw = (1 | (0xFE << 104)).to_bytes(32, "little") + bytes([0x80, 0x7F]) + bytes(30)
    assert decode_fwd(raw, 2).tolist() == [-128 + 2, 127 + 2]          # zero point -2


def test_fwd_errors():
    with pytest.raises(WeightStreamError):
        decode_fwd(bytes(31))
    s = encode_fwd(np.arange(40) % 3, "lut2")
    with pytest.raises(WeightStreamError):
        decode_fwd(s, 129)
    with pytest.raises(ValueError):
        encode_fwd(np.arange(17), "lut4")


# ------------------------------------------------------------------ weight ordering

def test_table_3_90():
    assert NUM_WD == {128: (1, 0, 2), 256: (1, 0, 2), 512: (2, 2, 2), 1024: (4, 6, 6),
                      2048: (4, 6, 6)}
    assert [microblock_depth(128, m) for m in (0, 1)] == [16, 8]
    assert [microblock_depth(2048, m) for m in (2, 3, 5)] == [64, 64, 16]


def _random_orders(rng, n, max_elems=20000):
    out = []
    while len(out) < n:
        macs = int(rng.choice([128, 256, 512, 1024, 2048]))
        mb = int(rng.choice({128: [0, 1], 256: [1, 2, 3], 512: [2, 3], 1024: [2, 3, 4],
                             2048: [2, 3, 5]}[macs]))
        mbd = microblock_depth(macs, mb)
        dw = bool(rng.random() < 0.3)
        p = WeightOrder(macs, mb, dw, bool(rng.random() < 0.5), bool(rng.random() < 0.3) and not dw,
                        bool(rng.random() < 0.4), int(rng.integers(1, 70)), int(rng.integers(1, 150)),
                        mbd * int(rng.integers(1, 4)), int(rng.integers(1, 12)),
                        int(rng.integers(1, 12)), int(rng.integers(0, 2)), int(rng.integers(0, 2)),
                        int(rng.integers(1, 4)), int(rng.integers(1, 4)), bool(rng.random() < 0.7))
        try:
            p.check()
        except Unpredictable:
            continue
        if int(np.prod(p.shape)) > max_elems:
            continue
        out.append(p)
    return out


def test_vectorised_order_matches_reference():
    rng = np.random.default_rng(17)
    for p in _random_orders(rng, 60):
        ref = reference_order(p)
        idx = stream_indices(p)
        assert len(idx) == p.num_wd == len(ref)
        for r, v in zip(ref, idx):
            rr = np.array([-1 if e is None else np.ravel_multi_index(e, p.shape) for e in r])
            assert np.array_equal(rr, v), p
        # Every weight appears exactly once (OFM block depth a multiple of the microblock).
        allv = np.concatenate(idx)
        allv = np.sort(allv[allv >= 0])
        assert np.array_equal(allv, np.arange(int(np.prod(p.shape)))), p
        # Equal-length streams, whole FWD blocks.
        assert len({v.size for v in idx}) == 1
        assert p.depthwise or idx[0].size % p.fwd_block == 0


def test_order_inverse_and_fwd_merge():
    rng = np.random.default_rng(18)
    for p in _random_orders(rng, 30):
        W = rng.integers(-255, 256, p.shape).astype(np.int16)
        streams = streams_from_weights(p, W)
        assert np.array_equal(weights_from_streams(p, streams, check_padding=True), W)
        if p.depthwise:                                  # FWD does not support depthwise
            with pytest.raises(Unpredictable):
                fwd_indices(p)
            continue
        f = fwd_from_weights(p, W)
        assert np.array_equal(weights_from_fwd(p, f, check_padding=True), W)
        # FWD merge (TRM 3.9.2): block i of every stream in turn.
        blk = p.fwd_block
        expect = np.concatenate([s[i:i + blk] for i in range(0, streams[0].size, blk) for s in streams])
        assert np.array_equal(f, expect)


def test_order_known_small_case():
    # U85-256 u2x2 (8 OFM channels per microblock), depth-first 1x2 kernel, 10 IFM, 9 OFM:
    # per kernel position x (serpentine row 0 = ascending): IFM groups of 8, OFM 0..7, IFM.
    p = WeightOrder(256, 3, False, False, False, False, 9, 10, 16, 1, 2)
    (s,) = stream_indices(p)
    first = [np.unravel_index(i, p.shape) if i >= 0 else None for i in s[:20]]
    assert first[:8] == [(0, 0, 0, i) for i in range(8)]
    assert first[8:16] == [(1, 0, 0, i) for i in range(8)]
    # 64-channel IFM block: 8 groups of 8 for 8 OFM channels per position = 512 per position.
    assert s.size == 2 * 2 * 512          # 2 microblocks (9 OFM) x 2 positions
    assert np.unravel_index(s[512], p.shape) == (0, 0, 1, 0)


def test_num_wd_interleave():
    # U85-1024 u2x4 (16 OFM channels per microblock, 4 decoders): stream ws carries OFM
    # channels 4ws..4ws+3 of every microblock.
    p = WeightOrder(1024, 4, False, True, False, False, 32, 16, 32, 3, 3)
    for ws, s in enumerate(stream_indices(p)):
        o = np.unravel_index(s[s >= 0], p.shape)[0]
        assert set(np.unique(o % 16)) == set(range(4 * ws, 4 * ws + 4))


def test_order_asserts():
    # mb_i16only (U85-128 u1x1) needs 16-bit IFM and 1x1 kernel for convolutions...
    with pytest.raises(Unpredictable):
        stream_indices(WeightOrder(128, 0, False, False, False, False, 16, 16, 16, 3, 3))
    with pytest.raises(Unpredictable):
        stream_indices(WeightOrder(128, 0, False, False, False, False, 16, 16, 16, 1, 1))
    stream_indices(WeightOrder(128, 0, False, False, False, True, 16, 16, 16, 1, 1))
    # ...but not for depthwise (E-21; Vela uses it for 8-bit depthwise).
    stream_indices(WeightOrder(128, 0, True, False, False, False, 16, 1, 16, 3, 3))
    with pytest.raises(Unpredictable):
        stream_indices(WeightOrder(256, 2, False, False, False, False, 16, 16, 16, 1, 1,
                                   stride_x=4))


def test_decode_weight_tensor_errors():
    p = WeightOrder(512, 3, False, True, False, False, 20, 12, 32, 3, 3)
    rng = np.random.default_rng(20)
    W = rng.integers(-128, 128, p.shape)
    raw = [encode_swd(s) for s in streams_from_weights(p, W)]
    assert np.array_equal(decode_weight_tensor(p, raw), W)
    with pytest.raises(WeightStreamError, match="decoder 1"):
        decode_weight_tensor(p, [raw[0], raw[1][:40]])
    with pytest.raises(ValueError):
        decode_weight_tensor(p, raw[:1])
    f = encode_fwd(fwd_from_weights(p, W))
    assert np.array_equal(decode_weight_tensor(p, [f], fwd=True), W)
    with pytest.raises(WeightStreamError):
        decode_weight_tensor(p, [f[:64]], fwd=True)


def test_short_stream_rejected():
    p = WeightOrder(256, 3, False, False, False, False, 9, 10, 16, 1, 2)
    n = stream_indices(p)[0].size
    with pytest.raises(ValueError):
        weights_from_streams(p, [np.zeros(n - 1, np.int16)])
    bad = np.zeros(n, np.int16)
    bad[stream_indices(p)[0] < 0] = 1
    with pytest.raises(ValueError):
        weights_from_streams(p, [bad], check_padding=True)


# ------------------------------------------------------------------ Vela networks

def _vela_models():
    return {
        "conv3x3": lambda g: g.conv2d(g.input((1, 9, 9, 40)), 37, 3, 1, "SAME"),
        "conv3x3_deep": lambda g: g.conv2d(g.input((1, 6, 6, 128)), 72, 3, 1, "SAME"),
        "conv1x1": lambda g: g.conv2d(g.input((1, 6, 6, 80)), 70, 1, 1, "SAME"),
        "conv3x3s2": lambda g: g.conv2d(g.input((1, 12, 12, 16)), 24, 3, 2, "SAME"),
        "conv5x5s3": lambda g: g.conv2d(g.input((1, 16, 16, 8)), 16, 5, 3, "VALID"),
        "conv9x9": lambda g: g.conv2d(g.input((1, 20, 20, 4)), 8, 9, 1, "SAME"),
        "conv3x3d2": lambda g: g.conv2d(g.input((1, 12, 12, 8)), 16, 3, 1, "SAME", dilation=2),
        "conv2x5s12d21": lambda g: g.conv2d(g.input((1, 14, 18, 12)), 20, (2, 5), (1, 2), "VALID",
                                            dilation=(2, 1)),
        "dw3x3": lambda g: g.depthwise(g.input((1, 9, 9, 24)), 3, 1, "SAME"),
        "dw5x5s2": lambda g: g.depthwise(g.input((1, 13, 13, 40)), 5, 2, "SAME"),
        "fc": lambda g: g.fully_connected(g.input((1, 100)), 50),
        "conv3x3_i16": lambda g: g.conv2d(g.input((1, 8, 8, 24), dtype="int16"), 20, 3, 1, "SAME"),
        "conv1x1_i16": lambda g: g.conv2d(g.input((1, 6, 6, 48), dtype="int16"), 40, 1, 1, "SAME"),
        "dw3x3_i16": lambda g: g.depthwise(g.input((1, 8, 8, 20), dtype="int16"), 3, 1, "SAME"),
        "conv3x3_sparse": lambda g: g.conv2d(g.input((1, 8, 8, 64)), 32, 3, 1, "SAME"),
        "conv1x1_sparse": lambda g: g.conv2d(g.input((1, 6, 6, 256)), 24, 1, 1, "SAME"),
    }


VELA_MODELS = list(_vela_models())


def _tensor(g, suffix):
    return [t for t in g.tensors if t["name"].endswith(suffix)][0]


def build_vela_model(name, seed=11):
    """(tflite bytes, weight tensor [O, KH, KW, I] / [C, KH, KW, 1], graph)."""
    from tests import nets
    g = nets.Graph(seed)
    g.output(_vela_models()[name](g))
    t = _tensor(g, "_w")
    w = np.frombuffer(g.buffers[t["buffer"]], np.int8).reshape(t["shape"]).copy()
    if "sparse" in name:
        # 2 zeros in every group of 4 IFM channels: Vela then selects sparse_2_4.
        r = np.random.default_rng(7)
        q = w.reshape(-1, 4)
        for row in q:
            row[r.choice(4, 2, replace=False)] = 0
        g.buffers[t["buffer"]] = w.tobytes()
    if "dw" in name:
        w = w.transpose(3, 1, 2, 0)
    elif w.ndim == 2:
        w = w[:, None, None, :]
    return g.serialize(), w, g


def parse_ops(cmd_data: bytes):
    """The sticky NPU_SET state at each NPU_OP_CONV / NPU_OP_DEPTHWISE of a COP1 payload."""
    return kernel_op_states(cmd_data)


def order_from_state(kind, st, macs):
    """The WeightOrder of an operation, read field by field (TRM names) from its state."""
    F = st.field

    def ks(f):
        return F("NPU_SET_KERNEL_STRIDE", f)
    return WeightOrder(
        macs=macs, microblock=F("NPU_SET_ACC_FORMAT", "microblock"), depthwise=(kind == "NPU_OP_DEPTHWISE"),
        part_kernel_first=bool(ks("weight_order")), sparse=bool(F("NPU_SET_WEIGHT_FORMAT", "weight_sparsity")),
        ifm16bit=F("NPU_SET_IFM_PRECISION", "activation_precision") == 1,
        ofm_depth=F("NPU_SET_OFM_DEPTH_M1", "depth_m1") + 1, ifm_depth=F("NPU_SET_IFM_DEPTH_M1", "depth_m1") + 1,
        ofm_block_depth=F("NPU_SET_OFM_BLK_DEPTH_M1", "depth_m1") + 1,
        kernel_height=F("NPU_SET_KERNEL_HEIGHT_M1", "height_m1") + 1,
        kernel_width=F("NPU_SET_KERNEL_WIDTH_M1", "width_m1") + 1,
        dilation_x=ks("dilation_x"), dilation_y=ks("dilation_y"),
        stride_x=2 * ks("stride_x_msb") + ks("stride_x_lsb") + 1,
        stride_y=2 * ks("stride_y_msb") + ks("stride_y_lsb") + 1,
        d8x8=not ks("decomposition"))


WEIGHT_BASE = ("NPU_SET_WEIGHT_BASE", "NPU_SET_WEIGHT1_BASE", "NPU_SET_WEIGHT2_BASE", "NPU_SET_WEIGHT3_BASE")
WEIGHT_LENGTH = ("NPU_SET_WEIGHT_LENGTH", "NPU_SET_WEIGHT1_LENGTH", "NPU_SET_WEIGHT2_LENGTH",
                 "NPU_SET_WEIGHT3_LENGTH")


def stream_at(st, k: int) -> tuple:
    """(base, length) of weight stream k."""
    return st.field(WEIGHT_BASE[k], "addr"), st.field(WEIGHT_LENGTH[k], "length")


def compile_model(tfl, cfg, extra=()):
    from tests import nets
    # Sram_Only: no weight DMA, WEIGHT_BASE addresses region 0 = the npz weight_data.
    p = nets.compiled_bytes(tfl, "wtest", cfg, memory_mode="sram_only", extra_args=extra)
    z = np.load(p, allow_pickle=True)
    return z["cmd_data"].tobytes(), z["weight_data"].tobytes()


@pytest.mark.vela
@pytest.mark.parametrize("fwd", [True, False], ids=["default", "nofwd"])
@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("name", VELA_MODELS)
def test_vela_weights(name, cfg, fwd):
    tfl, wt, _ = build_vela_model(name)
    cmd, region0 = compile_model(tfl, cfg, () if fwd else ("--disable-fwd",))
    macs = int(cfg.rsplit("-", 1)[1])
    ops = parse_ops(cmd)
    assert ops
    for kind, st in ops:
        p = order_from_state(kind, st, macs)
        assert st.field("NPU_SET_WEIGHT_REGION", "region") == 0
        weight_format = st.field("NPU_SET_WEIGHT_FORMAT", "weight_format")
        if not fwd:
            assert weight_format == 0
        if weight_format == 1:                                # FWD: one stream
            base, n = stream_at(st, 0)
            vals = decode_fwd(region0[base:base + n], fwd_indices(p).size)
            W = weights_from_fwd(p, vals, check_padding=True)
            # Our FWD encoder on the same weights decodes to the same stream.
            mine = encode_fwd(fwd_from_weights(p, wt))
            assert np.array_equal(decode_fwd(mine, vals.size), vals)
        else:
            streams = []
            for k in range(p.num_wd):
                base, n = stream_at(st, k)
                assert n > 0 and n % 16 == 0
                data = region0[base:base + n]
                s = decode_swd(data)
                assert s.tolist() == mlw_decode(data)             # agree with Arm's decoder
                assert s.size >= stream_indices(p)[k].size
                streams.append(s)
            for k in range(p.num_wd, 4):                          # unused decoders: no stream
                assert stream_at(st, k)[1] == 0
            W = weights_from_streams(p, streams, check_padding=True)
            # Our encoder's streams decode to the same weights through Arm's decoder.
            for s in streams_from_weights(p, wt):
                assert mlw_decode(encode_swd(s)) == s.tolist()
        assert W.shape == wt.shape
        assert np.array_equal(W, wt), f"{name} {cfg}: weights differ"
        # The executor's one-call path gives the same tensor.
        raw = [region0[b:b + n] for b, n in (stream_at(st, k) for k in range(1 if weight_format == 1 else p.num_wd))]
        assert np.array_equal(decode_weight_tensor(p, raw, fwd=weight_format == 1), wt)


@pytest.mark.vela
@pytest.mark.parametrize("name", ["conv2x5s12d21", "dw5x5s2", "conv3x3_i16", "conv1x1_sparse"])
def test_from_registers(name):
    """WeightOrder.from_registers on tlm.ethos_u85.isa's register snapshots equals the hand parse."""
    from tlm.ethos_u85 import isa
    tfl, _, _ = build_vela_model(name)
    for cfg in ("ethos-u85-256", "ethos-u85-2048"):
        macs = int(cfg.rsplit("-", 1)[1])
        cmd, _ = compile_model(tfl, cfg)
        rf, snaps = isa.RegisterFile(), []
        for d in isa.decode(np.frombuffer(cmd, "<u4")[8:]):
            if d.cmd.name in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE"):
                snaps.append((d.cmd.name == "NPU_OP_DEPTHWISE", rf.snapshot()))
            elif d.cmd.name.startswith("NPU_SET"):
                rf.set(d)
        hand = parse_ops(cmd)
        assert len(snaps) == len(hand) > 0
        for (dw, snap), (kind, st) in zip(snaps, hand):
            assert WeightOrder.from_registers(snap, macs, dw) == order_from_state(kind, st, macs)


# ------------------------------------------------------------------ a large stream
# (decode speed is a benchmark figure, not asserted here: house rule, no timed unit tests)

def test_decode_large_stream():
    rng = np.random.default_rng(19)
    w = rng.integers(-128, 128, 100000)
    assert decode_swd(mlw_encode(w)).tolist() == w.tolist()
