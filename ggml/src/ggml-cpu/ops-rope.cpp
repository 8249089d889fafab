// ops-rope.cpp — ROPE kernel (facts 4.11): NORMAL and NEOX rotary embeddings with optional
// frequency factors, YaRN extrapolation mix and partial rotation (n_dims < head_dim).
//
// Angles are computed in double (position * inverse frequency loses several digits in float at
// long contexts); the per-position cos/sin cache is rebuilt only when a thread's row run moves to
// another position, so it is shared by all heads of a token.
//
// Rotation reads both elements of a pair before writing either, so dst may alias src exactly
// (ROPE is run in place by the allocator).

#include "cpu-ops.h"
#include "ops-fast.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace {

struct rope_cache {
    std::vector<float> cos_t; // already multiplied by mscale
    std::vector<float> sin_t;
};

struct rope_params {
    int   n_dims;
    int   n_offs;
    bool  neox;
    float freq_scale;
    float ext_factor;
    float attn_factor;
    float corr_low;
    float corr_high;
    const float * freq_factors; // nullptr: all 1
};

void build_cache(const rope_params & rp, const std::vector<double> & inv_freq, double pos, rope_cache & c) {
    const int half = rp.n_dims / 2;
    double mscale = rp.attn_factor;
    if (rp.ext_factor != 0.0f) {
        mscale *= 1.0 + 0.1 * std::log(1.0 / (double) rp.freq_scale);
    }
    for (int i = 0; i < half; ++i) {
        const double ff           = rp.freq_factors ? (double) rp.freq_factors[i] : 1.0;
        const double theta_extrap = pos * inv_freq[i] / ff;
        const double theta_interp = (double) rp.freq_scale * theta_extrap;
        double       theta        = theta_interp;
        if (rp.ext_factor != 0.0f) {
            const double y    = ((double) i - rp.corr_low) / std::max(0.001, (double) rp.corr_high - rp.corr_low);
            const double ramp = 1.0 - std::min(1.0, std::max(0.0, y));
            const double mix  = ramp * rp.ext_factor;
            theta             = theta_interp * (1.0 - mix) + theta_extrap * mix;
        }
        c.cos_t[i] = (float) (std::cos(theta) * mscale);
        c.sin_t[i] = (float) (std::sin(theta) * mscale);
    }
}

inline float load(const float * p) { return *p; }
inline float load(const ggml_fp16_t * p) { return ggml_fp16_to_fp32(*p); }
inline void  store(float * p, float v) { *p = v; }
inline void  store(ggml_fp16_t * p, float v) { *p = ggml_fp32_to_fp16(v); }

template <typename T>
void rotate_row(const rope_params & rp, const rope_cache & c, const T * x, T * y, int64_t ne0) {
    const int half = rp.n_dims / 2;
    const T * xr   = x + rp.n_offs;
    T *       yr   = y + rp.n_offs;
    // NORMAL pairs (2i, 2i+1); NEOX pairs (i, i + n_dims/2)
    const int stride = rp.neox ? 1 : 2;
    const int second = rp.neox ? half : 1;
    for (int i = 0; i < half; ++i) {
        const float x0 = load(xr + i * stride);
        const float x1 = load(xr + i * stride + second);
        store(yr + i * stride, x0 * c.cos_t[i] - x1 * c.sin_t[i]);
        store(yr + i * stride + second, x0 * c.sin_t[i] + x1 * c.cos_t[i]);
    }
    if (x != y) {
        // elements outside the rotated window pass through unchanged (not scaled by mscale)
        for (int64_t i = 0; i < rp.n_offs; ++i) y[i] = x[i];
        for (int64_t i = rp.n_offs + rp.n_dims; i < ne0; ++i) y[i] = x[i];
    }
}

// Multi-section modes (MROPE 8, VISION 24, IMROPE 40): which position component (t, h, w, e)
// drives rotated pair i, and the frequency index it uses.
struct multi_pair {
    int comp;  // 0..3
    int fidx;  // exponent index: i (MROPE/IMROPE) or i - section start (VISION)
};

multi_pair multi_pair_of(int mode, const int sect[4], int i) {
    const int sect_dims = sect[0] + sect[1] + sect[2] + sect[3];
    const int s         = i % sect_dims;
    const int b1 = sect[0], b2 = b1 + sect[1], b3 = b2 + sect[2];
    if (mode == GGML_ROPE_TYPE_IMROPE) {
        // interleaved t, h, w (each while its section lasts), then e
        if (s % 3 == 1 && s < 3 * sect[1]) return {1, i};
        if (s % 3 == 2 && s < 3 * sect[2]) return {2, i};
        if (s % 3 == 0 && s < 3 * sect[0]) return {0, i};
        return {3, i};
    }
    const int comp  = s < b1 ? 0 : s < b2 ? 1 : s < b3 ? 2 : 3;
    const int start = comp == 0 ? 0 : comp == 1 ? b1 : comp == 2 ? b2 : b3;
    return {comp, mode == GGML_ROPE_TYPE_VISION ? s - start : i};
}

// Portable multi-section rope over this thread's rows (angles in double, like the 1-D modes).
template <typename T>
void rope_multi_rows(const struct ggml_compute_params * params, const rope_params & rp, int mode, const int sect[4],
                     double freq_base, const int32_t * positions, const struct ggml_tensor * src0,
                     struct ggml_tensor * dst, int64_t r0, int64_t r1) {
    const int64_t ne0 = src0->ne[0], ne1 = src0->ne[1], ne2 = src0->ne[2];
    const bool    vision = mode == GGML_ROPE_TYPE_VISION;
    const int     n_pairs = vision ? rp.n_dims : rp.n_dims / 2;
    const int     second  = vision ? rp.n_dims : rp.n_dims / 2; // NEOX-style partner offset
    double mscale = rp.attn_factor;
    if (rp.ext_factor != 0.0f) mscale *= 1.0 + 0.1 * std::log(1.0 / (double) rp.freq_scale);
    std::vector<float> cs((size_t) n_pairs), sn((size_t) n_pairs);
    int64_t cached_i2 = -1;
    for (int64_t r = r0; r < r1; ++r) {
        if (((r - r0) & 255) == 0 && ggml_cpu_should_abort(params)) return;
        const int64_t i1 = r % ne1, i2 = (r / ne1) % ne2, i3 = r / (ne1 * ne2);
        if (i2 != cached_i2) {
            for (int i = 0; i < n_pairs; ++i) {
                const multi_pair mp = multi_pair_of(mode, sect, i);
                const double     p  = (double) positions[i2 + mp.comp * ne2];
                const double     ff = rp.freq_factors ? (double) rp.freq_factors[i] : 1.0;
                const double     extrap = p * std::pow(freq_base, -2.0 * mp.fidx / (double) rp.n_dims) / ff;
                const double     interp = (double) rp.freq_scale * extrap;
                double           theta  = interp;
                if (rp.ext_factor != 0.0f) {
                    const double y    = ((double) i - rp.corr_low) / std::max(0.001, (double) rp.corr_high - rp.corr_low);
                    const double ramp = 1.0 - std::min(1.0, std::max(0.0, y));
                    const double mix  = ramp * rp.ext_factor;
                    theta             = interp * (1.0 - mix) + extrap * mix;
                }
                cs[i] = (float) (std::cos(theta) * mscale);
                sn[i] = (float) (std::sin(theta) * mscale);
            }
            cached_i2 = i2;
        }
        const T * x = (const T *) ((const char *) src0->data + i1 * src0->nb[1] + i2 * src0->nb[2] + i3 * src0->nb[3]);
        T *       y = (T *) ((char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3]);
        for (int i = 0; i < n_pairs; ++i) {
            const float x0 = load(x + i), x1 = load(x + i + second);
            store(y + i, x0 * cs[i] - x1 * sn[i]);
            store(y + i + second, x0 * sn[i] + x1 * cs[i]);
        }
        if (x != y) {
            for (int64_t i = 2 * (int64_t) n_pairs; i < ne0; ++i) y[i] = x[i];
        }
    }
}

} // namespace

void ggml_cpu_op_rope(const struct ggml_compute_params * params, struct ggml_tensor * dst) {
    const struct ggml_tensor * src0 = dst->src[0];
    const struct ggml_tensor * pos  = dst->src[1];
    const struct ggml_tensor * ffac = dst->src[2];

    const int n_dims     = ggml_get_op_params_i32(dst, 1);
    const int mode       = ggml_get_op_params_i32(dst, 2);
    const int n_ctx_orig = ggml_get_op_params_i32(dst, 4);
    const int n_offs     = ggml_get_op_params_i32(dst, 15);

    const float freq_base   = ggml_get_op_params_f32(dst, 5);
    const float freq_scale  = ggml_get_op_params_f32(dst, 6);
    const float ext_factor  = ggml_get_op_params_f32(dst, 7);
    const float attn_factor = ggml_get_op_params_f32(dst, 8);
    const float beta_fast   = ggml_get_op_params_f32(dst, 9);
    const float beta_slow   = ggml_get_op_params_f32(dst, 10);

    const bool multi = mode == GGML_ROPE_TYPE_MROPE || mode == GGML_ROPE_TYPE_IMROPE || mode == GGML_ROPE_TYPE_VISION;
    if (!multi && (mode & ~GGML_ROPE_TYPE_NEOX) != 0) {
        GGML_ABORT("rope: mode %d not supported (NORMAL, NEOX, MROPE, IMROPE, VISION)", mode);
    }

    const int64_t ne0 = src0->ne[0];
    const int64_t ne1 = src0->ne[1];
    const int64_t ne2 = src0->ne[2];
    const int64_t ne3 = src0->ne[3];

    GGML_ASSERT((src0->type == GGML_TYPE_F32 || src0->type == GGML_TYPE_F16) && "rope: src must be F32 or F16");
    GGML_ASSERT(dst->type == src0->type);
    GGML_ASSERT(dst->ne[0] == ne0 && dst->ne[1] == ne1 && dst->ne[2] == ne2 && dst->ne[3] == ne3);
    const size_t esz = ggml_type_size(src0->type);
    GGML_ASSERT((ne0 <= 1 || (src0->nb[0] == esz && dst->nb[0] == esz)) && "rope: rows must be packed");
    GGML_ASSERT(n_dims >= 0 && n_dims % 2 == 0 && "rope: n_dims must be even");
    GGML_ASSERT(n_offs >= 0 && n_offs + (multi && mode == GGML_ROPE_TYPE_VISION ? 2 * n_dims : n_dims) <= ne0 &&
                "rope: rotated window exceeds the row");
    GGML_ASSERT(pos && pos->type == GGML_TYPE_I32 && pos->ne[0] >= (multi ? 4 : 1) * ne2 &&
                "rope: positions must be I32 [ne2] (multi-section modes: [4*ne2])");
    if (ffac) {
        GGML_ASSERT(ffac->type == GGML_TYPE_F32 && ffac->ne[0] >= n_dims / 2 && "rope: freq factors F32 [n_dims/2]");
    }

    const int64_t nrows = ne1 * ne2 * ne3;
    if (nrows == 0 || ne0 == 0) return;

    rope_params rp;
    rp.n_dims       = n_dims;
    rp.n_offs       = n_offs;
    rp.neox         = (mode & GGML_ROPE_TYPE_NEOX) != 0;
    rp.freq_scale   = freq_scale;
    rp.ext_factor   = ext_factor;
    rp.attn_factor  = attn_factor;
    rp.freq_factors = ffac ? (const float *) ffac->data : nullptr;
    rp.corr_low     = 0.0f;
    rp.corr_high    = 0.0f;
    if (ext_factor != 0.0f && n_dims > 0) {
        float corr[2];
        ggml_rope_yarn_corr_dims(n_dims, n_ctx_orig, freq_base, beta_fast, beta_slow, corr);
        rp.corr_low  = corr[0];
        rp.corr_high = corr[1];
    }

    int64_t r0, r1;
    ggml_cpu_split_range(nrows, params->ith, params->nth, &r0, &r1);
    if (r0 >= r1) return;

    if (multi) {
        GGML_ASSERT(n_offs == 0 && "rope: multi-section modes rotate from element 0");
        int sect[4];
        for (int k = 0; k < 4; ++k) sect[k] = ggml_get_op_params_i32(dst, 11 + k);
        GGML_ASSERT(sect[0] + sect[1] + sect[2] + sect[3] > 0 && "rope: multi-section mode without sections");
        const int32_t * positions = (const int32_t *) pos->data;
        if (src0->type == GGML_TYPE_F32) {
            rope_multi_rows<float>(params, rp, mode, sect, freq_base, positions, src0, dst, r0, r1);
        } else {
            rope_multi_rows<ggml_fp16_t>(params, rp, mode, sect, freq_base, positions, src0, dst, r0, r1);
        }
        return;
    }

    const int          half = n_dims / 2;
    std::vector<double> inv_freq(half);
    for (int i = 0; i < half; ++i) inv_freq[i] = std::pow((double) freq_base, -2.0 * i / (double) n_dims);

    rope_cache cache;
    cache.cos_t.resize(half);
    cache.sin_t.resize(half);
    int64_t cached_i2 = -1;

    const int32_t * positions = (const int32_t *) pos->data;

    const ggml_cpu_row_kernels * rows = ggml_cpu_rows(params);
    if (src0->type == GGML_TYPE_F32 && rows && rows->rope_cache && rows->rope_row) {
        // theta_i = pos * coef_i: inverse frequency, frequency factor and YaRN mix folded into one
        // double per dimension pair (theta_interp (1 - mix) + theta_extrap mix = theta_extrap
        // (freq_scale (1 - mix) + mix))
        std::vector<double> coef(half);
        for (int i = 0; i < half; ++i) {
            const double ff = rp.freq_factors ? (double) rp.freq_factors[i] : 1.0;
            double       f  = (double) rp.freq_scale;
            if (rp.ext_factor != 0.0f) {
                const double y    = ((double) i - rp.corr_low) / std::max(0.001, (double) rp.corr_high - rp.corr_low);
                const double ramp = 1.0 - std::min(1.0, std::max(0.0, y));
                const double mix  = ramp * rp.ext_factor;
                f                 = (double) rp.freq_scale * (1.0 - mix) + mix;
            }
            coef[i] = inv_freq[i] / ff * f;
        }
        double mscale = rp.attn_factor;
        if (rp.ext_factor != 0.0f) mscale *= 1.0 + 0.1 * std::log(1.0 / (double) rp.freq_scale);
        // NORMAL keeps an interleaved cache of n_dims entries (see ggml_cpu_row_kernels::rope_cache)
        std::vector<float> cs(n_dims + 16), sn(n_dims + 16);
        for (int64_t r = r0; r < r1; ++r) {
            if (((r - r0) & 255) == 0 && ggml_cpu_should_abort(params)) return;
            const int64_t i1 = r % ne1;
            const int64_t i2 = (r / ne1) % ne2;
            const int64_t i3 = r / (ne1 * ne2);
            if (i2 != cached_i2) {
                rows->rope_cache(coef.data(), half, (double) positions[i2], (float) mscale, rp.neox, cs.data(), sn.data());
                cached_i2 = i2;
            }
            const char * x = (const char *) src0->data + i1 * src0->nb[1] + i2 * src0->nb[2] + i3 * src0->nb[3];
            char *       y = (char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
            rows->rope_row((const float *) x, (float *) y, ne0, n_offs, n_dims, rp.neox, cs.data(), sn.data());
        }
        return;
    }

    for (int64_t r = r0; r < r1; ++r) {
        if (((r - r0) & 255) == 0 && ggml_cpu_should_abort(params)) return;

        const int64_t i1 = r % ne1;
        const int64_t i2 = (r / ne1) % ne2;
        const int64_t i3 = r / (ne1 * ne2);

        if (i2 != cached_i2) {
            build_cache(rp, inv_freq, (double) positions[i2], cache);
            cached_i2 = i2;
        }

        const char * x = (const char *) src0->data + i1 * src0->nb[1] + i2 * src0->nb[2] + i3 * src0->nb[3];
        char *       y = (char *) dst->data + i1 * dst->nb[1] + i2 * dst->nb[2] + i3 * dst->nb[3];
        if (src0->type == GGML_TYPE_F32) {
            rotate_row(rp, cache, (const float *) x, (float *) y, ne0);
        } else {
            rotate_row(rp, cache, (const ggml_fp16_t *) x, (ggml_fp16_t *) y, ne0);
        }
    }
}
