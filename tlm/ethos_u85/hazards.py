"""Command-stream races between the mem2mem DMA and kernel operations (UNPREDICTABLE).

The TLM executes every command in order; real hardware runs the DMA asynchronously with
kernel operations, so a stream that omits a wait has no single result. The TRM's terms
(3.10.5 NPU_OP_DMA_WAIT, 3.10.8 NPU_OP_KERNEL_WAIT, 3.11.2 NPU_OP_BRANCH):

* "NPU_OP_DMA_WAIT: Wait for the mem2mem DMA channel to have k or fewer active descriptors
  outstanding"; the channel has 4 descriptors; a descriptor is outstanding from issue until
  "the data is written to memory and can be read by the next command".
* "NPU_OP_KERNEL_WAIT ... A kernel operation is remaining if it has been issued but is not
  yet complete. A kernel operation is complete if all result data has been written to
  memory." A chain counts as one operation; "when a command starts there are at most two
  kernel operations remaining".
* NPU_OP_BRANCH with branch_cond rf_true first does KERNEL_WAIT(n=0).

Without a timing model the tracker is conservative: a DMA is outstanding until a wait
retires it or four newer descriptors exist (the fifth forces the first out); a kernel op
(or chain) is remaining until a wait or branch retires it or two newer ones exist. A race:

* a kernel op starts while an outstanding DMA writes bytes it reads (RAW) or writes (WAW),
  or reads bytes it writes (WAR);
* a DMA starts while a remaining kernel op reads (WAR) or writes (WAW) bytes the DMA writes,
  or writes bytes the DMA reads (RAW).

Footprints are exact byte sets: the command's memory transactions (command fetches
excluded) as merged [lo, hi) runs of physical addresses; the 2048-byte LUT RAM is its own
space (offset LUT_SPACE): a DMA to internal memory writes the lines it copies, a kernel
op's LUT activation reads the table its NPU_SET_ACTIVATION selects.
"""
from __future__ import annotations

import numpy as np

from . import isa
from .arith import LUT_BYTES
from .memory import Channel, merged_intervals, txn_pairs

__all__ = ["Footprint", "EMPTY", "dma", "kernel", "dma_wait", "kernel_wait", "footprint", "DMA_DESCRIPTORS",
           "KERNEL_REMAINING", "LUT_SPACE"]

DMA_DESCRIPTORS = 4          # TRM 3.10.5: mem2mem descriptors
# A DMA into the LUT RAM with more runs than this is taken to write all of it (a stream can
# program 2**32 runs; all but repeats of at most 128 16-byte lines are outside the RAM, which
# makes the DMA UNPREDICTABLE anyway)
_LUT_RUNS_MAX = 4 * LUT_BYTES
KERNEL_REMAINING = 2         # TRM 3.10.8: at most two kernel operations remaining
LUT_SPACE = 1 << 41          # beyond the 40-bit address space: the LUT RAM's byte 0


class Footprint:
    """The bytes a command reads and writes: merged, sorted [lo, hi) runs (int64 arrays)."""
    __slots__ = ("rlo", "rhi", "wlo", "whi")

    def __init__(self, reads, writes):
        """*reads*, *writes*: (starts, lengths) pairs (memory.addr_pairs' forms)."""
        self.rlo, self.rhi = merged_intervals(reads)
        self.wlo, self.whi = merged_intervals(writes)

    def __bool__(self) -> bool:
        return bool(self.rlo.size or self.wlo.size)

    def union(self, other: "Footprint") -> "Footprint":
        return Footprint([(self.rlo, self.rhi - self.rlo), (other.rlo, other.rhi - other.rlo)],
                         [(self.wlo, self.whi - self.wlo), (other.wlo, other.whi - other.wlo)])


def _overlap(alo, ahi, blo, bhi) -> "tuple[int, int, int] | None":
    """(lo, hi) of the first common run of two merged run sets and the common byte count."""
    if not alo.size or not blo.size:
        return None
    if alo[0] >= bhi[-1] or blo[0] >= ahi[-1]:
        return None
    i = np.searchsorted(ahi, blo, side="right")           # first A run ending after b.lo
    ok = i < alo.size
    ic = np.minimum(i, alo.size - 1)
    hit = ok & (alo[ic] < bhi)
    if not hit.any():
        return None
    j = int(np.flatnonzero(hit)[0])
    k = int(ic[j])
    lo, hi = max(int(alo[k]), int(blo[j])), min(int(ahi[k]), int(bhi[j]))
    # total common bytes: every A run against every B run it meets (runs are disjoint)
    total = 0
    for jj in np.flatnonzero(hit).tolist():
        b0, b1 = int(blo[jj]), int(bhi[jj])
        kk = int(ic[jj])
        while kk < alo.size and alo[kk] < b1:
            total += min(int(ahi[kk]), b1) - max(int(alo[kk]), b0)
            kk += 1
    return lo, hi, total


def lut_reads(snap) -> "tuple[int, int] | None":
    """The LUT RAM bytes [lo, hi) a kernel op's activation can read (None: no LUT)."""
    f = snap.field("NPU_SET_ACTIVATION", "activation_function")
    af = isa.activation_function
    if f == af.lut_none:
        return None
    t = snap.field("NPU_SET_ACTIVATION", "table")
    size = {af.lut_u8_u8: 256, af.lut_s8_s8: 256, af.lut_s8_s16: 512, af.lut_s8_s32: 1024}.get(f)
    if size is None:                                     # interpolating modes: 512 pairs
        return 0, LUT_BYTES
    return t * size, t * size + size


def lut_writes(snap):
    """The LUT RAM runs an NPU_OP_DMA_START to internal memory writes (None: not internal)."""
    from .dma_reference import DmaParams
    p = DmaParams.registers(snap)
    if not p.internal:
        return None
    if p.dst_idx or p.height * p.width > _LUT_RUNS_MAX:  # scattered (the index values decide), or
        return np.array([0]), np.array([LUT_BYTES])      # more runs than the RAM has 16-byte lines
    y = np.arange(p.height, dtype=np.int64)[:, None]
    x = np.arange(p.width, dtype=np.int64)[None, :]
    lo = (p.dst + x * p.dst_stride0 + y * p.dst_stride1).ravel()
    return lo, lo + p.length


def footprint(txns, lut_r=None, lut_w=None) -> Footprint:
    """A command's footprint from its transactions (command fetches excluded) and its LUT
    RAM runs ([lo, hi) pairs)."""
    txns = [t for t in txns if t.channel != Channel.rd_cmd]
    reads, writes = [txn_pairs(txns, write=False)], [txn_pairs(txns, write=True)]
    if lut_r is not None:
        reads.append((np.array([LUT_SPACE + lut_r[0]]), np.array([lut_r[1] - lut_r[0]])))
    if lut_w is not None:
        lo = np.asarray(lut_w[0], dtype=np.int64)
        writes.append((LUT_SPACE + lo, np.asarray(lut_w[1], dtype=np.int64) - lo))
    return Footprint(reads, writes)


def _where(lo: int, hi: int) -> str:
    if lo >= LUT_SPACE:
        return f"LUT RAM bytes 0x{lo - LUT_SPACE:x}..0x{hi - 1 - LUT_SPACE:x}"
    return f"bytes 0x{lo:x}..0x{hi - 1:x}"


EMPTY = ((), ())            # (outstanding DMAs, remaining kernel operations), oldest first


# A tracker state is an immutable pair of tuples of (offset, command name, Footprint): the
# device keeps it as one attribute (copied with its state, recorded per step by run traces).
def dma_wait(st: tuple, k: int) -> tuple:
    """NPU_OP_DMA_WAIT k: at most k descriptors (the newest) stay outstanding."""
    dmas = st[0]
    return (dmas[len(dmas) - k:] if k else (), st[1]) if len(dmas) > k else st


def kernel_wait(st: tuple, n: int) -> tuple:
    """NPU_OP_KERNEL_WAIT n: at most n kernel operations (the newest) stay remaining."""
    ks = st[1]
    return (st[0], ks[len(ks) - n:] if n else ()) if len(ks) > n else st


# (race, the earlier command's side, the new command's side): RAW the earlier one writes what
# the new one reads, WAW both write, WAR the earlier one reads what the new one writes
_CHECKS = (("RAW", "w", "r"), ("WAW", "w", "w"), ("WAR", "r", "w"))


def _races(off: int, name: str, fp: Footprint, earlier, what: str, state: str) -> list:
    """The races of the command (*off*, *name*, footprint *fp*) with the *earlier* commands
    still in flight (outstanding DMAs for a kernel op, remaining kernel ops for a DMA)."""
    out = []
    for eoff, ename, efp in earlier:
        for typ, e, n in _CHECKS:
            hit = _overlap(*_side(efp, e), *_side(fp, n))
            if hit:
                verb = f"{'writes' if e == 'w' else 'reads'} bytes this {what} {'reads' if n == 'r' else 'writes'}"
                out.append(_details(typ, off, name, eoff, ename, hit, f"{ename} at 0x{eoff:x}, {state}, {verb}"))
    return out


def _side(fp: Footprint, rw: str) -> tuple:
    return (fp.rlo, fp.rhi) if rw == "r" else (fp.wlo, fp.whi)


def kernel(st: tuple, off: int, name: str, fp: Footprint, chained: bool) -> "tuple[tuple, list]":
    """A kernel operation issued: (new state, the races it starts as event details); it is
    then remaining (*chained*: it continues the newest chain, counted as one operation)."""
    dmas, ks = st
    out = _races(off, name, fp, dmas, "op", "still outstanding (no NPU_OP_DMA_WAIT)")
    if chained and ks:
        koff, kname, kfp = ks[-1]
        ks = ks[:-1] + ((koff, kname, kfp.union(fp)),)
    else:
        ks = (ks + ((off, name, fp),))[-KERNEL_REMAINING:]
    return (dmas, ks), out


def dma(st: tuple, off: int, name: str, fp: Footprint) -> "tuple[tuple, list]":
    """An NPU_OP_DMA_START issued: (new state, the races it starts); it is then outstanding
    (a fifth descriptor forces the oldest out)."""
    dmas, ks = st
    out = _races(off, name, fp, ks, "DMA", "still remaining (no NPU_OP_KERNEL_WAIT)")
    return ((dmas + ((off, name, fp),))[-DMA_DESCRIPTORS:], ks), out


def _details(typ, off, name, other_off, other, hit, why) -> dict:
    lo, hi, total = hit
    return {"what": f"{name}: {typ} hazard: {why}: {_where(lo, hi)}"
                    + (f" ({total} bytes in all)" if total != hi - lo else ""),
            "offset": off, "kind": "hazard", "hazard": typ, "other_offset": other_off, "other": other,
            "space": "lut" if lo >= LUT_SPACE else "memory",
            "lo": lo - LUT_SPACE if lo >= LUT_SPACE else lo, "hi": hi - LUT_SPACE if lo >= LUT_SPACE else hi,
            "bytes": total}
