"""Ordering of the commands of one buffer (guide 3.5-3.10, choice C-SCHED) and the hazard check.

Each computation command carries its engine, a SYNC flag and a stream. SYNC starts a new
*epoch*: a serial command is an epoch of its own; a parallel group or a streams region is
one epoch. The partial order is:

* commands of one engine run in buffer order (one engine of each type, 3);
* every command of an epoch waits for every command of the epochs before it;
* inside a streams region, commands of one stream run in buffer order;
* `bmk1880_add_dependency(before, after)` adds before -> after.

Commands with no order between them may run in parallel; if they touch the same byte and
one of them writes it, the result would depend on timing, so the buffer faults (choice
C-HAZARD) before anything runs.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from .descriptors import NO_STREAM


class CycleError(Exception):
    pass


@dataclass
class Footprint:
    """Sorted unique byte addresses a command reads / writes, per memory."""
    lr: np.ndarray
    lw: np.ndarray
    gr: np.ndarray
    gw: np.ndarray


_EMPTY = np.zeros(0, np.int64)


def footprint(ops: dict) -> Footprint:
    acc = {"lr": [], "lw": [], "gr": [], "gw": []}
    for o in ops.values():
        if "r" in o.io:
            acc[o.space + "r"].append(o.addr.reshape(-1))
        if "w" in o.io:
            acc[o.space + "w"].append(o.addr.reshape(-1))
    return Footprint(**{k: np.unique(np.concatenate(v)) if v else _EMPTY for k, v in acc.items()})


def _meet(a: np.ndarray, b: np.ndarray) -> "int | None":
    if not a.size or not b.size or a[-1] < b[0] or b[-1] < a[0]:
        return None
    both = np.intersect1d(a, b, assume_unique=True)
    return int(both[0]) if both.size else None


def conflict(f: Footprint, g: Footprint) -> "tuple[str, int] | None":
    """(memory, first shared address) if one writes what the other reads or writes."""
    for space in ("l", "g"):
        fw, fr, gw, gr = (getattr(x, space + k) for x in (f, g) for k in ("w", "r"))
        hits = [a for a in (_meet(fw, gw), _meet(fw, gr), _meet(fr, gw)) if a is not None]
        if hits:
            return ("lmem" if space == "l" else "gmem"), min(hits)
    return None


class Schedule:
    """The partial order over n commands given as (engine, sync, stream) in buffer order."""

    def __init__(self, cmds: list[tuple[int, bool, int]], deps: list[tuple[int, int]]):
        n = len(cmds)
        self.n = n
        self.epoch: list[int] = []
        preds: list[list[int]] = [[] for _ in range(n)]
        keys: list[tuple[int, int]] = [(i, 1) for i in range(n)]
        cur: list[int] = []
        barrier = None
        last_engine: dict[int, int] = {}
        last_stream: dict[int, int] = {}
        for i, (engine, sync, stream) in enumerate(cmds):
            if sync or i == 0:
                if cur:
                    if len(cur) == 1:
                        barrier = cur[0]
                    else:                                   # one node stands for "all of the epoch"
                        barrier = len(preds)
                        preds.append(list(cur))
                        keys.append((i, 0))
                cur, last_engine, last_stream = [], {}, {}
                self.epoch.append(self.epoch[-1] + 1 if self.epoch else 0)
            else:
                self.epoch.append(self.epoch[-1])
            p = preds[i]
            if barrier is not None:
                p.append(barrier)
            if engine in last_engine:
                p.append(last_engine[engine])
            if stream != NO_STREAM and stream in last_stream:
                p.append(last_stream[stream])
            last_engine[engine] = i
            if stream != NO_STREAM:
                last_stream[stream] = i
            cur.append(i)
        for before, after in deps:
            preds[after].append(before)
        self.preds = preds
        self.order, anc = self._topo(preds, keys)
        self._anc = anc

    def _topo(self, preds, keys):
        m = len(preds)
        succ: list[list[int]] = [[] for _ in range(m)]
        indeg = [0] * m
        for v, ps in enumerate(preds):
            for p in ps:
                succ[p].append(v)
                indeg[v] += 1
        heap = [(keys[v], v) for v in range(m) if indeg[v] == 0]
        heapq.heapify(heap)
        anc = [0] * m
        order = []
        done = 0
        while heap:
            _, v = heapq.heappop(heap)
            done += 1
            if v < self.n:
                order.append(v)
            bit = anc[v] | (1 << v)
            for s in succ[v]:
                anc[s] |= bit
                indeg[s] -= 1
                if indeg[s] == 0:
                    heapq.heappush(heap, (keys[s], s))
        if done != m:
            stuck = sorted(v for v in range(self.n) if indeg[v] > 0)
            raise CycleError(f"the dependencies form a cycle through commands {stuck[:8]}"
                             f"{' ...' if len(stuck) > 8 else ''}")
        return order, anc

    def precedes(self, i: int, j: int) -> bool:
        """Command i must finish before command j starts."""
        return bool((self._anc[j] >> i) & 1)

    def ordered(self, i: int, j: int) -> bool:
        return self.precedes(i, j) or self.precedes(j, i)

    def unordered_pairs(self):
        """(i, j), i < j, with no order between them (only inside one epoch)."""
        by_epoch: dict[int, list[int]] = {}
        for i, e in enumerate(self.epoch):
            by_epoch.setdefault(e, []).append(i)
        for members in by_epoch.values():
            for x, i in enumerate(members):
                for j in members[x + 1:]:
                    if not self.ordered(i, j):
                        yield i, j

    def hazard(self, footprint_of) -> "tuple[int, int, str, int] | None":
        """The first unordered pair that conflicts: (i, j, memory, address), or None.
        `footprint_of(i)` gives command i's Footprint (asked only for unordered commands)."""
        for i, j in self.unordered_pairs():
            c = conflict(footprint_of(i), footprint_of(j))
            if c is not None:
                return i, j, c[0], c[1]
        return None
