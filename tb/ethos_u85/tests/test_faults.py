"""Hostile input through the pins: AXI error responses (command fetch, kernel operands, DMA
source/destination/index list), resets in the middle of a job (DMA, command stream, POOL,
ELEMENTWISE), bad QSIZE, the full PROT matrix, APB accesses during the reset sequence.

Every test runs with the scoreboard's reference TLM (tb/scoreboard.py, for DUT=tlm too):
APB responses, STATUS at each stop, IRQ edges, AXI attributes and memory are compared with
it, and the tests also check what the TRM (digest u85-regs-and-interfaces.md) says,
independently of it. A pin monitor (tb.ethos_u85.testlib.hostile.PinMonitor) checks that the NPU keeps
the AXI rules (VALID held until READY, every burst completed) and counts IRQ edges.

Where the TRM leaves the NPU a choice and the stand-in and the TLM choose differently, the
check states the allowed range with the TRM section (command prefetch: QREAD after a fetch
error, a read-ahead error after the last command). The kernel-operation tests use
configurations the stand-in claims (tb/ethos_u85/testlib/rtl_support.py), so they run on both DUTs.
"""
from __future__ import annotations

import random

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge

from tb.ethos_u85.testlib.hostile import (
    PinMonitor,
    ResetSync,
    check_partial_output,
    check_reset_values,
    check_sticky_fault,
    freeze_outstanding_limits,
    hold_responses,
    irq_pin,
    run_job_allowing,
    run_job_counting_irq,
    soft_reset,
    start_env,
    wait_reset_clear,
)
from tb.ethos_u85.testlib.marks import TIMEOUT, named, seeded_rng
from tb.ethos_u85.testlib.memmap import (
    EXT_REGIONS,
    REGION_BASE,
    SRAM_REGIONS,
    STREAM_ADDR,
    program_regions,
    qconfig_interface,
    region_interface,
    tlm_run,
)
from tb.ethos_u85.testlib.regs import (
    CH_RD_CMD,
    CH_RD_M2M,
    CH_RD_M2M_IDX,
    CH_WR_M2M,
    FAULT_FIELDS,
    OFF,
    PROT_SP,
    REGS,
    RW_REGS,
    ST_RESET,
    ST_RUN,
    permitted,
    prot_after_reset_write,
    status_fields,
)
from tb.ethos_u85.testlib.streams import (
    KERNEL_OPERANDS,
    check_bytes,
    dma_cmds,
    dma_expect,
    enc,
    fill_random,
    kernel_case,
)
from tlm.ethos_u85 import registers as R
from tlm.ethos_u85.config import Policy
from tlm.ethos_u85.memory import Resp

STATUS, CMD, RESET, QSIZE, QREAD, PROT = (OFF[n] for n in ("STATUS", "CMD", "RESET", "QSIZE",
                                                              "QREAD", "PROT"))
SRAM_STREAM = REGION_BASE[5] + 0x8000          # a 128-byte aligned stream address on SRAM
RESPS = named(["SLVERR", "DECERR"])
FILLER = ("NPU_SET_IFM_PAD_TOP", "NPU_SET_IFM_PAD_LEFT", "NPU_SET_IFM_PAD_BOTTOM",
          "NPU_SET_IFM_PAD_RIGHT")


def filler(rng: random.Random, n: int) -> list:
    """*n* one-word NPU_SET commands with no effect anything can observe."""
    return enc(*[(rng.choice(FILLER), dict(pad=rng.randrange(8))) for _ in range(n)])


def irq(mask: int) -> list:
    return enc(("NPU_OP_IRQ", dict(mask=mask)))


def stop(mask: int) -> list:
    return enc(("NPU_OP_STOP", dict(mask=mask)))


def stream_base(iface: str) -> tuple:
    """(QCONFIG, stream address) for a command stream on the SRAM or EXT port group."""
    return (0, SRAM_STREAM) if iface == "sram" else (2, STREAM_ADDR)


def ignore_qread(env) -> None:
    """Leave QREAD to the test's own check (the allowed range of TRM 3.3.1.6)."""
    env.scoreboard.ignore = lambda r: not r.write and r.addr == QREAD


async def check_qread(env, lo: int, hi: int, what: str) -> int:
    q = await env.read_ok(QREAD)
    assert lo <= q <= hi and q % 4 == 0, f"{what}: QREAD 0x{q:x} outside 0x{lo:x}..0x{hi:x}"
    return q


# ====================================================================== 1. AXI error responses
@cocotb.parametrize(where=named(["first_word", "mid_stream", "cmd1_payload"]), resp=RESPS,
                    iface=named(["sram", "ext"]))
@cocotb.test(**TIMEOUT)
async def test_fetch_fault(dut, where, resp, iface):
    """SLVERR/DECERR on the command fetch: at the first word, in the middle of the stream, on
    the payload word of a cmd1 (its header read fine). bus_status, faulting_interface of
    QCONFIG's port group, faulting_channel rd_cmd, IRQ, NPU stopped; the commands at and after
    the fault never run; sticky across clear_irq and a start, cleared by a soft reset.

    QREAD (TRM 3.3.1.6: after an error it need not point at the faulting command; everything
    before QREAD is complete): 0 <= QREAD <= offset of the first command that needs the faulting
    word. The TLM fetches a 64-byte block when the decoder needs its first word (QREAD = that
    offset); a prefetching NPU (the stand-in) can see the error earlier and stop before."""
    rng = seeded_rng()
    env = await start_env(dut)
    mon = PinMonitor(env)
    qconfig, base = stream_base(iface)
    await program_regions(env, qconfig=qconfig)
    if where == "first_word":
        fault_off, words, bound, hist = 0, irq(0x0001) + filler(rng, 20), 0, 0
    else:
        # >= 128: the first 64-byte block (with the NPU_OP_IRQ) is consumed before a prefetch
        # of up to two blocks ahead reaches the faulting one
        fault_off = 64 * rng.randrange(2, 6)
        n = fault_off // 4 - 1 - (where == "cmd1_payload")
        words = irq(0x0001) + filler(rng, n)
        if where == "cmd1_payload":
            words += enc(("NPU_SET_IFM_BASE0", dict(addr=rng.getrandbits(32))))   # payload at fault_off
            bound = fault_off - 4
        else:
            bound = fault_off
        hist = 0x0001
    assert len(words) * 4 >= fault_off
    words += irq(0x0100) + filler(rng, 30) + stop(0x0200)
    fault = (base + fault_off, base + fault_off + 16)
    # the stream does what this test needs (plain TLM run, no simulation time)
    _, ref = tlm_run(words, {}, [(*fault, Resp[resp], "r")], qconfig=qconfig, stream_addr=base)
    assert status_fields(ref.status)["bus_status"] and ref.qread == bound, ref
    await env.load_stream(base, words)
    env.axi.inject_fault(*fault, resp, kind="r")
    ignore_qread(env)
    status = await env.run_job()
    tag = f"fetch fault {where} {resp} {iface}"
    assert status_fields(status)["irq_history_mask"] == hist, f"{tag}: STATUS 0x{status:08x}"
    await check_qread(env, 0, bound, tag)
    await check_sticky_fault(env, mon, status, qconfig_interface(qconfig), CH_RD_CMD, tag)
    env.finish()


async def kernel_fault(dut, op: str, operand: str, resp: str) -> None:
    """A kernel operation whose *operand* access gets *resp*: bus_status with the operand's
    port group and channel, the commands after the op never run; sticky until a soft reset.
    OFM bytes: after a read fault, any part of the OFM may have been written (blocks computed
    before the fault; TRM 3.6.8), each byte with its fault-free value; after a write fault
    nothing of the faulting burst lands (its other bursts may)."""
    rng = seeded_rng()
    env = await start_env(dut)
    mon = PinMonitor(env)
    await program_regions(env)
    case = kernel_case(op, rng)
    region, lo, hi = case.operands[operand]
    g = (lo + rng.randrange(hi - lo)) & ~15
    kind = KERNEL_OPERANDS[operand][1]
    _, olo, ohi = case.operands["ofm"]
    image = dict(case.image)
    image[olo] = bytes(rng.getrandbits(8) for _ in range(ohi - olo))     # old OFM contents
    words = irq(0x0004) + case.words + irq(0x0400) + stop(0x0800)
    # the stream runs clean on the TLM and touches the operand where the fault goes
    dev, ref = tlm_run(words, image)
    assert ref.kind.name == "STOP" and not status_fields(ref.status)["bus_status"], ref
    assert any(t.channel in case.channels(operand) and t.addr < g + 16 and t.addr + t.length > g
               for t in dev.memory.log), f"{op}: no {operand} access at 0x{g:x}"
    correct = dev.memory.read(olo, ohi - olo)
    for a, d in image.items():
        env.memory.write(a, d)
    await env.load_stream(STREAM_ADDR, words)
    env.axi.inject_fault(g, g + 16, resp, kind=kind)
    tag = f"{op} {operand} {resp}"
    status = await run_job_allowing(env, [(olo, ohi)] if kind == "r" else [])
    assert status_fields(status)["irq_history_mask"] == 0x0004, f"{tag}: STATUS 0x{status:08x}"
    # QREAD: the scoreboard's rule after a bus error (model QREAD <= QREAD <= QSIZE)
    assert await env.read_ok(QREAD) <= await env.read_ok(QSIZE)
    keep = range(g - olo, g - olo + 16) if kind == "w" else ()
    n = check_partial_output(env, olo, image[olo], correct, keep, tag)
    dut._log.info("%s: %d of %d OFM bytes written", tag, n, ohi - olo)
    await check_sticky_fault(env, mon, status, region_interface(region), case.channels(operand), tag)
    env.finish()


@cocotb.parametrize(operand=named(["weights", "scale"]), resp=RESPS)
@cocotb.test(**TIMEOUT)
async def test_conv_fault(dut, operand, resp):
    """NPU_OP_CONV (1x1, SWD weights, per-channel scale): error response on the weight stream
    read (rd_weights) or the scale/bias stream read (rd_scale_bias). Every DUT: the stand-in
    reads both streams (rtl_stub/ethos_u85/npu_wfetch.v) before it stops with cmd_parse_error. The TLM
    reads the weights, the IFM, then the scale/bias stream; with only that stream faulted the
    IFM reads are OKAY and nothing is written before the fault, so both DUTs end alike."""
    await kernel_fault(dut, "conv", operand, resp)


@cocotb.parametrize(operand=named(["ifm", "ofm"]), resp=RESPS)
@cocotb.test(**TIMEOUT)
async def test_conv_fault_datapath(dut, operand, resp):
    """NPU_OP_CONV: error response on the IFM read (rd_ifm) or the OFM write (wr_ofm)."""
    await kernel_fault(dut, "conv", operand, resp)


@cocotb.parametrize(operand=named(["weights", "scale"]), resp=RESPS)
@cocotb.test(**TIMEOUT)
async def test_depthwise_fault(dut, operand, resp):
    """NPU_OP_DEPTHWISE (1x1, SWD weights, per-channel scale): error response on the weight
    or the scale/bias stream read, as test_conv_fault."""
    await kernel_fault(dut, "depthwise", operand, resp)


@cocotb.parametrize(operand=named(["ifm", "ofm"]), resp=RESPS)
@cocotb.test(**TIMEOUT)
async def test_pool_fault(dut, operand, resp):
    """NPU_OP_POOL (2x2 max, stride 2): error response on the IFM read or the OFM write."""
    await kernel_fault(dut, "pool", operand, resp)


@cocotb.parametrize(operand=named(["ifm", "ifm2", "ofm"]), resp=RESPS)
@cocotb.test(**TIMEOUT)
async def test_elementwise_fault(dut, operand, resp):
    """NPU_OP_ELEMENTWISE (add): error response on the IFM read, the IFM2 read
    (rd_ifm_stream) or the OFM write."""
    await kernel_fault(dut, "elementwise", operand, resp)


@cocotb.parametrize(where=named(["read", "write"]), iface=named(["sram", "ext"]), resp=RESPS)
@cocotb.test(**TIMEOUT)
async def test_dma_fault(dut, where, iface, resp):
    """NPU_OP_DMA_START whose source read (rd_mem2mem) or destination write (wr_mem2mem) on the
    SRAM or EXT port group gets an error response somewhere inside the transfer (random
    lengths and alignment): the fault checks of test_fetch_fault, and no byte of a faulting
    write burst lands."""
    rng = seeded_rng()
    env = await start_env(dut)
    mon = PinMonitor(env)
    await program_regions(env, (rng.randrange(3), rng.randrange(3)))
    mine = SRAM_REGIONS if iface == "sram" else EXT_REGIONS
    other = EXT_REGIONS if iface == "sram" else SRAM_REGIONS
    a, b = rng.choice(mine), rng.choice(other)
    p = dict(src_region=a if where == "read" else b, dst_region=b if where == "read" else a,
             src=rng.randrange(0, 0x400), dst=rng.randrange(0, 0x400), length=rng.randrange(64, 700))
    shadow: dict = {}
    src = REGION_BASE[p["src_region"]] + p["src"]
    dst = REGION_BASE[p["dst_region"]] + p["dst"]
    fill_random(env, rng, src, p["length"], shadow)
    fill_random(env, rng, dst, p["length"], shadow)                   # old contents
    before = env.memory.read(dst, p["length"])
    correct = env.memory.read(src, p["length"])
    lo = src if where == "read" else dst
    g = (lo + rng.randrange(p["length"])) & ~15
    words = irq(0x0010) + dma_cmds(**p) + irq(0x0020) + stop(0x0040)
    await env.load_stream(STREAM_ADDR, words)
    env.axi.inject_fault(g, g + 16, resp, kind=where[0])
    tag = f"DMA {where} {iface} {resp}"
    # TLM: nothing of a DMA whose read failed is written; a DMA engine that moves the data in
    # chunks (the stand-in) writes what it read before the error: allowed, each byte correct
    status = await run_job_allowing(env, [(dst, dst + p["length"])])
    assert status_fields(status)["irq_history_mask"] == 0x0010, f"{tag}: STATUS 0x{status:08x}"
    keep = range(g - lo, g - lo + 16)           # from the faulting read / in the faulting burst
    n = check_partial_output(env, dst, before, correct, keep, tag)
    dut._log.info("%s: %d of %d destination bytes written", tag, n, p["length"])
    chan = CH_RD_M2M if where == "read" else CH_WR_M2M
    await check_sticky_fault(env, mon, status, 0 if iface == "sram" else 1, chan, tag)
    env.finish()


@cocotb.parametrize(iface=named(["sram", "ext"]), resp=RESPS)
@cocotb.test(**TIMEOUT)
async def test_dma_index_fault(dut, iface, resp):
    """Indexed NPU_OP_DMA_START (gather or scatter) whose index list, on the SRAM or EXT
    port group, gets an error response at a random index word (channel rd_mem2mem_idx): the
    fault checks of test_fetch_fault; destination rows of indices read before the error may
    have been written, each with its fault-free value."""
    rng = seeded_rng()
    env = await start_env(dut)
    mon = PinMonitor(env)
    await program_regions(env, (rng.randrange(3), rng.randrange(3)))
    idx_r = rng.choice(SRAM_REGIONS if iface == "sram" else EXT_REGIONS)
    src_r, dst_r = rng.sample([r for r in range(8) if r != idx_r], 2)
    gather = (resp == "SLVERR") != (iface == "ext")     # each port group: a gather and a scatter
    idx_max, length = 15, rng.randrange(4, 40)
    idx = rng.sample(range(-2, idx_max + 4), rng.randrange(6, 18))     # distinct: rows written once
    ioff, soff, doff = (0x40 * rng.randrange(1, 8) for _ in range(3))
    ilo = REGION_BASE[idx_r] + ioff
    image = {ilo: b"".join(i.to_bytes(4, "little", signed=True) for i in idx),
             REGION_BASE[src_r] + soff: bytes(rng.getrandbits(8) for _ in range(length * max(len(idx), idx_max + 1)))}
    dlo = REGION_BASE[dst_r] + doff
    dn = length * max(len(idx), idx_max + 1)
    image[dlo] = bytes(rng.getrandbits(8) for _ in range(dn))             # old contents
    words = irq(0x0010) + enc(
        ("NPU_SET_DMA0_SRC_REGION", dict(region=src_r, stride_mode=1, idx_mode=int(gather))),
        ("NPU_SET_DMA0_DST_REGION", dict(region=dst_r, idx_mode=int(not gather))),
        ("NPU_SET_DMA0_IDX_REGION", dict(region=idx_r)), ("NPU_SET_DMA0_IDX", dict(addr=ioff)),
        ("NPU_SET_DMA0_IDX_MAX", dict(idx_max=idx_max)), ("NPU_SET_DMA0_SRC", dict(addr=soff)),
        ("NPU_SET_DMA0_DST", dict(addr=doff)), ("NPU_SET_DMA0_LEN", dict(addr=length)),
        ("NPU_SET_DMA0_SIZE0", dict(size=len(idx))), ("NPU_SET_DMA0_SRC_STRIDE0", dict(addr=length)),
        ("NPU_SET_DMA0_DST_STRIDE0", dict(addr=length)), "NPU_OP_DMA_START", ("NPU_OP_DMA_WAIT", dict(k=0))) + \
        irq(0x0020) + stop(0x0040)
    g = (ilo + 4 * rng.randrange(len(idx))) & ~15
    dev, ref = tlm_run(words, image)                  # fault-free, and it reads the index at g
    assert ref.kind.name == "STOP" and not status_fields(ref.status)["bus_status"], ref
    assert any(t.channel == CH_RD_M2M_IDX and t.addr < g + 16 and t.addr + t.length > g
               for t in dev.memory.log), f"no index read at 0x{g:x}"
    correct = dev.memory.read(dlo, dn)
    for a, d in image.items():
        env.memory.write(a, d)
    await env.load_stream(STREAM_ADDR, words)
    env.axi.inject_fault(g, g + 16, resp, kind="r")
    tag = f"DMA index read {iface} {resp} ({'gather' if gather else 'scatter'})"
    status = await run_job_allowing(env, [(dlo, dlo + dn)])
    assert status_fields(status)["irq_history_mask"] == 0x0010, f"{tag}: STATUS 0x{status:08x}"
    n = check_partial_output(env, dlo, image[dlo], correct, (), tag)
    dut._log.info("%s: %d of %d destination bytes written", tag, n, dn)
    await check_sticky_fault(env, mon, status, 0 if iface == "sram" else 1, CH_RD_M2M_IDX, tag)
    env.finish()


# ====================================================================== 2. soft reset mid-job
async def start_long_job(env, rng, kind: str, mon: PinMonitor) -> None:
    """Start a long job and return once it is well under way (AXI traffic flowing)."""
    if kind == "dma":          # 2D: many 256-byte lines, reads and writes interleave
        lines = 48
        p = dict(src_region=rng.choice(SRAM_REGIONS), src=rng.randrange(0, 0x100),
                 dst_region=rng.choice(EXT_REGIONS), dst=rng.randrange(0, 0x100), length=256,
                 mode="2d", size0=lines, src_stride0=256, dst_stride0=256)
        shadow: dict = {}
        fill_random(env, rng, REGION_BASE[p["src_region"]] + p["src"], 256 * lines, shadow)
        words = dma_cmds(**p) + stop(0x0001)
        await env.load_stream(STREAM_ADDR, words)
        key, need = "b", 3
    elif kind == "stream":     # a 6 KB stream of NPU_SET commands
        words = filler(rng, 1536) + stop(0x0001)
        await env.load_stream(STREAM_ADDR, words)
        key, need = "rlast", 6
    else:                      # one kernel op (pool, elementwise), its IFM on SRAM (the stream is on EXT)
        case = kernel_case(kind, rng)
        while region_interface(case.operands["ifm"][0]) != 0:
            case = kernel_case(kind, rng)
        for a, d in case.image.items():
            env.memory.write(a, d)
        await env.load_stream(STREAM_ADDR, case.words + stop(0x0001))
        key, need = "ar", 1    # the op's first SRAM read
    ports = [p for p in mon.count if kind not in ("pool", "elementwise") or p.startswith("SRAM")]
    await env.start_npu()
    for _ in range(20_000):
        await FallingEdge(env.clock)
        if sum(mon.count[p][key] for p in ports) >= need:
            return
    raise TimeoutError(f"the {kind} job did not get under way")


async def hold_mid_job(env, rng, kind: str, mon: PinMonitor):
    """Start a long job, then withhold every R/B response so that transactions stay
    outstanding; the scoreboard's job ends here (the reset will cut it short). Returns the
    function that ends the freeze of the outstanding limits (``freeze_outstanding_limits``)."""
    await start_long_job(env, rng, kind, mon)
    hold_responses(env)
    await ClockCycles(env.clock, 16)
    await mon.wait_writes_sent()                       # started write bursts send their W beats
    out = mon.outstanding()
    assert any(o[0] or o[1] for o in out.values()), f"nothing outstanding to drain: {out}"
    env.scoreboard.abandon_job(f"soft reset in the middle of a {kind} job")
    return freeze_outstanding_limits(env)


@cocotb.parametrize(kind=named(["dma", "stream", "pool", "elementwise"]))
@cocotb.test(**TIMEOUT)
async def test_soft_reset_mid_job(dut, kind):
    """RESET written while a long DMA, a long command stream or a kernel operation (int8
    POOL / ELEMENTWISE, in the middle of its IFM read) has AXI transactions
    outstanding (R and B responses withheld): STATUS shows only reset_status until they have
    all completed and the sequence is over (TRM 3.3.1.4: halted in an AXI-safe way); no IRQ
    (TRM 3.5.2); no VALID dropped, no burst left incomplete; then every register at its reset
    value, PROT = {pending_CSL | PPROT[1], min(PPROT[0], pending_CPL)} (TRM 3.3.1.4, 2.2), and a
    new DMA job runs correctly. Random PORPL/PORSL and a random permitted requester."""
    rng = seeded_rng()
    porpl, porsl = rng.randrange(2), rng.randrange(2)
    env = await start_env(dut, pins=dict(PORPL=porpl, PORSL=porsl))
    mon = PinMonitor(env)
    await program_regions(env, (rng.randrange(3), rng.randrange(3)))
    unfreeze = await hold_mid_job(env, rng, kind, mon)
    pending = rng.randrange(4)
    prot = rng.choice([p for p in range(8) if permitted(p, porpl, porsl)])
    r = await env.write(RESET, pending, prot)
    assert not r.slverr, f"RESET write with PPROT={prot:03b} got PSLVERR"
    for _ in range(4):
        assert await env.read_ok(STATUS) == ST_RESET, "STATUS while the reset drains the AXI ports"
    assert await env.read_ok(PROT) == 0, "PROT reads 0 in the reset sequence (TLM Policy reset_read)"
    assert await irq_pin(env) == 0
    assert mon.busy, "the outstanding transactions vanished without their responses"
    hold_responses(env, False)
    await mon.wait_idle()
    unfreeze()
    seen = await wait_reset_clear(env)
    mon.check()
    assert mon.irq_rises == 0, f"{mon.irq_rises} IRQ edge(s): a reset-induced stop raises none"
    new_prot = prot_after_reset_write(pending, prot)
    dut._log.info("reset: %d STATUS reads in the sequence; PROT 0b%s", len(seen) - 1,
                  format(new_prot, "02b"))
    await check_reset_values(env, new_prot, reset_word=pending, what="after the soft reset")
    # a new job runs correctly (and with the new PROT on AxPROT, checked by the scoreboard)
    await program_regions(env)
    shadow: dict = {}
    p = dict(src_region=rng.choice(EXT_REGIONS), src=rng.randrange(0x200), dst_region=
             rng.choice(SRAM_REGIONS), dst=rng.randrange(0x200), length=rng.randrange(1, 400))
    fill_random(env, rng, REGION_BASE[p["src_region"]] + p["src"], p["length"], shadow)
    await env.load_stream(STREAM_ADDR, dma_cmds(**p) + stop(0x0002))
    status = await env.run_job()
    f = status_fields(status)
    assert f["irq_raised"] and f["irq_history_mask"] == 2 and not any(f[b] for b in FAULT_FIELDS), hex(status)
    dma_expect(shadow, **p)
    lo = REGION_BASE[p["dst_region"]] + p["dst"]
    check_bytes(env, shadow, lo, lo + p["length"], "DMA after the soft reset")
    mon.check()
    env.finish()


# ====================================================================== 3. QSIZE
@cocotb.parametrize(case=named(["past_end", "past_end_after_stop", "unaligned", "unaligned_cmd1",
                                "zero"]))
@cocotb.test(**TIMEOUT)
async def test_qsize(dut, case):
    """QSIZE that does not describe the stream:

    * past_end: the stream runs into a DECERR region before QREAD reaches QSIZE (the memory
      the system maps ends): bus_status, faulting_channel rd_cmd; QREAD as in test_fetch_fault.
    * past_end_after_stop: the same, but the stream ends with NPU_OP_STOP before the DECERR
      region. The NPU may read ahead inside QSIZE (TRM 3.3.1.8) and the TRM does not say
      whether an error on a read-ahead word that is never executed is reported: either a clean
      stop (the TLM) or bus_status on rd_cmd; in both cases nothing after the STOP runs.
    * unaligned: QSIZE = 4k + 1..3 (TRM 3.3.1.8: must be a multiple of 4; the TLM Policy
      treats it as 4k): k commands run, cmd_end_reached, QREAD = 4k.
    * unaligned_cmd1: the same with a cmd1 whose payload word is the one past 4k:
      cmd_parse_error at that cmd1 (TLM Policy: a cmd1 truncated by QSIZE).
    * zero: QSIZE = 0 stops at once with cmd_end_reached and IRQ (digest D5.8 [INF]), and
      nothing is fetched: QBASE is 128-byte aligned (no over-read allowed, TRM 3.3.1.8) and
      answers DECERR, so a fetch would show as bus_status."""
    rng = seeded_rng()
    env = await start_env(dut)
    mon = PinMonitor(env)
    iface = rng.choice(["sram", "ext"])
    qconfig, base = stream_base(iface)
    await program_regions(env, qconfig=qconfig)
    tag = f"QSIZE {case} ({iface})"
    if case in ("past_end", "past_end_after_stop"):
        end = 64 * rng.randrange(2, 6)                    # the mapped memory ends here
        if case == "past_end":
            words = irq(0x0001) + filler(rng, end // 4 - 1)
        else:                                            # IRQ only at the stop
            words = filler(rng, end // 4 - 1) + stop(0x8000)
        qsize = end + 4 * rng.randrange(40, 1000)          # beyond the 128-byte over-read
        await env.load_stream(base, words)
        await env.write_ok(QSIZE, qsize)
        env.axi.inject_fault(base + end, base + end + 0x1000, "DECERR", kind="r")
        ignore_qread(env)
        if case == "past_end":
            status = await env.run_job()
            assert status_fields(status)["irq_history_mask"] == 0x0001, f"{tag}: 0x{status:08x}"
            await check_qread(env, 0, end, tag)
            await check_sticky_fault(env, mon, status, qconfig_interface(qconfig), CH_RD_CMD, tag)
        else:
            await past_end_after_stop(env, mon, end, qconfig, tag)
    elif case in ("unaligned", "unaligned_cmd1"):
        k = rng.randrange(4, 40)
        if case == "unaligned_cmd1":      # k - 1 IRQs, then a cmd1 in words k - 1 and k
            masks = [1 << rng.randrange(16) for _ in range(k - 1)]
            words = enc(*[("NPU_OP_IRQ", dict(mask=m)) for m in masks])
            words += enc(("NPU_SET_DMA0_SRC", dict(addr=rng.getrandbits(32))))
        else:                             # k - 2 IRQs and 2 NPU_SETs, then a word never run
            masks = [1 << rng.randrange(16) for _ in range(k - 2)]
            words = enc(*[("NPU_OP_IRQ", dict(mask=m)) for m in masks]) + filler(rng, 2)
            words += irq(0xFFFF)
        qsize = 4 * k + rng.randrange(1, 4)
        await env.load_stream(base, words)
        await env.write_ok(QSIZE, qsize)
        assert await env.read_ok(QSIZE) == qsize
        status = await env.run_job()
        f = status_fields(status)
        hist = 0
        for m in masks:
            hist |= m
        assert f["irq_history_mask"] == hist, f"{tag}: STATUS 0x{status:08x}"
        if case == "unaligned":
            assert f["cmd_end_reached"] and f["irq_raised"] and not f["cmd_parse_error"], \
                f"{tag}: STATUS 0x{status:08x}"
            assert await env.read_ok(QREAD) == 4 * k
        else:
            assert f["cmd_parse_error"] and f["irq_raised"] and not f["cmd_end_reached"], \
                f"{tag}: STATUS 0x{status:08x}"
            assert await env.read_ok(QREAD) == 4 * (k - 1)
        assert await irq_pin(env) == 1
    else:   # zero
        words = irq(0x0001) + stop(0x0002)
        await env.load_stream(base, words)
        await env.write_ok(QSIZE, 0)
        env.axi.inject_fault(base, base + 0x80, "DECERR", kind="r")
        for n in range(2):
            before = mon.handshakes()
            status = await run_job_counting_irq(env, mon)
            f = status_fields(status)
            assert f["cmd_end_reached"] and f["irq_raised"] and not f["irq_history_mask"] \
                and not f["reset_status"] and not any(f[b] for b in FAULT_FIELDS), \
                f"{tag} (run {n}): STATUS 0x{status:08x}"
            assert await env.read_ok(QREAD) == 0
            assert mon.handshakes() == before, f"{tag}: AXI traffic for an empty stream"
            await env.write_ok(CMD, 0xC | 0x2)
    mon.check()
    env.finish()


async def past_end_after_stop(env, mon, end: int, qconfig: int, tag: str) -> None:
    """The allowed outcomes of QSIZE past a DECERR region with NPU_OP_STOP just before it
    (see test_qsize). The scoreboard's STATUS/QREAD comparison is replaced by this check; the
    job's IRQ edges and memory are still compared."""
    await env.start_npu()
    for _ in range(20_000):                     # the stream raises IRQ only when it stops
        if await irq_pin(env):
            break
    else:
        raise TimeoutError(f"{tag}: no IRQ")
    await mon.wait_idle()
    sb = env.scoreboard
    sb.ignore = lambda r: not r.write and r.addr in (STATUS, QREAD)
    sb.close_job()
    status = await env.read_ok(STATUS)
    f = status_fields(status)
    qread = await env.read_ok(QREAD)
    model = sb.jobs[-1].ref_status
    env.log.info("%s: STATUS 0x%08x QREAD 0x%x (model STATUS 0x%08x)", tag, status, qread, model)
    assert f["state"] == 0 and f["irq_raised"] and not f["cmd_parse_error"], f"{tag}: 0x{status:08x}"
    if f["bus_status"]:                         # the read-ahead error was reported
        assert f["faulting_channel"] == CH_RD_CMD and \
            f["faulting_interface"] == qconfig_interface(qconfig), f"{tag}: 0x{status:08x}"
        assert f["irq_history_mask"] in (0, 0x8000), f"{tag}: 0x{status:08x}"
        assert qread <= end and qread % 4 == 0, f"{tag}: QREAD 0x{qread:x}"
    else:                                       # a clean stop at the NPU_OP_STOP
        assert f["irq_history_mask"] == 0x8000 and not f["cmd_end_reached"], f"{tag}: 0x{status:08x}"
        assert qread == end, f"{tag}: QREAD 0x{qread:x}, the STOP ends at 0x{end:x}"
    await mon.assert_silent(64, tag)
    await soft_reset(env, 0b01)
    sb.ignore = lambda r: False
    assert await env.read_ok(STATUS) == 0


# ====================================================================== 4. PROT matrix
STATES = ((1, 0), (0, 0), (1, 1), (0, 1))             # (CPL, CSL)


def write_pattern(reg, rng: random.Random, allowed: bool) -> int:
    """A random word for a rw register. Permitted CMD writes never start the NPU and
    permitted PMCR writes keep the PMU disabled (counters then hold still, so read-backs
    compare); a CMD write that must be refused tries to start it."""
    v = rng.getrandbits(32)
    if reg.name == "CMD":
        v = (v & ~0x11) | (0 if allowed else 0x1)
    elif reg.name == "PMCR":
        v &= ~0x1
    return v


@cocotb.test(timeout_time=20, timeout_unit="ms")
async def test_prot_matrix_full(dut):
    """Every register of tlm.ethos_u85.registers x the 4 CPL/CSL states (reached with PORPL/PORSL at a
    hard reset or with a soft reset, seeded) x the 4 PPROT[1:0] values (PPROT[2] random, it is
    not used): a permitted read returns the register, a refused one PSLVERR and 0; a permitted
    write to a rw register takes effect, a refused one (PSLVERR) none, and a permitted write to
    a read-only register is ignored without PSLVERR (TRM 3.4.1) - checked by reading back
    with secure privileged PPROT, which every state permits (TRM 3.1.1, 3.4). RESET is only
    written by refused requesters (a permitted write is the soft reset that changes state)
    and must then leave PROT alone; a refused CMD write with transition_to_running_state must
    not start the NPU."""
    rng = seeded_rng()
    order = list(STATES)
    rng.shuffle(order)
    env = await start_env(dut, pins=dict(PORPL=order[0][0], PORSL=order[0][1]))
    reads = writes = refused = 0
    for i, (cpl, csl) in enumerate(order):
        prot_word = csl << 1 | cpl
        reset_word = 0
        if i and i % 2 == 0:
            await env.hard_reset(PORPL=cpl, PORSL=csl)
            await env.wait_reset_done()
            how = "pins"
        elif i:
            # a requester the current state permits that can reach the new state
            cur = await env.read_ok(PROT)
            cands = [p for p in range(8) if permitted(p, cur & 1, cur >> 1)
                     and (p & 1) >= cpl and ((p >> 1) & 1) <= csl]
            p = rng.choice(cands)
            reset_word = (csl << 1 if not (p >> 1) & 1 else rng.randrange(2) << 1) | \
                (cpl if p & 1 else rng.randrange(2))
            assert prot_after_reset_write(reset_word, p) == prot_word
            await soft_reset(env, reset_word, p)
            how = f"soft reset {reset_word:02b} from PPROT {p:03b}"
        else:
            how = "pins"
        tag = f"CPL={cpl} CSL={csl} ({how})"
        assert await env.read_ok(PROT) == prot_word, tag
        # reads of every register with every PPROT
        for reg in REGS:
            want = R.reset_word(reg, env.config, env.pins)
            want = {"STATUS": 0, "PROT": prot_word, "RESET": reset_word}.get(reg.name, want)
            for pp in range(4):
                pprot = pp | rng.randrange(2) << 2
                ok = permitted(pprot, cpl, csl)
                r = await env.read(reg.offset, pprot)
                reads += 1
                refused += not ok
                assert r.slverr == (not ok), f"{tag} read {reg.ident} PPROT={pprot:03b}: {r}"
                assert r.data == (want if ok else 0), f"{tag} read {reg.ident} PPROT={pprot:03b}: {r}"
        # writes: every register (CMD first: QSIZE is still 0 if a refused start leaks)
        regs = sorted(REGS, key=lambda g: g.name != "CMD")
        for reg in regs:
            for pp in rng.sample(range(4), 4):
                pprot = pp | rng.randrange(2) << 2
                ok = permitted(pprot, cpl, csl)
                if reg.name == "RESET" and ok:
                    continue
                before = await env.read_ok(reg.offset, PROT_SP)
                v = write_pattern(reg, rng, ok)
                r = await env.write(reg.offset, v, pprot)
                writes += 1
                assert r.slverr == (not ok), f"{tag} write {reg.ident} PPROT={pprot:03b}: {r}"
                got = await env.read_ok(reg.offset, PROT_SP)
                if not ok or reg.access != R.RW:
                    what = "refused write" if not ok else "write to the read-only register"
                    assert got == before, (f"{tag}: {what} of 0x{v:08x} to {reg.ident} "
                                           f"(PPROT={pprot:03b}) changed it 0x{before:08x} -> 0x{got:08x}")
                elif reg.behaviour == "store" and reg.page in ("BASE", "BASE_POINTERS"):
                    assert got == v & reg.write_mask & reg.read_mask, \
                        f"{tag}: {reg.ident} = 0x{got:08x} after writing 0x{v:08x}"
        st = await env.read_ok(STATUS)
        assert not st & ST_RUN, f"{tag}: the NPU is running after the write matrix (0x{st:08x})"
        assert await env.read_ok(PROT) == prot_word, f"{tag}: PROT changed by refused writes"
        assert await irq_pin(env) == int(env.model.irq), f"{tag}: IRQ pin differs from the model"
    dut._log.info("PROT matrix: %d reads, %d writes, %d refused reads", reads, writes, refused)
    await soft_reset(env, 0b01)                           # restore the bench's defaults
    env.finish()


# ====================================================================== 5. APB in the reset window
POLICY = Policy()


def in_reset_expect(write: bool, addr: int, pprot: int, strb: int, cpl: int, csl: int) -> tuple:
    """(PSLVERR, PRDATA) of an access during a reset sequence as the TLM Policy defines it
    (reset_read='zero', reset_write='trm_3_1_1'; TRM 3.1.1): alignment, sub-word write and
    PROT are checked first; then a read of STATUS returns reset_status only, any other read 0;
    a write to CMD (clock_q_enable/power_q_enable only) or RESET (pending privilege) is taken,
    any other write gets PSLVERR."""
    assert POLICY.reset_read == "zero" and POLICY.reset_write == "trm_3_1_1", POLICY
    if addr & 3 or (write and strb != 0xF) or not permitted(pprot, cpl, csl):
        return True, 0
    if not write:
        return False, (ST_RESET if addr == STATUS else 0)
    return addr not in (CMD, RESET), 0


def probe_list(rng: random.Random) -> list:
    """One access each: (name, write, addr, data, pprot or None = secure privileged, strb)."""
    rd = [r for r in REGS if r.name not in ("STATUS",)]
    rw = [r for r in RW_REGS if r.name not in ("CMD", "RESET")]
    ro = [r for r in REGS if r.access == R.RO]
    return [
        ("read STATUS", False, STATUS, 0, None, 0),
        ("read register", False, rng.choice(rd).offset, 0, None, 0),
        ("read refused", False, rng.choice(REGS).offset, 0, "refused", 0),
        ("read misaligned", False, rng.choice(REGS).offset + rng.randrange(1, 4), 0, None, 0),
        ("read reserved", False, 0x0F00, 0, None, 0),
        ("write rw", True, rng.choice(rw).offset, rng.getrandbits(32), None, 0xF),
        ("write ro", True, rng.choice(ro).offset, rng.getrandbits(32), None, 0xF),
        ("write sub-word CMD", True, CMD, 0x3, None, 0x1),
        ("write refused CMD", True, CMD, 0x1, "refused", 0xF),
        ("write CMD", True, CMD, rng.choice([0x0, 0x4, 0x8]) | 0x13 | rng.getrandbits(16) << 16,
         None, 0xF),
        ("write RESET", True, RESET, rng.randrange(4), "any", 0xF),
        ("write refused RESET", True, RESET, rng.randrange(4), "refused", 0xF),
    ]


def probe_prot(kind, rng, cpl: int, csl: int) -> "int | None":
    cands = [p for p in range(8) if permitted(p, cpl, csl) == (kind != "refused")]
    if kind is None:
        return PROT_SP
    return rng.choice(cands) if cands else None


async def probe(env, rng, pr, cpl: int, csl: int, what: str) -> dict:
    """Do one probe access inside a reset sequence and check it against the TLM Policy;
    returns what it changes once the sequence is over ({'cmd': word, 'prot': word})."""
    name, write, addr, data, kind, strb = pr
    pprot = probe_prot(kind, rng, cpl, csl)
    if pprot is None:                                      # no refused requester in this state
        pprot = PROT_SP
        name += " (permitted: every requester is)"
    exp_err, exp_data = in_reset_expect(write, addr, pprot, strb, cpl, csl)
    if write:
        r = await env.write(addr, data, pprot, strb)
    else:
        r = await env.read(addr, pprot)
    tag = f"{what}: {name} 0x{addr:04x} PPROT={pprot:03b}"
    assert r.slverr == exp_err, f"{tag}: {r}, TLM Policy expects PSLVERR={int(exp_err)}"
    if not write:
        assert r.data == exp_data, f"{tag}: {r}, TLM Policy expects 0x{exp_data:08x}"
    eff = {}
    if write and not exp_err and addr == CMD:
        eff["cmd"] = data & 0xC                             # only the Q-channel enables
    if write and not exp_err and addr == RESET:
        eff["prot"] = prot_after_reset_write(data, pprot)
        eff["reset"] = data & 3
    return eff


async def after_window(env, eff: dict, prot_word: int, reset_word: int, what: str) -> None:
    """The sequence is over: registers at their reset values but for what the probes changed
    (CMD Q-channel enables, PROT/RESET from an in-sequence RESET write)."""
    await wait_reset_clear(env)
    prot_word = eff.get("prot", prot_word)
    reset_word = eff.get("reset", reset_word)
    for reg in REGS:
        want = {"STATUS": 0, "PROT": prot_word, "RESET": reset_word,
                "CMD": eff.get("cmd", 0xC)}.get(reg.name, R.reset_word(reg, env.config, env.pins))
        got = await env.read_ok(reg.offset)
        assert got == want, (f"{what}: after the sequence {reg.ident} reads 0x{got:08x}, "
                             f"expected 0x{want:08x}")
    assert await irq_pin(env) == 0, f"{what}: IRQ after the reset sequence"


async def reset_then_probe(env, sync, rng, after: str, pr, cur: tuple, pins=None) -> tuple:
    """Start a reset sequence (nRESET with PORPL/PORSL = *pins* or random, or a RESET write
    to a random level), make probe *pr* in it, check the registers once it is over. Returns
    the new (CPL, CSL)."""
    if after == "nreset":
        # (CPL, CSL) = (0, 1) permits every requester: not for a probe that must be refused
        cpl, csl = pins or rng.choice([st for st in ((0, 0), (0, 1), (1, 0), (1, 1))
                                       if pr[4] != "refused" or st != (0, 1)])
        await env.hard_reset(PORPL=cpl, PORSL=csl)
        sync.enter()
        prot_word, reset_word = csl << 1 | cpl, 0
    else:
        reset_word = rng.randrange(4)
        r = await env.write(RESET, reset_word, PROT_SP)
        assert not r.slverr
        cpl, csl = cur              # the level in force until the end of the sequence
        prot_word = prot_after_reset_write(reset_word, PROT_SP)
    what = f"{pr[0]} after {after} (CPL={cpl} CSL={csl} in the sequence)"
    eff = await probe(env, rng, pr, cpl, csl, what)
    await after_window(env, eff, prot_word, reset_word, what)
    p = await env.read_ok(PROT)
    return p & 1, p >> 1


@cocotb.parametrize(after=named(["nreset", "soft_reset"]))
@cocotb.test(**TIMEOUT)
async def test_apb_in_reset_sequence(dut, after):
    """APB accesses while the reset sequence runs (STATUS.reset_status = 1), one access per
    sequence, right after nRESET rises (Env.hard_reset returns 2 cycles after) or right after a
    RESET write from an idle NPU: STATUS reads 0x8, other reads 0, CMD writes take only the
    Q-channel enables, RESET writes set the pending privilege applied at the end of the
    sequence, other writes PSLVERR; refused requesters, misaligned and sub-word accesses get
    PSLVERR first (TLM Policy reset_read/reset_write, TRM 3.1.1). The scoreboard's reference
    is held in its own sequence (ResetSync), so every access is also compared with it. The
    RESET-write probe after nRESET is test_reset_write_in_nreset_sequence."""
    rng = seeded_rng()
    env = await start_env(dut)
    sync = ResetSync.attach(env)
    cur = (1, 0)
    for pr in probe_list(rng):
        if after == "nreset" and pr[0] == "write RESET":
            continue
        cur = await reset_then_probe(env, sync, rng, after, pr, cur)
    env.finish()


@cocotb.test(**TIMEOUT)
async def test_reset_write_in_nreset_sequence(dut):
    """A permitted RESET write during the sequence that follows nRESET updates the privilege
    level as a normal RESET write does (TRM 3.1.1 (c), TLM Policy reset_write='trm_3_1_1'):
    PROT = {pending_CSL | PPROT[1], min(PPROT[0], pending_CPL)} once the sequence is over,
    and RESET reads the pending bits. Every (PORPL, PORSL), a pending level that differs."""
    rng = seeded_rng()
    env = await start_env(dut)
    sync = ResetSync.attach(env)
    for pins in ((1, 0), (0, 0), (1, 1), (0, 1)):
        # secure privileged: PROT becomes the pending level, never the one the pins gave
        pending = rng.choice([v for v in range(4) if v != (pins[1] << 1 | pins[0])])
        pr = ("write RESET", True, RESET, pending, None, 0xF)
        await reset_then_probe(env, sync, rng, "nreset", pr, pins, pins=pins)
    env.finish()


@cocotb.test(**TIMEOUT)
async def test_apb_in_reset_drain(dut):
    """A RESET write while AXI transactions are outstanding (R/B responses withheld): the
    reset sequence lasts until they complete (TRM 3.3.1.4, AXI-safe halt), so every register
    can be accessed inside it: reads of every register (secure privileged and a random PPROT)
    and a write to every register with a random PPROT, in random order, misaligned and
    sub-word accesses - each as the TLM Policy defines it (TRM 3.1.1; in_reset_expect), all
    compared with the reference held in its own sequence. After the sequence: every register
    at its reset value except what the accepted CMD / RESET writes changed (the last RESET
    write's pending level, taken with its own PPROT), and the power Q-Channel accepts exactly
    when the TLM says (Policy cmd_write_in_reset_unmasks_power: a CMD write in the sequence
    ends the power-control mask of TRM 3.3.1.4)."""
    rng = seeded_rng()
    porpl, porsl = rng.randrange(2), rng.randrange(2)
    env = await start_env(dut, pins=dict(PORPL=porpl, PORSL=porsl))
    mon = PinMonitor(env)
    await program_regions(env, (rng.randrange(3), rng.randrange(3)))
    unfreeze = await hold_mid_job(env, rng, rng.choice(["dma", "stream"]), mon)
    pending = rng.randrange(4)
    r = await env.write(RESET, pending, PROT_SP)
    assert not r.slverr
    cpl, csl = porpl, porsl                     # in force until the end of the sequence
    eff = {}
    masked = True                               # power control masked by the RESET write
    remasked = False                            # a RESET write after an unmasking CMD write
    accesses = [(False, reg.offset, PROT_SP) for reg in REGS]
    accesses += [(False, reg.offset, rng.randrange(8)) for reg in REGS]
    accesses += [(True, reg.offset, rng.randrange(8)) for reg in REGS]
    accesses += [(True, CMD, PROT_SP), (True, RESET, rng.randrange(8))]
    accesses += [(w, rng.choice(REGS).offset + rng.randrange(1, 4), PROT_SP) for w in (0, 1) * 3]
    rng.shuffle(accesses)
    for write, addr, pprot in accesses:
        strb = 0xF if not write or rng.random() < 0.9 else rng.randrange(15)
        data = rng.getrandbits(32)
        exp_err, exp_data = in_reset_expect(write, addr, pprot, strb, cpl, csl)
        r = await (env.write(addr, data, pprot, strb) if write else env.read(addr, pprot))
        tag = f"in the reset drain: {r}"
        assert r.slverr == exp_err, f"{tag}: TLM Policy expects PSLVERR={int(exp_err)}"
        assert write or r.data == exp_data, f"{tag}: TLM Policy expects 0x{exp_data:08x}"
        if write and not exp_err and addr == CMD:
            eff["cmd"] = data & 0xC
            masked = remasked = False
            env.log.info("in the sequence: CMD 0x%08x taken (Q enables 0x%x)", data, data & 0xC)
        elif write and not exp_err and addr == RESET:
            eff["prot"], eff["reset"] = prot_after_reset_write(data, pprot), data & 3
            remasked |= not masked
            env.log.info("in the sequence: RESET 0x%x taken from PPROT %s", data, format(pprot, "03b"))
    assert mon.busy, "the reset sequence was not held by outstanding transactions"
    assert await env.read_ok(STATUS) == ST_RESET
    hold_responses(env, False)
    await mon.wait_idle()
    unfreeze()
    await after_window(env, eff, prot_after_reset_write(pending, PROT_SP), pending,
                       "after a reset drain with APB traffic")
    mon.check()
    assert mon.irq_rises == 0
    # The power Q-Channel (STOPPED, IRQ clear): accepted iff power_q_enable and power control
    # not masked. TLM Policy: the RESET write masks it (TRM 3.3.1.4), a CMD write in the
    # sequence unmasks it, a RESET write in the sequence only sets the pending privilege
    # (TRM 3.1.1 (c): "updates the privilege level as a normal RESET write does"). Whether
    # such a RESET write also masks power control again, as a RESET write outside the sequence
    # does (the stand-in), the TRM leaves open: after a RESET write that follows the last CMD
    # write, both answers are allowed.
    pwr = bool(eff.get("cmd", 0xC) & 0x8)
    allowed = {"accepted" if pwr and not masked else "denied"}
    if remasked:
        allowed.add("denied")
    got = await env.pwrq.request()
    await env.pwrq.exit()
    assert got in allowed, (f"power Q-Channel {got} after the sequence (CMD 0x{eff.get('cmd', 0xC):x}, "
                            f"power control {'masked' if masked else 'unmasked'} by the TLM Policy"
                            f"{', RESET written after CMD' if remasked else ''}): allowed {allowed}")
    env.finish()
