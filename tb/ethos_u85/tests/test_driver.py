"""The host driver (tb/driver.py) and the passive AXI monitors (tb.agents.axi.AxiMonitor).

* A job run as the Ethos-U core driver runs it: AXI set-up, load, run, wait for the IRQ
  pin (no STATUS polling), fault check, clear the IRQ; and a bus error decoded by
  ``check_faults``.
* PMU set-up and read-out: event counters and PMCCNTR around a DMA job, compared with the
  scoreboard's reference TLM and with the AXI monitors' handshake counts.
* The monitors' bursts, rebuilt from the pins only, equal the bench subordinates' record
  (with latency, reordering and backpressure), and can feed the scoreboard on their own.
* (DUT=tlm) the checks fire: a payload changed while VALID waits is reported by the
  monitor; a corrupted write seen only through the monitors is caught by the scoreboard.
"""
from __future__ import annotations

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge

from tb.ethos_u85.driver import HostDriver, pmu_event
from tb.ethos_u85.env import Env
from tb.ethos_u85.testlib.hostile import soft_reset
from tb.ethos_u85.testlib.jobs import DMA, burst_key, dma_job
from tb.ethos_u85.testlib.marks import DUT, TIMEOUT, seeded_rng, skip_now
from tb.ethos_u85.testlib.memmap import REGION_BASE, program_regions
from tb.ethos_u85.testlib.regs import OFF, ST_IRQ


def apb_counter(env: Env, addr: int) -> list:
    """A list that grows by one at every APB read of *addr*."""
    seen: list = []
    env.apb.listeners.append(lambda r: seen.append(r) if not r.write and r.addr == addr else None)
    return seen


@cocotb.test(**TIMEOUT)
async def test_job_by_irq(dut):
    """The core driver's job: run, then wait for the IRQ pin (STATUS read once, after the
    IRQ), no fault, QREAD at the end, clear_irq drops the pin; the scoreboard agrees."""
    env = Env(dut, reference_model=True)
    await env.start()
    drv = env.driver
    await program_regions(env)
    words = await dma_job(env)
    status_reads = apb_counter(env, OFF["STATUS"])
    await drv.run()
    status = await drv.wait_irq()
    assert len(status_reads) == 1, f"{len(status_reads)} STATUS reads: the wait polled"
    await FallingEdge(env.clock)
    assert int(env.irq.value) == 1
    report = drv.check_faults(status)
    assert not report and report.fields["irq_raised"] and not report.fields["state"], str(report)
    assert await drv.read("QREAD") == 4 * len(words)
    await drv.clear_irq(check_pin=True)
    job = env.scoreboard.close_job()
    assert job is not None and job.mismatches_in_job == 0, env.scoreboard.mismatches[:3]
    # with no job the IRQ never comes: the wait times out
    try:
        await drv.wait_irq(max_cycles=200)
    except TimeoutError:
        pass
    else:
        raise AssertionError("wait_irq returned without an IRQ")
    env.finish()


@cocotb.test(**TIMEOUT)
async def test_bus_error_report(dut):
    """A DMA read answered SLVERR: the job ends by IRQ and ``check_faults`` names
    bus_status on the SRAM interface, channel rd_mem2mem (TRM 3.3.1.2); a soft reset
    clears it."""
    env = Env(dut, reference_model=True)
    await env.start()
    drv = env.driver
    await program_regions(env)
    await dma_job(env)
    src = REGION_BASE[DMA["src_region"]] + DMA["src"]
    env.axi.inject_fault(src & ~0xF, (src & ~0xF) + 0x10, "SLVERR", kind="r")
    status = await drv.run_job(use_irq=True)
    report = drv.check_faults(status)
    assert report.faults == ["bus_status"], str(report)
    assert (report.interface, report.channel) == ("sram", "rd_mem2mem"), str(report)
    env.axi.clear_faults()
    seen = await soft_reset(env, 0b01)            # drv.soft_reset, the reference kept in step
    assert seen[-1] == 0 and not drv.check_faults(await drv.read("STATUS"))
    env.finish()


@cocotb.test(**TIMEOUT)
async def test_pmu(dut):
    """PMU set-up (PMEVTYPERn, PMCNTENSET, PMCR) and read-out (PMEVCNTRn, PMCCNTR) around a
    DMA job EXT -> SRAM with the command stream in SRAM: the EXT read beats and SRAM write
    beats (16-byte aligned DMA) equal the reference TLM's counters and the beats the AXI
    monitors saw; the SRAM read beats (command fetch, whose prefetch is the NPU's own) equal
    the monitors'; npu_active + npu_idle = PMCCNTR, in the DUT and in the reference (whose
    cycles are model cycles, so PMCCNTR itself is not compared)."""
    env = Env(dut, reference_model=True)
    await env.start()
    drv = env.driver
    await program_regions(env, qconfig=0)                   # stream on MEM_ATTR0: SRAM
    p = dict(src_region=1, src=0x40, dst_region=3, dst=0x100, length=1024)   # EXT -> SRAM
    events = ["ext_rd_data_beat_received", "sram_wr_data_beat_written",
              "sram_rd_data_beat_received", "npu_active", "npu_idle"]
    timed = {pmu_event(e) for e in events[2:]}               # NPU-specific: not vs the TLM
    pmu_offsets = {OFF["PMCCNTR_LO"], OFF["PMCCNTR_HI"]} | {
        OFF[f"PMEVCNTR{n}"] for n, e in enumerate(events) if pmu_event(e) in timed}
    env.scoreboard.ignore = lambda r: not r.write and r.addr in pmu_offsets
    await drv.pmu_setup(events, cycles=True)
    mons = env.axi_monitors
    before = {port: dict(m.count) for port, m in mons.items()}
    await dma_job(env, p, stream=REGION_BASE[5] + 0x8000)
    status = await drv.run_job(use_irq=True)
    assert not drv.check_faults(status), str(drv.check_faults(status))
    pmu = await drv.pmu_read()
    ref = env.model.pmu
    ref_counts = [ref.read(OFF[f"PMEVCNTR{n}"]) for n in range(len(events))]
    ref_cycles = ref.read(OFF["PMCCNTR_LO"]) | ref.read(OFF["PMCCNTR_HI"]) << 32
    cocotb.log.info("PMU: DUT %s cycles %d; reference %s cycles %d", pmu.counters, pmu.cycles,
                    ref_counts, ref_cycles)
    seen = {port: {k: v - before[port][k] for k, v in m.count.items()} for port, m in mons.items()}
    ext_r, sram_w, sram_r, active, idle = pmu.counters
    assert ext_r == p["length"] // 16 == ref_counts[0] == seen["EXT0"]["r"], \
        (ext_r, ref_counts[0], seen["EXT0"]["r"])
    assert sram_w == p["length"] // 16 == ref_counts[1] == seen["SRAM0"]["w"], \
        (sram_w, ref_counts[1], seen["SRAM0"]["w"])
    assert sram_r == seen["SRAM0"]["r"] > 0, (sram_r, seen["SRAM0"]["r"])
    assert 0 < active < pmu.cycles and active + idle == pmu.cycles, pmu
    assert 0 < ref_counts[3] and ref_counts[3] + ref_counts[4] == ref_cycles, \
        (ref_counts, ref_cycles)
    assert pmu.overflow == 0
    env.finish()


@cocotb.test(**TIMEOUT)
async def test_monitor_bursts(dut):
    """The AXI monitors' bursts (rebuilt from the pins) equal the subordinates' record,
    burst for burst, with random latency, read reordering and backpressure and an error
    response; the scoreboard is fed by the monitors (``axi_source='monitor'``)."""
    rng = seeded_rng()
    env = Env(dut, reference_model=True, axi_source="monitor")
    await env.start()
    env.axi.configure(latency=(0, 12), reorder=True, backpressure=0.3, seed=rng.getrandbits(16))
    await program_regions(env, (rng.randrange(3), rng.randrange(3)))
    for sub in env.axi.ports.values():
        sub.bursts.clear()
    for m in env.axi_monitors.values():
        m.bursts.clear()
    await dma_job(env, dict(DMA, length=700))
    await env.run_job()
    # a second job whose DMA write gets an error response
    dst = REGION_BASE[DMA["dst_region"]] + DMA["dst"]
    env.axi.inject_fault(dst & ~0xF, (dst & ~0xF) + 0x40, "SLVERR", kind="w")
    await env.driver.clear_irq()
    await dma_job(env, dict(DMA, length=700))
    await env.run_job()
    await ClockCycles(env.clock, 20)
    got = sorted(burst_key(b) for m in env.axi_monitors.values() for b in m.bursts)
    want = sorted(burst_key(b) for s in env.axi.ports.values() for b in s.bursts)
    assert got and any(k[1] for k in got) and any(k[10].name != "OKAY" for k in got)
    assert got == want, (f"monitor {len(got)} bursts, subordinates {len(want)}; first "
                         f"difference: {next((a, b) for a, b in zip(got, want) if a != b)}"
                         if len(got) == len(want) else f"{len(got)} vs {len(want)} bursts")
    env.finish()


@cocotb.test(skip=DUT != "tlm", **TIMEOUT)
async def test_monitor_catches(dut):
    """(DUT=tlm: the TLM adapter's AXI outputs can be overridden) An ARADDR changed while
    ARVALID waits for ARREADY is reported by the monitor; a write corrupted on its way to
    the pins is caught by a scoreboard fed only by the monitors."""
    if DUT != "tlm":
        skip_now("the pins are overridden through the TLM adapter (DUT=tlm only)")
    from tb.ethos_u85.testlib.bugs import plant
    env = Env(dut, reference_model=True, axi_source="monitor")
    plant(env, "corrupt_data")
    await env.start()
    await program_regions(env, (0, 0))
    await dma_job(env)
    sram = env.axi.ports["SRAM0"]
    sram.ar.set_pause_generator(iter([1] * 10_000))           # ARREADY low on SRAM0
    araddr = env.pinmap.driver(dut, "ARADDRSRAM0")
    await env.driver.run()
    for _ in range(5000):
        await FallingEdge(env.clock)
        if int(env.pin("ARVALIDSRAM0").value):
            break
    await ClockCycles(env.clock, 2)
    araddr.value = int(araddr.value) ^ 0x40                   # the payload moves
    await ClockCycles(env.clock, 2)
    mon = env.axi_monitors["SRAM0"]
    assert any("payload changed" in e for e in mon.errors), mon.errors[:3]
    araddr.value = int(araddr.value) ^ 0x40
    sram.ar.set_pause_generator(None)
    sram.ar.pause = False
    status = await env.driver.wait_done()
    assert status & ST_IRQ
    assert any("differ from the model" in m for m in env.scoreboard.mismatches), \
        env.scoreboard.mismatches[:3]
    mon.errors.clear()
    env.scoreboard.mismatches.clear()
    env.finish()


@cocotb.test(**TIMEOUT)
async def test_driver_standalone(dut):
    """``HostDriver`` on a bench without the scoreboard's reference: soft reset with the
    pending PROT applied, then a job by IRQ."""
    env = Env(dut, scoreboard=False)
    await env.start()
    drv = HostDriver(env)
    await drv.soft_reset(0b01)
    await program_regions(env)
    await dma_job(env)
    status = await drv.run_job(use_irq=True)
    assert not drv.check_faults(status) and status & ST_IRQ, str(drv.check_faults(status))
    env.finish()
