"""Random runs for the DTPU bench: a CSR word, a weight image and an input packet.

`random_job(rng, cfg, ...)` draws a legal run of the configuration: a built precision, a
signedness, a row grouping (GROUP_ROWS, OUT_GROUPS), a weight block somewhere in the weight
packet (with some rows and columns left zero, so array occupancy varies) and a number of
input vectors. Operands are uniform over the lane (full 64-bit words), so sign extension,
products and wrap-around are exercised. Pure Python + numpy (no cocotb).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tlm.dtpu import contract as C
from tlm.dtpu.core import pack_lanes


@dataclass
class Job:
    csr: int
    weights: np.ndarray         # the whole weight packet (uint64 words)
    inputs: np.ndarray          # input FIFO packet (uint64 words)
    precision: str
    signed: bool
    groups: int
    out_groups: int

    @property
    def csr_packet(self) -> np.ndarray:
        return np.array([self.csr], np.uint64)


def random_words(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.integers(0, 1 << 63, size=n, dtype=np.uint64) * np.uint64(2) + \
        rng.integers(0, 2, size=n, dtype=np.uint64)


def random_job(rng: np.random.Generator, cfg: C.Config, precision: "str | None" = None,
               signed: "bool | None" = None, groups: "int | None" = None,
               out_groups: "int | None" = None, steps: "int | None" = None,
               wm_words: int = 64) -> Job:
    prec = C.PRECISION_BY_NAME[precision or str(rng.choice(list(cfg.precisions)))]
    signed = bool(rng.integers(0, 2)) if signed is None else signed
    g = int(rng.integers(1, cfg.rows + 1)) if groups is None else groups
    ng_max = cfg.rows // g
    ng = int(rng.integers(1, ng_max + 1)) if out_groups is None else out_groups
    p = cfg.words_per_vector(prec)
    block = cfg.rows * p
    wm_words = max(wm_words, block)
    start = int(rng.integers(0, wm_words - block + 1))
    # operands: random lanes, some rows/columns zero (occupancy)
    lanes = rng.integers(0, 1 << 62, size=(cfg.rows, cfg.columns), dtype=np.uint64) * np.uint64(4) + \
        rng.integers(0, 4, size=(cfg.rows, cfg.columns), dtype=np.uint64)
    rows_used = int(rng.integers(1, cfg.rows + 1))
    cols_used = int(rng.integers(1, cfg.columns + 1))
    lanes[rows_used:, :] = 0
    lanes[:, cols_used:] = 0
    weights = random_words(rng, wm_words)
    weights[start:start + block] = pack_lanes(lanes, prec.bits, p).reshape(-1)
    n = int(rng.integers(0, 24)) if steps is None else steps
    csr = C.csr_word(prec.name, signed=signed, group_rows=g, out_groups=0 if ng == ng_max else ng,
                     wm_start=start)
    return Job(csr, weights, random_words(rng, n * p), prec.name, signed, g, ng)


def share_weights(cfg: C.Config, jobs: "list[Job]") -> "list[Job]":
    """Put the weight blocks of `jobs` into one packet, one after the other, and point each
    job's WM_START at its block (the runs then share one weight buffer)."""
    image, off = [], 0
    for j in jobs:
        dec_start = C.CSR["WM_START"].get(j.csr)
        n = cfg.rows * cfg.words_per_vector(C.PRECISION_BY_NAME[j.precision])
        image.append(j.weights[dec_start:dec_start + n])
        j.csr = (j.csr & ~(((1 << C.CSR["WM_START"].width) - 1) << C.CSR["WM_START"].bit)) \
            | C.CSR["WM_START"].put(off)
        off += n
    packet = np.concatenate(image)
    for j in jobs:
        j.weights = packet
    return jobs
