// Fuzzes the GGUF reader (ggml/src/formats/gguf.cpp): any bytes as a file. Whatever opens must be
// self-consistent (every tensor inside the file, found by name, its data loaded), and writing it
// back with the writer must give a file the reader accepts with the same keys and tensor bytes.

#include "fuzz-support.h"
#include "gguf.h"

#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#define CHECK(c) FUZZ_CHECK("fuzz-gguf", c, #c)

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    // every rejected input logs one line; keep the fuzzer's output readable and fast
    ggml_log_set([](ggml_log_level, const char *, void *) {}, nullptr);
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    const std::string path = fuzz::as_file(data, size);
    ggml_context *    gc   = nullptr;
    gguf_init_params  p    = {false, &gc};
    gguf_context *    g    = gguf_init_from_file(path.c_str(), p);
    if (!g) {
        const std::string err = gguf_last_error();
        CHECK(!err.empty());
        CHECK(err.find('\n') == std::string::npos);
        CHECK(gc == nullptr);
        return 0;
    }
    CHECK(gc != nullptr);
    size_t total = 0;
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
        const char * name = gguf_get_tensor_name(g, i);
        CHECK(gguf_find_tensor(g, name) == i);
        CHECK(gguf_get_tensor_offset(g, i) % gguf_get_alignment(g) == 0);
        const size_t nb = gguf_get_tensor_size(g, i);
        CHECK(nb == 0 || gguf_get_data_offset(g) + gguf_get_tensor_offset(g, i) + nb <= size);
        ggml_tensor * t = ggml_get_tensor(gc, name);
        CHECK(t && t->type == gguf_get_tensor_type(g, i) && ggml_nbytes(t) == nb);
        CHECK(nb == 0 || memcmp(t->data, data + gguf_get_data_offset(g) + gguf_get_tensor_offset(g, i), nb) == 0);
        total += nb;
    }
    CHECK(total <= size);
    for (int64_t i = 0; i < gguf_get_n_kv(g); ++i) {
        CHECK(gguf_find_key(g, gguf_get_key(g, i)) == i);
        if (gguf_get_kv_type(g, i) == GGUF_TYPE_ARRAY && gguf_get_arr_type(g, i) == GGUF_TYPE_STRING) {
            for (size_t j = 0; j < gguf_get_arr_n(g, i); ++j) (void) strlen(gguf_get_arr_str(g, i, j));
        }
    }

    // round trip through the writer (it must never write what the reader refuses); skipped for
    // alignments above 64 KiB, legal but making the rewritten meta data that large (padding)
    if (gguf_get_alignment(g) > 65536) {
        gguf_free(g);
        ggml_free(gc);
        return 0;
    }
    gguf_context * w = gguf_init_empty();
    gguf_set_kv(w, g);
    for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) gguf_add_tensor(w, ggml_get_tensor(gc, gguf_get_tensor_name(g, i)));
    const std::string o = fuzz::scratch_dir() + "/rt.gguf";
    CHECK(gguf_write_to_file(w, o.c_str(), false));
    {
        ggml_context * gc2 = nullptr;
        gguf_init_params p2 = {false, &gc2};
        gguf_context *   b  = gguf_init_from_file(o.c_str(), p2);
        CHECK(b);
        CHECK(gguf_get_n_kv(b) == gguf_get_n_kv(g));
        CHECK(gguf_get_n_tensors(b) == gguf_get_n_tensors(g));
        for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
            const char *  name = gguf_get_tensor_name(g, i);
            ggml_tensor * x    = ggml_get_tensor(gc, name);
            ggml_tensor * y    = ggml_get_tensor(gc2, name);
            CHECK(y && ggml_nbytes(x) == ggml_nbytes(y));
            CHECK(ggml_nbytes(x) == 0 || memcmp(x->data, y->data, ggml_nbytes(x)) == 0);
        }
        gguf_free(b);
        ggml_free(gc2);
    }
    unlink(o.c_str());
    gguf_free(w);
    gguf_free(g);
    ggml_free(gc);
    return 0;
}
