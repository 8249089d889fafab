#!/usr/bin/env python3
"""Writes the committed hostile-input corpus (tests/hostile/files) and the fuzz seed corpora
(tests/fuzz/corpus/<target>). Run from anywhere; rerun after changing a case. Only the standard
library: the files are built byte by byte, which is the point (no writer would produce them).

`make-hostile.py --models DIR` writes the model-sized cases (hostile modules in a tiny Krea2
layout, and the valid model they derive from) into DIR; the test does that at run time.

Every file in tests/hostile/files (and every --models case but the valid one) must make `sdx run --weights F` and `sdx quantize F OUT` fail
with a one-line error and exit 1 or 2 (tests/hostile/run-hostile.sh)."""

import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = os.path.join(HERE, "files")
CORPUS = os.path.join(HERE, "..", "fuzz", "corpus")


def st(header, data=b"", length=None):
    """A safetensors file from a header (str/bytes/dict) and a data section."""
    if isinstance(header, dict):
        header = json.dumps(header, separators=(",", ":"))
    if isinstance(header, str):
        header = header.encode("utf-8")
    n = len(header) if length is None else length
    return struct.pack("<Q", n) + header + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


# A tiny Krea2 layout (hidden 256 = 2 heads, 1 KV head, MLP 256: the smallest sdx accepts, its
# group check wants multiples of 256), all linears int8 ConvRot G=4. ~0.5 MB each, so these are
# generated when the test runs (--models DIR) rather than committed. `override` replaces or adds tensors: name -> (entry dict, bytes) or None.
LINEARS = [("attn.wq", 256, 256), ("attn.wk", 256, 128), ("attn.wv", 256, 128), ("attn.gate", 256, 256),
           ("attn.wo", 256, 256), ("mlp.gate", 256, 256), ("mlp.up", 256, 256), ("mlp.down", 256, 256)]
CQ = b'{"format":"int8_tensorwise","convrot":true,"convrot_groupsize":4}'


def tiny_model(override=None):
    tensors = {}
    for name, n_in, n_out in LINEARS:
        p = "blocks.0." + name
        tensors[p + ".weight"] = ("I8", [n_out, n_in], bytes(n_out * n_in))
        tensors[p + ".weight_scale"] = ("F32", [n_out, 1], struct.pack("<f", 0.01) * n_out)
        tensors[p + ".comfy_quant"] = ("U8", [len(CQ)], CQ)
    for name, n in [("mod.lin", 6 * 256), ("prenorm.scale", 256), ("postnorm.scale", 256),
                    ("attn.qknorm.qnorm.scale", 128), ("attn.qknorm.knorm.scale", 128)]:
        tensors["blocks.0." + name] = ("F32", [n], struct.pack("<f", 0.1) * n)
    for k, v in (override or {}).items():
        if v is None:
            tensors.pop(k, None)
        else:
            tensors[k] = v
    header, data = {}, b""
    for k, (dtype, shape, raw) in tensors.items():
        header[k] = entry(dtype, shape, len(data), len(data) + len(raw))
        data += raw
    return st(header, data)


def f32(*v):
    return struct.pack("<%df" % len(v), *v)


def cases():
    u8 = entry("U8", [4], 0, 4)
    ok_data = b"\x01\x02\x03\x04"
    yield "empty", b""
    yield "short-length-field", b"\x05\x00\x00"
    yield "length-exceeds-file", st('{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}', ok_data, length=4096)
    yield "length-2^63", st("{}", length=1 << 63)
    yield "length-2^64-1", st("{}", length=(1 << 64) - 1)
    yield "length-over-100MB-limit", struct.pack("<Q", 100_000_001) + b"{" + b" " * 64
    yield "header-not-json", st("hello")
    yield "header-array", st("[0,0,0,0]")
    yield "header-number", st("1")
    yield "header-truncated-json", st('{"a":{"dtype":"U8","shape":[4],"data_off')
    yield "header-bom", st(b'\xef\xbb\xbf{"a":' + json.dumps(u8).encode() + b"}", ok_data)
    yield "header-trailing-garbage", st('{"a":' + json.dumps(u8) + "} x", ok_data)
    yield "header-nan", st('{"a":{"dtype":"U8","shape":[NaN],"data_offsets":[0,4]}}', ok_data)
    yield "header-comment", st('{/*c*/"a":' + json.dumps(u8) + "}", ok_data)
    yield "header-invalid-utf8", st(b'{"a\xff":' + json.dumps(u8).encode() + b"}", ok_data)
    yield "header-lone-surrogate", st('{"a\\ud800":' + json.dumps(u8) + "}", ok_data)
    yield "header-deep-nesting", st('{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4],"x":' + "[" * 200 + "]" * 200 + "}}", ok_data)
    yield "duplicate-tensor-name", st('{"a":' + json.dumps(u8) + ',"a":' + json.dumps(u8) + "}", ok_data)
    yield "entry-not-object", st('{"a":[1,2,3]}')
    yield "entry-missing-dtype", st({"a": {"shape": [4], "data_offsets": [0, 4]}}, ok_data)
    yield "entry-missing-shape", st({"a": {"dtype": "U8", "data_offsets": [0, 4]}}, ok_data)
    yield "entry-missing-offsets", st({"a": {"dtype": "U8", "shape": [4]}}, ok_data)
    yield "dtype-unknown", st({"a": entry("Q4_K", [4], 0, 4)}, ok_data)
    yield "dtype-not-string", st({"a": {"dtype": 4, "shape": [4], "data_offsets": [0, 4]}}, ok_data)
    yield "dtype-wrong-for-span", st({"a": entry("F32", [4], 0, 4)}, ok_data)
    yield "shape-negative", st({"a": entry("U8", [-4], 0, 4)}, ok_data)
    yield "shape-fraction", st({"a": entry("U8", [4.5], 0, 4)}, ok_data)
    yield "shape-string", st({"a": entry("U8", ["4"], 0, 4)}, ok_data)
    yield "shape-overflow-2^64", st({"a": entry("F32", [1 << 32, 1 << 32, 16], 0, 4)}, ok_data)
    yield "shape-overflow-wraps-to-4", st({"a": entry("U8", [(1 << 62) + 1, 4], 0, 4)}, ok_data)
    yield "shape-beyond-int64", st({"a": entry("U8", [1 << 64], 0, 4)}, ok_data)
    yield "offsets-reversed", st({"a": entry("U8", [0], 4, 0)}, ok_data)
    yield "offsets-past-end", st({"a": entry("U8", [8], 0, 8)}, ok_data)
    yield "offsets-far-past-end", st({"a": entry("U8", [4], (1 << 63) - 5, (1 << 63) - 1)}, ok_data)
    yield "offsets-beyond-int64", st({"a": entry("U8", [4], 1 << 64, (1 << 64) + 4)}, ok_data)
    yield "offsets-negative", st({"a": entry("U8", [4], -4, 0)}, ok_data)
    yield "offsets-three", st({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4, 8]}}, ok_data)
    yield "offsets-one", st({"a": {"dtype": "U8", "shape": [4], "data_offsets": [4]}}, ok_data)
    yield "offsets-overlap", st({"a": entry("U8", [4], 0, 4), "b": entry("U8", [4], 2, 6)}, ok_data + ok_data)
    yield "offsets-identical", st({"a": entry("U8", [4], 0, 4), "b": entry("U8", [4], 0, 4)}, ok_data)
    yield "metadata-not-object", st('{"__metadata__":"x","a":' + json.dumps(u8) + "}", ok_data)
    yield "metadata-value-number", st({"__metadata__": {"k": 1}, "a": u8}, ok_data)
    yield "metadata-nested", st({"__metadata__": {"k": {"x": "y"}}, "a": u8}, ok_data)
    yield "name-control-chars", st({"\x1b]0;pwned\x07\x1b[2J": entry("U8", [4], 0, 8)}, ok_data)
    yield "shape-object", st('{"a":{"dtype":"U8","shape":[{}],"data_offsets":[0,4]}}', ok_data)
    yield "offsets-nested-array", st('{"a":{"dtype":"U8","shape":[4],"data_offsets":[[0],4]}}', ok_data)
    yield "data-truncated", st({"a": entry("F32", [1024], 0, 4096)}, b"\0" * 100)
    # A valid file whose layout is not a Krea2 model: run refuses the layout; quantize has
    # nothing wrong with it, so it is a run-only case (prefix "run-only-").
    yield "run-only-not-a-model", st({"a": u8}, ok_data)


def model_cases():
    """Valid safetensors, hostile Krea2 modules (the first block's wq): read_linear must refuse."""
    wq = "blocks.0.attn.wq"
    yield "module-comfy-quant-not-json", tiny_model({wq + ".comfy_quant": ("U8", [5], b"{oops")})
    yield "module-comfy-quant-unknown-format", tiny_model({wq + ".comfy_quant": ("U8", [23], b'{"format":"fp8_scaled"}')})
    big = b'{"format":"int8_tensorwise","convrot":true,"convrot_groupsize":4294967296}'
    yield "module-groupsize-2^32", tiny_model({wq + ".comfy_quant": ("U8", [len(big)], big)})
    g3 = b'{"format":"int8_tensorwise","convrot":true,"convrot_groupsize":3}'
    yield "module-groupsize-3", tiny_model({wq + ".comfy_quant": ("U8", [len(g3)], g3)})
    yield "module-scale-inf", tiny_model({wq + ".weight_scale": ("F32", [256, 1], f32(float("inf")) * 256)})
    yield "module-scale-zero", tiny_model({wq + ".weight_scale": ("F32", [256, 1], f32(0.0) * 256)})
    yield "module-scale-negative", tiny_model({wq + ".weight_scale": ("F32", [256, 1], f32(-1.0) * 256)})
    yield "module-scale-wrong-shape", tiny_model({wq + ".weight_scale": ("F32", [128, 2], f32(0.1) * 256)})
    yield "module-scale-missing", tiny_model({wq + ".weight_scale": None})
    yield "module-weight-3d", tiny_model({wq + ".weight": ("I8", [256, 256, 1], bytes(256 * 256))})
    yield "module-weight-f32-with-int8-quant", tiny_model({wq + ".weight": ("F32", [256, 256], bytes(4 * 256 * 256))})
    yield "module-i8-without-quant", tiny_model({wq + ".comfy_quant": None, wq + ".weight_scale": None})
    yield "run-only-module-missing", tiny_model({"blocks.0.attn.wv.weight": None})
    yield "run-only-module-bias", tiny_model({wq + ".bias": ("F32", [256], f32(0.0) * 256)})

def json_seeds():
    yield "object", b'{"a": [1, -2.5e1, true, false, null, "x\\"\\u00e9\\ud83d\\ude00"], "big": 9007199254740993, "o": {}}'
    yield "comfy-quant", CQ
    yield "comfy-quant-nested", b'{"format":"int8_tensorwise","params":{"convrot":true,"convrot_groupsize":256}}'
    yield "many-keys", ("{" + ",".join('"k%d":%d' % (i, i) for i in range(20)) + "}").encode()
    yield "duplicate", b'{"a":1,"b":2,"a":3}'
    # a duplicate key whose text looks like the density message (the fuzz harness once took it for one)
    yield "dup-key-naming-values-in", b'{"k0":0,"k1":1,"k2":7,"k8":8,"k9":9,"k10":10,"k05":11," values in 3":13,"k14":14,"k15":1," values in 3":13,"k14":14,"k15":15,"k16":16,"k17":17,"kfalse18":18,"k19":19}'
    yield "deep", b"[" * 130 + b"]" * 130
    yield "numbers", b"[0,-0,1e308,-1e-308,1.5e+3,123456789012345678901234567890,-9223372036854775808]"
    yield "bad-utf8", b'"\xc0\xaf\xed\xa0\x80\xff"'
    yield "surrogates", b'["\\ud800\\udc00","\\udbff\\udfff","\\ud800"]'


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--models":
        out = sys.argv[2]
        os.makedirs(out, exist_ok=True)
        write(os.path.join(out, "valid-tiny-model.safetensors"), tiny_model())
        for name, data in model_cases():
            write(os.path.join(out, "%s.safetensors" % name), data)
        return 0
    os.makedirs(FILES, exist_ok=True)
    for t in ("json", "safetensors", "comfy"):
        os.makedirs(os.path.join(CORPUS, t), exist_ok=True)
    n = 0
    for i, (name, data) in enumerate(cases()):
        write(os.path.join(FILES, "%02d-%s.safetensors" % (i, name)), data)
        n += 1
        # every hostile file seeds both file fuzzers (the module ones matter most to comfy)
        if len(data) <= 4096:
            write(os.path.join(CORPUS, "safetensors", name), data)
            write(os.path.join(CORPUS, "comfy", name), data)
    valid = [("valid-f32-module", st({"m.weight": entry("F32", [2, 4], 0, 32), "m.bias": entry("F32", [2], 32, 40),
                                      "__metadata__": {"format": "pt"}}, f32(*range(8)) + f32(1, 2))),
             ("valid-int8-module", st({"m.weight": entry("I8", [2, 4], 0, 8), "m.weight_scale": entry("F32", [2, 1], 8, 16),
                                       "m.comfy_quant": entry("U8", [len(CQ)], 16, 16 + len(CQ))},
                                      bytes(range(8)) + f32(0.5, 0.25) + CQ)),
             ("valid-bf16-f16", st({"a": entry("BF16", [2], 0, 4), "b": entry("F16", [2], 4, 8), "e": entry("F32", [0, 3], 8, 8)},
                                   b"\x80\x3f\x00\x40\x00\x3c\x00\x40"))]
    for name, data in valid:
        write(os.path.join(CORPUS, "safetensors", name), data)
        write(os.path.join(CORPUS, "comfy", name), data)
    for name, data in json_seeds():
        write(os.path.join(CORPUS, "json", name), data)
    print("make-hostile: %d hostile files in %s" % (n, FILES))


if __name__ == "__main__":
    sys.exit(main())
