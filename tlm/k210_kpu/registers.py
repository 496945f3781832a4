"""The K210 KPU's registers as data: the one source of bit positions and offsets.

* ``LAYER_ARGUMENT``: ``kpu_layer_argument_t``, twelve 64-bit words per layer, in the order
  kpu.c writes them to ``layer_argument_fifo`` (EXT kpu.h). Field names are the seed's
  (seeds/004; its typo ``interrupt_enabe`` included); bit positions are EXT kpu.h.
* ``BATCHNORM``: one ``kpu_batchnorm_argument_t`` word per output channel (EXT).
* ``ACTIVATE_PARA`` + ``ACT_BIAS_WORDS``: ``kpu_activate_table_t``, 16 segment words then two
  words of eight uint8 ``result_bias`` each, 144 bytes (EXT; y_mul signed per digest §9).
* ``CONFIG_REGISTERS``: ``kpu_config_t`` at AI_BASE_ADDR, 64-bit registers (EXT kpu.h).
* ``POOL_TYPES``, ``KERNEL_TYPES``: the enums (EXT nncase; pool codes 3/4 per digest §9).

Everything else (accessors, the device's decoding, the generated docs table, the tests)
derives from these tables; nothing retypes a bit position.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np

from tlm.core.regtable import BitSpan

WORD_BITS = 64
WORD_MASK = (1 << WORD_BITS) - 1


@dataclass(frozen=True)
class Field(BitSpan):
    name: str
    lsb: int
    width: int
    signed: bool = False
    fixed: "int | None" = None      # the seed/EXT fix this value; any other value is rejected
    doc: str = ""

    @property
    def lo(self) -> int:
        """Smallest value the field holds (signed fields are two's complement)."""
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def hi(self) -> int:
        return (1 << (self.width - 1)) - 1 if self.signed else (1 << self.width) - 1

    def get(self, word: int) -> int:
        v = (word >> self.lsb) & ((1 << self.width) - 1)
        if self.signed and v >> (self.width - 1):
            v -= 1 << self.width
        return v

    def put(self, word: int, value: int) -> int:
        value = int(value)
        if not self.lo <= value <= self.hi:
            raise ValueError(f"{self.name} = {value} does not fit in {self.width} "
                             f"{'signed ' if self.signed else ''}bits ({self.lo}..{self.hi})")
        return (word & ~self.mask) | ((value << self.lsb) & self.mask)

    def get_array(self, words: np.ndarray) -> np.ndarray:
        """The field of every word of a uint64 array, as int64 (sign-extended if signed)."""
        w = np.asarray(words, dtype=np.uint64)
        v = ((w >> np.uint64(self.lsb)) & np.uint64((1 << self.width) - 1)).astype(np.int64)
        if self.signed:
            v = np.where(v >> (self.width - 1) != 0, v - (1 << self.width), v)
        return v

    def put_array(self, values) -> np.ndarray:
        """uint64 words holding `values` in this field (other bits 0)."""
        v = np.asarray(values, dtype=np.int64)
        if v.size and (int(v.min()) < self.lo or int(v.max()) > self.hi):
            raise ValueError(f"{self.name}: values outside {self.lo}..{self.hi}")
        u = (v & ((1 << self.width) - 1)).astype(np.uint64)
        return u << np.uint64(self.lsb)


@dataclass(frozen=True)
class Word:
    """One 64-bit word (a union in kpu.h) and its fields."""
    index: int
    name: str
    fields: tuple
    doc: str = ""

    @property
    def reserved_mask(self) -> int:
        used = 0
        for f in self.fields:
            used |= f.mask
        return WORD_MASK & ~used


def _f(name, lsb, width, doc="", signed=False, fixed=None) -> Field:
    return Field(name, lsb, width, signed, fixed, doc)


# kpu_layer_argument_t (EXT kpu.h bit positions; names and meanings from the seed)
LAYER_ARGUMENT: tuple = (
    Word(0, "interrupt_enabe", (
        _f("int_en", 0, 1, "raise calc_done when the layer completes (seed example: 0)"),
        _f("ram_flag", 1, 1, "seed: fixed 0 (meaning unknown)", fixed=0),
        _f("full_add", 2, 1, "seed: fixed 0; MC reg_desc: sum results per output channel "
                             "(not modelled)", fixed=0),
        _f("depth_wise_layer", 3, 1, "0 = normal convolution, 1 = depthwise"),
    )),
    Word(1, "image_addr", (
        _f("image_src_addr", 0, 15, "input feature map in KPU RAM, 64-byte units"),
        _f("image_dst_addr", 32, 15, "output feature map in KPU RAM, 64-byte units"),
    )),
    Word(2, "image_channel_num", (
        _f("i_ch_num", 0, 10, "input channels - 1"),
        _f("o_ch_num", 32, 10, "output channels - 1"),
        _f("o_ch_num_coef", 48, 10, "output channels per weight load - 1"),
    )),
    Word(3, "image_size", (
        _f("i_row_wid", 0, 10, "input width - 1"),
        _f("i_col_high", 10, 9, "input height - 1"),
        _f("o_row_wid", 32, 10, "output width - 1 (after pooling)"),
        _f("o_col_high", 42, 9, "output height - 1 (after pooling)"),
    )),
    Word(4, "kernel_pool_type_cfg", (
        _f("kernel_type", 0, 3, "0 = 1x1, 1 = 3x3"),
        _f("pad_type", 3, 1, "0 = pad with pad_value", fixed=0),
        _f("pool_type", 4, 4, "pooling, POOL_TYPES"),
        _f("first_stride", 8, 1, "MC reg_desc: use only even rows and columns"),
        _f("bypass_conv", 9, 1, "seed: hardware cannot skip the convolution, fixed 0", fixed=0),
        _f("load_para", 10, 1, "seed: hardware cannot skip batch norm, fixed 1", fixed=1),
        _f("dma_burst_size", 16, 8, "table-fetch burst: dma_burst_size + 1 beats of 8 bytes"),
        _f("pad_value", 24, 8, "padding value (uint8)"),
        _f("bwsx_base_addr", 32, 32, "batch-norm table address (system bus)"),
    )),
    Word(5, "kernel_load_cfg", (
        _f("load_coor", 0, 1, "seed: allow loading the weights (the model requires 1)", fixed=1),
        _f("load_time", 1, 6, "weight loads - 1"),
        _f("para_size", 15, 17, "bytes per weight load"),
        _f("para_start_addr", 32, 32, "weights address (system bus)"),
    )),
    Word(6, "kernel_offset", (
        _f("coef_column_offset", 0, 4, "seed: fixed 0", fixed=0),
        _f("coef_row_offset", 4, 12, "seed: fixed 0", fixed=0),
    )),
    Word(7, "kernel_calc_type_cfg", (
        _f("channel_switch_addr", 0, 15, "64-byte units per input channel group"),
        _f("row_switch_addr", 16, 4, "64-byte units per input row: ceil(width / 64)"),
        _f("coef_size", 20, 8, "seed: fixed 0", fixed=0),
        _f("coef_group", 28, 3, "input channels per 64-byte line: 1, 2 or 4"),
        _f("load_act", 31, 1, "seed: must be 1; 0 gives an all-zero output"),
        _f("active_addr", 32, 32, "activation table address (system bus, 256-byte aligned)"),
    )),
    Word(8, "write_back_cfg", (
        _f("wb_channel_switch_addr", 0, 15, "64-byte units per output channel group"),
        _f("wb_row_switch_addr", 16, 4, "64-byte units per output row"),
        _f("wb_group", 20, 3, "output channels per 64-byte line: 1, 2 or 4"),
    )),
    Word(9, "conv_value", (
        _f("shr_w", 0, 4, "shift of the arg_w term"),
        _f("shr_x", 4, 4, "shift of the arg_x term"),
        _f("arg_w", 8, 24, "multiplier of the window's weight sum", signed=True),
        _f("arg_x", 32, 24, "multiplier of the window's pixel sum", signed=True),
    )),
    Word(10, "conv_value2", (
        _f("arg_add", 0, 40, "constant added per input channel", signed=True),
    )),
    Word(11, "dma_parameter", (
        _f("send_data_out", 0, 1, "stream the output through fifo_data_out"),
        _f("channel_byte_num", 16, 16, "bytes per output channel - 1"),
        _f("dma_total_byte", 32, 32, "output bytes - 1"),
    )),
)
LAYER_WORDS = len(LAYER_ARGUMENT)                       # 12
LAYER_FIELDS: dict = {f.name: (w.index, f) for w in LAYER_ARGUMENT for f in w.fields}
WORD_INDEX: dict = {w.name: w.index for w in LAYER_ARGUMENT}

# kpu_batchnorm_argument_t: one word per output channel
BATCHNORM = Word(0, "batchnorm", (
    _f("norm_mul", 0, 24, "multiplier", signed=True),
    _f("norm_add", 24, 32, "addend", signed=True),
    _f("norm_shift", 56, 4, "right shift of acc * norm_mul"),
))

# kpu_activate_table_t: 16 segment words, then 16 result_bias bytes in two words
ACTIVATE_PARA = Word(0, "activate_para", (
    _f("shift_number", 0, 8, "right shift, rounded half to even (project decision, §9)"),
    _f("y_mul", 8, 16, "slope", signed=True),
    _f("x_start", 24, 36, "segment start: the segment applies where v > x_start", signed=True),
))
ACT_SEGMENTS = 16
ACT_BIAS_WORDS = ("activate_para_bias0", "activate_para_bias1")     # result_bias[8] each
ACT_TABLE_WORDS = ACT_SEGMENTS + len(ACT_BIAS_WORDS)                # 18 words, 144 bytes
ACT_TABLE_BYTES = ACT_TABLE_WORDS * 8
ACT_TABLE_ALIGN = 256                                                # digest §9 (nncase check)

# kpu_config_t at AI_BASE_ADDR
INTERRUPT_FIELDS = (
    _f("calc_done_int", 0, 1, "a layer with int_en completed"),
    _f("layer_cfg_almost_empty_int", 1, 1, "the KPU took a layer and at most "
                                          "fifo_empty_threshold layers remain"),
    _f("layer_cfg_almost_full_int", 2, 1, "a layer was completed in the FIFO and at least "
                                         "fifo_full_threshold layers wait"),
)


@dataclass(frozen=True)
class Register:
    name: str
    offset: int
    access: str            # "wo": write only, "ro": read only, "rw", "pop": read pops a FIFO
    fields: tuple
    reset: int = 0
    doc: str = ""

    @property
    def mask(self) -> int:
        m = 0
        for f in self.fields:
            m |= f.mask
        return m


CONFIG_REGISTERS: tuple = (
    Register("layer_argument_fifo", 0x00, "wo", (_f("layer_argument_fifo", 0, 64),),
             doc="each write appends one layer-argument word; 12 make a layer"),
    Register("interrupt_status", 0x08, "ro", INTERRUPT_FIELDS,
             doc="interrupt_raw & ~interrupt_mask; the AI interrupt is its OR"),
    Register("interrupt_raw", 0x10, "ro", INTERRUPT_FIELDS, doc="interrupt events"),
    Register("interrupt_mask", 0x18, "rw", INTERRUPT_FIELDS, doc="1 masks the bit"),
    Register("interrupt_clear", 0x20, "wo", INTERRUPT_FIELDS,
             doc="write 1 to clear an interrupt_raw bit; reads as 0"),
    Register("fifo_threshold", 0x28, "rw", (
        _f("fifo_full_threshold", 0, 4, "in layers"),
        _f("fifo_empty_threshold", 4, 4, "in layers"))),
    Register("fifo_data_out", 0x30, "pop", (_f("fifo_data_out", 0, 64),),
             doc="output stream, 8 bytes per read, little-endian"),
    Register("fifo_ctrl", 0x38, "rw", (
        _f("dma_fifo_flush_n", 0, 1, "0 flushes the output FIFO"),
        _f("gs_fifo_flush_n", 1, 1),
        _f("cfg_fifo_flush_n", 2, 1, "0 drops the words of an incomplete layer"),
        _f("cmd_fifo_flush_n", 3, 1),
        _f("resp_fifo_flush_n", 4, 1))),
    Register("eight_bit_mode", 0x40, "rw", (_f("eight_bit_mode", 0, 1,
                                               "1: 8-bit weights, 0: 16-bit weights"),)),
)
REG_BY_NAME: dict = {r.name: r for r in CONFIG_REGISTERS}
REG_BY_OFFSET: dict = {r.offset: r for r in CONFIG_REGISTERS}
OFFSET: dict = {r.name: r.offset for r in CONFIG_REGISTERS}
REG_BYTES = 8


def reg_field(reg: str, field: str) -> Field:
    for f in REG_BY_NAME[reg].fields:
        if f.name == field:
            return f
    raise KeyError(f"{reg} has no field {field!r}")


def reg_value(reg: str, **fields) -> int:
    """The word of register `reg` with the named fields set (others 0)."""
    w = 0
    for name, v in fields.items():
        w = reg_field(reg, name).put(w, v)
    return w


def irq_bits(**bits) -> int:
    """An interrupt word from field names: irq_bits(calc_done_int=1)."""
    return reg_value("interrupt_raw", **bits)


IRQ_ALL = irq_bits(**{f.name: 1 for f in INTERRUPT_FIELDS})


# ------------------------------------------------------------------------------------
# Enums
# ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PoolType:
    code: int
    name: str
    kind: str              # bypass, max, mean, select
    size: int
    stride: int
    offset: tuple = (0, 0)   # (row, column) of the selected pixel, kind "select"


POOL_TYPES: dict = {p.code: p for p in (
    PoolType(0, "bypass", "bypass", 1, 1),
    PoolType(1, "max_2_s2", "max", 2, 2),
    PoolType(2, "mean_2_s2", "mean", 2, 2),
    PoolType(3, "max_4_s4", "max", 4, 4),
    PoolType(4, "mean_4_s4", "mean", 4, 4),
    PoolType(5, "left_top_2_s2", "select", 2, 2, (0, 0)),
    PoolType(6, "right_top_2_s2", "select", 2, 2, (0, 1)),
    PoolType(7, "left_top_4_s4", "select", 4, 4, (0, 0)),
    PoolType(8, "mean_2_s1", "mean", 2, 1),
    PoolType(9, "max_2_s1", "max", 2, 1),
)}
POOL_BY_NAME: dict = {p.name: p for p in POOL_TYPES.values()}
KERNEL_TYPES: dict = {0: 1, 1: 3}            # kernel_type -> kernel size (padding (k-1)/2)


# ------------------------------------------------------------------------------------
# Accessors
# ------------------------------------------------------------------------------------
class LayerArgument:
    """Twelve layer-argument words with field access by the seed's names:
    ``la.i_ch_num``, ``la.replace(int_en=1)``, ``LayerArgument.from_fields(...)``."""
    __slots__ = ("words",)

    def __init__(self, words: Iterable[int] = (0,) * LAYER_WORDS):
        w = tuple(int(x) & WORD_MASK for x in words)
        if len(w) != LAYER_WORDS:
            raise ValueError(f"a layer argument has {LAYER_WORDS} words, got {len(w)}")
        object.__setattr__(self, "words", w)

    @classmethod
    def from_fields(cls, fields: "Mapping[str, int] | None" = None, **kw) -> "LayerArgument":
        return cls().replace(**{**(fields or {}), **kw})

    def replace(self, **fields) -> "LayerArgument":
        w = list(self.words)
        for name, v in fields.items():
            if name not in LAYER_FIELDS:
                raise KeyError(f"kpu_layer_argument_t has no field {name!r}")
            i, f = LAYER_FIELDS[name]
            w[i] = f.put(w[i], v)
        return LayerArgument(w)

    def __getattr__(self, name: str) -> int:
        try:
            i, f = LAYER_FIELDS[name]
        except KeyError:
            raise AttributeError(name) from None
        return f.get(self.words[i])

    def __setattr__(self, name, value):
        raise AttributeError("LayerArgument is immutable; use replace()")

    def word(self, name: str) -> int:
        return self.words[WORD_INDEX[name]]

    def fields(self) -> dict:
        return {name: getattr(self, name) for name in LAYER_FIELDS}

    def reserved_bits(self) -> list:
        """(word name, reserved bits set) for every word with reserved bits set."""
        return [(w.name, self.words[w.index] & w.reserved_mask) for w in LAYER_ARGUMENT
                if self.words[w.index] & w.reserved_mask]

    def to_bytes(self) -> bytes:
        return b"".join(x.to_bytes(8, "little") for x in self.words)

    @classmethod
    def from_bytes(cls, data: bytes) -> "LayerArgument":
        if len(data) != 8 * LAYER_WORDS:
            raise ValueError(f"a layer argument is {8 * LAYER_WORDS} bytes, got {len(data)}")
        return cls(int.from_bytes(data[i:i + 8], "little") for i in range(0, len(data), 8))

    def __eq__(self, other) -> bool:
        return isinstance(other, LayerArgument) and self.words == other.words

    def __hash__(self) -> int:
        return hash(self.words)

    def __repr__(self) -> str:
        nz = ", ".join(f"{k}={v}" for k, v in self.fields().items() if v)
        return f"LayerArgument({nz})"

    def describe(self) -> str:
        """One line per word: name, hex value, decoded fields."""
        out = []
        for w in LAYER_ARGUMENT:
            fs = " ".join(f"{f.name}={f.get(self.words[w.index])}" for f in w.fields)
            out.append(f"{w.index:2d} {w.name:<21} 0x{self.words[w.index]:016x} {fs}")
        return "\n".join(out)


def encode_batchnorm(norm_mul, norm_shift, norm_add) -> np.ndarray:
    """uint64 BN words, one per output channel."""
    f = {x.name: x for x in BATCHNORM.fields}
    return (f["norm_mul"].put_array(norm_mul) | f["norm_add"].put_array(norm_add)
            | f["norm_shift"].put_array(norm_shift))


def decode_batchnorm(words) -> dict:
    w = np.asarray(words, dtype=np.uint64)
    return {f.name: f.get_array(w) for f in BATCHNORM.fields}


def encode_activation(x_start, y_mul, shift_number, result_bias) -> np.ndarray:
    """The 18 uint64 words of an activation table."""
    f = {x.name: x for x in ACTIVATE_PARA.fields}
    for name, v in (("x_start", x_start), ("y_mul", y_mul), ("shift_number", shift_number),
                    ("result_bias", result_bias)):
        if np.asarray(v).shape != (ACT_SEGMENTS,):
            raise ValueError(f"{name}: {ACT_SEGMENTS} values expected")
    seg = (f["x_start"].put_array(x_start) | f["y_mul"].put_array(y_mul)
           | f["shift_number"].put_array(shift_number))
    b = np.asarray(result_bias, dtype=np.int64)
    if int(b.min()) < 0 or int(b.max()) > 255:
        raise ValueError("result_bias values are uint8")
    bias_words = np.frombuffer(b.astype(np.uint8).tobytes(), dtype="<u8").astype(np.uint64)
    return np.concatenate([seg, bias_words])


def decode_activation(words) -> dict:
    w = np.asarray(words, dtype=np.uint64)
    if w.shape != (ACT_TABLE_WORDS,):
        raise ValueError(f"an activation table has {ACT_TABLE_WORDS} words")
    out = {f.name: f.get_array(w[:ACT_SEGMENTS]) for f in ACTIVATE_PARA.fields}
    out["result_bias"] = np.frombuffer(w[ACT_SEGMENTS:].astype("<u8").tobytes(),
                                       dtype=np.uint8).astype(np.int64)
    return out


def words_to_bytes(words) -> bytes:
    return np.asarray(words, dtype=np.uint64).astype("<u8").tobytes()


def bytes_to_words(data: bytes) -> np.ndarray:
    return np.frombuffer(bytes(data), dtype="<u8").astype(np.uint64)


def markdown_tables() -> str:
    """The register tables as Markdown (docs/devices/k210-kpu.md embeds this text)."""
    rows = ["| word | register | bits | field | notes |", "|---|---|---|---|---|"]
    for w in LAYER_ARGUMENT:
        for f in w.fields:
            kind = " (signed)" if f.signed else ""
            fixed = f" Model rejects any value but {f.fixed}." if f.fixed is not None else ""
            rows.append(f"| {w.index} | {w.name} | {f.msb}:{f.lsb} | {f.name}{kind} | {f.doc}.{fixed} |")
    rows += ["", "| offset | register | access | fields |", "|---|---|---|---|"]
    for r in CONFIG_REGISTERS:
        fs = ", ".join(f"{f.name} {f.msb}:{f.lsb}" if f.width < 64 else f.name for f in r.fields)
        rows.append(f"| 0x{r.offset:02x} | {r.name} | {r.access} | {fs} |")
    rows += ["", "| table | field | bits |", "|---|---|---|"]
    for w in (BATCHNORM, ACTIVATE_PARA):
        for f in w.fields:
            rows.append(f"| {w.name} | {f.name}{' (signed)' if f.signed else ''} | {f.msb}:{f.lsb} |")
    rows.append(f"| activate_para_bias0/1 | result_bias[8] each | uint8 x 8 (words {ACT_SEGMENTS}, "
                f"{ACT_SEGMENTS + 1}) |")
    return "\n".join(rows) + "\n"
