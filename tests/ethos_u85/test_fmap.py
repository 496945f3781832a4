"""tlm.ethos_u85.fmap: hand-computed addresses (TRM 2.1.1 formulas), tiling, OFM transpose/reverse,
vectorised path vs the literal pseudocode, gather/scatter through a byte accessor.

Random tests use a fixed default seed (reproducible); set TLM_TEST_SEED to explore others.
"""

import os
from types import SimpleNamespace

import numpy as np
import pytest

from tlm.ethos_u85.arith import ActType, Precision, Unpredictable
from tlm.ethos_u85.fmap import (
    AllowedPerms,
    FeatureMap,
    Format,
    Reverse,
    Storage,
    Transpose,
    block_addresses,
    check_ofm_write,
    contiguous_runs,
    element_address_in_region,
    element_addresses,
    ofm_block_addresses,
    read_element_ref,
    read_fmap,
    tile_select,
    write_element_ref,
    write_fmap,
    write_ofm_address_ref,
)

SEED = int(os.environ.get("TLM_TEST_SEED", "850131"))
TRANSPOSES = [Transpose.HWC, Transpose.WHC, Transpose.HCW, Transpose.WCH, Transpose.CHW, Transpose.CWH]


@pytest.fixture
def rng(request):
    seed = SEED + sum(map(ord, request.node.name))
    print(f"\n{request.node.name}: seed {seed} (TLM_TEST_SEED={SEED})")
    return np.random.default_rng(seed)


class ByteMem:
    """Backdoor byte store that logs every call (one per contiguous run)."""

    def __init__(self, size=1 << 20, fill=None):
        self.data = bytearray(size) if fill is None else bytearray(fill)
        self.log = []

    def read(self, addr, n):
        self.log.append(("r", addr, n))
        assert 0 <= addr and addr + n <= len(self.data)
        return bytes(self.data[addr:addr + n])

    def write(self, addr, data):
        self.log.append(("w", addr, len(data)))
        assert 0 <= addr and addr + len(data) <= len(self.data)
        self.data[addr:addr + len(data)] = data


def untiled(**kw):
    kw.setdefault("width0", 1 << 16)
    kw.setdefault("height0", 1 << 16)
    kw.setdefault("height1", 1 << 16)
    return FeatureMap(**kw)


# ---------------------------------------------------------------- hand-computed addresses
def test_nhwc_hand():
    # int8 [H=2, W=3, C=5] packed: stride_x = 5, stride_y = 15.  (1, 2, 4) -> 15 + 10 + 4
    fm = untiled(base=(1000, 0, 0, 0), stride_x=5, stride_y=15, precision=Precision.B8)
    assert int(element_addresses(fm, 1, 2, 4)) == 1029
    assert element_address_in_region(fm.base, 15, 5, 0, fm.width0, (fm.height0, fm.height1), Storage.TILE2X2,
                                     Precision.B8, Format.NHWC, 1, 2, 4) == 1029
    # int16: channel term is c*element_size (TRM 2.1.1 / E-07), not bare c
    fm = untiled(base=(1000, 0, 0, 0), stride_x=10, stride_y=30, precision=Precision.B16)
    assert int(element_addresses(fm, 1, 2, 4)) == 1000 + 30 + 20 + 8
    # channels of one 16-bit pixel do not overlap
    a = block_addresses(fm, [0], [0], range(5)).ravel()
    assert a.tolist() == [1000, 1002, 1004, 1006, 1008]
    # int32 / int64
    fm = untiled(base=(64, 0, 0, 0), stride_x=12, stride_y=36, precision=Precision.B32)
    assert int(element_addresses(fm, 2, 1, 2)) == 64 + 72 + 12 + 8
    fm = untiled(base=(64, 0, 0, 0), stride_x=24, stride_y=72, precision=Precision.B64)
    assert int(element_addresses(fm, 2, 1, 2)) == 64 + 144 + 24 + 16


def test_nhcwb16_hand():
    # int8 W=3, C=40 (3 bricks): stride_c = 3*16 = 48, stride_y = 3*48 = 144.
    # (1, 2, 33): 144 + (33>>4)*48 + (16*2 + 1) = 144 + 96 + 33 = 273
    fm = untiled(base=(0, 0, 0, 0), stride_c=48, stride_y=144, stride_x=12345, fmt=Format.NHCWB16)
    assert int(element_addresses(fm, 1, 2, 33)) == 273
    # int16: (16*x + c%16)*2, brick = W*16*2
    fm = untiled(base=(512, 0, 0, 0), stride_c=96, stride_y=288, fmt=Format.NHCWB16, precision=Precision.B16)
    assert int(element_addresses(fm, 1, 2, 33)) == 512 + 288 + 2 * 96 + (32 + 1) * 2
    # the brick layout: x-major within a brick, 16 channels contiguous
    a = block_addresses(fm, [0], range(3), range(16)).reshape(-1)
    assert (np.diff(a) == 2).all() and a[0] == 512


def test_tile2x2_hand():
    # width0 = 2, HEIGHT0 = 3 (left column split), HEIGHT1 = 1 (right column split)
    base = (0x1000, 0x2000, 0x3000, 0x4000)
    fm = FeatureMap(base=base, stride_x=1, stride_y=100, width0=2, height0=3, height1=1)
    expect = {  # (y, x) -> (tile, y in tile, x in tile)
        (0, 0): (0, 0, 0), (2, 1): (0, 2, 1), (3, 0): (2, 0, 0), (5, 1): (2, 2, 1),
        (0, 2): (1, 0, 0), (0, 5): (1, 0, 3), (1, 2): (3, 0, 0), (4, 3): (3, 3, 1),
    }
    for (y, x), (t, ty, tx) in expect.items():
        tile, yy, xx = tile_select(fm, y, x)
        assert (int(tile), int(yy), int(xx)) == (t, ty, tx)
        assert int(element_addresses(fm, y, x, 0)) == base[t] + 100 * ty + tx


def test_tile3x1_literal_e08():
    # E-08: HEIGHT1 acts as the absolute first row of tile 2 (implemented as the TRM code says)
    base = (0x100, 0x200, 0x300, 0x999999)
    fm = FeatureMap(base=base, storage=Storage.TILE3X1, stride_x=1, stride_y=16, width0=1, height0=2, height1=5)
    rows = {0: (0, 0), 1: (0, 1), 2: (1, 0), 4: (1, 2), 5: (2, 0), 9: (2, 4)}
    for y, (t, ty) in rows.items():
        for x in (0, 3, 7):                      # x is never split in 3x1 (width0 ignored)
            assert int(element_addresses(fm, y, x, 0)) == base[t] + 16 * ty + x
            assert element_address_in_region(base, 16, 1, 0, 1, (2, 5), Storage.TILE3X1, Precision.B8,
                                             Format.NHWC, y, x, 0) == base[t] + 16 * ty + x


def test_untiled_vela_style():
    # Vela: tile2x2, HEIGHT1 = HEIGHT0, all bases equal, WIDTH0 = width
    fm = FeatureMap(base=(64,) * 4, stride_x=3, stride_y=12, width0=4, height0=5, height1=5)
    a = block_addresses(fm, range(5), range(4), range(3))
    assert a.ravel().tolist() == list(range(64, 64 + 60))


# ---------------------------------------------------------------- vectorised vs literal
def random_fm(rng, storage=None):
    prec = int(rng.integers(0, 4))
    es = 1 << prec
    fmt = int(rng.integers(0, 2))
    storage = int(rng.integers(0, 2)) if storage is None else storage
    H, W, C = (int(v) for v in rng.integers(1, 9, 3))
    C = int(rng.integers(1, 40))
    if fmt == Format.NHWC:
        sx = es * (C + int(rng.integers(0, 3)))
        sy = sx * (W + int(rng.integers(0, 2)))
        sc = int(rng.integers(0, 999))                     # ignored for NHWC
        base = tuple(es * int(v) for v in rng.integers(0, 4096, 4))
    else:
        sc = 16 * es * (W + int(rng.integers(0, 2)))
        sy = sc * ((C + 15) // 16 + int(rng.integers(0, 2)))
        sx = int(rng.integers(0, 999))                     # ignored for NHCWB16
        base = tuple(16 * int(v) for v in rng.integers(0, 4096, 4))
    return FeatureMap(base=base, stride_x=sx, stride_y=sy, stride_c=sc, precision=prec, fmt=fmt,
                      storage=storage, width0=int(rng.integers(1, W + 2)), height0=int(rng.integers(1, H + 2)),
                      height1=int(rng.integers(1, H + 3)), act_type=int(rng.integers(0, 2))), (H, W, C)


def test_addresses_vectorised_matches_literal(rng):
    for _ in range(300):
        fm, (H, W, C) = random_fm(rng)
        got = block_addresses(fm, range(H), range(W), range(C))
        exp = [[[element_address_in_region(fm.base, fm.stride_y, fm.stride_x, fm.stride_c, fm.width0,
                                           (fm.height0, fm.height1), fm.storage, fm.precision, fm.fmt, y, x, c)
                 for c in range(C)] for x in range(W)] for y in range(H)]
        assert got.tolist() == exp, fm
        # arbitrary (non-range) index vectors, e.g. upscale y>>1 or broadcast index 0
        ys = rng.integers(0, H, 5)
        assert block_addresses(fm, ys, [0], [0]).ravel().tolist() == [exp[int(y)][0][0] for y in ys]


def test_alignment_asserts():
    with pytest.raises(Unpredictable):      # NHCWB16 base must be 16-byte aligned
        element_addresses(untiled(base=(8, 0, 0, 0), stride_c=16, stride_y=32, fmt=Format.NHCWB16), 0, 0, 0)
    with pytest.raises(Unpredictable):      # NHCWB16 stride_c multiple of 16*element_size
        element_addresses(untiled(base=(0,) * 4, stride_c=16, stride_y=64, fmt=Format.NHCWB16,
                                  precision=Precision.B16), 0, 0, 0)
    with pytest.raises(Unpredictable):      # NHWC stride multiple of element size
        element_addresses(untiled(base=(0,) * 4, stride_x=3, stride_y=12, precision=Precision.B16), 0, 0, 0)
    with pytest.raises(Unpredictable):      # NHWC base multiple of element size (only the tile used)
        element_addresses(FeatureMap(base=(0, 2, 0, 0), stride_x=4, stride_y=64, width0=1, height0=9, height1=9,
                                     precision=Precision.B32), 0, 1, 0)
    # tile 1's misaligned base does not matter when only tile 0 is accessed
    element_addresses(FeatureMap(base=(0, 2, 0, 0), stride_x=4, stride_y=64, width0=4, height0=9, height1=9,
                                 precision=Precision.B32), 0, 1, 0)
    for st in (Storage.NONE, Storage.CHAINED):
        with pytest.raises(Unpredictable):
            element_addresses(untiled(storage=st, stride_x=1, stride_y=1), 0, 0, 0)
        with pytest.raises(Unpredictable):
            element_address_in_region((0,) * 4, 1, 1, 0, 1, (1, 1), st, Precision.B8, Format.NHWC, 0, 0, 0)


# ---------------------------------------------------------------- OFM transpose / reverse
def ofm_fm(H, W, C, transpose=Transpose.HWC, reverse=Reverse.NONE, prec=Precision.B8, base=0):
    """NHWC OFM packed in the *memory* (post-transpose) axis order."""
    es = 1 << prec
    dims = {"H": H, "W": W, "C": C}
    name = Transpose(transpose).name                  # memory axis order, e.g. "CHW"
    mh, mw, mc = (dims[ch] for ch in name)
    return FeatureMap(base=(base,) * 4, stride_x=mc * es, stride_y=mw * mc * es, precision=prec,
                      act_type=ActType.SIGNED, width0=mw, height0=mh, height1=mh, transpose=transpose,
                      reverse=reverse, height=H, width=W, depth=C, blk_height=H, blk_width=W, blk_depth=C)


@pytest.mark.parametrize("transpose", TRANSPOSES)
def test_transpose_memory_layout(transpose):
    H, W, C = 3, 4, 5
    vals = np.arange(H * W * C).reshape(H, W, C)
    fm = ofm_fm(H, W, C, transpose, prec=Precision.B16)
    mem = ByteMem(4096)
    write_fmap(mem, fm, range(H), range(W), range(C), vals)
    perm = {"H": 0, "W": 1, "C": 2}
    order = tuple(perm[ch] for ch in Transpose(transpose).name)
    expect = np.transpose(vals, order).ravel()         # e.g. CHW -> NCHW memory image
    got = np.frombuffer(bytes(mem.data[:2 * vals.size]), dtype="<i2")
    assert got.tolist() == expect.tolist()
    assert len(mem.log) == 1                          # fully contiguous: one run
    # literal write_ofm address path agrees element by element
    addrs = ofm_block_addresses(fm, range(H), range(W), range(C))
    for y in range(H):
        for x in range(W):
            for c in range(C):
                assert write_ofm_address_ref(fm, y, x, c) == addrs[y, x, c]


@pytest.mark.parametrize("reverse,axis", [(Reverse.H, 0), (Reverse.W, 1), (Reverse.C, 2)])
def test_reverse_memory_layout(reverse, axis):
    H, W, C = 3, 4, 5
    vals = np.arange(H * W * C).reshape(H, W, C) - 30
    fm = ofm_fm(H, W, C, reverse=reverse)
    mem = ByteMem(4096)
    write_fmap(mem, fm, range(H), range(W), range(C), vals)
    got = np.frombuffer(bytes(mem.data[:vals.size]), dtype=np.int8)
    assert got.tolist() == np.flip(vals, axis).ravel().tolist()
    back = read_fmap(mem, ofm_fm(H, W, C), range(H), range(W), range(C))
    assert (back == np.flip(vals, axis)).all()


def test_ofm_vectorised_matches_literal(rng):
    for _ in range(150):
        H, W, C = (int(v) for v in rng.integers(1, 7, 3))
        t = TRANSPOSES[int(rng.integers(0, len(TRANSPOSES)))]
        r = Reverse(int(rng.integers(0, 4))) if t == Transpose.HWC else Reverse.NONE
        fmt = int(rng.integers(0, 2))
        prec = int(rng.integers(0, 3))
        es = 1 << prec
        # tiles in post-transpose axes, random but aligned
        base = tuple((16 * es) * int(v) for v in rng.integers(0, 512, 4))
        if fmt == Format.NHWC:
            sx, sy, sc = es * 8, es * 8 * 8, 0
        else:
            sx, sc, sy = 0, 16 * es * 8, 16 * es * 8 * 2
        fm = FeatureMap(base=base, stride_x=sx, stride_y=sy, stride_c=sc, fmt=fmt, precision=prec,
                        width0=int(rng.integers(1, 7)), height0=int(rng.integers(1, 7)),
                        height1=int(rng.integers(1, 7)),
                        transpose=t, reverse=r, height=H, width=W, depth=C)
        got = ofm_block_addresses(fm, range(H), range(W), range(C))
        exp = [[[write_ofm_address_ref(fm, y, x, c) for c in range(C)] for x in range(W)] for y in range(H)]
        assert got.tolist() == exp, fm


def test_write_ofm_asserts():
    fm = ofm_fm(2, 2, 2, Transpose.WHC)
    with pytest.raises(Unpredictable):          # WHC needs allowed_perms_all
        check_ofm_write(fm, AllowedPerms.RTRANS)
    check_ofm_write(fm, AllowedPerms.ALL)
    check_ofm_write(ofm_fm(2, 2, 2, Transpose.CHW), AllowedPerms.RTRANS)
    with pytest.raises(Unpredictable):          # transpose not supported for 64-bit output
        check_ofm_write(ofm_fm(2, 2, 2, Transpose.HCW, prec=Precision.B64))
    with pytest.raises(Unpredictable):          # reverse not with transpose
        check_ofm_write(ofm_fm(2, 2, 2, Transpose.HCW, Reverse.H))
    with pytest.raises(Unpredictable):          # reverse needs allowed_perms_all
        check_ofm_write(ofm_fm(2, 2, 2, reverse=Reverse.W), AllowedPerms.RTRANS)
    with pytest.raises(Unpredictable):          # WHC block limits: blk_width <= 128
        check_ofm_write(ofm_fm(2, 200, 2, Transpose.WHC))
    nhcwb = FeatureMap(base=(0,) * 4, stride_c=16, stride_y=64, fmt=Format.NHCWB16, transpose=Transpose.HCW,
                       height=2, width=4, depth=4, blk_height=2, blk_width=4, blk_depth=4)
    with pytest.raises(Unpredictable):          # NHCWB16 + HCW needs blk_width % 16 == 0
        check_ofm_write(nhcwb)
    # reverse C with depth not a multiple of the microblock depth: NHWC and blk_depth <= 16 only
    rc = FeatureMap(base=(0,) * 4, stride_c=16 * 2, stride_y=64, fmt=Format.NHCWB16, reverse=Reverse.C,
                    height=1, width=2, depth=20, blk_height=1, blk_width=2, blk_depth=20)
    with pytest.raises(Unpredictable):
        check_ofm_write(rc, microblock_depth=16)
    with pytest.raises(Unpredictable):
        write_ofm_address_ref(rc, 0, 0, 0, microblock_depth=16)
    with pytest.raises(Unpredictable):          # coordinate outside the OFM
        ofm_block_addresses(ofm_fm(2, 2, 2), [2], [0], [0])
    with pytest.raises(Unpredictable):
        write_ofm_address_ref(ofm_fm(2, 2, 2), 0, 0, 2)


# ---------------------------------------------------------------- gather / scatter
@pytest.mark.parametrize("prec", [Precision.B8, Precision.B16, Precision.B32, Precision.B64])
@pytest.mark.parametrize("act_type", [ActType.UNSIGNED, ActType.SIGNED])
def test_read_values_and_sign(rng, prec, act_type):
    fm, (H, W, C) = random_fm(rng)
    fm = FeatureMap(**{**fm.__dict__, "precision": prec, "act_type": act_type,
                       "stride_x": fm.stride_x * 8, "stride_y": fm.stride_y * 8, "stride_c": fm.stride_c * 8,
                       "base": tuple(b * 8 for b in fm.base)})
    mem = ByteMem(fill=rng.integers(0, 256, 1 << 20, dtype=np.uint8).tobytes())
    got = read_fmap(mem, fm, range(H), range(W), range(C))
    exp = [[[read_element_ref(mem, fm, y, x, c) for c in range(C)] for x in range(W)] for y in range(H)]
    assert got.tolist() == exp
    if act_type == ActType.UNSIGNED:
        assert got.min() >= 0
    bits = 8 << prec
    flat = np.array(exp, dtype=object).ravel()
    assert all((-(1 << (bits - 1)) <= v < (1 << (bits - 1))) if act_type else (0 <= v < (1 << bits)) for v in flat)


def test_read_one_call_per_run_and_dedup():
    # NHWC int8 [2, 3, 4] with a 2-byte gap between pixels: 6 runs of 4 bytes
    fm = untiled(base=(100, 0, 0, 0), stride_x=6, stride_y=18)
    mem = ByteMem(4096)
    read_fmap(mem, fm, range(2), range(3), range(4))
    assert mem.log == [("r", 100 + 6 * i, 4) for i in range(6)]
    # packed: a single run
    mem.log.clear()
    read_fmap(mem, untiled(base=(100, 0, 0, 0), stride_x=4, stride_y=12), range(2), range(3), range(4))
    assert mem.log == [("r", 100, 24)]
    # broadcast indices read each byte once
    mem.log.clear()
    v = read_fmap(mem, untiled(base=(100, 0, 0, 0), stride_x=4, stride_y=12), [0, 0, 0], [1, 1], range(4))
    assert v.shape == (3, 2, 4) and mem.log == [("r", 104, 4)]
    # callable accessor instead of an object
    calls = []
    read_fmap(lambda a, n: calls.append((a, n)) or bytes(n), fm, [1], [2], range(4))
    assert calls == [(100 + 18 + 12, 4)]


def test_read_zero_point():
    mem = ByteMem(64)
    mem.data[0:4] = bytes([0, 5, 200, 255])
    fm = untiled(base=(0,) * 4, stride_x=4, stride_y=4, act_type=ActType.UNSIGNED, zero_point=128)
    assert read_fmap(mem, fm, [0], [0], range(4), subtract_zero_point=True).ravel().tolist() == [-128, -123, 72, 127]
    fm = untiled(base=(0,) * 4, stride_x=4, stride_y=4, act_type=ActType.SIGNED, zero_point=0xFFF6)   # -10
    assert read_fmap(mem, fm, [0], [0], range(4), subtract_zero_point=True).ravel().tolist() == [10, 15, -46, 9]
    assert read_element_ref(mem, fm, 0, 0, 2, subtract_zero_point=True) == -46
    fm = untiled(base=(0,) * 4, stride_x=4, stride_y=4, act_type=ActType.SIGNED, zero_point=300)
    with pytest.raises(Unpredictable):
        read_fmap(mem, fm, [0], [0], [0], subtract_zero_point=True)


@pytest.mark.parametrize("prec", [Precision.B8, Precision.B16, Precision.B32, Precision.B64])
def test_write_truncates_and_matches_literal(rng, prec):
    for _ in range(20):
        fm, (H, W, C) = random_fm(rng)
        fm = FeatureMap(**{**fm.__dict__, "precision": prec, "stride_x": fm.stride_x * 8,
                           "stride_y": fm.stride_y * 8, "stride_c": fm.stride_c * 8,
                           "base": tuple(b * 8 for b in fm.base), "height": H, "width": W, "depth": C})
        vals = rng.integers(-2**62, 2**62, (H, W, C))
        m1, m2 = ByteMem(), ByteMem()
        write_fmap(m1, fm, range(H), range(W), range(C), vals)
        for y in range(H):
            for x in range(W):
                for c in range(C):
                    write_element_ref(m2, fm, y, x, c, int(vals[y, x, c]))
        assert m1.data == m2.data
        back = read_fmap(m1, fm, range(H), range(W), range(C))
        bits = 8 << prec
        if fm.act_type == ActType.SIGNED or bits < 64:
            exp = [[[((int(v) + (1 << (bits - 1))) % (1 << bits)) - (1 << (bits - 1)) if fm.act_type else
                     int(v) % (1 << bits) for v in row] for row in plane] for plane in vals]
            # NB: overlapping tiles may alias; compare only when every element address is unique
            a = block_addresses(fm, range(H), range(W), range(C)).ravel()
            if np.unique(a).size == a.size:
                assert back.tolist() == exp


def test_write_overlapping_addresses_last_wins():
    # stride_x = 0: all x of a row alias, element order (y, x, c) means the last x wins
    fm = FeatureMap(base=(0,) * 4, stride_x=0, stride_y=4, width0=99, height0=99, height1=99,
                    act_type=ActType.SIGNED, height=2, width=3, depth=4)
    vals = np.arange(24).reshape(2, 3, 4)
    mem = ByteMem(64)
    write_fmap(mem, fm, range(2), range(3), range(4), vals)
    assert list(mem.data[:8]) == vals[:, 2, :].ravel().tolist()
    mem2 = ByteMem(64)
    for y in range(2):
        for x in range(3):
            for c in range(4):
                write_element_ref(mem2, fm, y, x, c, int(vals[y, x, c]))
    assert mem.data == mem2.data


def test_write_storage_none_and_chained():
    mem = ByteMem(64)
    write_fmap(mem, untiled(storage=Storage.NONE), [0], [0], [0], [1])
    assert mem.log == []
    assert write_ofm_address_ref(untiled(storage=Storage.NONE), 0, 0, 0) is None
    with pytest.raises(ValueError):
        write_fmap(mem, untiled(storage=Storage.CHAINED), [0], [0], [0], [1])
    with pytest.raises(ValueError):
        read_fmap(mem, untiled(storage=Storage.CHAINED), [0], [0], [0])


def test_contiguous_runs():
    assert contiguous_runs([5, 6, 7, 9, 10, 3]) == [(0, 3), (3, 5), (5, 6)]
    assert contiguous_runs([]) == []


# ---------------------------------------------------------------- from_registers
REGS = {
    "NPU_SET_OFM_BASE0": {"addr": 0x100}, "NPU_SET_OFM_BASE1": {"addr": 0x200},
    "NPU_SET_OFM_BASE2": {"addr": 0x300}, "NPU_SET_OFM_BASE3": {"addr": 0x400},
    "NPU_SET_OFM_STRIDE_X": {"addr": 2}, "NPU_SET_OFM_STRIDE_Y": {"addr": 64}, "NPU_SET_OFM_STRIDE_C": {"addr": 512},
    "NPU_SET_OFM_WIDTH0_M1": {"width_m1": 7}, "NPU_SET_OFM_HEIGHT0_M1": {"height_m1": 3},
    "NPU_SET_OFM_HEIGHT1_M1": {"height_m1": 5},
    "NPU_SET_OFM_PRECISION": {"activation_type": 1, "activation_precision": 1, "activation_format": 1,
                              "scale_mode": 1, "activation_reverse": 0, "activation_transpose": 2,
                              "activation_storage": 1},
    "NPU_SET_OFM_REGION": {"region": 3}, "NPU_SET_OFM_ZERO_POINT": {"zero_point": 0xFF80},
    "NPU_SET_OFM_HEIGHT_M1": {"height_m1": 9}, "NPU_SET_OFM_WIDTH_M1": {"width_m1": 15},
    "NPU_SET_OFM_DEPTH_M1": {"depth_m1": 31}, "NPU_SET_OFM_BLK_HEIGHT_M1": {"height_m1": 1},
    "NPU_SET_OFM_BLK_WIDTH_M1": {"width_m1": 15}, "NPU_SET_OFM_BLK_DEPTH_M1": {"depth_m1": 15},
}


def test_from_registers_forms():
    basep = [0, 0, 0, 0x10_0000_0000, 0, 0, 0, 0]
    expect = FeatureMap(base=(0x10_0000_0100, 0x10_0000_0200, 0x10_0000_0300, 0x10_0000_0400), stride_x=2,
                        stride_y=64, stride_c=512, width0=8, height0=4, height1=6, precision=1, act_type=1, fmt=1,
                        storage=1, region=3, zero_point=0xFF80, transpose=2, reverse=0, scale_mode=1, height=10,
                        width=16, depth=32, blk_height=2, blk_width=16, blk_depth=16)
    assert FeatureMap.from_registers(REGS, "OFM", basep=basep) == expect
    # attribute-style entries
    ns = {k: SimpleNamespace(**v) for k, v in REGS.items()}
    assert FeatureMap.from_registers(ns, "OFM", basep=basep) == expect
    # flat "CMD.field" keys, and an object with attribute access to commands
    flat = {f"{k}.{f}": v for k, d in REGS.items() for f, v in d.items()}
    assert FeatureMap.from_registers(flat, "OFM", basep=basep) == expect
    assert FeatureMap.from_registers(SimpleNamespace(**ns), "OFM", basep=basep) == expect
    # without basep: raw region offsets; missing registers read as reset value 0
    fm = FeatureMap.from_registers(REGS, "OFM")
    assert fm.base == (0x100, 0x200, 0x300, 0x400)
    ifm = FeatureMap.from_registers({"NPU_SET_IFM_DEPTH_M1": {"depth_m1": 4}}, "IFM")
    assert (ifm.base, ifm.width0, ifm.height0, ifm.depth, ifm.precision, ifm.storage) == ((0,) * 4, 1, 1, 5, 0, 0)
    # chained storage: region is a FIFO number, BASEP not added
    regs = {"NPU_SET_IFM2_PRECISION": {"activation_storage": 2}, "NPU_SET_IFM2_REGION": {"region": 1},
            "NPU_SET_IFM2_BASE0": {"addr": 16}}
    assert FeatureMap.from_registers(regs, "IFM2", basep=[99] * 8).base == (16, 0, 0, 0)
    with pytest.raises(ValueError):
        FeatureMap.from_registers(REGS, "XYZ")


def test_from_registers_addresses_end_to_end():
    regs = {**REGS, "NPU_SET_OFM_PRECISION": {**REGS["NPU_SET_OFM_PRECISION"], "activation_storage": 0}}
    fm = FeatureMap.from_registers(regs, "OFM", basep=[0, 0, 0, 0x10_0000_0000, 0, 0, 0, 0])
    assert fm.element_size == 2 and fm.bits == 16 and fm.storage == Storage.TILE2X2
    # OFM (y=0, x=3, c=17) with HCW transpose -> memory (y=0, x=17, c=3); x >= WIDTH0(8) -> tile 1
    # tile 1: x = 9, y = 0 (< HEIGHT1 = 6): NHCWB16 addr = BASE1 + (3>>4)*512 + (16*9 + 3)*2
    a = ofm_block_addresses(fm, [0], [3], [17])
    assert a.shape == (1, 1, 1) and int(a[0, 0, 0]) == 0x10_0000_0200 + (16 * 9 + 3) * 2
    # the same register set with tile3x1: x is not split, y = 0 is in tile 0
    fm3 = FeatureMap.from_registers(REGS, "OFM", basep=[0, 0, 0, 0x10_0000_0000, 0, 0, 0, 0])
    assert int(ofm_block_addresses(fm3, [0], [3], [17])[0, 0, 0]) == 0x10_0000_0100 + (16 * 17 + 3) * 2


def test_from_registers_with_isa_register_file():
    """Integration with the ISA RegisterFile contract (rf.set(decoded), rf[name] -> fields)."""
    from tlm.ethos_u85 import isa
    rf = isa.RegisterFile()
    for name, fields in REGS.items():
        if name.startswith("NPU_SET_OFM_BASE") or name.startswith("NPU_SET_OFM_STRIDE"):
            fields = {"addr": fields["addr"]}
        rf.set(isa.decode_word(isa.encode(name, **fields), 0))
    expect = FeatureMap.from_registers(REGS, "OFM", basep=[0, 0, 0, 1 << 32, 0, 0, 0, 0])
    assert FeatureMap.from_registers(rf, "OFM", basep=[0, 0, 0, 1 << 32, 0, 0, 0, 0]) == expect
    assert FeatureMap.from_registers(rf.snapshot(), "OFM", basep=[0, 0, 0, 1 << 32, 0, 0, 0, 0]) == expect
