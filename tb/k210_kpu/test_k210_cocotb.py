"""cocotb tests of the K210 KPU bench (DUT=tlm: the TLM behind rtl_stub/k210_kpu's shell).

Host sequences come from ``tlm.k210_kpu.driver`` run once on a TLM through a
``RecordingTarget``: the recorded trace (with the TLM's expectations) is then replayed
through the pins, and the scoreboard checks every access besides. ``K210_TRACE=path``
replays that trace in ``test_trace`` (else every example in tests/k210_kpu/traces/).
"""
from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles
from cocotbext.axi import AxiResp

from tb.k210_kpu.env import K210Env
from tb.k210_kpu.trace_player import play
from tlm.core.trace import RecordingTarget, parse
from tlm.k210_kpu import convert, driver
from tlm.k210_kpu.device import AI_BASE_ADDR, AI_IO_BASE_ADDR
from tlm.k210_kpu.registers import CONFIG_REGISTERS, OFFSET, REG_BY_NAME
from tlm.k210_kpu.trace_target import K210TraceTarget

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "tests" / "k210_kpu" / "traces"


def network(seed: int, spec, shape, eight_bit=True):
    layers, xq = convert.random_network(shape, spec, eight_bit=eight_bit, seed=seed)
    return driver.place(layers), xq


def record(net, xq, flow: str, fifo_reads: bool, tmp: Path):
    """Run a driver flow on the TLM and keep it as a trace (expectations from the model)."""
    rec = RecordingTarget(K210TraceTarget())
    driver.load(rec, net, xq)
    driver.run_flow(rec, net, flow)
    lo, hi = net.out_map.span()
    rec.check_mem(AI_IO_BASE_ADDR + lo, hi - lo)
    if fifo_reads:
        driver.read_output(rec, net.out_bytes())
    assert not rec.faults()
    return parse(rec.writer.save(tmp))


async def start(dut, plant=None) -> K210Env:
    env = K210Env(dut, plant=plant)
    await env.reset()
    return env


SPEC = [(False, 3, 6, "relu", "max_2_s2"), (True, 3, 6, "relu6", "bypass"), (False, 1, 4, "leaky", "mean_2_s2")]


@cocotb.test()
async def test_registers(dut):
    """Reset values, read-back, read-only registers, SLVERR outside the decoded windows."""
    env = await start(dut)
    for r in CONFIG_REGISTERS:
        if r.access in ("rw", "ro"):
            await env.read_reg(r.offset)
    for name in ("interrupt_mask", "fifo_threshold", "fifo_ctrl", "eight_bit_mode"):
        await env.write_reg(OFFSET[name], (1 << 64) - 1)
        assert await env.read_reg(OFFSET[name]) == REG_BY_NAME[name].mask
    await env.write_reg(OFFSET["interrupt_status"], 7)          # read-only: ignored
    assert await env.read_reg(OFFSET["interrupt_status"]) == 0
    r = await env.axi.write(AI_BASE_ADDR + OFFSET["interrupt_mask"], b"\x01\x02\x03\x04")
    assert r.resp == AxiResp.SLVERR, "a 32-bit register write must answer SLVERR"
    r = await env.axi.read(0x40000000, 8)
    assert r.resp == AxiResp.SLVERR, "outside the KPU's windows: SLVERR"
    await env.check_irq()
    await env.finish()


@cocotb.test()
async def test_network_stream_kpu_run(dut):
    """kpu_run flow (almost_empty interrupts, one layer per interrupt), 8-bit weights; the
    last layer's output on dma_out, checked by the scoreboard; KPU RAM checked."""
    env = await start(dut)
    env.stream(True)
    with tempfile.TemporaryDirectory() as tmp:
        net, xq = network(11, SPEC, (3, 16, 24))
        tr = record(net, xq, "kpu_run", fifo_reads=False, tmp=Path(tmp))
        res = await play(env, tr)
    assert res.failed == 0, res.messages
    await env.finish()
    st = env.sb.stats
    assert st["frames"] == 1 and st["fetched_layers"] == len(SPEC) and st["irq"] >= len(SPEC), st
    assert st["ram_bytes"] > 0


@cocotb.test()
async def test_network_fifo_reads_16bit(dut):
    """nncase's calc_done flow, 16-bit weights, output read through fifo_data_out."""
    env = await start(dut)
    with tempfile.TemporaryDirectory() as tmp:
        net, xq = network(12, SPEC, (2, 12, 20), eight_bit=False)
        tr = record(net, xq, "calc_done", fifo_reads=True, tmp=Path(tmp))
        res = await play(env, tr)
    assert res.failed == 0, res.messages
    await env.finish()
    st = env.sb.stats
    assert st["frames"] == 0 and st["reg_reads"] >= (net.out_bytes() + 7) // 8, st


@cocotb.test()
async def test_backpressure(dut):
    """Random TREADY on dma_out and random R-channel stalls on m_axi; all layers at once."""
    env = await start(dut)
    rnd = random.Random(int(os.environ.get("RANDOM_SEED", "1")))
    env.sink.set_pause_generator(iter(lambda: rnd.random() < 0.4, None))
    env.sysmem.r_channel.set_pause_generator(iter(lambda: rnd.random() < 0.3, None))
    env.stream(True)
    with tempfile.TemporaryDirectory() as tmp:
        net, xq = network(13, SPEC, (4, 8, 40))
        tr = record(net, xq, "burst", fifo_reads=False, tmp=Path(tmp))
        res = await play(env, tr)
    assert res.failed == 0, res.messages
    await ClockCycles(dut.clk, 2000)
    await env.finish()
    assert env.sb.stats["frames"] == 1 and env.sb.stats["fetched_layers"] == len(SPEC), env.sb.stats


@cocotb.test()
async def test_trace(dut):
    """Replay K210_TRACE (make sim TRACE=...) or every example trace through the pins."""
    paths = [Path(os.environ["K210_TRACE"])] if os.environ.get("K210_TRACE") else \
        sorted(EXAMPLES.glob("*/trace.txt"))
    assert paths
    env = await start(dut)
    for p in paths:
        await env.restart()
        res = await play(env, parse(p))
        assert res.failed == 0, res.messages
        assert res.passed > 0
        await env.finish()
        dut._log.info(f"{p.parent.name}: {res.summary}")


@cocotb.test()
async def test_planted_wrong_byte(dut):
    """A DUT that flips one output byte (stream) or one KPU RAM byte is caught."""
    with tempfile.TemporaryDirectory() as tmp:
        net, xq = network(14, SPEC[:1], (2, 8, 16))
        tr = record(net, xq, "calc_done", fifo_reads=False, tmp=Path(tmp))
        lo, _ = net.out_map.span()
        env = await start(dut)
        for plant in (("stream", 5), ("ram", lo + 2)):
            await env.restart(plant=plant)
            env.stream(True)
            await play(env, tr)
            await ClockCycles(dut.clk, 200)
            env.sb.finish()
            assert env.pins.planted, plant
            assert env.sb.errors, f"planted {plant} not caught"
            dut._log.info(f"planted {plant}: caught: {env.sb.errors[0]}")
