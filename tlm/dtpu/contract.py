"""The DTPU contract: every table of the thesis' accelerator as data, decided once.

Seed 002 (F. Angione, "A FPGA-based tensor accelerator for Machine Learning", PoliTo 2020)
gives the top-level ports and parameters of `dtpu_core` (App. B), the control FSM and the
datapath (§4.4), the register offsets and commands of Xilinx's AXI4-Stream Accelerator
Adapter as its library uses them, and the library's CSR word (App. A, DTPU_delegate.py).
It leaves open the CSR decoding, the output word format, the accumulator width and
overflow, the adapter's command semantics and STATUS bits. This module decides all of
them; the TLM (`tlm.dtpu`), the generated Verilog includes (`tools/gen_dtpu_rtl.py` ->
`rtl_stub/dtpu/gen/*.vh`), the bench (`tb/dtpu`), the host library and the contract
section of `docs/devices/dtpu.md` derive from it. Every entry carries `thesis`: what the
seed says (or "-" where it is silent), so a reader sees which reading was taken.

Nothing here is device logic; offsets, bit positions, widths and codes are data.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from tlm.core.regtable import BitSpan

# ------------------------------------------------------------------------------------------
# Configurations (synthesis parameters of dtpu_core and the adapter)
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Precision:
    name: str
    code: int           # CSR ARITHMETIC_PRECISION value: the thesis' thermometer code
    bits: int           # operand lane width
    lane: int           # output lane (= accumulator) width: 32 for int8, 64 otherwise
    thesis: str


PRECISIONS: tuple[Precision, ...] = (
    Precision("int8", 0x1, 8, 32, "INT8=0x1; the deployed overlay is int8 only"),
    Precision("int16", 0x3, 16, 64, "INT16=0x3"),
    Precision("int32", 0x7, 32, 64, "INT32=0x7"),
    Precision("int64", 0xF, 64, 64, "INT64=0xF"),
)
PRECISION_BY_CODE = {p.code: p for p in PRECISIONS}
PRECISION_BY_NAME = {p.name: p for p in PRECISIONS}
WORD_BITS = 64          # every memory, FIFO and stream word (thesis: "fixed to its maximum, 64 bits")


@dataclass(frozen=True)
class Config:
    """One synthesis point. `precisions`: the PE types built (thesis §4.4.3: 'individually
    or in combination'); a CSR asking for another one is a core error."""
    name: str
    rows: int = 8                       # ROWS: weight rows of the MXU
    columns: int = 8                    # COLUMNS: input lanes of the MXU
    precisions: tuple[str, ...] = ("int8",)
    size_csr: int = 1024                # SIZE_CSR bytes (DATA_WIDTH_CSR 8)
    size_wmemory: int = 8192            # SIZE_WMEMORY words (interface MEM_SIZE 8192; the RTL default 8196 is a typo)
    infifo_depth: int = 2048            # words per input-FIFO buffer (library INFIFO_SIZE)
    outfifo_depth: int = 32             # output FIFO words (cut-through, see OUTPUT below)
    buffer_depth: int = 2               # buffers per input argument (library BUFFER_DEPTH)
    cmdq_depth: int = 4                 # command queue entries

    def precision(self, name: str) -> Precision:
        return PRECISION_BY_NAME[name]

    @property
    def built(self) -> tuple[Precision, ...]:
        return tuple(p for p in PRECISIONS if p.name in self.precisions)

    @property
    def precision_mask(self) -> int:
        """Verilog PRECISIONS parameter: bit i = PRECISIONS[i] built."""
        return sum(1 << i for i, p in enumerate(PRECISIONS) if p.name in self.precisions)

    @property
    def acc_bits(self) -> int:
        """Register width of the partial sums: the widest output lane built."""
        return max(p.lane for p in self.built)

    @property
    def max_bits(self) -> int:
        return max(p.bits for p in self.built)

    def words_per_vector(self, prec: Precision) -> int:
        """P: 64-bit words of one input vector or one weight row."""
        return -(-self.columns * prec.bits // WORD_BITS)

    def words_per_step(self, prec: Precision, groups: int) -> int:
        """Q: output words of one step with `groups` output lanes."""
        return -(-groups * prec.lane // WORD_BITS)

    def verilog_params(self) -> dict[str, int]:
        return {"ROWS": self.rows, "COLUMNS": self.columns, "PRECISIONS": self.precision_mask,
                "SIZE_CSR": self.size_csr, "SIZE_WMEMORY": self.size_wmemory,
                "INFIFO_DEPTH": self.infifo_depth, "OUTFIFO_DEPTH": self.outfifo_depth,
                "BUFFER_DEPTH": self.buffer_depth, "CMDQ_DEPTH": self.cmdq_depth}


CONFIGS: dict[str, Config] = {c.name: c for c in (
    Config("dtpu-8x8-int8"),                                        # the thesis' overlay
    Config("dtpu-8x8-int8-16-32", precisions=("int8", "int16", "int32")),
    Config("dtpu-4x4-all", rows=4, columns=4, precisions=("int8", "int16", "int32", "int64")),
    Config("dtpu-3x5-int8-16", rows=3, columns=5, precisions=("int8", "int16")),
    # odd everywhere: the ring buffers (argument buffers, command queue, output FIFO) and the
    # input FIFO's buffer addresses sized off powers of two, where their wrap-around logic
    # would go untested (tools/mutate.py --device dtpu found such survivors)
    Config("dtpu-3x5-odd", rows=3, columns=5, precisions=("int8", "int16"), infifo_depth=200,
           outfifo_depth=24, buffer_depth=3, cmdq_depth=3),
)}
DEFAULT_CONFIG = "dtpu-8x8-int8"

# ------------------------------------------------------------------------------------------
# CSR memory (input argument 0): the bytes the core reads at the start of every run
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CsrField:
    name: str
    byte: int
    lsb: int            # bit inside the byte (multi-byte fields: lsb 0, little-endian)
    width: int
    meaning: str
    thesis: str

    @property
    def bit(self) -> int:
        """Position in the 64-bit CSR word (bytes 0..7 little-endian)."""
        return 8 * self.byte + self.lsb

    def get(self, word: int) -> int:
        return (word >> self.bit) & ((1 << self.width) - 1)

    def put(self, value: int) -> int:
        if not 0 <= value < (1 << self.width):
            raise ValueError(f"CSR {self.name} value {value} does not fit {self.width} bits")
        return value << self.bit


CSR_FIELDS: tuple[CsrField, ...] = (
    CsrField("ARITHMETIC_PRECISION", 0, 0, 4,
             "thermometer code: 0x1 int8, 0x3 int16, 0x7 int32, 0xF int64",
             "ARITHMETIC_PRECISION=0 (byte index); library writes csr[0] = ... | precision"),
    CsrField("ACTIVATE_CHAIN", 0, 4, 1,
             "1: sub-word lanes of the precision (packed operands); 0: one 64-bit operand per "
             "word, legal only with int64 (where both are the same)",
             "ACTIVATE_CHAIN=0x1, library writes it at bit 4; §4.4.3 'active chain ... "
             "otherwise it is a 64 bit computation'"),
    CsrField("SIGNED", 0, 5, 1, "1: operands are two's complement; 0: unsigned",
             "constants SIGNED=0x1, NO_SIGNED=0x0 without a byte index; the library never "
             "writes it (bug B9)"),
    CsrField("RESERVED0", 0, 6, 2, "must be 0", "-"),
    CsrField("FP_MODE", 1, 0, 8, "must be 0 (NO_FP): no floating-point PE is built",
             "FP_MODE=1; NO_FP=0x00, ACTIVE_FP=1, ACTIVE_BFP=0x03; library writes NO_FP<<8"),
    CsrField("GROUP_ROWS", 2, 0, 8,
             "G: MXU rows chained into one output group (0 and 1: every row is its own "
             "output, the thesis' reading); G <= ROWS",
             "byte 2 is named BATCH_SIZE 'aka active rows' with no semantics; library writes 0"),
    CsrField("OUT_GROUPS", 3, 0, 8,
             "groups output per step (0: all floor(ROWS/G)); <= floor(ROWS/G)",
             "byte 3 is named TRANSPARENT_DELAY_REGISTER with no semantics; library writes 0"),
    CsrField("WM_START", 4, 0, 32, "weight-memory word of row 0 of the weight block",
             "WMEM_STARTING_ADDRESS '#32 MSB'; library writes wm_start << 32 (the DEBUG=4, "
             "TEST_OPTIONS=5 byte indices collide with it: the written word is followed)"),
)
CSR = {f.name: f for f in CSR_FIELDS}
CSR_BYTES = 8           # bytes 0..7 are read by the core; the rest of the 1 KiB is unused
NO_FP = 0
ACTIVATE_CHAIN = 1


def csr_word(precision: str = "int8", signed: bool = True, chain: int = 1, group_rows: int = 0,
             out_groups: int = 0, wm_start: int = 0, fp_mode: int = NO_FP) -> int:
    """The 64-bit CSR word (bytes 0..7 of the CSR memory, little-endian)."""
    return (CSR["ARITHMETIC_PRECISION"].put(PRECISION_BY_NAME[precision].code)
            | CSR["ACTIVATE_CHAIN"].put(chain) | CSR["SIGNED"].put(int(signed))
            | CSR["FP_MODE"].put(fp_mode) | CSR["GROUP_ROWS"].put(group_rows)
            | CSR["OUT_GROUPS"].put(out_groups) | CSR["WM_START"].put(wm_start))


@dataclass(frozen=True)
class CoreError:
    code: int
    name: str
    meaning: str


# Reported in STATUS.ERR_CODE with STATUS.CORE_ERR. Codes 1..8 are found when the CSR is
# fetched: the run then reads no input and writes no output. Code 9 is found at the end.
CORE_ERRORS: tuple[CoreError, ...] = (
    CoreError(0, "NONE", "no error"),
    CoreError(1, "BAD_PRECISION", "ARITHMETIC_PRECISION is not one of 0x1, 0x3, 0x7, 0xF"),
    CoreError(2, "PRECISION_NOT_BUILT", "the precision's PEs are not in this configuration"),
    CoreError(3, "FP_UNSUPPORTED", "FP_MODE is not NO_FP"),
    CoreError(4, "CHAIN", "ACTIVATE_CHAIN is 0 with a precision narrower than 64 bits"),
    CoreError(5, "RESERVED", "a reserved CSR bit is set"),
    CoreError(6, "GROUP_ROWS", "GROUP_ROWS is larger than ROWS"),
    CoreError(7, "OUT_GROUPS", "OUT_GROUPS is larger than floor(ROWS/G)"),
    CoreError(8, "WM_RANGE", "WM_START + ROWS*P runs past SIZE_WMEMORY"),
    CoreError(9, "INPUT_TAIL", "the input ended inside a vector: the last words (fewer "
                               "than P) are dropped; the steps before it are complete"),
)
ERR = {e.name: e.code for e in CORE_ERRORS}

# ------------------------------------------------------------------------------------------
# Data formats
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    topic: str
    decision: str
    thesis: str


DATA_RULES: tuple[Rule, ...] = (
    Rule("operand packing",
         "lane k of a 64-bit word is bits [k*b +: b] (b = operand bits; 64/b lanes a word, "
         "little-endian); an MXU vector of COLUMNS lanes takes P = ceil(COLUMNS*b/64) words, "
         "column c in word c div (64/b), lane c mod (64/b); unused lanes are ignored",
         "library packs int.from_bytes(..., 'little') of up to 64/bw elements a word; "
         "Filter&Select unpacks (Fig. 4.12)"),
    Rule("weight block",
         "ROWS rows of P words from WM_START: row r at words WM_START + r*P .. + P-1 "
         "(W[r][c] as operand packing); loaded once per run (weight-stationary)",
         "one word per kernel row, padded with zero words to ROWS words (Prepare_p)"),
    Rule("step", "one input vector x (P words of the input FIFO); row result "
         "y[r] = sum_c W[r][c]*x[c]",
         "MXU: M=ROWS weight rows, K=COLUMNS input lanes; first column does not accumulate"),
    Rule("arithmetic",
         "products of sign-extended (SIGNED=1) or zero-extended operands; sums in an L-bit "
         "two's complement accumulator, L = 32 for int8, 64 for int16/32/64; overflow "
         "wraps modulo 2^L (never saturates). int8 sums cannot overflow for ROWS*COLUMNS <= 2^15",
         "not defined (DATA_WIDTH_MAC=64, the MXU output is ROWS*64 bits)"),
    Rule("row groups",
         "G = max(1, GROUP_ROWS); group k = rows kG..kG+G-1 for k < NG (NG = OUT_GROUPS or "
         "floor(ROWS/G)); output of group k at step s: z_s[k] = sum_{i<G} y_{s-G+1+i}[kG+i] "
         "mod 2^L (the partial sum of row kG+i moves to row kG+i+1 with the next step, the "
         "systolic weight-stationary flow); y_t = 0 for t < 0: the chain is cleared at the "
         "start of every run",
         "'data passes from each unit to the next along both axes'; with G=1 this is the "
         "thesis' one output per row"),
    Rule("output words",
         "per step, lanes z_s[0..NG-1] of L bits packed little-endian (lane k at word "
         "k*L div 64, bit k*L mod 64); Q = ceil(NG*L/64) words; unused bits are 0. A run "
         "writes S*Q words in step order (S steps)",
         "Compact&Select packs results into 64-bit words; a counter 0..ROWS-1 writes one "
         "word per clock"),
)

# ------------------------------------------------------------------------------------------
# Adapter arguments and streams
# ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Argument:
    index: int          # IARGn / OARGn
    direction: str      # "in" | "out"
    name: str
    kind: str           # "memory" (BRAM) | "fifo"
    port: str           # AXI4-Stream port prefix of the adapter top level
    unit: int           # bytes per addressable element
    size_attr: str      # Config attribute giving its capacity (elements)
    thesis: str


ARGUMENTS: tuple[Argument, ...] = (
    Argument(0, "in", "CSR", "memory", "s_axis_0", 1, "size_csr",
             "CSR memory, 8-bit x 1024 BRAM; IARG mask bit 0"),
    Argument(1, "in", "WMEM", "memory", "s_axis_1", 8, "size_wmemory",
             "weight memory, 64-bit BRAM; IARG mask bit 1"),
    Argument(2, "in", "INFIFO", "fifo", "s_axis_2", 8, "infifo_depth",
             "input FIFO (acc_fifo_read), 64-bit; IARG mask bit 2"),
    Argument(0, "out", "OUTFIFO", "fifo", "m_axis_0", 8, "outfifo_depth",
             "output FIFO (acc_fifo_write), 64-bit; OARG0, mask 1"),
)
IN_ARGS = tuple(a for a in ARGUMENTS if a.direction == "in")
OUT_ARGS = tuple(a for a in ARGUMENTS if a.direction == "out")
STREAM_BITS = 64
STREAM_SIGNALS = ("tdata", "tvalid", "tready", "tlast")   # no TKEEP: whole 64-bit beats

ADAPTER_RULES: tuple[Rule, ...] = (
    Rule("input packets",
         "each AXI4-Stream packet (to TLAST) on S_AXIS_n fills one buffer of IARGn from "
         "element 0 (CSR: byte k of beat b is byte 8b+k); beats past the capacity are "
         "dropped (STATUS.OVERFLOW); the buffer is ready at TLAST. BUFFER_DEPTH buffers per "
         "argument, used in ring order; TREADY is low while all are ready",
         "multi-buffered arguments, BUFFER_DEPTH=2 in the library"),
    Rule("reads by the core",
         "a run reads the oldest ready buffer (head) of each argument; memory words at or "
         "past the packet's length read 0 (STATUS.UNDERRUN); an argument without a ready "
         "buffer reads as an empty packet (a missing CSR is BAD_PRECISION). An argument left "
         "out of IARG_RQT_EN does not gate a start: its packet must be complete before a run "
         "can start, else what the run reads depends on timing",
         "-"),
    Rule("commands",
         "CMD writes enter a queue of CMDQ_DEPTH (a write to a full queue waits); the head "
         "runs when its condition holds: UPDATE_IN_ARG waits until no run is active, then "
         "releases the head buffer of every argument in its mask; EXECUTE_STEP waits until "
         "no run is active and every argument enabled in IARG_RQT_EN has a ready buffer, then "
         "starts one run; buffers stay valid over runs until released (weights reused)",
         "library: EXECUTE_STEP, UPDATE_OUT_ARG|1, UPDATE_IN_ARG|4 per input chunk, "
         "UPDATE_IN_ARG|1 per channel, UPDATE_IN_ARG|2 per weight load"),
    Rule("continuous mode",
         "EXECUTE_CONTINOUS: whenever the queue is empty, no run is active and the IARG_RQT_EN "
         "arguments are ready, a run starts; at its end those arguments' head buffers are "
         "released. UPDATE_IN_ARG and EXECUTE_STEP in continuous mode are ignored with "
         "STATUS.CMD_ERR (their order against automatic runs would depend on timing). "
         "STOP_EXECUTE_CONTINOUS ends the mode; a run in progress completes",
         "CMD_EXECUTE_CONTINOUS=0x4 appears only commented out"),
    Rule("output stream",
         "run output words leave on M_AXIS_0 as they are written (cut-through FIFO of "
         "OUTFIFO_DEPTH; a full FIFO stalls the core); TLAST marks the last word of a run and, "
         "with OARG_LENGTH_MODE[0]=1 and OARG0_LENGTH=n>0, every n-th word of a run; a run "
         "without output words sends nothing. UPDATE_OUT_ARG has no effect",
         "library: OARG_LENGTH_MODE=1 (software), OARG0_LENGTH=OUTFIFO_SIZE, UPDATE_OUT_ARG|1 "
         "after each EXECUTE_STEP"),
    Rule("soft reset",
         "CTRL.SOFT_RESET=1 empties every buffer, the queue and the output FIFO, leaves "
         "continuous mode, aborts a run, clears STATUS and holds TREADY/TVALID low until "
         "written 0; configuration registers keep their values",
         "library writes CTRL=1 then CTRL=0"),
    Rule("interrupt", "adapter output interrupt = CTRL.GIE & STATUS.DONE",
         "an interrupt controller exists at 0x40800000, unused by the library"),
)

# ------------------------------------------------------------------------------------------
# Adapter AXI4-Lite register map (offsets: the thesis' library; 32-bit registers)
# ------------------------------------------------------------------------------------------
RW, RO, WO, W1C, RAZWI = "rw", "ro", "wo", "w1c", "razwi"
AXIL_ADDR_BITS = 16     # the DTPU's 64 KiB range (0x43C00000, range 0x10000)
RESP_OKAY, RESP_SLVERR = 0, 2


@dataclass(frozen=True)
class Field(BitSpan):
    name: str
    lsb: int
    width: int
    access: str
    meaning: str = ""


@dataclass(frozen=True)
class Register:
    name: str
    offset: int
    access: str                 # rw | ro | wo | razwi (a register with W1C fields is "rw")
    fields: tuple[Field, ...] = ()
    reset: int = 0
    thesis: str = ""
    count: int = 1              # an indexed family NAMEn: offset + 4*n, n < count
    implemented: int = 1        # members 0..implemented-1 exist in this adapter, the rest are RAZ/WI

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} has no field {name}")

    def mask(self, access: "str | tuple[str, ...]") -> int:
        acc = (access,) if isinstance(access, str) else access
        return sum(f.mask for f in self.fields if f.access in acc)

    @property
    def read_mask(self) -> int:
        return self.mask((RW, RO, W1C))

    @property
    def write_mask(self) -> int:
        return self.mask((RW,))


STATUS_FIELDS = (
    Field("START", 0, 1, RO, "ap_start is high: a run was started and the core has not taken it"),
    Field("DONE", 1, 1, W1C, "a run completed (sticky)"),
    Field("IDLE", 2, 1, RO, "no run is active (ap_idle)"),
    Field("READY", 3, 1, W1C, "the core took a run's arguments (ap_ready; sticky)"),
    Field("CORE_ERR", 4, 1, W1C, "a run ended with a core error; clearing it clears ERR_CODE"),
    Field("CMD_ERR", 5, 1, W1C, "a CMD write had a reserved opcode, mask bit or field, or "
                                "was not allowed in continuous mode (it was ignored)"),
    Field("OVERFLOW", 6, 1, W1C, "an input packet was longer than its buffer (beats dropped)"),
    Field("UNDERRUN", 7, 1, W1C, "the core read a memory argument past its packet (read 0)"),
    Field("CONTINUOUS", 8, 1, RO, "continuous mode is on"),
    Field("ERR_CODE", 12, 4, RO, "CORE_ERRORS code of the last core error"),
    Field("CMDQ", 16, 4, RO, "commands waiting in the queue"),
)
ARG_STATUS_FIELDS = (
    Field("USED_BUF", 0, 4, RO, "ready buffers (packets received and not released)"),
    Field("EMPTY", 4, 1, RO, "no ready buffer"),
    Field("FULL", 5, 1, RO, "every buffer is ready (the stream is blocked)"),
)
OARG_STATUS_FIELDS = (
    Field("EMPTY", 4, 1, RO, "the output FIFO is empty"),
    Field("FULL", 5, 1, RO, "the output FIFO is full"),
)
CMD_FIELDS = (
    Field("ARG_MASK", 0, 8, WO, "argument mask (bit n = argument n)"),
    Field("OPCODE", 16, 4, WO, "command opcode (COMMANDS)"),
)

REGISTERS: tuple[Register, ...] = (
    Register("CTRL", 0x000, RW, (Field("SOFT_RESET", 0, 1, RW, "1 holds the adapter and core in reset"),
                                 Field("GIE", 1, 1, RW, "global interrupt enable")),
             thesis="CTRL: write 1 then 0 = soft reset"),
    Register("STATUS", 0x004, RW, STATUS_FIELDS, thesis="STATUS: library writes 0x3 to clear"),
    Register("IARG_RQT_EN", 0x010, RW, (Field("IARG_EN", 0, 3, RW, "arguments that gate a start"),),
             thesis="library writes 0x7 (CSR, weights, data)"),
    Register("OARG_RQT_EN", 0x014, RW, (Field("OARG_EN", 0, 1, RW, "stored; the output is cut-through"),),
             thesis="-"),
    Register("CMD", 0x028, WO, CMD_FIELDS, thesis="library writes cmd << 16 | arg_mask"),
    Register("OARG_LENGTH_MODE", 0x03C, RW, (Field("MODE0", 0, 1, RW, "1: software length (OARG0_LENGTH)"),),
             thesis="library writes 1 (software mode)"),
    Register("ISCALAR_FIFO_RST", 0x040, RAZWI, thesis="no scalar ports are configured"),
    Register("OSCALAR_FIFO_RST", 0x044, RAZWI, thesis="no scalar ports are configured"),
    Register("ISCALAR_RQT_EN", 0x048, RAZWI, thesis="library writes 0"),
    Register("OSCALAR_RQT_EN", 0x04C, RAZWI, thesis="library writes 0"),
    Register("ISCALAR_DATA", 0x080, RAZWI, count=16, implemented=0, thesis="ISCALAR0..15_DATA"),
    Register("OSCALAR_DATA", 0x0C0, RAZWI, count=8, implemented=0, thesis="OSCALAR0..7_DATA"),
    Register("IARG_STATUS", 0x100, RO, ARG_STATUS_FIELDS, count=8, implemented=3,
             thesis="IARG0..7_STATUS"),
    Register("OARG_STATUS", 0x140, RO, OARG_STATUS_FIELDS, count=8, implemented=1,
             thesis="OARG0..7_STATUS"),
    Register("ISCALAR_STATUS", 0x180, RAZWI, count=16, implemented=0, thesis="ISCALAR0..15_STATUS"),
    Register("OSCALAR_STATUS", 0x1C0, RAZWI, count=16, implemented=0, thesis="OSCALAR0..15_STATUS"),
    Register("OARG_LENGTH", 0x200, RW, (Field("LENGTH", 0, 32, RW, "software-mode packet length, words"),),
             count=8, implemented=1, thesis="library writes OUTFIFO_SIZE (2048)"),
    Register("OARG_TDEST", 0x240, RW, (Field("TDEST", 0, 8, RW, "stored; the stream has no TDEST"),),
             count=8, implemented=1, thesis="library writes 0"),
)


@dataclass(frozen=True)
class Word:
    """One 32-bit register word of the map, families expanded (IARG_STATUS2, ...)."""
    name: str
    offset: int
    reg: Register
    index: int
    exists: bool        # False: a member of a family this adapter does not have (RAZ/WI)

    @property
    def access(self) -> str:
        return self.reg.access if self.exists else RAZWI


def words() -> Iterator[Word]:
    for r in REGISTERS:
        for n in range(r.count):
            name = r.name if r.count == 1 else (r.name.replace("_", f"{n}_", 1) if "_" in r.name
                                                 else f"{r.name}{n}")
            exists = r.access != RAZWI and n < r.implemented
            yield Word(name, r.offset + 4 * n, r, n, exists)


WORDS = {w.offset: w for w in words()}
REG = {r.name: r for r in REGISTERS}
OFFSET = {w.name: w.offset for w in words()}      # e.g. OFFSET["IARG2_STATUS"], OFFSET["OARG0_LENGTH"]


@dataclass(frozen=True)
class Command:
    opcode: int
    name: str
    meaning: str


COMMANDS: tuple[Command, ...] = (
    Command(0x0, "UPDATE_IN_ARG", "after any active run, release the head buffer of each input argument in the mask"),
    Command(0x1, "UPDATE_OUT_ARG", "accepted, no effect (mask must be 0 or 1)"),
    Command(0x2, "EXECUTE_STEP", "start one run when idle and the IARG_RQT_EN arguments are ready (mask must be 0)"),
    Command(0x4, "EXECUTE_CONTINOUS", "enter continuous mode (mask must be 0)"),
    Command(0x5, "STOP_EXECUTE_CONTINOUS", "leave continuous mode (mask must be 0)"),
)
OPCODE = {c.name: c.opcode for c in COMMANDS}


def cmd_word(name: str, mask: int = 0) -> int:
    return (OPCODE[name] << CMD_FIELDS[1].lsb) | (mask << CMD_FIELDS[0].lsb)

# ------------------------------------------------------------------------------------------
# dtpu_core control FSM (thesis Fig. 4.10) and its debug `state` output
# ------------------------------------------------------------------------------------------


CORE_STATES: tuple[tuple[int, str, str], ...] = (
    (0, "IDLE", "wait for cs_start"),
    (1, "FETCH_CSR", "read CSR bytes 0..7, decode, raise cs_ready"),
    (2, "LOAD", "load the ROWS*P weight words into the L/S weight units"),
    (3, "COMPUTE", "stream input vectors through the MXU while the input FIFO is not empty"),
    (4, "SAVE", "drain the MXU and the output staging into the output FIFO"),
    (5, "DONE", "raise cs_done, wait for cs_continue"),
)
STATE = {n: v for v, n, _ in CORE_STATES}

# ------------------------------------------------------------------------------------------
# The system around the DTPU, for traces: DDR + Xilinx AXI DMAs feeding the streams
# ------------------------------------------------------------------------------------------
SYSTEM_BASE = 0x40000000        # trace register offsets are from here (Zynq M_AXI_GP0 window)
TRACE_ADDR_BITS = 32            # DDR addresses of load_mem / check_mem and the DMAs


@dataclass(frozen=True)
class Window:
    name: str
    base: int           # absolute address
    size: int
    kind: str           # "adapter" | "mm2s" | "s2mm"
    arg: "str | None"   # the argument the DMA feeds / drains
    thesis: str

    @property
    def offset(self) -> int:
        return self.base - SYSTEM_BASE


WINDOWS: tuple[Window, ...] = (
    Window("DMA_INFIFO", 0x40400000, 0x10000, "mm2s", "INFIFO", "axi_dma_infifo at 0x40400000"),
    Window("DMA_WM", 0x40410000, 0x10000, "mm2s", "WMEM", "axi_dma_weight_mem at 0x40410000"),
    Window("DMA_CSR", 0x40420000, 0x10000, "mm2s", "CSR", "axi_dma_csr_mem: address not given (chosen)"),
    Window("DMA_OUTFIFO", 0x40430000, 0x10000, "s2mm", "OUTFIFO", "axi_dma_outfifo: address not given (chosen)"),
    Window("DTPU", 0x43C00000, 0x10000, "adapter", None, "DTPU at 0x43C00000, range 0x10000"),
)
WINDOW = {w.name: w for w in WINDOWS}

# Xilinx AXI DMA (PG021), simple (direct register) mode, the subset this model implements.
# Each DMA has one channel (the thesis uses single-channel DMAs): an MM2S DMA answers the
# MM2S words, an S2MM DMA the S2MM words; the other channel's words read 0, ignore writes.
DMACR_FIELDS = (Field("RS", 0, 1, RW, "run/stop"), Field("RESET", 2, 1, RW, "channel soft reset (self-clearing)"),
                Field("IOC_IRQEN", 12, 1, RW, "interrupt on complete enable"),
                Field("ERR_IRQEN", 14, 1, RW, "error interrupt enable"))
DMASR_FIELDS = (Field("HALTED", 0, 1, RO, "RS=0 or stopped by an error"),
                Field("IDLE", 1, 1, RO, "running and no transfer in progress (also before the first)"),
                Field("DMAINTERR", 4, 1, RO, "length not a multiple of 8, a LENGTH write while busy, "
                                             "or an S2MM packet longer than LENGTH (its first LENGTH bytes "
                                             "are written, the rest is dropped; halts)"),
                Field("DMASLVERR", 5, 1, RO, "SLVERR from memory (halts)"),
                Field("DMADECERR", 6, 1, RO, "DECERR from memory (halts)"),
                Field("IOC_IRQ", 12, 1, W1C, "transfer complete"),
                Field("ERR_IRQ", 14, 1, W1C, "error"))


@dataclass(frozen=True)
class DmaReg:
    name: str
    offset: int
    channel: str        # "mm2s" | "s2mm"
    role: str           # "cr" | "sr" | "addr" | "addr_msb" | "length"
    fields: tuple[Field, ...] = ()


DMA_REGS: tuple[DmaReg, ...] = (
    DmaReg("MM2S_DMACR", 0x00, "mm2s", "cr", DMACR_FIELDS),
    DmaReg("MM2S_DMASR", 0x04, "mm2s", "sr", DMASR_FIELDS),
    DmaReg("MM2S_SA", 0x18, "mm2s", "addr"),
    DmaReg("MM2S_SA_MSB", 0x1C, "mm2s", "addr_msb"),
    DmaReg("MM2S_LENGTH", 0x28, "mm2s", "length"),
    DmaReg("S2MM_DMACR", 0x30, "s2mm", "cr", DMACR_FIELDS),
    DmaReg("S2MM_DMASR", 0x34, "s2mm", "sr", DMASR_FIELDS),
    DmaReg("S2MM_DA", 0x48, "s2mm", "addr"),
    DmaReg("S2MM_DA_MSB", 0x4C, "s2mm", "addr_msb"),
    DmaReg("S2MM_LENGTH", 0x58, "s2mm", "length"),
)
DMA_LENGTH_BITS = 26
DMA_REG = {r.name: r for r in DMA_REGS}


def dma_field(name: str) -> Field:
    for f in DMACR_FIELDS + DMASR_FIELDS:
        if f.name == name:
            return f
    raise KeyError(name)

# ------------------------------------------------------------------------------------------
# Top-level ports of the DTPU (adapter + core): the RTL stand-in and the DUT=tlm shell
# ------------------------------------------------------------------------------------------
AXIL_DATA_BITS = 32


def top_ports() -> list[tuple[str, str, int]]:
    """(name, direction, width) of module `dtpu`, in order: clock and reset, the AXI4-Lite
    completer `s_axi_*` (the adapter's register map), one AXI4-Stream target per input
    argument, one initiator per output argument, the interrupt."""
    p = [("aclk", "input", 1), ("aresetn", "input", 1)]
    a, d = AXIL_ADDR_BITS, AXIL_DATA_BITS
    p += [("s_axi_awaddr", "input", a), ("s_axi_awvalid", "input", 1), ("s_axi_awready", "output", 1),
          ("s_axi_wdata", "input", d), ("s_axi_wstrb", "input", d // 8), ("s_axi_wvalid", "input", 1),
          ("s_axi_wready", "output", 1), ("s_axi_bresp", "output", 2), ("s_axi_bvalid", "output", 1),
          ("s_axi_bready", "input", 1), ("s_axi_araddr", "input", a), ("s_axi_arvalid", "input", 1),
          ("s_axi_arready", "output", 1), ("s_axi_rdata", "output", d), ("s_axi_rresp", "output", 2),
          ("s_axi_rvalid", "output", 1), ("s_axi_rready", "input", 1)]
    for arg in ARGUMENTS:
        into = arg.direction == "in"
        src, dst = ("input", "output") if into else ("output", "input")
        p += [(f"{arg.port}_tdata", src, STREAM_BITS), (f"{arg.port}_tvalid", src, 1),
              (f"{arg.port}_tready", dst, 1), (f"{arg.port}_tlast", src, 1)]
    p.append(("irq", "output", 1))
    return p
