#!/usr/bin/env python3
"""Writes a random-weight Stable Diffusion 1.x checkpoint (safetensors, F16) that stable-diffusion.cpp
loads as VERSION_SD1: the original LDM tensor names and shapes of SD 1.x (UNet
`model.diffusion_model.*`, VAE `first_stage_model.*`, CLIP ViT-L/14 text encoder
`cond_stage_model.transformer.text_model.*`), 1.07 G parameters, 2.1 GB. No real weights: every
tensor is seeded from (--seed, its name), so the file is byte-identical on every run and machine.

Scaling keeps activations finite and O(1): linear and conv weights are uniform with standard deviation
gain/sqrt(fan_in), biases small, norm weights near 1, embeddings ~0.02 like CLIP's. The images are
noise, but deterministic noise, which is what a numeric comparison of two ggml builds needs.

Usage: make_sd1_model.py OUT.safetensors [--seed N] [--list]
(--list prints name, shape and parameter count instead of writing the file.)
Needs only numpy. The tokenizer (CLIP BPE vocabulary) is embedded in stable-diffusion.cpp.
"""
import argparse
import json
import os
import struct
import sys
import zlib

try:
    import numpy as np
except ImportError:  # pragma: no cover
    sys.exit("make_sd1_model.py: numpy is required (apt-get install python3-numpy or pip install numpy)")

# kinds: w = weight (fan-in scaled), b = bias, nw/nb = norm weight/bias, emb = embedding table
Tensor = tuple  # (name, shape, kind, gain)


def linear(out, name, n_in, n_out, bias=True, gain=1.0):
    out.append((name + ".weight", (n_out, n_in), "w", gain))
    if bias:
        out.append((name + ".bias", (n_out,), "b", gain))


def conv(out, name, c_in, c_out, k, gain=1.0):
    out.append((name + ".weight", (c_out, c_in, k, k), "w", gain))
    out.append((name + ".bias", (c_out,), "b", gain))


def norm(out, name, c):
    out.append((name + ".weight", (c,), "nw", 1.0))
    out.append((name + ".bias", (c,), "nb", 1.0))


# ---------------------------------------------------------------------------------------------
# UNet (openaimodel.UNetModel, SD 1.x config: 320 channels, mult 1,2,4,4, 2 res blocks, attention at
# ds 1,2,4, 8 heads, context 768, conv proj_in/proj_out)

def unet_resblock(out, p, c_in, c_out, emb=1280):
    norm(out, p + ".in_layers.0", c_in)
    conv(out, p + ".in_layers.2", c_in, c_out, 3)
    linear(out, p + ".emb_layers.1", emb, c_out)
    norm(out, p + ".out_layers.0", c_out)
    conv(out, p + ".out_layers.3", c_out, c_out, 3, gain=0.5)
    if c_in != c_out:
        conv(out, p + ".skip_connection", c_in, c_out, 1)


def unet_transformer(out, p, c, ctx=768):
    norm(out, p + ".norm", c)
    conv(out, p + ".proj_in", c, c, 1)
    t = p + ".transformer_blocks.0"
    for a, kv in (("attn1", c), ("attn2", ctx)):
        linear(out, f"{t}.{a}.to_q", c, c, bias=False)
        linear(out, f"{t}.{a}.to_k", kv, c, bias=False)
        linear(out, f"{t}.{a}.to_v", kv, c, bias=False)
        linear(out, f"{t}.{a}.to_out.0", c, c, gain=0.5)
    linear(out, t + ".ff.net.0.proj", c, 8 * c)  # GEGLU: 2 x 4c
    linear(out, t + ".ff.net.2", 4 * c, c, gain=0.5)
    for n in ("norm1", "norm2", "norm3"):
        norm(out, f"{t}.{n}", c)
    conv(out, p + ".proj_out", c, c, 1, gain=0.5)


def unet(out):
    p = "model.diffusion_model"
    mc, mult, nres = 320, (1, 2, 4, 4), 2
    linear(out, p + ".time_embed.0", mc, 4 * mc)
    linear(out, p + ".time_embed.2", 4 * mc, 4 * mc)
    conv(out, p + ".input_blocks.0.0", 4, mc, 3)
    chans, ch, idx, ds = [mc], mc, 0, 1
    for level, m in enumerate(mult):
        for _ in range(nres):
            idx += 1
            unet_resblock(out, f"{p}.input_blocks.{idx}.0", ch, m * mc)
            ch = m * mc
            if ds in (1, 2, 4):
                unet_transformer(out, f"{p}.input_blocks.{idx}.1", ch)
            chans.append(ch)
        if level != len(mult) - 1:
            idx += 1
            conv(out, f"{p}.input_blocks.{idx}.0.op", ch, ch, 3)
            chans.append(ch)
            ds *= 2
    unet_resblock(out, p + ".middle_block.0", ch, ch)
    unet_transformer(out, p + ".middle_block.1", ch)
    unet_resblock(out, p + ".middle_block.2", ch, ch)
    idx = 0
    for level in reversed(range(len(mult))):
        m = mult[level]
        for i in range(nres + 1):
            skip = chans.pop()
            unet_resblock(out, f"{p}.output_blocks.{idx}.0", ch + skip, m * mc)
            ch = m * mc
            sub = 1
            if ds in (1, 2, 4):
                unet_transformer(out, f"{p}.output_blocks.{idx}.1", ch)
                sub = 2
            if level and i == nres:
                conv(out, f"{p}.output_blocks.{idx}.{sub}.conv", ch, ch, 3)
                ds //= 2
            idx += 1
    norm(out, p + ".out.0", ch)
    conv(out, p + ".out.2", ch, 4, 3)


# ---------------------------------------------------------------------------------------------
# VAE (AutoencoderKL: 128 channels, mult 1,2,4,4, 2 res blocks, z 4, conv 1x1 attention)

def vae_resblock(out, p, c_in, c_out):
    norm(out, p + ".norm1", c_in)
    conv(out, p + ".conv1", c_in, c_out, 3)
    norm(out, p + ".norm2", c_out)
    conv(out, p + ".conv2", c_out, c_out, 3, gain=0.5)
    if c_in != c_out:
        conv(out, p + ".nin_shortcut", c_in, c_out, 1)


def vae_mid(out, p, c):
    vae_resblock(out, p + ".block_1", c, c)
    norm(out, p + ".attn_1.norm", c)
    for n in ("q", "k", "v"):
        conv(out, f"{p}.attn_1.{n}", c, c, 1)
    conv(out, p + ".attn_1.proj_out", c, c, 1, gain=0.5)
    vae_resblock(out, p + ".block_2", c, c)


def vae(out):
    p = "first_stage_model"
    ch, mult, nres, z = 128, (1, 2, 4, 4), 2, 4
    e = p + ".encoder"
    conv(out, e + ".conv_in", 3, ch, 3)
    c = ch
    for i, m in enumerate(mult):
        for j in range(nres):
            vae_resblock(out, f"{e}.down.{i}.block.{j}", c, ch * m)
            c = ch * m
        if i != len(mult) - 1:
            conv(out, f"{e}.down.{i}.downsample.conv", c, c, 3)
    vae_mid(out, e + ".mid", c)
    norm(out, e + ".norm_out", c)
    conv(out, e + ".conv_out", c, 2 * z, 3)
    conv(out, p + ".quant_conv", 2 * z, 2 * z, 1)
    conv(out, p + ".post_quant_conv", z, z, 1)
    d = p + ".decoder"
    c = ch * mult[-1]
    conv(out, d + ".conv_in", z, c, 3)
    vae_mid(out, d + ".mid", c)
    for i in reversed(range(len(mult))):
        for j in range(nres + 1):
            vae_resblock(out, f"{d}.up.{i}.block.{j}", c, ch * mult[i])
            c = ch * mult[i]
        if i != 0:
            conv(out, f"{d}.up.{i}.upsample.conv", c, c, 3)
    norm(out, d + ".norm_out", c)
    conv(out, d + ".conv_out", c, 3, 3, gain=0.6)


# ---------------------------------------------------------------------------------------------
# CLIP ViT-L/14 text encoder (HF CLIPTextModel names under cond_stage_model.transformer.text_model)

def clip(out):
    p = "cond_stage_model.transformer.text_model"
    d, ff, layers, vocab, ctx = 768, 3072, 12, 49408, 77
    out.append((p + ".embeddings.token_embedding.weight", (vocab, d), "emb", 1.0))
    out.append((p + ".embeddings.position_embedding.weight", (ctx, d), "emb", 0.5))
    for i in range(layers):
        l = f"{p}.encoder.layers.{i}"
        for n in ("q_proj", "k_proj", "v_proj"):
            linear(out, f"{l}.self_attn.{n}", d, d)
        linear(out, l + ".self_attn.out_proj", d, d, gain=0.5)
        norm(out, l + ".layer_norm1", d)
        norm(out, l + ".layer_norm2", d)
        linear(out, l + ".mlp.fc1", d, ff)
        linear(out, l + ".mlp.fc2", ff, d, gain=0.5)
    norm(out, p + ".final_layer_norm", d)


def tensors():
    out = []
    clip(out)
    unet(out)
    vae(out)
    names = [t[0] for t in out]
    assert len(names) == len(set(names)), "duplicate tensor name"
    return out


def values(name, shape, kind, gain, seed):
    n = int(np.prod(shape))
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    u = rng.random(n, dtype=np.float32)  # [0, 1)
    u -= 0.5
    if kind == "w":
        fan_in = int(np.prod(shape[1:]))
        std = gain / np.sqrt(fan_in)
    elif kind == "emb":
        std = 0.02 * gain
    elif kind == "nw":
        std = 0.05
    else:  # b, nb
        std = 0.02
    u *= np.float32(std * np.sqrt(12.0))  # uniform with that standard deviation
    if kind == "nw":
        u += 1.0
    return u.astype(np.float16)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", nargs="?", help="output .safetensors path")
    ap.add_argument("--seed", type=int, default=1, help="weight seed (default 1)")
    ap.add_argument("--list", action="store_true", help="print the tensors instead of writing")
    a = ap.parse_args()
    ts = tensors()
    if a.list:
        total = 0
        for name, shape, _, _ in ts:
            n = int(np.prod(shape))
            total += n
            print(f"{name} {list(shape)} {n}")
        print(f"# {len(ts)} tensors, {total} parameters", file=sys.stderr)
        return 0
    if not a.out:
        ap.error("OUT.safetensors is required (or --list)")
    if a.seed < 0:
        ap.error("--seed must be >= 0")

    header, off = {}, 0
    for name, shape, _, _ in ts:
        nbytes = 2 * int(np.prod(shape))
        header[name] = {"dtype": "F16", "shape": list(shape), "data_offsets": [off, off + nbytes]}
        off += nbytes
    header["__metadata__"] = {"format": "pt", "generator": "sdx scripts/sdcpp/make_sd1_model.py",
                              "seed": str(a.seed)}
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * ((8 - len(hj) % 8) % 8)

    tmp = a.out + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(struct.pack("<Q", len(hj)))
            f.write(hj)
            for name, shape, kind, gain in ts:
                f.write(values(name, shape, kind, gain, a.seed).tobytes())
        os.replace(tmp, a.out)  # a half-written file never carries the final name
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    print(f"make_sd1_model: wrote {a.out}: {len(ts)} tensors, {off // 2} parameters, {off + 8 + len(hj)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
