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

Because each engine's commands form a chain (a total order), reachability needs no
transitive closure: `reach[v][e]` is the first position in engine e's chain that command v
precedes (or is). Then i precedes j iff reach[i][engine(j)] <= pos(j), and the commands of
another engine that are unordered with i form one interval of that engine's chain. The
hazard check looks up each command's bytes among the other engine's commands of that
interval (keys address x step + position, sorted; binary search): its work grows with the footprints, not with the
square of the number of commands.
"""
from __future__ import annotations

import heapq
from bisect import bisect_left
from dataclasses import dataclass

import numpy as np

from .descriptors import NO_STREAM


class CycleError(Exception):
    pass


class HazardBudgetError(Exception):
    """The hazard check of one epoch would need more memory than the model's budget."""


MAX_HAZARD_TABLE = 1 << 23      # addresses one engine's side of an epoch may hold (choice C-LIMIT)


@dataclass
class Footprint:
    """Sorted unique byte addresses a command reads / writes, per memory."""
    lr: np.ndarray
    lw: np.ndarray
    gr: np.ndarray
    gw: np.ndarray


_EMPTY = np.zeros(0, np.int64)


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """np.unique by sorting (faster here than numpy's hashing unique)."""
    a = np.sort(a.reshape(-1))
    return a[np.concatenate(([True], a[1:] != a[:-1]))] if a.size else a


def footprint(ops: dict) -> Footprint:
    acc = {"lr": [], "lw": [], "gr": [], "gw": []}
    for o in ops.values():
        if "r" in o.io:
            acc[o.space + "r"].append(o.addr.reshape(-1))
        if "w" in o.io:
            acc[o.space + "w"].append(o.addr.reshape(-1))
    return Footprint(**{k: sorted_unique(np.concatenate(v)) if v else _EMPTY for k, v in acc.items()})


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
        self.order, topo = self._topo(preds, keys)
        self._chains(cmds, topo)

    def _topo(self, preds, keys):
        m = len(preds)
        succ: list[list[int]] = [[] for _ in range(m)]
        indeg = [0] * m
        for v, ps in enumerate(preds):
            for p in ps:
                succ[p].append(v)
                indeg[v] += 1
        self._succ = succ
        heap = [(keys[v], v) for v in range(m) if indeg[v] == 0]
        heapq.heapify(heap)
        topo, order = [], []
        while heap:
            _, v = heapq.heappop(heap)
            topo.append(v)
            if v < self.n:
                order.append(v)
            for s in succ[v]:
                indeg[s] -= 1
                if indeg[s] == 0:
                    heapq.heappush(heap, (keys[s], s))
        if len(topo) != m:
            stuck = sorted(v for v in range(self.n) if indeg[v] > 0)
            raise CycleError(f"the dependencies form a cycle through commands {stuck[:8]}"
                             f"{' ...' if len(stuck) > 8 else ''}")
        return order, topo

    def _chains(self, cmds, topo) -> None:
        """Engine chains, each command's position in its chain, and reach (module docstring)."""
        engines = sorted({e for e, _, _ in cmds})
        col = {e: k for k, e in enumerate(engines)}
        self.col = [col[e] for e, _, _ in cmds]
        self.chain: list[list[int]] = [[] for _ in engines]
        self.pos = [0] * self.n
        for i, k in enumerate(self.col):
            self.pos[i] = len(self.chain[k])
            self.chain[k].append(i)
        inf = self.n
        reach: list = [None] * len(self._succ)
        for v in reversed(topo):
            r = [inf] * len(engines)
            if v < self.n:
                r[self.col[v]] = self.pos[v]
            for s in self._succ[v]:
                r = [min(x, y) for x, y in zip(r, reach[s])]
            reach[v] = r
        self.reach = reach[:self.n]
        self._before_cache: dict = {}
        del self._succ

    def precedes(self, i: int, j: int) -> bool:
        """Command i must finish before command j starts."""
        return i != j and self.reach[i][self.col[j]] <= self.pos[j]

    def ordered(self, i: int, j: int) -> bool:
        return self.precedes(i, j) or self.precedes(j, i)

    def _before(self, k: int, ka: int) -> np.ndarray:
        """reach[b][ka] for the commands b of chain k, in chain order (non-decreasing)."""
        key = (k, ka)
        if key not in self._before_cache:
            self._before_cache[key] = np.array([self.reach[b][ka] for b in self.chain[k]], np.int64)
        return self._before_cache[key]

    def unordered_interval(self, i: int, k: int) -> tuple[int, int]:
        """The positions [lo, hi) of engine chain k (not i's own) holding exactly the commands
        unordered with command i: those before lo precede i, those from hi on follow it."""
        lo = int(np.searchsorted(self._before(k, self.col[i]), self.pos[i], side="right"))
        return lo, min(self.reach[i][k], len(self.chain[k]))

    def hazard(self, footprint_of, size_of=None) -> "tuple[int, int, str, int] | None":
        """The first unordered pair (by its smaller, then larger command index) that conflicts:
        (i, j, memory, address), or None. `footprint_of(i)` gives command i's Footprint (asked
        only in epochs where two engines meet), `size_of(i)` an upper bound of its size.
        Raises HazardBudgetError if one side of an epoch exceeds MAX_HAZARD_TABLE addresses."""
        first: dict[int, int] = {}
        for i, e in enumerate(self.epoch):
            first.setdefault(e, i)
        bounds = sorted(first.values()) + [self.n]
        for s, e in zip(bounds, bounds[1:]):
            if e - s < 2:
                continue
            sides: dict[int, list[int]] = {}
            for i in range(s, e):
                sides.setdefault(self.col[i], []).append(i)
            best = None
            ks = sorted(sides)
            for x, ka in enumerate(ks):
                for kb in ks[x + 1:]:
                    hit = self._between(sides[ka], sides[kb], footprint_of, size_of)
                    if hit is not None and (best is None or hit < best):
                        best = hit
            if best is not None:
                i, j = best
                mem, addr = conflict(footprint_of(i), footprint_of(j))
                return i, j, mem, addr
        return None

    def _between(self, a_cmds, b_cmds, footprint_of, size_of) -> "tuple[int, int] | None":
        """The smallest conflicting unordered pair between the commands of two engines."""
        if size_of is not None and sum(size_of(i) for i in b_cmds) > sum(size_of(i) for i in a_cmds):
            a_cmds, b_cmds = b_cmds, a_cmds                                  # the table: the smaller side
        if size_of is not None and sum(size_of(i) for i in b_cmds) > MAX_HAZARD_TABLE:
            raise HazardBudgetError(
                f"the parallel group or streams region of commands {min(a_cmds[0], b_cmds[0])}.."
                f"{max(a_cmds[-1], b_cmds[-1])}: the commands of each engine touch more than {MAX_HAZARD_TABLE} "
                "bytes; the model's hazard check does not compare groups that large (choice C-LIMIT)")
        kb = self.col[b_cmds[0]]
        chain_b = self.chain[kb]
        # the table: every byte the b side touches as the key address * step + chain position, sorted
        # (address < 2^41 and step <= commands + 1 < 2^21 for a buffer of at most MAX_CMDBUF bytes)
        step = len(chain_b) + 1
        parts: dict[tuple[str, str], list] = {(space, k): [] for space in ("l", "g") for k in ("any", "w")}
        for b in b_cmds:
            f = footprint_of(b)
            for space in ("l", "g"):
                r, w = getattr(f, space + "r"), getattr(f, space + "w")
                parts[space, "any"].append(sorted_unique(np.concatenate((r, w))) * step + self.pos[b])
                parts[space, "w"].append(w * step + self.pos[b])
        tables = {k: np.sort(np.concatenate(v)) for k, v in parts.items()}
        del parts
        if not any(t.size for t in tables.values()):
            return None
        best = None
        for a in a_cmds:
            lo, hi = self.unordered_interval(a, kb)
            if lo >= hi:
                continue
            f = footprint_of(a)
            for space in ("l", "g"):
                for mine, theirs in (("w", "any"), ("r", "w")):
                    q, keys = getattr(f, space + mine), tables[space, theirs]
                    if not q.size or not keys.size:
                        continue
                    base = q * step
                    idx = np.searchsorted(keys, base + lo)
                    inside = idx < keys.size
                    inside[inside] = keys[idx[inside]] < base[inside] + hi
                    if inside.any():
                        p = int((keys[idx[inside]] - base[inside]).min())        # the earliest b that conflicts
                        pair = tuple(sorted((a, chain_b[p])))
                        if best is None or pair < best:
                            best = pair
        return best


class EpochOrder:
    """The order inside the current epoch, kept up to date as commands and dependencies are
    recorded, so that `bmk1880_add_dependency` can tell whether an edge would close a cycle
    without rebuilding the Schedule. Inside an epoch the order is: each engine's commands in
    buffer order, each stream's commands in buffer order, and the dependencies. The commands a
    command reaches are therefore, per engine and per stream, all those from some index on;
    `reaches` lowers these thresholds from the start command, following a dependency when its
    source becomes reachable. Each dependency is followed at most twice per query."""

    def __init__(self):
        self.of: dict[int, tuple[int, int]] = {}              # command -> (engine, stream)
        self.by: dict[tuple[str, int], list[int]] = {}         # ("e", engine) / ("s", stream) -> commands
        self.pair: dict[tuple[int, int], list[int]] = {}       # (stream, engine) -> commands
        self.deps: dict[tuple[str, int], list[tuple[int, int]]] = {}    # chain of the source -> sorted deps

    def chains(self, i: int):
        e, s = self.of[i]
        return [("e", e)] + ([("s", s)] if s != NO_STREAM else [])

    def add(self, i: int, engine: int, stream: int) -> None:
        self.of[i] = (engine, stream)
        for ch in self.chains(i):
            self.by.setdefault(ch, []).append(i)
        if stream != NO_STREAM:
            self.pair.setdefault((stream, engine), []).append(i)

    def add_dep(self, before: int, after: int) -> None:
        for ch in self.chains(before):
            lst = self.deps.setdefault(ch, [])
            lst.insert(bisect_left(lst, (before, after)), (before, after))

    def reaches(self, src: int, dst: int) -> bool:
        """Does command src precede (or equal) command dst?"""
        low: dict[tuple[str, int], int] = {}
        todo = [src]
        while todo:
            x = todo.pop()
            for ch in self.chains(x):
                old = low.get(ch)
                if old is not None and old <= x:
                    continue
                low[ch] = x
                hi = old if old is not None else float("inf")
                deps = self.deps.get(ch, [])
                for k in range(bisect_left(deps, (x, -1)), len(deps)):
                    if deps[k][0] >= hi:
                        break
                    todo.append(deps[k][1])
                # the newly reached commands of this chain reach the other chains from their first one on
                kind, v = ch
                for (s, e), lst in self.pair.items():
                    if (kind == "e" and e == v) or (kind == "s" and s == v):
                        k = bisect_left(lst, x)
                        if k < len(lst) and lst[k] < hi:
                            todo.append(lst[k])
        return any(low.get(ch, dst + 1) <= dst for ch in self.chains(dst))
