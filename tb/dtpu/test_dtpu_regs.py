"""cocotb tests of the DTPU adapter's control side through the pins: the AXI4-Lite map
(every word of the thesis' table, unmapped words, read-only, partial strobes), STATUS W1C
and the interrupt, soft reset, command errors, the command queue's backpressure, core
errors (every CORE_ERRORS code the configuration can raise), OVERFLOW and UNDERRUN, and
full argument buffers. The TLM scoreboard checks every response and read value."""
from __future__ import annotations

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles

from tlm.dtpu import contract as C

from .env import DtpuEnv
from .jobs import random_job, random_words

IN = {a.name: a.index for a in C.IN_ARGS}
ST = {f.name: f for f in C.STATUS_FIELDS}
# test_core_errors runs an overflowed input packet only where the input FIFO has at most this
# many words (dtpu-3x5-odd: 200), not the other configurations' 2048 (simulation time)
OVERFLOW_RUN_MAX = 512


@cocotb.test()
async def test_register_map(dut):
    env = DtpuEnv(dut)
    rng = np.random.default_rng(11)
    await env.reset()
    for w in C.words():                                    # every word of the thesis' map
        await env.read(w.offset, quiet=True)
    for off in (0x008, 0x0FC, 0x260, 0x2FC, 0xFFFC):        # unmapped (the master aligns)
        _, resp = await env.read(off)
        assert resp == C.RESP_SLVERR, hex(off)
        assert await env.write(off, 0xFFFFFFFF) == C.RESP_SLVERR, hex(off)
    for w in C.words():
        if w.exists and w.reg.access == C.RW and w.name not in ("CTRL", "STATUS"):
            v = int(rng.integers(0, 1 << 32))
            assert await env.write(w.offset, v) == C.RESP_OKAY
            await env.read(w.offset)
        elif w.exists and w.reg.access == C.RO:
            assert await env.write(w.offset, 1) == C.RESP_SLVERR, w.name
        elif not w.exists:
            assert await env.write(w.offset, 0xFFFFFFFF) == C.RESP_OKAY, w.name
            assert (await env.read(w.offset))[0] == 0, w.name
    assert await env.write("OARG0_LENGTH", 0x12345678, strb=0x3) == C.RESP_SLVERR
    assert (await env.read("OARG0_LENGTH"))[0] != 0x5678
    assert (await env.read("CMD"))[0] == 0
    env.finish()


@cocotb.test()
async def test_status_irq_and_soft_reset(dut):
    env = DtpuEnv(dut)
    rng = np.random.default_rng(12)
    await env.reset()
    await env.init()
    await env.write("CTRL", 1 << C.REG["CTRL"].field("GIE").lsb)
    job = random_job(rng, env.cfg, precision=env.cfg.precisions[0], steps=3)
    for arg, words in ((IN["WMEM"], job.weights), (IN["CSR"], job.csr_packet), (IN["INFIFO"], job.inputs)):
        await env.send(arg, words)
    assert int(dut.irq.value) == 0
    await env.cmd("EXECUTE_STEP")
    status = await env.quiet_status()
    assert ST["DONE"].get(status) and ST["READY"].get(status) and ST["IDLE"].get(status)
    assert int(dut.irq.value) == 1, "irq = GIE & DONE"
    await env.write("STATUS", 0x3)                        # the library's "clear status"
    await ClockCycles(dut.aclk, 2)
    assert int(dut.irq.value) == 0
    status = await env.quiet_status()
    assert not ST["DONE"].get(status)
    # buffers are still held (no UPDATE_IN_ARG): a soft reset empties them
    v, _ = await env.read("IARG1_STATUS", quiet=True)
    assert C.REG["IARG_STATUS"].field("USED_BUF").get(v) == 1
    await env.write("CTRL", 1)
    for n in range(3):
        await env.read(f"IARG{n}_STATUS", quiet=True)
    await env.write("CTRL", 0)
    await env.quiet_status()
    env.finish()


@cocotb.test()
async def test_command_errors(dut):
    env = DtpuEnv(dut)
    await env.reset()
    await env.init()
    op = C.CMD_FIELDS[1].lsb
    bad = [3 << op, 6 << op, 0xF << op, C.cmd_word("EXECUTE_STEP", 1), C.cmd_word("UPDATE_IN_ARG", 0x8),
           C.cmd_word("UPDATE_OUT_ARG", 0x2), C.cmd_word("STOP_EXECUTE_CONTINOUS") | (1 << 24),
           C.cmd_word("EXECUTE_CONTINOUS", 4)]
    for word in bad:
        assert await env.write("CMD", word) == C.RESP_OKAY
        status = await env.quiet_status()
        assert ST["CMD_ERR"].get(status), hex(word)
        await env.write("STATUS", ST["CMD_ERR"].mask)
        assert not ST["CMD_ERR"].get(await env.quiet_status())
    # EXECUTE_CONTINOUS with no request enable would start runs forever: refused
    await env.write("IARG_RQT_EN", 0)
    await env.cmd("EXECUTE_CONTINOUS")
    status = await env.quiet_status()
    assert ST["CMD_ERR"].get(status) and not ST["CONTINUOUS"].get(status)
    await env.cmd("UPDATE_OUT_ARG", 1)                     # the library's: accepted, no effect
    await env.quiet_status()
    env.finish()


@cocotb.test()
async def test_command_queue_backpressure(dut):
    """CMDQ_DEPTH + 2 EXECUTE_STEP writes with no data: the writes past the queue's room
    wait (AXI4-Lite B held back) until runs start; every run after the first finds the
    input FIFO already drained (no UPDATE_IN_ARG) and writes nothing."""
    env = DtpuEnv(dut)
    rng = np.random.default_rng(13)
    await env.reset()
    await env.init()
    n = env.cfg.cmdq_depth + 2
    done = []

    async def writer():
        for _ in range(n):
            await env.cmd("EXECUTE_STEP")
            done.append(1)

    task = cocotb.start_soon(writer())
    await ClockCycles(dut.aclk, 60)
    assert len(done) == env.cfg.cmdq_depth, f"{len(done)} CMD writes completed with a full queue"
    v, _ = await env.read("STATUS")
    assert ST["CMDQ"].get(v) == env.cfg.cmdq_depth
    job = random_job(rng, env.cfg, precision=env.cfg.precisions[0], steps=5)
    for arg, words in ((IN["WMEM"], job.weights), (IN["CSR"], job.csr_packet), (IN["INFIFO"], job.inputs)):
        await env.send(arg, words)
    await task
    assert len(done) == n
    await env.quiet_status()
    assert env.sb.received_packets == 1
    env.finish()


@cocotb.test()
async def test_core_errors(dut):
    """Every CORE_ERRORS code this configuration can raise, then UNDERRUN and OVERFLOW (and, with
    a small input FIFO, a run on an overflowed input packet)."""
    env = DtpuEnv(dut)
    cfg = env.cfg
    rng = np.random.default_rng(14)
    await env.reset()
    await env.init()
    missing = [p.name for p in C.PRECISIONS if p.name not in cfg.precisions]
    cases = [("BAD_PRECISION", 0x5), ("FP_UNSUPPORTED", C.csr_word("int8", fp_mode=3)),
             ("CHAIN", C.csr_word("int8", chain=0)), ("RESERVED", C.csr_word("int8") | 0x80),
             ("GROUP_ROWS", C.csr_word("int8", group_rows=cfg.rows + 1)),
             ("OUT_GROUPS", C.csr_word("int8", group_rows=cfg.rows, out_groups=2)),
             ("WM_RANGE", C.csr_word("int8", wm_start=cfg.size_wmemory - 1)),
             # every CSR byte read (byte 7 differs from byte 6), and a start where a 32-bit
             # WM_START + ROWS*P would wrap below SIZE_WMEMORY
             ("WM_RANGE", C.csr_word("int8", wm_start=0xFF000000)),
             ("WM_RANGE", C.csr_word("int8", wm_start=0xFFFFFFFF))]
    if missing:
        cases.append(("PRECISION_NOT_BUILT", C.csr_word(missing[0])))
    tails = [p for p in cfg.built if cfg.words_per_vector(p) > 1]
    await env.send(IN["WMEM"], random_words(rng, 64))
    for name, csr in cases:
        await env.send(IN["CSR"], np.array([csr], np.uint64))
        await env.send(IN["INFIFO"], random_words(rng, 3))
        await env.cmd("EXECUTE_STEP")
        await env.cmd("UPDATE_IN_ARG", (1 << IN["CSR"]) | (1 << IN["INFIFO"]))
        status = await env.quiet_status()
        assert ST["CORE_ERR"].get(status) and ST["ERR_CODE"].get(status) == C.ERR[name], name
        await env.write("STATUS", ST["CORE_ERR"].mask)
    for p in tails:                                     # an input that ends inside a vector
        job = random_job(rng, cfg, precision=p.name, steps=2)
        await env.send(IN["CSR"], job.csr_packet)
        await env.send(IN["INFIFO"], job.inputs[:-1])
        await env.cmd("UPDATE_IN_ARG", 1 << IN["WMEM"])
        await env.send(IN["WMEM"], job.weights)
        await env.cmd("EXECUTE_STEP")
        await env.cmd("UPDATE_IN_ARG", (1 << IN["CSR"]) | (1 << IN["INFIFO"]))
        status = await env.quiet_status()
        assert ST["ERR_CODE"].get(status) == C.ERR["INPUT_TAIL"], p.name
        await env.write("STATUS", ST["CORE_ERR"].mask)
    # UNDERRUN: a weight packet shorter than the block (the rest reads 0)
    await env.cmd("UPDATE_IN_ARG", 1 << IN["WMEM"])
    await env.send(IN["WMEM"], random_words(rng, 2))
    await env.send(IN["CSR"], np.array([C.csr_word("int8")], np.uint64))
    await env.send(IN["INFIFO"], random_words(rng, 4))
    await env.cmd("EXECUTE_STEP")
    await env.cmd("UPDATE_IN_ARG", 7)
    status = await env.quiet_status()
    assert ST["UNDERRUN"].get(status)
    # OVERFLOW: a CSR packet longer than the CSR memory (beats past it are dropped)
    await env.send(IN["CSR"], np.array([C.csr_word("int8")] * (cfg.size_csr // 8 + 2), np.uint64))
    status = await env.quiet_status()
    assert ST["OVERFLOW"].get(status)
    await env.cmd("UPDATE_IN_ARG", 1)
    if cfg.infifo_depth <= OVERFLOW_RUN_MAX:
        # an input packet one word longer than the input FIFO: the run reads INFIFO_DEPTH words,
        # not the dropped one (the scoreboard counts the output words)
        job = random_job(rng, cfg, precision="int8", groups=1, out_groups=1, steps=0)
        await env.send(IN["WMEM"], job.weights)
        await env.send(IN["CSR"], job.csr_packet)
        await env.send(IN["INFIFO"], random_words(rng, cfg.infifo_depth + 1))
        await env.cmd("EXECUTE_STEP")
        await env.cmd("UPDATE_IN_ARG", 7)
        status = await env.quiet_status()
        assert ST["OVERFLOW"].get(status) and not ST["CORE_ERR"].get(status)
    env.finish()


@cocotb.test()
async def test_argument_buffers_full(dut):
    """BUFFER_DEPTH packets fill an argument; the next one waits (TREADY low) until an
    UPDATE_IN_ARG releases a buffer."""
    env = DtpuEnv(dut)
    rng = np.random.default_rng(15)
    await env.reset()
    await env.init()
    for arg in range(len(C.IN_ARGS)):
        for _ in range(env.cfg.buffer_depth + 1):
            await env.send(arg, random_words(rng, 4))
    await ClockCycles(dut.aclk, 40)
    for n in range(len(C.IN_ARGS)):
        v, _ = await env.read(f"IARG{n}_STATUS", quiet=True)
        assert C.REG["IARG_STATUS"].field("FULL").get(v)
    await env.cmd("UPDATE_IN_ARG", 7)
    for s in env.sources:
        await s.wait()
    await ClockCycles(dut.aclk, 10)
    for n in range(len(C.IN_ARGS)):
        await env.read(f"IARG{n}_STATUS", quiet=True)
    await env.cmd("UPDATE_IN_ARG", 7)
    await env.cmd("UPDATE_IN_ARG", 7)
    await env.quiet_status()
    env.finish()
