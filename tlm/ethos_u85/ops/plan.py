"""Plans: the warm path of kernel operations and NPU_OP_DMA_START.

A network runs the same operations with the same registers again and again (every
inference, every LSTM time step).  The first time an operation runs with a given key it
runs the ordinary way (``tlm.ethos_u85.ops.KERNEL_OPS`` / ``tlm.ethos_u85.ops.dma.dma_start``); if the case is
one the plans cover, that run is also recorded and a plan is built from it.  The next time,
the plan does the same work with little Python per operation:

* **key** (:func:`plan_key`): the operation and its payload, the register snapshot's contents,
  the device's configuration, Policy and region routes (BASEP, REGIONCFG, MEM_ATTR, PROT,
  striping pins), and the chaining state the op starts from (chain length, external IFM
  count, valid FIFOs, values held per FIFO).  Everything else the plan depends on is
  *data* and is compared on every run: the weight and scale/bias stream bytes (in full),
  the LUT contents (ops with a LUT activation), the fault list (the plan's accesses must
  be fault free) and, for chained operands, the value range of what the FIFO holds (known
  without a reduction for a chunk a plan pushed from a narrower type).  A
  difference makes the plan decline; the op then runs the ordinary way (and the plan is
  rebuilt from that run, a few times at most per key).
* **run** (:meth:`_Plan.run`): (1) checks and gathers the operands through the memory's
  back door (no side effects), (2) computes the OFM (no side effects; any exception here
  declines), (3) commits: chaining state, FIFO pops and pushes, OFM bytes, the recorded
  AXI transactions (memory log, the device's per-command list and written pages, hence
  cycles, work units and PMU events exactly as the ordinary run), COND_STATUS.result_flag.
* **compute**: exact by construction and checked when the plan is built:

  - ELEMENTWISE / POOL 1x1 with small operand domains: a result table over every operand
    value (int8 x int8, int8 or int16 unary, an int16 operand with a scalar), filled by the
    ordinary evaluation itself (``elementwise.evaluate``, ``OpContext.rescale`` /
    ``activation``);
  - ELEMENTWISE add/sub/min/max/mul of 16-bit operands: per-operand input-scaling tables
    (``arith.scale_input`` over the operand's domain), then the output stage: the rescale
    ``(acc*scale + R) >> shift`` (R from ``arith.round_terms``), the activation's clamp and,
    for a LUT function, a table of ``arith.activation`` over the clamp range;
  - POOL max/min over a window without padding: the 1x1 table looked up at each window's
    max/min raw value; POOL reduce_sum (any IFM precision): the channel sum, ``accumulate``,
    then the output stage below (or ``OpContext.rescale`` / ``activation``);
  - other ELEMENTWISE cases (32-bit operands): ``elementwise.compute`` (the ordinary
    accumulator step) on the operands, then the output stage over the accumulator's whole
    range (int32, or a 32-bit mul's 64-bit product with rescale_mode_shift_only; without a
    LUT the stage also takes activation's int32 wrap), else ``elementwise.evaluate``;
  - CONV / DEPTHWISE: the ordinary kernels (``conv_acc`` / ``depthwise_acc``, a single
    BLAS product for a pointwise conv) and the ordinary fused epilogue
    (``common.fused_epilogue``), with the decoded weights and scale/bias records of the
    recorded run; with a LUT activation (not the fused epilogue's case) write_accumulator's
    own steps (wrap, bias, ``OpContext.rescale``, ``activation`` on the plan's LUT copy,
    truncation).

  - compiled computes (``tlm.ethos_u85.ops.compiled``, when numba is installed): the 1x1
    CONV of at most ``_CC_CONV_MACS`` MACs (larger ones keep the BLAS product; with a LUT
    activation a table of its values after the rescale), the decomposed 16-bit
    ELEMENTWISE, the other ELEMENTWISE cases' accumulator and output stage where scale_a /
    scale_b pass the operands through (32-bit; not div) and the table lookups above as one nopython call each,
    used only where they agree with the numpy compute on the recorded operands and on
    random and extreme ones (``_checked``).

  When the plan is built, its compute runs on the recorded run's own operands and must
  reproduce the bytes that run wrote (or pushed into a FIFO) exactly; the elementwise
  output stage and the small-OFM conv epilogue are also checked on random and extreme
  values against ``elementwise.evaluate`` / ``OpContext.rescale`` + ``activation`` /
  ``common.fused_epilogue``.  Why an op got no plan is counted in ``STATS``.
  The plan's reads and writes must cover exactly the bytes of the recorded transactions.

Plans run only on the plain memory model with the device as its only listener, and not
with ``Device(reference_paths=True)`` / ``Memory(batching=False)`` (the reference paths stay
literal).  ``Device(plans=False)`` (``run_model(..., warm_paths=False)``) switches them off
(tests compare both ways).
"""
from __future__ import annotations

import os
from collections import Counter

import numpy as np

from .. import arith, fmap, isa
from ..arith import ActType, Precision
from ..fmap import FeatureMap, Storage
from ...core.memo import Memo
from ..memory import (ADDR_MASK, PAGE_BITS, PAGE_SIZE, Channel, DataPort, Memory, merged_intervals, txn_pairs)
from ..pmu import Pmu, beats, summarise
from . import common as _common
from . import compiled as _cc
from . import conv as _conv
from . import elementwise as _ew
from . import pool as _pool

__all__ = ["plan_count", "execute_kernel", "execute_dma", "plan_key", "clear"]


DEBUG = bool(os.environ.get("TLM_PLAN_DEBUG"))   # raise instead of declining a plan build
STATS: Counter = Counter()       # (op, "planned" | "declined" | "ordinary" | "built") and ("no plan", why)

_PLANS = Memo(1 << 13)           # key -> _Plan, or None: this key is run the ordinary way
_REBUILDS = Memo(1 << 13)        # key -> plans built for it (a key whose data keep changing stops)
_MAX_REBUILDS = 4
_MAX_ELEMENTS = 1 << 16          # larger ops are data-bound: the ordinary path
_ENV_SIGS = Memo(1 << 12)        # device environment -> a small token (keys stay cheap)
_SEED = 0x5EED                   # build-time spot checks (deterministic)
# frozen runs as compiled segments (ops.fused) where the compiled kernels are available;
# TLM_FUSED=0 keeps a Python step per operation (tests compare both)
FUSED = os.environ.get("TLM_FUSED", "1").lower() not in ("0", "no", "false")

_M = isa.elementwise_mode
_EW_MODES_DECOMPOSED = (int(_M.add), int(_M.sub), int(_M.min), int(_M.max), int(_M.mul))
_ACT_LUT_NONE = int(arith.ActivationFunction.LUT_NONE)
_TABLE_MAX = 1 << 17             # entries of a full result table
_CC_CONV_MACS = 1 << 16          # a larger 1x1 CONV keeps its BLAS product (faster than the compiled loop;
                                 # dtln's 257x128 ones: the kernel 15 us, the float product alone 13 us)
_STEPS_MAX = 1 << 18             # entries of an activation table (sigmoid's clamp range fits)


def _no(reason: str) -> None:
    """Not planned (the reason is counted in STATS under ('no plan', reason))."""
    STATS["no plan", reason] += 1
    return None


def _k(v, dt=np.int64) -> np.ndarray:
    """*v* as a 0-d array of type *dt*, the constant operand of a compute closure: numpy
    takes a Python or numpy scalar operand through its scalar promotion, several
    microseconds per call on an 80-element operand, a 0-d array through the array loop
    (the same values and result type)."""
    return np.array(v, dt)


def _sub(v: np.ndarray, c: np.ndarray) -> np.ndarray:
    """np.subtract(v, c, dtype=c.dtype) for a 0-d constant c, without a casting ufunc (a copy
    of v in c's type, then an in-place subtraction: the same values)."""
    if v.dtype == c.dtype:
        return v - c
    r = v.astype(c.dtype)
    r -= c
    return r


def plan_count() -> int:
    """How many operation keys have a plan (keys run the ordinary way not counted)."""
    return sum(1 for p in _PLANS.values() if p is not None)


def clear() -> None:
    """Forget every plan (tests)."""
    _PLANS.clear()
    _REBUILDS.clear()
    _COMPUTES.clear()
    _PUSHED.clear()
    STATS.clear()


# ============================================================================ keys
def env_token(dev) -> object:
    """A token for the device's configuration, Policy and routes of the eight regions
    (memoised in the device's route cache, which register writes, resets and pin samples
    clear)."""
    rc = dev.route_cache
    k = ("plan", dev.cpl, dev.csl)
    e = rc.get(k)
    if e is not None and e[0] is dev.policy:
        return e[1]
    try:
        routes = tuple(dev.route(r) for r in range(8))
    except Exception:                                        # noqa: BLE001 - no plan then
        routes = None
    sig = (dev.config, dev.policy, routes)
    tok = _ENV_SIGS.get(sig)
    if tok is None:
        tok = _ENV_SIGS.put(sig, object())
    rc[k] = (dev.policy, tok)                               # (a Policy assigned later: recomputed)
    return tok


def plan_key(dev, name: str, d, snap, fn) -> "tuple | None":
    """The plan key of an operation (see the module doc; *fn* the ordinary implementation
    the device would call); None: not plannable."""
    skey = _common.snapshot_key(snap)
    if skey is None:
        return None
    st = dev.op_state
    return (name, d.raw, skey, fn, env_token(dev), st.chain_length, st.num_ifm, tuple(st.fifo_valid),
            tuple(st.fifo_count))


def _usable(dev) -> bool:
    """Plans run on the plain memory model with the device as its only listener, never
    on the reference paths."""
    mem = dev.memory
    ls = mem.listeners
    return (dev.plans and type(mem).access is Memory.access and len(ls) == 1 and ls[0] is dev.txn_sink
            and not dev.reference_paths and mem.batching)


def _kernel_work(snap, name):
    from ..device import kernel_work as kw           # (tlm.ethos_u85.device imports this module)
    return kw(snap, name)


# ============================================================================ entry points
def execute_kernel(dev, name: str, d, snap, fn) -> None:
    """Run kernel op *name* (decoded command *d*, register snapshot *snap*) on device *dev*:
    by its plan when there is one that applies, else by *fn* (the ordinary op), recording
    that run to build a plan."""
    if not _usable(dev):
        fn(snap, dev.dataport, dev)
        return
    key = plan_key(dev, name, d, snap, fn)
    p = _PLANS.get(key, False) if key is not None else None
    if p:
        if p.run(dev):
            STATS[name, "planned"] += 1
            return
        STATS[name, "declined"] += 1
    elif p is None:
        STATS[name, "ordinary"] += 1
        fn(snap, dev.dataport, dev)
        return
    _build_around(dev, key, _prepare_kernel, name, d, snap, lambda: fn(snap, dev.dataport, dev))


def execute_dma(dev, d, snap, start) -> None:
    """NPU_OP_DMA_START by its plan, or by *start* (tlm.ethos_u85.ops.dma.dma_start; recording it to
    build a plan)."""
    def fn():
        start(snap, dev.dataport, lut=dev.lut, policy=dev.policy)
    if not _usable(dev):
        fn()
        return
    key = plan_key(dev, "NPU_OP_DMA_START", d, snap, start)
    p = _PLANS.get(key, False) if key is not None else None
    name = "NPU_OP_DMA_START"
    if p:
        if p.run(dev):
            STATS[name, "planned"] += 1
            return
        STATS[name, "declined"] += 1
    elif p is None:
        STATS[name, "ordinary"] += 1
        fn()
        return
    _build_around(dev, key, _prepare_dma, "NPU_OP_DMA_START", d, snap, fn)


def _build_around(dev, key, prepare, name, d, snap, run_ordinary) -> None:
    """Run the op the ordinary way; when *prepare* accepted it, build its plan from that run."""
    n = _REBUILDS.get(key, 0)
    pre = None
    STATS[name, "built"] += 1
    dev.plan_built = True
    if n < _MAX_REBUILDS:
        try:
            pre = prepare(dev, name, d, snap)
        except Exception:                                   # noqa: BLE001 - not plannable
            if DEBUG:
                raise
            pre = None
    i0 = len(dev.command_txns)
    try:
        run_ordinary()                                      # raises as the op raises
    except BaseException:
        _REBUILDS.put(key, n + 1)
        _PLANS.put(key, None)                               # (an op that fails runs the ordinary way)
        raise
    plan = None
    if pre is not None:
        try:
            plan = pre.finish(dev, dev.command_txns[i0:])
        except Exception:                                   # noqa: BLE001 - not plannable
            if DEBUG:
                raise
            plan = None
    _REBUILDS.put(key, n + 1)
    _PLANS.put(key, plan)


# ============================================================================ the plan
class _Plan:
    """See the module doc.  Built by a _Prepared.finish."""
    __slots__ = ("srcs", "fifo_srcs", "compute", "shape", "dst", "rint", "wint", "ftok", "checks", "lut",
                 "txns", "log", "pages", "chain", "clear", "macs", "flag", "dma_lines", "dma_lut", "beats",
                 "twork", "summary", "op_work", "into")

    def _fault_free(self, mem) -> bool:
        """No access of the plan can meet a fault (checked once per fault list contents)."""
        tok = mem.faults.token
        if tok == self.ftok:
            return True
        for lo, hi in self.rint:
            if not mem.fault_free(lo, hi, False):
                return False
        for lo, hi in self.wint:
            if not mem.fault_free(lo, hi, True):
                return False
        self.ftok = tok
        return True

    def _log(self) -> tuple:
        """The memory log records of the plan's transactions (batches expanded)."""
        log = []
        for t in self.txns:
            log += t.transactions() if hasattr(t, "transactions") else [t]
        self.log = tuple(log)
        return self.log

    def run(self, dev) -> bool:
        """Run inside the device's command (Device._exec_one): the transactions count there."""
        if not self.exec(dev):
            return False
        dev.plan_done = self                   # its transactions count in the command's cycles,
        dev.command_work = self.op_work             # work units and PMU events (Device._end_command)
        if self.pages:
            dev.note_pages(self.pages)
        return True

    def exec(self, dev, checked: bool = False) -> bool:
        """The operation's effects except the command bookkeeping (cycles, work units, PMU,
        written pages: the caller's); False with nothing done when the plan declines.
        *checked*: the caller has compared the stream checks (a run trace, at its start)."""
        mem = dev.memory
        # ---- 1. checks and operands (no side effects)
        if mem.faults.token != self.ftok and not self._fault_free(mem):
            return False
        if not checked:
            for addr, data in self.checks:
                if not mem.equals(addr, data):
                    return False
        if self.lut is not None and dev.lut.tobytes() != self.lut:
            return False
        if self.dma_lines is not None:
            return self._run_dma(dev, mem)
        st = dev.op_state
        r = self._data(mem, st)
        if r is None:
            return False
        out, stored = r
        # ---- 3. commit
        self._move(mem, st, out, stored)
        mem.version += 1                    # (stores through page views: Memory.version counts them)
        chain_length, num_ifm, fifo_valid = self.chain
        st.chain_length, st.num_ifm, st.fifo_valid = chain_length, num_ifm, list(fifo_valid)
        if mem.log_enabled:
            mem.log.extend(self.log or self._log())
        dev.chain_length = chain_length
        if self.flag:
            dev.cond_status = out.item(-1) & 1
        if self.macs and hasattr(dev, "mac_count"):
            dev.mac_count += self.macs
        return True

    def _data(self, mem, st) -> "tuple | None":
        """Operands and compute: (OFM, stored: a compiled compute has also stored it into
        its memory span), or None (an operand or the compute declines; nothing changed)."""
        vals = []
        for s in self.srcs:
            v = s.get(mem, st)
            if v is None:
                return None
            vals.append(v)
        # (a compiled compute may also store the OFM, all or nothing: _move's)
        dst = self.dst
        stored = False
        try:
            if self.into is not None and (view := dst.direct(mem)) is not None:
                out = self.into(vals, view)
                stored = out is not None
            if not stored:
                out = self.compute(vals)
                if out.shape != self.shape:
                    out = np.ascontiguousarray(np.broadcast_to(out, self.shape))
        except Exception:                                   # noqa: BLE001 - the ordinary path decides
            return None
        return out, stored

    def _move(self, mem, st, out, stored: bool) -> None:
        """The data effects of a commit: FIFOs emptied where a chain starts, the operands
        popped from FIFOs, the OFM stored or pushed (unless *stored*)."""
        if self.clear:                                      # a chain starts: its FIFOs empty
            st.clear_fifos()
        for s in self.fifo_srcs:
            s.pop(st)
        if self.dst is not None and not stored:
            self.dst.put(mem, st, out)

    def _dma_read(self, mem) -> np.ndarray:
        """The bytes a DMA reads (its source lines, in order; the back door)."""
        reads = self.dma_lines[0]
        return mem.view(*reads[0]) if len(reads) == 1 else np.concatenate([mem.view(a, n) for a, n in reads])

    def _dma_move(self, mem) -> None:
        """A memory-to-memory DMA's copy (the back door)."""
        buf = self._dma_read(mem)
        pos = 0
        for a, n in self.dma_lines[1]:
            mem.store(a, buf[pos:pos + n])
            pos += n

    def _run_dma(self, dev, mem) -> bool:
        if self.dma_lut is not None:
            lo, n = self.dma_lut
            dev.lut[lo:lo + n] = self._dma_read(mem)
        else:
            self._dma_move(mem)
        if mem.log_enabled:
            mem.log.extend(self.log or self._log())
        return True


# ---------------------------------------------------------------------------- frozen runs
class FrozenRun:
    """The data computations of a run trace replayed whole (Device.replayed_program), for
    a later run that differs only in the input bytes (see freeze_run): `run(mem, st)` runs
    the plans' operand reads, computes and stores in order on *mem*, without checks,
    transactions or bookkeeping; `stats` the plan counts such a run adds to STATS (key,
    count pairs); `fifo`
    whether it uses the chaining FIFOs; `writes` the (lo, hi) spans every such run writes
    (the inputs, its stores and DMA copies; merged, ascending); `restore` those of them it
    reads before writing them (see _write_sets); `warm` the plans without those a run may
    leave out when the memory is as the previous completed one left it (see _stable)."""
    __slots__ = ("plans", "fifo", "flag", "stats", "writes", "restore", "warm", "fused")

    def run(self, mem, st, warm: bool = False) -> "int | None":
        """The result flag the last kernel operation with one sets (-1: none does), or None
        when an operation's own data check or compute declines (a FIFO operand outside its
        range, an index outside a table): memory may then be partly written and the caller
        runs the ordinary path from a restored memory.  *st*: an OpState whose chaining
        FIFOs (`fifo`, `fifo_count`) are those at the run's start (None when not `fifo`).
        *warm*: run `warm` only (the caller knows the memory is as the previous completed
        frozen run left it, `restore` restored)."""
        plans = self.warm if warm else self.plans
        fu = self.fused.get(warm)
        if fu is None:
            fu = self.fused[warm] = _fused(plans, self.flag)
        if fu and fu.ready():
            cond = fu.run(mem, st)
            if cond is not None:
                _count(self.stats)
            return cond
        flag, cond = self.flag, -1
        for p in plans:
            c = step(p, mem, st, flag)
            if c is None:
                return None
            if c >= 0:
                cond = c
        _count(self.stats)
        return cond


def step(p, mem, st, flag) -> "int | None":
    """One plan of a frozen run as a Python step (a DMA copy, or operands, compute and
    stores): None when its data check or compute declines, the result flag when *p* is the
    plan *flag* that sets it (its OFM's last element's low bit), else -1."""
    if p.dma_lines is not None:
        p._dma_move(mem)
        return -1
    r = p._data(mem, st)
    if r is None:
        return None
    p._move(mem, st, r[0], r[1])
    return r[0].item(-1) & 1 if p is flag else -1


def _count(stats) -> None:
    get = STATS.get
    for k, n in stats:                                      # (Counter.update's effect)
        STATS[k] = get(k, 0) + n


def _fused(plans, flag):
    """The fused form of a frozen run's plans (tlm.ethos_u85.ops.fused), or False: the
    compiled kernels are not available (numba absent, TLM_COMPILED=0) or switched off
    for fused runs (TLM_FUSED=0)."""
    if not FUSED or not _cc.available():
        return False
    from . import fused
    return fused.Fused(plans, flag)


def freeze_run(ops, inputs, blocks) -> "FrozenRun | None":
    """The FrozenRun of a whole replayed trace (*ops*, *blocks*: Device.replayed_program)
    whose later runs differ from the recorded one only in the bytes of *inputs* ((lo, hi)
    spans), or None.  A taint analysis over the plans' recorded footprints, in order: the
    input spans are tainted; an operation that reads a tainted byte or pops a tainted FIFO
    taints what it writes (its write spans, or the FIFO it pushes); one that reads nothing
    tainted and writes a whole span (a DMA copy, an OFM in order) clears the span's taint
    (its bytes are the recorded run's); clearing the FIFOs clears theirs.  Accepted only when
    nothing the replay's control depends on is tainted where it is used: the stream blocks,
    every plan's weight and scale/bias checks, the LUT RAM (a DMA into it from a tainted
    source declines).  Then, with the same start state, faults and budgets, each check of
    such a run compares equal as in the recorded run and every step goes the same way: the
    run's transactions, cycles, PMU, events, stop and registers are the recorded run's; what
    differs is memory data, the chaining FIFOs' contents and the result flag (the last
    kernel operation's), which FrozenRun.run computes.  The two data-dependent declines a
    plan has (a FIFO operand's range, a compute's own decline) stay checked there."""
    tainted = [tuple(x) for x in inputs]

    def hit(lo, hi):
        return any(a < hi and lo < b for a, b in tainted)

    def clear(lo, hi):
        if hit(lo, hi):
            tainted[:] = [x for a, b in tainted for x in ((a, min(b, lo)), (max(a, hi), b)) if x[0] < x[1]]
    if any(hit(lo, lo + len(data)) for lo, data in blocks):
        return None
    fifo_t = [False] * _common.NUM_CHAINING_FIFO
    plans, stats, fifo, flag = [], Counter(), False, None
    clean = []                                              # per plan: reads nothing tainted, writes memory only
    for name, p in ops:
        if p is None:                                       # a wait or the STOP
            continue
        stats[name, "planned"] += 1
        if any(hit(a, a + len(b)) for a, b in p.checks):
            return None
        src = any(hit(lo, hi) for lo, hi in p.rint)
        if p.dma_lines is not None:
            if p.dma_lut is not None:
                if src:
                    return None
                continue                                    # (the LUT RAM: the recorded final state's)
            for a, n in p.dma_lines[1]:
                if src:
                    tainted.append((a, a + n))
                else:
                    clear(a, a + n)
            plans.append(p)
            clean.append(not src)
            continue
        fifo = fifo or bool(p.fifo_srcs) or p.clear or isinstance(p.dst, _FifoDst)
        src = src or any(fifo_t[f.fifo] for f in p.fifo_srcs)
        if p.clear:
            fifo_t = [False] * _common.NUM_CHAINING_FIFO
        if isinstance(p.dst, _FifoDst):
            fifo_t[p.dst.fifo] = fifo_t[p.dst.fifo] or src
        elif src:
            tainted += p.wint
        elif isinstance(p.dst, _MemDst) and p.dst.idx is None and p.wint == ((p.dst.alo, p.dst.alo + p.dst.n),):
            clear(p.dst.alo, p.dst.alo + p.dst.n)
        plans.append(p)
        clean.append(not src and isinstance(p.dst, _MemDst) and not p.fifo_srcs and not p.clear)
        if p.flag:
            flag = p
    fr = FrozenRun()
    fr.plans, fr.fifo, fr.flag, fr.stats = tuple(plans), fifo, flag, tuple(stats.items())
    fr.fused = {}                                           # warm -> its fused.Fused, or False
    fr.writes, fr.restore = _write_sets(plans, inputs)
    fr.warm = tuple(p for p, keep in zip(plans, _stable(plans, clean, inputs, fr.restore)) if not keep)
    return fr


def _write_sets(plans, inputs) -> tuple:
    """(W, R): the spans a run of *plans* (after the *inputs* spans are written) writes - the
    same bytes on every run: the recorded write footprints, a DMA's destination lines - and
    the part of W some plan reads before the run wrote it (its operand spans and recorded
    read footprint, a DMA's source lines).  After a run, memory differs from before only
    in W; the next run's reads see earlier runs' bytes only in R: restoring R (from the
    contents before the first run) makes every read, so every write, the same."""
    done = merged_spans(inputs)                             # (written so far)
    early = []                                              # (read before written)
    for p in plans:
        if p.dma_lines is not None:
            reads = [(a, a + n) for a, n in p.dma_lines[0]]
            writes = [(a, a + n) for a, n in p.dma_lines[1]]
        else:
            reads = list(p.rint) + [(x.alo, x.alo + x.n) for x in p.srcs if isinstance(x, _MemSrc)]
            writes = p.wint
        for lo, hi in reads:
            early += _minus(lo, hi, done)
        done = merged_spans(list(done) + list(writes))
    written = merged_spans(list(done))
    return written, tuple(x for lo, hi in merged_spans(early) for x in _within(lo, hi, written))


def _plan_writes(p) -> list:
    """The spans plan *p* writes or rewrites (an element-wise store rewrites its whole span)."""
    if p.dma_lines is not None:
        return [(a, a + n) for a, n in p.dma_lines[1]]
    return list(p.wint) + ([(p.dst.alo, p.dst.alo + p.dst.n)] if isinstance(p.dst, _MemDst) else [])


def _stable(plans, clean, inputs, restore) -> list:
    """Per plan, whether a frozen run may leave it out when the memory is as the previous
    completed frozen run left it (with `restore` restored): the plan reads nothing derived
    from the inputs (*clean*: its bytes are the recorded run's on every run), writes memory
    only, is the only writer of its bytes (no other plan, no input) and none of them is read
    before it writes them (none in *restore*).  Its bytes then hold what it would write
    from the end of the previous run on, and no one reads them earlier in the run."""
    owners = [merged_spans(list(inputs))] + [merged_spans(_plan_writes(p)) for p in plans]
    events = sorted((x, d) for own in owners for lo, hi in own for x, d in ((lo, 1), (hi, -1)))
    shared, depth, start = [], 0, None                      # (bytes two or more owners write)
    for x, d in events:
        depth += d
        if depth >= 2 and start is None:
            start = x
        elif depth < 2 and start is not None:
            if start < x:
                shared.append((start, x))
            start = None
    shared = merged_spans(shared + list(restore))
    return [c and not any(_within(lo, hi, shared) for lo, hi in own) for c, own in zip(clean, owners[1:])]


def _minus(lo: int, hi: int, spans) -> list:
    """[lo, hi) less the merged ascending *spans*, as spans."""
    out = []
    for a, b in spans:
        if b <= lo or a >= hi:
            continue
        if a > lo:
            out.append((lo, a))
        lo = max(lo, b)
    if lo < hi:
        out.append((lo, hi))
    return out


def _within(lo: int, hi: int, spans) -> list:
    """[lo, hi) intersected with the merged ascending *spans*, as spans."""
    return [(max(lo, a), min(hi, b)) for a, b in spans if a < hi and lo < b]


def _spans(pairs) -> tuple:
    """((lo, hi), ...) merged, ascending, of (address, length) pairs (memory.merged_intervals)."""
    los, his = merged_intervals(pairs)
    return tuple(zip(los.tolist(), his.tolist()))


def merged_spans(spans) -> tuple:
    """(lo, hi) spans merged where they overlap or touch, ascending, empty ones dropped."""
    return _spans([(lo, hi - lo) for lo, hi in spans])


# ---------------------------------------------------------------------------- operands
def _page_view(mem, alo: int, n: int, dt):
    """(page array, its bytes [alo, alo + n) as dtype dt) when they lie in one written page,
    else (None, None).  The view stays valid while mem.live_page() returns the same array."""
    off = alo & (PAGE_SIZE - 1)
    if off + n > PAGE_SIZE:
        return None, None
    page = mem.live_page(alo >> PAGE_BITS)
    if page is None:
        return None, None
    return page, page[off:off + n].view(dt)


class _MemSrc:
    """An operand read from memory: the absolute span [alo, alo + n), its raw values as
    ``dt`` at element indices ``idx`` (None: the whole span in order), shaped ``shape``.
    A span inside one page is read through a read-only view of that page, kept while the
    memory holds the same page array."""
    __slots__ = ("alo", "n", "dt", "idx", "shape", "fifo", "count", "page", "pno", "cached")

    def __init__(self, alo, n, dt, idx, shape):
        self.alo, self.n, self.dt, self.idx, self.shape = alo, n, dt, idx, shape
        self.fifo = None
        self.count = 0
        self.page = self.cached = None
        self.pno = alo >> PAGE_BITS

    def get(self, mem, st):
        page = self.page
        if page is not None and mem.live_page(self.pno) is page:
            return self.cached
        page, v = _page_view(mem, self.alo, self.n, self.dt)
        if page is None:
            v = mem.read_array(self.alo, self.n).view(self.dt)
        v = v.reshape(self.shape) if self.idx is None else v[self.idx]
        if page is not None and self.idx is None:
            v.flags.writeable = False
            self.page, self.cached = page, v
        return v


class _FifoSrc:
    """An operand popped from chaining FIFO ``fifo`` (``count`` values, shaped ``shape``;
    peeked here, popped at commit), checked to lie in [lo, hi]."""
    __slots__ = ("fifo", "count", "shape", "lo", "hi")

    def __init__(self, fifo, count, shape, lo, hi):
        self.fifo, self.count, self.shape, self.lo, self.hi = fifo, count, shape, lo, hi

    def pop(self, st) -> None:
        """read_chaining_fifo's effect (get() has checked that the values are there)."""
        n, count = self.fifo, self.count
        chunks = st.fifo[n]
        c = chunks[0]
        if c.size == count:
            chunks.pop(0)
            _PUSHED.pop(id(c), None)
        elif c.size > count:
            chunks[0] = c[count:]
        else:
            st.read_chaining_fifo(n, count)
            return
        st.fifo_count[n] -= count

    def get(self, mem, st):
        chunks = st.fifo[self.fifo]
        if st.fifo_count[self.fifo] < self.count:
            return None
        c = chunks[0]
        if c.size >= self.count:
            v = c[:self.count]
            k = _PUSHED.get(id(c))                          # a plan's push: its type's range
            if k is not None and k[0] is c and self.lo <= k[1] and k[2] <= self.hi:
                return v.reshape(self.shape)
        else:
            parts, need = [], self.count
            for c in chunks:
                parts.append(c[:need])
                need -= min(need, c.size)
                if not need:
                    break
            v = np.concatenate(parts)
        if v.size and (int(_MIN(v)) < self.lo or int(_MAX(v)) > self.hi):
            return None
        return v.reshape(self.shape)


class _MemDst:
    """The OFM written to memory: values (the OFM type) to the absolute span [alo, alo + n),
    element i at element index ``idx[i]`` of the span (None: the span in order), the
    bytes between elements kept (read back and written unchanged).  A span inside one
    page is written through a view of that page (as ``udt``), kept while the memory holds
    the same page array."""
    __slots__ = ("alo", "n", "idx", "udt", "page", "pno", "cached")

    def __init__(self, alo, n, idx, udt):
        self.alo, self.n, self.idx, self.udt = alo, n, idx, udt
        self.page = self.cached = None
        self.pno = alo >> PAGE_BITS

    def direct(self, mem):
        """The OFM's bytes as the cached page view (as udt; see put), or None."""
        page = self.page
        if page is not None and mem.live_page(self.pno) is page:
            return self.cached
        return None

    def put(self, mem, st, out):
        page = self.page
        if page is not None and mem.live_page(self.pno) is page:
            self.cached[...] = out.reshape(-1).view(self.udt)
            return
        if self.idx is None:
            page, v = _page_view(mem, self.alo, self.n, self.udt)
            if page is not None and v.size * v.itemsize == self.n:
                self.page, self.cached = page, v
                v[...] = out.reshape(-1).view(self.udt)
                return
            mem.store(self.alo, np.ascontiguousarray(out).reshape(-1).view(np.uint8))
            return
        buf = mem.read_array(self.alo, self.n)
        buf.view(self.udt)[self.idx] = np.ascontiguousarray(out).reshape(-1).view(self.udt)
        mem.write(self.alo, buf)


class _FifoDst:
    """The OFM pushed into chaining FIFO ``fifo`` (as write_chaining_fifo: int64 values;
    the FIFO number was checked when the plan was built)."""
    __slots__ = ("fifo",)

    def __init__(self, fifo):
        self.fifo = fifo

    def put(self, mem, st, out):
        v = out.astype(np.int64).reshape(-1)                # (a copy)
        if v.size:
            st.fifo[self.fifo].append(v)
            st.fifo_count[self.fifo] += v.size
            r = _DT_RANGE.get(out.dtype)
            if r is None and out.dtype.kind in "iu":
                i = np.iinfo(out.dtype)
                r = _DT_RANGE[out.dtype] = (int(i.min), int(i.max))
            if r is not None:
                if len(_PUSHED) >= _PUSHED_MAX:
                    _PUSHED.clear()                         # (only the range checks' shortcut is lost)
                _PUSHED[id(v)] = (v, *r)


# Chunks a plan pushed into a chaining FIFO -> (the chunk, the range of the type it came
# from): a consumer's _FifoSrc skips its two range reductions for such a chunk.  Keyed by
# id() and holding the chunk itself (so the id cannot be reused while the entry exists;
# the entry is compared by identity); a slice or a copy made by the ordinary path is
# another object and takes the reductions.
_PUSHED: dict = {}
_PUSHED_MAX = 1 << 12
_DT_RANGE: dict = {}


# ============================================================================ building
class _Dry:
    """A front door answering reads from the back door and recording the transactions (no
    log, listeners, faults or writes): the build reads what the op reads without effects."""

    def __init__(self, memory):
        self.memory = memory
        self.txns: list = []

    def access(self, txn, data=None):
        self.txns.append(txn)
        if txn.write:
            return txn, None
        return txn, self.memory.read_array(txn.addr, txn.length)

    def batch_capable(self):
        return False


def _abs(dev, region: int, offsets: np.ndarray) -> "np.ndarray | None":
    """Absolute addresses of region offsets (None when they would wrap at 2**40)."""
    base = dev.route(region).base
    a = base + offsets.astype(np.int64)
    if a.size and (int(a.min()) < 0 or int(a.max()) >= ADDR_MASK - 64):
        return None
    return a


def _span(addrs: np.ndarray, es: int):
    """(lo, n, idx) of elements at absolute addresses: the span [lo, lo + n) holds them all,
    idx their element indices in it (None when they are the span in order)."""
    flat = addrs.reshape(-1)
    lo = int(flat.min())
    hi = int(flat.max()) + es
    rel = flat - lo
    if (rel % es).any():
        return None
    idx = rel // es
    if idx.size == (hi - lo) // es and np.array_equal(idx, np.arange(idx.size)):
        return lo, hi - lo, None
    return lo, hi - lo, idx.astype(np.intp).reshape(addrs.shape)


def _value_dtype(fm: FeatureMap) -> np.dtype:
    es = fm.element_size
    return np.dtype(f"<u{es}" if fm.act_type == ActType.UNSIGNED else f"<i{es}")


def _type_range(fm: FeatureMap) -> tuple[int, int]:
    bits = fm.bits
    if fm.act_type == ActType.UNSIGNED:
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


_MIN, _MAX = np.minimum.reduce, np.maximum.reduce          # (without ndarray.min's Python wrapper)


def _same(a, b) -> bool:
    return np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def _elem_pairs(addrs: np.ndarray, es: int) -> tuple:
    u = np.unique(addrs.reshape(-1)).astype(np.int64)
    return u, np.full(u.size, es, np.int64)


def _list(pairs) -> list:
    return list(zip(pairs[0].tolist(), pairs[1].tolist()))


class _Prepared:
    """A plan in the making: what the op reads (with the operand data before the op ran),
    where its output goes, and how to compute it; ``finish`` completes and checks it
    against the ordinary run's transactions and results."""

    def __init__(self, dev, name):
        self.dev, self.name = dev, name
        self.srcs: list = []
        self.inputs: list = []          # operand values before the op ran
        self.channels: list = []        # per memory source: (channel, element pairs)
        self.dst = None
        self.dst_pairs = None           # element pairs of a memory OFM
        self.out_dt = None
        self.shape = None
        self.compute = None
        self.checks: list = []          # (addr, bytes) compared on every run
        self.check_channels: list = []  # their channels (weights, scale/bias)
        self.lut = None
        self.macs = 0
        self.chain = None
        self.flag = True
        self.is_dma = False
        self.dma = None                 # DMA into the LUT RAM: (offset, length)
        self.entry_chain = None         # chain length before the op
        self.entry_fifo_count = ()      # values held per FIFO before the op

    # ---- operands
    def mem_src(self, fm: FeatureMap, ys, xs, cs, channel) -> "_MemSrc | None":
        addrs = fmap.block_addresses(fm, ys, xs, cs)
        a = _abs(self.dev, fm.region, addrs)
        if a is None or a.size == 0:
            return _no("operand: no address or wraps at 2**40")
        es = fm.element_size
        sp = _span(a, es)
        if sp is None:
            return _no("operand: unaligned elements")
        lo, n, idx = sp
        src = _MemSrc(lo, n, _value_dtype(fm), idx, a.shape)
        self.srcs.append(src)
        self.inputs.append(np.array(src.get(self.dev.memory, None)))
        self.channels.append((channel, _elem_pairs(a, es)))
        return src

    def fifo_src(self, fm: FeatureMap, shape) -> "_FifoSrc | None":
        st = self.dev.op_state
        count = int(np.prod(shape))
        lo, hi = _type_range(fm)
        src = _FifoSrc(fm.region, count, tuple(shape), lo, hi)
        v = src.get(None, st)
        if v is None:
            return _no("operand: FIFO values missing or out of range")
        self.srcs.append(src)
        self.inputs.append(np.array(v))
        return src

    def operand(self, fm: FeatureMap, ys, xs, cs, channel):
        """mem_src or fifo_src for an IFM/IFM2 block (None: not plannable)."""
        if fm.storage == Storage.CHAINED:
            return self.fifo_src(fm, (len(ys), len(xs), len(cs)))
        if fm.storage not in (Storage.TILE2X2, Storage.TILE3X1):
            return _no("operand: storage")
        return self.mem_src(fm, ys, xs, cs, channel)

    # ---- output
    def ofm(self, fm: FeatureMap, shape, allowed_perms, mbd=None) -> bool:
        self.shape = tuple(shape)
        self.out_dt = _value_dtype(fm) if fm.precision != Precision.B64 else None
        if self.out_dt is None:
            return False
        if fm.storage == Storage.CHAINED:
            if not 0 <= fm.region < _common.NUM_CHAINING_FIFO:
                return False
            self.dst = _FifoDst(fm.region)
            return True
        if fm.storage == Storage.NONE:
            self.dst = None
            return True
        if fm.storage not in (Storage.TILE2X2, Storage.TILE3X1):
            return False
        h, w, d = shape
        addrs = fmap.ofm_block_addresses(fm, range(h), range(w), range(d), allowed_perms=allowed_perms,
                                         microblock_depth=mbd)
        a = _abs(self.dev, fm.region, addrs)
        if a is None or a.size == 0:
            return False
        es = fm.element_size
        sp = _span(a, es)
        if sp is None:
            return False
        lo, n, idx = sp
        if idx is not None and np.unique(idx).size != idx.size:
            return False                                    # aliasing elements: the ordinary path
        self.dst = _MemDst(lo, n, None if idx is None else idx.reshape(-1), np.dtype(f"<u{es}"))
        self.dst_pairs = _elem_pairs(a, es)
        return True

    def chain_state(self, use_ifm, use_ifm2, ifm, ifm2, ofm) -> None:
        """The chaining state after add_operation_to_chain (which the ordinary run has
        checked), from the state before."""
        st = self.dev.op_state
        length, num, valid = st.chain_length, st.num_ifm, list(st.fifo_valid)
        self.entry_chain = length
        self.entry_fifo_count = tuple(st.fifo_count)
        if length == 0:
            num, valid = 0, [False] * len(valid)
        length += 1
        if use_ifm and ifm.storage != Storage.CHAINED:
            num += 1
        if use_ifm2 and ifm2.storage != Storage.CHAINED:
            num += 1
        if ofm.storage == Storage.CHAINED:
            valid[ofm.region] = True
        else:
            length = 0
        self.chain = (length, num, tuple(valid))

    def stream(self, txns, channel) -> None:
        """Stream bytes the op reads and the plan compares (weights, scale/bias)."""
        for addr, n in _list(txn_pairs(txns, channel)):
            self.checks.append((addr, self.dev.memory.read(addr, n), channel))
        self.check_channels.append(channel)

    # ---- completion
    def finish(self, dev, txns) -> "_Plan | None":
        """Check the recorded run against this plan and return the plan (None: not covered)."""
        if self.is_dma:
            return self._finish_dma(dev, txns)
        mem = dev.memory
        if not txns and (self.dst_pairs is not None or any(isinstance(s, _MemSrc) for s in self.srcs)):
            return _no("check: no transactions")
        # every read comes before every write (the plan reads all, then writes)
        seen_write = False
        for t in txns:
            if t.write:
                seen_write = True
            elif seen_write:
                return _no("check: a read after a write")
        # the transactions cover exactly the plan's bytes, channel by channel
        by_channel: dict = {}
        for ch, pairs in self.channels:
            by_channel.setdefault(ch, []).append(pairs)
        known = set(by_channel) | set(self.check_channels) | {Channel.wr_ofm}
        for t in txns:
            if t.channel not in known:
                return _no("check: another channel")
        for ch, pairs in by_channel.items():
            if not _same(merged_intervals(txn_pairs(txns, ch, False)), merged_intervals(pairs)):
                return _no("check: operand bytes")
        for ch in self.check_channels:
            if not _same(merged_intervals(txn_pairs(txns, ch, False)),
                         merged_intervals([(a, len(b)) for a, b, c in self.checks if c == ch])):
                return _no("check: stream bytes")
        if not _same(merged_intervals(txn_pairs(txns, Channel.wr_ofm, True)),
                     merged_intervals(self.dst_pairs if self.dst_pairs is not None else [])):
            return _no("check: OFM bytes")
        for addr, data, _ in self.checks:                   # the streams did not change meanwhile
            if not mem.equals(addr, data):
                return _no("check: streams changed")
        # the compute reproduces the ordinary run's result on its own operands
        out = self.compute([np.array(v) for v in self.inputs])
        if out.shape != self.shape:
            out = np.ascontiguousarray(np.broadcast_to(out, self.shape))
        if out.shape != self.shape or out.dtype != self.out_dt:
            return _no("check: OFM shape or type")
        if isinstance(self.dst, _MemDst):
            got = mem.read_array(self.dst.alo, self.dst.n).view(self.dst.udt)
            got = got if self.dst.idx is None else got[self.dst.idx]
            if not np.array_equal(got.reshape(-1), out.reshape(-1).view(self.dst.udt)):
                return _no("check: OFM values")
        elif isinstance(self.dst, _FifoDst):
            st = dev.op_state
            chunks = st.fifo[self.dst.fifo]
            if not chunks or not np.array_equal(chunks[-1], out.reshape(-1).astype(np.int64)):
                return _no("check: FIFO values")
        st = dev.op_state
        if (st.chain_length, st.num_ifm, tuple(st.fifo_valid)) != self.chain:
            return _no("check: chaining state")
        if out.size and dev.cond_status != int(out.reshape(-1)[-1]) & 1:
            return _no("check: result flag")
        return self._plan(dev, txns)

    def _plan(self, dev, txns) -> _Plan:
        p = _Plan()
        p.srcs = tuple(self.srcs)
        p.fifo_srcs = tuple(s for s in self.srcs if isinstance(s, _FifoSrc))
        p.clear = self.entry_chain == 0 and any(self.entry_fifo_count)
        p.ftok = None
        p.compute = self.compute
        p.dst = self.dst
        p.shape = self.shape
        p.rint = _spans(txn_pairs(txns, write=False))
        p.wint = _spans(txn_pairs(txns, write=True))
        p.checks = tuple((a, b) for a, b, _ in self.checks)
        p.lut = self.lut
        p.txns = tuple(txns)
        p.log = None                                        # the log records, made on first use
        pages = set()
        for lo, hi in p.wint:
            pages.update(range(lo >> PAGE_BITS, ((hi - 1) >> PAGE_BITS) + 1))
        p.pages = tuple(sorted(pages))
        p.beats = sum(t.total_beats() if hasattr(t, "total_beats") else beats(t.addr, t.length) for t in txns)
        p.twork = sum(len(t) + (t.total_bytes() >> 6) if hasattr(t, "total_beats") else 1 + (t.length >> 6)
                      for t in txns)
        p.summary = Pmu.increments(summarise(txns))
        p.op_work = dev.command_work if dev.command_work is not None else _kernel_work(*dev.op_of)
        p.chain = self.chain
        p.macs = self.macs
        p.flag = self.flag
        p.dma_lines = None
        p.dma_lut = None
        # a compiled compute stores the OFM itself into a page view of the span (elements in
        # order; the view's size is checked on every call)
        into = getattr(self.compute, "into", None)
        p.into = into if isinstance(self.dst, _MemDst) and self.dst.idx is None else None
        return p

    def _finish_dma(self, dev, txns) -> "_Plan | None":
        reads = _list(txn_pairs(txns, write=False))
        writes = _list(txn_pairs(txns, write=True))
        if any(t.channel not in (Channel.rd_mem2mem, Channel.wr_mem2mem) for t in txns):
            return _no("DMA: another channel")
        internal = self.dma
        nread = sum(n for _, n in reads)
        if internal is None:                                # memory to memory
            if writes == [] or nread != sum(n for _, n in writes):
                return _no("DMA: read and written bytes differ in number")
            ri, wi = _list(merged_intervals(reads)), _list(merged_intervals(writes))
            for lo, hi in ri:                               # no byte both read and written
                for wlo, whi in wi:
                    if wlo < hi and lo < whi:
                        return _no("DMA: overlapping source and destination")
            data = np.concatenate([dev.memory.read_array(a, n) for a, n in reads]) if reads else None
            got = np.concatenate([dev.memory.read_array(a, n) for a, n in writes])
            if data is None or not np.array_equal(data, got):
                return _no("DMA: copied bytes")
        else:                                               # one line into the LUT RAM
            lo, n = internal
            if writes or nread != n or not np.array_equal(
                    dev.lut[lo:lo + n], np.concatenate([dev.memory.read_array(a, k) for a, k in reads])):
                return _no("DMA: LUT bytes")
        p = self._plan(dev, txns)
        p.dma_lines = (tuple(reads), tuple(writes))
        p.dma_lut = None if internal is None else internal
        p.flag = False
        return p


# ============================================================================ kernel ops
class _StandIn:
    """The device as a plan's OpContext sees it: configuration, Policy, the op's payload
    fields and a copy of the LUT RAM (a plan with a LUT activation compares the device's
    LUT with that copy on every run), an OpState of its own, no result flag.  A plan never
    holds on to the device it was built on."""

    def __init__(self, dev):
        self.config = dev.config
        self.policy = dev.policy
        self.op_fields = dict(dev.op_fields)
        self.lut = dev.lut.copy()
        self.op_state = _common.OpState()
        self.chain_length = 0


def _memo_field(snap):
    """snap.field with a memo: a plan's context reads the same few register fields on every
    run of its compute (the snapshot is immutable)."""
    memo: dict = {}
    field = snap.field

    def f(name: str, fld: str) -> int:
        k = (name, fld)
        v = memo.get(k)
        if v is None:
            v = memo[k] = field(name, fld)
        return v
    return f


def _prepare_kernel(dev, name, d, snap) -> "_Prepared | None":
    ctx = _common.OpContext(snap, DataPort(_Dry(dev.memory), dev.route), _StandIn(dev), name)
    ctx.f = _memo_field(snap)
    if ctx.ofm_h * ctx.ofm_w * ctx.ofm_d > _MAX_ELEMENTS:
        return _no("op: large")
    if name == "NPU_OP_ELEMENTWISE":
        return _prepare_elementwise(dev, ctx, snap, d)
    if name == "NPU_OP_POOL":
        return _prepare_pool(dev, ctx, snap, d)
    if name in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE"):
        return _prepare_conv(dev, ctx, snap, d, name == "NPU_OP_DEPTHWISE")
    return _no("op: RESIZE or another")


def _lut_of(dev, f) -> "bytes | None":
    return dev.lut.tobytes() if f("NPU_SET_ACTIVATION", "activation_function") != _ACT_LUT_NONE else None


def _truncated(v: np.ndarray, fm: FeatureMap) -> np.ndarray:
    return arith.truncate(np.asarray(v, dtype=np.int64), fm.bits, fm.act_type).astype(_value_dtype(fm))


# ---------------------------------------------------------------------------- elementwise
def _prepare_elementwise(dev, ctx, snap, d) -> "_Prepared | None":
    mode = int(d.fields.get("elementwise_mode", 0))
    if ctx.upscale != 0 or ctx.ofm.precision not in (Precision.B8, Precision.B16, Precision.B32):
        return _no("elementwise: upscale or OFM precision")
    p = _ew.Params(ctx, mode)
    pre = _Prepared(dev, "NPU_OP_ELEMENTWISE")
    shape = (ctx.ofm_h, ctx.ofm_w, ctx.ofm_d)

    def operand(fm, bm, which, channel):
        if bm == _ew.SCALAR:
            return None, _ew.scalar_operand(ctx, which, p.scalar)
        ys = _ew.bcast_index(ctx.ofm_h, _ew.BCAST_H, bm)
        xs = _ew.bcast_index(ctx.ofm_w, _ew.BCAST_W, bm)
        cs = _ew.bcast_index(ctx.ofm_d, _ew.BCAST_C, bm)
        src = pre.operand(fm, ys, xs, cs, channel)
        if src is None:
            raise _NotPlanned
        return src, None
    try:
        sa, ca = operand(ctx.ifm, p.bm, "IFM", Channel.rd_ifm)
        sb, cb = (None, 0) if p.unary else operand(ctx.ifm2, p.bm2, "IFM2", Channel.rd_ifm_stream)
    except _NotPlanned:
        return _no("elementwise: operand")
    if not pre.ofm(ctx.ofm, shape, _common.ALLOWED_PERMS_RTRANS):
        return _no("elementwise: OFM")
    pre.chain_state(p.bm != _ew.SCALAR or not _ew.SCALAR_IS_NOT_AN_IFM, p.use_ifm2, ctx.ifm, ctx.ifm2, ctx.ofm)
    pre.lut = _lut_of(dev, ctx.f)
    key = ("ew", mode, _raw(snap, _EW_REGS), pre.lut, sa is not None, ca, sb is not None, cb)
    compute = _COMPUTES.get(key, False)
    if compute is False:
        compute = _COMPUTES.put(key, _ew_compute(ctx, p, mode, sa is not None, ca, sb is not None, cb))
    if compute is None:
        return _no("elementwise: compute")
    pre.compute = compute
    return pre


class _NotPlanned(Exception):
    pass


_CC_MODES = {int(_M.add): _cc.MODE_ADD, int(_M.sub): _cc.MODE_SUB, int(_M.min): _cc.MODE_MIN,
             int(_M.max): _cc.MODE_MAX, int(_M.mul): _cc.MODE_MUL}


def _checked(cc, compute, cases):
    """The compiled compute *cc* when it gives *compute*'s results (values and type) on every
    operand list of *cases*, else None (the numpy compute stays; counted in STATS)."""
    if cc is None:
        return None
    try:
        for vals in cases:
            want = compute(vals)
            got = cc(vals)
            if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
                return _no("compiled: differs from the numpy compute")
    except _cc.Declined:
        return _no("compiled: declined its check")
    STATS["compiled", "built"] += 1
    return cc


# The registers the compute stages read (besides the mode, the operand kinds and the LUT):
# computes are shared by every op with the same values (another LSTM time step, another
# stripe), since building one (tables, thresholds, spot checks) costs milliseconds.
_EW_REGS = ("NPU_SET_IFM_PRECISION", "NPU_SET_IFM2_PRECISION", "NPU_SET_OFM_PRECISION", "NPU_SET_IFM_ZERO_POINT",
            "NPU_SET_IFM2_ZERO_POINT", "NPU_SET_OFM_ZERO_POINT", "NPU_SET_IFM_SCALE", "NPU_SET_IFM2_SCALE",
            "NPU_SET_OFM_SCALE", "NPU_SET_ACTIVATION", "NPU_SET_ACTIVATION_MIN", "NPU_SET_ACTIVATION_MAX",
            "NPU_SET_IFM_BROADCAST", "NPU_SET_IFM2_BROADCAST", "NPU_SET_OP_SCALAR", "NPU_SET_ACC_FORMAT")
_STEP_REGS = ("NPU_SET_OFM_PRECISION", "NPU_SET_OFM_ZERO_POINT", "NPU_SET_OFM_SCALE", "NPU_SET_ACTIVATION",
              "NPU_SET_ACTIVATION_MIN", "NPU_SET_ACTIVATION_MAX", "NPU_SET_ACC_FORMAT")
_POOL_REGS = ("NPU_SET_IFM_PRECISION", "NPU_SET_IFM_ZERO_POINT", "NPU_SET_OFM_PRECISION", "NPU_SET_OFM_ZERO_POINT",
              "NPU_SET_OFM_SCALE", "NPU_SET_ACTIVATION", "NPU_SET_ACTIVATION_MIN", "NPU_SET_ACTIVATION_MAX",
              "NPU_SET_ACC_FORMAT")
_COMPUTES = Memo(256)            # compute key -> compute closure (None: not covered); tables
                                 # of up to about 1 MB each


def _raw(snap, names) -> tuple:
    return tuple(snap.raw(n) for n in names)


def _ew_compute(ctx, p, mode, sa, ca, sb, cb):
    """The elementwise compute (see the module doc), or None (not covered)."""
    zpa = arith.ifm_zero_point(ctx.ifm.zero_point, ctx.ifm.precision, ctx.ifm.act_type, check=False)
    zpb = arith.ifm_zero_point(ctx.ifm2.zero_point, ctx.ifm2.precision, ctx.ifm2.act_type, check=False)
    # operand value sets (zero point subtracted): raw domain - zp, or the scalar
    if sa:
        alo, ahi = _type_range(ctx.ifm)
        adom = (alo - zpa, ahi - zpa)
    else:
        adom = (ca, ca)
    if p.unary:
        bdom = (0, 0)
    elif sb:
        blo, bhi = _type_range(ctx.ifm2)
        bdom = (blo - zpb, bhi - zpb)
    else:
        bdom = (cb, cb)
    na, nb = adom[1] - adom[0] + 1, bdom[1] - bdom[0] + 1
    if na * nb <= _TABLE_MAX:
        return _ew_table(ctx, p, mode, sa, sb, adom, bdom, na, nb, zpa, zpb)
    if mode in _EW_MODES_DECOMPOSED and p.precision in (Precision.B8, Precision.B16) and sa and sb:
        c = _ew_decomposed(ctx, p, mode, adom, bdom, zpa, zpb)
        if c is not None:
            return c
    return _ew_direct(ctx, p, mode, sa, ca, sb, cb, zpa, zpb)


def _ew_direct(ctx, p, mode, sa, ca, sb, cb, zpa, zpb):
    """The ordinary evaluation on the operands (wide operand types, or steps too many for
    tables): read_ifm's zero point subtraction, then elementwise.evaluate - or
    elementwise.compute followed by _output_stage in place of evaluate's rescale, activation
    and truncation (the same values; checked there), over the accumulator's range: int32
    (compute's int32_t acc), or for a 32-bit mul (rescale_mode_shift_only) the products of
    the operand domains' ends."""
    a_const = None if sa else np.full((1, 1, 1), np.int64(ca))
    b_const = np.zeros((1, 1, 1), np.int64) if p.unary or sb else np.full((1, 1, 1), np.int64(cb))
    stage = None
    one = np.ones((1, 1, 1), np.int64)
    try:
        rm = _ew.compute(ctx, p, one, one)[1]
    except Exception:                                       # noqa: BLE001 - the ordinary evaluation then
        rm = None
    if rm == _common.RESCALE_SHIFT_ONLY:                    # a 32-bit mul: the exact 64-bit product
        def dom(fm, src, c, zp):
            if not src:
                return c, c
            tlo, thi = _type_range(fm)
            return tlo - zp, thi - zp
        (a0, a1), (b0, b1) = dom(ctx.ifm, sa, ca, zpa), dom(ctx.ifm2, sb, cb, zpb)
        ends = [x * y for x in (a0, a1) for y in (b0, b1)]
        lo, hi = min(ends), max(ends)
    else:                                                   # elementwise.compute's int32_t acc
        lo, hi = -(1 << 31), (1 << 31) - 1
    if rm in (_common.RESCALE_GLOBAL, _common.RESCALE_NONE, _common.RESCALE_SHIFT_ONLY):
        key = ("stage", _raw(ctx.snap, _STEP_REGS), _lut_of(ctx.device, ctx.f), lo, hi, int(rm))
        stage = _COMPUTES.get(key, False)
        if stage is False:
            stage = _COMPUTES.put(key, _output_stage(ctx, lo, hi, rm))

    def operands(vals):
        i = 0
        if sa:
            a = np.subtract(vals[0], zpa, dtype=np.int64)
            i = 1
        else:
            a = a_const
        return a, (np.subtract(vals[i], zpb, dtype=np.int64) if sb else b_const)

    if stage is not None:
        compute_acc = _ew.compute

        def staged(vals):
            acc, rm_ = compute_acc(ctx, p, *operands(vals))
            if rm_ != rm:
                raise _NotPlanned                           # (not expected: the ordinary path then)
            return stage(acc)
        return _ew_direct_compiled(ctx, p, mode, sa, ca, sb, cb, zpa, zpb, stage, staged) or staged

    def compute(vals):
        return _ew_evaluate(ctx, p, mode, *operands(vals))
    return compute


_CC_DIRECT_MODES = {**_CC_MODES, int(_M.lrelu): _cc.MODE_LRELU, int(_M.abs): _cc.MODE_ABS,
                    int(_M.clz): _cc.MODE_CLZ, int(_M.shr): _cc.MODE_SHR, int(_M.shl): _cc.MODE_SHL,
                    int(_M.lshr): _cc.MODE_LSHR, int(_M.cmp_eq): _cc.MODE_CMP_EQ, int(_M.cmp_ne): _cc.MODE_CMP_NE,
                    int(_M.cmp_ge): _cc.MODE_CMP_GE, int(_M.cmp_gt): _cc.MODE_CMP_GT, int(_M["and"]): _cc.MODE_AND,
                    int(_M["or"]): _cc.MODE_OR, int(_M.xor): _cc.MODE_XOR, int(_M["not"]): _cc.MODE_NOT,
                    int(_M.and_not): _cc.MODE_AND_NOT}          # (div: its asserts stay Python's)


def _passes_through(prm) -> bool:
    """Whether scale_a / scale_b (Params.sa / sb: precision, type, ...) return the operand unchanged."""
    return not arith.scales_input(prm[0], prm[1])


def _ew_direct_compiled(ctx, p, mode, sa, ca, sb, cb, zpa, zpb, stage, staged):
    """_ew_direct's *staged* compute (elementwise.compute's accumulator, then *stage*) as the
    compiled elementwise kernel (compiled.direct_compute), for operands scale_a / scale_b
    pass through (or a mul, which scales nothing), or None.  Used only when it agrees with
    *staged* on random operands, the operand types' extremes and equal pairs (_checked)."""
    m = _CC_DIRECT_MODES.get(mode)
    if m is None or not (mode == int(_M.mul) or (_passes_through(p.sa) and _passes_through(p.sb))):
        return None
    rterms = None
    if mode == int(_M.shr):
        if not (0 <= p.ofm_round <= 5 and 0 <= p.ofm_dbl <= 30):
            return None
        rterms = arith.round_terms(np.arange(32, dtype=np.int64), p.ofm_round, p.ofm_dbl)
    wrap = not (mode == int(_M.mul) and p.precision not in (Precision.B8, Precision.B16))
    mask = {Precision.B8: 0xFF, Precision.B16: 0xFFFF}.get(p.precision, -1)
    kb = None if sb else (0 if p.unary else cb)
    cc = _cc.direct_compute(m, None if sa else ca, kb, zpa, zpb, wrap, mask, rterms, stage.row, stage.table,
                            stage.odt, staged)
    if cc is None:
        return None
    rng = np.random.default_rng(_SEED)
    fms = ([ctx.ifm] if sa else []) + ([ctx.ifm2] if sb else [])
    n = 4096
    cols = []
    for fm in fms:
        lo, hi = _type_range(fm)
        ends = np.array([lo, hi, lo + 1, hi - 1, 0, 1, -1, 31, 32]).clip(lo, hi)
        cols.append((np.concatenate([np.repeat(ends, ends.size) if not cols else np.tile(ends, ends.size),
                                     rng.integers(lo, hi + 1, n), rng.integers(max(lo, -64), min(hi, 64) + 1, n)]),
                     _value_dtype(fm)))
    if len(cols) == 2 and cols[0][1] == cols[1][1]:
        cols[1][0][-n // 2:] = cols[0][0][-n // 2:]         # equal pairs (the comparisons)
    raw = [v.astype(dt).reshape(-1, 1, 1) for v, dt in cols]
    cases = [raw, [v.astype(np.int64) for v in raw]]
    if len(raw) == 2:
        cases.append([raw[0].reshape(1, 1, -1), raw[1][:1]])          # a broadcast operand
    try:
        return _checked(cc, staged, cases)
    except (_NotPlanned, arith.Unpredictable):
        return _no("compiled: its numpy compute declined a check operand")


def _ew_evaluate(ctx, p, mode, a, b):
    """elementwise.evaluate (the ordinary compute) on operand arrays, truncated to the OFM."""
    v = _ew.evaluate(ctx, p, mode, a, b)
    return _truncated(v, ctx.ofm)


def _ew_table(ctx, p, mode, sa, sb, adom, bdom, na, nb, zpa, zpb):
    """A full result table over both operand domains."""
    av = np.arange(adom[0], adom[1] + 1, dtype=np.int64).reshape(na, 1, 1)
    bv = np.arange(bdom[0], bdom[1] + 1, dtype=np.int64).reshape(1, nb, 1)
    t = _ew_evaluate(ctx, p, mode, av, bv).reshape(-1)
    t.setflags(write=False)
    # raw value -> table index: (raw - zp - adom[0]) * nb + (raw_b - zpb - bdom[0])
    oa = _k(zpa + adom[0], np.intp)
    ob = _k(zpb + bdom[0], np.intp)

    def compute(vals):
        i = 0
        if sa:
            ia = _sub(vals[0], oa)
            i = 1
            if nb != 1:
                ia *= nb
        else:
            ia = 0
        if sb:
            ib = _sub(vals[i], ob)
            idx = ia + ib
        else:
            idx = ia
        return t[idx]
    return compute


def _ew_decomposed(ctx, p, mode, adom, bdom, zpa, zpb):
    """16-bit binary add/sub/min/max/mul of two operands from memory or FIFOs: input-scaling
    tables, the accumulator, then the rescale + activation step function (thresholds +
    activation table); spot-checked against the ordinary evaluation."""
    mul = mode == int(_M.mul)
    if mul:
        ta = tb = None
        ends = [adom[i] * bdom[j] for i in (0, 1) for j in (0, 1)]
        lo, hi = min(ends), max(ends)
        if max(abs(lo), abs(hi)) >= (1 << 31):
            return None                                     # the int32 acc could wrap
    else:
        ta = arith.scale_input(np.arange(adom[0], adom[1] + 1, dtype=np.int64), *p.sa)
        tb = arith.scale_input(np.arange(bdom[0], bdom[1] + 1, dtype=np.int64), *p.sb)
        ta.setflags(write=False)
        tb.setflags(write=False)
        a0, a1, b0, b1 = int(ta.min()), int(ta.max()), int(tb.min()), int(tb.max())
        if mode == int(_M.add):
            lo, hi = a0 + b0, a1 + b1
        elif mode == int(_M.sub):
            lo, hi = a0 - b1, a1 - b0
        else:
            lo, hi = min(a0, b0), max(a1, b1)
        if max(abs(lo), abs(hi)) >= (1 << 31):
            return None                                     # the int32 acc could wrap
    key = ("stage", _raw(ctx.snap, _STEP_REGS), _lut_of(ctx.device, ctx.f), lo, hi)
    stage = _COMPUTES.get(key, False)
    if stage is False:
        stage = _COMPUTES.put(key, _output_stage(ctx, lo, hi))
    if stage is None:
        return _no("elementwise: output stage")
    if not mul:
        # (int64 tables: a ufunc on mixed types goes through a cast, microseconds per call)
        ta, tb = ta.astype(np.int64), tb.astype(np.int64)
    oa = zpa + adom[0]
    ob = zpb + bdom[0]
    zpa0, zpb0 = _k(zpa), _k(zpb)
    op = {int(_M.add): np.add, int(_M.sub): np.subtract, int(_M.min): np.minimum,
          int(_M.max): np.maximum}.get(mode)
    i64 = np.int64
    if not mul:
        la = _lookup(ta, oa, _value_dtype(ctx.ifm))          # ta[raw - oa]
        lb = _lookup(tb, ob, _value_dtype(ctx.ifm2))

    def compute(vals):
        if mul:
            acc = _sub(vals[0], zpa0)
            acc *= _sub(vals[1], zpb0)
        else:
            acc = op(la(vals), lb(vals[1:]), dtype=i64)
        return stage(acc)

    # spot checks against the ordinary evaluation: the domain corners and random values
    rng = np.random.default_rng(_SEED)
    n = 4096
    ca = np.array([adom[0], adom[1], adom[0], adom[1]])
    cb = np.array([bdom[0], bdom[1], bdom[1], bdom[0]])
    xa = np.concatenate([ca, rng.integers(adom[0], adom[1] + 1, n), np.full(64, adom[0]), np.full(64, adom[1])])
    xb = np.concatenate([cb, rng.integers(bdom[0], bdom[1] + 1, n), rng.integers(bdom[0], bdom[1] + 1, 128)])
    want = _ew_evaluate(ctx, p, mode, xa.reshape(-1, 1, 1), xb.reshape(-1, 1, 1))
    raw = [(xa + zpa).astype(_value_dtype(ctx.ifm)).reshape(-1, 1, 1),
           (xb + zpb).astype(_value_dtype(ctx.ifm2)).reshape(-1, 1, 1)]
    got = compute(raw)
    if got.shape != want.shape or not np.array_equal(got, want):
        return None
    cc = _cc.elementwise_compute(_CC_MODES[mode], ta, tb, oa, ob, zpa, zpb, stage.row, stage.table, stage.odt,
                                  compute)
    return _checked(cc, compute, [raw, [v.astype(np.int64) for v in raw]]) or compute


def _output_stage(ctx, lo: int, hi: int, rescale_mode=_common.RESCALE_GLOBAL):
    """rescale (global scale) + activation + truncation of int64 accumulators in [lo, hi]
    as a closure: ``r = (acc*scale + R) >> shift`` with R by the product's sign
    (arith.round_terms), the activation's clamp of ``r + zp`` and, for a LUT function, a
    table of arith.activation over the clamp range.  None when the accumulator range
    assert or the activation's int32 wrap could matter (the ordinary evaluation decides)
    or the table would be too large.  Checked on the range's ends and random accumulators
    against OpContext.rescale + activation.  *rescale_mode* RESCALE_NONE: no rescale (the
    accumulator itself; scale 1, shift 0, no rounding term); RESCALE_SHIFT_ONLY: scale 1 and
    no accumulator range assert (elementwise's 64-bit product).  Where (int32_t)(r + zp)
    can wrap and there is no LUT, the stage takes activation()'s int32 steps."""
    f = ctx.f
    ofm = ctx.ofm
    none = rescale_mode == _common.RESCALE_NONE
    shift_only = rescale_mode == _common.RESCALE_SHIFT_ONLY   # (elementwise's: no acc range assert)
    if not (none or shift_only) and rescale_mode != _common.RESCALE_GLOBAL:
        return None
    if ofm.scale_mode != arith.ScaleMode.GLOBAL and not none:   # per-channel: not a function of acc alone
        return None
    acc_bits = ctx.acc_bits
    if not (none or shift_only) and (lo < -(1 << (acc_bits - 1)) or hi >= (1 << (acc_bits - 1))):
        return None
    if none:
        scale, shift, rp, rn = 1, 0, 0, 0
    else:
        scale, shift = f("NPU_SET_OFM_SCALE", "scale"), f("NPU_SET_OFM_SCALE", "shift")
        rm, dbl = f("NPU_SET_OFM_SCALE", "round_mode"), f("NPU_SET_OFM_SCALE", "dbl_rnd")
        if shift_only:
            scale = 1
        if not (0 <= rm <= 5 and 0 <= dbl <= 30 and 0 <= shift <= 63 and scale >= 0):
            return None
        rp, rn = (int(v[0]) for v in arith.round_terms(np.array([shift]), rm, dbl))
    if max(abs(lo), abs(hi)) * scale + max(rp, rn) >= (1 << 63):
        return None
    fn = f("NPU_SET_ACTIVATION", "activation_function")
    zp, amin, amax = arith.ofm_activation_params(ofm.act_type, f("NPU_SET_OFM_ZERO_POINT", "zero_point"),
                                                 f("NPU_SET_ACTIVATION_MIN", "clip_boundary"),
                                                 f("NPU_SET_ACTIVATION_MAX", "clip_boundary"))
    rng = arith.activation_clamp(fn, f("NPU_SET_ACTIVATION", "activation_clip_range"), amin, amax)
    if rng is not None:
        clo, chi = rng
        if clo > chi:
            return None
    elif fn == _ACT_LUT_NONE:
        clo, chi = None, None
    else:
        return None                                       # an unclamped LUT index: ordinary path

    def rescale(x):
        return ctx.rescale(x, rescale_mode, range_check=not shift_only)
    ends = rescale(np.array([lo, hi], np.int64))
    # (int32_t)(r + zp) could wrap: without a LUT the stage takes activation's int32 steps
    wrap32 = int(ends[0]) + zp < -(1 << 31) or int(ends[1]) + zp >= (1 << 31)
    if wrap32 and fn != _ACT_LUT_NONE:
        return None
    odt = _value_dtype(ofm)
    table = None
    if fn != _ACT_LUT_NONE:
        vlo, vhi = max(clo, int(ends[0]) + zp), min(chi, int(ends[1]) + zp)
        if vhi - vlo + 1 > _STEPS_MAX:
            return None
        vlo = min(vlo, vhi)
        table = _truncated(ctx.activation(np.arange(vlo, vhi + 1, dtype=np.int64) - zp), ofm)   # = LUT(v)
        table.setflags(write=False)
        clo, chi = vlo, vhi                               # r + zp lies in [ends] + zp: the same clamp
    diff = rn - rp
    sh, sc, zpv, rpv, diffv, s63 = _k(shift), _k(scale), _k(zp), _k(rp), _k(diff), _k(63)
    clip = _common.clip_ufunc
    if clo is not None:
        clo, chi = _k(clo), _k(chi)

    # the rounding term, the zero point and (table) the clamp's low end in one constant:
    # (x + k * 2**shift) >> shift == (x >> shift) + k, when nothing can overflow int64
    off = zp - (int(clo) if table is not None else 0)
    C = rp + (off << shift)
    folded = max(abs(lo), abs(hi)) * scale + abs(diff) + abs(C) < (1 << 63) and not wrap32
    zp32 = _k(zp, np.int32)
    if wrap32 and clo is not None:
        if not (-(1 << 31) <= int(clo) and int(chi) < (1 << 31)):
            return None
        clo32, chi32 = _k(int(clo), np.int32), _k(int(chi), np.int32)
    Cv = _k(C) if folded else None
    top = _k(int(chi) - int(clo)) if table is not None else None
    zero = _k(0)

    def stage(acc):
        p = acc * sc
        if diff:
            q = p >> s63                                  # -1 where the product < 0
            q &= diffv
            p += q
        if folded:
            p += Cv
            p >>= sh                                      # = rescale + zp (- clo with a table)
            if table is not None:
                clip(p, zero, top, out=p)
                return table[p]
        else:
            if rp:
                p += rpv
            p >>= sh
            if wrap32:                                    # activation(): (int32_t)(r + zp), the clamp
                x = p.astype(np.int32)
                x += zp32
                if clo is not None:
                    clip(x, clo32, chi32, out=x)
                return x.astype(odt)
            p += zpv
            if table is not None:
                clip(p, clo, chi, out=p)
                p -= clo
                return table[p]
        if clo is not None:
            clip(p, clo, chi, out=p)
        return p.astype(odt)                              # truncate(): the low bits

    rng = np.random.default_rng(_SEED)
    probe = np.unique(np.concatenate([np.array([lo, hi, 0, -1, 1, lo + 1, hi - 1]).clip(lo, hi),
                                      rng.integers(lo, hi + 1, 8192)])).astype(np.int64)
    want = _truncated(ctx.activation(rescale(probe)), ofm)
    got = stage(probe.copy())
    if got.dtype != want.dtype or not np.array_equal(got, want):
        return None
    # the same stage as a parameter row of the compiled kernels (tlm.ethos_u85.ops.compiled)
    stage.row = _cc.stage_row(scale, shift, rp, rn, zp, None if clo is None else int(clo),
                              None if clo is None else int(chi), wrap32, table)
    stage.table, stage.odt, stage.probe = table, odt, (probe, want)
    return stage


# ---------------------------------------------------------------------------- pool
def _prepare_pool(dev, ctx, snap, d) -> "_Prepared | None":
    mode = int(d.fields.get("pooling_mode", 0))
    if mode not in (_pool.MAX, _pool.MIN, _pool.SUM, _pool.AVERAGE, _pool.REDUCE_SUM):
        return _no("pool: mode")
    kh, kw, sy, sx = ctx.kernel_h, ctx.kernel_w, ctx.stride_y, ctx.stride_x
    if ctx.upscale != 0 or ctx.pad_top or ctx.pad_left or ctx.pad_bottom or ctx.pad_right:
        return _no("pool: upscale or padding")
    if (kh, kw, sy, sx) != (1, 1, 1, 1) and mode not in (_pool.MAX, _pool.MIN):
        return _no("pool: not 1x1")                        # (a window of max/min: a table too)
    if ctx.acc_input != 0 or ctx.acc_output != 0 or ctx.ofm.scale_mode != arith.ScaleMode.GLOBAL:
        return _no("pool: accumulator or scale mode")
    reduce_sum = mode == _pool.REDUCE_SUM
    if ctx.ifm.precision not in ((Precision.B8, Precision.B16, Precision.B32) if reduce_sum
                                 else (Precision.B8, Precision.B16)):
        return _no("pool: IFM precision")
    pre = _Prepared(dev, "NPU_OP_POOL")
    oh, ow, od = ctx.ofm_h, ctx.ofm_w, ctx.ofm_d
    ih, iw = ctx.ifm_h, ctx.ifm_w
    if reduce_sum:                                          # op_pool: read_ifm(oy, ox, every channel)
        if od != 1:
            return _no("pool: reduce_sum OFM depth")
        src = pre.operand(ctx.ifm, range(oh), range(ow), range(ctx.ifm_depth), Channel.rd_ifm)
    else:                                                   # read_ifm_padded(depth=od), no padding
        src = pre.operand(ctx.ifm, range(ih), range(iw), range(od), Channel.rd_ifm)
    # every window lies inside the IFM (no padding taps; the 1x1 case: IFM == OFM in size)
    ye, xe = (oh - 1) * sy + 1, (ow - 1) * sx + 1
    if src is None or (not reduce_sum and (ye + kh - 1 > ih or xe + kw - 1 > iw
                                          or (kh, kw, sy, sx) == (1, 1, 1, 1) and (ih, iw) != (oh, ow))):
        return _no("pool: IFM")
    if not pre.ofm(ctx.ofm, (oh, ow, od), _common.ALLOWED_PERMS_ALL):
        return _no("pool: OFM")
    pre.chain_state(True, False, ctx.ifm, ctx.ifm2, ctx.ofm)
    pre.lut = _lut_of(dev, ctx.f)
    if reduce_sum:
        key = ("pool", mode, _raw(snap, _POOL_REGS), pre.lut, ctx.ifm_depth)
        compute = _COMPUTES.get(key, False)
        if compute is False:
            compute = _COMPUTES.put(key, _reduce_sum_compute(ctx))
        if compute is None:
            return _no("pool: reduce_sum compute")
        pre.compute = compute
        return pre
    key = ("pool", mode, _raw(snap, _POOL_REGS), pre.lut)
    compute = _COMPUTES.get(key, False)
    if compute is False:
        compute = _COMPUTES.put(key, _pool_compute(ctx, mode))
    if (kh, kw, sy, sx) != (1, 1, 1, 1):
        compute = _windowed(compute, mode, kh, kw, sy, sx, ye, xe, (ih, iw) == (kh, kw))
    pre.compute = compute
    return pre


def _windowed(table_compute, mode, kh, kw, sy, sx, ye, xe, whole):
    """A max/min pool over kh x kw windows (no padding): the table of the 1x1 pool looked
    up at each window's max/min raw value (read_ifm subtracts the zero point, which keeps
    the order; the identity loses to any tap).  *whole*: one window over the whole IFM."""
    red = np.maximum if mode == _pool.MAX else np.minimum
    reduce = red.reduce

    def compute(vals):
        v = vals[0]
        if whole:
            m = reduce(reduce(v, axis=0, keepdims=True), axis=1, keepdims=True)
        else:
            m = v[0:ye:sy, 0:xe:sx]
            for ky in range(kh):
                for kx in range(kw):
                    if ky or kx:
                        m = red(m, v[ky:ky + ye:sy, kx:kx + xe:sx])
        return table_compute([m])
    return compute


def _reduce_sum_compute(ctx):
    """reduce_sum: read_ifm's values (zero point subtracted) summed over the channels into
    accumulate(0, sum), then write_accumulator's steps (global scale: no bias) - by
    _output_stage over the accumulator range, else OpContext.rescale + activation."""
    zp = arith.ifm_zero_point(ctx.ifm.zero_point, ctx.ifm.precision, ctx.ifm.act_type, check=False)
    zp0 = _k(zp)
    ofm = ctx.ofm
    b = ctx.acc_bits
    lo, hi = _type_range(ctx.ifm)
    n = ctx.ifm_depth
    slo, shi = n * (lo - zp), n * (hi - zp)                 # the exact sums' range
    if slo < -(1 << (b - 1)) or shi >= (1 << (b - 1)):
        slo, shi = -(1 << (b - 1)), (1 << (b - 1)) - 1     # accumulate() wraps
    stage = _output_stage(ctx, slo, shi)
    zero = np.zeros((1, 1, 1), np.int64)

    def compute(vals):
        s = _sub(vals[0], zp0).sum(axis=2, keepdims=True, dtype=np.int64)
        acc = ctx.accumulate(zero, s)
        if stage is not None:
            return stage(acc)
        return _truncated(ctx.activation(ctx.rescale(acc, _common.RESCALE_NORMAL)), ofm)
    return compute


def _pool_compute(ctx, mode):
    """A 1x1 pool as a table over the IFM's raw values (read_ifm, read_accumulator with the
    mode's identity, accumulate, rescale, activation, truncation: the ordinary steps)."""
    lo, hi = _type_range(ctx.ifm)
    zp = arith.ifm_zero_point(ctx.ifm.zero_point, ctx.ifm.precision, ctx.ifm.act_type, check=False)
    x = np.arange(lo, hi + 1, dtype=np.int64) - zp      # read_ifm values over the domain
    acc = x.reshape(1, -1, 1)
    if mode in (_pool.SUM, _pool.AVERAGE):
        acc = ctx.accumulate(np.zeros_like(acc), acc)
    if mode == _pool.AVERAGE:
        v = ctx.rescale(acc, _common.RESCALE_AVPOOL, divisor=np.ones_like(acc))
    else:
        v = ctx.rescale(acc, _common.RESCALE_NORMAL)
    table = _truncated(ctx.activation(v), ctx.ofm).reshape(-1)
    table.setflags(write=False)
    return _lookup(table, lo, _value_dtype(ctx.ifm))


def _lookup(table: np.ndarray, lo: int, dt: np.dtype):
    """compute(vals) = table[vals[0] - lo] for a table over every value of type dt from lo
    up: operands of type dt index a rotated copy through their unsigned view (no
    subtraction); others (FIFO values, int64) take the subtraction."""
    bits = 8 * dt.itemsize
    full = table.size == 1 << bits and lo == (-(1 << (bits - 1)) if dt.kind == "i" else 0)
    if full:
        udt = np.dtype(f"<u{dt.itemsize}")
        rolled = np.roll(table, lo and 1 << (bits - 1))   # rolled[v & mask] = table[v - lo]
        rolled.setflags(write=False)

    lo0 = _k(lo, np.intp)

    def compute(vals):
        v = vals[0]
        if full and v.dtype == dt:
            return rolled[v.view(udt)]
        return table[_sub(v, lo0)]
    cc = _cc.lookup_compute(table, lo, compute)
    if cc is not None:                                    # every value of the domain, as dt and int64
        dom = np.arange(lo, lo + table.size, dtype=np.int64).reshape(1, -1, 1)
        cases = [[dom]]
        info = np.iinfo(dt)
        if info.min <= lo and lo + table.size - 1 <= info.max:
            cases.append([dom.astype(dt)])
        return _checked(cc, compute, cases) or compute
    return compute


# ---------------------------------------------------------------------------- conv / depthwise
def _prepare_conv(dev, ctx, snap, d, depthwise: bool) -> "_Prepared | None":
    name = "NPU_OP_DEPTHWISE" if depthwise else "NPU_OP_CONV"
    if not depthwise and int(d.fields.get("weights_ifm2", 0)):
        return _no("conv: weights_ifm2")
    g = _conv.conv_geometry(snap)
    if g.acc_input != 0 or ctx.acc_output != 0 or ctx.upscale != 0:
        return _no("conv: accumulator or upscale")
    if ctx.ifm.storage not in (Storage.TILE2X2, Storage.TILE3X1):
        return _no("conv: chained IFM")
    if ctx.ofm.scale_mode != arith.ScaleMode.PER_CHANNEL:
        return _no("conv: global scale")
    prm = ctx.fused_params()
    # a LUT activation (sigmoid, tanh, a loaded LUT) is not the fused epilogue's case: its
    # plan takes write_accumulator's steps themselves (the LUT RAM compared on every run)
    lut_act = (prm is None and ctx.f("NPU_SET_ACTIVATION", "activation_function") != _ACT_LUT_NONE
               and ctx.ofm.precision in (Precision.B8, Precision.B16, Precision.B32))
    if prm is None and not lut_act:
        return _no("conv: not the fused epilogue's case")
    dry = ctx.port.memory
    # weights and scale/bias through the dry port: the decoded forms and the stream bytes
    w = _conv.read_weight_tensor(snap, ctx.port, _conv.macs_of(dev), depthwise, name, policy=ctx.policy)
    if w.flags.writeable:
        return _no("conv: weights not cached")
    if not depthwise and g.sparsity == _conv.SPARSE:
        _conv.check_sparse(w, name)                        # these stream bytes (compared on every run)
    ctx.scale_bias()
    sc = ctx.scale_cache
    depth = g.ofm_d if depthwise else g.ifm_d
    pre = _Prepared(dev, name)
    src = pre.operand(ctx.ifm, range(ctx.ifm_h), range(ctx.ifm_w), range(depth), Channel.rd_ifm)
    if src is None:
        return _no("conv: IFM")
    pre.stream(dry.txns, Channel.rd_weights)
    pre.stream(dry.txns, Channel.rd_scale_bias)
    shape = (g.ofm_h, g.ofm_w, g.ofm_d)
    if not pre.ofm(ctx.ofm, shape, _common.ALLOWED_PERMS_ALL,
                   ctx.microblock_depth() if ctx.ofm.reverse == 3 else None):
        return _no("conv: OFM")
    pre.chain_state(True, False, ctx.ifm, ctx.ifm2, ctx.ofm)
    if lut_act:
        pre.lut = _lut_of(dev, ctx.f)
    else:
        rm, dbl, zp, amin, amax, clamp, odt = prm
        k = sc.epilogue(g.ofm_d, rm, dbl, ctx.acc_bits)
    fm = ctx.ifm
    izp = arith.ifm_zero_point(fm.zero_point, fm.precision, fm.act_type, check=False)
    bound_x = _conv.ifm_domain_bound(ctx)
    if bound_x is None:
        return _no("conv: IFM domain")
    H = ctx.pad_top + ctx.ifm_h + ctx.pad_bottom
    W = ctx.pad_left + ctx.ifm_w + ctx.pad_right
    t, l, ih, iw = ctx.pad_top, ctx.pad_left, ctx.ifm_h, ctx.ifm_w
    padded = (H, W) != (ih, iw)
    pointwise = (not depthwise and g.kh == 1 and g.kw == 1 and g.stride_y == 1 and g.stride_x == 1
                 and not padded and (g.ofm_h, g.ofm_w) == (ih, iw))
    wmax = _conv.weight_max(w)
    K = g.kh * g.kw * (1 if depthwise else g.ifm_d)
    dt, kc = _conv.float_plan(bound_x, wmax, K)
    if pointwise and kc >= K:
        wm = _conv.weight_matrix(w, dt)
        bound = bound_x * wmax * K
        M = g.ofm_h * g.ofm_w

        izp0 = _k(izp, dt)

        def accumulate(x):
            a = _sub(x, izp0).reshape(M, K)
            return (a @ wm).reshape(shape), bound
    else:
        izp32 = _k(izp, np.float32)

        def accumulate(x):
            xp = np.empty((H, W, depth), np.float32)
            if padded:
                xp[:t] = 0
                xp[t + ih:] = 0
                xp[t:t + ih, :l] = 0
                xp[t:t + ih, l + iw:] = 0
            np.subtract(x, izp32, out=xp[t:t + ih, l:l + iw], dtype=np.float32)
            if depthwise:
                return _conv.depthwise_acc(xp, w, g.stride_y, g.stride_x, g.dil_y, g.dil_x, g.ofm_h, g.ofm_w,
                                           amax=bound_x)
            return _conv.conv_acc(xp, w, g.stride_y, g.stride_x, g.dil_y, g.dil_x, g.ofm_h, g.ofm_w,
                                  amax=bound_x)

    def general(s, bound):
        out = _common.fused_epilogue(s, bound, k, zp, amin, amax, clamp, odt)
        if out is None:
            raise _NotPlanned
        return out

    if lut_act:
        bias = ctx.scale_bias()[0][:g.ofm_d]
        ofm, acc_bits = ctx.ofm, ctx.acc_bits

        def stepwise(s, bound):
            # write_accumulator past its fused path: wrap, bias, per-channel rescale, the
            # activation (on the plan's copy of the LUT RAM), write_ofm's truncation; an
            # assert raises and the ordinary path then runs the op
            a = arith.sign_extend(np.asarray(s, dtype=np.int64), acc_bits)
            v = ctx.activation(ctx.rescale(ctx.accumulate(a, bias), _common.RESCALE_NORMAL))
            return _truncated(v, ofm)
        epilogue = stepwise
    else:
        # the accumulators' type and bound follow from the IFM's domain bound, not the data
        acc, acc_bound = accumulate(np.array(pre.inputs[0]))
        epilogue = _small_epilogue(k, acc_bound, zp, amin, amax, clamp, odt, acc.dtype, shape) or general

    def compute(vals):
        return epilogue(*accumulate(vals[0]))
    pre.compute = compute
    if pointwise and kc >= K and g.ofm_h * g.ofm_w * g.ofm_d * K <= _CC_CONV_MACS:
        if lut_act:
            pre.compute = _pointwise_lut_compiled(ctx, compute, w, izp, bound, shape, pre.inputs[0],
                                                  _type_range(fm)) or compute
        else:
            pre.compute = _pointwise_compiled(compute, w, k, izp, acc, acc_bound, zp, amin, amax, clamp, odt, shape,
                                              pre.inputs[0], _type_range(fm)) or compute
    pre.macs = g.ofm_h * g.ofm_w * g.ofm_d * g.kh * g.kw * (1 if depthwise else g.ifm_d)
    return pre


def _pointwise_compiled(compute, w, k, izp, acc, bound, zp, amin, amax, clamp, odt, shape, recorded, ifm_range):
    """The compiled 1x1 CONV (exact int64 sums, the fused epilogue's int64 steps; see
    tlm.ethos_u85.ops.compiled), checked against the numpy *compute* on the recorded IFM,
    random IFMs and the IFM type's ends; None where fused_epilogue would decline for these
    bounds (the numpy compute then declines as before)."""
    if not _cc.available():
        return None
    if _common.fused_epilogue(np.zeros(acc.shape, acc.dtype), bound, k, zp, amin, amax, clamp, odt) is None:
        return _no("compiled: fused epilogue declines")
    return _pointwise_checked(compute, w, k, izp, k.bits, clamp, amin - zp, amax - zp, zp, odt, shape,
                              recorded, ifm_range)


def _pointwise_checked(compute, w, k, izp, bits, clamp, cmin, cmax, zp, odt, shape, recorded, ifm_range,
                       lut=None):
    """_cc.pointwise_compute of a 1x1 CONV (weights *w*, epilogue constants *k*), checked
    against the numpy *compute* on the recorded IFM, the IFM type's ends and random IFMs;
    None where it declines."""
    O = w.shape[0]
    cc = _cc.pointwise_compute(w.reshape(O, -1), k.bias, k.scale, k.shift, k.rp,
                               k.rp if k.diff is None else k.rp - k.diff, izp, bits if bits < 64 else 0,
                               clamp, cmin, cmax, zp, odt, shape, compute, lut=lut)
    if cc is None:
        return None
    lo, hi = ifm_range
    x = np.array(recorded)
    rng = np.random.default_rng(_SEED)
    cases = [[x], [np.full_like(x, lo)], [np.full_like(x, hi)]]
    cases += [[rng.integers(lo, hi + 1, x.shape).astype(x.dtype)] for _ in range(3)]
    return _checked(cc, compute, cases)


_LUT_BYTE_FUNCTIONS = tuple(int(f) for f in (arith.ActivationFunction.LUT_U8_U8, arith.ActivationFunction.LUT_S8_S8,
                                              arith.ActivationFunction.LUT_S8_S16, arith.ActivationFunction.LUT_S8_S32))


def _pointwise_lut_compiled(ctx, compute, w, izp, bound, shape, recorded, ifm_range):
    """The compiled 1x1 CONV with a LUT activation (the stepwise *compute*: wrap, bias,
    per-channel rescale, activation, truncation), or None.  The kernel's epilogue up to the
    rescale is the fused epilogue's (where its int64 product cannot overflow); the
    activation is a table of the OFM values ``OpContext.activation`` gives (truncated)
    for every clamped ``(int32_t)(r + zp)`` in the clamp range (tanh, sigmoid, a b16 clip
    range), or for the low byte of an unclamped one (the 8-bit-index LUT functions, which
    read nothing else of it).  Checked against *compute* as _pointwise_compiled's."""
    if not _cc.available():
        return None
    f = ctx.f
    rm, dbl = f("NPU_SET_OFM_SCALE", "round_mode"), f("NPU_SET_OFM_SCALE", "dbl_rnd")
    if not (0 <= rm <= 5 and 0 <= dbl <= 30):
        return None
    fn = f("NPU_SET_ACTIVATION", "activation_function")
    try:
        zp, amin, amax = arith.ofm_activation_params(ctx.ofm.act_type, f("NPU_SET_OFM_ZERO_POINT", "zero_point"),
                                                     f("NPU_SET_ACTIVATION_MIN", "clip_boundary"),
                                                     f("NPU_SET_ACTIVATION_MAX", "clip_boundary"))
    except arith.Unpredictable:
        return None
    rng = arith.activation_clamp(fn, f("NPU_SET_ACTIVATION", "activation_clip_range"), amin, amax)
    if rng is not None:
        mode, (tlo, thi) = _cc.LUT_RANGE, rng
    elif fn in _LUT_BYTE_FUNCTIONS:
        mode, tlo, thi = _cc.LUT_BYTE, 0, 255
    else:
        return _no("compiled: LUT activation without a clamp")
    if not (-(1 << 31) <= tlo <= thi < (1 << 31)) or thi - tlo + 1 > _STEPS_MAX:
        return _no("compiled: LUT activation range")
    bits = ctx.acc_bits
    k = ctx.scale_cache.epilogue(shape[2], rm, dbl, bits)
    A = bound + k.bmax
    if A >= (1 << (bits - 1)):
        A = 1 << (bits - 1)
    if A * k.smax + k.rmax >= (1 << 63):
        return _no("compiled: int64 overflow")
    odt = _value_dtype(ctx.ofm)
    try:                                                    # (int32_t)(x + zp) = v for x = v - zp
        table = _truncated(ctx.activation(np.arange(tlo, thi + 1, dtype=np.int64) - zp), ctx.ofm)
    except arith.Unpredictable:
        return _no("compiled: LUT activation table")
    try:
        return _pointwise_checked(compute, w, k, izp, bits, False, 0, 0, zp, odt, shape, recorded, ifm_range,
                                  lut=(mode, table, tlo, thi))
    except (_NotPlanned, arith.Unpredictable):
        return _no("compiled: its numpy compute declined a check operand")


def _small_epilogue(k, bound: int, zp: int, amin: int, amax: int, clamp: bool, odt, acc_dt, shape):
    """common.fused_epilogue for a small OFM (one block) whose accumulators have type acc_dt
    and |acc| <= bound: the same operations of the path it would take (float64 or int64)
    on precomputed tiles, without its per-call set-up.  None when it would decline (the
    ordinary epilogue then) or the OFM is large.  Checked against fused_epilogue on
    random accumulators and the bounds."""
    h, w, d = shape
    M = h * w
    if M * d > _common.EPI_BLOCK or not d:
        return _no("epilogue: large")
    # fused_epilogue's choice, for these bounds
    bits = k.bits
    A = bound + k.bmax
    if acc_dt.kind == "f" and A >= (1 << 53):
        return _no("epilogue: float accumulators beyond 2**53")
    wrap = A >= (1 << (bits - 1))
    if wrap:
        A = 1 << (bits - 1)
    if A * k.smax + k.rmax >= (1 << 63):
        return _no("epilogue: int64 overflow")
    f64 = False
    if clamp:
        rb = A * k.qmax * (1 + 2.0 ** -40) + k.rqmax + 2
        if rb + abs(zp) >= (1 << 31):
            return _no("epilogue: int32 cast")
        tmin, tmax = _common.TYPE_RANGE[odt.char]
        f64 = (not wrap and tmin <= amin and amax <= tmax and bool(k.scale.size)
               and A * k.smax + k.rmax + (max(abs(zp), abs(zp - amin)) << k.shmax) < (1 << 53))
    if f64:
        epilogue = _epilogue_f64(k, bound, zp, amin, amax, odt, acc_dt, M, d, shape)
    else:
        epilogue = _epilogue_i64(k, zp, amin, amax, clamp, odt, wrap, M, d, shape, A)
    rng = np.random.default_rng(_SEED)
    for _ in range(4):
        acc = rng.integers(-bound, bound + 1, (h, w, d)).astype(acc_dt)
        ends = acc.reshape(-1)[:2]
        ends[...] = (-bound, bound)[:ends.size]          # (a 1-element OFM: one end)
        want = _common.fused_epilogue(acc, bound, k, zp, amin, amax, clamp, odt)
        if want is None or not np.array_equal(epilogue(acc, bound), want):
            return _no("epilogue: check")
    return epilogue


def _epilogue_f64(k, bound, zp, amin, amax, odt, acc_dt, M, d, shape):
    """fused_epilogue_f64 on one block."""
    tthr32, tthr64, tsc, tc, tdiff = k.ftiles(M, zp - amin)
    thr = tthr32 if acc_dt == np.float32 and bound < (1 << 24) else tthr64
    # every ufunc on operands of one type (a mixed pair goes through a cast, microseconds
    # per call): the accumulators as float64 (exact) beside thresholds of their own type
    cmp64 = thr.dtype != acc_dt
    hi = float(np.nextafter(float(amax - amin) + 1.0, -np.inf))
    udt = np.dtype(f"<u{odt.itemsize}")
    add = amin % (1 << (8 * odt.itemsize))
    addv = _k(add, udt)
    clip = _common.clip_ufunc
    zero, hiv = _k(0.0, np.float64), _k(hi, np.float64)

    def epilogue(acc, bound_):
        x = acc.reshape(M, d)
        b = x.astype(np.float64)
        b *= tsc
        b += tc
        if tdiff is not None:
            np.subtract(b, tdiff, out=b, where=(x.astype(np.float64) if cmp64 else x) < thr)   # (x < thr) * tdiff
        clip(b, zero, hiv, out=b)
        out = b.astype(udt)
        if add:
            out += addv
        return out.view(odt).reshape(shape)
    return epilogue


def _epilogue_i64(k, zp, amin, amax, clamp, odt, wrap, M, d, shape, A):
    """fused_epilogue's int64 loop on one block (|acc + bias| <= A after the wrap).  Where
    int64 cannot overflow, the zero point rides in the rounding term
    (``((p + rp) >> sh) + zp == (p + rp + (zp << sh)) >> sh``) and the clamp is one clip of
    the result."""
    tb, ts, tsh, trp, tdiff = k.tiles(M)
    sh, s63 = _k(64 - k.bits), _k(63)
    zpv = _k(zp)
    lo, hi = _k(amin - zp), _k(amax - zp)
    if d and A * k.smax + k.rmax + (abs(zp) << k.shmax) < (1 << 63):
        trz = trp + (np.int64(zp) << tsh)                   # (zp << sh per channel: no overflow)
        trz.setflags(write=False)
        clo, chi = _k(amin), _k(amax)
        clip = _common.clip_ufunc
        zero = _k(0)

        def folded(acc, bound_):
            b = acc.reshape(M, d).astype(np.int64)
            b += tb
            if wrap:
                b <<= sh
                b >>= sh
            b *= ts
            if tdiff is not None:
                neg = b < zero                              # (b >> 63) & tdiff: tdiff where b < 0
                b += trz
                np.subtract(b, tdiff, out=b, where=neg)
            else:
                b += trz
            b >>= tsh
            if clamp:
                clip(b, clo, chi, out=b)
            return b.astype(odt).reshape(shape)
        return folded

    def epilogue(acc, bound_):
        b = acc.reshape(M, d).astype(np.int64)
        b += tb
        if wrap:
            b <<= sh
            b >>= sh
        b *= ts
        if tdiff is not None:
            c = b >> s63
            c &= tdiff
            b += trp
            b -= c
        else:
            b += trp
        b >>= tsh
        if clamp:
            np.maximum(b, lo, out=b)
            np.minimum(b, hi, out=b)
        b += zpv
        return b.astype(odt).reshape(shape)                 # (the low bits, as a cast)
    return epilogue


# ============================================================================ DMA
def _prepare_dma(dev, name, d, snap) -> "_Prepared | None":
    f = snap.field
    if f("NPU_SET_DMA0_SRC_REGION", "idx_mode") or f("NPU_SET_DMA0_DST_REGION", "idx_mode"):
        return _no("DMA: gather or scatter")
    pre = _Prepared(dev, name)
    pre.is_dma = True
    if f("NPU_SET_DMA0_DST_REGION", "region_mode") == _dma_internal():
        if f("NPU_SET_DMA0_SRC_REGION", "stride_mode") != _dma_d1():
            return _no("DMA: a LUT load of several lines")
        pre.dma = (f("NPU_SET_DMA0_DST", "addr") & ADDR_MASK, f("NPU_SET_DMA0_LEN", "addr") & ADDR_MASK)
        if pre.dma[0] + pre.dma[1] > dev.lut.size:
            return _no("DMA: beyond the LUT RAM")
    return pre


def _dma_internal():
    return isa.dma_region_mode.internal


def _dma_d1():
    return isa.dma_stride_mode.d1
