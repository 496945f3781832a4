"""The numba kernels of tlm.ethos_u85.ops.compiled (imported by it on first use only:
this module imports numba).  Row layouts: compiled.S_* / E_* / P_*."""
from __future__ import annotations

import numpy as np
from numba import njit

from .compiled import (E_MODE, E_OA, E_OB, E_STAGE, E_ZPA, E_ZPB, MODE_ADD, MODE_MIN, MODE_MUL, MODE_SUB,
                       P_CLAMP, P_HI, P_IZP, P_LO, P_WRAP, P_ZP, S_CHI, S_CLAMP, S_CLO, S_DIFF, S_RP, S_SCALE,
                       S_SHIFT, S_TABLE, S_WRAP32, S_ZP)


@njit(cache=True, nogil=True)
def stage1(acc, sp, o, table):
    """The output stage of one accumulator (row sp from offset o): (ok, value)."""
    p = acc * sp[o + S_SCALE]
    if p < 0:
        p += sp[o + S_DIFF]
    p = (p + sp[o + S_RP]) >> sp[o + S_SHIFT]
    if sp[o + S_WRAP32]:
        x = ((p + 0x80000000) & 0xFFFFFFFF) - 0x80000000           # (int32_t)
        x = ((x + sp[o + S_ZP] + 0x80000000) & 0xFFFFFFFF) - 0x80000000
        if sp[o + S_CLAMP]:
            x = min(max(x, sp[o + S_CLO]), sp[o + S_CHI])
        return True, x
    p += sp[o + S_ZP]
    if sp[o + S_CLAMP]:
        p = min(max(p, sp[o + S_CLO]), sp[o + S_CHI])
    if sp[o + S_TABLE]:
        i = p - sp[o + S_CLO]
        if i < 0 or i >= table.size:
            return False, 0
        return True, np.int64(table[i])
    return True, p


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
    """The decomposed 16-bit elementwise op (row prm) into out; False: not covered."""
    H, W, C = out.shape
    mode = prm[E_MODE]
    oa, ob, zpa, zpb = prm[E_OA], prm[E_OB], prm[E_ZPA], prm[E_ZPB]
    na, nb = ta.size, tb.size
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
                ok, r = stage1(acc, prm, E_STAGE, table)
                if not ok:
                    return False
                out[y, x, c] = r
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
