"""The Ethos-U85 command-stream ISA as data (TRM r0p0 issue 05, sections 3.5.3, 3.10, 3.11).

One declarative table (`COMMANDS`) holds every cmd0 and cmd1 command with its opcode and
fields. The decoder, encoder, disassembler and the sticky `RegisterFile` are all derived from
it. Field positions are bit positions in the 64-bit command ``word0 | word1 << 32``; enum
types are named after the TRM ``*_t`` types (without ``_t``) with TRM member names.

Sources: the per-instruction encoding tables of TRM 3.10.x / 3.11.x for fields, and the
encoding index figures (3-67, 3-131) for opcodes. The cmd0 figure is garbled in the text copy,
so the cmd0 opcode numbers follow the digest (u85-command-stream.md 2.2); the Vela acceptance
test (tests/test_disasm_vela.py) confirms every opcode Vela emits.
"""
from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType


class IsaError(ValueError):
    """A reserved encoding or a truncated command at byte `offset` of a command stream."""

    def __init__(self, offset: int, word: int, reason: str):
        self.offset, self.word, self.reason = offset, word, reason
        super().__init__(f"command stream offset 0x{offset:06x}: word 0x{word:08x}: {reason}")


# --------------------------------------------------------------------------------------------
# Enumerations (TRM field descriptions; names and values as printed there)
# --------------------------------------------------------------------------------------------
def _enum(name: str, members: str) -> type[IntEnum]:
    """`members` is 'name=value ...'. The functional API allows TRM names such as `and`."""
    pairs = [(m.split("=")[0], int(m.split("=")[1], 0)) for m in members.split()]
    return IntEnum(name, pairs, module=__name__)


def upper_enum(name: str, enum: type[IntEnum], doc: str = "") -> type[IntEnum]:
    """`enum` with upper-case member names (`activation_precision.b16` -> `Precision.B16`), for
    modules that prefer Python constant style. Derived from the table, never retyped."""
    e = IntEnum(name, [(m.name.upper(), m.value) for m in enum], module=__name__)
    e.__doc__ = doc or f"{enum.__name__} (upper-case members)."
    return e


cmd_ctrl = _enum("cmd_ctrl", "cmd0_ctrl=0 cmd1_ctrl=1")
activation_type = _enum("activation_type", "unsigned=0 signed=1")
activation_precision = _enum("activation_precision", "b8=0 b16=1 b32=2 b64=3")
activation_format = _enum("activation_format", "nhwc=0 nhcwb16=1")
activation_storage = _enum("activation_storage", "tile2x2=0 tile3x1=1 chained=2 none=3")
activation_reverse = _enum("activation_reverse", "none=0 H=1 W=2 C=3")
activation_transpose = _enum("activation_transpose", "HWC=0 WHC=1 HCW=2 WCH=3 CHW=6 CWH=7")
ofm_scale_mode = _enum("ofm_scale_mode", "per_channel=0 global=1")
ifm_upscale_mode = _enum("ifm_upscale_mode", "none=0 nearest=1 zeros=2")
broadcast_mode = _enum("broadcast_mode", "none=0 h=1 w=2 hw=3 c=4 ch=5 cw=6 cwh=7 scalar=8")
weight_order = _enum("weight_order", "depth_first=0 part_kernel_first=1")
kernel_dilation = _enum("kernel_dilation", "none=0 x2=1")
kernel_decomposition = _enum("kernel_decomposition", "d8x8=0 d4x4=1")
acc_format = _enum("acc_format", "i32=0 i48=1")
acc_input = _enum("acc_input", "reset=0 keep=1 ifm2=2")
acc_output = _enum("acc_output", "enable=0 disable=1")
microblock = _enum("microblock", "u1x1=0 u1x2=1 u1x4=2 u2x2=3 u2x4=4 u4x4=5")
activation_function = _enum(
    "activation_function",
    "lut_none=0 lut_u8_u8=1 lut_s8_s8=4 lut_s8_s16=5 lut_s8_s32=7 lut_s16_s16=8 lut_s16_s32=9 "
    "lut_tanh=10 lut_sigmoid=11")
activation_clip_range = _enum("activation_clip_range", "b16=0 none=1")
round_mode_ofm = _enum(
    "round_mode_ofm",
    "double_symmetric=0 natural=1 double_asymmetric=2 symmetric=3 truncate_to_zero=4 "
    "truncate_to_lower=5")
round_mode_ifm = _enum("round_mode_ifm", "double_symmetric=0 natural=1")
pooling_mode = _enum(
    "pooling_mode", "max=0 average=1 reduce_sum=2 sum=3 none=4 min=5 argmax_x=6 argmax_y=7")
# Table 3-100. Value 10 is `lshr` there (the pseudocode says `lsr`, digest E-25).
elementwise_mode = _enum(
    "elementwise_mode",
    "mul=0 add=1 sub=2 min=3 max=4 lrelu=5 abs=6 clz=7 shr=8 shl=9 lshr=10 div=11 "
    "cmp_eq=16 cmp_ne=17 cmp_ge=18 cmp_gt=19 and=33 or=34 xor=35 not=36 and_not=42")
resize_mode = _enum("resize_mode", "bilinear=0 replicate=1 nearest=2")
weight_format = _enum("weight_format", "swd=0 fwd=1")
weight_sparsity = _enum("weight_sparsity", "none=0 sparse_2_4=1")
dma_region_mode = _enum("dma_region_mode", "external=0 internal=1")
dma_stride_mode = _enum("dma_stride_mode", "d1=0 d2=1 d3=2")
dma_idx_mode = _enum("dma_idx_mode", "disabled=0 enabled=1")
branch_cond = _enum("branch_cond", "always=0 rf_true=1")

ENUMS: Mapping[str, type[IntEnum]] = MappingProxyType({e.__name__: e for e in (
    cmd_ctrl, activation_type, activation_precision, activation_format, activation_storage,
    activation_reverse, activation_transpose, ofm_scale_mode, ifm_upscale_mode, broadcast_mode,
    weight_order, kernel_dilation, kernel_decomposition, acc_format, acc_input, acc_output,
    microblock, activation_function, activation_clip_range, round_mode_ofm, round_mode_ifm,
    pooling_mode, elementwise_mode, resize_mode, weight_format, weight_sparsity,
    dma_region_mode, dma_stride_mode, dma_idx_mode, branch_cond)})


# --------------------------------------------------------------------------------------------
# Table types
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Field:
    """One logical field. `parts` lists the (lsb, width) bit ranges in the 64-bit command that
    are concatenated, least significant first, to form the value: one range for ordinary
    fields, two for the 40-bit `addr` (addr_lo [63:32], then addr_hi [23:16]).
    `signed`: two's complement over `width`. `untyped`: the TRM calls the value untyped (zero
    points, clip bounds); it decodes as unsigned and encodes from either range."""
    name: str
    parts: tuple[tuple[int, int], ...]
    signed: bool = False
    enum: type[IntEnum] | None = None
    untyped: bool = False

    @property
    def lsb(self) -> int:
        return self.parts[0][0]

    @property
    def width(self) -> int:
        return sum(w for _, w in self.parts)

    @property
    def mask(self) -> int:
        """The bits of the 64-bit command that this field occupies."""
        return sum(((1 << w) - 1) << lsb for lsb, w in self.parts)

    @property
    def range(self) -> tuple[int, int]:
        """Inclusive (min, max) accepted by `insert`."""
        w = self.width
        lo = -(1 << (w - 1)) if self.signed or self.untyped else 0
        hi = (1 << (w - 1)) - 1 if self.signed else (1 << w) - 1
        return lo, hi

    def extract(self, raw: int) -> int:
        v, pos = 0, 0
        for lsb, w in self.parts:
            v |= ((raw >> lsb) & ((1 << w) - 1)) << pos
            pos += w
        if self.signed and v >> (pos - 1):
            v -= 1 << pos
        return v

    def insert(self, value: int) -> int:
        """The field's bits in the command for `value` (range-checked)."""
        lo, hi = self.range
        try:
            if isinstance(value, str) and self.enum is not None:
                value = self.enum[value]
            value = operator.index(value)          # int, IntEnum, numpy integer
        except (KeyError, TypeError):
            raise ValueError(f"field {self.name}: bad value {value!r}") from None
        if not lo <= value <= hi:
            raise ValueError(f"field {self.name}: value {value!r} outside [{lo}, {hi}]")
        v, raw = value & ((1 << self.width) - 1), 0
        for lsb, w in self.parts:
            raw |= (v & ((1 << w) - 1)) << lsb
            v >>= w
        return raw

    def format(self, value: int) -> str:
        if self.enum is not None:
            try:
                return self.enum(value).name
            except ValueError:
                return f"reserved({value})"
        if self.name in ("addr", "branch_target"):
            return f"-0x{-value:x}" if value < 0 else f"0x{value:x}"
        return str(value)


@dataclass(frozen=True)
class Command:
    name: str                      # TRM mnemonic, e.g. NPU_SET_IFM_PRECISION
    kind: int                      # 0 = cmd0 (one word), 1 = cmd1 (two words)
    opcode: int                    # bits [9:0]
    fields: tuple[Field, ...]
    description: str               # TRM Table 3-94 / 3-159

    @property
    def size(self) -> int:
        return 4 << self.kind

    @property
    def header(self) -> int:
        """Bits [15:0] of word0: opcode | control << 14."""
        return self.opcode | self.kind << 14

    @property
    def reserved_mask(self) -> int:
        """Payload bits that no field uses (TRM 'Reserved')."""
        used = 0xFFFF
        for f in self.fields:
            used |= f.mask
        return ((1 << (8 * self.size)) - 1) & ~used

    @property
    def is_op(self) -> bool:
        return self.name.startswith("NPU_OP_")

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{self.name} has no field {name!r}")

    def decode_fields(self, raw: int) -> dict[str, int]:
        return {f.name: f.extract(raw) for f in self.fields}

    def encode_raw(self, **values: int) -> int:
        raw = self.header
        for f in self.fields:
            if f.name in values:
                raw |= f.insert(values.pop(f.name))
        if values:
            raise ValueError(f"{self.name} has no field(s) {', '.join(sorted(values))}")
        return raw


# --------------------------------------------------------------------------------------------
# The table
# --------------------------------------------------------------------------------------------
def _f(name: str, bits: str, enum: type[IntEnum] | None = None, signed: bool = False,
       untyped: bool = False) -> Field:
    """A field from TRM bit notation 'hi:lo' or 'n'."""
    hi, _, lo = bits.partition(":")
    lo = lo or hi
    return Field(name, ((int(lo), int(hi) - int(lo) + 1),), signed, enum, untyped)


def _addr(signed: bool = False) -> tuple[Field, ...]:
    """40-bit address/offset: addr_hi [23:16] : addr_lo [63:32]. Where the TRM calls addr_hi
    signed (DMA strides, IDX_SKIP1), the whole 40-bit value is two's complement."""
    return (Field("addr", ((32, 32), (16, 8)), signed),)


_MASK = (_f("mask", "31:16"),)
_REGION = (_f("region", "18:16"),)
_PAD7 = (_f("pad", "22:16"),)
_PAD8 = (_f("pad", "23:16"),)
_W16, _H16, _D16 = (_f("width_m1", "31:16"),), (_f("height_m1", "31:16"),), (_f("depth_m1", "31:16"),)
_ZP = (_f("zero_point", "31:16", untyped=True),)
_CLIP = (_f("clip_boundary", "31:16", untyped=True),)
_BCAST = (_f("broadcast_mode", "19:16", broadcast_mode),)
_IFM_PRECISION = (_f("activation_type", "16", activation_type),
                  _f("activation_precision", "19:18", activation_precision),
                  _f("activation_format", "23:22", activation_format),
                  _f("activation_storage", "31:30", activation_storage))
_LENGTH32 = (_f("length", "63:32"),)
_IFM_SCALE = (_f("shift", "21:16"), _f("dbl_rnd", "26:22"),
              _f("round_mode", "29", round_mode_ifm), _f("scale", "62:32"))
_STEP = (_f("one_step_int", "19:16"), _f("blk_step_int", "30:20"),
         _f("one_step_mod", "42:32"), _f("blk_step_mod", "58:48"))

# (opcode, name, fields, description) -- TRM 3.10 (cmd0, payload in bits [31:16])
_CMD0 = (
    (0x000, "NPU_OP_STOP", _MASK, "Signal the end of command stream"),
    (0x001, "NPU_OP_IRQ", _MASK, "Raises an IRQ to the host"),
    (0x002, "NPU_OP_CONV", (_f("weights_ifm2", "16"),), "2D convolution"),
    (0x003, "NPU_OP_DEPTHWISE", (), "Depth-wise 2D convolution"),
    (0x005, "NPU_OP_POOL", (_f("pooling_mode", "18:16", pooling_mode),), "Pooling"),
    (0x006, "NPU_OP_ELEMENTWISE", (_f("elementwise_mode", "21:16", elementwise_mode),),
     "Elementwise operation"),
    (0x007, "NPU_OP_RESIZE", (_f("resize_mode", "17:16", resize_mode),), "Resize operation"),
    (0x010, "NPU_OP_DMA_START", (), "Queue new DMA for the given channel"),
    (0x011, "NPU_OP_DMA_WAIT", (_f("k", "17:16"),),
     "Wait for the mem2mem DMA channel to have k or fewer active descriptors outstanding"),
    (0x012, "NPU_OP_KERNEL_WAIT", (_f("n", "16"),), "Wait for kernel operations to complete"),
    (0x013, "NPU_OP_PMU_MASK", (_f("enable", "16"),),
     "Enable or disable PMU counting (debug feature only)"),
    (0x100, "NPU_SET_IFM_PAD_TOP", _PAD7, "IFM top pad"),
    (0x101, "NPU_SET_IFM_PAD_LEFT", _PAD7, "IFM left pad"),
    (0x102, "NPU_SET_IFM_PAD_RIGHT", _PAD8, "IFM right pad"),
    (0x103, "NPU_SET_IFM_PAD_BOTTOM", _PAD8, "IFM bottom pad"),
    (0x104, "NPU_SET_IFM_DEPTH_M1", _D16, "Number of input channels for convolution"),
    (0x105, "NPU_SET_IFM_PRECISION", _IFM_PRECISION, "IFM Precision"),
    (0x107, "NPU_SET_IFM_UPSCALE", (_f("mode", "17:16", ifm_upscale_mode),), "IFM upscale mode"),
    (0x108, "NPU_SET_IFM_BROADCAST", _BCAST, "IFM broadcast configuration"),
    (0x109, "NPU_SET_IFM_ZERO_POINT", _ZP, "IFM zero point"),
    (0x10A, "NPU_SET_IFM_WIDTH0_M1", _W16, "IFM Tile 0 and Tile 2 width"),
    (0x10B, "NPU_SET_IFM_HEIGHT0_M1", _H16, "IFM Tile 0 height"),
    (0x10C, "NPU_SET_IFM_HEIGHT1_M1", _H16, "IFM Tile 1 height"),
    (0x10F, "NPU_SET_IFM_REGION", _REGION, "Index n for IFM access"),
    (0x111, "NPU_SET_OFM_WIDTH_M1", _W16, "Output feature map width"),
    (0x112, "NPU_SET_OFM_HEIGHT_M1", _H16, "Output feature map height"),
    (0x113, "NPU_SET_OFM_DEPTH_M1", _D16, "Output feature map depth"),
    (0x114, "NPU_SET_OFM_PRECISION", (
        _f("activation_type", "16", activation_type),
        _f("activation_precision", "18:17", activation_precision),  # not [19:18] as for IFM
        _f("activation_format", "23:22", activation_format),
        _f("scale_mode", "24", ofm_scale_mode),
        _f("activation_reverse", "26:25", activation_reverse),
        _f("activation_transpose", "29:27", activation_transpose),
        _f("activation_storage", "31:30", activation_storage)), "OFM Precision"),
    (0x115, "NPU_SET_OFM_BLK_WIDTH_M1", (_f("width_m1", "22:16"),), "OFM block width"),
    (0x116, "NPU_SET_OFM_BLK_HEIGHT_M1", (_f("height_m1", "22:16"),), "OFM block height"),
    (0x117, "NPU_SET_OFM_BLK_DEPTH_M1", (_f("depth_m1", "25:16"),), "OFM block depth"),
    (0x118, "NPU_SET_OFM_ZERO_POINT", _ZP, "OFM zero point"),
    (0x11A, "NPU_SET_OFM_WIDTH0_M1", _W16, "OFM Tile 0 and tile 2 width"),
    (0x11B, "NPU_SET_OFM_HEIGHT0_M1", _H16, "OFM Tile 0 height"),
    (0x11C, "NPU_SET_OFM_HEIGHT1_M1", _H16, "OFM Tile 1 height"),
    (0x11F, "NPU_SET_OFM_REGION", _REGION, "Index n for OFM access"),
    (0x120, "NPU_SET_KERNEL_WIDTH_M1", _W16, "Kernel width"),
    (0x121, "NPU_SET_KERNEL_HEIGHT_M1", _H16, "Kernel height"),
    (0x122, "NPU_SET_KERNEL_STRIDE", (
        _f("stride_x_lsb", "16"), _f("stride_y_lsb", "17"),
        _f("weight_order", "18", weight_order),
        _f("dilation_x", "19", kernel_dilation), _f("dilation_y", "20", kernel_dilation),
        _f("decomposition", "21", kernel_decomposition),
        _f("stride_x_msb", "22"), _f("stride_y_msb", "25")), "Kernel stride"),
    (0x124, "NPU_SET_ACC_FORMAT", (
        _f("acc_format", "17:16", acc_format), _f("acc_input", "21:20", acc_input),
        _f("acc_output", "22", acc_output), _f("microblock", "26:24", microblock)),
     "Accumulator format"),
    (0x125, "NPU_SET_ACTIVATION", (
        _f("activation_function", "20:16", activation_function), _f("table", "23:21"),
        _f("activation_clip_range", "28", activation_clip_range)),
     "Activation function and clip range"),
    (0x126, "NPU_SET_ACTIVATION_MIN", _CLIP, "Lower bound clip"),
    (0x127, "NPU_SET_ACTIVATION_MAX", _CLIP, "Upper bound clip"),
    (0x128, "NPU_SET_WEIGHT_REGION", _REGION, "Index n for weight stream access"),
    (0x129, "NPU_SET_SCALE_REGION", _REGION, "Index n for scale stream access"),
    (0x12A, "NPU_SET_RESIZE_X_SCALE_N_M1", (_f("resize_x_scale_n_m1", "26:16"),),
     "Set resize scale X numerator"),
    (0x12B, "NPU_SET_RESIZE_Y_SCALE_N_M1", (_f("resize_y_scale_n_m1", "26:16"),),
     "Set resize scale Y numerator"),
    (0x12C, "NPU_SET_RESIZE_X_OFFSET", (_f("resize_x_offset", "27:16", signed=True),),
     "Set resize offset X"),
    (0x12D, "NPU_SET_RESIZE_Y_OFFSET", (_f("resize_y_offset", "27:16", signed=True),),
     "Set resize offset Y"),
    (0x12E, "NPU_SET_WEIGHT_FORMAT", (
        _f("weight_format", "16", weight_format), _f("weight_sparsity", "20", weight_sparsity)),
     "Set weight stream format"),
    (0x12F, "NPU_SET_BLOCKDEP", (_f("blockdep", "18:16"),),
     "Block dependency offset for kernel operations"),
    (0x130, "NPU_SET_DMA0_SRC_REGION", (
        _f("region", "18:16"), _f("region_mode", "24", dma_region_mode),
        _f("stride_mode", "26:25", dma_stride_mode), _f("idx_mode", "27", dma_idx_mode)),
     "DMA0 source region"),
    (0x131, "NPU_SET_DMA0_DST_REGION", (
        _f("region", "18:16"), _f("region_mode", "24", dma_region_mode),
        _f("idx_mode", "27", dma_idx_mode)), "DMA0 destination region"),
    (0x132, "NPU_SET_DMA0_SIZE0", (_f("size", "31:16"),),
     "Size of second dimension for 2D/3D transfers"),
    (0x133, "NPU_SET_DMA0_SIZE1", (_f("size", "31:16"),), "Size of third dimension for 3D transfers"),
    (0x134, "NPU_SET_DMA0_IDX_REGION", _REGION, "DMA0 index region"),
    (0x180, "NPU_SET_IFM2_BROADCAST", _BCAST, "IFM2 broadcast configuration"),
    (0x185, "NPU_SET_IFM2_PRECISION", _IFM_PRECISION, "IFM2 Precision"),
    (0x189, "NPU_SET_IFM2_ZERO_POINT", _ZP, "IFM2 zero point"),
    (0x18A, "NPU_SET_IFM2_WIDTH0_M1", _W16, "IFM2 Tile 0 and Tile 2 width"),
    (0x18B, "NPU_SET_IFM2_HEIGHT0_M1", _H16, "IFM2 Tile 0 height"),
    (0x18C, "NPU_SET_IFM2_HEIGHT1_M1", _H16, "IFM2 Tile 1 height"),
    (0x18F, "NPU_SET_IFM2_REGION", _REGION, "Index n for IFM2 access"),
)

# TRM 3.11 (cmd1: payload_0 in bits [31:16], payload_1 in bits [63:32]); opcodes from Fig 3-131
_CMD1 = (
    (0x000, "NPU_SET_IFM_BASE0", _addr(), "IFM Tile 0 address"),
    (0x001, "NPU_SET_IFM_BASE1", _addr(), "IFM Tile 1 address"),
    (0x002, "NPU_SET_IFM_BASE2", _addr(), "IFM Tile 2 address"),
    (0x003, "NPU_SET_IFM_BASE3", _addr(), "IFM Tile 3 address"),
    (0x004, "NPU_SET_IFM_STRIDE_X", _addr(), "IFM byte stride between horizontal values"),
    (0x005, "NPU_SET_IFM_STRIDE_Y", _addr(), "IFM byte stride between vertical values"),
    (0x006, "NPU_SET_IFM_STRIDE_C", _addr(), "IFM byte stride between channel blocks"),
    (0x010, "NPU_SET_OFM_BASE0", _addr(), "OFM Tile 0 address"),
    (0x011, "NPU_SET_OFM_BASE1", _addr(), "OFM Tile 1 address"),
    (0x012, "NPU_SET_OFM_BASE2", _addr(), "OFM Tile 2 address"),
    (0x013, "NPU_SET_OFM_BASE3", _addr(), "OFM Tile 3 address"),
    (0x014, "NPU_SET_OFM_STRIDE_X", _addr(), "OFM byte stride between horizontal values"),
    (0x015, "NPU_SET_OFM_STRIDE_Y", _addr(), "OFM byte stride between vertical values"),
    (0x016, "NPU_SET_OFM_STRIDE_C", _addr(), "OFM byte stride between channel blocks"),
    (0x020, "NPU_SET_WEIGHT_BASE", _addr(), "Weight stream byte offset in WEIGHT_REGION"),
    (0x021, "NPU_SET_WEIGHT_LENGTH", _LENGTH32, "Weight stream byte length"),
    (0x022, "NPU_SET_SCALE_BASE", _addr(),
     "Scale and bias stream input byte offset from SCALE_REGION"),
    (0x023, "NPU_SET_SCALE_LENGTH", (_f("length", "51:32"),),
     "Scale and bias stream input byte length"),
    (0x024, "NPU_SET_OFM_SCALE", (
        _f("shift", "21:16"), _f("dbl_rnd", "26:22"),
        _f("round_mode", "31:29", round_mode_ofm), _f("scale", "62:32")), "OFM scale"),
    (0x025, "NPU_SET_IFM_SCALE", _IFM_SCALE, "IFM input scale"),
    (0x026, "NPU_SET_IFM2_SCALE", _IFM_SCALE, "IFM2 input scale"),
    (0x027, "NPU_SET_OP_SCALAR", (_f("scalar", "63:32", signed=True),), "Operation scalar value"),
    (0x030, "NPU_SET_DMA0_SRC", _addr(),
     "DMA user channel 0 source byte offset from DMA0_SRC_REGION"),
    (0x031, "NPU_SET_DMA0_DST", _addr(),
     "DMA user channel 0 destination byte offset from DMA0_DST_REGION"),
    (0x032, "NPU_SET_DMA0_LEN", _addr(),
     "DMA user channel 0 transfer length in bytes for each 1D transfer"),
    (0x033, "NPU_SET_DMA0_SRC_STRIDE0", _addr(signed=True),
     "Source byte stride after each 1D transfer"),
    (0x034, "NPU_SET_DMA0_SRC_STRIDE1", _addr(signed=True),
     "Source byte stride after each 2D transfer"),
    (0x035, "NPU_SET_DMA0_DST_STRIDE0", _addr(signed=True),
     "Destination byte stride after each 1D transfer"),
    (0x036, "NPU_SET_DMA0_DST_STRIDE1", _addr(signed=True),
     "Destination byte stride after 2D transfer"),
    (0x037, "NPU_SET_DMA0_IDX", _addr(), "DMA channel 0 index array address"),
    (0x038, "NPU_SET_DMA0_IDX_MAX", (_f("idx_max", "62:32"),), "DMA channel 0 index maximum value"),
    (0x039, "NPU_SET_DMA0_IDX_SKIP1", _addr(signed=True),
     "Index byte distance to skip in index after each 2D transfer"),
    (0x080, "NPU_SET_IFM2_BASE0", _addr(), "IFM2 Tile 0 address"),
    (0x081, "NPU_SET_IFM2_BASE1", _addr(), "IFM2 Tile 1 address"),
    (0x082, "NPU_SET_IFM2_BASE2", _addr(), "IFM2 Tile 2 address"),
    (0x083, "NPU_SET_IFM2_BASE3", _addr(), "IFM2 Tile 3 address"),
    (0x084, "NPU_SET_IFM2_STRIDE_X", _addr(), "IFM2 byte stride between horizontal values"),
    (0x085, "NPU_SET_IFM2_STRIDE_Y", _addr(), "IFM2 byte stride between vertical values"),
    (0x086, "NPU_SET_IFM2_STRIDE_C", _addr(), "IFM2 byte stride between channel blocks"),
    (0x090, "NPU_SET_WEIGHT1_BASE", _addr(),
     "Weight stream byte offset in WEIGHT_REGION for weight decoder 1"),
    (0x091, "NPU_SET_WEIGHT1_LENGTH", _LENGTH32, "Weight stream byte length for weight decoder 1"),
    (0x092, "NPU_SET_WEIGHT2_BASE", _addr(),
     "Weight stream byte offset in WEIGHT_REGION for weight decoder 2"),
    (0x093, "NPU_SET_WEIGHT2_LENGTH", _LENGTH32, "Weight stream byte length for weight decoder 2"),
    (0x094, "NPU_SET_WEIGHT3_BASE", _addr(),
     "Weight stream byte offset in WEIGHT_REGION for weight decoder 3"),
    (0x095, "NPU_SET_WEIGHT3_LENGTH", _LENGTH32, "Weight stream byte length for weight decoder 3"),
    # The opcode enum names these npu_set_resize_x/y; the section titles use *_STEP.
    (0x096, "NPU_SET_RESIZE_X_STEP", _STEP, "Resize X axis step parameters"),
    (0x097, "NPU_SET_RESIZE_Y_STEP", _STEP, "Resize Y axis step parameters"),
    (0x100, "NPU_OP_BRANCH", (_f("branch_cond", "16", branch_cond), _f("branch_target", "63:32")),
     "Branch to new location"),
)

COMMANDS: tuple[Command, ...] = tuple(
    Command(name, kind, opcode, fields, desc)
    for kind, table in ((0, _CMD0), (1, _CMD1)) for opcode, name, fields, desc in table)
FIELDS: Mapping[str, tuple[Field, ...]] = MappingProxyType({c.name: c.fields for c in COMMANDS})
CMD0_BY_OPCODE: Mapping[int, Command] = MappingProxyType({c.opcode: c for c in COMMANDS if c.kind == 0})
CMD1_BY_OPCODE: Mapping[int, Command] = MappingProxyType({c.opcode: c for c in COMMANDS if c.kind == 1})
BY_NAME: Mapping[str, Command] = MappingProxyType({c.name: c for c in COMMANDS})
SET_COMMANDS: tuple[Command, ...] = tuple(c for c in COMMANDS if not c.is_op)

# cmd0_opcode_t / cmd1_opcode_t, derived from the table (TRM value names are lower case).
cmd0_opcode = IntEnum("cmd0_opcode", [(c.name.lower(), c.opcode) for c in COMMANDS if c.kind == 0],
                      module=__name__)
cmd1_opcode = IntEnum("cmd1_opcode", [(c.name.lower(), c.opcode) for c in COMMANDS if c.kind == 1],
                      module=__name__)


# --------------------------------------------------------------------------------------------
# Decoder, encoder, disassembler
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Decoded:
    offset: int                    # byte offset in the stream
    cmd: Command
    raw: int                       # word0 | word1 << 32 (word1 = 0 for cmd0)
    size: int                      # 4 or 8 bytes
    fields: dict[str, int]

    @property
    def name(self) -> str:
        return self.cmd.name

    @property
    def words(self) -> tuple[int, ...]:
        return (self.raw & 0xFFFFFFFF, self.raw >> 32) if self.size == 8 else (self.raw,)


def is_cmd1_header(w0: int) -> bool:
    """Word *w0* is a valid cmd1 header (control 01, bits [13:10] zero, a cmd1 opcode): a
    payload word follows it."""
    return (w0 >> 10) & 0x3F == 0b010000 and (w0 & 0x3FF) in CMD1_BY_OPCODE


def decode_word(words: Sequence[int], index: int) -> Decoded:
    """Decode the command at word `index` (TRM Table 3-88)."""
    w0 = int(words[index])
    offset = 4 * index
    ctrl = (w0 >> 14) & 3
    if (w0 >> 10) & 0xF:
        raise IsaError(offset, w0, "reserved bits [13:10] are not zero")
    if ctrl > 1:   # only 00 and 01 are defined; vela-pipeline.md 5.3 reads any ctrl != 0 as cmd1
        raise IsaError(offset, w0, f"reserved control value {ctrl} in bits [15:14]")
    cmd = (CMD1_BY_OPCODE if ctrl else CMD0_BY_OPCODE).get(w0 & 0x3FF)
    if cmd is None:
        raise IsaError(offset, w0, f"unknown cmd{ctrl} opcode 0x{w0 & 0x3FF:03x}")
    if ctrl:
        if index + 1 >= len(words):
            raise IsaError(offset, w0, f"truncated cmd1 {cmd.name}: payload word missing")
        raw = w0 | int(words[index + 1]) << 32
    else:
        raw = w0
    return Decoded(offset, cmd, raw, cmd.size, cmd.decode_fields(raw))


def iter_decode(words: Sequence[int]) -> Iterator[Decoded]:
    """Decode commands one by one; raises IsaError where the stream stops being valid."""
    if hasattr(words, "tolist"):        # numpy: plain ints are much faster to index
        words = words.tolist()
    i, n = 0, len(words)
    while i < n:
        d = decode_word(words, i)
        yield d
        i += d.size >> 2


def decode(words: Sequence[int]) -> list[Decoded]:
    return list(iter_decode(words))


def encode(name: str, **fields: int) -> list[int]:
    """Words (1 or 2) of command `name`; unspecified fields are 0. Enum fields also take the
    member name as a string."""
    try:
        cmd = BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown command {name!r}") from None
    raw = cmd.encode_raw(**fields)
    return [raw & 0xFFFFFFFF, raw >> 32] if cmd.kind else [raw]


def format_decoded(d: Decoded) -> str:
    """One disassembly line: offset, word(s), mnemonic, fields (enum values by name)."""
    w = d.words
    words = f"{w[0]:08x} {w[1]:08x}" if len(w) == 2 else f"{w[0]:08x}         "
    text = " ".join(f"{f.name}={f.format(d.fields[f.name])}" for f in d.cmd.fields)
    reserved = d.raw & d.cmd.reserved_mask
    if reserved:
        text += f" reserved_bits=0x{reserved:x}"
    return f"0x{d.offset:06x}: {words}  {d.cmd.name:<28} {text}".rstrip()


def disasm(words: Sequence[int]) -> list[str]:
    return [format_decoded(d) for d in iter_decode(words)]


# --------------------------------------------------------------------------------------------
# Sticky NPU_SET state
# --------------------------------------------------------------------------------------------
_SET_FIELDS: Mapping[str, Mapping[str, Field]] = MappingProxyType(
    {c.name: MappingProxyType({f.name: f for f in c.fields}) for c in SET_COMMANDS})
_PAYLOAD = ~0xFFFF   # the register value is the command without its header half-word


def register_value(d: "Decoded") -> int:
    """The value an NPU_SET command leaves in its register (RegisterFile.set)."""
    return d.raw & _PAYLOAD


class CommandFields(Mapping):
    """Read-only field view of one command value: `v.addr`, `v['addr']`, `dict(v)`."""
    __slots__ = ("cmd", "raw")

    def __init__(self, cmd: Command, raw: int):
        object.__setattr__(self, "cmd", cmd)
        object.__setattr__(self, "raw", raw)

    def __getattr__(self, name: str) -> int:
        try:
            return _SET_FIELDS[self.cmd.name][name].extract(self.raw)
        except KeyError:
            raise AttributeError(f"{self.cmd.name} has no field {name!r}") from None

    def __setattr__(self, name, value):
        raise AttributeError("register fields are read-only; use RegisterFile.set()")

    def __getitem__(self, name: str) -> int:
        return _SET_FIELDS[self.cmd.name][name].extract(self.raw)

    def __iter__(self):
        return iter(_SET_FIELDS[self.cmd.name])

    def __len__(self) -> int:
        return len(self.cmd.fields)

    def __repr__(self) -> str:
        return f"{self.cmd.name}({', '.join(f'{k}={v}' for k, v in self.items())})"


class _RegisterState:
    """Read access shared by RegisterFile and its snapshots."""
    __slots__ = ("_raw",)

    def field(self, name: str, field: str) -> int:
        """Fast path: the value of `field` of NPU_SET command `name`."""
        return _SET_FIELDS[name][field].extract(self._raw[name])

    def raw(self, name: str) -> int:
        return self._raw[name]

    def __getitem__(self, name: str) -> CommandFields:
        if name not in _SET_FIELDS:
            raise KeyError(f"{name!r} is not an NPU_SET command")
        return CommandFields(BY_NAME[name], self._raw[name])

    def __getattr__(self, name: str) -> CommandFields:
        if name.startswith("NPU_SET_"):
            try:
                return self[name]
            except KeyError:
                pass
        raise AttributeError(name)

    def __eq__(self, other) -> bool:
        return isinstance(other, _RegisterState) and dict(self._raw) == dict(other._raw)

    __hash__ = None

    def changed(self) -> dict[str, CommandFields]:
        """The registers that differ from their reset value (all zero)."""
        return {n: self[n] for n, v in self._raw.items() if v}


class RegisterSnapshot(_RegisterState):
    """Immutable copy of the NPU_SET state (captured at each NPU_OP).  ``key``: a hashable
    key of the contents (see tlm.ethos_u85.ops.common.snapshot_key), given by RegisterFile.snapshot."""
    __slots__ = ("key",)

    def __init__(self, raw: Mapping[str, int], key: "tuple | None" = None):
        object.__setattr__(self, "_raw", MappingProxyType(dict(raw)))
        object.__setattr__(self, "key", key)

    def __setattr__(self, name, value):
        raise AttributeError("RegisterSnapshot is immutable")


class RegisterFile(_RegisterState):
    """The sticky NPU_SET state; every register is zero at reset (TRM 2.2)."""
    __slots__ = ()

    def __init__(self):
        self._raw = dict.fromkeys(_SET_FIELDS, 0)

    def reset(self) -> None:
        for k in self._raw:
            self._raw[k] = 0

    def set(self, d: Decoded) -> None:
        name = d.cmd.name
        if name not in self._raw:
            raise ValueError(f"{name} is an operation, not an NPU_SET command")
        self._raw[name] = register_value(d)

    def set_values(self, values: Mapping[str, int]) -> None:
        """The effect of a run of NPU_SET commands: register name -> register_value() of
        the run's last command setting it."""
        if not values.keys() <= self._raw.keys():
            raise ValueError(f"not NPU_SET commands: {sorted(values.keys() - self._raw.keys())}")
        self._raw.update(values)

    def snapshot(self) -> RegisterSnapshot:
        """The state now; its key is the register values in the register file's fixed order."""
        return RegisterSnapshot(self._raw, tuple(self._raw.values()))
