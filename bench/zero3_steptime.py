#!/usr/bin/python3
"""What ZeRO stage 3 costs in step time against stage 2, with and without prefetch, on CPU ranks.

    /usr/bin/python3 bench/zero3_steptime.py [--gradc build/gradc] [--runs 3] [--steps 30] [--recompute]

`gradc train models/gpt-mini.yaml --data data/corpus.txt --devices 2 --shard S [FLAGS] -q` with
gpt-mini's defaults (batch 16 x 128, AdamW) and a bucket size that splits it into several
parameter groups (--bucket-mib 1), one intra-op thread per rank; the configurations alternated
run by run. Per run: the median step time over steps 6..N, rank 0's measured and planned peak,
and the ranks' time blocked on communication. Reported: the median of the runs. Writes
bench/results/zero3_steptime.{json,md}. With --recompute, every configuration runs under
--remat sqrt (stage 3's recomputed segments gather their buckets again; kept buckets do not):
bench/results/zero3_recompute_steptime.{json,md}.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CONFIGS = [
    ("stage 2", ["--shard", "2"]),
    ("stage 3, prefetch", ["--shard", "3"]),
    ("stage 3, no prefetch", ["--shard", "3", "--no-prefetch"]),
    ("stage 3, every bucket kept", ["--shard", "3", "--keep-gathered", "all"]),
]
RECOMPUTE_CONFIGS = [
    ("stage 2", ["--shard", "2", "--remat", "sqrt"]),
    ("stage 3, prefetch", ["--shard", "3", "--remat", "sqrt"]),
    ("stage 3, every bucket kept", ["--shard", "3", "--remat", "sqrt", "--keep-gathered", "all"]),
]


def run(gradc, flags, steps, tmp, n):
    mfile = os.path.join(tmp, f"m{n}.json")
    cmd = [gradc, "train", os.path.join(ROOT, "models", "gpt-mini.yaml"), "--data", os.path.join(ROOT, "data", "corpus.txt"),
           "--steps", str(steps), "--devices", "2", "--bucket-mib", "1", "-q", "--metrics-out", mfile] + flags
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {r.stderr.strip()[-400:]}")
    with open(mfile) as f:
        m = json.load(f)
    times = [s["step_time_s"] for s in m["steps"]][5:]
    r0 = m["ranks"][0]
    return {"step_s": statistics.median(times), "peak_measured": r0["peak_bytes_measured"],
            "peak_planned": r0["peak_bytes_planned"],
            "comm_wait_s": statistics.mean(r.get("comm_wait_s", 0.0) for r in m["ranks"]) / steps}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gradc", default=os.path.join(ROOT, "build", "gradc"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--recompute", action="store_true", help="every configuration under --remat sqrt")
    a = ap.parse_args()
    configs = RECOMPUTE_CONFIGS if a.recompute else CONFIGS
    stem = "zero3_recompute_steptime" if a.recompute else "zero3_steptime"
    results = {name: [] for name, _ in configs}
    with tempfile.TemporaryDirectory(prefix="gradc-zero3-") as tmp:
        n = 0
        for _ in range(a.runs):
            for name, flags in configs:  # alternated run by run
                results[name].append(run(a.gradc, flags, a.steps, tmp, n))
                n += 1
    base = statistics.median(r["step_s"] for r in results["stage 2"])
    rows = []
    for name, _ in configs:
        runs = results[name]
        step = statistics.median(r["step_s"] for r in runs)
        rows.append({"config": name, "step_s": step, "vs_stage2": step / base,
                     "comm_wait_s_per_step": statistics.median(r["comm_wait_s"] for r in runs),
                     "peak_measured": runs[0]["peak_measured"], "peak_planned": runs[0]["peak_planned"],
                     "runs": runs})
    doc = {"machine": f"{platform.node()} ({os.cpu_count()} cores)", "runs": a.runs, "steps": a.steps,
           "recompute": "sqrt" if a.recompute else "none",
           "blas": os.environ.get("OPENBLAS_CORETYPE", "default"), "rows": rows}
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, stem + ".json"), "w") as f:
        json.dump(doc, f, indent=1)
    lines = ["| configuration | step time | vs stage 2 | blocked on communication per step | rank 0 peak (measured = planned) |",
             "|---|---|---|---|---|"]
    for r in rows:
        same = "=" if r["peak_measured"] == r["peak_planned"] else "!="
        lines.append(f"| {r['config']} | {1000 * r['step_s']:.1f} ms | {r['vs_stage2']:.2f} | "
                     f"{1000 * r['comm_wait_s_per_step']:.1f} ms | {r['peak_measured']:,} B ({same} planned) |")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(a.out, stem + ".md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
