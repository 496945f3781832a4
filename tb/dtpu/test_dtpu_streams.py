"""cocotb tests of the DTPU data path through the pins: runs of every built precision,
signedness and row grouping, with and without stream backpressure, in step and continuous
mode, output length modes. The TLM is the scoreboard (tb/dtpu/scoreboard.py); seeds are
logged. Environment: DTPU_CONFIG, TB_DUT (rtl | tlm), DTPU_SEED (default 1)."""
from __future__ import annotations

import os

import cocotb
import numpy as np

from tlm.dtpu import contract as C

from .env import DtpuEnv
from .jobs import random_job, share_weights

IN = {a.name: a.index for a in C.IN_ARGS}


def _seed(name: str) -> int:
    base = int(os.environ.get("DTPU_SEED", "1"))
    return base * 1000 + sum(map(ord, name)) % 1000


async def _run_jobs(env: DtpuEnv, jobs, release_weights: bool = True) -> None:
    """Step mode: per job the weight packet (when it changes), CSR and input packets, then
    EXECUTE_STEP and UPDATE_IN_ARG of what the next job replaces; the streams run ahead
    into the second buffer while the commands wait their turn."""
    prev_w = None
    for job in jobs:
        new_w = prev_w is None or not np.array_equal(job.weights, prev_w)
        if new_w and prev_w is not None:
            await env.cmd("UPDATE_IN_ARG", 1 << IN["WMEM"])
        if new_w:
            await env.send(IN["WMEM"], job.weights)
            prev_w = job.weights
        await env.send(IN["CSR"], job.csr_packet)
        await env.send(IN["INFIFO"], job.inputs)
        await env.cmd("EXECUTE_STEP")
        await env.cmd("UPDATE_IN_ARG", (1 << IN["CSR"]) | (1 << IN["INFIFO"]))
    if release_weights:
        await env.cmd("UPDATE_IN_ARG", 1 << IN["WMEM"])


def _jobs(env: DtpuEnv, rng, n: int, **kw):
    cfg = env.cfg
    jobs = []
    for i in range(n):
        prec = cfg.precisions[i % len(cfg.precisions)]
        jobs.append(random_job(rng, cfg, precision=prec, steps=int(rng.integers(1, 24)), **kw))
    return jobs


@cocotb.test()
async def test_runs_every_precision(dut):
    """Every built precision x signedness x a sweep of GROUP_ROWS/OUT_GROUPS, 1 to 23 steps
    each, weights reused across runs (one weight packet for eight runs)."""
    env = DtpuEnv(dut)
    seed = _seed("runs")
    env.log.info("seed %d", seed)
    rng = np.random.default_rng(seed)
    await env.reset()
    await env.init()
    cfg = env.cfg
    jobs = []
    for prec in cfg.precisions:
        for signed in (True, False):
            for g in range(1, cfg.rows + 1):        # every (G, NG) signed, the extremes unsigned
                for ng in (range(1, cfg.rows // g + 1) if signed else sorted({1, cfg.rows // g})):
                    jobs.append(random_job(rng, cfg, precision=prec, signed=signed, groups=g,
                                           out_groups=ng, steps=int(rng.integers(1, 20))))
    for i in range(0, len(jobs), 8):            # one weight packet for eight runs
        share_weights(cfg, jobs[i:i + 8])
    await _run_jobs(env, jobs)
    await env.quiet_status()
    env.finish()
    assert env.sb.received_packets >= len(jobs) // 2


@cocotb.test()
async def test_backpressure(dut):
    """Random pauses on all three sources and the sink (seeded), mixed precisions."""
    env = DtpuEnv(dut)
    seed = _seed("backpressure")
    rng = np.random.default_rng(seed)
    await env.reset()
    await env.init()
    for p in (0.3, 0.7):
        env.set_pauses("all", p, seed + int(p * 10))
        await _run_jobs(env, _jobs(env, rng, 10))
        await env.drain()
    env.set_pauses("none", 0, 0)
    await env.quiet_status()
    env.finish()


@cocotb.test()
async def test_output_fifo_full(dut):
    """A paused sink: the output FIFO fills (OARG0_STATUS.FULL), the core stalls; then
    everything drains in order."""
    env = DtpuEnv(dut)
    rng = np.random.default_rng(_seed("fifo"))
    await env.reset()
    await env.init()
    env.sink.pause = True
    job = random_job(rng, env.cfg, precision=env.cfg.precisions[0], groups=1, out_groups=env.cfg.rows,
                     steps=4 * env.cfg.outfifo_depth)
    await _run_jobs(env, [job])
    full = False
    for _ in range(400):
        v, _ = await env.read("OARG0_STATUS")
        if C.REG["OARG_STATUS"].field("FULL").get(v):
            full = True
            break
    assert full, "OARG0_STATUS.FULL never seen with a paused sink"
    env.sink.pause = False
    await env.quiet_status()
    env.finish()


@cocotb.test()
async def test_continuous(dut):
    """EXECUTE_CONTINOUS with IARG_RQT_EN = CSR | INFIFO: weights sent once and kept; every
    CSR + input pair starts a run by itself; STOP after the outputs came."""
    env = DtpuEnv(dut)
    rng = np.random.default_rng(_seed("continuous"))
    await env.reset()
    await env.init(rqt_en=(1 << IN["CSR"]) | (1 << IN["INFIFO"]))
    jobs = share_weights(env.cfg, _jobs(env, rng, 6))
    await env.send(IN["WMEM"], jobs[0].weights)
    # the weights do not gate a start: they must be complete before any run can start
    await env.sources[IN["WMEM"]].wait()
    while not C.REG["IARG_STATUS"].field("USED_BUF").get((await env.read("IARG1_STATUS"))[0]):
        pass
    await env.cmd("EXECUTE_CONTINOUS")
    for j in jobs:
        await env.send(IN["CSR"], j.csr_packet)
        await env.send(IN["INFIFO"], j.inputs)
    await env.drain()
    # in continuous mode these are refused with CMD_ERR, these accepted without effect
    await env.cmd("EXECUTE_STEP")
    await env.cmd("UPDATE_IN_ARG", 1)
    await env.cmd("UPDATE_OUT_ARG", 1)
    await env.cmd("UPDATE_OUT_ARG", 2)
    await env.cmd("EXECUTE_CONTINOUS")
    await env.cmd("EXECUTE_CONTINOUS", 1)
    await env.cmd("STOP_EXECUTE_CONTINOUS", 1)
    await env.cmd("STOP_EXECUTE_CONTINOUS")
    await env.cmd("STOP_EXECUTE_CONTINOUS")                 # not continuous any more: no effect
    status = await env.quiet_status()
    assert C.REG["STATUS"].field("CMD_ERR").get(status)
    env.finish()


@cocotb.test()
async def test_software_length(dut):
    """OARG_LENGTH_MODE = 1: TLAST after every OARG0_LENGTH words and at the end of a run."""
    env = DtpuEnv(dut)
    rng = np.random.default_rng(_seed("length"))
    await env.reset()
    await env.init(length_mode=1, length=3)
    await _run_jobs(env, _jobs(env, rng, 5, groups=1))
    await env.quiet_status()
    env.finish()
