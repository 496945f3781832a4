"""The fixed cost of a warm Session run: the shortcuts against the ordinary path.

* ``Device.apb_memo`` (runner.Session: the driver's closing STATUS read and CMD.clear_irq):
  a recorded sequence of APB accesses replayed without making them.  A replay must leave
  the device exactly as the accesses do (every attribute, ``full_state``), and it must
  decline - make the accesses - where the device differs from the record in anything the
  accesses read (cycle, IRQ state, a storage register, a PMU register, a PMU counter that
  counts, the event log switched off) or a hook takes the events they log; a sequence that
  changes more than immutable attributes, the event log and the PMU's idle cycles (a
  storage register write, a soft reset) is not recorded.
* the replayed NPU_OP_STOP (``Device._stop_step``, trace step kind _T_STOP): a warm run
  that ends with it equals the same run with the ordinary STOP command, attribute for
  attribute; with a hook that takes 'op' events the ordinary command runs.
* the runner's input and output shortcuts: Session runs equal run_model's fresh runs
  (``test_session``), here with inputs of every accepted form and outputs that stay the
  caller's after the next run.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from tests.ethos_u85.test_device_state import full_state
from tests.ethos_u85.test_session import fresh_run, observe_all, random_inputs
from tests.ethos_u85.test_warm_paths import CONFIG, LSTM, assert_same, load
from tlm.ethos_u85 import device, runner
from tlm.ethos_u85 import registers as R
from tlm.ethos_u85.config import Pins, Policy
from tlm.ethos_u85.device import Device
from tlm.ethos_u85.memory import Memory

SEED = int(os.environ.get("TLM_TEST_SEED", "20261126"))
MODELS = ["tinynet", "softmax_int16", LSTM, "seanet_sub1", "tflm_hello_world"]


@pytest.fixture
def fresh():
    device.clear_warm_caches()
    yield
    device.clear_warm_caches()


def state(dev) -> dict:
    """full_state with the PMU's totals summed (the lazily summed parts are representation)."""
    totals = +dev.pmu.totals                              # (sums the pending batches; drops zeros)
    st = full_state(dev)
    st["pmu_totals"] = dict(totals)
    st["pins"], st["policy"] = dev.pins, dev.policy     # (by value: frozen, one per Session)
    return st


def assert_states(got: dict, want: dict, what: str) -> None:
    assert set(got) == set(want), f"{what}: attributes differ: {set(got) ^ set(want)}"
    for k in want:
        if k not in ("txn_sink", "dataport", "pmu", "memory"):      # (memories: by contents elsewhere)
            assert got[k] == want[k], f"{what}: {k} differs"


def pmu_registers(dev) -> tuple:
    p = dev.pmu
    return (p.cnt_en, p.mask_en, p.cnten, p.ovs, p.inten, p.ccnt, p.ccnt_cfg, p.axi_chan, p.lut, tuple(p.evcnt),
            tuple(p.evtype), p.op_enable, p.cc_gate)


def compare_devices(a, b, what):
    sa, sb = state(a), state(b)
    assert_states(sa, sb, what)
    assert pmu_registers(a) == pmu_registers(b), f"{what}: PMU registers differ"


# ================================================================================ apb_memo
class Stopped:
    """Devices that ran a network the ordinary way and stopped with the IRQ raised: each call
    makes another in the same state (the same memory contents)."""

    def __init__(self, name="tinynet"):
        self.vm, inputs = load(name)
        self.session = runner.Session(self.vm, CONFIG)
        self.arrays = runner.check_inputs(self.vm, inputs)
        self.pins, self.policy = Pins(), Policy()            # (shared by the devices, as in a Session)

    def __call__(self):
        mem = Memory()
        dev = Device(self.session.config, mem, pins=self.pins, policy=self.policy, segments=False, plans=False,
                     traces=False)
        runner.program(runner.DeviceHost(dev, 1), self.session.memory_map, self.session.driver)
        runner.load_memory(mem, self.vm, self.session.memory_map, self.arrays)
        dev.run()
        assert not dev.running and dev.irq
        return dev


def closing(dev, pprot=runner.DRIVER_DEFAULTS.pprot):
    host = runner.DeviceHost(dev, pprot)
    status = host.read("STATUS")
    runner.cmd_write(host, clear_irq=1)
    return status


class Counted:
    def __init__(self, fn):
        self.fn, self.n = fn, 0

    def __call__(self, dev):
        self.n += 1
        return self.fn(dev)


def test_apb_memo_replay_equals_the_accesses():
    make = Stopped()
    memo: dict = {}
    a = make()
    fn = Counted(closing)
    value = a.apb_memo(memo, "closing", fn)
    assert fn.n == 1 and "closing" in memo, "the closing accesses were not recorded"
    b = make()
    got = b.apb_memo(memo, "closing", fn)
    assert fn.n == 1, "a device in the recorded state made the accesses again"
    assert got == value
    c = make()
    assert closing(c) == value
    compare_devices(b, c, "replayed closing")
    assert not b.irq and b.events[-1] == c.events[-1]
    # the replay also composes: a second sequence recorded after it replays too
    for dev in (b, c):
        dev.apb_memo(memo, "status", lambda d: runner.DeviceHost(d, 1).read("STATUS"))
    compare_devices(b, c, "second sequence")


def _every_event(event, details):
    """A hook that takes every event (it has no hook_events)."""


def _plants():
    """Changes to a device a replay must notice (each changes what the accesses do or log)."""
    def pmu_counting(d):                               # the cycle counter counts
        host = runner.DeviceHost(d, 1)
        host.write("PMCR", R.get("PMCR").encode(cnt_en=1))
        host.write("PMCNTENSET", R.get("PMCNTENSET").encode(CYCLE_CNT=1))

    def hook(d):
        d.hooks.append(_every_event)

    return {
        "cycle": lambda d: setattr(d, "cycle", d.cycle + 1),
        "irq_raised": lambda d: setattr(d, "irq_raised", 0),
        "storage register": lambda d: d._store.__setitem__(R.offset_of("QCONFIG"), 3),
        "PMU register": lambda d: d.pmu.evtype.__setitem__(1, 0x20),
        "PMU counting": pmu_counting,
        "event log off": lambda d: setattr(d, "log_events", False),
        "hook": hook,
    }


@pytest.mark.parametrize("what", list(_plants()))
def test_apb_memo_declines_a_different_device(what):
    make = Stopped()
    memo: dict = {}
    make().apb_memo(memo, "closing", closing)
    assert "closing" in memo
    plant = _plants()[what]
    a, b = make(), make()
    plant(a)
    plant(b)
    fn = Counted(closing)
    got = a.apb_memo(memo, "closing", fn)
    assert fn.n == 1, f"{what}: the record was replayed on a device that differs"
    assert got == closing(b)
    compare_devices(a, b, what)


def test_apb_memo_records_only_immutable_changes():
    make = Stopped()
    memo: dict = {}

    def basep(d):
        runner.DeviceHost(d, 1).write("BASEP0_LO", 0x1000)

    def soft_reset(d):
        runner.DeviceHost(d, 1).write("RESET", 0)
    for fn in (basep, soft_reset):
        a, b = make(), make()
        a.apb_memo(memo, "x", fn)
        assert "x" not in memo, f"{fn.__name__}: recorded although it changes a storage register or resets"
        fn(b)
        compare_devices(a, b, fn.__name__)
    # a record that does not apply is replaced by the new recording (one name, one sequence)
    a = make()
    a.apb_memo(memo, "x", closing)
    first = memo["x"]
    b = make()
    b.cycle += 1
    b.apb_memo(memo, "x", closing)
    assert memo["x"] is not first and memo["x"].pre != first.pre


def test_apb_memo_stops_recording_a_device_that_keeps_differing(monkeypatch):
    make = Stopped()
    memo: dict = {}
    make().apb_memo(memo, "x", closing)
    records = []
    for i in range(device._APB_MEMO_RETRIES + 3):
        a, b = make(), make()
        a.cycle += i + 1
        b.cycle += i + 1
        fn = Counted(closing)
        assert a.apb_memo(memo, "x", fn) == closing(b) and fn.n == 1
        compare_devices(a, b, f"differing device {i}")
        records.append(memo["x"])
    assert records[-1] is records[-2] is records[device._APB_MEMO_RETRIES], "still recording after the retries"
    assert records[0] is not records[1], "a miss within the retries did not record again"


def test_session_closing_replayed_and_equal(fresh, monkeypatch):
    """Session runs 2.. make no closing APB access and equal run_model's runs."""
    vm, _ = load("tinynet")
    inputs = random_inputs(vm, SEED)
    print(f"seed {SEED}")
    want = fresh_run(vm, inputs)
    s = runner.Session(vm, CONFIG, log_transactions=True)
    reads: list = []
    real = runner.DeviceHost.read
    monkeypatch.setattr(runner.DeviceHost, "read", lambda self, ident, mask=None: reads.append(ident) or
                        real(self, ident, mask))
    for i in range(4):
        reads.clear()
        assert_same(observe_all(s.run(inputs)), want, f"session run {i}")
    assert reads == [], f"the last warm run made the closing accesses: {reads}"
    # a hook that takes APB events: the accesses are made (and the hook sees them)
    seen: list = []

    class Hook:
        hook_events = frozenset(("apb",))

        def __call__(self, e, d):
            seen.append(d["addr"])
    monkeypatch.setattr(runner, "_Watch", _WatchPlus(runner._Watch, Hook()))
    assert_same(observe_all(s.run(inputs)), want, "run with an APB hook")
    assert seen[-3:] == [R.offset_of("STATUS"), R.offset_of("CMD"), R.offset_of("CMD")]


class _WatchPlus:
    """A _Watch factory whose watches are also *extra*, one more hook (Session appends its
    watch to the device's hooks)."""

    def __init__(self, real, extra):
        self.real, self.extra = real, extra

    def __call__(self, model):
        return _Both(self.real(model), self.extra)


class _Both:
    """One hook that behaves as the watch and the extra hook together (hook_events: both)."""

    def __init__(self, watch, extra):
        self.watch, self.extra = watch, extra
        self.hook_events = watch.hook_events | extra.hook_events
        self.passive = True

    def __getattr__(self, name):
        return getattr(self.watch, name)

    def __call__(self, e, d):
        if e in self.watch.hook_events:
            self.watch(e, d)
        if e in self.extra.hook_events:
            self.extra(e, d)


# ================================================================================ STOP step
@pytest.mark.parametrize("name", MODELS)
def test_replayed_stop_equals_the_ordinary_command(fresh, monkeypatch, name):
    vm, _ = load(name)
    inputs = random_inputs(vm, SEED)
    print(f"seed {SEED}")
    calls: list = []
    real = Device._stop_step

    def counted(self, *a):
        calls.append(1)
        return real(self, *a)

    def ordinary(self, d, seg, *a):
        self._exec_one(d, seg)
    results = {}
    for mode in ("ordinary", "replayed"):
        device.clear_warm_caches()
        monkeypatch.setattr(Device, "_stop_step", counted if mode == "replayed" else ordinary)
        s = runner.Session(vm, CONFIG, log_transactions=True)
        runs = []
        for _ in range(4):
            r = s.run(inputs)
            runs.append((observe_all(r), state(r.device), pmu_registers(r.device)))
        results[mode] = runs
    assert calls, "no warm run replayed the STOP command"
    for i, (a, b) in enumerate(zip(results["replayed"], results["ordinary"])):
        assert_same(a[0], b[0], f"run {i}")
        assert_states(a[1], b[1], f"run {i}")
        assert a[2] == b[2]
    # and the ordinary run_model run
    assert_same(results["replayed"][-1][0], fresh_run(vm, inputs), "against run_model")


def test_replayed_stop_declines_with_an_op_hook(fresh, monkeypatch):
    vm, _ = load("tinynet")
    inputs = random_inputs(vm, SEED)
    want = fresh_run(vm, inputs)
    calls: list = []
    real = Device._stop_step
    monkeypatch.setattr(Device, "_stop_step", lambda self, *a: calls.append(1) or real(self, *a))
    seen: list = []

    class OpHook:
        hook_events = frozenset(("op",))
        passive = True

        def __call__(self, e, d):
            seen.append(d["name"])
    s = runner.Session(vm, CONFIG, log_transactions=True)
    for i in range(3):
        assert_same(observe_all(s.run(inputs)), want, f"run {i}")
    assert calls
    calls.clear()
    monkeypatch.setattr(runner, "_Watch", _WatchPlus(runner._Watch, OpHook()))
    assert_same(observe_all(s.run(inputs)), want, "run with an 'op' hook")
    assert not calls and seen[-1] == "NPU_OP_STOP"


class _Raiser:
    """A hook that raises when the NPU stops."""
    hook_events = frozenset(("state",))
    passive = True

    def __call__(self, e, d):
        if d["state"] == "stopped":
            raise RuntimeError("hook failed")


def test_replayed_stop_with_a_raising_hook_equals_the_ordinary_command(fresh, monkeypatch):
    """A hook's exception at the stop: the command still ends as the ordinary one does."""
    vm, _ = load("tinynet")
    inputs = random_inputs(vm, SEED)
    real_stop, real_watch, real_from = Device._stop_step, runner._Watch, Device.from_state
    calls: list = []
    got = {}
    for mode in ("ordinary", "replayed"):
        device.clear_warm_caches()
        monkeypatch.setattr(Device, "_stop_step", (lambda self, *a: calls.append(1) or real_stop(self, *a))
                            if mode == "replayed" else (lambda self, d, seg, *a: self._exec_one(d, seg)))
        monkeypatch.setattr(runner, "_Watch", real_watch)
        monkeypatch.setattr(Device, "from_state", real_from)
        s = runner.Session(vm, CONFIG, log_transactions=True)
        for _ in range(3):
            s.run(inputs)
        made: list = []
        monkeypatch.setattr(Device, "from_state", classmethod(
            lambda cls, *a, **k: made.append(real_from.__func__(cls, *a, **k)) or made[-1]))
        monkeypatch.setattr(runner, "_Watch", _WatchPlus(real_watch, _Raiser()))
        with pytest.raises(RuntimeError, match="hook failed"):
            s.run(inputs)
        st = state(made[-1])
        st["hooks"] = len(made[-1].hooks)                 # (each Session's own watch)
        got[mode] = (st, pmu_registers(made[-1]))
    assert calls, "the STOP step was not replayed"
    assert_states(got["replayed"][0], got["ordinary"][0], "after the hook's exception")
    assert got["replayed"][1] == got["ordinary"][1]
    assert not got["replayed"][0]["_executing"]


# ================================================================================ inputs/outputs
def test_inputs_of_every_form_and_outputs_stay(fresh):
    vm, _ = load("tinynet")
    rng = np.random.default_rng(SEED)
    print(f"seed {SEED}")
    s = runner.Session(vm, CONFIG, log_transactions=True)
    for i in range(4):
        inputs = random_inputs(vm, int(rng.integers(1 << 30)))
        want = fresh_run(vm, inputs)
        forms = [inputs, [x.reshape(-1) for x in inputs], [np.asfortranarray(x) for x in inputs],
                 [x.copy()[::1] for x in inputs],
                 [np.lib.stride_tricks.as_strided(x, x.shape, x.strides) for x in inputs]]
        got = [s.run(f) for f in forms]
        kept = [[o.copy() for o in r.outputs] for r in got]
        for j in range(len(got)):
            assert [(o.dtype, o.shape, o.tobytes()) for o in kept[j]] == [
                (np.dtype(d), sh, b) for d, sh, b in want["outputs"]], f"run {i}, input form {j}"
        last = observe_all(got[-1])
        assert_same(last, want, f"run {i}")
        # an output array is the caller's: later runs do not change it, and it is writable
        s.run(random_inputs(vm, i + 7))
        for j, r in enumerate(got):
            assert all(np.array_equal(o, k) for o, k in zip(r.outputs, kept[j])), "a later run changed an output"
            assert all(o.flags.writeable and o.flags.owndata or o.base is not None for o in r.outputs)
    assert s._in_views, "the inputs were never written straight into the pages"
    # a caller that replaced the memory's page arrays: the inputs go through write_inputs again
    r = s.run(inputs)
    r.device.memory.load_pages(list(r.device.memory.page_items()))
    assert_same(observe_all(s.run(inputs)), fresh_run(vm, inputs), "after load_pages")
    with pytest.raises(runner.RunError, match="dtype"):
        s.run([x.astype(np.float32) for x in inputs])
    with pytest.raises(runner.RunError, match="elements"):
        s.run([x.reshape(-1)[:-1] for x in inputs])
