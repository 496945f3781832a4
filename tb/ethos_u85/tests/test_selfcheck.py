"""The bench checks itself: a bug is planted in the DUT (the TLM behind the pins, DUT=tlm) and
the scoreboard must report it.

Each case runs the same small DMA job (SRAM -> EXT) with one planted bug in the adapter's
AXI side or in what the device shows on APB/IRQ, and asserts that the scoreboard reported
a mismatch naming it: wrong write data, a write outside the model's footprint, a missing
write, a write on the wrong port, wrong AxCACHE, a burst longer than AXI_x.max_beats allows,
a wrong STATUS.faulting_channel, a missing IRQ edge, more bursts in flight than
AXI_x.max_outstanding allows, wrong AxPROT or AxDOMAIN, the DMA source read on the wrong
port, a read outside the model's read footprint, a burst across a 4 KB line, an IRQ that
CMD.clear_irq does not drop, a write to a read-only register (CONFIG) that takes effect,
a W beat strobing lanes outside its transfer, WLAST on the wrong beat (both reported by the AXI
subordinate, which ``tests/ethos_u85/test_sim.py`` runs in both implementations).
A clean run of the same job must
report nothing. Only DUT=tlm: the bugs are planted in the TLM adapter.

``test_coverage_sampled`` (both DUTs) checks the functional-coverage sampling of the
scoreboard (tb/ethos_u85/coverage.py) on the same job: every command of the stream counted once,
the job's end, the AXI bursts per port and direction, the APB transfers.
"""
from __future__ import annotations

import cocotb

from tb.ethos_u85 import coverage
from tb.ethos_u85.env import Env
from tb.ethos_u85.testlib.bugs import BUGS, plant
from tb.ethos_u85.testlib.marks import DUT, TIMEOUT, named, skip_now
from tb.ethos_u85.testlib.memmap import REGION_BASE, STREAM_ADDR, program_regions
from tb.ethos_u85.testlib.regs import OFF
from tb.ethos_u85.testlib.streams import dma_cmds, enc
from tlm.ethos_u85 import isa

SKIP = DUT != "tlm"
SKIP_REASON = "bench self-check: the bugs are planted in the TLM adapter (DUT=tlm only)"


@cocotb.parametrize(bug=named(BUGS))
@cocotb.test(skip=SKIP, **TIMEOUT)
async def test_scoreboard_catches(dut, bug):
    """Plant *bug* in the DUT; the scoreboard must report it (and nothing for 'none')."""
    if SKIP:
        skip_now(SKIP_REASON)
    env = Env(dut, reference_model=True)
    plant(env, bug)
    await env.start()
    await program_regions(env, (0, 0))                      # 64-byte bursts
    if bug == "outstanding":                                # one read, one write at a time
        for reg in ("AXI_SRAM", "AXI_EXT"):
            await env.write_ok(OFF[reg], 0)
    env.memory.write(REGION_BASE[2] + 0x10, bytes((7 * i + 3) & 0xFF for i in range(200)))
    dst = 0x34 if bug == "wide_strobe" else 0x30             # unaligned: lanes outside the first beat
    words = dma_cmds(src_region=2, src=0x10, dst_region=1, dst=dst, length=200) + \
        enc(("NPU_OP_STOP", dict(mask=1)))
    await env.load_stream(STREAM_ADDR, words)
    await env.run_job()
    await env.read_ok(OFF["QREAD"])
    await env.write_ok(OFF["CMD"], 0xC | 0x2)                # CMD.clear_irq
    await env.read_ok(OFF["STATUS"])
    await env.write_ok(OFF["CONFIG"], 0x12345678)            # read-only: ignored
    await env.read_ok(OFF["CONFIG"])
    found = env.scoreboard.mismatches + env.axi.errors
    want = BUGS[bug]
    if want is None:
        env.finish()
        return
    assert found, f"planted bug {bug!r}: the scoreboard reported nothing"
    assert any(want in m for m in found), (f"planted bug {bug!r}: no report mentions {want!r}; "
                                          f"got {found[:3]}")
    cocotb.log.info("bug %s caught: %s", bug, found[0])
    env.scoreboard.mismatches.clear()
    for sub in env.axi.ports.values():
        sub.errors.clear()
    env.finish()


@cocotb.test(**TIMEOUT)
async def test_coverage_sampled(dut):
    """The scoreboard samples functional coverage: run the DMA job (SRAM -> EXT, stream in
    EXT) with a private coverage model and check what it counted."""
    env = Env(dut, reference_model=True)
    cov = env.scoreboard.coverage = coverage.BenchCoverage()    # before start(): the recorder
    await env.start()
    await program_regions(env, (0, 0))
    env.memory.write(REGION_BASE[2] + 0x10, bytes(range(200)))
    words = dma_cmds(src_region=2, src=0x10, dst_region=1, dst=0x30, length=200) + \
        enc(("NPU_OP_STOP", dict(mask=1)))
    await env.load_stream(STREAM_ADDR, words)
    await env.run_job()
    env.finish()
    # every command executed once (NPU_SET_* decoded between the operations)
    want = {}
    for d in isa.decode(words):
        want[d.name] = want.get(d.name, 0) + 1
    got = {k: v for k, v in cov.opcode.hits.items() if v}
    assert got == want, f"opcode coverage {got}, the stream has {want}"
    assert cov.job_end.hits["npu_op_stop"] == 1, cov.job_end.hits
    assert sum(cov.kernel_op_mode.hits.values()) == 0          # a DMA, no kernel op
    # bursts: command fetch and DMA source on their ports, DMA destination writes on EXT0
    bl = cov.burst_len.hits
    for port, d in (("EXT0", "read"), ("SRAM0", "read"), ("EXT0", "write")):
        n = sum(v for k, v in bl.items() if k.startswith(f"{port}/{d}/"))
        assert n > 0, f"no {port} {d} burst sampled: {bl}"
    assert not any(v for k, v in bl.items() if k.startswith("SRAM0/write/")), bl
    assert cov.resp.hits["EXT0/write/OKAY"] > 0 and not cov.resp.other, cov.resp.hits
    assert cov.apb.hits["secure_priv/write/OKAY"] > 0 and cov.apb.hits["secure_priv/read/OKAY"] > 0
    assert cov.axi_prot.hits["EXT0/secure_priv"] > 0, cov.axi_prot.hits
    coverage.current().merge(cov)                              # into the run's report
