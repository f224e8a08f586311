#!/usr/bin/python3
"""torch_ref.py - a PyTorch reference for `cleave bench exec`.

Usage: torch_ref.py MODEL.json BATCH STEPS

Builds the model's layers (conv2d, linear, relu, maxpool2d, avgpool2d,
flatten, dropout, softmax_xent, read from the cleave model JSON) in PyTorch,
trains it on one core (torch.set_num_threads(1)) on synthetic data with SGD
and momentum 0.9, and prints one line:

    samples_per_s MEDIAN BEST torch VERSION

from the median and the fastest of STEPS timed steps (after 5 warm-up
steps).  Exit status 3 with "no torch: ..." on stdout when PyTorch cannot
be imported; 2 with a one-line reason when the model has a layer kind this
script does not build.
"""
import json
import statistics
import sys
import time


def main():
    if len(sys.argv) != 4:
        print("usage: torch_ref.py MODEL.json BATCH STEPS")
        return 2
    try:
        import torch
    except Exception as exc:  # ImportError, or a broken install
        print("no torch: %s" % str(exc).splitlines()[0] if str(exc) else "no torch")
        return 3
    path, batch, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    with open(path) as f:
        spec = json.load(f)
    nn = torch.nn
    mods = []
    for layer in spec["layers"]:
        kind = layer["kind"]
        if kind == "conv2d":
            mods.append(nn.Conv2d(layer["in_channels"], layer["out_channels"], layer["kernel"],
                                  stride=layer.get("stride", 1), padding=layer.get("padding", 0)))
        elif kind == "linear":
            mods.append(nn.Linear(layer["in_features"], layer["out_features"]))
        elif kind == "relu":
            mods.append(nn.ReLU())
        elif kind in ("maxpool2d", "avgpool2d"):
            pool = nn.MaxPool2d if kind == "maxpool2d" else nn.AvgPool2d
            k = layer["kernel"]
            mods.append(pool(k, stride=layer.get("stride", k), padding=layer.get("padding", 0)))
        elif kind == "flatten":
            mods.append(nn.Flatten())
        elif kind == "dropout":
            mods.append(nn.Dropout(layer["p"]))
        elif kind == "softmax_xent":
            pass  # the loss below
        else:
            print("%s: layer %s: kind %s is not built by torch_ref.py" % (path, layer.get("name"), kind))
            return 2
    torch.set_num_threads(1)
    torch.manual_seed(1)
    net = nn.Sequential(*mods)
    net.train()
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    x = torch.randn(batch, *spec["input"]["shape"])
    y = torch.randint(0, spec["classes"], (batch,))
    times = []
    for i in range(5 + steps):
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(net(x), y)
        loss.backward()
        opt.step()
        if i >= 5:
            times.append(time.perf_counter() - t0)
    print("samples_per_s %.1f %.1f torch %s" % (batch / statistics.median(times), batch / min(times),
                                                 torch.__version__))
    return 0


if __name__ == "__main__":
    sys.exit(main())
