"""Register tests through the APB5 pins.

Expected values are the TRM's (Arm Ethos-U85 TRM r0p0 issue 05, chapter 3), typed here
from the manual, not taken from the TLM: the TLM is what these tests check when DUT=tlm.
"""
from __future__ import annotations

import random

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge

from tb.agents.apb import PROT_SECURE_PRIV
from tb.ethos_u85.env import Env

# ---------------------------------------------------------------- TRM register facts
ID, STATUS, CMD, RESET, QBASE_LO, QBASE_HI, QREAD, QCONFIG, QSIZE, PROT, CONFIG = (
    0x000, 0x004, 0x008, 0x00C, 0x010, 0x014, 0x018, 0x01C, 0x020, 0x024, 0x028)
REGIONCFG = 0x03C
PMCR = 0x1180


def BASEP_LO(n: int) -> int:
    return 0x080 + 8 * n


def BASEP_HI(n: int) -> int:
    return 0x084 + 8 * n


ID_RESET = 0x20007001
CMD_RESET = 0x0000000C                     # clock_q_enable = power_q_enable = 1
PMCR_RESET = 0x00004000                    # num_event_cnt = 8
CONFIG_RESET = {                           # TRM 3.3.1.10 fields for each ETHOSU85_<macs>
    "ethos-u85-128": 0x20000117, "ethos-u85-256": 0x20000118, "ethos-u85-512": 0x20001119,
    "ethos-u85-1024": 0x2000251A, "ethos-u85-2048": 0x2000261B}
ID_PAGE = {                                # PID4..7, PID0..3, CID0..3
    0xFD0: 0x04, 0xFD4: 0x00, 0xFD8: 0x00, 0xFDC: 0x00,
    0xFE0: 0x82, 0xFE4: 0xB5, 0xFE8: 0x0B, 0xFEC: 0x00,
    0xFF0: 0x0D, 0xFF4: 0xF0, 0xFF8: 0x05, 0xFFC: 0xB1}
ZERO_AT_RESET = (                          # rw/ro registers whose reset value is 0
    [RESET, QBASE_LO, QBASE_HI, QREAD, QCONFIG, QSIZE, 0x030, 0x038, REGIONCFG,
     0x040, 0x044, 0x048, 0x04C, 0x050, 0x054]
    + [BASEP_LO(n) for n in range(8)] + [BASEP_HI(n) for n in range(8)]
    + list(range(0x1184, 0x119C, 4)) + [0x11A0, 0x11A4, 0x11A8, 0x11AC, 0x11B0]
    + list(range(0x1300, 0x1320, 4)) + list(range(0x1380, 0x13A0, 4)))

TIMEOUT = dict(timeout_time=2, timeout_unit="ms")


def permitted(pprot: int, cpl: int, csl: int) -> bool:
    """TRM 3.1.1: PPROT[0] >= CPL and PPROT[1] <= CSL (PPROT[2] is not used)."""
    return (pprot & 1) >= cpl and ((pprot >> 1) & 1) <= csl


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
    assert all(v in (0x8, 0x0) for v in seen), f"STATUS during reset: {[hex(v) for v in seen]}"
    assert seen[0] == 0x8, "reset_status not set in the first STATUS read after nRESET"
    assert seen[-1] == 0
    for _ in range(3):
        assert await env.read_ok(STATUS) == 0, "STATUS after the reset sequence"

    assert await env.read_ok(ID) == ID_RESET
    assert await env.read_ok(CMD) == CMD_RESET
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
    assert await env.read_ok(0x060) == env.pins["CFGSRAMCAP"]
    assert await env.read_ok(0x064) == env.pins["CFGEXTCAP"]
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
        assert await env.read_ok(PROT) == (csl << 1 | cpl), f"PROT after reset with {cpl=} {csl=}"
        shadow = {QBASE_LO: 0, BASEP_LO(3): 0, REGIONCFG: 0}
        width = {QBASE_LO: 0xFFFFFFFC, BASEP_LO(3): 0xFFFFFFFF, REGIONCFG: 0xFFFF}
        for pprot in range(8):
            ok = permitted(pprot, cpl, csl)
            tag = f"CPL={cpl} CSL={csl} PPROT={pprot:03b}"
            for addr, value in ((ID, ID_RESET), (CONFIG, CONFIG_RESET[env.config]),
                                (PMCR, PMCR_RESET), (0xFFC, 0xB1), (STATUS, 0)):
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
    for addr in (ID, STATUS, QBASE_LO, BASEP_LO(0), PMCR, 0xFE0, 0xFFC):
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
    await env.write_ok(CMD, 0x8)             # clock_q_enable = 0, power_q_enable = 1
    assert await env.clkq.request() == "denied"
    await env.clkq.exit()
    assert await env.pwrq.request() == "accepted"
    await env.pwrq.exit()
    await env.write_ok(CMD, 0x4)             # clock_q_enable = 1, power_q_enable = 0
    assert await env.pwrq.request() == "denied"
    await env.pwrq.exit()
    assert await env.clkq.request() == "accepted"
    await env.clkq.exit()
    assert await env.read_ok(ID) == ID_RESET  # the APB works again after Q_EXIT
    env.finish()


# Hand-encoded command stream (TRM 3.5.3 cmd0: opcode [9:0], [15:14] = 00, payload [31:16]).
NPU_OP_IRQ = 0x001
NPU_OP_STOP = 0x000


@cocotb.test(**TIMEOUT)
async def test_irq_pin_stop_and_clear(dut):
    """NPU_OP_IRQ + NPU_OP_STOP raise the IRQ pin and STATUS bits; CMD.clear_irq and
    CMD.clear_irq_history clear them (TRM 3.3.1.2, 3.3.1.3, 3.10)."""
    env = await started_env(dut)
    stream = [0x005A << 16 | NPU_OP_IRQ, 0x0081 << 16 | NPU_OP_STOP]
    env.memory.write(0x2000, b"".join(w.to_bytes(4, "little") for w in stream))
    await env.write_ok(QBASE_LO, 0x2000)
    await env.write_ok(QBASE_HI, 0)
    await env.write_ok(QSIZE, 4 * len(stream))
    await FallingEdge(env.clock)
    assert int(env.irq.value) == 0
    await env.write_ok(CMD, 0xC | 0x1)                  # transition_to_running_state
    for _ in range(50):
        status = await env.read_ok(STATUS)
        if not status & 1:
            break
    assert status & 1 == 0, "the NPU did not stop"
    assert status & 0x2, f"STATUS.irq_raised not set: 0x{status:08x}"
    assert status >> 16 == 0x005A | 0x0081, f"irq_history_mask: 0x{status >> 16:04x}"
    assert status & 0x394 == 0, f"fault bits set: 0x{status:08x}"
    assert await env.read_ok(QREAD) == 8
    await FallingEdge(env.clock)
    assert int(env.irq.value) == 1, "IRQ pin low with STATUS.irq_raised set"
    await env.write_ok(CMD, 0xC | 0x2)                  # clear_irq
    await ClockCycles(env.clock, 2)
    await FallingEdge(env.clock)
    assert int(env.irq.value) == 0, "IRQ pin still high after CMD.clear_irq"
    status = await env.read_ok(STATUS)
    assert status & 0x2 == 0 and status >> 16 == 0x00DB
    await env.write_ok(CMD, 0xC | 0x00DB << 16)         # clear_irq_history
    assert await env.read_ok(STATUS) >> 16 == 0
    env.finish()
