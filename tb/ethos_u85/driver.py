"""Host driver sequences: what the Ethos-U core driver does to the NPU, over APB and the IRQ pin.

``HostDriver(env)`` (``env.driver``) issues the register sequences of the Arm Ethos-U core
driver (register names from tlm/registers.py, TRM chapter 3):

* ``soft_reset(pending)``: a RESET write (pending_CPL = bit 0, pending_CSL = bit 1), then
  ``wait_reset`` polls STATUS until reset_status clears (STATUS is readable during the
  sequence, TRM 3.1.1).
* ``setup_axi(...)``: AXI and attribute set-up: MEM_ATTR0..3, REGIONCFG, AXI_SRAM/AXI_EXT
  (the Ethos-U85's AXI limit registers) and BASEP0..7.
* ``load_job(addr, words, qconfig)``: the command stream into memory (back door, as the host
  CPU's store would), then QBASE, QSIZE and QCONFIG.
* ``run()``: CMD = (CMD & 0xC) | transition_to_running_state (the clock/power enables kept).
* ``wait_irq()``: wait for a rising edge of the IRQ pin (or IRQ already high) with a timeout,
  then read STATUS, as the driver's interrupt handler does. ``wait_done(use_irq=True)`` ends a
  job that way (``use_irq=False`` polls STATUS instead); both read QREAD at the stop.
* ``clear_irq()``: CMD.clear_irq (clock/power enables kept).
* ``check_faults(status)``: decode STATUS's sticky fault bits with the faulting interface and
  channel (``FaultReport``).
* ``pmu_setup(events, cycles=True)`` / ``pmu_read()``: PMEVTYPERn, PMCNTENSET, PMCR (counters
  reset and enabled), optional PMCAXI_CHAN; read-out of PMEVCNTRn and PMCCNTR (``PmuCounts``).

Every access goes through ``env.apb`` (the scoreboard replays it on the reference model).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from cocotb.simtime import get_sim_time
from cocotb.triggers import ClockCycles, FallingEdge, First, RisingEdge, Timer

from tb.agents.apb import PROT_SECURE_PRIV
from tb.ethos_u85.scoreboard import STOP_EVIDENCE
from tlm.ethos_u85 import registers as R
from tlm.ethos_u85.device import STICKY_FAULTS

OFF = R.OFFSET
_STATUS, _CMD, _PMCR = R.get("STATUS"), R.get("CMD"), R.get("PMCR")
CMD_KEEP = _CMD.encode(clock_q_enable=1, power_q_enable=1)      # kept by every CMD write
CMD_RUN = _CMD.encode(transition_to_running_state=1)
CMD_CLEAR_IRQ = _CMD.encode(clear_irq=1)
ST_RESET = _STATUS.encode(reset_status=1)
PMU_COUNTERS = _PMCR.field("num_event_cnt").reset           # PMEVCNTR0..7
PMU_CYCLE_BIT = R.get("PMCNTENSET").field("CYCLE_CNT").mask


def _name(table: tuple, value: int) -> str:
    return dict(table).get(value, f"reserved({value})")


def pmu_event(ev: "int | str") -> int:
    """A pmu_event_t value from its TRM name (``npu_active``) or number."""
    if isinstance(ev, str):
        try:
            return R.PMU_EVENT_BY_NAME[ev]
        except KeyError:
            raise ValueError(f"unknown PMU event {ev!r}") from None
    return int(ev)


@dataclass
class FaultReport:
    """STATUS decoded as the driver's fault check sees it."""
    status: int
    faults: list                     # set sticky fault bits (tlm.ethos_u85.device.STICKY_FAULTS order)
    interface: str                   # faulting_interface (dma_fault_src_t) when bus_status
    channel: str                     # faulting_channel (pmu_axi_channel_t) when bus_status
    fields: dict = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.faults)

    def __str__(self) -> str:
        if not self.faults:
            return f"no fault (STATUS 0x{self.status:08x})"
        where = (f" on {self.interface}, channel {self.channel}"
                 if "bus_status" in self.faults else "")
        return f"{'+'.join(self.faults)}{where} (STATUS 0x{self.status:08x})"


@dataclass
class PmuCounts:
    """One PMU read-out: PMCCNTR (48 bits), PMEVCNTRn of the set-up events, PMOVSSET."""
    cycles: int
    events: dict                     # pmu_event_t value -> count (counter order)
    counters: list                   # PMEVCNTR0..n-1
    overflow: int


class HostDriver:
    def __init__(self, env, prot: int = PROT_SECURE_PRIV):
        self.env = env
        self.prot = prot
        self.pmu_events: list = []

    # ------------------------------------------------------------------ APB
    async def read(self, name: str, prot: "int | None" = None) -> int:
        return await self.env.read_ok(OFF[name], self.prot if prot is None else prot)

    async def write(self, name: str, value: int, prot: "int | None" = None) -> None:
        await self.env.write_ok(OFF[name], value, self.prot if prot is None else prot)

    # ------------------------------------------------------------------ reset
    async def wait_reset(self, max_reads: int = 256, strict: bool = False,
                         prot: "int | None" = None) -> list:
        """Poll STATUS until reset_status is 0 (TRM 3.1.1: STATUS is readable in the
        sequence); with *strict* every read before must be exactly reset_status (every
        other field is cleared by a reset). Re-enables the scoreboard; returns the reads."""
        prot = self.prot if prot is None else prot
        seen = []
        for _ in range(max_reads):
            r = await self.env.read(OFF["STATUS"], prot)
            assert not r.slverr, f"STATUS read (PPROT={prot:03b}) got PSLVERR: {r}"
            seen.append(r.data)
            if not r.data & ST_RESET:
                if strict:
                    assert all(v == ST_RESET for v in seen[:-1]), \
                        f"STATUS during the reset sequence: {[hex(v) for v in seen]}"
                self.env.scoreboard.enabled = True
                return seen
        raise TimeoutError(f"STATUS.reset_status still set after {max_reads} reads")

    async def soft_reset(self, pending: int = 0b01, prot: "int | None" = None,
                         strict: bool = False, max_reads: int = 2000) -> list:
        """RESET write (pending_CPL, pending_CSL) and the wait for the sequence to end."""
        prot = self.prot if prot is None else prot
        r = await self.env.write(OFF["RESET"], pending, prot)
        assert not r.slverr, f"RESET write with PPROT={prot:03b} got PSLVERR"
        return await self.wait_reset(max_reads, strict=strict)

    # ------------------------------------------------------------------ set-up
    async def setup_axi(self, mem_attrs=(), regioncfg: "int | None" = None,
                        axi_sram: "int | None" = None, axi_ext: "int | None" = None,
                        basep=None) -> None:
        """MEM_ATTR0..n, REGIONCFG, AXI_SRAM, AXI_EXT and BASEP (a list by region or a dict
        region -> address); what is None is left alone."""
        for n, v in enumerate(mem_attrs):
            await self.write(f"MEM_ATTR{n}", v)
        if regioncfg is not None:
            await self.write("REGIONCFG", regioncfg)
        if axi_sram is not None:
            await self.write("AXI_SRAM", axi_sram)
        if axi_ext is not None:
            await self.write("AXI_EXT", axi_ext)
        items = basep.items() if isinstance(basep, dict) else enumerate(basep or ())
        for r, base in items:
            await self.write(f"BASEP{r}_LO", base & 0xFFFFFFFF)
            await self.write(f"BASEP{r}_HI", base >> 32)

    async def load_job(self, addr: int, words=None, qconfig: "int | None" = None,
                       size: "int | None" = None, prot: "int | None" = None) -> None:
        """Command stream *words* (32-bit) into memory at *addr* by the back door (None: it is
        there already, *size* bytes), then QBASE, QSIZE and QCONFIG."""
        if words is not None:
            data = b"".join((int(w) & 0xFFFFFFFF).to_bytes(4, "little") for w in words)
            self.env.memory.write(addr, data)
            size = len(data)
        await self.write("QBASE_LO", addr & 0xFFFFFFFF, prot)
        await self.write("QBASE_HI", (addr >> 32) & 0xFF, prot)
        await self.write("QSIZE", size, prot)
        if qconfig is not None:
            await self.write("QCONFIG", qconfig, prot)

    # ------------------------------------------------------------------ run / IRQ
    async def run(self, prot: "int | None" = None) -> None:
        """CMD = (CMD & 0xC) | transition_to_running_state."""
        cmd = await self.read("CMD", prot)
        await self.write("CMD", (cmd & CMD_KEEP) | CMD_RUN, prot)

    async def clear_irq(self, prot: "int | None" = None, check_pin: bool = False) -> None:
        """CMD = (CMD & 0xC) | clear_irq; with *check_pin* assert the IRQ pin drops."""
        cmd = await self.read("CMD", prot)
        await self.write("CMD", (cmd & CMD_KEEP) | CMD_CLEAR_IRQ, prot)
        if check_pin:
            await ClockCycles(self.env.clock, 2)
            await FallingEdge(self.env.clock)
            assert int(self.env.irq.value) == 0, "IRQ pin still high after CMD.clear_irq"

    async def wait_irq(self, max_cycles: int = 20_000, prot: "int | None" = None) -> int:
        """Wait for the IRQ pin to rise (at once if it is high) within *max_cycles*, then read
        STATUS; return it. A hang (no IRQ within *max_cycles*, or no AXI beat for
        ``env.stall_cycles`` while waiting) raises ``Hang`` naming the test, STATUS, QREAD and
        the last bus activity."""
        irq = self.env.irq
        assert irq is not None, "the design has no IRQ pin"
        if not _high(irq):
            watch = _Progress(self.env, max_cycles)
            while True:
                timeout = Timer(watch.step_ns(), unit="ns")
                if await First(RisingEdge(irq), timeout) is not timeout:
                    break
                why = watch.check()
                if why:
                    raise await self.hang(f"no IRQ: {why}", prot)
        return await self.read("STATUS", prot)

    async def wait_stopped(self, max_cycles: int = 20_000, poll: int = 8,
                           prot: "int | None" = None) -> int:
        """Poll STATUS every *poll* cycles until the NPU shows it stopped (state 0 with
        irq_raised or a fault bit: clear the IRQ before a job); then read QREAD (so the
        scoreboard compares both with the reference); return that STATUS. A hang raises
        ``Hang`` as in ``wait_irq``."""
        watch = _Progress(self.env, max_cycles)
        while True:
            status = await self.read("STATUS", prot)
            if _stopped(status):
                await self.read("QREAD", prot)
                return status
            why = watch.check()
            if why:
                raise await self.hang(f"the NPU did not stop: {why}", prot)
            await ClockCycles(self.env.clock, poll)

    async def hang(self, what: str, prot: "int | None" = None) -> "Hang":
        """A ``Hang`` for *what*: the test's name, STATUS and QREAD read now, the last bus
        activity (``env.bus_activity()``)."""
        from tb.core.expect import current_test
        try:
            state = f"STATUS 0x{await self.read('STATUS', prot):08x}, QREAD 0x{await self.read('QREAD', prot):x}"
        except Exception as e:  # noqa: BLE001 - the report must come out whatever the APB does
            state = f"STATUS/QREAD unreadable ({type(e).__name__}: {e})"
        return Hang(f"{current_test() or 'test'}: {what} at {get_sim_time('ns'):.0f} ns; {state}; "
                    f"{self.env.bus_activity()}")

    async def wait_done(self, max_cycles: int = 20_000, use_irq: bool = True, poll: int = 8,
                        prot: "int | None" = None) -> int:
        """End of a job: with *use_irq* wait for the IRQ, then (an NPU_OP_IRQ before the
        stop leaves the NPU running) poll STATUS until stopped; read QREAD; return STATUS."""
        if use_irq:
            status = await self.wait_irq(max_cycles, prot)
            if _stopped(status):
                await self.read("QREAD", prot)
                return status
        return await self.wait_stopped(max_cycles, poll, prot)

    async def run_job(self, max_cycles: int = 20_000, poll: int = 8, use_irq: bool = False,
                      prot: "int | None" = None) -> int:
        """``run`` then ``wait_done``; return STATUS."""
        await self.run(prot)
        return await self.wait_done(max_cycles, use_irq, poll, prot)

    @staticmethod
    def check_faults(status: int) -> FaultReport:
        """The sticky fault bits of STATUS (bus_status, cmd_parse_error, branch_fault,
        ecc_fault) and, for a bus error, the faulting interface and channel by TRM name."""
        f = _STATUS.decode(status)
        faults = [b for b in STICKY_FAULTS if f[b]]
        return FaultReport(status, faults,
                           _name(R.DMA_FAULT_SRC_T, f["faulting_interface"]),
                           _name(R.PMU_AXI_CHANNEL_T, f["faulting_channel"]), f)

    # ------------------------------------------------------------------ PMU
    async def pmu_setup(self, events=(), cycles: bool = True, axi_chan: "int | None" = None) -> None:
        """PMEVTYPERn = *events* (names or numbers, counter n = events[n]), optional
        PMCAXI_CHAN, PMCNTENSET (the counters, and PMCCNTR with *cycles*), then PMCR with
        cnt_en and both counter resets (TRM 3.3.4)."""
        evs = [pmu_event(e) for e in events]
        if len(evs) > PMU_COUNTERS:
            raise ValueError(f"{len(evs)} PMU events for {PMU_COUNTERS} counters")
        for n, ev in enumerate(evs):
            await self.write(f"PMEVTYPER{n}", ev)
        if axi_chan is not None:
            await self.write("PMCAXI_CHAN", axi_chan)
        await self.write("PMCNTENSET", (1 << len(evs)) - 1 | (PMU_CYCLE_BIT if cycles else 0))
        await self.write("PMCR", _PMCR.encode(cnt_en=1, event_cnt_rst=1, cycle_cnt_rst=1))
        self.pmu_events = evs

    async def pmu_read(self, freeze: bool = True) -> PmuCounts:
        """PMCCNTR and the set-up counters (PMCR.cnt_en cleared first with *freeze*)."""
        if freeze:
            await self.write("PMCR", 0)
        lo = await self.read("PMCCNTR_LO")
        hi = await self.read("PMCCNTR_HI")
        counters = [await self.read(f"PMEVCNTR{n}") for n in range(len(self.pmu_events))]
        ovs = await self.read("PMOVSSET")
        return PmuCounts(hi << 32 | lo, dict(zip(self.pmu_events, counters)), counters, ovs)


def _high(handle) -> bool:
    try:
        return int(handle.value) == 1
    except ValueError:
        return False


class Hang(TimeoutError):
    """The DUT did not finish within the bench's bound (see ``HostDriver.wait_irq``)."""


class _Progress:
    """The bound of a wait: *max_cycles* in all, and at most ``env.stall_cycles`` (if set)
    without an AXI beat (``env.axi.beats()``)."""

    def __init__(self, env, max_cycles: int):
        self.env, self.period = env, env.clk_period_ns
        self.t0 = get_sim_time("ns")
        self.end = self.t0 + max_cycles * self.period
        self.max_cycles = max_cycles
        self.stall = getattr(env, "stall_cycles", None)
        axi = getattr(env, "axi", None)
        self.beats = axi.beats if axi is not None and self.stall else None
        self.last_beats = self.beats() if self.beats else 0
        self.last_move = self.t0

    def step_ns(self) -> float:
        """Time to wait before the next check: whole cycles (a Timer must be representable in
        the simulator's precision)."""
        cycles = int((self.end - get_sim_time("ns")) // self.period)
        if self.beats:
            cycles = min(cycles, max(1, self.stall // 4))
        return max(1, cycles) * self.period

    def check(self) -> "str | None":
        """Why the wait is over (None: go on)."""
        now = get_sim_time("ns")
        if self.beats:
            b = self.beats()
            if b != self.last_beats:
                self.last_beats, self.last_move = b, now
            elif now - self.last_move >= self.stall * self.period:
                return (f"no AXI beat for {(now - self.last_move) / self.period:.0f} cycles "
                        f"(stall bound {self.stall})")
        if now >= self.end:
            return f"not within {self.max_cycles} cycles"
        return None


def _stopped(status: int) -> bool:
    return not _STATUS.field("state").get(status) and bool(status & STOP_EVIDENCE)
