"""The bench binds by TRM names through a pin map (tb/core/pinmap.py).

* Unit tests on a fake design object: identity, patterns, overrides, hierarchical and indexed
  paths, "absent" entries, loading from JSON / Python / TB_PINMAP, bad maps; and that the
  agents (APB manager, AXI port view, TLM adapter helpers) bind what the map names.
(The Ethos-U85 stand-in behind renamed ports, run by the unchanged bench with only a map:
tests/ethos_u85/test_pinmap_wrapped.py.)
"""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tests.support import require

from tb.core.pinmap import PinMap, PinMapError, current


class Sig:
    """A fake signal handle: a value and a width."""

    def __init__(self, name: str, width: int = 1):
        self._name = name
        self.width = width
        self.value = 0

    def __len__(self):
        return self.width

    def setimmediatevalue(self, v):
        self.value = v


def fake(names, widths=None, **children):
    ns = SimpleNamespace(_name="top", **children)
    for n in names:
        setattr(ns, n, Sig(n, (widths or {}).get(n, 1)))
    return ns


def test_identity_is_the_default():
    dut = fake(["CLK", "PADDR", "ARVALIDSRAM0"])
    pm = PinMap()
    assert pm.is_identity
    assert pm.get(dut, "PADDR") is dut.PADDR
    assert pm.axi(dut, "ARVALID", "SRAM0") is dut.ARVALIDSRAM0
    assert pm.get(dut, "PSEL") is None
    with pytest.raises(AttributeError, match="no signal PSEL"):
        pm.get(dut, "PSEL", required=True)


def test_patterns_overrides_and_paths():
    inner = fake(["IRQ"], bus=[Sig("b0"), Sig("b1")])
    dut = fake(["aclk", "paddr", "m_sram0_arvalid", "m_ext0_rdata"], u_npu=inner)
    pm = PinMap.from_dict({"pattern": "{lname}", "axi_pattern": "m_{lport}_{lname}",
                           "pins": {"CLK": "aclk", "IRQ": "u_npu.IRQ", "PSTRB": None,
                                    "PWAKEUP": "u_npu.bus[1]"}})
    assert pm.get(dut, "PADDR") is dut.paddr
    assert pm.get(dut, "CLK") is dut.aclk
    assert pm.get(dut, "IRQ") is inner.IRQ                     # hierarchical path
    assert pm.get(dut, "PWAKEUP") is inner.bus[1]              # indexed path
    assert pm.axi(dut, "ARVALID", "SRAM0") is dut.m_sram0_arvalid
    assert pm.axi(dut, "RDATA", "EXT0") is dut.m_ext0_rdata
    assert pm.get(dut, "PSTRB") is None                        # the map says: absent
    with pytest.raises(AttributeError, match="the pin map says there is no PSTRB"):
        pm.get(dut, "PSTRB", required=True)
    assert pm.axi_path("AWID", "SRAM0") == "m_sram0_awid"


def test_driver_prefers_the_shell_variable():
    dut = fake(["PREADY", "tlm_PREADY", "IRQ"])
    pm = PinMap()
    assert pm.driver(dut, "PREADY") is dut.tlm_PREADY
    assert pm.driver(dut, "IRQ") is dut.IRQ
    inner = fake(["PREADY", "tlm_PREADY"])
    outer = fake([], u=inner)
    assert PinMap(pattern="u.{name}").driver(outer, "PREADY") is inner.tlm_PREADY


def test_load_json_python_and_env(tmp_path, monkeypatch):
    j = tmp_path / "m.json"
    j.write_text(json.dumps({"pattern": "x_{name}", "pins": {"CLK": "clk"}}))
    pm = PinMap.load(j)
    assert pm.path("PADDR") == "x_PADDR" and pm.path("CLK") == "clk"
    py = tmp_path / "m.py"
    py.write_text("PINMAP = {'axi_pattern': '{lport}_{lname}'}\n")
    assert PinMap.load(py).axi_path("ARVALID", "EXT0") == "ext0_arvalid"
    py2 = tmp_path / "m2.py"
    py2.write_text("from tb.core.pinmap import PinMap\nPINMAP = PinMap(pattern='u.{name}')\n")
    assert PinMap.load(py2).path("IRQ") == "u.IRQ"
    monkeypatch.setenv("TB_PINMAP", str(j))
    assert current().path("PADDR") == "x_PADDR"
    assert PinMap.coerce(None).path("PADDR") == "x_PADDR"
    monkeypatch.delenv("TB_PINMAP")
    assert current().is_identity


@pytest.mark.parametrize("text, match", [
    ('{"patern": "{name}"}', "unknown key"),
    ('{"pattern": "{nam}"}', "bad pattern"),
    ('{"pins": ["CLK"]}', "'pins' must be"),
    ('[1, 2]', "one JSON object"),
    ('{', "pin map"),
])
def test_bad_maps(tmp_path, text, match):
    f = tmp_path / "bad.json"
    f.write_text(text)
    with pytest.raises(PinMapError, match=match):
        PinMap.load(f)
    with pytest.raises(PinMapError, match="no such file"):
        PinMap.load(tmp_path / "missing.json")


def test_agents_bind_through_the_map():
    """The APB manager, the AXI port view and the TLM adapter's port lookup use the map."""
    require("cocotb")
    from tb.agents.apb import Apb5Manager
    from tb.agents.axi import AXI5_SIGNALS, PortView, port_present, port_signals
    widths = {"paddr": 13, "pwdata": 32, "prdata": 32}
    apb = ["paddr", "psel", "penable", "pwrite", "pwdata", "prdata", "pready", "pslverr",
           "pstrb", "pprot"]
    axi = [f"m_sram0_{n.lower()}" for n, _ in AXI5_SIGNALS]
    dut = fake(["aclk"] + apb + axi, widths)
    pm = PinMap.from_dict({"pattern": "{lname}", "axi_pattern": "m_{lport}_{lname}",
                           "pins": {"CLK": "aclk"}})
    mgr = Apb5Manager.from_entity(dut, pinmap=pm)
    assert mgr.paddr is dut.paddr and mgr.clock is dut.aclk and mgr.addr_width == 13
    assert mgr.pwakeup is None                        # optional and absent
    with pytest.raises(AttributeError, match="PADDR"):
        Apb5Manager.from_entity(dut)                  # the identity map finds nothing
    view = PortView(dut, "SRAM0", pm)
    assert view.arvalid is dut.m_sram0_arvalid and view.rdata is dut.m_sram0_rdata
    assert port_present(dut, "SRAM0", pm) and not port_present(dut, "EXT0", pm)
    sigs = port_signals(dut, "SRAM0", pm)
    assert set(sigs) == {n for n, _ in AXI5_SIGNALS} and sigs["WDATA"] is dut.m_sram0_wdata
    assert port_signals(dut, "SRAM0") is None
