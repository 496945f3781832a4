"""Fused frozen runs: a FrozenRun's operations (``plan.FrozenRun``) bound once to the
memory's page arrays and run as compiled segments (one nopython call each,
``_kernels.program``) instead of a Python step per operation.

A frozen run is a fixed list of plans whose operand spans, FIFO counts, shapes and
computes are the same on every run; only the bytes differ.  :class:`Fused` encodes, once
per set of page arrays (re-bound when the memory holds other arrays for those pages), every
plan it can express as an int64 row (``compiled.R_*``): a memory-to-memory DMA (its lines
split into page chunks), and an operation whose compute is one of the compiled kernels
(``compiled.lookup_compute`` / ``elementwise_compute`` / ``direct_compute`` /
``pointwise_compute``, which carry their constants in ``compute.fused``) on operands read
whole from one page, popped from a chaining FIFO or constant (a scalar), storing its OFM in
order into one page or pushing it.  The row runs the same
kernel (the same njit function, on int64 operands: the kernels convert every operand to
int64 first) and applies the plan's steps in the plan's order (operands, compute, FIFO
clear, pops, store / push).  Consecutive rows form one segment; the other plans stay the
Python steps they were (``_Plan._data`` / ``_move``, ``_dma_move``) between segments.

The chaining FIFOs: a segment that uses them loads the OpState's FIFO values into its
buffers first and hands back what is left after it, in the chunks the Python steps would
have left (the chunk sizes do not depend on data; simulated when bound), so a Python step,
the result's device and the next segment see what they would have.  The checks a frozen run
keeps stay per run: a FIFO operand's range and count and a kernel's own decline (an index
outside a table) make :meth:`Fused.run` return None, as FrozenRun.run does.
"""
from __future__ import annotations

import math

import numpy as np

from . import compiled as _cc
from . import plan as _plan
from .common import NUM_CHAINING_FIFO
from ..memory import PAGE_BITS, PAGE_SIZE


MIN_ROWS = 3                    # a shorter run of encodable plans stays Python steps


class _Segment:
    __slots__ = ("code", "rows", "lines", "consts", "fifo", "chunks", "flag")


class _Bound:
    """The steps of a Fused run on one set of page arrays: _Segment or a plan."""
    __slots__ = ("pages", "missing", "steps", "work", "fbuf", "fptr", "buf", "state", "chunks0")

    def valid(self, mem, st) -> bool:
        live = mem.live_page
        for k, a in self.pages:
            if live(k) is not a:
                return False
        for k in self.missing:
            if live(k) is not None:
                return False
        return st is None or self.chunks0 == _sizes(st)


def _usable_page(a) -> bool:
    """A page array the compiled segments can address (compiled.work_vector's condition)."""
    return (isinstance(a, np.ndarray) and a.dtype == np.uint8 and a.shape == (PAGE_SIZE,) and a.flags.c_contiguous
            and a.flags.writeable)


def _sizes(st) -> tuple:
    return tuple(tuple(c.size for c in q) for q in st.fifo)


def _pop(q: list, count: int) -> None:
    """read_chaining_fifo's effect on a FIFO's chunk sizes."""
    while count and q:
        if q[0] <= count:
            count -= q.pop(0)
        else:
            q[0] -= count
            count = 0


class Fused:
    """A FrozenRun's plans (*plans*, *flag*: the plan whose OFM sets the result flag) as
    compiled segments and Python steps; `run(mem, st)` is FrozenRun.run's loop."""
    __slots__ = ("plans", "flag", "bound", "prog", "uses")

    def __init__(self, plans, flag):
        self.plans, self.flag, self.bound, self.prog = tuple(plans), flag, None, False
        self.uses = 0

    def ready(self) -> bool:
        """Whether to run this way now: from the form's second use on (binding costs a few
        Python runs of the plans and the first call loads the compiled program: a form used
        once is not bound) while the program is available and the binding made a segment
        (else the plain loop is cheaper)."""
        self.uses += 1
        if self.uses < 2:
            return False
        if self.prog is False:
            self.prog = _cc.program()
        return self.prog is not None

    def run(self, mem, st) -> "int | None":
        b = self.bound
        if b is None or not b.valid(mem, st):
            b = self.bound = self._bind(mem, st)
            if not any(s.__class__ is _Segment for s in b.steps):
                self.prog = None                            # (ready() is False from now on)
        cond, flag, prog = -1, self.flag, self.prog
        for s in b.steps:
            if s.__class__ is _Segment:
                if s.fifo and not _load(b, st):
                    return None
                b.state[0] = -1
                r = prog(s.code, b.work, b.buf)
                mem.version += 1                            # (its stores: Memory.version counts them)
                if r >= 0:
                    return None
                if s.flag:
                    cond = int(b.state[0])
                if s.fifo and not _unload(b, st, s.chunks):
                    return None
                continue
            c = _plan.step(s, mem, st, flag)
            if c is None:
                return None
            if c >= 0:
                cond = c
        return cond

    # ---------------------------------------------------------------- binding
    def _bind(self, mem, st) -> _Bound:
        """The steps on the memory's present page arrays (see the module doc)."""
        b = _Bound()
        pos: dict = {}                                      # page number -> position in the work vector
        arrays: list = []
        missing: set = set()

        def page(addr: int, n: int) -> "int | None":
            """The list position of the page holding [addr, addr + n), None when that is not
            one present page."""
            if n <= 0 or addr < 0 or (addr & (PAGE_SIZE - 1)) + n > PAGE_SIZE:
                return None
            k = addr >> PAGE_BITS
            if k not in pos:
                a = mem.live_page(k)
                if a is None:
                    missing.add(k)
                    return None
                if not _usable_page(a):
                    return None
                pos[k] = len(arrays)
                arrays.append((k, a))
            return pos[k]
        q = [[c.size for c in f] for f in st.fifo] if st is not None else [[] for _ in range(NUM_CHAINING_FIFO)]
        b.chunks0 = _sizes(st) if st is not None else None
        steps, seg, most, cap, dma_max = [], None, 1, 1, 1
        for p in self.plans:
            held = [sum(x) for x in q]
            enc = _encode(p, page)
            fifo = _fifo_effect(p, q)                       # (q: the chunk sizes after p)
            if enc is None:
                if seg is not None:
                    steps += seg.close()
                    seg = None
                steps.append(p)
                continue
            row, lines, consts = enc
            if seg is None:
                seg = _Builder(held)
            seg.add(p, row, lines, consts, fifo, p is self.flag, q)
            cap = max(cap, max(seg.held[f] + seg.pushed[f] for f in range(NUM_CHAINING_FIFO)))
            if row[_cc.R_KIND] == _cc.K_DMA:
                dma_max = max(dma_max, sum(n for _, _, n in lines[0]))
            else:
                hw = row[_cc.R_H] * row[_cc.R_W]
                most = max(most, hw * row[_cc.R_C], hw * row[_cc.R_A + _cc.SRC_CH], hw * row[_cc.R_B + _cc.SRC_CH])
        if seg is not None:
            steps += seg.close()
        b.pages, b.missing, b.steps = tuple(arrays), tuple(sorted(missing)), tuple(steps)
        b.work, b.fbuf, b.fptr, b.state = _cc.work_vector([a for _, a in arrays], PAGE_SIZE, NUM_CHAINING_FIFO,
                                                          cap, most)
        b.buf = np.zeros(dma_max, np.uint8)
        return b


class _Builder:
    """A segment being encoded: rows, DMA lines and constants, rebased into one table each."""

    def __init__(self, held):
        self.rows, self.lines, self.cst, self.index, self.plans = [], [], [], {}, []
        self.held, self.pushed = list(held), [0] * NUM_CHAINING_FIFO
        self.fifo = self.flag = False
        self.chunks = None

    def add(self, p, row, lines, consts, fifo, flag, q) -> None:
        self.plans.append(p)
        row = list(row)
        if row[_cc.R_KIND] == _cc.K_DMA:
            reads, writes = lines
            n = len(self.lines)
            row[_cc.D_READ0], row[_cc.D_READ1] = n, n + len(reads)
            row[_cc.D_WRITE0], row[_cc.D_WRITE1] = n + len(reads), n + len(reads) + len(writes)
            self.lines += list(reads) + list(writes)
        row[_cc.R_CST:_cc.R_CST + 4] = [-1] * 4
        for j, c in enumerate(consts):
            i = self.index.get(id(c))
            if i is None:
                i = self.index[id(c)] = len(self.cst)
                self.cst.append(c)                          # (kept: its id stays its own)
            row[_cc.R_CST + j] = i
        if row[_cc.R_KIND] != _cc.K_DMA and row[_cc.R_DST + _cc.DST_KIND] == _cc.DST_FIFO:
            self.pushed[row[_cc.R_DST + _cc.DST_WHERE]] += row[_cc.R_H] * row[_cc.R_W] * row[_cc.R_C]
        if flag:
            row[_cc.R_FLAGS] |= _cc.F_FLAG
        self.rows.append(row)
        self.fifo = self.fifo or fifo
        self.flag = self.flag or flag
        self.chunks = tuple(tuple(x) for x in q)

    def close(self) -> list:
        """[the _Segment], or its plans as Python steps when they are fewer than MIN_ROWS
        (a call of the program costs about what two Python steps cost)."""
        if len(self.rows) < MIN_ROWS:
            return list(self.plans)
        s = _Segment()
        s.consts = [np.ascontiguousarray(c, np.int64) for c in self.cst]     # (the code holds their addresses)
        s.code, s.rows, s.lines = _cc.code_vector(self.rows, self.lines, s.consts)
        s.fifo, s.flag, s.chunks = self.fifo, self.flag, self.chunks
        return [s]


def _fifo_effect(p, q) -> bool:
    """Plan *p*'s effect on the FIFOs' chunk sizes *q* (_Plan._move's order: clear, pops,
    push); whether it uses the FIFOs."""
    if p.dma_lines is not None:
        return False
    if p.clear:
        for x in q:
            x.clear()
    for s in p.fifo_srcs:
        _pop(q[s.fifo], s.count)
    d = p.dst
    push = isinstance(d, _plan._FifoDst)
    if push:
        n = math.prod(p.shape)
        if n:
            q[d.fifo].append(n)
    return bool(p.clear or p.fifo_srcs or push)


def _load(b: _Bound, st) -> bool:
    """The OpState's FIFO values into the segment buffers; False when they do not fit (not
    expected: sized when bound for the counts, which do not depend on data)."""
    fbuf, fptr = b.fbuf, b.fptr
    for f, chunks in enumerate(st.fifo):
        n = st.fifo_count[f]
        if n > fbuf.shape[1]:
            return False
        if n:
            fbuf[f, :n] = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
        fptr[f, 0], fptr[f, 1] = 0, n
    return True


def _unload(b: _Bound, st, chunks) -> bool:
    """What the segment left in its FIFO buffers back into the OpState, in *chunks* (the
    sizes the Python steps would have left); False when the counts differ (not expected:
    the counts do not depend on data)."""
    fbuf, fptr = b.fbuf, b.fptr
    for f, sizes in enumerate(chunks):
        h, t = int(fptr[f, 0]), int(fptr[f, 1])
        if t - h != sum(sizes):
            return False
        out, pos = [], h
        if sizes:
            v = fbuf[f, h:t].copy()
            pos = 0
            for n in sizes:
                out.append(v[pos:pos + n])
                pos += n
        st.fifo[f] = out
        st.fifo_count[f] = t - h
    return True


def _encode(p, page) -> "tuple | None":
    """(row, lines, constants) of plan *p* (see compiled.R_*), or None (a Python step).
    *page(addr, n)*: the page list position of a span in one present page, or None."""
    if p.dma_lines is not None:
        if p.dma_lut is not None:
            return None
        sides = []
        for side in p.dma_lines:
            out = []
            for a, n in side:
                while n > 0:
                    m = min(n, PAGE_SIZE - (a & (PAGE_SIZE - 1)))
                    k = page(a, m)
                    if k is None:
                        return None
                    out.append((k, a & (PAGE_SIZE - 1), m))
                    a += m
                    n -= m
            sides.append(out)
        if sum(x[2] for x in sides[0]) != sum(x[2] for x in sides[1]):
            return None
        row = [0] * _cc.ROW_LEN
        row[_cc.R_KIND] = _cc.K_DMA
        return row, tuple(sides), ()
    fz = getattr(p.compute, "fused", None)
    if fz is None or p.dst is None or (p.clear and p.fifo_srcs):
        return None
    shape_of, odt, (kind, consts, scalar, operands) = fz
    shape = tuple(p.shape)
    if len(shape) != 3 or len(p.srcs) != sum(k is None for k in operands):
        return None
    H, W, C = shape
    row = [0] * _cc.ROW_LEN
    row[_cc.R_KIND], row[_cc.R_H], row[_cc.R_W], row[_cc.R_C] = kind, H, W, C
    row[_cc.R_SCALAR] = int(scalar)
    dummies = []
    srcs = iter(p.srcs)
    for k, o in zip(operands, (_cc.R_A, _cc.R_B)):
        if k is not None:                                   # a constant operand (a scalar)
            row[o:o + 5] = [_cc.SRC_CONST, int(k), 0, 0, 1]
            continue
        s = next(srcs)
        sh = tuple(s.shape)
        if len(sh) != 3 or sh[:2] != (H, W):
            return None
        if isinstance(s, _plan._MemSrc):
            code = _cc.dtype_code(s.dt)
            if s.idx is not None or code is None or s.n != math.prod(sh) * np.dtype(s.dt).itemsize:
                return None
            k = page(s.alo, s.n)
            if k is None:
                return None
            row[o:o + 4] = [_cc.SRC_MEM, k, s.alo & (PAGE_SIZE - 1), code]
            dummies.append(np.empty(sh, s.dt))
        elif isinstance(s, _plan._FifoSrc):
            if s.count != math.prod(sh):
                return None
            row[o:o + 4] = [_cc.SRC_FIFO, s.fifo, int(s.lo), int(s.hi)]
            dummies.append(np.empty(sh, np.int64))
        else:
            return None
        row[o + _cc.SRC_CH] = sh[2]
    if shape_of(dummies) != shape:
        return None
    code = _cc.dtype_code(odt)
    if code is None:
        return None
    d = p.dst
    if isinstance(d, _plan._MemDst):
        w = np.dtype(odt).itemsize
        if d.idx is not None or np.dtype(d.udt).itemsize != w or d.n != H * W * C * w:
            return None
        k = page(d.alo, d.n)
        if k is None:
            return None
        row[_cc.R_DST:_cc.R_DST + 4] = [_cc.DST_MEM, k, d.alo & (PAGE_SIZE - 1), code]
    elif isinstance(d, _plan._FifoDst):
        row[_cc.R_DST:_cc.R_DST + 4] = [_cc.DST_FIFO, d.fifo, 0, code]
    else:
        return None
    if kind == _cc.K_POINTWISE and (consts[0].shape != (C, row[_cc.R_A + _cc.SRC_CH]) or consts[1].shape != (5, C)):
        return None
    row[_cc.R_FLAGS] = (_cc.F_CLEAR if p.clear else 0)
    return row, (), consts
