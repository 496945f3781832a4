"""A Vela network on the TLM as a portable trace (`npu-tlm trace MODEL --input ... --out DIR`).

`write_trace` runs the network as the Ethos-U driver does, with the runner's own steps
(tlm/ethos_u85/runner.py: memory plan, `load_memory`, `program`, `DriverConfig`) on the U85
trace target wrapped in a `RecordingTarget`, so every host action becomes a trace command
(docs/trace-format.md) and the expectations come from the model:

    fill_mem     the scratch areas, zero (a licensee memory need not start zeroed)
    load_mem     the command stream, the read-only data (region 0), the state tensors'
                 initial values and the inputs
    poll_reg     STATUS.reset_status == 0 (the reset sequence has ended)
    write_reg    MEM_ATTR0..3, QCONFIG, REGIONCFG, AXI_SRAM, AXI_EXT, QBASE, QSIZE, BASEP0..7,
                 CMD (read first under the mask of the Q-channel enables it keeps) = run
    wait_irq
    read_reg     STATUS under the mask of state, irq_raised and the fault bits; QREAD
    check_mem    every output tensor, as the TLM computed it
    write_reg    CMD.clear_irq; read_reg STATUS.irq_raised == 0

The trace replays with `npu-tlm replay` and, without any Python model code, through the pins
of the TLM or an RTL design (`make sim TRACE=DIR/trace.txt`). What a trace cannot say is
left out: the DECERR guard bands the runner places after each area.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.trace import RecordingTarget
from . import registers as R
from .runner import (
    DRIVER_DEFAULTS,
    DriverConfig,
    RunError,
    check_inputs,
    cmd_write,
    load_memory,
    plan_memory,
    program,
    resolve_config,
)
from .trace_target import U85TraceTarget
from .vela import VelaModel, load

STATUS = R.get("STATUS")
# STATUS bits a finished job is judged by: stopped, interrupt raised, no sticky fault
JOB_END_FIELDS = ("state", "irq_raised", "bus_status", "cmd_parse_error", "branch_fault", "ecc_fault")


def _off(ident: str) -> int:
    return R.offset_of(ident)


def _name(offset: int) -> "str | None":
    r = R.by_offset(offset)
    return r.ident if r else None


class TraceHost:
    """The runner's register primitives (runner.DeviceHost) on a RecordingTarget: each
    becomes a trace command."""

    def __init__(self, rec: RecordingTarget):
        self.rec = rec

    def write(self, ident: str, value: int) -> None:
        self.rec.write_reg(_off(ident), value)

    def read(self, ident: str, mask: "int | None" = None) -> int:
        return self.rec.read_reg(_off(ident), mask)

    def wait_reset(self) -> None:
        if not self.rec.poll_reg(_off("STATUS"), 0, STATUS.field("reset_status").mask):
            raise RunError("STATUS.reset_status did not clear", "apb")


class _Loader:
    """`load_memory`'s memory: its writes are the trace's load_mem commands."""

    def __init__(self, rec: RecordingTarget):
        self.write = rec.load_mem


def write_trace(model: "VelaModel | str | Path", inputs, out: "str | Path",
                config: "str | None" = None, driver: DriverConfig = DRIVER_DEFAULTS,
                max_steps: "int | None" = None, name: str = "trace.txt") -> Path:
    """Run `model` on `inputs` and write the trace (and its memory images) into folder `out`;
    returns the trace's path. Raises RunError (bad inputs, or a run that did not end
    cleanly: the trace would not be worth replaying) or vela.VelaFormatError."""
    if not isinstance(model, VelaModel):
        model = load(model)
    npu = resolve_config(model, config)
    arrays = check_inputs(model, inputs)
    mmap = plan_memory(model, driver)
    target = U85TraceTarget(npu.name)
    rec = RecordingTarget(target, config=npu.name, reg_name=_name)
    w = rec.writer
    w.comment(f"{Path(str(model.path)).name} on {npu.name}, written by npu-tlm trace "
              "(expected values from the TLM)")

    w.comment("memory: scratch areas zeroed; command stream, read-only data, state tensors, inputs")
    for a in mmap.areas:
        if a.name in ("scratch", "scratch_fast") and a.size:
            rec.load_mem(a.address, bytes(a.size))
    load_memory(_Loader(rec), model, mmap, arrays)

    w.comment("driver: reset sequence done, AXI and region set-up, command queue, start")
    host = TraceHost(rec)
    program(host, mmap, driver)
    if not rec.wait_irq(max_steps):
        raise RunError(f"the interrupt was not raised within {max_steps or rec.wait_default} steps",
                       "budget")
    faults = target.faults()
    if faults:
        raise RunError(f"the job did not end cleanly: {faults[0]}", "not_completed")

    w.comment("job end: STATUS (stopped, irq_raised, no fault), QREAD, then the outputs")
    mask = 0
    for f in JOB_END_FIELDS:
        mask |= STATUS.field(f).mask
    status = host.read("STATUS", mask)
    fields = STATUS.decode(status)
    if fields["state"] or not fields["irq_raised"]:
        raise RunError(f"the NPU raised its interrupt without stopping (STATUS 0x{status:08x})",
                       "not_completed")
    host.read("QREAD")
    for i, t in enumerate(model.outputs):
        w.comment(f"output{i} {t.name!r}: {t.dtype} {list(t.shape)}")
        rec.check_mem(mmap.address(t), t.nbytes)
    cmd_write(host, clear_irq=1)
    host.read("STATUS", STATUS.field("irq_raised").mask)
    faults = target.faults()
    if faults:
        raise RunError(f"the device faulted at the end of the job: {faults[0]}", "apb")
    return w.save(out, name)


def outputs_of(trace_dir: "str | Path", model: "VelaModel | str | Path") -> list:
    """The expected outputs a trace written by `write_trace` checks (numpy, NHWC), read back
    from its memory images: what the TLM computed, for comparing with a reference."""
    if not isinstance(model, VelaModel):
        model = load(model)
    from ..core.trace import parse
    tr = parse(Path(trace_dir) / "trace.txt")
    blobs = [s.args[1].read_bytes() for s in tr.steps if s.op == "check_mem"]
    return [np.frombuffer(b, np.dtype(t.dtype).newbyteorder("<")).astype(t.dtype).reshape(t.shape)
            for b, t in zip(blobs, model.outputs)]
