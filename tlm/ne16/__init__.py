"""The GAP9 NE16 neural engine (seed 001: its register map; EXT: pulp-platform/ne16 RTL,
pulp-nnx, the GAP9 simulator model): registry entry.

Modules: registers (the register map as data), job (decode and checks of one job), engine
(the subtile walk, arithmetic, TCDM transactions), device (peripheral port, contexts, queue,
events), trace_target, and the references that are not the TLM: weights (bit-plane
encoder), reference (numpy layer reference), builder (jobs from logical layers, as the
pulp-nnx driver and the GAP SDK program them), layers (random layers), host (a Python host
driver and trace recording)."""
from ..core.registry import BenchInfo, DeviceInfo

DEVICE = DeviceInfo(
    name="ne16",
    title="GreenWaves GAP9 NE16 neural engine (HWPE peripheral port + 9x32-bit TCDM, jobs)",
    configs=("ne16", "ne16-gap9-l1"),
    default_config="ne16",
    trace_target="tlm.ne16.trace_target:make_target",
    registers="tlm.ne16.registers:REGISTERS",
    bench=BenchInfo(
        test_modules=("tb.ne16.tests.bench_ne16",),
        trace_adapter="tb.ne16.trace_adapter:Ne16PinTarget",
        tlm_toplevel="ne16_top_wrap",
        tlm_sources=("rtl_stub/ne16/ne16_shell.v",),
        rtl_toplevel=None,
        rtl_sources=None,
        coverage="tb.ne16.coverage",
        extra={"trace_test": "tb.ne16.tests.bench_ne16:test_trace_replay",
               "trace_env": "NE16_TRACE",
               "pinmap_env": "NE16_PINMAP",
               "shell_generator": "tools/gen_ne16.py"},
    ),
)
