"""The guide's argument rules, one function per descriptor kind.

`check(kind, args, chip)` raises `ArgError(arg, message)` for the first rule an argument
breaks. The API turns it into `BmkError("bmk1880_<call>: <arg>: <message>")`; the
command-buffer decoder into a fault naming the command. Rules quoted from the guide carry
its section; the model's own rules name a choice id (tlm/bm1880/choices.py).
"""
from __future__ import annotations

import numpy as np

from .chip import (CTRL_NULL, CTRL_RA, CTRL_RELU, CTRL_TP, FMT_I8, FMT_NAMES, FMT_U8, GMEM_ADDR_BITS,
                   bmk1880_chip_info_t, ctrl_name, gmem_addresses, gmem_default_stride,
                   lmem_slice_overflow, shape_t4, stride_t)
from .descriptors import Kind, field_in_range
from .tensors import TG, TL

SHIFT_MAX = 31                       # choice C-SHIFT-RANGE
GMEM_LIMIT = 1 << GMEM_ADDR_BITS
MAX_GMEM_DATA = 1 << 22              # data in one gmem-only operand (choice C-LIMIT)


class ArgError(Exception):
    def __init__(self, arg: str, msg: str):
        super().__init__(f"{arg}: {msg}")
        self.arg, self.msg = arg, msg


def _fmt(v: int) -> str:
    return FMT_NAMES.get(v, str(v))


def _repeats(addrs: np.ndarray) -> bool:
    a = np.sort(addrs.reshape(-1))
    return bool((a[1:] == a[:-1]).any())


# ---- operand checks ------------------------------------------------------------------------------
def tl_layout_error(chip: bmk1880_chip_info_t, t: TL, stride4=None) -> "str | None":
    """Why a tensor_lmem cannot be placed (None if it can): dims, address, slice rule (2.3)."""
    dims = (t.h, t.w) if t.is_matrix else (t.n, t.c, t.h, t.w)
    if min(dims) < 1:
        return f"shape {t.shape} has a zero dimension"
    if t.count() > chip.lmem_total:
        return f"shape {t.shape} holds {t.count()} data, more than lmem's {chip.lmem_total} bytes (choice C-LIMIT)"
    if not 0 <= t.laddr < chip.lmem_total:
        return f"laddr 0x{t.laddr:x} is outside lmem (0x{chip.lmem_total:x} bytes)"
    s4 = stride4 if stride4 is not None else t.stride4(chip)
    bad = lmem_slice_overflow(chip, t.laddr, t.shape4(chip), s4)
    if bad is not None:
        return (f"channel {bad} of {t.shape} at laddr 0x{t.laddr:x} with strides {tuple(s4)} leaves its lmem slice "
                f"(or lmem): 2.3 requires every datum of a channel in the slice of its (0, c, 0, 0)")
    return None


def _tl(chip, args: dict, name: str, *, matrix: "bool | None" = False, write: bool = False,
        required: bool = True, stride4=None) -> "TL | None":
    t = args.get(name)
    if t is None:
        if required:
            raise ArgError(name, "is NULL")
        return None
    if not isinstance(t, TL):
        raise ArgError(name, f"must be a tensor_lmem, got {type(t).__name__}")
    if t.fmt not in (FMT_I8, FMT_U8):
        raise ArgError(name, f"fmt is {t.fmt}; it must be FMT_I8 or FMT_U8 (4.1)")
    if t.dim not in (2, 4):
        raise ArgError(name, f"shape dim is {t.dim}; it must be 4 (tensor) or 2 (matrix)")
    if matrix is False and t.is_matrix:
        raise ArgError(name, "is a matrix; this call takes tensors")
    if matrix is True and not t.is_matrix:
        raise ArgError(name, "is a tensor; this call takes matrices (4.46)")
    err = tl_layout_error(chip, t, stride4)
    if err:
        raise ArgError(name, err)
    if write and (t.stride is not None or stride4 is not None):
        if _repeats(t.addresses(chip, stride4)):
            raise ArgError(name, "its strides put two elements at one address (choice C-INPLACE)")
    return t


def _pair(chip, args, hi: str, lo: str, *, need_hi: bool, write: bool = False) -> "tuple[TL | None, TL]":
    """A 16-bit value as its high and low planes (4.1): same fmt, same shape, anywhere in lmem;
    a result's planes do not overlap (choice C-PLANES)."""
    tlo = _tl(chip, args, lo, write=write)
    thi = _tl(chip, args, hi, write=write, required=need_hi)
    if thi is not None:
        if thi.fmt != tlo.fmt:
            raise ArgError(hi, f"is {_fmt(thi.fmt)} but {lo} is {_fmt(tlo.fmt)}; both planes of a 16-bit "
                               "value carry its signedness (choice C-SIGN)")
        if thi.shape != tlo.shape:
            raise ArgError(hi, f"shape {thi.shape} differs from {lo} {tlo.shape}")
        if write:
            both = np.intersect1d(thi.addresses(chip), tlo.addresses(chip))
            if both.size:
                raise ArgError(hi, f"overlaps {lo} at lmem 0x{int(both[0]):x}: the two planes of a 16-bit result "
                                   "are two tensors (4.1), written by one command (choice C-INPLACE)")
    return thi, tlo


def _same_shape(args: dict, ref: str, *names: str) -> None:
    want = args[ref].shape
    for n in names:
        t = args.get(n)
        if t is not None and t.shape != want:
            raise ArgError(n, f"shape {t.shape} differs from {ref} {want}; all tensors must be of the same shape")


def _res_fmt(name: str, t: TL, signed: bool, why: str) -> None:
    want = FMT_I8 if signed else FMT_U8
    if t.fmt != want:
        raise ArgError(name, f"is {_fmt(t.fmt)} but the result is {'signed' if signed else 'unsigned'} "
                             f"({why}; choice C-SIGN)")


def _rule(args: dict, names: "tuple[str, ...]", consts: "tuple[bool, ...]" = ()) -> tuple[bool, str]:
    """ch.4: the result is unsigned iff all inputs are unsigned. Returns (signed, explanation)."""
    signed = [n for n in names if args.get(n) is not None and args[n].signed]
    signed += ["b (b_is_signed)" for c in consts if c]
    if signed:
        return True, f"{', '.join(signed)} signed"
    return False, "all inputs unsigned"


def _int_range(args: dict, name: str, lo: int, hi: int, why: str = "") -> int:
    v = args[name]
    if not lo <= v <= hi:
        raise ArgError(name, f"{v} is outside {lo}..{hi}{' (' + why + ')' if why else ''}")
    return v


def _shifts(args: dict, *names: str) -> None:
    for n in names:
        _int_range(args, n, 0, SHIFT_MAX, "choice C-SHIFT-RANGE")


def _aligned(chip, args: dict, name: str, want: bool, section: str) -> None:
    t = args[name]
    if t is not None and tuple(t.stride4(chip)) != tuple(t.default_stride(chip, want)):
        raise ArgError(name, f"must be {'aligned' if want else 'unaligned'} ({section}); its strides are "
                             f"{tuple(t.stride4(chip))}, the {'aligned' if want else 'unaligned'} default is "
                             f"{tuple(t.default_stride(chip, want))}")


def _const(args: dict, name: str, bits: int) -> None:
    """The constant is an s8 (s16) field read as signed or, if not b_is_signed, unsigned: an
    unsigned constant may be given as its value (0..255) or as the s8 field holding its bits."""
    v, signed = args[name], bool(args["b_is_signed"])
    lo, hi = -(1 << (bits - 1)), ((1 << (bits - 1)) - 1) if signed else (1 << bits) - 1
    if not lo <= v <= hi:
        raise ArgError(name, f"{v} is outside {lo}..{hi} for a {'signed' if signed else 'unsigned'} "
                             f"{bits}-bit constant (b_is_signed={signed}; choice C-CONST-SIGN)")


# ---- gmem ----------------------------------------------------------------------------------------------
def _gmem_extent(name: str, addr: int, shape4, stride4) -> None:
    if min(shape4) < 1:
        raise ArgError(name, f"shape {tuple(shape4)} has a zero dimension")
    last = addr + sum((d - 1) * s for d, s in zip(shape4, stride4))
    if last >= GMEM_LIMIT:
        raise ArgError(name, f"reaches gmem address 0x{last:x}, beyond the {GMEM_ADDR_BITS}-bit gmem (choice C-GMEM)")


def _distinct_gmem(name: str, addrs: np.ndarray) -> None:
    if _repeats(addrs):
        raise ArgError(name, "its strides put two elements at one gmem address (choice C-INPLACE)")


def _tg(args: dict, name: str, write: bool) -> TG:
    t = args.get(name)
    if not isinstance(t, TG):
        raise ArgError(name, "is NULL" if t is None else f"must be a tensor_gmem, got {type(t).__name__}")
    if t.dim not in (2, 4):
        raise ArgError(name, f"shape dim is {t.dim}; it must be 4 (tensor) or 2 (matrix)")
    shape4 = (1, 1, t.h, t.w) if t.is_matrix else (t.n, t.c, t.h, t.w)
    stride4 = (0, 0, t.stride[2], t.stride[3]) if t.is_matrix else t.stride
    _gmem_extent(name, t.addr, shape4, stride4)
    if t.count() > MAX_GMEM_DATA:
        raise ArgError(name, f"holds {t.count()} data; one gmem operand holds at most {MAX_GMEM_DATA} (choice C-LIMIT)")
    if write:
        _distinct_gmem(name, t.addresses())
    return t


def _ctrls(args: dict, allowed: tuple[int, ...], section: str) -> int:
    v = args["ctrls"]
    if v not in allowed:
        raise ArgError("ctrls", f"{ctrl_name(v)} is not allowed here; allowed: "
                                f"{', '.join(ctrl_name(a) for a in allowed)} ({section})")
    return v


def gmem_side(chip, t: TL, gaddr: int, stride: "stride_t | None", ctrls: int) -> tuple[tuple, tuple]:
    """The gmem shape (4D; a matrix as (1, 1, R, C)) and strides of a load/store (choice C-TP)."""
    if t.is_matrix:
        r, c = (t.w, t.h) if ctrls == CTRL_TP else (t.h, t.w)
        st = (0, 0, c, 1) if stride is None else (0, 0, stride.h, stride.w)
        return (1, 1, r, c), st
    shape = (t.c, t.n, t.h, t.w) if ctrls == CTRL_TP else (t.n, t.c, t.h, t.w)
    if stride is None:
        st = gmem_default_stride(shape_t4(*shape))
    else:
        st = stride.as4()
    return shape, st


def _gdma_ls(chip, args: dict, write_lmem: bool, strided: bool) -> None:
    t = _tl(chip, args, "t", matrix=None, write=write_lmem)
    ctrls = _ctrls(args, (CTRL_NULL, CTRL_TP), "4.14: CTRL_NULL or CTRL_TP")
    stride = args.get("stride") if strided else None
    if strided and not isinstance(stride, stride_t):
        raise ArgError("stride", f"must be a stride_t, got {type(stride).__name__}")
    shape, st = gmem_side(chip, t, args["gaddr"], stride, ctrls)
    _gmem_extent("gaddr", args["gaddr"], shape, st)
    if strided and not write_lmem:
        _distinct_gmem("stride", gmem_addresses(args["gaddr"], shape, st))


# ---- geometry --------------------------------------------------------------------------------------------
def window_out(size: int, ins: int, ins_last: int, pad0: int, pad1: int, k: int, dil: int, stride: int) -> "int | None":
    """Output extent along one axis after insertion, padding, kernel dilation and striding
    (choice C-CONV); None if the kernel does not fit."""
    full = 1 + (size - 1) * (ins + 1) + ins_last + pad0 + pad1
    keff = (k - 1) * dil + 1
    if full < keff:
        return None
    return (full - keff) // stride + 1


def _window(args: dict, ifmap: TL, ofmap: TL, kh: int, kw: int, *, ins: bool, dil: bool) -> None:
    for s in ("stride_h", "stride_w") + (("dilation_h", "dilation_w") if dil else ()):
        if args[s] < 1:
            raise ArgError(s, f"is {args[s]}; it must be >= 1")
    g = lambda k: args.get(k, 0)          # noqa: E731
    ho = window_out(ifmap.h, g("ins_h") if ins else 0, g("ins_last_h") if ins else 0, args["pad_top"],
                    args["pad_bottom"], kh, args["dilation_h"] if dil else 1, args["stride_h"])
    wo = window_out(ifmap.w, g("ins_w") if ins else 0, g("ins_last_w") if ins else 0, args["pad_left"],
                    args["pad_right"], kw, args["dilation_w"] if dil else 1, args["stride_w"])
    if ho is None or wo is None:
        raise ArgError("ifmap", f"the {'dilated ' if dil else ''}kernel ({kh}x{kw}) does not fit the inserted "
                                f"and padded ifmap {ifmap.shape}")
    if (ofmap.h, ofmap.w) != (ho, wo):
        raise ArgError("ofmap", f"shape {ofmap.shape}: the parameters give H x W = {ho} x {wo} (choice C-CONV)")


def _bias(chip, args: dict, c: int) -> "TL | None":
    b = _tl(chip, args, "bias", required=False)
    if b is not None:
        if b.shape != (2, c, 1, 1):
            raise ArgError("bias", f"shape {b.shape}; a 16-bit (1, {c}, 1, 1) bias is the tensor (2, {c}, 1, 1) (4.41)")
        _aligned(chip, args, "bias", False, "4.41")
    return b


# ---- per-kind rules ------------------------------------------------------------------------------------------
def _gdma_copy_gmem(chip, a):
    dst, src = _tg(a, "dst", True), _tg(a, "src", False)
    if dst.is_matrix != src.is_matrix:
        raise ArgError("dst", "src and dst must be both tensors or both matrices (4.12)")
    if dst.count() != src.count():
        raise ArgError("dst", f"holds {dst.count()} data, src {src.count()}; the totals must be equal (4.12)")
    _ctrls(a, (CTRL_NULL, CTRL_TP) if not src.is_matrix else (CTRL_NULL,),
           "4.12: CTRL_TP for tensors only, else CTRL_NULL")


def _gdma_copy_lmem(chip, a):
    dst, src = _tl(chip, a, "dst", write=True), _tl(chip, a, "src")
    if dst.count() != src.count():
        raise ArgError("dst", f"holds {dst.count()} data, src {src.count()}; the totals must be equal (4.13)")


def _gdma_lrn_shift(chip, a):
    _tl(chip, a, "dst", write=True)
    _tl(chip, a, "src")
    _same_shape(a, "src", "dst")
    _int_range(a, "lrn_step", 0, (1 << 31) - 1, "choice C-LRN")


def _mul(chip, a, const: bool):
    hi, lo = _pair(chip, a, "res_high", "res_low", need_hi=False, write=True)
    _tl(chip, a, "a")
    if const:
        _const(a, "b", 8)
    else:
        _tl(chip, a, "b")
    _same_shape(a, "a", "res_low", "res_high", *(() if const else ("b",)))
    _shifts(a, "rshift_width")
    signed, why = _rule(a, ("a",) if const else ("a", "b"), (bool(a["b_is_signed"]),) if const else ())
    _res_fmt("res_low", lo, signed, why)


def _mac(chip, a, const: bool):
    hi, lo = _pair(chip, a, "res_high", "res_low", need_hi=True, write=True)
    _tl(chip, a, "a")
    if const:
        _const(a, "b", 8)
    else:
        _tl(chip, a, "b")
    _same_shape(a, "a", "res_low", "res_high", *(() if const else ("b",)))
    _shifts(a, "lshift_width", "rshift_width")
    signed, why = _rule(a, ("a", "res_low") if const else ("a", "b", "res_low"),
                        (bool(a["b_is_signed"]),) if const else ())
    _res_fmt("res_low", lo, signed, why)


def _add_sub(chip, a, sub: bool, const: bool = False):
    _pair(chip, a, "res_high", "res_low", need_hi=False, write=True)
    _pair(chip, a, "a_high", "a_low", need_hi=True)
    if const:
        _const(a, "b", 16)
    else:
        _pair(chip, a, "b_high", "b_low", need_hi=True)
    _same_shape(a, "a_low", "res_low", *(() if const else ("b_low",)))
    if sub:
        _res_fmt("res_low", a["res_low"], True, "4.25: the result of sub must be signed")
    else:
        signed, why = _rule(a, ("a_low",) if const else ("a_low", "b_low"), (bool(a["b_is_signed"]),) if const else ())
        _res_fmt("res_low", a["res_low"], signed, why)


def _maxmin(chip, a, res: str, const: bool):
    r = _tl(chip, a, res, write=True)
    x = _tl(chip, a, "a")
    if const:
        _const(a, "b", 8)
        if bool(a["b_is_signed"]) != x.signed:
            raise ArgError("b_is_signed", f"is {bool(a['b_is_signed'])} but a is {_fmt(x.fmt)}; a and b must both "
                                          "be signed or unsigned (choice C-MINCONST)")
    else:
        y = _tl(chip, a, "b")
        if y.fmt != x.fmt:
            raise ArgError("b", f"is {_fmt(y.fmt)} but a is {_fmt(x.fmt)}; a and b must both be signed or "
                                "unsigned (4.26)")
    _same_shape(a, "a", res, *(() if const else ("b",)))
    _res_fmt(res, r, x.signed, f"a is {_fmt(x.fmt)}")


def _arith_shift(chip, a):
    _pair(chip, a, "res_high", "res_low", need_hi=True, write=True)
    _pair(chip, a, "a_high", "a_low", need_hi=True)
    bits = _tl(chip, a, "bits")
    for n in ("a_high", "a_low"):
        if a[n].fmt != FMT_I8:
            raise ArgError(n, f"is {_fmt(a[n].fmt)}; a must be 16-bit signed: FMT_I8 planes (4.29)")
    if bits.fmt != FMT_I8:
        raise ArgError("bits", f"is {_fmt(bits.fmt)}; bits must be signed (4.29)")
    _same_shape(a, "a_low", "res_low", "bits")
    _res_fmt("res_low", a["res_low"], True, "a is signed")


def _logic8(chip, a):
    r = _tl(chip, a, "res", write=True)
    _tl(chip, a, "a")
    _tl(chip, a, "b")
    _same_shape(a, "a", "res", "b")
    signed, why = _rule(a, ("a", "b"))
    _res_fmt("res", r, signed, why)


def _logic16(chip, a):
    _pair(chip, a, "res_high", "res_low", need_hi=True, write=True)
    _pair(chip, a, "a_high", "a_low", need_hi=True)
    _pair(chip, a, "b_high", "b_low", need_hi=True)
    _same_shape(a, "a_low", "res_low", "b_low")
    signed, why = _rule(a, ("a_low", "b_low"))
    _res_fmt("res_low", a["res_low"], signed, why)


def _copy(chip, a):
    d, s = _tl(chip, a, "dst", write=True), _tl(chip, a, "src")
    _same_shape(a, "src", "dst")
    if d.fmt != s.fmt:
        raise ArgError("dst", f"is {_fmt(d.fmt)} but src is {_fmt(s.fmt)} (choice C-COPY)")


def _copy_with_stride(chip, a):
    for n in ("dst_stride", "src_stride"):
        if not isinstance(a.get(n), stride_t):
            raise ArgError(n, f"must be a stride_t, got {type(a.get(n)).__name__}")
    d = _tl(chip, a, "dst", write=True, stride4=a["dst_stride"].as4())
    s = _tl(chip, a, "src", stride4=a["src_stride"].as4())
    _same_shape(a, "src", "dst")
    if d.fmt != s.fmt:
        raise ArgError("dst", f"is {_fmt(d.fmt)} but src is {_fmt(s.fmt)} (choice C-COPY)")


def _mdsum(chip, a):
    hi, lo = _pair(chip, a, "res_high", "res_low", need_hi=False, write=True)
    x = _tl(chip, a, "a")
    if lo.shape != (1, x.c, 1, 1):
        raise ArgError("res_low", f"shape {lo.shape}; the result of a {x.shape} is (1, {x.c}, 1, 1) (4.38)")
    if lo.fmt != x.fmt:
        raise ArgError("res_low", f"is {_fmt(lo.fmt)} but a is {_fmt(x.fmt)}; a and res must both be signed or "
                                  "unsigned (4.38)")


def _lut(chip, a):
    o, t = _tl(chip, a, "ofmap", write=True), _tl(chip, a, "table")
    _tl(chip, a, "ifmap")
    _same_shape(a, "ifmap", "ofmap")
    if t.shape != (1, chip.npu_num, 16, 16):
        raise ArgError("table", f"shape {t.shape}; it must be (1, {chip.npu_num}, 16, 16): one 256-entry copy per "
                                "slice (4.39, choice C-LUT)")
    if o.fmt != t.fmt:
        raise ArgError("ofmap", f"is {_fmt(o.fmt)} but table is {_fmt(t.fmt)} (choice C-LUT)")


def _relu(chip, a):
    o, i = _tl(chip, a, "ofmap", write=True), _tl(chip, a, "ifmap")
    _same_shape(a, "ifmap", "ofmap")
    _res_fmt("ofmap", o, i.signed, f"ifmap is {_fmt(i.fmt)}")


def _fmaps(chip, a) -> tuple[TL, TL]:
    o, i = _tl(chip, a, "ofmap", write=True), _tl(chip, a, "ifmap")
    _aligned(chip, a, "ifmap", True, "4.41: ifmap and ofmap must be aligned")
    _aligned(chip, a, "ofmap", True, "4.41: ifmap and ofmap must be aligned")
    if o.n != i.n:
        raise ArgError("ofmap", f"N is {o.n} but ifmap N is {i.n}")
    return o, i


def conv_weight_stride(w: TL) -> tuple[int, int, int, int]:
    """4.41: the special layout of conv weights (C_in, C_out, Kh, Kw)."""
    cin, _, kh, kw = w.n, w.c, w.h, w.w
    return (1, cin * kh * kw, cin * kw, cin)


def _conv(chip, a):
    o, i = _fmaps(chip, a)
    w = a.get("weight")
    if isinstance(w, TL) and w.stride is not None and tuple(w.stride) != conv_weight_stride(w):
        raise ArgError("weight", f"strides {w.stride}; conv weights use the layout of 4.41 {conv_weight_stride(w)}")
    w = _tl(chip, a, "weight", stride4=conv_weight_stride(w) if isinstance(w, TL) and w.dim == 4 else None)
    if w.n != i.c or w.c != o.c:
        raise ArgError("weight", f"shape {w.shape}; with ifmap C {i.c} and ofmap C {o.c} it must be "
                                 f"({i.c}, {o.c}, Kh, Kw) (4.41)")
    _bias(chip, a, o.c)
    _window(a, i, o, w.h, w.w, ins=True, dil=True)
    _shifts(a, "rshift_width")
    signed, why = _rule(a, ("ifmap", "weight", "bias"))
    _res_fmt("ofmap", o, signed, why)


def _winograd(chip, a):
    o, i = _fmaps(chip, a)
    w = _tl(chip, a, "weight")
    if w.shape != (i.c, o.c, 3, 3):
        raise ArgError("weight", f"shape {w.shape}; winograd takes 3x3 kernels: ({i.c}, {o.c}, 3, 3) (4.42)")
    if w.stride is not None and tuple(w.stride) != tuple(w.default_stride(chip, w.aligned)):
        raise ArgError("weight", "must be default strided in lmem (4.42)")
    _bias(chip, a, o.c)
    _window(dict(a, stride_h=1, stride_w=1), i, o, 3, 3, ins=False, dil=False)
    _shifts(a, "rshift_width")
    signed, why = _rule(a, ("ifmap", "weight", "bias"))
    _res_fmt("ofmap", o, signed, why)


def _depthwise(chip, a):
    o, i = _fmaps(chip, a)
    if o.c != i.c:
        raise ArgError("ofmap", f"C is {o.c} but ifmap C is {i.c}; depthwise keeps the channels")
    w = _tl(chip, a, "weight")
    if w.n != 1 or w.c != i.c:
        raise ArgError("weight", f"shape {w.shape}; depthwise weights are (1, {i.c}, Kh, Kw) (choice C-DEPTHWISE)")
    if w.stride is not None and tuple(w.stride) != tuple(w.default_stride(chip, w.aligned)):
        raise ArgError("weight", "must be default strided in lmem (4.43)")
    _bias(chip, a, o.c)
    _window(a, i, o, w.h, w.w, ins=True, dil=False)
    _shifts(a, "rshift_width")
    signed, why = _rule(a, ("ifmap", "weight", "bias"))
    _res_fmt("ofmap", o, signed, why)


def _pool(chip, a, avg: bool):
    o, i = _fmaps(chip, a)
    if o.c != i.c:
        raise ArgError("ofmap", f"C is {o.c} but ifmap C is {i.c}; pooling keeps the channels")
    for k in ("kh", "kw"):
        if a[k] < 1:
            raise ArgError(k, f"is {a[k]}; it must be >= 1")
    _window(a, i, o, a["kh"], a["kw"], ins=avg, dil=False)
    if avg:
        _shifts(a, "rshift_width")
    _res_fmt("ofmap", o, i.signed, f"ifmap is {_fmt(i.fmt)}")


def _matrix_mac(chip, a):
    ctrls = _ctrls(a, (CTRL_NULL, CTRL_RELU, CTRL_RA), "4.46: CTRL_RELU or CTRL_RA, not both")
    res = _tl(chip, a, "res", matrix=True, write=True)
    left, right = _tl(chip, a, "left", matrix=True), _tl(chip, a, "right", matrix=True)
    bias = _tl(chip, a, "bias", matrix=True, required=False)
    for n in ("res", "left", "right", "bias"):
        _aligned(chip, a, n, True, "4.46: res, left, right and bias must be aligned")
    r, k = left.shape
    if right.shape[0] != k:
        raise ArgError("right", f"shape {right.shape}; left {left.shape} needs {k} rows")
    c = right.shape[1]
    wide = ctrls == CTRL_RA or not a["res_is_int8"]
    want = (2 * r, c) if wide else (r, c)
    if res.shape != want:
        why = "16-bit original or result: (R x 2, C)" if wide else "8-bit: (R, C)"
        raise ArgError("res", f"shape {res.shape}; it must be {want} ({why}, 4.46)")
    if bias is not None and bias.shape != (2, c):
        raise ArgError("bias", f"shape {bias.shape}; a 16-bit (1, {c}) bias is the matrix (2, {c}) (4.46)")
    _shifts(a, "lshift_width", "rshift_width")                      # lshift_width is used with CTRL_RA only
    signed, why = _rule(a, ("left", "right", "bias") + (("res",) if ctrls == CTRL_RA else ()))
    _res_fmt("res", res, signed, why)


def _matrix_mac_2(chip, a):
    res, left, right = (_tl(chip, a, n, write=(n == "res")) for n in ("res", "left", "right"))
    for n, t, want in (("res", res, (1, 256, 1, 256)), ("left", left, (1, 256, 1, 256)),
                       ("right", right, (256, 16, 1, 16))):
        if t.shape != want:
            raise ArgError(n, f"shape {t.shape}; it must be {want} (4.47)")
    signed, why = _rule(a, ("left", "right"))
    _res_fmt("res", res, signed, why)


CHECKS = {
    "gdma_copy_gmem": _gdma_copy_gmem,
    "gdma_copy_lmem": _gdma_copy_lmem,
    "gdma_load": lambda c, a: _gdma_ls(c, a, True, False),
    "gdma_store": lambda c, a: _gdma_ls(c, a, False, False),
    "gdma_load_stride": lambda c, a: _gdma_ls(c, a, True, True),
    "gdma_store_stride": lambda c, a: _gdma_ls(c, a, False, True),
    "gdma_lrn_shift": _gdma_lrn_shift,
    "tpu_mul": lambda c, a: _mul(c, a, False),
    "tpu_mul_const": lambda c, a: _mul(c, a, True),
    "tpu_mac": lambda c, a: _mac(c, a, False),
    "tpu_mac_const": lambda c, a: _mac(c, a, True),
    "tpu_add": lambda c, a: _add_sub(c, a, False),
    "tpu_add_const": lambda c, a: _add_sub(c, a, False, const=True),
    "tpu_sub": lambda c, a: _add_sub(c, a, True),
    "tpu_max": lambda c, a: _maxmin(c, a, "max", False),
    "tpu_max_const": lambda c, a: _maxmin(c, a, "max", True),
    "tpu_min": lambda c, a: _maxmin(c, a, "min", False),
    "tpu_min_const": lambda c, a: _maxmin(c, a, "min", True),
    "tpu_arith_shift": _arith_shift,
    "tpu_and_int8": _logic8, "tpu_or_int8": _logic8, "tpu_xor_int8": _logic8,
    "tpu_and_int16": _logic16, "tpu_or_int16": _logic16, "tpu_xor_int16": _logic16,
    "tpu_copy": _copy,
    "tpu_copy_with_stride": _copy_with_stride,
    "tpu_mdsum": _mdsum,
    "tpu_lut": _lut,
    "tpu_relu": _relu,
    "tpu_conv": _conv,
    "tpu_winograd": _winograd,
    "tpu_depthwise": _depthwise,
    "tpu_max_pooling": lambda c, a: _pool(c, a, False),
    "tpu_avg_pooling": lambda c, a: _pool(c, a, True),
    "tpu_matrix_mac": _matrix_mac,
    "tpu_matrix_mac_2": _matrix_mac_2,
}


def check_types(kind: Kind, args: dict) -> None:
    """Every field has a value of its type and range (before encoding)."""
    for f in kind.fields:
        if f.name not in args:
            raise ArgError(f.name, "is missing")
        v = args[f.name]
        if f.type == "bool":
            if not field_in_range("bool", v):
                raise ArgError(f.name, f"must be a bool, got {v!r}")
        elif f.type in ("u8", "int", "u32", "u64", "ctrl", "c8", "c16"):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise ArgError(f.name, f"must be an integer, got {v!r}")
            if not field_in_range(f.type, int(v)):
                raise ArgError(f.name, f"{v} does not fit the field's type ({f.type})")
        elif f.type == "stride":
            if not isinstance(v, stride_t):
                raise ArgError(f.name, f"must be a stride_t, got {type(v).__name__}")
            if not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) and 0 <= x < 1 << 32
                       for x in v.as4()):
                raise ArgError(f.name, f"{v}: strides are u32")
        elif f.type == "tl" and v is not None:
            if not isinstance(v, TL):
                raise ArgError(f.name, f"must be a tensor_lmem, got {type(v).__name__}")
            for x in (v.n, v.c, v.h, v.w, v.laddr, v.fmt) + (v.stride or ()):
                if not isinstance(x, (int, np.integer)) or isinstance(x, bool) or not 0 <= x < 1 << 32:
                    raise ArgError(f.name, f"{x} does not fit a u32 shape, stride or address field")
        elif f.type == "tg":
            if not isinstance(v, TG):
                raise ArgError(f.name, "is NULL" if v is None else f"must be a tensor_gmem, got {type(v).__name__}")
            if not all(isinstance(x, (int, np.integer)) and not isinstance(x, bool) for x in
                       (v.addr, v.dim, v.n, v.c, v.h, v.w) + tuple(v.stride)) \
                    or not 0 <= v.addr < 1 << 64 \
                    or not all(0 <= x < 1 << 32 for x in (v.n, v.c, v.h, v.w) + tuple(v.stride)):
                raise ArgError(f.name, "address, shape or stride does not fit its field (u64 / u32)")


def check(kind: Kind, args: dict, chip: bmk1880_chip_info_t) -> None:
    """All rules of one descriptor (ArgError on the first broken one)."""
    check_types(kind, args)
    CHECKS[kind.name](chip, args)
