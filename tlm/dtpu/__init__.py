"""The thesis' FPGA tensor accelerator "DTPU" (seed 002): registry entry.

Modules: `contract` (every table, decided once), `core` (dtpu_core: CSR decoding, the
MXU), `adapter` (the AXI4-Stream Accelerator Adapter around it), `dma` (Xilinx AXI DMA
registers), `system` (DDR + DMAs + DTPU: the trace target), `host` (the TFLite
DEPTHWISE_CONV_2D delegate library), `layers` (depthwise layers read from .tflite files),
`quant` (TFLite's reference requantization). docs/devices/dtpu.md describes them.
"""
from ..core.registry import BenchInfo, DeviceInfo
from .contract import CONFIGS, DEFAULT_CONFIG

DEVICE = DeviceInfo(
    name="dtpu",
    title="FPGA tensor accelerator of the MSc thesis (weight-stationary MXU behind the "
          "AXI4-Stream Accelerator Adapter; AXI-Lite + AXI-Stream)",
    configs=tuple(CONFIGS),
    default_config=DEFAULT_CONFIG,
    trace_target="tlm.dtpu.system:DtpuSystem",
    registers="tlm.dtpu.contract:REGISTERS",
    bench=BenchInfo(
        test_modules=("tb.dtpu.test_dtpu_streams", "tb.dtpu.test_dtpu_regs",
                      "tb.dtpu.test_dtpu_host"),
        tlm_toplevel="dtpu",
        tlm_sources=("rtl_stub/dtpu/dtpu_shell.v",),
        rtl_toplevel="dtpu",
        rtl_sources="rtl_stub/dtpu/sources.f",
        includes=("rtl_stub/dtpu",),                 # both tops include gen/*.vh
        defines="tb.dtpu.build:defines",              # a configuration = module dtpu's DTPU_* macros
        env="tb.dtpu.env:DtpuEnv",
        trace_adapter="tb.dtpu.trace_adapter:DtpuPinTarget",
        coverage="tb.dtpu.coverage",
    ),
)
