"""APB5 manager agent (AMBA APB protocol issue E: PPROT, PSTRB, PSLVERR, PWAKEUP).

A small agent written for this bench rather than cocotbext-axi's ``ApbMaster``: that one
aligns every access down to a word address, so it cannot put an unaligned PADDR on the bus
(the U85 must answer those with PSLVERR), and it has no PCLKEN or PWAKEUP.

Timing convention, used by every agent in tb/ and by the TLM-behind-pins adapter:

* the bench **drives** right after a rising edge of CLK;
* the bench **samples** at the falling edge before the rising edge it is interested in.

Between those two points every pin is stable, on an event simulator (Icarus) and on a
cycle simulator (Verilator, where a RisingEdge resumes after the edge has been evaluated)
alike, and two Python agents that talk through pins (manager and TLM adapter) never race.
PCLKEN qualifies edges: an edge at which PCLKEN was low is not an APB edge.

Usage::

    apb = Apb5Manager.from_entity(dut)            # binds PADDR, PSEL, ... by TRM name (pin map)
    r = await apb.read(0x000)                     # ApbResult(data=..., slverr=...)
    r = await apb.write(0x010, 0x1000, prot=0b011, strb=0xF)

    mon = ApbMonitor.from_entity(dut)             # passive: reads the same pins, drives none
    mon.start()
    mon.listeners.append(fn)                      # every completed transfer, as an ApbResult
    assert not mon.errors, mon.errors[:3]         # protocol violations (ApbViolation)

``ApbMonitor`` rebuilds every completed transfer from the pins, whoever drives them (this
manager or another bench's), and checks the AMBA APB (issue E) rules that can be seen on
pins, plus what the Ethos-U85 TRM adds (5.9: completer outputs held while PCLKEN is low;
3.1.1: PRDATA is 0 on a read with PSLVERR). ``ApbMonitor.RULES`` lists them.
"""
from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import Callable, Iterable

import cocotb
from cocotb.triggers import Event, FallingEdge, Lock, RisingEdge

# PPROT encodings (APB5): bit 0 privileged, bit 1 non-secure, bit 2 instruction.
PROT_SECURE_PRIV = 0b001
PROT_SECURE_USER = 0b000
PROT_NONSECURE_PRIV = 0b011
PROT_NONSECURE_USER = 0b010


class ApbTimeout(Exception):
    """The completer held PREADY low for longer than the agent's limit."""


@dataclass(frozen=True)
class ApbResult:
    """One completed APB transfer, as seen on the pins."""
    addr: int
    write: bool
    data: int            # PWDATA for a write, PRDATA for a read
    slverr: bool
    prot: int
    strb: int
    wait_states: int     # PCLKEN-qualified cycles with PREADY low in the access phase

    def __str__(self) -> str:
        kind = "W" if self.write else "R"
        err = " SLVERR" if self.slverr else ""
        return (f"APB {kind} 0x{self.addr:04x} data=0x{self.data:08x} prot={self.prot:03b} "
                f"strb={self.strb:04b} waits={self.wait_states}{err}")


class Apb5Manager:
    """Drives an APB5 completer. Transfers are serialised; concurrent callers queue up."""

    # TRM chapter 5 names of the APB5 completer pins of the NPU.
    SIGNALS = ("PADDR", "PSEL", "PENABLE", "PWRITE", "PWDATA", "PSTRB", "PPROT",
               "PRDATA", "PREADY", "PSLVERR")
    OPTIONAL = ("PWAKEUP", "PCLKEN")

    def __init__(self, clock, *, paddr, psel, penable, pwrite, pwdata, prdata, pready,
                 pstrb=None, pprot=None, pslverr=None, pwakeup=None, pclken=None,
                 name: str = "apb", timeout_cycles: int = 1000, wakeup_lead: int = 1):
        self.clock = clock
        self.paddr, self.psel, self.penable, self.pwrite = paddr, psel, penable, pwrite
        self.pwdata, self.prdata, self.pready = pwdata, prdata, pready
        self.pstrb, self.pprot, self.pslverr = pstrb, pprot, pslverr
        self.pwakeup, self.pclken = pwakeup, pclken
        self.log = logging.getLogger(f"cocotb.tb.{name}")
        self.addr_width = len(paddr)
        self.data_width = len(pwdata)
        self.timeout_cycles = timeout_cycles
        self.wakeup_lead = wakeup_lead
        self.listeners: list[Callable[[ApbResult], None]] = []
        self.transfers: deque[ApbResult] = deque(maxlen=100_000)   # recent history
        self.keep_history = True
        self._lock = Lock()
        self._pending = 0

        self.psel.value = 0
        self.penable.value = 0
        self.pwrite.value = 0
        self.paddr.value = 0
        self.pwdata.value = 0
        if self.pstrb is not None:
            self.pstrb.value = 0
        if self.pprot is not None:
            self.pprot.value = 0
        if self.pwakeup is not None:
            self.pwakeup.value = 0

    @classmethod
    def from_entity(cls, entity, clock=None, prefix: str = "", pinmap=None,
                    **kwargs) -> "Apb5Manager":
        """Bind to the TRM pins ``{prefix}PADDR`` ... of *entity* through the pin map
        (tb/core/pinmap.py: *pinmap*, else ``TB_PINMAP``, else the names themselves); clock
        defaults to ``CLK``."""
        from tb.core.pinmap import PinMap
        pm = PinMap.coerce(pinmap)

        def get(name, required=True):
            return pm.get(entity, prefix + name, required=required)
        sigs = {n.lower(): get(n, n not in ("PSTRB", "PPROT", "PSLVERR")) for n in cls.SIGNALS}
        sigs.update({n.lower(): get(n, False) for n in cls.OPTIONAL})
        return cls(clock if clock is not None else pm.get(entity, "CLK", required=True), **sigs,
                   **kwargs)

    # ------------------------------------------------------------------ public API
    async def read(self, addr: int, prot: int = PROT_SECURE_PRIV) -> ApbResult:
        """One read transfer. PSTRB is driven 0, as APB requires for reads."""
        return await self._transfer(addr, False, 0, prot, 0)

    async def write(self, addr: int, data: int, prot: int = PROT_SECURE_PRIV,
                    strb: int = 0xF) -> ApbResult:
        """One write transfer with the given PSTRB (sub-word strobes are legal APB)."""
        return await self._transfer(addr, True, data, prot, strb)

    @property
    def idle(self) -> bool:
        return self._pending == 0

    # ------------------------------------------------------------------ internals
    async def _sample_edge(self) -> bool:
        """Wait for the next rising edge; return whether it was a PCLKEN-qualified edge.

        PCLKEN is sampled at the falling edge before (see the module docstring)."""
        await FallingEdge(self.clock)
        en = True if self.pclken is None else bool(self.pclken.value)
        await RisingEdge(self.clock)
        return en

    async def _apb_edge(self) -> None:
        while not await self._sample_edge():
            pass

    async def _transfer(self, addr: int, write: bool, data: int, prot: int, strb: int) -> ApbResult:
        if not 0 <= addr < (1 << self.addr_width):
            raise ValueError(f"APB address 0x{addr:x} does not fit PADDR[{self.addr_width - 1}:0]")
        if not 0 <= data < (1 << self.data_width):
            raise ValueError(f"APB data 0x{data:x} does not fit PWDATA[{self.data_width - 1}:0]")
        if self.pprot is None and prot != 0:
            raise ValueError("PPROT is not connected")
        if self.pstrb is None and write and strb != 0xF:
            raise ValueError("PSTRB is not connected")
        self._pending += 1
        try:
            async with self._lock:
                return await self._do_transfer(addr, write, data, prot, strb)
        finally:
            self._pending -= 1
            if self._pending == 0 and self.pwakeup is not None:
                self.pwakeup.value = 0

    async def _do_transfer(self, addr, write, data, prot, strb) -> ApbResult:
        # PWAKEUP ahead of PSEL, so a clock-gated completer can ask for its clock back.
        if self.pwakeup is not None and not self.pwakeup.value:
            self.pwakeup.value = 1
            for _ in range(self.wakeup_lead):
                await self._apb_edge()
        await self._apb_edge()
        # Setup phase.
        self.paddr.value = addr
        self.pwrite.value = int(write)
        self.pwdata.value = data if write else 0
        if self.pstrb is not None:
            self.pstrb.value = strb if write else 0
        if self.pprot is not None:
            self.pprot.value = prot
        self.psel.value = 1
        self.penable.value = 0
        await self._apb_edge()
        # Access phase: hold until an APB edge sees PREADY high.
        self.penable.value = 1
        waits = 0
        while True:
            await FallingEdge(self.clock)
            en = True if self.pclken is None else bool(self.pclken.value)
            ready = bool(self.pready.value)
            if ready:
                try:
                    rdata = int(self.prdata.value) if not write else data
                    slverr = bool(int(self.pslverr.value)) if self.pslverr is not None else False
                except ValueError:
                    raise ValueError(f"APB {'write' if write else 'read'} 0x{addr:04x}: X/Z on "
                                     f"PRDATA/PSLVERR when PREADY is high") from None
            await RisingEdge(self.clock)
            if not en:
                continue
            if ready:
                break
            waits += 1
            if waits > self.timeout_cycles:
                self.psel.value = 0
                self.penable.value = 0
                raise ApbTimeout(f"APB {'write' if write else 'read'} 0x{addr:04x}: PREADY low "
                                 f"for {waits} cycles")
        self.psel.value = 0
        self.penable.value = 0
        result = ApbResult(addr, write, rdata, slverr, prot, strb if write else 0, waits)
        self.log.debug("%s", result)
        if self.keep_history:
            self.transfers.append(result)
        for fn in self.listeners:
            fn(result)
        return result


# ====================================================================== passive monitor
@dataclass(frozen=True)
class ApbViolation:
    """One protocol rule broken on the pins. *time_ns* is the sample that showed it: the
    falling edge of CLK before the APB edge concerned (see the timing convention above)."""
    time_ns: float
    rule: str            # a key of ApbMonitor.RULES
    side: str            # "manager" (requester/interconnect) or "completer"
    message: str

    def __str__(self) -> str:
        return f"{self.time_ns:.1f} ns [{self.side} {self.rule}] {self.message}"


def _read(handle):
    """Integer value of a pin, or None when a bit is X/Z."""
    try:
        return int(handle.value)
    except ValueError:
        return None


def _raw(handle):
    """Integer value of a pin, or its bit string when a bit is X/Z (for comparisons)."""
    v = handle.value
    try:
        return int(v)
    except ValueError:
        return str(v)


def _x_to_0(bits: str) -> int:
    return int("".join(c if c in "01" else "0" for c in bits), 2)


class ApbMonitor:
    """Passive APB5 monitor and protocol checker (binds by TRM names, drives nothing).

    Every CLK cycle it samples the pins at the falling edge (the values the next rising edge
    will see); an edge counts for APB only when PCLKEN was high (TRM 5.9). While the bus is
    idle (no transfer in flight, PSEL low, PCLKEN high) it does not sample every edge: it
    sleeps until PSEL, PENABLE, PSLVERR, PCLKEN or the reset pin changes and samples again at
    the next falling edge. Samples of unchanged pins in that state give no new record (see
    ``_quiet``), so the checks and transfers are those of sampling every edge; with PCLKEN
    low it samples every edge (``sleep_when_idle = False``: always). It rebuilds each
    completed transfer -- setup phase (PSEL high, PENABLE low), access phase, wait states
    (qualified access edges with PREADY low) -- as an ``ApbResult`` equal to the one the
    manager that drove it returns, appends it to ``transfers`` and calls every ``listeners``
    entry with it. A transfer is reported at the sample that shows PREADY high on a
    qualified access edge, i.e. half a cycle before that edge completes it, so listeners
    run before the driving agent's ``read``/``write`` returns (as the manager's own do).

    Violations go to ``errors`` / ``warnings`` (``ApbViolation``, with sim time, rule and
    message); ``RULES`` describes each rule, ``disable`` switches rules off, ``take(rule)``
    removes and returns the records of a rule (for tests that break it on purpose), ``clear``
    forgets all. Nothing is checked while the reset pin (``nRESET``) is asserted.
    """

    SIGNALS = Apb5Manager.SIGNALS
    OPTIONAL = Apb5Manager.OPTIONAL

    # rule: (side, severity, what it checks)
    RULES = {
        "penable-without-setup": ("manager", "error",
            "PSEL and PENABLE high at an APB edge not preceded by a setup phase (PSEL high, "
            "PENABLE low) or a wait state of the same transfer"),
        "no-access-phase": ("manager", "error",
            "the APB edge after a setup phase must be an access phase (PSEL, PENABLE high)"),
        "penable-without-psel": ("manager", "error", "PENABLE high while PSEL is low"),
        "dropped-before-pready": ("manager", "error",
            "PSEL or PENABLE deasserted in the access phase before PREADY"),
        "unstable": ("manager", "error",
            "PADDR, PWRITE, PPROT, PSTRB (and PWDATA of a write) changed between the setup "
            "phase and the completing edge"),
        "pstrb-on-read": ("manager", "error", "PSTRB not all zero in a read transfer"),
        "x-control": ("manager", "error",
            "X/Z on PSEL, or while PSEL is high on PENABLE, PADDR, PWRITE, PPROT, PSTRB, or "
            "on the PSTRB-enabled byte lanes of PWDATA in a write"),
        "x-pclken": ("manager", "error", "X/Z on PCLKEN out of reset"),
        "pwakeup-dropped": ("manager", "error",
            "PWAKEUP high at the setup phase but low before the transfer completed (APB5)"),
        "x-pready": ("completer", "error", "X/Z on PREADY in the access phase"),
        "x-response": ("completer", "error",
            "X/Z on PSLVERR, or on PRDATA of a read, at the completing edge"),
        "pready-timeout": ("completer", "error",
            "PREADY low for more than max_wait_states qualified access edges (a bench "
            "limit: the TRM gives none, and lets the NPU delay an access until its reset "
            "sequence ends, 3.1.1)"),
        "pclken-hold": ("completer", "error",
            "PREADY, PSLVERR or PRDATA changed across a CLK edge at which PCLKEN was low "
            "(TRM 5.9: outputs held stable when PCLKEN is low)"),
        "prdata-on-error": ("completer", "error",
            "a read answered with PSLVERR must return PRDATA = 0 (TRM 3.1.1)"),
        "pslverr-not-sampled": ("completer", "warning",
            "PSLVERR high at an APB edge that does not complete a transfer (APB recommends "
            "driving it low when it is not sampled; the TRM says nothing more)"),
    }

    def __init__(self, clock, *, paddr, psel, penable, pwrite, pwdata, prdata, pready,
                 pstrb=None, pprot=None, pslverr=None, pwakeup=None, pclken=None, reset=None,
                 reset_active_low: bool = True, name: str = "apb_monitor",
                 max_wait_states: int | None = 1000, disable: Iterable[str] = (),
                 max_records: int = 1000):
        self.clock = clock
        self.paddr, self.psel, self.penable, self.pwrite = paddr, psel, penable, pwrite
        self.pwdata, self.prdata, self.pready = pwdata, prdata, pready
        self.pstrb, self.pprot, self.pslverr = pstrb, pprot, pslverr
        self.pwakeup, self.pclken, self.reset = pwakeup, pclken, reset
        self._reset_inactive = 1 if reset_active_low else 0
        self.log = logging.getLogger(f"cocotb.tb.{name}")
        self.data_width = len(pwdata)
        self.max_wait_states = max_wait_states
        self.disabled = set(disable)
        unknown = self.disabled - set(self.RULES)
        if unknown:
            raise ValueError(f"unknown APB rule(s) {sorted(unknown)}; known: {sorted(self.RULES)}")
        self.max_records = max_records
        self.listeners: list[Callable[[ApbResult], None]] = []
        self.transfers: deque[ApbResult] = deque(maxlen=100_000)   # recent history
        self.keep_history = True
        self.errors: list[ApbViolation] = []
        self.warnings: list[ApbViolation] = []
        self.dropped = 0                 # records beyond max_records (counted, not kept)
        self.count = 0                   # completed transfers seen
        self._warned: set = set()
        self._task = None
        self.sleep_when_idle = True      # see the class docstring
        self._watchers: list = []        # tasks counting changes of the pins _quiet relies on
        self._changes = 0
        self._wake = Event()
        self._reset_state()

    @classmethod
    def from_entity(cls, entity, clock=None, prefix: str = "", pinmap=None,
                    reset_name: str | None = "nRESET", **kwargs) -> "ApbMonitor":
        """Bind to the TRM pins ``{prefix}PADDR`` ... of *entity* through the pin map, like
        ``Apb5Manager.from_entity``; the reset pin (*reset_name*, optional) gates checking."""
        from tb.core.pinmap import PinMap
        pm = PinMap.coerce(pinmap)

        def get(name, required=True):
            return pm.get(entity, prefix + name, required=required)
        sigs = {n.lower(): get(n, n not in ("PSTRB", "PPROT", "PSLVERR")) for n in cls.SIGNALS}
        sigs.update({n.lower(): get(n, False) for n in cls.OPTIONAL})
        if reset_name and "reset" not in kwargs:
            kwargs["reset"] = pm.get(entity, reset_name)
        return cls(clock if clock is not None else pm.get(entity, "CLK", required=True), **sigs,
                   **kwargs)

    # ------------------------------------------------------------------ public API
    def start(self):
        """Start watching (idempotent); returns the task."""
        if self._task is None or self._task.done():
            self._reset_state()
            self._stop_watchers()
            self._watchers = [cocotb.start_soon(self._watch(h))
                              for h in (self.psel, self.penable, self.pslverr, self.pclken,
                                        self.reset) if h is not None]
            self._task = cocotb.start_soon(self._run())
        return self._task

    def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._task = None
        self._stop_watchers()

    def _stop_watchers(self) -> None:
        for t in self._watchers:
            if not t.done():
                t.cancel()
        self._watchers = []

    @property
    def idle(self) -> bool:
        """No transfer between its setup phase and its completion."""
        return self._state in ("idle", "orphan")

    def clear(self) -> None:
        """Forget every recorded violation."""
        self.errors.clear()
        self.warnings.clear()
        self.dropped = 0

    def take(self, rule: str) -> list[ApbViolation]:
        """Remove and return the errors and warnings of *rule*."""
        if rule not in self.RULES:
            raise ValueError(f"unknown APB rule {rule!r}")
        got = [v for v in self.errors + self.warnings if v.rule == rule]
        self.errors[:] = [v for v in self.errors if v.rule != rule]
        self.warnings[:] = [v for v in self.warnings if v.rule != rule]
        return got

    def summary(self) -> str:
        return (f"{self.count} APB transfer(s) monitored, {len(self.errors)} protocol "
                f"error(s), {len(self.warnings)} warning(s)"
                + (f", {self.dropped} more not kept" if self.dropped else ""))

    # ------------------------------------------------------------------ internals
    def _reset_state(self) -> None:
        self._state = "idle"             # idle | setup | access | orphan
        self._t: dict = {}               # the transfer in flight, as its setup phase showed it
        self._waits = 0
        self._once: set = set()          # (rule, key) reported for the transfer in flight
        self._hold = None                # completer outputs before an edge with PCLKEN low
        self._flags: set = set()         # level conditions already reported (not per transfer)

    def _violation(self, rule: str, message: str) -> None:
        if rule in self.disabled:
            return
        from cocotb.simtime import get_sim_time
        side, severity, _ = self.RULES[rule]
        v = ApbViolation(get_sim_time("ns"), rule, side, message)
        records = self.errors if severity == "error" else self.warnings
        if len(records) < self.max_records:
            records.append(v)
            if severity == "error":
                self.log.error("APB protocol: %s", v)
            elif rule not in self._warned:
                self._warned.add(rule)
                self.log.info("APB protocol warning (further ones of this rule logged at "
                              "DEBUG): %s", v)
            else:
                self.log.debug("APB protocol warning: %s", v)
        else:
            self.dropped += 1

    def _per_transfer(self, rule: str, key, message: str) -> None:
        if (rule, key) not in self._once:
            self._once.add((rule, key))
            self._violation(rule, message)

    def _level(self, rule: str, active: bool, message: str) -> None:
        """Report a level condition once when it appears; re-arm when it goes away."""
        if active:
            if rule not in self._flags:
                self._flags.add(rule)
                self._violation(rule, message)
        else:
            self._flags.discard(rule)

    def _desc(self) -> str:
        t = self._t
        kind = {1: "write", 0: "read"}.get(t.get("write"), "transfer")
        addr = t.get("addr")
        return f"{kind} PADDR=" + (f"0x{addr:04x}" if isinstance(addr, int) else str(addr))

    def _outputs(self):
        return (_raw(self.pready), None if self.pslverr is None else _raw(self.pslverr),
                _raw(self.prdata))

    async def _run(self) -> None:
        fall = FallingEdge(self.clock)
        while True:
            await fall
            seen = self._changes
            self._sample()
            if self.sleep_when_idle and self._quiet():
                self._wake.clear()
                if self._changes == seen:
                    await self._wake.wait()

    async def _watch(self, handle) -> None:
        while True:
            await handle.value_change
            self._changes += 1
            self._wake.set()

    def _quiet(self) -> bool:
        """No transfer in flight, PSEL low and PCLKEN high: until PSEL, PENABLE, PSLVERR,
        PCLKEN or the reset pin changes, every further sample reads the same values on these
        pins and can only repeat what this one found (the level checks - X/Z on PSEL or
        PCLKEN, PENABLE without PSEL, PSLVERR outside completion - report once per
        appearance; PREADY and PRDATA are not read on an idle edge with PCLKEN high, and the
        pclken-hold check starts at a sample with PCLKEN low)."""
        return (self._state == "idle" and _read(self.psel) == 0
                and (self.pclken is None or _read(self.pclken) == 1))

    def _sample(self) -> None:
        if self.reset is not None and _read(self.reset) != self._reset_inactive:
            if self._state in ("setup", "access"):
                self.log.info("transfer in flight abandoned by reset: %s", self._desc())
            self._reset_state()
            return
        en = True
        if self.pclken is not None:
            e = _read(self.pclken)
            self._level("x-pclken", e is None, "X/Z on PCLKEN")
            en = e == 1
        if self._hold is not None:       # the edge just passed had PCLKEN low (TRM 5.9)
            now = self._outputs()
            if now != self._hold:
                changed = [n for n, a, b in zip(("PREADY", "PSLVERR", "PRDATA"), self._hold, now)
                           if a != b]
                self._violation("pclken-hold", f"{', '.join(changed)} changed across a CLK edge "
                                "with PCLKEN low")
            self._hold = None
        if not en:
            if "pclken-hold" not in self.disabled:
                self._hold = self._outputs()
            return
        self._apb_edge()

    def _apb_edge(self) -> None:
        """One PCLKEN-qualified edge, as the pins show it just before it."""
        psel = _read(self.psel)
        self._level("x-control", psel is None, "X/Z on PSEL")
        penable = _read(self.penable)
        state = self._state
        if not psel:
            self._level("penable-without-psel", penable != 0,
                        f"PENABLE {'X/Z' if penable is None else 'high'} while PSEL is low")
            if state == "setup":
                self._violation("no-access-phase", f"PSEL dropped after the setup phase of "
                                f"{self._desc()}: no access phase")
            elif state == "access":
                self._violation("dropped-before-pready", f"PSEL dropped before PREADY in "
                                f"{self._desc()} after {self._waits} wait state(s)")
            self._state = "idle"
            self._check_pslverr_idle()
            return
        self._flags.discard("penable-without-psel")
        if penable is None:
            self._per_transfer("x-control", "PENABLE", "X/Z on PENABLE while PSEL is high")
            penable = 1 if state in ("setup", "access") else 0
        if not penable:
            if state == "setup":
                self._violation("no-access-phase", f"PENABLE still low at the APB edge after "
                                f"the setup phase of {self._desc()} (setup phase repeated)")
            elif state == "access":
                self._violation("dropped-before-pready", f"PENABLE dropped before PREADY in "
                                f"{self._desc()} after {self._waits} wait state(s)")
            self._setup()
            self._check_pslverr_idle()
            return
        # access phase edge (PSEL and PENABLE high)
        if state in ("idle", "orphan"):
            if state == "idle":
                a = _raw(self.paddr)
                addr = f"0x{a:04x}" if isinstance(a, int) else a
                self._violation("penable-without-setup", f"PSEL and PENABLE high (PADDR={addr}) "
                                "without a setup phase at the APB edge before")
            self._state = "orphan"      # not a transfer: ignored until PSEL/PENABLE drop
            return
        self._check_stable()
        pready = _read(self.pready)
        if pready is None:
            self._per_transfer("x-pready", None, f"X/Z on PREADY in the access phase of "
                               f"{self._desc()}")
            pready = 0
        if pready:
            self._complete()
            return
        self._waits += 1
        self._state = "access"
        if self.max_wait_states is not None and self._waits > self.max_wait_states:
            self._per_transfer("pready-timeout", None, f"PREADY low for more than "
                               f"{self.max_wait_states} wait states in {self._desc()}")
        self._check_pslverr_idle()

    def _setup(self) -> None:
        """A setup phase: capture what must stay stable until the transfer completes."""
        self._once = set()
        self._waits = 0
        self._state = "setup"
        t = self._t = {"addr": _raw(self.paddr), "write": _read(self.pwrite),
                       "prot": 0 if self.pprot is None else _raw(self.pprot)}
        write = t["write"] == 1
        t["strb"] = (_raw(self.pstrb) if self.pstrb is not None
                     else ((1 << (self.data_width // 8)) - 1 if write else 0))
        t["wdata"] = _raw(self.pwdata) if write else None
        t["wakeup"] = None if self.pwakeup is None else _read(self.pwakeup)
        for name in ("addr", "write", "prot", "strb"):
            v = t[name]
            if v is None or isinstance(v, str):
                pin = {"addr": "PADDR", "write": "PWRITE", "prot": "PPROT", "strb": "PSTRB"}[name]
                self._per_transfer("x-control", pin, f"X/Z on {pin} in the setup phase of "
                                   f"{self._desc()}")
        if write and isinstance(t["wdata"], str):
            strb = t["strb"] if isinstance(t["strb"], int) else (1 << (self.data_width // 8)) - 1
            bits = t["wdata"]
            n = len(bits)
            lanes = [i for i in range(n // 8)
                     if strb >> i & 1 and any(c not in "01" for c in bits[n - 8 * i - 8:n - 8 * i])]
            if lanes:
                self._per_transfer("x-control", "PWDATA", f"X/Z on PWDATA byte lane(s) {lanes} "
                                   f"(PSTRB=0b{strb:04b}) in the setup phase of {self._desc()}")
        if t["write"] == 0 and isinstance(t["strb"], int) and t["strb"] != 0:
            self._per_transfer("pstrb-on-read", None, f"PSTRB=0b{t['strb']:04b} in {self._desc()} "
                               "(must be all zero for a read)")

    def _check_stable(self) -> None:
        t = self._t
        pins = [("addr", "PADDR", self.paddr), ("write", "PWRITE", self.pwrite)]
        if self.pprot is not None:
            pins.append(("prot", "PPROT", self.pprot))
        if self.pstrb is not None:
            pins.append(("strb", "PSTRB", self.pstrb))
        if t["write"] == 1:
            pins.append(("wdata", "PWDATA", self.pwdata))
        for key, pin, h in pins:
            now = _raw(h) if key != "write" else _read(h)
            if now != t[key]:
                fmt = (lambda v: f"0x{v:x}" if isinstance(v, int) else str(v))
                self._per_transfer("unstable", pin, f"{pin} changed from {fmt(t[key])} to "
                                   f"{fmt(now)} in the access phase of {self._desc()}")
        if t["wakeup"] == 1 and _read(self.pwakeup) != 1:
            self._per_transfer("pwakeup-dropped", None, f"PWAKEUP dropped before PREADY in "
                               f"{self._desc()} (it was high at the setup phase)")

    def _check_pslverr_idle(self) -> None:
        if self.pslverr is not None:
            self._level("pslverr-not-sampled", _read(self.pslverr) == 1,
                        f"PSLVERR high at an APB edge that completes no transfer "
                        f"({self._state} phase)")

    def _complete(self) -> None:
        t = self._t
        write = t["write"] == 1
        slverr = 0
        if self.pslverr is not None:
            slverr = _read(self.pslverr)
            if slverr is None:
                self._violation("x-response", f"X/Z on PSLVERR at the completing edge of "
                                f"{self._desc()}")
                slverr = 0
        self._flags.discard("pslverr-not-sampled")
        if write:
            w = t["wdata"]
            data = w if isinstance(w, int) else _x_to_0(w)
        else:
            r = _raw(self.prdata)
            if isinstance(r, str):
                self._violation("x-response", f"X/Z on PRDATA ({r}) at the completing edge of "
                                f"{self._desc()}")
                r = _x_to_0(r)
            data = r
            if slverr and data != 0:
                self._violation("prdata-on-error", f"PRDATA=0x{data:08x} with PSLVERR in "
                                f"{self._desc()} (TRM 3.1.1: the data returned is zero)")

        def num(v):
            return v if isinstance(v, int) else (_x_to_0(v) if isinstance(v, str) else 0)
        result = ApbResult(num(t["addr"]), write, data, bool(slverr), num(t["prot"]),
                           num(t["strb"]), self._waits)
        self._state = "idle"
        self._t = {}
        self.count += 1
        if self.keep_history:
            self.transfers.append(result)
        for fn in self.listeners:
            fn(result)
