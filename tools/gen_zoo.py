#!/usr/bin/env python3
"""gen_zoo.py - write the large model files of the zoo (models/*.json).

A development-time helper (python3 standard library only); the generated
JSON is committed, so users never run it.  Usage, from the repository root:

    python3 tools/gen_zoo.py [OUTDIR]      (default: models)

Writes vgg16.json and resnet50.json (the torchvision architectures, layer
for layer, with torchvision's module names) and bert-large.json,
gpt2-1.5b.json and gpt3-175b.json (chains of `block` layers whose costs
follow the formulas in docs/formats.md, "Transformer blocks").  The small
Fashion-MNIST models are written by hand.  The LLaMA files are not written
here: `cleave import models/hf/<name>/config.json -o models/<name>.json`
makes them (and, for models/hf/gpt3-175b and gpt2-xl with --dtype float16,
the same layers as the GPT files written here).
"""
import json
import os
import sys


def gpt_member(L, d, s, V, a):
    """The model format's "transformer" member of a GPT of this script
    (docs/formats.md, "The transformer member"): what cleave plan --tensor
    splits the layers by."""
    return {"layers": L, "hidden": d, "heads": a, "groups": a, "ffn": 4 * d, "gated": False,
            "seq": s, "vocab": V, "tied": True, "positions": "learned", "max_positions": s,
            "norm": "layernorm", "bias": True, "dropout": True}


def write(path, name, shape, dtype, layers, classes=None, member=None):
    head = {"format": "cleave-model", "version": 1, "name": name,
            "input": {"shape": shape, "dtype": dtype}}
    if classes:
        head["classes"] = classes
    lines = ["{"]
    for k, v in head.items():
        lines.append("  %s: %s," % (json.dumps(k), json.dumps(v)))
    lines.append('  "layers": [')
    for i, layer in enumerate(layers):
        lines.append("    " + json.dumps(layer) + ("," if i + 1 < len(layers) else ""))
    lines.append("  ]" + ("," if member else ""))
    if member:
        lines.append('  "transformer": ' + json.dumps(member))
    lines.append("}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


# ------------------------------------------------------------------ VGG-16
def vgg16():
    """torchvision.models.vgg16: configuration D, ReLU after every conv,
    max-pool 2x2 after each group, adaptive average pool to 7x7 (an identity
    at 224x224: kernel 1), then the three-layer classifier with dropout."""
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M",
           512, 512, 512, "M", 512, 512, 512, "M"]
    layers, c, ix = [], 3, 0
    for v in cfg:
        if v == "M":
            layers.append({"kind": "maxpool2d", "name": "features.%d" % ix, "kernel": 2, "stride": 2})
            ix += 1
            continue
        layers.append({"kind": "conv2d", "name": "features.%d" % ix, "in_channels": c,
                       "out_channels": v, "kernel": 3, "padding": 1})
        layers.append({"kind": "relu", "name": "features.%d" % (ix + 1)})
        ix += 2
        c = v
    layers.append({"kind": "avgpool2d", "name": "avgpool", "kernel": 1})
    layers.append({"kind": "flatten", "name": "flatten"})
    layers += [
        {"kind": "linear", "name": "classifier.0", "in_features": 512 * 7 * 7, "out_features": 4096},
        {"kind": "relu", "name": "classifier.1"},
        {"kind": "dropout", "name": "classifier.2", "p": 0.5},
        {"kind": "linear", "name": "classifier.3", "in_features": 4096, "out_features": 4096},
        {"kind": "relu", "name": "classifier.4"},
        {"kind": "dropout", "name": "classifier.5", "p": 0.5},
        {"kind": "linear", "name": "classifier.6", "in_features": 4096, "out_features": 1000},
        {"kind": "softmax_xent", "name": "loss"},
    ]
    return layers


# --------------------------------------------------------------- ResNet-50
def resnet50():
    """torchvision.models.resnet50 (v1.5: the stride sits on the 3x3 conv).
    Convs have no bias; every conv is followed by batchnorm2d; the first
    block of each stage has a 1x1 projection (downsample.0/.1) on the skip
    edge; the join is an `add` followed by relu."""
    L = []

    def conv(name, cin, cout, k, s=1, p=0, inputs=None):
        d = {"kind": "conv2d", "name": name}
        if inputs:
            d["inputs"] = inputs
        d.update({"in_channels": cin, "out_channels": cout, "kernel": k, "stride": s,
                  "padding": p, "bias": False})
        L.append(d)

    def bn(name):
        L.append({"kind": "batchnorm2d", "name": name})

    def relu(name):
        L.append({"kind": "relu", "name": name})

    conv("conv1", 3, 64, 7, 2, 3)
    bn("bn1")
    relu("relu")
    L.append({"kind": "maxpool2d", "name": "maxpool", "kernel": 3, "stride": 2, "padding": 1})
    prev, cin = "maxpool", 64
    for stage, (width, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]):
        for b in range(blocks):
            n = "layer%d.%d." % (stage + 1, b)
            s = stride if b == 0 else 1
            conv(n + "conv1", cin, width, 1)
            bn(n + "bn1")
            relu(n + "relu1")
            conv(n + "conv2", width, width, 3, s, 1)
            bn(n + "bn2")
            relu(n + "relu2")
            conv(n + "conv3", width, width * 4, 1)
            bn(n + "bn3")
            skip = prev
            if b == 0:
                conv(n + "downsample.0", cin, width * 4, 1, s, 0, inputs=[prev])
                bn(n + "downsample.1")
                skip = n + "downsample.1"
            L.append({"kind": "add", "name": n + "add", "inputs": [n + "bn3", skip]})
            relu(n + "relu3")
            prev, cin = n + "relu3", width * 4
    L.append({"kind": "avgpool2d", "name": "avgpool", "kernel": 7})
    L.append({"kind": "flatten", "name": "flatten"})
    L.append({"kind": "linear", "name": "fc", "in_features": 2048, "out_features": 1000})
    L.append({"kind": "softmax_xent", "name": "loss"})
    return L


# ------------------------------------------------------ transformer blocks
def layer_flops(s, d):
    """Forward FLOPs of one transformer layer per sequence: the QKV, output
    and two MLP projections (24 s d^2) plus the two attention products
    (4 s^2 d); Narayanan et al. 2021, SC'21, section 5.1."""
    return 24 * s * d * d + 4 * s * s * d


def layer_params(d):
    """Attention 4d^2 + 4d, MLP 8d^2 + 5d, two layer norms 4d."""
    return 12 * d * d + 13 * d


def layer_stash(s, d, a):
    """Activation bytes one layer keeps for backward with 16-bit
    activations and 1-byte dropout masks, no recomputation: s d (34 + 5 a s / d);
    Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
    Transformer Models", eq. 1 (per sequence, one device)."""
    return s * d * 34 + 5 * a * s * s


def layer_bwd_w(s, d):
    """Weight-gradient part of backward: each of the four weight products
    once more (24 s d^2); the attention products have no weights, so the
    rest of backward (24 s d^2 + 8 s^2 d) is input-gradient."""
    return 24 * s * d * d


def transformer(L, d, s, V, a, bert):
    e = 2  # float16 bytes
    layers = []
    if bert:
        # token, position and segment tables, then layer norm (2d)
        emb_params = V * d + s * d + 2 * d + 2 * d
        emb_fwd = 2 * s * d + 7 * s * d          # two adds, layer norm
        emb_stash = s * d * e + s * d            # layer-norm input, dropout mask
    else:
        emb_params = V * d + s * d               # token and position tables
        emb_fwd = s * d                          # one add
        emb_stash = s * d                        # dropout mask
    # embedding backward scatters the output gradient into the tables: all of
    # it is weight-gradient (token ids need no gradient)
    layers.append({"kind": "block", "name": "embedding", "fwd_flops": emb_fwd,
                   "bwd_flops": 2 * emb_fwd, "bwd_w_flops": 2 * emb_fwd,
                   "params": emb_params, "out_bytes": s * d * e,
                   "stash_bytes": emb_stash})
    for i in range(L):
        f = layer_flops(s, d)
        layers.append({"kind": "block", "name": "layer.%d" % i, "fwd_flops": f,
                       "bwd_flops": 2 * f, "bwd_w_flops": layer_bwd_w(s, d),
                       "params": layer_params(d), "out_bytes": s * d * e,
                       "stash_bytes": layer_stash(s, d, a)})
    if bert:
        # MLM transform (dense d x d + gelu + layer norm) and decoder tied to
        # the token table (own bias V) over all s positions; pooler (d x d)
        # and next-sentence classifier (2 x d) on the first token
        head_params = (d * d + d) + 2 * d + V + (d * d + d) + (2 * d + 2)
        mm = 2 * s * d * d + 2 * s * d * V + 2 * d * d + 2 * d * 2
        head_fwd = mm + 5 * s * V
        head_w = mm
        head_stash = s * d * e * 2 + s * V * 4   # transform and decoder inputs, fp32 probabilities
    else:
        # final layer norm (2d), logits through the tied token table
        head_params = 2 * d
        mm = 2 * s * d * V
        head_fwd = mm + 7 * s * d + 5 * s * V
        head_w = mm
        head_stash = s * d * e + s * V * 4       # decoder input, fp32 probabilities
    # backward of the head: 2 x the products (input- and weight-gradient)
    # plus one op per logit for the loss gradient
    layers.append({"kind": "block", "name": "head", "fwd_flops": head_fwd,
                   "bwd_flops": 2 * mm + s * V, "bwd_w_flops": head_w,
                   "params": head_params, "out_bytes": e, "stash_bytes": head_stash,
                   "out_shape": [1]})
    return layers


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "models"
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "vgg16.json"), "vgg16", [3, 224, 224], "float32", vgg16(), 1000)
    write(os.path.join(out, "resnet50.json"), "resnet50", [3, 224, 224], "float32", resnet50(), 1000)
    # BERT-large: 24 layers, d 1024, 16 heads, sequence 512, WordPiece vocabulary 30522
    write(os.path.join(out, "bert-large.json"), "bert-large", [512], "float16",
          transformer(24, 1024, 512, 30522, 16, True))
    # GPT-2 XL: 48 layers, d 1600, 25 heads, context 1024, BPE vocabulary 50257
    write(os.path.join(out, "gpt2-1.5b.json"), "gpt2-1.5b", [1024], "float16",
          transformer(48, 1600, 1024, 50257, 25, False), member=gpt_member(48, 1600, 1024, 50257, 25))
    # GPT-3 175B: 96 layers, d 12288, 96 heads, context 2048, same vocabulary
    write(os.path.join(out, "gpt3-175b.json"), "gpt3-175b", [2048], "float16",
          transformer(96, 12288, 2048, 50257, 96, False), member=gpt_member(96, 12288, 2048, 50257, 96))


if __name__ == "__main__":
    main()
