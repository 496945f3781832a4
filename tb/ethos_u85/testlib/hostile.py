"""Helpers of the hostile-input tests (test_faults.py): pin monitor, reset-window sync of the
scoreboard's reference, jobs cut short, partial-output and sticky-fault checks."""
from __future__ import annotations

import itertools

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge

from tb.agents.axi import pin_int
from tb.ethos_u85.testlib.regs import (
    OFF,
    PROT_SP,
    REGS,
    ST_RESET,
    prot_after_reset_write,
    status_fields,
)
from tlm.ethos_u85 import registers as R


async def start_env(dut, backpressure: "float | None" = None, seed: int = 0, **kw):
    """An Env with the scoreboard's reference model (for DUT=tlm too), out of reset."""
    from tb.ethos_u85.env import Env
    env = Env(dut, reference_model=True, **kw)
    await env.start()
    ResetSync.attach(env)
    if backpressure:
        env.axi.random_backpressure(seed, backpressure)
    return env

async def irq_pin(env) -> int:
    await FallingEdge(env.clock)
    return int(env.irq.value)

# ---------------------------------------------------------------- pin monitor
class PinMonitor:
    """The test_faults view of the Env's passive AXI monitors (``env.axi_monitors``,
    tb.agents.axi.AxiMonitor: handshake counts and the VALID/payload-stability rule per port) plus
    a count of IRQ rising edges (sampled at falling edges of CLK from construction on).

    ``count`` is per port and channel (``ar``, ``r``, ``rlast``, ``aw``, ``w``, ``wlast``,
    ``b``) since construction or the last nRESET; ``outstanding()`` gives, per port, (reads
    without their last R beat, writes without their B response, AW without their WLAST);
    ``busy`` is true while anything is outstanding or a VALID is waiting; ``errors`` are the
    monitors' errors."""

    def __init__(self, env):
        self.env = env
        self.monitors = env.axi_monitors
        assert self.monitors or not env.axi_ports, "PinMonitor needs Env(axi_monitor=True)"
        self._base = {p: (m.resets, dict(m.count)) for p, m in self.monitors.items()}
        self.irq_rises = 0
        self._irq = 0
        self._task = cocotb.start_soon(self._run())

    @property
    def count(self) -> dict:
        """Handshakes per port and channel since construction (or the last nRESET)."""
        out = {}
        for p, m in self.monitors.items():
            resets, base = self._base[p]
            out[p] = {k: v - (base[k] if m.resets == resets else 0) for k, v in m.count.items()}
        return out

    @property
    def errors(self) -> list:
        return [e for m in self.monitors.values() for e in m.errors]

    def stop(self) -> None:
        self._task.cancel()

    async def _run(self) -> None:
        while True:
            await FallingEdge(self.env.clock)
            irq = pin_int(self.env.irq, 0) if pin_int(self.env.nreset, 0) == 1 else 0
            if irq and not self._irq:
                self.irq_rises += 1
            self._irq = irq

    def outstanding(self) -> dict:
        return {p: m.outstanding() for p, m in self.monitors.items()}

    @property
    def busy(self) -> bool:
        return any(m.busy for m in self.monitors.values())

    def handshakes(self) -> int:
        return sum(m.handshakes() for m in self.monitors.values())

    async def wait_idle(self, limit: int = 20_000, settle: int = 4) -> int:
        """Wait until nothing is outstanding for *settle* cycles; return the cycles waited."""
        quiet = 0
        for n in range(limit):
            await FallingEdge(self.env.clock)
            quiet = quiet + 1 if not self.busy else 0
            if quiet >= settle:
                return n
        raise TimeoutError(f"AXI still busy after {limit} cycles: {self.outstanding()}")

    async def wait_writes_sent(self, limit: int = 5000, settle: int = 16) -> None:
        """Wait until every AW handshake has its WLAST and no AW/W VALID waits, for *settle*
        cycles in a row (B responses may still be outstanding)."""
        quiet = 0
        for _ in range(limit):
            await FallingEdge(self.env.clock)
            quiet = quiet + 1 if not any(m.writes_sending for m in self.monitors.values()) else 0
            if quiet >= settle:
                return
        raise TimeoutError(f"write data still flowing after {limit} cycles: {self.outstanding()}")

    async def assert_silent(self, cycles: int, what: str) -> None:
        """No AXI handshake at all for *cycles* cycles (the NPU is stopped)."""
        before = self.handshakes()
        await ClockCycles(self.env.clock, cycles)
        assert self.handshakes() == before, (f"{what}: {self.handshakes() - before} AXI "
                                             "handshake(s) with the NPU stopped")

    def check(self) -> None:
        assert not self.errors, f"{len(self.errors)} AXI pin rule violation(s), first: {self.errors[0]}"
        assert not self.busy, f"AXI transactions left outstanding: {self.outstanding()}"

async def run_job_counting_irq(env, mon: "PinMonitor", settle: int = 32) -> int:
    """``Env.run_job`` for a job that can stop, and raise IRQ, before the scoreboard sees the
    start: the scoreboard opens a job when the CMD write completes on the APB manager's side,
    a cycle after the NPU acted on it (both DUTs perform a transfer at its setup phase), so an
    IRQ edge of a job that ends at once (QSIZE = 0) would not be counted. Here the job's
    edges are counted by the pin monitor from the CMD write on."""
    rises = mon.irq_rises
    await env.start_npu()
    await ClockCycles(env.clock, settle)
    job = env.scoreboard.job
    if job is not None and not job.closed:
        job.dut_irq_rises = mon.irq_rises - rises
    return await env.wait_stopped()

async def run_job_allowing(env, spans, max_cycles: int = 20_000) -> int:
    """``Env.run_job`` for a job that ends in a bus error, where the TRM leaves open how much
    of the faulting operation's output is written: the byte ranges *spans* may or may not be
    written by the DUT, so the scoreboard neither requires nor forbids writes there and does
    not compare them (the test checks them itself, see ``check_partial_output``)."""
    await env.start_npu()
    job = env.scoreboard.job
    assert job is not None and not job.closed
    for lo, hi in spans:
        job.ref_dontcare.add(lo, hi)
    return await env.wait_stopped(max_cycles)

def check_partial_output(env, lo: int, before: bytes, correct: bytes, keep=(), what: str = "") -> int:
    """Each byte of [lo, lo + len(before)) is either unchanged or the value of a run without
    the fault (*correct*): an NPU stopped by a bus error may have written part of the
    faulting operation's output (TRM 3.6.8 raise_error completes the AXI transactions in
    flight; the TLM writes nothing of an operation whose read failed), never a wrong value.
    Bytes at offsets in *keep* (computed from data that came with an error response) must be
    unchanged. Returns the number of bytes written."""
    got = env.memory.read(lo, len(before))
    written = 0
    for i, (g, b, c) in enumerate(zip(got, before, correct, strict=True)):
        if i in keep:
            assert g == b, (f"{what}: byte 0x{lo + i:010x} = 0x{g:02x} was written from data "
                            f"that came with an error response (before 0x{b:02x})")
            continue
        assert g in (b, c), (f"{what}: byte 0x{lo + i:010x} = 0x{g:02x}, neither the old "
                             f"0x{b:02x} nor the fault-free result 0x{c:02x}")
        written += g != b
    return written

def freeze_outstanding_limits(env):
    """Keep the subordinates' outstanding-burst limit at its current value (the scoreboard's
    reference would otherwise lower it to the reset value at a RESET write, while the
    transactions issued under the old limit drain). Returns a function that restores it."""
    sb = env.scoreboard
    lim = {(p, w): sb.outstanding_limit(p, w) for p in env.axi.ports for w in (False, True)}
    for sub in env.axi.ports.values():
        sub.outstanding_limit = lambda port, write: lim[(port, write)]

    def restore():
        for sub in env.axi.ports.values():
            sub.outstanding_limit = sb.outstanding_limit
    return restore

def hold_responses(env, hold: bool = True) -> None:
    """Withhold (or release) every R beat and B response of the bench's subordinates: the
    NPU's outstanding transactions stay outstanding as long as this lasts. While B is held
    the subordinates keep taking AW and W (their B queues have no limit), so a write burst
    already started sends all its W beats."""
    for sub in env.axi.ports.values():
        for ch in (sub.r, sub.b):
            ch.set_pause_generator(itertools.repeat(1) if hold else None)
            if not hold:
                ch.pause = False
        sub.b.queue_occupancy_limit = -1 if hold else 2

# ---------------------------------------------------------------- reset windows
class ResetSync:
    """Keeps the scoreboard's reference model (``env._ref``) inside its reset sequence
    exactly as long as the DUT is, as the DUT shows it on STATUS.reset_status.

    The reference leaves its sequence after Policy.reset_cycles model cycles, which APB
    transfers advance (Policy.apb_cycles each); the DUT's sequence is timed in CLK cycles and a
    soft reset first drains the AXI ports. So: at a RESET write (and with ``enter``) the
    reference stops advancing time (apb_cycles = 0); at the first STATUS read that shows the
    DUT out of its sequence, the reference finishes its own (``wait_reset``, which also applies
    the pending CPL/CSL) before the scoreboard compares that read. Every access in between is
    then compared with a reference that is itself in its reset sequence (TRM 3.1.1 rules as
    the TLM Policy defines them). Listener on ``env.apb`` ahead of the scoreboard."""

    def __init__(self, env):
        self.env = env
        self._saved = None
        env.apb.listeners.insert(0, self)

    @classmethod
    def attach(cls, env) -> "ResetSync":
        sync = getattr(env, "_reset_sync", None)
        if sync is None:
            sync = env._reset_sync = cls(env)
        return sync

    @property
    def ref(self):
        return self.env._ref if self.env.use_reference else None

    def _hold(self, ref) -> None:
        if self._saved is None or self._saved[0] is not ref:
            self._saved = (ref, ref.policy)
            ref.policy = ref.policy.replace(apb_cycles=0)

    def _release(self, ref) -> None:
        if ref.in_reset:
            ref.wait_reset()
        if self._saved is not None and self._saved[0] is ref:
            ref.policy = self._saved[1]
        self._saved = None

    def enter(self) -> None:
        """Put the reference back into its reset sequence (after ``Env.hard_reset``, which
        builds it with the sequence already over) and hold it there; compare from now on."""
        ref = self.ref
        if ref is None:
            return
        self._hold(ref)
        ref.reset_remaining = max(1, int(self._saved[1].reset_cycles))
        self.env.scoreboard.enabled = True

    def __call__(self, r) -> None:
        ref = self.ref
        if ref is None:
            return
        if r.write and r.addr == OFF["RESET"]:
            self._hold(ref)
        elif not r.write and r.addr == OFF["STATUS"] and not r.slverr and not r.data & ST_RESET:
            if ref.in_reset or self._saved is not None:
                self._release(ref)

async def wait_reset_clear(env, max_reads: int = 2000, prot: int = PROT_SP) -> list:
    """``HostDriver.wait_reset`` (strict: every read before the end is exactly 0x8) with the
    scoreboard's reference kept in step (``ResetSync``). Returns the values read."""
    ResetSync.attach(env)
    return await env.driver.wait_reset(max_reads, strict=True, prot=prot)

async def soft_reset(env, pending: int, prot: int = PROT_SP) -> list:
    """``HostDriver.soft_reset`` (strict) with the reference kept in step (``ResetSync``);
    returns the STATUS values read."""
    ResetSync.attach(env)
    return await env.driver.soft_reset(pending, prot, strict=True)

def expected_reset_value(reg, env, prot_word: int, reset_word: int = 0) -> int:
    """A register's value once a reset sequence is over (STATUS then reads 0, PROT the
    current CPL/CSL, RESET the pending bits last written)."""
    if reg.name == "STATUS":
        return 0
    if reg.name == "PROT":
        return prot_word
    if reg.name == "RESET":
        return reset_word
    return R.reset_word(reg, env.config, env.pins)

async def check_reset_values(env, prot_word: int, reset_word: int = 0, what: str = "") -> None:
    """Every register of the map (tlm.ethos_u85.registers) reads its reset value (secure privileged)."""
    for reg in REGS:
        want = expected_reset_value(reg, env, prot_word, reset_word)
        got = await env.read_ok(reg.offset, PROT_SP)
        assert got == want, (f"{what}: {reg.ident} (0x{reg.offset:04x}) reads 0x{got:08x}, "
                             f"reset value 0x{want:08x}")

# ---------------------------------------------------------------- sticky faults
async def check_sticky_fault(env, mon: "PinMonitor", status: int, iface: int, channels,
                             what: str, pending: int = 0b01) -> None:
    """After a job that ended in an AXI error response: STATUS.bus_status with
    faulting_interface *iface* and faulting_channel in *channels*, irq_raised, state
    STOPPED, the IRQ pin high, no further AXI traffic (TRM 3.3.1.2, 3.6.8); the fault stays
    across CMD.clear_irq and a start request (which is ignored, TLM Policy
    run_with_sticky_fault='ignore'), and only a soft reset clears it (TRM 3.3.1.2: sticky
    until reset). Ends with the NPU out of its reset sequence, PROT from *pending*."""
    channels = (channels,) if isinstance(channels, int) else tuple(channels)
    f = status_fields(status)
    assert f["bus_status"] and f["irq_raised"] and f["state"] == 0, f"{what}: STATUS 0x{status:08x}"
    assert not f["cmd_parse_error"] and not f["branch_fault"], f"{what}: STATUS 0x{status:08x}"
    assert f["faulting_interface"] == iface, (f"{what}: faulting_interface "
                                              f"{f['faulting_interface']}, expected {iface}")
    assert f["faulting_channel"] in channels, (f"{what}: faulting_channel {f['faulting_channel']}, "
                                               f"expected {channels}")
    assert await irq_pin(env) == 1, f"{what}: IRQ pin low after the bus error"
    await mon.wait_idle()
    await mon.assert_silent(64, what)
    sticky = status & ~0x42            # clear_irq clears irq_raised and pmu_irq_raised only
    # CMD.clear_irq: the IRQ drops, the fault stays
    await env.driver.clear_irq()
    await ClockCycles(env.clock, 2)
    assert await irq_pin(env) == 0, f"{what}: IRQ pin still high after CMD.clear_irq"
    st = await env.read_ok(OFF["STATUS"])
    assert st == sticky, f"{what}: STATUS 0x{st:08x} after clear_irq, expected 0x{sticky:08x}"
    # a start request is ignored while the fault is set: no fetch, state stays STOPPED
    before = mon.handshakes()
    await env.write_ok(OFF["CMD"], 0xC | 0x1)
    for _ in range(4):
        st = await env.read_ok(OFF["STATUS"])
        assert st == sticky, f"{what}: STATUS 0x{st:08x} after a start with the fault set"
    await ClockCycles(env.clock, 32)
    assert mon.handshakes() == before, f"{what}: AXI traffic after a start with bus_status set"
    assert await irq_pin(env) == 0, f"{what}: IRQ after a start request with the fault set"
    # only a reset clears it
    seen = await soft_reset(env, pending)
    assert seen[-1] == 0, f"{what}: STATUS 0x{seen[-1]:08x} after the soft reset"
    assert await env.read_ok(OFF["PROT"]) == prot_after_reset_write(pending, PROT_SP)
    assert await irq_pin(env) == 0
    mon.check()
