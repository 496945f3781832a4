"""The bench environment: clock, reset, agents and the model handle, bound by TRM names.

``Env(dut)`` binds to the ports of TRM chapter 5 (CLK, nRESET, PORPL, PORSL, CFG*, the APB5
completer, IRQ, the Q-Channels, the AXI manager ports ``<signal><port>``), so the same
bench drives the TLM behind the port-only shell (DUT=tlm), the RTL stand-in or licensed RTL.
Every pin is found through a pin map (tb/core/pinmap.py: ``Env(dut, pinmap=...)``, else
``TB_PINMAP=path``, else the TRM names themselves), so a netlist with other port names or
hierarchy needs only a map; ``env.pin("IRQ")`` is the handle of a TRM-named pin.

* ``await env.start()`` starts CLK, ties the static inputs (DFT, MBIST, debug) inactive,
  drives the configuration pins and, for DUT=tlm, attaches the TLM behind the pins.
* ``await env.hard_reset(PORPL=1, PORSL=0)`` pulses nRESET with the given pins;
  ``await env.wait_reset_done()`` polls STATUS until ``reset_status`` clears.
* ``env.apb`` is the APB5 manager (tb/apb.py); ``env.read`` / ``env.write`` are shortcuts.
* ``env.apb_monitor`` (``Env(dut, apb_monitor=False)`` to leave it out) is a passive
  ``tb.agents.apb.ApbMonitor`` on the same pins: it rebuilds every transfer, whoever drives it, and
  checks the APB/TRM pin rules; ``finish()`` fails on its first errors. The scoreboard and
  coverage listen to the manager (``apb_source="manager"``, the default: listeners such as
  tb/ethos_u85/testlib/hostile.py's ``ResetSync`` go ahead of it on ``env.apb.listeners``); with
  ``apb_source="monitor"`` they listen to the monitor instead, so another bench's APB driver
  can run the same checks on the same pins (add such listeners to the monitor then).
* ``env.clkq`` / ``env.pwrq`` are Q-Channel controllers (request / exit).
* ``env.model`` is the reference ``tlm.ethos_u85.device.Device``: for DUT=tlm the device behind the
  pins; otherwise (or with ``reference_model=True``) a separate instance, built at each
  ``hard_reset`` with the same pins, that ``env.scoreboard`` keeps in step with every APB
  transfer of ``env.apb`` and compares (PRDATA, PSLVERR); ``Env(dut, reference_factory=f)``
  builds it with ``f(config=, memory=, pins=)`` instead of the default device (the random
  kernel tests pass tlm.ethos_u85.literal.literal_device on DUT=tlm). The reference has finished its
  reset sequence when it is built; the scoreboard is paused from nRESET until
  ``wait_reset_done`` sees the DUT's sequence end (the TRM lets reads return 0 and writes
  fail during it). Model time differs from the DUT's, so tests of PMU counters must tell
  the scoreboard to ``ignore`` them.
* ``env.memory`` is the system memory (``tb.agents.axi.BenchMemory``, a sparse 40-bit
  ``tlm.ethos_u85.memory.Memory``): ``env.axi`` (tb/axi.py) serves it on every AXI manager port of the
  design (SRAM0, EXT0), with fault injection (``env.axi.inject_fault``), optional random
  backpressure, response latency and read reordering by ID (``env.axi.configure(...)``), and
  a burst record. For DUT=tlm the device behind the pins performs every
  memory access on those pins (``tb.ethos_u85.tlm_pins.axi_execute``), so that memory is the only one.
  The subordinates are ``tb.agents.axi.lean.LeanSubordinate`` (one coroutine for every port),
  or with ``Env(dut, axi_impl="cocotbext")`` / ``TB_AXI_SUBORDINATE=cocotbext`` the
  cocotbext-axi based ``AxiSubordinate`` (the earlier bench, kept for comparison).
* ``env.axi_monitors`` (``Env(dut, axi_monitor=False)`` to leave them out) has a passive
  ``tb.agents.axi.AxiMonitor`` on every AXI port: it rebuilds the bursts and checks that a
  VALID stays high with a stable payload until READY; ``finish()`` fails on its errors. With
  the lean subordinates (the bench owns the memory) each monitor is fed the subordinate's
  samples of the pins and its records (``tb.agents.axi.AxiMonitor`` "Fed"); with
  ``axi_impl="cocotbext"``, ``axi_source="monitor"`` or ``axi_monitor="pins"`` it samples the
  pins itself and rebuilds the bursts from them. The scoreboard and coverage take bursts from the subordinates
  (``axi_source="subordinate"``, the default) or from the monitors (``"monitor"``), so a
  bench with its own memory model can feed them from the pins.
* ``Env(dut, bare=True)`` (``TB_BENCH_BARE=1`` for test_npu_model) is what a bare cocotb
  bench has: the clock, the APB manager and cocotbext-axi's ``AxiRam`` on every AXI port
  (``tb.agents.axi.BareRam``), no monitors, scoreboard, reference model or coverage:
  tools/bench.py's baseline for the design's own cost under the simulator.
* ``env.scoreboard`` (tb/scoreboard.py) replays APB on the reference model, runs each job on
  a mirror of the memory, and checks STATUS, QREAD, IRQ edges and every AXI write against it.
* ``env.driver`` (tb/driver.py ``HostDriver``) issues the Ethos-U core driver's sequences
  (soft reset, AXI set-up, load a job, run, wait for the IRQ, clear it, fault check, PMU);
  ``env.load_stream``, ``env.start_npu``, ``env.wait_stopped``, ``env.run_job`` and
  ``env.wait_reset_done`` are shortcuts to it.

Which DUT is under the pins comes from ``TB_DUT`` (set by tb/run.py), the configuration from
``NPU_CONFIG``.
"""
from __future__ import annotations

from typing import Callable, Iterable

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge

from tb.agents.apb import PROT_SECURE_PRIV, Apb5Manager, ApbMonitor, ApbResult
from tb.agents.axi import (
    AXI5_SIGNALS,
    AxiMemory,
    AxiMonitor,
    BenchMemory,
    pin_int,
    port_signals,
    subordinate_impl,
)
from tb.core.env import EnvBase
from tb.core.pinmap import PinMap
from tb.ethos_u85.driver import HostDriver
from tb.ethos_u85.ports import AXI_PORT_NAMES
from tb.ethos_u85.scoreboard import ApbScoreboard, Scoreboard  # noqa: F401 - old name
from tb.ethos_u85.tlm_pins import TlmPins, axi_execute
from tlm.ethos_u85 import registers as R
from tlm.ethos_u85 import DEVICE

# Inputs tied to their inactive level (TRM 5.1, 5.2, 5.6, 5.7, 5.10).
STATIC_INPUTS = {"nMBISTRESET": 1, "DBGEN": 0, "SPIDEN": 0, "WRSTQREQ": 0, "DBGHALTREQ": 0,
                 "DBGRESTARTREQ": 0, "DFTCGEN": 0, "DFTRSTDISABLE": 0, "DFTRAMHOLD": 0,
                 "MBISTREQ": 0, "PWRQREQn": 1, "CLKQREQn": 1, "PCLKEN": 1, "PWAKEUP": 0}

# Configuration pins and the bench's defaults: PROT comes up secure privileged; the CAP
# pins do not limit (64 reads, 32 writes, 256-byte bursts); no striping (one port a group).
_CAP = R.get("CFG_SRAM_CAP").encode(max_outstanding_read_m1=0x3F, max_outstanding_write_m1=0x1F, max_beats=2)
DEFAULT_PINS = {"PORPL": 1, "PORSL": 0, "CFGSRAMCAP": _CAP, "CFGEXTCAP": _CAP,
                "CFGSRAMHASH0": 0, "CFGSRAMHASH1": 0, "CFGEXTHASH0": 0}


class QChannelController:
    """Controller side of one Q-Channel (``CLK`` or ``PWR`` prefix, AMBA LPI)."""

    def __init__(self, dut, prefix: str, clock, pinmap=None):
        pm = PinMap.coerce(pinmap)
        self.name = prefix
        self.clock = clock
        self.qreqn = pm.get(dut, f"{prefix}QREQn", required=True)
        self.qacceptn = pm.get(dut, f"{prefix}QACCEPTn", required=True)
        self.qdeny = pm.get(dut, f"{prefix}QDENY", required=True)
        self.qactive = pm.get(dut, f"{prefix}QACTIVE", required=True)

    @classmethod
    def bind(cls, dut, prefix: str, clock, pinmap=None) -> "QChannelController | None":
        pm = PinMap.coerce(pinmap)
        names = ("QREQn", "QACCEPTn", "QDENY", "QACTIVE")
        if not all(pm.has(dut, prefix + n) for n in names):
            return None
        return cls(dut, prefix, clock, pm)

    async def _wait(self, cond: Callable[[], bool], limit: int, what: str) -> int:
        for n in range(limit):
            await FallingEdge(self.clock)
            if cond():
                await RisingEdge(self.clock)
                return n
            await RisingEdge(self.clock)
        raise TimeoutError(f"{self.name} Q-Channel: no {what} within {limit} cycles")

    async def request(self, limit: int = 100) -> str:
        """Q_RUN -> Q_REQUEST; return 'accepted' (Q_STOPPED) or 'denied' (Q_DENIED)."""
        self.qreqn.value = 0
        await self._wait(lambda: int(self.qacceptn.value) == 0 or int(self.qdeny.value) == 1,
                         limit, "QACCEPTn/QDENY")
        return "accepted" if int(self.qacceptn.value) == 0 else "denied"

    async def exit(self, limit: int = 100) -> None:
        """Back to Q_RUN (through Q_EXIT or Q_CONTINUE)."""
        self.qreqn.value = 1
        await self._wait(lambda: int(self.qacceptn.value) == 1 and int(self.qdeny.value) == 0,
                         limit, "return to Q_RUN")


class Env(EnvBase):
    def __init__(self, dut, *, config: str | None = None, pins: dict | None = None,
                 clk_period_ns: float = 10, dut_kind: str | None = None,
                 apb_wait_states: Callable[[], int] | None = None, memory=None,
                 scoreboard: bool = True, reference_model: bool | None = None, pinmap=None,
                 apb_monitor: bool = True, apb_source: str = "manager",
                 axi_monitor: "bool | str" = True, axi_source: str = "subordinate",
                 reference_factory: Callable | None = None, axi_impl: str | None = None,
                 bare: bool = False):
        if bare:        # what a bare cocotb bench has: clock, APB manager, AxiRam; no checks
            scoreboard, reference_model, apb_monitor, axi_monitor = False, False, False, False
            axi_impl = "bare"
        super().__init__(dut, pinmap=pinmap, dut_kind=dut_kind, config=config,
                         default_config=DEVICE.default_config, clk_period_ns=clk_period_ns)
        pm = self.pinmap
        self.pins = dict(DEFAULT_PINS)
        self.pins.update(pins or {})
        self.clock = pm.get(dut, "CLK", required=True)
        self.nreset = pm.get(dut, "nRESET", required=True)
        self.irq = pm.get(dut, "IRQ")
        if memory is None:
            memory = BenchMemory()
        self.memory = memory
        self.axi: AxiMemory | None = None           # built by start()
        self.apb = Apb5Manager.from_entity(dut, self.clock, pinmap=pm)
        # Passive monitor + protocol checker on the same pins; its wait-state bound is the
        # manager's timeout, so it accepts whatever the manager accepts.
        self.apb_monitor: ApbMonitor | None = (
            ApbMonitor.from_entity(dut, self.clock, pinmap=pm,
                                   max_wait_states=self.apb.timeout_cycles)
            if apb_monitor else None)
        if apb_source not in ("manager", "monitor") or (apb_source == "monitor"
                                                        and self.apb_monitor is None):
            raise ValueError(f"apb_source={apb_source!r}: 'manager', or 'monitor' with "
                             "apb_monitor=True")
        self.apb_source = apb_source
        self.clkq = QChannelController.bind(dut, "CLK", self.clock, pm)   # None if not present
        self.pwrq = QChannelController.bind(dut, "PWR", self.clock, pm)
        self.axi_ports = {p: s for p in AXI_PORT_NAMES if (s := port_signals(dut, p, pm))}
        # Passive AXI monitors, one a port (tb.agents.axi.AxiMonitor): handshake counts, VALID/payload
        # stability, bursts rebuilt from the pins.
        self.axi_monitors: dict = ({p: AxiMonitor(dut, p, self.clock, self.nreset, pinmap=pm,
                                                  log=self.log) for p in self.axi_ports}
                                   if axi_monitor else {})
        if axi_source not in ("subordinate", "monitor") or (axi_source == "monitor"
                                                            and not axi_monitor):
            raise ValueError(f"axi_source={axi_source!r}: 'subordinate', or 'monitor' with "
                             "axi_monitor=True")
        self.axi_source = axi_source
        self.axi_monitor = axi_monitor
        self.axi_impl = subordinate_impl(axi_impl)
        if self.axi_impl == "bare" and not bare:
            raise ValueError("axi_impl='bare' records no bursts for the scoreboard, monitors and "
                             "coverage: Env(..., bare=True) (TB_BENCH_BARE=1) only")
        self.tlm: TlmPins | None = None
        if self.dut_kind == "tlm":
            self.tlm = TlmPins(dut, config=self.config, memory=self.memory, clock=self.clock,
                               wait_states=apb_wait_states, execute=axi_execute, pinmap=pm)
        self._ref = None               # reference model for DUT != tlm
        # the reference model's factory (default: tb.ethos_u85.tlm_pins.default_device_factory),
        # e.g. tlm.ethos_u85.literal.literal_device: the literal paths as the scoreboard
        self.reference_factory = reference_factory
        self.use_reference = self.tlm is None if reference_model is None else reference_model
        self.scoreboard = Scoreboard(self.memory, self.log, irq_level=lambda: pin_int(self.irq, None),
                                     coverage=not bare)
        self._scoreboard_on = scoreboard and self.use_reference
        apb_feed = self.apb if apb_source == "manager" else self.apb_monitor
        if self._scoreboard_on:
            apb_feed.listeners.append(self.scoreboard)
        elif self.scoreboard.coverage is not None:     # no reference: still sample coverage
            apb_feed.listeners.append(self.scoreboard.coverage.sample_apb)
        self.driver = HostDriver(self)
        self._irq_task = None
        self._pclken_task = None

    # ------------------------------------------------------------------ handles
    @property
    def model(self):
        """The reference Device: the one behind the pins for DUT=tlm."""
        if self._ref is None and self.tlm is not None:
            return self.tlm.device
        return self._ref

    def add_monitor_listener(self, fn: Callable) -> None:
        """*fn(AxiBurst)* for every burst the AXI monitors rebuild, on every port."""
        for mon in self.axi_monitors.values():
            mon.listeners.append(fn)

    # ------------------------------------------------------------------ bring-up
    async def start(self, reset: bool = True) -> None:
        """Start CLK, drive the static and configuration inputs, attach the TLM (DUT=tlm);
        with *reset*, pulse nRESET and wait for the reset sequence to finish."""
        self.start_clock(self.clock)
        self.nreset.value = 0
        for name, value in STATIC_INPUTS.items():
            self.drive(name, value)
        if self.apb_monitor is not None:
            self.apb_monitor.start()
        for name, value in self.pins.items():
            self.drive(name, value)
        for sigs in self.axi_ports.values():     # AXI inputs idle until the subordinates bind
            for name, direction in AXI5_SIGNALS:
                if direction == "in" and name in sigs:
                    sigs[name].value = 1 if name == "ACLKEN" else 0
        self.axi = AxiMemory(self.dut, self.memory, clock=self.clock, reset=self.nreset,
                             ports=list(self.axi_ports), pinmap=self.pinmap,
                             clock_period_ns=self.clk_period_ns, impl=self.axi_impl)
        if self.axi.can_feed() and self.axi_source == "subordinate" and self.axi_monitor != "pins":
            self.axi.feed(self.axi_monitors)   # the monitors take the subordinates' samples
        for mon in self.axi_monitors.values():
            mon.start()                    # (a fed monitor has no loop of its own)
        add_listener = (self.axi.add_listener if self.axi_source == "subordinate"
                        else self.add_monitor_listener)
        if self._scoreboard_on:
            add_listener(self.scoreboard.on_burst)
            for sub in self.axi.ports.values():
                sub.outstanding_limit = self.scoreboard.outstanding_limit
            if self.irq is not None:
                self._irq_task = cocotb.start_soon(self._irq_monitor())
        elif self.scoreboard.coverage is not None:
            add_listener(self.scoreboard.coverage.sample_burst)
        if self.tlm is not None:
            self.tlm.start()
        if reset:
            await self.hard_reset()
            await self.wait_reset_done()

    async def hard_reset(self, cycles: int = 4, **pins) -> None:
        """Assert nRESET for *cycles*, with configuration pins updated from *pins*
        (TRM names, e.g. ``PORPL=0``); release it after a rising edge."""
        unknown = set(pins) - set(DEFAULT_PINS)
        if unknown:
            raise ValueError(f"unknown configuration pins {sorted(unknown)}")
        self.pins.update(pins)
        await RisingEdge(self.clock)
        self.scoreboard.enabled = False
        self.nreset.value = 0
        for name, value in self.pins.items():
            self.drive(name, value)
        await ClockCycles(self.clock, cycles)
        self.nreset.value = 1
        await ClockCycles(self.clock, 2)
        if self.use_reference:
            from tb.ethos_u85.tlm_pins import default_device_factory
            mirror = self.memory.snapshot() if isinstance(self.memory, BenchMemory) else None
            factory = self.reference_factory or default_device_factory()
            self._ref = factory(config=self.config, memory=mirror, pins=dict(self.pins))
            if hasattr(self._ref, "wait_reset"):
                self._ref.wait_reset()
            self.scoreboard.set_reference(self._ref)

    async def wait_reset_done(self, max_reads: int = 256) -> list[int]:
        """``driver.wait_reset``: poll STATUS until reset_status clears; the values read."""
        return await self.driver.wait_reset(max_reads)

    def set_pclken(self, pattern: Iterable[int] | None) -> None:
        """Drive PCLKEN from *pattern* (one value per CLK cycle, cycled); None ties it to 1."""
        if self._pclken_task is not None:
            self._pclken_task.cancel()
            self._pclken_task = None
        if pattern is None:
            self.drive("PCLKEN", 1)
            return
        values = list(pattern)
        pclken = self.pin("PCLKEN")

        async def drive():
            while True:
                for v in values:
                    await RisingEdge(self.clock)
                    pclken.value = v
        self._pclken_task = cocotb.start_soon(drive())

    # ------------------------------------------------------------------ shortcuts
    async def read(self, addr: int, prot: int = PROT_SECURE_PRIV) -> ApbResult:
        return await self.apb.read(addr, prot)

    async def write(self, addr: int, data: int, prot: int = PROT_SECURE_PRIV,
                    strb: int = 0xF) -> ApbResult:
        return await self.apb.write(addr, data, prot, strb)

    async def read_ok(self, addr: int, prot: int = PROT_SECURE_PRIV) -> int:
        r = await self.apb.read(addr, prot)
        assert not r.slverr, f"unexpected PSLVERR: {r}"
        return r.data

    async def write_ok(self, addr: int, data: int, prot: int = PROT_SECURE_PRIV) -> None:
        r = await self.apb.write(addr, data, prot)
        assert not r.slverr, f"unexpected PSLVERR: {r}"

    # ------------------------------------------------------------------ jobs
    async def _irq_monitor(self) -> None:
        while True:
            await RisingEdge(self.irq)
            self.scoreboard.on_irq_rise()

    # job shortcuts: the host driver's sequences (tb/driver.py)
    async def load_stream(self, addr: int, words, qconfig: int | None = None,
                          prot: int = PROT_SECURE_PRIV) -> None:
        await self.driver.load_job(addr, words, qconfig, prot=prot)

    async def start_npu(self, prot: int = PROT_SECURE_PRIV) -> None:
        await self.driver.run(prot)

    def bus_activity(self) -> str:
        """AXI beats so far and the last bursts the subordinates completed (for a hang report)."""
        bursts = self.axi.bursts()[-2:]
        last = "; ".join(f"{b} ended {b.end_ns:.0f} ns" for b in bursts) or "none"
        return f"AXI: {self.axi.beats()} beats moved, last bursts: {last}"

    async def wait_stopped(self, max_cycles: int = 20_000, poll: int = 8,
                           prot: int = PROT_SECURE_PRIV) -> int:
        return await self.driver.wait_stopped(max_cycles, poll, prot)

    async def run_job(self, max_cycles: int = 20_000, poll: int = 8,
                      use_irq: bool = False) -> int:
        """Start the NPU and wait until it stops (polling STATUS, or by the IRQ); STATUS."""
        return await self.driver.run_job(max_cycles, poll, use_irq)

    def finish(self) -> None:
        """End-of-test checks: adapter protocol errors, APB protocol errors seen by the
        monitor, AXI rule violations seen by the subordinates, and scoreboard mismatches."""
        if self.tlm is not None:
            assert not self.tlm.protocol_errors, ("APB protocol errors seen by the TLM adapter: "
                                                  f"{self.tlm.protocol_errors[:3]}")
        if self.apb_monitor is not None:
            errs = self.apb_monitor.errors
            assert not errs, (f"{len(errs)} APB protocol error(s) seen by the monitor, first: "
                              + "; ".join(str(e) for e in errs[:3]))
        if self.axi is not None:
            errs = self.axi.errors
            assert not errs, f"{len(errs)} AXI rule violation(s), first: {errs[0]}"
        errs = [e for m in self.axi_monitors.values() for e in m.errors]
        assert not errs, f"{len(errs)} AXI pin rule violation(s) seen by the monitors, first: {errs[0]}"
        self.scoreboard.check()
