"""cocotb tests of the NE16 through its own pins (HWPE peripheral port, 9 TCDM ports, evt_o,
busy_o), with the TLM as scoreboard. DUT=tlm puts the TLM behind the shell's pins.

Random layers draw their seeds from COCOTB_RANDOM_SEED (printed); outputs are compared with the
numpy reference (tlm.ne16.reference) on top of the scoreboard's checks. NE16_TRACE=path replays
that trace only (test_trace_replay); NE16_BENCH_LAYERS sets how many random layers run.
"""
from __future__ import annotations

import os
from pathlib import Path

import cocotb
import numpy as np

from tb.ne16.coverage import current as coverage
from tb.ne16.env import OFF, Ne16Env
from tlm.core.trace import parse
from tlm.ne16 import builder, layers
from tlm.ne16 import registers as R
from tlm.ne16.device import ACQUIRE_BUSY, ACQUIRE_FULL

REPO = Path(__file__).resolve().parents[3]
SEED = int(os.environ.get("COCOTB_RANDOM_SEED", os.environ.get("RANDOM_SEED", "1")))
N_LAYERS = int(os.environ.get("NE16_BENCH_LAYERS", "8"))
DUT = os.environ.get("TB_DUT", "tlm")
S0 = R.field("STATUS", "STATUS0").mask
S1 = R.field("STATUS", "STATUS1").mask


def bench_layer(seed: int, kind: str):
    """A small random layer (short simulations), any CONFIG0 option."""
    if kind == "linear":
        return layers.random_layer(seed, kind=kind, cin=16 * (1 + seed % 4), cout=1 + seed % 40)
    return layers.random_layer(seed, kind=kind, h=1 + seed % 6, w=1 + (seed // 6) % 6,
                               cin=1 + seed % 23, cout=1 + (seed // 3) % 36)


def build(lay, seed: int, base: int = builder.DEFAULT_BASE):
    for style in (builder.STYLES[seed % 2], builder.STYLES[1 - seed % 2]):
        try:
            return builder.build(lay, style, base=base), style
        except ValueError:
            continue
    return None, None


def finish(env: Ne16Env, expect_clean: bool = True) -> None:
    problems = env.problems()
    env.dut._log.info("scoreboard: %d jobs, %d output bytes checked; coverage %.1f%%",
                      env.sb.jobs_checked, env.sb.bytes_checked, coverage().total_percent)
    coverage().flush()
    if expect_clean:
        assert not problems, "\n".join(problems[:20])


@cocotb.test()
async def test_registers_through_pins(dut):
    env = Ne16Env(dut, seed=SEED)
    await env.start()
    for r in R.REGISTERS:
        if r.name != "ACQUIRE":
            assert await env.read_reg(r.offset) == 0, r.name
    assert await env.read_reg(OFF["ACQUIRE"]) == 0
    assert await env.read_reg(OFF["ACQUIRE"]) == ACQUIRE_BUSY
    for i, reg in enumerate(R.JOB_REGS):
        await env.write_reg(reg.offset, 0x01010101 * (i + 1))
    for i, reg in enumerate(R.JOB_REGS):
        assert await env.read_reg(reg.offset) == (0x01010101 * (i + 1)) & 0xFFFFFFFF
    await env.periph.write(R.OFFSETS["PADDING"], 0xAABBCCDD, be=0b0010)
    assert await env.read_reg(R.OFFSETS["PADDING"]) == 0x1515CC15
    await env.write_reg(OFF["SOFT_CLEAR"], 0)
    assert await env.read_reg(R.OFFSETS["PADDING"]) == 0
    assert not int(env.sig("busy_o").value)
    finish(env)


@cocotb.test()
async def test_random_layers(dut):
    env = Ne16Env(dut, seed=SEED, stall="random")
    await env.start()
    ran = 0
    for n in range(N_LAYERS):
        seed = SEED * 1000 + n
        kind = layers.KINDS[n % len(layers.KINDS)]
        lay = bench_layer(seed, kind)
        prog, style = build(lay, seed, base=0x10000000 + n * 0x20000)
        if prog is None:
            continue
        dut._log.info("ne16 bench layer seed=%d kind=%s style=%s jobs=%d", seed, kind, style,
                      len(prog.jobs))
        out = await env.run_program(prog)
        ref = lay.reference()
        assert np.array_equal(out, ref), f"seed {seed}: {(out != ref).sum()} outputs differ"
        ran += 1
    assert ran >= N_LAYERS // 2
    assert env.sb.jobs_checked >= ran
    finish(env)


@cocotb.test()
async def test_two_jobs_in_flight(dut):
    env = Ne16Env(dut, seed=SEED, stall="bursty")
    await env.start()
    a, _ = build(bench_layer(SEED + 7, "conv3x3"), 0, base=0x10000000)
    b, _ = build(bench_layer(SEED + 8, "conv1x1"), 1, base=0x10010000)
    env.load(a)
    env.load(b)
    ja = await env.dispatch(a.jobs[0], start=False)       # commit without start: queued
    assert await env.read_reg(OFF["STATUS"]) == S0
    assert not int(env.sig("busy_o").value)
    jb = await env.dispatch(b.jobs[0])                    # commit and start: both run
    assert (ja, jb) == (0, 1)
    assert await env.read_reg(OFF["STATUS"]) == S0 | S1
    assert await env.read_reg(OFF["ACQUIRE"]) == ACQUIRE_FULL
    assert await env.wait_irq() and await env.wait_irq()
    assert await env.read_reg(OFF["STATUS"]) == 0
    assert await env.read_reg(OFF["RUNNING_JOB"]) == jb
    assert await env.read_reg(OFF["FINISHED"]) == 2
    for p in (a, b):
        out = p.decode_output(env.read_mem(p.out_addr, p.out_size))
        assert np.array_equal(out, p.layer.reference())
    assert env.sb.jobs_checked == 2
    finish(env)


@cocotb.test()
async def test_trace_replay(dut):
    """Every example trace (or NE16_TRACE) replays through the pins, all checks passing."""
    env = Ne16Env(dut, seed=SEED, stall="random")
    await env.start()
    only = os.environ.get("NE16_TRACE")
    paths = [Path(only)] if only else sorted((REPO / "tests" / "ne16" / "traces").glob("*/trace.txt"))
    assert paths
    for p in paths:
        tr = parse(p)
        res = await env.replay(tr)
        dut._log.info("%s: %s", p, res.summary)
        assert res.failed == 0, "\n".join(res.messages)
        assert res.passed == tr.checks
        await env.write_reg(OFF["SOFT_CLEAR"], 0)          # the next trace starts from reset state
    finish(env)


@cocotb.test(skip=DUT != "tlm")
async def test_planted_wrong_byte_is_caught(dut):
    """A wrong byte planted in one output write on the pins (DUT=tlm) is reported."""
    env = Ne16Env(dut, seed=SEED, stall="none", corrupt=(2, 1, 0x20))
    await env.start()
    lay = layers.random_layer(77, kind="conv1x1", h=3, w=3, cin=16, cout=8, out_bits=8, quant=True)
    prog = builder.build(lay, "gapsdk")
    out = await env.run_program(prog)
    assert (out != lay.reference()).sum() == 1                # exactly the planted byte
    errors = env.sb.errors
    assert errors and any("output byte at" in e for e in errors), errors
    assert any("where the model wrote" in e for e in errors), errors
    finish(env, expect_clean=False)


@cocotb.test(skip=DUT != "tlm")
async def test_protocol_checkers_catch_violations(dut):
    """A request changed while waiting for its grant (TCDM), planted in the DUT=tlm adapter,
    is reported by the monitor (and a late peripheral answer, next test)."""
    env = Ne16Env(dut, seed=SEED, stall="always", violate="tcdm_change")
    await env.start()
    lay = layers.random_layer(78, kind="conv1x1", h=2, w=2, cin=16, cout=4, out_bits=8)
    prog = builder.build(lay, "gapsdk")
    env.load(prog)
    await env.dispatch(prog.jobs[0])
    assert await env.wait_irq()
    assert any("request changed while waiting for gnt" in e for e in env.tcdm_mon.errors), \
        env.tcdm_mon.errors
    coverage().flush()


@cocotb.test(skip=DUT != "tlm")
async def test_periph_checker_catches_a_late_answer(dut):
    env2 = Ne16Env(dut, seed=SEED, violate="periph_late")
    await env2.start()
    try:
        await env2.read_reg(OFF["STATUS"])
    except AssertionError:
        pass                                       # the host may give up on its own
    await env2.idle(4)
    assert any("no r_valid 1 cycle(s) after" in e for e in env2.periph_mon.errors), \
        env2.periph_mon.errors
    coverage().flush()


@cocotb.test()
async def test_illegal_job_through_pins(dut):
    """A reserved CONFIG0 value: the job completes at once with its event, writes nothing."""
    env = Ne16Env(dut, seed=SEED)
    await env.start()
    prog = builder.build(bench_layer(5, "conv3x3"), "gapsdk")
    env.load(prog)
    before = env.read_mem(prog.out_addr, prog.out_size)
    regs = list(prog.jobs[0])
    cfg = R.by_name("CONFIG0")
    regs[cfg.index] = cfg.field("QUANT_BITS").put(regs[cfg.index], 3)
    await env.dispatch(regs)
    assert await env.wait_irq(100)
    assert await env.read_reg(OFF["STATUS"]) == 0
    assert env.read_mem(prog.out_addr, prog.out_size) == before
    finish(env)


@cocotb.test()
async def test_coverage_of_modes_and_widths(dut):
    """After the tests above: every filter mode, output width, both TCDM directions and
    grant stalls were seen (coverage is per process; run the whole module)."""
    cov = coverage()
    if cov["job_outcome"].samples < 4:
        raise cocotb.pass_test("run the whole module for coverage")   # a filtered run
    for name in ("CONFIG0.FILTER_MODE", "CONFIG0.LINEAR", "CONFIG0.STREAMOUT", "job_outcome"):
        p = cov[name]
        assert p.covered >= min(p.bins, 2), (name, p.hits)
    assert cov["CONFIG0.FILTER_MODE"].covered == cov["CONFIG0.FILTER_MODE"].bins
    assert cov["tcdm_stall"].covered >= 3, cov["tcdm_stall"].hits
    assert cov["tcdm_access"].covered >= 4, cov["tcdm_access"].hits
    for line in cov.summary():
        dut._log.info("coverage: %s", line)
