"""tools/trace_fuzz.py: every device's shipped traces, mutated, replay without an internal
error, exception, hang or runaway CPU (a fixed seed, a few cases per device here; more with
``python -m tools.trace_fuzz --cases N``). A planted model exception must be reported."""
from __future__ import annotations

import pytest

from tools import trace_fuzz as TF

DEVICES = TF.devices_with_traces()


def test_every_registered_device_has_shipped_traces():
    from tlm.core import registry
    assert set(DEVICES) == set(registry.devices()), DEVICES


@pytest.mark.parametrize("device", DEVICES)
def test_mutated_traces_never_break_the_model(device):
    s = TF.run(device, 24, seed=20261126)
    assert s.cases == 24
    assert s.violating_cases == 0, "\n".join(v for _, _, v in s.violations[:5])
    # the edits reach the device: some cases fail checks or raise faults, not all pass
    assert s.outcomes["PASS"] < s.cases, dict(s.outcomes)


def test_a_model_exception_is_a_violation(monkeypatch):
    from tlm.dtpu import system
    orig = system.DtpuSystem.write_reg

    def write_reg(self, offset, value):
        if value & 1:
            raise ZeroDivisionError("planted")
        return orig(self, offset, value)
    monkeypatch.setattr(system.DtpuSystem, "write_reg", write_reg)
    s = TF.run("dtpu", 6, seed=3)
    assert s.violating_cases > 0
    assert any("internal error" in v and "planted" in v for _, _, v in s.violations), s.violations[:2]


def test_cli_one_case_prints_its_edits(capsys):
    assert TF.main(["--device", "ne16", "--case", "4", "--seed", "2"]) == 0
    out = capsys.readouterr().out
    assert "tests/ne16/traces/" in out and "ne16: 1 cases" in out
    assert TF.main(["--device", "no-such-npu", "--cases", "1"]) == 2
    assert "no shipped traces" in capsys.readouterr().err
