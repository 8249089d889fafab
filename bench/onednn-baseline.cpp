// oneDNN baselines for bench-int8 (see onednn-baseline.h). Written against the oneDNN 2.x C++ API
// (Debian's libdnnl-dev 2.6): output scales and post-ops live in primitive_attr.

#include "onednn-baseline.h"

#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>

#include <cstdio>
#include <vector>

namespace onednn_baseline {

namespace {

using dt  = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

const char * isa_name(dnnl_cpu_isa_t isa) {
    switch (isa) {
        case dnnl_cpu_isa_sse41: return "sse41";
        case dnnl_cpu_isa_avx: return "avx";
        case dnnl_cpu_isa_avx2: return "avx2";
        case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
        case dnnl_cpu_isa_avx512_core: return "avx512_core";
        case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
        case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
        case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
        default: return "other";
    }
}

class linear_impl final : public linear {
  public:
    explicit linear_impl(const problem & p) : p_(p), eng_(dnnl::engine::kind::cpu, 0), strm_(eng_) {
        const dnnl::memory::dim M = p.rows, K = p.K, N = p.N;
        const dnnl::memory::desc src_md({M, K}, dt::s8, tag::ab);
        // [K,N] with strides {1, K}: exactly our [N,K] row-major buffer, no copy
        const dnnl::memory::desc w_plain_md({K, N}, dt::s8, tag::ba);
        auto * x = const_cast<int8_t *>(p.x);
        auto * w = const_cast<int8_t *>(p.w);
        src_       = dnnl::memory(src_md, eng_, x);
        w_plain_   = dnnl::memory(w_plain_md, eng_, w);

        // (a) fused: per-N output scale w_scale[n] * x_scale, then + bias (binary, src1 [1,N])
        {
            const dnnl::memory::desc dst_md({M, N}, dt::f32, tag::ab);
            const dnnl::memory::desc b_md({1, N}, dt::f32, tag::ab);
            std::vector<float>       scales((size_t) N);
            for (int64_t n = 0; n < N; ++n) scales[(size_t) n] = p.w_scale[n] * p.x_scale;
            dnnl::primitive_attr attr;
            attr.set_output_scales(1 << 1, scales);
            dnnl::post_ops po;
            po.append_binary(dnnl::algorithm::binary_add, b_md);
            attr.set_post_ops(po);
            const dnnl::matmul::desc d(src_md, w_plain_md, dst_md);
            fused_pd_   = dnnl::matmul::primitive_desc(d, attr, eng_);
            fused_      = dnnl::matmul(fused_pd_);
            fused_y_.resize((size_t) (M * N));
            fused_dst_  = dnnl::memory(dst_md, eng_, fused_y_.data());
            b_          = dnnl::memory(b_md, eng_, const_cast<float *>(p.bias));
        }
        // (b) packed: s8*s8 -> s32, weights in the layout the primitive picks for `any`
        {
            const dnnl::memory::desc dst_md({M, N}, dt::s32, tag::ab);
            const dnnl::memory::desc w_any_md({K, N}, dt::s8, tag::any);
            const dnnl::matmul::desc d(src_md, w_any_md, dst_md);
            packed_pd_  = dnnl::matmul::primitive_desc(d, eng_);
            packed_     = dnnl::matmul(packed_pd_);
            w_packed_   = dnnl::memory(packed_pd_.weights_desc(), eng_);
            dnnl::reorder(w_plain_, w_packed_).execute(strm_, w_plain_, w_packed_);
            strm_.wait();
            packed_acc_.resize((size_t) (M * N));
            packed_dst_ = dnnl::memory(dst_md, eng_, packed_acc_.data());
        }
    }

    void run_fused() override {
        fused_.execute(strm_, {{DNNL_ARG_SRC, src_},
                               {DNNL_ARG_WEIGHTS, w_plain_},
                               {DNNL_ARG_DST, fused_dst_},
                               {DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, b_}});
        strm_.wait();
    }
    void run_packed() override {
        packed_.execute(strm_, {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, w_packed_}, {DNNL_ARG_DST, packed_dst_}});
        strm_.wait();
    }
    const float *   fused_out() const override { return fused_y_.data(); }
    const int32_t * packed_out() const override { return packed_acc_.data(); }
    std::string     impl_fused() const override { return fused_pd_.impl_info_str(); }
    std::string     impl_packed() const override { return packed_pd_.impl_info_str(); }

  private:
    problem                       p_;
    dnnl::engine                  eng_;
    dnnl::stream                  strm_;
    dnnl::memory                  src_, w_plain_, w_packed_, b_, fused_dst_, packed_dst_;
    dnnl::matmul::primitive_desc  fused_pd_, packed_pd_;
    dnnl::matmul                  fused_, packed_;
    std::vector<float>            fused_y_;
    std::vector<int32_t>          packed_acc_;
};

} // namespace

std::string setup(int n_threads) {
    // Debian builds oneDNN on OpenMP: its parallel regions take the calling thread's ICV.
    if (n_threads > 0) omp_set_num_threads(n_threads);
    const dnnl_version_t * v = dnnl_version();
    char buf[200];
    snprintf(buf, sizeof buf, "oneDNN %d.%d.%d, OpenMP %d threads, ISA %s", v->major, v->minor, v->patch,
             omp_get_max_threads(), isa_name(dnnl_get_effective_cpu_isa()));
    return buf;
}

std::unique_ptr<linear> linear::create(const problem & p, std::string & err) {
    try {
        return std::unique_ptr<linear>(new linear_impl(p));
    } catch (const dnnl::error & e) {
        err = std::string(e.what()) + " (status " + std::to_string((int) e.status) + ")";
    } catch (const std::exception & e) {
        err = e.what();
    }
    return nullptr;
}

} // namespace onednn_baseline
