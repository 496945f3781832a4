#!/usr/bin/env python3
"""Write the example `device dtpu` traces of tests/dtpu/traces/ from the TLM.

    python -m tools.make_dtpu_traces [--out tests/dtpu/traces]

Each trace is what a host did to the TLM system (tlm/dtpu/system.py: DDR, the four AXI DMAs,
the adapter), recorded by tlm.core.trace.RecordingTarget, with the model's results as
check_mem / read_reg expectations:

* depthwise_small/: the host library (tlm.dtpu.host.run_system) on a small int8
  DEPTHWISE_CONV_2D (2 input channels, depth multiplier 2, stride 2x1, SAME, RELU6): DMAs
  stream weights, CSR words and inputs; each run's output is an S2MM transfer whose
  completion interrupt the host waits for; the outputs are checked in DDR.
* continuous_int16/: register-level: EXECUTE_CONTINOUS with IARG_RQT_EN = CSR | input,
  weights loaded once, three int16 runs with different row groups; then the status words.
"""
from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import numpy as np

from tlm.core.trace import RecordingTarget
from tlm.dtpu import contract as C
from tlm.dtpu import host
from tlm.dtpu.core import pack_lanes
from tlm.dtpu.layers import DepthwiseLayer
from tlm.dtpu.system import DtpuSystem

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "tests" / "dtpu" / "traces"


def depthwise_small(out: Path) -> Path:
    rng = np.random.default_rng(2024)
    layer = DepthwiseLayer("depthwise_small", (1, 7, 6, 2), 0.04, -3,
                           rng.integers(-127, 128, (3, 3, 4)).astype(np.int8),
                           (0.01 * rng.uniform(0.5, 1.5, 4)).astype(np.float32),
                           rng.integers(-500, 500, 4), 0.05, 5, stride=(2, 1), padding="SAME",
                           depth_multiplier=2, activation="RELU6")
    x = rng.integers(-128, 128, layer.input_shape).astype(np.int8)
    plan = host.plan_depthwise(layer, x, C.DEFAULT_CONFIG)
    rec = RecordingTarget(DtpuSystem(C.DEFAULT_CONFIG))
    rec.writer.comment("An int8 DEPTHWISE_CONV_2D through DDR, the AXI DMAs and the DTPU "
                       "(tools/make_dtpu_traces.py; host library tlm/dtpu/host.py run_system).")
    rec.writer.comment(f"layer {layer.input_shape} kernel {layer.kernel} stride {layer.stride} "
                       f"multiplier {layer.depth_multiplier}: {len(plan.runs)} runs")
    outs = host.run_system(plan, rec, check=True)
    y = host.finish(plan, outs)
    if not np.array_equal(y, host.run_layer(layer, x)):
        raise SystemExit("make_dtpu_traces: system and direct execution differ")
    if rec.target.faults():
        raise SystemExit("make_dtpu_traces: the model faulted")
    return rec.writer.save(out / "depthwise_small")


def continuous_int16(out: Path) -> Path:
    cfg = C.CONFIGS["dtpu-8x8-int8-16-32"]
    rng = np.random.default_rng(77)
    sysm = DtpuSystem(cfg.name)
    rec = RecordingTarget(sysm, config=cfg.name)
    w = rec.writer
    w.comment("Continuous mode: IARG_RQT_EN = CSR | input FIFO; the weights are loaded once "
              "and kept; each CSR + input pair starts a run (tools/make_dtpu_traces.py).")
    dma = {n: C.WINDOW[n].offset for n in ("DMA_CSR", "DMA_WM", "DMA_INFIFO", "DMA_OUTFIFO")}
    reg = lambda r: C.DMA_REG[r].offset                                         # noqa: E731
    a = lambda name: C.WINDOW["DTPU"].offset + C.OFFSET[name]                   # noqa: E731
    rs, ioc_en = C.dma_field("RS").mask, C.dma_field("IOC_IRQEN").mask
    idle, ioc = C.dma_field("IDLE").mask, C.dma_field("IOC_IRQ").mask
    prec = C.PRECISION_BY_NAME["int16"]
    p = cfg.words_per_vector(prec)
    lanes = rng.integers(-30000, 30000, (cfg.rows, cfg.columns)).astype(np.int64) % (1 << 16)
    weights = pack_lanes(lanes.astype(np.uint64), 16, p).reshape(-1)
    base = 0x2000_0000
    rec.load_mem(base, weights.astype("<u8").tobytes())
    for d in ("DMA_CSR", "DMA_WM", "DMA_INFIFO"):
        rec.write_reg(dma[d] + reg("MM2S_DMACR"), rs)
    rec.write_reg(dma["DMA_OUTFIFO"] + reg("S2MM_DMACR"), rs | ioc_en)
    for name, v in (("CTRL", 1), ("CTRL", 0), ("IARG_RQT_EN", 0b101), ("OARG_LENGTH_MODE", 0)):
        rec.write_reg(a(name), v)
    rec.write_reg(dma["DMA_WM"] + reg("MM2S_SA"), base)
    rec.write_reg(dma["DMA_WM"] + reg("MM2S_LENGTH"), weights.size * 8)
    rec.poll_reg(dma["DMA_WM"] + reg("MM2S_DMASR"), idle, idle)
    rec.read_reg(a("IARG1_STATUS"))
    rec.write_reg(a("CMD"), C.cmd_word("EXECUTE_CONTINOUS"))
    addr = base + 0x10000
    for k, (g, ng, steps) in enumerate(((1, 0, 5), (2, 0, 7), (4, 1, 3))):
        csr = C.csr_word("int16", signed=True, group_rows=g, out_groups=ng)
        xs = (rng.integers(0, 1 << 63, steps * p, dtype=np.uint64) * 2).astype("<u8")
        rec.load_mem(addr, np.array([csr], "<u8").tobytes())
        rec.load_mem(addr + 8, xs.tobytes())
        nout = steps * cfg.words_per_step(prec, ng or cfg.rows // g) * 8
        dst = addr + 0x1000
        rec.write_reg(dma["DMA_OUTFIFO"] + reg("S2MM_DA"), dst)
        rec.write_reg(dma["DMA_OUTFIFO"] + reg("S2MM_LENGTH"), nout)
        rec.write_reg(dma["DMA_CSR"] + reg("MM2S_SA"), addr)
        rec.write_reg(dma["DMA_CSR"] + reg("MM2S_LENGTH"), 8)
        rec.write_reg(dma["DMA_INFIFO"] + reg("MM2S_SA"), addr + 8)
        rec.write_reg(dma["DMA_INFIFO"] + reg("MM2S_LENGTH"), xs.nbytes)
        w.comment(f"run {k}: int16, GROUP_ROWS {g}, OUT_GROUPS {ng}, {steps} steps: wait for the output DMA")
        rec.wait_irq()
        rec.read_reg(dma["DMA_OUTFIFO"] + reg("S2MM_LENGTH"))
        rec.write_reg(dma["DMA_OUTFIFO"] + reg("S2MM_DMASR"), ioc)
        rec.check_mem(dst, nout)
        rec.poll_reg(dma["DMA_CSR"] + reg("MM2S_DMASR"), idle, idle)
        rec.poll_reg(dma["DMA_INFIFO"] + reg("MM2S_DMASR"), idle, idle)
        addr += 0x2000
    rec.write_reg(a("CMD"), C.cmd_word("STOP_EXECUTE_CONTINOUS"))
    st = C.REG["STATUS"]
    sticky = st.mask(C.W1C) | st.field("CONTINUOUS").mask | st.field("ERR_CODE").mask
    w.comment("DONE and READY set, no error; not continuous any more")
    rec.read_reg(a("STATUS"), mask=sticky)
    rec.write_reg(a("STATUS"), st.mask(C.W1C))
    rec.read_reg(a("STATUS"), mask=sticky)
    if sysm.faults():
        raise SystemExit("make_dtpu_traces: the model faulted")
    return w.save(out / "continuous_int16")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    for fn in (depthwise_small, continuous_int16):
        d = a.out / fn.__name__
        if d.exists():
            shutil.rmtree(d)
        print(f"make_dtpu_traces: wrote {fn(a.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
