"""dtpu_core's TLM (tlm/dtpu/core.py) against an independent reference written here from
the contract's rules (contract.DATA_RULES), and against hand-computed values.

The reference below does not use tlm.dtpu.core: it reads lanes with Python integer
arithmetic, multiplies and sums exactly, chains the rows of a group by the formula
z_s[k] = sum_i y_{s-G+1+i}[kG+i], and reduces modulo the lane width only at the end
(which equals wrapping at every addition). Random cases print their seed."""
from __future__ import annotations

import numpy as np
import pytest

from tlm.dtpu import contract as C
from tlm.dtpu import core

LANE = {"int8": 32, "int16": 64, "int32": 64, "int64": 64}      # contract "arithmetic" rule
BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def ref_run(rows, columns, prec, signed, groups, out_groups, wblock_words, in_words):
    """Expected output words (Python ints) of one legal run, from the contract's text."""
    b, L = BITS[prec], LANE[prec]
    p = -(-columns * b // 64)

    def operand(words, c):
        v = (words[(c * b) // 64] >> ((c * b) % 64)) & ((1 << b) - 1)
        return v - (1 << b) if signed and v >= 1 << (b - 1) else v

    W = [[operand(wblock_words[r * p:(r + 1) * p], c) for c in range(columns)] for r in range(rows)]
    steps = len(in_words) // p
    Y = []
    for s in range(steps):
        x = [operand(in_words[s * p:(s + 1) * p], c) for c in range(columns)]
        Y.append([sum(W[r][c] * x[c] for c in range(columns)) for r in range(rows)])
    G = max(1, groups)
    NG = out_groups or rows // G
    out = []
    for s in range(steps):
        z = [sum(Y[s - G + 1 + i][k * G + i] for i in range(G) if s - G + 1 + i >= 0) % (1 << L)
             for k in range(NG)]
        words = [0] * (-(-NG * L // 64))
        for k, v in enumerate(z):
            words[(k * L) // 64] |= v << ((k * L) % 64)
        out.extend(words)
    return out


def _rand(rng, n):
    return [int(x) for x in rng.integers(0, 1 << 63, size=n, dtype=np.uint64) * np.uint64(2)
            + rng.integers(0, 2, size=n, dtype=np.uint64)]


CASES = [(cfg.name, p) for cfg in C.CONFIGS.values() for p in cfg.precisions]


@pytest.mark.parametrize("config,prec", CASES)
def test_fast_and_literal_paths_equal_the_reference(config, prec):
    cfg = C.CONFIGS[config]
    seed = 4000 + CASES.index((config, prec))
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    p = cfg.words_per_vector(C.PRECISION_BY_NAME[prec])
    for trial in range(12):
        signed = bool(trial % 2)
        g = int(rng.integers(0, cfg.rows + 1))          # 0 = the thesis' reading (G = 1)
        ng_max = cfg.rows // max(1, g)
        ng = int(rng.integers(0, ng_max + 1))           # 0 = all groups
        start = int(rng.integers(0, 20))
        wm = _rand(rng, start + cfg.rows * p + 3)
        steps = int(rng.integers(0, 30))
        x = _rand(rng, steps * p)
        csr = C.csr_word(prec, signed=signed, group_rows=g, out_groups=ng, wm_start=start)
        rd = lambda a: wm[a] if a < len(wm) else None  # noqa: E731
        want = ref_run(cfg.rows, cfg.columns, prec, signed, g, ng, wm[start:start + cfg.rows * p], x)
        fast = core.run(cfg, csr, rd, np.array(x, np.uint64))
        slow = core.run_reference(cfg, csr, rd, x)
        assert fast.error == slow.error == 0
        assert [int(v) for v in fast.words] == want, (trial, g, ng, signed)
        assert [int(v) for v in slow.words] == want, (trial, g, ng, signed)
        assert fast.steps == steps


def test_hand_computed_int8():
    """8x8 int8, signed: W[r][c] = r - c, x = (1, -2, 3, -4, 5, -6, 7, -8):
    y[r] = sum_c (r - c) x_c = r * sum(x) - sum(c x_c) = -4r - (-2 - 6 - 10 - 14 + ...)."""
    cfg = C.CONFIGS["dtpu-8x8-int8"]
    W = [[r - c for c in range(8)] for r in range(8)]
    x = [1, -2, 3, -4, 5, -6, 7, -8]
    # sum(x) = -4; sum(c * x_c) = 0 - 2 + 6 - 12 + 20 - 30 + 42 - 56 = -32
    y = [-4 * r + 32 for r in range(8)]                   # 32, 28, ..., 4
    assert y[0] == 32 and y[7] == 4
    wwords = [int.from_bytes(bytes(v & 0xFF for v in row), "little") for row in W]
    xword = int.from_bytes(bytes(v & 0xFF for v in x), "little")
    csr = C.csr_word("int8", signed=True)
    res = core.run(cfg, csr, lambda a: wwords[a] if a < 8 else None, np.array([xword], np.uint64))
    lanes = [(int(w) >> s) & 0xFFFFFFFF for w in res.words for s in (0, 32)]
    assert lanes == [v & 0xFFFFFFFF for v in y]
    # unsigned view of the same bytes: lane 0 of x is 1, lane 1 is 254, ...
    res_u = core.run(cfg, C.csr_word("int8", signed=False), lambda a: wwords[a] if a < 8 else None,
                     np.array([xword], np.uint64))
    xu = [v & 0xFF for v in x]
    y0 = sum((W[0][c] & 0xFF) * xu[c] for c in range(8))
    assert int(res_u.words[0]) & 0xFFFFFFFF == y0


def test_row_groups_hand_computed():
    """G = 2 on 2 rows, 1 column, int16: z_s = W0*x_{s-1} + W1*x_s (zero before the run)."""
    cfg = C.Config("t", rows=2, columns=1, precisions=("int16",))
    W = [3, -5]
    xs = [7, -2, 4]
    want = [W1 for W1 in (0 * W[0] + W[1] * xs[0], W[0] * xs[0] + W[1] * xs[1], W[0] * xs[1] + W[1] * xs[2])]
    assert want == [-35, 31, -26]
    wwords = [w & 0xFFFF for w in W]
    res = core.run(cfg, C.csr_word("int16", group_rows=2), lambda a: wwords[a],
                   np.array([v & 0xFFFF for v in xs], np.uint64))
    assert [int(w) for w in res.words] == [v % (1 << 64) for v in want]


def test_wrap_int32():
    """int32 products summed past 2^63 wrap modulo 2^64 (contract: never saturate)."""
    cfg = C.CONFIGS["dtpu-8x8-int8-16-32"]
    big = (1 << 31) - 1
    wrow = [big | (big << 32)] * 4                       # every lane 2^31 - 1
    res = core.run(cfg, C.csr_word("int32"), lambda a: wrow[a % 4], np.array([big | (big << 32)] * 4, np.uint64))
    want = (8 * big * big) % (1 << 64)
    assert 8 * big * big >= 1 << 63 and int(res.words[0]) == want


@pytest.mark.parametrize("name,kw", [
    ("BAD_PRECISION", dict(raw=0x2)), ("FP_UNSUPPORTED", dict(fp_mode=1)),
    ("CHAIN", dict(chain=0)), ("RESERVED", dict(raw=0x1 | 1 << 4 | 1 << 6)),
    ("GROUP_ROWS", dict(group_rows=9)), ("OUT_GROUPS", dict(group_rows=3, out_groups=3)),
    ("WM_RANGE", dict(wm_start=8192 - 7)), ("PRECISION_NOT_BUILT", dict(precision="int16"))])
def test_csr_errors(name, kw):
    cfg = C.CONFIGS["dtpu-8x8-int8"]
    if "raw" in kw:
        word = kw["raw"]
    else:
        word = C.csr_word(kw.pop("precision", "int8"), **kw)
    dec = core.decode_csr(word, cfg)
    assert dec.error == C.ERR[name]
    res = core.run(cfg, word, lambda a: 0, np.zeros(3, np.uint64))
    assert res.error == C.ERR[name] and res.words.size == 0 and res.steps == 0


def test_input_tail():
    cfg = C.CONFIGS["dtpu-8x8-int8-16-32"]
    res = core.run(cfg, C.csr_word("int32"), lambda a: 1, np.ones(9, np.uint64))    # P = 4
    assert res.error == C.ERR["INPUT_TAIL"] and res.steps == 2 and res.words.size == 2 * 8


def test_chain_zero_is_legal_for_int64():
    cfg = C.CONFIGS["dtpu-4x4-all"]
    assert core.decode_csr(C.csr_word("int64", chain=0), cfg).error == 0
