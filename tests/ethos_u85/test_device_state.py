"""Device.save_state / from_state (runner.Session starts each warm run from a copy of the
device the driver's programming left) against a device that went through the programming.

The comparison walks every attribute of both devices (``full_state``), so an attribute a
later change adds is compared too; every register is also read through the back door.  A
planted difference in a saved state must be caught (the check can fail), a restored
device must not share mutable state with the saved copy or another restored device, and
an attribute of a type the copy does not know makes save_state decline (None).
"""
from __future__ import annotations

import os
from collections import deque

import numpy as np
import pytest

from tests.ethos_u85.test_warm_paths import CONFIG, load
from tlm.ethos_u85 import device, registers as R, runner
from tlm.ethos_u85.device import Device
from tlm.ethos_u85.memory import Memory

SEED = int(os.environ.get("TLM_TEST_SEED", "20261126"))


def full_state(dev) -> dict:
    """Every attribute of *dev* as comparable values (the memory, config, policy, pins and
    op table by identity; objects by their attributes, recursively)."""
    def norm(v, depth=0):
        assert depth < 8, "state nesting deeper than expected"
        if isinstance(v, np.ndarray):
            return ("ndarray", v.dtype.str, v.shape, v.tobytes())
        if isinstance(v, (list, tuple, deque)):
            return (type(v).__name__, tuple(norm(x, depth + 1) for x in v))
        if isinstance(v, dict):
            return (type(v).__name__, tuple(sorted((repr(k), norm(x, depth + 1)) for k, x in v.items())))
        if getattr(v, "__self__", None) is dev:                       # a method bound to the device
            return ("method of the device", v.__func__)
        if hasattr(v, "__dict__") and type(v).__module__.startswith("tlm.ethos_u85") and not hasattr(
                v, "__dataclass_fields__"):
            return (type(v).__name__, norm({k: x for k, x in vars(v).items()}, depth + 1))
        if hasattr(v, "__slots__") and type(v).__module__.startswith("tlm.ethos_u85.isa"):
            return (type(v).__name__, norm(dict(v._raw), depth + 1))
        return v
    out = {}
    for k, v in vars(dev).items():
        if k in ("memory", "config", "policy", "pins", "kernel_ops"):
            out[k] = ("same object", id(v))
        elif k == "dataport":
            out[k] = (v.memory is dev.memory, v.route.__self__ is dev, v.reference)
        elif k == "txn_sink":
            out[k] = (v.dev is dev, dev.memory.listeners.count(v))
        else:
            out[k] = norm(v)
    out["registers"] = {r.ident: dev.read_register(r.offset) for r in R.iter_registers()}
    return out


def programmed(vm, memory=None):
    """A device after the driver's programming (runner.program), as Session's first run."""
    s = runner.Session(vm, CONFIG)
    mem = memory if memory is not None else Memory()
    dev = Device(s.config, mem)
    runner.program(runner.DeviceHost(dev, s.driver.pprot), s.memory_map, s.driver)
    dev.prime_caches()
    return dev, s


@pytest.mark.parametrize("name", ["tinynet", "softmax_int16"])
def test_restored_device_equals_programmed_device(name):
    vm, _ = load(name)
    mem = Memory()
    dev, _ = programmed(vm, mem)
    want = full_state(dev)
    state = dev.save_state()
    assert state is not None
    mem.listeners.clear()
    got = Device.from_state(state, mem)
    assert mem.listeners == [got.txn_sink]
    for k in want:
        assert full_state(got)[k] == want[k], f"restored device: {k} differs"
    assert set(full_state(got)) == set(want)
    # nothing mutable is shared: changing one restored device leaves the copy and others alone
    got.rf._raw[next(iter(got.rf._raw))] = 0x1234
    got.lut[:] = 7
    got.pmu.evcnt[0] = 99
    got.events.append(("mine", {}))
    got.op_state.fifo_count[0] = 5
    got._store[next(iter(got._store))] ^= 1
    again = Device.from_state(state, mem)
    for k in want:
        if k not in ("txn_sink",):                         # (two devices listen now)
            assert full_state(again)[k] == want[k], f"a restored device's change reached the saved state: {k}"


def test_the_comparison_can_fail():
    """Planted differences in a saved state (one per kind of attribute) are all caught."""
    vm, _ = load("tinynet")
    dev, _ = programmed(vm)
    want = full_state(dev)
    plants = {
        "cycle": lambda s: s.__setitem__("cycle", s["cycle"] + 1),
        "rf": lambda s: s["rf"]._raw.__setitem__(next(iter(s["rf"]._raw)), 1),
        "lut": lambda s: s["lut"].__setitem__(3, 1),
        "pmu": lambda s: s["pmu"].evtype.__setitem__(2, 1),
        "events": lambda s: s["events"].pop(),
        "_store": lambda s: s["_store"].__setitem__(next(iter(s["_store"])), 0xDEAD),
        "op_state": lambda s: s["op_state"].fifo_valid.__setitem__(1, True),
    }
    for what, plant in plants.items():
        state = dev.save_state()
        plant(state)
        got = full_state(Device.from_state(state, Memory()))
        assert any(got[k] != want[k] for k in want), f"planted change of {what} not detected"


def test_save_state_declines_unknown_types():
    vm, _ = load("tinynet")
    dev, _ = programmed(vm)
    dev.something_new = object()
    assert dev.save_state() is None


def test_session_uses_the_saved_state_and_equals_fresh_runs():
    """Session runs 2.. start from the saved state (program() is not called again) and equal
    run_model's runs in every observed respect (test_session covers the rest)."""
    from tests.ethos_u85.test_session import fresh_run, random_inputs, session_run
    from tests.ethos_u85.test_warm_paths import assert_same
    device.clear_warm_caches()
    vm, _ = load("tinynet")
    print(f"seed {SEED}")
    s = runner.Session(vm, CONFIG, log_transactions=True)
    inputs = random_inputs(vm, SEED)
    want = fresh_run(vm, inputs)
    assert_same(session_run(s, inputs), want, "session run 0")
    assert s._programmed is not None
    calls = []
    real = runner.program
    runner.program = lambda *a: calls.append(a) or real(*a)
    try:
        for i in range(1, 3):
            assert_same(session_run(s, inputs), want, f"session run {i}")
    finally:
        runner.program = real
    assert not calls, "a warm session run programmed the device again"
    # without the warm paths the session programs every run (the ordinary path stays literal)
    s2 = runner.Session(vm, CONFIG, warm_paths=False)
    s2.run(inputs)
    assert s2._programmed is None
