#!/usr/bin/env python3
"""Writes the plan fixtures of the pipe_* suites (run from this folder).

A tiny model on 1x6x6 inputs with every kind of state a stage can hold
(conv2d, batchnorm2d, max pooling, linear, dropout), cut by hand into the
stage layouts the tests need; stage times and bytes are placeholders (the
runner does not read them)."""
import json

MODEL = {
    "format": "cleave-model", "version": 1, "name": "tiny-pipe",
    "input": {"shape": [1, 6, 6], "dtype": "float32"}, "classes": 4,
    "layers": [
        {"kind": "conv2d", "name": "conv1", "in_channels": 1, "out_channels": 4, "kernel": 3, "padding": 1},
        {"kind": "batchnorm2d", "name": "bn1"},
        {"kind": "relu", "name": "relu1"},
        {"kind": "maxpool2d", "name": "pool1", "kernel": 2},
        {"kind": "flatten", "name": "flatten"},
        {"kind": "linear", "name": "fc1", "in_features": 36, "out_features": 16},
        {"kind": "relu", "name": "relu2"},
        {"kind": "dropout", "name": "drop", "p": 0.25},
        {"kind": "linear", "name": "fc2", "in_features": 16, "out_features": 12},
        {"kind": "relu", "name": "relu3"},
        {"kind": "linear", "name": "fc3", "in_features": 12, "out_features": 4},
        {"kind": "softmax_xent", "name": "loss"},
    ],
}
# no dropout: for replicated stages (each replica draws its own masks) and
# the stale-weight references
MODEL_NODROP = json.loads(json.dumps(MODEL))
MODEL_NODROP["name"] = "tiny-pipe-nodrop"
MODEL_NODROP["layers"][7] = {"kind": "relu", "name": "drop"}

def cluster(n):
    return {
        "format": "cleave-cluster", "version": 1, "name": "tiny-%dcores" % n,
        "device_types": [{"name": "cpu-core", "peak_fp32_flops": 1e11, "memory_bytes": 1 << 30,
                          "memory_bw_Bps": 1e10, "efficiency": 0.5}],
        "nodes": [{"name": "host", "devices": [{"id": "core%d" % i, "type": "cpu-core"} for i in range(n)]}],
        "links": {"intra_node": {"bandwidth_Bps": 1e10, "latency_s": 1e-5}},
    }

def plan(name, schedule, cuts, devices, micro=4, mb=4, chunks=1, model=MODEL, optimizer="momentum"):
    stages = []
    for (first, last), devs in zip(cuts, devices):
        stages.append({"first": first, "last": last, "devices": devs, "replicas": len(devs),
                       "fwd_s": 1e-4, "bwd_in_s": 1e-4, "bwd_w_s": 1e-4,
                       "act_out_bytes": 0 if last == 11 else 1024, "stash_bytes": 1024,
                       "param_bytes": 1024})
    p = {"format": "cleave-plan", "version": 1, "schedule": schedule, "optimizer": optimizer,
         "batch": micro * mb, "microbatch": mb, "microbatches": micro, "stages": stages,
         "model": model, "cluster": cluster(max(d for ds in devices for d in ds) + 1)}
    if chunks > 1:
        p["chunks"] = chunks
    with open(name, "w") as f:
        json.dump(p, f, indent=1)
        f.write("\n")

TWO = [(0, 4), (5, 11)]
for k, tag in [("gpipe", "gpipe"), ("1f1b", "1f1b"), ("zb-h1", "zbh1"), ("pipedream", "pipedream"),
               ("fbp", "fbp"), ("sequential", "sequential")]:
    plan("tiny2-%s.json" % tag, k, TWO, [[0], [1]])
plan("tiny4-1f1b.json", "1f1b", [(0, 3), (4, 6), (7, 9), (10, 11)], [[0], [1], [2], [3]])
plan("tiny-interleaved.json", "interleaved", [(0, 3), (4, 6), (7, 9), (10, 11)],
     [[0], [1], [0], [1]], chunks=2)
# stage 1 replicated on two devices: ring all-reduce of its gradients
plan("tiny-rep-gpipe.json", "gpipe", [(0, 7), (8, 11)], [[0], [1, 2]], model=MODEL_NODROP)
plan("tiny-rep-1f1b.json", "1f1b", [(0, 7), (8, 11)], [[0], [1, 2]], model=MODEL_NODROP)
plan("tiny-rep-fbp.json", "fbp", [(0, 7), (8, 11)], [[0], [1, 2]], model=MODEL_NODROP)
# stale-weight schedules on the model without dropout, 3 stages
for k, tag in [("pipedream", "pipedream"), ("fbp", "fbp")]:
    plan("tiny3-%s.json" % tag, k, [(0, 4), (5, 8), (9, 11)], [[0], [1], [2]], model=MODEL_NODROP)
# refusals: a plan whose model kind the executor cannot run (a block layer),
# and an optimiser it does not have
blk = json.loads(json.dumps(MODEL))
blk["name"] = "tiny-block"
blk["layers"][8] = {"kind": "block", "name": "fc2", "fwd_flops": 1000, "params": 204,
                    "out_bytes": 48, "stash_bytes": 64, "out_shape": [12]}
plan("bad-block.json", "1f1b", TWO, [[0], [1]], model=blk)
plan("bad-adam.json", "1f1b", TWO, [[0], [1]], optimizer="adam")
# stages that do not fit the model: layer 5 (fc1) belongs to no stage
plan("bad-stages.json", "1f1b", [(0, 4), (6, 11)], [[0], [1]])
# one stage, one microbatch: the pipelined runner is then sequential training itself
plan("tiny1-gpipe.json", "gpipe", [(0, 11)], [[0]], micro=1, mb=16)
