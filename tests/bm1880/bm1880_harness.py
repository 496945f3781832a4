"""A small rig for BM1880 tests: a context plus a chip model, with lmem written and read
through the reference layout (bm1880_ref), never through the model's own address code."""
from __future__ import annotations

import numpy as np

from tests.bm1880 import bm1880_ref as ref
from tlm.bm1880 import (CHIP, CTRL_AL, CTRL_NULL, FMT_I8, FMT_U8, Bm1880, bmk1880_acquire_cmdbuf,
                        bmk1880_info_t, bmk1880_register, bmk1880_tl_alloc, shape_t2, shape_t4)


def rng_for(seed: int) -> np.random.Generator:
    print(f"seed={seed}")
    return np.random.default_rng(seed)


def values(rng, shape, signed: bool, bits: int = 8) -> np.ndarray:
    lo, hi = (-(1 << (bits - 1)), 1 << (bits - 1)) if signed else (0, 1 << bits)
    return rng.integers(lo, hi, size=shape, dtype=np.int64)


class Rig:
    def __init__(self, chip=CHIP, cmdbuf_size: int = 1 << 20):
        self.chip = chip
        self.info = bmk1880_info_t(chip.version, bytearray(cmdbuf_size), cmdbuf_size)
        self.ctx = bmk1880_register(self.info, chip)
        self.m = Bm1880(chip)
        self.p = ref.params(chip)

    # ---- tensors ---------------------------------------------------------------------------------------
    def alloc(self, shape, fmt=FMT_I8, aligned=True):
        s = shape_t4(*shape) if len(shape) == 4 else shape_t2(*shape)
        t = bmk1880_tl_alloc(self.ctx, s, fmt, CTRL_AL if aligned else CTRL_NULL)
        assert t is not None, self.ctx.last_error
        return t

    def stride(self, t):
        if t.stride is not None:
            return t.stride.as4()
        shape = ref.matrix_tensor(self.p, t.shape.h, t.shape.w) if t.shape.dim == 2 else \
            (t.shape.n, t.shape.c, t.shape.h, t.shape.w)
        return ref.default_lmem_stride(self.p, shape, t.aligned)

    def put(self, t, v: np.ndarray, stride=None) -> None:
        st = stride or self.stride(t)
        if t.shape.dim == 2:
            ref.matrix_put(self.m.lmem, self.p, t.laddr, st, v)
        else:
            ref.lmem_put(self.m.lmem, self.p, t.laddr, st, v)

    def get(self, t, signed=None, stride=None) -> np.ndarray:
        signed = (t.fmt == FMT_I8) if signed is None else signed
        st = stride or self.stride(t)
        if t.shape.dim == 2:
            return ref.matrix_get(self.m.lmem, self.p, t.laddr, st, t.shape.h, t.shape.w, signed)
        s = t.shape
        return ref.lmem_get(self.m.lmem, self.p, t.laddr, st, (s.n, s.c, s.h, s.w), signed)

    def put16(self, hi, lo, v: np.ndarray) -> None:
        u = v & 0xFFFF
        self.put(hi, u >> 8)
        self.put(lo, u & 0xFF)

    def get16(self, hi, lo) -> np.ndarray:
        h, low = self.get(hi, False), self.get(lo, False)
        return ref.elementwise(lambda a, b: ref.join16(a, b, hi.fmt == FMT_I8), h, low)

    def gmem_put(self, addr: int, v: np.ndarray) -> None:
        self.m.gmem.write(addr, (np.asarray(v) & 0xFF).astype(np.uint8).tobytes())

    def gmem_get(self, addr: int, shape, signed: bool) -> np.ndarray:
        b = np.frombuffer(self.m.gmem.read(addr, int(np.prod(shape))), np.int8 if signed else np.uint8)
        return b.astype(np.int64).reshape(shape)

    # ---- running ---------------------------------------------------------------------------------------
    def cmdbuf(self) -> bytes:
        buf, size = bmk1880_acquire_cmdbuf(self.ctx)
        return bytes(buf)

    def run(self, expect_ok: bool = True):
        res = self.m.run(self.cmdbuf())
        if expect_ok:
            assert res.ok, str(res)
        return res


U8, I8 = FMT_U8, FMT_I8
