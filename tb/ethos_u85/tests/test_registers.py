"""Register tests through the APB5 pins.

Expected reset values are the TRM's (Arm Ethos-U85 TRM r0p0 issue 05, chapter 3), typed here
from the manual, not taken from the TLM or the table: the TLM is what these tests check when
DUT=tlm, and they check the register table too. Offsets and field positions come from the
table (tlm/registers.py), the one source of truth.
"""
from __future__ import annotations

import random

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge

from tb.agents.apb import PROT_SECURE_PRIV
from tb.ethos_u85.env import Env
from tb.ethos_u85.testlib.regs import OFF, permitted
from tlm.ethos_u85 import isa
from tlm.ethos_u85 import registers as R

# ---------------------------------------------------------------- register offsets (table)
ID, STATUS, CMD, RESET, QBASE_LO, QBASE_HI, QREAD, QCONFIG, QSIZE, PROT, CONFIG = (
    OFF[n] for n in ("ID", "STATUS", "CMD", "RESET", "QBASE_LO", "QBASE_HI", "QREAD", "QCONFIG", "QSIZE",
                     "PROT", "CONFIG"))
REGIONCFG, PMCR = OFF["REGIONCFG"], OFF["PMCR"]
ST, CMD_F = R.get("STATUS"), R.get("CMD")


def BASEP_LO(n: int) -> int:
    return OFF[f"BASEP{n}_LO"]


def BASEP_HI(n: int) -> int:
    return OFF[f"BASEP{n}_HI"]


# ---------------------------------------------------------------- TRM reset values (manual)
ID_RESET = 0x20007001
RESET_CMD = 0x0000000C                     # clock_q_enable = power_q_enable = 1
PMCR_RESET = 0x00004000                    # num_event_cnt = 8
CONFIG_RESET = {                           # TRM 3.3.1.10 fields for each ETHOSU85_<macs>
    "ethos-u85-128": 0x20000117, "ethos-u85-256": 0x20000118, "ethos-u85-512": 0x20001119,
    "ethos-u85-1024": 0x2000251A, "ethos-u85-2048": 0x2000261B}
ID_PAGE = {OFF[n]: v for n, v in (         # PID4..7, PID0..3, CID0..3
    ("PID4", 0x04), ("PID5", 0x00), ("PID6", 0x00), ("PID7", 0x00),
    ("PID0", 0x82), ("PID1", 0xB5), ("PID2", 0x0B), ("PID3", 0x00),
    ("CID0", 0x0D), ("CID1", 0xF0), ("CID2", 0x05), ("CID3", 0xB1))}
ZERO_AT_RESET = [OFF[n] for n in (         # rw/ro registers whose reset value is 0
    "RESET", "QBASE_LO", "QBASE_HI", "QREAD", "QCONFIG", "QSIZE", "COND_STATUS", "POWER_CTRL", "REGIONCFG",
    "MEM_ATTR0", "MEM_ATTR1", "MEM_ATTR2", "MEM_ATTR3", "AXI_SRAM", "AXI_EXT",
    *(f"BASEP{n}_{w}" for n in range(8) for w in ("LO", "HI")),
    "PMCNTENSET", "PMCNTENCLR", "PMOVSSET", "PMOVSCLR", "PMINTSET", "PMINTCLR",
    "PMCCNTR_LO", "PMCCNTR_HI", "PMCCNTR_CFG", "PMCAXI_CHAN", "PMCLUT",
    *(f"PMEVCNTR{n}" for n in range(8)), *(f"PMEVTYPER{n}" for n in range(8)))]

TIMEOUT = dict(timeout_time=2, timeout_unit="ms")


async def started_env(dut, **kw) -> Env:
    env = Env(dut, **kw)
    await env.start()
    return env


# ---------------------------------------------------------------- tests
@cocotb.test(**TIMEOUT)
async def test_reset_values(dut):
    """STATUS through the reset sequence, then ID, CMD, CONFIG, PMCR, PID/CID, zeros."""
    env = Env(dut)
    await env.start(reset=False)
    await env.hard_reset(PORPL=1, PORSL=0)
    seen = await env.wait_reset_done()
    dut._log.info("STATUS during the reset sequence: %s", [hex(v) for v in seen])
    # Only reset_status may be set while the sequence runs; once clear it stays clear.
    in_reset = ST.encode(reset_status=1)
    assert all(v in (in_reset, 0) for v in seen), f"STATUS during reset: {[hex(v) for v in seen]}"
    assert seen[0] == in_reset, "reset_status not set in the first STATUS read after nRESET"
    assert seen[-1] == 0
    for _ in range(3):
        assert await env.read_ok(STATUS) == 0, "STATUS after the reset sequence"

    assert await env.read_ok(ID) == ID_RESET
    assert await env.read_ok(CMD) == RESET_CMD
    assert await env.read_ok(CONFIG) == CONFIG_RESET[env.config], env.config
    assert await env.read_ok(PMCR) == PMCR_RESET
    assert await env.read_ok(PROT) == 0b01          # {PORSL, PORPL} = {0, 1}
    for addr, value in ID_PAGE.items():
        got = await env.read_ok(addr)
        assert got == value, f"0x{addr:03x}: 0x{got:x} != 0x{value:x}"
    for addr in ZERO_AT_RESET:
        got = await env.read_ok(addr)
        assert got == 0, f"0x{addr:04x} resets to 0, read 0x{got:08x}"
    # CFG_SRAM_CAP / CFG_EXT_CAP mirror the CFG*CAP pins.
    assert await env.read_ok(OFF["CFG_SRAM_CAP"]) == env.pins["CFGSRAMCAP"]
    assert await env.read_ok(OFF["CFG_EXT_CAP"]) == env.pins["CFGEXTCAP"]
    env.finish()


@cocotb.test(**TIMEOUT)
async def test_prot_matrix(dut):
    """PROT follows PORPL/PORSL at hard reset; every PPROT against ro and rw registers."""
    env = Env(dut)
    await env.start(reset=False)
    rng = random.Random(random.getrandbits(32))
    for cpl, csl in ((1, 0), (0, 0), (1, 1), (0, 1)):
        await env.hard_reset(PORPL=cpl, PORSL=csl)
        await env.wait_reset_done()
        assert await env.read_ok(PROT) == R.get("PROT").encode(active_CPL=cpl, active_CSL=csl), \
            f"PROT after reset with {cpl=} {csl=}"
        shadow = {QBASE_LO: 0, BASEP_LO(3): 0, REGIONCFG: 0}
        width = {a: R.BY_OFFSET[a].write_mask for a in (QBASE_LO, BASEP_LO(3), REGIONCFG)}
        for pprot in range(8):
            ok = permitted(pprot, cpl, csl)
            tag = f"CPL={cpl} CSL={csl} PPROT={pprot:03b}"
            for addr, value in ((ID, ID_RESET), (CONFIG, CONFIG_RESET[env.config]),
                                (PMCR, PMCR_RESET), (OFF["CID3"], 0xB1), (STATUS, 0)):
                r = await env.read(addr, prot=pprot)
                assert r.slverr == (not ok), f"{tag} read 0x{addr:03x}: PSLVERR={int(r.slverr)}"
                assert r.data == (value if ok else 0), f"{tag} read 0x{addr:03x}: 0x{r.data:x}"
            for addr in shadow:
                value = rng.getrandbits(32) & width[addr]
                r = await env.write(addr, value, prot=pprot)
                assert r.slverr == (not ok), f"{tag} write 0x{addr:03x}: PSLVERR={int(r.slverr)}"
                if ok:
                    shadow[addr] = value
                got = await env.read_ok(addr, prot=PROT_SECURE_PRIV)
                assert got == shadow[addr], (f"{tag} write 0x{addr:03x} "
                                             f"{'took no effect' if ok else 'took effect'}")
    env.finish()


@cocotb.test(**TIMEOUT)
async def test_pslverr_subword_and_misaligned(dut):
    """Sub-word writes (PSTRB != 0xF) and PADDR[1:0] != 0 give PSLVERR and no effect."""
    env = await started_env(dut)
    rng = random.Random(random.getrandbits(32))
    base = {QBASE_LO: rng.getrandbits(30) << 2, BASEP_LO(0): rng.getrandbits(32),
            BASEP_HI(5): rng.getrandbits(8)}
    for addr, value in base.items():
        await env.write_ok(addr, value)
    for addr, value in base.items():
        for strb in range(0xF):                      # every strobe pattern but 0b1111
            r = await env.write(addr, rng.getrandbits(32) & ~value & 0xFFFFFFFC, strb=strb)
            assert r.slverr, f"write 0x{addr:03x} PSTRB={strb:04b} without PSLVERR"
            got = await env.read_ok(addr)
            assert got == value, f"write 0x{addr:03x} PSTRB={strb:04b} changed it to 0x{got:x}"
    for addr in (ID, STATUS, QBASE_LO, BASEP_LO(0), PMCR, OFF["PID0"], OFF["CID3"]):
        for low in (1, 2, 3):
            r = await env.read(addr + low)
            assert r.slverr and r.data == 0, f"read 0x{addr + low:04x}: {r}"
            r = await env.write(addr + low, 0xFFFFFFFF)
            assert r.slverr, f"write 0x{addr + low:04x} without PSLVERR"
            r = await env.write(addr + low, 0xFFFFFFFF, strb=1 << low)
            assert r.slverr, f"sub-word write 0x{addr + low:04x} without PSLVERR"
    for addr, value in base.items():
        got = await env.read_ok(addr)
        assert got == value, f"misaligned write changed 0x{addr:03x} to 0x{got:x}"
    assert await env.read_ok(ID) == ID_RESET
    env.finish()


@cocotb.test(**TIMEOUT)
async def test_basep_qbase_readback(dut):
    """BASEP0..7 and QBASE hold what was written (40-bit pointers, low word first).
    Every transfer is also checked by the APB scoreboard against a reference TLM."""
    env = await started_env(dut, reference_model=True)
    rng = random.Random(random.getrandbits(32))
    for rnd in range(3):
        expect = {}
        for n in range(8):
            expect[BASEP_LO(n)] = rng.getrandbits(32)
            expect[BASEP_HI(n)] = rng.getrandbits(8)       # pointer bits [39:32]
        expect[QBASE_LO] = rng.getrandbits(30) << 2        # QBASE must be 4-byte aligned
        expect[QBASE_HI] = rng.getrandbits(8)
        for addr, value in rng.sample(sorted(expect.items()), len(expect)):
            await env.write_ok(addr, value)
        for addr, value in sorted(expect.items()):
            got = await env.read_ok(addr)
            assert got == value, f"round {rnd}: 0x{addr:03x} read 0x{got:08x}, wrote 0x{value:08x}"
    for bit in range(32):                                   # walking one through BASEP0 low
        await env.write_ok(BASEP_LO(0), 1 << bit)
        assert await env.read_ok(BASEP_LO(0)) == 1 << bit
    for bit in range(8):                                    # and through QBASE[39:32]
        await env.write_ok(QBASE_HI, 1 << bit)
        assert await env.read_ok(QBASE_HI) == 1 << bit
    # Reserved bits [63:40]: whatever they read as, the pointer bits are kept.
    await env.write_ok(BASEP_HI(7), 0xFFFFFF5A)
    assert (await env.read_ok(BASEP_HI(7))) & 0xFF == 0x5A
    assert env.scoreboard.checked >= 100, f"scoreboard checked {env.scoreboard.checked} transfers"
    env.finish()


@cocotb.test(**TIMEOUT)
async def test_ro_writes_ignored(dut):
    """Writes to read-only registers are ignored without a bus error (TRM 3.4)."""
    env = await started_env(dut)
    ro = {ID: ID_RESET, CONFIG: CONFIG_RESET[env.config], PROT: 0b01, QREAD: 0, STATUS: 0}
    ro.update(ID_PAGE)
    for addr, value in ro.items():
        r = await env.write(addr, (~value) & 0xFFFFFFFF)
        assert not r.slverr, f"write to ro 0x{addr:03x} gave PSLVERR"
        got = await env.read_ok(addr)
        assert got == value, f"write to ro 0x{addr:03x} changed it to 0x{got:x}"
    env.finish()


@cocotb.test(**TIMEOUT)
async def test_apb_wait_states_and_pclken(dut):
    """The agents keep data intact with completer wait states and a gated PCLKEN."""
    rng = random.Random(random.getrandbits(32))
    env = Env(dut, apb_wait_states=lambda: rng.choice((0, 0, 1, 2, 3)))
    await env.start()
    env.set_pclken([1, 0, 1, 1, 0, 0])
    expect = {BASEP_LO(n): rng.getrandbits(32) for n in range(8)}
    for addr, value in expect.items():
        await env.write_ok(addr, value)
    for addr, value in expect.items():
        assert await env.read_ok(addr) == value
    assert await env.read_ok(ID) == ID_RESET
    env.set_pclken(None)
    if env.tlm is not None:
        waits = sum(r.wait_states for r in env.apb.transfers)
        assert waits > 0, "the adapter inserted no wait states"
    env.finish()


@cocotb.test(**TIMEOUT)
async def test_qchannel_accept_deny(dut):
    """An idle NPU accepts clock and power Q-Channel requests; it denies them when CMD
    keeps the clock (clock_q_enable = 0) or the power (power_q_enable = 0) demanded."""
    env = await started_env(dut)
    assert env.clkq is not None and env.pwrq is not None, "no CLKQ*/PWRQ* Q-Channel pins"
    assert int(env.clkq.qacceptn.value) == 1 and int(env.pwrq.qacceptn.value) == 1
    await ClockCycles(env.clock, 2)
    await FallingEdge(env.clock)
    assert int(env.clkq.qactive.value) == 0, "CLKQACTIVE high while stopped and idle"
    assert await env.clkq.request() == "accepted"
    env.pin("PWAKEUP").value = 1             # TRM 5.5: PWAKEUP is ORed into CLKQACTIVE
    await ClockCycles(env.clock, 2)
    await FallingEdge(env.clock)
    assert int(env.clkq.qactive.value) == 1, "PWAKEUP does not raise CLKQACTIVE"
    env.pin("PWAKEUP").value = 0
    await env.clkq.exit()
    assert await env.pwrq.request() == "accepted"
    await env.pwrq.exit()
    await env.write_ok(CMD, CMD_F.encode(clock_q_enable=0, power_q_enable=1))
    assert await env.clkq.request() == "denied"
    await env.clkq.exit()
    assert await env.pwrq.request() == "accepted"
    await env.pwrq.exit()
    await env.write_ok(CMD, CMD_F.encode(clock_q_enable=1, power_q_enable=0))
    assert await env.pwrq.request() == "denied"
    await env.pwrq.exit()
    assert await env.clkq.request() == "accepted"
    await env.clkq.exit()
    assert await env.read_ok(ID) == ID_RESET  # the APB works again after Q_EXIT
    env.finish()


@cocotb.test(**TIMEOUT)
async def test_irq_pin_stop_and_clear(dut):
    """NPU_OP_IRQ + NPU_OP_STOP raise the IRQ pin and STATUS bits; CMD.clear_irq and
    CMD.clear_irq_history clear them (TRM 3.3.1.2, 3.3.1.3, 3.10)."""
    env = await started_env(dut)
    stream = isa.encode("NPU_OP_IRQ", mask=0x005A) + isa.encode("NPU_OP_STOP", mask=0x0081)
    env.memory.write(0x2000, b"".join(w.to_bytes(4, "little") for w in stream))
    await env.write_ok(QBASE_LO, 0x2000)
    await env.write_ok(QBASE_HI, 0)
    await env.write_ok(QSIZE, 4 * len(stream))
    await FallingEdge(env.clock)
    assert int(env.irq.value) == 0
    keep = CMD_F.encode(clock_q_enable=1, power_q_enable=1)
    await env.write_ok(CMD, keep | CMD_F.encode(transition_to_running_state=1))
    for _ in range(50):
        f = ST.decode(await env.read_ok(STATUS))
        if not f["state"]:
            break
    assert f["state"] == 0, "the NPU did not stop"
    assert f["irq_raised"], f"STATUS.irq_raised not set: {f}"
    assert f["irq_history_mask"] == 0x005A | 0x0081, f"irq_history_mask: 0x{f['irq_history_mask']:04x}"
    assert not any(f[b] for b in ("bus_status", "cmd_parse_error", "ecc_fault", "branch_fault")), \
        f"fault bits set: {f}"
    assert await env.read_ok(QREAD) == 8
    await FallingEdge(env.clock)
    assert int(env.irq.value) == 1, "IRQ pin low with STATUS.irq_raised set"
    await env.write_ok(CMD, keep | CMD_F.encode(clear_irq=1))
    await ClockCycles(env.clock, 2)
    await FallingEdge(env.clock)
    assert int(env.irq.value) == 0, "IRQ pin still high after CMD.clear_irq"
    f = ST.decode(await env.read_ok(STATUS))
    assert f["irq_raised"] == 0 and f["irq_history_mask"] == 0x00DB
    await env.write_ok(CMD, keep | CMD_F.encode(clear_irq_history=0x00DB))
    assert ST.decode(await env.read_ok(STATUS))["irq_history_mask"] == 0
    env.finish()
