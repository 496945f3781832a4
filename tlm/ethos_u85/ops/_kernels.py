"""The numba kernels of tlm.ethos_u85.ops.compiled (imported by it on first use only:
this module imports numba).  Row layouts: compiled.S_* / E_* / P_*; the fused program's: compiled.R_* / C_* / W_*."""
from __future__ import annotations

import numpy as np
from numba import carray, njit
from numba.core import cgutils, types
from numba.extending import intrinsic

from .compiled import (C_CST, C_LINES, C_NLINES, C_NROWS, C_ROWS, DST_CODE, DST_KIND, DST_MEM, DST_OFF, DST_WHERE,
                       D_READ0, D_READ1, D_WRITE0, D_WRITE1, E_DIRECT, E_MASK, E_MODE, E_OA, E_OB, E_STAGE, E_WRAP,
                       E_ZPA, E_ZPB, F_CLEAR, F_FLAG, K_DMA, K_ELEMENTWISE, K_LOOKUP, LUT_RANGE, MODE_ABS, MODE_ADD,
                       MODE_AND, MODE_CLZ, MODE_CMP_EQ, MODE_CMP_GE, MODE_CMP_GT, MODE_CMP_NE, MODE_LRELU, MODE_LSHR,
                       MODE_MAX, MODE_MIN, MODE_MUL, MODE_NOT, MODE_OR, MODE_SHL, MODE_SHR, MODE_SUB, MODE_XOR,
                       P_CLAMP, P_HI, P_IZP, P_LO, P_LUT, P_THI, P_TLO, P_WRAP, P_ZP, ROW_LEN, R_A, R_B, R_C, R_CST,
                       R_DST, R_FLAGS, R_H, R_KIND, R_SCALAR, R_W, SRC_CH, SRC_CODE, SRC_CONST, SRC_FIFO, SRC_KIND,
                       SRC_MEM, SRC_OFF, SRC_WHERE, S_CHI, S_CLAMP, S_CLO, S_DIFF, S_RP, S_SCALE, S_SHIFT, S_TABLE,
                       S_WRAP32, S_ZP, W_CAP, W_MOST, W_NF, W_NPAGES, W_PAGES, W_PAGE_SIZE, W_STATE)


@njit(cache=True, nogil=True)
def store(out, dst):
    """The finished OFM *out* (C-contiguous) into *dst* (its bytes in a page, as the unsigned
    type of its width: the same bits) when dst is not empty; True."""
    if dst.size:
        o = out.reshape(out.size)
        for i in range(o.size):
            dst[i] = o[i]
    return True


@njit(cache=True, nogil=True)
def lookup(v, table, lo, out, dst):
    """out = table[v - lo] (3-D v and out of one shape); False: an index outside."""
    H, W, C = v.shape
    n = table.size
    for y in range(H):
        for x in range(W):
            for c in range(C):
                i = np.int64(v[y, x, c]) - lo
                if i < 0 or i >= n:
                    return False
                out[y, x, c] = table[i]
    return store(out, dst)


@njit(cache=True, nogil=True)
def _direct_acc(mode, a, b, ta, tb, mask):
    """elementwise.compute's accumulator (before its int32 wrap) for operands scale_a /
    scale_b pass through: the direct modes, and add/sub/min/max/mul without tables; SHR's
    rounding terms for shifts 0..31 in *ta* (a >= 0) and *tb* (a < 0)."""
    if mode == MODE_MUL:
        return a * b
    if mode == MODE_ADD:
        return a + b
    if mode == MODE_SUB:
        return a - b
    if mode == MODE_MIN:
        return min(a, b)
    if mode == MODE_MAX:
        return max(a, b)
    if mode == MODE_LRELU:
        return a
    if mode == MODE_ABS:
        return abs(a)
    if mode == MODE_CLZ:
        v = a & 0xFFFFFFFF
        n = np.int64(32)
        while v != 0:
            n -= 1
            v >>= 1
        return n
    if mode == MODE_SHR:
        s = b & 31
        return (a + (ta[s] if a >= 0 else tb[s])) >> s
    if mode == MODE_SHL:
        v = a << (b & 31)
        return (((v + 0x80000000) & 0xFFFFFFFF) - 0x80000000) & mask
    if mode == MODE_LSHR:
        return (a & mask & 0xFFFFFFFF) >> (b & 31)
    if mode == MODE_CMP_EQ:
        return np.int64(-1) if a == b else np.int64(0)
    if mode == MODE_CMP_NE:
        return np.int64(-1) if a != b else np.int64(0)
    if mode == MODE_CMP_GE:
        return np.int64(-1) if a >= b else np.int64(0)
    if mode == MODE_CMP_GT:
        return np.int64(-1) if a > b else np.int64(0)
    if mode == MODE_AND:
        return a & b
    if mode == MODE_OR:
        return a | b
    if mode == MODE_XOR:
        return a ^ b
    if mode == MODE_NOT:
        return ~a
    return a & ~b                                           # MODE_AND_NOT


@njit(cache=True, nogil=True)
def elementwise(a, b, ta, tb, prm, table, out, dst):
    """An elementwise op (row prm) into out; False: not covered.  Its accumulator: a
    decomposed 16-bit add/sub/min/max from the input-scaling tables ta, tb (indices raw - oa,
    raw - ob) or mul of the zero-point-subtracted operands, or (E_DIRECT) _direct_acc of the
    zero-point-subtracted operands, wrapped to int32 where E_WRAP; operands broadcast along
    axes of extent 1.  (The row's entries are read into locals first: the loop then keeps
    them in registers.)  The output stage: ``p = acc*scale``, ``p += rn - rp`` where p < 0,
    ``p = (p + rp) >> shift``, then ``(int32_t)((int32_t)p + zp)`` (wrap32) or ``p + zp``,
    the clamp to [clo, chi], and with a LUT activation ``table[p - clo]``."""
    H, W, C = out.shape
    mode = prm[E_MODE]
    oa, ob, zpa, zpb = prm[E_OA], prm[E_OB], prm[E_ZPA], prm[E_ZPB]
    direct, wrap, mask = prm[E_DIRECT], prm[E_WRAP], prm[E_MASK]
    o = E_STAGE
    scale, shift, rp, diff, zp = prm[o + S_SCALE], prm[o + S_SHIFT], prm[o + S_RP], prm[o + S_DIFF], prm[o + S_ZP]
    clamp, clo, chi = prm[o + S_CLAMP], prm[o + S_CLO], prm[o + S_CHI]
    wrap32, lut = prm[o + S_WRAP32], prm[o + S_TABLE]
    na, nb, nt = ta.size, tb.size, table.size
    ha, wa, ka = a.shape
    hb, wb, kb = b.shape
    for y in range(H):
        for x in range(W):
            for c in range(C):
                va = np.int64(a[min(y, ha - 1), min(x, wa - 1), min(c, ka - 1)])
                vb = np.int64(b[min(y, hb - 1), min(x, wb - 1), min(c, kb - 1)])
                if direct:
                    acc = _direct_acc(mode, va - zpa, vb - zpb, ta, tb, mask)
                    if wrap:
                        acc = ((acc + 0x80000000) & 0xFFFFFFFF) - 0x80000000
                elif mode == MODE_MUL:
                    acc = (va - zpa) * (vb - zpb)
                else:
                    ia, ib = va - oa, vb - ob
                    if ia < 0 or ia >= na or ib < 0 or ib >= nb:
                        return False
                    xa, xb = ta[ia], tb[ib]
                    if mode == MODE_ADD:
                        acc = xa + xb
                    elif mode == MODE_SUB:
                        acc = xa - xb
                    elif mode == MODE_MIN:
                        acc = min(xa, xb)
                    else:
                        acc = max(xa, xb)
                p = acc * scale
                if p < 0:
                    p += diff
                p = (p + rp) >> shift
                if wrap32:
                    p = ((p + 0x80000000) & 0xFFFFFFFF) - 0x80000000
                    p = ((p + zp + 0x80000000) & 0xFFFFFFFF) - 0x80000000
                else:
                    p += zp
                if clamp:
                    p = min(max(p, clo), chi)
                if lut:
                    i = p - clo
                    if i < 0 or i >= nt:
                        return False
                    out[y, x, c] = table[i]
                else:
                    out[y, x, c] = p
    return store(out, dst)


@njit(cache=True, nogil=True)
def pointwise(x, w, ch, prm, table, out, dst):
    """A 1x1 CONV: out[y, x, n] = epilogue(sum_k (x[y, x, k] - izp) * w[n, k]) with the
    per-channel rows ch = (bias, scale, shift, rp, rp - rn) and prm (izp, wrap bits or 0,
    clamp, amin - zp, amax - zp, zp, then a LUT activation: compiled.LUT_* mode, tlo, thi):
    the bias, the wrap, the per-channel rescale r; then r clamped plus zp, or with a LUT
    activation ``table[...]`` of ``(int32_t)(r + zp)`` (compiled.pointwise_compute)."""
    H, W, K = x.shape
    N = w.shape[0]
    izp = prm[P_IZP]
    wb = prm[P_WRAP]
    sh = 64 - wb
    clamp = prm[P_CLAMP]
    lo, hi, zp = prm[P_LO], prm[P_HI], prm[P_ZP]
    lut, tlo, thi = prm[P_LUT], prm[P_TLO], prm[P_THI]
    xs = np.empty(K, np.int64)
    for yy in range(H):
        for xx in range(W):
            for k in range(K):
                xs[k] = np.int64(x[yy, xx, k]) - izp
            for n in range(N):
                acc = np.int64(0)
                for k in range(K):
                    acc += xs[k] * w[n, k]
                b = acc + ch[0, n]
                if wb:
                    b = (b << sh) >> sh
                b *= ch[1, n]
                if b < 0:
                    b -= ch[4, n]
                b = (b + ch[3, n]) >> ch[2, n]
                if lut:
                    v = ((b + zp + 0x80000000) & 0xFFFFFFFF) - 0x80000000
                    if lut == LUT_RANGE:
                        out[yy, xx, n] = table[min(max(v, tlo), thi) - tlo]
                    else:
                        out[yy, xx, n] = table[v & 0xFF]
                    continue
                if clamp:
                    b = min(max(b, lo), hi)
                out[yy, xx, n] = b + zp
    return store(out, dst)


# ---------------------------------------------------------------------------- fused frozen runs
@intrinsic
def _pointer(typingctx, addr):
    """The int64 *addr* as a pointer (for numba.carray)."""
    sig = types.voidptr(types.int64)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)
    return sig, codegen


@intrinsic
def _memmove(typingctx, dst, doff, src, soff, n):
    """dst[doff:doff + n] = src[soff:soff + n] for 1-D uint8 arrays, as one memmove (a byte
    loop here runs at about 2 ns a byte); the caller keeps the spans inside the arrays."""
    sig = types.void(dst, types.intp, src, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        d, do, s, so, m = args
        da = context.make_array(signature.args[0])(context, builder, d)
        sa = context.make_array(signature.args[2])(context, builder, s)
        cgutils.raw_memmove(builder, builder.gep(da.data, [do]), builder.gep(sa.data, [so]), m, 1)
        return context.get_dummy_value()
    return sig, codegen


@njit(cache=True, nogil=True)
def _extend(v, code):
    """*v* as the integer type of dtype code *code* (compiled.dtype_code) holds it: its low
    bytes, sign- or zero-extended (what a cast to that type and back to int64 gives)."""
    w = code >> 1
    if w >= 8:
        return v
    sh = 64 - 8 * w
    if code & 1:
        return (v << sh) >> sh
    return v & ((np.int64(1) << (8 * w)) - 1)


@njit(cache=True, nogil=True)
def _operand(work, row, o, n, fbuf, fptr, buf):
    """Operand fields row[o:] into buf[:n] as int64 (a FIFO's values peeked, not popped; a
    constant's one value); False: a FIFO holds fewer values or one outside the operand's
    range (the plan declines)."""
    kind = row[o + SRC_KIND]
    if kind == SRC_CONST:
        buf[0] = row[o + SRC_WHERE]
        return n == 1
    if kind == SRC_MEM:
        page = _page(work, row[o + SRC_WHERE])
        off, code = row[o + SRC_OFF], row[o + SRC_CODE]
        w = code >> 1
        for i in range(n):
            p = off + i * w
            v = np.int64(0)
            for j in range(w):
                v |= np.int64(page[p + j]) << (8 * j)
            buf[i] = _extend(v, code)
        return True
    f = row[o + SRC_WHERE]
    head = fptr[f, 0]
    if fptr[f, 1] - head < n:
        return False
    lo, hi = row[o + SRC_OFF], row[o + SRC_CODE]
    for i in range(n):
        v = fbuf[f, head + i]
        if v < lo or v > hi:
            return False
        buf[i] = v
    return True


@njit(cache=True, nogil=True)
def _page(work, k):
    """Page *k* of the work vector's list (compiled.W_PAGES), as a uint8 array."""
    return carray(_pointer(work[W_PAGES + k]), (work[W_PAGE_SIZE],), np.uint8)


@njit(cache=True, nogil=True)
def _const(code, i):
    """Constant array *i* of a code vector (int64; its address and length in the table at
    code[C_CST]), or an empty array for -1."""
    if i < 0:
        return np.empty(0, np.int64)
    t = code[C_CST] + 2 * i
    return carray(_pointer(code[t]), (code[t + 1],), np.int64)


@njit(cache=True, nogil=True)
def program(code, work, buf):
    """A fused frozen run's consecutive operations (compiled.R_* rows of the *code* vector,
    compiled.C_*) on the memory pages the *work* vector (compiled.W_*) holds the addresses
    of (rows name them by position), with the byte buffer *buf*: a DMA copies its read lines into
    *buf*, then writes them; an operation reads its operands (memory bytes decoded, a FIFO's
    values with their range check, or a constant: SRC_CONST, shape (1, 1, 1)), runs lookup /
    elementwise / pointwise on them as int64 arrays, then clears the FIFOs (F_CLEAR), pops
    its FIFO operands and stores the OFM (its low bytes, little-endian) or pushes it (cast
    to the OFM type) - plan._Plan's order.
    *fbuf*/*fptr*: the chaining FIFOs' values and (head, tail) per FIFO; *sa*, *sb*, *so*:
    scratch for two operands and the OFM; state[0]: the result flag the F_FLAG operation
    sets (its OFM's last element's low bit).  Returns -1, or the row whose operand or
    kernel declined (memory may then be partly written).  (Three arrays: a call's cost is
    about its arguments' unboxing; a typed list of the pages cost 2.6 us more a call.)"""
    nr, nl = code[C_NROWS], code[C_NLINES]
    rows = code[code[C_ROWS]:code[C_ROWS] + nr * ROW_LEN].reshape((nr, ROW_LEN))
    lines = code[code[C_LINES]:code[C_LINES] + nl * 3].reshape((nl, 3))
    nf, cap, most = work[W_NF], work[W_CAP], work[W_MOST]
    np_ = work[W_NPAGES]
    f0 = W_PAGES + np_ + 2 * nf
    fptr = work[W_PAGES + np_:f0].reshape((nf, 2))
    fbuf = work[f0:f0 + nf * cap].reshape((nf, cap))
    s0 = f0 + nf * cap
    sa, sb, so = work[s0:s0 + most], work[s0 + most:s0 + 2 * most], work[s0 + 2 * most:s0 + 3 * most]
    nodst = np.empty(0, np.uint8)
    for r in range(rows.shape[0]):
        row = rows[r]
        kind = row[R_KIND]
        if kind == K_DMA:
            pos = 0
            for i in range(row[D_READ0], row[D_READ1]):
                m = lines[i, 2]
                _memmove(buf, pos, _page(work, lines[i, 0]), lines[i, 1], m)
                pos += m
            pos = 0
            for i in range(row[D_WRITE0], row[D_WRITE1]):
                m = lines[i, 2]
                _memmove(_page(work, lines[i, 0]), lines[i, 1], buf, pos, m)
                pos += m
            continue
        H, W, C = row[R_H], row[R_W], row[R_C]
        n = H * W * C
        ca = row[R_A + SRC_CH]
        ha, wa = (1, 1) if row[R_A + SRC_KIND] == SRC_CONST else (H, W)
        if not _operand(work, row, R_A, ha * wa * ca, fbuf, fptr, sa):
            return r
        a = sa[:ha * wa * ca].reshape((ha, wa, ca))
        out = so[:n].reshape((H, W, C))
        c0 = _const(code, row[R_CST])
        c1 = _const(code, row[R_CST + 1])
        if kind == K_LOOKUP:
            ok = lookup(a, c0, row[R_SCALAR], out, nodst)
        elif kind == K_ELEMENTWISE:
            cb = row[R_B + SRC_CH]
            hb, wb = (1, 1) if row[R_B + SRC_KIND] == SRC_CONST else (H, W)
            if not _operand(work, row, R_B, hb * wb * cb, fbuf, fptr, sb):
                return r
            b = sb[:hb * wb * cb].reshape((hb, wb, cb))
            ok = elementwise(a, b, c0, c1, _const(code, row[R_CST + 2]), _const(code, row[R_CST + 3]), out, nodst)
        else:
            ok = pointwise(a, c0.reshape((C, ca)), c1.reshape((5, C)), _const(code, row[R_CST + 2]),
                           _const(code, row[R_CST + 3]), out, nodst)
        if not ok:
            return r
        o = so[:n]
        if row[R_FLAGS] & F_FLAG:
            work[W_STATE] = o[n - 1] & 1
        if row[R_FLAGS] & F_CLEAR:
            fptr[:, :] = 0
        if row[R_A + SRC_KIND] == SRC_FIFO:
            fptr[row[R_A + SRC_WHERE], 0] += H * W * ca
        if kind == K_ELEMENTWISE and row[R_B + SRC_KIND] == SRC_FIFO:
            fptr[row[R_B + SRC_WHERE], 0] += H * W * row[R_B + SRC_CH]
        ocode = row[R_DST + DST_CODE]
        if row[R_DST + DST_KIND] == DST_MEM:
            page, off, w = _page(work, row[R_DST + DST_WHERE]), row[R_DST + DST_OFF], ocode >> 1
            for i in range(n):
                v = o[i]
                for j in range(w):
                    page[off + i * w + j] = (v >> (8 * j)) & 0xFF
        else:
            f = row[R_DST + DST_WHERE]
            t = fptr[f, 1]
            if t + n > fbuf.shape[1]:                       # (not expected: sized when bound)
                return r
            for i in range(n):
                fbuf[f, t + i] = _extend(o[i], ocode)
            fptr[f, 1] = t + n
    return -1
