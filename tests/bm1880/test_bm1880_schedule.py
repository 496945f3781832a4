"""Ordering (guide 3.5-3.10): the serial default, parallel groups, streams, dependencies,
the hazard check, and the chapter-3 examples ported."""
import numpy as np
import pytest

from tests.bm1880 import bm1880_ref as ref
from tests.bm1880.bm1880_harness import U8, Rig, rng_for, values
from tests.bm1880.bm1880_net import G_BC, G_BF, G_POOL, G_WC, G_WF, G_X, G_Y, build
from tlm.bm1880 import (CTRL_NULL, Bm1880, BmkError, bmk1880_acquire_cmdbuf, bmk1880_add_dependency,
                        bmk1880_create_streams,
                        bmk1880_destroy_streams, bmk1880_gdma_load, bmk1880_gdma_store, bmk1880_info_t,
                        bmk1880_parallel_disable, bmk1880_parallel_enable, bmk1880_register, bmk1880_set_stream,
                        bmk1880_tpu_add, bmk1880_tpu_copy, bmk1880_tpu_relu)
from tlm.bm1880.descriptors import decode
from tlm.bm1880.device import FaultError, Job, Program
from tlm.bm1880.ops import execute
from tlm.bm1880.schedule import Schedule

SHAPE = (1, 8, 2, 4)
N = int(np.prod(SHAPE))


def tl_add(ctx, r, a, b, zero):
    """The examples' 8-bit bmk1880_tl_add as tpu_add with zero high planes (a, b, r unsigned)."""
    return bmk1880_tpu_add(ctx, res_high=None, res_low=r, a_high=zero, a_low=a, b_high=zero, b_low=b)


def schedule(rig):
    return Program.load(rig.cmdbuf(), rig.chip).schedule


def _inputs(rig, seed):
    r = rng_for(seed)
    ga, gb = values(r, SHAPE, False), values(r, SHAPE, False)
    rig.gmem_put(0x1000, ga)
    rig.gmem_put(0x2000, gb)
    zero = rig.alloc(SHAPE, U8)
    rig.put(zero, np.zeros(SHAPE, np.int64))
    return ga, gb, zero


def test_serial_is_a_total_order():
    rig = Rig()
    ga, gb, zero = _inputs(rig, 1)
    a, b, r = (rig.alloc(SHAPE, U8) for _ in range(3))
    bmk1880_gdma_load(rig.ctx, a, 0x1000, CTRL_NULL)
    bmk1880_gdma_load(rig.ctx, b, 0x2000, CTRL_NULL)
    tl_add(rig.ctx, r, a, b, zero)
    bmk1880_gdma_store(rig.ctx, r, 0x3000, CTRL_NULL)
    s = schedule(rig)
    assert all(s.precedes(i, j) for i in range(4) for j in range(i + 1, 4))
    rig.run()
    assert np.array_equal(rig.gmem_get(0x3000, SHAPE, False), np.minimum(ga + gb, 255))


def test_guide_parallel_example():
    """3: lines 1 -> 2 -> {5, 6, 7} -> {11, 12} -> 15."""
    rig = Rig()
    ga, gb, zero = _inputs(rig, 2)
    a0, b0, a1, b1, r0, r1 = (rig.alloc(SHAPE, U8) for _ in range(6))
    ctx = rig.ctx
    bmk1880_gdma_load(ctx, a0, 0x1000, CTRL_NULL)                  # 1
    bmk1880_gdma_load(ctx, b0, 0x2000, CTRL_NULL)                  # 2
    bmk1880_parallel_enable(ctx)
    tl_add(ctx, r0, a0, b0, zero)                                  # 5
    bmk1880_gdma_load(ctx, a1, 0x1000, CTRL_NULL)                  # 6
    bmk1880_gdma_load(ctx, b1, 0x2000, CTRL_NULL)                  # 7
    bmk1880_parallel_disable(ctx)
    bmk1880_parallel_enable(ctx)
    bmk1880_gdma_store(ctx, r0, 0x3000, CTRL_NULL)                 # 11
    tl_add(ctx, r1, a1, b1, zero)                                  # 12
    bmk1880_parallel_disable(ctx)
    bmk1880_gdma_store(ctx, r1, 0x4000, CTRL_NULL)                 # 15
    s = schedule(rig)
    line = {1: 0, 2: 1, 5: 2, 6: 3, 7: 4, 11: 5, 12: 6, 15: 7}
    before = lambda x, y: s.precedes(line[x], line[y])            # noqa: E731
    assert before(1, 2) and all(before(2, x) for x in (5, 6, 7))
    assert not s.ordered(line[5], line[6]) and not s.ordered(line[5], line[7])
    assert before(6, 7)                                            # one DMA engine: program order
    assert all(before(x, y) for x in (5, 6, 7) for y in (11, 12))
    assert not s.ordered(line[11], line[12])
    assert before(11, 15) and before(12, 15)
    rig.run()
    want = np.minimum(ga + gb, 255)
    assert np.array_equal(rig.gmem_get(0x3000, SHAPE, False), want)
    assert np.array_equal(rig.gmem_get(0x4000, SHAPE, False), want)


def test_guide_streams_example():
    """3: streams {4 -> 5 -> 6 -> 7} and {10 -> 11 -> 12 -> 13}. Each engine still runs its
    commands in buffer order, so written stream after stream the two streams are serialised
    by the DMA engine (3 before 10); interleaved, they overlap."""
    for interleave in (False, True):
        rig = Rig()
        ga, gb, zero = _inputs(rig, 3)
        a0, b0, c0, a1, b1, c1 = (rig.alloc(SHAPE, U8) for _ in range(6))
        ctx = rig.ctx
        bmk1880_create_streams(ctx, 2)
        steps = [
            (0, lambda: bmk1880_gdma_load(ctx, a0, 0x1000, CTRL_NULL)),
            (0, lambda: bmk1880_gdma_load(ctx, b0, 0x2000, CTRL_NULL)),
            (0, lambda: tl_add(ctx, c0, a0, b0, zero)),
            (0, lambda: bmk1880_gdma_store(ctx, c0, 0x3000, CTRL_NULL)),
            (1, lambda: bmk1880_gdma_load(ctx, a1, 0x2000, CTRL_NULL)),
            (1, lambda: bmk1880_gdma_load(ctx, b1, 0x1000, CTRL_NULL)),
            (1, lambda: tl_add(ctx, c1, a1, b1, zero)),
            (1, lambda: bmk1880_gdma_store(ctx, c1, 0x4000, CTRL_NULL)),
        ]
        order = [0, 4, 1, 5, 2, 6, 3, 7] if interleave else list(range(8))
        idx = {}
        for k in order:
            bmk1880_set_stream(ctx, steps[k][0])
            idx[k] = steps[k][1]().index
        bmk1880_destroy_streams(ctx)
        s = schedule(rig)
        for st in (0, 4):
            assert all(s.precedes(idx[st + i], idx[st + i + 1]) for i in range(3))
        if interleave:
            assert not s.ordered(idx[2], idx[4 + 1])                  # TPU add of stream 0 vs a DMA load of 1
        else:
            assert s.precedes(idx[3], idx[4])                         # the DMA engine's order
            assert all(s.ordered(i, j) for i in range(8) for j in range(8) if i != j)
        rig.run()
        want = np.minimum(ga + gb, 255)
        assert np.array_equal(rig.gmem_get(0x3000, SHAPE, False), want)
        assert np.array_equal(rig.gmem_get(0x4000, SHAPE, False), want)


def test_parallel_group_hazard_is_a_fault():
    """Storing the result of an add in the same parallel group races with the add."""
    rig = Rig()
    ga, gb, zero = _inputs(rig, 4)
    a, b, r = (rig.alloc(SHAPE, U8) for _ in range(3))
    bmk1880_gdma_load(rig.ctx, a, 0x1000, CTRL_NULL)
    bmk1880_gdma_load(rig.ctx, b, 0x2000, CTRL_NULL)
    bmk1880_parallel_enable(rig.ctx)
    tl_add(rig.ctx, r, a, b, zero)
    bmk1880_gdma_store(rig.ctx, r, 0x3000, CTRL_NULL)
    bmk1880_parallel_disable(rig.ctx)
    with pytest.raises(FaultError) as e:
        Program.load(rig.cmdbuf(), rig.chip)
    f = e.value.fault
    assert f.code == "HAZARD" and "commands 2 (bmk1880_tpu_add) and 3 (bmk1880_gdma_store)" in f.message
    assert f"lmem 0x{r.laddr:x}" in f.message
    rig.gmem_put(0x3000, np.full(SHAPE, 7))
    res = rig.run(expect_ok=False)
    assert res.fault.code == "HAZARD" and res.executed == 0                  # nothing ran
    assert np.all(rig.gmem_get(0x3000, SHAPE, False) == 7)


def test_dependency_orders_across_streams_even_against_buffer_order():
    rig = Rig()
    r_ = rng_for(5)
    src, t = rig.alloc(SHAPE, U8), rig.alloc(SHAPE, U8)
    v = values(r_, SHAPE, False)
    rig.put(src, v)
    ctx = rig.ctx
    bmk1880_create_streams(ctx, 2)
    store = bmk1880_gdma_store(ctx, t, 0x5000, CTRL_NULL)             # stream 0, first in the buffer
    bmk1880_set_stream(ctx, 1)
    copy = bmk1880_tpu_copy(ctx, dst=t, src=src)                       # stream 1
    bmk1880_destroy_streams(ctx)
    res = rig.run(expect_ok=False)
    assert res.fault.code == "HAZARD"
    bmk1880_add_dependency(ctx, copy, store)                           # the copy must come first
    s = schedule(rig)
    assert s.order == [copy.index, store.index]
    rig.run()
    assert np.array_equal(rig.gmem_get(0x5000, SHAPE, False), v)


def test_mode_switches_are_barriers():
    """Commands before create_streams precede the streams' commands (choice C-SCHED)."""
    rig = Rig()
    ga, gb, zero = _inputs(rig, 6)
    a, b, r = (rig.alloc(SHAPE, U8) for _ in range(3))
    ctx = rig.ctx
    bmk1880_gdma_load(ctx, a, 0x1000, CTRL_NULL)
    bmk1880_gdma_load(ctx, b, 0x2000, CTRL_NULL)
    bmk1880_create_streams(ctx, 3)
    bmk1880_set_stream(ctx, 2)
    tl_add(ctx, r, a, b, zero)
    bmk1880_destroy_streams(ctx)
    bmk1880_parallel_enable(ctx)
    bmk1880_gdma_store(ctx, r, 0x3000, CTRL_NULL)
    bmk1880_parallel_disable(ctx)
    s = schedule(rig)
    assert s.precedes(1, 2) and s.precedes(2, 3)
    rig.run()
    assert np.array_equal(rig.gmem_get(0x3000, SHAPE, False), np.minimum(ga + gb, 255))


def _random_order(sched, r):
    """A random topological order of the schedule's graph (commands only)."""
    preds = sched.preds
    m = len(preds)
    indeg = [len(p) for p in preds]
    succ = [[] for _ in range(m)]
    for v, ps in enumerate(preds):
        for p in ps:
            succ[p].append(v)
    ready = [v for v in range(m) if indeg[v] == 0]
    out = []
    while ready:
        v = ready.pop(int(r.integers(0, len(ready))))
        if v < sched.n:
            out.append(v)
        for s in succ[v]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    return out


def _run_in_order(buf, order, inputs):
    prog = Program.load(buf)
    m = Bm1880()
    for addr, data in inputs:
        m.gmem.write(addr, data)
    for i in order:
        c = prog.commands[i]
        execute(m, c.record.kind, c.record.args)
    return m


def test_any_allowed_order_gives_the_same_result():
    """Parallel groups and streams allow several orders; without hazards they all agree."""
    r = rng_for(7)
    ctx = bmk1880_register(bmk1880_info_t(1880, bytearray(4096), 4096))
    build(ctx)
    buf = bytes(bmk1880_acquire_cmdbuf(ctx)[0])
    b = lambda n: r.integers(0, 256, n, dtype=np.uint8).tobytes()     # noqa: E731
    inputs = [(G_X, b(384)), (G_WC, b(216)), (G_BC, b(16)), (G_WF, b(1280)), (G_BF, b(20))]
    sched = Program.load(buf).schedule
    orders = {tuple(_random_order(sched, r)) for _ in range(30)}
    assert len(orders) > 1                                            # the group allows several
    outs = set()
    for o in orders:
        m = _run_in_order(buf, o, inputs)
        outs.add(m.gmem.read(G_POOL, 256) + m.gmem.read(G_Y, 20))
    assert len(outs) == 1


def test_a_hazard_really_is_order_dependent():
    """The buffer the hazard check refuses gives different results in two allowed orders."""
    rig = Rig()
    ga, gb, zero = _inputs(rig, 8)
    a, b, r_ = (rig.alloc(SHAPE, U8) for _ in range(3))
    bmk1880_gdma_load(rig.ctx, a, 0x1000, CTRL_NULL)
    bmk1880_gdma_load(rig.ctx, b, 0x2000, CTRL_NULL)
    bmk1880_parallel_enable(rig.ctx)
    tl_add(rig.ctx, r_, a, b, zero)
    bmk1880_gdma_store(rig.ctx, r_, 0x3000, CTRL_NULL)
    bmk1880_parallel_disable(rig.ctx)
    buf = rig.cmdbuf()
    assert Job(rig.m, buf).fault.code == "HAZARD"
    recs = decode(buf)
    sched = Schedule([(x.kind.engine, x.sync, x.stream) for x in recs], [])
    assert not sched.ordered(2, 3)
    results = []
    for order in ([0, 1, 2, 3], [0, 1, 3, 2]):
        m = Bm1880()
        m.lmem[:] = rig.m.lmem
        m.gmem.write(0x1000, rig.m.gmem.read(0x1000, N))
        m.gmem.write(0x2000, rig.m.gmem.read(0x2000, N))
        for i in order:
            execute(m, recs[i].kind, recs[i].args)
        results.append(m.gmem.read(0x3000, N))
    assert results[0] != results[1]


# ---- the hazard check against a brute-force reference ---------------------------------------------------------
def _footprint_ref(rig, kind, args):
    """(reads, writes) of one command as sets of ("l" | "g", address), from 2.3's formula."""
    def lm(t):
        s = t.shape
        st = rig.stride(t)
        return {("l", ref.lmem_addr(rig.p, t.laddr, st, *i)) for i in np.ndindex(s.n, s.c, s.h, s.w)}

    def gm(addr, t):
        return {("g", addr + k) for k in range(t.shape.n * t.shape.c * t.shape.h * t.shape.w)}
    if kind in ("relu", "copy"):
        return lm(args[1]), lm(args[0])
    t, g = args
    return (gm(g, t), lm(t)) if kind == "load" else (lm(t), gm(g, t))


def _random_program(rig, r):
    """Random serial commands, parallel groups and streams regions (with dependencies) over a
    few small tensors and gmem blocks, so that conflicts are frequent. Returns the commands as
    (kind, args, engine, block, stream) and the dependencies, for the reference."""
    ctx = rig.ctx
    ts = [rig.alloc((1, 3, 2, 2)) for _ in range(4)]
    gs = [0x1000 * k for k in range(1, 4)]
    cmds, deps, ops = [], [], []

    def one(block, stream):
        kind = ["relu", "copy", "load", "store"][int(r.integers(0, 4))]
        t1, t2 = ts[int(r.integers(0, 4))], ts[int(r.integers(0, 4))]
        g = gs[int(r.integers(0, 3))]
        if kind == "relu":
            op, args, eng = bmk1880_tpu_relu(ctx, ofmap=t1, ifmap=t2), (t1, t2), "TPU"
        elif kind == "copy":
            op, args, eng = bmk1880_tpu_copy(ctx, dst=t1, src=t2), (t1, t2), "TPU"
        elif kind == "load":
            op, args, eng = bmk1880_gdma_load(ctx, t1, g, CTRL_NULL), (t1, g), "DMA"
        else:
            op, args, eng = bmk1880_gdma_store(ctx, t1, g, CTRL_NULL), (t1, g), "DMA"
        cmds.append((kind, args, eng, block, stream))
        ops.append(op)
    for block in range(int(r.integers(2, 7))):
        style = int(r.integers(0, 3))
        if style == 0:
            one(block, None)
            continue
        first = len(ops)
        if style == 1:
            bmk1880_parallel_enable(ctx)
            for _ in range(int(r.integers(1, 6))):
                one(block, None)
            bmk1880_parallel_disable(ctx)
        else:
            nr = int(r.integers(1, 4))
            bmk1880_create_streams(ctx, nr)
            st = 0
            for _ in range(int(r.integers(1, 8))):
                if r.integers(0, 2):
                    st = int(r.integers(0, nr))
                    bmk1880_set_stream(ctx, st)
                one(block, st)
            for _ in range(int(r.integers(0, 3))):
                if len(ops) - first >= 2:
                    x, y = (int(v) for v in r.choice(np.arange(first, len(ops)), 2, replace=False))
                    try:
                        bmk1880_add_dependency(ctx, ops[x], ops[y])
                        deps.append((x, y))
                    except BmkError:
                        pass                                      # it would close a cycle
            bmk1880_destroy_streams(ctx)
    return cmds, deps


def _reference_order(cmds, deps):
    """reach[i]: the commands that must follow i, from chapter 3's rules written out: one
    engine of each type in program order; groups and streams regions ordered against
    everything before and after them (choice C-SCHED); streams serial; dependencies."""
    n = len(cmds)
    succ = [set() for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            same_engine = cmds[i][2] == cmds[j][2]
            other_block = cmds[i][3] != cmds[j][3]
            same_stream = cmds[i][4] is not None and cmds[i][4] == cmds[j][4]
            if same_engine or other_block or same_stream:
                succ[i].add(j)
    for x, y in deps:
        succ[x].add(y)
    reach = []
    for i in range(n):
        seen, todo = set(), [i]
        while todo:
            for s in succ[todo.pop()]:
                if s not in seen:
                    seen.add(s)
                    todo.append(s)
        reach.append(seen)
    return reach


@pytest.mark.parametrize("seed", range(300, 340))
def test_hazard_check_matches_brute_force(seed):
    """The first unordered pair (smaller index, then larger) that touches one byte, one of them
    writing, found by trying every pair against the reference order and reference footprints."""
    r = rng_for(seed)
    rig = Rig()
    cmds, deps = _random_program(rig, r)
    reach = _reference_order(cmds, deps)
    fps = [_footprint_ref(rig, k, a) for k, a, *_ in cmds]
    want = None
    for i in range(len(cmds)):
        for j in range(i + 1, len(cmds)):
            if j in reach[i] or i in reach[j]:
                continue
            (ri, wi), (rj, wj) = fps[i], fps[j]
            shared = (wi & (rj | wj)) | (ri & wj)
            if shared:
                space = "l" if any(s == "l" for s, _ in shared) else "g"
                want = (i, j, "lmem" if space == "l" else "gmem", min(a for s, a in shared if s == space))
                break
        if want:
            break
    try:
        prog = Program.load(rig.cmdbuf(), rig.chip)
    except FaultError as e:
        f = e.fault
        assert want is not None and f.code == "HAZARD", f
        i, j, mem, addr = want
        assert f"commands {i} (" in f.message and f" and {j} (" in f.message and f"{mem} 0x{addr:x}" in f.message, \
            (want, f.message)
        return
    assert want is None, want
    for i in range(len(cmds)):                                            # and the order itself
        assert {j for j in range(len(cmds)) if prog.schedule.precedes(i, j)} == reach[i]


def test_hazard_check_work_grows_with_the_buffer_not_its_square(monkeypatch):
    """A parallel group of 2000 commands (TPU and DMA interleaved, no conflicts): the check
    computes each command's footprint at most once, and the order answers without a closure."""
    from tlm.bm1880 import device
    calls = []
    real = device.footprint
    monkeypatch.setattr(device, "footprint", lambda ops: calls.append(1) or real(ops))
    rig = Rig()
    a, b = rig.alloc((1, 32, 1, 16)), rig.alloc((1, 32, 1, 16))
    c = rig.alloc((1, 32, 1, 16))
    bmk1880_parallel_enable(rig.ctx)
    for k in range(1000):
        bmk1880_tpu_copy(rig.ctx, dst=b, src=a)
        bmk1880_gdma_load(rig.ctx, c, 0x10000 + 512 * k, CTRL_NULL)
    bmk1880_parallel_disable(rig.ctx)
    prog = Program.load(rig.cmdbuf(), rig.chip)
    assert len(calls) <= 2000
    s = prog.schedule
    assert s.precedes(0, 2) and s.precedes(1, 3) and not s.ordered(0, 1) and not s.ordered(1998, 1)
    assert isinstance(s.reach[0], list) and len(s.reach[0]) == 2           # one entry per engine, not per command


@pytest.mark.parametrize("seed", range(350, 362))
def test_add_dependency_refuses_exactly_the_cycles(seed):
    """bmk1880_add_dependency (which keeps the order of each epoch up to date instead of
    rebuilding it) refuses a dependency exactly when `after` already precedes `before` in the
    reference order of chapter 3, across streams regions, parallel groups and serial commands."""
    r = rng_for(seed)
    rig = Rig()
    ctx = rig.ctx
    t = [rig.alloc((1, 3, 2, 2)) for _ in range(3)]
    cmds, ops, deps = [], [], []
    for block in range(4):
        style = int(r.integers(0, 3))
        nr = int(r.integers(1, 4))
        if style == 1:
            bmk1880_parallel_enable(ctx)
        elif style == 2:
            bmk1880_create_streams(ctx, nr)
        for _ in range(int(r.integers(1, 9)) if style else 1):
            st = None
            if style == 2:
                st = int(r.integers(0, nr))
                bmk1880_set_stream(ctx, st)
            if r.integers(0, 2):
                ops.append(bmk1880_tpu_copy(ctx, dst=t[0], src=t[1]))
                cmds.append(("copy", None, "TPU", block, st))
            else:
                ops.append(bmk1880_gdma_load(ctx, t[2], 0x1000, CTRL_NULL))
                cmds.append(("load", None, "DMA", block, st))
            for _ in range(int(r.integers(0, 4))):
                x, y = (int(v) for v in r.integers(0, len(ops), 2))
                if x == y:
                    continue
                cycle = x in _reference_order(cmds, deps)[y]
                try:
                    bmk1880_add_dependency(ctx, ops[x], ops[y])
                    refused = False
                    deps.append((x, y))
                except BmkError as e:
                    refused = True
                    assert "would close a cycle" in str(e)
                assert refused == cycle, (x, y, deps)
        if style == 1:
            bmk1880_parallel_disable(ctx)
        elif style == 2:
            bmk1880_destroy_streams(ctx)
    prog = Program.load(rig.cmdbuf(), rig.chip)                            # the buffer agrees
    reach = _reference_order(cmds, deps)
    for i in range(len(cmds)):
        assert {j for j in range(len(cmds)) if prog.schedule.precedes(i, j)} == reach[i]
