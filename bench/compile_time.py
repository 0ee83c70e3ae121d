#!/usr/bin/python3
"""Compile time of two gradc binaries, alternated run by run (the planner's cost, not the kernels').

    /usr/bin/python3 bench/compile_time.py --old PATH --new PATH [--runs N] [--cases a,b,...]

Cases (each a list of `gradc compile` command lines, timed as one):
  gpt-mini-sweep   models/gpt-mini.yaml --emit plan at 30 budgets, evenly spaced from the least
                   peak (--objective least-peak, asked of --new) to the peak without a budget
  lm-seed-d4       models/lm-seed.yaml --devices 4 --emit plan (no budget)
  lm-seed-d4-auto  the same at 60% of its no-budget peak, --shard auto --loss-chunks auto
                   --micro-batches auto
  mlp-150k         models/mlp.yaml --set depth=150000 --emit summary

Runs alternate old, new, old, new, ...; the medians and the ratio new/old are printed. One
intra-op thread (OMP_NUM_THREADS=1), as the other benchmarks; outputs go to a scratch directory.
"""
import argparse, json, os, statistics, subprocess, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def peak(gradc, args, tmp):
    out = os.path.join(tmp, "peak.json")
    subprocess.run([gradc, "compile", *args, "--emit", "plan", "-o", out], check=True, cwd=ROOT)
    with open(out) as f:
        return json.load(f)["peak_bytes"]


def cases(new, tmp):
    out = os.path.join(tmp, "out")
    mini = ["models/gpt-mini.yaml"]
    top = peak(new, mini, tmp)
    least = peak(new, mini + ["--budget", str(top), "--objective", "least-peak"], tmp)
    sweep = [[*mini, "--emit", "plan", "--budget", str(least + (top - least) * i // 29), "-o", out] for i in range(30)]
    seed = ["models/lm-seed.yaml", "--devices", "4"]
    seed_peak = peak(new, seed, tmp)
    return {
        "gpt-mini-sweep": sweep,
        "lm-seed-d4": [[*seed, "--emit", "plan", "-o", out]],
        "lm-seed-d4-auto": [[*seed, "--emit", "plan", "--budget", str(seed_peak * 6 // 10), "--shard", "auto",
                             "--loss-chunks", "auto", "--micro-batches", "auto", "-o", out]],
        "mlp-150k": [["models/mlp.yaml", "--set", "depth=150000", "--emit", "summary"]],
    }


def timed(gradc, lines):
    start = time.perf_counter()
    for args in lines:
        r = subprocess.run([gradc, "compile", *args], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if r.returncode not in (0, 2):
            raise SystemExit(f"{gradc} compile {' '.join(args)}: exit {r.returncode}: {r.stderr.decode()[-400:]}")
    return time.perf_counter() - start


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--old", required=True)
    p.add_argument("--new", required=True)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--cases", default="")
    a = p.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        all_cases = cases(a.new, tmp)
        names = a.cases.split(",") if a.cases else list(all_cases)
        print(f"{'case':18} {'old median s':>12} {'new median s':>12} {'new/old':>8}  runs (old | new)")
        for name in names:
            lines = all_cases[name]
            old, new = [], []
            for _ in range(a.runs):
                old.append(timed(a.old, lines))
                new.append(timed(a.new, lines))
            mo, mn = statistics.median(old), statistics.median(new)
            fmt = lambda xs: " ".join(f"{x:.2f}" for x in xs)
            print(f"{name:18} {mo:12.2f} {mn:12.2f} {mn / mo:8.2f}  {fmt(old)} | {fmt(new)}", flush=True)


if __name__ == "__main__":
    main()
