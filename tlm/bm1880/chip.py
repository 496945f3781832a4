"""The BM1880 chip as the BMKernel 1880 guide defines it (ch. 2): parameters, data formats,
control flags, engines, shapes and strides, and the gmem/lmem layout formulas.

Names are the guide's (`shape_t4`, `stride_t2`, `FMT_I8`, `bmk1880_chip_info_t`, ...).
The guide gives no chip parameter values; `CHIP_PARAMS` is the one table of the values
this model uses, each with its source (guide / EXT: the devices' open-source software /
choice). Choices the guide leaves open are listed in `tlm.bm1880.choices.CHOICES`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# ---- chip parameters ------------------------------------------------------------------------
# (field of bmk1880_chip_info_t, value, source, note). One source of truth: everything below
# and the docs table derive from it.
CHIP_PARAMS: tuple[tuple[str, int, str, str], ...] = (
    ("version", 1880, "guide", "bmk1880_info_t.chip_version 'can be 1880' (3.1)"),
    ("npu_num", 32, "choice", "lmem slices (= NPUs, EXT name npu_num); the guide gives no value"),
    ("eu_num", 16, "choice", "EU lanes per NPU; with 16, matrix_mac_2's right (256, 16, 1, 16) is "
                             "exactly a 256x256 matrix in the lmem matrix layout (4.47)"),
    ("lmem_size", 64 * 1024, "choice", "bytes of lmem per slice (Size_slice); "
                                       "Size_total = npu_num x lmem_size = 2 MiB"),
    ("lmem_banks", 8, "choice", "banks per slice for bmk1880_tl_alloc_bank"),
    ("lmem_bank_size", 8 * 1024, "choice", "lmem_size / lmem_banks"),
)

GMEM_ADDR_BITS = 40          # EXT: GADDR_INVALID is 0xFF_FFFF_FFFF, gmem addresses are 40-bit


@dataclass(frozen=True)
class bmk1880_chip_info_t:                     # noqa: N801 - the guide's name (4.6)
    version: int
    npu_num: int
    eu_num: int
    lmem_size: int                              # per slice (Size_slice)
    lmem_banks: int
    lmem_bank_size: int

    @property
    def lmem_total(self) -> int:                # Size_total of section 2.3
        return self.npu_num * self.lmem_size

    def __post_init__(self):
        for f in ("npu_num", "eu_num", "lmem_size", "lmem_banks"):
            if getattr(self, f) < 1:
                raise ValueError(f"bmk1880_chip_info_t: {f} must be >= 1")
        if self.lmem_banks * self.lmem_bank_size != self.lmem_size:
            raise ValueError("bmk1880_chip_info_t: lmem_banks x lmem_bank_size must equal lmem_size")


CHIP = bmk1880_chip_info_t(**{name: value for name, value, _, _ in CHIP_PARAMS})


def bmk1880_chip_info() -> bmk1880_chip_info_t:
    """4.6: the design parameters of the BM1880 chip (values: CHIP_PARAMS)."""
    return CHIP


# ---- data formats (4.1) and control flags ------------------------------------------------------
FMT_I8 = 4
FMT_U8 = 9
FMT_NAMES = {FMT_I8: "FMT_I8", FMT_U8: "FMT_U8"}

# ctrl_t values: the guide names the flags but gives no numbers; these are EXT (bm_kernel_legacy.h),
# choice C-CTRL.
CTRL_NULL = 0
CTRL_AL = 1 << 0
CTRL_RA = 1 << 2
CTRL_TP = 1 << 5
CTRL_RELU = 1 << 8
CTRL_NAMES = {CTRL_AL: "CTRL_AL", CTRL_RA: "CTRL_RA", CTRL_TP: "CTRL_TP", CTRL_RELU: "CTRL_RELU"}


def ctrl_name(v: int) -> str:
    if v == CTRL_NULL:
        return "CTRL_NULL"
    names = [n for b, n in CTRL_NAMES.items() if v & b]
    rest = v & ~sum(CTRL_NAMES)
    return "|".join(names + ([f"0x{rest:x}"] if rest else []))


# engine_id of cmd_hdr_t (3.3): the guide gives no numbers; TPU and GDMA are EXT
# (ENGINE_BD 0, ENGINE_GDMA 2); 15 carries the model's dependency records (choice C-CMD).
ENGINE_TPU = 0
ENGINE_GDMA = 2
ENGINE_CTRL = 15
ENGINE_NAMES = {ENGINE_TPU: "TPU", ENGINE_GDMA: "GDMA", ENGINE_CTRL: "CTRL"}


# ---- shape_t / stride_t (4.2, 4.3) ------------------------------------------------------------
class _RowCol:
    """h and w are a union with row and col in the API's structs."""
    h: int
    w: int

    @property
    def row(self) -> int:
        return self.h

    @property
    def col(self) -> int:
        return self.w


@dataclass(frozen=True)
class shape_t(_RowCol):                         # noqa: N801
    dim: int
    n: int
    c: int
    h: int                                      # union with row
    w: int                                      # union with col

    def __str__(self) -> str:
        return f"({self.h}, {self.w})" if self.dim == 2 else f"({self.n}, {self.c}, {self.h}, {self.w})"


@dataclass(frozen=True)
class stride_t(_RowCol):                        # noqa: N801
    n: int
    c: int
    h: int                                      # union with row
    w: int                                      # union with col

    def as4(self) -> tuple[int, int, int, int]:
        return (self.n, self.c, self.h, self.w)

    def __str__(self) -> str:
        return f"({self.n}, {self.c}, {self.h}, {self.w})"


def shape_t4(n: int, c: int, h: int, w: int) -> shape_t:
    return shape_t(4, n, c, h, w)


def shape_t2(row: int, col: int) -> shape_t:
    # n and c of a matrix shape are not used (choice C-MATRIX): 1
    return shape_t(2, 1, 1, row, col)


def stride_t4(n: int, c: int, h: int, w: int) -> stride_t:
    return stride_t(n, c, h, w)


def stride_t2(row: int, col: int) -> stride_t:
    return stride_t(0, 0, row, col)


# ---- layout (2.3, 2.4) --------------------------------------------------------------------------
def align(x: int, a: int) -> int:
    """The guide's align(x, a): the smallest multiple of a that is >= x."""
    return -(-x // a) * a


def ceil_div(x: int, a: int) -> int:
    return -(-x // a)


def matrix_tensor_shape(chip: bmk1880_chip_info_t, row: int, col: int) -> tuple[int, int, int, int]:
    """2.3: a matrix (R, C) in lmem is the tensor (R, C', 1, W) with C'.W >= C; W = eu_num
    (choice C-MATRIX), C' = ceil(C / W)."""
    return (row, ceil_div(col, chip.eu_num), 1, chip.eu_num)


def lmem_default_stride(chip: bmk1880_chip_info_t, shape4, aligned: bool) -> tuple[int, int, int, int]:
    """2.4: the unaligned / aligned default strides of a tensor of shape (N, C, H, W) in lmem."""
    _, c, h, w = shape4
    s_c = align(h * w, chip.eu_num) if aligned else h * w
    return (ceil_div(c, chip.npu_num) * s_c, s_c, w, 1)


def gmem_default_stride(shape: shape_t) -> tuple[int, int, int, int]:
    """2.4: gmem default strides; a matrix's (S_R, S_C) = (C, 1) in the h/w places."""
    if shape.dim == 2:
        return (0, 0, shape.col, 1)
    return (shape.c * shape.h * shape.w, shape.h * shape.w, shape.w, 1)


def lmem_channel_base(chip: bmk1880_chip_info_t, la: int, c: np.ndarray, s_c: int) -> np.ndarray:
    """2.3: address of datum (0, c, 0, 0): [(Base + c.Size_slice) mod Size_total]
    + ((Base / Size_slice + c) / slices) . S_C, divisions floored."""
    size, total, slices = chip.lmem_size, chip.lmem_total, chip.npu_num
    return (la + c * size) % total + ((la // size + c) // slices) * s_c


def lmem_addresses(chip: bmk1880_chip_info_t, la: int, shape4, stride4) -> np.ndarray:
    """Byte address of every datum (n, c, h, w) of a tensor in lmem (int64, shape (N, C, H, W))."""
    n, c, h, w = shape4
    sn, sc, sh, sw = stride4
    base = lmem_channel_base(chip, la, np.arange(c, dtype=np.int64), sc)
    return (base[None, :, None, None] + np.arange(n, dtype=np.int64)[:, None, None, None] * sn
            + np.arange(h, dtype=np.int64)[None, None, :, None] * sh
            + np.arange(w, dtype=np.int64)[None, None, None, :] * sw)


def lmem_slice_overflow(chip: bmk1880_chip_info_t, la: int, shape4, stride4) -> "int | None":
    """2.3's caution: every datum (n, c, h, w) must lie in the slice of (0, c, 0, 0), and in
    lmem. Returns the first channel that breaks it, or None. Strides are non-negative, so
    channel c's data lie in [address(0, c, 0, 0), address(0, c, 0, 0) + reach]."""
    n, c, h, w = shape4
    sn, sc, sh, sw = stride4
    size, total = chip.lmem_size, chip.lmem_total
    reach = (n - 1) * sn + (h - 1) * sh + (w - 1) * sw
    a0 = lmem_channel_base(chip, la, np.arange(c, dtype=np.int64), sc)
    bad = np.flatnonzero((a0 % size + reach >= size) | (a0 + reach >= total))
    return int(bad[0]) if bad.size else None


def gmem_addresses(addr: int, shape4, stride4) -> np.ndarray:
    """2.3: Base + n.S_N + c.S_C + h.S_H + w.S_W for every datum (int64, shape (N, C, H, W))."""
    n, c, h, w = shape4
    sn, sc, sh, sw = stride4
    return (addr + np.arange(n, dtype=np.int64)[:, None, None, None] * sn
            + np.arange(c, dtype=np.int64)[None, :, None, None] * sc
            + np.arange(h, dtype=np.int64)[None, None, :, None] * sh
            + np.arange(w, dtype=np.int64)[None, None, None, :] * sw)
