#!/usr/bin/env python3
"""Writes the seed corpus of fuzz-gguf (tests/fuzz/corpus/gguf): small valid GGUF files (one
written by the Python gguf package, the rest built field by field) and hostile variants, each
breaking one rule the reader checks. Rerun after changing it; the files are committed."""

import struct
import sys
from pathlib import Path

out = Path(__file__).resolve().parent / "corpus" / "gguf"
out.mkdir(parents=True, exist_ok=True)


def s(x: bytes) -> bytes:
    return struct.pack("<Q", len(x)) + x


def header(n_t, n_kv, version=3):
    return b"GGUF" + struct.pack("<Iqq", version, n_t, n_kv)


def kv_u32(k, v):
    return s(k) + struct.pack("<iI", 4, v)


def kv_str(k, v):
    return s(k) + struct.pack("<i", 8) + s(v)


def kv_arr(k, t, fmt, vals):
    return s(k) + struct.pack("<iiQ", 9, t, len(vals)) + b"".join(struct.pack("<" + fmt, v) for v in vals)


def tinfo(name, ne, typ, off):
    return s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<q", n) for n in ne) + struct.pack("<iQ", typ, off)


def pad(b, a=32):
    return b + b"\0" * (-len(b) % a)


def valid(extra_kv=b"", n_extra=0, align=None):
    kvs = kv_u32(b"k.u32", 7) + kv_str(b"k.s", b"hello") + kv_arr(b"k.f", 6, "f", [0.5, -1.0]) + extra_kv
    n_kv = 3 + n_extra
    if align:
        kvs += kv_u32(b"general.alignment", align)
        n_kv += 1
    a = align or 32
    b = header(2, n_kv) + kvs + tinfo(b"w.f32", [4, 2], 0, 0) + tinfo(b"w.q8", [32], 8, (32 + a - 1) // a * a)
    b = pad(b, a)
    b += pad(struct.pack("<8f", *range(8)), a)
    b += struct.pack("<H", 0x3C00) + bytes(range(32))
    return b


files = {
    "valid": valid(),
    "valid-align64": valid(align=64),
    "valid-string-array": valid(s(b"k.sa") + struct.pack("<iiQ", 9, 8, 2) + s(b"x") + s(b""), 1),
    "empty-file": b"",
    "magic-only": b"GGUF",
    "bad-magic": b"GGUX" + valid()[4:],
    "version-1": header(0, 0, 1),
    "version-big-endian": header(0, 0, 0x03000000),
    "tensor-count-huge": header(1 << 62, 0),
    "kv-count-negative": header(0, -1),
    "string-length-huge": header(0, 1) + struct.pack("<Q", 1 << 63) + b"abc",
    "array-length-huge": header(0, 1) + s(b"k") + struct.pack("<iiQ", 9, 10, 1 << 61) + b"\0" * 16,
    "nested-array": header(0, 1) + s(b"k") + struct.pack("<iiQ", 9, 9, 1),
    "value-type-invalid": header(0, 1) + s(b"k") + struct.pack("<i", 13) + b"\0" * 8,
    "alignment-zero": header(0, 1) + kv_u32(b"general.alignment", 0),
    "alignment-not-pow2": header(0, 1) + kv_u32(b"general.alignment", 48),
    "alignment-wrong-type": header(0, 1) + kv_str(b"general.alignment", b"64"),
    "duplicate-key": header(0, 2) + kv_u32(b"k", 1) + kv_u32(b"k", 2),
    "duplicate-tensor": pad(header(2, 0) + tinfo(b"t", [8], 0, 0) + tinfo(b"t", [8], 0, 32)) + b"\0" * 64,
    "tensor-overlap": pad(header(2, 0) + tinfo(b"a", [8], 0, 0) + tinfo(b"b", [8], 0, 0)) + b"\0" * 64,
    "tensor-past-end": pad(header(1, 0) + tinfo(b"a", [64], 0, 0)) + b"\0" * 64,
    "tensor-offset-misaligned": pad(header(1, 0) + tinfo(b"a", [4], 0, 8)) + b"\0" * 64,
    "tensor-offset-wraps": pad(header(1, 0) + tinfo(b"a", [4], 0, 2**64 - 32)) + b"\0" * 64,
    "tensor-dims-5": pad(header(1, 0) + tinfo(b"a", [1, 1, 1, 1, 4], 0, 0)) + b"\0" * 32,
    "tensor-dim-negative": pad(header(1, 0) + tinfo(b"a", [4, -2], 0, 0)) + b"\0" * 32,
    "tensor-shape-overflow": pad(header(1, 0) + tinfo(b"a", [1 << 40, 1 << 40], 0, 0)) + b"\0" * 32,
    "tensor-type-unknown": pad(header(1, 0) + tinfo(b"a", [4], 99, 0)) + b"\0" * 32,
    "tensor-q8-partial-block": pad(header(1, 0) + tinfo(b"a", [33], 8, 0)) + b"\0" * 64,
    "tensor-name-too-long": pad(header(1, 0) + tinfo(b"n" * 300, [4], 0, 0)) + b"\0" * 32,
    "truncated-in-data": valid()[:-5],
    "truncated-in-kv": valid()[:40],
}
for name, data in files.items():
    (out / name).write_bytes(data)

try:  # one file from the reference writer
    import numpy as np
    import gguf
    w = gguf.GGUFWriter(str(out / "valid-python-gguf"), "sdxtest")
    w.add_uint8("x.u8", 3)
    w.add_array("x.arr", [1, 2, 3])
    w.add_string("x.s", "v")
    w.add_tensor("a", np.arange(6, dtype=np.float32).reshape(2, 3))
    w.add_tensor("b", np.ones(4, dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
except ImportError:
    print("make-gguf-corpus: the gguf package is missing; valid-python-gguf not written", file=sys.stderr)
print(f"make-gguf-corpus: {len(files) + 1} files in {out}")
