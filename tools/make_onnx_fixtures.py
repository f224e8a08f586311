#!/usr/bin/python3
"""make_onnx_fixtures.py - the ONNX files under tests/data/onnx/ (`cleave import` tests).

Run with Debian's Python and packages (python3-torch, python3-torchvision,
python3-onnx); the build never needs them:

    /usr/bin/python3 tools/make_onnx_fixtures.py [OUTDIR]   (default tests/data/onnx)

Each torchvision model is exported untrained (weights=None: the shapes are what
matter) in eval mode with TrainingMode.PRESERVE, which keeps BatchNormalization
nodes (TrainingMode.EVAL folds them into the convolutions, changing the
parameter count), with random parameter values (see export), at batch 1 with constant folding so reshapes get constant
shapes.  Then every floating-point initializer loses its values (dims kept,
raw_data empty): the importer reads shapes only, and each file stays tens of KB.
"""
import io
import os
import sys

import onnx
import torch
import torch.nn as nn
import torchvision

OPSET = 17  # torch 1.13's newest; has LayerNormalization


class GPT2Block(nn.Module):
    """One GPT-2-style pre-norm decoder block without the causal mask (a mask
    would be an initializer, i.e. counted as parameters).  GELU is written as
    x * sigmoid(1.702 x) so the export uses Mul and Sigmoid only."""

    def __init__(self, s=128, d=768, h=12):
        super().__init__()
        self.s, self.d, self.h = s, d, h
        self.ln1 = nn.LayerNorm(d)
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def heads(self, t):
        return t.reshape(1, self.s, self.h, self.d // self.h).transpose(1, 2)

    def forward(self, x):
        y = self.ln1(x)
        q, k, v = self.heads(self.q(y)), self.heads(self.k(y)), self.heads(self.v(y))
        a = torch.softmax(torch.matmul(q, k.transpose(2, 3)) * (1.0 / 8.0), dim=-1)
        z = torch.matmul(a, v).transpose(1, 2).reshape(1, self.s, self.d)
        x = x + self.proj(z)
        y = self.fc(self.ln2(x))
        y = y * torch.sigmoid(1.702 * y)
        return x + self.out(y)


def strip(model):
    """Drop the values of floating-point initializers, keeping their dims."""
    for t in model.graph.initializer:
        if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16,
                           onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16):
            t.ClearField("float_data")
            t.ClearField("double_data")
            t.ClearField("int32_data")
            t.raw_data = b""
    return model


def export(net, x, path):
    # Distinct values in every parameter and buffer: the exporter merges
    # initializers with equal contents (an untrained model's batch-norm
    # weights are all ones) and would hand one tensor to several layers.
    with torch.no_grad():
        for t in list(net.parameters()) + list(net.buffers()):
            if t.is_floating_point():
                t.uniform_(0.5, 1.5)
    net.eval()
    buf = io.BytesIO()
    torch.onnx.export(net, x, buf, opset_version=OPSET, do_constant_folding=True,
                      training=torch.onnx.TrainingMode.PRESERVE,
                      input_names=["input"], output_names=["output"])
    m = strip(onnx.load_from_string(buf.getvalue()))
    onnx.save(m, path)
    print(f"{path}: {os.path.getsize(path)} bytes, {len(m.graph.node)} nodes")


def bad(out):
    """Small hand-built graphs (onnx.helper) that `cleave import` must refuse
    with exit 2 naming the node: an unknown operator, a cycle, a huge and a
    negative dimension, a missing input; and a tiny good one."""
    from onnx import TensorProto, helper

    def save(name, nodes, shape=(1, 4, 8, 8), inits=(), opset=17):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        g = helper.make_graph(nodes, name, [x], [y], list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        onnx.save(m, os.path.join(out, name + ".onnx"))

    relu = helper.make_node("Relu", ["x"], ["r"], name="relu1")
    save("tiny", [relu, helper.make_node("Relu", ["r"], ["y"], name="relu2")])
    save("unknown_op", [relu, helper.make_node("Erf", ["r"], ["y"], name="erf1")])
    save("cycle", [helper.make_node("Add", ["x", "b"], ["a"], name="loop_a"),
                   helper.make_node("Relu", ["a"], ["b"], name="loop_b"),
                   helper.make_node("Relu", ["b"], ["y"], name="after")])
    save("missing_input", [helper.make_node("Add", ["x", "nowhere"], ["y"], name="add1")])
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1 << 33, 4, 3, 3])
    save("huge_dim", [helper.make_node("Conv", ["x", "w"], ["y"], name="conv_huge")], inits=[w])
    save("negative_dim", [relu], shape=(1, 4, -8, 8))
    save("old_opset", [relu], opset=5)
    # 2^40 input elements, and target sizes whose running product passes
    # 2^63 unless checked before multiplying
    big = helper.make_tensor("big", TensorProto.INT64, [4], [1 << 20, 1 << 20, 1 << 31, -1])
    save("reshape_overflow", [helper.make_node("Reshape", ["x", "big"], ["y"], name="reshape_big")],
         shape=(1, 1 << 20, 1 << 20), inits=[big])


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/onnx"
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    img = torch.zeros(1, 3, 224, 224)
    if len(sys.argv) > 2 and sys.argv[2] == "--bad-only":
        bad(out)
        return
    for name in ("resnet18", "resnet50", "vgg16", "mobilenet_v2", "densenet121"):
        net = getattr(torchvision.models, name)(weights=None)
        export(net, img, os.path.join(out, name + ".onnx"))
    export(GPT2Block(), torch.zeros(1, 128, 768), os.path.join(out, "gpt2_block.onnx"))
    bad(out)


if __name__ == "__main__":
    main()
