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
        extra={
            # Verilog include folder of both tops (rtl_stub/dtpu/gen/*.vh)
            "includes": ("rtl_stub/dtpu",),
            # top-level parameters of a configuration: contract.CONFIGS[name].verilog_params()
            # (-G / -P), or compile tools/gen_dtpu_rtl.py config_defines(cfg) before the
            # sources: module dtpu's parameters default to those DTPU_* macros
            "parameters": "tlm.dtpu.contract:CONFIGS",
            "config_defines": "tools/gen_dtpu_rtl.py:config_defines",
            # what tools/dtpu_bench_runner.py does today with tb.simtools.run_fixture
            "interim_runner": "tools/dtpu_bench_runner.py",
            # environment the cocotb modules read: the configuration name, the DUT kind,
            # and an optional trace to replay through the pins (tb/dtpu/trace_player.py)
            "env": {"DTPU_CONFIG": "<config>", "TB_DUT": "<rtl|tlm>", "TRACE": "<path>"},
            # the cocotb module that replays `make sim TRACE=...` for this device
            "trace_module": "tb.dtpu.test_dtpu_trace",
            # a test-only define that plants a bug in the RTL (the bench must fail)
            "bug_define": "DTPU_PLANTED_BUG",
        },
    ),
)
