"""tlm.ethos_u85.arith: hand-computed cases, TRM worked numbers, fast path vs literal pseudocode,
and TFLite reference-formula cross-checks.

Random tests use a fixed default seed (reproducible); set TLM_TEST_SEED to explore others.
The seed is printed (visible with ``pytest -s`` or in the failure report).
"""

import os

import numpy as np
import pytest

from tlm.ethos_u85.arith import (
    AccFormat,
    ActType,
    ClipRange,
    Precision,
    RescaleMode,
    ScaleMode,
    Unpredictable,
    accumulate,
    activation,
    activation_ref,
    avgpool_scale,
    clamp,
    clz,
    div_trunc,
    ifm_zero_point,
    logical_shift_right,
    lut_views,
    pack_interp_lut,
    rescale,
    rescale_ref,
    rounded_shift_right,
    rounded_shift_right_ref,
    saturate,
    scale_input,
    scale_input_ref,
    shift_left,
    sign_extend,
    truncate,
    zero_extend,
)
from tlm.ethos_u85.arith import ActivationFunction as AF
from tlm.ethos_u85.arith import RoundMode as RM

SEED = int(os.environ.get("TLM_TEST_SEED", "850131"))
ALL_MODES = [RM.DOUBLE_SYMMETRIC, RM.NATURAL, RM.DOUBLE_ASYMMETRIC, RM.SYMMETRIC,
             RM.TRUNCATE_TO_ZERO, RM.TRUNCATE_TO_LOWER]


@pytest.fixture
def rng(request):
    seed = SEED + sum(map(ord, request.node.name))
    print(f"\n{request.node.name}: seed {seed} (TLM_TEST_SEED={SEED})")
    return np.random.default_rng(seed)


def mixed_int64(rng, n):
    """int64 values over many magnitudes, including the extremes."""
    bits = rng.integers(0, 64, n)
    mag = rng.integers(0, 1 << 62, n, dtype=np.int64) >> (62 - np.minimum(bits, 62))
    v = np.where(rng.integers(0, 2, n) == 1, -mag, mag)
    edge = np.array([0, 1, -1, 2**62, -2**62, 2**63 - 1, -2**63, 2**31, -2**31, 2**47, -2**47], dtype=np.int64)
    return np.concatenate([edge, v.astype(np.int64)])


# ---------------------------------------------------------------- data types
def test_sign_zero_extend_truncate_match_python():
    vals = [0, 1, -1, 127, 128, 255, 256, -129, 2**31, -2**31 - 1, 2**47, 2**63 - 1, -2**63]
    for n in (8, 16, 32, 48, 64):
        for v in vals:
            m = v & ((1 << n) - 1)
            se = m - (1 << n) if m >> (n - 1) else m
            assert sign_extend(v, n) == se
            assert zero_extend(v, n) == m
            assert truncate(v, n, ActType.SIGNED) == se
            assert truncate(v, n, ActType.UNSIGNED) == m
        arr = np.array(vals, dtype=np.int64)
        assert sign_extend(arr, n).tolist() == [sign_extend(v, n) for v in vals]
        if n < 64:
            assert zero_extend(arr, n).tolist() == [zero_extend(v, n) for v in vals]
    assert zero_extend(np.array([-1], dtype=np.int64), 64).tolist() == [2**64 - 1]


def test_clz_hand_and_vectorised(rng):
    assert clz(0, 32) == 32 and clz(1, 32) == 31 and clz(0x80000000, 32) == 0
    assert clz(-1, 32) == 0                      # negative int32 seen as unsigned
    assert clz(0xFF, 8) == 0 and clz(0x7F, 8) == 1 and clz(0, 64) == 64
    v = np.concatenate([mixed_int64(rng, 3000), np.array([1 << k for k in range(63)], dtype=np.int64)])
    for n in (8, 16, 32, 64):
        assert clz(v, n).tolist() == [clz(int(x), n) for x in v]


def test_accumulate_wraps():
    assert accumulate(2**31 - 1, 1, AccFormat.I32) == -2**31
    assert accumulate(-2**31, -1, AccFormat.I32) == 2**31 - 1
    assert accumulate(2**31 - 1, 1, AccFormat.I48) == 2**31
    assert accumulate(2**47 - 1, 1, AccFormat.I48) == -2**47
    a = np.array([2**31 - 1, 2**47 - 1, -5], dtype=np.int64)
    assert accumulate(a, 1, AccFormat.I32).tolist() == [-2**31, 0, -4]     # 2**47 wraps to 0
    assert accumulate(a, 1, AccFormat.I48).tolist() == [2**31, -2**47, -4]


def test_saturate():
    assert saturate(300, 8, ActType.SIGNED) == 127 and saturate(-300, 8, ActType.SIGNED) == -128
    assert saturate(-5, 8, ActType.UNSIGNED) == 0 and saturate(70000, 16, ActType.UNSIGNED) == 65535
    assert saturate(np.array([2**40, -2**40, 7]), 32, ActType.SIGNED).tolist() == [2**31 - 1, -2**31, 7]


def test_clamp():
    assert clamp(5, 0, 3) == 3 and clamp(-5, 0, 3) == 0 and clamp(2, 0, 3) == 2
    assert clamp(np.array([-9, 1, 9]), -2, 2).tolist() == [-2, 1, 2]
    # literal if/else order when acc_min > acc_max (e.g. ACTIVATION_MIN/MAX read with the other signedness)
    assert clamp(np.array([-9, 1, 9]), 5, 2).tolist() == [clamp(v, 5, 2) for v in (-9, 1, 9)] == [5, 5, 2]


# ---------------------------------------------------------------- rounded_shift_right
# Hand-computed: x / 2 for x = 5,-5,6,-6,7,-7 (shift 1: D = 0 because 1 > 31 - dbl_rnd is false).
HAND_SHIFT1 = {
    RM.NATURAL:           [3, -2, 3, -3, 4, -3],   # half toward +inf
    RM.SYMMETRIC:         [3, -3, 3, -3, 4, -4],   # half away from zero
    RM.TRUNCATE_TO_ZERO:  [2, -2, 3, -3, 3, -3],
    RM.TRUNCATE_TO_LOWER: [2, -3, 3, -3, 3, -4],
    RM.DOUBLE_SYMMETRIC:  [3, -2, 3, -3, 4, -3],   # == natural while D == 0
    RM.DOUBLE_ASYMMETRIC: [3, -2, 3, -3, 4, -3],
}


@pytest.mark.parametrize("mode", ALL_MODES)
def test_rsr_hand_shift1(mode):
    xs = [5, -5, 6, -6, 7, -7]
    assert [rounded_shift_right_ref(x, 1, mode, 0) for x in xs] == HAND_SHIFT1[mode]
    assert rounded_shift_right(np.array(xs), 1, mode, 0).tolist() == HAND_SHIFT1[mode]


def test_rsr_hand_double_round():
    # shift 32, dbl_rnd 0: D = 1<<30.  acc = 2**30 is 0.25 in units of 2**32.
    # Single rounding: 0.  Double: 2**30 rounds up to 2**31 at the first point, which rounds up to 1.
    cases = [  # (acc, shift, dbl_rnd, {mode: expected})
        (2**30, 32, 0, {RM.NATURAL: 0, RM.DOUBLE_SYMMETRIC: 1, RM.DOUBLE_ASYMMETRIC: 1, RM.SYMMETRIC: 0}),
        # acc = -0.75 * 2**32: DS: R = 2**31 - 2**30 -> (-2**31) >> 32 = -1; DA: R = 3*2**30 -> 0
        (-3 * 2**30, 32, 0, {RM.DOUBLE_SYMMETRIC: -1, RM.DOUBLE_ASYMMETRIC: 0, RM.NATURAL: -1,
                             RM.SYMMETRIC: -1, RM.TRUNCATE_TO_ZERO: 0, RM.TRUNCATE_TO_LOWER: -1}),
        # shift 31, dbl_rnd 0: 31 > 31 is false -> D = 0, DS == natural
        (2**29, 31, 0, {RM.DOUBLE_SYMMETRIC: 0, RM.NATURAL: 0}),
        (2**30, 31, 0, {RM.DOUBLE_SYMMETRIC: 1, RM.NATURAL: 1}),
        # dbl_rnd 1, shift 31: 31 > 30 -> D = 1<<29.  acc = 2**29: (2**29 + 2**30 + 2**29) >> 31 = 1
        (2**29, 31, 1, {RM.DOUBLE_SYMMETRIC: 1, RM.DOUBLE_ASYMMETRIC: 1, RM.NATURAL: 0}),
        # dbl_rnd 30, shift 2: 2 > 1 -> D = 1.  acc = 1: (1 + 2 + 1) >> 2 = 1 ; natural 0
        (1, 2, 30, {RM.DOUBLE_SYMMETRIC: 1, RM.NATURAL: 0}),
        # shift 0 returns acc unchanged whatever the mode / dbl_rnd
        (-12345, 0, 30, {m: -12345 for m in ALL_MODES}),
        # extremes (the TRM's integer R / D are unbounded)
        (2**63 - 1, 63, 0, {RM.NATURAL: 1, RM.TRUNCATE_TO_LOWER: 0, RM.DOUBLE_ASYMMETRIC: 1}),
        (-2**63, 63, 0, {RM.TRUNCATE_TO_ZERO: -1, RM.NATURAL: -1, RM.SYMMETRIC: -1}),
        (-2**62, 63, 0, {RM.NATURAL: 0, RM.SYMMETRIC: -1, RM.TRUNCATE_TO_ZERO: 0, RM.TRUNCATE_TO_LOWER: -1,
                         RM.DOUBLE_SYMMETRIC: -1, RM.DOUBLE_ASYMMETRIC: 0}),
    ]
    for acc, sh, dr, exp in cases:
        for mode, e in exp.items():
            assert rounded_shift_right_ref(acc, sh, mode, dr) == e, (acc, sh, dr, mode)
            assert int(rounded_shift_right(np.int64(acc), sh, mode, dr)) == e, (acc, sh, dr, mode)


@pytest.mark.parametrize("mode", ALL_MODES)
def test_rsr_vectorised_matches_literal(rng, mode):
    acc = mixed_int64(rng, 4000)
    for dr in (0, 1, 7, 15, 29, 30):
        for sh in list(range(0, 64, 3)) + [31, 32, 33, 62, 63]:
            got = rounded_shift_right(acc, sh, mode, dr)
            exp = [rounded_shift_right_ref(int(a), sh, mode, dr) for a in acc[:600]]
            assert got[:600].tolist() == exp, (sh, dr)
        # per-element shift array (elementwise SHR)
        shifts = rng.integers(0, 64, acc.size)
        got = rounded_shift_right(acc, shifts, mode, dr)
        exp = [rounded_shift_right_ref(int(a), int(s), mode, dr) for a, s in zip(acc, shifts)]
        assert got.tolist() == exp, dr


def test_rsr_double_round_is_two_roundings(rng):
    """Digest 3.5 note: for acc >= 0, double_symmetric = round half-up at 2**(31-dbl_rnd),
    then round the remaining bits half-up."""
    acc = [abs(int(v)) >> 1 for v in mixed_int64(rng, 3000)]
    arr = np.array(acc, dtype=np.int64)
    for dr in (0, 3, 30):
        for sh in range(32 - dr, 64):
            first = 31 - dr
            rest = sh - first
            expect = []
            for a in acc:
                step1 = (a + (1 << (first - 1))) >> first
                expect.append(step1 if rest == 0 else (step1 + (1 << (rest - 1))) >> rest)
            assert rounded_shift_right(arr, sh, RM.DOUBLE_SYMMETRIC, dr).tolist() == expect, (dr, sh)


def test_rsr_unpredictable_args():
    with pytest.raises(Unpredictable):
        rounded_shift_right(np.array([1]), 64, RM.NATURAL, 0)
    with pytest.raises(Unpredictable):
        rounded_shift_right(np.array([1]), 3, RM.NATURAL, 31)
    with pytest.raises(Unpredictable):
        rounded_shift_right(np.array([1]), 3, 6, 0)
    with pytest.raises(Unpredictable):
        rounded_shift_right_ref(1, -1, RM.NATURAL, 0)


# ---------------------------------------------------------------- TFLite cross-checks
def _srdhm(a, b):               # gemmlowp SaturatingRoundingDoublingHighMul
    if a == b == -2**31:
        return 2**31 - 1
    ab = a * b
    nudge = (1 << 30) if ab >= 0 else (1 - (1 << 30))
    n = ab + nudge
    q = abs(n) // (1 << 31)     # C '/' truncates toward zero
    return q if n >= 0 else -q


def _rdbp(x, e):                # gemmlowp RoundingDivideByPOT
    mask = (1 << e) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> e) + (1 if remainder > threshold else 0)


def _tfl_mbqm_double(x, qm, shift):      # TFLite MultiplyByQuantizedMultiplier (double rounding)
    left, right = max(shift, 0), max(-shift, 0)
    return _rdbp(_srdhm(x * (1 << left), qm), right)


def _tfl_mbqm_single(x, qm, shift):      # TFLite MultiplyByQuantizedMultiplier, TFLITE_SINGLE_ROUNDING
    total_shift = 31 - shift
    rnd = 1 << (total_shift - 1)
    r = (x * qm + rnd) >> total_shift
    return max(-2**31, min(2**31 - 1, r))


def test_tflite_multiply_by_quantized_multiplier(rng):
    """double_symmetric (dbl_rnd 0) == TFLite's double-rounding MultiplyByQuantizedMultiplier;
    natural == its single-rounding variant; scale = quantized_multiplier, shift = 31 - shift."""
    n = 20000
    x = np.concatenate([rng.integers(-2**31, 2**31, n // 2), rng.integers(-3000, 3000, n // 2)])
    qm = rng.integers(2**30, 2**31, n)
    sh = rng.integers(-31, 1, n)
    got_d = rescale(x, qm, 31 - sh, RM.DOUBLE_SYMMETRIC, 0)
    got_n = rescale(x, qm, 31 - sh, RM.NATURAL, 0)
    exp_d = [_tfl_mbqm_double(int(a), int(m), int(s)) for a, m, s in zip(x, qm, sh)]
    exp_n = [_tfl_mbqm_single(int(a), int(m), int(s)) for a, m, s in zip(x, qm, sh)]
    assert got_d.tolist() == exp_d
    assert np.clip(got_n, -2**31, 2**31 - 1).tolist() == exp_n
    # a left shift (TFLite shift > 0) folds into a smaller NPU shift when x << shift fits int32
    x = rng.integers(-2**20, 2**20, 5000)
    qm = rng.integers(2**30, 2**31, 5000)
    for s in (1, 5, 10):
        got = rescale(x, qm, 31 - s, RM.DOUBLE_SYMMETRIC, 0)
        assert got.tolist() == [_tfl_mbqm_double(int(a), int(m), s) for a, m in zip(x, qm)]
    # hand-computed: 100 * 0.75 = 75.  1 * 0.5 * 2**-1 = 0.25: the double rounding first rounds
    # 0.5 (at 2**31) up to 1, then 1/2 up to 1; single rounding gives 0.
    assert int(rescale(np.int64(100), 3 << 29, 31, RM.DOUBLE_SYMMETRIC)) == 75
    assert int(rescale(np.int64(1), 1 << 30, 32, RM.DOUBLE_SYMMETRIC)) == _tfl_mbqm_double(1, 1 << 30, -1) == 1
    assert int(rescale(np.int64(1), 1 << 30, 32, RM.NATURAL)) == _tfl_mbqm_single(1, 1 << 30, -1) == 0
    # -1.5 (shift 31, D = 0): both round half up to -1 (gemmlowp's nudge 1-2**30 then truncation)
    assert int(rescale(np.int64(-3), 1 << 30, 31, RM.DOUBLE_SYMMETRIC)) == _tfl_mbqm_double(-3, 1 << 30, 0) == -1


def test_avgpool_builtin_scale():
    # TRM / digest worked numbers
    assert avgpool_scale(1) == (1073741825, 30)
    assert avgpool_scale(2) == (1073741825, 31)
    assert avgpool_scale(3) == (1431655766, 32)
    d = np.arange(1, 65)
    sc, sh = avgpool_scale(d)
    for di, s, h in zip(d, sc, sh):
        k = (int(di) - 1).bit_length()
        assert (int(s), int(h)) == ((((1 << 30) + 1) << k) // int(di), 30 + k) == avgpool_scale(int(di))
        assert (1 << 30) <= s < (1 << 31)                  # TRM comment
        assert (1 << k) // 2 < di <= (1 << k)


def test_avgpool_symmetric_equals_tflite_average(rng):
    """With round_mode symmetric the built-in scale reproduces TFLite's integer average pool
    ``acc > 0 ? (acc + n/2)/n : (acc - n/2)/n`` for every 8-bit window sum."""
    acc = np.arange(-64 * 255, 64 * 255 + 1, dtype=np.int64)
    for n in range(1, 65):
        s, sh = avgpool_scale(n)
        got = rescale(acc, s, sh, RM.SYMMETRIC)
        exp = np.where(acc > 0, (acc + n // 2) // n, -((-acc + n // 2) // n))
        assert (got == exp).all(), n
        for a in rng.choice(acc, 50):
            assert rescale_ref(int(a), -1, RescaleMode.AVPOOL + n - 1, round_mode=RM.SYMMETRIC) == \
                int(rescale(np.int64(a), s, sh, RM.SYMMETRIC))


# ---------------------------------------------------------------- rescale
@pytest.mark.parametrize("acc_format", [AccFormat.I32, AccFormat.I48])
def test_rescale_vectorised_matches_literal(rng, acc_format):
    bits = 32 if acc_format == AccFormat.I32 else 48
    smax = (1 << 31) if acc_format == AccFormat.I32 else (1 << 15)
    C = 7
    acc = sign_extend(mixed_int64(rng, 7 * 300)[:7 * 300], bits).reshape(-1, C)
    scale_arr = rng.integers(0, smax, C)
    shift_arr = rng.integers(0, 64, C)
    for mode in ALL_MODES:
        dr = int(rng.integers(0, 31))
        # per-channel (arrays broadcast on the channel axis)
        got = rescale(acc, scale_arr, shift_arr, mode, dr, acc_format=acc_format)
        exp = [[rescale_ref(int(a), oc, RescaleMode.NORMAL, scale_mode=ScaleMode.PER_CHANNEL, round_mode=mode,
                            dbl_rnd=dr, acc_format=acc_format, scale_arr=scale_arr, shift_arr=shift_arr)
                for oc, a in enumerate(row)] for row in acc]
        assert got.tolist() == exp
        # global and shift-only
        gs, gsh = int(scale_arr[0]), int(shift_arr[1])
        got = rescale(acc, gs, gsh, mode, dr, acc_format=acc_format)
        exp = [[rescale_ref(int(a), -1, RescaleMode.GLOBAL, ofm_scale=gs, ofm_shift=gsh, round_mode=mode,
                            dbl_rnd=dr, acc_format=acc_format) for a in row] for row in acc]
        assert got.tolist() == exp
        got = rescale(acc, gs, gsh, mode, dr, shift_only=True, acc_format=acc_format)
        exp = [[rescale_ref(int(a), -1, RescaleMode.SHIFT_ONLY, ofm_scale=gs, ofm_shift=gsh, round_mode=mode,
                            dbl_rnd=dr, acc_format=acc_format) for a in row] for row in acc]
        assert got.tolist() == exp
        # average pool, per-position divisor
        d = rng.integers(1, 65, acc.shape)
        s, sh = avgpool_scale(d)
        small = sign_extend(acc, 32)
        got = rescale(small, s, sh, mode, dr, acc_format=AccFormat.I32)
        exp = [[rescale_ref(int(a), -1, RescaleMode.AVPOOL + int(dd) - 1, round_mode=mode, dbl_rnd=dr)
                for a, dd in zip(ra, rd)] for ra, rd in zip(small, d)]
        assert got.tolist() == exp
    assert rescale_ref(-77, 3, RescaleMode.NONE) == -77


def test_rescale_wide_product_exact(rng):
    """48-bit acc x 31-bit scale needs up to 79 bits: UNPREDICTABLE per the TRM (i48 requires
    scale < 2**15), but computed exactly (then wrapped to int64) with check=False, both in the
    split path and for arbitrary int64 accumulators."""
    acc = np.concatenate([sign_extend(mixed_int64(rng, 3000), 48), mixed_int64(rng, 2000)])
    for mode in ALL_MODES:
        for sh in (0, 1, 15, 31, 32, 33, 47, 62, 63):
            scale = int(rng.integers(1 << 15, 1 << 31))
            dr = int(rng.integers(0, 31))
            got = rescale(acc, scale, sh, mode, dr, acc_format=None, check=False)
            exp = [sign_extend(rounded_shift_right_ref(int(a) * scale, sh, mode, dr), 64) for a in acc]
            assert got.tolist() == exp, (mode, sh)
    # per-element scales including 0 (sign of the product is then +)
    scales = rng.integers(0, 1 << 31, acc.size)
    scales[::7] = 0
    shifts = rng.integers(0, 64, acc.size)
    got = rescale(acc, scales, shifts, RM.DOUBLE_SYMMETRIC, 0, acc_format=None, check=False)
    exp = [sign_extend(rounded_shift_right_ref(int(a) * int(s), int(h), RM.DOUBLE_SYMMETRIC, 0), 64)
           for a, s, h in zip(acc, scales, shifts)]
    assert got.tolist() == exp


def test_rescale_asserts():
    with pytest.raises(Unpredictable):      # acc outside 32 bits with i32
        rescale(np.array([2**31]), 1, 0, RM.NATURAL, acc_format=AccFormat.I32)
    with pytest.raises(Unpredictable):      # scale must fit int16 with i48
        rescale(np.array([5]), 1 << 15, 0, RM.NATURAL, acc_format=AccFormat.I48)
    with pytest.raises(Unpredictable):
        rescale(np.array([5]), -1, 0, RM.NATURAL)
    with pytest.raises(Unpredictable):
        rescale_ref(2**47, 0, RescaleMode.GLOBAL, ofm_scale=1, acc_format=AccFormat.I48)
    with pytest.raises(Unpredictable):      # per-channel needs rescale_mode_normal (E-06)
        rescale_ref(1, 0, RescaleMode.GLOBAL, scale_mode=ScaleMode.PER_CHANNEL, scale_arr=[1], shift_arr=[0])
    # legal 48-bit extremes
    assert int(rescale(np.int64(2**47 - 1), 32767, 0, RM.NATURAL, acc_format=AccFormat.I48)) == (2**47 - 1) * 32767


# ---------------------------------------------------------------- scale_a / scale_b
def test_scale_input(rng):
    a = rng.integers(-2**15, 2**15, 3000)
    for prec, typ, scaled in [(Precision.B8, ActType.SIGNED, True), (Precision.B8, ActType.UNSIGNED, True),
                              (Precision.B16, ActType.SIGNED, True), (Precision.B16, ActType.UNSIGNED, False),
                              (Precision.B32, ActType.SIGNED, False)]:
        for mode in (RM.DOUBLE_SYMMETRIC, RM.NATURAL):
            scale = int(rng.integers(0, 2**31))
            shift = int(rng.integers(0, 64))
            dr = int(rng.integers(0, 31))
            got = scale_input(a, prec, typ, scale, shift, mode, dr)
            exp = [scale_input_ref(int(v), prec, typ, scale, shift, mode, dr) for v in a]
            assert got.tolist() == exp
            if not scaled:
                assert got.tolist() == a.tolist()
    # hand: x * 0.5 with shift 31 (D = 0, so double_symmetric == natural): 50, -1.5 -> -1, 1.5 -> 2
    x = np.array([100, -3, 3])
    for m in (RM.DOUBLE_SYMMETRIC, RM.NATURAL):
        assert scale_input(x, Precision.B8, ActType.SIGNED, 1 << 30, 31, m).tolist() == [50, -1, 2]
    # x * 0.25 with shift 32 (D = 2**30): -0.5 -> -1 double_symmetric (away from 0), 0 natural
    x = np.array([100, -3, 3, 2, -2])
    assert scale_input(x, Precision.B8, ActType.SIGNED, 1 << 30, 32, RM.DOUBLE_SYMMETRIC).tolist() == [25, -1, 1, 1, -1]
    assert scale_input(x, Precision.B8, ActType.SIGNED, 1 << 30, 32, RM.NATURAL).tolist() == [25, -1, 1, 1, 0]
    # shift 0 with a big scale wraps to int32 (return type int32_t)
    assert scale_input(np.array([2**15 - 1]), Precision.B16, ActType.SIGNED, 2**31 - 1, 0, RM.NATURAL).tolist() == \
        [sign_extend((2**15 - 1) * (2**31 - 1), 32)]
    with pytest.raises(Unpredictable):
        scale_input(np.array([2**15]), Precision.B8, ActType.SIGNED, 1, 0, RM.NATURAL)
    assert scale_input(np.array([2**20]), Precision.B32, ActType.SIGNED, 1, 0, RM.NATURAL).tolist() == [2**20]


def test_ifm_zero_point():
    assert ifm_zero_point(0xFF80, Precision.B8, ActType.SIGNED) == -128
    assert ifm_zero_point(200, Precision.B8, ActType.UNSIGNED) == 200
    assert ifm_zero_point(0x8000, Precision.B16, ActType.UNSIGNED) == 32768
    assert ifm_zero_point(-32768, Precision.B16, ActType.UNSIGNED) == 32768     # sign-extended field
    for raw, p, t in [(300, Precision.B8, ActType.UNSIGNED), (5, Precision.B16, ActType.SIGNED),
                      (128, Precision.B8, ActType.SIGNED), (1, Precision.B32, ActType.SIGNED)]:
        with pytest.raises(Unpredictable):
            ifm_zero_point(raw, p, t)


# ---------------------------------------------------------------- activation
def test_activation_hand():
    s8 = dict(precision=Precision.B8, act_type=ActType.SIGNED)
    # zero point added, wraps to 32 bits BEFORE the clamp: (2**31-1) + 1 -> -2**31 -> clamp to -128
    assert activation(np.array([2**31 - 1]), zero_point=1, act_min=0xFF80, act_max=0x7F,
                      clip_range=ClipRange.B16, **s8).tolist() == [-128]
    # clip_range none: no clamp, write_ofm truncates (wraps): 300 -> 44 ; -200 -> 56
    assert activation(np.array([300, -200]), clip_range=ClipRange.NONE, **s8).tolist() == [44, 56]
    assert activation(np.array([300, -200]), clip_range=ClipRange.NONE, truncate_ofm=False,
                      **s8).tolist() == [300, -200]
    # ACTIVATION_MIN/MAX raw 0xFF80: int16 -128 for signed OFM, uint16 65408 for unsigned OFM
    assert activation(np.array([-1000, 1000]), act_min=0xFF80, act_max=0x7F, clip_range=ClipRange.B16,
                      **s8).tolist() == [-128, 127]
    u16 = dict(precision=Precision.B16, act_type=ActType.UNSIGNED)
    assert activation(np.array([0, 70000]), act_min=0xFF80, act_max=0xFFFF, clip_range=ClipRange.B16,
                      **u16).tolist() == [65408, 65535]
    # unsigned zero point 32768 (uint16 OFM)
    assert activation(np.array([-32768, 0, 100]), zero_point=0x8000, clip_range=ClipRange.NONE, **u16).tolist() == \
        [0, 32768, 32868]
    # b64: returned unchanged, no zero point
    assert activation(np.array([2**62]), precision=Precision.B64, act_type=ActType.SIGNED,
                      zero_point=5).tolist() == [2**62]
    with pytest.raises(Unpredictable):
        activation(np.array([0]), zero_point=200, **s8)              # signed OFM zp must be -128..127
    with pytest.raises(Unpredictable):
        activation(np.array([0]), zero_point=300, precision=Precision.B8, act_type=ActType.UNSIGNED)


def _lut_bytes(rng):
    return rng.integers(0, 256, 2048, dtype=np.uint8).tobytes()


def test_activation_lut_hand():
    lut = bytearray(2048)
    lut[3 * 256 + 0x34] = 0xAB                                        # lut_u8_u8, table 3, acc & 0xFF = 0x34
    assert activation(np.array([0x1234]), precision=Precision.B8, act_type=ActType.UNSIGNED,
                      function=AF.LUT_U8_U8, table=3, lut=lut, truncate_ofm=False).tolist() == [0xAB]
    lut[1 * 256 + ((-5 + 128) & 0xFF)] = 0xF0                         # lut_s8_s8: -16
    assert activation(np.array([-5]), precision=Precision.B8, act_type=ActType.SIGNED,
                      function=AF.LUT_S8_S8, table=1, lut=lut).tolist() == [-16]
    lut[2 * (2 * 256 + 130):2 * (2 * 256 + 130) + 2] = (-1234).to_bytes(2, "little", signed=True)
    assert activation(np.array([2]), precision=Precision.B16, act_type=ActType.SIGNED,
                      function=AF.LUT_S8_S16, table=2, lut=lut).tolist() == [-1234]
    lut[4 * (256 + 0):4 * (256 + 0) + 4] = (-123456789).to_bytes(4, "little", signed=True)
    assert activation(np.array([-128]), precision=Precision.B32, act_type=ActType.SIGNED,
                      function=AF.LUT_S8_S32, table=1, lut=lut).tolist() == [-123456789]
    # s16 interpolate: acc 200 -> index 257, frac 72; base 1000, slope -300
    lut = bytearray(2048)
    lut[4 * 257:4 * 257 + 4] = (1000).to_bytes(2, "little", signed=True) + (-300).to_bytes(2, "little", signed=True)
    s16 = dict(precision=Precision.B16, act_type=ActType.SIGNED, lut=lut, clip_range=ClipRange.B16,
               act_min=0x8000, act_max=0x7FFF)
    assert activation(np.array([200]), function=AF.LUT_S16_S16, **s16).tolist() == [(128000 - 21600 + 64) >> 7]
    assert activation(np.array([200]), function=AF.LUT_S16_S32, truncate_ofm=False, **s16).tolist() == [106400]
    # sigmoid(0): index 256, frac 0, base 0 -> 0x1000200 >> 10 = 16384 (0.5 in Q15)
    lut = bytearray(2048)
    assert activation(np.array([0]), precision=Precision.B16, act_type=ActType.SIGNED, function=AF.LUT_SIGMOID,
                      lut=lut).tolist() == [16384]
    # tanh, acc = -1: index 255, frac 255, round 0x7F: (base<<8) + 255*slope + 0x7F >> 8
    lut[4 * 255:4 * 255 + 4] = (-5).to_bytes(2, "little", signed=True) + (4).to_bytes(2, "little", signed=True)
    assert activation(np.array([-1]), precision=Precision.B16, act_type=ActType.SIGNED, function=AF.LUT_TANH,
                      lut=lut).tolist() == [((-5 << 8) + 255 * 4 + 0x7F) >> 8]


def test_activation_tanh_sigmoid_clamp_ranges():
    idx = np.arange(512)
    lut = pack_interp_lut(idx, np.zeros(512))                        # base = entry index, slope 0
    big = np.array([-2**31, -0x10001, -0x10000, 0xFFFF, 0x10000, 2**31 - 1])
    # tanh clamps to [-0x10000, 0xffff] -> index 0 .. 511; out = ((i << 8) + rnd) >> 8 = i
    got = activation(big, precision=Precision.B16, act_type=ActType.SIGNED, function=AF.LUT_TANH, lut=lut,
                     truncate_ofm=False)
    assert got.tolist() == [0, 0, 0, 511, 511, 511]
    # sigmoid clamps to [-0x1f000, 0x1efff] -> index 8 .. 503
    big = np.array([-2**31, -0x1F001, -0x1F000, 0x1EFFF, 0x1F000, 2**31 - 1])
    got = activation(big, precision=Precision.B16, act_type=ActType.SIGNED, function=AF.LUT_SIGMOID, lut=lut,
                     truncate_ofm=False)
    assert got.tolist() == [((8 << 9) + 0x10001FF) >> 10] * 3 + [((503 << 9) + 0x1000200) >> 10] * 3
    assert got.tolist() == [16388] * 3 + [16636] * 3
    # inside the clamp range: -0x10001 -> index 256 + (-0x10001 >> 9) = 127, frac 0x1ff (slope 0)
    got = activation(np.array([-0x10001]), precision=Precision.B16, act_type=ActType.SIGNED,
                     function=AF.LUT_SIGMOID, lut=lut, truncate_ofm=False)
    assert got.tolist() == [((127 << 9) + 0x10001FF) >> 10]
    # clip_range none with an s16 LUT and an out-of-int16 value: index out of range (E-10)
    with pytest.raises(Unpredictable):
        activation(np.array([40000]), precision=Precision.B16, act_type=ActType.SIGNED, function=AF.LUT_S16_S16,
                   lut=lut, clip_range=ClipRange.NONE)


def test_interp_lut_reproduces_knots():
    """A table built from 513 knots (base = knot[i], slope = knot[i+1] - knot[i]) gives the knot
    exactly at every multiple of 128 and a monotone interpolation in between (lut_s16_s16)."""
    x = (np.arange(513) - 256) * 128
    knots = np.round(32767 * np.tanh(x / 8192.0)).astype(np.int64)
    lut = pack_interp_lut(knots[:512], np.diff(knots))
    acc = np.arange(-32768, 32768)
    got = activation(acc, precision=Precision.B16, act_type=ActType.SIGNED, function=AF.LUT_S16_S16, lut=lut,
                     clip_range=ClipRange.B16, act_min=0x8000, act_max=0x7FFF)
    assert (got[::128] == knots[:512]).all()
    assert (np.diff(got) >= 0).all()
    u8, s8, s16, s32 = lut_views(lut)
    assert s16[0] == knots[0] and s16[1] == knots[1] - knots[0] and u8.size == 2048 and s32.size == 512


@pytest.mark.parametrize("function", [AF.LUT_NONE, AF.LUT_U8_U8, AF.LUT_S8_S8, AF.LUT_S8_S16, AF.LUT_S8_S32,
                                      AF.LUT_S16_S16, AF.LUT_S16_S32, AF.LUT_TANH, AF.LUT_SIGMOID])
def test_activation_vectorised_matches_literal(rng, function):
    lut = _lut_bytes(rng)
    acc = np.concatenate([mixed_int64(rng, 1500), rng.integers(-70000, 70000, 1500)])
    for trial in range(12):
        prec = int(rng.choice([Precision.B8, Precision.B16, Precision.B32]))
        typ = int(rng.integers(0, 2))
        if function in (AF.LUT_S16_S16, AF.LUT_S16_S32):
            typ = ActType.SIGNED
        zp = int(rng.choice([0, 32768])) if prec == Precision.B16 and typ == ActType.UNSIGNED else \
            int(rng.integers(0, 256)) if typ == ActType.UNSIGNED else int(rng.integers(-128, 128)) & 0xFFFF
        clip = int(rng.integers(0, 2))
        table = {AF.LUT_U8_U8: 7, AF.LUT_S8_S8: 7, AF.LUT_S8_S16: 3, AF.LUT_S8_S32: 1}.get(function, 0)
        table = int(rng.integers(0, table + 1))
        a_min, a_max = sorted(int(v) for v in rng.integers(0, 1 << 16, 2))
        if function in (AF.LUT_S16_S16, AF.LUT_S16_S32):
            # keep acc inside int16 so the LUT index stays in 0..511 (E-10)
            clip, a_min, a_max = ClipRange.B16, 0x8000 | int(rng.integers(0, 0x7FFF)), int(rng.integers(0, 0x7FFF))
        kw = dict(precision=prec, act_type=typ, zero_point=zp, act_min=a_min, act_max=a_max, function=function,
                  clip_range=clip, table=table, lut=lut, truncate_ofm=bool(trial % 2))
        got = activation(acc, **kw)
        exp = [activation_ref(int(a), **kw) for a in acc]
        assert got.tolist() == exp, kw


# ---------------------------------------------------------------- elementwise helpers
def test_shift_helpers_hand():
    assert shift_left(np.array([0x41]), 2, Precision.B8).tolist() == [0x04]          # 0x104 & 0xFF
    assert shift_left(np.array([-1]), 4, Precision.B16).tolist() == [0xFFF0]
    assert shift_left(np.array([1]), 31, Precision.B32).tolist() == [-2**31]         # int32 wrap
    assert shift_left(np.array([3]), 33, Precision.B32).tolist() == [6]              # & 31
    assert logical_shift_right(np.array([-1]), 4, Precision.B8).tolist() == [0x0F]
    assert logical_shift_right(np.array([-2]), 1, Precision.B16).tolist() == [0x7FFF]
    assert logical_shift_right(np.array([-2]), 1, Precision.B32).tolist() == [0x7FFFFFFF]
    assert logical_shift_right(np.array([-2]), 0, Precision.B32).tolist() == [-2]    # int32_t acc
    assert logical_shift_right(np.array([-2]), 32, Precision.B32).tolist() == [-2]   # & 31 -> 0


def test_div_trunc():
    a = np.array([7, -7, 7, -7, 0, -2**31, 2**31 - 1])
    b = np.array([2, 2, -2, -2, 5, 1, -1])
    assert div_trunc(a, b).tolist() == [3, -3, -3, 3, 0, -2**31, -(2**31 - 1)]
    with pytest.raises(Unpredictable):
        div_trunc(np.array([1]), np.array([0]))
    with pytest.raises(Unpredictable):
        div_trunc(np.array([-2**31]), np.array([-1]))


def test_div_trunc_random(rng):
    a = rng.integers(-2**31, 2**31, 5000)
    b = rng.integers(-2**31, 2**31, 5000)
    b[b == 0] = 1
    b[::5] = rng.integers(-9, 10, 1000)
    b[b == 0] = 3
    exp = [(abs(int(x)) // abs(int(y))) * (1 if (x < 0) == (y < 0) else -1) for x, y in zip(a, b)]
    assert div_trunc(a, b).tolist() == exp
