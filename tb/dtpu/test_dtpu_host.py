"""cocotb tests of the host library (tlm/dtpu/host.py) against the DUT.

DTPU_CASES names an .npz of int8 DEPTHWISE_CONV_2D cases (tlm.dtpu.layers.save_cases:
layer, input and LiteRT BUILTIN_REF output, written by tests/dtpu/test_dtpu_bench.py or
tools/bench_dtpu.py). Without it a small built-in layer is used (checked against the host
library on the TLM).

* test_layers_streams: each layer's plan is executed by streaming its packets straight
  into the argument streams and issuing its commands (host.command_sequence), the sink
  always ready: the accelerator's own throughput. The output must equal the reference
  byte for byte; the TLM scoreboard checks every packet on the way. Cycles and stream
  beats are written to DTPU_BENCH_OUT (JSON) when set.
* test_layer_system: the first case through the thesis' whole system, the host library
  itself (host.run_system, in a bridge thread) driving DDR, the AXI DMA models and the
  registers (tb/dtpu/system.py).
"""
from __future__ import annotations

import json
import os
import time

import cocotb
import numpy as np
from cocotb.task import bridge
from cocotb.triggers import RisingEdge

from tlm.dtpu import host
from tlm.dtpu.layers import DepthwiseLayer, load_cases

from .env import DtpuEnv, words_of
from .system import PinSystem


def _cases():
    path = os.environ.get("DTPU_CASES")
    if path:
        return load_cases(path)
    rng = np.random.default_rng(5)
    layer = DepthwiseLayer("builtin", (1, 9, 7, 3), 0.05, 3, rng.integers(-127, 128, (3, 3, 6)).astype(np.int8),
                           np.full(6, 0.02, np.float32), rng.integers(-900, 900, 6), 0.08, -4,
                           stride=(2, 1), padding="SAME", depth_multiplier=2, activation="RELU6")
    x = rng.integers(-128, 128, layer.input_shape).astype(np.int8)
    return [(layer, x, host.run_layer(layer, x))]


async def run_plan_streams(env: DtpuEnv, plan: host.Plan) -> tuple[list[np.ndarray], int, int]:
    """Execute `plan` through the argument streams; returns (outputs per run, cycles from
    the first register write to the last output word, input beats sent)."""
    outs: list[np.ndarray] = []
    beats = 0
    start = env.cycle
    for act in host.command_sequence(plan):
        if act[0] == "reg":
            await env.write(act[1], act[2])
        elif act[0] == "send":
            await env.send(act[1], act[2])
            beats += int(np.asarray(act[2]).size)
    while len(outs) < len(plan.runs):
        outs.append(np.array(words_of(await env.sink.recv()), np.uint64))
    return outs, env.cycle - start, beats


@cocotb.test()
async def test_layers_streams(dut):
    env = DtpuEnv(dut)
    await env.reset()
    report = []
    for layer, x, want in _cases():
        plan = host.plan_depthwise(layer, x, env.cfg)
        t0 = time.perf_counter()
        outs, cycles, beats = await run_plan_streams(env, plan)
        wall = time.perf_counter() - t0
        y = host.finish(plan, outs)
        assert want is None or np.array_equal(y, want), (
            f"{layer.name}: {int((y != want).sum())} of {y.size} outputs differ from the reference")
        out_beats = sum(o.size for o in outs)
        env.log.info("%s: %d MACs, %d runs, %d steps, %d cycles: %.2f MACs/cycle (peak %d), "
                     "%d beats in %.1f s (%.0f beats/s)", layer.name, layer.macs, len(plan.runs),
                     plan.steps, cycles, layer.macs / cycles, env.cfg.rows * env.cfg.columns,
                     beats + out_beats, wall, (beats + out_beats) / wall)
        report.append({"layer": layer.name, "macs": layer.macs, "runs": len(plan.runs), "steps": plan.steps,
                       "cycles": cycles, "estimated_cycles": plan.estimated_cycles(),
                       "array_macs": plan.steps * env.cfg.rows * env.cfg.columns,
                       "beats": beats + out_beats, "wall_s": wall,
                       "peak": env.cfg.rows * env.cfg.columns, "equal": want is not None})
    await env.drain()
    if os.environ.get("DTPU_BENCH_OUT"):
        with open(os.environ["DTPU_BENCH_OUT"], "w") as f:
            json.dump(report, f, indent=1)
    env.finish()


@cocotb.test()
async def test_layer_system(dut):
    env = DtpuEnv(dut)
    await env.reset()
    layer, x, want = _cases()[0]
    plan = host.plan_depthwise(layer, x, env.cfg)
    pins = PinSystem(env)
    outs = await bridge(host.run_system)(plan, pins)
    y = host.finish(plan, outs)
    assert not pins.faults()
    assert want is None or np.array_equal(y, want), f"{layer.name}: outputs differ from the reference"
    for _ in range(20):
        await RisingEdge(dut.aclk)
    env.sb.check()
