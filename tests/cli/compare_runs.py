"""Compares two gradc training runs: per-step losses (metrics JSON) and the tensors of two
checkpoint folders (weights.safetensors), with a relative tolerance. Standard library only.

usage: compare_runs.py METRICS_A METRICS_B [CHECKPOINT_A CHECKPOINT_B] --rtol X [--common-steps]
                       [--tensors FILE]
--common-steps compares the steps both runs logged (a resumed run against a straight one);
--tensors names the checkpoint file to compare (default weights.safetensors).
Prints the largest relative differences; exits 1 when one is above the tolerance.
"""
import argparse
import array
import json
import os
import struct
import sys

FORMATS = {"F32": "f", "F64": "d"}


def read_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        values = array.array(FORMATS[info["dtype"]])
        values.frombytes(data[begin:end])
        tensors[name] = values
    return tensors


def main():
    p = argparse.ArgumentParser()
    p.add_argument("metrics", nargs=2)
    p.add_argument("checkpoints", nargs="*")
    p.add_argument("--rtol", type=float, required=True)
    p.add_argument("--common-steps", action="store_true")
    p.add_argument("--tensors", default="weights.safetensors")
    a = p.parse_args()
    failed = False

    steps = [json.load(open(m))["steps"] for m in a.metrics]
    if a.common_steps:
        common = {x["step"] for x in steps[0]} & {x["step"] for x in steps[1]}
        steps = [[x for x in s if x["step"] in common] for s in steps]
    if len(steps[0]) != len(steps[1]) or not steps[0]:
        print(f"step counts differ: {len(steps[0])} vs {len(steps[1])}")
        return 1
    worst = max(abs(x["loss"] - y["loss"]) / abs(y["loss"]) for x, y in zip(*steps))
    print(f"losses over {len(steps[0])} steps: {steps[0][0]['loss']:.6f} -> {steps[0][-1]['loss']:.6f}, "
          f"largest relative difference {worst:.3g}")
    failed |= worst > a.rtol

    if a.checkpoints:
        ta, tb = (read_safetensors(os.path.join(c, a.tensors)) for c in a.checkpoints)
        if set(ta) != set(tb):
            print("the checkpoints hold different tensors")
            return 1
        worst_name, worst = None, 0.0
        for name in sorted(ta):
            x, y = ta[name], tb[name]
            scale = max(max(abs(v) for v in y), 1e-30)
            diff = max(abs(u - v) for u, v in zip(x, y)) / scale
            if diff >= worst:
                worst_name, worst = name, diff
        print(f"parameters ({len(ta)} tensors): largest max|a-b|/max|b| {worst:.3g} ({worst_name})")
        failed |= worst > a.rtol
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
