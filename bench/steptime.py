#!/usr/bin/env python3
"""One bundled model at one batch (default gpt-mini at 16), step time and peak, gradc vs PyTorch:
compare.py's step-time section alone (5 steps, 2 warm-up, alternated repeats), at the given
intra-op thread count.

  /usr/bin/python3 bench/steptime.py THREADS [--model gpt-mini] [--batch 16] [--cpus 1] [--repeats 3]

--cpus pins both systems to the same cores (on a shared virtual machine one core can be slower
than the other for minutes, and an unpinned run keeps whichever it lands on; docs/recipes.md).
Prints compare.py's step-time line: per system the median step time, peak RSS and (gradc) the
tracked peak, and the per-repeat gradc / PyTorch eager ratios.
"""
import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare as c  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("threads", type=int, nargs="?", default=1)
ap.add_argument("--cpus", help="pin both systems to these cores (e.g. 1, or 0,1); default: unpinned")
ap.add_argument("--repeats", type=int, default=3)
ap.add_argument("--model", default="gpt-mini")
ap.add_argument("--batch", type=int, default=16)
a = ap.parse_args()
if a.cpus:
    os.sched_setaffinity(0, {int(x) for x in a.cpus.split(",")})
with tempfile.TemporaryDirectory() as tmp:
    r = c.Runner(os.path.join(c.ROOT, "build", "gradc"), a.threads, tmp, print)
    rows = c.section_steptime(r, {"repeats": a.repeats, "steptime": {a.model: ([a.batch], 5, 2)}}, print)
    for row in rows or []:
        s = row["systems"]
        g, t = s["gradc"]["step_time_runs_s"], s["torch eager"]["step_time_runs_s"]
        print("per-repeat gradc / torch eager: " + ", ".join(f"{x / y:.3f}" for x, y in zip(g, t) if x and y))
