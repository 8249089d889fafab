#!/usr/bin/env python3
"""Cross-checks src/io against the reference safetensors implementation (the `safetensors`
Python package) and numpy. Driven by tests/test-io.cpp (IoPython.*); exits non-zero with a
message on the first mismatch.

  write PATH                      write a checkpoint of fixed content for our reader
  check PATH                      verify the file our writer produced with that same content
  write-float PATH                write float linear modules (F32/F16/BF16) for quantize_file
  check-quantized SRC OUT G       verify quantize_file's output against SRC, re-derived in numpy
  write-comfy-forms PATH          int8_tensorwise modules in each form ComfyUI's loader reads
"""
import json
import sys

import numpy as np
import safetensors

META = {"format": "pt", "note": "caf\u00e9 \"quoted\""}
# Package dtype names -> header names; deserialize() reports either, depending on the release.
NAMES = {"float32": "F32", "float16": "F16", "bfloat16": "BF16", "int8": "I8", "uint8": "U8"}
CFG4 = {"format": "int8_tensorwise", "convrot": True, "convrot_groupsize": 4}


def fail(msg):
    print("io_roundtrip: " + msg, file=sys.stderr)
    sys.exit(1)


def bf16_bytes(a):
    """float32 array -> BF16 bytes (numpy has no bfloat16); inputs here are exact in bf16."""
    u = np.ascontiguousarray(a, dtype="<f4").view("<u4")
    if np.any(u & 0xFFFF):
        fail("bf16_bytes: value not exact in bf16")
    return (u >> 16).astype("<u2").tobytes()


def raw(dtype, shape, data):
    return {"dtype": dtype, "shape": list(shape), "data": data}


def serialize_file(tensors, path, metadata):
    """The package's low-level serializer, which takes raw bytes of any dtype (bf16 included).
    Newer releases want TensorSpec(dtype, shape, data_ptr, data_len); older ones plain dicts."""
    spec = getattr(safetensors, "TensorSpec", None)
    if spec is None:
        safetensors.serialize_file(tensors, path, metadata=metadata)
        return
    keep = []
    specs = {}
    for name, t in tensors.items():
        buf = np.frombuffer(t["data"], dtype=np.uint8).copy()
        keep.append(buf)
        specs[name] = spec(dtype=t["dtype"], shape=t["shape"], data_ptr=buf.ctypes.data, data_len=buf.nbytes)
    safetensors.serialize_file(specs, path, metadata=metadata)


def reference_content():
    """The tensors both directions agree on, as dtype/shape/bytes for serialize_file."""
    f32 = (np.arange(15, dtype=np.float32) * 0.25 - 1.0).reshape(3, 5)
    f16 = (np.arange(8, dtype=np.float32) * 0.5 - 2.0).astype(np.float16).reshape(2, 4)
    bf = np.arange(6, dtype=np.float32) * 1.5 - 3.0
    w = ((np.arange(24) * 11 % 255) - 127).astype(np.int8).reshape(3, 8)
    cfg = json.dumps(CFG4).encode("utf-8")
    return {
        "t.f32": raw("float32", f32.shape, f32.tobytes()),
        "t.f16": raw("float16", f16.shape, f16.tobytes()),
        "t.bf16": raw("bfloat16", bf.shape, bf16_bytes(bf)),
        "blk.lin.weight": raw("int8", w.shape, w.tobytes()),
        # ComfyUI writes [out, 1]
        "blk.lin.weight_scale": raw("float32", (3, 1), np.array([[0.5], [0.25], [0.125]], np.float32).tobytes()),
        "blk.lin.comfy_quant": raw("uint8", (len(cfg),), cfg),
        "blk.lin.bias": raw("float32", (3,), np.array([1, 2, 3], np.float32).tobytes()),
    }


def cmd_write(path):
    serialize_file(reference_content(), path, META)


def read_raw(path):
    """name -> (dtype string as the package reports it, shape, bytes) via the package's parser."""
    with open(path, "rb") as f:
        blob = f.read()
    out = {}
    for name, t in safetensors.deserialize(blob):
        out[name] = (NAMES.get(t["dtype"], t["dtype"]), list(t["shape"]), bytes(t["data"]))
    return out


def metadata_of(path):
    with safetensors.safe_open(path, framework="numpy") as f:
        return f.metadata() or {}


def cmd_check(path):
    got = read_raw(path)
    want = reference_content()
    if set(got) != set(want):
        fail(f"tensor names differ: {sorted(got)} vs {sorted(want)}")
    for name, w in want.items():
        dt, shape, data = got[name]
        if dt != NAMES[w["dtype"]] or shape != w["shape"] or data != w["data"]:
            fail(f"{name}: got {dt} {shape} ({len(data)} bytes), want {w['dtype']} {w['shape']} ({len(w['data'])} bytes)")
    meta = metadata_of(path)
    if meta != META:
        fail(f"metadata {meta!r} != {META!r}")
    # The numpy front end must load every non-bf16 tensor too.
    with safetensors.safe_open(path, framework="numpy") as f:
        arrays = {k: f.get_tensor(k) for k in f.keys() if got[k][0] != "BF16"}
    if arrays["blk.lin.weight_scale"].shape != (3, 1) or arrays["blk.lin.weight"].dtype != np.int8:
        fail("numpy view of blk.lin differs")
    if json.loads(bytes(arrays["blk.lin.comfy_quant"]).decode("utf-8")) != CFG4:
        fail("comfy_quant JSON differs")
    print("io_roundtrip: check ok")


def cmd_write_float(path):
    rng = np.random.default_rng(1234)
    a = rng.uniform(-1, 1, (6, 64)).astype(np.float32)
    a[2] = 0  # all-zero row
    b = rng.uniform(-2, 2, (4, 32)).astype(np.float16)
    c = rng.uniform(-1, 1, (5, 16)).astype(np.float32)
    c = (c.view(np.uint32) & 0xFFFF0000).view(np.float32)  # exact in bf16
    skip = rng.uniform(-1, 1, (3, 12)).astype(np.float32)  # 12 not divisible by 16: stays float
    norm = rng.uniform(-1, 1, (64,)).astype(np.float32)
    serialize_file({
        "a.weight": raw("float32", a.shape, a.tobytes()),
        "a.bias": raw("float32", (6,), rng.uniform(-1, 1, 6).astype(np.float32).tobytes()),
        "b.weight": raw("float16", b.shape, b.tobytes()),
        "c.weight": raw("bfloat16", c.shape, bf16_bytes(c)),
        "first.weight": raw("float32", skip.shape, skip.tobytes()),
        "norm.scale": raw("float32", norm.shape, norm.tobytes()),
    }, path, {"format": "pt"})


def hadamard(g):
    h4 = 0.5 * np.array([[1, 1, 1, -1], [1, 1, -1, 1], [1, -1, 1, 1], [-1, 1, 1, 1]], dtype=np.float64)
    h = np.ones((1, 1))
    while h.shape[0] < g:
        h = np.kron(h4, h)
    return h


def to_f32(dt, shape, data):
    if dt == "F32":
        return np.frombuffer(data, "<f4").reshape(shape).astype(np.float64)
    if dt == "F16":
        return np.frombuffer(data, "<f2").reshape(shape).astype(np.float64)
    if dt == "BF16":
        u = np.frombuffer(data, "<u2").astype(np.uint32) << 16
        return u.view(np.float32).reshape(shape).astype(np.float64)
    fail("unexpected dtype " + dt)


def cmd_check_quantized(src, out, g):
    g = int(g)
    s = read_raw(src)
    o = read_raw(out)
    if metadata_of(out) != metadata_of(src):
        fail("metadata not copied")
    quantized = []
    for name, (dt, shape, data) in s.items():
        m = name[: -len(".weight")] if name.endswith(".weight") else None
        if m and len(shape) == 2 and shape[1] % g == 0 and shape[1] >= g:
            quantized.append(m)
            continue
        if o.get(name) != (dt, shape, data):
            fail(f"{name}: not copied unchanged")
    if sorted(quantized) != ["a", "b", "c"]:
        fail(f"unexpected quantized set {quantized}")
    expect_names = set(s) | {f"{m}.{k}" for m in quantized for k in ("weight_scale", "comfy_quant")}
    if set(o) != expect_names:
        fail(f"output names {sorted(o)} != {sorted(expect_names)}")
    h = hadamard(g)
    for m in quantized:
        w = to_f32(*s[m + ".weight"])
        n_out, n_in = w.shape
        dt, shape, data = o[m + ".weight"]
        if dt != "I8" or shape != [n_out, n_in]:
            fail(f"{m}.weight: {dt} {shape}")
        q = np.frombuffer(data, np.int8).reshape(n_out, n_in).astype(np.float64)
        dt, shape, data = o[m + ".weight_scale"]
        if dt != "F32" or shape != [n_out, 1]:
            fail(f"{m}.weight_scale: {dt} {shape}")
        sc = np.frombuffer(data, "<f4").astype(np.float64)
        dt, shape, data = o[m + ".comfy_quant"]
        if dt != "U8" or json.loads(data.decode("utf-8")) != {"format": "int8_tensorwise", "convrot": True, "convrot_groupsize": g}:
            fail(f"{m}.comfy_quant: {dt} {data!r}")
        # W_rot = W R, block-diagonal R with H_G on each group (float64 here; ours is float32).
        rot = (w.reshape(n_out, n_in // g, g) @ h.T).reshape(n_out, n_in)
        amax = np.abs(rot).max(axis=1)
        want_sc = np.where(amax > 0, amax / 127.0, 1.0)
        if not np.allclose(sc, want_sc, rtol=1e-5, atol=0):
            fail(f"{m}: scales {sc} vs {want_sc}")
        ideal = rot / want_sc[:, None]
        # float32 vs float64 rotation may move a value across a rounding boundary: at most 1 apart,
        # and only where the ideal value sits right at a half.
        diff = np.abs(q - np.clip(np.rint(ideal), -127, 127))
        if diff.max() > 1 or np.any((diff == 1) & (np.abs(np.abs(ideal - np.floor(ideal)) - 0.5) > 1e-3)):
            fail(f"{m}: quantized values differ from numpy's")
        # Dequantize and rotate back (R^-1 = R^T = R): within sqrt(G)/2 steps per element.
        back = ((q * sc[:, None]).reshape(n_out, n_in // g, g) @ h).reshape(n_out, n_in)
        bound = sc[:, None] * max(1.0, 0.5 * np.sqrt(g)) * 1.001 + 1e-7
        if np.any(np.abs(back - w) > bound):
            fail(f"{m}: dequantized weights outside the bound")
    # Everything must also load through the package's numpy front end (no bf16 there).
    with safetensors.safe_open(out, framework="numpy") as f:
        for k in f.keys():
            if o[k][0] != "BF16":
                f.get_tensor(k)
    print("io_roundtrip: check-quantized ok")


def cmd_write_comfy_forms(path):
    """What ComfyUI-side writers produce and ComfyUI reads (comfy/ops.py, comfy/utils.py): ConvRot
    keys nested in "params", convrot without a group size (256), one scalar scale for the whole
    tensor, and a configuration held only by the header's _quantization_metadata."""
    def lin(name, n_out, n_in, scale, cfg):
        w = ((np.arange(n_out * n_in) * 7 % 255) - 127).astype(np.int8).reshape(n_out, n_in)
        t = {f"{name}.weight": raw("int8", w.shape, w.tobytes()),
             f"{name}.weight_scale": raw("float32", scale.shape, scale.astype(np.float32).tobytes())}
        if cfg is not None:
            blob = json.dumps(cfg).encode("utf-8")
            t[f"{name}.comfy_quant"] = raw("uint8", (len(blob),), blob)
        return t
    tensors = {}
    tensors.update(lin("nested", 3, 16, np.array([[0.5], [0.25], [0.125]]),
                       {"format": "int8_tensorwise", "params": {"convrot": True, "convrot_groupsize": 4}}))
    tensors.update(lin("default", 2, 256, np.array([0.5, 0.25]), {"format": "int8_tensorwise", "convrot": True}))
    tensors.update(lin("scalar", 4, 8, np.array(0.375), {"format": "int8_tensorwise"}))
    tensors.update(lin("header", 2, 16, np.array([[1.0], [2.0]]), None))
    meta = {"_quantization_metadata": json.dumps(
        {"format_version": "1.0", "layers": {"header": {"format": "int8_tensorwise", "convrot": True, "convrot_groupsize": 16}}})}
    serialize_file(tensors, path, meta)


def main(argv):
    cmds = {"write": (cmd_write, 1), "check": (cmd_check, 1), "write-float": (cmd_write_float, 1),
            "check-quantized": (cmd_check_quantized, 3), "write-comfy-forms": (cmd_write_comfy_forms, 1)}
    if len(argv) < 2 or argv[1] not in cmds or len(argv) - 2 != cmds[argv[1]][1]:
        fail("usage: " + __doc__)
    cmds[argv[1]][0](*argv[2:])


if __name__ == "__main__":
    main(sys.argv)
