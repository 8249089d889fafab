"""A second, independent transcription of upstream ggml's K-quant reference quantizers in numpy.

The Python `gguf` package can dequantize Q2_K..Q6_K but not quantize them, so nothing external
checks ggml-quants.cpp's K-quant quantizers bit for bit. This module re-derives the same reference
algorithms (upstream's quantize_row_q{2,3,4,5,6,8}_K_ref with make_qkx2_quants, make_qx_quants
(rmse_type 1), make_q3_quants) in float32 numpy, vectorised over super-blocks, with every sum
accumulated element by element in upstream's order so that each float32 operation rounds as in C
(compiled without FMA contraction). quants_crosscheck.py compares its blocks with ours byte for byte.

Every function takes x of shape (B, n) float32 (B independent groups) and works on all B at once;
data-dependent choices are np.where selections.
"""

import numpy as np

F = np.float32
GROUP_MAX_EPS = F(1e-15)
QK_K = 256


def nearest_int(v):
    # round half to even, as upstream's 1.5 * 2^23 trick for |v| < 2^22; NaN -> 0, beyond: clamped
    v = np.where(np.isnan(v), F(0), np.clip(v, F(-4194303), F(4194303)))
    return np.rint(v).astype(np.int32)


def f16(v):
    return np.asarray(v, dtype=F).astype(np.float16)


def seq_sum(terms):
    """sum over the last axis, one element after another (C's loop order)."""
    acc = np.zeros(terms.shape[:-1], dtype=F)
    for i in range(terms.shape[-1]):
        acc = acc + terms[..., i]
    return acc


def signed_absmax(x):
    amax = np.zeros(x.shape[0], dtype=F)
    mx = np.zeros(x.shape[0], dtype=F)
    for i in range(x.shape[1]):
        ax = np.abs(x[:, i])
        upd = ax > amax
        amax = np.where(upd, ax, amax)
        mx = np.where(upd, x[:, i], mx)
    return amax, mx


def make_qx_quants_rmse1(x, nmax):
    amax, mx = signed_absmax(x)
    zero = amax < GROUP_MAX_EPS
    w = x * x

    def fit(iscale):
        lv = np.clip(nearest_int(iscale[:, None] * x), -nmax, nmax - 1)
        lf = lv.astype(F)
        return lv, seq_sum(w * x * lf), seq_sum(w * lf * lf)

    with np.errstate(all="ignore"):
        L, sumlx, suml2 = fit(F(-nmax) / mx)
        scale = np.where(suml2 != 0, sumlx / suml2, F(0))
        best = scale * sumlx
        for i_s in range(-9, 10):
            if i_s == 0:
                continue
            lv, slx, sl2 = fit(-(F(nmax) + F(0.1) * F(i_s)) / mx)
            upd = (sl2 > 0) & (slx * slx > best * sl2)
            L = np.where(upd[:, None], lv, L)
            scale = np.where(upd, slx / sl2, scale)
            best = np.where(upd, scale * slx, best)
    return np.where(zero, F(0), scale), np.where(zero[:, None], 0, L + nmax)


def make_q3_quants(x, nmax):
    amax, mx = signed_absmax(x)
    zero = amax < GROUP_MAX_EPS
    w = x * x
    with np.errstate(all="ignore"):
        L = np.clip(nearest_int((F(-nmax) / mx)[:, None] * x), -nmax, nmax - 1)
        Lf = L.astype(F)
        sumlx = seq_sum(w * x * Lf)
        suml2 = seq_sum(w * Lf * Lf)
        # a group whose pass changed nothing would change nothing in a further pass either, so
        # running all 5 passes for every group equals upstream's early exit
        for _ in range(5):
            for i in range(x.shape[1]):
                xi, wi, li = x[:, i], w[:, i], L[:, i].astype(F)
                slx = sumlx - wi * xi * li
                sl2 = suml2 - wi * li * li
                new_l = np.clip(nearest_int(xi * sl2 / slx), -nmax, nmax - 1)
                nf = new_l.astype(F)
                slx2 = slx + wi * xi * nf
                sl22 = sl2 + wi * nf * nf
                take = (slx > 0) & (new_l != L[:, i]) & (sl22 > 0) & (slx2 * slx2 * suml2 > sumlx * sumlx * sl22)
                L[:, i] = np.where(take, new_l, L[:, i])
                sumlx = np.where(take, slx2, sumlx)
                suml2 = np.where(take, sl22, suml2)
        scale = np.where(suml2 > 0, sumlx / suml2, F(0))
    return np.where(zero, F(0), scale), np.where(zero[:, None], 0, L + nmax)


def make_qkx2_quants(x, weights, nmax, rmin, rdelta, nstep, use_mad):
    n = x.shape[1]
    mn, mx = x[:, 0].copy(), x[:, 0].copy()
    sum_w = weights[:, 0].copy()
    sum_x = sum_w * x[:, 0]
    for i in range(1, n):
        mn = np.where(x[:, i] < mn, x[:, i], mn)
        mx = np.where(x[:, i] > mx, x[:, i], mx)
        sum_w = sum_w + weights[:, i]
        sum_x = sum_x + weights[:, i] * x[:, i]
    mn = np.where(mn > 0, F(0), mn)
    flat = mx == mn
    mn_flat = mn  # a flat group returns -min of the data (the search below is meaningless for it)

    def err(diff):
        return np.abs(diff) if use_mad else diff * diff

    with np.errstate(all="ignore"):
        iscale = F(nmax) / (mx - mn)
        scale = F(1) / iscale
        L = np.clip(nearest_int(iscale[:, None] * (x - mn[:, None])), 0, nmax)
        best = seq_sum(weights * err(scale[:, None] * L.astype(F) + mn[:, None] - x))
        for i_s in range(nstep + 1):
            iscale = (F(rmin) + F(rdelta) * F(i_s) + F(nmax)) / (mx - mn)
            lv = np.clip(nearest_int(iscale[:, None] * (x - mn[:, None])), 0, nmax)
            lf = lv.astype(F)
            sum_l = seq_sum(weights * lf)
            sum_l2 = seq_sum(weights * lf * lf)
            sum_xl = seq_sum(weights * lf * x)
            D = sum_w * sum_l2 - sum_l * sum_l
            this_scale = (sum_w * sum_xl - sum_x * sum_l) / D
            this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D
            pos = this_min > 0
            this_min = np.where(pos, F(0), this_min)
            this_scale = np.where(pos, sum_xl / sum_l2, this_scale)
            cur = seq_sum(weights * err(this_scale[:, None] * lf + this_min[:, None] - x))
            upd = (D > 0) & (cur < best)
            L = np.where(upd[:, None], lv, L)
            best = np.where(upd, cur, best)
            scale = np.where(upd, this_scale, scale)
            mn = np.where(upd, this_min, mn)
    return np.where(flat, F(0), scale), np.where(flat[:, None], 0, L), -np.where(flat, mn_flat, mn)


def _u8(v):
    return (np.asarray(v) & 0xFF).astype(np.uint8)


def _h(v):
    return f16(v).reshape(-1, 1).view(np.uint8)


def pack_crumbs(L):  # (B, 256) values 0..3 -> (B, 64)
    out = np.zeros((L.shape[0], 64), dtype=np.int32)
    for c in range(2):
        for k in range(4):
            out[:, 32 * c:32 * c + 32] |= L[:, 128 * c + 32 * k:128 * c + 32 * k + 32] << (2 * k)
    return _u8(out)


def quantize_q8_K(x):
    B = x.shape[0]
    amax, mx = signed_absmax(x)
    zero = amax == 0
    with np.errstate(all="ignore"):
        iscale = F(-127) / mx
        q = np.clip(nearest_int(iscale[:, None] * x), -128, 127)
        d = F(1) / iscale
    q = np.where(zero[:, None], 0, q)
    d = np.where(zero, F(0), d)
    bsums = q.reshape(B, 16, 16).sum(axis=2).astype("<i2")
    return np.concatenate([d.astype("<f4").reshape(-1, 1).view(np.uint8), q.astype(np.int8).view(np.uint8),
                           bsums.view(np.uint8)], axis=1)


def quantize_q6_K(x):
    B = x.shape[0]
    scales = np.zeros((B, 16), dtype=F)
    L = np.zeros((B, 256), dtype=np.int32)
    for ib in range(16):
        scales[:, ib], L[:, 16 * ib:16 * ib + 16] = make_qx_quants_rmse1(x[:, 16 * ib:16 * ib + 16], 32)
    amax, max_scale = signed_absmax(scales)
    zero = amax < GROUP_MAX_EPS
    with np.errstate(all="ignore"):
        iscale = F(-128) / max_scale
        d = f16(F(1) / iscale)
        sc = np.minimum(127, nearest_int(iscale[:, None] * scales))
        sc = ((sc + 128) & 0xFF) - 128  # stored in an int8_t
        for j in range(16):
            dl = d.astype(F) * sc[:, j].astype(F)
            lv = np.clip(nearest_int(x[:, 16 * j:16 * j + 16] / dl[:, None]), -32, 31) + 32
            L[:, 16 * j:16 * j + 16] = np.where((dl != 0)[:, None], lv, L[:, 16 * j:16 * j + 16])
    ql = np.zeros((B, 128), dtype=np.int32)
    qh = np.zeros((B, 64), dtype=np.int32)
    for c in range(2):
        Lc = L[:, 128 * c:128 * c + 128]
        ql[:, 64 * c:64 * c + 32] = (Lc[:, 0:32] & 15) | ((Lc[:, 64:96] & 15) << 4)
        ql[:, 64 * c + 32:64 * c + 64] = (Lc[:, 32:64] & 15) | ((Lc[:, 96:128] & 15) << 4)
        qh[:, 32 * c:32 * c + 32] = (Lc[:, 0:32] >> 4) | ((Lc[:, 32:64] >> 4) << 2) | ((Lc[:, 64:96] >> 4) << 4) | (
            (Lc[:, 96:128] >> 4) << 6)
    blk = np.concatenate([_u8(ql), _u8(qh), _u8(sc), _h(d)], axis=1)
    return np.where(zero[:, None], np.uint8(0), blk)


def _k_affine32(x, nmax, rmin, rdelta, nstep):
    """Q4_K/Q5_K: (d, dmin, 12 scale bytes, L)."""
    B = x.shape[0]
    scales = np.zeros((B, 8), dtype=F)
    mins = np.zeros((B, 8), dtype=F)
    L = np.zeros((B, 256), dtype=np.int32)
    max_scale = np.zeros(B, dtype=F)
    max_min = np.zeros(B, dtype=F)
    for j in range(8):
        sub = x[:, 32 * j:32 * j + 32]
        av_x = np.sqrt(seq_sum(sub * sub) / F(32))
        weights = av_x[:, None] + np.abs(sub)
        scales[:, j], L[:, 32 * j:32 * j + 32], mins[:, j] = make_qkx2_quants(sub, weights, nmax, rmin, rdelta, nstep,
                                                                                False)
        max_scale = np.where(scales[:, j] > max_scale, scales[:, j], max_scale)
        max_min = np.where(mins[:, j] > max_min, mins[:, j], max_min)
    with np.errstate(all="ignore"):
        inv_scale = np.where(max_scale > 0, F(63) / max_scale, F(0))
        inv_min = np.where(max_min > 0, F(63) / max_min, F(0))
    ls = np.minimum(63, nearest_int(inv_scale[:, None] * scales) & 0xFF)
    lm = np.minimum(63, nearest_int(inv_min[:, None] * mins) & 0xFF)
    s = np.zeros((B, 12), dtype=np.int32)
    s[:, 0:4] = ls[:, 0:4] | ((ls[:, 4:8] >> 4) << 6)
    s[:, 4:8] = lm[:, 0:4] | ((lm[:, 4:8] >> 4) << 6)
    s[:, 8:12] = (ls[:, 4:8] & 15) | ((lm[:, 4:8] & 15) << 4)
    d = f16(max_scale / F(63))
    dmin = f16(max_min / F(63))
    with np.errstate(all="ignore"):
        for j in range(8):  # requantize with the stored scales (read back as the decoder does)
            if j < 4:
                sc, m = s[:, j] & 63, s[:, j + 4] & 63
            else:
                sc = (s[:, j + 4] & 15) | ((s[:, j - 4] >> 6) << 4)
                m = (s[:, j + 4] >> 4) | ((s[:, j] >> 6) << 4)
            dl = d.astype(F) * sc.astype(F)
            dm = dmin.astype(F) * m.astype(F)
            lv = np.clip(nearest_int((x[:, 32 * j:32 * j + 32] + dm[:, None]) / dl[:, None]), 0, nmax)
            L[:, 32 * j:32 * j + 32] = np.where((dl != 0)[:, None], lv, L[:, 32 * j:32 * j + 32])
    return d, dmin, _u8(s), L


def quantize_q4_K(x):
    d, dmin, s, L = _k_affine32(x, 15, -1.0, 0.1, 20)
    qs = np.concatenate([L[:, 64 * c:64 * c + 32] | (L[:, 64 * c + 32:64 * c + 64] << 4) for c in range(4)], axis=1)
    return np.concatenate([_h(d), _h(dmin), s, _u8(qs)], axis=1)


def quantize_q5_K(x):
    d, dmin, s, L = _k_affine32(x, 31, -0.5, 0.1, 15)
    qh = np.zeros((x.shape[0], 32), dtype=np.int32)
    for e8 in range(8):  # bit e / 32 of qh[e % 32]
        qh |= (L[:, 32 * e8:32 * e8 + 32] >> 4) << e8
    lo = L & 15
    qs = np.concatenate([lo[:, 64 * c:64 * c + 32] | (lo[:, 64 * c + 32:64 * c + 64] << 4) for c in range(4)], axis=1)
    return np.concatenate([_h(d), _h(dmin), s, _u8(qh), _u8(qs)], axis=1)


def quantize_q3_K(x):
    B = x.shape[0]
    scales = np.zeros((B, 16), dtype=F)
    L = np.zeros((B, 256), dtype=np.int32)
    for j in range(16):
        scales[:, j], L[:, 16 * j:16 * j + 16] = make_q3_quants(x[:, 16 * j:16 * j + 16], 4)
    _, max_scale = signed_absmax(scales)
    has = max_scale != 0
    s = np.zeros((B, 12), dtype=np.int32)
    with np.errstate(all="ignore"):
        iscale = F(-32) / max_scale
        lv = ((nearest_int(iscale[:, None] * scales) + 128) & 0xFF) - 128  # stored in an int8_t
        lv = np.where(has[:, None], np.clip(lv, -32, 31) + 32, 0)
        for j in range(16):
            if j < 8:
                s[:, j] |= lv[:, j] & 15
            else:
                s[:, j - 8] |= (lv[:, j] & 15) << 4
            s[:, 8 + j % 4] |= (lv[:, j] >> 4) << (2 * (j // 4))
        d = f16(np.where(has, F(1) / iscale, F(0)))
        for j in range(16):
            low = s[:, j] & 15 if j < 8 else s[:, j - 8] >> 4
            sc = (low | (((s[:, 8 + j % 4] >> (2 * (j // 4))) & 3) << 4)) - 32
            dl = d.astype(F) * sc.astype(F)
            q = np.clip(nearest_int(x[:, 16 * j:16 * j + 16] / dl[:, None]), -4, 3) + 4
            L[:, 16 * j:16 * j + 16] = np.where((dl != 0)[:, None], q, L[:, 16 * j:16 * j + 16])
    hmask = np.zeros((B, 32), dtype=np.int32)
    for e8 in range(8):  # high bit of element e -> bit e / 32 of hmask[e % 32]
        hmask |= (L[:, 32 * e8:32 * e8 + 32] > 3).astype(np.int32) << e8
    crumbs = np.where(L > 3, L - 4, L)
    return np.concatenate([_u8(hmask), pack_crumbs(crumbs), _u8(s), _h(d)], axis=1)


def quantize_q2_K(x):
    B = x.shape[0]
    scales = np.zeros((B, 16), dtype=F)
    mins = np.zeros((B, 16), dtype=F)
    L = np.zeros((B, 256), dtype=np.int32)
    max_scale = np.zeros(B, dtype=F)
    max_min = np.zeros(B, dtype=F)
    for j in range(16):
        sub = x[:, 16 * j:16 * j + 16]
        scales[:, j], L[:, 16 * j:16 * j + 16], mins[:, j] = make_qkx2_quants(sub, np.abs(sub), 3, -0.5, 0.1, 15, True)
        max_scale = np.where(scales[:, j] > max_scale, scales[:, j], max_scale)
        max_min = np.where(mins[:, j] > max_min, mins[:, j], max_min)
    with np.errstate(all="ignore"):
        sc = np.where((max_scale > 0)[:, None], nearest_int((F(15) / max_scale)[:, None] * scales) & 0xFF, 0)
        d = f16(np.where(max_scale > 0, max_scale / F(15), F(0)))
        sc = np.where((max_min > 0)[:, None], (sc | (nearest_int((F(15) / max_min)[:, None] * mins) << 4)) & 0xFF, sc)
        dmin = f16(np.where(max_min > 0, max_min / F(15), F(0)))
        for j in range(16):
            dl = d.astype(F) * (sc[:, j] & 15).astype(F)
            dm = dmin.astype(F) * (sc[:, j] >> 4).astype(F)
            lv = np.clip(nearest_int((x[:, 16 * j:16 * j + 16] + dm[:, None]) / dl[:, None]), 0, 3)
            L[:, 16 * j:16 * j + 16] = np.where((dl != 0)[:, None], lv, L[:, 16 * j:16 * j + 16])
    return np.concatenate([_u8(sc), pack_crumbs(L), _h(d), _h(dmin)], axis=1)


QUANTIZERS = {
    "q2_K": quantize_q2_K,
    "q3_K": quantize_q3_K,
    "q4_K": quantize_q4_K,
    "q5_K": quantize_q5_K,
    "q6_K": quantize_q6_K,
    "q8_K": quantize_q8_K,
}


def quantize_rows(name, rows):
    """(nrows, ncols) float32 -> (nrows, ncols / 256 * type size) uint8, like ggml_quantize_chunk."""
    nrows, ncols = rows.shape
    blocks = QUANTIZERS[name](np.ascontiguousarray(rows, dtype=F).reshape(-1, QK_K))
    return blocks.reshape(nrows, -1)
