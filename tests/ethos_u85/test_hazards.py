"""Command-stream races between the mem2mem DMA and kernel operations (tlm/ethos_u85/hazards.py):
hand-built streams for each kind, the same streams with the right wait, the DMA_WAIT k /
KERNEL_WAIT n / BRANCH rf_true semantics and the warm paths (the same events on every run).
Expected byte ranges come from the streams' own operand layout (KernelCase.operands)."""
from __future__ import annotations

import random

import pytest

from tb.ethos_u85.testlib.memmap import REGION_BASE, STREAM_ADDR, tlm_run
from tb.ethos_u85.testlib.streams import dma_cmds, enc, kernel_case
from tlm.ethos_u85 import isa
from tlm.ethos_u85.ops import plan as _plans

SEED = 34
STOP = enc(("NPU_OP_STOP", dict(mask=0)))


def hazards(dev) -> list:
    """The hazard events' details (without the cycle count, which runs on between runs)."""
    return [{k: v for k, v in d.items() if k != "cycle"} for e, d in dev.events
            if e == "unpredictable" and d.get("kind") == "hazard"]


def case(op: str, seed: int = SEED):
    print("seed", seed)
    return kernel_case(op, random.Random(seed))


def rel(c, name: str) -> "tuple[int, int, int, int]":
    """(region, region offset, absolute lo, hi) of an operand."""
    r, lo, hi = c.operands[name]
    return r, lo - REGION_BASE[r], lo, hi


def copy_in(c, name: str, wait: bool, n: "int | None" = None) -> "tuple[list, dict]":
    """A DMA that writes (the first *n* bytes of) operand *name* with its own bytes, from a
    copy 0x4000 further into the region (the data stay valid, only the race matters)."""
    r, off, lo, hi = rel(c, name)
    n = hi - lo if n is None else n
    image = dict(c.image)
    image[lo + 0x4000] = bytes(_bytes(c.image, lo, n))
    return dma_cmds(r, off + 0x4000, r, off, n, wait=wait), image


def _bytes(image: dict, lo: int, n: int) -> bytes:
    for a, d in image.items():
        if a <= lo and lo + n <= a + len(d):
            return d[lo - a:lo - a + n]
    return bytes(n)


def op_words(c) -> list:
    return c.words


@pytest.mark.parametrize("op,operand", [("conv", "ifm"), ("conv", "weights"), ("conv", "scale"),
                                        ("elementwise", "ifm"), ("elementwise", "ifm2"), ("pool", "ifm"),
                                        ("depthwise", "weights")])
def test_dma_then_kernel_raw(op, operand):
    c = case(op)
    for wait in (False, True):
        dma, image = copy_in(c, operand, wait)
        dev, stop = tlm_run(dma + c.words + STOP, image)
        assert stop.kind.name == "STOP", stop
        assert not [e for e, d in dev.events if e in ("fault", "internal_error")], dev.events
        hz = hazards(dev)
        if wait:
            assert hz == []
            continue
        r, off, lo, hi = rel(c, operand)
        assert [h["hazard"] for h in hz] == ["RAW"], hz
        h = hz[0]
        assert h["space"] == "memory" and (h["lo"], h["hi"]) == (lo, hi) and h["bytes"] == hi - lo
        assert h["other"] == "NPU_OP_DMA_START" and h["other_offset"] == 4 * (len(dma) - 1)
        assert h["offset"] == 4 * len(dma) + c.op_offset


def test_dma_then_kernel_waw_war():
    c = case("pool")
    r, off, lo, hi = rel(c, "ofm")
    # the DMA writes the OFM's first 16 bytes: WAW
    dev, _ = tlm_run(dma_cmds(r, off + 0x4000, r, off, 16, wait=False) + c.words + STOP, c.image)
    assert [(h["hazard"], h["lo"], h["hi"]) for h in hazards(dev)] == [("WAW", lo, lo + 16)]
    # the DMA reads the OFM (to elsewhere): WAR
    dev, _ = tlm_run(dma_cmds(r, off + 8, r, off + 0x4000, 8, wait=False) + c.words + STOP, c.image)
    assert [(h["hazard"], h["lo"], h["hi"]) for h in hazards(dev)] == [("WAR", lo + 8, lo + 16)]
    dev, _ = tlm_run(dma_cmds(r, off + 8, r, off + 0x4000, 8, wait=True) + c.words + STOP, c.image)
    assert hazards(dev) == []


def test_disjoint_interleaved_no_alarm():
    """A DMA that writes the gaps between the lines a kernel op reads is no race (exact byte
    sets, no bounding box): an IFM with row stride 2x its row writes every other row."""
    c = case("pool")
    r, off, lo, hi = rel(c, "ofm")
    # 4 single bytes right after the OFM and before it: touching, not overlapping
    words = dma_cmds(r, off + 0x4000, r, off + (hi - lo), 4, wait=False)
    words += dma_cmds(r, off + 0x4000, r, off - 4, 4, wait=False)
    dev, _ = tlm_run(words + c.words + STOP, c.image)
    assert hazards(dev) == []


@pytest.mark.parametrize("what", ["RAW", "WAR", "WAW"])
def test_kernel_then_dma(what):
    c = case("pool")
    ro, oo, olo, ohi = rel(c, "ofm")
    ri, io, ilo, ihi = rel(c, "ifm")
    dma = {"RAW": lambda w: dma_cmds(ro, oo, ro, oo + 0x4000, 8, wait=w),        # reads the OFM
           "WAR": lambda w: dma_cmds(ri, io + 0x4000, ri, io, 8, wait=w),        # writes the IFM
           "WAW": lambda w: dma_cmds(ro, oo + 0x4000, ro, oo, 8, wait=w)}[what]  # writes the OFM
    lo = {"RAW": olo, "WAR": ilo, "WAW": olo}[what]
    dev, _ = tlm_run(c.words + dma(True) + STOP, c.image)
    hz = hazards(dev)
    assert [(h["hazard"], h["lo"], h["hi"], h["other_offset"]) for h in hz] == [(what, lo, lo + 8, c.op_offset)]
    assert hz[0]["offset"] == 4 * len(c.words) + 4 * (len(dma(True)) - 2)
    wait = enc(("NPU_OP_KERNEL_WAIT", dict(n=0)))
    dev, _ = tlm_run(c.words + wait + dma(True) + STOP, c.image)
    assert hazards(dev) == []


def _lut_dma(dst: int, length: int, wait: bool) -> list:
    """NPU_OP_DMA_START from region 0 offset 0x100 to the LUT RAM (internal) at *dst*."""
    cmds = [("NPU_SET_DMA0_SRC_REGION", dict(region=0, stride_mode=0)),
            ("NPU_SET_DMA0_DST_REGION", dict(region=0, region_mode=isa.dma_region_mode.internal)),
            ("NPU_SET_DMA0_SRC", dict(addr=0x100)), ("NPU_SET_DMA0_DST", dict(addr=dst)),
            ("NPU_SET_DMA0_LEN", dict(addr=length)), "NPU_OP_DMA_START"]
    if wait:
        cmds.append(("NPU_OP_DMA_WAIT", dict(k=0)))
    return enc(*cmds)


def test_lut_raw():
    c = case("pool")
    act = enc(("NPU_SET_ACTIVATION", dict(activation_function=isa.activation_function.lut_s8_s8, table=1,
                                          activation_clip_range=0)))
    words = c.words[:-1 if len(isa.encode("NPU_OP_POOL", pooling_mode=0)) == 1 else -2]
    op = c.words[len(words):]
    # table 1 of lut_s8_s8: LUT bytes 256..511
    for dst, n, wait, expect in ((256 + 32, 64, False, [(256 + 32, 256 + 96)]),
                                 (256 + 32, 64, True, []),
                                 (0, 256, False, []),           # table 0: not read
                                 (512, 256, False, [])):
        dev, _ = tlm_run(_lut_dma(dst, n, wait) + words + act + op + STOP, c.image)
        hz = hazards(dev)
        assert [(h["space"], h["lo"], h["hi"]) for h in hz] == [("lut", lo, hi) for lo, hi in expect], (dst, n, hz)
        assert all(h["hazard"] == "RAW" for h in hz)


def _two(c, k: int) -> "tuple[list, list]":
    """DMA A writes the IFM, DMA B writes elsewhere."""
    r, off, lo, hi = rel(c, "ifm")
    a = dma_cmds(r, off + 0x4000, r, off, 8, wait=False)
    b = dma_cmds(r, off + 0x4000, r, off + 0x6000, 8, wait=False)
    return a, b


def test_dma_wait_k():
    c = case("pool")
    a, b = _two(c, 1)
    w1 = enc(("NPU_OP_DMA_WAIT", dict(k=1)))
    dev, _ = tlm_run(a + b + w1 + c.words + STOP, c.image)       # A retired, B outstanding
    assert hazards(dev) == []
    dev, _ = tlm_run(b + a + w1 + c.words + STOP, c.image)       # A (newest) outstanding
    assert [h["hazard"] for h in hazards(dev)] == ["RAW"]


def test_fifth_descriptor():
    c = case("pool")
    a, b = _two(c, 0)
    dev, _ = tlm_run(a + b * 3 + c.words + STOP, c.image)        # four descriptors: A outstanding
    assert [h["hazard"] for h in hazards(dev)] == ["RAW"]
    dev, _ = tlm_run(a + b * 4 + c.words + STOP, c.image)        # the fifth forces A out
    assert hazards(dev) == []


def _second_pool(c):
    """The same pool again, its OFM 0x2000 further (another kernel operation)."""
    from tb.ethos_u85.testlib.streams import dense_fmap_cmds
    r, off, lo, hi = rel(c, "ofm")
    return dense_fmap_cmds("OFM", (2, 2, 8), r, off + 0x2000) + c.words[-1:], (r, off + 0x2000)


def test_kernel_wait_n_and_two_newer():
    c = case("pool")
    k2, (r2, o2) = _second_pool(c)
    r, off, lo, hi = rel(c, "ofm")
    read1 = dma_cmds(r, off, r, off + 0x5000, 8, wait=True)      # reads K1's OFM
    read2 = dma_cmds(r2, o2, r2, o2 + 0x5000, 8, wait=True)      # reads K2's OFM
    n1 = enc(("NPU_OP_KERNEL_WAIT", dict(n=1)))
    dev, _ = tlm_run(c.words + k2 + n1 + read1 + STOP, c.image)  # K1 complete
    assert hazards(dev) == []
    dev, _ = tlm_run(c.words + k2 + n1 + read2 + STOP, c.image)  # K2 still remaining
    assert [h["hazard"] for h in hazards(dev)] == ["RAW"]
    dev, _ = tlm_run(c.words + k2 + read1 + STOP, c.image)       # two remaining: K1 too
    assert [h["hazard"] for h in hazards(dev)] == ["RAW"]
    dev, _ = tlm_run(c.words + k2 + k2 + read1 + STOP, c.image)  # two newer force K1 out
    assert hazards(dev) == []


@pytest.mark.parametrize("cond,expect", [("rf_true", []), ("always", ["RAW"])])
def test_branch_rf_true_waits(cond, expect):
    c = case("pool")
    r, off, lo, hi = rel(c, "ofm")
    read1 = dma_cmds(r, off, r, off + 0x5000, 8, wait=True)
    target = 4 * len(c.words) + 8                                # the next command
    br = enc(("NPU_OP_BRANCH", dict(branch_cond=getattr(isa.branch_cond, cond), branch_target=target)))
    assert len(br) == 2
    dev, _ = tlm_run(c.words + br + read1 + STOP, c.image)
    assert [h["hazard"] for h in hazards(dev)] == expect


def test_warm_runs_report_the_same():
    """Plans, segments and run traces (the device's defaults) report the events of the first,
    ordinary run on every later run of the same stream."""
    c = case("conv")
    dma, image = copy_in(c, "weights", wait=False)
    words = dma + c.words + STOP
    planned = _plans.STATS["NPU_OP_CONV", "planned"]
    dev, _ = tlm_run(words, image)
    first = hazards(dev)
    assert [h["hazard"] for h in first] == ["RAW"]
    for _ in range(3):
        dev.events.clear()
        dev.load_stream(STREAM_ADDR, words, qconfig=2)           # QREAD back to 0
        dev.start()
        assert dev.run().kind.name == "STOP"
        assert hazards(dev) == first
    assert not dev.hz_state[0] and not dev.hz_state[1]          # a stopped NPU: nothing outstanding
    assert _plans.STATS["NPU_OP_CONV", "planned"] > planned      # the later runs were warm


# ---------------------------------------------------------------- npu-tlm run and the Python API
def _race_model(path, wait: bool):
    """A Vela-like model (tests/ethos_u85/support): the DMA copies the input (scratch+1024) to the
    output (scratch+0), then a 1x1 max pool reads the output and writes the input's place. Without
    an NPU_OP_DMA_WAIT between them the pool reads bytes the DMA may not have written yet (RAW);
    the sequential result (output = input) is one of the outcomes."""
    import numpy as np

    from tb.ethos_u85.testlib.streams import dense_fmap_cmds, kernel_cmds
    from tests.ethos_u85.support.cli_models import IN_OFFSET, IN_SHAPE, copy_model, dma_copy_stream
    n = int(np.prod(IN_SHAPE))
    copy = dma_copy_stream(1, IN_OFFSET, 1, 0, n)[:-len(isa.encode("NPU_OP_STOP", mask=0xFFFF))]
    if not wait:
        copy = copy[:-len(isa.encode("NPU_OP_DMA_WAIT"))]
    pool = (dense_fmap_cmds("IFM", IN_SHAPE[1:], 1, 0) + dense_fmap_cmds("OFM", IN_SHAPE[1:], 1, IN_OFFSET)
            + kernel_cmds(1, 1)
            + enc(("NPU_SET_OFM_SCALE", dict(scale=1, shift=0, round_mode=1)),
                  ("NPU_SET_ACC_FORMAT", dict(acc_format=0, acc_input=0, acc_output=0, microblock=1)),
                  ("NPU_OP_POOL", dict(pooling_mode=0))))
    stream = copy + pool + isa.encode("NPU_OP_STOP", mask=0xFFFF)
    return copy_model(path, stream), 4 * len(copy) + 4 * len(pool) - 4, 4 * (len(copy) - (1 if wait else 0)) - 4


def test_cli_warning_strict_and_api(tmp_path, capsys):
    import numpy as np

    from tlm.core import cli
    from tlm.ethos_u85.runner import RunError, run_model
    x = np.random.default_rng(7).integers(-128, 128, (1, 8, 8, 16)).astype(np.int8)
    np.save(tmp_path / "x.npy", x)
    model, pool_off, dma_off = _race_model(tmp_path / "race_vela.npz", wait=False)
    out = tmp_path / "o.npz"
    rc = cli.main(["run", str(model), "--input", str(tmp_path / "x.npy"), "--output", str(out)])
    o, err = capsys.readouterr()
    err = err.splitlines()
    # one line per kind: the pool reads what the DMA writes (RAW) and writes what it reads (WAR)
    assert rc == 0 and len(err) == 2, err
    for line, typ in zip(err, ("RAW", "WAR")):
        assert line.startswith(f"npu-tlm: warning: {model}: UNPREDICTABLE at command offset 0x{pool_off:x} "
                               f"(NPU_OP_POOL): {typ} hazard: NPU_OP_DMA_START at 0x{dma_off:x}"), err
    assert np.array_equal(np.load(out)["output0"], x)             # the sequential outcome
    out.unlink()
    rc = cli.main(["run", str(model), "--input", str(tmp_path / "x.npy"), "--output", str(out), "--strict"])
    _, err2 = capsys.readouterr()
    assert rc == 1 and not out.exists() and "--strict" in err2.splitlines()[-1]
    # the Python API: the events with the result; strict=True raises RunError with the warning
    r = run_model(model, [x])
    assert [(u["kind"], u["hazard"], u["offset"], u["other_offset"]) for u in r.unpredictable] == [
        ("hazard", "RAW", pool_off, dma_off), ("hazard", "WAR", pool_off, dma_off)]
    assert [str(w) for w in r.warnings] == [e[len(f"npu-tlm: warning: {model}: "):] for e in err]
    with pytest.raises(RunError) as e:
        run_model(model, [x], strict=True)
    assert e.value.kind == "strict" and "RAW hazard" in str(e.value.warnings[0])
    # the same stream with its NPU_OP_DMA_WAIT: nothing
    good, _, _ = _race_model(tmp_path / "good_vela.npz", wait=True)
    r = run_model(good, [x], strict=True)
    assert r.unpredictable == [] and r.warnings == [] and np.array_equal(r.outputs[0], x)


def test_chain_counts_as_one_operation():
    """POOL (OFM into chaining FIFO 1) -> ELEMENTWISE add (IFM from FIFO 1) is one kernel
    operation: with one more op after it, the chain (and its first op's IFM) is still
    remaining; a second newer op forces it out."""
    from tb.ethos_u85.testlib.streams import dense_fmap_cmds
    c = case("pool")
    ri, io, ilo, ihi = rel(c, "ifm")
    ro, oo, olo, ohi = rel(c, "ofm")
    pool = c.words[:-1]
    chained_pool = pool + enc(("NPU_SET_OFM_PRECISION", dict(activation_type=1, activation_precision=0,
                                                             activation_format=0, activation_storage=2,
                                                             scale_mode=1)),
                              ("NPU_SET_OFM_REGION", dict(region=1))) + c.words[-1:]
    ew = (dense_fmap_cmds("IFM2", (2, 2, 8), ro, oo + 0x100) + dense_fmap_cmds("OFM", (2, 2, 8), ro, oo + 0x200)
          + enc(("NPU_SET_IFM_PRECISION", dict(activation_type=1, activation_precision=0, activation_format=0,
                                               activation_storage=2)),
                ("NPU_SET_IFM_REGION", dict(region=1)),
                ("NPU_SET_IFM_SCALE", dict(scale=1, shift=0)), ("NPU_SET_IFM2_SCALE", dict(scale=1, shift=0)),
                ("NPU_SET_OFM_SCALE", dict(scale=1, shift=0, round_mode=1)),
                ("NPU_OP_ELEMENTWISE", dict(elementwise_mode=1))))
    # an ordinary pool again (its IFM back in memory), IFM and OFM elsewhere
    other = (c.words[:-1] + dense_fmap_cmds("IFM", (4, 4, 8), ri, io + 0x800)
             + dense_fmap_cmds("OFM", (2, 2, 8), ro, oo + 0x300)
             + c.words[-1:])
    write_ifm = dma_cmds(ri, io + 0x4000, ri, io, 8, wait=True)          # WAR with the chain's pool
    image = dict(c.image)
    image[olo + 0x100] = bytes(32)
    dev, stop = tlm_run(chained_pool + ew + other + write_ifm + STOP, image)
    assert stop.kind.name == "STOP" and dev.op_state.chain_length == 0
    assert not [d for e, d in dev.events if e == "unpredictable" and d.get("kind") != "hazard"], dev.events
    hz = hazards(dev)
    assert [(h["hazard"], h["other_offset"], h["lo"]) for h in hz] == [("WAR", 4 * (len(chained_pool) - 1), ilo)]
    dev, _ = tlm_run(chained_pool + ew + other + other + write_ifm + STOP, image)
    assert hazards(dev) == []


def test_footprint_overlap_against_byte_sets():
    """memory.merged_intervals and hazards._overlap on random runs against Python sets of
    bytes (seed printed)."""
    import numpy as np

    from tlm.ethos_u85 import hazards as hz
    from tlm.ethos_u85.memory import merged_intervals
    seed = 3434
    print("seed", seed)
    rng = np.random.default_rng(seed)
    for _ in range(300):
        runs = [[(int(a), int(a + n)) for a, n in zip(rng.integers(0, 200, k), rng.integers(0, 12, k))]
                for k in rng.integers(0, 8, 2)]
        sets = [{b for lo, hi in r for b in range(lo, hi)} for r in runs]
        (alo, ahi), (blo, bhi) = [merged_intervals([(np.array([x[0] for x in r], dtype=np.int64),
                                                     np.array([x[1] - x[0] for x in r], dtype=np.int64))])
                                  for r in runs]
        assert {b for lo, hi in zip(alo.tolist(), ahi.tolist()) for b in range(lo, hi)} == sets[0]
        assert all(ahi[:-1] < alo[1:])                             # merged: disjoint, not touching
        got = hz._overlap(alo, ahi, blo, bhi)
        common = sets[0] & sets[1]
        if not common:
            assert got is None
            continue
        lo, hi, total = got
        assert total == len(common) and lo == min(common) and set(range(lo, hi)) <= common
