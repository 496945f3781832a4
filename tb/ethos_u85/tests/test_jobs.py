"""Command-stream jobs through the pins: DMA (1D/2D/3D), STOP and resume, end of queue,
reserved opcode, AXI error responses on command fetch and DMA.

Streams are built with tlm.ethos_u85.isa.encode. Every test runs with the scoreboard (APB replay, a
reference TLM run per job, STATUS/QREAD/IRQ and every AXI write checked), and also checks
hand-expected results: DMA destinations against a byte-loop model of the TRM pseudocode
(tlm/ethos_u85/dma_reference.py), STATUS bits, QREAD and irq_history_mask as the TRM defines them.
"""
from __future__ import annotations

import cocotb
from cocotb.triggers import FallingEdge

from tb.ethos_u85.env import Env
from tb.ethos_u85.testlib.marks import TIMEOUT, named, seeded_rng
from tb.ethos_u85.testlib.memmap import REGION_BASE, STREAM_ADDR, program_regions
from tb.ethos_u85.testlib.regs import (
    CH_RD_CMD,
    CH_RD_M2M,
    CH_RD_M2M_IDX,
    CH_WR_M2M,
    IF_EXT,
    IF_SRAM,
    OFF,
    ST_BUS,
    ST_PARSE,
    ST_RUN,
    status_fields,
)
from tb.ethos_u85.testlib.streams import check_bytes, dma_case, dma_cmds, dma_expect, enc, fill_random, span

STATUS, CMD, QREAD = OFF["STATUS"], OFF["CMD"], OFF["QREAD"]


def isa_word(name: str, **fields) -> int:
    (w,) = enc((name, fields))
    return w


async def job_env(dut, backpressure: "float | None" = None, seed: int = 0, **kw) -> Env:
    env = Env(dut, reference_model=True, **kw)
    await env.start()
    if backpressure:
        env.axi.random_backpressure(seed, backpressure)
    return env


async def clear_irq(env) -> None:
    await env.driver.clear_irq(check_pin=True)


@cocotb.parametrize(mode=named(["1d", "2d", "3d"]),
                    backpressure=named([None, 0.3], lambda v: "bp" if v else "none"))
@cocotb.test(**TIMEOUT)
async def test_dma(dut, mode, backpressure):
    """NPU_OP_DMA_START 1D/2D/3D between the SRAM and EXT port groups (random unaligned
    addresses, lengths and strides, random AXI_x.max_beats), with and without random AXI
    backpressure; destination bytes against the TRM pseudocode, everything else against
    the scoreboard."""
    rng = seeded_rng()
    env = await job_env(dut, backpressure, rng.getrandbits(16))
    await program_regions(env, (rng.randrange(3), rng.randrange(3)))
    shadow: dict = {}
    words = []
    cases = [dma_case(rng, mode) for _ in range(2)]
    for p in cases:
        lo, hi = span(p, "src")
        fill_random(env, rng, lo, hi - lo, shadow)
    for p in cases:
        words += dma_cmds(**p)
        dma_expect(shadow, **p)
    words += enc(("NPU_OP_STOP", dict(mask=0x1)))
    await env.load_stream(STREAM_ADDR, words)
    status = await env.run_job()
    f = status_fields(status)
    assert f["irq_raised"] and not (status & (ST_BUS | ST_PARSE)), f"STATUS 0x{status:08x}"
    assert f["irq_history_mask"] == 1
    assert await env.read_ok(QREAD) == 4 * len(words)
    for p in cases:
        lo, hi = span(p, "dst")
        check_bytes(env, shadow, lo - 16, hi + 16, f"DMA {p}")
    assert env.scoreboard.jobs and env.scoreboard.jobs[-1].closed
    env.finish()


@cocotb.test(**TIMEOUT)
async def test_stop_and_resume(dut):
    """A stream with NPU_OP_STOP in the middle: the NPU stops with irq_raised and QREAD after
    the STOP; CMD.transition_to_running_state resumes at QREAD (TRM 3.5.2)."""
    rng = seeded_rng()
    env = await job_env(dut)
    await program_regions(env)
    shadow: dict = {}
    p1 = dict(src_region=2, src=0x10, dst_region=1, dst=0x40, length=100)
    p2 = dict(src_region=0, src=0x20, dst_region=3, dst=0x7, length=77)
    for p in (p1, p2):
        lo, hi = span(dict(p, mode="1d"), "src")
        fill_random(env, rng, lo, hi - lo, shadow)
    part1 = dma_cmds(**p1) + enc(("NPU_OP_STOP", dict(mask=0x0010)))
    part2 = dma_cmds(**p2) + enc(("NPU_OP_STOP", dict(mask=0x0200)))
    await env.load_stream(STREAM_ADDR, part1 + part2)
    status = await env.run_job()
    f = status_fields(status)
    assert f["irq_raised"] and not f["cmd_end_reached"] and f["irq_history_mask"] == 0x0010
    assert await env.read_ok(QREAD) == 4 * len(part1)
    dma_expect(shadow, **p1)
    check_bytes(env, shadow, REGION_BASE[1], REGION_BASE[1] + 0x100, "after the first STOP")
    assert env.memory.read(REGION_BASE[3], 0x60) == bytes(0x60), "second DMA ran before resume"
    await clear_irq(env)
    status = await env.run_job()
    f = status_fields(status)
    assert f["irq_raised"] and f["irq_history_mask"] == 0x0210, f"STATUS 0x{status:08x}"
    assert await env.read_ok(QREAD) == 4 * len(part1 + part2)
    dma_expect(shadow, **p2)
    check_bytes(env, shadow, REGION_BASE[3], REGION_BASE[3] + 0x60, "after resume")
    assert len(env.scoreboard.jobs) == 2
    env.finish()


@cocotb.test(**TIMEOUT)
async def test_end_of_queue(dut):
    """A stream without NPU_OP_STOP ends when QREAD reaches QSIZE: cmd_end_reached and IRQ
    (TRM 3.3.1.2); a new start runs it again from QBASE."""
    env = await job_env(dut)
    await program_regions(env)
    words = enc(("NPU_SET_IFM_REGION", dict(region=3)), ("NPU_OP_IRQ", dict(mask=0x0004)),
                ("NPU_SET_OFM_BASE0", dict(addr=0x1234)), ("NPU_OP_KERNEL_WAIT", dict(n=0)))
    await env.load_stream(STREAM_ADDR, words)
    status = await env.run_job()
    f = status_fields(status)
    assert f["cmd_end_reached"] and f["irq_raised"] and f["irq_history_mask"] == 0x0004
    assert not status & (ST_BUS | ST_PARSE | ST_RUN)
    assert await env.read_ok(QREAD) == 4 * len(words) == await env.read_ok(OFF["QSIZE"])
    await FallingEdge(env.clock)
    assert int(env.irq.value) == 1
    await clear_irq(env)
    status = await env.run_job()
    assert status_fields(status)["cmd_end_reached"]
    assert await env.read_ok(QREAD) == 4 * len(words)
    env.finish()


@cocotb.parametrize(bad=named([0x0000_0004, 0x0000_8000, 0x0000_4007], lambda v: f"0x{v:08x}"))
@cocotb.test(**TIMEOUT)
async def test_reserved_opcode(dut, bad):
    """A reserved encoding (unused cmd0 opcode, control = 2, unused cmd1 opcode) stops the
    NPU with cmd_parse_error and IRQ; the command after it never runs (TRM 3.5.3, 3.6.8)."""
    env = await job_env(dut)
    await program_regions(env)
    words = enc(("NPU_OP_IRQ", dict(mask=0x0001))) + [bad, 0] + enc(("NPU_OP_IRQ", dict(mask=0x0002)))
    await env.load_stream(STREAM_ADDR, words)
    await FallingEdge(env.clock)
    status = await env.run_job()
    f = status_fields(status)
    assert f["cmd_parse_error"] and f["irq_raised"] and not f["state"], f"STATUS 0x{status:08x}"
    assert f["irq_history_mask"] == 0x0001, "a command after the reserved one ran"
    assert await env.read_ok(QREAD) == 4, "QREAD does not point at the reserved command"
    await FallingEdge(env.clock)
    assert int(env.irq.value) == 1, "IRQ pin low after cmd_parse_error"
    await env.write_ok(CMD, 0xC | 0x2)
    assert status_fields(await env.read_ok(STATUS))["cmd_parse_error"], "cmd_parse_error not sticky"
    env.finish()


# where -> (stream builder, expected channel, fault address, fault kind)
FAULT_CASES = {
    "fetch_ext": CH_RD_CMD, "fetch_sram": CH_RD_CMD,
    "dma_read": CH_RD_M2M, "dma_write": CH_WR_M2M, "dma_index": CH_RD_M2M_IDX,
}


@cocotb.parametrize(where=named(FAULT_CASES), resp=named(["SLVERR", "DECERR"]))
@cocotb.test(**TIMEOUT)
async def test_bus_error(dut, where, resp):
    """An AXI error response (SLVERR/DECERR from the bench subordinate) on the command fetch
    (EXT or SRAM QCONFIG), a DMA read, a DMA index read or a DMA write sets STATUS.bus_status with the
    faulting_interface and faulting_channel of the access, stops the NPU and raises IRQ
    (TRM 3.3.1.2); nothing is written by the faulting access."""
    env = await job_env(dut)
    qconfig = 0 if where == "fetch_sram" else 2         # MEM_ATTR0 = SRAM, MEM_ATTR2 = EXT
    await program_regions(env, qconfig=qconfig)
    stream = STREAM_ADDR if qconfig == 2 else REGION_BASE[5] + 0x8000
    if where == "dma_read":                              # SRAM source, EXT destination
        p = dict(src_region=2, src=0x100, dst_region=1, dst=0x200, length=64)
        fault = (REGION_BASE[2] + 0x100, REGION_BASE[2] + 0x110, "r")
        iface = IF_SRAM
    elif where == "dma_write":                           # SRAM source, EXT destination
        p = dict(src_region=3, src=0x100, dst_region=4, dst=0x200, length=64)
        fault = (REGION_BASE[4] + 0x200, REGION_BASE[4] + 0x240, "w")
        iface = IF_EXT
    elif where == "dma_index":                           # gather, index list in EXT region 6
        p = dict(src_region=3, src=0x100, dst_region=4, dst=0x200, length=64)
        fault = (REGION_BASE[6] + 0x40, REGION_BASE[6] + 0x50, "r")
        iface = IF_EXT
    else:
        p = dict(src_region=3, src=0x100, dst_region=4, dst=0x200, length=64)
        fault = (stream, stream + 0x40, "r")
        iface = IF_EXT if where == "fetch_ext" else IF_SRAM
    env.memory.write(REGION_BASE[p["src_region"]] + p["src"], bytes(range(64)))
    dma = dma_cmds(**p)
    if where == "dma_index":
        env.memory.write(REGION_BASE[6] + 0x40, (0).to_bytes(4, "little"))
        dma = enc(("NPU_SET_DMA0_IDX_REGION", dict(region=6)), ("NPU_SET_DMA0_IDX", dict(addr=0x40)),
                  ("NPU_SET_DMA0_IDX_MAX", dict(idx_max=3))) + \
            dma_cmds(**p, mode="2d", size0=1, src_stride0=64, dst_stride0=64)
        dma[dma.index(isa_word("NPU_SET_DMA0_SRC_REGION", region=3, stride_mode=1))] = \
            isa_word("NPU_SET_DMA0_SRC_REGION", region=3, stride_mode=1, idx_mode=1)
    words = enc(("NPU_OP_IRQ", dict(mask=0x0008))) + dma + \
        enc(("NPU_OP_IRQ", dict(mask=0x0040)), ("NPU_OP_STOP", dict(mask=0x0100)))
    await env.load_stream(stream, words)
    env.axi.inject_fault(fault[0], fault[1], resp, kind=fault[2])
    status = await env.run_job()
    f = status_fields(status)
    assert f["bus_status"] and f["irq_raised"] and not f["state"], f"STATUS 0x{status:08x}"
    assert f["faulting_channel"] == FAULT_CASES[where], f"faulting_channel {f['faulting_channel']}"
    assert f["faulting_interface"] == iface, f"faulting_interface {f['faulting_interface']}"
    if where.startswith("fetch"):
        assert f["irq_history_mask"] == 0 and await env.read_ok(QREAD) == 0
    else:
        assert f["irq_history_mask"] == 0x0008, "commands after the faulting DMA ran"
    dst = REGION_BASE[p["dst_region"]] + p["dst"]
    assert env.memory.read(dst, 64) == bytes(64), "the faulting DMA wrote its destination"
    errs = sum(s.counts["r_err"] + s.counts["w_err"] for s in env.axi.ports.values())
    assert errs >= 1, "the subordinate answered no error"
    await env.write_ok(CMD, 0xC | 0x2)
    assert status_fields(await env.read_ok(STATUS))["bus_status"], "bus_status not sticky"
    env.finish()


@cocotb.parametrize(gather=[True, False])
@cocotb.test(**TIMEOUT)
async def test_dma_indexed(dut, gather):
    """Indexed DMA (TRM 3.10.4): gather (src idx_mode) or scatter (dst idx_mode) of 12-byte
    rows through an int32 index list; indices < 0 or > idx_max are skipped."""
    rng = seeded_rng()
    env = await job_env(dut)
    await program_regions(env)
    idx = [3, -1, 0, 7, 2, 99]
    idx_addr = 0x40
    env.memory.write(REGION_BASE[6] + idx_addr, b"".join(i.to_bytes(4, "little", signed=True) for i in idx))
    shadow: dict = {}
    fill_random(env, rng, REGION_BASE[2], 12 * 8, shadow)
    src_mode = dict(region=2, stride_mode=1, idx_mode=int(gather))
    words = enc(("NPU_SET_DMA0_SRC_REGION", src_mode),
                ("NPU_SET_DMA0_DST_REGION", dict(region=1, idx_mode=int(not gather))),
                ("NPU_SET_DMA0_IDX_REGION", dict(region=6)), ("NPU_SET_DMA0_IDX", dict(addr=idx_addr)),
                ("NPU_SET_DMA0_IDX_MAX", dict(idx_max=7)), ("NPU_SET_DMA0_SRC", dict(addr=0)),
                ("NPU_SET_DMA0_DST", dict(addr=0)), ("NPU_SET_DMA0_LEN", dict(addr=12)),
                ("NPU_SET_DMA0_SIZE0", dict(size=len(idx))),
                ("NPU_SET_DMA0_SRC_STRIDE0", dict(addr=12)), ("NPU_SET_DMA0_DST_STRIDE0", dict(addr=12)),
                "NPU_OP_DMA_START", ("NPU_OP_DMA_WAIT", dict(k=0)), ("NPU_OP_STOP", dict(mask=1)))
    await env.load_stream(STREAM_ADDR, words)
    status = await env.run_job()
    assert not status & (ST_BUS | ST_PARSE), f"STATUS 0x{status:08x}"
    want = {}
    for x, i in enumerate(idx):
        if 0 <= i <= 7:
            s, d = (i, x) if gather else (x, i)
            for b in range(12):
                want[REGION_BASE[1] + 12 * d + b] = shadow.get(REGION_BASE[2] + 12 * s + b, 0)
    check_bytes(env, want, REGION_BASE[1], REGION_BASE[1] + 12 * 8, "indexed DMA")
    env.finish()
