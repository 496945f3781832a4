"""Feature-map addressing of the Ethos-U85 (TRM r0p0 issue 05, 2.1.1, 3.6.5, 3.8).

* :class:`FeatureMap` holds the state of one feature map (IFM, IFM2 or OFM) as plain ints,
  with :meth:`FeatureMap.from_registers` building it from a register-state mapping using
  the TRM command/field names (``NPU_SET_IFM_BASE0.addr`` ...).
* :func:`element_address_in_region` is the literal (scalar) TRM function and
  :func:`write_ofm_address_ref` the literal address part of write_ofm; they are the
  reference path for the tests.
* :func:`element_addresses` / :func:`block_addresses` / :func:`ofm_block_addresses` are the
  vectorised equivalents (int64 numpy arrays of byte addresses).
* :func:`read_fmap` / :func:`write_fmap` gather/scatter a [H, W, C] block through a backdoor
  byte accessor, issuing **one call per contiguous byte run** so that a memory model can log
  one transaction per run.  An accessor with ``read_span(lo, mask)`` /
  ``write_span(lo, mask, buf)`` (the bytes lo + i where mask[i]; one run per stretch) or
  ``read_runs(starts, lengths)`` / ``write_runs(starts, lengths, data)``, or a
  ``port``/``region``/``channel`` triple whose port is a :class:`tlm.ethos_u85.memory.DataPort` (as
  tlm.ethos_u85.ops.common._RegionMem), gets all runs of a block in one call instead - the same runs.
  :func:`read_fmap_ref` / :func:`write_fmap_ref` are the straightforward (sort-based, one
  call per run) versions, kept as the reference the fast path is tested against
  (``reference=True`` routes read_fmap/write_fmap through them; the device passes its
  DataPort's ``reference``).

Addresses: ``base`` is whatever the caller stores in the FeatureMap - region offsets as in the
registers, or absolute addresses when ``from_registers(..., basep=...)`` resolved
``BASEP[region]``.  Address arithmetic is done in int64 and is not wrapped to 40 bits; an
address >= 2**40 is left for the memory model to reject.

TRM-vs-digest decisions:

* NHWC channel term: the TRM pseudocode has ``addr += x*stride_x + c``; TRM 2.1.1 gives
  ``c*ElemSize``.  We follow 2.1.1 (``c*element_size``, digest E-07): the pseudocode form
  would make 16/32/64-bit channels overlap; the two agree for 8-bit.
* tile3x1: the TRM code selects tile 2 when ``y >= height[1]`` and subtracts ``height[1]``
  (HEIGHT1 behaves as an absolute row), although the register table calls HEIGHT1 "Tile 1
  height" and the figure is missing.  We follow the code literally (digest E-08).
* write_ofm reverse C: the TRM text has a stray ``break`` before ``c = ofm_depth - 1 - c``;
  the flip is applied (digest E-05).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from .arith import (ActType, Precision, Unpredictable, ifm_zero_point, number_of_bits, sign_extend,
                    truncate)
from . import isa
from .isa import upper_enum
from ..core.memo import Memo
from .memory import SpanRuns, mask_runs as _mask_runs

__all__ = [
    "Format", "Storage", "Reverse", "Transpose", "AllowedPerms", "FeatureMap",
    "element_address_in_region", "write_ofm_address_ref", "tile_select", "element_addresses",
    "block_addresses", "ofm_coordinates", "check_ofm_write", "ofm_block_addresses",
    "contiguous_runs", "read_fmap", "write_fmap", "read_element_ref", "write_element_ref",
    "read_fmap_ref", "write_fmap_ref",
]

MAX_BLOCK_HEIGHT = 128
MAX_BLOCK_WIDTH = 128
MAX_BLOCK_DEPTH = 1024


# TRM enums, derived from the ISA table (tlm/isa.py)
Format = upper_enum("Format", isa.activation_format)
Storage = upper_enum("Storage", isa.activation_storage)
Reverse = upper_enum("Reverse", isa.activation_reverse, "activation_reverse (OFM only).")
Transpose = upper_enum("Transpose", isa.activation_transpose, "activation_transpose (OFM only); 4, 5 reserved.")


class AllowedPerms(IntEnum):
    """allowed_perms_t (write_ofm argument)."""
    RTRANS = 0
    ALL = 1


def _unpred(cond, msg):
    if not cond:
        raise Unpredictable(msg)


def _reg(regs, cmd: str, field: str, default: int = 0) -> int:
    """Field ``field`` of command ``cmd`` from a register-state object.

    Accepts ``regs[cmd][field]`` (mapping of mappings), ``regs[cmd].field`` (objects),
    ``regs["cmd.field"]`` (flat mapping) and ``regs.cmd.field`` (attributes).  Missing
    entries read as ``default`` (register reset value 0)."""
    flat = f"{cmd}.{field}"
    if isinstance(regs, Mapping):
        if flat in regs:
            return int(regs[flat])
        entry = regs.get(cmd)
    else:
        try:
            entry = regs[cmd]
        except (KeyError, TypeError, IndexError):
            entry = getattr(regs, cmd, None)
    if entry is None:
        return default
    if isinstance(entry, Mapping):
        return int(entry.get(field, default))
    if isinstance(entry, (int, np.integer)):
        return int(entry)
    return int(getattr(entry, field, default))


def _reg_reader(regs):
    """A fast ``_reg`` for tlm.ethos_u85.isa register state (``regs.field(cmd, field)``), else ``_reg``."""
    field = getattr(regs, "field", None)
    if field is None or isinstance(regs, Mapping) or not callable(field):
        return _reg

    def fast(_regs, cmd: str, name: str, default: int = 0) -> int:
        try:
            return int(field(cmd, name))
        except (KeyError, AttributeError, TypeError):
            return _reg(_regs, cmd, name, default)
    return fast


@dataclass(frozen=True)
class FeatureMap:
    """One feature map as the NPU_SET_{IFM,IFM2,OFM}_* registers describe it.

    Sizes are the real values (``*_M1 + 1``), not the register encodings.
    ``height/width/depth`` are the tensor shape where the registers give it (OFM: the shape
    *before* transposition; IFM: only depth from IFM_DEPTH_M1); ``blk_*`` are the
    OFM_BLK_*_M1 + 1 values (OFM only; used for write_ofm legality checks).
    Tile registers (``width0``, ``height0``, ``height1``) describe the memory tensor, i.e.
    after transposition for an OFM.
    """
    base: tuple = (0, 0, 0, 0)              # BASE0..BASE3 .addr (+ BASEP[region] if resolved)
    stride_x: int = 0                       # STRIDE_X.addr (bytes)
    stride_y: int = 0                       # STRIDE_Y.addr
    stride_c: int = 0                       # STRIDE_C.addr
    width0: int = 1                         # WIDTH0_M1.width_m1 + 1
    height0: int = 1                        # HEIGHT0_M1.height_m1 + 1
    height1: int = 1                        # HEIGHT1_M1.height_m1 + 1
    precision: int = Precision.B8           # PRECISION.activation_precision
    act_type: int = ActType.UNSIGNED        # PRECISION.activation_type
    fmt: int = Format.NHWC                  # PRECISION.activation_format
    storage: int = Storage.TILE2X2          # PRECISION.activation_storage
    region: int = 0                         # REGION.region (FIFO number when chained)
    zero_point: int = 0                     # ZERO_POINT.zero_point (raw 16 bits)
    transpose: int = Transpose.HWC          # OFM_PRECISION.activation_transpose
    reverse: int = Reverse.NONE             # OFM_PRECISION.activation_reverse
    scale_mode: int = 0                     # OFM_PRECISION.scale_mode
    height: int | None = None
    width: int | None = None
    depth: int | None = None
    blk_height: int | None = None
    blk_width: int | None = None
    blk_depth: int | None = None

    def __post_init__(self):
        b = tuple(int(v) for v in self.base)
        if len(b) != 4:
            raise ValueError("FeatureMap.base needs BASE0..BASE3")
        object.__setattr__(self, "base", b)

    @property
    def bits(self) -> int:
        return number_of_bits(self.precision)

    @property
    def element_size(self) -> int:
        return self.bits // 8

    @classmethod
    def from_registers(cls, regs, which: str = "IFM", basep=None) -> "FeatureMap":
        """Build from register state.  ``which`` is "IFM", "IFM2" or "OFM".

        ``regs`` maps TRM command names to their decoded fields, e.g.
        ``regs["NPU_SET_IFM_BASE0"]["addr"]`` or ``regs["NPU_SET_IFM_BASE0"].addr``.
        ``basep``: optional BASEP[0..7] (sequence or mapping region -> address); when given
        (and storage is not chained/none) BASEP[region] is added to the four bases, so the
        addresses produced are absolute (memory_read: ``addr += BASEP[region]``).
        """
        w = which.upper()
        if w not in ("IFM", "IFM2", "OFM"):
            raise ValueError(f"which must be IFM, IFM2 or OFM, not {which!r}")
        raw = getattr(regs, "_raw", None)              # a tlm.ethos_u85.isa register state: memoised
        if raw is not None and basep is None and isinstance(raw, Mapping):
            try:
                key = (w, tuple([raw[n] for n in _FM_REGS[w]]))
            except KeyError:
                key = None
            if key is not None:
                fm = _FM_CACHE.get(key)
                if fm is None:
                    fm = _FM_CACHE.put(key, cls._from_registers(regs, w, None))
                return fm
        return cls._from_registers(regs, w, basep)

    @classmethod
    def _from_registers(cls, regs, w: str, basep) -> "FeatureMap":
        _reg = _reg_reader(regs)
        p = f"NPU_SET_{w}_"
        prec = p + "PRECISION"
        region = _reg(regs, p + "REGION", "region")
        storage = _reg(regs, prec, "activation_storage")
        base = [_reg(regs, f"{p}BASE{i}", "addr") for i in range(4)]
        if basep is not None and storage in (Storage.TILE2X2, Storage.TILE3X1):
            base = [b + int(basep[region]) for b in base]
        kw = dict(
            base=tuple(base),
            stride_x=_reg(regs, p + "STRIDE_X", "addr"),
            stride_y=_reg(regs, p + "STRIDE_Y", "addr"),
            stride_c=_reg(regs, p + "STRIDE_C", "addr"),
            width0=_reg(regs, p + "WIDTH0_M1", "width_m1") + 1,
            height0=_reg(regs, p + "HEIGHT0_M1", "height_m1") + 1,
            height1=_reg(regs, p + "HEIGHT1_M1", "height_m1") + 1,
            precision=_reg(regs, prec, "activation_precision"),
            act_type=_reg(regs, prec, "activation_type"),
            fmt=_reg(regs, prec, "activation_format"),
            storage=storage,
            region=region,
            zero_point=_reg(regs, p + "ZERO_POINT", "zero_point"),
        )
        if w == "OFM":
            kw.update(
                transpose=_reg(regs, prec, "activation_transpose"),
                reverse=_reg(regs, prec, "activation_reverse"),
                scale_mode=_reg(regs, prec, "scale_mode"),
                height=_reg(regs, "NPU_SET_OFM_HEIGHT_M1", "height_m1") + 1,
                width=_reg(regs, "NPU_SET_OFM_WIDTH_M1", "width_m1") + 1,
                depth=_reg(regs, "NPU_SET_OFM_DEPTH_M1", "depth_m1") + 1,
                blk_height=_reg(regs, "NPU_SET_OFM_BLK_HEIGHT_M1", "height_m1") + 1,
                blk_width=_reg(regs, "NPU_SET_OFM_BLK_WIDTH_M1", "width_m1") + 1,
                blk_depth=_reg(regs, "NPU_SET_OFM_BLK_DEPTH_M1", "depth_m1") + 1,
            )
        elif w == "IFM":
            kw.update(depth=_reg(regs, "NPU_SET_IFM_DEPTH_M1", "depth_m1") + 1)
        return cls(**kw)


def _fm_regs(w: str) -> tuple:
    p = f"NPU_SET_{w}_"
    names = [p + n for n in ("REGION", "PRECISION", "BASE0", "BASE1", "BASE2", "BASE3", "STRIDE_X",
                             "STRIDE_Y", "STRIDE_C", "WIDTH0_M1", "HEIGHT0_M1", "HEIGHT1_M1", "ZERO_POINT")]
    if w == "OFM":
        names += ["NPU_SET_OFM_HEIGHT_M1", "NPU_SET_OFM_WIDTH_M1", "NPU_SET_OFM_DEPTH_M1",
                  "NPU_SET_OFM_BLK_HEIGHT_M1", "NPU_SET_OFM_BLK_WIDTH_M1", "NPU_SET_OFM_BLK_DEPTH_M1"]
    elif w == "IFM":
        names.append("NPU_SET_IFM_DEPTH_M1")
    return tuple(names)


# The NPU_SET commands FeatureMap.from_registers reads (the memo key: their raw payloads).
_FM_REGS = {w: _fm_regs(w) for w in ("IFM", "IFM2", "OFM")}
_FM_CACHE = Memo(4096)


# ----------------------------------------------------------------------------------------
# Reference (literal, scalar) path
# ----------------------------------------------------------------------------------------

def element_address_in_region(base, stride_y, stride_x, stride_c, width0, height, storage, precision,
                              fmt, y, x, c, *, check: bool = True) -> int:
    """Literal TRM element_address_in_region (3.6.5), except NHWC uses ``c*element_size``
    (TRM 2.1.1; the pseudocode's bare ``+ c`` is E-07)."""
    tile = 0
    _unpred(storage != Storage.NONE, "element_address_in_region: storage none")
    if storage == Storage.TILE2X2:
        if x >= width0:
            x -= width0
            tile += 1
        if y >= height[tile]:
            y -= height[tile]
            tile += 2
    elif storage == Storage.TILE3X1:
        if y >= height[1]:
            y -= height[1]
            tile = 2
        elif y >= height[0]:
            y -= height[0]
            tile = 1
    else:
        raise Unpredictable("element_address_in_region: chained storage has no address")
    addr = base[tile] + y * stride_y
    element_size = number_of_bits(precision) // 8
    if fmt == Format.NHWC:
        if check:
            _unpred(base[tile] % element_size == 0, "NHWC base not element aligned")
            _unpred(stride_x % element_size == 0, "NHWC stride_x not element aligned")
            _unpred(stride_y % element_size == 0, "NHWC stride_y not element aligned")
        addr += x * stride_x + c * element_size                 # E-07 (TRM 2.1.1)
    elif fmt == Format.NHCWB16:
        if check:
            _unpred(base[tile] % 16 == 0, "NHCWB16 base not 16-byte aligned")
            _unpred(stride_c % (16 * element_size) == 0, "NHCWB16 stride_c not 16*elem aligned")
            _unpred(stride_y % (16 * element_size) == 0, "NHCWB16 stride_y not 16*elem aligned")
        addr += (c >> 4) * stride_c + (16 * x + (c & 15)) * element_size
    else:
        raise Unpredictable(f"reserved activation_format {fmt}")
    return addr


def _fm_address_ref(fm: FeatureMap, y, x, c, check=True) -> int:
    return element_address_in_region(fm.base, fm.stride_y, fm.stride_x, fm.stride_c, fm.width0,
                                     (fm.height0, fm.height1), fm.storage, fm.precision, fm.fmt,
                                     y, x, c, check=check)


def write_ofm_address_ref(fm: FeatureMap, y: int, x: int, c: int,
                          allowed_perms: int = AllowedPerms.ALL, microblock_depth: int | None = None,
                          check: bool = True):
    """Literal address part of TRM write_ofm(y, x, c, value, allowed_perms).

    Returns the byte address, or None when storage is none (no write).  Chained storage raises
    ValueError (the value goes to a FIFO, not to memory).  ``microblock_depth`` is needed only
    for the reverse-C legality check."""
    precision, fmt, storage = fm.precision, fm.fmt, fm.storage
    reverse, transpose = fm.reverse, fm.transpose
    ofm_height, ofm_width, ofm_depth = fm.height, fm.width, fm.depth
    if check and ofm_height is not None:
        _unpred(0 <= y < ofm_height and 0 <= x < ofm_width and 0 <= c < ofm_depth,
                "write_ofm: coordinate outside the OFM")
    if storage == Storage.CHAINED:
        if check:
            _unpred(reverse == Reverse.NONE and transpose == Transpose.HWC, "write_ofm: chained with reverse/transpose")
        raise ValueError("chained OFM: value goes to the chaining FIFO")
    if storage == Storage.NONE:
        return None
    if reverse != Reverse.NONE:
        if check:
            _unpred(transpose == Transpose.HWC, "write_ofm: reverse with transpose")
            _unpred(allowed_perms == AllowedPerms.ALL, "write_ofm: reverse needs allowed_perms_all")
            _unpred(precision != Precision.B64, "write_ofm: reverse of 64-bit output")
        if reverse == Reverse.H:
            y = ofm_height - 1 - y
        elif reverse == Reverse.W:
            x = ofm_width - 1 - x
        elif reverse == Reverse.C:
            if check and microblock_depth is not None:
                mb_depth = max(16, microblock_depth)
                if ofm_depth % mb_depth != 0:
                    _unpred(fmt == Format.NHWC, "write_ofm: reverse C needs NHWC")
                    _unpred(fm.blk_depth is None or fm.blk_depth <= 16, "write_ofm: reverse C needs blk_depth <= 16")
            c = ofm_depth - 1 - c                                # E-05: stray 'break' ignored
    if check:
        bh, bw, bd = fm.blk_height, fm.blk_width, fm.blk_depth
        if fmt == Format.NHCWB16 and bw is not None:
            if transpose in (Transpose.HCW, Transpose.CHW):
                _unpred(bw % 16 == 0, "write_ofm: NHCWB16 transpose needs blk_width % 16 == 0")
            if transpose in (Transpose.CWH, Transpose.WCH):
                _unpred(bh % 16 == 0, "write_ofm: NHCWB16 transpose needs blk_height % 16 == 0")
        _unpred(transpose in (Transpose.HWC, Transpose.HCW, Transpose.CHW) or allowed_perms == AllowedPerms.ALL,
                "write_ofm: transpose not permitted")
        _unpred(transpose == Transpose.HWC or precision != Precision.B64, "write_ofm: transpose of 64-bit output")
        if bw is not None:
            if transpose == Transpose.WHC:
                _unpred(bw <= MAX_BLOCK_HEIGHT and bh <= MAX_BLOCK_WIDTH, "write_ofm: WHC block limits")
            elif transpose == Transpose.HCW:
                _unpred(bd <= MAX_BLOCK_WIDTH and bw <= MAX_BLOCK_DEPTH, "write_ofm: HCW block limits")
            elif transpose == Transpose.CWH:
                _unpred(bd <= MAX_BLOCK_HEIGHT and bh <= MAX_BLOCK_DEPTH, "write_ofm: CWH block limits")
            elif transpose == Transpose.CHW:
                _unpred(bd <= MAX_BLOCK_HEIGHT and bh <= MAX_BLOCK_WIDTH and bw <= MAX_BLOCK_DEPTH,
                        "write_ofm: CHW block limits")
            elif transpose == Transpose.WCH:
                _unpred(bw <= MAX_BLOCK_HEIGHT and bd <= MAX_BLOCK_WIDTH and bh <= MAX_BLOCK_DEPTH,
                        "write_ofm: WCH block limits")
    if transpose == Transpose.HWC:
        pass
    elif transpose == Transpose.WHC:
        y, x = x, y
    elif transpose == Transpose.HCW:
        x, c = c, x
    elif transpose == Transpose.CWH:
        y, c = c, y
    elif transpose == Transpose.CHW:
        y, c, x = c, x, y
    elif transpose == Transpose.WCH:
        y, x, c = x, c, y
    else:
        raise Unpredictable(f"reserved activation_transpose {transpose}")
    return _fm_address_ref(fm, y, x, c, check)


def _mem_read_fn(mem):
    return mem.read if hasattr(mem, "read") else mem


def _mem_write_fn(mem):
    return mem.write if hasattr(mem, "write") else mem


def read_element_ref(mem, fm: FeatureMap, y: int, x: int, c: int, *, subtract_zero_point: bool = False,
                     check: bool = True) -> int:
    """Literal element read: element_address_in_region + memory_read(precision, type)
    (+ the read_ifm zero-point subtraction when subtract_zero_point)."""
    addr = _fm_address_ref(fm, y, x, c, check)
    n = fm.element_size
    raw = int.from_bytes(bytes(_mem_read_fn(mem)(addr, n)), "little")
    value = truncate(raw, 8 * n, fm.act_type)
    if subtract_zero_point:
        value -= ifm_zero_point(fm.zero_point, fm.precision, fm.act_type, check)
    return value


def write_element_ref(mem, fm: FeatureMap, y: int, x: int, c: int, value: int,
                      allowed_perms: int = AllowedPerms.ALL, microblock_depth: int | None = None,
                      check: bool = True) -> None:
    """Literal write_ofm memory path: truncate, reverse/transpose, address, little-endian write."""
    value = truncate(int(value), fm.bits, fm.act_type)
    addr = write_ofm_address_ref(fm, y, x, c, allowed_perms, microblock_depth, check)
    if addr is None:
        return
    _mem_write_fn(mem)(addr, (value & ((1 << fm.bits) - 1)).to_bytes(fm.element_size, "little"))


# ----------------------------------------------------------------------------------------
# Vectorised path
# ----------------------------------------------------------------------------------------

def tile_select(fm: FeatureMap, y, x):
    """Vectorised tile selection: returns (tile, y_in_tile, x_in_tile) as int64 arrays."""
    y = np.asarray(y, dtype=np.int64)
    x = np.asarray(x, dtype=np.int64)
    y, x = np.broadcast_arrays(y, x)
    if fm.storage == Storage.TILE2X2:
        right = x >= fm.width0
        x = np.where(right, x - fm.width0, x)
        h = np.where(right, np.int64(fm.height1), np.int64(fm.height0))   # height[tile], tile in {0, 1}
        bottom = y >= h
        y = np.where(bottom, y - h, y)
        tile = right.astype(np.int64) + 2 * bottom.astype(np.int64)
    elif fm.storage == Storage.TILE3X1:
        t2 = y >= fm.height1                                               # E-08: literal
        t1 = ~t2 & (y >= fm.height0)
        y = y - np.where(t2, np.int64(fm.height1), np.where(t1, np.int64(fm.height0), np.int64(0)))
        tile = 2 * t2.astype(np.int64) + t1.astype(np.int64)
        x = x.copy()
    elif fm.storage == Storage.NONE:
        raise Unpredictable("element_address_in_region: storage none")
    else:
        raise Unpredictable("element_address_in_region: chained storage has no address")
    return tile, y, x


def _address_terms(fm: FeatureMap, y, x, c, check: bool):
    """(yx, cterm): element_address_in_region(y, x, c) == yx + cterm, where yx has the
    broadcast shape of (y, x) and cterm the shape of c (tiles depend on y and x only)."""
    tile, yy, xx = tile_select(fm, y, x)
    cc = np.asarray(c, dtype=np.int64)
    es = fm.element_size
    fmt = fm.fmt
    if check and tile.size and cc.size:                 # as the broadcast block is non-empty
        if fmt == Format.NHWC:
            bad = [t for t in range(4) if fm.base[t] % es]
        elif fmt == Format.NHCWB16:
            bad = [t for t in range(4) if fm.base[t] % 16]
        else:
            bad = []
        if bad:
            used = set(int(t) for t in np.unique(tile))
            for t in sorted(used):
                b = int(fm.base[t])
                if fmt == Format.NHWC:
                    _unpred(b % es == 0, "NHWC base not element aligned")
                elif fmt == Format.NHCWB16:
                    _unpred(b % 16 == 0, "NHCWB16 base not 16-byte aligned")
        if fmt == Format.NHWC:
            _unpred(fm.stride_x % es == 0 and fm.stride_y % es == 0, "NHWC strides not element aligned")
        elif fmt == Format.NHCWB16:
            _unpred(fm.stride_c % (16 * es) == 0 and fm.stride_y % (16 * es) == 0,
                    "NHCWB16 strides not 16*element aligned")
    bases = np.asarray(fm.base, dtype=np.int64)
    yx = bases[tile]
    yx += yy * np.int64(fm.stride_y)
    if fmt == Format.NHWC:
        yx += xx * np.int64(fm.stride_x)
        cterm = cc * np.int64(es)                                          # E-07
    elif fmt == Format.NHCWB16:
        yx += xx * np.int64(16 * es)
        cterm = (cc >> 4) * np.int64(fm.stride_c) + (cc & 15) * np.int64(es)
    else:
        raise Unpredictable(f"reserved activation_format {fmt}")
    return yx, cterm


def element_addresses(fm: FeatureMap, y, x, c, *, check: bool = True) -> np.ndarray:
    """Vectorised element_address_in_region for memory coordinates (y, x, c) (broadcast).
    For an OFM these are coordinates *after* transpose/reverse (see ofm_block_addresses)."""
    yx, cterm = _address_terms(fm, y, x, c, check)
    return yx + cterm


def _grid(ys, xs, cs):
    ys = np.asarray(ys, dtype=np.int64).reshape(-1, 1, 1)
    xs = np.asarray(xs, dtype=np.int64).reshape(1, -1, 1)
    cs = np.asarray(cs, dtype=np.int64).reshape(1, 1, -1)
    return ys, xs, cs


def block_addresses(fm: FeatureMap, ys, xs, cs, *, check: bool = True) -> np.ndarray:
    """Byte addresses of the block ys x xs x cs (1-D coordinate vectors, e.g. np.arange
    ranges, or index vectors for broadcast/upscale), shape [len(ys), len(xs), len(cs)]."""
    y, x, c = _grid(ys, xs, cs)
    return element_addresses(fm, y, x, c, check=check)


def check_ofm_write(fm: FeatureMap, allowed_perms: int = AllowedPerms.ALL,
                    microblock_depth: int | None = None) -> None:
    """The coordinate-independent write_ofm asserts (reverse/transpose legality).
    Checks that need OFM_BLK_* are skipped when fm.blk_* is None."""
    if fm.storage == Storage.CHAINED:
        _unpred(fm.reverse == Reverse.NONE and fm.transpose == Transpose.HWC,
                "write_ofm: chained with reverse/transpose")
        return
    if fm.storage == Storage.NONE:
        return
    _unpred(fm.transpose in set(int(t) for t in Transpose), f"reserved activation_transpose {fm.transpose}")
    _unpred(fm.reverse in (0, 1, 2, 3), f"bad activation_reverse {fm.reverse}")
    if fm.reverse != Reverse.NONE:
        _unpred(fm.transpose == Transpose.HWC, "write_ofm: reverse with transpose")
        _unpred(allowed_perms == AllowedPerms.ALL, "write_ofm: reverse needs allowed_perms_all")
        _unpred(fm.precision != Precision.B64, "write_ofm: reverse of 64-bit output")
        _unpred(fm.height is not None, "write_ofm: reverse needs the OFM shape")
        if fm.reverse == Reverse.C and microblock_depth is not None:
            mb_depth = max(16, microblock_depth)
            if fm.depth % mb_depth != 0:
                _unpred(fm.fmt == Format.NHWC, "write_ofm: reverse C needs NHWC")
                _unpred(fm.blk_depth is None or fm.blk_depth <= 16, "write_ofm: reverse C needs blk_depth <= 16")
    t = fm.transpose
    bh, bw, bd = fm.blk_height, fm.blk_width, fm.blk_depth
    if fm.fmt == Format.NHCWB16 and bw is not None:
        if t in (Transpose.HCW, Transpose.CHW):
            _unpred(bw % 16 == 0, "write_ofm: NHCWB16 transpose needs blk_width % 16 == 0")
        if t in (Transpose.CWH, Transpose.WCH):
            _unpred(bh % 16 == 0, "write_ofm: NHCWB16 transpose needs blk_height % 16 == 0")
    _unpred(t in (Transpose.HWC, Transpose.HCW, Transpose.CHW) or allowed_perms == AllowedPerms.ALL,
            "write_ofm: transpose not permitted")
    _unpred(t == Transpose.HWC or fm.precision != Precision.B64, "write_ofm: transpose of 64-bit output")
    if bw is not None:
        limits = {
            Transpose.WHC: bw <= MAX_BLOCK_HEIGHT and bh <= MAX_BLOCK_WIDTH,
            Transpose.HCW: bd <= MAX_BLOCK_WIDTH and bw <= MAX_BLOCK_DEPTH,
            Transpose.CWH: bd <= MAX_BLOCK_HEIGHT and bh <= MAX_BLOCK_DEPTH,
            Transpose.CHW: bd <= MAX_BLOCK_HEIGHT and bh <= MAX_BLOCK_WIDTH and bw <= MAX_BLOCK_DEPTH,
            Transpose.WCH: bw <= MAX_BLOCK_HEIGHT and bd <= MAX_BLOCK_WIDTH and bh <= MAX_BLOCK_DEPTH,
        }
        _unpred(limits.get(t, True), f"write_ofm: block limits for transpose {Transpose(t).name}")


def ofm_coordinates(fm: FeatureMap, y, x, c):
    """write_ofm coordinate mapping: OFM (y, x, c) -> memory (y, x, c) after reverse then
    transpose (vectorised, broadcast).  No legality checks (see check_ofm_write)."""
    y, x, c = (np.asarray(v, dtype=np.int64) for v in (y, x, c))
    y, x, c = np.broadcast_arrays(y, x, c)
    return _ofm_coordinates(fm, y, x, c)


def _ofm_coordinates(fm: FeatureMap, y, x, c):
    """ofm_coordinates without the broadcast (grid vectors stay on their own axes)."""
    if fm.reverse == Reverse.H:
        y = fm.height - 1 - y
    elif fm.reverse == Reverse.W:
        x = fm.width - 1 - x
    elif fm.reverse == Reverse.C:
        c = fm.depth - 1 - c                                     # E-05
    t = fm.transpose
    if t == Transpose.HWC:
        return y, x, c
    if t == Transpose.WHC:
        return x, y, c
    if t == Transpose.HCW:
        return y, c, x
    if t == Transpose.CWH:
        return c, x, y
    if t == Transpose.CHW:                                       # t=y; y=c; c=x; x=t
        return c, y, x
    if t == Transpose.WCH:                                       # t=y; y=x; x=c; c=t
        return x, c, y
    raise Unpredictable(f"reserved activation_transpose {t}")


def ofm_block_addresses(fm: FeatureMap, ys, xs, cs, *, allowed_perms: int = AllowedPerms.ALL,
                        microblock_depth: int | None = None, check: bool = True) -> np.ndarray:
    """Byte addresses for writing the OFM block ys x xs x cs (coordinates in the OFM, before
    reverse/transpose), shape [len(ys), len(xs), len(cs)]."""
    y, x, c = _grid(ys, xs, cs)
    if check:
        check_ofm_write(fm, allowed_perms, microblock_depth)
        if fm.height is not None and y.size and x.size and c.size:
            _unpred(int(y.min()) >= 0 and int(y.max()) < fm.height and int(x.min()) >= 0 and int(x.max()) < fm.width
                    and int(c.min()) >= 0 and int(c.max()) < fm.depth, "write_ofm: coordinate outside the OFM")
    my, mx, mc = _ofm_coordinates(fm, y, x, c)
    return element_addresses(fm, my, mx, mc, check=check)


# ----------------------------------------------------------------------------------------
# Gather / scatter through a byte accessor
# ----------------------------------------------------------------------------------------

def contiguous_runs(byte_addrs) -> list[tuple[int, int]]:
    """Split a 1-D array of byte addresses into maximal runs of consecutive addresses
    (a[i+1] == a[i] + 1).  Returns [(start_index, stop_index), ...]."""
    a = np.asarray(byte_addrs, dtype=np.int64).ravel()
    if a.size == 0:
        return []
    breaks = np.flatnonzero(np.diff(a) != 1) + 1
    starts = np.concatenate(([0], breaks))
    stops = np.concatenate((breaks, [a.size]))
    return list(zip(starts.tolist(), stops.tolist()))


def _byte_addresses(addrs: np.ndarray, es: int) -> np.ndarray:
    return (addrs.reshape(-1, 1) + np.arange(es, dtype=np.int64)).ravel()


def read_fmap_ref(mem, fm: FeatureMap, ys, xs, cs, *, subtract_zero_point: bool = False,
                  check: bool = True) -> np.ndarray:
    """Reference version of :func:`read_fmap` (byte addresses sorted with np.unique, one
    ``mem.read`` call per run).

    Gather the block ys x xs x cs of a feature map ([H, W, C] array).

    ``mem`` is either an object with ``read(addr, n) -> bytes`` (e.g. tlm.ethos_u85.memory.Memory's
    backdoor) or such a callable.  The distinct bytes needed are read in ascending address
    order with one call per maximal contiguous run.

    Values are sign- or zero-extended according to ``fm.act_type`` (memory_read with
    precision/type) as int64; unsigned b64 gives uint64.  ``subtract_zero_point`` applies the
    read_ifm/read_ifm2 zero point (with its asserts).
    """
    if fm.storage == Storage.CHAINED:
        raise ValueError("chained feature map: read from the chaining FIFO")
    addrs = block_addresses(fm, ys, xs, cs, check=check)
    shape = addrs.shape
    es = fm.element_size
    ba = _byte_addresses(addrs, es)
    read = _mem_read_fn(mem)
    if ba.size:
        uniq, inv = np.unique(ba, return_inverse=True)
        buf = np.empty(uniq.size, dtype=np.uint8)
        for s, e in contiguous_runs(uniq):
            data = read(int(uniq[s]), e - s)
            buf[s:e] = np.frombuffer(bytes(data), dtype=np.uint8)
        raw = buf[inv.ravel()].reshape(-1, es)
    else:
        raw = np.zeros((0, es), dtype=np.uint8)
    padded = np.zeros((raw.shape[0], 8), dtype=np.uint8)
    padded[:, :es] = raw
    u = padded.view("<u8").reshape(shape)
    if fm.act_type == ActType.UNSIGNED:
        vals = u.astype(np.uint64) if es == 8 else u.astype(np.int64)
    else:
        vals = sign_extend(u.astype(np.int64), 8 * es)
    if subtract_zero_point:
        zp = ifm_zero_point(fm.zero_point, fm.precision, fm.act_type, check)
        vals = vals.astype(np.int64) - np.int64(zp) if zp else vals
    return vals


def write_fmap_ref(mem, fm: FeatureMap, ys, xs, cs, values, *, allowed_perms: int = AllowedPerms.ALL,
                   microblock_depth: int | None = None, check: bool = True) -> None:
    """Reference version of :func:`write_fmap` (stable argsort of the byte addresses, one
    ``mem.write`` call per run).

    Scatter ``values`` ([len(ys), len(xs), len(cs)], or broadcastable) to the OFM block
    ys x xs x cs, as write_ofm does: truncate to the OFM width, apply reverse/transpose
    (coordinates are OFM coordinates before transposition), little-endian store.

    ``mem`` is an object with ``write(addr, data: bytes)`` or such a callable.  One call per
    maximal contiguous byte run, in ascending address order; where elements alias the same
    bytes, the later element (in (y, x, c) order) is written later, as sequential write_ofm
    calls would do.  storage none: no write.  Chained storage raises ValueError
    (the caller pushes into the FIFO).
    """
    if fm.storage == Storage.NONE:
        if check:
            check_ofm_write(fm, allowed_perms, microblock_depth)
        return
    if fm.storage == Storage.CHAINED:
        raise ValueError("chained feature map: push values into the chaining FIFO")
    addrs = ofm_block_addresses(fm, ys, xs, cs, allowed_perms=allowed_perms,
                                microblock_depth=microblock_depth, check=check)
    es = fm.element_size
    v = np.broadcast_to(np.asarray(values), addrs.shape)
    if v.dtype == np.uint64:
        u = v.astype("<u8")
    else:
        u = v.astype(np.int64).astype("<u8")                    # two's complement, modulo 2**64
    data = np.ascontiguousarray(u).reshape(-1, 1).view(np.uint8)[:, :es].ravel()
    ba = _byte_addresses(addrs, es)
    write = _mem_write_fn(mem)
    if ba.size == 0:
        return
    # Ascending address order; the stable sort keeps element order among aliased bytes, so a
    # later element overwrites an earlier one exactly as sequential write_ofm calls would.
    order = np.argsort(ba, kind="stable")
    sba = ba[order]
    sdata = data[order]
    for s, e in contiguous_runs(sba):
        write(int(sba[s]), sdata[s:e].tobytes())


# ----------------------------------------------------------------------------------------
# Fast gather / scatter
# ----------------------------------------------------------------------------------------
# The bytes a block touches are described as a boolean mask over their address span
# [lo, lo + span): the runs (one transaction each) are the mask's True stretches, found
# without sorting, and the data moves as one span buffer.
#
# * Structured path: ys, xs, cs are ascending unit-step ranges and the OFM has no
#   reverse/transpose (every block the kernel ops read or write).  The block splits into
#   at most 4 tile rectangles x 3 channel segments (NHCWB16: leading partial brick, whole
#   bricks, trailing partial brick), each an affine strided view of the span, so the mask,
#   the gather and the scatter are strided copies: no per-element address arrays at all.
# * Array path (any index vectors): element addresses as one int64 array, marked in an
#   element-level mask when they are element aligned.
# * Sparse spans (> _DENSE_FACTOR x the bytes needed), unaligned element addresses (array
#   path) and aliasing writes use the reference algorithm (byte addresses sorted), still
#   with all runs of the block in one batched call.
_DENSE_FACTOR = 4
_DENSE_SLACK = 4096


class _Access:
    """Batched byte access over whatever ``mem`` is, in order of preference: an object with
    ``read_span(lo, mask)``/``write_span(lo, mask, buf)`` (and ``read_runs``/``write_runs``),
    a tlm.ethos_u85.memory.DataPort behind a ``port``/``region``/``channel`` accessor (the shape of
    tlm.ethos_u85.ops.common._RegionMem), an object with ``read_runs``/``write_runs``, or plain
    ``read``/``write`` (one call per run)."""
    __slots__ = ("mem", "port", "region", "channel")

    def __init__(self, mem):
        self.mem = mem
        port = getattr(mem, "port", None)
        if port is not None and hasattr(port, "read_span") and hasattr(mem, "region") and hasattr(mem, "channel"):
            self.port, self.region, self.channel = port, mem.region, mem.channel
        else:
            self.port = self.region = self.channel = None

    def read_runs(self, starts, lengths) -> np.ndarray:
        if self.port is not None:
            return self.port.read_runs(self.region, starts, lengths, self.channel)
        f = getattr(self.mem, "read_runs", None)
        if f is not None:
            return np.asarray(f(starts, lengths), dtype=np.uint8)
        read = _mem_read_fn(self.mem)
        out = np.empty(int(np.sum(lengths)), np.uint8)
        pos = 0
        for a, n in zip(starts.tolist(), lengths.tolist()):
            out[pos:pos + n] = np.frombuffer(bytes(read(a, n)), dtype=np.uint8)
            pos += n
        return out

    def write_runs(self, starts, lengths, data) -> None:
        if self.port is not None:
            return self.port.write_runs(self.region, starts, lengths, data, self.channel)
        f = getattr(self.mem, "write_runs", None)
        if f is not None:
            return f(starts, lengths, data)
        write = _mem_write_fn(self.mem)
        pos = 0
        for a, n in zip(starts.tolist(), lengths.tolist()):
            write(a, data[pos:pos + n].tobytes())
            pos += n

    def read_span(self, lo: int, mask: np.ndarray, runs=None) -> np.ndarray:
        """uint8 buffer over [lo, lo + mask.size) holding the masked bytes (read as runs).
        ``runs``: the mask's tlm.ethos_u85.memory.SpanRuns when known (cached layouts)."""
        if self.port is not None:
            return self.port.read_span(self.region, lo, mask, self.channel, runs=runs)
        f = getattr(self.mem, "read_span", None)
        if f is not None:
            return np.asarray(f(lo, mask), dtype=np.uint8)
        st, sp = _mask_runs(mask)
        buf = np.zeros(mask.size, np.uint8)
        buf[mask] = self.read_runs(st + lo, sp - st)
        return buf

    def write_span(self, lo: int, mask: np.ndarray, buf: np.ndarray, runs=None) -> None:
        if self.port is not None:
            return self.port.write_span(self.region, lo, mask, buf, self.channel, runs=runs)
        f = getattr(self.mem, "write_span", None)
        if f is not None:
            return f(lo, mask, buf)
        st, sp = _mask_runs(mask)
        self.write_runs(st + lo, sp - st, buf[mask])


def _value_dtype(fm: FeatureMap) -> np.dtype:
    es = fm.element_size
    return np.dtype(f"<u{es}" if fm.act_type == ActType.UNSIGNED else f"<i{es}")


def _out_dtype(fm: FeatureMap) -> np.dtype:
    return np.dtype(np.uint64) if fm.act_type == ActType.UNSIGNED and fm.element_size == 8 else np.dtype(np.int64)


def _zero_point(fm: FeatureMap, vals: np.ndarray, subtract_zero_point: bool, check: bool,
                dtype=None) -> np.ndarray:
    """Zero-point subtraction (in place on vals, a fresh array of the result type) and the
    conversion to ``dtype`` if one was asked for."""
    if subtract_zero_point:
        zp = ifm_zero_point(fm.zero_point, fm.precision, fm.act_type, check)
        if zp:
            if vals.dtype == np.uint64:
                vals = vals.astype(np.int64)
            vals -= vals.dtype.type(zp)
    if dtype is not None and vals.dtype != dtype:
        vals = vals.astype(dtype)
    return vals


def _unit_range(v):
    """(start, stop) if v is a non-empty ascending unit-step integer vector, else None."""
    if isinstance(v, range):
        return (v.start, v.stop) if v.step == 1 and len(v) else None
    a = np.asarray(v)
    if a.ndim != 1 or not a.size or a.dtype.kind not in "iu":
        return None
    s0 = int(a[0])
    if a.size > 1 and (int(a[-1]) - s0 != a.size - 1 or not bool((np.diff(a) == 1).all())):
        return None
    return s0, s0 + a.size


def _check_alignment(fm: FeatureMap, used_tiles) -> None:
    """The element_address_in_region asserts for the tiles a (non-empty) block uses."""
    es = fm.element_size
    for t in sorted(set(used_tiles)):
        b = int(fm.base[t])
        if fm.fmt == Format.NHWC:
            _unpred(b % es == 0, "NHWC base not element aligned")
        elif fm.fmt == Format.NHCWB16:
            _unpred(b % 16 == 0, "NHCWB16 base not 16-byte aligned")
    if fm.fmt == Format.NHWC:
        _unpred(fm.stride_x % es == 0 and fm.stride_y % es == 0, "NHWC strides not element aligned")
    elif fm.fmt == Format.NHCWB16:
        _unpred(fm.stride_c % (16 * es) == 0 and fm.stride_y % (16 * es) == 0,
                "NHCWB16 strides not 16*element aligned")


class _Piece:
    """One affine part of a block: output [oy0:oy1, ox0:ox1, oc0:oc0 + nb*k] stored at
    addr + y*sy + x*sx + b*sb + j*es (y < rh, x < rw, brick b < nb, channel j < k)."""
    __slots__ = ("tile", "oy0", "oy1", "ox0", "ox1", "oc0", "nb", "k", "addr", "sy", "sx", "sb")

    def __init__(self, tile, oy0, oy1, ox0, ox1, oc0, nb, k, addr, sy, sx, sb):
        self.tile, self.oy0, self.oy1, self.ox0, self.ox1 = tile, oy0, oy1, ox0, ox1
        self.oc0, self.nb, self.k, self.addr, self.sy, self.sx, self.sb = oc0, nb, k, addr, sy, sx, sb

    def extent(self, es: int) -> tuple[int, int]:
        lo = hi = self.addr
        for n, st in ((self.oy1 - self.oy0, self.sy), (self.ox1 - self.ox0, self.sx), (self.nb, self.sb)):
            d = (n - 1) * st
            if d < 0:
                lo += d
            else:
                hi += d
        return lo, hi + self.k * es

    def mem_view(self, buf: np.ndarray, lo: int, dtype, es: int) -> np.ndarray:
        """[rh, rw, nb, k] view of the span buffer (dtype elements; bool/uint8 bytes if es == 1)."""
        return np.ndarray((self.oy1 - self.oy0, self.ox1 - self.ox0, self.nb, self.k), dtype=dtype, buffer=buf,
                          offset=self.addr - lo, strides=(self.sy, self.sx, self.sb, es))

    def mask_view(self, mask: np.ndarray, lo: int, es: int) -> np.ndarray:
        return np.ndarray((self.oy1 - self.oy0, self.ox1 - self.ox0, self.nb, self.k * es), dtype=bool,
                          buffer=mask, offset=self.addr - lo, strides=(self.sy, self.sx, self.sb, 1))

    def out_view(self, out: np.ndarray) -> np.ndarray:
        """[rh, rw, nb, k] view of the block array ``out`` [h, w, d]."""
        shape = (self.oy1 - self.oy0, self.ox1 - self.ox0, self.nb, self.k)
        s = out.strides
        if out.flags.c_contiguous and out.size:             # (np.ndarray is cheaper than as_strided)
            return np.ndarray(shape, out.dtype, buffer=out, strides=(s[0], s[1], self.k * s[2], s[2]),
                              offset=self.oy0 * s[0] + self.ox0 * s[1] + self.oc0 * s[2])
        o = out[self.oy0:self.oy1, self.ox0:self.ox1, self.oc0:self.oc0 + self.nb * self.k]
        s = o.strides
        return np.lib.stride_tricks.as_strided(o, shape=shape, strides=(s[0], s[1], self.k * s[2], s[2]))


def _pieces(fm: FeatureMap, yr, xr, cr):
    """The block yr x xr x cr ((start, stop) ranges, memory coordinates) as _Pieces, or None
    when the storage/format has no affine layout here (the array path raises its errors)."""
    if fm.storage not in (Storage.TILE2X2, Storage.TILE3X1) or fm.fmt not in (Format.NHWC, Format.NHCWB16):
        return None
    y0, y1 = yr
    x0, x1 = xr
    c0, c1 = cr
    rects = []                                  # (tile, oy0, oy1, ox0, ox1, y_mem0, x_mem0)
    if fm.storage == Storage.TILE2X2:           # as tile_select
        w0 = fm.width0
        for xa, xb, xsub, tx, h in ((x0, min(x1, w0), 0, 0, fm.height0), (max(x0, w0), x1, w0, 1, fm.height1)):
            if xa >= xb:
                continue
            for ya, yb, ysub, ty in ((y0, min(y1, h), 0, 0), (max(y0, h), y1, h, 2)):
                if ya < yb:
                    rects.append((tx + ty, ya - y0, yb - y0, xa - x0, xb - x0, ya - ysub, xa - xsub))
    else:                                       # TILE3X1, E-08 literal
        h0, h1 = fm.height0, fm.height1
        for ya, yb, ysub, t in ((y0, min(y1, h0, h1), 0, 0), (max(y0, h0), min(y1, h1), h0, 1),
                                (max(y0, h1), y1, h1, 2)):
            if ya < yb:
                rects.append((t, ya - y0, yb - y0, 0, x1 - x0, ya - ysub, x0))
    es = fm.element_size
    if fm.fmt == Format.NHWC:
        sx = fm.stride_x
        segs = [(0, 1, c1 - c0, c0 * es, 0)]    # (oc0, bricks, channels per brick, offset, brick stride)
    else:
        sx = 16 * es
        sc = fm.stride_c
        segs = []
        f0, f1 = -(-c0 // 16) * 16, (c1 // 16) * 16
        if f0 >= f1:                            # within one brick, or two partial bricks
            for b in range(c0 >> 4, ((c1 - 1) >> 4) + 1):
                a, e = max(c0, 16 * b), min(c1, 16 * b + 16)
                segs.append((a - c0, 1, e - a, b * sc + (a & 15) * es, 0))
        else:
            if c0 < f0:
                segs.append((0, 1, f0 - c0, (c0 >> 4) * sc + (c0 & 15) * es, 0))
            segs.append((f0 - c0, (f1 - f0) // 16, 16, (f0 >> 4) * sc, sc))
            if f1 < c1:
                segs.append((f1 - c0, 1, c1 - f1, (f1 >> 4) * sc, 0))
    sy = fm.stride_y
    out = []
    for tile, oy0, oy1, ox0, ox1, ym, xm in rects:
        base = int(fm.base[tile]) + ym * sy + xm * sx
        for oc0, nb, k, off, sb in segs:
            out.append(_Piece(tile, oy0, oy1, ox0, ox1, oc0, nb, k, base + off, sy, sx, sb))
    return out


class _Layout:
    """A structured block's byte layout, computed once per (feature map, block, checks):
    its pieces, span [lo, hi), byte mask, the mask's runs (tlm.ethos_u85.memory.SpanRuns) and whether
    no two elements share a byte.  Cached only after the block's asserts passed."""
    __slots__ = ("pieces", "lo", "hi", "mask", "runs", "disjoint")


_LAYOUTS: dict = {}
_LAYOUT_ENTRIES = 1024
_LAYOUT_MAX_SPAN = 1 << 23          # bytes: larger masks are rebuilt per call
_LAYOUT_MAX_BYTES = 1 << 26         # all cached masks and runs (runs counted with their batches)
_LAYOUT_BYTES = [0]


def _layout(fm: FeatureMap, yr, xr, cr, check: bool, write):
    """The cached _Layout of a structured block (None: not dense, no affine layout - the
    array path handles it).  ``write``: None for a read, else (allowed_perms,
    microblock_depth) - the write_ofm asserts run (once) in their usual order."""
    key = (fm, yr, xr, cr, check, write)
    lay = _LAYOUTS.get(key, False)
    if lay is not False:
        return lay
    es = fm.element_size
    if write is not None and not (fm.reverse == Reverse.NONE and fm.transpose == Transpose.HWC):
        pieces = None
    else:
        pieces = _pieces(fm, yr, xr, cr)
    lay = None
    if pieces is not None:
        n = (yr[1] - yr[0]) * (xr[1] - xr[0]) * (cr[1] - cr[0])
        lo, hi = _span_of(pieces, es)
        if hi - lo <= _DENSE_FACTOR * n * es + _DENSE_SLACK:
            if check:
                if write is not None:                   # as ofm_block_addresses, in its order
                    check_ofm_write(fm, write[0], write[1])
                    if fm.height is not None:
                        _unpred(yr[0] >= 0 and yr[1] - 1 < fm.height and xr[0] >= 0 and xr[1] - 1 < fm.width
                                and cr[0] >= 0 and cr[1] - 1 < fm.depth, "write_ofm: coordinate outside the OFM")
                _check_alignment(fm, (p.tile for p in pieces))
            mask = np.zeros(hi - lo, dtype=bool)
            for p in pieces:
                p.mask_view(mask, lo, es)[...] = True
            mask.setflags(write=False)
            lay = _Layout()
            lay.pieces, lay.lo, lay.hi, lay.mask = pieces, lo, hi, mask
            lay.disjoint = int(np.count_nonzero(mask)) == n * es
            lay.runs = SpanRuns(*_mask_runs(mask))
    if lay is None or lay.hi - lay.lo <= _LAYOUT_MAX_SPAN:
        size = 0 if lay is None else lay.mask.size + 4 * (lay.runs.starts.nbytes + lay.runs.stops.nbytes)
        while _LAYOUTS and (len(_LAYOUTS) >= _LAYOUT_ENTRIES or _LAYOUT_BYTES[0] + size > _LAYOUT_MAX_BYTES):
            old = _LAYOUTS.pop(next(iter(_LAYOUTS)))
            if old is not None:
                _LAYOUT_BYTES[0] -= old.mask.size + 4 * (old.runs.starts.nbytes + old.runs.stops.nbytes)
        _LAYOUTS[key] = lay
        _LAYOUT_BYTES[0] += size
    return lay


def _copy4(dst: np.ndarray, src: np.ndarray) -> None:
    """dst[...] = src for two [rh, rw, nb, k] piece views (a truncating cast).  When both
    hold integers of the same size with each run of k elements contiguous, the runs are
    copied as single k*itemsize-byte (void) items: the same bytes, without numpy's
    per-run loop overhead (NHCWB16 bricks are 16-element runs)."""
    it = dst.dtype.itemsize
    if (src.dtype.itemsize == it and dst.dtype.kind in "iu" and src.dtype.kind in "iu"
            and dst.strides[3] == it and src.strides[3] == it and src.shape == dst.shape and dst.size):
        v = np.dtype((np.void, it * dst.shape[3]))
        try:
            np.copyto(dst.view(v)[..., 0], src.view(v)[..., 0])
            return
        except (ValueError, TypeError):                 # a view numpy cannot form: plain copy
            pass
    dst[...] = src


def _span_of(pieces, es: int):
    ext = [p.extent(es) for p in pieces]
    return min(e[0] for e in ext), max(e[1] for e in ext)


def _dense_layout(flat: np.ndarray, es: int):
    """(lo, m, rel) for the array path, or None: the span [lo, lo + m*es) holds every element,
    rel is each element's index in it."""
    lo = int(flat.min())
    hi = int(flat.max()) + es
    span = hi - lo
    if span > _DENSE_FACTOR * flat.size * es + _DENSE_SLACK:
        return None
    rel = flat - lo
    if es > 1:
        if lo % es or (rel & (es - 1)).any():
            return None
        rel >>= es.bit_length() - 1
    return lo, span // es, rel


def _byte_mask(emask: np.ndarray, es: int) -> np.ndarray:
    return emask if es == 1 else np.repeat(emask, es)


def read_fmap(mem, fm: FeatureMap, ys, xs, cs, *, subtract_zero_point: bool = False,
              check: bool = True, dtype=None, out=None, reference: bool = False) -> np.ndarray:
    """Gather the block ys x xs x cs of a feature map ([H, W, C] array).

    ``mem`` is either an object with ``read(addr, n) -> bytes`` (e.g. tlm.ethos_u85.memory.Memory's
    backdoor) or such a callable, or a batched accessor (module docstring).  The distinct
    bytes needed are read in ascending address order with one call (or one run) per maximal
    contiguous run.

    Values are sign- or zero-extended according to ``fm.act_type`` (memory_read with
    precision/type) as int64; unsigned b64 gives uint64.  ``subtract_zero_point`` applies the
    read_ifm/read_ifm2 zero point (with its asserts).  ``dtype`` (optional): the result type
    instead (e.g. int16/int32, or float64 for an exact BLAS product); the values are
    converted straight from memory, so the caller picks a type that holds them (with the
    zero point subtracted: the subtraction is done in that type).  ``out`` (optional): a
    [len(ys), len(xs), len(cs)] array (or view) the values are stored into and returned;
    its dtype is the result type.  ``reference``: take :func:`read_fmap_ref` instead.
    """
    if out is not None:
        dtype = out.dtype
    if reference:
        v = read_fmap_ref(mem, fm, ys, xs, cs, subtract_zero_point=subtract_zero_point, check=check)
        return _into(v if dtype is None else v.astype(dtype), out)
    if fm.storage == Storage.CHAINED:
        raise ValueError("chained feature map: read from the chaining FIFO")
    es = fm.element_size
    dt = _value_dtype(fm)
    acc = _Access(mem)
    yr, xr, cr = _unit_range(ys), _unit_range(xs), _unit_range(cs)
    lay = _layout(fm, yr, xr, cr, check, None) if yr and xr and cr else None
    if lay is not None:
        pieces, lo = lay.pieces, lay.lo
        if True:
            buf = acc.read_span(lo, lay.mask, lay.runs)
            shape = (yr[1] - yr[0], xr[1] - xr[0], cr[1] - cr[0])
            if out is None:
                odt = _out_dtype(fm) if dtype is None else np.dtype(dtype)
                out = np.empty(shape, odt)
            elif out.shape != shape:
                raise ValueError(f"read_fmap: out has shape {out.shape}, the block {shape}")
            if out.dtype.kind in "iu" and out.dtype.itemsize == es:
                for p in pieces:                        # same-size integers: byte copies
                    _copy4(p.out_view(out), p.mem_view(buf, lo, dt, es))
                return _zero_point(fm, out, subtract_zero_point, check)
            if len(pieces) == 1 and pieces[0].mem_view(buf, lo, dt, es).flags.c_contiguous:
                src = pieces[0].mem_view(buf, lo, dt, es).reshape(shape)
            else:                                       # gather in the memory type, then convert
                src = np.empty(shape, dt)
                for p in pieces:
                    _copy4(p.out_view(src), p.mem_view(buf, lo, dt, es))
            zp = ifm_zero_point(fm.zero_point, fm.precision, fm.act_type, check) if subtract_zero_point else 0
            if zp and out.dtype.kind == "f":            # subtracted in the conversion (exact)
                np.subtract(src, out.dtype.type(zp), out=out, casting="unsafe")
                return out
            np.copyto(out, src, casting="unsafe")
            return _zero_point(fm, out, subtract_zero_point, check)
    addrs = block_addresses(fm, ys, xs, cs, check=check)
    shape = addrs.shape
    if addrs.size == 0:
        return _into(_zero_point(fm, np.zeros(shape, _out_dtype(fm)), subtract_zero_point, check, dtype), out)
    flat = addrs.reshape(-1)
    lay = _dense_layout(flat, es)
    if lay is not None:
        lo, m, rel = lay
        emask = np.zeros(m, dtype=bool)
        emask[rel] = True
        buf = acc.read_span(lo, _byte_mask(emask, es))
        raw = buf.view(dt)[rel].reshape(shape)
    else:                                               # sparse or unaligned: sort the bytes
        ba = _byte_addresses(flat, es)
        uniq, inv = np.unique(ba, return_inverse=True)
        breaks = np.flatnonzero(np.diff(uniq) != 1) + 1
        st = np.concatenate(([0], breaks))
        sp = np.concatenate((breaks, [uniq.size]))
        data = acc.read_runs(uniq[st], sp - st)
        raw = np.ascontiguousarray(data[inv.ravel()]).view(dt).reshape(shape)
    return _into(_zero_point(fm, raw.astype(_out_dtype(fm)), subtract_zero_point, check, dtype), out)


def _into(v: np.ndarray, out):
    if out is None:
        return v
    out[...] = v
    return out


def write_fmap(mem, fm: FeatureMap, ys, xs, cs, values, *, allowed_perms: int = AllowedPerms.ALL,
               microblock_depth: int | None = None, check: bool = True, reference: bool = False) -> None:
    """Scatter ``values`` ([len(ys), len(xs), len(cs)], or broadcastable) to the OFM block
    ys x xs x cs, as write_ofm does: truncate to the OFM width, apply reverse/transpose
    (coordinates are OFM coordinates before transposition), little-endian store.

    ``mem`` is an object with ``write(addr, data: bytes)`` or such a callable, or a batched
    accessor (module docstring).  One call (or run) per maximal contiguous byte run, in
    ascending address order; where elements alias the same bytes, the later element (in
    (y, x, c) order) is written later, as sequential write_ofm calls would do.  storage
    none: no write.  Chained storage raises ValueError (the caller pushes into the FIFO).
    ``reference``: take :func:`write_fmap_ref` instead.
    """
    if reference:
        return write_fmap_ref(mem, fm, ys, xs, cs, values, allowed_perms=allowed_perms,
                              microblock_depth=microblock_depth, check=check)
    if fm.storage == Storage.NONE:
        if check:
            check_ofm_write(fm, allowed_perms, microblock_depth)
        return
    if fm.storage == Storage.CHAINED:
        raise ValueError("chained feature map: push values into the chaining FIFO")
    es = fm.element_size
    dt = np.dtype(f"<u{es}")
    v = np.asarray(values)
    if v.dtype.kind not in "iu":
        v = v.astype(np.int64)
    acc = _Access(mem)
    yr, xr, cr = _unit_range(ys), _unit_range(xs), _unit_range(cs)
    lay = None
    if yr and xr and cr and fm.reverse == Reverse.NONE and fm.transpose == Transpose.HWC:
        lay = _layout(fm, yr, xr, cr, check, (allowed_perms, microblock_depth))
    if lay is not None:
        shape = (yr[1] - yr[0], xr[1] - xr[0], cr[1] - cr[0])
        lo, hi, pieces = lay.lo, lay.hi, lay.pieces
        if lay.disjoint:                                # no two elements share a byte
            vb = v if v.shape == shape else np.broadcast_to(v, shape)
            buf = np.empty(hi - lo, np.uint8)
            if len(pieces) == 1 and v.shape == shape and v.dtype.itemsize == es and v.flags.c_contiguous \
                    and v.nbytes == hi - lo and pieces[0].mem_view(buf, lo, dt, es).flags.c_contiguous:
                buf = v.reshape(-1).view(np.uint8)      # the span is the block, in (y, x, c) order
            else:
                for p in pieces:
                    _copy4(p.mem_view(buf, lo, dt, es), p.out_view(vb))   # truncating cast
            acc.write_span(lo, lay.mask, buf, lay.runs)
            return
    addrs = ofm_block_addresses(fm, ys, xs, cs, allowed_perms=allowed_perms,
                                microblock_depth=microblock_depth, check=check)
    u = np.broadcast_to(v, addrs.shape).astype(dt)      # two's complement, modulo 2**(8*es)
    if addrs.size == 0:
        return
    flat = addrs.reshape(-1)
    lay = _dense_layout(flat, es)
    if lay is not None:
        lo, m, rel = lay
        emask = np.zeros(m, dtype=bool)
        emask[rel] = True
        if int(np.count_nonzero(emask)) == flat.size:  # no aliasing: each element once
            ebuf = np.empty(m, dt)
            ebuf[rel] = u.reshape(-1)
            acc.write_span(lo, _byte_mask(emask, es), ebuf.view(np.uint8))
            return
    # aliasing, sparse or unaligned: byte-level stable sort (later elements win)
    data = np.ascontiguousarray(u).reshape(-1).view(np.uint8)
    ba = _byte_addresses(flat, es)
    order = np.argsort(ba, kind="stable")
    sba = ba[order]
    sdata = data[order]
    breaks = np.flatnonzero(np.diff(sba) != 1) + 1
    st = np.concatenate(([0], breaks))
    sp = np.concatenate((breaks, [sba.size]))
    acc.write_runs(sba[st], sp - st, sdata)
