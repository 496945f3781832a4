"""The Kendryte K210 KPU, driven by its layer-argument registers (seed 004): registry entry.

Modules: ``registers`` (every register and table as data), ``layout`` (KPU RAM feature
maps), ``datapath`` (the layer arithmetic), ``device`` (the KPU), ``trace_target``,
``driver`` (the host sequences of kpu.c / nncase), ``convert`` (float or uint8-quantized
layers to layer arguments and tables, as the Model Compiler does)."""
from ..core.registry import BenchInfo, DeviceInfo

DEVICE = DeviceInfo(
    name="k210-kpu",
    title="Kendryte K210 KPU (kpu_layer_argument_t FIFO, AXI 64-bit, 2 MiB KPU RAM)",
    configs=("k210", "k210-kpu"),           # one chip; the second name accepted in `config` lines
    default_config="k210",
    trace_target="tlm.k210_kpu.trace_target:K210TraceTarget",
    registers="tlm.k210_kpu.registers:CONFIG_REGISTERS",
    bench=BenchInfo(
        test_modules=("tb.k210_kpu.test_k210_cocotb",),
        trace_adapter="tb.k210_kpu.trace_adapter:K210PinTarget",
        tlm_toplevel="k210_kpu",
        tlm_sources=("rtl_stub/k210_kpu/k210_kpu_shell.v",),
        extra={
            "sims": ("verilator", "icarus"),          # both pass with DUT=tlm
            "duts": ("tlm",),                         # no RTL stand-in for the KPU
            "timescale": ("1ns", "1ps"),
            "clock_ns": 10,
            "trace_env": "K210_TRACE",                # a trace file for test_trace (make sim TRACE=)
            "env": {"TB_DUT": "tlm"},
        },
    ),
)
