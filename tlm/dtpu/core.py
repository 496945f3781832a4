"""dtpu_core as a transaction-level model: CSR decoding and one run of the MXU.

One run (thesis §4.4.2: Fetch CSR -> Load L/S array -> Compute -> Save -> Done) reads the
CSR bytes 0..7, the weight block of ROWS x P words from WM_START, then every input vector
of the input FIFO, and returns the output words (contract.DATA_RULES). The fast path is
vectorised numpy in uint64 (products and sums modulo 2^64, then the output lane width);
`run_reference` is the literal per-step Python-integer path that tests cross-check it with.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import contract as C

MASK64 = (1 << 64) - 1


@dataclass(frozen=True)
class Decoded:
    """The fields of a CSR word as the control unit uses them."""
    word: int
    error: int                  # contract.CORE_ERRORS code, 0 = legal
    precision: "C.Precision | None"
    signed: bool
    groups: int                 # G
    out_groups: int             # NG
    wm_start: int
    p: int                      # input / weight-row words per vector (0 when illegal)
    q: int                      # output words per step (0 when illegal)


def decode_csr(word: int, cfg: C.Config) -> Decoded:
    """Decode bytes 0..7 of the CSR memory; the first failing check (in CORE_ERRORS code
    order) is the error."""
    f = C.CSR
    code = f["ARITHMETIC_PRECISION"].get(word)
    prec = C.PRECISION_BY_CODE.get(code)
    g_field, ng_field = f["GROUP_ROWS"].get(word), f["OUT_GROUPS"].get(word)
    groups = max(1, g_field)
    ng_max = cfg.rows // groups if groups <= cfg.rows else 0
    out_groups = ng_field or ng_max
    wm_start = f["WM_START"].get(word)
    p = cfg.words_per_vector(prec) if prec else 0
    checks = (
        ("BAD_PRECISION", prec is None),
        ("PRECISION_NOT_BUILT", prec is not None and prec.name not in cfg.precisions),
        ("FP_UNSUPPORTED", f["FP_MODE"].get(word) != C.NO_FP),
        ("CHAIN", prec is not None and f["ACTIVATE_CHAIN"].get(word) == 0 and prec.bits < 64),
        ("RESERVED", f["RESERVED0"].get(word) != 0),
        ("GROUP_ROWS", groups > cfg.rows),
        ("OUT_GROUPS", groups <= cfg.rows and out_groups > ng_max),
        ("WM_RANGE", wm_start + cfg.rows * p > cfg.size_wmemory),
    )
    error = next((C.ERR[n] for n, bad in checks if bad), 0)
    if error:
        return Decoded(word, error, prec, False, groups, out_groups, wm_start, 0, 0)
    return Decoded(word, 0, prec, bool(f["SIGNED"].get(word)), groups, out_groups, wm_start,
                   p, cfg.words_per_step(prec, out_groups))


# ------------------------------------------------------------------------------------------
# Lane packing (fast, numpy)
# ------------------------------------------------------------------------------------------
def unpack_lanes(words: np.ndarray, bits: int, lanes: int, signed: bool) -> np.ndarray:
    """(..., P) uint64 words -> (..., lanes) uint64 operands, sign- or zero-extended to 64
    bits (two's complement in uint64)."""
    w = np.asarray(words, np.uint64)
    per = C.WORD_BITS // bits
    k = np.arange(lanes)
    shift = ((k % per) * bits).astype(np.uint64)
    v = w[..., k // per] >> shift
    if bits < 64:
        v = v & np.uint64((1 << bits) - 1)
        if signed:
            sign = np.uint64(1 << (bits - 1))
            v = (v ^ sign) - sign                   # wraps modulo 2^64: sign extension
    return v


def pack_lanes(values: np.ndarray, bits: int, words: int) -> np.ndarray:
    """(..., n) uint64 lane values (low `bits` used) -> (..., words) uint64 words."""
    v = np.asarray(values, np.uint64)
    per = C.WORD_BITS // bits
    n = v.shape[-1]
    out = np.zeros(v.shape[:-1] + (words,), np.uint64)
    m = np.uint64(MASK64 if bits == 64 else (1 << bits) - 1)
    for k in range(n):                              # n <= ROWS lanes: a short loop over lanes
        out[..., k // per] |= (v[..., k] & m) << np.uint64((k % per) * bits)
    return out


@dataclass
class RunResult:
    words: np.ndarray           # uint64 output words, in order
    error: int                  # CORE_ERRORS code
    steps: int
    decoded: Decoded
    underrun: bool = False      # a weight word past the received packet was read (as 0)
    weights: "np.ndarray | None" = None   # (ROWS, COLUMNS) uint64 operands of a legal run


def _weights(dec: Decoded, cfg: C.Config, wm_read: Callable[[int], "int | None"]) -> tuple[np.ndarray, bool]:
    """The weight block (ROWS, P) as uint64 words; `wm_read(addr)` returns None past the
    received packet (reads 0, underrun)."""
    n = cfg.rows * dec.p
    raw = [wm_read(dec.wm_start + i) for i in range(n)]
    under = any(v is None for v in raw)
    return np.array([0 if v is None else v for v in raw], np.uint64).reshape(cfg.rows, dec.p), under


def run(cfg: C.Config, csr: int, wm_read: Callable[[int], "int | None"],
        inputs: np.ndarray) -> RunResult:
    """One run on the fast path. `csr`: bytes 0..7 as a little-endian word; `inputs`: the
    uint64 words of the input FIFO."""
    dec = decode_csr(csr, cfg)
    if dec.error:
        return RunResult(np.zeros(0, np.uint64), dec.error, 0, dec)
    prec = dec.precision
    wblock, under = _weights(dec, cfg, wm_read)
    x_words = np.asarray(inputs, np.uint64)
    steps = x_words.size // dec.p
    error = C.ERR["INPUT_TAIL"] if x_words.size % dec.p else 0
    W = unpack_lanes(wblock, prec.bits, cfg.columns, dec.signed)                 # (R, C)
    X = unpack_lanes(x_words[:steps * dec.p].reshape(steps, dec.p), prec.bits, cfg.columns, dec.signed)
    with np.errstate(over="ignore"):
        Y = X @ W.T                                                              # (S, R) mod 2^64
        G, NG = dec.groups, dec.out_groups
        Z = np.zeros((steps, NG), np.uint64)
        for i in range(G):                       # row kG+i contributes its value of step s-(G-1-i)
            d = G - 1 - i
            if d < steps:
                Z[d:] += Y[:steps - d, i:NG * G:G]
    return RunResult(pack_lanes(Z, prec.lane, dec.q).reshape(-1), error, steps, dec, under, W)


def run_reference(cfg: C.Config, csr: int, wm_read: Callable[[int], "int | None"],
                  inputs) -> RunResult:
    """The same run, literally: Python integers, one step at a time, one accumulator a
    row and the chain registers of the row groups, as the contract's rules read."""
    dec = decode_csr(csr, cfg)
    if dec.error:
        return RunResult(np.zeros(0, np.uint64), dec.error, 0, dec)
    prec, P, L = dec.precision, dec.p, dec.precision.lane
    per = C.WORD_BITS // prec.bits

    def lane(words, c):
        v = (words[c // per] >> ((c % per) * prec.bits)) & ((1 << prec.bits) - 1)
        if dec.signed and v >> (prec.bits - 1):
            v -= 1 << prec.bits
        return v

    under = False
    W = []
    for r in range(cfg.rows):
        row = []
        for k in range(P):
            v = wm_read(dec.wm_start + r * P + k)
            under |= v is None
            row.append(0 if v is None else int(v))
        W.append([lane(row, c) for c in range(cfg.columns)])
    xs = [int(v) for v in inputs]
    steps = len(xs) // P
    chain = [0] * cfg.rows                      # value of each row's partial sum after the last step
    out: list[int] = []
    for s in range(steps):
        x = [lane(xs[s * P:(s + 1) * P], c) for c in range(cfg.columns)]
        y = [sum(W[r][c] * x[c] for c in range(cfg.columns)) for r in range(cfg.rows)]
        new = [0] * cfg.rows
        for r in range(cfg.rows):
            first = r % dec.groups == 0
            new[r] = (y[r] + (0 if first else chain[r - 1])) % (1 << L)
        chain = new
        lanes = [chain[k * dec.groups + dec.groups - 1] for k in range(dec.out_groups)]
        words = [0] * dec.q
        for k, v in enumerate(lanes):
            words[k * L // 64] |= v << ((k * L) % 64)
        out.extend(words)
    error = C.ERR["INPUT_TAIL"] if len(xs) % P else 0
    return RunResult(np.array(out, np.uint64), error, steps, dec, under,
                     np.array([[v % (1 << 64) for v in row] for row in W], np.uint64))
