"""Descriptors: the one table of command kinds and their fields, and the command-buffer format.

Every computation call of the guide records one descriptor: its kind (the call) and its
parameters, field for field as the guide's parameter structure lists them. The guide
documents `cmd_hdr_t` only as `{u8 engine_id:4; ...; u8 len; u8 cmd[0]}` and gives no
instruction bytes, so the command buffer here is this model's own documented, versioned
format (choice C-CMD, docs/devices/bm1880.md):

    cmd_hdr_t            HEADER (6 bytes: engine_id, version, kind, flags, stream, crc, len)
    payload (len bytes)  the kind's fields in table order, little endian (FIELD_TYPES)

Dependency records (bmk1880_add_dependency) are commands of engine 15 (CTRL), kind
`add_dependency`, fields `before`, `after`: indices of earlier computation commands.
Decoding checks everything (version, kind, engine, length, CRC, field encodings) and
raises `DecodeError` naming the command and its byte offset; it never raises anything else.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .chip import ENGINE_CTRL, ENGINE_GDMA, ENGINE_TPU, stride_t
from .tensors import TG, TL

FORMAT_VERSION = 1
FLAG_SYNC = 0x01
NO_STREAM = 0xFF
MAX_PAYLOAD = 0xFF                    # cmd_hdr_t.len is a u8 (3.3)
MAX_CMDBUF = 1 << 22                  # bytes of one command buffer the chip model takes (choice C-LIMIT)


class DecodeError(Exception):
    """A command buffer that cannot be decoded: one line naming the command and offset."""

    def __init__(self, msg: str, offset: int = -1):
        super().__init__(msg)
        self.offset = offset


# cmd_hdr_t: (field, byte, lsb, width, meaning). The guide fixes engine_id:4 first and len
# last before the instruction; the fields between are the "..." of 3.3.
HEADER: tuple[tuple[str, int, int, int, str], ...] = (
    ("engine_id", 0, 0, 4, "engine that runs the command (choice C-ENGINE)"),
    ("version", 0, 4, 4, f"command-buffer format version ({FORMAT_VERSION})"),
    ("kind", 1, 0, 8, "kind code (the descriptor table)"),
    ("flags", 2, 0, 8, "bit 0 SYNC: waits for every earlier command (starts an epoch); bits 7:1 are 0"),
    ("stream", 3, 0, 8, "stream of a streams region, 0xFF: none"),
    ("crc", 4, 0, 8, "CRC-8 (poly 0x07, init 0) of the header with this byte 0, then the payload"),
    ("len", 5, 0, 8, "payload bytes that follow"),
)
HDR_SIZE = 1 + max(h[1] for h in HEADER)


def pack_header(**vals: int) -> bytearray:
    out = bytearray(HDR_SIZE)
    for name, byte, lsb, width, _ in HEADER:
        v = vals.get(name, 0)
        assert 0 <= v < 1 << width, (name, v)
        out[byte] |= v << lsb
    return out


def unpack_header(b: bytes) -> dict:
    return {name: (b[byte] >> lsb) & ((1 << width) - 1) for name, byte, lsb, width, _ in HEADER}


_CRC_BYTE = next(h[1] for h in HEADER if h[0] == "crc")


# ---- field types ------------------------------------------------------------------------------
# type -> (encoded size or None if variable, description for the docs)
FIELD_TYPES: dict[str, str] = {
    "tl": "tensor_lmem* (NULL allowed): u8 flags (bit 0 present, 1 aligned, 2 explicit stride, "
          "3 matrix), u8 fmt, u32 laddr, u32 n, c, h, w (matrix: h = row, w = col), "
          "[u32 stride n, c, h, w if bit 2]; NULL is the single byte 0",
    "tg": "tensor_gmem*: u64 addr, u8 dim (2 or 4), u32 n, c, h, w, u32 stride n, c, h, w",
    "u8": "u8",
    "bool": "u8, 0 or 1",
    "c8": "s8 constant: one byte, read as s8 if b_is_signed else u8",
    "c16": "s16 constant: two bytes, read as s16 if b_is_signed else u16",
    "int": "s32",
    "u32": "u32",
    "u64": "u64",
    "stride": "stride_t: u32 n, c, h, w",
    "ctrl": "ctrl_t: u32",
}
_RANGES = {"u8": (0, 0xFF), "int": (-(1 << 31), (1 << 31) - 1), "u32": (0, (1 << 32) - 1),
           "u64": (0, (1 << 64) - 1), "ctrl": (0, (1 << 32) - 1), "c8": (-128, 255), "c16": (-(1 << 15), 0xFFFF)}
_TL_PRESENT, _TL_ALIGNED, _TL_STRIDE, _TL_MATRIX = 1, 2, 4, 8


@dataclass(frozen=True)
class Field:
    name: str
    type: str


@dataclass(frozen=True)
class Kind:
    code: int
    name: str                          # the call, without the "bmk1880_" prefix
    engine: int
    param: "str | None"                # the parameter structure, or None: positional arguments
    fields: tuple[Field, ...]
    section: str                       # the guide's section, or "EXT"

    @property
    def call(self) -> str:
        return f"bmk1880_{self.name}"

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)


def _f(spec: str) -> tuple[Field, ...]:
    return tuple(Field(*item.split(":")) for item in spec.split())


_INS = "ins_h:u8 ins_last_h:u8 ins_w:u8 ins_last_w:u8"
_PAD = "pad_top:u8 pad_bottom:u8 pad_left:u8 pad_right:u8"
_RES16 = "res_high:tl res_low:tl a_high:tl a_low:tl b_high:tl b_low:tl"

# (code, name, engine, parameter struct, fields, guide section)
KINDS: tuple[Kind, ...] = tuple(Kind(c, n, e, p, _f(f), s) for c, n, e, p, f, s in (
    (0x01, "gdma_copy_gmem", ENGINE_GDMA, None, "dst:tg src:tg ctrls:ctrl", "4.12"),
    (0x02, "gdma_copy_lmem", ENGINE_GDMA, None, "dst:tl src:tl", "4.13"),
    (0x03, "gdma_load", ENGINE_GDMA, None, "t:tl gaddr:u64 ctrls:ctrl", "4.14"),
    (0x04, "gdma_store", ENGINE_GDMA, None, "t:tl gaddr:u64 ctrls:ctrl", "4.15"),
    (0x05, "gdma_load_stride", ENGINE_GDMA, None, "t:tl gaddr:u64 stride:stride ctrls:ctrl", "4.16"),
    (0x06, "gdma_store_stride", ENGINE_GDMA, None, "t:tl gaddr:u64 stride:stride ctrls:ctrl", "4.17"),
    (0x07, "gdma_lrn_shift", ENGINE_GDMA, None, "dst:tl src:tl right_shift:bool lrn_step:int", "4.18"),
    (0x10, "tpu_mul", ENGINE_TPU, "bmk1880_mul_param_t",
     "res_high:tl res_low:tl a:tl b:tl rshift_width:int", "4.19"),
    (0x11, "tpu_mul_const", ENGINE_TPU, "bmk1880_mul_const_param_t",
     "res_high:tl res_low:tl a:tl b:c8 b_is_signed:bool rshift_width:int", "4.20"),
    (0x12, "tpu_mac", ENGINE_TPU, "bmk1880_mac_param_t",
     "res_high:tl res_low:tl res_is_int8:bool a:tl b:tl lshift_width:int rshift_width:int", "4.21"),
    (0x13, "tpu_mac_const", ENGINE_TPU, "bmk1880_mac_const_param_t",
     "res_high:tl res_low:tl res_is_int8:bool a:tl b:c8 b_is_signed:bool lshift_width:int "
     "rshift_width:int", "4.22"),
    (0x14, "tpu_add", ENGINE_TPU, "bmk1880_add_param_t", _RES16, "4.23"),
    (0x15, "tpu_add_const", ENGINE_TPU, "bmk1880_add_const_param_t",
     "res_high:tl res_low:tl a_high:tl a_low:tl b:c16 b_is_signed:bool", "4.24"),
    (0x16, "tpu_sub", ENGINE_TPU, "bmk1880_sub_param_t", _RES16, "4.25"),
    (0x17, "tpu_max", ENGINE_TPU, "bmk1880_max_param_t", "max:tl a:tl b:tl", "4.26"),
    (0x18, "tpu_max_const", ENGINE_TPU, "bmk1880_max_const_param_t",
     "max:tl a:tl b:c8 b_is_signed:bool", "EXT"),
    (0x19, "tpu_min", ENGINE_TPU, "bmk1880_min_param_t", "min:tl a:tl b:tl", "4.27"),
    (0x1A, "tpu_min_const", ENGINE_TPU, "bmk1880_min_const_param_t",
     "min:tl a:tl b:c8 b_is_signed:bool", "4.28"),
    (0x1B, "tpu_arith_shift", ENGINE_TPU, "bmk1880_arith_shift_param_t",
     "res_high:tl res_low:tl a_high:tl a_low:tl bits:tl", "4.29"),
    (0x1C, "tpu_and_int8", ENGINE_TPU, "bmk1880_and_int8_param_t", "res:tl a:tl b:tl", "4.30"),
    (0x1D, "tpu_and_int16", ENGINE_TPU, "bmk1880_and_int16_param_t", _RES16, "4.31"),
    (0x1E, "tpu_or_int8", ENGINE_TPU, "bmk1880_or_int8_param_t", "res:tl a:tl b:tl", "4.32"),
    (0x1F, "tpu_or_int16", ENGINE_TPU, "bmk1880_or_int16_param_t", _RES16, "4.33"),
    (0x20, "tpu_xor_int8", ENGINE_TPU, "bmk1880_xor_int8_param_t", "res:tl a:tl b:tl", "4.34"),
    (0x21, "tpu_xor_int16", ENGINE_TPU, "bmk1880_xor_int16_param_t", _RES16, "4.35"),
    (0x22, "tpu_copy", ENGINE_TPU, "bmk1880_copy_param_t", "dst:tl src:tl", "4.36"),
    (0x23, "tpu_copy_with_stride", ENGINE_TPU, "bmk1880_copy_with_stride_param_t",
     "dst:tl dst_stride:stride src:tl src_stride:stride", "4.37"),
    (0x24, "tpu_mdsum", ENGINE_TPU, "bmk1880_mdsum_param_t", "res_high:tl res_low:tl a:tl", "4.38"),
    (0x25, "tpu_lut", ENGINE_TPU, "bmk1880_lut_param_t", "ofmap:tl ifmap:tl table:tl", "4.39"),
    (0x26, "tpu_relu", ENGINE_TPU, "bmk1880_relu_param_t", "ofmap:tl ifmap:tl", "4.40"),
    (0x27, "tpu_conv", ENGINE_TPU, "bmk1880_conv_param_t",
     f"ofmap:tl ifmap:tl weight:tl bias:tl {_INS} {_PAD} stride_h:u8 stride_w:u8 dilation_h:u8 "
     "dilation_w:u8 relu_enable:bool rshift_width:int", "4.41"),
    (0x28, "tpu_winograd", ENGINE_TPU, "bmk1880_winograd_param_t",
     f"ofmap:tl ifmap:tl weight:tl bias:tl {_PAD} relu_enable:bool rshift_width:int", "4.42"),
    (0x29, "tpu_depthwise", ENGINE_TPU, "bmk1880_depthwise_param_t",
     f"ofmap:tl ifmap:tl weight:tl bias:tl {_INS} {_PAD} stride_h:u8 stride_w:u8 rshift_width:int", "4.43"),
    (0x2A, "tpu_max_pooling", ENGINE_TPU, "bmk1880_max_pooling_param_t",
     f"ofmap:tl ifmap:tl kh:u8 kw:u8 {_PAD} stride_h:u8 stride_w:u8", "4.44"),
    (0x2B, "tpu_avg_pooling", ENGINE_TPU, "bmk1880_avg_pooling_param_t",
     f"ofmap:tl ifmap:tl kh:u8 kw:u8 {_INS} {_PAD} stride_h:u8 stride_w:u8 avg_pooling_const:u8 "
     "rshift_width:int", "4.45"),
    (0x2C, "tpu_matrix_mac", ENGINE_TPU, "bmk1880_matrix_mac_param_t",
     "res:tl left:tl right:tl bias:tl lshift_width:int rshift_width:int res_is_int8:bool ctrls:ctrl", "4.46"),
    (0x2D, "tpu_matrix_mac_2", ENGINE_TPU, "bmk1880_matrix_mac_2_param_t", "res:tl left:tl right:tl", "4.47"),
    (0x70, "add_dependency", ENGINE_CTRL, None, "before:u32 after:u32", "3.10"),
))
BY_CODE = {k.code: k for k in KINDS}
BY_NAME = {k.name: k for k in KINDS}
DEPENDENCY = BY_NAME["add_dependency"]
assert len(BY_CODE) == len(KINDS) and len(BY_NAME) == len(KINDS)


# ---- CRC-8 ---------------------------------------------------------------------------------------
def _crc_table() -> tuple[int, ...]:
    out = []
    for b in range(256):
        v = b
        for _ in range(8):
            v = ((v << 1) ^ 0x07) & 0xFF if v & 0x80 else (v << 1) & 0xFF
        out.append(v)
    return tuple(out)


_CRC = _crc_table()


def crc8(data: bytes) -> int:
    v = 0
    for b in data:
        v = _CRC[v ^ b]
    return v


# ---- field encoding -------------------------------------------------------------------------------
def _u32s(vals) -> bytes:
    return struct.pack("<4I", *vals)


def encode_field(ftype: str, v) -> bytes:
    if ftype == "tl":
        if v is None:
            return b"\x00"
        flags = _TL_PRESENT | (_TL_ALIGNED if v.aligned else 0) | (_TL_STRIDE if v.stride is not None else 0) \
            | (_TL_MATRIX if v.dim == 2 else 0)
        out = struct.pack("<BBI", flags, v.fmt, v.laddr) + _u32s((v.n, v.c, v.h, v.w))
        return out + (_u32s(v.stride) if v.stride is not None else b"")
    if ftype == "tg":
        return struct.pack("<QB", v.addr, v.dim) + _u32s((v.n, v.c, v.h, v.w)) + _u32s(v.stride)
    if ftype == "stride":
        return _u32s(v.as4())
    if ftype in ("u8", "bool", "c8"):
        return bytes([int(v) & 0xFF])
    if ftype == "c16":
        return struct.pack("<H", v & 0xFFFF)
    if ftype == "int":
        return struct.pack("<i", v)
    if ftype in ("u32", "ctrl"):
        return struct.pack("<I", v)
    if ftype == "u64":
        return struct.pack("<Q", v)
    raise AssertionError(ftype)


def field_in_range(ftype: str, v) -> bool:
    """The Python value fits the field's encoding (checked before encoding, never after)."""
    if ftype == "bool":
        return isinstance(v, bool) or (isinstance(v, int) and v in (0, 1))
    lo_hi = _RANGES.get(ftype)
    return lo_hi is None or (isinstance(v, int) and not isinstance(v, bool) and lo_hi[0] <= v <= lo_hi[1])


class _Reader:
    def __init__(self, buf: bytes, pos: int, end: int):
        self.buf, self.pos, self.end = buf, pos, end

    def take(self, n: int, what: str) -> bytes:
        if self.pos + n > self.end:
            raise ValueError(f"payload ends inside field {what}")
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b


def _decode_field(r: _Reader, f: Field):
    t = f.type
    if t == "tl":
        flags = r.take(1, f.name)[0]
        if flags == 0:
            return None
        if not flags & _TL_PRESENT or flags & ~0x0F:
            raise ValueError(f"field {f.name}: tensor flags 0x{flags:02x} have reserved bits set")
        fmt, laddr = struct.unpack("<BI", r.take(5, f.name))
        n, c, h, w = struct.unpack("<4I", r.take(16, f.name))
        st = struct.unpack("<4I", r.take(16, f.name)) if flags & _TL_STRIDE else None
        return TL(fmt, 2 if flags & _TL_MATRIX else 4, n, c, h, w, laddr, bool(flags & _TL_ALIGNED), st)
    if t == "tg":
        addr, dim = struct.unpack("<QB", r.take(9, f.name))
        n, c, h, w = struct.unpack("<4I", r.take(16, f.name))
        return TG(addr, dim, n, c, h, w, struct.unpack("<4I", r.take(16, f.name)))
    if t == "stride":
        return stride_t(*struct.unpack("<4I", r.take(16, f.name)))
    if t in ("u8", "c8"):
        return r.take(1, f.name)[0]
    if t == "bool":
        v = r.take(1, f.name)[0]
        if v > 1:
            raise ValueError(f"field {f.name}: bool byte 0x{v:02x} is neither 0 nor 1")
        return bool(v)
    if t == "c16":
        return struct.unpack("<H", r.take(2, f.name))[0]
    if t == "int":
        return struct.unpack("<i", r.take(4, f.name))[0]
    if t in ("u32", "ctrl"):
        return struct.unpack("<I", r.take(4, f.name))[0]
    if t == "u64":
        return struct.unpack("<Q", r.take(8, f.name))[0]
    raise AssertionError(t)


def normalize_constants(kind: Kind, args: dict) -> dict:
    """c8/c16 fields as decoded (raw bytes) become the constant's value: s8/s16 if
    b_is_signed, else u8/u16 (4.20, 4.22, 4.24, 4.28)."""
    for f in kind.fields:
        if f.type in ("c8", "c16"):
            bits = 8 if f.type == "c8" else 16
            v = args[f.name] & ((1 << bits) - 1)
            if args.get("b_is_signed") and v >= 1 << (bits - 1):
                v -= 1 << bits
            args[f.name] = v
    return args


# ---- records --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Record:
    """One decoded command."""
    offset: int
    kind: Kind
    flags: int
    stream: int
    args: dict

    @property
    def sync(self) -> bool:
        return bool(self.flags & FLAG_SYNC)


def encode_payload(kind: Kind, args: dict) -> bytes:
    return b"".join(encode_field(f.type, args[f.name]) for f in kind.fields)


def encode_record(kind: Kind, args: dict, flags: int = 0, stream: int = NO_STREAM) -> bytes:
    payload = encode_payload(kind, args)
    if len(payload) > MAX_PAYLOAD:
        raise AssertionError(f"{kind.name}: payload of {len(payload)} bytes does not fit cmd_hdr_t.len")
    hdr = pack_header(engine_id=kind.engine, version=FORMAT_VERSION, kind=kind.code, flags=flags, stream=stream,
                      len=len(payload))
    hdr[_CRC_BYTE] = crc8(bytes(hdr) + payload)
    return bytes(hdr) + payload


def decode(buf: bytes) -> list[Record]:
    """Decode a whole command buffer (DecodeError on anything malformed)."""
    buf = bytes(buf)
    out: list[Record] = []
    pos = 0
    while pos < len(buf):
        where = f"command {len(out)} at offset 0x{pos:x}"
        if pos + HDR_SIZE > len(buf):
            raise DecodeError(f"{where}: buffer ends inside a cmd_hdr_t ({len(buf) - pos} of {HDR_SIZE} bytes)", pos)
        h = unpack_header(buf[pos:pos + HDR_SIZE])
        code, flags, stream, crc, ln = h["kind"], h["flags"], h["stream"], h["crc"], h["len"]
        if h["version"] != FORMAT_VERSION:
            raise DecodeError(f"{where}: format version {h['version']}, this model reads version {FORMAT_VERSION}", pos)
        kind = BY_CODE.get(code)
        if kind is None:
            raise DecodeError(f"{where}: unknown kind code 0x{code:02x}", pos)
        where = f"{where} ({kind.name})"
        if h["engine_id"] != kind.engine:
            raise DecodeError(f"{where}: engine_id {h['engine_id']}, the kind runs on engine {kind.engine}", pos)
        if flags & ~FLAG_SYNC:
            raise DecodeError(f"{where}: flags 0x{flags:02x} have reserved bits set", pos)
        end = pos + HDR_SIZE + ln
        if end > len(buf):
            raise DecodeError(f"{where}: len {ln} runs past the end of the buffer ({len(buf)} bytes)", pos)
        hdr = bytearray(buf[pos:pos + HDR_SIZE])
        hdr[_CRC_BYTE] = 0
        if crc8(bytes(hdr) + buf[pos + HDR_SIZE:end]) != crc:
            raise DecodeError(f"{where}: CRC-8 mismatch (corrupt command)", pos)
        r = _Reader(buf, pos + HDR_SIZE, end)
        try:
            args = {f.name: _decode_field(r, f) for f in kind.fields}
            if r.pos != end:
                raise ValueError(f"{end - r.pos} bytes left over after the last field")
        except ValueError as e:
            raise DecodeError(f"{where}: {e}", pos) from None
        out.append(Record(pos, kind, flags, stream, normalize_constants(kind, args)))
        pos = end
    return out


# ---- disassembly ------------------------------------------------------------------------------------
def _show(ftype: str, v) -> str:
    from .chip import ctrl_name
    if v is None:
        return "NULL"
    if ftype == "u64":
        return f"0x{v:x}"
    if ftype == "u32":
        return f"#{v}"
    if ftype == "ctrl":
        return ctrl_name(v)
    return str(v)


def disassemble(buf: bytes) -> list[str]:
    """One line per command: offset, engine, call, SYNC / stream, fields (DecodeError if bad)."""
    from .chip import ENGINE_NAMES
    out, index = [], 0
    for r in decode(buf):
        tag = "SYNC" if r.sync else "    "
        st = f"s{r.stream}" if r.stream != NO_STREAM else "  "
        num = f"#{index}" if r.kind is not DEPENDENCY else "  "
        index += r.kind is not DEPENDENCY
        fields = " ".join(f"{f.name}={_show(f.type, r.args[f.name])}" for f in r.kind.fields)
        out.append(f"0x{r.offset:06x} {num:>5} {ENGINE_NAMES[r.kind.engine]:<4} {tag} {st:>3} {r.kind.call} {fields}")
    return out
