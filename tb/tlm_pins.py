"""The TLM behind the pins: makes ``tlm.device.Device`` look like an NPU to the bench (DUT=tlm).

``TlmPins`` is one cocotb coroutine attached to the port-only shell
(rtl_stub/ethosu85_shell.v). Every cycle it

* holds the model in reset while ``nRESET`` is low and builds a fresh ``Device`` when it is
  released, with the configuration pins (PORPL, PORSL, CFGSRAMCAP, CFGEXTCAP, CFG*HASH*)
  sampled at release, as the TRM says the NPU does (TRM 5.2, 3.1.2);
* acts as the APB5 completer: each transfer is forwarded once to ``Device.apb_read`` /
  ``Device.apb_write`` with its PADDR, PWDATA, PSTRB and PPROT, and PRDATA/PSLVERR come back
  on the pins, optionally after wait states (``wait_states``); PCLKEN qualifies APB edges;
* drives ``IRQ`` from ``Device.irq``;
* answers the clock and power Q-Channels (CLKQ*/PWRQ*): a request is accepted when the
  device is idle and denied when it is running or busy (policy of the digest, D13.3);
  WRSTQACK follows WRSTQREQ (the TLM has no AXI transaction in flight between cycles);
* when the device enters RUNNING, hands it to the execution hook ``execute`` (see below).

Timing: like the bench's agents (tb/apb.py) the adapter samples its inputs at the falling
edge of CLK and drives its outputs right after the rising edge, so it looks like registered
logic and never races with another Python agent.

AXI hook
--------
``execute(pins)`` is an ``async`` callable awaited (in its own task) each time the device
starts running. The default, ``backdoor_execute``, calls ``Device.run()``, so the device
fetches and computes on its own ``tlm.memory.Memory`` in zero simulated time while the AXI
manager outputs of the shell stay idle. A pin-level executor replaces it: it gets the
signal handles of each AXI manager port from ``pins.axi_ports`` (``{"SRAM0": {"ARADDR":
handle, ...}, "EXT0": {...}}``, built by ``axi_port_drivers``: outputs are the writable
``tlm_*`` variables of the shell, inputs the ports themselves), lets the device report an
operation's footprint, reads it over AR/R, lets the device compute, writes the results over
AW/W/B, and returns when the device has stopped. ``axi_idle()`` drives every AXI output of
the shell to its idle value.
"""
from __future__ import annotations

import importlib
import logging
import os
from collections import deque
from typing import Awaitable, Callable

import cocotb
from cocotb.triggers import FallingEdge, RisingEdge

# TRM 5.8 channel signals of one AXI manager port, (name, direction from the NPU).
AXI_PORT_SIGNALS = (
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
    ("RREADY", "out"),
)
AXI_PORT_NAMES = ("SRAM0", "SRAM1", "SRAM2", "SRAM3", "EXT0", "EXT1")
CONFIG_PINS = ("PORPL", "PORSL", "CFGSRAMCAP", "CFGEXTCAP", "CFGSRAMHASH0", "CFGSRAMHASH1",
               "CFGEXTHASH0")

def axi_port_signals(dut, port: str) -> dict | None:
    """``{"ARADDR": handle, ...}`` for the AXI manager port *port* (suffix naming of TRM 5.8,
    e.g. ``ARADDRSRAM0``), or None when the design has no such port."""
    if not hasattr(dut, f"ARVALID{port}"):
        return None
    return {name: getattr(dut, f"{name}{port}") for name, _ in AXI_PORT_SIGNALS
            if hasattr(dut, f"{name}{port}")}


def driver(dut, name: str):
    """The writable variable behind output port *name* of the shell (``tlm_<name>``).

    Verilator does not keep a value written through VPI into a top-level output port, so
    the shell copies each output from a variable ``tlm_<name>``; on any other design the
    port itself is returned."""
    handle = getattr(dut, f"tlm_{name}", None)
    return handle if handle is not None else getattr(dut, name, None)


def axi_port_drivers(dut, port: str) -> dict | None:
    """Like ``axi_port_signals``, but outputs are their writable ``tlm_*`` drivers: what a
    pin-level executor uses to act as the AXI manager of port *port*."""
    sigs = axi_port_signals(dut, port)
    if sigs is None:
        return None
    return {name: (driver(dut, f"{name}{port}") if direction == "out" else sigs[name])
            for name, direction in AXI_PORT_SIGNALS if name in sigs}


def _val(handle, default=None):
    """Integer value of a pin, or *default* when it holds X/Z (or is absent)."""
    if handle is None:
        return default
    try:
        return int(handle.value)
    except ValueError:
        return default


STATUS_FIELDS = (("state", 0, 1), ("irq_raised", 1, 1), ("bus_status", 2, 1),
                 ("reset_status", 3, 1), ("cmd_parse_error", 4, 1), ("cmd_end_reached", 5, 1),
                 ("pmu_irq_raised", 6, 1), ("ecc_fault", 8, 1), ("branch_fault", 9, 1),
                 ("faulting_interface", 11, 1), ("faulting_channel", 12, 4),
                 ("irq_history_mask", 16, 16))


def status_fields(status) -> dict:
    """STATUS as ``{field: int}`` from a word, a mapping or an object with attributes."""
    if isinstance(status, int):
        return {n: (status >> lsb) & ((1 << w) - 1) for n, lsb, w in STATUS_FIELDS}
    if hasattr(status, "items"):
        return {k: int(v) for k, v in status.items()}
    return {n: int(getattr(status, n, 0)) for n, _, _ in STATUS_FIELDS}


def default_device_factory() -> Callable:
    """``tlm.device.Device``; ``TB_DEVICE_FACTORY=module:callable`` points the bench at
    another model with the same API."""
    spec = os.environ.get("TB_DEVICE_FACTORY")
    if spec:
        mod, _, name = spec.partition(":")
        return getattr(importlib.import_module(mod), name or "Device")
    from tlm.device import Device
    return Device


async def backdoor_execute(pins: "TlmPins") -> None:
    """Default execution hook: run the device on its own memory, in zero simulated time."""
    dev = pins.device
    if dev is not None:
        dev.run()


class _QChannel:
    """Device side of one Q-Channel (AMBA LPI): Q_RUN, Q_STOPPED, Q_DENIED."""
    RUN, STOPPED, DENIED = "Q_RUN", "Q_STOPPED", "Q_DENIED"

    def __init__(self, dut, prefix: str):
        self.name = prefix
        self.qreqn = getattr(dut, f"{prefix}QREQn", None)
        self.qacceptn = driver(dut, f"{prefix}QACCEPTn")
        self.qdeny = driver(dut, f"{prefix}QDENY")
        self.qactive = driver(dut, f"{prefix}QACTIVE")
        self.state = self.RUN
        self.accepts = 0
        self.denials = 0

    @property
    def present(self) -> bool:
        return None not in (self.qreqn, self.qacceptn, self.qdeny)

    def drive(self) -> None:
        if not self.present:
            return
        self.qacceptn.value = 0 if self.state == self.STOPPED else 1
        self.qdeny.value = 1 if self.state == self.DENIED else 0

    def in_reset(self, qreqn: int | None) -> None:
        # LPI: a device that leaves reset with QREQn low comes up in Q_STOPPED.
        self.state = self.STOPPED if qreqn == 0 else self.RUN
        self.drive()

    def step(self, qreqn: int | None, idle: bool) -> None:
        if qreqn is None:
            return
        if self.state == self.RUN and qreqn == 0:
            if idle:
                self.state = self.STOPPED
                self.accepts += 1
            else:
                self.state = self.DENIED
                self.denials += 1
        elif self.state in (self.STOPPED, self.DENIED) and qreqn == 1:
            self.state = self.RUN          # through Q_EXIT / Q_CONTINUE
        self.drive()


class TlmPins:
    """Attach a TLM ``Device`` to the pins of the ``ethosu85`` shell. Call ``start()``."""

    def __init__(self, dut, *, config: str = "ethos-u85-256", memory=None,
                 device_factory: Callable | None = None, device_kwargs: dict | None = None,
                 wait_states: Callable[[], int] | None = None,
                 execute: Callable[["TlmPins"], Awaitable[None]] | None = None,
                 clock=None, name: str = "tlm_pins"):
        self.dut = dut
        self.clock = clock if clock is not None else dut.CLK
        self.config = config
        self.memory = memory
        self.device_factory = device_factory or default_device_factory()
        self.device_kwargs = dict(device_kwargs or {})
        self.wait_states = wait_states or (lambda: 0)
        self.execute = execute or backdoor_execute
        self.log = logging.getLogger(f"cocotb.tb.{name}")
        self.device = None
        self.on_reset: list[Callable] = []      # called with the new Device after each nRESET
        # Recent transfers as the device saw them: (write, addr, data, pprot, pstrb, pslverr).
        self.apb_log: deque = deque(maxlen=100_000)
        self.protocol_errors: list[str] = []
        self.clkq = _QChannel(dut, "CLK")
        self.pwrq = _QChannel(dut, "PWR")
        self.axi_ports = {p: s for p in AXI_PORT_NAMES if (s := axi_port_drivers(dut, p))}
        self.pready, self.pslverr, self.prdata = (driver(dut, n) for n in ("PREADY", "PSLVERR",
                                                                           "PRDATA"))
        self.irq = driver(dut, "IRQ")
        self.wrstqack = driver(dut, "WRSTQACK")
        self.dbghaltack = driver(dut, "DBGHALTACK")
        self.cycles = 0
        self._task = None
        self._exec_task = None
        self._apb_state = "idle"
        self._apb_waits = 0
        self._in_reset = True
        self._tick = None

    # ------------------------------------------------------------------ control
    def start(self):
        self._drive_reset_outputs(None, None)
        self._task = cocotb.start_soon(self._run())
        return self._task

    def stop(self) -> None:
        for t in (self._exec_task, self._task):
            if t is not None and not t.done():
                t.cancel()

    def axi_idle(self) -> None:
        for sigs in self.axi_ports.values():
            for name, direction in AXI_PORT_SIGNALS:
                if direction == "out" and name in sigs:
                    sigs[name].value = 0

    # ------------------------------------------------------------------ device views
    # Never through apb_read: an APB access is model time in the TLM (Policy.apb_cycles),
    # so the adapter looks at the device through its read-only views only.
    def _status(self) -> dict:
        """STATUS fields of the device (``Device.status``, a mapping/object or a word)."""
        return status_fields(self.device.status)

    @property
    def running(self) -> bool:
        dev = self.device
        if dev is None:
            return False
        flag = getattr(dev, "running", None)
        return bool(flag) if isinstance(flag, bool) else bool(self._status().get("state", 0))

    def _idle_for(self, clock: bool, pwakeup: int | None) -> bool:
        """Q-Channel accept rule: the device's own ``clock_off_permitted`` /
        ``power_off_permitted`` (stopped, out of reset, CMD enable set; for power also no
        IRQ pending and power control not masked by a RESET write, D13.3), and on the pins:
        no APB transfer or execution under way, and (clock) PWAKEUP low."""
        dev = self.device
        if dev is None or self._apb_state != "idle":
            return False
        if self._exec_task is not None and not self._exec_task.done():
            return False
        if clock:
            return bool(dev.clock_off_permitted) and not pwakeup
        return bool(dev.power_off_permitted)

    # ------------------------------------------------------------------ pins
    def _drive_reset_outputs(self, clk_qreqn, pwr_qreqn) -> None:
        self.pready.value = 0
        self.pslverr.value = 0
        self.prdata.value = 0
        self.irq.value = 0
        for h in (self.wrstqack, self.dbghaltack):
            if h is not None:
                h.value = 0
        self.clkq.in_reset(clk_qreqn)
        self.pwrq.in_reset(pwr_qreqn)
        if self.clkq.qactive is not None:
            self.clkq.qactive.value = 0
        if self.pwrq.qactive is not None:
            self.pwrq.qactive.value = 0
        self.axi_idle()

    def _sample(self) -> dict:
        d = self.dut
        s = {n: _val(getattr(d, n, None)) for n in (
            "nRESET", "PCLKEN", "PSEL", "PENABLE", "PWRITE", "PADDR", "PWDATA", "PSTRB", "PPROT",
            "PWAKEUP", "WRSTQREQ")}
        s["CLKQREQn"] = _val(self.clkq.qreqn)
        s["PWRQREQn"] = _val(self.pwrq.qreqn)
        return s

    def _config_pins(self) -> dict:
        pins = {}
        for n in CONFIG_PINS:
            v = _val(getattr(self.dut, n, None))
            if v is not None:
                pins[n] = v
        return pins

    def _new_device(self):
        kwargs = dict(self.device_kwargs)
        kwargs.setdefault("config", self.config)
        kwargs.setdefault("memory", self.memory)
        kwargs.setdefault("pins", self._config_pins())
        if "policy" not in kwargs and self.device_factory.__module__ == "tlm.device":
            # Behind the pins model time is CLK: the adapter ticks the device once a cycle,
            # so an APB transfer costs its real cycles and nothing more.
            from tlm.config import Policy
            kwargs["policy"] = Policy().replace(apb_cycles=0)
        dev = self.device_factory(**kwargs)
        self._tick = getattr(dev, "tick", None)
        for fn in self.on_reset:
            fn(dev)
        return dev

    # ------------------------------------------------------------------ main loop
    async def _run(self) -> None:
        while True:
            await FallingEdge(self.clock)
            s = self._sample()
            await RisingEdge(self.clock)
            self.cycles += 1
            self._edge(s)

    def _edge(self, s: dict) -> None:
        if s["nRESET"] != 1:
            if not self._in_reset:
                self.log.info("nRESET asserted")
            self._in_reset = True
            if self._exec_task is not None and not self._exec_task.done():
                self._exec_task.cancel()
            self._exec_task = None
            self.device = None
            self._apb_state = "idle"
            self._drive_reset_outputs(s["CLKQREQn"], s["PWRQREQn"])
            return
        if self._in_reset:
            self._in_reset = False
            self.device = self._new_device()
            self.log.info("nRESET released: new device, pins %s", self._config_pins())
        dev = self.device

        # Clock Q-Channel first: while the clock is stopped the NPU does nothing (no model
        # time, no APB response; PWAKEUP raises CLKQACTIVE so the controller can exit).
        pwakeup = s["PWAKEUP"] or 0
        self.clkq.step(s["CLKQREQn"], self._idle_for(True, pwakeup))
        self.pwrq.step(s["PWRQREQn"], self._idle_for(False, pwakeup))
        clock_on = self.clkq.state != _QChannel.STOPPED
        if clock_on and self._tick is not None:
            self._tick(1)
        if self.clkq.qactive is not None:
            self.clkq.qactive.value = int(not self._idle_for(True, 0) or bool(pwakeup))
        if self.pwrq.qactive is not None:
            self.pwrq.qactive.value = int(not self._idle_for(False, 0))
        if self.wrstqack is not None:
            self.wrstqack.value = s["WRSTQREQ"] or 0

        if clock_on and (s["PCLKEN"] is None or s["PCLKEN"] == 1):
            self._apb_edge(s, dev)

        self.irq.value = int(bool(dev.irq))
        if (self._exec_task is None or self._exec_task.done()) and self.running:
            self._exec_task = cocotb.start_soon(self._execute())

    async def _execute(self) -> None:
        await self.execute(self)
        if self.device is not None:
            self.irq.value = int(bool(self.device.irq))

    def _apb_edge(self, s: dict, dev) -> None:
        """One PCLKEN-qualified edge of the APB completer. *s* holds the inputs as this
        edge samples them."""
        psel, penable = s["PSEL"] == 1, s["PENABLE"] == 1
        if self._apb_state == "resp":
            # PREADY was high for this edge: the manager has completed the transfer.
            if not (psel and penable):
                self.protocol_errors.append(f"cycle {self.cycles}: PSEL/PENABLE dropped "
                                            "before PREADY")
            self.pready.value = 0
            self.pslverr.value = 0
            self._apb_state = "idle"
            return
        if self._apb_state == "wait":
            if not (psel and penable):
                self.protocol_errors.append(f"cycle {self.cycles}: transfer abandoned in a "
                                            "wait state")
                self._apb_state = "idle"
                return
            self._apb_waits -= 1
            if self._apb_waits <= 0:
                self._respond(s, dev)
            return
        # idle
        if psel and not penable:                      # setup phase seen: access phase next
            self._apb_waits = max(0, int(self.wait_states()))
            if self._apb_waits == 0:
                self._respond(s, dev)
            else:
                self._apb_state = "wait"
                self.pready.value = 0
        elif psel and penable:
            self.protocol_errors.append(f"cycle {self.cycles}: access phase without setup")

    def _respond(self, s: dict, dev) -> None:
        addr, prot = s["PADDR"], s["PPROT"]
        if addr is None or prot is None or s["PWRITE"] is None:
            self.protocol_errors.append(f"cycle {self.cycles}: X on PADDR/PPROT/PWRITE")
            addr = addr or 0
            prot = prot or 0
        if s["PWRITE"] == 1:
            data = s["PWDATA"]
            strb = s["PSTRB"] if s["PSTRB"] is not None else 0xF
            if data is None:
                self.protocol_errors.append(f"cycle {self.cycles}: X on PWDATA")
                data = 0
            err = bool(dev.apb_write(addr, data, pprot=prot, pstrb=strb))
            self.prdata.value = 0
            self.apb_log.append((True, addr, data, prot, strb, err))
        else:
            data, err = dev.apb_read(addr, pprot=prot)
            err = bool(err)
            self.prdata.value = 0 if err else data
            self.apb_log.append((False, addr, data, prot, 0, err))
        self.pslverr.value = int(err)
        self.pready.value = 1
        self._apb_state = "resp"
