"""The TLM's fast paths against their reference implementations.

The fast paths (tlm.ethos_u85.fmap span/mask gather-scatter, tlm.ethos_u85.memory batched DataPort runs and
TxnBatch, tlm.ethos_u85.pmu summary counting, tlm.ethos_u85.arith int64/blocked rescale, the device's decode and
route caches) must be invisible: bit-identical results, the same AXI transaction log
(Transaction for Transaction, in order), the same model cycle count and PMU state.

* Whole networks (the MobileNetV2 bench net among them) run twice - fast, and with
  ``run_model(..., reference_paths=True)`` (the straightforward sort-based
  gather/scatter, one ``DataPort.read``/``write`` and one ``Memory.access`` per run) - and
  must agree in outputs, transaction log, cycles, PMU totals and PMU counters; the counters
  are also checked against values computed directly from the log.
* Randomised unit checks: fmap blocks of every layout (tiles, formats, precisions,
  transposes, reverse, aliasing, sparse and unaligned addresses), DataPort runs with striping,
  wrap at 2**40, faults and listeners, PMU counting of batches, arith rescale, TxnBatch memos,
  and the conv/depthwise fused epilogue (tlm.ethos_u85.ops.common.fused_epilogue, int64 and float64
  forms) against write_accumulator's step-by-step arithmetic.  (The elementwise result
  tables and the vectorised SWD decoder are checked in test_ops_elementwise.py and
  test_weights.py.)

Random tests use a fixed default seed (reproducible); set TLM_TEST_SEED to explore others.
No timing is asserted anywhere.
"""

import os

import numpy as np
import pytest

from tests.support import require

from tlm.ethos_u85 import arith, fmap, memory, runner
from tlm.ethos_u85 import registers as R
from tlm.ethos_u85.arith import Precision, Unpredictable
from tlm.ethos_u85.fmap import FeatureMap, Format, Reverse, Storage, Transpose
from tlm.ethos_u85.memory import (ADDR_MASK, BusFault, Channel, DataPort, Interface, Memory, RegionRoute, Transaction,
                                  TxnBatch)
from tlm.ethos_u85.pmu import Batch, Pmu, axi_family, beats

SEED = int(os.environ.get("TLM_TEST_SEED", "20261122"))
EV = R.PMU_EVENT_BY_NAME
OFF = {r.ident: r.offset for r in R.REGISTERS}


@pytest.fixture
def rng(request):
    seed = SEED + sum(map(ord, request.node.name))
    print(f"\n{request.node.name}: seed {seed} (TLM_TEST_SEED={SEED})")
    return np.random.default_rng(seed)


# ================================================================================= networks
# (model, config, hash pins): the bench network, plus small nets over every op kind, int16,
# transposes (fmap array path), resize, and 4-port SRAM / 2-port EXT striping.
HASH_PINS = dict(CFGSRAMHASH0=0x0020212F00, CFGSRAMHASH1=0x00_0400_0540, CFGEXTHASH0=0x40)
NETS = [
    ("mobilenet_v2_0p5_224", "ethos-u85-256", None),
    ("tinynet", "ethos-u85-2048", HASH_PINS),
    ("tinynet", "ethos-u85-128", None),
    ("unet_mini", "ethos-u85-1024", HASH_PINS),
    ("conv2d_3x3_int16", "ethos-u85-256", None),
    ("add_int16", "ethos-u85-512", None),
    ("transpose_0213", "ethos-u85-256", None),
    ("resize_nearest_8x8to16x16", "ethos-u85-2048", HASH_PINS),
    ("dwconv_3x3_s2_valid_relu6_pt", "ethos-u85-128", None),
    ("avgpool_global_7x7", "ethos-u85-256", None),
]

# PMU counters: (event, PMEVTYPER extra bits)
COUNTERS = [("sram_rd_data_beat_received", 0), ("ext_rd_data_beat_received", 0),
            ("ext_wr_trans_accepted", 0), ("sram_wr_data_beat_written", 0),
            ("ext1_rd_trans_accepted", 0), ("sram1_rd_data_beat_received", 0),
            ("axi_latency_any", 0), ("ext_rd_trans_completed", 1 << 12)]     # D0: EXT0 not counted
AXI_CHAN = 1 << 8 | int(Channel.rd_ifm)          # latency event: EXT group, channel rd_ifm


def _expected_counters(log):
    def beats_of(ts):
        return sum(beats(t.addr, t.length) for t in ts)
    rd = [t for t in log if not t.write]
    wr = [t for t in log if t.write]
    exp = [beats_of(t for t in rd if t.port.startswith("SRAM")),
           beats_of(t for t in rd if t.port.startswith("EXT")),
           sum(1 for t in wr if t.port.startswith("EXT")),
           beats_of(t for t in wr if t.port.startswith("SRAM")),
           sum(1 for t in rd if t.port == "EXT1"),
           beats_of(t for t in rd if t.port == "SRAM1"),
           sum(1 for t in log if t.port.startswith("EXT") and t.channel == Channel.rd_ifm),
           sum(1 for t in rd if t.port.startswith("EXT") and t.port != "EXT0")]
    return [v & 0xFFFFFFFF for v in exp]


def _run_net(monkeypatch, name, config, pins, reference):
    from tests import nets

    require("ethosu.vela")
    tfl = nets.build(name)
    npz = nets.compiled(name, config)
    from tlm.ethos_u85 import vela
    vm = vela.load(npz)
    inputs = nets.make_inputs(tfl, 1235)
    real = runner.Device

    def make(*a, **kw):
        if pins is not None:
            kw.setdefault("pins", pins)
        d = real(*a, **kw)
        p = d.pmu
        for n, (ev, extra) in enumerate(COUNTERS):
            p.write(OFF[f"PMEVTYPER{n}"], EV[ev] | extra)
        p.write(OFF["PMCAXI_CHAN"], AXI_CHAN)
        p.write(OFF["PMCNTENSET"], 0xFF | 1 << 31)
        p.write(OFF["PMCR"], 1)
        return d
    monkeypatch.setattr(runner, "Device", make)
    return runner.run_model(vm, inputs, config=config, log_transactions=True, reference_paths=reference)


@pytest.mark.parametrize("name,config,pins", NETS, ids=[f"{n}-{c}{'-hash' if p else ''}" for n, c, p in NETS])
def test_network_fast_equals_reference(monkeypatch, name, config, pins):
    fast = _run_net(monkeypatch, name, config, pins, reference=False)
    ref = _run_net(monkeypatch, name, config, pins, reference=True)
    assert len(fast.outputs) == len(ref.outputs)
    for a, b in zip(fast.outputs, ref.outputs, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    la, lb = fast.device.memory.log, ref.device.memory.log
    assert len(la) == len(lb)
    first = next((i for i, (x, y) in enumerate(zip(la, lb)) if x != y), None)
    assert first is None, f"transaction {first}: fast {la[first]} != reference {lb[first]}"
    assert all(type(t) is Transaction for t in la)
    assert fast.device.cycle == ref.device.cycle
    assert fast.device.pmu.totals == ref.device.pmu.totals
    assert fast.device.pmu.evcnt == ref.device.pmu.evcnt == _expected_counters(lb)
    assert fast.device.pmu.ccnt == ref.device.pmu.ccnt
    if pins is not None:                      # the striping really spreads the traffic
        assert len({t.port for t in la}) > 1


# ================================================================================= fmap
class LogMem:
    """Byte store that logs every call (one per run); addresses from -ORG to SIZE - ORG."""
    ORG = 1 << 18

    def __init__(self, size=1 << 19, fill=None):
        self.data = bytearray(size) if fill is None else bytearray(fill)
        self.log = []

    def read(self, addr, n):
        self.log.append(("r", addr, n))
        a = addr + self.ORG
        assert 0 <= a and a + n <= len(self.data)
        return bytes(self.data[a:a + n])

    def write(self, addr, data):
        self.log.append(("w", addr, len(data)))
        a = addr + self.ORG
        assert 0 <= a and a + len(data) <= len(self.data)
        self.data[a:a + len(data)] = data


class PortMem:
    """The tlm.ethos_u85.ops.common._RegionMem shape: a DataPort accessor for one region/channel."""
    __slots__ = ("port", "region", "channel")

    def __init__(self, port, region, channel):
        self.port, self.region, self.channel = port, region, channel

    def read(self, addr, n):
        return self.port.read(self.region, int(addr), int(n), self.channel)

    def write(self, addr, data):
        self.port.write(self.region, int(addr), data, self.channel)


def _random_fm(rng, ofm=False):
    H, W, C = (int(v) for v in rng.integers(1, 7, 3))
    C = int(rng.choice([C, 8, 16, 17, 33]))
    prec = int(rng.choice([Precision.B8, Precision.B8, Precision.B16, Precision.B32, Precision.B64]))
    es = 1 << prec
    fmt = int(rng.choice([Format.NHWC, Format.NHCWB16]))
    storage = int(rng.choice([Storage.TILE2X2, Storage.TILE3X1]))
    if fmt == Format.NHWC:
        sx = es * int(rng.choice([C, C, C + 3, 0, 1]))
        sy = sx * W + es * int(rng.choice([0, 0, 5, -C * W]))
        sc = 0
    else:
        sx = 16 * es
        sy = 16 * es * W * int(rng.choice([1, 1, 2, 0]))
        sc = 16 * es * W * H * int(rng.choice([1, 1, 2])) + int(rng.choice([0, 0, 16 * es, -16 * es * W]))
    align = 16 if fmt == Format.NHCWB16 else es
    base = tuple(int(b) for b in rng.integers(256, 3000, 4) * align)
    if rng.random() < 0.3:                              # tiles far apart: sparse span
        base = (base[0], base[1] + 5000 * align, base[2], base[3] + 2000 * align)
    if es > 1 and rng.random() < 0.15:                  # unaligned (UNPREDICTABLE unless check=False)
        base = tuple(b + int(rng.integers(0, es)) for b in base)
        sx, sy = sx + int(rng.integers(0, 2)), sy + int(rng.integers(0, 2))
    kw = dict(base=base, stride_x=sx, stride_y=sy, stride_c=sc, width0=int(rng.integers(1, W + 2)),
              height0=int(rng.integers(1, H + 2)), height1=int(rng.integers(1, H + 3)), precision=prec,
              act_type=int(rng.integers(0, 2)), fmt=fmt, storage=storage,
              zero_point=int(rng.choice([0, 0, 3])))
    if ofm:
        tr = int(rng.choice([Transpose.HWC] * 4 + [Transpose.WHC, Transpose.HCW, Transpose.CHW]))
        rev = int(rng.choice([Reverse.NONE] * 4 + [Reverse.H, Reverse.W, Reverse.C])) if tr == Transpose.HWC \
            and prec != Precision.B64 else Reverse.NONE
        if tr != Transpose.HWC and prec == Precision.B64:
            tr = Transpose.HWC
        dims = {"H": H, "W": W, "C": C}
        kw.update(transpose=tr, reverse=rev, height=H, width=W, depth=C, blk_height=16 * H, blk_width=16 * W,
                  blk_depth=C)
        if tr != Transpose.HWC:                          # memory layout in transposed axis order
            mh, mw, mc = (dims[ch] for ch in Transpose(tr).name)
            if fmt == Format.NHWC:
                kw.update(stride_x=mc * es, stride_y=mw * mc * es)
            else:
                kw.update(stride_y=16 * es * mw, stride_c=16 * es * mw * mh)
    return FeatureMap(**kw), (H, W, C)


def _coords(rng, n):
    r = rng.random()
    if r < 0.6:
        return np.arange(n)
    if r < 0.7:
        return range(n)
    if r < 0.8:
        s = int(rng.integers(-1, 2))
        return np.arange(s, s + n)
    return rng.integers(0, n, int(rng.integers(1, n + 2)))       # arbitrary / repeated indices


def _same_outcome(f, g):
    """Run f and g; both raise the same exception type+message, or both return equal arrays."""
    try:
        a = f()
    except (Unpredictable, BusFault, ValueError) as e:
        with pytest.raises(type(e)) as info:
            g()
        assert str(info.value) == str(e)
        return None
    b = g()
    if a is not None:
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    return a


def test_fmap_read_fast_equals_reference(rng):
    for _ in range(600):
        fm, (H, W, C) = _random_fm(rng)
        ys, xs, cs = _coords(rng, H), _coords(rng, W), _coords(rng, C)
        check = bool(rng.random() < 0.8)
        zp = bool(rng.random() < 0.3)
        fill = rng.integers(0, 256, 1 << 19, dtype=np.uint8).tobytes()
        m1, m2 = LogMem(fill=fill), LogMem(fill=fill)
        _same_outcome(lambda: fmap.read_fmap(m1, fm, ys, xs, cs, subtract_zero_point=zp, check=check),
                      lambda: fmap.read_fmap_ref(m2, fm, ys, xs, cs, subtract_zero_point=zp, check=check))
        assert m1.log == m2.log
        if fm.precision <= Precision.B16:                  # narrow / float results (values fit)
            dt = rng.choice([np.int32, np.float64, np.int64])
            _same_outcome(lambda: fmap.read_fmap(m1, fm, ys, xs, cs, subtract_zero_point=zp, check=check,
                                                 dtype=dt),
                          lambda: fmap.read_fmap_ref(m2, fm, ys, xs, cs, subtract_zero_point=zp,
                                                     check=check).astype(dt))


def test_fmap_write_fast_equals_reference(rng):
    for _ in range(600):
        fm, (H, W, C) = _random_fm(rng, ofm=True)
        ys, xs, cs = _coords(rng, H), _coords(rng, W), _coords(rng, C)
        if rng.random() < 0.5:                           # write_ofm only writes inside the OFM
            ys, xs, cs = np.arange(H), np.arange(W), np.arange(C)
        check = bool(rng.random() < 0.8)
        shape = (len(ys), len(xs), len(cs))
        vals = rng.integers(-2**62, 2**62, shape) if rng.random() < 0.8 else \
            rng.integers(0, 2**63, shape).astype(np.uint64)
        if rng.random() < 0.2:
            vals = vals[:1, :, :1]                       # broadcast
        m1, m2 = LogMem(), LogMem()
        _same_outcome(lambda: fmap.write_fmap(m1, fm, ys, xs, cs, vals, check=check),
                      lambda: fmap.write_fmap_ref(m2, fm, ys, xs, cs, vals, check=check))
        assert m1.log == m2.log and m1.data == m2.data


class _Sink:
    """A listener that accepts batches (as the device's does)."""

    def __init__(self, seen):
        self.seen = seen

    def __call__(self, t):
        self.seen.append(t)

    def on_batch(self, b):
        self.seen.extend(b)


def _port_pair(nports=1, hash0=0, hash1=0, base=0x10_0000, faults=(), batching_listener=True):
    """Two identical Memory + DataPort set-ups (region 1 at `base`)."""
    out = []
    for _ in range(2):
        m = Memory()
        for lo, hi, kind in faults:
            m.inject_fault(lo, hi, "SLVERR", kind)
        r = RegionRoute(base=base, interface=Interface.sram, memtype=0xB, domain=2, prot=1, hash0=hash0,
                        hash1=hash1, nports=nports)
        p = DataPort(m, lambda region, r=r: r)
        seen = []
        if batching_listener:
            m.listeners.append(_Sink(seen))
        else:
            m.listeners.append(seen.append)
        out.append((m, p, seen))
    return out


def test_fmap_through_dataport_fast_equals_reference(rng):
    """The ops' accessor shape (port/region/channel) takes the batched span path; with faults
    the same transaction fails, after the same (logged, performed) transactions."""
    for _ in range(250):
        fm, (H, W, C) = _random_fm(rng, ofm=bool(rng.random() < 0.5))
        ys, xs, cs = np.arange(H), np.arange(W), np.arange(C)
        faults = []
        if rng.random() < 0.3:
            lo = 0x10_0000 + int(rng.integers(0, 60000))
            faults = [(lo, lo + int(rng.integers(1, 64)), str(rng.choice(["r", "w", "rw"])))]
        nports = int(rng.choice([1, 2, 4]))
        (m1, p1, s1), (m2, p2, s2) = _port_pair(nports, 0x0020212F00, 0x00_0400_0540, faults=faults)
        fill = rng.integers(0, 256, 70000, dtype=np.uint8)
        m1.write(0x10_0000, fill)
        m2.write(0x10_0000, fill)
        vals = rng.integers(-1000, 1000, (H, W, C))
        ch = Channel.wr_ofm if fm.height is not None else Channel.rd_ifm
        a1, a2 = PortMem(p1, 1, ch), PortMem(p2, 1, ch)
        if fm.height is not None:
            f = lambda: fmap.write_fmap(a1, fm, ys, xs, cs, vals, check=False)      # noqa: E731
            g = lambda: fmap.write_fmap_ref(a2, fm, ys, xs, cs, vals, check=False)  # noqa: E731
        else:
            f = lambda: fmap.read_fmap(a1, fm, ys, xs, cs, check=False)            # noqa: E731
            g = lambda: fmap.read_fmap_ref(a2, fm, ys, xs, cs, check=False)        # noqa: E731
        m2.batching = False                  # the reference side: one access per run
        try:
            r1 = f()
        except BusFault as e:
            r1 = e
        try:
            r2 = g()
        except BusFault as e:
            r2 = e
        if isinstance(r1, BusFault) or isinstance(r2, BusFault):
            assert type(r1) is type(r2) and r1.txn == r2.txn
        elif r1 is not None:
            assert np.array_equal(r1, r2)
        assert m1.log == m2.log and s1 == s2
        assert m1.read(0x10_0000, 70000) == m2.read(0x10_0000, 70000)


# ================================================================================= DataPort runs
@pytest.mark.parametrize("batching_listener", [True, False])
def test_dataport_runs_equal_per_run_calls(rng, batching_listener):
    for _ in range(300):
        nports = int(rng.choice([1, 2, 3, 4]))
        base = int(rng.choice([0x10_0000, ADDR_MASK - 300]))          # the second wraps at 2**40
        faults = []
        for _ in range(int(rng.choice([0, 0, 1, 3, 12]))):              # > 8: merged-range search
            lo = (base + int(rng.integers(-50, 3000))) & ADDR_MASK
            faults.append((lo, lo + int(rng.integers(1, 40)), str(rng.choice(["r", "w", "rw"]))))
        (m1, p1, s1), (m2, p2, s2) = _port_pair(nports, 0x0020212F00 if rng.random() < .5 else 0x40,
                                                0x00_0400_0540, base=base, faults=faults,
                                                batching_listener=batching_listener)
        n = int(rng.integers(0, 40))
        starts = rng.integers(-10, 2500, n)
        lengths = rng.integers(0, 300, n) if rng.random() < 0.7 else np.full(n, 8)
        write = bool(rng.random() < 0.5)
        if write:
            data = rng.integers(0, 256, int(lengths.sum()), dtype=np.uint8)
            try:
                p1.write_runs(1, starts, lengths, data, Channel.wr_ofm)
                e1 = None
            except BusFault as e:
                e1 = e.txn
            e2, pos = None, 0
            try:
                for s, ln in zip(starts.tolist(), lengths.tolist()):
                    p2.write(1, s, data[pos:pos + ln].tobytes(), Channel.wr_ofm)
                    pos += ln
            except BusFault as e:
                e2 = e.txn
        else:
            try:
                d1, e1 = p1.read_runs(1, starts, lengths, Channel.rd_ifm), None
            except BusFault as e:
                d1, e1 = None, e.txn
            d2, e2 = [], None
            try:
                for s, ln in zip(starts.tolist(), lengths.tolist()):
                    d2.append(p2.read(1, s, ln, Channel.rd_ifm))
                d2 = np.concatenate(d2) if d2 else np.zeros(0, np.uint8)
            except BusFault as e:
                d2, e2 = None, e.txn
            if e1 is None:
                assert np.array_equal(d1, d2)
        assert e1 == e2
        assert m1.log == m2.log and s1 == s2
        pages1, pages2 = m1.copy_pages(), m2.copy_pages()
        assert pages1.keys() == pages2.keys()
        assert all(np.array_equal(pages1[k], pages2[k]) for k in pages1)


def test_dataport_span_equals_runs(rng):
    for _ in range(200):
        mask = rng.random(int(rng.integers(1, 3000))) < rng.choice([0.1, 0.5, 0.95])
        lo = int(rng.integers(-100, 5000))
        faults = [(0x10_0000 + lo + 1000, 0x10_0000 + lo + 1001, "rw")] if rng.random() < 0.3 else []
        (m1, p1, s1), (m2, p2, s2) = _port_pair(2, 0x40, base=0x10_0000, faults=faults)
        st, sp = memory.mask_runs(mask)
        if rng.random() < 0.5:
            buf = rng.integers(0, 256, mask.size, dtype=np.uint8)
            try:
                p1.write_span(1, lo, mask, buf, Channel.wr_ofm)
                e1 = None
            except BusFault as e:
                e1 = e.txn
            m2.batching = False
            try:
                p2.write_span(1, lo, mask, buf, Channel.wr_ofm)
                e2 = None
            except BusFault as e:
                e2 = e.txn
            finally:
                m2.batching = True
        else:
            fill = rng.integers(0, 256, 10000, dtype=np.uint8)
            m1.write(0x10_0000 - 200, fill)
            m2.write(0x10_0000 - 200, fill)
            try:
                b1, e1 = p1.read_span(1, lo, mask, Channel.rd_ifm), None
            except BusFault as e:
                b1, e1 = None, e.txn
            try:
                d2, e2 = p2.read_runs(1, st + lo, sp - st, Channel.rd_ifm), None
            except BusFault as e:
                d2, e2 = None, e.txn
            if e1 is None:
                assert np.array_equal(b1[mask], d2)
        assert e1 == e2 and m1.log == m2.log and s1 == s2
        pages1, pages2 = m1.copy_pages(), m2.copy_pages()
        assert all(np.array_equal(v, pages2.get(k, np.zeros_like(v))) for k, v in pages1.items())


def test_txn_batch_pages_and_memos(rng):
    """TxnBatch.pages() (distinct pages written, memoised: cached batches are performed
    again) and the memoised beats/extent equal their direct computation."""
    for _ in range(300):
        n = int(rng.integers(1, 20))
        a = rng.integers(0, 1 << 22, n).astype(np.int64)
        ln = rng.integers(1, 1 << 18, n).astype(np.int64)
        b = TxnBatch(("SRAM0",), None, Channel.wr_ofm, True, a, ln)
        want = set()
        for x, y in zip(a.tolist(), ln.tolist()):
            want.update(range(x >> memory.PAGE_BITS, ((x + y - 1) >> memory.PAGE_BITS) + 1))
        assert b.pages() == tuple(sorted(want)) == b.pages()
        assert b.total_beats() == sum(beats(x, y) for x, y in zip(a.tolist(), ln.tolist())) == b.total_beats()
        assert b.total_bytes() == int(ln.sum()) and b.extent() == (int(a.min()), int((a + ln).max()))
        assert b.per_port() == [(0, n, b.total_beats())]


def test_txn_batch_records():
    b = TxnBatch(("EXT0", "EXT1"), np.array([1, 0]), Channel.rd_weights, False, np.array([0x40, 0x7F]),
                 np.array([16, 2]), 2, 0b1111, 3, interface=Interface.ext, txn_type=Transaction)
    ts = list(b)
    assert ts == [Transaction("EXT1", Channel.rd_weights, False, 0x40, 16, 2, 0b1111, 3),
                  Transaction("EXT0", Channel.rd_weights, False, 0x7F, 2, 2, 0b1111, 3)]
    assert hash(ts[0]) == hash(Transaction("EXT1", Channel.rd_weights, False, 0x40, 16, 2, 0b1111, 3))
    assert len(b) == 2 and len(b[1:]) == 1 and b.total_beats() == 1 + 2
    assert b.per_port() == [(0, 1, 2), (1, 1, 1)]


# ================================================================================= PMU
def _count_reference(p: Pmu, ev, port_disable, txns, cycles=10):
    """The per-transaction counting of the original Pmu.count (AXI and latency events)."""
    def port_of(t):
        s = t.port.upper()
        return ("ext" if s.startswith("EXT") else "sram"), int("".join(c for c in s if c.isdigit()) or 0)
    fam = axi_family(ev)
    if fam is not None:
        grp, port, off = fam
        nports = p.config.ports(grp)
        if port is not None and port >= nports:
            return 0
        ports = [q for q in ([port] if port is not None else range(nports)) if not (port_disable >> q) & 1]
        if off == 12:
            return cycles * len(ports)
        if off not in (0, 1, 2, 4, 7):
            return 0
        chf = p.axi_chan & 0xF if (p.axi_chan >> 10) & 1 and off in p.policy.pmu_bw_event_offsets else None
        n = 0
        for t in txns:
            g, q = port_of(t)
            if g == grp and q in ports and (chf is None or int(t.channel) == chf) and t.write == (off >= 4):
                n += beats(t.addr, t.length) if off in (2, 7) else 1
        return n
    if ev == 160:
        grp = "ext" if (p.axi_chan >> 8) & 1 else "sram"
        return sum(1 for t in txns if port_of(t)[0] == grp and int(t.channel) == p.axi_chan & 0xF
                   and not (port_disable >> port_of(t)[1]) & 1)
    return None


def test_pmu_summary_counts_equal_per_transaction(rng):
    p = Pmu("ethos-u85-2048")
    events = [e for e in range(128, 700) if axi_family(e) is not None] + [160]
    for _ in range(40):
        items, flat = [], []
        for _ in range(int(rng.integers(0, 6))):
            n = int(rng.integers(1, 30))
            ext = bool(rng.random() < 0.5)
            ports = ("EXT0", "EXT1", "EXT2", "EXT3") if ext else ("SRAM0", "SRAM1", "SRAM2", "SRAM3")
            idx = rng.integers(0, 4 if not ext else 2, n) if rng.random() < 0.7 else None
            b = TxnBatch(ports, idx, Channel(int(rng.choice([1, 2, 8, 9]))), bool(rng.random() < 0.5),
                         rng.integers(0, 1 << 20, n), rng.integers(1, 200, n),
                         interface=Interface.ext if ext else Interface.sram, txn_type=Transaction)
            items.append(b)
            flat.extend(b)
        for _ in range(int(rng.integers(0, 20))):
            t = Transaction(str(rng.choice(["SRAM0", "SRAM3", "EXT0", "EXT1"])), Channel(int(rng.choice([0, 1, 8]))),
                            bool(rng.random() < 0.5), int(rng.integers(0, 1 << 20)), int(rng.integers(1, 100)))
            items.append(t)
            flat.append(t)
        p.axi_chan = int(rng.integers(0, 1 << 11))
        b_mixed, b_flat = Batch(10, True, items), Batch(10, True, flat)
        for ev in events:
            dis = int(rng.integers(0, 16))
            want = _count_reference(p, ev, dis, flat)
            assert p.count(ev, dis, b_mixed) == p.count(ev, dis, b_flat) == want, (ev, dis)


# ================================================================================= arith
def test_rescale_fast_paths_equal_reference(rng):
    for _ in range(40):
        shape = (int(rng.integers(1, 40)), int(rng.integers(1, 90)), int(rng.choice([1, 8, 48, 300])))
        big = rng.random() < 0.3
        acc = rng.integers(-(1 << 47), 1 << 47, shape) if big else rng.integers(-(1 << 31), 1 << 31, shape)
        c = shape[-1]
        scale = rng.integers(0, 1 << 31, c) if rng.random() < 0.7 else int(rng.integers(0, 1 << 31))
        shift = rng.integers(0, 64, c) if rng.random() < 0.7 else int(rng.integers(0, 64))
        mode, dbl = int(rng.integers(0, 6)), int(rng.integers(0, 31))
        got = arith.rescale(acc, scale, shift, mode, dbl, acc_format=None)
        sc = np.broadcast_to(scale, shape)
        sh = np.broadcast_to(shift, shape)
        idx = [tuple(int(rng.integers(0, n)) for n in shape) for _ in range(60)]
        for i in idx:
            want = arith.sign_extend(arith.rounded_shift_right_ref(int(acc[i]) * int(sc[i]), int(sh[i]), mode, dbl),
                                     64)
            assert int(got[i]) == want, (i, mode, dbl)
        # rounded_shift_right near the int64 limits (the direct int64 form must not be used)
        a = rng.integers(-(1 << 63), (1 << 63) - 1, 50, dtype=np.int64, endpoint=True)
        s = rng.integers(0, 64, 50)
        r = arith.rounded_shift_right(a, s, mode, dbl)
        assert [int(v) for v in r] == [arith.rounded_shift_right_ref(int(x), int(y), mode, dbl)
                                       for x, y in zip(a, s)]


def test_rounded_shift_right_broadcast_shapes(rng):
    """The shift may have more elements than acc (elementwise SHR with a broadcast IFM)."""
    for _ in range(300):
        sshape = tuple(1 if rng.random() < .5 else n for n in (3, 3, 3))
        ashape = tuple(1 if rng.random() < .5 else n for n in (3, 3, 3))
        a = rng.integers(-(1 << 40), 1 << 40, ashape)
        s = rng.integers(0, 64, sshape)
        mode, dbl = int(rng.integers(0, 6)), int(rng.integers(0, 31))
        got = arith.rounded_shift_right(a, s, mode, dbl)
        ab, sb = np.broadcast_arrays(a, s)
        assert got.shape == ab.shape
        assert got.ravel().tolist() == [arith.rounded_shift_right_ref(int(x), int(y), mode, dbl)
                                        for x, y in zip(ab.ravel(), sb.ravel())]


def test_sign_extend_and_clamp_narrow_forms():
    v = np.array([0x7F, 0x80, 0xFF, -1, 2**40 + 0x8000, -(2**62)], dtype=np.int64)
    assert arith.sign_extend(v, 8).tolist() == [127, -128, -1, -1, 0, 0]
    assert arith.sign_extend(v, 16).tolist() == [127, 128, 255, -1, -32768, 0]
    assert arith.sign_extend(v.astype(np.uint64), 32).tolist() == [127, 128, 255, -1, 0x8000, 0]
    assert arith.sign_extend(v, 12).tolist() == [127, 128, 255, -1, 0, 0]
    assert arith.clamp(np.array([-5, 0, 5]), 3, -3).tolist() == [3, 3, -3]        # literal if/else order
    assert arith.clamp(np.array([-5, 0, 5]), -3, 3).tolist() == [-3, 0, 3]


# ================================================================================= device caches
def test_route_cache_follows_register_writes():
    from tlm.ethos_u85.device import Device

    d = Device(settle=True)
    r0 = d.route(3)
    assert d.route(3) is r0                                       # cached
    d.apb_write(OFF["BASEP3_LO"], 0x5000)
    assert d.route(3).base == 0x5000
    d.apb_write(OFF["MEM_ATTR2"], 0b0100 | 0x30)                  # EXT, memtype 3
    d.apb_write(OFF["REGIONCFG"], 2 << 6)                         # region 3 -> MEM_ATTR2
    r = d.route(3)
    assert r.interface == Interface.ext and r.memtype == 3 and r.base == 0x5000
    assert d.apb_write(OFF["RESET"], 0b10) == 0                   # soft reset: CSL=1, BASEP cleared
    d.wait_reset()
    r = d.route(3)
    assert r.base == 0 and r.interface == Interface.sram and r.prot == d.prot_word == 0b10


# ================================================================================= fused epilogue
def _epilogue_steps(acc, bits, bias, scale, shift, mode, dbl, zp, amin, amax, clamp, bits_out, act_type):
    """write_accumulator's steps one by one (wrap, bias, rescale, activation, truncate)."""
    a = arith.sign_extend(np.asarray(acc, dtype=np.int64), bits)
    a = arith.accumulate(a, bias, arith.AccFormat.I32 if bits == 32 else arith.AccFormat.I48)
    r = arith.rescale(a, scale, shift, mode, dbl, acc_format=None)
    prec = {8: Precision.B8, 16: Precision.B16, 32: Precision.B32}[bits_out]
    return arith.activation(r, precision=prec, act_type=act_type, zero_point=zp, act_min=amin, act_max=amax,
                            clip_range=arith.ClipRange.B16 if clamp else arith.ClipRange.NONE)


def test_fused_epilogue_equals_steps(rng):
    """tlm.ethos_u85.ops.common.fused_epilogue (the conv/depthwise write_accumulator fast path) is
    bit-identical to the step-by-step path for every round mode, dbl_rnd, accumulator width,
    OFM type, clamp/no clamp, wrapping and float/int input, or declines (None)."""
    from tlm.ethos_u85.ops import common
    from tlm.ethos_u85.ops.common import EpilogueConsts, fused_epilogue, Scale

    real_f64 = common.fused_epilogue_f64
    f64 = []

    def count_f64(*a, **kw):
        f64.append(1)
        return real_f64(*a, **kw)
    common.fused_epilogue_f64 = count_f64
    try:
        _check_fused_epilogue(rng, EpilogueConsts, fused_epilogue, Scale)
    finally:
        common.fused_epilogue_f64 = real_f64
    print("float64 form:", len(f64))
    assert len(f64) > 15                                       # the float64 form was exercised


def _small_epilogue_cases(rng, n):
    """Random one-block epilogue cases: (acc, bound, k, zp, amin, amax, clamp, odt, the
    independent step-by-step result)."""
    from tlm.ethos_u85.ops.common import EpilogueConsts, Scale
    for _ in range(n):
        d = int(rng.choice([1, 3, 16, 80]))
        bits = int(rng.choice([32, 48]))
        lim = int(rng.choice([1 << 8, 1 << 12, 1 << 20, 1 << 23]))
        acc = rng.integers(-lim, lim, (1, 1, d), endpoint=True)
        src = acc.astype(np.float32) if rng.random() < 0.5 else acc.astype(np.int64)
        bias = rng.integers(-5000, 5000, d) if rng.random() < 0.8 else rng.integers(-(1 << 30), 1 << 30, d)
        scale = rng.integers(0, 1 << (15 if bits == 48 else 31), d)
        shift = rng.integers(20, 50, d) if rng.random() < 0.8 else rng.integers(0, 64, d)
        mode, dbl = int(rng.integers(0, 6)), int(rng.choice([0, 0, 1, 5, 30]))
        bits_out = int(rng.choice([8, 16, 32]))
        act_type = int(rng.integers(0, 2))
        if act_type == 1:
            zp = int(rng.integers(-128, 128))
            amin, amax = -(1 << (min(bits_out, 16) - 1)), (1 << (min(bits_out, 16) - 1)) - 1
            if rng.random() < 0.5:
                amin, amax = sorted(int(v) for v in rng.integers(amin, amax + 1, 2))
        else:
            zp = int(rng.integers(0, 256))
            amin, amax = sorted(int(v) for v in rng.integers(0, 1 << min(bits_out, 16), 2))
        clamp = rng.random() < 0.8
        k = EpilogueConsts(Scale(bias, scale, shift), d, mode, dbl, bits)
        odt = np.dtype(f"<{'u' if act_type == 0 else 'i'}{bits_out // 8}")
        want = _epilogue_steps(acc, bits, bias, scale, shift, mode, dbl, zp & 0xFFFF, amin & 0xFFFF,
                               amax & 0xFFFF, clamp, bits_out, act_type)
        yield src, lim, k, zp, amin, amax, clamp, odt, want


def test_plan_small_epilogue_equals_steps(rng, monkeypatch):
    """The operation plans' one-block conv epilogue (ops.plan._small_epilogue: float64 form,
    int64 form with the zero point folded into the rounding term, int64 form without) equals
    the step-by-step write_accumulator, or declines; a planted off-by-one in each form is
    caught by the plan's own check (it declines)."""
    from tlm.ethos_u85.ops import plan
    forms = {}
    real = {"_epilogue_i64": plan._epilogue_i64, "_epilogue_f64": plan._epilogue_f64}

    def counted(name, planted=False):
        def make(*a):
            f = real[name](*a)
            forms[f.__name__, name] = forms.get((f.__name__, name), 0) + 1
            if not planted:
                return f
            return lambda acc, b: (f(acc, b).astype(np.int64) + 1).astype(f(acc, b).dtype)
        return make
    for name in real:
        monkeypatch.setattr(plan, name, counted(name))
    done = 0
    for src, bound, k, zp, amin, amax, clamp, odt, want in _small_epilogue_cases(rng, 300):
        ep = plan._small_epilogue(k, bound, zp, amin, amax, clamp, odt, src.dtype, src.shape)
        if ep is None:
            continue
        done += 1
        got = ep(src.copy(), bound)
        assert got.dtype == odt and got.shape == src.shape
        assert np.array_equal(got.astype(np.int64), want), (k.bits, zp, amin, amax, clamp, odt)
    print("cases:", done, "forms built:", forms)
    assert done > 100
    assert forms.get(("folded", "_epilogue_i64"), 0) > 20 and forms.get(("epilogue", "_epilogue_i64"), 0) > 0
    assert forms.get(("epilogue", "_epilogue_f64"), 0) > 20

    # planted: each form one too high -> the plan's check declines every such case
    for name in real:
        monkeypatch.setattr(plan, name, counted(name, planted=True))
    caught = 0
    for src, bound, k, zp, amin, amax, clamp, odt, _want in _small_epilogue_cases(rng, 100):
        forms.clear()
        ep = plan._small_epilogue(k, bound, zp, amin, amax, clamp, odt, src.dtype, src.shape)
        assert ep is None or not forms
        caught += bool(forms)
    assert caught > 20


def _check_fused_epilogue(rng, EpilogueConsts, fused_epilogue, Scale):
    done = 0
    for it in range(400):
        h, w, d = int(rng.integers(1, 9)), int(rng.integers(1, 40)), int(rng.choice([1, 3, 16, 40, 300]))
        bits = int(rng.choice([32, 48]))
        kind = rng.integers(0, 4)
        lim = [1 << 12, 1 << 23, 1 << 31, 1 << 40][kind]
        acc = rng.integers(-lim, lim, (h, w, d), endpoint=True)
        bound = int(np.abs(acc).max())
        if rng.random() < 0.3:
            bound += int(rng.integers(0, 1 << 20))                 # a loose bound is fine
        src = acc
        if bound < (1 << 24) and rng.random() < 0.5:
            src = acc.astype(np.float32)
        elif bound < (1 << 53) and rng.random() < 0.3:
            src = acc.astype(np.float64)
        elif bound < (1 << 31) and rng.random() < 0.5:
            src = acc.astype(np.int32)
        bb = 47 if bits == 48 else 31
        bias = rng.integers(-(1 << bb), 1 << bb, d) if rng.random() < 0.3 else rng.integers(-5000, 5000, d)
        scale = rng.integers(0, 1 << (15 if bits == 48 else 31), d)
        if rng.random() < 0.2:
            scale[rng.integers(0, d)] = 0
        shift = rng.integers(0, 64, d) if rng.random() < 0.4 else rng.integers(25, 45, d)
        mode, dbl = int(rng.integers(0, 6)), int(rng.choice([0, 0, 1, 5, 30]))
        bits_out = int(rng.choice([8, 8, 16, 32]))
        act_type = int(rng.integers(0, 2))
        if act_type == 1:
            zp = int(rng.integers(-128, 128))
            amin, amax = sorted(int(v) for v in rng.integers(-(1 << 15), 1 << 15, 2))
            if rng.random() < 0.5:
                amin, amax = -(1 << (min(bits_out, 16) - 1)), (1 << (min(bits_out, 16) - 1)) - 1
        else:
            zp = int(rng.integers(0, 256))
            amin, amax = sorted(int(v) for v in rng.integers(0, 1 << 16, 2))
        clamp = rng.random() < 0.8
        sc = Scale(bias, scale, shift)
        k = EpilogueConsts(sc, d, mode, dbl, bits)
        odt = np.dtype(f"<{'u' if act_type == 0 else 'i'}{bits_out // 8}")
        got = fused_epilogue(src, bound, k, zp, amin, amax, clamp, odt)
        want = _epilogue_steps(acc, bits, bias, scale, shift, mode, dbl, zp & 0xFFFF, amin & 0xFFFF,
                               amax & 0xFFFF, clamp, bits_out, act_type)
        if got is None:
            continue
        done += 1
        assert got.dtype == odt and got.shape == acc.shape
        assert np.array_equal(got.astype(np.int64), want), (it, mode, dbl, bits, bits_out, clamp)
    assert done > 150
