"""The numba kernels of tlm.ethos_u85.ops.compiled (imported by it on first use only:
this module imports numba).  Row layouts: compiled.S_* / E_* / P_*."""
from __future__ import annotations

import numpy as np
from numba import njit

from .compiled import (E_MODE, E_OA, E_OB, E_STAGE, E_ZPA, E_ZPB, MODE_ADD, MODE_MIN, MODE_MUL, MODE_SUB,
                       P_CLAMP, P_HI, P_IZP, P_LO, P_WRAP, P_ZP, S_CHI, S_CLAMP, S_CLO, S_DIFF, S_RP, S_SCALE,
                       S_SHIFT, S_TABLE, S_WRAP32, S_ZP)


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
def elementwise(a, b, ta, tb, prm, table, out, dst):
    """The decomposed 16-bit elementwise op (row prm) into out; False: not covered.  (The
    row's entries are read into locals first: the loop then keeps them in registers.)  The
    output stage: ``p = acc*scale``, ``p += rn - rp`` where p < 0, ``p = (p + rp) >> shift``,
    then ``(int32_t)((int32_t)p + zp)`` (wrap32) or ``p + zp``, the clamp to [clo, chi],
    and with a LUT activation ``table[p - clo]``."""
    H, W, C = out.shape
    mode = prm[E_MODE]
    oa, ob, zpa, zpb = prm[E_OA], prm[E_OB], prm[E_ZPA], prm[E_ZPB]
    o = E_STAGE
    scale, shift, rp, diff, zp = prm[o + S_SCALE], prm[o + S_SHIFT], prm[o + S_RP], prm[o + S_DIFF], prm[o + S_ZP]
    clamp, clo, chi = prm[o + S_CLAMP], prm[o + S_CLO], prm[o + S_CHI]
    wrap32, lut = prm[o + S_WRAP32], prm[o + S_TABLE]
    na, nb, nt = ta.size, tb.size, table.size
    for y in range(H):
        for x in range(W):
            for c in range(C):
                va = np.int64(a[y, x, c])
                vb = np.int64(b[y, x, c])
                if mode == MODE_MUL:
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
def pointwise(x, w, ch, prm, out, dst):
    """A 1x1 CONV: out[y, x, n] = epilogue(sum_k (x[y, x, k] - izp) * w[n, k]) with the
    per-channel rows ch = (bias, scale, shift, rp, rp - rn) and prm (izp, wrap bits or 0,
    clamp, amin - zp, amax - zp, zp)."""
    H, W, K = x.shape
    N = w.shape[0]
    izp = prm[P_IZP]
    wb = prm[P_WRAP]
    sh = 64 - wb
    clamp = prm[P_CLAMP]
    lo, hi, zp = prm[P_LO], prm[P_HI], prm[P_ZP]
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
                if clamp:
                    b = min(max(b, lo), hi)
                out[yy, xx, n] = b + zp
    return store(out, dst)
