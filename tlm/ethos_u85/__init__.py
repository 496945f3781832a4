"""The Arm Ethos-U85 (TRM r0p0 issue 05): its modules (device, isa, registers, ops, ...) and
its registry entry (docs/architecture.md, "How to add a device")."""

from ..core.registry import BenchInfo, DeviceInfo

DEVICE = DeviceInfo(
    name="ethos-u85",
    title="Arm Ethos-U85 NPU (APB5 + AXI5, Vela command streams)",
    configs=tuple(f"ethos-u85-{n}" for n in (128, 256, 512, 1024, 2048)),
    default_config="ethos-u85-256",
    trace_target="tlm.ethos_u85.trace_target:U85TraceTarget",
    registers="tlm.ethos_u85.registers:REGISTERS",
    tlm_factory="tlm.ethos_u85.device:Device",
    fuzz="tlm.ethos_u85.fuzz:TARGET",
    cli="tlm.ethos_u85.cli:COMMANDS",
    disasm="tlm.ethos_u85.cli:DISASM",
    bench=BenchInfo(
        test_modules=("tb.ethos_u85.tests.*",),
        tlm_toplevel="ethosu85",
        tlm_sources=("rtl_stub/ethos_u85/ethosu85_shell.v",),
        rtl_toplevel="ethosu85",
        rtl_sources="rtl_stub/ethos_u85",
        includes=("rtl_stub/ethos_u85",),          # the stand-in includes "gen/*.vh"
        parameters="tb.ethos_u85.build:parameters",  # DUT=rtl: MACS of the configuration
        env="tb.ethos_u85.env:Env",
        trace_adapter="tb.ethos_u85.trace_adapter:U85PinTarget",
        options="tb.ethos_u85.run_options:U85RunOptions",
        coverage="tb.ethos_u85.coverage",
    ),
)
