// sdx inspect — the scheduler's plan for one block graph: where every node runs and how.

#include "cli.h"

#include "model/gguf_reader.h"
#include "io/safetensors.h"

#include <cstdio>

namespace sdx {

static const char * const INSPECT_HELP =
    "usage: sdx inspect [options]\n"
    "       sdx inspect FILE   (a GGUF or safetensors file, recognised by content: one line per\n"
    "                          tensor with its name, type and shape, GGUF's ne order [in, out, ...]\n"
    "                          or safetensors' torch order [out, in, ...] as the file stores it)\n"
    "\n"
    "Builds the graph of one Krea2 block (block 0 unless --block), allocates it with\n"
    "ggml_backend_sched on the CPU backend with the sd extensions registered, and prints every\n"
    "node: index, op, name, device, and how it runs: native, extension (single-node kernel,\n"
    "with the kernel name) or fused (inside a fusion rule's range, with the rule name); then\n"
    "the extension workspace and the compute buffer size (ggml_backend_sched_get_buffer_size).\n"
    "Weights take no memory: planning reads shapes and addresses only, so they are laid out in\n"
    "reserved address space and the real width is quick. Defaults here: 1 block, 64 tokens,\n"
    "real width, int8.\n"
    "\n"
    "Options:\n"
    "  --block I   which block's graph, 0..999 (default 0)\n"
    "  --native    F32/BF16 style graph: RoPE as the plain op chain instead of sd_rope_apply\n"
    "  --json      machine-readable output on stdout\n"
    "  --help      this text\n";

// The tensors of a checkpoint file, one line each.
static int inspect_file(const std::string & path) {
    std::string err;
    if (sdgguf::is_gguf_file(path)) {
        auto r = sdgguf::reader::open(path, err);
        if (!r) fail(err);
        printf("%s: GGUF v%u, %lld tensors, %lld keys, alignment %zu, data at byte %zu\n", path.c_str(), gguf_get_version(r->meta()),
               (long long) r->n_tensors(), (long long) gguf_get_n_kv(r->meta()), gguf_get_alignment(r->meta()),
               gguf_get_data_offset(r->meta()));
        for (int64_t i = 0; i < r->n_tensors(); ++i) {
            const ggml_tensor * t  = r->tensor(i);
            std::string         sh = "[";
            for (int d = 0; d < ggml_n_dims(t); ++d) sh += (d ? ", " : "") + std::to_string(t->ne[d]);
            printf("%-48s %-6s %-24s %s\n", sdio::display_name(t->name).c_str(), ggml_type_name(t->type), (sh + "]").c_str(),
                   human_bytes(ggml_nbytes(t)).c_str());
        }
        return 0;
    }
    auto r = sdio::reader::open(path, err);
    if (!r) fail(err);
    printf("%s: safetensors, %zu tensors, %zu metadata keys\n", path.c_str(), r->tensors().size(), r->metadata().size());
    for (const auto & t : r->tensors()) {
        std::string sh = "[";
        for (size_t d = 0; d < t.shape.size(); ++d) sh += (d ? ", " : "") + std::to_string(t.shape[d]);
        printf("%-48s %-6s %-24s %s\n", sdio::display_name(t.name).c_str(), t.dtype.c_str(), (sh + "]").c_str(), human_bytes(t.nbytes).c_str());
    }
    return 0;
}

int cmd_inspect(int argc, char ** argv) {
    model_opts o;
    o.cfg.blocks = 1;
    o.cfg.tokens = 64;
    bool json = false, native = false;
    int  blk  = 0;
    args a(argc, argv);
    while (a.next()) {
        const std::string s = a.cur();
        if (s == "--help" || s == "-h") {
            printf("%s%s", INSPECT_HELP, MODEL_OPTS_HELP);
            return 0;
        }
        if (!s.empty() && s[0] != '-') {
            if (argc != 2) usage_error("inspect FILE takes no options (try 'sdx inspect --help')");
            return inspect_file(s);
        }
        if (s == "--json") json = true;
        else if (s == "--native") native = true;
        else if (s == "--block") blk = (int) a.int_value(0, 999);
        else if (!o.parse(a)) usage_error("inspect: unknown option '" + s + "' (try 'sdx inspect --help')");
    }
    o.finish();
    if (blk >= o.cfg.blocks) o.cfg.blocks = blk + 1;

    krea2::runner r;
    std::string   err;
    if (!r.init(o.threads, err, o.device)) fail(err);
    krea2::model m;
    load_model(o, o.dtype, m, false);
    place_weights(r, m);
    krea2::build_options bo;
    bo.rope_ext = !native;
    bo.fusion   = o.fusion;
    krea2::runner::plan_info p;
    if (!r.plan(m, bo, blk, p, err)) fail(err);
    const krea2::config & c = m.cfg();

    if (json) {
        std::string s = "{\n";
        s += fmt("  \"config\": {\"block\": %d, \"tokens\": %lld, \"text_tokens\": %lld, \"hidden\": %lld, \"heads\": %lld, "
                 "\"kv_heads\": %lld, \"mlp\": %lld, \"dtype\": \"%s\", \"fusion\": %s, \"rope\": \"%s\"},\n",
                 blk, (long long) c.tokens, (long long) c.text_tokens, (long long) c.hidden, (long long) c.heads,
                 (long long) c.kv_heads, (long long) c.mlp, krea2::wtype_name(o.dtype), o.fusion ? "true" : "false",
                 p.rope_ext ? "sd_rope_apply" : "chain");
        s += fmt("  \"steps\": %d, \"extension_steps\": %d, \"fused_steps\": %d, \"quantize_nodes\": %d,\n", p.n_steps,
                 p.n_ext, p.n_fused, p.n_quantize);
        s += fmt("  \"workspace_bytes_sum\": %zu, \"workspace_bytes_max\": %zu, \"compute_buffer_bytes\": %zu,\n",
                 p.workspace_bytes, p.workspace_max, p.buffer_bytes);
        s += "  \"nodes\": [\n";
        for (size_t i = 0; i < p.nodes.size(); ++i) {
            const auto & n = p.nodes[i];
            s += fmt("    {\"index\": %d, \"op\": \"%s\", \"name\": \"%s\", \"device\": \"%s\", \"mode\": \"%s\", \"kernel\": ",
                     n.index, json_escape(n.op).c_str(), json_escape(n.name).c_str(), json_escape(n.device).c_str(),
                     n.mode.c_str());
            s += n.kernel.empty() ? "null" : "\"" + json_escape(n.kernel) + "\"";
            s += fmt(", \"step\": %d}%s\n", n.step, i + 1 < p.nodes.size() ? "," : "");
        }
        s += "  ]\n}\n";
        fputs(s.c_str(), stdout);
        return 0;
    }
    printf("sdx inspect: block %d, %lld tokens, hidden %lld, %lld/%lld heads, mlp %lld, %s, fusion %s, rope %s\n", blk,
           (long long) c.tokens, (long long) c.hidden, (long long) c.heads, (long long) c.kv_heads, (long long) c.mlp,
           krea2::wtype_name(o.dtype), o.fusion ? "on" : "off", p.rope_ext ? "sd_rope_apply" : "op chain");
    printf("%5s  %-26s %-28s %-6s %-9s %s\n", "node", "op", "name", "device", "runs", "kernel / rule");
    for (const auto & n : p.nodes) {
        printf("%5d  %-26s %-28s %-6s %-9s %s\n", n.index, n.op.c_str(), n.name.c_str(), n.device.c_str(), n.mode.c_str(),
               n.kernel.c_str());
    }
    printf("plan: %d steps, %d single-node extension steps, %d fused steps", p.n_steps, p.n_ext, p.n_fused);
    for (const auto & f : p.fused_rules) printf(" [%s]", f.c_str());
    printf("\nquantize nodes: %d\n", p.n_quantize);
    printf("extension workspace: largest step %s (%zu bytes), sum over steps %s\n", human_bytes(p.workspace_max).c_str(),
           p.workspace_max, human_bytes(p.workspace_bytes).c_str());
    printf("compute buffer (incl. workspace): %s (%zu bytes)\n", human_bytes(p.buffer_bytes).c_str(), p.buffer_bytes);
    return 0;
}

} // namespace sdx
