"""AXI5 manager-port signals and how the agents bind them (device-neutral).

A port's signals are the AXI5 channel signals (``ARADDR``, ``RDATA``, ...) of one manager
port; the pin map (tb/core/pinmap.py, ``PinMap.axi(dut, signal, port)``) says where each one
is on a design, e.g. the Ethos-U85's suffix naming ``ARADDRSRAM0`` (TRM 5.8) or a prefix
naming ``m_sram0_araddr``. Widths come from the design (the handles), never from here.

* ``AXI5_SIGNALS``: (name, "out" | "in" seen from the manager) of every signal the agents use.
* ``PortView(dut, port)``: the port's signals under cocotbext-axi's lower-case names
  (``view.araddr``), so its channel models bind with ``from_prefix(view, "")``.
* ``port_present``, ``port_signals`` (TRM name -> handle), ``port_drivers`` (outputs as their
  writable drivers, for a model acting as the manager behind a port-only shell).
* ``pin_int``: tb/agents/pins.py, re-exported.
"""
from __future__ import annotations

import logging

from tb.agents.pins import pin_int  # noqa: F401  (re-exported: the agents' pin reader)

# (signal, direction from the manager) of one AXI5 manager port
AXI5_SIGNALS = (
    ("AWAKEUP", "out"), ("ACLKEN", "in"),
    ("AWVALID", "out"), ("AWID", "out"), ("AWADDR", "out"), ("AWLEN", "out"), ("AWSIZE", "out"),
    ("AWBURST", "out"), ("AWCACHE", "out"), ("AWDOMAIN", "out"), ("AWPROT", "out"),
    ("AWREADY", "in"),
    ("WVALID", "out"), ("WDATA", "out"), ("WSTRB", "out"), ("WLAST", "out"), ("WREADY", "in"),
    ("BVALID", "in"), ("BID", "in"), ("BRESP", "in"), ("BREADY", "out"),
    ("ARVALID", "out"), ("ARID", "out"), ("ARADDR", "out"), ("ARLEN", "out"), ("ARSIZE", "out"),
    ("ARBURST", "out"), ("ARCACHE", "out"), ("ARDOMAIN", "out"), ("ARPROT", "out"),
    ("ARREADY", "in"),
    ("RVALID", "in"), ("RID", "in"), ("RDATA", "in"), ("RRESP", "in"), ("RLAST", "in"),
    ("RREADY", "out"))


def _pinmap(pinmap):
    from tb.core.pinmap import PinMap
    return PinMap.coerce(pinmap)


class PortView:
    """One AXI manager port of *dut* seen with cocotbext-axi's lower-case channel names:
    ``view.araddr`` is the pin the pin map (tb/core/pinmap.py) gives for ``ARADDR<port>`` (TRM 5.8
    suffix naming; the identity map: ``dut.ARADDRSRAM0``)."""

    def __init__(self, dut, port: str, pinmap=None):
        pm = _pinmap(pinmap)
        self._dut = dut
        self._port = port
        self._name = f"tb.axi.{port}"          # cocotbext-axi logs as cocotb.<_name>.
        self._log = logging.getLogger(f"cocotb.tb.axi.{port}")
        self._handles = {n.lower(): h for n, _ in AXI5_SIGNALS
                         if (h := pm.axi(dut, n, port)) is not None}

    def __dir__(self):
        return list(self._handles)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._handles[name]
        except KeyError:
            raise AttributeError(f"{self._port}: no AXI signal {name.upper()}{self._port}") from None


def port_present(dut, port: str, pinmap=None) -> bool:
    pm = _pinmap(pinmap)
    return pm.axi(dut, "ARVALID", port) is not None and pm.axi(dut, "AWVALID", port) is not None


def port_signals(dut, port: str, pinmap=None) -> "dict | None":
    """``{"ARADDR": handle, ...}`` for the AXI manager port *port* (looked up through the pin
    map), or None when the design has no such port."""
    pm = _pinmap(pinmap)
    if pm.axi(dut, "ARVALID", port) is None:
        return None
    sigs = {name: pm.axi(dut, name, port) for name, _ in AXI5_SIGNALS}
    return {k: v for k, v in sigs.items() if v is not None}


def port_drivers(dut, port: str, pinmap=None) -> "dict | None":
    """Like ``port_signals``, but outputs are their writable drivers (``PinMap.axi_driver``):
    what a model acting as the manager of *port* behind a port-only shell writes."""
    pm = _pinmap(pinmap)
    sigs = port_signals(dut, port, pm)
    if sigs is None:
        return None
    return {name: (pm.axi_driver(dut, name, port) if direction == "out" else sigs[name])
            for name, direction in AXI5_SIGNALS if name in sigs}
