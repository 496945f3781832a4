"""The TLM behind the pins: makes ``tlm.ethos_u85.device.Device`` look like an NPU to the bench (DUT=tlm).

``TlmPins`` is one cocotb coroutine attached to the port-only shell
(rtl_stub/ethos_u85/ethosu85_shell.v). Every cycle it

* holds the model in reset while ``nRESET`` is low and builds a fresh ``Device`` when it is
  released, with the configuration pins (PORPL, PORSL, CFGSRAMCAP, CFGEXTCAP, CFG*HASH*)
  sampled at release, as the TRM says the NPU does (TRM 5.2, 3.1.2);
* acts as the APB5 completer: each transfer is forwarded once to ``Device.apb_read`` /
  ``Device.apb_write`` with its PADDR, PWDATA, PSTRB and PPROT, and PRDATA/PSLVERR come back
  on the pins, optionally after wait states (``wait_states``); PCLKEN qualifies APB edges;
* drives ``IRQ`` from ``Device.irq``;
* answers the clock and power Q-Channels (CLKQ*/PWRQ*): a request is accepted when the
  device is idle and denied when it is running or busy (policy of the digest, D13.3);
  WRSTQACK follows WRSTQREQ once no AXI transaction of the device is in flight, and while
  WRSTQREQ is high no new one starts (warm-reset halt, TRM 5.6);
* when the device enters RUNNING, hands it to the execution hook ``execute`` (see below).

Binding: every pin is looked up by its TRM name through the pin map (tb/core/pinmap.py;
``TlmPins(dut, pinmap=...)``, else ``TB_PINMAP``, else the names themselves); an output is
written through the shell's ``tlm_<name>`` variable next to the mapped pin when there is one.

Timing: like the bench's agents (tb/apb.py) the adapter samples its inputs at the falling
edge of CLK and drives its outputs right after the rising edge, so it looks like registered
logic and never races with another Python agent.

AXI hook
--------
``execute(pins)`` is an ``async`` callable awaited (in its own task) each time the device
starts running. ``backdoor_execute`` (the default of a bare ``TlmPins``) calls
``Device.run()``, so the device fetches and computes on its own memory in zero simulated time
while the AXI manager outputs of the shell stay idle.

``axi_execute`` (what ``tb.ethos_u85.env.Env`` uses) puts every memory access of the device on the AXI
pins. The device runs in a lock-step thread (``LockstepThread``): each front-door access of
its memory (a ``tb.agents.axi.BenchMemory``; every command fetch, IFM/weight/scale read, OFM or DMA
write is one ``tlm.ethos_u85.memory.Transaction``) suspends the thread while ``TlmAxiManager`` performs
it on the port named by ``Transaction.port`` (AR/R or AW/W/B), with AxPROT/AxCACHE/AxDOMAIN
from the transaction, AxID = the TRM ``pmu_axi_channel`` of the access, bursts of 16-byte
beats split at the ``Device.burst_boundary`` of the port group (AXI_SRAM/AXI_EXT
max_beats, never across 4 KB), up to ``Device.max_outstanding`` bursts in flight. Read data
comes from the pins, so the bench's AXI subordinates are the only memory; an error response
(SLVERR/DECERR) reaches the device as the ``BusFault`` it would see from its own memory
model, so STATUS.bus_status/faulting_interface/faulting_channel come out of the TLM's own
logic. Only one side runs at a time, so the run is deterministic. nRESET, a soft reset or
the end of the test abandon the operation in flight (after its current burst).
"""
from __future__ import annotations

import importlib
import logging
import os
import threading
from collections import deque
from typing import Awaitable, Callable

import cocotb
from cocotb.triggers import FallingEdge, RisingEdge

from tb.agents.axi import AXI5_SIGNALS, pin_int, port_drivers
from tb.core.lockstep import LockstepThread
from tb.core.pinmap import PinMap
from tb.ethos_u85.ports import AXI_PORT_NAMES
from tlm.ethos_u85 import registers as R

CONFIG_PINS = ("PORPL", "PORSL", "CFGSRAMCAP", "CFGEXTCAP", "CFGSRAMHASH0", "CFGSRAMHASH1",
               "CFGEXTHASH0")
STATUS = R.get("STATUS")


def status_fields(status) -> dict:
    """STATUS as ``{field: int}`` (the register table's fields) from a word, a mapping or an
    object with attributes."""
    if isinstance(status, int):
        return STATUS.decode(status)
    if hasattr(status, "items"):
        return {k: int(v) for k, v in status.items()}
    return {f.name: int(getattr(status, f.name, 0)) for f in STATUS.fields}


def default_device_factory() -> Callable:
    """``tlm.ethos_u85.device.Device``; ``TB_DEVICE_FACTORY=module:callable`` points the bench at
    another model with the same API."""
    spec = os.environ.get("TB_DEVICE_FACTORY")
    if spec:
        mod, _, name = spec.partition(":")
        return getattr(importlib.import_module(mod), name or "Device")
    from tlm.ethos_u85.device import Device
    return Device


async def backdoor_execute(pins: "TlmPins") -> None:
    """Default execution hook: run the device on its own memory, in zero simulated time."""
    dev = pins.device
    if dev is not None:
        dev.run()


class TlmAxiManager:
    """AXI manager for the TLM on the shell's ports: performs one ``Transaction`` at a time.

    Bench timing convention (tb/apb.py): drives right after a rising edge of CLK, samples at
    the falling edge before the rising edge of interest; ACLKEN qualifies edges.
    """

    BEAT = 16                                    # 128-bit data bus

    def __init__(self, ports: dict, clock, log=None):
        self.ports = ports                         # name -> {signal: handle} (outputs: tlm_*)
        self.clock = clock
        self.log = log or logging.getLogger("cocotb.tb.tlm_axi")
        self.bursts = 0
        self.beats = 0
        self.busy = False
        # (beat, beats, strb, last) -> (strb, last): the bench's self-check plants W-beat
        # protocol bugs here (tb/ethos_u85/testlib/bugs.py); None drives the beats as computed
        self.w_beat_hook = None
        for sigs in ports.values():
            self._idle(sigs)

    @staticmethod
    def _idle(sigs) -> None:
        for name, direction in AXI5_SIGNALS:
            if direction == "out" and name in sigs:
                sigs[name].value = 0

    def idle(self) -> None:
        for sigs in self.ports.values():
            self._idle(sigs)

    @staticmethod
    def split(addr: int, length: int, boundary: int) -> list:
        """(address, bytes) bursts: never across a multiple of *boundary* (<= 4 KB)."""
        boundary = max(TlmAxiManager.BEAT, min(int(boundary), 4096))
        out, a, end = [], addr, addr + length
        while a < end:
            n = min(end, a - a % boundary + boundary) - a
            out.append((a, n))
            a += n
        return out

    async def transfer(self, txn, data, boundary: int, max_reads: int = 1, max_writes: int = 1,
                       abort: "Callable[[], bool] | None" = None):
        """Perform *txn* on its port. Returns (resp, numpy uint8 data or None). When
        *abort()* turns true no further burst is issued; those in flight complete (the
        result is then meaningless and SLVERR)."""
        self._abort = abort or (lambda: False)
        import numpy as np

        from tlm.ethos_u85.memory import Resp
        sigs = self.ports.get(txn.port)
        if sigs is None or txn.length <= 0:
            # a port the design does not have: the interconnect answers DECERR
            return (Resp.DECERR if sigs is None else Resp.OKAY), \
                (None if txn.write or sigs is None else np.zeros(0, np.uint8))
        bursts = self.split(txn.addr, txn.length, boundary)
        if "AWAKEUP" in sigs:
            sigs["AWAKEUP"].value = 1
        self.busy = True
        try:
            if txn.write:
                buf = bytes(data) if not isinstance(data, np.ndarray) else data.tobytes()
                resp = await self._write(sigs, txn, bursts, buf, max(1, max_writes))
                return resp, None
            resp, out = await self._read(sigs, txn, bursts, max(1, max_reads))
            return resp, (np.frombuffer(bytes(out), np.uint8) if resp == Resp.OKAY else None)
        finally:
            self.busy = False
            self._idle(sigs)

    def _beats(self, a: int, n: int) -> int:
        return (a % self.BEAT + n + self.BEAT - 1) // self.BEAT

    async def _read(self, sigs, txn, bursts, max_out):
        from tlm.ethos_u85.memory import Resp
        B = self.BEAT
        tid = int(txn.channel) & 0x3F
        out = bytearray(txn.length)
        resp = Resp.OKAY
        ar_i, r_i, beat, outstanding = 0, 0, 0, 0
        ar_valid = False
        aclken = sigs.get("ACLKEN")
        sigs["RREADY"].value = 1
        while r_i < ar_i or ar_valid or (ar_i < len(bursts) and not self._abort()):
            if not ar_valid and ar_i < len(bursts) and outstanding < max_out and not self._abort():
                a, n = bursts[ar_i]
                sigs["ARID"].value = tid
                sigs["ARADDR"].value = a
                sigs["ARLEN"].value = self._beats(a, n) - 1
                sigs["ARSIZE"].value = 4
                sigs["ARBURST"].value = 1
                sigs["ARCACHE"].value = txn.cache & 0xF
                sigs["ARPROT"].value = txn.prot & 0x7
                if "ARDOMAIN" in sigs:
                    sigs["ARDOMAIN"].value = txn.domain & 0x3
                sigs["ARVALID"].value = 1
                ar_valid = True
            await FallingEdge(self.clock)
            en = pin_int(aclken, 1)
            arready = pin_int(sigs["ARREADY"], 0)
            rvalid = pin_int(sigs["RVALID"], 0)
            if rvalid:
                rdata, rresp = sigs["RDATA"].value, pin_int(sigs["RRESP"], 3)
                rlast, rid = pin_int(sigs["RLAST"], 0), pin_int(sigs["RID"], None)
            await RisingEdge(self.clock)
            if not en:
                continue
            if ar_valid and arready:
                ar_valid = False
                sigs["ARVALID"].value = 0
                ar_i += 1
                outstanding += 1
                self.bursts += 1
            if rvalid:
                if r_i >= ar_i:
                    self.log.error("R beat with no read outstanding on %s", txn.port)
                    continue
                a, n = bursts[r_i]
                nbeats = self._beats(a, n)
                if rid != tid:
                    self.log.error("%s: RID %s, expected %d", txn.port, rid, tid)
                word = (a - a % B) + beat * B
                lo, hi = max(a, word), min(a + n, word + B)
                try:
                    chunk = int(rdata).to_bytes(B, "little")
                except ValueError:
                    chunk = bytes(B)
                    if rresp == 0:
                        rresp = int(Resp.SLVERR)
                        self.log.error("%s: X/Z on RDATA with RRESP OKAY", txn.port)
                out[lo - txn.addr:hi - txn.addr] = chunk[lo - word:hi - word]
                if rresp not in (0, 1) and resp == Resp.OKAY:
                    resp = Resp(rresp)
                self.beats += 1
                beat += 1
                if beat == nbeats or rlast:
                    if bool(rlast) != (beat == nbeats):
                        self.log.error("%s: RLAST=%d on beat %d of %d", txn.port, rlast, beat, nbeats)
                    beat = 0
                    r_i += 1
                    outstanding -= 1
        sigs["RREADY"].value = 0
        if r_i < len(bursts):
            resp = Resp.SLVERR                    # abandoned
        return resp, out

    async def _write(self, sigs, txn, bursts, buf, max_out):
        from tlm.ethos_u85.memory import Resp
        B = self.BEAT
        tid = int(txn.channel) & 0x3F
        resp = Resp.OKAY
        aw_i, w_i, w_beat, b_n, outstanding = 0, 0, 0, 0, 0
        aw_valid = w_valid = False
        aclken = sigs.get("ACLKEN")
        sigs["BREADY"].value = 1
        while b_n < aw_i or aw_valid or w_valid or w_i < aw_i or \
                (aw_i < len(bursts) and not self._abort()):
            if not aw_valid and aw_i < len(bursts) and outstanding < max_out and not self._abort():
                a, n = bursts[aw_i]
                sigs["AWID"].value = tid
                sigs["AWADDR"].value = a
                sigs["AWLEN"].value = self._beats(a, n) - 1
                sigs["AWSIZE"].value = 4
                sigs["AWBURST"].value = 1
                sigs["AWCACHE"].value = txn.cache & 0xF
                sigs["AWPROT"].value = txn.prot & 0x7
                if "AWDOMAIN" in sigs:
                    sigs["AWDOMAIN"].value = txn.domain & 0x3
                sigs["AWVALID"].value = 1
                aw_valid = True
            # W beats of a burst whose AW has been presented
            if not w_valid and w_i < len(bursts) and (w_i < aw_i or (aw_valid and w_i == aw_i)):
                a, n = bursts[w_i]
                word = a - a % B + w_beat * B
                lo, hi = max(a, word), min(a + n, word + B)
                chunk = bytearray(B)
                chunk[lo - word:hi - word] = buf[lo - txn.addr:hi - txn.addr]
                strb = ((1 << (hi - lo)) - 1) << (lo - word)
                last = int(w_beat == self._beats(a, n) - 1)
                if self.w_beat_hook is not None:
                    strb, last = self.w_beat_hook(w_beat, self._beats(a, n), strb, last)
                sigs["WDATA"].value = int.from_bytes(chunk, "little")
                sigs["WSTRB"].value = strb
                sigs["WLAST"].value = last
                sigs["WVALID"].value = 1
                w_valid = True
            await FallingEdge(self.clock)
            en = pin_int(aclken, 1)
            awready = pin_int(sigs["AWREADY"], 0)
            wready = pin_int(sigs["WREADY"], 0)
            bvalid = pin_int(sigs["BVALID"], 0)
            if bvalid:
                bresp, bid = pin_int(sigs["BRESP"], 3), pin_int(sigs["BID"], None)
            await RisingEdge(self.clock)
            if not en:
                continue
            if aw_valid and awready:
                aw_valid = False
                sigs["AWVALID"].value = 0
                aw_i += 1
                outstanding += 1
                self.bursts += 1
            if w_valid and wready:
                w_valid = False
                sigs["WVALID"].value = 0
                self.beats += 1
                a, n = bursts[w_i]
                w_beat += 1
                if w_beat == self._beats(a, n):
                    w_beat = 0
                    w_i += 1
            if bvalid:
                if b_n >= aw_i:
                    self.log.error("%s: B response with no write outstanding", txn.port)
                    continue
                if bid != tid:
                    self.log.error("%s: BID %s, expected %d", txn.port, bid, tid)
                if bresp not in (0, 1) and resp == Resp.OKAY:
                    resp = Resp(bresp)
                b_n += 1
                outstanding -= 1
        sigs["BREADY"].value = 0
        if b_n < len(bursts):
            resp = Resp.SLVERR                    # abandoned
        return resp


async def axi_execute(pins: "TlmPins") -> None:
    """Execution hook: run the device with every memory access performed on the AXI pins
    (see the module docstring). Falls back to ``backdoor_execute`` when the device's memory
    is not a ``tb.agents.axi.BenchMemory`` or the design has no AXI port."""
    from tb.agents.axi import BenchMemory
    dev = pins.device
    if dev is None:
        return
    mem = dev.memory
    if not isinstance(mem, BenchMemory) or not pins.axi_ports:
        await backdoor_execute(pins)
        return
    mgr = pins.axi_manager

    def body():
        ident = threading.get_ident()
        mem.attach(ident, lambda txn, data: worker.call((txn, data)))
        try:
            return dev.run()
        finally:
            mem.detach(ident)

    worker = LockstepThread(body, name="tlm-device")
    pins._worker = worker
    pins._abort_requested = False
    msg = None
    try:
        msg = worker.start()
        while msg[0] == "call":
            txn, data = msg[1]
            while pins._wrstqreq and not pins._abort_requested:      # warm-reset halt
                await RisingEdge(pins.clock)
            iface = txn.interface
            rd, wr = dev.max_outstanding(iface)
            result = await mgr.transfer(txn, data, dev.burst_boundary(iface), rd, wr,
                                        abort=lambda: pins._abort_requested)
            if pins._abort_requested or pins.device is not dev:
                break
            msg = worker.reply(result)
    finally:
        worker.abort()
        pins._worker = None
        mgr.idle()
    if msg is not None and msg[0] == "error":
        raise msg[1]


class _QChannel:
    """Device side of one Q-Channel (AMBA LPI): Q_RUN, Q_STOPPED, Q_DENIED."""
    RUN, STOPPED, DENIED = "Q_RUN", "Q_STOPPED", "Q_DENIED"

    def __init__(self, dut, prefix: str, pinmap=None):
        pm = PinMap.coerce(pinmap)
        self.name = prefix
        self.qreqn = pm.get(dut, f"{prefix}QREQn")
        self.qacceptn = pm.driver(dut, f"{prefix}QACCEPTn")
        self.qdeny = pm.driver(dut, f"{prefix}QDENY")
        self.qactive = pm.driver(dut, f"{prefix}QACTIVE")
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
                 clock=None, name: str = "tlm_pins", pinmap=None):
        self.dut = dut
        self.pinmap = pm = PinMap.coerce(pinmap)
        self.clock = clock if clock is not None else pm.get(dut, "CLK", required=True)
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
        # Test-only fault hook (tb/ethos_u85/tests/test_apb_protocol.py): fn(self, phase) right after
        # the adapter drives PREADY/PSLVERR/PRDATA, phase "respond" (completion) or "idle"
        # (dropped after it); it may overwrite those pins to break a completer rule.
        self.apb_fault: Callable[["TlmPins", str], None] | None = None
        self.clkq = _QChannel(dut, "CLK", pm)
        self.pwrq = _QChannel(dut, "PWR", pm)
        self.axi_ports = {p: s for p in AXI_PORT_NAMES if (s := port_drivers(dut, p, pm))}
        self.pready, self.pslverr, self.prdata = (pm.driver(dut, n) for n in ("PREADY", "PSLVERR",
                                                                              "PRDATA"))
        self.irq = pm.driver(dut, "IRQ")
        self.wrstqack = pm.driver(dut, "WRSTQACK")
        self.dbghaltack = pm.driver(dut, "DBGHALTACK")
        # inputs sampled every cycle, and the configuration pins, resolved once
        self._inputs = {n: pm.get(dut, n) for n in (
            "nRESET", "PCLKEN", "PSEL", "PENABLE", "PWRITE", "PADDR", "PWDATA", "PSTRB", "PPROT",
            "PWAKEUP", "WRSTQREQ")}
        self._cfg_pins = {n: h for n in CONFIG_PINS if (h := pm.get(dut, n)) is not None}
        self.cycles = 0
        self._task = None
        self._exec_task = None
        self._apb_state = "idle"
        self._apb_waits = 0
        self._in_reset = True
        self._tick = None
        self._wrstqreq = False
        self._worker: LockstepThread | None = None
        self._abort_requested = False
        self._axi_manager: TlmAxiManager | None = None

    @property
    def axi_manager(self) -> TlmAxiManager:
        """The AXI manager that ``axi_execute`` drives the shell's AXI outputs with."""
        if self._axi_manager is None:
            self._axi_manager = TlmAxiManager(self.axi_ports, self.clock)
        return self._axi_manager

    @property
    def executing(self) -> bool:
        return self._exec_task is not None and not self._exec_task.done()

    # ------------------------------------------------------------------ control
    def start(self):
        self._drive_reset_outputs(None, None)
        self._task = cocotb.start_soon(self._run())
        return self._task

    def stop(self) -> None:
        self._abort_requested = True
        for t in (self._exec_task, self._task):
            if t is not None and not t.done():
                t.cancel()

    def axi_idle(self) -> None:
        for sigs in self.axi_ports.values():
            for name, direction in AXI5_SIGNALS:
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
        s = {n: pin_int(h, None) for n, h in self._inputs.items()}
        s["CLKQREQn"] = pin_int(self.clkq.qreqn, None)
        s["PWRQREQn"] = pin_int(self.pwrq.qreqn, None)
        return s

    def _config_pins(self) -> dict:
        pins = {}
        for n, h in self._cfg_pins.items():
            v = pin_int(h, None)
            if v is not None:
                pins[n] = v
        return pins

    def _new_device(self):
        kwargs = dict(self.device_kwargs)
        kwargs.setdefault("config", self.config)
        kwargs.setdefault("memory", self.memory)
        kwargs.setdefault("pins", self._config_pins())
        if "policy" not in kwargs and self.device_factory.__module__ == "tlm.ethos_u85.device":
            # Behind the pins model time is CLK: the adapter ticks the device once a cycle,
            # so an APB transfer costs its real cycles and nothing more.
            from tlm.ethos_u85.config import Policy
            kwargs["policy"] = Policy().replace(apb_cycles=0)
        dev = self.device_factory(**kwargs)
        self._tick = getattr(dev, "tick", None)
        if isinstance(getattr(dev, "hooks", None), list):
            dev.hooks.append(self._on_device_event)
        for fn in self.on_reset:
            fn(dev)
        return dev

    def _on_device_event(self, event: str, details: dict) -> None:
        # A soft reset (RESET write) while an operation is on the pins abandons it after the
        # burst in flight, as the NPU stops issuing transactions.
        if event == "reset" and self._worker is not None:
            self._abort_requested = True

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
                self._abort_requested = True
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
        if clock_on and self._tick is not None and not self.executing:
            self._tick(1)        # while executing, the device counts its own cycles
        if self.clkq.qactive is not None:
            self.clkq.qactive.value = int(not self._idle_for(True, 0) or bool(pwakeup))
        if self.pwrq.qactive is not None:
            self.pwrq.qactive.value = int(not self._idle_for(False, 0))
        self._wrstqreq = bool(s["WRSTQREQ"])
        if self.wrstqack is not None:
            busy = self._axi_manager is not None and self._axi_manager.busy
            self.wrstqack.value = int(self._wrstqreq and not busy)

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
            if self.apb_fault is not None:
                self.apb_fault(self, "idle")
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
        if self.apb_fault is not None:
            self.apb_fault(self, "respond")
