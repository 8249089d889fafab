#!/usr/bin/env python3
"""PNG checks for scripts/test-sdcpp.sh (numpy + zlib only; reads 8-bit gray/RGB/RGBA, non-interlaced,
which is what stable-diffusion.cpp's stb_image_write produces).

  png_check.py check IMG.png WIDTH HEIGHT     size right, pixels not constant (a NaN/Inf image comes
                                              out constant), exit 1 otherwise
  png_check.py compare A.png B.png [MAX]      max and mean |A-B| in 1/255 units; exit 1 when the max
                                              exceeds MAX (default 3)
"""
import struct
import sys
import zlib

import numpy as np


def read_png(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG file")
    pos, idat, hdr = 8, [], None
    while pos + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if len(body) != n:
            raise ValueError(f"{path}: truncated {kind!r} chunk")
        if kind == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + n
    if hdr is None or not idat:
        raise ValueError(f"{path}: no IHDR or IDAT chunk")
    w, h, depth, ctype, _, _, interlace = hdr
    chans = {0: 1, 2: 3, 6: 4, 4: 2}.get(ctype)
    if depth != 8 or chans is None or interlace:
        raise ValueError(f"{path}: unsupported PNG (depth {depth}, color type {ctype}, interlace {interlace})")
    raw = zlib.decompress(b"".join(idat))
    stride = w * chans
    if len(raw) != h * (stride + 1):
        raise ValueError(f"{path}: image data size {len(raw)} != {h} x {stride + 1}")
    img = np.zeros((h, stride), dtype=np.int32)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(h):
        ft = raw[y * (stride + 1)]
        line = np.frombuffer(raw, dtype=np.uint8, count=stride, offset=y * (stride + 1) + 1).astype(np.int32)
        if ft == 0:
            cur = line
        elif ft == 2:
            cur = (line + prev) & 255
        elif ft in (1, 3, 4):  # depend on the left neighbour: sequential
            cur = np.zeros(stride, dtype=np.int32)
            for x in range(stride):
                a = cur[x - chans] if x >= chans else 0
                b = prev[x]
                if ft == 1:
                    p = a
                elif ft == 3:
                    p = (a + b) >> 1
                else:
                    c = prev[x - chans] if x >= chans else 0
                    pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                    p = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[x] = (line[x] + p) & 255
        else:
            raise ValueError(f"{path}: bad filter type {ft} in row {y}")
        img[y] = cur
        prev = cur
    return img.reshape(h, w, chans).astype(np.uint8)


def main(argv):
    if len(argv) >= 5 and argv[1] == "check":
        img = read_png(argv[2])
        w, h = int(argv[3]), int(argv[4])
        if img.shape[1] != w or img.shape[0] != h:
            print(f"FAIL: {argv[2]} is {img.shape[1]}x{img.shape[0]}, expected {w}x{h}")
            return 1
        f = img.astype(np.float64)
        std, lo, hi = f.std(), int(img.min()), int(img.max())
        print(f"png: {argv[2]} {w}x{h}x{img.shape[2]}, values {lo}..{hi}, mean {f.mean():.1f}, std {std:.1f}")
        if hi == lo or std < 1.0:
            print(f"FAIL: {argv[2]} is (nearly) constant: NaN/Inf or a dead network")
            return 1
        return 0
    if len(argv) >= 4 and argv[1] == "compare":
        a, b = read_png(argv[2]), read_png(argv[3])
        lim = float(argv[4]) if len(argv) > 4 else 3.0
        if a.shape != b.shape:
            print(f"FAIL: shapes differ: {a.shape} vs {b.shape}")
            return 1
        d = np.abs(a.astype(np.int32) - b.astype(np.int32))
        print(f"png diff: max {d.max()}/255, mean {d.mean():.3f}/255, "
              f"{np.count_nonzero(d)} of {d.size} values differ (limit {lim:g}/255)")
        return 0 if d.max() <= lim else 1
    print(__doc__)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except (OSError, ValueError, zlib.error) as e:
        print(f"FAIL: {e}")
        sys.exit(1)
