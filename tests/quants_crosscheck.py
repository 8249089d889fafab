#!/usr/bin/env python3
"""Cross-check of the block-quantized types against the Python `gguf` package (test-quants).

test-quants writes, into DIR: manifest.txt ("NROWS NCOLS" then one type name per line), rows.f32
(the input rows, little-endian binary32), and per type NAME.bin (our quantized rows) and
NAME.deq.f32 (our dequantization of them). This script checks, with gguf.quants:

  * for the types gguf can quantize (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): its blocks of the same rows are
    byte-identical to ours (both follow upstream ggml's reference algorithms);
  * for every type gguf can dequantize (those and Q2_K..Q6_K): its dequantization of OUR blocks is
    bit-identical to ours;
  * for the K-quants, which gguf cannot quantize (Q2_K..Q6_K, Q8_K): our blocks are byte-identical
    to quants_kquant_ref.py, an independent numpy transcription of upstream's reference quantizers.

Q8_1 is unknown to both; it is listed as not checked.
Exit status: 0 when everything matches, 1 on a mismatch, 2 when numpy/gguf are missing or the input
is malformed. The last line is a summary that test-quants also checks (so a run that checks nothing
cannot pass).
"""

import os
import sys
import warnings

QUANTIZABLE = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0"]
DEQUANTIZABLE = QUANTIZABLE + ["q2_K", "q3_K", "q4_K", "q5_K", "q6_K"]


def fail_setup(msg):
    print(f"quants_crosscheck: {msg}", file=sys.stderr)
    sys.exit(2)


def main():
    if len(sys.argv) != 2:
        fail_setup("usage: quants_crosscheck.py DIR")
    try:
        import numpy as np
        from gguf import quants
        from gguf.constants import GGMLQuantizationType
    except ImportError as e:
        fail_setup(f"the Python gguf package is missing ({e}): run scripts/install-deps.sh")

    d = sys.argv[1]
    try:
        with open(os.path.join(d, "manifest.txt")) as f:
            lines = [ln.strip() for ln in f if ln.strip()]
        nrows, ncols = (int(v) for v in lines[0].split())
        names = lines[1:]
        rows = np.fromfile(os.path.join(d, "rows.f32"), dtype="<f4").reshape(nrows, ncols)
    except (OSError, ValueError, IndexError) as e:
        fail_setup(f"cannot read the input in {d}: {e}")

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.dont_write_bytecode = True  # no __pycache__ in the source tree
    import quants_kquant_ref

    problems = []
    kref_ok = []
    quantized_ok = []
    dequantized_ok = []
    not_checked = []
    for name in names:
        qtype = GGMLQuantizationType[name.upper()]
        ours = np.fromfile(os.path.join(d, name + ".bin"), dtype=np.uint8).reshape(nrows, -1)
        our_deq = np.fromfile(os.path.join(d, name + ".deq.f32"), dtype="<f4").reshape(nrows, ncols)
        checked = False
        if name in QUANTIZABLE:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")  # float16 overflow of the out-of-range test rows
                theirs = quants.quantize(rows, qtype)
            block_bytes = ours.shape[1] * 32 // ncols
            bad = np.argwhere(theirs != ours)
            if bad.size:
                r, c = bad[0]
                b = c // block_bytes
                problems.append(
                    f"{name}: {len(bad)} bytes differ from gguf.quants.quantize; first at row {r} block {b}: "
                    f"ours {ours[r, b * block_bytes:(b + 1) * block_bytes].tobytes().hex()} "
                    f"gguf {theirs[r, b * block_bytes:(b + 1) * block_bytes].tobytes().hex()}"
                )
            else:
                quantized_ok.append(name)
            checked = True
        if name in DEQUANTIZABLE:
            with np.errstate(all="ignore"):
                theirs_deq = quants.dequantize(ours, qtype).astype("<f4")
            # bit for bit, except that a NaN equals any NaN: the sign and payload of a NaN made by
            # arithmetic (inf * 0) are the CPU's default NaN, 0xffc00000 on x86 but 0x7fc00000 on ARM,
            # and numpy here runs on the host while ours may run on another architecture (qemu)
            both_nan = np.isnan(theirs_deq) & np.isnan(our_deq)
            bad = np.argwhere((theirs_deq.view(np.uint32) != our_deq.view(np.uint32)) & ~both_nan)
            if bad.size:
                r, c = bad[0]
                problems.append(
                    f"{name}: {len(bad)} dequantized values differ from gguf.quants.dequantize; first at row {r} "
                    f"element {c}: ours {our_deq[r, c]!r} gguf {theirs_deq[r, c]!r}"
                )
            else:
                dequantized_ok.append(name)
            checked = True
        if name in quants_kquant_ref.QUANTIZERS:
            theirs = quants_kquant_ref.quantize_rows(name, rows)
            bad = np.argwhere(theirs != ours)
            if bad.size:
                r, c = bad[0]
                tsz = ours.shape[1] * 256 // ncols
                b = c // tsz
                problems.append(
                    f"{name}: {len(bad)} bytes differ from quants_kquant_ref; first at row {r} block {b} byte {c % tsz}: "
                    f"ours {ours[r, c]:#04x} ref {theirs[r, c]:#04x}"
                )
            else:
                kref_ok.append(name)
            checked = True
        if not checked:
            not_checked.append(name)

    for p in problems:
        print(f"quants_crosscheck: MISMATCH {p}")
    print(f"quants_crosscheck: not checked (no reference for it): {' '.join(not_checked) or '-'}")
    print(
        f"quants_crosscheck: {'FAILED' if problems else 'OK'}: {nrows} rows x {ncols}; "
        f"quantize-identical {len(quantized_ok)} types ({' '.join(quantized_ok)}); "
        f"dequantize-identical {len(dequantized_ok)} types ({' '.join(dequantized_ok)}); "
        f"kquant-ref-identical {len(kref_ok)} types ({' '.join(kref_ok)})"
    )
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
