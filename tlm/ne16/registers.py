"""The NE16 register map as data (seed 001, GAP9 NE16 register map).

`REGISTERS` is the one table: offsets, access, reset values and fields of every register of
the seed, plus FINISHED and SWSYNC, which the seed leaves out (EXT: pulp-nnx `util/hwpe.c`
names word 2 FINISHED and word 6 SWSYNC; the open RTL's hwpe-ctrl register file implements
FINISHED as a counter of finished jobs). Everything else derives from it: `by_name`,
`by_offset`, `JOB_REGS` (the 24 job registers of one context, in offset order), field
`get`/`put`, `decode`, and the docs' register table (`markdown_table`).

Conventions the seed does not state (documented in docs/devices/ne16.md):
* The job registers (0x20-0x7C) store all 32 bits as written (the hwpe-ctrl register file
  keeps whole words); bits outside the seed's fields read back and are ignored by the engine.
* SUBTILE_NB0/NB1 fields are subtile *counts*; the seed's descriptions say "remainder" (A2).
* CONFIG0 bit 11 is named by EXT only (RTL: use_rounding = ~CONFIG0[11]; pulp-nnx
  NE16_FLAG_ROUNDING); it is stored and read back, the engine never rounds (digest §9).
"""
from __future__ import annotations

from dataclasses import dataclass

from tlm.core.regtable import BitSpan

REG_BITS = 32
WINDOW = 0x400            # periph offset decode: the RTL's hwpe-ctrl decodes address bits 9:2
JOB_BASE = 0x20           # job registers start at word 8 (EXT pulp-nnx HWPE_TASK_REG_OFFSET)


@dataclass(frozen=True)
class Field(BitSpan):
    name: str
    lsb: int
    width: int
    description: str
    source: str = "seed"          # "seed" or "EXT" (open-source software/RTL)

    def put(self, word: int, value: int) -> int:
        if not 0 <= value < (1 << self.width):
            raise ValueError(f"{self.name}: {value} does not fit in {self.width} bits")
        return (word & ~self.mask) | (value << self.lsb)

    @property
    def bits(self) -> str:
        hi = self.lsb + self.width - 1
        return f"{hi}:{self.lsb}" if self.width > 1 else f"{self.lsb}"


@dataclass(frozen=True)
class Register:
    name: str
    offset: int
    access: str                   # "R", "W" or "R/W" (seed notation)
    description: str
    fields: tuple = ()
    reset: int = 0
    source: str = "seed"
    job: bool = False             # a job (context) register, 0x20-0x7C

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} has no field {name!r} "
                       f"(fields: {', '.join(f.name for f in self.fields)})")

    @property
    def index(self) -> int:
        """Job register index (0..23) in a context."""
        if not self.job:
            raise ValueError(f"{self.name} is not a job register")
        return (self.offset - JOB_BASE) // 4

    def decode(self, word: int) -> dict:
        return {f.name: f.get(word) for f in self.fields}

    def encode(self, **values) -> int:
        word = 0
        for name, v in values.items():
            word = self.field(name).put(word, v)
        return word


def _f(*specs) -> tuple:
    return tuple(Field(*s) for s in specs)


_WHOLE = lambda name, desc: _f((name, 0, 32, desc))        # noqa: E731
_STRIDE = _WHOLE("STRIDE", "Stride value (bytes; A3, EXT)")

REGISTERS: tuple = (
    Register("TRIGGER", 0x00, "W", "Commit/trigger jobs",
             _WHOLE("TRIG_CMD", "0: commit the job, unlock the controller and start execution; "
                                "non-0: commit and unlock without starting (started when the "
                                "next job is committed and triggered)")),
    Register("ACQUIRE", 0x04, "R", "Offload jobs",
             _WHOLE("JOB_ID", "Read to start a job offload and lock the controller; returns "
                              "the job ID (EXT hwpe-ctrl: 0xFFFFFFFF all contexts busy, "
                              "0xFFFFFFFE already acquired)")),
    Register("FINISHED", 0x08, "R", "Finished jobs (EXT)",
             _f(("COUNT", 0, 2, "Jobs finished since the last access, saturating at 2; "
                                "cleared by any access (EXT hwpe-ctrl)", "EXT")), source="EXT"),
    Register("STATUS", 0x0C, "R", "Status of jobs",
             _f(("STATUS0", 0, 1, "1 if job 0 (context 0) is enqueued or running"),
                ("STATUS1", 8, 1, "1 if job 1 (context 1) is enqueued or running"))),
    Register("RUNNING_JOB", 0x10, "R", "Running job ID",
             _WHOLE("JOB_ID", "ID of the running job, if any; otherwise the ID of the last job "
                              "that has been run")),
    Register("SOFT_CLEAR", 0x14, "W", "Soft reset of NE16 state",
             _WHOLE("CLR_CMD", "0: clear the full status including the register file; non-0: "
                               "clear the status except for the register file")),
    Register("SWSYNC", 0x18, "R/W", "Software synchronisation (EXT)",
             _WHOLE("VALUE", "EXT pulp-nnx HWPE_SWSYNC; the open RTL leaves this extension "
                             "port unconnected: writes have no effect, reads return 0"),
             source="EXT"),
    Register("WEIGHTS_PTR", 0x20, "R/W", "Pointer to weights tensor",
             _WHOLE("POINTER", "Weights: 3x3 modes d3=Ko, d2=KiMaj, d1=Qw, d0=Fx*Fy*KiMin; "
                               "1x1 d2=Ko, d1=KiMaj, d0=Qw*KiMin; linear d2=Ko, d1=Qw, "
                               "d0=KiMaj*KiMin"), job=True),
    Register("INFEAT_PTR", 0x24, "R/W", "Pointer to InFeat tensor",
             _WHOLE("POINTER", "InFeat (d2=Hi, d1=Wi, d0=Ki)"), job=True),
    Register("OUTFEAT_PTR", 0x28, "R/W", "Pointer to OutFeat tensor",
             _WHOLE("POINTER", "OutFeat (d2=Ho, d1=Wo, d0=Ko)"), job=True),
    Register("SCALE_PTR", 0x2C, "R/W", "Pointer to ScaleScaleN parameters",
             _WHOLE("POINTER", "Scale/ScaleN parameters (d0=Ko)"), job=True),
    Register("SCALE_SHIFT_PTR", 0x30, "R/W", "Pointer to ScaleShift parameters",
             _WHOLE("POINTER", "ScaleShift parameters (d0=Ko)"), job=True),
    Register("SCALE_BIAS_PTR", 0x34, "R/W", "Pointer to ScaleBias parameters",
             _WHOLE("POINTER", "ScaleBias parameters (d0=Ko)"), job=True),
    Register("INFEAT_D0_STRIDE", 0x38, "R/W", "InFeat tensor d0 stride", _STRIDE, job=True),
    Register("INFEAT_D1_STRIDE", 0x3C, "R/W", "InFeat tensor d1 stride", _STRIDE, job=True),
    Register("INFEAT_D2_STRIDE", 0x40, "R/W", "InFeat tensor d2 stride", _STRIDE, job=True),
    Register("OUTFEAT_D0_STRIDE", 0x44, "R/W", "OutFeat tensor d0 stride", _STRIDE, job=True),
    Register("OUTFEAT_D1_STRIDE", 0x48, "R/W", "OutFeat tensor d1 stride", _STRIDE, job=True),
    Register("OUTFEAT_D2_STRIDE", 0x4C, "R/W", "OutFeat tensor d2 stride", _STRIDE, job=True),
    Register("WEIGHTS_D0_STRIDE", 0x50, "R/W", "Weights tensor d0 stride", _STRIDE, job=True),
    Register("WEIGHTS_D1_STRIDE", 0x54, "R/W", "Weights tensor d1 stride", _STRIDE, job=True),
    Register("WEIGHTS_D2_STRIDE", 0x58, "R/W", "Weights tensor d2 stride", _STRIDE, job=True),
    Register("SUBTILE_REM0", 0x5C, "R/W", "Subtile remainders 0",
             _f(("KI", 0, 16, "Ki remainder"), ("KO", 16, 16, "Ko remainder")), job=True),
    Register("SUBTILE_REM1", 0x60, "R/W", "Subtile remainders 1",
             _f(("WO", 0, 16, "Wo remainder"), ("HO", 16, 16, "Ho remainder")), job=True),
    Register("SUBTILE_REM2", 0x64, "R/W", "Subtile remainders 2",
             _f(("WI", 0, 16, "Wi remainder"), ("HI", 16, 16, "Hi remainder")), job=True),
    Register("SUBTILE_NB0", 0x68, "R/W", "Subtile numbers 0",
             _f(("KI", 0, 16, "Ki subtile count (seed text: 'remainder', A2)"),
                ("KO", 16, 16, "Ko subtile count (seed text: 'remainder', A2)")), job=True),
    Register("SUBTILE_NB1", 0x6C, "R/W", "Subtile numbers 1",
             _f(("WO", 0, 16, "Wo subtile count (seed text: 'remainder', A2)"),
                ("HO", 16, 16, "Ho subtile count (seed text: 'remainder', A2)")), job=True),
    Register("PADDING", 0x70, "R/W", "Padding",
             _f(("VALUE", 0, 16, "Padding value"),
                ("LEFT", 16, 4, "Spatially padded pixels in the left subtile border"),
                ("BOTTOM", 20, 4, "Padded pixels in the bottom subtile border (counted from 5 "
                                  "pixels upward)"),
                ("RIGHT", 24, 4, "Padded pixels in the right subtile border (counted from 5 "
                                 "pixels leftward)"),
                ("TOP", 28, 4, "Padded pixels in the top subtile border")), job=True),
    Register("WEIGHT_OFFSET", 0x74, "R/W", "Weight offset",
             _f(("VALUE", 0, 8, "Value of weights offset (EXT: bit 31 is its sign)")), job=True),
    Register("FILTER_MASK", 0x78, "R/W", "Filter masking",
             _f(("LEFT", 0, 8, "Left mask"), ("BOTTOM", 8, 8, "Bottom mask"),
                ("RIGHT", 16, 8, "Right mask"), ("TOP", 24, 8, "Top mask")), job=True),
    Register("CONFIG0", 0x7C, "R/W", "Main configuration register",
             _f(("QWM1", 0, 3, "Weight bits minus 1"),
                ("MODE16", 3, 1, "b0: 8-bit mode; b1: 16-bit mode"),
                ("STREAMOUT", 4, 1, "b0: streamout only; b1: quantization+streamout"),
                ("FILTER_MODE", 5, 2, "b00=3x3; b01=3x3 depthwise; b10=1x1; b11: reserved"),
                ("LINEAR", 7, 1, "b0: normal operation; b1: linear mode"),
                ("STRIDED_2X2", 8, 1, "b0: normal operation; b1: strided mode"),
                ("ROUNDING", 11, 1, "EXT: RTL use_rounding = ~bit; stored, never applied (§9)",
                 "EXT"),
                ("NORM_BITS", 12, 2, "b00: 8 bits; b01: 16 bits; b10: 32b; b11: reserved"),
                ("STREAMIN", 14, 1, "b0: normal operation; b1: enable streamin"),
                ("WEIGHT_OFFS", 15, 1, "b0: symmetric weights; b1: use layer-wise weight offset "
                                       "(EXT: the RTL and the simulator ignore it; the model "
                                       "applies WEIGHT_OFFSET either way)"),
                ("RIGHT_SHIFT", 16, 5, "Quantization right shift"),
                ("QUANT_BITS", 21, 2, "b00: 8 bits; b01: 16 bits; b10: 32b; b11: reserved"),
                ("QUANT_RECT", 23, 1, "b0: rectify, consider as unsigned; b1: do not rectify, "
                                      "keep sign"),
                ("NORM_SHIFT", 24, 1, "b0: use quantization right shift; b1: load with norm"),
                ("NORM_BIAS", 25, 1, "b0: do not load bias; b1: load bias")), job=True),
)

_BY_NAME = {r.name: r for r in REGISTERS}
_BY_OFFSET = {r.offset: r for r in REGISTERS}
JOB_REGS: tuple = tuple(r for r in REGISTERS if r.job)
N_JOB_REGS = len(JOB_REGS)
OFFSETS = {r.name: r.offset for r in REGISTERS}

assert [r.index for r in JOB_REGS] == list(range(N_JOB_REGS)), "job registers must be contiguous"
assert all(r.offset % 4 == 0 and r.offset < JOB_BASE + 4 * N_JOB_REGS for r in REGISTERS)


def by_name(name: str) -> Register:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no NE16 register {name!r}") from None


def by_offset(offset: int) -> "Register | None":
    return _BY_OFFSET.get(offset)


def field(reg: str, name: str) -> Field:
    return by_name(reg).field(name)


def get(regs, reg: str, name: str) -> int:
    """Field `reg.name` of a job-register sequence `regs` (indexed by job register index)."""
    r = by_name(reg)
    return r.field(name).get(regs[r.index])


def markdown_table() -> str:
    """The register map as a Markdown table (docs/devices/ne16.md embeds it)."""
    rows = ["| Offset | Name | Access | Source | Fields |", "|---|---|---|---|---|"]
    for r in REGISTERS:
        fs = "; ".join(f"{f.bits} {f.name}" + (" (EXT)" if f.source == "EXT" else "")
                       for f in r.fields)
        rows.append(f"| 0x{r.offset:02X} | {r.name} | {r.access} | {r.source} | {fs} |")
    return "\n".join(rows)
