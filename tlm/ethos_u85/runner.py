"""Run a Vela-compiled network on the TLM the way the Ethos-U driver does.

`run_model(model, inputs)` follows the Arm driver (`ethosu_device_u85.c`, TFLM `ethosu.cc`;
docs: vela-pipeline.md 5.4, anchors.md 1.2), every register access going through the
Device's APB interface:

1. Memory areas: the command stream (COP header stripped; not a region), the read-only
   data (region 0), scratch = tensor arena (region 1; inputs and outputs at their offsets),
   scratch_fast (region 2) and, for COP2 `--separate-io-regions` models, the input and
   output areas (regions 3, 4). Each area is placed in the SRAM or EXT address window
   according to the port group its region is routed to (REGIONCFG -> MEM_ATTR.axi_port),
   aligned and followed by a guard band that answers DECERR, as do regions that are not
   bound: an access outside its area becomes STATUS.bus_status instead of silently
   reading another tensor. The inputs are copied in before anything runs (an OFM may
   alias an IFM in the arena).
2. Wait for STATUS.reset_status to clear; axi_init: MEM_ATTR0..3, QCONFIG, REGIONCFG,
   AXI_SRAM, AXI_EXT (`DriverConfig`).
3. QBASE, QSIZE, BASEP0..7, then CMD = (CMD & 0xC) | transition_to_running_state.
4. Run until the NPU stops. As the driver's IRQ handler, the job succeeded only if none of
   bus_status, cmd_parse_error, branch_fault, ecc_fault is set and the stream ended
   (NPU_OP_STOP or QREAD == QSIZE); otherwise `RunError` names the STATUS bits and the
   command offset. A kernel operation the TLM does not implement yet (no KERNEL_OPS entry,
   or the op raises NotImplementedError for a mode it lacks: device event 'op_unimplemented')
   is reported as kind 'unimplemented', whatever Policy.on_unimplemented_op says.
5. Outputs are read back from their regions and offsets; CMD.clear_irq.

Before the run, state (variable) tensors are initialised as LiteRT's ResetVariableTensor
does: int8 tensors to their zero point, every other type to 0 bytes.

No silent UNPREDICTABLE: a failed TRM assert lets the NPU go on (the op has no further
effect, `Policy.on_unpredictable`), so the outputs may be wrong while the run completes.
Every such event, and every model-limit event, is reported in `RunResult.warnings` (one
`RunWarning` per kind: event, operation and assert, with the first command offset and a
count), as is a `config` that disagrees with the model's CONFIG word (MACs per cycle,
product), which Arm's driver refuses. `run_model(..., strict=True)` raises RunError (kind
'strict') instead of returning a result that has warnings.

The accelerator configuration comes from the CONFIG word Vela embeds (product 2 = U85,
macs_per_cc -> ethos-u85-N) unless `config` overrides it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import isa
from . import registers as R
from .config import DEFAULT_CONFIG, NpuConfig, Policy, get_config
from .device import STICKY_FAULTS, Device, StopKind, StopReason
from .memory import ADDR_MASK, PAGE_SIZE, Interface, Memory, Resp
from .ops.common import OpState
from .ops.plan import freeze_run
from .vela import (
    COP2_FEATURE_SEPARATE_IO,
    REGION_INPUT,
    REGION_OUTPUT,
    REGION_READ_ONLY,
    REGION_SCRATCH,
    REGION_SCRATCH_FAST,
    VelaModel,
    load,
)

__all__ = ["RunError", "RunResult", "RunWarning", "DriverConfig", "DRIVER_DEFAULTS", "Area", "MemoryMap",
           "resolve_config", "config_warning", "check_inputs", "plan_memory", "run_model", "Session"]

NUM_REGIONS = 8
AREA_NAMES = {REGION_READ_ONLY: "read_only", REGION_SCRATCH: "scratch",
              REGION_SCRATCH_FAST: "scratch_fast", REGION_INPUT: "input", REGION_OUTPUT: "output"}
RESET_POLL_LIMIT = 100_000        # the driver's STATUS.reset_status poll count
_STATUS, _CMD = R.get("STATUS"), R.get("CMD")
_CMD_KEEP = _CMD.field("clock_q_enable").mask | _CMD.field("power_q_enable").mask
_MEM_ATTR = R.get("MEM_ATTR0")    # all four share the layout
_STICKY_MASK = 0
for _b in STICKY_FAULTS:
    _STICKY_MASK |= _STATUS.field(_b).mask
_AXI = R.get("AXI_SRAM")          # AXI_SRAM and AXI_EXT share the layout


class RunError(Exception):
    """A run that could not start or did not complete. `kind` is one of
    'input' (inputs or configuration rejected), 'model' (the Vela output is inconsistent),
    'unimplemented', 'model_error' (exception inside the TLM), 'model_limit', 'bus_fault',
    'parse_error', 'branch_fault', 'ecc_fault', 'budget', 'not_completed', 'apb', 'strict'
    (the run completed with warnings and `strict` was set).
    `offset` is the command-stream byte offset and `op` the command there, when known;
    `warnings` the RunWarnings of the run up to the failure (besides its cause)."""

    def __init__(self, message: str, kind: str = "input", *, offset: "int | None" = None,
                 op: "str | None" = None, stop: "StopReason | None" = None, status: int = 0,
                 device: "Device | None" = None, detail: str = "", warnings: tuple = ()):
        super().__init__(message)
        self.kind, self.offset, self.op, self.stop = kind, offset, op, stop
        self.status, self.device, self.detail = status, device, detail
        self.warnings = tuple(warnings)


@dataclass(frozen=True)
class RunWarning:
    """One kind of event that makes a completed run's outputs untrustworthy.
    kind: 'unpredictable' (a failed TRM assert: the command had no further effect),
    'model_limit' (a model budget was hit) or 'config' (the configuration disagrees with the
    model's CONFIG word); what: the assert, limit or disagreement; offset/op: command-stream
    byte offset and command of the first occurrence (None when not tied to a command);
    count: occurrences."""
    kind: str
    what: str
    offset: "int | None" = None
    op: "str | None" = None
    count: int = 1

    def __str__(self) -> str:
        label = {"unpredictable": "UNPREDICTABLE", "model_limit": "model limit"}.get(self.kind, self.kind)
        where = "" if self.offset is None else f" at command offset 0x{self.offset:x}" + (
            f" ({self.op})" if self.op else "")
        what = self.what
        if self.op and what.startswith(self.op + ": "):
            what = what[len(self.op) + 2:]
        times = f" [{self.count} times]" if self.count > 1 else ""
        return f"{label}{where}: {what}{times}"


@dataclass(frozen=True)
class DriverConfig:
    """What the driver programs before a run, and where it puts the areas.

    Defaults: MEM_ATTR0..3, QCONFIG and the AXI limits of Arm's `ethosu_config_u85.h`
    (MEM_ATTR0/1 = SRAM port group, MEM_ATTR2/3 = EXT, QCONFIG = 2; AXI_SRAM 12 reads,
    16 writes, AXI_EXT 64 / 32, max_beats 256 B). REGIONCFG: region 2 (scratch_fast) on
    MEM_ATTR1 (SRAM), region 0 on MEM_ATTR3 and every other region on MEM_ATTR2 (EXT), as
    Vela's Dedicated_Sram memory modes assume (arena in DRAM, staging in SRAM)."""
    mem_attr: tuple = (_MEM_ATTR.encode(axi_port=0), _MEM_ATTR.encode(axi_port=0),
                       _MEM_ATTR.encode(axi_port=1), _MEM_ATTR.encode(axi_port=1))
    regioncfg: int = R.get("REGIONCFG").encode(region0=3, region1=2, region2=1, region3=2, region4=2,
                                               region5=2, region6=2, region7=2)
    qconfig: int = 2
    axi_sram: int = _AXI.encode(max_outstanding_read_m1=11, max_outstanding_write_m1=15, max_beats=2)
    axi_ext: int = _AXI.encode(max_outstanding_read_m1=63, max_outstanding_write_m1=31, max_beats=2)
    sram_base: int = 0x00_1000_0000   # address windows of the two port groups
    ext_base: int = 0x00_6000_0000
    align: int = 4096                 # area alignment (the driver needs 16)
    guard: int = 4096                 # DECERR band after each area
    unbound_span: int = 1 << 32       # DECERR span at the address unbound regions point to
    pprot: int = 0b01                 # APB PPROT: privileged, secure

    def __post_init__(self):
        if self.align < 16 or self.align & (self.align - 1):
            raise ValueError("DriverConfig.align must be a power of two >= 16")
        if len(self.mem_attr) != 4:
            raise ValueError("DriverConfig.mem_attr holds MEM_ATTR0..3")

    def interface(self, attr_index: int) -> Interface:
        return Interface(_MEM_ATTR.decode(self.mem_attr[attr_index & 3])["axi_port"])

    def region_interface(self, region: int) -> Interface:
        return self.interface(R.get("REGIONCFG").field(f"region{region}").get(self.regioncfg))


DRIVER_DEFAULTS = DriverConfig()


@dataclass(frozen=True)
class Area:
    name: str                 # 'command_stream', 'read_only', 'scratch', ..., 'unbound'
    address: int
    size: int
    interface: Interface      # the address window (port group) it was placed in
    regions: tuple = ()       # BASEP indices that point at it


@dataclass(frozen=True)
class MemoryMap:
    areas: tuple              # of Area
    basep: tuple              # BASEP0..7
    faults: tuple = ()        # (lo, hi) address ranges that answer DECERR

    def address(self, t) -> int:
        """The byte address of tensor *t* (a model input, output or variable): its
        region's base pointer plus its offset."""
        return self.basep[t.region] + t.offset

    def area(self, name: str) -> Area:
        for a in self.areas:
            if a.name == name:
                return a
        raise KeyError(name)

    def region_area(self, region: int) -> Area:
        for a in self.areas:
            if region in a.regions:
                return a
        raise KeyError(region)


@dataclass
class RunResult:
    outputs: list             # np.ndarray per model output, in the model's shape (NHWC)
    stop_reason: StopReason
    status: int               # STATUS as read over APB when the NPU stopped
    device: Device
    model: VelaModel
    config: NpuConfig
    memory_map: MemoryMap
    unpredictable: list = field(default_factory=list)   # 'unpredictable' event details (first 1000)
    warnings: list = field(default_factory=list)        # RunWarning, one per kind of event

    @property
    def status_fields(self) -> dict:
        return _STATUS.decode(self.status)

    def __getattr__(self, name):
        # a Session frozen run's device, made when first asked for (_LazyDevice)
        if name == "device":
            lazy = self.__dict__.pop("_lazy_device", None)
            if lazy is not None:
                dev = self.__dict__["device"] = lazy.make()
                return dev
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


# --------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------
def resolve_config(model: VelaModel, config: "str | int | NpuConfig | None" = None) -> NpuConfig:
    """`config` if given, else from the model's CONFIG word; a bare stream gets the default."""
    try:
        if config is not None:
            return get_config(config)
        if model.config_word is None:
            return get_config(DEFAULT_CONFIG)
        if model.accelerator is None:
            raise RunError(f"the model was compiled for product {model.config_word >> 28}, not an "
                           f"Ethos-U85 (CONFIG 0x{model.config_word:08x}); pass a configuration")
        return get_config(model.accelerator)
    except ValueError as e:
        raise RunError(str(e)) from None


def config_warning(model: VelaModel, npu: NpuConfig) -> "RunWarning | None":
    """A RunWarning when the model's CONFIG word names another product or MACs per cycle
    than `npu` (Arm's driver refuses such a model), else None."""
    c = model.config_word
    if c is None:
        return None
    want = npu.config_word
    diffs = []
    if c >> 28 != want >> 28:
        diffs.append(f"product {c >> 28}, {npu.name} is product {want >> 28}")
    if (c & 0xF) != (want & 0xF):
        diffs.append(f"{1 << (c & 0xF)} MACs per cycle, {npu.name} has {npu.macs}")
    if not diffs:
        return None
    return RunWarning("config", f"the model was compiled for {'; '.join(diffs)} (CONFIG 0x{c:08x}); "
                                f"Arm's driver refuses it")


def _count(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def check_inputs(model: VelaModel, inputs) -> list:
    """The inputs as contiguous arrays in the model's shapes. Count and dtype must match; any
    shape with the model input's element count is taken (reshaped in C order: Vela folds a
    leading RESHAPE into the input, so the TFLite input [1, 1960] of micro_speech is the raw
    input [1, 49, 40, 1], the same bytes). Inputs the stream never reads
    (`model.unused_inputs`, e.g. TRANSPOSE_CONV's output shape) are not asked for; a list
    that also holds them, in Vela's input order, is accepted and they are ignored."""
    inputs = list(inputs)
    want = model.inputs
    unused = model.unused_inputs
    if unused and len(inputs) == len(want) + len(unused):
        used_index = {t.index for t in want}
        order = sorted(want + unused, key=lambda t: t.index)
        inputs = [x for x, t in zip(inputs, order) if t.index in used_index]
    if len(inputs) != len(want):
        skip = (f" (not counting {len(unused)} the command stream never reads: "
                f"{', '.join(repr(t.name) for t in unused)})" if unused else "")
        raise RunError(f"the model has {len(want)} input{'s' * (len(want) != 1)}{skip}, got {len(inputs)}")
    out = []
    for i, (x, t) in enumerate(zip(inputs, want)):
        a = np.asarray(x)
        if a.dtype != np.dtype(t.dtype):
            raise RunError(f"input {i} ({t.name!r}) has dtype {a.dtype}, the model expects {t.dtype}")
        if a.size != _count(t.shape):
            raise RunError(f"input {i} ({t.name!r}) has shape {list(a.shape)} ({a.size} elements), the "
                           f"model expects {list(t.shape)} (NHWC, {_count(t.shape)} elements)")
        out.append(np.ascontiguousarray(a).reshape(t.shape))
    return out


# --------------------------------------------------------------------------------------------
# Memory map
# --------------------------------------------------------------------------------------------
def _align_up(n: int, a: int) -> int:
    return -(-n // a) * a


def plan_memory(model: VelaModel, driver: DriverConfig = DRIVER_DEFAULTS) -> MemoryMap:
    """Place the areas and bind the regions (vela-pipeline.md 5.4)."""
    if model.variables and model.source == "npz" and (model.payload.features or 0) & COP2_FEATURE_SEPARATE_IO:
        raise RunError("state tensors in a --separate-io-regions raw .npz: Vela lists them in region 1 at "
                       "offsets of the input and output regions; run the *_vela.tflite output instead", "model")
    sizes = {REGION_READ_ONLY: len(model.read_only), REGION_SCRATCH: model.scratch_size,
             REGION_SCRATCH_FAST: model.scratch_fast_size}
    tensors = [("input", i, t) for i, t in enumerate(model.inputs)] + \
              [("output", i, t) for i, t in enumerate(model.outputs)] + \
              [("variable", i, t) for i, t in enumerate(model.variables)]
    for kind, i, t in tensors:          # separate I/O regions are sized by their tensors
        if not 0 <= t.region < NUM_REGIONS:
            raise RunError(f"{kind} {i} ({t.name!r}) is in region {t.region}, outside 0..7", "model")
        if t.region not in sizes or t.region > REGION_SCRATCH_FAST:
            sizes[t.region] = max(sizes.get(t.region, 0), t.offset + t.nbytes)
    for kind, i, t in tensors:
        if t.offset < 0 or t.offset + t.nbytes > sizes[t.region]:
            raise RunError(f"{kind} {i} ({t.name!r}) at offset 0x{t.offset:x} + {t.nbytes} bytes lies "
                           f"outside region {t.region} ({sizes[t.region]} bytes)", "model")

    cursor = {Interface.sram: driver.sram_base, Interface.ext: driver.ext_base}
    areas, faults = [], []

    def place(name, size, interface, regions=(), guard=driver.guard):
        addr = cursor[interface]
        areas.append(Area(name, addr, size, interface, tuple(regions)))
        lo = addr + _align_up(size, driver.align)
        hi = min(lo + guard, 1 << 40)
        if hi > lo:
            faults.append((lo, hi))
        cursor[interface] = _align_up(hi, driver.align)

    place("command_stream", 4 * len(model.command_words), driver.interface(driver.qconfig))
    for r in sorted(sizes):
        place(AREA_NAMES.get(r, f"region{r}"), sizes[r], driver.region_interface(r), (r,))
    unbound = tuple(r for r in range(NUM_REGIONS) if r not in sizes)
    if unbound:
        place("unbound", 0, Interface.ext, unbound, driver.unbound_span)
    if any(a.address + _align_up(a.size, driver.align) > 1 << 40 for a in areas):
        raise RunError("the memory areas do not fit below 2**40 with this DriverConfig")
    basep = [0] * NUM_REGIONS
    for a in areas:
        for r in a.regions:
            basep[r] = a.address
    return MemoryMap(tuple(areas), tuple(basep), tuple(faults))


# --------------------------------------------------------------------------------------------
# Run
# --------------------------------------------------------------------------------------------
class _Watch:
    """Device hook: remembers the events that explain how a run ended, and counts the
    UNPREDICTABLE and model-limit events by kind (event, offset's command, what)."""
    KEEP = ("op_unimplemented", "internal_error", "model_limit", "fault", "unpredictable")
    passive = True                       # only records (Device.hooks)
    hook_events = frozenset(KEEP)        # the events it is called for (Device.hooks)
    WARN = ("unpredictable", "model_limit")
    MAX_DETAILS = 1000

    def __init__(self, model: VelaModel):
        self.model = model
        self.seen: dict = {}
        self.unpredictable: list = []
        self.kinds: dict = {}            # (event, op, what) -> [first offset, count]
        self._ops: dict = {}             # offset -> command name

    def __call__(self, event: str, details: dict) -> None:
        if event not in self.KEEP:
            return
        self.seen.setdefault(event, details)         # the first of each kind
        if event in self.WARN:
            if event == "unpredictable" and len(self.unpredictable) < self.MAX_DETAILS:
                self.unpredictable.append(details)
            off = details.get("offset")
            op = self._ops.get(off)
            if op is None:
                op = self._ops[off] = _op_at(self.model, off)
            key = (event, op, details.get("what") or details.get("error", "?"))
            k = self.kinds.get(key)
            if k is None:
                self.kinds[key] = [off, 1]
            else:
                k[1] += 1

    def warnings(self, exclude: "tuple | None" = None) -> list:
        """RunWarnings in order of first occurrence; `exclude` (event, offset): the cause of a
        failure, reported by the RunError itself."""
        return [RunWarning(ev, what, off, op, n) for (ev, op, what), (off, n) in self.kinds.items()
                if exclude is None or (ev, off) != exclude]


class DeviceHost:
    """The driver's register primitives on a Device's APB (PPROT `pprot`); a PSLVERR is a
    RunError. `tlm/ethos_u85/vela_trace.py` has the same primitives recording a trace."""

    _offsets: dict = {}                  # ident -> offset (R.offset_of, looked up once)

    def __init__(self, dev: Device, pprot: int):
        self.dev, self.pprot = dev, pprot

    @classmethod
    def _offset(cls, ident: str) -> int:
        off = cls._offsets.get(ident)
        if off is None:
            off = cls._offsets[ident] = R.offset_of(ident)
        return off

    def write(self, ident: str, value: int) -> None:
        if self.dev.apb_write(self._offset(ident), value, self.pprot):
            raise RunError(f"APB write of 0x{value:08x} to {ident} answered PSLVERR", "apb", device=self.dev)

    def read(self, ident: str, mask: "int | None" = None) -> int:
        """The register's value (`mask`: the bits the caller relies on)."""
        data, err = self.dev.apb_read(self._offset(ident), self.pprot)
        if err:
            raise RunError(f"APB read of {ident} answered PSLVERR", "apb", device=self.dev)
        return data

    def wait_reset(self) -> None:
        """Poll STATUS until reset_status clears (RESET_POLL_LIMIT reads)."""
        for _ in range(RESET_POLL_LIMIT):
            if not _STATUS.field("reset_status").get(self.read("STATUS")):
                return
        raise RunError("STATUS.reset_status did not clear", "apb", device=self.dev)


def variable_init(t) -> bytes:
    """The initial bytes of state tensor `t` (a vela.TensorInfo), as LiteRT's
    ResetVariableTensor sets them: every byte the zero point for int8, 0 for any other type."""
    zp = t.quantization.zero_point
    value = int(zp[0]) & 0xFF if t.dtype == "int8" and zp else 0
    return bytes([value]) * t.nbytes


def load_memory(memory, model: VelaModel, mmap: MemoryMap, arrays) -> None:
    """Back-door load, as the driver's caller does: the command stream, the read-only data
    (region 0), the state tensors' initial values (variable_init) and the inputs at their
    region offsets. `memory` needs `write(addr, bytes)`."""
    memory.write(mmap.area("command_stream").address, model.command_words.astype("<u4").tobytes())
    memory.write(mmap.basep[REGION_READ_ONLY], model.read_only)
    for t in model.variables:
        memory.write(mmap.address(t), variable_init(t))
    write_inputs(memory, model, mmap, arrays)


def write_inputs(memory, model: VelaModel, mmap: MemoryMap, arrays) -> None:
    """Back-door write of the inputs (checked arrays) at their region offsets."""
    for x, t in zip(arrays, model.inputs):
        data = np.ascontiguousarray(x, x.dtype.newbyteorder("<")).reshape(-1).view(np.uint8)
        if getattr(type(memory), "write", None) is Memory.write:
            memory.store(mmap.address(t), data)      # (the array as it is)
        else:
            memory.write(mmap.address(t), data.tobytes())


def cmd_write(host, **fields) -> None:
    """CMD = the clock/power Q-channel enables it holds | *fields* (the driver's
    read-modify-write)."""
    keep = _CMD_KEEP
    host.write("CMD", (host.read("CMD", keep) & keep) | _CMD.encode(**fields))


def program(host, mmap: MemoryMap, driver: DriverConfig) -> None:
    """The driver's APB sequence: wait for the reset sequence, AXI/region set-up, QBASE/QSIZE,
    BASEP0..7, then CMD.transition_to_running_state. `host` has the primitives of
    `DeviceHost` (write, read, wait_reset)."""
    host.wait_reset()
    for n, attr in enumerate(driver.mem_attr):                        # axi_init
        host.write(f"MEM_ATTR{n}", attr)
    host.write("QCONFIG", driver.qconfig)
    host.write("REGIONCFG", driver.regioncfg)
    host.write("AXI_SRAM", driver.axi_sram)
    host.write("AXI_EXT", driver.axi_ext)
    cs = mmap.area("command_stream")
    host.write("QBASE_LO", cs.address & 0xFFFFFFFF)
    host.write("QBASE_HI", cs.address >> 32)
    host.write("QSIZE", cs.size)
    for n, base in enumerate(mmap.basep):
        host.write(f"BASEP{n}_LO", base & 0xFFFFFFFF)
        host.write(f"BASEP{n}_HI", base >> 32)
    cmd_write(host, transition_to_running_state=1)


def _op_at(model: VelaModel, offset: "int | None") -> "str | None":
    if offset is None or offset % 4 or not 0 <= offset < 4 * len(model.command_words):
        return None
    try:
        return isa.decode_word(model.command_words, offset // 4).cmd.name
    except isa.IsaError:
        return None


def _failure(model: VelaModel, dev: Device, stop: StopReason, status: int, watch: _Watch) -> "RunError | None":
    """The RunError for a run that did not complete, None for a good one."""
    if (not status & _STICKY_MASK and stop.kind in (StopKind.STOP, StopKind.END)
            and not any(e in watch.seen for e in ("op_unimplemented", "internal_error", "model_limit"))):
        return None                                  # (the checks below, for a good run)
    fields = _STATUS.decode(status)
    bits = [b for b in STICKY_FAULTS if fields[b]]
    # an op the TLM lacks or an exception inside the TLM fails the run even under a
    # 'continue' Policy, which leaves no STATUS trace
    cause = next((e for e in ("op_unimplemented", "internal_error", "model_limit") if e in watch.seen), None)
    if not bits and cause is None and stop.kind in (StopKind.STOP, StopKind.END):
        return None
    fault = watch.seen.get("fault", {})
    ev = watch.seen.get(cause, fault)
    offset = ev.get("offset", fault.get("offset", stop.qread))
    detail = fault.get("detail", stop.detail)
    if cause == "op_unimplemented":
        kind = "unimplemented"
        detail = f"{ev['name']} not implemented" + (f": {ev['reason']}" if ev.get("reason") else "")
    elif cause == "internal_error":
        kind, detail = "model_error", ev["error"]
    elif cause == "model_limit":
        kind, detail = "model_limit", ev["error"]
    elif bits:
        kind = {"bus_status": "bus_fault", "cmd_parse_error": "parse_error"}.get(bits[0], bits[0])
    elif stop.kind == StopKind.BUDGET:
        kind = "budget"
    else:
        kind = "not_completed"
    op = _op_at(model, offset)
    where = f"at command offset 0x{offset:x}" + (f" ({op})" if op else "")
    if kind == "budget":
        what = "work" if "work units" in stop.detail else "step"
        head = f"{what} budget used up {where}, NPU still running"
    elif bits:
        flt = ""
        if fields["bus_status"]:
            flt = (f", faulting_interface={R.enum_values('dma_fault_src_t')[fields['faulting_interface']]}"
                   f" faulting_channel="
                   f"{R.enum_values('pmu_axi_channel_t').get(fields['faulting_channel'], '?')}")
        head = f"NPU stopped with {' + '.join(bits)}{flt} {where}"
    elif cause:
        head = f"{kind} operation {where} (the NPU went on to {stop.kind.value})"
    else:
        head = f"NPU stopped ({stop.kind.value}) {where}"
    msg = f"{head}: {detail} [STATUS 0x{status:08x}]" if detail else f"{head} [STATUS 0x{status:08x}]"
    return RunError(msg, kind, offset=offset, op=op, stop=stop, status=status, device=dev,
                    detail=detail, warnings=watch.warnings(exclude=(cause, offset)))


def run_model(model: "VelaModel | str | Path", inputs, config: "str | int | NpuConfig | None" = None,
              max_steps: "int | None" = None, *, max_work: "int | None" = None,
              driver: DriverConfig = DRIVER_DEFAULTS, policy: "Policy | None" = None,
              log_transactions: bool = False, strict: bool = False,
              reference_paths: bool = False, warm_paths: bool = True) -> RunResult:
    """Run `model` (a VelaModel or a path for `vela.load`) on `inputs` (one array per model
    input, NHWC, the model's dtypes; see check_inputs). `config` overrides the embedded
    configuration (a disagreement with the model's CONFIG word is a warning);
    `max_steps` bounds the commands executed (Policy.default_max_steps if None) and
    `max_work` the model's work units (Policy.default_max_work if None); a run that uses
    either up fails with kind 'budget'. The result's `warnings` list every kind of
    UNPREDICTABLE or model-limit event; with `strict` a run that has any warning raises
    RunError kind 'strict' (its `warnings` attribute holds them). `reference_paths` runs the
    literal reference paths (Device(reference_paths=True), Memory(batching=False)): the tests
    compare them with the fast paths. `warm_paths=False` runs without segments, operation
    plans and run traces (Device(segments=, plans=, traces=)): the command-by-command path.
    Repeated inferences of one model: `Session` (the same run, cheaper set-up).
    Raises RunError (see its `kind`) or vela.VelaFormatError."""
    return Session(model, config, driver=driver, policy=policy, log_transactions=log_transactions,
                   strict=strict, reference_paths=reference_paths, warm_paths=warm_paths
                   )._run(inputs, max_steps, max_work, keep=False)


class Session:
    """Repeated inferences of one model: run_model's checks, memory map and memory load are
    done once, and each `run(inputs)` is the run run_model would make with these arguments
    (same outputs, transactions, cycles, events, errors) on a fresh Device.  The memory is
    kept: each run restores its loaded contents in place (the page arrays stay the same
    objects, so the operation plans' views of them stay valid; a page the first run created
    is kept as a zero page, which reads as the absent page) and writes the inputs.  With the
    warm paths, the device the driver's programming leaves (register writes only, the
    same on every run) is saved on the first run and each later run starts from a copy of
    it (Device.save_state / from_state) instead of repeating the APB sequence.  A
    result's `device` and its memory are valid until the next `run` (they share the
    memory); a frozen run's result makes its device when `.device` is first asked for."""

    def __init__(self, model: "VelaModel | str | Path", config: "str | int | NpuConfig | None" = None, *,
                 driver: DriverConfig = DRIVER_DEFAULTS, policy: "Policy | None" = None,
                 log_transactions: bool = False, strict: bool = False, reference_paths: bool = False,
                 warm_paths: bool = True):
        if not isinstance(model, VelaModel):
            model = load(model)
        self.model = model
        self.config = resolve_config(model, config)
        self.config_warning = config_warning(model, self.config) if config is not None else None
        self.driver, self.policy, self.strict = driver, policy, strict
        self.log_transactions, self.reference_paths, self.warm_paths = log_transactions, reference_paths, warm_paths
        self.memory_map = plan_memory(model, driver)
        self._memory = self._loaded = self._faults = None
        self._grown = False             # _loaded holds the pages the first run created (zeros)
        self._programmed = None         # Device.save_state() after program() (warm paths)
        self._outputs = None            # _output_specs()
        self._in_specs = None           # _checked(): (dtype, shape) per input; None with unused inputs
        self._in_views = None           # _write_direct(): (page index, page, typed view) per input, or False
        # the driver's closing accesses (STATUS read, CMD.clear_irq) on the warm paths:
        # through Device.apb_memo, recorded in _closing
        self._closing: dict = {}
        # frozen runs (_freeze): None not tried yet, False not possible, else a _Frozen
        self._frozen = None
        # after a frozen run: (memory.version, [(page view, loaded view)...]) restoring only
        # the bytes the next frozen run reads before writing (_memory_for_run); None: whole pages
        self._span_restore = None
        self._span_pairs = None         # the frozen run's (page views, loaded views), made once
        self._spans_restored = False    # the last _memory_for_run restored only those spans
        self._runs = 0                  # runs started (a lazy device knows whether it is the latest)
        self._read_status = lambda dev: DeviceHost(dev, driver.pprot).read("STATUS")
        self._clear_irq = lambda dev: cmd_write(DeviceHost(dev, driver.pprot), clear_irq=1)

    def _read_outputs(self, memory: Memory) -> list:
        """The model's outputs, read from *memory* (fresh arrays: the caller's)."""
        outputs = []
        for addr, nbytes, le, dt, shape in self._output_specs():
            o = memory.read_array(addr, nbytes).view(le)
            outputs.append((o if le == dt else o.astype(dt)).reshape(shape))
        return outputs

    def _output_specs(self) -> list:
        """(address, bytes, little-endian dtype, dtype, shape) of each model output."""
        if self._outputs is None:
            mmap = self.memory_map
            self._outputs = [(mmap.address(t) & ADDR_MASK, t.nbytes,
                              np.dtype(t.dtype).newbyteorder("<"), np.dtype(t.dtype), t.shape)
                             for t in self.model.outputs]
        return self._outputs

    def _checked(self, inputs) -> list:
        """check_inputs(model, inputs); without its checks when each input already is a
        C-contiguous array of the model's dtype and element count (the array, reshaped to the
        model's shape where it has another: what check_inputs would return)."""
        specs = self._in_specs
        if specs is None:
            specs = self._in_specs = (None if self.model.unused_inputs else
                                      tuple((np.dtype(t.dtype), tuple(t.shape), _count(t.shape))
                                            for t in self.model.inputs))
        if specs is not None and type(inputs) in (list, tuple) and len(inputs) == len(specs):
            out = []
            for x, (dt, shape, n) in zip(inputs, specs):
                if type(x) is not np.ndarray or x.dtype != dt or not x.flags.c_contiguous:
                    break
                if x.shape != shape:
                    if x.size != n:
                        break
                    x = x.reshape(shape)                    # (check_inputs' reshape: a view)
                out.append(x)
            else:
                return out
        return check_inputs(self.model, inputs)

    def _write_direct(self, memory: Memory, arrays: list) -> bool:
        """The inputs copied straight into the memory's pages (Memory.write's back door
        without the byte copies) when each lies in one page the memory still holds as the
        array the session cached (pages are kept between runs: restore_pages); False when
        not (the caller writes them with write_inputs)."""
        direct = self._in_views
        if direct is None:
            if not self._grown or memory is not self._memory:
                return False                                # (the pages are not settled yet)
            direct = []
            mmap = self.memory_map
            for t in self.model.inputs:
                addr = mmap.address(t)
                off, page = addr & (PAGE_SIZE - 1), memory.live_page(addr // PAGE_SIZE)
                if page is None or off + t.nbytes > PAGE_SIZE:
                    direct = False
                    break
                view = page[off:off + t.nbytes].view(np.dtype(t.dtype).newbyteorder("<")).reshape(t.shape)
                direct.append((addr // PAGE_SIZE, page, view))
            self._in_views = direct
        if not direct or memory is not self._memory:
            return False
        page_of = memory.live_page
        for k, page, _ in direct:
            if page_of(k) is not page:                      # (a caller replaced the memory's pages)
                self._in_views = None
                return False
        for (_, _, view), x in zip(direct, arrays):
            np.copyto(view, x.reshape(view.shape))
        return True

    def run(self, inputs, max_steps: "int | None" = None, *, max_work: "int | None" = None) -> RunResult:
        """One inference (run_model's arguments and result; RunError as run_model)."""
        return self._run(inputs, max_steps, max_work, keep=True)

    def _memory_for_run(self, keep: bool) -> Memory:
        mmap = self.memory_map
        memory = self._memory
        sr, self._span_restore = self._span_restore, None
        self._spans_restored = False
        if memory is not None and self._loaded is not None:
            # as a fresh memory: the loaded contents, the map's faults, no log, no listeners
            if sr is not None and memory.version == sr[0] and not memory.pages_out:
                # nothing but the last run, a frozen run, changed the memory since it ended
                # (no write, no page handed out): it differs from the loaded contents only
                # in the bytes a frozen run writes, and of those a frozen run reads before
                # writing only `restore` (FrozenRun; the rest it rewrites first)
                for dst, src in sr[1]:
                    np.copyto(dst, src)
                self._spans_restored = True
            else:
                memory.restore_pages(self._loaded)
            memory.log = []
            memory.listeners.clear()
            if memory.faults.token != self._faults:          # (equal tokens: equal fault lists)
                memory.clear_faults()
                for lo, hi in mmap.faults:
                    memory.inject_fault(lo, hi, Resp.DECERR)
            return memory
        memory = Memory(log=self.log_transactions, batching=not self.reference_paths)
        for lo, hi in mmap.faults:
            memory.inject_fault(lo, hi, Resp.DECERR)
        load_memory(memory, self.model, mmap, ())
        if keep:
            self._memory, self._loaded, self._faults = memory, memory.copy_pages(), memory.faults.token
        return memory

    def _run(self, inputs, max_steps, max_work, keep: bool) -> RunResult:
        model, npu, mmap, driver = self.model, self.config, self.memory_map, self.driver
        cfg_warning = self.config_warning
        arrays = self._checked(inputs)
        self._runs += 1
        fz = self._frozen
        if fz and keep and max_steps is None and max_work is None:
            r = self._run_frozen(fz, arrays)
            if r is not None:
                return r
        memory = self._memory_for_run(keep)
        direct = self._write_direct(memory, arrays)
        if not direct:
            write_inputs(memory, model, mmap, arrays)

        warm = self.warm_paths
        watch = _Watch(model)
        saved = self._programmed is not None
        if saved:
            # the device as the driver's programming left it on the first run (the same
            # state, event log and cycle count; it accessed no memory and raised no event
            # the run's checks count)
            dev = Device.from_state(self._programmed, memory)
            dev.hooks.append(watch)
            host = DeviceHost(dev, driver.pprot)
        else:
            dev = Device(npu, memory, policy=self.policy, reference_paths=self.reference_paths, segments=warm,
                         plans=warm, traces=warm)
            dev.hooks.append(watch)
            host = DeviceHost(dev, driver.pprot)
            program(host, mmap, driver)
            if (keep and warm and not self.reference_paths and not dev.policy.auto_run and dev.running
                    and not watch.seen and not watch.kinds):
                dev.prime_caches()
                self._programmed = dev.save_state()
        stop = dev.last_stop if not dev.running and dev.last_stop else dev.run(max_steps, max_work)  # auto_run
        memo = self._closing if keep and warm and not self.reference_paths else None
        status = host.read("STATUS") if memo is None else dev.apb_memo(memo, "status", self._read_status)
        err = _failure(model, dev, stop, status, watch)
        if err is not None:
            if cfg_warning is not None:
                err.warnings = (cfg_warning,) + err.warnings
            raise err
        warnings = ([cfg_warning] if cfg_warning is not None else []) + watch.warnings()
        if self.strict and warnings:
            first = warnings[0]
            n = sum(w.count for w in warnings)
            raise RunError(f"{n} warning{'s' * (n != 1)} under strict checking, the first: {first}", "strict",
                           offset=first.offset, op=first.op, stop=stop, status=status, device=dev,
                           detail=first.what, warnings=tuple(warnings))

        outputs = self._read_outputs(memory)
        if memo is None:
            cmd_write(host, clear_irq=1)
        else:
            dev.apb_memo(memo, "clear_irq", self._clear_irq)
        if keep and not self._grown and self._loaded is not None and memory is self._memory:
            # the pages this run created start the next runs as zero pages (an absent page
            # reads as zeros): the same page arrays on every run, so the operation plans'
            # views of them stay valid
            self._grown = True
            for k in memory.page_indices():
                if k not in self._loaded:
                    self._loaded[k] = np.zeros(PAGE_SIZE, np.uint8)
        if (fz is None and keep and saved and direct and memo is not None and not self.log_transactions
                and max_steps is None and max_work is None):
            self._frozen = _Frozen.make(self, dev, stop, status, watch, warnings)   # (None: not yet)
        return RunResult(outputs, stop, status, dev, model, npu, mmap, watch.unpredictable, warnings)

    def _run_frozen(self, fz: "_Frozen", arrays: list) -> "RunResult | None":
        """A run by the session's frozen run (see _Frozen), or None when it declines (the
        caller then runs the ordinary path, which restores the memory again).  The result's
        device is made when first asked for (_LazyDevice)."""
        memory = self._memory_for_run(True)
        if memory.faults.token != fz.ftok or not self._write_direct(memory, arrays):
            return None
        prog = fz.program
        st = None
        if prog.fifo:
            st = OpState.__new__(OpState)
            st.fifo = [list(c) for c in fz.fifo0[0]]
            st.fifo_count = list(fz.fifo0[1])
        cond = prog.run(memory, st, self._spans_restored)
        if cond is None:
            return None
        outputs = self._read_outputs(memory)
        pairs = self._span_pairs
        if pairs is None or any(memory.live_page(k) is not a for k, a in pairs[0]):
            pairs = self._span_pairs = _span_pairs(memory, self._loaded, prog.restore)
        if pairs[1] is not None:
            self._span_restore = (memory.version, pairs[1])
        watch = fz.watch()
        r = RunResult(outputs, fz.stop, fz.status, None, self.model, self.config, self.memory_map,
                      watch.unpredictable, list(fz.warnings))
        d = r.__dict__
        del d["device"]
        d["_lazy_device"] = _LazyDevice(self, self._runs, fz, memory, watch, st, cond)
        return r


def _span_pairs(memory: Memory, loaded: dict, spans) -> tuple:
    """((page index, page array), ...) and the (page view, loaded contents' view) pairs over
    *spans* ((lo, hi), page by page) that restore them, or None for the pairs when a page
    is missing from either."""
    pages, pairs = {}, []
    for lo, hi in spans:
        while lo < hi:
            k, off = lo // PAGE_SIZE, lo % PAGE_SIZE
            n = min(PAGE_SIZE - off, hi - lo)
            p, q = memory.live_page(k), loaded.get(k)
            if p is None or q is None:
                return tuple(pages.items()), None
            pages[k] = p
            pairs.append((p[off:off + n], q[off:off + n]))
            lo += n
    return tuple(pages.items()), tuple(pairs)


class _LazyDevice:
    """A frozen run's device, made on first use of its RunResult's `device`: the recorded
    run's final state (Device.from_state) on the session's memory, with the run's watch
    as hook, its chaining FIFOs and result flag; the device the eager path would have made
    then.  Made after a later run of the session, it is not the memory's listener (that
    run's restore cleared the listeners)."""
    __slots__ = ("session", "run_no", "fz", "memory", "watch", "st", "cond")

    def __init__(self, session, run_no, fz, memory, watch, st, cond):
        self.session, self.run_no, self.fz, self.memory = session, run_no, fz, memory
        self.watch, self.st, self.cond = watch, st, cond

    def make(self) -> Device:
        dev = Device.from_state(self.fz.final, self.memory)
        dev.hooks.append(self.watch)
        if self.st is not None:
            dev.op_state.fifo, dev.op_state.fifo_count = self.st.fifo, self.st.fifo_count
        if self.cond >= 0:
            dev.cond_status = self.cond
        if self.session._runs != self.run_no:
            self.memory.listeners.remove(dev.txn_sink)
        return dev


class _Frozen:
    """A Session's frozen run: once an ordinary run (from the saved programmed state, the
    inputs written straight into the settled pages, no transaction log, default budgets)
    was one run trace replayed whole and completed, a later run whose inputs differ only
    in their bytes is that run's data computations alone (ops.plan.freeze_run: the taint
    analysis that shows nothing the run's control depends on comes from the inputs) on a
    device in the state the recorded run left after its closing accesses (Device.from_state
    of `final`), with the recorded StopReason, STATUS, watch and warnings: the result
    equals the ordinary path's (tests/ethos_u85/test_frozen_runs.py compares them).  The
    memory is restored and the inputs written as on the ordinary path; the run declines
    (the ordinary path runs) when the faults changed, the inputs cannot be written
    straight, or an operation's data check declines."""
    __slots__ = ("program", "final", "fifo0", "stop", "status", "ftok", "seen", "kinds", "unpredictable",
                 "warnings", "model")

    @classmethod
    def make(cls, session: Session, dev: Device, stop: StopReason, status: int, watch: _Watch,
             warnings: list) -> "_Frozen | bool":
        """The frozen run of *session* from its run just made on *dev*; None when that run
        was not one trace replayed whole (a later one may be), False when not possible."""
        prog = dev.replayed_program()
        if prog is None:
            return None
        if (stop.kind is not StopKind.STOP or stop.steps != prog[2] or dev.running
                or len(dev.hooks) != 1 or dev.hooks[0] is not watch):
            return False
        mmap = session.memory_map
        spans = [(a, a + t.nbytes) for t in session.model.inputs for a in (mmap.address(t) & ADDR_MASK,)]
        program = freeze_run(prog[0], spans, prog[1])
        final = dev.save_state() if program is not None else None
        if final is None:
            return False
        fz = cls()
        st0 = session._programmed["op_state"]
        fz.program, fz.final = program, final
        fz.fifo0 = (tuple(tuple(c) for c in st0.fifo), tuple(st0.fifo_count))
        fz.stop, fz.status, fz.ftok = stop, status, dev.memory.faults.token
        fz.seen, fz.unpredictable = dict(watch.seen), list(watch.unpredictable)
        fz.kinds = {k: list(v) for k, v in watch.kinds.items()}
        fz.warnings, fz.model = tuple(warnings), session.model
        return fz

    def watch(self) -> _Watch:
        """A _Watch that heard what the recorded run's did."""
        w = _Watch(self.model)
        if self.seen:
            w.seen = dict(self.seen)
            w.unpredictable = list(self.unpredictable)
            w.kinds = {k: list(v) for k, v in self.kinds.items()}
        return w
