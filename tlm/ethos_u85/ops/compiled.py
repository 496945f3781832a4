"""Compiled computes of operation plans (numba): one call per planned operation instead of
a dozen numpy calls.

A plan's compute (``tlm.ethos_u85.ops.plan``) is a closure of vectorised numpy steps; on the
small operations of an LSTM (80 elements) each numpy call costs about as much as the
arithmetic of the whole operation, so an operation costs about ten calls.  The kernels
here do the same integer arithmetic in one nopython loop per operation:

* :func:`lookup`: ``table[v - lo]`` (a 1x1 POOL or unary ELEMENTWISE result table, the
  input-scaling tables of a decomposed ELEMENTWISE);
* :func:`elementwise`: a 16-bit add/sub/min/max/mul from its input-scaling tables (or the
  zero-point-subtracted operands for mul), or (:func:`direct_compute`) elementwise.compute's
  accumulator of operands scale_a / scale_b pass through (32-bit: every mode but div), then
  the output stage (``plan._output_stage``: ``(acc*scale + R) >> shift`` with R by the
  product's sign, the zero point, the clamp or the activation's int32 wrap, a LUT
  activation's table);
* :func:`pointwise`: a 1x1 CONV / FULLY_CONNECTED (int8 or int16 IFM) with exact int64
  accumulators and the fused per-channel epilogue (``common.fused_epilogue``: bias, the
  wrap to the accumulator width, per-channel scale/shift/rounding, clamp, zero point,
  truncation), or with a LUT activation a table of its values after the rescale.

Each kernel takes its constants as one int64 parameter row plus its tables, so a call
costs one dispatch.  :func:`program` runs many operations of a frozen run in one call
(``tlm.ethos_u85.ops.fused``): rows (``R_*``) naming the same kernels with their constants
(``compute.fused``), DMA copies, FIFO pushes and pops, on the memory pages by address.

The plan code builds a compiled compute only beside the numpy one it
replaces and uses it only after it agreed with that one (and with the ordinary run's own
bytes, as every plan) when built; an index outside a table makes the kernel report failure,
and the plan then declines to the ordinary path.

numba is imported on first use (a plan being built), never by ``import tlm``; the kernels
are compiled with ``cache=True`` (the first process compiles them, later ones load them).
Without numba (or with ``TLM_COMPILED=0``) :func:`available` is False and the plans keep
their numpy computes.
"""
from __future__ import annotations

import os

import numpy as np

_STATE: dict = {}


def available() -> bool:
    """numba importable and the computes not switched off (TLM_COMPILED=0, set_enabled);
    imports the kernels on the first call."""
    ok = _STATE.get("ok")
    if ok is None:
        ok = False
        if missing_reason(imported=False) is None:
            try:
                _define()
                ok = True
            except ImportError as e:
                _STATE["error"] = str(e)
        _STATE["ok"] = ok
    return ok


def set_enabled(on: bool) -> None:
    """Switch the compiled computes on or off for plans built from now on (tests compare
    both ways; plans already built keep theirs: ``plan.clear()``)."""
    _STATE["off"] = not on
    _STATE.pop("ok", None)


def missing_reason(imported: bool = True) -> "str | None":
    """Why the compiled computes are off (None when they are on)."""
    if _STATE.get("off"):
        return "switched off (compiled.set_enabled)"
    if os.environ.get("TLM_COMPILED", "1").lower() in ("0", "no", "false"):
        return "switched off by TLM_COMPILED=0"
    if imported and not available():
        return f"numba could not be imported ({_STATE.get('error')})"
    return None


# ---------------------------------------------------------------------------- stage rows
# the output stage's parameter row (int64), after the operation's own leading entries
S_SCALE, S_SHIFT, S_RP, S_DIFF, S_ZP, S_CLAMP, S_CLO, S_CHI, S_WRAP32, S_TABLE = range(10)
STAGE_LEN = 10
# elementwise row: mode, the operand offsets and zero points, whether the operands enter as
# they are (E_DIRECT: no input-scaling tables), whether the accumulator wraps to int32, the
# SHL/LSHR precision mask, then the stage
E_MODE, E_OA, E_OB, E_ZPA, E_ZPB, E_DIRECT, E_WRAP, E_MASK = range(8)
E_STAGE = 8
MODE_ADD, MODE_SUB, MODE_MIN, MODE_MAX, MODE_MUL = range(5)
# modes of the direct case only (operands that scale_a / scale_b pass through unchanged)
(MODE_LRELU, MODE_ABS, MODE_CLZ, MODE_SHR, MODE_SHL, MODE_LSHR, MODE_CMP_EQ, MODE_CMP_NE, MODE_CMP_GE,
 MODE_CMP_GT, MODE_AND, MODE_OR, MODE_XOR, MODE_NOT, MODE_AND_NOT) = range(5, 20)
# pointwise row
P_IZP, P_WRAP, P_CLAMP, P_LO, P_HI, P_ZP, P_LUT, P_TLO, P_THI = range(9)
LUT_NONE, LUT_RANGE, LUT_BYTE = 0, 1, 2     # P_LUT: no LUT activation; table[clamp(v) - tlo]; table[v & 0xFF]
# the kernels, as a fused frozen run's rows name them (tlm.ethos_u85.ops.fused)
K_LOOKUP, K_ELEMENTWISE, K_POINTWISE = 1, 2, 3
# a fused frozen run's row (int64; see _kernels.program): the kind (K_DMA or K_*), flags, the
# OFM shape, two operands (SRC_* fields), the destination (DST_* fields), up to four
# constant arrays (their indices in the code vector's table, -1: none), a scalar
K_DMA = 0
R_KIND, R_FLAGS, R_H, R_W, R_C, R_A, R_B, R_DST, R_CST, R_SCALAR = 0, 1, 2, 3, 4, 5, 10, 15, 19, 23
ROW_LEN = 24
F_CLEAR, F_FLAG = 1, 2              # R_FLAGS: the FIFOs are cleared first; the result flag's operation
SRC_KIND, SRC_WHERE, SRC_OFF, SRC_CODE, SRC_CH = range(5)   # where: page number in the list / FIFO
SRC_NONE, SRC_MEM, SRC_FIFO, SRC_CONST = 0, 1, 2, 3         # (a FIFO's SRC_OFF/SRC_CODE: its range lo, hi;
                                                            # a constant's SRC_WHERE: its value, shape (1, 1, 1))
DST_KIND, DST_WHERE, DST_OFF, DST_CODE = range(4)
DST_MEM, DST_FIFO = 1, 2
# a K_DMA row: the line ranges (rows of the lines table: page, offset, length) it reads and writes
D_READ0, D_READ1, D_WRITE0, D_WRITE1 = 2, 3, 4, 5
# a segment's code vector (int64): this header, then the rows, the lines table, the
# constants' table ((address, length) per constant array)
C_NROWS, C_ROWS, C_NLINES, C_LINES, C_CST = range(5)
CODE_HDR = 5
# the work vector (int64): this header (FIFOs, their capacity, the scratch size, the result
# flag, pages, the page size), the pages' data addresses, the FIFOs' (head, tail), the FIFO
# values, three scratch arrays
W_NF, W_CAP, W_MOST, W_STATE, W_NPAGES, W_PAGE_SIZE = range(6)
W_PAGES = 6


def code_vector(rows, lines, consts) -> tuple:
    """(code, rows view, lines view) of a segment (see C_*); *consts*: the constant arrays
    the rows name by index (R_CST), C-contiguous int64, which the caller keeps (the vector
    holds their addresses and lengths only)."""
    for c in consts:
        if c.dtype != np.int64 or not c.flags.c_contiguous:
            raise ValueError("code_vector: a constant array is not C-contiguous int64")
    rows = np.asarray(rows, np.int64).reshape(-1, ROW_LEN)
    lines = np.asarray(lines, np.int64).reshape(-1, 3)
    r0 = CODE_HDR
    l0 = r0 + rows.size
    c0 = l0 + lines.size
    code = np.zeros(c0 + 2 * len(consts), np.int64)
    code[[C_NROWS, C_ROWS, C_NLINES, C_LINES, C_CST]] = [len(rows), r0, len(lines), l0, c0]
    code[r0:l0], code[l0:c0] = rows.reshape(-1), lines.reshape(-1)
    code[c0:] = [v for c in consts for v in (c.ctypes.data, c.size)]
    return code, code[r0:l0].reshape(rows.shape), code[l0:c0].reshape(lines.shape)


def work_vector(pages, page_size: int, nf: int, cap: int, most: int) -> tuple:
    """(work, FIFO values [nf, cap], FIFO (head, tail) [nf, 2], result flag [1]) (see W_*)
    for *pages*: C-contiguous uint8 arrays of *page_size* bytes, which the caller keeps
    (the vector holds their addresses only)."""
    for a in pages:
        if a.dtype != np.uint8 or a.shape != (page_size,) or not a.flags.c_contiguous or not a.flags.writeable:
            raise ValueError("work_vector: a page is not a writable C-contiguous uint8 array of the page size")
    p0 = W_PAGES + len(pages)
    f0 = p0 + 2 * nf
    w = np.zeros(f0 + nf * cap + 3 * most, np.int64)
    w[[W_NF, W_CAP, W_MOST, W_NPAGES, W_PAGE_SIZE]] = [nf, cap, most, len(pages), page_size]
    w[W_PAGES:p0] = [a.ctypes.data for a in pages]
    return w, w[f0:f0 + nf * cap].reshape(nf, cap), w[p0:f0].reshape(nf, 2), w[W_STATE:W_STATE + 1]


def dtype_code(dt) -> "int | None":
    """An integer dtype's code in the rows: its width in bytes times 2, plus 1 if signed
    (None: not an integer type a row can hold)."""
    dt = np.dtype(dt)
    if dt.kind not in "iu" or (dt.kind == "u" and dt.itemsize == 8) or dt.byteorder == ">":
        return None
    return dt.itemsize * 2 + (dt.kind == "i")


def stage_row(scale, shift, rp, rn, zp, clo, chi, wrap32, table) -> list:
    """The output stage's row: ``p = acc*scale; p += rn - rp where p < 0; p = (p + rp) >>
    shift``, then ``(int32_t)(p + zp)`` clamped (wrap32) or ``p + zp`` clamped to [clo, chi]
    (None: no clamp), or looked up in *table* over [clo, chi]."""
    clamp = clo is not None
    return [int(scale), int(shift), int(rp), int(rn) - int(rp), int(zp), int(clamp),
            int(clo) if clamp else 0, int(chi) if clamp else 0, int(bool(wrap32)), int(table is not None)]


def _define() -> None:
    from . import _kernels                                  # (imports numba)
    _STATE.update(lookup=_kernels.lookup, elementwise=_kernels.elementwise, pointwise=_kernels.pointwise,
                  program=_kernels.program)


def program():
    """The fused frozen run's kernel (_kernels.program), or None (not available, or it did
    not compile: tried once per process on an empty segment)."""
    if not available():
        return None
    ok = _STATE.get("program_ok")
    if ok is None:
        try:
            code = code_vector(np.zeros((0, ROW_LEN), np.int64), np.zeros((0, 3), np.int64), [])[0]
            ok = _STATE["program"](code, work_vector([], 1, 1, 1, 1)[0], np.zeros(1, np.uint8)) == -1
        except Exception as e:                              # noqa: BLE001 - the Python steps then
            _STATE["error"], ok = f"fused program: {type(e).__name__}: {e}", False
        _STATE["program_ok"] = ok
    return _STATE["program"] if ok else None


# ---------------------------------------------------------------------------- computes
def _compute(call, shape_of, odt, fallback, spec):
    """The compute closure of a kernel: ``compute(vals)`` returns the OFM (a new array; the
    numpy *fallback* for operands *shape_of* rejects with None), and ``compute.into(vals,
    dst)`` also stores it into *dst* (the OFM's bytes in a memory page, as the unsigned type
    of the OFM's width) in the same call, after every element was computed (a kernel that
    fails writes nothing); it returns the OFM in a buffer it reuses, or None (the caller
    then takes compute).  ``compute.fused = (shape_of, odt, spec)``: what a fused frozen run
    (tlm.ethos_u85.ops.fused) needs to run the same kernel, *spec* = (K_* kind, its int64
    constant arrays, its scalar, its operands: per kernel operand None (the next of the
    plan's operands) or the int value of a constant (1, 1, 1) operand)."""
    odt = np.dtype(odt)
    nodst = np.empty(0, np.dtype(f"<u{odt.itemsize}"))
    bufs: dict = {}

    def compute(vals):
        shp = shape_of(vals)
        if shp is None:
            return fallback(vals)
        out = np.empty(shp, odt)
        if not call(vals, out, nodst):
            raise Declined
        return out

    def into(vals, dst):
        shp = shape_of(vals)
        if shp is None:
            return None
        out = bufs.get(shp)
        if out is None:
            out = bufs[shp] = np.empty(shp, odt)
        if out.size != dst.size:
            return None
        if not call(vals, out, dst):
            raise Declined
        return out
    compute.into = into
    compute.fused = (shape_of, odt, spec)
    return compute


def lookup_compute(table: np.ndarray, lo: int, fallback):
    """compute(vals) = table[vals[0] - lo] (plan._lookup's), or None (not available).
    *fallback*: the numpy compute, for operands that are not the kernel's case (not 3-D)."""
    if not available() or table.ndim != 1 or table.dtype.kind not in "iu":
        return None
    k, lo = _STATE["lookup"], int(lo)
    table = np.ascontiguousarray(table)

    def shape_of(vals):
        v = vals[0]
        return v.shape if v.ndim == 3 else None
    return _compute(lambda vals, out, dst: k(vals[0], table, lo, out, dst), shape_of, table.dtype, fallback,
                    (K_LOOKUP, (table.astype(np.int64),), lo, (None,)))


def elementwise_compute(mode: int, ta, tb, oa: int, ob: int, zpa: int, zpb: int, srow: list,
                        table, odt, fallback):
    """The decomposed elementwise compute (plan._ew_decomposed's), or None.  *fallback*: the
    numpy compute, for operands that are not the kernel's case (broadcast, not 3-D)."""
    if not available():
        return None
    k = _STATE["elementwise"]
    prm = np.array([mode, oa, ob, zpa, zpb, 0, 0, -1] + list(srow), np.int64)
    if srow[S_TABLE] and table is None:
        return None
    z = np.zeros(1, np.int64)
    ta = z if ta is None else np.ascontiguousarray(ta, np.int64)
    tb = z if tb is None else np.ascontiguousarray(tb, np.int64)
    table = np.zeros(1, odt) if table is None else np.ascontiguousarray(table)

    def shape_of(vals):
        a, b = vals[0], vals[1]
        return a.shape if a.shape == b.shape and a.ndim == 3 else None
    return _compute(lambda vals, out, dst: k(vals[0], vals[1], ta, tb, prm, table, out, dst), shape_of, odt,
                    fallback, (K_ELEMENTWISE, (ta, tb, prm, table.astype(np.int64)), 0, (None, None)))


def direct_compute(mode: int, ka, kb, zpa: int, zpb: int, wrap: bool, mask: int, rterms, srow: list, table,
                   odt, fallback):
    """The elementwise compute of operands that scale_a / scale_b pass through unchanged
    (plan._ew_direct's: elementwise.compute's accumulator, then the output stage *srow*), in
    the same kernel as elementwise_compute's, or None.  *ka*, *kb*: a constant operand's
    value (a scalar, its zero point already subtracted; an absent IFM2: 0) or None (the
    plan's next operand, from which the kernel subtracts *zpa* / *zpb*); *wrap*: the
    accumulator wraps to int32 (all but a 32-bit mul); *mask*: SHL/LSHR's precision mask (-1:
    none); *rterms*: SHR's rounding terms (arith.round_terms) for shifts 0..31, (for a >= 0,
    for a < 0), or None.  Operands broadcast along axes of extent 1."""
    if not available() or (srow[S_TABLE] and table is None) or (mode == MODE_SHR and rterms is None):
        return None
    k = _STATE["elementwise"]
    prm = np.array([mode, 0, 0, 0 if ka is not None else zpa, 0 if kb is not None else zpb, 1, int(bool(wrap)),
                    mask] + list(srow), np.int64)
    z = np.zeros(1, np.int64)
    rp, rn = (z, z) if rterms is None else (np.ascontiguousarray(r, np.int64) for r in rterms)
    table = np.zeros(1, odt) if table is None else np.ascontiguousarray(table)
    ca = None if ka is None else np.full((1, 1, 1), int(ka), np.int64)
    cb = None if kb is None else np.full((1, 1, 1), int(kb), np.int64)

    def operands(vals):
        if ca is not None:
            return ca, (cb if cb is not None else vals[0])
        return vals[0], (cb if cb is not None else vals[1])

    def shape_of(vals):
        a, b = operands(vals)
        if a.ndim != 3 or b.ndim != 3:
            return None
        for x, y in zip(a.shape, b.shape):
            if x != y and x != 1 and y != 1:
                return None
        return tuple(max(x, y) for x, y in zip(a.shape, b.shape))

    def call(vals, out, dst):
        a, b = operands(vals)
        return k(a, b, rp, rn, prm, table, out, dst)
    return _compute(call, shape_of, odt, fallback,
                    (K_ELEMENTWISE, (rp, rn, prm, table.astype(np.int64)), 0, (ka, kb)))


def pointwise_compute(w: np.ndarray, bias, scale, shift, rp, rn, izp: int, wrap_bits: int, clamp: bool,
                      lo: int, hi: int, zp: int, odt, shape, fallback, lut=None):
    """A 1x1 CONV's compute (plan._prepare_conv's pointwise case), or None.  *w*: [N, K]
    weights; the per-channel vectors of length N; *fallback*: the numpy compute, for an IFM
    that is not the kernel's case.  *lut*: a LUT activation in place of the clamp to [lo,
    hi] and the zero point: (LUT_RANGE or LUT_BYTE, the table (truncated OFM values), tlo,
    thi): the OFM is ``table[min(max(v, tlo), thi) - tlo]`` or ``table[v & 0xFF]`` of ``v =
    (int32_t)(r + zp)``."""
    if not available():
        return None
    k = _STATE["pointwise"]
    w = np.ascontiguousarray(w, np.int64)
    ch = np.ascontiguousarray(np.stack([np.asarray(v, np.int64) for v in (bias, scale, shift, rp,
                                                                           np.asarray(rp, np.int64) - rn)]))
    mode, table, tlo, thi = lut if lut is not None else (LUT_NONE, np.zeros(1), 0, 0)
    table = np.ascontiguousarray(table, np.int64)
    prm = np.array([izp, wrap_bits, int(clamp), lo, hi, zp, mode, tlo, thi], np.int64)
    h, wd, N = shape
    K = w.shape[1]
    shape = tuple(shape)

    def shape_of(vals):
        x = vals[0]
        return shape if x.shape == (h, wd, K) else None
    return _compute(lambda vals, out, dst: k(vals[0], w, ch, prm, table, out, dst), shape_of, odt, fallback,
                    (K_POINTWISE, (w, ch, prm, table), 0, (None,)))


class Declined(Exception):
    """A compiled compute that does not cover these operands (the plan declines)."""
