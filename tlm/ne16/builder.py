"""Jobs from logical layers: program the NE16's registers as the pulp-nnx driver and the GAP
SDK do (a reference, not the TLM; the TLM reads only registers and memory).

`Layer` is a logical layer (HWC input, weights, normalization parameters). `build(layer,
style)` lays its tensors out in memory and returns a `Program`: the bytes to load and the job
register words (one job; a stride-2 layer is one job per 2x2 block of outputs, as pulp-nnx's
`ne16_nnx_dispatch_stride2x2` tiles it), plus where the output lands.

Two remainder styles (digest §9; the TLM accepts both):
* "pulpnnx" - a full last subtile has remainder 16 / 32 / 3, the input remainder is
  (output remainder + 2) - bottom/right padding (EXT pulp-nnx `ne16_task_set_counters`),
  PADDING.BOTTOM/RIGHT are the layer's padding; bottom/right padding is then implicit and
  reads 0, so a non-zero padding value is refused on those sides;
* "gapsdk" - a full last subtile has remainder 0, the input remainder is output remainder + 2
  (the whole window), and PADDING.BOTTOM/RIGHT are counted "from 5 pixels" (seed): they mark
  the window pixels past the input's last row/column, which the engine fills with the value.

Register values go through the register table (`registers.by_name(...).encode`), never
through retyped bit positions.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import job as J
from . import registers as R
from . import reference, weights

STYLES = ("pulpnnx", "gapsdk")
KIND_MODE = {"conv3x3": J.MODE_3X3, "dw3x3": J.MODE_3X3_DW, "conv1x1": J.MODE_1X1,
             "linear": J.MODE_RESERVED}
WIDTH_CODE = {bits: code for code, bits in J.WIDTH_BITS.items()}
DEFAULT_BASE = 0x10000000        # GAP9 cluster L1 (TCDM); any 32-bit address works
ALIGN = 16
GUARD = 0x100                    # room before the input for the padding pre-offset


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


@dataclass
class Layer:
    """A logical NE16 layer. `x` (H, W, Cin) uint8, or uint16 for MODE16 (linear: (Cin,) or
    (1, 1, Cin)); `w` (Cout, Cin, 3, 3) / (C, 1, 3, 3) depthwise / (Cout, Cin, 1, 1) /
    (Cout, Cin) linear, unsigned values below 2**qw."""
    kind: str
    x: np.ndarray
    w: np.ndarray
    qw: int = 8
    stride: int = 1
    padding: tuple = (0, 0, 0, 0)            # top, bottom, left, right
    pad_value: int = 0
    weight_offset: "int | None" = None       # None: symmetric weights (CONFIG0.WEIGHT_OFFS=0)
    filter_mask: tuple = (0, 0, 0, 0)        # top, bottom, left, right
    streamin: "np.ndarray | None" = None     # (Ho, Wo, Cout) int32
    quant: bool = True
    out_bits: int = 8
    relu: bool = True
    norm_bits: int = 8
    scale: "np.ndarray | None" = None        # (Cout,) unsigned norm_bits values
    shift: "int | np.ndarray" = 0            # global RIGHT_SHIFT, or (Cout,) per channel
    bias: "np.ndarray | None" = None         # (Cout,) int32
    rounding_bit: int = 0                    # CONFIG0 bit 11 (stored, never applied)

    def __post_init__(self):
        if self.kind not in reference.KINDS:
            raise ValueError(f"unknown layer kind {self.kind!r}")
        self.x = np.asarray(self.x)
        if self.kind == "linear":
            self.x = self.x.reshape(1, 1, -1)
        if self.scale is None:
            self.scale = np.ones(self.cout, np.int64)

    @property
    def mode16(self) -> bool:
        return self.x.dtype == np.uint16

    @property
    def cin(self) -> int:
        return self.x.shape[2]

    @property
    def cout(self) -> int:
        return self.w.shape[0]

    @property
    def fs(self) -> int:
        return 3 if self.kind in ("conv3x3", "dw3x3") else 1

    @property
    def per_channel_shift(self) -> bool:
        return np.ndim(self.shift) > 0

    @property
    def out_shape(self) -> tuple:
        if self.kind == "linear":
            return (1, 1, self.cout)
        t, b, l, r = self.padding
        h, w, _ = self.x.shape
        return ((h + t + b - self.fs) // self.stride + 1, (w + l + r - self.fs) // self.stride + 1,
                self.cout)

    def reference(self) -> np.ndarray:
        """The expected output (Ho, Wo, Cout) from tlm.ne16.reference."""
        return reference.layer(
            self.x, self.w, self.kind, stride=self.stride, padding=self.padding,
            pad_value=self.pad_value, weight_offset=self.weight_offset or 0,
            filter_mask=self.filter_mask, streamin=self.streamin, quant=self.quant,
            scale=self.scale, shift=self.shift, bias=self.bias, out_bits=self.out_bits,
            relu=self.relu)


@dataclass
class Program:
    """What the host loads and programs for one layer."""
    layer: Layer
    style: str
    loads: list = field(default_factory=list)        # [(addr, bytes)]
    jobs: list = field(default_factory=list)         # [[24 register words]]
    out_addr: int = 0
    out_shape: tuple = ()
    out_bytes: int = 1                               # bytes per output element
    addrs: dict = field(default_factory=dict)        # tensor name -> address

    @property
    def out_size(self) -> int:
        return int(np.prod(self.out_shape)) * self.out_bytes

    def decode_output(self, raw: bytes) -> np.ndarray:
        """(Ho, Wo, Cout) int64 from the output bytes (signed unless rectified)."""
        lay = self.layer
        signed = not lay.relu or (not lay.quant and self.out_bytes == 4)
        dt = {1: "i1" if signed else "u1", 2: "<i2" if signed else "<u2",
              4: "<i4" if signed else "<u4"}[self.out_bytes]
        return np.frombuffer(raw, dt).astype(np.int64).reshape(self.out_shape)


class _Alloc:
    def __init__(self, base: int):
        self.next = base

    def take(self, n: int) -> int:
        a = self.next
        self.next = -(-(a + max(n, 1)) // ALIGN) * ALIGN
        return a


def _reg(name: str, **fields) -> tuple:
    r = R.by_name(name)
    return r.index, r.encode(**fields)


def _word(name: str, value: int) -> tuple:
    return R.by_name(name).index, value & 0xFFFFFFFF


def _counts(n: int, tile: int, style: str) -> tuple:
    nb, rem = _ceil(n, tile), n % tile
    if style == "pulpnnx" and rem == 0:
        rem = tile
    return nb, rem


def build(layer: Layer, style: str = "pulpnnx", base: int = DEFAULT_BASE) -> Program:
    """Lay the layer out from `base` and program its job(s). ValueError for a layer the
    chosen style (or the NE16) cannot express."""
    if style not in STYLES:
        raise ValueError(f"unknown remainder style {style!r} (one of {', '.join(STYLES)})")
    lay = layer
    kind, fs = lay.kind, lay.fs
    if not 1 <= lay.qw <= 8:
        raise ValueError("qw must be 1..8")
    if lay.stride not in (1, 2) or (lay.stride == 2 and kind not in ("conv3x3", "dw3x3")):
        raise ValueError("stride 2 is a 3x3 mode (CONFIG0.STRIDED_2X2)")
    if kind == "dw3x3" and lay.mode16:
        raise ValueError("3x3 depthwise has no MODE16")
    if kind in ("conv1x1", "linear") and any(lay.padding):
        raise ValueError("padding is for the 3x3 modes")
    if lay.streamin is not None and lay.out_bits != 32:
        raise ValueError("streamin needs 32-bit outputs")
    ib = 2 if lay.mode16 else 1
    ob = lay.out_bits // 8
    h, w_in, cin = lay.x.shape
    ho, wo, cout = lay.out_shape
    if kind == "dw3x3" and lay.w.shape[0] != cin:
        raise ValueError("depthwise weights must have Cout == Cin")
    if kind == "linear" and cin % 16:
        raise ValueError("linear layers need Cin to be a multiple of 16 (whole 16-byte rows)")
    top, bottom, left, right = lay.padding
    if style == "pulpnnx" and lay.pad_value and (bottom or right):
        raise ValueError("the pulp-nnx remainder style pads bottom/right implicitly with 0; "
                         "use style='gapsdk' for a non-zero padding value there")
    if max(lay.padding) > 2:
        raise ValueError("padding above 2 does not fit the 5-pixel window")

    # ---- memory layout ----
    al = _Alloc(base)
    prog = Program(lay, style, out_shape=(ho, wo, cout), out_bytes=ob)
    al.take(GUARD)
    x_bytes = np.ascontiguousarray(lay.x.astype("<u2" if lay.mode16 else "u1")).tobytes()
    a_x = al.take(len(x_bytes))
    if kind == "conv3x3" or kind == "conv1x1":
        wb = weights.encode_conv(lay.w if lay.w.ndim == 4 else lay.w.reshape(cout, cin, 1, 1),
                                 lay.qw, lay.mode16)
    elif kind == "dw3x3":
        wb = weights.encode_depthwise(lay.w, lay.qw)
    else:
        wb = weights.encode_linear(lay.w.reshape(cout, cin), lay.qw)
    a_w = al.take(len(wb))
    nb = lay.norm_bits // 8
    sc = np.asarray(lay.scale, np.int64)
    if sc.min() < 0 or sc.max() >= (1 << lay.norm_bits):
        raise ValueError(f"scale must be unsigned {lay.norm_bits}-bit values")
    s_bytes = sc.astype({1: "u1", 2: "<u2", 4: "<u4"}[nb]).tobytes()
    a_s = al.take(len(s_bytes))
    a_sh = al.take(cout) if lay.per_channel_shift else 0
    a_b = al.take(4 * cout) if lay.bias is not None else 0
    al.take(GUARD)
    a_y = al.take(ho * wo * cout * ob)
    prog.loads += [(a_x, x_bytes), (a_w, wb)]
    if lay.quant:
        prog.loads.append((a_s, s_bytes))
        if lay.per_channel_shift:
            prog.loads.append((a_sh, np.asarray(lay.shift).astype(np.uint8).tobytes()))
        if lay.bias is not None:
            prog.loads.append((a_b, np.asarray(lay.bias).astype("<i4").tobytes()))
    if lay.streamin is not None:
        prog.loads.append((a_y, np.asarray(lay.streamin).astype("<i4").tobytes()))
    prog.out_addr = a_y
    prog.addrs = {"input": a_x, "weights": a_w, "scale": a_s, "shift": a_sh, "bias": a_b,
                  "output": a_y}

    # ---- registers common to every job ----
    tp = J.TP_DW if kind == "dw3x3" else J.TP_OUT
    regs = [0] * R.N_JOB_REGS

    def put(pair):
        regs[pair[0]] = pair[1]
    cfg = dict(QWM1=lay.qw - 1, MODE16=int(lay.mode16), STREAMOUT=int(lay.quant),
               FILTER_MODE=KIND_MODE[kind], LINEAR=int(kind == "linear"),
               STRIDED_2X2=int(lay.stride == 2), ROUNDING=lay.rounding_bit,
               NORM_BITS=WIDTH_CODE[lay.norm_bits], STREAMIN=int(lay.streamin is not None),
               WEIGHT_OFFS=int(lay.weight_offset is not None),
               RIGHT_SHIFT=0 if lay.per_channel_shift else int(lay.shift),
               QUANT_BITS=WIDTH_CODE[lay.out_bits], QUANT_RECT=int(not lay.relu),
               NORM_SHIFT=int(lay.per_channel_shift), NORM_BIAS=int(lay.bias is not None))
    put(_reg("CONFIG0", **cfg))
    put(_word("WEIGHTS_PTR", a_w))
    put(_word("SCALE_PTR", a_s))
    put(_word("SCALE_SHIFT_PTR", a_sh))
    put(_word("SCALE_BIAS_PTR", a_b))
    put(_word("WEIGHT_OFFSET", lay.weight_offset or 0))
    mt, mb, ml, mr = lay.filter_mask
    put(_reg("FILTER_MASK", TOP=mt, BOTTOM=mb, LEFT=ml, RIGHT=mr))
    put(_word("OUTFEAT_D0_STRIDE", J.OUT_WORD))

    if kind == "linear":
        kin_groups = cin // 16
        nb_ki, rem_ki = _counts(kin_groups, J.TP_IN, style)
        nb_ko, rem_ko = _counts(cout, tp, style)
        plane = cin // 8
        put(_word("INFEAT_PTR", a_x))
        put(_word("OUTFEAT_PTR", a_y))
        put(_word("INFEAT_D0_STRIDE", J.TP_IN))
        put(_word("WEIGHTS_D0_STRIDE", plane))
        put(_word("WEIGHTS_D1_STRIDE", plane * lay.qw))
        put(_word("WEIGHTS_D2_STRIDE", plane * lay.qw * tp))
        put(_word("OUTFEAT_D1_STRIDE", cout * ob))
        put(_word("OUTFEAT_D2_STRIDE", cout * ob))
        put(_reg("SUBTILE_NB0", KO=nb_ko, KI=nb_ki))
        put(_reg("SUBTILE_REM0", KO=rem_ko, KI=rem_ki))
        put(_reg("SUBTILE_NB1", HO=1, WO=1))
        prog.jobs.append(regs)
        return prog

    kin_bytes = cin * ib
    nb_ki = _ceil(kin_bytes, J.TP_IN)
    wd0 = 1 if lay.mode16 else 2
    if kind == "conv1x1":
        wst = (wd0 * lay.qw, wd0 * lay.qw * nb_ki)
    elif kind == "conv3x3":
        wst = (9 * wd0, 9 * wd0 * lay.qw * nb_ki)
    else:
        wst = (9 * wd0, 0)
    put(_word("WEIGHTS_D0_STRIDE", wst[0]))
    put(_word("WEIGHTS_D1_STRIDE", wst[1]))
    d0_in, d1_in = cin * ib, w_in * cin * ib
    put(_word("INFEAT_D0_STRIDE", d0_in))
    put(_word("INFEAT_D1_STRIDE", d1_in))
    d1_out, d2_out = cout * ob, wo * cout * ob
    x_origin = (a_x - (top * w_in + left) * d0_in) & 0xFFFFFFFF   # pulp-nnx ne16_pad_addr
    nb_k, rem_k = _counts(kin_bytes, J.TP_IN, style)
    nb_ko, rem_ko = _counts(cout, tp, style)
    put(_reg("SUBTILE_NB0", KO=nb_ko, KI=nb_k))
    put(_reg("SUBTILE_REM0", KO=rem_ko, KI=rem_k))

    if lay.stride == 1:
        put(_word("OUTFEAT_D1_STRIDE", d1_out))
        put(_word("OUTFEAT_D2_STRIDE", d2_out))
        _spatial(regs, ho, wo, fs, lay.padding, lay.pad_value, style, h + top + bottom,
                 w_in + left + right)
        put(_word("INFEAT_PTR", x_origin))
        put(_word("OUTFEAT_PTR", a_y))
        prog.jobs.append(regs)
        return prog

    # stride 2: one job per 2x2 block of outputs (pulp-nnx ne16_nnx_dispatch_stride2x2)
    put(_word("OUTFEAT_D1_STRIDE", d1_out >> 1))
    put(_word("OUTFEAT_D2_STRIDE", d2_out >> 1))
    if d1_out % 2:
        raise ValueError("stride 2 needs an even output pixel stride (pulp-nnx)")
    n_h, n_w = _ceil(ho, 2), _ceil(wo, 2)
    if lay.streamin is not None and (ho % 2 or wo % 2) and (n_h > 1 or n_w > 1):
        raise ValueError("stride 2 with an odd output size re-computes overlapping 2x2 tiles; "
                         "with streamin the overlap would accumulate twice")
    in_off_h, in_off_w = (2 if ho % 2 else 0), (2 if wo % 2 else 0)
    out_off_h, out_off_w = (1 if ho % 2 else 0), (1 if wo % 2 else 0)
    for ti in range(n_h):
        for tj in range(n_w):
            r = list(regs)
            sub_h, sub_w = (3 if ho > 1 else 1), (3 if wo > 1 else 1)
            row0 = ti * 4 - (in_off_h if ti else 0)
            col0 = tj * 4 - (in_off_w if tj else 0)
            last_h, last_w = ti == n_h - 1, tj == n_w - 1
            rows_real = h + top - row0                       # window rows inside the input
            cols_real = w_in + left - col0
            win_h, win_w = sub_h + 2, sub_w + 2
            if style == "pulpnnx":
                # pulp-nnx programs HI = sub_h + 2 - (bottom unless h + top >= 5) and WI =
                # sub_w + 2; for a 1-row or 1-column tile that drops a real row (or reads a
                # pixel past the row), so the input remainders here are the tile's real
                # extent: bottom/right padding is implicit (0), as in pulp-nnx's stride-1 jobs
                rem = (sub_h, sub_w, min(win_h, rows_real), min(win_w, cols_real))
                pad = (top if ti == 0 else 0, 0, left if tj == 0 else 0, 0)
            else:
                rem = (sub_h % 3, sub_w % 3, 0 if sub_h == 3 else win_h, 0 if sub_w == 3 else win_w)
                pad = (top if ti == 0 else 0,
                       J.FBUF - rows_real if last_h and rows_real < win_h else 0,
                       left if tj == 0 else 0,
                       J.FBUF - cols_real if last_w and cols_real < win_w else 0)
            _set(r, "SUBTILE_NB1", HO=1, WO=1)
            _set(r, "SUBTILE_REM1", HO=rem[0], WO=rem[1])
            _set(r, "SUBTILE_REM2", HI=rem[2], WI=rem[3])
            _set(r, "PADDING", VALUE=lay.pad_value, TOP=pad[0], BOTTOM=pad[1], LEFT=pad[2],
                 RIGHT=pad[3])
            r[R.by_name("INFEAT_PTR").index] = (x_origin + row0 * d1_in + col0 * d0_in) & 0xFFFFFFFF
            oy = ti * 2 - (out_off_h if ti else 0)
            ox = tj * 2 - (out_off_w if tj else 0)
            r[R.by_name("OUTFEAT_PTR").index] = (a_y + oy * d2_out + ox * d1_out) & 0xFFFFFFFF
            prog.jobs.append(r)
    return prog


def _set(regs, name: str, **fields) -> None:
    i, v = _reg(name, **fields)
    regs[i] = v


def _spatial(regs, ho: int, wo: int, fs: int, padding, pad_value: int, style: str,
             hp: int, wp: int) -> None:
    """SUBTILE_NB1/REM1/REM2 and PADDING of a stride-1 layer (padded input hp x wp)."""
    top, bottom, left, right = padding
    nb_ho, nb_wo = _ceil(ho, 3), _ceil(wo, 3)
    for n_sub, pb, size in ((nb_ho, bottom, hp), (nb_wo, right, wp)):
        if pb and n_sub > 1 and size - pb < 3 * (n_sub - 2) + J.FBUF:
            raise ValueError("bottom/right padding reaches an interior subtile (digest §9: "
                             "padding applies to border subtiles only)")
    rem_ho, rem_wo = ho % 3, wo % 3
    win_h, win_w = (rem_ho or 3) + fs - 1, (rem_wo or 3) + fs - 1
    if style == "pulpnnx":
        rem = (rem_ho or 3, rem_wo or 3, win_h - bottom, win_w - right)
        pb, pr = bottom, right
    else:
        rem = (rem_ho, rem_wo, 0 if rem_ho == 0 else win_h, 0 if rem_wo == 0 else win_w)
        pb = J.FBUF - (win_h - bottom) if bottom else 0
        pr = J.FBUF - (win_w - right) if right else 0
    _set(regs, "SUBTILE_NB1", HO=nb_ho, WO=nb_wo)
    _set(regs, "SUBTILE_REM1", HO=rem[0], WO=rem[1])
    _set(regs, "SUBTILE_REM2", HI=rem[2], WI=rem[3])
    _set(regs, "PADDING", VALUE=pad_value, TOP=top, BOTTOM=pb, LEFT=left, RIGHT=pr)
