"""A job on a top level with more AXI manager ports than SRAM0/EXT0 (SRAM1, EXT1), run by
tests/multiport_fixture/run_multiport.py (DUT=tlm, a generated shell, ethos-u85-1024).

Not collected by tb.core.run (not ``test_*.py``): the default top level has SRAM0 and EXT0 only.

With CFGSRAMHASH0 = CFGEXTHASH0 = 0x100 the NPU stripes each port group over its two ports
by address bit 8 (TRM 2.3.3). A DMA SRAM -> EXT over many stripes must show: bursts on all
four ports, bound by TRM name; the passive monitors' bursts equal the subordinates'; the
scoreboard (port attribution per hash, every write, STATUS/QREAD/IRQ) clean; the PMU's
per-port events of SRAM1 and EXT1 equal the beats the monitors saw and the reference TLM's.
"""
from __future__ import annotations

import cocotb

from tb.ethos_u85.env import Env
from tb.ethos_u85.testlib.jobs import DMA, burst_key, dma_job
from tb.ethos_u85.testlib.marks import TIMEOUT, skip_now
from tb.ethos_u85.testlib.memmap import REGION_BASE, program_regions
from tb.ethos_u85.testlib.regs import OFF

PORTS = ("SRAM0", "SRAM1", "EXT0", "EXT1")
STRIPE = 0x100                               # address bit 8 selects the port of a group


@cocotb.test(**TIMEOUT)
async def test_multiport_job(dut):
    env = Env(dut, reference_model=True, pins=dict(CFGSRAMHASH0=STRIPE, CFGEXTHASH0=STRIPE),
              axi_monitor="pins")           # monitors rebuilding bursts from the pins themselves
    missing = set(PORTS) - set(env.axi_ports)
    if missing:
        skip_now(f"the top level has no AXI port {sorted(missing)}")
    await env.start()
    assert set(env.axi.ports) == set(env.axi_monitors) == set(PORTS)
    drv = env.driver
    await program_regions(env)
    events = ["sram1_rd_data_beat_received", "ext1_wr_data_beat_written",
              "sram0_rd_data_beat_received", "ext0_wr_data_beat_written"]
    await drv.pmu_setup(events, cycles=False)
    before = {p: dict(m.count) for p, m in env.axi_monitors.items()}
    p = dict(DMA, src=0x40, dst=0x80, length=2048)          # 16-byte aligned: beats = bytes / 16
    await dma_job(env, p)
    status = await drv.run_job(use_irq=True)
    assert not drv.check_faults(status), str(drv.check_faults(status))
    pmu = await drv.pmu_read()
    seen = {port: {k: v - before[port][k] for k, v in m.count.items()}
            for port, m in env.axi_monitors.items()}
    for port in PORTS:
        assert seen[port]["ar"] + seen[port]["aw"] > 0, f"no burst on {port}: {seen}"
    ref = [env.model.pmu.read(OFF[f"PMEVCNTR{n}"]) for n in range(len(events))]
    want = [seen["SRAM1"]["r"], seen["EXT1"]["w"], seen["SRAM0"]["r"], seen["EXT0"]["w"]]
    cocotb.log.info("PMU per-port beats %s, monitors %s, reference %s", pmu.counters, want, ref)
    assert pmu.counters == want == ref, (pmu.counters, want, ref)
    assert want[1] + want[3] == p["length"] // 16
    got = sorted(burst_key(b) for m in env.axi_monitors.values() for b in m.bursts)
    exp = sorted(burst_key(b) for s in env.axi.ports.values() for b in s.bursts)
    assert got == exp, f"monitors {len(got)} bursts, subordinates {len(exp)}"
    assert env.memory.read(REGION_BASE[p["dst_region"]] + p["dst"], p["length"]) == \
        env.memory.read(REGION_BASE[p["src_region"]] + p["src"], p["length"])
    env.finish()
