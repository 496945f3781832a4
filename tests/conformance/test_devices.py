"""Conformance of every registered device (tlm.core.registry) to the shared contracts:
registry entry, trace target, example traces, hostile register traffic. A new device is
checked here without a line of device-specific test code."""
import os
import random
import shutil

import pytest

from tests.support import REPO
from tlm.core import registry
from tlm.core.trace import TraceFormatError, TraceTarget, parse, replay

DEVICES = sorted(registry.devices())


def _example_traces() -> list:
    """(device, path) of every example trace under tests/*/traces/ whose device is registered."""
    out = []
    for p in sorted(REPO.glob("tests/*/traces/**/*.txt")):
        try:
            dev = parse(p).device
        except TraceFormatError:
            continue                      # deliberately malformed examples are tested by their device
        if dev in DEVICES:
            out.append(pytest.param(p, id=str(p.relative_to(REPO / "tests"))))
    return out


def test_registry_lists_the_flagship():
    assert "ethos-u85" in DEVICES


@pytest.mark.parametrize("name", DEVICES)
def test_registry_entry(name):
    info = registry.get(name)
    assert info.name == name and info.title and info.package.startswith("tlm.")
    assert info.default_config in info.configs and len(set(info.configs)) == len(info.configs)
    if info.registers:
        assert registry.resolve(info.registers)
    for cfg in info.configs:
        t = info.make_target(cfg)
        assert isinstance(t, TraceTarget) and t.device == name
        assert t.reg_bits in (32, 64) and t.reg_align in (1, 2, 4, 8) and 8 <= t.addr_bits <= 64
        assert t.wait_default > 0
    with pytest.raises(registry.UnknownDevice, match="no configuration"):
        info.make_target("no-such-config")


@pytest.mark.parametrize("path", _example_traces())
def test_example_trace_replays(path):
    tr = parse(path)
    res = replay(tr, registry.get(tr.device).make_target(tr.config))
    assert res.exit_status == 0, "\n".join(res.messages)
    assert res.passed == tr.checks and res.passed > 0


@pytest.mark.parametrize("path", [p for p in _example_traces()
                                  if any(s.op == "check_mem" for s in parse(p.values[0]).steps)])
def test_corrupted_expectation_fails_naming_the_address(path, tmp_path):
    shutil.copytree(path.parent, tmp_path / "t")
    tr = parse(tmp_path / "t" / path.name)
    step = next(s for s in tr.steps if s.op == "check_mem" and s.args[1].stat().st_size)
    blob = bytearray(step.args[1].read_bytes())
    i = len(blob) // 2
    blob[i] ^= 0x5A
    step.args[1].write_bytes(bytes(blob))
    res = replay(tr, registry.get(tr.device).make_target(tr.config))
    assert res.exit_status == 1 and res.failed >= 1
    want = f"check_mem: {step.args[1].name}: first difference at 0x{step.args[0] + i:x}"
    assert any(f":{step.line}: {want}" in m for m in res.messages), res.messages


@pytest.mark.parametrize("path", [p for p in _example_traces()
                                  if any(s.op == "check_mem" for s in parse(p.values[0]).steps)])
def test_memory_checks_see_the_device_work(path):
    """The same trace with every register access and wait left out (memory loaded, the device
    never started) must fail a check_mem: else its expected bytes are what memory held before
    the job (e.g. an all-zero output over zeroed memory), and no wrong result could fail it."""
    tr = parse(path)
    tr.steps = [s for s in tr.steps if s.op in ("load_mem", "fill_mem", "check_mem")]
    res = replay(tr, registry.get(tr.device).make_target(tr.config))
    assert res.failed >= 1, f"{path}: its memory checks pass without the device doing anything"


@pytest.mark.parametrize("name", DEVICES)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_hostile_register_traffic_never_raises(name, seed):
    """Random register writes and reads, interleaved with waits, on every device: the model
    may fault (reported by faults()) but never raises, and reads return register-sized values."""
    seed += int(os.environ.get("CONFORMANCE_SEED", "0"))
    print(f"seed {seed}")
    rng = random.Random(seed)
    info = registry.get(name)
    t = info.make_target(info.default_config)
    span = 1 << 12
    for _ in range(300):
        off = rng.randrange(0, span, t.reg_align) if rng.random() < 0.9 else \
            rng.randrange(0, 1 << 20, t.reg_align)
        r = rng.random()
        if r < 0.55:
            v = rng.choice((0, 1, (1 << t.reg_bits) - 1, rng.getrandbits(t.reg_bits)))
            t.write_reg(off, v)
        elif r < 0.9:
            v = t.read_reg(off)
            assert isinstance(v, int) and 0 <= v < 1 << t.reg_bits
        elif r < 0.95:
            assert t.wait_irq(rng.randrange(1, 2000)) in (True, False)
        else:
            t.idle()
        assert all(isinstance(f, str) and f for f in t.faults())
