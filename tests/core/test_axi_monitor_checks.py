"""README: the passive AXI monitor checks that every R beat and every B answers an
outstanding request (tb/agents/axi/monitor.py ``_on_r`` / ``_on_b``). Driven here without a
simulator: the monitor's handlers on fake pin handles (read through ``_pin``, as its
pin-sampling loop reads them)."""
from __future__ import annotations

import logging
import types
from collections import deque

import pytest

from tb.agents.axi import monitor as M
from tb.agents.axi.burst import AxiBurst


def _pin(v):
    return types.SimpleNamespace(value=v)


def _monitor(**pins):
    m = M.AxiMonitor.__new__(M.AxiMonitor)          # no DUT: only the handlers' state
    m.port, m.cycle, m.errors, m.log = "SRAM0", 7, [], logging.getLogger("test")
    m.lanes, m.addr_mask = 16, (1 << 40) - 1
    m.sigs = {k: _pin(v) for k, v in pins.items()}
    m._reads, m._writes, m._aws, m._wbuf = {}, {}, deque(), deque()
    m.bursts, m.listeners, m.fed = deque(), [], False
    return m


@pytest.fixture(autouse=True)
def _no_sim_time(monkeypatch):
    monkeypatch.setattr(M, "get_sim_time", lambda unit="ns": 0.0)


def test_r_without_outstanding_read_is_an_error():
    m = _monitor(RID=5, RRESP=0, RDATA=0)
    m._on_r(m._pin)
    assert m.errors == ["cycle 7 SRAM0: R beat with RID=5 and no read outstanding"]
    # a read outstanding under another ID does not answer it
    m._reads[4] = deque([[AxiBurst("SRAM0", False, 4, 0x100, 0, 4, 1, 0, 0, 0), 0]])
    m._on_r(m._pin)
    assert len(m.errors) == 2
    # the matching ID is accepted and completes the burst
    m.sigs["RID"] = _pin(4)
    m._on_r(m._pin)
    assert len(m.errors) == 2 and len(m.bursts) == 1 and m.bursts[0].id == 4


def test_b_without_completed_write_is_an_error():
    m = _monitor(BID=3, BRESP=0)
    m._on_b(m._pin)
    assert m.errors == ["cycle 7 SRAM0: B with BID=3 and no write burst complete"]
    m._writes[3] = deque([AxiBurst("SRAM0", True, 3, 0x200, 0, 4, 1, 0, 0, 0)])
    m._on_b(m._pin)
    assert len(m.errors) == 1 and len(m.bursts) == 1 and m.bursts[0].write
