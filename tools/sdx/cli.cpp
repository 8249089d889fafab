// cli.cpp — argument reading, model options, progress and atomic writes for sdx.

#include "cli.h"
#include "interrupt.h"

#include "io/atomic_file.h"
#include "io/json.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace sdx {

bool args::next() {
    if (++i_ >= argc_) return false;
    const std::string a = argv_[i_];
    if (a.size() > 1 && a[0] == '-') {
        if (std::find(seen_.begin(), seen_.end(), a) != seen_.end()) usage_error("option " + a + " given twice");
        seen_.push_back(a);
    }
    return true;
}

std::string args::value() {
    const std::string opt = cur();
    if (i_ + 1 >= argc_) usage_error("option " + opt + " needs a value");
    const std::string v = argv_[i_ + 1];
    if (v.size() > 2 && v[0] == '-' && v[1] == '-') usage_error("option " + opt + " needs a value (got option '" + v + "')");
    ++i_;
    return v;
}

long long parse_int(const std::string & opt, const std::string & v, long long lo, long long hi) {
    const size_t digits = v.size() > 0 && v[0] == '-' ? 1 : 0;
    bool         strict = v.size() > digits && v.size() - digits <= 19;
    for (size_t i = digits; i < v.size() && strict; ++i) strict = v[i] >= '0' && v[i] <= '9';
    errno             = 0;
    char *          end = nullptr;
    const long long x   = strict ? std::strtoll(v.c_str(), &end, 10) : 0;
    if (!strict || *end != '\0' || errno == ERANGE) {
        // overflowing digits say so; anything else is not a plain decimal integer
        if (strict || (v.size() > digits && v.find_first_not_of("0123456789", digits) == std::string::npos))
            usage_error("option " + opt + ": " + v + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
        usage_error("option " + opt + ": '" + v + "' is not an integer");
    }
    if (x < lo || x > hi)
        usage_error("option " + opt + ": " + v + " is out of range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return x;
}

long long args::int_value(long long lo, long long hi) {
    const std::string opt = cur();
    return parse_int(opt, value(), lo, hi);
}

const char * const MODEL_OPTS_HELP =
    "Model options (integers are plain decimal; each option at most once):\n"
    "  --blocks N        Krea2 single-stream blocks in the stack, 1..1000\n"
    "  --tokens L        sequence length (text + image tokens), 2..65536\n"
    "  --text-tokens T   text tokens at the start of the sequence, 0..L-1 (default min(32, L/2))\n"
    "  --hidden H        hidden size (default 6144; must be heads x 128)\n"
    "  --heads N         query heads of dim 128, 1..512 (default 48)\n"
    "  --kv-heads N      key/value heads, 1..512 (default 12; divides --heads)\n"
    "  --mlp N           SwiGLU hidden size, a multiple of 256 up to 262144 (default 16384;\n"
    "                    int8 only up to the INT8 kernel's K limit, 131072 today)\n"
    "  --dtype T         block linear weights: int8 (ConvRot G=256) | bf16 | f32 | q8_0 | q4_k (block-quantized,\n"
    "                    where this build has the type and its mul_mat) (default int8)\n"
    "  --threads N       CPU threads, 1..512 (default: the CPU backend's default)\n"
    "  --device D        cpu (default) | a backend family, optionally :N (vulkan, vulkan:1, cuda:0)\n"
    "                    | a device name (Vulkan0, CUDA1), names in any case: that device first, the\n"
    "                    CPU for what it declines; an unknown name lists the devices there are\n"
    "  --seed S          seed of the synthetic weights and input, 0..2^63-1 (default 42)\n"
    "  --no-fusion       sd fusion rules off: every node runs by itself (same graph)\n"
    "  --weights FILE    block weights from a safetensors checkpoint (plain float or ComfyUI\n"
    "                    int8_tensorwise); width and heads are taken from the file, so\n"
    "                    --hidden, --heads, --kv-heads and --mlp do not go with it\n";

bool model_opts::parse(args & a) {
    const std::string o = a.cur();
    if (o == "--blocks") cfg.blocks = (int) a.int_value(1, 1000);
    else if (o == "--tokens") cfg.tokens = a.int_value(2, 1 << 16);
    else if (o == "--text-tokens") { cfg.text_tokens = a.int_value(0, 1 << 16); text_set = true; }
    else if (o == "--hidden" || o == "--heads" || o == "--kv-heads" || o == "--mlp") {
        if (width_opt.empty()) width_opt = o;
        if (o == "--hidden") cfg.hidden = a.int_value(128, 1 << 16);
        else if (o == "--heads") cfg.heads = a.int_value(1, 512);
        else if (o == "--kv-heads") cfg.kv_heads = a.int_value(1, 512);
        else cfg.mlp = a.int_value(1, 1 << 18);
    }
    else if (o == "--threads") threads = (int) a.int_value(1, GGML_MAX_N_THREADS);
    else if (o == "--seed") seed = (uint64_t) a.int_value(0, INT64_MAX);
    else if (o == "--no-fusion") fusion = false;
    else if (o == "--weights") {
        weights = a.value();
        // "" used to mean "no file", silently running synthetic weights instead of the user's
        if (weights.empty()) usage_error("option --weights: the file name is empty");
    }
    else if (o == "--weights") weights = a.value();
    else if (o == "--device") device = a.value();
    else if (o == "--dtype") {
        const std::string v = a.value();
        if (!krea2::parse_wtype(v, dtype)) usage_error("option --dtype: '" + v + "' is not one of int8, bf16, f32, q8_0, q4_k");
    } else return false;
    return true;
}

void model_opts::finish() {
    if (!text_set) cfg.text_tokens = std::min<int64_t>(32, cfg.tokens / 2);
    // with a checkpoint the width comes from the file and is validated there
    if (!weights.empty()) {
        if (!width_opt.empty()) usage_error("option " + width_opt + " does not apply with --weights (the width comes from the file)");
        return;
    }
    std::string v = cfg.validate();
    if (v.empty()) v = krea2::check_quant_wtype(cfg, dtype);
    if (!v.empty()) usage_error(v);
}

std::unique_ptr<krea2::weight_source> make_source(model_opts & o) {
    if (o.weights.empty()) return std::unique_ptr<krea2::weight_source>(new krea2::synthetic_source(o.seed));
    std::string err;
    auto        src = krea2::open_checkpoint(o.weights, o.cfg, err);
    if (!src) fail(err);
    const std::string why = krea2::check_quant_wtype(o.cfg, o.dtype); // the width is known now
    if (!why.empty()) usage_error(why);
    return src;
}

void load_model(model_opts & o, krea2::wtype type, krea2::model & m, bool fill) {
    std::unique_ptr<krea2::weight_source> src;
    if (fill || !o.weights.empty()) src = make_source(o); // a checkpoint also fixes the width
    if (fill) return load_model(o, type, m, *src);
    std::string err;
    if (!m.load(o.cfg, type, nullptr, err)) fail(err);
}

void load_model(model_opts & o, krea2::wtype type, krea2::model & m, krea2::weight_source & src) {
    progress    p(std::string("weights ") + krea2::wtype_name(type));
    std::string err;
    // the progress callback runs between blocks: a Ctrl-C unwinds from there (filling a block at
    // full width takes seconds, no kernel polls the abort callback meanwhile)
    const bool ok = m.load(o.cfg, type, &src, err, [&](int done, int total, const char *) {
        stop_if_interrupted();
        p.update(done, total);
    });
    p.finish();
    if (!ok) fail(err);
}

void place_weights(krea2::runner & r, krea2::model & m) {
    ggml_backend_buffer_type_t buft = r.weight_buffer_type();
    if (!buft) return;
    std::string err;
    if (!m.move_to(buft, err)) fprintf(stderr, "sdx: note: the weights stay in host memory (%s)\n", err.c_str());
}

krea2::runner::result run_stack(krea2::runner & r, const krea2::model & m, const krea2::build_options & bo,
                                const std::vector<float> & x, const std::vector<float> & tvec, const std::string & label) {
    krea2::runner::result res;
    std::string           err;
    progress              p(label);
    p.update(0, m.cfg().blocks, fmt("block 0/%d", m.cfg().blocks));
    const bool ok = r.forward(m, bo, x, tvec, res, err, [&](int done, int total) {
        p.update(done, total, fmt("block %d/%d (%.2f s)", done, total, res.block_s.empty() ? 0.0 : res.block_s.back()));
    });
    p.finish(fmt("%.2f s", res.total_s));
    if (!ok && res.aborted) stop_if_interrupted();
    if (!ok) fail(err);
    return res;
}

// ---------------------------------------------------------------------------------------------

progress::progress(std::string label) : label_(std::move(label)), tty_(isatty(STDERR_FILENO) != 0) {}

progress::~progress() {
    if (tty_ && open_) fputs("\n", stderr);
}

void progress::update(double done, double total, const std::string & note) {
    const int pct = total > 0 ? (int) (100.0 * done / total) : 100;
    if (tty_) {
        const int width = 30, fill = pct * width / 100;
        std::string bar(fill, '#');
        bar.append(width - fill, '.');
        fprintf(stderr, "\r%-16s [%s] %3d%% %s\033[K", label_.c_str(), bar.c_str(), pct, note.c_str());
        fflush(stderr);
        open_ = true;
    } else if (pct != last_pct_ && (pct == 100 || last_pct_ < 0 || pct / 10 != last_pct_ / 10)) {
        fprintf(stderr, "sdx: %s %d%%%s%s\n", label_.c_str(), pct, note.empty() ? "" : " ", note.c_str());
    }
    last_pct_ = pct;
}

void progress::finish(const std::string & note) {
    if (tty_ && open_) {
        fprintf(stderr, "\r%-16s done %s\033[K\n", label_.c_str(), note.c_str());
        open_ = false;
    }
}

void write_file_atomic(const std::string & path, const std::string & text) {
    std::string err;
    if (!sdio::write_text_atomic(path, text, err)) fail("cannot write " + err);
}

// The contents of a JSON string literal (no quotes), valid whatever bytes s holds.
std::string json_escape(const std::string & s) {
    std::string q;
    sdio::json::append_quoted(q, s);
    return q.substr(1, q.size() - 2);
}

// Any length: a path or message longer than a fixed buffer must not be cut (it once truncated
// the bench JSON in the middle of a string).
std::string fmt(const char * f, ...) {
    va_list ap;
    va_start(ap, f);
    va_list ap2;
    va_copy(ap2, ap);
    char      small[512];
    const int n = vsnprintf(small, sizeof small, f, ap);
    va_end(ap);
    if (n < 0) {
        va_end(ap2);
        return std::string();
    }
    if ((size_t) n < sizeof small) {
        va_end(ap2);
        return std::string(small, (size_t) n);
    }
    std::string out((size_t) n + 1, '\0');
    vsnprintf(&out[0], out.size(), f, ap2);
    va_end(ap2);
    out.resize((size_t) n);
    return out;
}

std::string human_bytes(size_t n) {
    if (n >= (1ull << 30)) return fmt("%.2f GiB", n / 1073741824.0);
    if (n >= (1ull << 20)) return fmt("%.1f MiB", n / 1048576.0);
    if (n >= 1024) return fmt("%.1f KiB", n / 1024.0);
    return fmt("%zu B", n);
}

} // namespace sdx
