"""The model's command-processor register window (choice C-CMD; the guide documents no registers).

A trace replays a BMKernel program at the API level through this window: the host puts the
gmem image and the serialized command buffer (`bmk1880_acquire_cmdbuf`) into gmem with
`load_mem`, writes the buffer's address and size, rings DOORBELL, waits for the end-of-buffer
interrupt and checks gmem. The window is this model's own, documented in
docs/devices/bm1880.md; `REGISTERS` and `FAULTS` are the single source of both.
"""
from __future__ import annotations

from dataclasses import dataclass

from tlm.core.regtable import BitSpan

from .chip import CHIP
from .descriptors import FORMAT_VERSION


@dataclass(frozen=True)
class Field(BitSpan):
    name: str
    lsb: int
    width: int
    doc: str

    def put(self, value: int) -> int:
        return (value << self.lsb) & self.mask


@dataclass(frozen=True)
class Register:
    name: str
    offset: int
    access: str                       # "ro", "rw", "wo" (reads 0), "w1c"
    reset: int
    fields: tuple[Field, ...]
    doc: str

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} has no field {name!r}")

    @property
    def writable_mask(self) -> int:
        m = 0
        for f in self.fields:
            m |= f.mask
        return m


def _r(name, offset, access, reset, fields, doc):
    return Register(name, offset, access, reset, tuple(Field(*f) for f in fields), doc)


REGISTERS: tuple[Register, ...] = (
    _r("ID", 0x00, "ro", (FORMAT_VERSION << 16) | CHIP.version,
       (("chip_version", 0, 16, "bmk1880_chip_info().version"),
        ("format_version", 16, 4, "command-buffer format version")),
       "identification"),
    _r("CMDBUF_ADDR_LO", 0x04, "rw", 0, (("addr", 0, 32, "gmem address of the command buffer, bits 31:0"),),
       "command-buffer address, low word"),
    _r("CMDBUF_ADDR_HI", 0x08, "rw", 0, (("addr", 0, 8, "bits 39:32"),), "command-buffer address, high bits"),
    _r("CMDBUF_SIZE", 0x0C, "rw", 0, (("size", 0, 32, "bytes, as bmk1880_acquire_cmdbuf returns"),),
       "command-buffer size"),
    _r("DOORBELL", 0x10, "wo", 0, (("start", 0, 1, "1: fetch, check and run the buffer"),),
       "start; ignored (and reported) while busy"),
    _r("STATUS", 0x14, "ro", 0,
       (("busy", 0, 1, "a buffer is running"), ("done", 1, 1, "the last buffer ran to its end"),
        ("fault", 2, 1, "the last buffer stopped with a fault"), ("fault_code", 8, 8, "FAULTS")),
       "state of the last buffer"),
    _r("IRQ_STATUS", 0x18, "w1c", 0,
       (("done", 0, 1, "end-of-buffer event"), ("fault", 1, 1, "fault event")),
       "interrupt causes; write 1 to clear"),
    _r("IRQ_ENABLE", 0x1C, "rw", 0x3, (("done", 0, 1, ""), ("fault", 1, 1, "")),
       "the interrupt output is (IRQ_STATUS & IRQ_ENABLE) != 0"),
    _r("CMD_DONE", 0x20, "ro", 0, (("count", 0, 32, "computation commands executed"),),
       "progress of the last buffer"),
    _r("FAULT_CMD", 0x24, "ro", 0xFFFFFFFF, (("index", 0, 32, "computation command index, 0xFFFFFFFF: none"),),
       "the command that faulted"),
    _r("FAULT_OFFSET", 0x28, "ro", 0xFFFFFFFF, (("offset", 0, 32, "byte offset in the buffer, 0xFFFFFFFF: none"),),
       "where the faulting command starts"),
)
BY_NAME = {r.name: r for r in REGISTERS}
BY_OFFSET = {r.offset: r for r in REGISTERS}
assert len(BY_OFFSET) == len(REGISTERS)
WINDOW = 0x40                         # bytes of register space the window decodes

# STATUS.fault_code values: (code, name, meaning)
FAULTS: tuple[tuple[int, str, str], ...] = (
    (0, "NONE", "no fault"),
    (1, "DECODE", "malformed command buffer: version, kind, engine, length, CRC or a field encoding"),
    (2, "ARG", "a command breaks an argument rule of the guide (the rule the API checks)"),
    (3, "DEP", "a dependency record names an unknown command or closes a cycle"),
    (4, "HAZARD", "two unordered commands touch the same byte and one writes it (choice C-HAZARD)"),
    (5, "BUS", "a gmem access (command fetch or GDMA) got a bus error"),
    (6, "DATA", "a data-dependent fault while executing (tpu_arith_shift bits outside [-16, 16])"),
    (7, "LIMIT", "the buffer exceeds one of the model's budgets: buffer size, hazard-check size (choice C-LIMIT)"),
)
FAULT_CODE = {name: code for code, name, _ in FAULTS}
FAULT_NAME = {code: name for code, name, _ in FAULTS}
