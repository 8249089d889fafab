#!/usr/bin/env python3
"""GGUF cross-check against the Python `gguf` package (PyPI), driven by tests/test-gguf.cpp.

  gguf_crosscheck.py write DIR   files the gguf package writes, for our reader:
                                 DIR/py.gguf       every key value type and arrays, tensors F32, F16,
                                                   BF16, Q8_0 (quantized by gguf.quants)
                                 DIR/py-q.gguf     tensors Q4_0, Q4_1, Q5_0, Q5_1 (gguf.quants)
                                 DIR/py-align.gguf general.alignment = 64
                                 and per tensor DIR/<file>.<tensor>.bytes (the exact bytes) and
                                 DIR/<file>.<tensor>.deq (gguf.quants.dequantize, float32)
  gguf_crosscheck.py model DIR   DIR/model.gguf: a 2-block Krea2 stack at a small width (hidden
                                 256, 2 heads, 1 KV head, mlp 512) with tensor names as our
                                 safetensors writer names them, linear weights mixed per tensor
                                 (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1: every type
                                 gguf.quants quantizes), norms F32
  gguf_crosscheck.py requantized OURS.gguf ORIG.gguf TYPE:BOUND
                                 OURS (sdx quantize --to TYPE of ORIG) read by gguf.GGUFReader:
                                 float linears now TYPE, dequantized by gguf.quants within a
                                 relative RMS BOUND of ORIG, everything else byte-identical
  gguf_crosscheck.py to-safetensors IN.gguf OUT.safetensors
                                 IN's tensors dequantized to F32 by gguf.quants, in safetensors
  gguf_crosscheck.py check DIR   reads DIR/cpp.gguf and DIR/cpp-align.gguf (written by our writer)
                                 with gguf.GGUFReader: every key and value, tensor types, shapes,
                                 offsets and bytes (DIR/cpp.<tensor>.bytes), and the float and
                                 quantized tensors against the formula quantized here.

The key/value table and the tensor formula are duplicated in test-gguf.cpp (keep them equal).
Exit 0 when everything matches; 1 with one line per mismatch; 2 when the package is missing.
"""

import sys
from pathlib import Path

try:
    import numpy as np
    import gguf
    from gguf import GGMLQuantizationType as Q, GGUFValueType as V
except ImportError as e:  # the ctest must fail, never skip
    print(f"gguf_crosscheck: the Python gguf package is missing ({e}); scripts/install-deps.sh installs it")
    sys.exit(2)

SCALARS = [
    ("x.u8", V.UINT8, 200), ("x.i8", V.INT8, -100), ("x.u16", V.UINT16, 40000), ("x.i16", V.INT16, -20000),
    ("x.u32", V.UINT32, 3000000000), ("x.i32", V.INT32, -2000000000), ("x.f32", V.FLOAT32, 1.5),
    ("x.bool", V.BOOL, True), ("x.str", V.STRING, "h\u00e9llo w\u00f6rld"), ("x.u64", V.UINT64, 2**63 + 5),
    ("x.i64", V.INT64, -(2**62) - 3), ("x.f64", V.FLOAT64, 0.1),
]
ARRAYS = [
    ("a.u8", V.UINT8, [0, 1, 255]), ("a.i8", V.INT8, [-128, 0, 127]), ("a.u16", V.UINT16, [0, 65535]),
    ("a.i16", V.INT16, [-32768, 32767]), ("a.u32", V.UINT32, [0, 4294967295]),
    ("a.i32", V.INT32, [-2147483648, 2147483647, 7]), ("a.f32", V.FLOAT32, [0.25, -2.0, 3.5]),
    ("a.bool", V.BOOL, [True, False, True]), ("a.str", V.STRING, ["a", "", "\u00fcn\u00ef"]),
    ("a.u64", V.UINT64, [2**64 - 1, 0]), ("a.i64", V.INT64, [-(2**63), 2**63 - 1]), ("a.f64", V.FLOAT64, [0.1, -1e300]),
]
# (name, type, numpy shape: slowest first; ggml's ne is the reverse)
TENSORS = [
    ("t.f32", Q.F32, (3, 64)), ("t.f16", Q.F16, (2, 3, 32)), ("t.bf16", Q.BF16, (5, 32)),
    ("t.q8_0", Q.Q8_0, (4, 96)), ("t.vec", Q.F32, (7,)),
]
TENSORS_Q = [("t.q4_0", Q.Q4_0, (4, 64)), ("t.q4_1", Q.Q4_1, (4, 64)), ("t.q5_0", Q.Q5_0, (3, 64)), ("t.q5_1", Q.Q5_1, (3, 64))]
TENSORS_ALIGN = [("t.a", Q.F32, (3,)), ("t.b", Q.F16, (5,))]


def formula(k, shape):
    """Tensor k's float values: multiples of 1/64 in [-7.8, 7.8], exact in F32 and F16."""
    n = int(np.prod(shape))
    i = np.arange(n, dtype=np.int64)
    return (((i * 7919 + 13 * k) % 1001 - 500).astype(np.float32) / np.float32(64.0)).reshape(shape)


def encode(k, qtype, shape):
    x = formula(k, shape)
    if qtype == Q.F32:
        return x
    if qtype == Q.F16:
        return x.astype(np.float16)
    return gguf.quants.quantize(x, qtype)


def write_file(d, stem, tensors, alignment=None):
    w = gguf.GGUFWriter(str(d / f"{stem}.gguf"), "sdxtest")
    if alignment:
        w.add_custom_alignment(alignment)
    if stem == "py":
        for key, t, v in SCALARS:
            w.add_key_value(key, v, t)
        for key, t, v in ARRAYS:
            w.add_key_value(key, v, V.ARRAY, sub_type=t)
    for k, (name, qt, shape) in enumerate(tensors):
        data = encode(k, qt, shape)
        if qt in (Q.F32, Q.F16):
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, np.ascontiguousarray(data).view(np.uint8), raw_dtype=qt)  # byte shape
        (d / f"{stem}.{name}.bytes").write_bytes(np.ascontiguousarray(data).tobytes())
        deq = gguf.quants.dequantize(np.ascontiguousarray(data).view(np.uint8), qt).astype(np.float32)
        (d / f"{stem}.{name}.deq").write_bytes(deq.tobytes())
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def same_value(t, got, want):
    if t in (V.FLOAT32,):
        return np.float32(got) == np.float32(want)
    return got == want


def check_file(d, stem, tensors, errors, alignment=32, kvs=True):
    r = gguf.GGUFReader(str(d / f"{stem}.gguf"))
    if r.alignment != alignment:
        errors.append(f"{stem}: alignment {r.alignment}, expected {alignment}")
    fields = r.fields
    if kvs:
        for key, t, v in SCALARS:
            f = fields.get(key)
            if f is None or f.types != [t] or not same_value(t, f.contents(), v):
                errors.append(f"{stem}: key {key}: {None if f is None else (f.types, f.contents())}, expected {t.name} {v!r}")
        for key, t, v in ARRAYS:
            f = fields.get(key)
            if f is None or f.types != [V.ARRAY, t] or [x for x in f.contents()] != v:
                errors.append(f"{stem}: key {key}: {None if f is None else (f.types, f.contents())}, expected array of {t.name} {v!r}")
        f = fields.get("a.empty")
        if f is None or f.types[0] != V.ARRAY or len(f.data) != 0:
            errors.append(f"{stem}: key a.empty: expected an empty array, got {None if f is None else f.types}")
    by_name = {t.name: t for t in r.tensors}
    if len(by_name) != len(tensors):
        errors.append(f"{stem}: {len(by_name)} tensors, expected {len(tensors)}")
    for k, (name, qt, shape) in enumerate(tensors):
        t = by_name.get(name)
        if t is None:
            errors.append(f"{stem}: tensor {name} missing")
            continue
        if t.tensor_type != qt:
            errors.append(f"{stem}: tensor {name}: type {t.tensor_type.name}, expected {qt.name}")
        if [int(x) for x in t.shape] != list(reversed(shape)):
            errors.append(f"{stem}: tensor {name}: ne {list(t.shape)}, expected {list(reversed(shape))}")
        if t.data_offset % alignment != 0:
            errors.append(f"{stem}: tensor {name}: file offset {t.data_offset} not aligned to {alignment}")
        got = np.ascontiguousarray(t.data).view(np.uint8).tobytes()
        side = d / f"{stem}.{name}.bytes"
        if side.exists() and got != side.read_bytes():
            errors.append(f"{stem}: tensor {name}: bytes differ from what our writer was given")
        # the second reference: the gguf package quantizing the same floats
        want = np.ascontiguousarray(encode(k, qt, shape)).view(np.uint8).tobytes()
        if got != want:
            nb = sum(1 for a, b in zip(got, want) if a != b)
            errors.append(f"{stem}: tensor {name} ({qt.name}): {nb} of {len(want)} bytes differ from gguf.quants on the same floats")


LINEARS = ["attn.wq", "attn.wk", "attn.wv", "attn.gate", "attn.wo", "mlp.gate", "mlp.up", "mlp.down"]


def write_model(d):
    hidden, heads, kv, mlp = 256, 2, 1, 512
    q, k = heads * 128, kv * 128
    shapes = {"attn.wq": (q, hidden), "attn.wk": (k, hidden), "attn.wv": (k, hidden), "attn.gate": (q, hidden),
              "attn.wo": (hidden, q), "mlp.gate": (mlp, hidden), "mlp.up": (mlp, hidden), "mlp.down": (hidden, mlp)}
    types = [Q.Q8_0, Q.F16, Q.BF16, Q.F32, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1]
    rng = np.random.default_rng(1234)
    w = gguf.GGUFWriter(str(d / "model.gguf"), "krea2")
    for b in range(2):
        pre = f"blocks.{b}."
        for j, name in enumerate(LINEARS):
            out_, in_ = shapes[name]
            x = (rng.uniform(-1, 1, size=(out_, in_)) / np.sqrt(in_)).astype(np.float32)
            qt = types[(j + b) % len(types)]
            if qt == Q.F32:
                w.add_tensor(pre + name + ".weight", x)
            elif qt == Q.F16:
                w.add_tensor(pre + name + ".weight", x.astype(np.float16))
            else:
                w.add_tensor(pre + name + ".weight", gguf.quants.quantize(x, qt).view(np.uint8), raw_dtype=qt)
        w.add_tensor(pre + "mod.lin", (0.05 * rng.standard_normal(6 * hidden)).astype(np.float32))
        for name, n in (("prenorm.scale", hidden), ("postnorm.scale", hidden), ("attn.qknorm.qnorm.scale", 128),
                        ("attn.qknorm.knorm.scale", 128)):
            w.add_tensor(pre + name, (0.1 * rng.standard_normal(n)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


BYTE_EXACT = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0")


def check_requantized(ours, orig, qname, bound):
    """Every tensor of `ours` (sdx quantize --to of `orig`) read with gguf.GGUFReader: the float
    linears are now type qname, and gguf.quants.dequantize of our blocks is within a relative RMS
    `bound` of the original's values; every other tensor is byte-identical."""
    a = {t.name: t for t in gguf.GGUFReader(ours).tensors}
    b = {t.name: t for t in gguf.GGUFReader(orig).tensors}
    errors, n_q = [], 0
    if a.keys() != b.keys():
        errors.append(f"tensor names differ: {sorted(a.keys() ^ b.keys())}")
    for name in sorted(a.keys() & b.keys()):
        x, y = a[name], b[name]
        if [int(v) for v in x.shape] != [int(v) for v in y.shape]:
            errors.append(f"{name}: ne {list(x.shape)} vs {list(y.shape)}")
            continue
        if x.tensor_type == y.tensor_type:
            if np.ascontiguousarray(x.data).tobytes() != np.ascontiguousarray(y.data).tobytes():
                errors.append(f"{name}: copied tensor differs")
            continue
        if x.tensor_type.name != qname:
            errors.append(f"{name}: type {x.tensor_type.name}, expected {qname}")
            continue
        n_q += 1
        got = gguf.quants.dequantize(x.data, x.tensor_type).astype(np.float64).ravel()
        want = gguf.quants.dequantize(y.data, y.tensor_type).astype(np.float64).ravel()
        if qname in BYTE_EXACT and y.tensor_type in (Q.F32, Q.F16, Q.BF16):
            # our quantizer writes gguf.quants.quantize's bytes for these types (rows quantized on
            # several threads by sdx quantize: a misplaced row range shows here)
            rows = want.reshape(-1, int(y.shape[0])).astype(np.float32)
            exact = gguf.quants.quantize(rows, x.tensor_type).view(np.uint8)
            if np.ascontiguousarray(x.data).tobytes() != exact.tobytes():
                errors.append(f"{name}: {qname} blocks differ from gguf.quants.quantize of the same values")
        rel = float(np.sqrt(np.mean((got - want) ** 2) / np.mean(want ** 2)))
        if not rel < bound:
            errors.append(f"{name}: relative RMS error {rel:.3e} of {qname} (gguf.quants.dequantize) above {bound}")
    if n_q == 0:
        errors.append(f"no tensor of type {qname}")
    for e in errors:
        print("gguf_crosscheck:", e)
    print(f"gguf_crosscheck: requantized {n_q} tensors to {qname}: {'FAILED' if errors else 'ok'}")
    return 1 if errors else 0


def to_safetensors(src, dst):
    """The tensors of GGUF `src` dequantized to F32 (gguf.quants) in safetensors `dst` (torch order)."""
    from safetensors.numpy import save_file
    out = {}
    for t in gguf.GGUFReader(src).tensors:
        x = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        out[t.name] = np.ascontiguousarray(x.reshape([int(v) for v in reversed(list(t.shape))]))
    save_file(out, dst)
    return 0


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "to-safetensors":
        return to_safetensors(sys.argv[2], sys.argv[3])
    if len(sys.argv) == 5 and sys.argv[1] == "requantized":
        qname, bound = sys.argv[4].split(":")
        return check_requantized(sys.argv[2], sys.argv[3], qname, float(bound))
    if len(sys.argv) == 3 and sys.argv[1] == "model":
        write_model(Path(sys.argv[2]))
        return 0
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        print(__doc__)
        return 2
    d = Path(sys.argv[2])
    if sys.argv[1] == "write":
        write_file(d, "py", TENSORS)
        write_file(d, "py-q", TENSORS_Q)
        write_file(d, "py-align", TENSORS_ALIGN, alignment=64)
        return 0
    errors = []
    check_file(d, "cpp", TENSORS, errors)
    check_file(d, "cpp-align", TENSORS_ALIGN, errors, alignment=64, kvs=False)
    if (d / "cpp-q.gguf").exists():  # written when our library has the Q4_0..Q5_1 quantizers
        check_file(d, "cpp-q", TENSORS_Q, errors, kvs=False)
    for e in errors:
        print("gguf_crosscheck:", e)
    print(f"gguf_crosscheck: {'FAILED' if errors else 'ok'} ({len(errors)} mismatches)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
