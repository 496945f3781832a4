"""The passive APB monitor and protocol checker (tb/apb.py ``ApbMonitor``).

* the monitor rebuilds exactly the transfers the manager performs (random reads/writes,
  PSLVERR cases, PCLKEN patterns, completer wait states with DUT=tlm), on both DUTs;
* with ``Env(apb_source="monitor")`` the scoreboard is fed by the monitor while a foreign
  pin-level driver (``PinDriver`` below, not the bench's manager) does the transfers,
  back to back with PSEL held high, which the manager never does;
* the checker has teeth: deliberately bad manager sequences driven on the pins, and (DUT=tlm)
  completer faults through the adapter's test-only ``apb_fault`` hook, are each reported
  under their rule; the test then takes those records so ``env.finish()`` passes;
* the monitor's sleep while the bus is idle loses nothing: in these tests two more monitors
  watch the same pins, one sampling every edge and one sleeping when idle (``Twins``), and
  must end with identical transfers, errors and warnings.
"""
from __future__ import annotations

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, RisingEdge
from cocotb.types import LogicArray

from tb.agents.apb import PROT_NONSECURE_PRIV, PROT_SECURE_PRIV, PROT_SECURE_USER, ApbMonitor
from tb.ethos_u85.env import Env
from tb.ethos_u85.testlib.marks import DUT, TIMEOUT, seeded_rng, skip_now
from tb.ethos_u85.testlib.regs import OFF
from tlm.ethos_u85 import registers as R

ID, STATUS, CONFIG = OFF["ID"], OFF["STATUS"], OFF["CONFIG"]
ID_RESET = R.reset_word(R.get("ID"))


def BASEP_LO(n: int) -> int:
    return OFF[f"BASEP{n}_LO"]


def BASEP_HI(n: int) -> int:
    return OFF[f"BASEP{n}_HI"]


class PinDriver:
    """A minimal APB requester of its own (standing in for another bench's driver), written
    directly on the pins; it can also break the protocol on purpose. Same timing convention
    as tb/apb.py: drive after a rising edge, sample at the falling edge before."""

    def __init__(self, env: Env):
        self.env = env
        self.clock = env.clock
        self.p = {n: env.pin(n) for n in ("PSEL", "PENABLE", "PADDR", "PWRITE", "PWDATA",
                                          "PSTRB", "PPROT", "PREADY", "PRDATA", "PSLVERR")}
        self.pwakeup = env.pin("PWAKEUP", required=False)
        self.pclken = env.pin("PCLKEN", required=False)

    def drive(self, **pins) -> None:
        for name, value in pins.items():
            (self.pwakeup if name == "PWAKEUP" else self.p[name]).value = value

    async def edge(self) -> None:
        """Past the next PCLKEN-qualified rising edge."""
        while True:
            await FallingEdge(self.clock)
            en = self.pclken is None or int(self.pclken.value) == 1
            await RisingEdge(self.clock)
            if en:
                return

    async def idle(self, edges: int = 2) -> None:
        self.drive(PSEL=0, PENABLE=0)
        for _ in range(edges):
            await self.edge()

    def setup(self, addr, write=False, data=0, prot=PROT_SECURE_PRIV, strb=None) -> None:
        strb = (0xF if write else 0) if strb is None else strb
        self.drive(PADDR=addr, PWRITE=int(write), PWDATA=data, PSTRB=strb, PPROT=prot, PSEL=1,
                   PENABLE=0)

    async def access(self, limit: int = 100) -> tuple[int, bool]:
        """PENABLE high until a qualified edge with PREADY high; (PRDATA, PSLVERR)."""
        self.drive(PENABLE=1)
        for _ in range(limit):
            await FallingEdge(self.clock)
            en = self.pclken is None or int(self.pclken.value) == 1
            ready = int(self.p["PREADY"].value) == 1
            out = (int(self.p["PRDATA"].value), bool(int(self.p["PSLVERR"].value)))
            await RisingEdge(self.clock)
            if en and ready:
                return out
        raise TimeoutError("PinDriver: no PREADY")

    async def burst(self, seq) -> list[tuple[int, bool]]:
        """Legal transfers back to back: PSEL stays high from one to the next."""
        out = []
        await self.edge()
        for addr, write, data in seq:
            self.setup(addr, write, data)
            await self.edge()
            out.append(await self.access())
        await self.idle(1)
        return out


class Twins:
    """Two more monitors on the bench's APB pins, one sampling every edge
    (``sleep_when_idle = False``) and one sleeping while the bus is idle (the default). The
    test never takes records from them, so at its end they must hold the same transfers,
    errors and warnings: the idle sleep loses no check and no transfer."""

    def __init__(self, env: Env):
        self.every, self.sleepy = (
            ApbMonitor.from_entity(env.dut, env.clock, pinmap=env.pinmap, max_records=100_000,
                                   max_wait_states=env.apb_monitor.max_wait_states,
                                   name=f"apb_twin_{n}") for n in ("every", "sleepy"))
        self.every.sleep_when_idle = False
        for m in (self.every, self.sleepy):
            m.start()

    def set_max_wait_states(self, n: "int | None") -> None:
        self.every.max_wait_states = self.sleepy.max_wait_states = n

    def check(self) -> None:
        def rec(vs):
            return [(v.time_ns, v.rule, v.message) for v in vs]
        a, b = self.every, self.sleepy
        assert a.count == b.count and list(a.transfers) == list(b.transfers), \
            f"transfers: every edge {a.count}, sleeping {b.count}"
        for what in ("errors", "warnings"):
            ra, rb = rec(getattr(a, what)), rec(getattr(b, what))
            assert ra == rb, (f"{what} differ (every edge / sleeping when idle): "
                              f"{[x for x in ra if x not in rb][:2]} / {[x for x in rb if x not in ra][:2]}")
        for m in (a, b):
            m.stop()
        cocotb.log.info("twin monitors agree: %s", b.summary())


def _rules(mon) -> set[str]:
    return {v.rule for v in mon.errors}


# ---------------------------------------------------------------- (a) monitor == manager
@cocotb.test(**TIMEOUT)
async def test_monitor_matches_manager(dut):
    """Random reads/writes (PSLVERR cases included) under several PCLKEN patterns and
    (DUT=tlm) completer wait states: the monitor's transfers equal the manager's."""
    rng = seeded_rng()
    env = Env(dut, apb_wait_states=lambda: rng.choice((0, 0, 0, 1, 2, 5)))
    await env.start()
    mon = env.apb_monitor
    assert mon is not None, "Env builds the monitor by default"
    twins = Twins(env)
    patterns = [None, [1, 0], [0, 0, 1], [1, 1, 0, 1, 0, 0, 0],
                [rng.choice((0, 1, 1)) for _ in range(rng.randint(3, 11))] + [1]]
    prots = (PROT_SECURE_PRIV, PROT_SECURE_PRIV, PROT_SECURE_USER, PROT_NONSECURE_PRIV, 0b101)
    for pat in patterns:
        env.set_pclken(pat)
        for _ in range(30):
            n = rng.randrange(8)
            addr = rng.choice((BASEP_LO(n), BASEP_HI(n), ID, STATUS, CONFIG))
            if rng.random() < 0.1:
                addr += rng.randint(1, 3)                       # unaligned: PSLVERR
            prot = rng.choice(prots)
            if rng.random() < 0.5 and addr >= OFF["BASEP0_LO"]:
                strb = 0xF if rng.random() < 0.85 else rng.randrange(16)   # sub-word: PSLVERR
                await env.write(addr, rng.getrandbits(32), prot, strb)
            else:
                await env.read(addr, prot)
    env.set_pclken(None)
    await ClockCycles(env.clock, 2)
    got, want = list(mon.transfers), list(env.apb.transfers)
    assert len(got) == len(want), f"monitor saw {len(got)} transfers, the manager did {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g == w, f"transfer {i}: monitor {g} != manager {w}"
    errs = sum(r.slverr for r in want)
    waits = sum(r.wait_states for r in want)
    dut._log.info("%s; %d PSLVERR, %d wait states", mon.summary(), errs, waits)
    assert errs > 0, "no PSLVERR transfer in the mix"
    if env.tlm is not None:
        assert waits > 0, "the adapter inserted no wait states"
    assert not mon.errors, f"protocol errors on legal traffic: {mon.errors[:3]}"
    twins.check()
    env.finish()


@cocotb.test(**TIMEOUT)
async def test_monitor_feeds_scoreboard(dut):
    """apb_source='monitor': a foreign driver's back-to-back transfers (PSEL held high),
    under a PCLKEN pattern, reach the scoreboard/coverage through the monitor."""
    rng = seeded_rng()
    env = Env(dut, apb_source="monitor", apb_wait_states=lambda: rng.choice((0, 1, 3)))
    await env.start()
    mon, sb = env.apb_monitor, env.scoreboard
    twins = Twins(env)
    drv = PinDriver(env)
    env.set_pclken([1, 1, 0, 1, 0])
    values = {BASEP_LO(n): rng.getrandbits(32) for n in range(8)}
    seq = ([(a, True, v) for a, v in values.items()] + [(a, False, 0) for a in values]
           + [(ID, False, 0), (ID + 2, False, 0)])
    n0, checked0 = mon.count, sb.checked
    got = await drv.burst(seq)
    env.set_pclken(None)
    assert mon.count - n0 == len(seq), f"monitor saw {mon.count - n0} of {len(seq)} transfers"
    mine = list(mon.transfers)[-len(seq):]
    for (addr, write, data), (rdata, err), r in zip(seq, got, mine, strict=True):
        assert (r.addr, r.write, r.slverr) == (addr, write, err), f"{r} vs driver {addr:#x}"
        assert r.data == (data if write else rdata), f"{r}: data vs driver"
    reads = {a: d for (a, w, _), (d, _) in zip(seq, got, strict=True) if not w}
    for a, _v in values.items():
        assert reads[a] == await env.read_ok(a), f"0x{a:x}: driver and manager disagree"
    assert reads[ID] == ID_RESET and got[-1] == (0, True), "ID / unaligned read"
    if env._scoreboard_on:                # DUT=rtl: the reference model checked every one
        assert sb.checked - checked0 >= len(seq), (sb.checked, checked0)
    assert not mon.errors, mon.errors[:3]
    twins.check()
    env.finish()


# ---------------------------------------------------------------- (b) bad managers
@cocotb.test(**TIMEOUT)
async def test_checker_catches_bad_manager(dut):
    """Manager-side rules: each deliberately bad sequence is reported under its rule."""
    env = Env(dut)
    await env.start()
    mon = env.apb_monitor
    twins = Twins(env)
    drv = PinDriver(env)
    await drv.idle(2)
    assert not mon.errors

    async def expect(rule: str, what: str) -> None:
        await drv.idle(3)
        found = mon.take(rule)
        assert found, f"{what}: no '{rule}' violation reported (got {mon.errors[:3]})"
        dut._log.info("%s -> %s", what, found[0])
        assert all(v.side == "manager" for v in found)
        mon.clear()                      # consequences (e.g. a lost PREADY) are not the point
        if env.tlm is not None:
            env.tlm.protocol_errors.clear()
        r = await env.read(ID)           # the bench and the DUT recovered
        assert (r.data, r.slverr) == (ID_RESET, False), f"after {what}: {r}"
        assert not mon.errors, f"after {what}: {mon.errors[:3]}"
        assert mon.transfers[-1] == r

    # PADDR changes in the access phase (a read, so no state changes)
    await drv.edge()
    drv.setup(ID)
    await drv.edge()
    drv.drive(PADDR=CONFIG)
    await drv.access()
    await expect("unstable", "PADDR changed in the access phase")

    # PWDATA and PPROT change in the access phase of a write
    await drv.edge()
    drv.setup(BASEP_LO(7), True, 0x1234_5678)
    await drv.edge()
    drv.drive(PWDATA=0x8765_4321, PPROT=PROT_NONSECURE_PRIV)
    await drv.access()
    await drv.idle(1)
    pins = {v.message.split()[0] for v in mon.errors if v.rule == "unstable"}
    assert pins == {"PWDATA", "PPROT"}, mon.errors
    await expect("unstable", "PWDATA/PPROT changed in the access phase")

    # PENABLE without a setup phase (held two edges, so the stand-in finishes what it began)
    await drv.edge()
    drv.drive(PADDR=ID, PWRITE=0, PSTRB=0, PPROT=PROT_SECURE_PRIV, PSEL=1, PENABLE=1)
    await drv.edge()
    await drv.edge()
    await expect("penable-without-setup", "PENABLE without setup")

    # PSTRB not zero on a read
    await drv.edge()
    drv.setup(ID, strb=0b0101)
    await drv.edge()
    await drv.access()
    await expect("pstrb-on-read", "PSTRB on a read")

    # PENABLE high while PSEL is low
    await drv.edge()
    drv.drive(PENABLE=1)
    await drv.edge()
    await expect("penable-without-psel", "PENABLE without PSEL")

    # setup phase not followed by an access phase (PSEL dropped)
    await drv.edge()
    drv.setup(STATUS)
    await drv.edge()
    drv.drive(PSEL=0)
    await drv.edge()
    await drv.edge()                     # the stand-in holds PREADY for a transfer it began:
    drv.drive(PSEL=1, PENABLE=1)         # let it complete (an orphan access for the monitor)
    await drv.edge()
    await expect("no-access-phase", "setup without access")

    # PWAKEUP asserted with PSEL, dropped before PREADY
    if drv.pwakeup is not None:
        await drv.edge()
        drv.setup(ID)
        drv.drive(PWAKEUP=1)
        await drv.edge()
        drv.drive(PWAKEUP=0)
        await drv.access()
        await expect("pwakeup-dropped", "PWAKEUP dropped in the access phase")

    # PSEL dropped before PREADY: needs a wait state, which only the TLM adapter inserts
    if env.tlm is not None:
        env.tlm.wait_states = lambda: 3
        await drv.edge()
        drv.setup(ID)
        await drv.edge()
        drv.drive(PENABLE=1)
        await drv.edge()
        drv.drive(PSEL=0, PENABLE=0)
        await drv.edge()
        env.tlm.wait_states = lambda: 0
        await expect("dropped-before-pready", "PSEL dropped in a wait state")

    # X/Z on PADDR while PSEL is high (a 4-state simulator only: Verilator has no X)
    if cocotb.SIM_NAME.lower().startswith("icarus"):
        await drv.edge()
        drv.setup(ID)
        drv.drive(PADDR=LogicArray("X" * len(drv.p["PADDR"])))
        await drv.edge()
        drv.drive(PADDR=ID)              # (now also a change in the access phase)
        drv.drive(PENABLE=1)
        await drv.edge()
        await drv.idle(1)
        mon.take("unstable")
        await expect("x-control", "X on PADDR in the setup phase")
    assert not mon.errors
    twins.check()
    env.finish()


# ---------------------------------------------------------------- (c) bad completer
@cocotb.test(**TIMEOUT)
async def test_checker_catches_bad_completer(dut):
    """Completer-side rules, broken by the DUT=tlm adapter's test-only fault hook and by
    poking its outputs: PSLVERR outside completion (warning), PRDATA != 0 with PSLVERR,
    PRDATA X (4-state simulator), outputs changed while PCLKEN is low, too many wait states."""
    if DUT != "tlm":
        skip_now("completer faults are injected through the DUT=tlm adapter")
    env = Env(dut)
    await env.start()
    mon, tlm = env.apb_monitor, env.tlm
    twins = Twins(env)

    # 1. PSLVERR left high after a completion: a warning only (APB recommends low)
    tlm.apb_fault = lambda pins, phase: (setattr(pins.pslverr, "value", 1)
                                         if phase == "idle" else None)
    await env.read_ok(ID)
    await ClockCycles(env.clock, 3)
    tlm.apb_fault = None
    await env.read_ok(ID)                 # the adapter drives PSLVERR again
    warn = mon.take("pslverr-not-sampled")
    assert warn and warn[0].side == "completer", f"no PSLVERR warning: {mon.warnings[:3]}"
    assert not mon.errors, f"PSLVERR outside completion must not be an error: {mon.errors[:3]}"

    # 2. a read answered with PSLVERR but PRDATA != 0 (TRM 3.1.1 says 0)
    def junk_on_error(pins, phase):
        if phase == "respond" and not pins.apb_log[-1][0] and pins.apb_log[-1][5]:
            pins.prdata.value = 0xDEAD_BEEF
    tlm.apb_fault = junk_on_error
    r = await env.read(ID + 1)            # unaligned: PSLVERR
    tlm.apb_fault = None
    assert r.slverr and r.data == 0xDEAD_BEEF
    found = mon.take("prdata-on-error")
    assert found and found[0].side == "completer", mon.errors[:3]

    # 3. PRDATA X on the completing edge of a read (4-state simulators)
    if cocotb.SIM_NAME.lower().startswith("icarus"):
        def x_data(pins, phase):
            if phase == "respond" and not pins.apb_log[-1][0]:
                pins.prdata.value = LogicArray("X" * 32)
        tlm.apb_fault = x_data
        mon_n = mon.count
        drv = PinDriver(env)              # the manager itself refuses X: drive by hand
        await drv.edge()
        drv.setup(ID)
        await drv.edge()                  # the adapter answers at the setup edge (no waits)
        drv.drive(PENABLE=1)
        await drv.edge()
        await drv.idle(1)
        tlm.apb_fault = None
        assert mon.count == mon_n + 1
        found = mon.take("x-response")
        assert found and "PRDATA" in found[0].message, mon.errors[:3]

    # 4. PRDATA changed across an edge with PCLKEN low (TRM 5.9: outputs held)
    pclken = env.pin("PCLKEN")
    await RisingEdge(env.clock)
    pclken.value = 0
    await RisingEdge(env.clock)
    await RisingEdge(env.clock)          # an edge with PCLKEN low has passed
    tlm.prdata.value = 0x5A5A_5A5A
    await RisingEdge(env.clock)
    await RisingEdge(env.clock)
    pclken.value = 1
    await ClockCycles(env.clock, 2)
    found = mon.take("pclken-hold")
    assert found and "PRDATA" in found[0].message, mon.errors[:3]

    # 5. PREADY later than the bound
    mon.max_wait_states = 3
    twins.set_max_wait_states(3)
    tlm.wait_states = lambda: 6
    r = await env.read(ID)
    tlm.wait_states = lambda: 0
    mon.max_wait_states = env.apb.timeout_cycles
    twins.set_max_wait_states(env.apb.timeout_cycles)
    assert r.wait_states >= 6 and mon.transfers[-1] == r
    found = mon.take("pready-timeout")
    assert len(found) == 1, found

    assert not mon.errors, mon.errors[:3]
    r = await env.read(ID)
    assert (r.data, r.slverr) == (ID_RESET, False) and mon.transfers[-1] == r
    twins.check()
    env.finish()
