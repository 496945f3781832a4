"""Load Vela output: raw `*_vela.npz`, `*_vela.tflite`, or a bare `.bin` of command words.

The driver payload (Vela's `cmd_data` / the `ethos_u_command_stream` tensor) is COP1 or COP2
(docs: vela-pipeline.md section 5, checked against Vela 5.2.0 output):

* COP1: LE words `'COP1'`, then driver-action tags (id in bits [7:0]): OPTCFG (1, followed by
  the CONFIG and ID words), NOP (5), CMDSTRM (2, length in words = bits [31:16] | [15:8] << 16,
  followed by the stream); READ_APB (3) and DUMP_SHRAM (4) carry no words and are ignored.
* COP2: `'COP2'`, u16 major 1, u16 minor, u64 size of the rest; entries of u32 type, u32 len.
  Type 1 (command stream) holds `VEUM` metadata (u32 len, 'VEUM', u16 1, u16 0, u32 20; then
  config, id, features, u64 staging usage), 0xFF padding to a 16-byte file offset, the stream.

Region convention (BASEP index): 0 read-only data, 1 scratch (arena), 2 scratch_fast,
3 inputs / 4 outputs with separate I/O regions (COP2 features == 2).

Tensors the stream does not read from the caller (checked against Vela 5.2.0 output):

* An input Vela folded into the command stream (TRANSPOSE_CONV's output-shape tensor) has no
  address: offset 2**64-1 in the raw .npz (stored as the float 2**64), -1 in a .tflite's
  OfflineMemoryAllocation. It is listed in `VelaModel.unused_inputs`, not in `inputs`.
* Variable (state) tensors, e.g. an LSTM's: the raw .npz lists them under `variable_*`
  (region, offset, shape, element size, quantization; one entry per use, so locations
  repeat); a .tflite marks them `is_variable` among the custom operator's inputs and outputs.
  They are `VelaModel.variables`, neither inputs nor outputs; the runner initialises them.
  With --separate-io-regions Vela places them in the input region (state in) and the
  output region (state out), yet its raw .npz says region 1 for all of them: the runner
  refuses such a raw model (the .tflite output says where they are).
"""
from __future__ import annotations

import io
import pickle
import struct
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["VelaFormatError", "Quantization", "TensorInfo", "VelaModel", "Payload",
           "parse_payload", "load", "UNPLACED_OFFSETS"]

COP1_MAGIC, COP2_MAGIC, VEUM_MAGIC = b"COP1", b"COP2", b"VEUM"
DA_OPTCFG, DA_CMDSTRM, DA_READ_APB, DA_DUMP_SHRAM, DA_NOP = 1, 2, 3, 4, 5
COP2_CMDSTRM = 1
COP2_FEATURE_SEPARATE_IO = 2          # VEUM features value with --separate-io-regions
REGION_READ_ONLY, REGION_SCRATCH, REGION_SCRATCH_FAST, REGION_INPUT, REGION_OUTPUT = range(5)
ETHOSU_CUSTOM_CODE = "ethos-u"
# Offsets Vela gives a tensor it did not place (raw .npz: 2**64-1, which the float64 array
# holds as 2**64); a .tflite's OfflineMemoryAllocation says -1.
UNPLACED_OFFSETS = (2 ** 64 - 1, 2 ** 64)


class VelaFormatError(Exception):
    """A file that is not valid Vela output; the message names the file and the problem."""


@dataclass(frozen=True)
class Quantization:
    quant_type: str                      # 'per_tensor' | 'per_channel' | 'none'
    scale: tuple[float, ...] = ()
    zero_point: tuple[int, ...] = ()


MAX_TENSOR_BYTES = 1 << 30   # one input/output tensor (the model keeps it in host memory)
MAX_FILE_BYTES = 1 << 32     # a model file


@dataclass(frozen=True)
class TensorInfo:
    name: str
    shape: tuple[int, ...]
    dtype: str                           # numpy dtype name
    region: int                          # BASEP index
    offset: int                          # byte offset in that region
    quantization: Quantization
    index: int = 0                       # position in Vela's list (inputs: unused ones included)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


@dataclass(frozen=True, eq=False)
class Payload:
    """A parsed driver payload (or bare stream: cop_format None, no header words)."""
    cop_format: str | None
    command_words: np.ndarray            # uint32, header stripped
    config_word: int | None = None
    id_word: int | None = None
    features: int | None = None          # COP2 only
    staging_usage: int | None = None     # COP2 only

    def __eq__(self, other) -> bool:
        if not isinstance(other, Payload):
            return NotImplemented
        return (np.array_equal(self.command_words, other.command_words)
                and (self.cop_format, self.config_word, self.id_word, self.features,
                     self.staging_usage) == (other.cop_format, other.config_word, other.id_word,
                                             other.features, other.staging_usage))

    __hash__ = None


@dataclass(frozen=True)
class VelaModel:
    path: str
    source: str                          # 'npz' | 'tflite' | 'bin'
    payload: Payload
    read_only: bytes = b""               # region 0 contents
    scratch_size: int = 0
    scratch_fast_size: int = 0
    inputs: tuple[TensorInfo, ...] = ()
    outputs: tuple[TensorInfo, ...] = ()
    unused_inputs: tuple[TensorInfo, ...] = ()   # inputs the stream never reads (no address)
    variables: tuple[TensorInfo, ...] = ()       # state tensors (see the module docstring)

    def __post_init__(self):
        if not (0 <= self.scratch_size < 1 << 40 and 0 <= self.scratch_fast_size < 1 << 40):
            raise VelaFormatError(f"{self.path}: scratch sizes {self.scratch_size}/{self.scratch_fast_size} "
                                  f"outside the 40-bit address space")
        for t in self.inputs + self.outputs + self.unused_inputs + self.variables:
            if not t.shape or any(d < 1 for d in t.shape):
                raise VelaFormatError(f"{self.path}: tensor {t.name} has shape {list(t.shape)}")
            if t.nbytes > MAX_TENSOR_BYTES:
                raise VelaFormatError(f"{self.path}: tensor {t.name} of {t.nbytes} bytes is larger than "
                                      f"the model's limit of {MAX_TENSOR_BYTES}")

    # Shortcuts into the payload
    @property
    def command_words(self) -> np.ndarray:
        return self.payload.command_words

    @property
    def config_word(self) -> int | None:
        return self.payload.config_word

    @property
    def id_word(self) -> int | None:
        return self.payload.id_word

    @property
    def cop_format(self) -> str | None:
        return self.payload.cop_format

    @property
    def accelerator(self) -> str | None:
        """E.g. 'ethos-u85-256', from CONFIG.product [31:28] (2 = U85) and macs_per_cc [3:0]."""
        c = self.config_word
        if c is None or c >> 28 != 2:
            return None
        return f"ethos-u85-{1 << (c & 0xF)}"


# --------------------------------------------------------------------------------------------
# Driver payload
# --------------------------------------------------------------------------------------------
def _words(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<u4").astype(np.uint32)


def parse_payload(data: bytes, what: str = "payload") -> Payload:
    """Parse a COP1 or COP2 driver payload; `what` names the source in error messages."""
    magic = data[:4]
    if magic == COP1_MAGIC:
        return _parse_cop1(data, what)
    if magic == COP2_MAGIC:
        return _parse_cop2(data, what)
    raise VelaFormatError(f"{what}: not a COP1/COP2 driver payload (starts with {magic!r})")


def _parse_cop1(data: bytes, what: str) -> Payload:
    if len(data) % 4:
        raise VelaFormatError(f"{what}: COP1 payload of {len(data)} bytes is not whole words")
    w = _words(data).tolist()
    config = ident = stream = None
    i = 1
    while i < len(w):
        tag = w[i]
        action = tag & 0xFF
        if action == DA_OPTCFG:
            if i + 2 >= len(w):
                raise VelaFormatError(f"{what}: truncated COP1 OPTCFG at byte {4 * i}")
            config, ident = w[i + 1], w[i + 2]
            i += 3
        elif action == DA_CMDSTRM:
            if stream is not None:
                raise VelaFormatError(f"{what}: second COP1 CMDSTRM at byte {4 * i}")
            n = tag >> 16 | ((tag >> 8) & 0xFF) << 16
            if i + 1 + n > len(w):
                raise VelaFormatError(f"{what}: COP1 CMDSTRM at byte {4 * i} announces {n} words, "
                                      f"only {len(w) - i - 1} present")
            stream = np.asarray(w[i + 1:i + 1 + n], dtype=np.uint32)
            i += 1 + n
        elif action in (DA_NOP, DA_READ_APB, DA_DUMP_SHRAM):
            i += 1
        else:
            raise VelaFormatError(f"{what}: unknown COP1 driver action 0x{tag:08x} at byte {4 * i}")
    if stream is None:
        raise VelaFormatError(f"{what}: COP1 payload has no command stream (CMDSTRM)")
    return Payload("COP1", stream, config, ident)


def _parse_cop2(data: bytes, what: str) -> Payload:
    def fail(msg: str):
        raise VelaFormatError(f"{what}: {msg}")

    if len(data) < 16:
        fail(f"COP2 header truncated ({len(data)} bytes)")
    major, _minor, size = struct.unpack_from("<HHQ", data, 4)
    if major != 1:
        fail(f"unsupported COP2 version {major}")
    if size != len(data) - 16:
        fail(f"COP2 header announces {size} bytes after the header, file has {len(data) - 16}")
    pos, found = 16, None
    while pos < len(data):
        if pos + 8 > len(data):
            fail(f"truncated COP2 entry header at byte {pos}")
        etype, elen = struct.unpack_from("<II", data, pos)
        body, end = pos + 8, pos + 8 + elen
        if end > len(data):
            fail(f"COP2 entry at byte {pos} runs past the end ({elen} bytes)")
        if etype == COP2_CMDSTRM:
            if found is not None:
                fail(f"second COP2 command-stream entry at byte {pos}")
            found = _parse_cop2_stream(data, body, end, fail)
        pos = end
    if found is None:
        fail("COP2 payload has no command-stream entry")
    return found


def _parse_cop2_stream(data: bytes, pos: int, end: int, fail) -> Payload:
    if pos + 36 > end:
        fail(f"COP2 VEUM metadata truncated at byte {pos}")
    mlen, magic, major, _minor, dlen = struct.unpack_from("<I4sHHI", data, pos)
    if magic != VEUM_MAGIC or major != 1 or dlen < 20 or mlen != 16 + dlen or pos + mlen > end:
        fail(f"bad COP2 VEUM metadata at byte {pos}")
    config, ident, features, staging = struct.unpack_from("<IIIQ", data, pos + 16)
    start = pos + mlen
    while start % 16 and start < end and data[start] == 0xFF:
        start += 1
    if start % 16 or (end - start) % 4:
        fail(f"COP2 command stream at byte {start} is misaligned or not whole words")
    return Payload("COP2", _words(data[start:end]), config, ident, features, staging)


# --------------------------------------------------------------------------------------------
# Raw .npz (vela-pipeline.md section 4)
# --------------------------------------------------------------------------------------------
_NPZ_KEYS = ("cmd_data", "weight_data", "scratch_size", "scratch_fast_size",
             "input_shape", "input_elem_size", "input_region", "input_offset", "input_quantization",
             "output_shape", "output_elem_size", "output_region", "output_offset",
             "output_quantization")


class _NumpyOnlyUnpickler(pickle.Unpickler):
    """The `*_quantization` entries are pickled object arrays of dicts; allow nothing else."""
    _ALLOWED = {("numpy", "ndarray"), ("numpy", "dtype"),
                ("numpy._core.multiarray", "_reconstruct"), ("numpy.core.multiarray", "_reconstruct"),
                ("numpy._core.multiarray", "scalar"), ("numpy.core.multiarray", "scalar")}

    def find_class(self, module, name):
        if (module, name) not in self._ALLOWED:
            raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name}")
        return super().find_class(module, name)


def _npz_member(zf: zipfile.ZipFile, key: str) -> np.ndarray:
    with zf.open(key + ".npy") as f:
        fp = io.BytesIO(f.read())
    version = np.lib.format.read_magic(fp)
    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                   else np.lib.format.read_array_header_2_0)
    shape, fortran, dtype = read_header(fp)
    if dtype.hasobject:
        arr = _NumpyOnlyUnpickler(fp).load()
        if not isinstance(arr, np.ndarray):
            raise ValueError("object entry is not an array")
        return arr
    fp.seek(0)
    return np.lib.format.read_array(fp, allow_pickle=False)


def _blob(a: np.ndarray) -> bytes:
    """A 0-d |S<n> blob. Use tobytes(): item() strips trailing NULs. An empty blob is stored
    as b'' with dtype S1, whose tobytes() is b'\\x00'."""
    if a.dtype.kind != "S" or a.ndim != 0:
        raise ValueError(f"expected a 0-d byte string, got {a.dtype} {a.shape}")
    if a.dtype.itemsize == 1 and a.item() == b"":
        return b""
    return a.tobytes()


def _quant(q) -> Quantization:
    if not isinstance(q, dict):
        return Quantization("none")
    scale = tuple(float(s) for s in np.atleast_1d(q.get("scale", ())))
    zp = tuple(int(z) for z in np.atleast_1d(q.get("zero_point", ())))
    return Quantization(str(q.get("quant_type", "none")), scale, zp)


def _npz_shape(row) -> tuple[int, ...]:
    """The npz pads shapes to 6-D with leading 1s; keep at least 4 dimensions (NHWC)."""
    shape = [int(s) for s in row]
    while len(shape) > 4 and shape[0] == 1:
        shape.pop(0)
    return tuple(shape)


def _npz_tensors(z: dict, kind: str) -> tuple:
    """The `<kind>_*` arrays of a raw .npz as TensorInfos (index = row)."""
    shapes = np.asarray(z[f"{kind}_shape"]).reshape(-1, 6)
    n = len(shapes)
    cols = [np.asarray(z[f"{kind}_{k}"]).reshape(-1) for k in ("elem_size", "region", "offset", "quantization")]
    if any(len(c) != n for c in cols):
        raise ValueError(f"{kind} arrays have different lengths")
    if any(int(e) not in (1, 2, 4, 8) for e in cols[0]):
        raise ValueError(f"{kind}_elem_size {cols[0].tolist()} is not 1, 2, 4 or 8")
    # The npz records the element size only; Vela's integer tensors are signed.
    return tuple(TensorInfo(f"{kind}{i}", _npz_shape(shapes[i]), f"int{8 * int(cols[0][i])}",
                            int(cols[1][i]), int(cols[2][i]), _quant(cols[3][i]), i)
                 for i in range(n))


_NPZ_VARIABLE_KEYS = tuple(f"variable_{k}" for k in ("shape", "elem_size", "region", "offset", "quantization"))


def _load_npz(path: Path) -> VelaModel:
    try:
        zf = zipfile.ZipFile(path)
    except Exception as e:  # BadZipFile, OSError, NotImplementedError (zip version), ...
        raise VelaFormatError(f"{path}: not a valid .npz archive ({e})") from None
    with zf:
        names = set(zf.namelist())
        missing = [k for k in _NPZ_KEYS if k + ".npy" not in names]
        if missing:
            raise VelaFormatError(f"{path}: not a Vela raw .npz (missing {', '.join(missing)})")
        has_vars = [k + ".npy" in names for k in _NPZ_VARIABLE_KEYS]
        if any(has_vars) and not all(has_vars):
            raise VelaFormatError(f"{path}: incomplete variable_* entries (need "
                                  f"{', '.join(_NPZ_VARIABLE_KEYS)})")
        try:
            z = {k: _npz_member(zf, k) for k in _NPZ_KEYS + (_NPZ_VARIABLE_KEYS if all(has_vars) else ())}
            payload = parse_payload(_blob(z["cmd_data"]), f"{path}: cmd_data")
            read_only = _blob(z["weight_data"])
            inputs = _npz_tensors(z, "input")
            outputs = _npz_tensors(z, "output")
            variables = _dedupe(_npz_tensors(z, "variable")) if all(has_vars) else ()
            scratch, fast = int(z["scratch_size"]), int(z["scratch_fast_size"])
        except VelaFormatError:
            raise
        except Exception as e:  # anything else in a damaged archive
            raise VelaFormatError(f"{path}: corrupt Vela .npz ({type(e).__name__}: {e})") from None
    used = tuple(t for t in inputs if t.offset not in UNPLACED_OFFSETS)
    unused = tuple(t for t in inputs if t.offset in UNPLACED_OFFSETS)
    return VelaModel(str(path), "npz", payload, read_only, scratch, fast, used, outputs, unused, variables)


def _dedupe(tensors: tuple) -> tuple:
    """One entry per state tensor: the .npz lists a variable once per use."""
    seen, out = set(), []
    for t in tensors:
        key = (t.region, t.offset, t.shape, t.dtype, t.quantization.zero_point)
        if key not in seen:
            seen.add(key)
            out.append(t)
    return tuple(out)


# --------------------------------------------------------------------------------------------
# *_vela.tflite
# --------------------------------------------------------------------------------------------
# TFLite TensorType -> numpy dtype name
_TFL_DTYPES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 6: "bool",
               7: "int16", 9: "int8", 10: "float64", 12: "uint64", 15: "uint32", 16: "uint16"}


@dataclass
class _TflTensor:
    name: str
    shape: tuple[int, ...]
    type: int
    buffer: int
    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    is_variable: bool = False


@dataclass
class _TflOp:
    opcode_index: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass
class _TflGraph:
    """The parts of a TFLite model the loader needs, independent of the flatbuffer reader."""
    custom_codes: list[str | None]            # per operator code
    subgraphs: list[tuple[list[_TflTensor], list[_TflOp]]]
    metadata: dict[str, int]                  # name -> buffer index
    buffers: list[bytes]


def _graph_from_vela_modules(data: bytes) -> _TflGraph:
    """Read with the flatbuffers classes generated from the TFLite schema (vela wheel)."""
    from ethosu.vela.tflite.Model import Model

    def ints(x):
        return tuple(int(v) for v in np.atleast_1d(x)) if not isinstance(x, int) else ()

    m = Model.GetRootAsModel(data, 0)
    codes = []
    for i in range(m.OperatorCodesLength()):
        cc = m.OperatorCodes(i).CustomCode()
        codes.append(cc.decode() if cc is not None else None)
    buffers = []
    for i in range(m.BuffersLength()):
        b = m.Buffers(i)
        if b.Offset() > 1:
            buffers.append(bytes(data[b.Offset():b.Offset() + b.Size()]))
        else:
            buffers.append(b.DataAsNumpy().tobytes() if b.DataLength() else b"")
    metadata = {m.Metadata(i).Name().decode(): m.Metadata(i).Buffer()
                for i in range(m.MetadataLength())}
    subgraphs = []
    for s in range(m.SubgraphsLength()):
        sg = m.Subgraphs(s)
        tensors = []
        for t in range(sg.TensorsLength()):
            T, q = sg.Tensors(t), sg.Tensors(t).Quantization()
            scale = (tuple(float(v) for v in np.atleast_1d(q.ScaleAsNumpy()))
                     if q and q.ScaleLength() else ())
            zp = ints(q.ZeroPointAsNumpy()) if q and q.ZeroPointLength() else ()
            tensors.append(_TflTensor((T.Name() or b"").decode(), ints(T.ShapeAsNumpy()), T.Type(),
                                      T.Buffer(), scale, zp, bool(T.IsVariable())))
        ops = [_TflOp(sg.Operators(o).OpcodeIndex(), ints(sg.Operators(o).InputsAsNumpy()),
                      ints(sg.Operators(o).OutputsAsNumpy())) for o in range(sg.OperatorsLength())]
        subgraphs.append((tensors, ops))
    return _TflGraph(codes, subgraphs, metadata, buffers)


class _FbTable:
    """Minimal flatbuffers table reader (little-endian, bounds-checked by struct)."""

    def __init__(self, buf: bytes, pos: int):
        self.buf, self.pos = buf, pos
        vt = pos - struct.unpack_from("<i", buf, pos)[0]
        self.vt, self.vt_len = vt, struct.unpack_from("<H", buf, vt)[0]

    def _at(self, slot: int) -> int | None:
        o = 4 + 2 * slot
        if o + 2 > self.vt_len:
            return None
        rel = struct.unpack_from("<H", self.buf, self.vt + o)[0]
        return self.pos + rel if rel else None

    def scalar(self, slot: int, fmt: str, default=0):
        p = self._at(slot)
        return default if p is None else struct.unpack_from("<" + fmt, self.buf, p)[0]

    def _deref(self, slot: int) -> int | None:
        p = self._at(slot)
        return None if p is None else p + struct.unpack_from("<I", self.buf, p)[0]

    def table(self, slot: int) -> "_FbTable | None":
        p = self._deref(slot)
        return None if p is None else _FbTable(self.buf, p)

    def _vector(self, slot: int) -> tuple[int, int]:
        p = self._deref(slot)
        return (0, 0) if p is None else (p + 4, struct.unpack_from("<I", self.buf, p)[0])

    def vector(self, slot: int, fmt: str) -> tuple:
        start, n = self._vector(slot)
        return struct.unpack_from(f"<{n}{fmt}", self.buf, start) if n else ()

    def bytes(self, slot: int) -> bytes:
        start, n = self._vector(slot)
        if start + n > len(self.buf):
            raise ValueError("byte vector runs past the end of the file")
        return bytes(self.buf[start:start + n])

    def string(self, slot: int) -> str | None:
        return None if self._deref(slot) is None else self.bytes(slot).decode()

    def tables(self, slot: int) -> list["_FbTable"]:
        start, n = self._vector(slot)
        return [_FbTable(self.buf, p + struct.unpack_from("<I", self.buf, p)[0])
                for p in range(start, start + 4 * n, 4)]


def _graph_from_own_reader(data: bytes) -> _TflGraph:
    """Same as _graph_from_vela_modules without the vela wheel. Slots from the TFLite schema:
    Model(operator_codes 1, subgraphs 2, buffers 4, metadata 6); OperatorCode(custom_code 1);
    SubGraph(tensors 0, operators 3); Tensor(shape 0, type 1, buffer 2, name 3, quantization 4,
    is_variable 5);
    QuantizationParameters(scale 2, zero_point 3); Operator(opcode_index 0, inputs 1,
    outputs 2); Buffer(data 0, offset 1, size 2); Metadata(name 0, buffer 1)."""
    m = _FbTable(data, struct.unpack_from("<I", data, 0)[0])
    codes = [c.string(1) for c in m.tables(1)]
    buffers = []
    for b in m.tables(4):
        off, size = b.scalar(1, "Q"), b.scalar(2, "Q")
        buffers.append(bytes(data[off:off + size]) if off > 1 else b.bytes(0))
    metadata = {md.string(0): md.scalar(1, "I") for md in m.tables(6)}
    subgraphs = []
    for sg in m.tables(2):
        tensors = []
        for t in sg.tables(0):
            q = t.table(4)
            tensors.append(_TflTensor(t.string(3) or "", t.vector(0, "i"), t.scalar(1, "b"),
                                      t.scalar(2, "I"), q.vector(2, "f") if q else (),
                                      q.vector(3, "q") if q else (), bool(t.scalar(5, "B"))))
        ops = [_TflOp(o.scalar(0, "I"), o.vector(1, "i"), o.vector(2, "i")) for o in sg.tables(3)]
        subgraphs.append((tensors, ops))
    return _TflGraph(codes, subgraphs, metadata, buffers)


def read_tflite_graph(data: bytes, use_vela: bool | None = None) -> _TflGraph:
    """`use_vela`: None = the vela wheel's modules if importable, else the own reader."""
    if use_vela is None:
        try:
            import ethosu.vela.tflite.Model  # noqa: F401
            use_vela = True
        except ImportError:
            use_vela = False
    return (_graph_from_vela_modules if use_vela else _graph_from_own_reader)(data)


def _load_tflite(path: Path, data: bytes, op_index: int = 0, use_vela: bool | None = None) -> VelaModel:
    try:
        g = read_tflite_graph(data, use_vela)
    except Exception as e:  # any reader failure on a damaged flatbuffer
        raise VelaFormatError(f"{path}: corrupt TFLite flatbuffer ({type(e).__name__}: {e})") from None

    def fail(msg: str):
        raise VelaFormatError(f"{path}: {msg}")

    found = [(s, op) for s, (_, ops) in enumerate(g.subgraphs) for op in ops
             if 0 <= op.opcode_index < len(g.custom_codes)
             and g.custom_codes[op.opcode_index] == ETHOSU_CUSTOM_CODE]
    if not found:
        fail(f"no '{ETHOSU_CUSTOM_CODE}' custom operator (not compiled by Vela?)")
    if not 0 <= op_index < len(found):
        fail(f"operator index {op_index} out of range ({len(found)} '{ETHOSU_CUSTOM_CODE}' operators)")
    sg_index, op = found[op_index]
    tensors = g.subgraphs[sg_index][0]
    if len(op.inputs) < 4:
        fail(f"'{ETHOSU_CUSTOM_CODE}' operator has {len(op.inputs)} inputs; expected command "
             "stream, read_only, scratch, scratch_fast, IFMs")
    if any(not 0 <= t < len(tensors) for t in op.inputs + op.outputs):
        fail(f"'{ETHOSU_CUSTOM_CODE}' operator refers to a tensor that does not exist")

    def tensor_bytes(t: int) -> bytes:
        b = tensors[t].buffer
        if not 0 <= b < len(g.buffers):
            fail(f"tensor {tensors[t].name!r} refers to missing buffer {b}")
        return g.buffers[b]

    def size(t: int) -> int:
        return int(np.prod(tensors[t].shape, dtype=np.int64)) if tensors[t].shape else 0

    cmd, ro, scratch, fast = op.inputs[:4]
    payload = parse_payload(tensor_bytes(cmd), f"{path}: tensor {tensors[cmd].name!r}")

    # OfflineMemoryAllocation: int32 [version, n_subgraphs, n_tensors, offset per tensor...]
    # (offsets of all subgraphs' tensors, concatenated; -1 = not planned)
    if "OfflineMemoryAllocation" not in g.metadata:
        fail("no OfflineMemoryAllocation metadata (cannot place IFMs/OFMs)")
    mb = g.metadata["OfflineMemoryAllocation"]
    alloc = np.frombuffer(g.buffers[mb] if 0 <= mb < len(g.buffers) else b"", dtype="<i4")
    base = 3 + sum(len(g.subgraphs[s][0]) for s in range(sg_index))
    if len(alloc) < base + len(tensors):
        fail("OfflineMemoryAllocation metadata is shorter than the tensor list")

    separate_io = payload.features is not None and bool(payload.features & COP2_FEATURE_SEPARATE_IO)

    def info(t: int, region: int, index: int, placed: bool = True) -> TensorInfo:
        T = tensors[t]
        if T.type not in _TFL_DTYPES:
            fail(f"tensor {T.name!r} has unsupported TFLite type {T.type}")
        offset = int(alloc[base + t])
        if offset < 0:
            if placed:
                fail(f"tensor {T.name!r} has no offline memory allocation")
            offset = UNPLACED_OFFSETS[0]
        qt = "none" if not T.scale else "per_tensor" if len(T.scale) == 1 else "per_channel"
        return TensorInfo(T.name, tuple(T.shape), _TFL_DTYPES[T.type], region, offset,
                          Quantization(qt, tuple(T.scale), tuple(T.zero_point)), index)

    # The custom operator's inputs and outputs include the state tensors (is_variable), which
    # live in the arena; an input without an allocation is one the stream never reads.
    in_region = REGION_INPUT if separate_io else REGION_SCRATCH
    ifms = [t for t in op.inputs[4:] if not tensors[t].is_variable]
    ins = [info(t, in_region, i, placed=False) for i, t in enumerate(ifms)]
    inputs = tuple(t for t in ins if t.offset not in UNPLACED_OFFSETS)
    unused = tuple(t for t in ins if t.offset in UNPLACED_OFFSETS)
    outputs = tuple(info(t, REGION_OUTPUT if separate_io else REGION_SCRATCH, i)
                    for i, t in enumerate(t for t in op.outputs if not tensors[t].is_variable))
    # With separate I/O regions Vela places the operator's inputs, state ones included, in
    # region 3 and its outputs in region 4 (state in and state out apart); else in the arena.
    seen, variables = set(), []
    for ts, region in ((op.inputs[4:], REGION_INPUT), (op.outputs, REGION_OUTPUT)):
        region = region if separate_io else REGION_SCRATCH
        for t in ts:
            if tensors[t].is_variable and (region, int(alloc[base + t])) not in seen:
                seen.add((region, int(alloc[base + t])))
                variables.append(info(t, region, len(variables)))
    return VelaModel(str(path), "tflite", payload, tensor_bytes(ro), size(scratch), size(fast),
                     inputs, outputs, unused, tuple(variables))


# --------------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------------
def load(path, op_index: int = 0) -> VelaModel:
    """Load Vela output by content: .npz (zip), .tflite (identifier 'TFL3'), otherwise a bare
    stream of little-endian words (or a COP1/COP2 payload dumped to a file).
    `op_index` selects the 'ethos-u' operator of a .tflite with several."""
    path = Path(path)
    try:
        st = path.stat()
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError
        if not stat.S_ISREG(st.st_mode):
            raise VelaFormatError(f"{path}: not a regular file")
        if st.st_size > MAX_FILE_BYTES:
            raise VelaFormatError(f"{path}: {st.st_size} bytes is larger than the limit of {MAX_FILE_BYTES}")
        data = path.read_bytes()
    except FileNotFoundError:
        raise VelaFormatError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise VelaFormatError(f"{path}: is a directory") from None
    except OSError as e:
        raise VelaFormatError(f"{path}: cannot read ({e.strerror or e})") from None
    if not data:
        raise VelaFormatError(f"{path}: empty file")
    if data[:4] == b"PK\x03\x04" or path.suffix == ".npz":
        return _load_npz(path)
    if data[4:8] == b"TFL3" or path.suffix == ".tflite":
        return _load_tflite(path, data, op_index)
    if data[:4] in (COP1_MAGIC, COP2_MAGIC):
        return VelaModel(str(path), "bin", parse_payload(data, str(path)))
    if path.suffix != ".bin":
        raise VelaFormatError(f"{path}: not a Vela output (.npz, .tflite) or .bin command stream")
    if len(data) % 4:
        raise VelaFormatError(f"{path}: {len(data)} bytes is not a whole number of 32-bit words")
    return VelaModel(str(path), "bin", Payload(None, _words(data)))
