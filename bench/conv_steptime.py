"""resnet18-cifar step time and peak, gradc vs PyTorch: compare.py's step-time section alone
(the convnets section's first part, without its largest-batch and planner sweeps).

  /usr/bin/python3 bench/conv_steptime.py [--threads N] [--batch B] [--repeats R]

Writes bench/results/conv_steptime_<N>t.json and prints compare.py's step-time table.
"""
import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gradc", default=os.path.join(compare.ROOT, "build", "gradc"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    t0 = time.monotonic()

    def log(msg):
        print(f"[{time.monotonic() - t0:6.0f} s] {msg}", flush=True)

    cfg = {"repeats": a.repeats, "steptime": {"resnet18-cifar": ([a.batch], 4, 1)}}
    info = compare.machine_info(os.path.relpath(a.gradc, compare.ROOT))
    info["threads"] = a.threads
    with tempfile.TemporaryDirectory(prefix="gradc-bench-") as tmp:
        data = compare.section_steptime(compare.Runner(a.gradc, a.threads, tmp, log), cfg, log)
    out = os.path.join(compare.ROOT, "bench", "results", f"conv_steptime_{a.threads}t.json")
    with open(out, "w") as f:
        json.dump({"machine": info, "config": cfg, "started": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                   "results": data}, f, indent=1, default=str)
    log(f"wrote {out}")


if __name__ == "__main__":
    main()
