"""Test-side references for the BM1880 model, written from the BMKernel 1880 guide's text.

Nothing here imports the model's layout or arithmetic code: addresses come from the
formula of section 2.3 evaluated datum by datum, values from the formulas of chapter 4
evaluated on Python integers (saturation, 32-bit wrap and floor shifts written out), and
convolutions from the guide's definitions of insertion, padding, dilation and striding with
plain loops. The only shared facts are the chip parameters (a dict passed in) and the
model's documented choices (tlm/bm1880/choices.py), named where used.
"""
from __future__ import annotations

import numpy as np

I8, U8 = 4, 9                                   # 4.1


def params(chip) -> dict:
    """The chip parameters as plain numbers."""
    return dict(slices=chip.npu_num, eu=chip.eu_num, slice_size=chip.lmem_size,
                total=chip.npu_num * chip.lmem_size)


# ---- layout (2.3, 2.4) ------------------------------------------------------------------------------
def align_up(x: int, a: int) -> int:
    """'the smallest multiple of a that is bigger than or equal to x'."""
    m = 0
    while m < x:
        m += a
    return m


def default_lmem_stride(p: dict, shape, aligned: bool):
    n, c, h, w = shape
    s_c = align_up(h * w, p["eu"]) if aligned else h * w
    return (align_up(c, p["slices"]) // p["slices"] * s_c, s_c, w, 1)


def default_gmem_stride(shape):
    n, c, h, w = shape
    return (c * h * w, h * w, w, 1)


def lmem_addr(p: dict, base: int, stride, n: int, c: int, h: int, w: int) -> int:
    """Section 2.3, Size_data = 1, divisions floored."""
    sn, sc, sh, sw = stride
    S, T = p["slice_size"], p["total"]
    return ((base + c * S) % T) + (n * sn + ((base // S + c) // p["slices"]) * sc + h * sh + w * sw)


def matrix_tensor(p: dict, rows: int, cols: int):
    """2.3 with W = eu_num (choice C-MATRIX)."""
    w = p["eu"]
    return (rows, (cols + w - 1) // w, 1, w)


def lmem_put(lmem: np.ndarray, p: dict, base: int, stride, values: np.ndarray) -> None:
    """Store a tensor's logical values (their low bytes) datum by datum."""
    n_, c_, h_, w_ = values.shape
    for n in range(n_):
        for c in range(c_):
            for h in range(h_):
                for w in range(w_):
                    lmem[lmem_addr(p, base, stride, n, c, h, w)] = int(values[n, c, h, w]) & 0xFF


def lmem_get(lmem: np.ndarray, p: dict, base: int, stride, shape, signed: bool) -> np.ndarray:
    n_, c_, h_, w_ = shape
    out = np.zeros(shape, np.int64)
    for n in range(n_):
        for c in range(c_):
            for h in range(h_):
                for w in range(w_):
                    b = int(lmem[lmem_addr(p, base, stride, n, c, h, w)])
                    out[n, c, h, w] = b - 256 if signed and b >= 128 else b
    return out


def matrix_put(lmem, p, base, stride, values: np.ndarray) -> None:
    rows, cols = values.shape
    for r in range(rows):
        for c in range(cols):
            lmem[lmem_addr(p, base, stride, r, c // p["eu"], 0, c % p["eu"])] = int(values[r, c]) & 0xFF


def matrix_get(lmem, p, base, stride, rows, cols, signed) -> np.ndarray:
    out = np.zeros((rows, cols), np.int64)
    for r in range(rows):
        for c in range(cols):
            b = int(lmem[lmem_addr(p, base, stride, r, c // p["eu"], 0, c % p["eu"])])
            out[r, c] = b - 256 if signed and b >= 128 else b
    return out


# ---- arithmetic (chapter 4) ------------------------------------------------------------------------------
def sat(v: int, bits: int, signed: bool) -> int:
    """'saturated into the maximum or minimum ... whichever is nearer'."""
    hi = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    lo = -(1 << (bits - 1)) if signed else 0
    return hi if v > hi else lo if v < lo else v


def wrap32(v: int) -> int:
    """A 32-bit two's-complement intermediate (choice C-WRAP)."""
    v %= 1 << 32
    return v - (1 << 32) if v >= 1 << 31 else v


def shr(v: int, s: int) -> int:
    """'>>' of a 32-bit value: arithmetic, rounding toward minus infinity (choice C-SHIFT)."""
    return v // (2 ** s)


def join16(hi: int, lo: int, signed: bool) -> int:
    """A 16-bit value from its planes (4.1); `hi`, `lo` are bytes 0..255."""
    v = hi * 256 + lo
    return v - 65536 if signed and v >= 32768 else v


def split16(v: int) -> tuple[int, int]:
    v &= 0xFFFF
    return v // 256, v % 256


def elementwise(fn, *arrays) -> np.ndarray:
    """Apply a Python-int function datum by datum."""
    flat = [a.reshape(-1).tolist() if isinstance(a, np.ndarray) else None for a in arrays]
    n = next(len(f) for f in flat if f is not None)
    out = [fn(*[(f[i] if f is not None else a) for f, a in zip(flat, arrays)]) for i in range(n)]
    shape = next(a.shape for a in arrays if isinstance(a, np.ndarray))
    return np.array(out, np.int64).reshape(shape)


def mul(a, b, rshift, bits, signed):
    return elementwise(lambda x, y: sat(shr(wrap32(x * y), rshift), bits, signed), a, b)


def mac(a, b, res, lshift, rshift, bits, signed):
    return elementwise(lambda x, y, r: sat(shr(wrap32(x * y + wrap32(r * 2 ** lshift)), rshift), bits, signed),
                       a, b, res)


def add(a, b, bits, signed):
    return elementwise(lambda x, y: sat(wrap32(x + y), bits, signed), a, b)


def sub(a, b, bits):
    return elementwise(lambda x, y: sat(wrap32(x - y), bits, True), a, b)


def arith_shift(a, bits):
    """4.29; a negative bits value shifts left (choice C-ARITH)."""
    return elementwise(lambda x, s: sat(shr(x, s) if s >= 0 else x * 2 ** (-s), 16, True), a, bits)


def logic(op, a, b, bits, signed):
    f = {"and": lambda x, y: x & y, "or": lambda x, y: x | y, "xor": lambda x, y: x ^ y}[op]
    return elementwise(lambda x, y: sat(f(x, y), bits, signed), a, b)


def mdsum(a, bits, signed):
    n, c, h, w = a.shape
    return np.array([sat(wrap32(int(a[:, ci].sum())), bits, signed) for ci in range(c)], np.int64).reshape(1, c, 1, 1)


# ---- convolution and pooling (4.41-4.45) ----------------------------------------------------------------------
def insert_and_pad(x: np.ndarray, ins_h, ins_last_h, ins_w, ins_last_w, pt, pb, pl, pr, pad_value=0) -> np.ndarray:
    """x' by the guide's definition: x'[h] = x[h / (ins+1)] if h is a multiple of ins+1, else 0;
    ins_last zeros after the last datum; then the padding."""
    n, c, h, w = x.shape
    hh, ww = 1 + (h - 1) * (ins_h + 1), 1 + (w - 1) * (ins_w + 1)
    y = np.zeros((n, c, hh + ins_last_h, ww + ins_last_w), np.int64)
    for i in range(hh):
        for j in range(ww):
            if i % (ins_h + 1) == 0 and j % (ins_w + 1) == 0:
                y[:, :, i, j] = x[:, :, i // (ins_h + 1), j // (ins_w + 1)]
    out = np.full((n, c, y.shape[2] + pt + pb, y.shape[3] + pl + pr), pad_value, np.int64)
    out[:, :, pt:pt + y.shape[2], pl:pl + y.shape[3]] = y
    return out


def dilate_kernel(k: np.ndarray, dh: int, dw: int) -> np.ndarray:
    """(dilation-1) zeros between the kernel's data (4.41, with the erratum fixed)."""
    a, b, kh, kw = k.shape
    out = np.zeros((a, b, (kh - 1) * dh + 1, (kw - 1) * dw + 1), np.int64)
    for i in range(kh):
        for j in range(kw):
            out[:, :, i * dh, j * dw] = k[:, :, i, j]
    return out


def conv(x, w, bias, *, ins=(0, 0, 0, 0), pad=(0, 0, 0, 0), stride=(1, 1), dilation=(1, 1), relu=False,
         rshift=0, signed=True):
    """x (N, Cin, H, W); w (Cin, Cout, Kh, Kw); bias (Cout,) or None. Cross-correlation (choice C-CONV)."""
    xp = insert_and_pad(x, *ins, *pad)
    wd = dilate_kernel(w, *dilation)
    n, cin, hp, wp = xp.shape
    _, cout, kh, kw = wd.shape
    ho, wo = (hp - kh) // stride[0] + 1, (wp - kw) // stride[1] + 1
    out = np.zeros((n, cout, ho, wo), np.int64)
    for b in range(n):
        for co in range(cout):
            for i in range(ho):
                for j in range(wo):
                    win = xp[b, :, i * stride[0]:i * stride[0] + kh, j * stride[1]:j * stride[1] + kw]
                    v = int((win * wd[:, co]).sum()) + (int(bias[co]) if bias is not None else 0)
                    v = wrap32(v)
                    if relu:
                        v = max(v, 0)
                    out[b, co, i, j] = sat(shr(v, rshift), 8, signed)
    return out


def depthwise(x, w, bias, *, ins=(0, 0, 0, 0), pad=(0, 0, 0, 0), stride=(1, 1), rshift=0, signed=True):
    """w (C, Kh, Kw): channel c convolved with its own kernel."""
    n, c, _, _ = x.shape
    outs = [conv(x[:, ci:ci + 1], w[ci][None, None], None if bias is None else bias[ci:ci + 1], ins=ins, pad=pad,
                 stride=stride, rshift=rshift, signed=signed) for ci in range(c)]
    return np.concatenate(outs, axis=1)


def max_pool(x, kh, kw, pad, stride, signed):
    """Padding never wins (choice C-MAXPOOL-PAD)."""
    xp = insert_and_pad(x, 0, 0, 0, 0, *pad, pad_value=-(1 << 40))
    n, c, hp, wp = xp.shape
    ho, wo = (hp - kh) // stride[0] + 1, (wp - kw) // stride[1] + 1
    out = np.zeros((n, c, ho, wo), np.int64)
    for i in range(ho):
        for j in range(wo):
            win = xp[:, :, i * stride[0]:i * stride[0] + kh, j * stride[1]:j * stride[1] + kw]
            out[:, :, i, j] = win.max(axis=(2, 3))
    low = -128 if signed else 0
    return np.maximum(out, low)


def avg_pool(x, kh, kw, ins, pad, stride, const, rshift, signed):
    """'all related basic data ... summed together, multiplied by avg_pooling_const, and then
    shifted rightward by rshift_width bits' (4.45)."""
    xp = insert_and_pad(x, *ins, *pad)
    n, c, hp, wp = xp.shape
    ho, wo = (hp - kh) // stride[0] + 1, (wp - kw) // stride[1] + 1
    out = np.zeros((n, c, ho, wo), np.int64)
    for b in range(n):
        for ci in range(c):
            for i in range(ho):
                for j in range(wo):
                    s = int(xp[b, ci, i * stride[0]:i * stride[0] + kh, j * stride[1]:j * stride[1] + kw].sum())
                    out[b, ci, i, j] = sat(shr(wrap32(s * const), rshift), 8, signed)
    return out


def matrix_mac(left, right, bias, *, relu=False, ra=None, lshift=0, rshift=0, bits=8, signed=True):
    """4.46: (left x right + bias [ReLU | + (res << lshift)]) >> rshift, saturated."""
    r, k = left.shape
    _, c = right.shape
    out = np.zeros((r, c), np.int64)
    for i in range(r):
        for j in range(c):
            v = sum(int(left[i, t]) * int(right[t, j]) for t in range(k))
            if bias is not None:
                v += int(bias[j])
            v = wrap32(v)
            if relu:
                v = max(v, 0)
            if ra is not None:
                v = wrap32(v + wrap32(int(ra[i, j]) * 2 ** lshift))
            out[i, j] = sat(shr(v, rshift), bits, signed)
    return out
