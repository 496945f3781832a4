"""runner.Session's frozen runs (docs/architecture.md "Warm paths"): once a run was one run
trace replayed whole, a later run of the same Session runs only the plans' data computations
on a device in the recorded run's final state.  Each such run must equal the ordinary path
(the same Session with frozen runs off, and run_model's fresh run): outputs, memory,
every device attribute, PMU registers, stop, STATUS, events, warnings; and it must decline
(the ordinary path runs) wherever a precondition fails."""
from __future__ import annotations

import os

from types import SimpleNamespace

import numpy as np
import pytest

from tests.ethos_u85.test_session import fresh_run, observe_all, random_inputs
from tests.ethos_u85.test_warm_fixed_cost import assert_states, pmu_registers, state
from tests.ethos_u85.test_warm_paths import CONFIG, LSTM, assert_same, load
from tlm.ethos_u85 import device, runner
from tlm.ethos_u85.memory import Channel, Memory, Resp, Transaction
from tlm.ethos_u85.ops import plan
from tlm.core.memory import PAGE_SIZE

SEED = int(os.environ.get("TLM_TEST_SEED", "20261126"))
MODELS = ["softmax_int16", "tanh_int16", LSTM, "tflm_mnist_lstm", "seanet_sub1", "tflm_hello_world"]


@pytest.fixture
def fresh():
    device.clear_warm_caches()
    yield
    device.clear_warm_caches()


class _Calls(list):
    warm: list


@pytest.fixture
def counted(monkeypatch):
    """The frozen runs made (FrozenRun.run calls and whether they completed; `.warm`:
    whether each was a warm one)."""
    calls = _Calls()
    warms = calls.warm = []             # (whether each ran the `warm` plans only)
    real = plan.FrozenRun.run

    def run(self, mem, st, warm=False):
        ok = real(self, mem, st, warm)
        calls.append(ok is not None)
        warms.append(warm)
        return ok
    monkeypatch.setattr(plan.FrozenRun, "run", run)
    return calls


def everything(r) -> tuple:
    return (observe_all(r), state(r.device), pmu_registers(r.device), r.unpredictable, r.warnings,
            r.stop_reason, r.status, [(o.dtype, o.shape) for o in r.outputs])


def quiet(r) -> tuple:
    """A result's outputs and its session's memory contents, read without handing a page
    out (Memory.pages_out) and without making a frozen run's device."""
    mem = r.__dict__["_lazy_device"].memory if "_lazy_device" in r.__dict__ else r.device.memory
    return [(o.dtype.str, o.shape, o.tobytes()) for o in r.outputs], sorted(
        (k, v.tobytes()) for k, v in mem.copy_pages().items())


@pytest.fixture
def restores(monkeypatch):
    """Whole-page restores made (Memory.restore_pages calls)."""
    calls: list = []
    real = Memory.restore_pages

    def restore_pages(self, pages):
        calls.append(1)
        return real(self, pages)
    monkeypatch.setattr(Memory, "restore_pages", restore_pages)
    return calls


def no_frozen(monkeypatch):
    monkeypatch.setattr(runner._Frozen, "make", classmethod(lambda cls, *a: False))


@pytest.mark.parametrize("name", MODELS)
def test_frozen_runs_equal_the_ordinary_path(fresh, counted, monkeypatch, name):
    """Inputs a, b, a, c, b, c: each Session run equals the same run with frozen runs off
    (every attribute of the result and its device) and run_model's fresh run; the runs
    after the trace is recorded and replayed once are frozen runs."""
    vm, _ = load(name)
    print(f"seed {SEED}")
    inputs = {k: random_inputs(vm, SEED + i) for i, k in enumerate("abc")}
    order = "abacbc"
    s = runner.Session(vm, CONFIG)
    got = [everything(s.run(inputs[k])) for k in order]
    # (runs 1-2 build the plans and record the trace; a plan built again for other inputs
    # can take one more)
    assert all(counted) and len(counted) >= len(order) - 3, f"frozen runs made: {counted}"
    n = len(counted)
    with monkeypatch.context() as m:
        no_frozen(m)
        device.clear_warm_caches()
        s = runner.Session(vm, CONFIG)
        want = [everything(s.run(inputs[k])) for k in order]
    assert len(counted) == n, "a frozen run with frozen runs off"
    assert want[0][0]["memory"] != want[1][0]["memory"], "inputs a and b leave the same memory: a vacuous test"
    for i, (g, w) in enumerate(zip(got, want)):
        assert_same(g[0], w[0], f"run {i}")
        assert_states(g[1], w[1], f"run {i}")
        assert g[2:] == w[2:], f"run {i}: PMU registers, unpredictable, warnings, stop, STATUS or outputs differ"
    for k in "abc":
        assert_same(got[order.rindex(k)][0], {x: v for x, v in fresh_run(vm, inputs[k]).items() if x != "log"},
                    f"against run_model, inputs {k}")


def test_no_frozen_run_with_an_ordinary_step(fresh, counted):
    """tinynet's trace has an operation without a plan (an ordinary step, whose effects a
    frozen run cannot foresee): no frozen run, and its runs equal run_model's."""
    vm, _ = load("tinynet")
    inputs = random_inputs(vm, SEED)
    s = runner.Session(vm, CONFIG)
    for _ in range(4):
        r = s.run(inputs)
    assert r.device.replayed_program() is None
    assert s._frozen is None and counted == []
    assert_same(observe_all(r), {x: v for x, v in fresh_run(vm, inputs).items() if x != "log"}, "tinynet")


@pytest.mark.parametrize("kw", [{"log_transactions": True}, {"max_steps": 10 ** 6}, {"max_work": 10 ** 12}])
def test_frozen_runs_decline_with_a_log_or_budgets(fresh, counted, kw):
    """A transaction log, or budgets the caller gives (they could stop the run earlier):
    no frozen run; the run equals run_model's."""
    vm, _ = load("seanet_sub1")
    inputs = random_inputs(vm, SEED)
    log = kw.get("log_transactions", False)
    s = runner.Session(vm, CONFIG, log_transactions=log)
    run_kw = {k: v for k, v in kw.items() if k != "log_transactions"}
    for _ in range(4):
        r = s.run(inputs, **run_kw)
    assert counted == []
    want = observe_all(runner.run_model(vm, inputs, config=CONFIG, log_transactions=log))
    assert_same(observe_all(r), want, "declined run")
    if not log:                         # a run without them makes frozen runs after
        s.run(inputs)
        s.run(inputs)
        assert counted == [True]


def test_frozen_run_declines_when_the_caller_replaced_a_page(fresh, counted):
    """The inputs' page replaced through a result's memory (the Session cannot write the
    inputs straight): the ordinary path runs and equals run_model's run."""
    vm, _ = load("seanet_sub1")
    inputs = random_inputs(vm, SEED)
    s = runner.Session(vm, CONFIG)
    for _ in range(4):
        r = s.run(inputs)
    assert counted == [True]
    mem = r.device.memory
    k = r.memory_map.address(vm.inputs[0]) // PAGE_SIZE
    old = mem.page(k)
    mem.load_pages(mem.copy_pages())                 # (the same bytes, other arrays)
    assert mem.page(k) is not old
    r = s.run(inputs)
    assert counted == [True], "a frozen run on a replaced page"
    assert_same(observe_all(r), {x: v for x, v in fresh_run(vm, inputs).items() if x != "log"}, "after replace")
    r = s.run(inputs)                                # (the new pages settled: frozen again)
    assert counted == [True, True]
    assert_same(observe_all(r), {x: v for x, v in fresh_run(vm, inputs).items() if x != "log"}, "after replace")


def test_frozen_run_after_a_caller_fault_and_write(fresh, counted):
    """A fault injected and bytes written through a result's memory are undone before a
    frozen run (as before an ordinary one): it equals run_model's run."""
    vm, _ = load("seanet_sub1")
    inputs = random_inputs(vm, SEED)
    s = runner.Session(vm, CONFIG)
    for _ in range(4):
        r = s.run(inputs)
    mem = r.device.memory
    mem.inject_fault(0, 1 << 40, Resp.SLVERR)
    for k, _ in list(mem.page_items()):
        mem.write(k * PAGE_SIZE, np.full(256, 0x5A, np.uint8))
    r = s.run(inputs)
    assert counted == [True, True]
    assert_same(observe_all(r), {x: v for x, v in fresh_run(vm, inputs).items() if x != "log"}, "after changes")


def test_a_declined_frozen_run_runs_the_ordinary_path(fresh, monkeypatch):
    """A frozen run that declines half way (an operation's data check) after writing
    memory: the run is made again the ordinary way from the restored memory."""
    vm, _ = load(LSTM)
    inputs = random_inputs(vm, SEED)
    calls: list = []

    def declines(self, mem, st, warm=False):
        calls.append(1)
        for k in mem.page_indices():
            mem.live_page(k)[:] = 0xA5                  # (what a partial run could leave)
        return None
    monkeypatch.setattr(plan.FrozenRun, "run", declines)
    s = runner.Session(vm, CONFIG)
    for _ in range(5):
        r = s.run(inputs)
    assert len(calls) == 2                              # (a decline keeps the frozen run)
    assert_same(observe_all(r), {x: v for x, v in fresh_run(vm, inputs).items() if x != "log"}, "declined")


@pytest.mark.parametrize("name", [LSTM, "tanh_int16"])
def test_taint_declines(fresh, name):
    """freeze_run refuses a program whose control could depend on the input bytes: an
    input over a weight/scale check, over the command stream, or under a DMA into the LUT
    RAM; it accepts the model's real input spans."""
    vm, _ = load(name)
    inputs = random_inputs(vm, SEED)
    s = runner.Session(vm, CONFIG)
    for _ in range(3):
        r = s.run(inputs)
    prog = r.device.replayed_program()
    assert prog is not None, "the run was not a whole replay"
    ops, blocks, _ = prog
    spans = [(r.memory_map.address(t) & ((1 << 40) - 1),) for t in vm.inputs]
    spans = [(a, a + t.nbytes) for (a,), t in zip(spans, vm.inputs)]
    assert plan.freeze_run(ops, spans, blocks) is not None
    lo, data = blocks[0]
    assert plan.freeze_run(ops, spans + [(lo + len(data) - 1, lo + len(data))], blocks) is None
    checked = [p for _, p in ops if p is not None and p.checks]
    luts = [p for _, p in ops if p is not None and p.dma_lut is not None]
    assert checked or luts, "no check or LUT DMA to taint: a vacuous test"
    for p in checked:
        a, b = p.checks[-1]
        assert plan.freeze_run(ops, [(a + len(b) - 1, a + len(b))], blocks) is None
    for p in luts:
        assert plan.freeze_run(ops, [p.rint[0]], blocks) is None
    if name == "tanh_int16":
        assert luts, "tanh_int16 loads no LUT by DMA"


def _op(rint, wint, checks=(), dst="mem"):
    """A stand-in plan with the footprint freeze_run reads (a kernel op; *dst* 'mem': an OFM
    written in order over wint[0], 'idx': element by element)."""
    lo, hi = wint[0] if wint else (0, 0)
    d = plan._MemDst(lo, hi - lo, None if dst == "mem" else np.arange(1), np.uint8) if wint else None
    return SimpleNamespace(rint=tuple(rint), wint=tuple(wint), checks=tuple(checks), dma_lines=None, dma_lut=None,
                           srcs=(), fifo_srcs=(), clear=False, dst=d, flag=True)


def test_taint_follows_writes():
    """Hand-made footprints: a weight check over bytes an input-derived OFM wrote refuses;
    the same bytes rewritten whole in between from untainted data (scratch reused for
    weights) accept; an element-wise (gapped) rewrite does not clear them."""
    inp, w, x = (0, 16), (100, 116), (200, 216)
    chk = [(100, b"\0" * 16)]
    tainted_w = [("NPU_OP_CONV", _op([inp], [w])), ("NPU_OP_CONV", _op([w], [x], chk))]
    assert plan.freeze_run(tainted_w, [inp], ()) is None
    rewritten = [tainted_w[0], ("NPU_OP_CONV", _op([x], [w])), ("NPU_OP_CONV", _op([w], [(300, 316)], chk))]
    assert plan.freeze_run(rewritten, [inp], ()) is not None
    gapped = [tainted_w[0], ("NPU_OP_CONV", _op([x], [w], dst="idx")), rewritten[2]]
    assert plan.freeze_run(gapped, [inp], ()) is None
    assert plan.freeze_run(tainted_w, [(16, 32)], ()) is not None         # (the input elsewhere)
    assert plan.freeze_run(tainted_w, [inp], [(8, b"\0" * 4)]) is None    # (an input over the stream)


@pytest.mark.parametrize("name", ["tflm_hello_world", LSTM, "tflm_mnist_lstm", "seanet_sub1"])
def test_span_restores_equal_the_ordinary_path(fresh, counted, restores, monkeypatch, name):
    """Frozen runs whose results' devices nobody asks for restore only the bytes a frozen
    run can write (its stores, DMA copies and the inputs): after each run of a, b, a, c, b,
    c the outputs and the whole memory equal the ordinary path's; the last result's device
    (made lazily, after its run) equals the eager one in every attribute."""
    vm, _ = load(name)
    print(f"seed {SEED}")
    inputs = {k: random_inputs(vm, SEED + i) for i, k in enumerate("abc")}
    order = "abacbc"
    s = runner.Session(vm, CONFIG)
    results, got = [], []
    for k in order:
        results.append(s.run(inputs[k]))
        got.append(quiet(results[-1]))
    assert all(counted) and len(counted) >= 3, f"frozen runs made: {counted}"
    assert len(restores) <= len(order) - len(counted) + 1, f"whole-page restores: {len(restores)}"
    assert sum(counted.warm) >= len(counted) - 1, f"warm frozen runs: {counted.warm}"
    if name == "tflm_hello_world":                      # (its weight DMAs are left out)
        assert len(s._frozen.program.warm) < len(s._frozen.program.plans)
    assert not s._memory.pages_out
    last = everything(results[-1])
    with monkeypatch.context() as m:
        no_frozen(m)
        device.clear_warm_caches()
        s2 = runner.Session(vm, CONFIG)
        want = []
        for k in order:
            r2 = s2.run(inputs[k])
            want.append(quiet(r2))
        want_last = everything(r2)
    assert want[0][1] != want[1][1], "inputs a and b leave the same memory: a vacuous test"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"run {i}: outputs or memory differ from the ordinary path"
    assert_same(last[0], want_last[0], "last run")
    assert_states(last[1], want_last[1], "last run")
    assert last[2:] == want_last[2:]


def test_a_lazy_device_made_after_the_next_run(fresh, counted, monkeypatch):
    """A frozen run's device asked for after the session's next run is the device the
    eager path kept: its state, the memory as it now is, not the memory's listener."""
    vm, _ = load("seanet_sub1")
    a, b = random_inputs(vm, SEED), random_inputs(vm, SEED + 1)

    def two_runs():
        s = runner.Session(vm, CONFIG)
        for _ in range(3):
            s.run(a)
        r1 = s.run(a)
        r2 = s.run(b)
        d1, d2 = r1.device, r2.device
        assert r1.device is d1 and r2.device is d2       # (made once)
        mem = d2.memory
        assert d1.memory is mem and d2.txn_sink in mem.listeners and d1.txn_sink not in mem.listeners
        return [(state(d), pmu_registers(d), observe_all(r)) for d, r in ((d1, r1), (d2, r2))]
    got = two_runs()
    assert counted == [True, True]
    with monkeypatch.context() as m:
        no_frozen(m)
        device.clear_warm_caches()
        want = two_runs()
    for (g, w), what in zip(zip(got, want), ("r1", "r2")):
        assert_states(g[0], w[0], what)
        assert g[1] == w[1]
        assert_same(g[2], w[2], what)


def _outside_spans(s, k: int) -> int:
    """An address in the session memory's page *k* that no frozen run writes."""
    spans = s._frozen.program.writes
    for a in range(k * PAGE_SIZE, (k + 1) * PAGE_SIZE, 64):
        if not any(lo < a + 64 and a < hi for lo, hi in spans):
            return a
    raise AssertionError("every byte of the page is in a span")


@pytest.mark.parametrize("how", ["write", "store", "front_door", "stale_page", "load_pages"])
def test_span_restore_declines_after_a_caller_change(fresh, counted, restores, how):
    """A change a caller makes to the session's memory between frozen runs (through a
    result's device: the back door, the front door, a page array handed out earlier, new
    pages) outside the frozen run's spans is undone: the next run restores whole pages
    and equals run_model's run."""
    vm, _ = load("seanet_sub1")
    inputs = random_inputs(vm, SEED)
    s = runner.Session(vm, CONFIG)
    for _ in range(3):
        s.run(inputs)
    r = s.run(inputs)                                   # (a frozen run)
    mem = r.__dict__["_lazy_device"].memory
    k = mem.page_indices()[0]
    handle = mem.page(k) if how == "stale_page" else None
    r = s.run(inputs)                                   # (frozen: pages were handed out, restored whole)
    n = len(restores)
    addr = _outside_spans(s, k)
    junk = np.full(64, 0x5A, np.uint8)
    m = r.device.memory
    if how == "write":
        m.write(addr, junk)
    elif how == "store":
        m.store(addr, junk)
    elif how == "front_door":
        m.access(Transaction("EXT0", Channel.wr_ofm, True, addr, 64), junk.tobytes())
    elif how == "stale_page":
        handle[addr % PAGE_SIZE:addr % PAGE_SIZE + 64] = junk
    else:
        pages = m.copy_pages()
        pages[k][addr % PAGE_SIZE:addr % PAGE_SIZE + 64] = junk
        m.load_pages(pages)
    r = s.run(inputs)
    assert len(restores) > n, "no whole-page restore after the caller's change"
    assert_same(observe_all(r), {x: v for x, v in fresh_run(vm, inputs).items() if x != "log"}, how)
    assert counted[-1] or how == "load_pages"


def test_write_and_restore_sets():
    """Hand-made footprints: W is every span a frozen run writes (inputs included), R the
    part of W read before this run wrote it (a state read then updated, a scratch span
    read before its rewrite), not what is written before it is read."""
    inp, a, st, sc = (0, 16), (100, 116), (300, 316), (400, 432)
    ops = [("NPU_OP_CONV", _op([inp], [a])),                     # input -> a (written, then read)
           ("NPU_OP_CONV", _op([a, st], [st])),                  # state read, then updated
           ("NPU_OP_CONV", _op([(400, 408)], [(500, 516)])),     # half the scratch read ...
           ("NPU_OP_CONV", _op([a], [sc]))]                      # ... before the scratch is written
    fr = plan.freeze_run(ops, [inp], ())
    assert fr.writes == (inp, a, st, sc, (500, 516))
    assert fr.restore == (st, (400, 408))


def test_stable_plans():
    """Hand-made footprints: a plan that reads nothing derived from the inputs, is the only
    writer of its bytes and none of them is read before it writes them is left out of warm
    runs; one that reads input-derived bytes, shares its bytes with another writer (or an
    input), or writes bytes read before it is kept."""
    inp = (0, 16)
    ops = [("NPU_OP_CONV", _op([(900, 916)], [(100, 116)])),    # constant -> own bytes: stable
           ("NPU_OP_CONV", _op([inp], [(200, 216)])),           # reads the input
           ("NPU_OP_CONV", _op([(900, 916)], [(300, 316)])),    # constant, but ...
           ("NPU_OP_CONV", _op([(200, 216)], [(308, 324)])),    # ... bytes shared with this one
           ("NPU_OP_CONV", _op([(400, 416)], [(500, 516)])),    # stable (reads 400.. before ...
           ("NPU_OP_CONV", _op([(900, 916)], [(400, 416)])),    # ... this constant one writes it)
           ("NPU_OP_CONV", _op([(900, 916)], [(8, 24)]))]       # constant over an input
    fr = plan.freeze_run(ops, [inp], ())
    kept = [fr.plans.index(p) for p in fr.warm]
    assert fr.restore == ((400, 416),)
    assert kept == [1, 2, 3, 5, 6], kept


def test_plan_stores_move_the_memory_version(fresh, monkeypatch):
    """A plan run by a device (a trace replay, or a caller running more on a result's
    device) stores through page views: each such store moves Memory.version, so a span
    restore after it is refused."""
    vm, _ = load("seanet_sub1")
    inputs = random_inputs(vm, SEED)
    seen: list = []
    real = plan._Plan.exec

    def exec_(self, dev, checked=False):
        v = dev.memory.version
        ok = real(self, dev, checked)
        if ok and self.dma_lines is None and isinstance(self.dst, plan._MemDst):
            seen.append(dev.memory.version > v)
        return ok
    monkeypatch.setattr(plan._Plan, "exec", exec_)
    no_frozen(monkeypatch)
    s = runner.Session(vm, CONFIG)
    for _ in range(4):
        s.run(inputs)
    assert seen and all(seen), seen


# ---------------------------------------------------------------------------- fused frozen runs
def _fused_of(s):
    """The Fused forms a Session's frozen run made ({warm: Fused or False})."""
    return s._frozen.program.fused


def _segments(fu) -> list:
    """A Fused form's compiled segments (none before it is bound: its second use)."""
    from tlm.ethos_u85.ops import fused
    return [x for x in fu.bound.steps if isinstance(x, fused._Segment)] if fu.bound is not None else []


@pytest.fixture
def numba_required():
    from tlm.ethos_u85.ops import compiled
    if not compiled.available():
        from tests.support import tool_missing
        tool_missing(f"fused frozen runs: {compiled.missing_reason()}")


@pytest.mark.parametrize("name", ["tflm_mnist_lstm", LSTM, "tflm_hello_world", "seanet_sub1",
                                  "tflm_dtln_noise_suppression"])
def test_fused_runs_equal_python_steps(fresh, counted, monkeypatch, numba_required, name):
    """Frozen runs as compiled segments (ops.fused) against the same Session's runs with a
    Python step per operation (plan.FUSED off): every attribute of each result and its device
    (memory, chaining FIFOs chunk by chunk, result flag, PMU, ...) on inputs a, b, a, c, b, c,
    and run_model's fresh runs; the compiled segments held most operations (the LSTMs:
    their FIFO pushes and pops too; mnist_lstm: its softmax's 32-bit elementwise operations,
    scalar operands among them; dtln: every operation, a CONV with a LUT activation among
    them; seanet_sub1: none, its Python step)."""
    vm, _ = load(name)
    print(f"seed {SEED}")
    inputs = {k: random_inputs(vm, SEED + 10 + i) for i, k in enumerate("abc")}
    order = "abacbc"
    got = {}
    for on in (True, False):
        monkeypatch.setattr(plan, "FUSED", on)
        device.clear_warm_caches()
        s = runner.Session(vm, CONFIG)
        got[on] = [everything(s.run(inputs[k])) for k in order]
        fu = _fused_of(s)
        if not on:
            assert set(fu.values()) == {False}
            continue
        assert fu and all(fu.values()), f"no fused form: {fu}"
        assert any(f.bound is not None for f in fu.values()), "no fused form was bound"
        rows = [len(seg.rows) for f in fu.values() for seg in _segments(f)]
        plans = max(len(f.plans) for f in fu.values())
        if name == "seanet_sub1":                   # (its one operation is no compiled kernel's: a Python step)
            assert sum(rows) == 0
        else:
            assert sum(rows) > plans // 2, f"{name}: {sum(rows)} of {plans} operations in compiled segments"
        if name in ("tflm_mnist_lstm", LSTM):
            from tlm.ethos_u85.ops import compiled as cc
            allrows = np.concatenate([seg.rows for f in fu.values() for seg in _segments(f)])
            assert (allrows[:, cc.R_A + cc.SRC_KIND] == cc.SRC_FIFO).any(), "no FIFO operand in a segment"
            assert (allrows[:, cc.R_DST + cc.DST_KIND] == cc.DST_FIFO).any(), "no FIFO push in a segment"
        if name == "tflm_dtln_noise_suppression":      # its 1x1 CONVs of 32,896 MACs, one with a LUT activation
            assert sum(rows) >= plans, f"{sum(rows)} of {plans} operations in compiled segments"
        if name == "tflm_mnist_lstm":                  # its softmax: 32-bit elementwise rows, scalar operands
            assert sum(rows) >= plans - 4, f"{sum(rows)} of {plans} operations in compiled segments"
            assert (allrows[:, cc.R_B + cc.SRC_KIND] == cc.SRC_CONST).any(), "no constant operand in a segment"
            prms = [seg.consts[r[cc.R_CST + 2]] for f in fu.values() for seg in _segments(f) for r in seg.rows
                    if r[cc.R_KIND] == cc.K_ELEMENTWISE]
            direct = [prm[cc.E_MODE] for prm in prms if prm[cc.E_DIRECT]]
            assert {cc.MODE_MUL, cc.MODE_CLZ, cc.MODE_SHL, cc.MODE_SHR} <= set(direct), f"direct rows: {direct}"
    assert counted.count(True) >= 2 * (len(order) - 3), f"frozen runs made: {counted}"
    for i, (g, w) in enumerate(zip(got[True], got[False])):
        assert_same(g[0], w[0], f"run {i}")
        assert_states(g[1], w[1], f"run {i}")
        assert g[2:] == w[2:], f"run {i}: PMU registers, unpredictable, warnings, stop, STATUS or outputs differ"
    for k in "abc":
        assert_same(got[True][order.rindex(k)][0],
                    {x: v for x, v in fresh_run(vm, inputs[k]).items() if x != "log"}, f"against run_model, {k}")


@pytest.mark.parametrize("how", ["fifo_range", "table_index", "fifo_count"])
def test_fused_run_declines(fresh, counted, monkeypatch, numba_required, how):
    """A compiled segment's data checks decline the frozen run (after it wrote memory): a
    FIFO operand outside its range, an index outside a kernel's table, a FIFO holding fewer
    values; the run is then made the ordinary way and equals run_model's. (Fused runs on,
    whatever TLM_FUSED says.)"""
    from tlm.ethos_u85.ops import compiled as cc
    monkeypatch.setattr(plan, "FUSED", True)
    vm, _ = load("tflm_mnist_lstm")
    inputs = random_inputs(vm, SEED)
    s = runner.Session(vm, CONFIG)
    for _ in range(6):
        s.run(inputs)
    assert len(counted) >= 2 and all(counted)
    fu = [f for f in _fused_of(s).values() if f and f.bound is not None]
    assert fu, "no fused form was bound"
    rows = [seg.rows for f in fu for seg in _segments(f)]
    hits = 0
    for r in rows:
        for row in r:
            if how == "fifo_range" and row[cc.R_A + cc.SRC_KIND] == cc.SRC_FIFO:
                row[cc.R_A + cc.SRC_OFF] = row[cc.R_A + cc.SRC_CODE] + 1          # lo > hi: nothing fits
                hits += 1
            elif how == "fifo_count" and row[cc.R_A + cc.SRC_KIND] == cc.SRC_FIFO:
                row[cc.R_A + cc.SRC_CH] *= 1 << 20                                # more values than held
                hits += 1
            elif how == "table_index" and row[cc.R_KIND] == cc.K_LOOKUP:
                row[cc.R_SCALAR] = 1 << 40                                        # every index below 0
                hits += 1
    assert hits, f"no row to change for {how}"
    n = len(counted)
    r = s.run(inputs)
    assert counted[n:] == [False], f"the frozen run did not decline: {counted[n:]}"
    assert_same(observe_all(r), {x: v for x, v in fresh_run(vm, inputs).items() if x != "log"}, how)


def test_fused_runs_without_compiled_kernels(fresh, counted, monkeypatch):
    """With the compiled kernels off (as without numba or with TLM_COMPILED=0) frozen runs
    keep a Python step per operation and equal run_model's runs."""
    from tlm.ethos_u85.ops import compiled
    vm, _ = load("tflm_mnist_lstm")
    inputs = [random_inputs(vm, SEED + i) for i in range(2)]
    try:
        compiled.set_enabled(False)
        device.clear_warm_caches()
        s = runner.Session(vm, CONFIG)
        for i in range(5):
            r = s.run(inputs[i % 2])
            if i >= 3:
                assert_same(observe_all(r), {x: v for x, v in fresh_run(vm, inputs[i % 2]).items() if x != "log"},
                            f"run {i}")
        assert counted.count(True) >= 2 and set(_fused_of(s).values()) == {False}
    finally:
        compiled.set_enabled(True)
        device.clear_warm_caches()
