"""The compiled computes of operation plans (tlm.ethos_u85.ops.compiled, numba) against the
literal pseudocode (``arith.rounded_shift_right_ref`` on Python ints, sign_extend, the
int32_t cast, the clamp, truncation) and against the numpy steps they replace
(``common.fused_epilogue``, the plans' output stage), on random cases (seeds printed), and
whole networks with the compiled computes on and off: the same outputs, and compiled
computes actually built.

numba is a dependency: without it the plans keep their numpy computes, and this file skips
locally and fails under CI=true (tests.support.tool_missing).
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from tests.support import tool_missing
from tlm.ethos_u85 import arith
from tlm.ethos_u85.ops import common, compiled, plan

SEED = int(os.environ.get("TLM_TEST_SEED", "20261126"))
MODES = [int(m) for m in arith.RoundMode]


@pytest.fixture(autouse=True)
def _numba():
    if not compiled.available():
        tool_missing(f"compiled plan computes: {compiled.missing_reason()}")


def _wrap(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _trunc(v: int, odt: np.dtype) -> int:
    """truncate() into odt: its low bits."""
    bits = 8 * odt.itemsize
    return _wrap(v, bits) if odt.kind == "i" else v % (1 << bits)


def _rsr(p: int, shift: int, mode: int, dbl: int) -> int:
    return arith.rounded_shift_right_ref(p, shift, mode, dbl)


def test_numba_present_and_not_imported_by_tlm():
    import subprocess
    import sys
    code = "import sys, tlm, tlm.ethos_u85.runner; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"                       # import tlm compiles (and imports) nothing
    assert compiled.available()


@pytest.mark.parametrize("case", range(24))
def test_pointwise_against_literal_and_fused_epilogue(case):
    seed = SEED + case
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    idt = np.dtype(rng.choice(["i1", "i2", "u1"]))
    odt = np.dtype(rng.choice(["i1", "i2", "u1", "i4"]))
    H, W = int(rng.integers(1, 3)), int(rng.integers(1, 4))
    K, N = int(rng.integers(1, 40)), int(rng.integers(1, 24))
    info = np.iinfo(idt)
    x = rng.integers(info.min, int(info.max) + 1, (H, W, K)).astype(idt)
    izp = int(rng.integers(info.min, int(info.max) + 1)) if case % 3 else 0
    w = rng.integers(-128, 128, (N, K)).astype(np.int64)
    bits = int(rng.choice([32, 40, 48]))
    bias = rng.integers(-(1 << 34), 1 << 34, N) if case % 4 == 0 else rng.integers(-(1 << 20), 1 << 20, N)
    scale = rng.integers(0, 1 << min(31, 62 - bits), N)   # |a * scale| < 2**62
    shift = rng.integers(0, 50, N)
    mode, dbl = int(rng.choice(MODES)), int(rng.integers(0, 31))
    rp, rn = (v.astype(np.int64) for v in arith.round_terms(shift, mode, dbl))
    zp = int(rng.integers(-100, 100))
    oinfo = np.iinfo(odt)
    amin = int(rng.integers(oinfo.min, 1)) if oinfo.min < 0 else 0
    amax = int(rng.integers(1, min(int(oinfo.max), 1 << 20) + 1))
    clamp = bool(case % 5)
    cc = compiled.pointwise_compute(w, bias, scale, shift, rp, rn, izp, bits, clamp, amin - zp, amax - zp, zp, odt,
                                    (H, W, N), None)
    got = cc([x])
    # the literal steps per element (Python ints)
    want = np.empty((H, W, N), odt)
    for y in range(H):
        for xx in range(W):
            for n in range(N):
                acc = sum((int(x[y, xx, k]) - izp) * int(w[n, k]) for k in range(K))
                a = _wrap(acc + int(bias[n]), bits)
                p = a * int(scale[n])
                r = _rsr(p, int(shift[n]), mode, dbl)
                if clamp:
                    r = min(max(r, amin - zp), amax - zp)
                want[y, xx, n] = _trunc(r + zp, odt)
    assert np.array_equal(got, want), f"seed {seed}"
    # and the numpy epilogue, where it covers the case
    k = common.EpilogueConsts.__new__(common.EpilogueConsts)
    sc = type("S", (), {"bias": bias.astype(np.int64), "scale": scale.astype(np.int64),
                        "shift": shift.astype(np.int64)})
    common.EpilogueConsts.__init__(k, sc, N, mode, dbl, bits)
    accs = np.einsum("hwk,nk->hwn", x.astype(np.int64) - izp, w)
    ref = common.fused_epilogue(accs, int(np.abs(accs).max()), k, zp, amin, amax, clamp, odt)
    if ref is not None:
        assert np.array_equal(got, ref), f"seed {seed}"


_AF, _CR = arith.ActivationFunction, arith.ClipRange
_LUT_CASES = [(_AF.LUT_TANH, _CR.NONE, "i2"), (_AF.LUT_SIGMOID, _CR.NONE, "i2"), (_AF.LUT_S8_S8, _CR.B16, "i1"),
              (_AF.LUT_S8_S8, _CR.NONE, "i1"), (_AF.LUT_U8_U8, _CR.NONE, "u1"), (_AF.LUT_S16_S16, _CR.B16, "i2"),
              (_AF.LUT_S8_S16, _CR.NONE, "i2"), (_AF.LUT_S8_S32, _CR.B16, "i4")]


@pytest.mark.parametrize("case", range(2 * len(_LUT_CASES)))
def test_pointwise_lut_against_literal(case):
    """The 1x1 CONV kernel with a LUT activation (compiled.pointwise_compute(lut=...): a
    table over the clamp range, or over the low byte for an unclamped 8-bit-index function)
    against the literal steps: exact sum, bias and wrap, rounded shift, then
    arith.activation_ref (the int32_t cast with the zero point, the clamp, the LUT) and the
    truncation, on a random LUT RAM and random operands (seed printed)."""
    fn, clip, o = _LUT_CASES[case % len(_LUT_CASES)]
    seed = SEED + 800 + case
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    odt = np.dtype(o)
    act_type = arith.ActType.UNSIGNED if odt.kind == "u" else arith.ActType.SIGNED
    prec = {1: arith.Precision.B8, 2: arith.Precision.B16, 4: arith.Precision.B32}[odt.itemsize]
    lut = rng.integers(0, 256, 2048).astype(np.uint8).tobytes()
    H, W, K, N = 1, int(rng.integers(1, 3)), int(rng.integers(1, 40)), int(rng.integers(1, 24))
    x = rng.integers(-128, 128, (H, W, K)).astype(np.int8)
    izp = int(rng.integers(-128, 128))
    w = rng.integers(-128, 128, (N, K)).astype(np.int64)
    bits = int(rng.choice([32, 48]))
    bias = rng.integers(-(1 << 20), 1 << 20, N)
    scale = rng.integers(0, 1 << 30, N)
    shift = rng.integers(10, 40, N)
    mode, dbl = int(rng.choice(MODES)), int(rng.integers(0, 31))
    rp, rn = (v.astype(np.int64) for v in arith.round_terms(shift, mode, dbl))
    zraw = int(rng.integers(-100, 100)) & 0xFFFF if odt.kind == "i" else int(rng.integers(0, 100))
    lo16, hi16 = (-32768, 32767) if odt.kind == "i" else (0, 65535)
    amin = int(rng.integers(max(lo16, -3000), 1)) if odt.kind == "i" else int(rng.integers(0, 50))
    amax = int(rng.integers(1, 3000))
    kw = dict(precision=prec, act_type=act_type, zero_point=zraw, act_min=amin & 0xFFFF, act_max=amax & 0xFFFF,
              function=int(fn), clip_range=int(clip), table=0, lut=lut)
    zp = arith.ofm_activation_params(act_type, zraw, amin & 0xFFFF, amax & 0xFFFF)[0]
    if fn == _AF.LUT_TANH:
        m, tlo, thi = compiled.LUT_RANGE, -0x10000, 0xFFFF
    elif fn == _AF.LUT_SIGMOID:
        m, tlo, thi = compiled.LUT_RANGE, -0x1F000, 0x1EFFF
    elif clip == _CR.B16:
        m, tlo, thi = compiled.LUT_RANGE, amin, amax
    else:
        m, tlo, thi = compiled.LUT_BYTE, 0, 255
    table = arith.activation(np.arange(tlo, thi + 1) - zp, **kw).astype(odt)
    cc = compiled.pointwise_compute(w, bias, scale, shift, rp, rn, izp, bits, False, 0, 0, zp, odt, (H, W, N),
                                    None, lut=(m, table, tlo, thi))
    got = cc([x])
    want = np.empty((H, W, N), odt)
    for xx in range(W):
        for n in range(N):
            acc = sum((int(x[0, xx, k]) - izp) * int(w[n, k]) for k in range(K))
            r = _rsr(_wrap(acc + int(bias[n]), bits) * int(scale[n]), int(shift[n]), mode, dbl)
            want[0, xx, n] = arith.activation_ref(r, **kw)
    assert np.array_equal(got, want), f"seed {seed}"


def _stage_literal(acc, scale, shift, mode, dbl, zp, clo, chi, wrap32, table, odt):
    r = _rsr(acc * scale, shift, mode, dbl)
    if wrap32:
        v = _wrap(_wrap(r, 32) + zp, 32)
        if clo is not None:
            v = min(max(v, clo), chi)
    else:
        v = r + zp
        if clo is not None:
            v = min(max(v, clo), chi)
        if table is not None:
            return int(table[v - clo])
    return _trunc(v, odt)


@pytest.mark.parametrize("case", range(24))
def test_elementwise_against_literal(case):
    seed = SEED + 100 + case
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    mode = case % 5
    odt = np.dtype(rng.choice(["i1", "i2", "u1"]))
    shape = (int(rng.integers(1, 3)), int(rng.integers(1, 3)), int(rng.integers(1, 50)))
    a = rng.integers(-32768, 32768, shape).astype(np.int16)
    b = rng.integers(-32768, 32768, shape).astype(np.int16)
    if case % 7 == 3:
        a, b = a.astype(np.int64), b.astype(np.int64)   # FIFO operands: int64
    zpa, zpb = int(rng.integers(-50, 50)), int(rng.integers(-50, 50))
    oa = ob = -32768                                    # tables over the raw values
    ta = rng.integers(-(1 << 20), 1 << 20, 65536) if mode != compiled.MODE_MUL else None
    tb = rng.integers(-(1 << 20), 1 << 20, 65536) if mode != compiled.MODE_MUL else None
    scale, shift = int(rng.integers(1, 1 << 15)), int(rng.integers(1, 40))
    m, dbl = int(rng.choice(MODES)), int(rng.integers(0, 31))
    rp, rn = (int(v[0]) for v in arith.round_terms(np.array([shift]), m, dbl))
    zp = int(rng.integers(-100, 100))
    kind = case % 3                                     # 0 clamp, 1 LUT table, 2 int32 wrap
    table = None
    if kind == 1:
        clo, chi = -300, 300
        table = rng.integers(-128, 128, chi - clo + 1).astype(odt) if odt.kind == "i" else \
            rng.integers(0, 256, chi - clo + 1).astype(odt)
    else:
        info = np.iinfo(odt)
        clo, chi = int(info.min), int(info.max)
    wrap32 = kind == 2
    row = compiled.stage_row(scale, shift, rp, rn, zp, clo, chi, wrap32, table)
    cc = compiled.elementwise_compute(mode, ta, tb, oa, ob, zpa, zpb, row, table, odt, None)
    got = cc([a, b])
    want = np.empty(shape, odt)
    for i in np.ndindex(shape):
        va, vb = int(a[i]), int(b[i])
        if mode == compiled.MODE_MUL:
            acc = (va - zpa) * (vb - zpb)
        else:
            xa, xb = int(ta[va - oa]), int(tb[vb - ob])
            acc = [xa + xb, xa - xb, min(xa, xb), max(xa, xb)][mode]
        want[i] = _stage_literal(acc, scale, shift, m, dbl, zp, clo, chi, wrap32, table, odt)
    assert np.array_equal(got, want), f"seed {seed}"


_DIRECT = ["mul", "add", "sub", "min", "max", "lrelu", "abs", "clz", "shr", "shl", "lshr", "cmp_eq", "cmp_ne",
           "cmp_ge", "cmp_gt", "and", "or", "xor", "not", "and_not"]
_I32 = (-(1 << 31), (1 << 31) - 1)


def _direct_literal(name, a, b, mask, rm, dbl, wrap):
    """elementwise.compute's accumulator, literally (TRM 3.10.6, operands that scale_a /
    scale_b pass through; Python ints)."""
    s = b & 31
    acc = {"mul": lambda: a * b, "add": lambda: a + b, "sub": lambda: a - b, "min": lambda: min(a, b),
           "max": lambda: max(a, b), "lrelu": lambda: a, "abs": lambda: abs(a), "clz": lambda: arith.clz(a, 32),
           "shr": lambda: arith.rounded_shift_right_ref(a, s, rm, dbl),
           "shl": lambda: _wrap(a << s, 32) & mask, "lshr": lambda: (a & mask & 0xFFFFFFFF) >> s,
           "cmp_eq": lambda: -(a == b), "cmp_ne": lambda: -(a != b), "cmp_ge": lambda: -(a >= b),
           "cmp_gt": lambda: -(a > b), "and": lambda: a & b, "or": lambda: a | b, "xor": lambda: a ^ b,
           "not": lambda: ~a, "and_not": lambda: a & ~b}[name]()
    return _wrap(acc, 32) if wrap else acc


@pytest.mark.parametrize("name", _DIRECT)
@pytest.mark.parametrize("case", range(3))
def test_direct_elementwise_against_literal(name, case):
    """The elementwise kernel's direct case (compiled.direct_compute: 32-bit operands as they
    are, or a constant scalar operand, broadcast along axes of extent 1) against the literal
    accumulator and output stage, on random int32 operands with INT32_MIN / INT32_MAX, 0, +-1,
    equal pairs and shifts 0..31 mixed in: the accumulator's int32 wrap (a b32 mul's 64-bit
    product with scale 1), rounding modes, the OFM zero point, the clamp / int32 wrap."""
    seed = SEED + 300 + 17 * _DIRECT.index(name) + case
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    m = getattr(compiled, f"MODE_{name.upper()}")
    odt = np.dtype(rng.choice(["i1", "i2", "i4", "u1"]))
    n = int(rng.integers(40, 200))
    ends = np.array([_I32[0], _I32[1], _I32[0] + 1, _I32[1] - 1, 0, 1, -1, 31, 32])
    a = np.concatenate([np.repeat(ends, ends.size), rng.integers(*_I32, n, endpoint=True), rng.integers(-40, 40, n)])
    b = np.concatenate([np.tile(ends, ends.size), rng.integers(*_I32, n, endpoint=True), a[-n:]])  # (a == b)
    a, b = a.reshape(-1, 1, 1).astype(np.int32), b.reshape(-1, 1, 1).astype(np.int32)
    how = case % 3                                      # 0 two operands, 1 a scalar IFM2, 2 channel broadcast
    ka = kb = None
    if how == 1:
        kb = int(rng.integers(*_I32, endpoint=True))
        vals, bs = [a], np.full(a.shape, kb, np.int64)
    elif how == 2:
        a, b = a.reshape(1, 1, -1), b[:1]
        vals, bs = [a, b], np.broadcast_to(b, a.shape)
    else:
        vals, bs = [a.astype(np.int64), b], b      # (an int64 FIFO operand)
    zpa, zpb = (int(rng.integers(-3, 4)) for _ in range(2))
    wrap = name != "mul"
    mask = -1
    rm, dbl = int(rng.choice(MODES)), int(rng.integers(0, 31))
    rterms = arith.round_terms(np.arange(32), rm, dbl) if name == "shr" else None
    if wrap:                                            # rescale_mode global / none (shifts)
        scale, shift = (1, 0) if name in ("shr", "shl", "lshr") else (int(rng.integers(0, 1 << 31)),
                                                                     int(rng.integers(0, 64)))
    else:                                               # a b32 mul: shift_only, scale 1
        scale, shift = 1, int(rng.integers(0, 64))
    srm, sdbl = int(rng.choice(MODES)), int(rng.integers(0, 31))
    rp, rn = (int(v[0]) for v in arith.round_terms(np.array([shift]), srm, sdbl))
    zp = int(rng.integers(-100, 100))
    wrap32 = bool(rng.integers(0, 2))
    info = np.iinfo(odt)
    clo, chi = (int(info.min), int(info.max)) if rng.integers(0, 2) else (None, None)
    row = compiled.stage_row(scale, shift, rp, rn, zp, clo, chi, wrap32, None)
    cc = compiled.direct_compute(m, ka, kb, zpa, zpb, wrap, mask, rterms, row, None, odt, None)
    got = cc(vals)
    av = np.broadcast_to(a, np.broadcast_shapes(a.shape, bs.shape))
    want = np.empty(av.shape, odt)
    for i in np.ndindex(av.shape):
        x = int(av[i]) - zpa
        y = kb if kb is not None else int(bs[i]) - zpb
        acc = _direct_literal(name, x, y, mask, rm, dbl, wrap)
        want[i] = _stage_literal(acc, scale, shift, srm, sdbl, zp, clo, chi, wrap32, None, odt)
    assert got.dtype == odt and np.array_equal(got, want), f"seed {seed}: {np.argwhere(got != want)[:5]}"


def test_direct_elementwise_masks():
    """SHL / LSHR of 8- and 16-bit operands (unsigned b16 passes scale_a / scale_b through):
    the precision mask (E-16), against the literal accumulator."""
    seed = SEED + 700
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    row = compiled.stage_row(1, 0, 0, 0, 0, None, None, True, None)
    for name in ("shl", "lshr"):
        for mask in (0xFF, 0xFFFF, -1):
            a = rng.integers(0, 65536, (1, 3, 50)).astype(np.int64)
            b = rng.integers(-64, 64, (1, 3, 50)).astype(np.int64)
            cc = compiled.direct_compute(getattr(compiled, f"MODE_{name.upper()}"), None, None, 0, 0, True, mask,
                                         None, row, None, np.dtype("i4"), None)
            want = np.vectorize(lambda x, y: _wrap(_direct_literal(name, int(x), int(y), mask, 0, 0, True), 32))(a, b)
            assert np.array_equal(cc([a, b]), want), (name, mask)


def _lookup_case(seed: int, dtype, size: int, lo: int, shape: tuple):
    """A random table of *size* entries starting at input value *lo*, its compiled lookup
    and operands inside it (seed printed)."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    table = rng.integers(info.min, info.max + 1, size).astype(dtype)
    return rng, table, compiled.lookup_compute(table, lo, None), rng.integers(lo, lo + size, shape)


def test_lookup_and_out_of_table_declines():
    rng, table, cc, v = _lookup_case(SEED + 200, np.int16, 1000, -500, (2, 3, 7))
    assert np.array_equal(cc([v]), table[v + 500])
    v[1, 2, 3] = 500                                    # one past the table: declines, never reads outside
    with pytest.raises(compiled.Declined):
        cc([v])


def test_into_stores_all_or_nothing():
    """compute.into stores the OFM's bits into the page view (unsigned type of its width)
    and returns the values; a kernel that fails (an index outside its table) raises Declined
    and leaves the view unchanged, even when the failing element is the last one."""
    rng, table, cc, v = _lookup_case(SEED + 400, np.int8, 600, -300, (2, 2, 9))
    page = rng.integers(0, 256, 64).astype(np.uint8)
    before = page.copy()
    view = page[5:5 + v.size]
    out = cc.into([v], view)
    assert np.array_equal(out, table[v + 300])
    assert np.array_equal(view.view(np.int8), table[v + 300].reshape(-1))
    assert np.array_equal(page[:5], before[:5]) and np.array_equal(page[5 + v.size:], before[5 + v.size:])
    page[...] = before
    v[-1, -1, -1] = 300                                 # the last element: one past the table
    with pytest.raises(compiled.Declined):
        cc.into([v], view)
    assert np.array_equal(page, before)
    assert cc.into([v[:1]], view) is None               # another size: the caller stores


@pytest.mark.parametrize("name", ["tflm_micro_speech_lstm", "seanet_sub1", "add_int16", "mul_int16", "tanh_int16",
                                  "fc_64x32_pc"])
def test_network_same_with_compiled_computes_on_and_off(name):
    """A network's warm runs with the compiled computes on equal the ordinary path and the
    warm runs with them off (outputs, transaction log, cycles, PMU, events, registers,
    chaining state, LUT RAM), and compiled computes were built and used; then every output
    stage those plans built gives the same values through its compiled row."""
    from tests.ethos_u85.test_warm_paths import load, run
    from tlm.ethos_u85 import device

    vm, ins = load(name)
    ordinary = run(vm, ins, warm_paths=False)
    got = {}
    try:
        for on in (False, True):
            compiled.set_enabled(on)
            device.clear_warm_caches()
            runs = [run(vm, ins) for _ in range(3)]          # builds plans, records the trace, replays
            got[on] = (runs, plan.STATS["compiled", "built"], sum(n for k, n in plan.STATS.items()
                                                                  if k[1] == "planned"))
            stages = [v for v in plan._COMPUTES.values() if getattr(v, "row", None) is not None]
            for st in stages if on else ():
                probe, want = st.probe
                cc = compiled.elementwise_compute(compiled.MODE_MUL, None, None, 0, 0, 0, 0, st.row, st.table,
                                                  st.odt, None)
                out = cc([probe.reshape(-1, 1, 1), np.ones((probe.size, 1, 1), np.int64)])
                assert np.array_equal(out.reshape(-1), want.reshape(-1))
    finally:
        compiled.set_enabled(True)
        device.clear_warm_caches()
    for on in (False, True):
        for r in got[on][0]:
            assert r == ordinary
    assert got[False][1] == 0
    assert got[True][1] > 0 and got[True][2] > 0          # compiled computes built, plans ran


@pytest.mark.parametrize("case", range(30))
def test_direct_elementwise_plans_against_the_ordinary_and_literal_paths(case):
    """A 32-bit ELEMENTWISE op (random mode but div, tensor / channel-broadcast / scalar IFM2,
    INT32_MIN / INT32_MAX and equal pairs in the data, random OFM type, scale, rounding, zero
    point, clamp) run three times on one Device: the first runs build its plan, whose compute
    is the compiled direct kernel (compiled.direct_compute, checked against the numpy compute
    when built); the third, on other random data, goes through that plan and must equal the
    literal per-element loop (elementwise_ref) and a run without plans: OFM bytes and
    UNPREDICTABLE reports."""
    from tests.ethos_u85.test_ops_elementwise import M, REF_OPS, ew_bench, run_ew
    from tests.ethos_u85.support.opbench import unpredictable
    from tlm.ethos_u85 import device
    seed = SEED + 900 + case
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    names = [n for n in _DIRECT if n not in ("lrelu", "abs", "clz", "not")] if case % 4 else _DIRECT
    name = _DIRECT[case % len(_DIRECT)] if case < len(_DIRECT) else str(rng.choice(names))
    mode = M[name]
    unary = name in ("lrelu", "abs", "clz", "not")
    H, W, C = 1, int(rng.integers(1, 3)), int(rng.integers(2, 12))
    bm2 = 0 if unary else int(rng.choice([0, 4, 8]))
    odt = np.dtype(rng.choice([np.int8, np.uint8, np.int16, np.int32]))
    so = (1, int(rng.integers(0, 40))) if name == "mul" else (int(rng.integers(1, 1 << 30)),
                                                              int(rng.integers(0, 40)))
    regs = dict(shape=(H, W, C), out_dtype=odt, ofm_zp=int(rng.integers(-3, 3)) if odt != np.uint8 else 3,
                so=so, ofm_round=int(rng.integers(0, 6)), bm2=bm2, scalar=int(rng.integers(*_I32, endpoint=True)),
                clip=bool(rng.integers(0, 2)) and odt != np.int32)

    def data():
        a = rng.integers(*_I32, size=(H, W, C), endpoint=True)
        a.reshape(-1)[:2] = _I32
        b = rng.integers(*_I32, size=(H, W, 1 if bm2 == 4 else C), endpoint=True)
        b.reshape(-1)[-1] = a.reshape(-1)[-1]                   # an equal pair
        b.reshape(-1)[0] = _I32[int(rng.integers(0, 2))]
        if name in ("shr", "shl", "lshr"):
            b.reshape(-1)[1:] %= 40
        return ew_bench(a.astype(np.int32), None if unary or bm2 == 8 else b.astype(np.int32), **regs)

    device.clear_warm_caches()
    first = data()
    built = plan.STATS["compiled", "built"]
    d = run_ew(first, mode)
    assert plan.STATS["compiled", "built"] > built, f"no compiled compute built: {dict(plan.STATS)}"
    d = run_ew(first, mode, device=d)                   # (the key a run on this device leaves: built again)
    again = data()
    planned = plan.STATS["NPU_OP_ELEMENTWISE", "planned"]
    got = run_ew(again, mode, device=d)
    assert plan.STATS["NPU_OP_ELEMENTWISE", "planned"] == planned + 1, "the second run did not take the plan"
    out = again.output(got)
    ref = run_ew(again, mode, kernel_ops=REF_OPS)
    plain = run_ew(again, mode, plans=False)
    assert np.array_equal(out, again.output(ref)) and np.array_equal(out, again.output(plain)), f"seed {seed}"
    assert unpredictable(got)[-1:] == unpredictable(ref) == unpredictable(plain) == [], f"seed {seed}"
