#pragma once

// native-rope-chain.h — the ordinary ggml op chain that sd.rope_apply.v1 replaces
// (dit-workloads.md §4.3: permute/cont, reshape/permute/cont into halves, view/reshape/repeat,
// pe permute/cont and views, mul/mul/add, [permute/cont], reshape), with partial rotation done the
// way sd.cpp's callers do it (rotate the first 2*n_freq dims, concat the rest). Tests compare the
// custom op and the fusion with it bit for bit; the benchmark uses it as the baseline.

#include "ggml.h"

#include "ggml_extensions.h" // SD_ROPE_* modes

inline struct ggml_tensor * native_rope_chain(ggml_context * ctx, ggml_tensor * x, ggml_tensor * pe, int mode) {
    const int64_t d = x->ne[0], H = x->ne[1], L = x->ne[2], N = x->ne[3];
    const int64_t nf = pe->ne[2], r = 2 * nf, HN = H * N;
    ggml_tensor * xr = r < d ? ggml_view_4d(ctx, x, r, H, L, N, x->nb[1], x->nb[2], x->nb[3], 0) : x;

    ggml_tensor * t = ggml_cont(ctx, ggml_permute(ctx, xr, 0, 2, 1, 3)); // [r, L, H, N]
    if (mode == SD_ROPE_INTERLEAVED) {
        t = ggml_reshape_4d(ctx, t, 2, nf, L, HN);
        t = ggml_cont(ctx, ggml_permute(ctx, t, 3, 0, 1, 2)); // [nf, L, HN, 2]
    } else {
        t = ggml_reshape_4d(ctx, t, nf, 2, L, HN);
        t = ggml_cont(ctx, ggml_permute(ctx, t, 0, 3, 1, 2)); // [nf, L, HN, 2]
    }
    ggml_tensor * x0 = ggml_view_3d(ctx, t, nf, L, HN, t->nb[1], t->nb[2], 0);
    ggml_tensor * x1 = ggml_view_3d(ctx, t, nf, L, HN, t->nb[1], t->nb[2], t->nb[3]);
    x0               = ggml_repeat_4d(ctx, ggml_reshape_4d(ctx, x0, 1, nf, L, HN), 2, nf, L, HN);
    x1               = ggml_repeat_4d(ctx, ggml_reshape_4d(ctx, x1, 1, nf, L, HN), 2, nf, L, HN);

    ggml_tensor * pp  = ggml_cont(ctx, ggml_permute(ctx, pe, 3, 0, 1, 2)); // [2(r), nf, L, 2(c)]
    ggml_tensor * pe0 = ggml_view_3d(ctx, pp, 2, nf, L, pp->nb[1], pp->nb[2], 0);
    ggml_tensor * pe1 = ggml_view_3d(ctx, pp, 2, nf, L, pp->nb[1], pp->nb[2], pp->nb[3]);

    ggml_tensor * out = ggml_add(ctx, ggml_mul(ctx, x0, pe0), ggml_mul(ctx, x1, pe1)); // [2, nf, L, HN]
    if (mode == SD_ROPE_SPLIT_HALF) out = ggml_cont(ctx, ggml_permute(ctx, out, 1, 0, 2, 3));
    out = ggml_reshape_3d(ctx, out, r, L, HN);
    if (r < d) {
        ggml_tensor * tail = ggml_view_4d(ctx, x, d - r, H, L, N, x->nb[1], x->nb[2], x->nb[3], r * sizeof(float));
        tail               = ggml_cont(ctx, ggml_permute(ctx, tail, 0, 2, 1, 3));
        tail               = ggml_reshape_3d(ctx, tail, d - r, L, HN);
        out                = ggml_concat(ctx, out, tail, 0);
    }
    return out;
}
