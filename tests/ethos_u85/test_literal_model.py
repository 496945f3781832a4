"""The literal model (tlm.ethos_u85.literal) as the bench's reference on DUT=tlm: a bug planted
in the TLM's fast path (tests/ethos_u85/support/planted.py, behind the pins through
``TB_DEVICE_FACTORY``) makes test_random_ops fail, naming the operation. Icarus; about a
minute of simulation."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tb.core import simtools
from tests.support import tool_missing
from tlm.ethos_u85.literal import LITERAL_OPS, MISSING, literal_device
from tlm.ethos_u85.ops import KERNEL_OP_SPECS

REPO = Path(__file__).resolve().parents[2]


def test_literal_device_is_all_literal():
    dev = literal_device("ethos-u85-256")
    assert MISSING == () and set(LITERAL_OPS) == set(KERNEL_OP_SPECS)
    assert all(dev.kernel_ops[n] is s.reference and s.reference is not s.fn for n, s in KERNEL_OP_SPECS.items())
    assert dev.reference_paths and dev.dataport.reference and not dev.memory.batching


def test_planted_fast_path_bug_fails_random_ops():
    reason = simtools.sim_problem("icarus")
    if reason:
        tool_missing(reason)
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["TB_DEVICE_FACTORY"] = "tests.ethos_u85.support.planted:shr_off_by_one"
    p = subprocess.run([sys.executable, "-m", "tb.core.run", "--device", "ethos-u85", "--sim", "icarus",
                        "--dut", "tlm", "--seed", "1", "--tests", "test_random_ops/backpressure=none$"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    out = p.stdout + p.stderr
    tail = "\n".join(ln for ln in out.splitlines() if ln.startswith("tb.run"))
    assert p.returncode != 0, tail
    assert re.search(r"tb\.run: 1 tests, 1 failed", p.stdout), tail
    fails = re.findall(r"^tb\.run: FAIL (\S+): (.*)$", p.stdout, re.M)
    assert len(fails) == 1 and fails[0][0].endswith("test_random_ops/backpressure=none"), tail
    assert "NPU_OP_ELEMENTWISE" in fails[0][1], tail


# ---- the literal model's DMA (tlm.ethos_u85.dma_reference.dma_start) ------------------------------
def _dma_case(seed: int) -> dict:
    """Random NPU_SET_DMA0_* values: 1D/2D/3D, negative strides, overlapping source and
    destination, gather/scatter, LUT destinations."""
    import numpy as np
    rng = np.random.default_rng(seed)
    mode = int(rng.integers(0, 3))
    kind = rng.choice(["plain", "plain", "gather", "scatter", "lut", "overlap"])
    lut = kind == "lut"
    length = 16 * int(rng.integers(1, 5)) if lut else int(rng.integers(0, 40))
    size0, size1 = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    s0 = [int(rng.integers(-80, 80)) for _ in range(2)]
    s1 = [int(rng.integers(-600, 600)) for _ in range(2)]
    if lut:
        s0[1], s1[1] = 16 * int(rng.integers(0, 8)), 16 * int(rng.integers(0, 64))   # some leave the LUT RAM
    kw = dict(SRC_REGION__region=1, SRC_REGION__stride_mode=mode,
              DST_REGION__region=1 if kind == "overlap" else 2, DST_REGION__region_mode=int(lut),
              SRC__addr=4096 + int(rng.integers(0, 64)),
              DST__addr=16 * int(rng.integers(0, 128)) if lut else 4096 + int(rng.integers(0, 300)),
              LEN__addr=length, SIZE0__size=size0, SIZE1__size=size1,
              SRC_STRIDE0__addr=s0[0] & ((1 << 40) - 1), SRC_STRIDE1__addr=s1[0] & ((1 << 40) - 1),
              DST_STRIDE0__addr=s0[1] & ((1 << 40) - 1), DST_STRIDE1__addr=s1[1] & ((1 << 40) - 1),
              IDX_REGION__region=3, IDX__addr=4 * int(rng.integers(0, 8)), IDX_MAX__idx_max=int(rng.integers(0, 12)),
              IDX_SKIP1__addr=4 * int(rng.integers(-2, 3)) & ((1 << 40) - 1))
    if kind in ("gather", "scatter"):
        kw[("SRC" if kind == "gather" else "DST") + "_REGION__idx_mode"] = 1
    return kw


def _dma_run(kw: dict, seed: int, start, policy=None):
    """Run *start* (a DMA device op) on a fresh memory; (bytes of the three regions, LUT,
    result or exception text)."""
    import numpy as np
    from tests.ethos_u85.test_dma import FakeRF
    from tlm.ethos_u85.memory import DataPort, Interface, Memory, RegionRoute
    rng = np.random.default_rng(seed)
    bases = {1: 0x10_0000, 2: 0x20_0000, 3: 0x30_0000}
    m = Memory()
    m.write(bases[1], rng.integers(0, 256, 1 << 14, dtype=np.uint8))
    m.write(bases[2], rng.integers(0, 256, 1 << 14, dtype=np.uint8))
    m.write(bases[3], rng.integers(-2, 14, 64).astype("<i4").tobytes())
    port = DataPort(m, lambda r: RegionRoute(bases.get(r, 0), Interface.ext, 0, 0, 0))
    lut = rng.integers(0, 256, 2048, dtype=np.uint8)
    try:
        res = start(FakeRF(**kw), port, lut=lut, policy=policy)
    except Exception as e:  # noqa: BLE001 - the two ops must fail alike
        res = f"{type(e).__name__}"
    return [m.read(b, 1 << 14) for b in bases.values()], lut.tobytes(), res


def _dma_differences(seeds, fast, policy=None) -> list:
    from tlm.ethos_u85 import dma_reference
    bad = []
    for seed in seeds:
        kw = _dma_case(seed)
        got, want = _dma_run(kw, seed, fast, policy), _dma_run(kw, seed, dma_reference.dma_start, policy)
        if got != want:
            bad.append((seed, kw, got[2], want[2]))
    return bad


def test_literal_dma_equals_the_fast_dma():
    """The literal model's DMA (the pseudocode, line by line) and the TLM's vectorised
    dma_start move the same bytes, fill the LUT alike and fail alike on 300 random transfers
    (seeds 0..299)."""
    from tlm.ethos_u85 import dma_reference
    from tlm.ethos_u85.ops.dma import dma_start
    assert literal_device().dma_op is dma_reference.dma_start
    seeds = range(300)
    print("seeds", seeds)
    kinds = {_dma_case(s)["SRC_REGION__stride_mode"] for s in seeds}
    assert kinds == {0, 1, 2}
    bad = _dma_differences(seeds, dma_start)
    assert not bad, f"{len(bad)} differ; first: {bad[0]}"
    # small budgets: both refuse the same transfers (BudgetExceeded before anything moves)
    from tlm.ethos_u85.config import Policy
    small = Policy(dma_max_bytes=200, dma_max_lines=8, dma_max_indexed_lines=6, dma_max_pages=1)
    refused = sum(_dma_run(_dma_case(s), s, dma_start, small)[2] == "BudgetExceeded" for s in seeds)
    assert 30 < refused < 270, refused
    bad = _dma_differences(seeds, dma_start, small)
    assert not bad, f"{len(bad)} differ under small budgets; first: {bad[0]}"


def test_planted_dma_difference_is_caught():
    """A fast DMA that drops the last line of a 2D/3D transfer differs from the literal one."""
    from tlm.ethos_u85.ops.dma import dma_start

    def planted(rf, port, lut=None, policy=None):
        class Short:
            def field(self, cmd, fld):
                v = rf.field(cmd, fld)
                return v - 1 if (cmd, fld) == ("NPU_SET_DMA0_SIZE0", "size") and v > 1 else v
        return dma_start(Short(), port, lut=lut, policy=policy)
    bad = _dma_differences(range(60), planted)
    assert len(bad) >= 5, bad
