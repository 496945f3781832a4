"""NPU_OP_DMA_START semantics (TRM 3.10.4) on the memory model, with numpy slicing as the
independent reference for 1D/2D/3D strided and indexed copies."""
import numpy as np
import pytest

from tlm.ethos_u85 import registers as R
from tlm.core.errors import BudgetExceeded, Unpredictable
from tlm.ethos_u85.memory import BusFault, Channel, DataPort, Interface, Memory, RegionRoute, Resp
from tlm.ethos_u85.ops.dma import dma_start

SRC_BASE, DST_BASE, IDX_BASE = 0x10_0000, 0x20_0000, 0x30_0000


class FakeRF:
    """Just enough of isa.RegisterFile: field(command, field) with zero defaults."""

    def __init__(self, **kw):
        self.v = {}
        for k, val in kw.items():
            cmd, fld = k.split("__")
            self.v[("NPU_SET_DMA0_" + cmd, fld)] = val

    def field(self, cmd, fld):
        return self.v.get((cmd, fld), 0)


def setup(seed):
    rng = np.random.default_rng(seed)
    m = Memory()
    src = rng.integers(0, 256, 1 << 14, dtype=np.uint8)
    m.write(SRC_BASE, src)
    bases = {1: SRC_BASE, 2: DST_BASE, 3: IDX_BASE}
    port = DataPort(m, lambda r: RegionRoute(bases.get(r, 0), Interface.ext, 0, 0, 0))
    return m, port, src, rng


def test_1d_copy():
    m, port, src, _ = setup(1)
    rf = FakeRF(SRC_REGION__region=1, DST_REGION__region=2, SRC__addr=5, DST__addr=3, LEN__addr=1000)
    assert dma_start(rf, port) == 1000
    assert (m.read_array(DST_BASE + 3, 1000) == src[5:1005]).all()
    assert m.read(DST_BASE + 2, 1) == b"\0" and m.read(DST_BASE + 1003, 1) == b"\0"
    chans = {t.channel for t in m.log}
    assert chans == {Channel.rd_mem2mem, Channel.wr_mem2mem}


def test_2d_strided_copy():
    m, port, src, _ = setup(2)
    # 7 lines of 10 bytes, source pitch 33, destination pitch 16
    rf = FakeRF(SRC_REGION__region=1, SRC_REGION__stride_mode=1, DST_REGION__region=2,
                LEN__addr=10, SIZE0__size=7, SRC_STRIDE0__addr=33, DST_STRIDE0__addr=16)
    assert dma_start(rf, port) == 70
    got = m.read_array(DST_BASE, 7 * 16).reshape(7, 16)
    want = src[:7 * 33].reshape(7, 33)[:, :10]
    assert (got[:, :10] == want).all() and (got[:, 10:] == 0).all()


def test_3d_copy_with_negative_stride1():
    m, port, src, _ = setup(3)
    # 3 planes x 4 lines x 8 bytes; source planes 256 apart, destination planes written backwards
    neg = (1 << 40) - 64                                   # -64 as a 40-bit field
    rf = FakeRF(SRC_REGION__region=1, SRC_REGION__stride_mode=2, DST_REGION__region=2,
                DST__addr=512, LEN__addr=8, SIZE0__size=4, SIZE1__size=3,
                SRC_STRIDE0__addr=20, SRC_STRIDE1__addr=256,
                DST_STRIDE0__addr=16, DST_STRIDE1__addr=neg)
    assert dma_start(rf, port) == 96
    for z in range(3):
        for y in range(4):
            got = m.read_array(DST_BASE + 512 - 64 * z + 16 * y, 8)
            assert (got == src[256 * z + 20 * y: 256 * z + 20 * y + 8]).all(), (z, y)


def test_1d_mode_ignores_size_and_stride1():
    m, port, src, _ = setup(4)
    rf = FakeRF(SRC_REGION__region=1, DST_REGION__region=2, LEN__addr=16, SIZE0__size=9,
                SIZE1__size=9, SRC_STRIDE1__addr=100, DST_STRIDE1__addr=100)
    assert dma_start(rf, port) == 16
    assert sum(t.length for t in m.log if t.write) == 16


@pytest.mark.parametrize("gather", [True, False])
def test_indexed_gather_and_scatter(gather):
    m, port, src, rng = setup(5)
    idx = np.array([3, -1, 0, 7, 2, 99], np.int32)        # -1 and 99 (> idx_max) are skipped
    m.write(IDX_BASE + 8, idx.astype("<i4").tobytes())
    kw = dict(SRC_REGION__region=1, SRC_REGION__stride_mode=1, DST_REGION__region=2,
              IDX_REGION__region=3, IDX__addr=8, IDX_MAX__idx_max=7, LEN__addr=12,
              SIZE0__size=len(idx), SRC_STRIDE0__addr=12, DST_STRIDE0__addr=12)
    kw["SRC_REGION__idx_mode" if gather else "DST_REGION__idx_mode"] = 1
    assert dma_start(FakeRF(**kw), port) == 12 * 4
    rows = src[:12 * 8].reshape(8, 12)
    got = m.read_array(DST_BASE, 12 * 8).reshape(8, 12)
    want = np.zeros((8, 12), np.uint8)
    for x, i in enumerate(idx):
        if 0 <= i <= 7:
            if gather:
                want[x] = rows[i]
            else:
                want[i] = rows[x]
    assert (got == want).all()
    assert sum(t.channel == Channel.rd_mem2mem_idx for t in m.log) == len(idx)


def test_internal_destination_writes_lut_ram():
    m, port, src, _ = setup(6)
    lut = np.zeros(2048, np.uint8)
    rf = FakeRF(SRC_REGION__region=1, DST_REGION__region_mode=1, DST__addr=1024, LEN__addr=512)
    dma_start(rf, port, lut=lut)
    assert (lut[1024:1536] == src[:512]).all() and not lut[:1024].any()
    assert not any(t.write for t in m.log)


@pytest.mark.parametrize("kw, what", [
    (dict(SRC_REGION__region_mode=1), "src_region_mode"),
    (dict(SRC_REGION__idx_mode=1, DST_REGION__idx_mode=1), "gather and scatter"),
    (dict(SRC_REGION__stride_mode=3), "stride_mode"),
    (dict(DST_REGION__region_mode=1, DST__addr=8, LEN__addr=16), "16-byte"),
    (dict(DST_REGION__region_mode=1, DST__addr=2040 & ~15, LEN__addr=32), "LUT RAM"),
])
def test_unpredictable_cases_raise_and_name_the_check(kw, what):
    m, port, _, _ = setup(7)
    with pytest.raises(Unpredictable, match=what):
        dma_start(FakeRF(**{"LEN__addr": 1, **kw}), port, lut=np.zeros(2048, np.uint8))
    assert not any(t.write for t in m.log)


def test_budget_cuts_huge_transfers_before_moving_data():
    m, port, _, _ = setup(8)
    with pytest.raises(BudgetExceeded):
        dma_start(FakeRF(LEN__addr=(1 << 40) - 1), port)
    with pytest.raises(BudgetExceeded):
        dma_start(FakeRF(SRC_REGION__stride_mode=2, LEN__addr=1, SIZE0__size=0xFFFF, SIZE1__size=0xFFFF), port)
    assert m.log == []


def test_budgets_come_from_the_policy():
    from tlm.ethos_u85.config import Policy
    m, port, _, _ = setup(10)
    rf = FakeRF(SRC_REGION__region=1, SRC_REGION__stride_mode=1, DST_REGION__region=2, LEN__addr=4,
                SIZE0__size=11, SRC_STRIDE0__addr=4, DST_STRIDE0__addr=4)
    with pytest.raises(BudgetExceeded, match="10 lines"):
        dma_start(rf, port, policy=Policy(dma_max_lines=10))
    with pytest.raises(BudgetExceeded, match="43 bytes"):
        dma_start(rf, port, policy=Policy(dma_max_bytes=43))
    idx = FakeRF(SRC_REGION__region=1, SRC_REGION__stride_mode=1, SRC_REGION__idx_mode=1, DST_REGION__region=2,
                 IDX_REGION__region=3, LEN__addr=4, SIZE0__size=11, IDX_MAX__idx_max=99)
    with pytest.raises(BudgetExceeded, match="indexed lines"):
        dma_start(idx, port, policy=Policy(dma_max_indexed_lines=10))
    assert m.log == []
    assert dma_start(rf, port, policy=Policy(dma_max_lines=11, dma_max_bytes=44)) == 44


def test_page_budget_counts_the_pages_a_strided_dma_writes_before_moving_data():
    """A DMA well inside the byte budget whose huge stride puts every line on its own 64 KiB
    page of the sparse memory (fuzz: 65,535 lines -> 4 GiB) is refused before anything moves."""
    from tlm.ethos_u85.config import Policy
    m, port, _, _ = setup(11)
    pages0 = m.page_count
    far = FakeRF(SRC_REGION__region=1, SRC_REGION__stride_mode=1, DST_REGION__region=2, LEN__addr=16,
                 SIZE0__size=300, SRC_STRIDE0__addr=16, DST_STRIDE0__addr=1 << 20)
    with pytest.raises(BudgetExceeded, match="300 memory pages"):
        dma_start(far, port, policy=Policy(dma_max_pages=299))
    assert m.log == [] and m.page_count == pages0
    assert dma_start(far, port, policy=Policy(dma_max_pages=300)) == 300 * 16
    # dense copies touch few pages: 4 MiB in 4096 lines is 64 (+1 unaligned) pages
    m, port, _, _ = setup(12)
    dense = FakeRF(SRC_REGION__region=1, SRC_REGION__stride_mode=1, DST_REGION__region=2, DST__addr=8,
                   LEN__addr=1024, SIZE0__size=4096, SRC_STRIDE0__addr=0, DST_STRIDE0__addr=1024)
    with pytest.raises(BudgetExceeded, match="65 memory pages"):
        dma_start(dense, port, policy=Policy(dma_max_pages=64))
    assert dma_start(dense, port, policy=Policy(dma_max_pages=65)) == 1 << 22


def test_page_budget_of_a_scatter_counts_the_indexed_destinations():
    from tlm.ethos_u85.config import Policy
    m, port, _, _ = setup(13)
    idx = np.array([0, 5, 5, -1, 1000, 7, 3], "<i4")          # -1 and 1000 (> idx_max) are skipped
    m.write(IDX_BASE, idx.tobytes())
    rf = FakeRF(SRC_REGION__region=1, SRC_REGION__stride_mode=1, DST_REGION__region=2, DST_REGION__idx_mode=1,
                IDX_REGION__region=3, IDX_MAX__idx_max=999, LEN__addr=8, SIZE0__size=len(idx),
                SRC_STRIDE0__addr=8, DST_STRIDE0__addr=1 << 16)
    log0 = len(m.log)
    with pytest.raises(BudgetExceeded, match="4 memory pages"):             # pages 0, 3, 5, 7
        dma_start(rf, port, policy=Policy(dma_max_pages=3))
    assert len(m.log) == log0                                               # not even an index read
    assert dma_start(rf, port, policy=Policy(dma_max_pages=4)) == 5 * 8


def test_page_count_matches_brute_force():
    from tlm.ethos_u85.ops.dma import page_count
    rng = np.random.default_rng(14)
    for _ in range(200):
        n, length = int(rng.integers(1, 40)), int(rng.integers(1, 200_000))
        starts = rng.integers(0, 1 << 22, n).astype(np.int64)
        want = set()
        for s in starts.tolist():
            want.update(range(s >> 16, ((s + length - 1) >> 16) + 1))
        assert page_count(starts, length) == len(want)


def test_bus_fault_on_write_stops_with_context():
    m, port, _, _ = setup(9)
    m.inject_fault(DST_BASE + 64, DST_BASE + 65, Resp.SLVERR, kind="w")
    rf = FakeRF(SRC_REGION__region=1, DST_REGION__region=2, LEN__addr=128)
    with pytest.raises(BusFault) as e:
        dma_start(rf, port)
    assert e.value.channel == Channel.wr_mem2mem and e.value.interface == Interface.ext


# ---- the same copies as whole command streams on the device ----------------------------
def _stream(*cmds):
    from tlm.ethos_u85 import isa
    words = []
    for name, fields in cmds:
        words += isa.encode(name, **fields)
    return words


def _run_stream(words, src):
    from tlm.ethos_u85.device import Device, StopKind
    d = Device("ethos-u85-256", settle=True)
    d.memory.write(SRC_BASE, src)
    for n, base in ((1, SRC_BASE), (2, DST_BASE), (3, IDX_BASE)):   # BASEP1..3 over APB
        assert d.apb_write(R.OFFSET[f"BASEP{n}_LO"], base) == 0
    d.load_stream(0x8000, words + _stream(("NPU_OP_STOP", dict(mask=0))))
    d.start()
    r = d.run()
    assert r.kind == StopKind.STOP and not r.error, r
    return d


@pytest.mark.parametrize("mode", [0, 1, 2])
def test_dma_only_stream_1d_2d_3d(mode):
    rng = np.random.default_rng(100 + mode)
    print("seed", 100 + mode)
    src = rng.integers(0, 256, 1 << 13, dtype=np.uint8)
    length, size0, size1 = 24, 5, 3
    sst0, sst1, dst0, dst1 = 40, 300, 32, 200
    words = _stream(
        ("NPU_SET_DMA0_SRC_REGION", dict(region=1, stride_mode=mode)),
        ("NPU_SET_DMA0_DST_REGION", dict(region=2)),
        ("NPU_SET_DMA0_SRC", dict(addr=16)), ("NPU_SET_DMA0_DST", dict(addr=8)),
        ("NPU_SET_DMA0_LEN", dict(addr=length)),
        ("NPU_SET_DMA0_SIZE0", dict(size=size0)), ("NPU_SET_DMA0_SIZE1", dict(size=size1)),
        ("NPU_SET_DMA0_SRC_STRIDE0", dict(addr=sst0)), ("NPU_SET_DMA0_SRC_STRIDE1", dict(addr=sst1)),
        ("NPU_SET_DMA0_DST_STRIDE0", dict(addr=dst0)), ("NPU_SET_DMA0_DST_STRIDE1", dict(addr=dst1)),
        ("NPU_OP_DMA_START", {}), ("NPU_OP_DMA_WAIT", dict(k=0)))
    d = _run_stream(words, src)
    planes = size1 if mode == 2 else 1
    lines = size0 if mode >= 1 else 1
    want = np.zeros(1 << 12, np.uint8)
    for z in range(planes):
        for y in range(lines):
            s = 16 + z * sst1 + y * sst0
            t = 8 + z * dst1 + y * dst0
            want[t:t + length] = src[s:s + length]
    assert (d.memory.read_array(DST_BASE, want.size) == want).all()
    assert d.op_counts["NPU_OP_DMA_START"] == 1


def test_dma_only_stream_indexed_gather_with_negative_skip():
    rng = np.random.default_rng(200)
    src = rng.integers(0, 256, 1 << 12, dtype=np.uint8)
    idx = np.array([[4, 1], [9, 0], [2, 3]], "<i4")                    # 3 planes x 2 lines
    words = _stream(
        ("NPU_SET_DMA0_SRC_REGION", dict(region=1, stride_mode=2, idx_mode=1)),
        ("NPU_SET_DMA0_DST_REGION", dict(region=2)),
        ("NPU_SET_DMA0_IDX_REGION", dict(region=3)), ("NPU_SET_DMA0_IDX", dict(addr=64)),
        ("NPU_SET_DMA0_IDX_MAX", dict(idx_max=8)),
        ("NPU_SET_DMA0_IDX_SKIP1", dict(addr=-16)),                 # planes step the index pointer back
        ("NPU_SET_DMA0_LEN", dict(addr=8)),
        ("NPU_SET_DMA0_SIZE0", dict(size=2)), ("NPU_SET_DMA0_SIZE1", dict(size=3)),
        ("NPU_SET_DMA0_SRC_STRIDE0", dict(addr=8)), ("NPU_SET_DMA0_SRC_STRIDE1", dict(addr=100)),
        ("NPU_SET_DMA0_DST_STRIDE0", dict(addr=8)), ("NPU_SET_DMA0_DST_STRIDE1", dict(addr=16)),
        ("NPU_OP_DMA_START", {}), ("NPU_OP_DMA_WAIT", dict(k=0)))
    from tlm.ethos_u85.device import Device
    # index words: plane z reads idx at 64 + 8z - 16z (skip applied after each plane of 2 reads)
    mem_idx = {}
    p = 64
    for z in range(3):
        for x in range(2):
            mem_idx[p] = int(idx[z, x])
            p += 4
        p -= 16
    d = Device("ethos-u85-256", settle=True)
    for a, v in mem_idx.items():
        d.memory.write(IDX_BASE + a, int(v).to_bytes(4, "little", signed=True))
    d.memory.write(SRC_BASE, src)
    for n, base in ((1, SRC_BASE), (2, DST_BASE), (3, IDX_BASE)):
        d.apb_write(R.OFFSET[f"BASEP{n}_LO"], base)
    d.load_stream(0x8000, words + _stream(("NPU_OP_STOP", dict(mask=0))))
    d.start()
    assert not d.run().error
    for z in range(3):
        for x in range(2):
            i = int(idx[z, x])
            got = d.memory.read_array(DST_BASE + 16 * z + 8 * x, 8)
            if i > 8:                                                   # above IDX_MAX: skipped
                assert not got.any()
            else:
                assert (got == src[100 * z + 8 * i: 100 * z + 8 * i + 8]).all(), (z, x)


# ---- the one DMA reference (tlm/ethos_u85/dma_reference.py) -----------------------------
def test_dma_reference_matches_numpy_slicing():
    """The pseudocode reference on a hand case (3 planes x 4 lines x 8 bytes, negative
    destination STRIDE1) against numpy slicing."""
    from tlm.ethos_u85.dma_reference import DmaParams, dma_copy
    m, _, src, _ = setup(7)
    p = DmaParams.of(1, 16, 2, 0x400, 8, "3d", 4, 3, src_stride0=32, src_stride1=256,
                     dst_stride0=8, dst_stride1=-64)
    dma_copy(m, p, {1: SRC_BASE, 2: DST_BASE})
    for z in range(3):
        got = m.read_array(DST_BASE + 0x400 - 64 * z, 32).reshape(4, 8)
        want = src[16 + 256 * z: 16 + 256 * z + 4 * 32].reshape(4, 32)[:, :8]
        assert (got == want).all(), z


@pytest.mark.parametrize("seed", range(6))
def test_dma_reference_equals_dma_start(seed):
    """dma_start (vectorised) and the literal pseudocode reference move the same bytes on
    random 1D/2D/3D, gather and scatter transfers (seed printed)."""
    from tlm.ethos_u85.dma_reference import DmaParams, dma_copy
    print("seed", seed)
    m, port, _, rng = setup(1000 + seed)
    m.write(IDX_BASE, rng.integers(-2, 12, 64).astype("<i4").tobytes())
    mode = int(rng.integers(0, 3))
    idx = int(rng.integers(0, 3))                      # 0 none, 1 gather, 2 scatter
    kw = dict(SRC_REGION__region=1, SRC_REGION__stride_mode=mode, DST_REGION__region=2,
              SRC__addr=int(rng.integers(0, 64)), DST__addr=int(rng.integers(0, 64)),
              LEN__addr=int(rng.integers(1, 40)), SIZE0__size=int(rng.integers(1, 5)),
              SIZE1__size=int(rng.integers(1, 4)), SRC_STRIDE0__addr=int(rng.integers(40, 80)),
              SRC_STRIDE1__addr=400, DST_STRIDE0__addr=int(rng.integers(40, 80)), DST_STRIDE1__addr=400,
              IDX_REGION__region=3, IDX_MAX__idx_max=9, IDX_SKIP1__addr=4)
    if idx:
        kw["SRC_REGION__idx_mode" if idx == 1 else "DST_REGION__idx_mode"] = 1
    rf = FakeRF(**kw)
    ref = Memory(log=False)
    ref.write(SRC_BASE, m.read(SRC_BASE, 1 << 14))
    ref.write(IDX_BASE, m.read(IDX_BASE, 256))
    dma_start(rf, port)
    p = DmaParams.from_snapshot(rf)
    assert p is not None
    dma_copy(ref, p, {1: SRC_BASE, 2: DST_BASE, 3: IDX_BASE})
    assert m.read(DST_BASE, 1 << 13) == ref.read(DST_BASE, 1 << 13)
