"""cocotb side of tools/bench_rtl.py: run Vela networks through the stand-in's pins (DUT=rtl,
scoreboard on) and count the clock cycles its CONV/DEPTHWISE unit is busy.

Environment: BENCH_NETS (comma-separated Vela .npz paths), BENCH_OUT (JSON result file),
NPU_CONFIG (the configuration the networks were compiled for).
"""
from __future__ import annotations

import json
import os
import random
from pathlib import Path

import cocotb
from cocotb.triggers import ClockCycles, ReadOnly, RisingEdge

from tb.ethos_u85.env import Env
from tb.ethos_u85.testlib.netjob import run_network


def conv_macs(words) -> tuple[int, int]:
    """(MACs, operations) of the CONV/DEPTHWISE operations of a command stream: every
    kernel tap of every output element, padding included (as Vela counts them)."""
    from tlm.ethos_u85 import isa
    regs = isa.RegisterFile()
    macs = ops = 0
    for d in isa.iter_decode(list(words)):
        name = d.cmd.name
        if name.startswith("NPU_SET_"):
            regs.set(d)
            continue
        if name not in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE"):
            continue
        f = regs.field
        n = ((f("NPU_SET_OFM_HEIGHT_M1", "height_m1") + 1) * (f("NPU_SET_OFM_WIDTH_M1", "width_m1") + 1)
             * (f("NPU_SET_OFM_DEPTH_M1", "depth_m1") + 1)
             * (f("NPU_SET_KERNEL_HEIGHT_M1", "height_m1") + 1) * (f("NPU_SET_KERNEL_WIDTH_M1", "width_m1") + 1))
        if name == "NPU_OP_CONV":
            n *= f("NPU_SET_IFM_DEPTH_M1", "depth_m1") + 1
        macs += n
        ops += 1
    return macs, ops


@cocotb.test(timeout_time=20000, timeout_unit="ms")
async def bench(dut):
    from tlm.ethos_u85.vela import load
    env = Env(dut, reference_model=True)
    await env.start()
    rng = random.Random(1)
    busy = dut.u_conv.busy
    count = {"on": False, "cycles": 0}

    async def watch():
        while True:
            await RisingEdge(env.clock)
            await ReadOnly()
            if count["on"] and str(busy.value) == "1":
                count["cycles"] += 1
    cocotb.start_soon(watch())
    results = []
    for path in os.environ["BENCH_NETS"].split(","):
        model = load(path)
        macs, ops = conv_macs(model.command_words)
        count["cycles"] = 0
        count["on"] = True
        res = await run_network(env, path, rng)
        count["on"] = False
        results.append(dict(net=Path(path).stem, macs=macs, conv_ops=ops, conv_cycles=count["cycles"],
                            total_cycles=res.cycles, output_bytes=res.output_bytes))
        cocotb.log.info("%s: %d MACs in %d CONV cycles (%d in all), outputs match the TLM",
                        Path(path).stem, macs, count["cycles"], res.cycles)
        await ClockCycles(env.clock, 4)
    env.finish()
    Path(os.environ["BENCH_OUT"]).write_text(json.dumps(results, indent=1))
