// Harness for test-backend-ops: building, filling, running and checking one op case.

#include "backend-ops-harness.h"

#include "ggml-alloc.h"
#include "ggml-cpu.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>

namespace bops {

const char * layout_name(layout l) {
    switch (l) {
        case layout::cont:   return "cont";
        case layout::pad:    return "pad";
        case layout::perm12: return "perm12";
        case layout::trans:  return "trans";
        case layout::perm:   return "perm";
    }
    return "?";
}

std::string sanitize_name(const std::string & s) {
    std::string o;
    for (char ch : s) {
        const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (ok) o += ch;
        else if (!o.empty() && o.back() != '_') o += '_';
    }
    while (!o.empty() && o.back() == '_') o.pop_back();
    return o;
}

// ---------------------------------------------------------------------------------------------
// builder

ggml_tensor * builder::in(ggml_type type, ne4 ne, fill f) {
    ggml_tensor * t = ggml_new_tensor_4d(ctx_in, type, ne[0], ne[1], ne[2], ne[3]);
    inputs.push_back({t, std::move(f)});
    return t;
}

ggml_tensor * builder::in(ggml_type type, ne4 ne, layout l, fill f) {
    switch (l) {
        case layout::cont: return in(type, ne, std::move(f));
        case layout::pad: {
            // 3 spare elements per row, the view starts 2 elements in
            ggml_tensor * base = in(type, {ne[0] + 3, ne[1], ne[2], ne[3]}, std::move(f));
            return ggml_view_4d(ctx, base, ne[0], ne[1], ne[2], ne[3], base->nb[1], base->nb[2], base->nb[3],
                                2 * ggml_type_size(type));
        }
        case layout::perm12: {
            ggml_tensor * base = in(type, {ne[0], ne[2], ne[1], ne[3]}, std::move(f));
            return ggml_permute(ctx, base, 0, 2, 1, 3);
        }
        case layout::trans: {
            ggml_tensor * base = in(type, {ne[1], ne[0], ne[2], ne[3]}, std::move(f));
            return ggml_transpose(ctx, base);
        }
        case layout::perm: {
            // result.ne[ax[k]] = base.ne[k] with ax = (1,2,0,3)
            ggml_tensor * base = in(type, {ne[1], ne[2], ne[0], ne[3]}, std::move(f));
            return ggml_permute(ctx, base, 1, 2, 0, 3);
        }
    }
    return nullptr;
}

ggml_tensor * builder::src(ggml_type type, ne4 ne, layout l, fill f) {
    ggml_tensor * t = in(type, ne, l, std::move(f));
    srcs.push_back(t);
    return t;
}

// ---------------------------------------------------------------------------------------------
// storage encoding / decoding (own conversions, see reference/ref-types.cpp)

static void encode_q8_0_row(const double * x, int64_t n, uint8_t * dst) {
    for (int64_t b = 0; b < n / 32; b++) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = std::fmax(amax, std::fabs((float) x[b * 32 + j]));
        const float    d  = amax / 127.0f;
        const float    id = d != 0.0f ? 1.0f / d : 0.0f;
        const uint16_t dh = ref::f32_to_f16_bits(d);
        uint8_t *      blk = dst + b * 34;
        memcpy(blk, &dh, 2);
        for (int j = 0; j < 32; j++) {
            const int8_t q = (int8_t) std::round((float) x[b * 32 + j] * id);
            memcpy(blk + 2 + j, &q, 1);
        }
    }
}

static double decode(ggml_type type, const uint8_t * p, int64_t i_in_block) {
    switch (type) {
        case GGML_TYPE_F32: { float f; memcpy(&f, p, 4); return f; }
        case GGML_TYPE_F16: { uint16_t h; memcpy(&h, p, 2); return ref::f16_bits_to_f32(h); }
        case GGML_TYPE_BF16: { uint16_t h; memcpy(&h, p, 2); return ref::bf16_bits_to_f32(h); }
        case GGML_TYPE_I32: { int32_t i; memcpy(&i, p, 4); return i; }
        case GGML_TYPE_I64: { int64_t i; memcpy(&i, p, 8); return (double) i; }
        case GGML_TYPE_I16: { int16_t i; memcpy(&i, p, 2); return i; }
        case GGML_TYPE_I8: { int8_t i; memcpy(&i, p, 1); return i; }
        case GGML_TYPE_Q8_0: {
            uint16_t dh; memcpy(&dh, p, 2);
            int8_t q; memcpy(&q, p + 2 + i_in_block, 1);
            return (double) q * ref::f16_bits_to_f32(dh);
        }
        default: break;
    }
    GGML_ABORT("test harness: cannot decode type %s", ggml_type_name(type));
}

// Other block-quantized types (Q4_0 ... Q6_K): the library's reference dequantizer, one block at a
// time (test-quants checks it bit for bit against hand-computed blocks and the gguf package).
static bool decode_block_type(ggml_type type) {
    return type != GGML_TYPE_Q8_0 && ggml_blck_size(type) > 1 && ggml_get_type_traits(type)->to_float;
}

static double decode_block(ggml_type type, const uint8_t * block, int64_t i_in_block) {
    float buf[256];
    const int64_t bs = ggml_blck_size(type);
    GGML_ASSERT(bs <= 256);
    ggml_get_type_traits(type)->to_float(block, buf, bs);
    return buf[i_in_block];
}

dense read_tensor(const ggml_tensor * t) {
    dense                out(t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
    const size_t         nbytes = ggml_nbytes(t);
    std::vector<uint8_t> buf(nbytes);
    ggml_backend_tensor_get(t, buf.data(), 0, nbytes);
    const int64_t bs = ggml_blck_size(t->type);
    if (decode_block_type(t->type)) {
        // a block decoded once for all its elements (real-size weights have tens of millions)
        float blk[256];
        GGML_ASSERT(bs <= 256);
        for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
        for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
        for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
        for (int64_t i0 = 0; i0 < t->ne[0]; i0 += bs) {
            const size_t off = (i0 / bs) * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
            ggml_get_type_traits(t->type)->to_float(buf.data() + off, blk, bs);
            for (int64_t j = 0; j < bs && i0 + j < t->ne[0]; j++) out.at(i0 + j, i1, i2, i3) = blk[j];
        }
        return out;
    }
    for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
    for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
    for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
    for (int64_t i0 = 0; i0 < t->ne[0]; i0++) {
        const size_t off = (i0 / bs) * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
        out.at(i0, i1, i2, i3) = decode_block_type(t->type) ? decode_block(t->type, buf.data() + off, i0 % bs)
                                                            : decode(t->type, buf.data() + off, i0 % bs);
    }
    return out;
}

static void write_input(ggml_tensor * t, const fill & f, std::mt19937 & rng) {
    const int64_t       n = ggml_nelements(t);
    std::vector<double> v((size_t) n);
    std::uniform_real_distribution<double> u(f.lo, f.hi);
    for (int64_t i = 0; i < n; i++) {
        int64_t idx[4];
        idx[0] = i % t->ne[0];
        idx[1] = (i / t->ne[0]) % t->ne[1];
        idx[2] = (i / (t->ne[0] * t->ne[1])) % t->ne[2];
        idx[3] = i / (t->ne[0] * t->ne[1] * t->ne[2]);
        switch (f.kind) {
            case fill::uniform: v[i] = u(rng); break;
            case fill::integer:
                v[i] = (double) std::uniform_int_distribution<int64_t>((int64_t) f.lo, (int64_t) f.hi)(rng);
                break;
            case fill::custom: v[i] = f.gen(rng, idx); break;
        }
    }
    std::vector<uint8_t> bytes(ggml_nbytes(t));
    const size_t         ts = ggml_type_size(t->type);
    switch (t->type) {
        case GGML_TYPE_Q8_0:
            for (int64_t r = 0; r < n / t->ne[0]; r++)
                encode_q8_0_row(&v[r * t->ne[0]], t->ne[0], bytes.data() + r * t->nb[1]);
            break;
        case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1: case GGML_TYPE_Q2_K:
        case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K: {
            // the library's reference quantizer, row by row (inputs are fresh contiguous tensors)
            std::vector<float> row((size_t) t->ne[0]);
            for (int64_t r = 0; r < n / t->ne[0]; r++) {
                for (int64_t i = 0; i < t->ne[0]; i++) row[i] = (float) v[r * t->ne[0] + i];
                ggml_quantize_chunk(t->type, row.data(), bytes.data() + r * t->nb[1], 0, 1, t->ne[0], nullptr);
            }
            break;
        }
        default:
            for (int64_t i = 0; i < n; i++) {
                uint8_t * p = bytes.data() + i * ts;
                switch (t->type) {
                    case GGML_TYPE_F32: { float x = (float) v[i]; memcpy(p, &x, 4); break; }
                    case GGML_TYPE_F16: { uint16_t h = ref::f32_to_f16_bits((float) v[i]); memcpy(p, &h, 2); break; }
                    case GGML_TYPE_BF16: { uint16_t h = ref::f32_to_bf16_bits((float) v[i]); memcpy(p, &h, 2); break; }
                    case GGML_TYPE_I32: { int32_t x = (int32_t) std::llround(v[i]); memcpy(p, &x, 4); break; }
                    case GGML_TYPE_I64: { int64_t x = (int64_t) std::llround(v[i]); memcpy(p, &x, 8); break; }
                    default: GGML_ABORT("test harness: cannot encode type %s", ggml_type_name(t->type));
                }
            }
    }
    ggml_backend_tensor_set(t, bytes.data(), 0, bytes.size());
}

// ---------------------------------------------------------------------------------------------
// comparison

static std::string shape_of(const ggml_tensor * t) {
    char buf[160];
    snprintf(buf, sizeof(buf), "%s [%lld,%lld,%lld,%lld] nb [%zu,%zu,%zu,%zu]", ggml_type_name(t->type),
             (long long) t->ne[0], (long long) t->ne[1], (long long) t->ne[2], (long long) t->ne[3], t->nb[0],
             t->nb[1], t->nb[2], t->nb[3]);
    return buf;
}

static bool compare(const dense & got, const dense & want, const dense * scale, const tolerance & tol,
                    std::string & msg) {
    if (got.nelements() != want.nelements() || memcmp(got.ne, want.ne, sizeof(got.ne)) != 0) {
        msg = "shape mismatch: got " + got.shape_str() + ", reference " + want.shape_str();
        return false;
    }
    const bool elementwise = tol.abs > 0 || tol.rel > 0 || tol.scale > 0 || tol.nmse < 0;
    double     worst = -1, worst_err = 0, worst_bound = 0;
    int64_t    worst_i = -1;
    double     sum_d2 = 0, sum_r2 = 0;
    int64_t    n_bad = 0;
    for (int64_t i = 0; i < want.nelements(); i++) {
        const double o = got.v[i], r = want.v[i];
        double       ratio;
        double       err = std::fabs(o - r), bound = 0;
        if (std::isnan(r) || std::isinf(r)) {
            const bool same = std::isnan(r) ? std::isnan(o) : o == r;
            ratio           = same ? 0.0 : INFINITY;
            err             = same ? 0.0 : INFINITY;
        } else if (!std::isfinite(o)) {
            ratio = INFINITY;
        } else {
            bound = tol.abs + tol.rel * std::fabs(r) + (scale ? tol.scale * scale->v[i] : 0.0);
            ratio = err <= bound ? (bound > 0 ? err / bound : 0.0) : (bound > 0 ? err / bound : INFINITY);
            sum_d2 += (o - r) * (o - r);
            sum_r2 += r * r;
        }
        if (ratio > 1.0) n_bad++;
        if (ratio > worst) {
            worst = ratio; worst_i = i; worst_err = err; worst_bound = bound;
        }
    }
    const double nmse = sum_r2 > 0 ? sum_d2 / sum_r2 : (sum_d2 > 0 ? INFINITY : 0.0);
    const bool   ok_e = !elementwise || n_bad == 0;
    const bool   ok_n = tol.nmse < 0 || nmse <= tol.nmse;
    // non-finite mismatches always fail, even under an NMSE-only bound
    const bool ok_f = !(worst == INFINITY && (worst_err == INFINITY || !std::isfinite(got.v[worst_i])));
    if (ok_e && ok_n && ok_f) {
        // BOPS_PRINT_WORST=1: how close each passing case comes to its bound (to size bounds)
        static const bool print = getenv("BOPS_PRINT_WORST") != nullptr;
        if (print) {
            double max_err = 0;
            for (int64_t i = 0; i < want.nelements(); i++)
                if (std::isfinite(want.v[i])) max_err = std::max(max_err, std::fabs(got.v[i] - want.v[i]));
            fprintf(stderr, "bops worst: ratio %.3g (|err| %.3g, bound %.3g) max |err| %.3g nmse %.3g\n", worst,
                    worst_err, worst_bound, max_err, nmse);
        }
        return true;
    }
    std::ostringstream os;
    os.precision(9);
    int64_t c[4] = {0, 0, 0, 0};
    if (worst_i >= 0) {
        int64_t i = worst_i;
        for (int d = 0; d < 4; d++) { c[d] = i % want.ne[d]; i /= want.ne[d]; }
    }
    os << n_bad << " of " << want.nelements() << " elements outside the bound; nmse " << nmse
       << (tol.nmse >= 0 ? " (max " + std::to_string(tol.nmse) + ")" : std::string()) << "; worst at (" << c[0]
       << "," << c[1] << "," << c[2] << "," << c[3] << "): got " << (worst_i >= 0 ? got.v[worst_i] : 0.0)
       << ", expected " << (worst_i >= 0 ? want.v[worst_i] : 0.0) << ", |err| " << worst_err << ", bound "
       << worst_bound << " (abs " << tol.abs << " + rel " << tol.rel << "*|ref| + scale " << tol.scale << "*s)";
    msg = os.str();
    return false;
}

// ---------------------------------------------------------------------------------------------
// running

namespace {
struct ctx_deleter { void operator()(ggml_context * c) const { ggml_free(c); } };
struct buf_deleter { void operator()(ggml_backend_buffer * b) const { ggml_backend_buffer_free(b); } };
struct galloc_deleter { void operator()(ggml_gallocr * g) const { ggml_gallocr_free(g); } };
using ctx_ptr    = std::unique_ptr<ggml_context, ctx_deleter>;
using buf_ptr    = std::unique_ptr<ggml_backend_buffer, buf_deleter>;
using galloc_ptr = std::unique_ptr<ggml_gallocr, galloc_deleter>;

struct run_output {
    result                  res;
    dense                   out;
    std::vector<dense>      srcs;
    std::string             out_desc;
};

constexpr size_t k_graph_size = 1024;

run_output execute(const op_case & c, ggml_backend_t backend, int n_threads) {
    run_output ro;
    const size_t ctx_size = 512 * ggml_tensor_overhead() + ggml_graph_overhead_custom(k_graph_size, false);
    ctx_ptr ctx_in(ggml_init({512 * ggml_tensor_overhead(), nullptr, true}));
    ctx_ptr ctx(ggml_init({ctx_size, nullptr, true}));

    builder b;
    b.ctx_in = ctx_in.get();
    b.ctx    = ctx.get();
    c.build(b);
    GGML_ASSERT(b.out != nullptr);

    ggml_cgraph * g = ggml_new_graph_custom(ctx.get(), k_graph_size, false);
    ggml_set_output(b.out);
    ggml_build_forward_expand(g, b.out);

    for (int i = 0; i < ggml_graph_n_nodes(g); i++) {
        ggml_tensor * node = ggml_graph_node(g, i);
        if (!ggml_backend_supports_op(backend, node)) {
            ro.res = {result::declined, std::string("backend does not support node ") + ggml_op_desc(node) + " " +
                                        shape_of(node)};
            return ro;
        }
    }

    buf_ptr buf_in;
    if (!b.inputs.empty()) {
        buf_in.reset(ggml_backend_alloc_ctx_tensors(ctx_in.get(), backend));
        GGML_ASSERT(buf_in && "allocating the case inputs failed");
    }
    galloc_ptr galloc(ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend)));
    if (!ggml_gallocr_alloc_graph(galloc.get(), g)) {
        ro.res = {result::fail, "ggml_gallocr_alloc_graph failed"};
        return ro;
    }

    // seed from the case name so every backend and thread count sees the same inputs
    std::mt19937 rng((uint32_t) std::hash<std::string>()(c.name));
    for (auto & in : b.inputs) write_input(in.t, in.f, rng);
    for (ggml_tensor * s : b.srcs) ro.srcs.push_back(read_tensor(s));

    if (n_threads > 0 && ggml_backend_is_cpu(backend)) ggml_backend_cpu_set_n_threads(backend, n_threads);
    const ggml_status st = ggml_backend_graph_compute(backend, g);
    if (st != GGML_STATUS_SUCCESS) {
        ro.res = {result::fail, std::string("compute returned ") + ggml_status_to_string(st)};
        return ro;
    }
    ro.out      = read_tensor(b.out);
    ro.out_desc = shape_of(b.out);
    return ro;
}
} // namespace

result run_case(const op_case & c, ggml_backend_t backend, int n_threads) {
    run_output ro = execute(c, backend, n_threads);
    if (ro.res.status != result::pass) {
        ro.res.message = c.desc + ": " + ro.res.message;
        return ro.res;
    }
    dense       scale;
    const dense want = c.ref(ro.srcs, &scale);
    std::string msg;
    if (!compare(ro.out, want, scale.v.empty() ? nullptr : &scale, c.tol, msg)) {
        return {result::fail, c.desc + " on " + ggml_backend_name(backend) + " (" + std::to_string(n_threads) +
                                  " threads), output " + ro.out_desc + ": " + msg};
    }
    return {};
}

result run_case_f32_act(const op_case & c, ggml_backend_t backend) {
    GGML_ASSERT(c.f32_act_ref && "case without an unquantized-activation reference");
    run_output ro = execute(c, backend, 0);
    if (ro.res.status != result::pass) {
        ro.res.message = c.desc + ": " + ro.res.message;
        return ro.res;
    }
    dense       scale;
    const dense want = c.f32_act_ref(ro.srcs, &scale);
    std::string msg;
    if (!compare(ro.out, want, scale.v.empty() ? nullptr : &scale, c.tol, msg))
        return {result::fail, c.desc + " on " + ggml_backend_name(backend) + " (unquantized activations), output " +
                                  ro.out_desc + ": " + msg};
    return {};
}

result run_case_vs_cpu_f32_act(const op_case & c, ggml_backend_t backend, ggml_backend_t cpu) {
    GGML_ASSERT(c.cpu_gap && "case without a CPU gap bound");
    run_output a = execute(c, backend, 0);
    if (a.res.status != result::pass) return a.res;
    run_output r = execute(c, cpu, 0);
    if (r.res.status != result::pass) return r.res;
    const dense gap = c.cpu_gap(r.srcs);
    tolerance   t;
    t.abs   = 1e-30;
    t.scale = 1.0; // the bound is gap itself
    std::string msg;
    if (!compare(a.out, r.out, &gap, t, msg))
        return {result::fail, c.desc + ": " + ggml_backend_name(backend) + " (unquantized activations) vs CPU: " + msg};
    return {};
}

result run_case_vs_cpu(const op_case & c, ggml_backend_t backend, ggml_backend_t cpu) {
    run_output a = execute(c, backend, 0);
    if (a.res.status != result::pass) return a.res;
    run_output r = execute(c, cpu, 0);
    if (r.res.status != result::pass) return r.res;
    tolerance t = c.tol;
    t.abs *= 2; t.rel *= 2; t.scale *= 2; if (t.nmse >= 0) t.nmse *= 2;
    dense       scale;
    (void) c.ref(r.srcs, &scale);
    std::string msg;
    if (!compare(a.out, r.out, scale.v.empty() ? nullptr : &scale, t, msg))
        return {result::fail, c.desc + ": " + ggml_backend_name(backend) + " vs CPU: " + msg};
    return {};
}

} // namespace bops
