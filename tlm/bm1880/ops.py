"""Execution of every descriptor kind on the chip model, vectorised with numpy.

`operands(chip, kind, args)` lists each operand's byte addresses (lmem or gmem) and whether
the command reads or writes it: execution reads and writes through it, and the scheduler
uses the same list as the command's footprint (hazard check), so both see one layout.

Arithmetic (guide ch.4): inputs become 32-bit values (sign- or zero-extended by fmt; a
16-bit value is high plane x 256 + low plane), intermediates are two's-complement int32
(choice C-WRAP), `>>` is an arithmetic shift (choice C-SHIFT) and the final value is
saturated to the 8- or 16-bit result format. Every command reads all its inputs before it
writes (choice C-INPLACE).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .checks import conv_weight_stride, gmem_side
from .chip import CTRL_RA, CTRL_RELU, CTRL_TP, bmk1880_chip_info_t, gmem_addresses


class DataFault(Exception):
    """A data-dependent fault found while executing (e.g. arith_shift bits out of range)."""


@dataclass
class Operand:
    space: str                 # "l" (lmem) or "g" (gmem)
    addr: np.ndarray           # int64 byte addresses, in the operand's logical index order
    io: str                    # "r", "w" or "rw"
    signed: bool = False


_WRITTEN = ("res", "res_high", "res_low", "dst", "ofmap", "max", "min")


def operands(chip: bmk1880_chip_info_t, kind, args: dict) -> dict[str, Operand]:
    """The operands of one (checked) descriptor, by name ("x.lo"/"x.hi" for a 16-bit matrix)."""
    name = kind.name
    out: dict[str, Operand] = {}

    def tl(n: str, io: str, stride4=None) -> None:
        t = args.get(n)
        if t is not None:
            out[n] = Operand("l", t.addresses(chip, stride4), io, t.signed)

    if name in ("gdma_load", "gdma_store", "gdma_load_stride", "gdma_store_stride"):
        load = "load" in name
        t = args["t"]
        shape, st = gmem_side(chip, t, args["gaddr"], args.get("stride"), args["ctrls"])
        out["t"] = Operand("l", t.addresses(chip), "w" if load else "r", t.signed)
        out["gmem"] = Operand("g", gmem_addresses(args["gaddr"], shape, st), "r" if load else "w")
        return out
    if name == "gdma_copy_gmem":
        out["dst"] = Operand("g", args["dst"].addresses(), "w")
        out["src"] = Operand("g", args["src"].addresses(), "r")
        return out
    if name == "tpu_copy_with_stride":
        tl("dst", "w", args["dst_stride"].as4())
        tl("src", "r", args["src_stride"].as4())
        return out
    if name == "tpu_conv":
        tl("weight", "r", conv_weight_stride(args["weight"]))
    if name in ("tpu_mac", "tpu_mac_const"):
        tl("res_high", "r" if args["res_is_int8"] else "rw")
        tl("res_low", "rw")
    if name == "tpu_matrix_mac":
        res, ra = args["res"], args["ctrls"] == CTRL_RA
        a = res.addresses(chip)
        if ra or not args["res_is_int8"]:
            r = res.h // 2
            out["res.lo"] = Operand("l", a[:r], "rw" if ra else "w", res.signed)
            out["res.hi"] = Operand("l", a[r:], ("r" if args["res_is_int8"] else "rw") if ra else "w", res.signed)
        else:
            out["res"] = Operand("l", a, "w", res.signed)
        b = args.get("bias")
        if b is not None:
            ba = b.addresses(chip)
            out["bias.lo"] = Operand("l", ba[0], "r", b.signed)
            out["bias.hi"] = Operand("l", ba[1], "r", b.signed)
    for f in kind.fields:
        if f.type == "tl" and f.name not in out and not (name == "tpu_matrix_mac" and f.name in ("res", "bias")):
            tl(f.name, "w" if f.name in _WRITTEN else "r")
    return out


# ---- value helpers ----------------------------------------------------------------------------------
def wrap32(v: np.ndarray) -> np.ndarray:
    return ((v + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def saturate(v: np.ndarray, bits: int, signed: bool) -> np.ndarray:
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return np.clip(v, lo, hi)


class _Values:
    """Reads and writes operand values on a machine (lmem array + gmem accessors)."""

    def __init__(self, m, ops: dict[str, Operand]):
        self.m, self.ops = m, ops

    def raw(self, n: str) -> np.ndarray:
        o = self.ops[n]
        return self.m.lmem[o.addr] if o.space == "l" else self.m.gmem_read(o.addr)

    def v8(self, n: str) -> np.ndarray:
        b = self.raw(n)
        return (b.view(np.int8) if self.ops[n].signed else b).astype(np.int64)

    def v16(self, hi: str, lo: str) -> np.ndarray:
        return self.v8(hi) * 256 + self.raw(lo).astype(np.int64)

    def put_raw(self, n: str, b: np.ndarray) -> None:
        o = self.ops[n]
        b = np.asarray(b, np.uint8).reshape(o.addr.shape)
        if o.space == "l":
            self.m.lmem[o.addr] = b
        else:
            self.m.gmem_write(o.addr, b)

    def put8(self, n: str, v: np.ndarray) -> None:
        self.put_raw(n, (v & 0xFF).astype(np.uint8))

    def put(self, hi: "str | None", lo: str, v: np.ndarray) -> None:
        """Saturate a 32-bit result to the 8-bit (hi None) or 16-bit result and write it."""
        signed = self.ops[lo].signed
        if hi is None:
            self.put8(lo, saturate(v, 8, signed))
        else:
            v = saturate(v, 16, signed)
            self.put8(lo, v)
            self.put8(hi, v >> 8)


def _has(args: dict, n: str) -> bool:
    return args.get(n) is not None


# ---- GDMA ---------------------------------------------------------------------------------------------
def _gdma_load_store(x: _Values, a: dict, load: bool) -> None:
    t, tp = a["t"], a["ctrls"] == CTRL_TP
    if load:
        g = x.raw("gmem")
        if t.is_matrix:
            v = g[0, 0].T if tp else g[0, 0]
        else:
            v = g.transpose(1, 0, 2, 3) if tp else g
        x.put_raw("t", v)
    else:
        v = x.raw("t")
        if t.is_matrix:
            g = (v.T if tp else v)[None, None]
        else:
            g = v.transpose(1, 0, 2, 3) if tp else v
        x.put_raw("gmem", g)


def _gdma_copy_gmem(x: _Values, a: dict) -> None:
    v = x.raw("src")
    if a["ctrls"] == CTRL_TP:
        v = v.transpose(1, 0, 2, 3)
    x.put_raw("dst", v.reshape(-1))


def _gdma_copy_lmem(x: _Values, a: dict) -> None:
    x.put_raw("dst", x.raw("src").reshape(-1))


def _gdma_lrn_shift(x: _Values, a: dict) -> None:
    src = x.raw("src")
    dst = np.zeros_like(src)
    s, c = a["lrn_step"], src.shape[1]
    if s < c:
        if a["right_shift"]:
            dst[:, s:] = src[:, :c - s]
        else:
            dst[:, :c - s] = src[:, s:]
    x.put_raw("dst", dst)


# ---- element-wise TPU -----------------------------------------------------------------------------------
def _const_value(a: dict) -> int:
    return int(a["b"])                    # already the constant's value (descriptors.normalize_constants)


def _mul(x, a, const):
    prod = x.v8("a") * (_const_value(a) if const else x.v8("b"))
    x.put("res_high" if _has(a, "res_high") else None, "res_low", wrap32(prod) >> a["rshift_width"])


def _mac(x, a, const):
    res = x.v16("res_high", "res_low")
    acc = wrap32(x.v8("a") * (_const_value(a) if const else x.v8("b")) + wrap32(res << a["lshift_width"]))
    x.put(None if a["res_is_int8"] else "res_high", "res_low", acc >> a["rshift_width"])


def _add(x, a, op):
    av = x.v16("a_high", "a_low")
    bv = _const_value(a) if op == "const" else x.v16("b_high", "b_low")
    x.put("res_high" if _has(a, "res_high") else None, "res_low", wrap32(av - bv if op == "sub" else av + bv))


def _maxmin(x, a, res, fn, const):
    x.put(None, res, fn(x.v8("a"), _const_value(a) if const else x.v8("b")))


def _arith_shift(x, a):
    bits = x.v8("bits")
    bad = np.flatnonzero((bits < -16) | (bits > 16))
    if bad.size:
        idx = np.unravel_index(int(bad[0]), bits.shape)
        raise DataFault(f"tpu_arith_shift: bits datum {int(bits.flat[bad[0]])} at (n, c, h, w) = "
                        f"{tuple(int(i) for i in idx)} is outside [-16, 16] (4.29, choice C-ARITH)")
    av = x.v16("a_high", "a_low")
    out = np.where(bits >= 0, av >> np.maximum(bits, 0), av << np.maximum(-bits, 0))
    x.put("res_high", "res_low", out)


_LOGIC = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}


def _logic(x, a, op, wide):
    fn = _LOGIC[op]
    if wide:
        x.put("res_high", "res_low", fn(x.v16("a_high", "a_low"), x.v16("b_high", "b_low")))
    else:
        x.put(None, "res", fn(x.v8("a"), x.v8("b")))


def _copy(x, a):
    x.put_raw("dst", x.raw("src"))


def _mdsum(x, a):
    s = wrap32(x.v8("a").sum(axis=(0, 2, 3)))
    x.put("res_high" if _has(a, "res_high") else None, "res_low", s.reshape(1, -1, 1, 1))


def _lut(x, a, chip):
    idx = x.raw("ifmap").astype(np.int64)                                   # choice C-LUT: unsigned index
    slice_of = x.ops["ifmap"].addr // chip.lmem_size                        # c_t: the slice idx lives in
    table = x.ops["table"].addr[0].reshape(chip.npu_num, 256)               # (slice, 16 x 16)
    x.put_raw("ofmap", x.m.lmem[table[slice_of, idx]])


def _relu(x, a):
    x.put(None, "ofmap", np.maximum(x.v8("ifmap"), 0))


# ---- windows: conv, depthwise, pooling --------------------------------------------------------------------
def _axis(size: int, ins: int, pad0: int, k: int, dil: int, stride: int, out: int):
    """Along one axis, for each kernel tap t: the outputs o whose tap t reads a datum (not an
    inserted zero, an ins_last zero or padding; 4.41), and the ifmap index each of them reads.
    Nothing is materialised, so large insertions and paddings cost nothing."""
    step = ins + 1
    o = np.arange(out, dtype=np.int64)
    for t in range(k):
        y = o * stride + t * dil - pad0
        valid = (y >= 0) & (y <= (size - 1) * step) & (y % step == 0)
        idx = np.flatnonzero(valid)
        yield idx, y[idx] // step


def _place(idx: np.ndarray):
    """An index along one output axis as a slice when it is a run (the common case)."""
    if idx.size and idx[-1] - idx[0] + 1 == idx.size:
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return idx


def _taps(x: np.ndarray, a: dict, kh: int, kw: int, out_hw, ins: bool, dil: bool):
    """For every kernel tap that reads data: (i, j, where, patch): the output positions
    (an index into (N, C, H_out, W_out)) whose tap (i, j) reads a datum, and those data.
    Taps and outputs that read only zeros (insertion, padding) are skipped: they add nothing
    to a sum, and max pooling's padding never wins (choice C-MAXPOOL-PAD)."""
    g = lambda k: a[k] if ins else 0                                       # noqa: E731
    d = lambda k: a[k] if dil else 1                                       # noqa: E731
    rows = list(_axis(x.shape[2], g("ins_h"), a["pad_top"], kh, d("dilation_h"), a["stride_h"], out_hw[0]))
    cols = list(_axis(x.shape[3], g("ins_w"), a["pad_left"], kw, d("dilation_w"), a["stride_w"], out_hw[1]))
    for i, (ro, ri) in enumerate(rows):
        if not ro.size:
            continue
        xr = x[:, :, ri]
        for j, (co, ci) in enumerate(cols):
            if not co.size:
                continue
            r, c = _place(ro), _place(co)
            where = (slice(None), slice(None), r[:, None], c[None, :]) if isinstance(r, np.ndarray) and \
                isinstance(c, np.ndarray) else (slice(None), slice(None), r, c)
            yield i, j, where, xr[:, :, :, ci]


def _bias16(x, a) -> "np.ndarray | int":
    if not _has(a, "bias"):
        return 0
    b = x.v8("bias")                                                         # (2, C, 1, 1); choice C-BIAS
    lo = x.raw("bias")[0, :, 0, 0].astype(np.int64)
    return (b[1, :, 0, 0] * 256 + lo)[None, :, None, None]


def _finish(x, a, acc, relu: bool) -> None:
    acc = wrap32(acc + _bias16(x, a))
    if relu:
        acc = np.maximum(acc, 0)
    x.put(None, "ofmap", acc >> a["rshift_width"])


def _conv(x, a, winograd: bool):
    o = a["ofmap"]
    xv, w = x.v8("ifmap"), x.v8("weight")                                    # w: (C_in, C_out, Kh, Kw)
    if winograd:                                                             # choice C-WINOGRAD
        a = dict(a, ins_h=0, ins_last_h=0, ins_w=0, ins_last_w=0, stride_h=1, stride_w=1, dilation_h=1, dilation_w=1)
    acc = np.zeros((o.n, o.c, o.h, o.w), np.int64)
    wf = w.astype(np.float64)
    for i, j, where, patch in _taps(xv, a, w.shape[2], w.shape[3], (o.h, o.w), ins=True, dil=True):
        # one tap: a sum over C_in of 8-bit products, below 2^53, so exact in float64 (BLAS)
        acc[where] += np.tensordot(wf[:, :, i, j], patch.astype(np.float64), axes=(0, 1)).transpose(1, 0, 2, 3) \
            .astype(np.int64)
    _finish(x, a, acc, bool(a["relu_enable"]))


def _depthwise(x, a):
    o = a["ofmap"]
    xv, w = x.v8("ifmap"), x.v8("weight")[0]                                 # w: (C, Kh, Kw)
    acc = np.zeros((o.n, o.c, o.h, o.w), np.int64)
    for i, j, where, patch in _taps(xv, a, w.shape[1], w.shape[2], (o.h, o.w), ins=True, dil=False):
        acc[where] += patch * w[None, :, i, j, None, None]
    _finish(x, a, acc, False)


def _pool(x, a, avg: bool):
    o = a["ofmap"]
    xv = x.v8("ifmap")
    if avg:
        acc = np.zeros((o.n, o.c, o.h, o.w), np.int64)
        for _, _, where, patch in _taps(xv, a, a["kh"], a["kw"], (o.h, o.w), ins=True, dil=False):
            acc[where] += patch
        x.put(None, "ofmap", wrap32(acc * a["avg_pooling_const"]) >> a["rshift_width"])
    else:
        fill = -128 if x.ops["ifmap"].signed else 0                          # choice C-MAXPOOL-PAD
        acc = np.full((o.n, o.c, o.h, o.w), fill, np.int64)
        for _, _, where, patch in _taps(xv, a, a["kh"], a["kw"], (o.h, o.w), ins=False, dil=False):
            acc[where] = np.maximum(acc[where], patch)
        x.put(None, "ofmap", acc)


# ---- matrices ---------------------------------------------------------------------------------------------
def _exact_matmul(l: np.ndarray, r: np.ndarray) -> np.ndarray:
    """An integer matrix product of 8-bit values through float64 BLAS: every partial sum is an
    integer below K x 2^16 <= 2^37 < 2^53 (K <= lmem's size), so the result is exact."""
    return (l.astype(np.float64) @ r.astype(np.float64)).astype(np.int64)


def _matrix_mac(x, a):
    acc = _exact_matmul(x.v8("left"), x.v8("right"))
    if _has(a, "bias"):
        acc = acc + x.v16("bias.hi", "bias.lo")[None, :]
    acc = wrap32(acc)
    if a["ctrls"] == CTRL_RELU:
        acc = np.maximum(acc, 0)
    elif a["ctrls"] == CTRL_RA:
        acc = wrap32(acc + wrap32(x.v16("res.hi", "res.lo") << a["lshift_width"]))
    acc = acc >> a["rshift_width"]
    if "res" in x.ops:
        x.put(None, "res", acc)
    elif a["res_is_int8"]:
        x.put(None, "res.lo", acc)                                           # 4.46: low part only
    else:
        x.put("res.hi", "res.lo", acc)


def _matrix_mac_2(x, a):
    left = x.v8("left")[0, :, 0, :]                                          # (256, 256): row i in channel i
    right = x.v8("right").reshape(256, 256)                                  # right[k, j/16, 0, j%16]
    x.put(None, "res", wrap32(_exact_matmul(left, right))[None, :, None, :])  # choice C-MM2


EXEC = {
    "gdma_load": lambda x, a, c: _gdma_load_store(x, a, True),
    "gdma_load_stride": lambda x, a, c: _gdma_load_store(x, a, True),
    "gdma_store": lambda x, a, c: _gdma_load_store(x, a, False),
    "gdma_store_stride": lambda x, a, c: _gdma_load_store(x, a, False),
    "gdma_copy_gmem": lambda x, a, c: _gdma_copy_gmem(x, a),
    "gdma_copy_lmem": lambda x, a, c: _gdma_copy_lmem(x, a),
    "gdma_lrn_shift": lambda x, a, c: _gdma_lrn_shift(x, a),
    "tpu_mul": lambda x, a, c: _mul(x, a, False),
    "tpu_mul_const": lambda x, a, c: _mul(x, a, True),
    "tpu_mac": lambda x, a, c: _mac(x, a, False),
    "tpu_mac_const": lambda x, a, c: _mac(x, a, True),
    "tpu_add": lambda x, a, c: _add(x, a, "add"),
    "tpu_add_const": lambda x, a, c: _add(x, a, "const"),
    "tpu_sub": lambda x, a, c: _add(x, a, "sub"),
    "tpu_max": lambda x, a, c: _maxmin(x, a, "max", np.maximum, False),
    "tpu_max_const": lambda x, a, c: _maxmin(x, a, "max", np.maximum, True),
    "tpu_min": lambda x, a, c: _maxmin(x, a, "min", np.minimum, False),
    "tpu_min_const": lambda x, a, c: _maxmin(x, a, "min", np.minimum, True),
    "tpu_arith_shift": lambda x, a, c: _arith_shift(x, a),
    "tpu_and_int8": lambda x, a, c: _logic(x, a, "and", False),
    "tpu_and_int16": lambda x, a, c: _logic(x, a, "and", True),
    "tpu_or_int8": lambda x, a, c: _logic(x, a, "or", False),
    "tpu_or_int16": lambda x, a, c: _logic(x, a, "or", True),
    "tpu_xor_int8": lambda x, a, c: _logic(x, a, "xor", False),
    "tpu_xor_int16": lambda x, a, c: _logic(x, a, "xor", True),
    "tpu_copy": lambda x, a, c: _copy(x, a),
    "tpu_copy_with_stride": lambda x, a, c: _copy(x, a),
    "tpu_mdsum": lambda x, a, c: _mdsum(x, a),
    "tpu_lut": lambda x, a, c: _lut(x, a, c),
    "tpu_relu": lambda x, a, c: _relu(x, a),
    "tpu_conv": lambda x, a, c: _conv(x, a, False),
    "tpu_winograd": lambda x, a, c: _conv(x, a, True),
    "tpu_depthwise": lambda x, a, c: _depthwise(x, a),
    "tpu_max_pooling": lambda x, a, c: _pool(x, a, False),
    "tpu_avg_pooling": lambda x, a, c: _pool(x, a, True),
    "tpu_matrix_mac": lambda x, a, c: _matrix_mac(x, a),
    "tpu_matrix_mac_2": lambda x, a, c: _matrix_mac_2(x, a),
}


def execute(m, kind, args: dict, ops: "dict[str, Operand] | None" = None) -> None:
    """Run one checked descriptor on machine `m` (lmem array, gmem_read/gmem_write)."""
    if ops is None:
        ops = operands(m.chip, kind, args)
    EXEC[kind.name](_Values(m, ops), args, m.chip)
