"""runner.Session (repeated inferences on one memory) against run_model, and the warm paths'
bookkeeping that depends on who watches a run.

A Session keeps its memory between runs and restores the loaded contents in place
(Memory.restore_pages); every run must equal run_model's fresh run of the same inputs in
outputs, AXI transaction log, cycles, stop reason, STATUS, PMU totals, events, registers
and chaining state (tests/ethos_u85/test_warm_paths.py `observe`), whatever the previous
run or the caller did to the memory.  Trace replays defer PMU totals only while every
device hook is passive: a hook that reads the PMU at each operation must see the ordinary
path's totals.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from tests.ethos_u85.test_warm_paths import CONFIG, LSTM, assert_same, load, observe
from tlm.ethos_u85 import device, runner
from tlm.ethos_u85.memory import Memory, Resp
from tlm.core.memory import PAGE_SIZE

SEED = int(os.environ.get("TLM_TEST_SEED", "20261126"))


@pytest.fixture
def fresh():
    """Each test starts without plans, segments or traces from earlier tests."""
    device.clear_warm_caches()
    yield
    device.clear_warm_caches()


def random_inputs(vm, seed):
    rng = np.random.default_rng(seed)
    out = []
    for t in vm.inputs:
        info = np.iinfo(np.dtype(t.dtype))
        out.append(rng.integers(info.min, int(info.max) + 1, size=t.shape).astype(t.dtype))
    return out


def observe_all(r) -> dict:
    """observe() plus the whole memory contents after the run (pages in order)."""
    got = observe(r.device, r.outputs, r.stop_reason, r.status)
    got["memory"] = [(k, v.tobytes()) for k, v in sorted(r.device.memory.page_items(), key=lambda kv: kv[0])]
    return got


def session_run(s, inputs) -> dict:
    return observe_all(s.run(inputs))


def fresh_run(vm, inputs, **kw) -> dict:
    return observe_all(runner.run_model(vm, inputs, config=CONFIG, log_transactions=True, **kw))


@pytest.mark.parametrize("name", ["tinynet", "softmax_int16", LSTM])
def test_session_runs_equal_fresh_runs(fresh, name):
    """Inputs A, B, A, B again: each Session run equals run_model's run of those inputs
    (the first builds plans, the second records the trace, the rest replay it)."""
    vm, _ = load(name)
    print(f"seed {SEED}")
    a, b = random_inputs(vm, SEED), random_inputs(vm, SEED + 1)
    want = {"a": fresh_run(vm, a), "b": fresh_run(vm, b)}
    assert want["a"]["memory"] != want["b"]["memory"], "the two inputs leave the same memory: a vacuous test"
    s = runner.Session(vm, CONFIG, log_transactions=True)
    for i, k in enumerate("abab"):
        assert_same(session_run(s, a if k == "a" else b), want[k], f"session run {i} (inputs {k})")


def test_session_undoes_what_a_caller_did_to_the_memory(fresh):
    """A result's memory is the session's: bytes written, a fault injected and a listener
    added through it are gone at the next run, which equals a fresh run; the loaded pages'
    arrays stay the same objects (the plans' views of them stay valid)."""
    vm, _ = load("tinynet")
    inputs = random_inputs(vm, SEED)
    want = fresh_run(vm, inputs)
    s = runner.Session(vm, CONFIG, log_transactions=True)
    r = s.run(inputs)
    mem = r.device.memory
    pages = {k: v for k, v in mem.page_items()}
    ro = r.memory_map.basep[0] // PAGE_SIZE            # a page of the loaded read-only data
    kept = pages[ro]
    rng = np.random.default_rng(SEED)
    for k in list(pages)[:3]:                          # scribble over loaded pages
        mem.write(k * PAGE_SIZE, rng.integers(0, 256, 4096, dtype=np.uint8))
    mem.write(0x7F_0000_0000, b"\x01" * 16)            # a page the load never made
    mem.inject_fault(0, 1 << 40, Resp.SLVERR)
    seen = []
    mem.listeners.append(seen.append)
    assert_same(session_run(s, inputs), want, "run after the caller's changes")
    assert not seen, "a listener added by the caller saw the next run"
    assert mem.page(0x7F_0000_0000 // PAGE_SIZE) is None
    assert mem.page(ro) is kept, "a loaded page's array was replaced"


def test_session_checks_inputs_as_run_model():
    """Bad inputs: the same RunError kind as run_model, and the session still runs after."""
    vm, _ = load("tinynet")
    s = runner.Session(vm, CONFIG)
    bad = [np.zeros((3, 3), np.float32)]
    with pytest.raises(runner.RunError) as e1:
        runner.run_model(vm, bad, config=CONFIG)
    with pytest.raises(runner.RunError) as e2:
        s.run(bad)
    assert e1.value.kind == e2.value.kind == "input"
    inputs = random_inputs(vm, SEED)
    assert all(np.array_equal(x, y) for x, y in zip(s.run(inputs).outputs,
                                                     runner.run_model(vm, inputs, config=CONFIG).outputs,
                                                     strict=True))


def test_restore_pages_in_place():
    """Memory.restore_pages: contents equal the snapshot, pages it lacks dropped, pages both
    hold keep their array objects."""
    rng = np.random.default_rng(SEED)
    print(f"seed {SEED}")
    m = Memory()
    for k in (0, 5, 9):
        m.write(k * PAGE_SIZE + 100, rng.integers(0, 256, 5000, dtype=np.uint8))
    snap = m.copy_pages()
    keep = m.page(5)
    m.write(5 * PAGE_SIZE, rng.integers(0, 256, PAGE_SIZE, dtype=np.uint8))
    m.write(7 * PAGE_SIZE, b"\xff")
    m.restore_pages(snap)
    assert sorted(k for k, _ in m.page_items()) == [0, 5, 9]
    assert m.page(5) is keep
    assert all(np.array_equal(m.page(k), v) for k, v in snap.items())
    snap[0][:] = 0                                     # the snapshot is not shared
    assert m.page(0).any()


class _PmuReader:
    """A hook that is not passive: it reads the PMU totals at every operation."""

    def __init__(self, dev):
        self.dev, self.seen = dev, []

    def __call__(self, event, details):
        if event == "op":
            self.seen.append(tuple(sorted(self.dev.pmu.totals.items())))


@pytest.mark.parametrize("name", ["tinynet", LSTM])
def test_active_hook_sees_ordinary_pmu_totals(monkeypatch, fresh, name):
    """With a hook that is not passive, a trace replay adds PMU totals step by step: the
    hook sees at each operation what it sees on the ordinary path."""
    vm, inputs = load(name)
    real = runner.Device
    readers = []

    def make(*a, **kw):
        d = real(*a, **kw)
        readers.append(_PmuReader(d))
        d.hooks.append(readers[-1])
        return d
    monkeypatch.setattr(runner, "Device", make)
    runner.run_model(vm, inputs, config=CONFIG, warm_paths=False)
    want = readers[-1].seen
    assert want, "no operation seen"
    for i in range(3):                                 # builds plans, records, replays
        runner.run_model(vm, inputs, config=CONFIG)
        assert readers[-1].seen == want, f"warm run {i}: the hook saw other PMU totals"


def test_pages_a_run_creates_keep_their_arrays(fresh):
    """A page the first run created (scratch the load never wrote) stays the same array on
    later runs (the plans' views of it stay valid) and starts each run as zeros: random
    bytes written over every page between runs are gone, each run equals a fresh run."""
    vm, _ = load(LSTM)
    rng = np.random.default_rng(SEED)
    print(f"seed {SEED}")
    inputs = random_inputs(vm, SEED)
    want = fresh_run(vm, inputs)
    s = runner.Session(vm, CONFIG, log_transactions=True)
    first = s.run(inputs)
    loaded = Memory(log=False)
    runner.load_memory(loaded, vm, first.memory_map, ())
    mem = first.device.memory
    arrays = dict(mem.page_items())
    assert [k for k in arrays if loaded.page(k) is None], "the run created no page: a vacuous test"
    for i in range(3):
        for v in arrays.values():
            v[:] = rng.integers(0, 256, PAGE_SIZE, dtype=np.uint8)
        assert_same(session_run(s, inputs), want, f"run {i + 2} after scribbling over every page")
        assert all(mem.page(k) is v for k, v in arrays.items()), f"run {i + 2}: a page array was replaced"
