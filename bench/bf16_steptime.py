#!/usr/bin/env python3
"""A bf16 training step against the f32 step of the same model, for one or two gradc builds
(e.g. before and after a kernel change), alternated run by run.

  /usr/bin/python3 bench/bf16_steptime.py [--gradc build/gradc] [--baseline OTHER/gradc]
      [--threads 1] [--cpus 1] [--repeats 3] [--set batch=4 --set seq=32 ...] [--model gpt-mini]

Each run is `gradc train` on the bundled spec with `dtype: bf16` (and once with its own dtype,
f32) on synthetic data for 8 steps; a run's time is the median of steps 3-8 (`step_time_s` in
the metrics). Prints per system the median over repeats and the bf16 / f32 ratio. Prefix the
command with scripts/as-avx2.sh to time an AVX2 CPU's code paths on an AVX-512 one.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ap = argparse.ArgumentParser()
ap.add_argument("--gradc", default=os.path.join(ROOT, "build", "gradc"))
ap.add_argument("--baseline", help="another gradc build, timed alternately with --gradc")
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--cpus", help="pin to these cores (e.g. 1)")
ap.add_argument("--repeats", type=int, default=3)
ap.add_argument("--model", default="gpt-mini")
ap.add_argument("--set", action="append", default=[], help="NAME=EXPR, as gradc's --set")
a = ap.parse_args()
if a.cpus:
    os.sched_setaffinity(0, {int(x) for x in a.cpus.split(",")})

with open(os.path.join(ROOT, "models", a.model + ".yaml")) as f:
    spec = f.read()
bf16_spec = re.sub(r"^dtype: \w+$", "dtype: bf16", spec, flags=re.M)
if bf16_spec == spec:
    bf16_spec = "dtype: bf16\n" + spec

env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))


def step_time(gradc, spec_path, tmp):
    metrics = os.path.join(tmp, "metrics.json")
    cmd = [gradc, "train", spec_path, "--synthetic", "--steps", "8", "--metrics-out", metrics]
    for s in a.set:
        cmd += ["--set", s]
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(metrics) as f:
        steps = json.load(f)["steps"]
    return statistics.median(s["step_time_s"] for s in steps[2:])


with tempfile.TemporaryDirectory() as tmp:
    paths = {}
    for name, text in (("f32", spec), ("bf16", bf16_spec)):
        paths[name] = os.path.join(tmp, f"{a.model}-{name}.yaml")
        with open(paths[name], "w") as f:
            f.write(text)
    systems = [("gradc", a.gradc)] + ([("baseline", a.baseline)] if a.baseline else [])
    times = {(s, d): [] for s, _ in systems for d in ("f32", "bf16")}
    for _ in range(a.repeats):
        for s, binary in systems:
            for d in ("bf16", "f32"):
                times[(s, d)].append(step_time(binary, paths[d], tmp))
    print(f"{a.model} {' '.join(a.set)}, {a.threads} thread(s), medians of {a.repeats} runs (steps 3-8 each):")
    for s, binary in systems:
        bf, f = statistics.median(times[(s, "bf16")]), statistics.median(times[(s, "f32")])
        runs = ", ".join(f"{x * 1e3:.1f}" for x in times[(s, "bf16")])
        print(f"  {s} ({binary}): bf16 {bf * 1e3:.1f} ms (runs {runs}), f32 {f * 1e3:.1f} ms, bf16 / f32 {bf / f:.2f}")
