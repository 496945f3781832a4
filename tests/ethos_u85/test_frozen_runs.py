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
from tlm.ethos_u85.memory import Resp
from tlm.ethos_u85.ops import plan
from tlm.core.memory import PAGE_SIZE

SEED = int(os.environ.get("TLM_TEST_SEED", "20261126"))
MODELS = ["softmax_int16", "tanh_int16", LSTM, "tflm_mnist_lstm", "seanet_sub1", "tflm_hello_world"]


@pytest.fixture
def fresh():
    device.clear_warm_caches()
    yield
    device.clear_warm_caches()


@pytest.fixture
def counted(monkeypatch):
    """The frozen runs made (FrozenRun.run calls and what they returned)."""
    calls: list = []
    real = plan.FrozenRun.run

    def run(self, dev, fifo0):
        ok = real(self, dev, fifo0)
        calls.append(ok)
        return ok
    monkeypatch.setattr(plan.FrozenRun, "run", run)
    return calls


def everything(r) -> tuple:
    return (observe_all(r), state(r.device), pmu_registers(r.device), r.unpredictable, r.warnings,
            r.stop_reason, r.status, [(o.dtype, o.shape) for o in r.outputs])


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

    def declines(self, dev, fifo0):
        calls.append(1)
        for _, page in list(dev.memory.page_items()):
            page[:] = 0xA5                              # (what a partial run could leave)
        return False
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
                           fifo_srcs=(), clear=False, dst=d, flag=True)


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
