"""tensor_lmem and tensor_gmem (guide 4.4, 4.5), and the frozen operand records a
descriptor holds.

`tensor_lmem` is what the API hands out (`bmk1880_tl_alloc`, ...): a mutable structure as in C,
plus the model's bookkeeping (how it was allocated, freed or stale). A computation call
snapshots each operand into a `TL` (the values at the time of the call, as BMKernel formats
them into the instruction); `TL` is also what the command-buffer decoder produces, so
argument checks and execution see one representation.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .chip import (FMT_NAMES, FMT_U8, bmk1880_chip_info_t, gmem_addresses, gmem_default_stride,
                   lmem_addresses, lmem_channel_base, lmem_default_stride, matrix_tensor_shape, shape_t, stride_t)


@dataclass(eq=False)
class tensor_lmem:                               # noqa: N801 - the guide's name
    fmt: int
    shape: shape_t
    stride: "stride_t | None" = None            # None: the default (un)aligned strides (4.4)
    aligned: bool = False
    laddr: int = 0                              # start address in lmem (`la`)
    # model bookkeeping, not part of the guide's structure
    alloc_kind: str = "prealloc"                # "prealloc" | "alloc" | "alloc_bank"
    owner: object = field(default=None, repr=False)
    generation: int = 0                         # the owner's reset count when allocated
    freed: bool = False
    reserved_from: int = 0                      # stack top before this allocation (alloc only)

    def __repr__(self) -> str:
        st = f", stride={self.stride}" if self.stride is not None else ""
        return (f"tensor_lmem({FMT_NAMES.get(self.fmt, self.fmt)}, {self.shape}{st}, "
                f"{'aligned' if self.aligned else 'unaligned'}, laddr=0x{self.laddr:x})")


@dataclass
class tensor_gmem:                               # noqa: N801
    addr: int
    shape: shape_t
    stride: stride_t


def tensor_gmem_default(addr: int, shape: shape_t) -> tensor_gmem:
    """A tensor_gmem at the default gmem strides of its shape (2.4)."""
    return tensor_gmem(addr, shape, stride_t(*gmem_default_stride(shape)))


@dataclass(frozen=True)
class TL:
    """A tensor_lmem operand as a descriptor holds it."""
    fmt: int
    dim: int                                    # 4: tensor, 2: matrix
    n: int
    c: int
    h: int                                      # matrix: rows
    w: int                                      # matrix: columns
    laddr: int
    aligned: bool
    stride: "tuple[int, int, int, int] | None"  # explicit strides, or None (default)

    @property
    def is_matrix(self) -> bool:
        return self.dim == 2

    @property
    def signed(self) -> bool:
        return self.fmt != FMT_U8                # fmt is checked to be FMT_I8 or FMT_U8

    @property
    def shape(self) -> tuple:
        """The logical shape: (N, C, H, W), or (R, C) for a matrix."""
        return (self.h, self.w) if self.is_matrix else (self.n, self.c, self.h, self.w)

    def shape4(self, chip: bmk1880_chip_info_t) -> tuple[int, int, int, int]:
        """The shape of the tensor that holds it in lmem (a matrix's special tensor, 2.3)."""
        return matrix_tensor_shape(chip, self.h, self.w) if self.is_matrix else (self.n, self.c, self.h, self.w)

    def stride4(self, chip: bmk1880_chip_info_t) -> tuple[int, int, int, int]:
        if self.stride is not None:
            return self.stride
        return lmem_default_stride(chip, self.shape4(chip), self.aligned)

    def default_stride(self, chip: bmk1880_chip_info_t, aligned: bool) -> tuple[int, int, int, int]:
        return lmem_default_stride(chip, self.shape4(chip), aligned)

    def with_stride(self, stride4) -> "TL":
        return TL(self.fmt, self.dim, self.n, self.c, self.h, self.w, self.laddr, self.aligned,
                  tuple(int(x) for x in stride4))

    def addresses(self, chip: bmk1880_chip_info_t, stride4=None) -> np.ndarray:
        """lmem byte address of every logical datum: shape (N, C, H, W), or (R, C) for a
        matrix (its tensor form's padding positions left out)."""
        s4 = self.shape4(chip)
        st = stride4 if stride4 is not None else self.stride4(chip)
        if self.is_matrix:                       # datum (r, c) is (r, c / W, 0, c mod W) of the tensor (2.3)
            col = np.arange(self.w, dtype=np.int64)
            base = lmem_channel_base(chip, self.laddr, col // s4[3], st[1]) + (col % s4[3]) * st[3]
            return base[None, :] + np.arange(self.h, dtype=np.int64)[:, None] * st[0]
        return lmem_addresses(chip, self.laddr, s4, st)

    def count(self) -> int:
        return self.h * self.w if self.is_matrix else self.n * self.c * self.h * self.w

    def __str__(self) -> str:
        kind = "matrix" if self.is_matrix else "tensor"
        st = f" stride={self.stride}" if self.stride is not None else ""
        return (f"{FMT_NAMES.get(self.fmt, self.fmt)} {kind} {self.shape} @0x{self.laddr:x}"
                f" {'aligned' if self.aligned else 'unaligned'}{st}")


@dataclass(frozen=True)
class TG:
    """A tensor_gmem operand as a descriptor holds it."""
    addr: int
    dim: int
    n: int
    c: int
    h: int
    w: int
    stride: tuple[int, int, int, int]

    @property
    def is_matrix(self) -> bool:
        return self.dim == 2

    @property
    def shape(self) -> tuple:
        return (self.h, self.w) if self.is_matrix else (self.n, self.c, self.h, self.w)

    def count(self) -> int:
        return self.h * self.w if self.is_matrix else self.n * self.c * self.h * self.w

    def addresses(self) -> np.ndarray:
        if self.is_matrix:
            return gmem_addresses(self.addr, (1, 1, self.h, self.w), (0, 0, self.stride[2], self.stride[3]))[0, 0]
        return gmem_addresses(self.addr, (self.n, self.c, self.h, self.w), self.stride)

    def __str__(self) -> str:
        return f"gmem {'matrix' if self.is_matrix else 'tensor'} {self.shape} @0x{self.addr:x} stride={self.stride}"


def snapshot_tl(t: tensor_lmem) -> TL:
    s = t.shape
    st = None if t.stride is None else t.stride.as4()
    return TL(t.fmt, s.dim, s.n, s.c, s.h, s.w, t.laddr, bool(t.aligned), st)


def snapshot_tg(t: tensor_gmem) -> TG:
    s = t.shape
    return TG(t.addr, s.dim, s.n, s.c, s.h, s.w, t.stride.as4())
