#!/usr/bin/env python3
"""Fused attention (the attention op's tiled kernels) against the decomposition (--no-fuse) and
PyTorch eager: memory at long contexts and step time.

usage: /usr/bin/python3 bench/attention.py [--gradc build/gradc] [--out bench/results] [--repeats 3]
                                           [--parts memory,longest,speed] [--threads 1,2]

Parts (gpt-mini: 4 blocks, d_model 256, 4 heads, causal; only its context `seq` changes):
  memory   batch 1, T = 512, 1024, 2048, 4096: the planned peak of the training step fused (the
           default) and with --no-fuse (gradc compile --emit plan, no budget), the plan's buffers
           of shape [..., T, T] in each, and PyTorch eager's measured peak RSS over 2 steps
           (bench/compare.py's method: the VmHWM rise from the moment the model is about to be
           built).
  longest  batch 1: the longest T (a multiple of 128) whose step fits 1 GiB: gradc fused and
           unfused (compile --budget 1GiB succeeds; recompute allowed), and PyTorch eager
           (measured peak RSS <= 1 GiB). Doubling from 512, then bisection.
  speed    step time of gradc fused, gradc --no-fuse and PyTorch eager at T = 128 (batch 16) and
           T = 1024 (batch 2), at each thread count, the three systems alternated run by run;
           the median over runs of each run's median step time after the first step.
Writes attention.json and attention.md to --out.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import compare  # noqa: E402  (run_measured, Runner, search_max)

MiB = 1 << 20
SPEC = os.path.join(ROOT, "models", "gpt-mini.yaml")


def compile_plan(gradc, T, batch, fused, budget=None):
    """The plan JSON, or None when the compile is refused (exit != 0)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "plan.json")
        cmd = [gradc, "compile", SPEC, "--set", f"seq={T}", "--set", f"batch={batch}", "--emit", "plan", "-o", path]
        if not fused:
            cmd.append("--no-fuse")
        if budget:
            cmd += ["--budget", budget]
        r = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            return None
        with open(path) as f:
            return json.load(f)


def square_buffers(plan, T):
    pattern = re.compile(rf"\[\d+, \d+, {T}, {T}\]$")  # [batch, heads, T, T]
    return sum(1 for b in plan["buffers"] if b.get("type") and pattern.search(b["type"]))


def part_memory(args, runner, log):
    rows = []
    for T in (512, 1024, 2048, 4096):
        row = {"T": T}
        for fused in (True, False):
            plan = compile_plan(args.gradc, T, 1, fused)
            key = "fused" if fused else "unfused"
            row[key + "_peak"] = plan["peak_bytes"]
            row[key + "_square_buffers"] = square_buffers(plan, T)
        r = torch_run(runner, T, 1, 2, mem=True)
        row["torch_rss"] = r.get("peak_rss_bytes") if r["rc"] == 0 else None
        log(f"memory T={T}: fused {row['fused_peak'] / MiB:.1f} MiB, unfused {row['unfused_peak'] / MiB:.1f} MiB, "
            f"torch {row['torch_rss'] / MiB if row['torch_rss'] else float('nan'):.1f} MiB")
        rows.append(row)
    return rows


def torch_run(runner, T, batch, steps, mem):
    runner.count += 1
    ofile = os.path.join(runner.tmp, f"t{runner.count}.json")
    cmd = [compare.PY, compare.WORKER, "--model", "gpt-mini", "--mode", "eager", "--steps", str(steps), "--threads",
           str(runner.threads), "--set", f"batch={batch}", "--set", f"seq={T}", "--out", ofile]
    r = compare.run_measured(cmd, runner.mem_env if mem else runner.env)
    if r["rc"] == 0:
        with open(ofile) as f:
            m = json.load(f)
        os.unlink(ofile)
        r["step_times"] = [s["step_time_s"] for s in m["steps"]]
    return r


def part_longest(args, runner, log):
    budget = 1 << 30
    out = {}
    for name, fits in (
        ("gradc fused", lambda T: compile_plan(args.gradc, T, 1, True, "1GiB") is not None),
        ("gradc --no-fuse", lambda T: compile_plan(args.gradc, T, 1, False, "1GiB") is not None),
        ("PyTorch eager", lambda T: (lambda r: r["rc"] == 0 and r.get("peak_rss_bytes", budget + 1) <= budget)(
            torch_run(runner, T, 1, 2, mem=True))),
    ):
        best, probes = compare.search_max(fits, 128, 65536, 512)
        out[name] = {"T": best, "probes": {str(k): v for k, v in sorted(probes.items())}}
        log(f"longest in 1 GiB, {name}: T = {best} ({len(probes)} probes)")
    return out


def gradc_steps(runner, T, batch, steps, fused):
    flags = [] if fused else ["--no-fuse"]
    r = runner.gradc_train("gpt-mini", batch, steps, flags, extra_sets=(f"seq={T}",))
    return r


def part_speed(args, log):
    rows = []
    for threads in args.threads:
        with tempfile.TemporaryDirectory() as tmp:
            runner = compare.Runner(args.gradc, threads, tmp, log)
            for T, batch, steps in ((128, 16, 6), (1024, 2, 4)):
                times = {"fused": [], "unfused": [], "torch": []}
                for rep in range(args.repeats):
                    for system in ("fused", "unfused", "torch"):
                        if system == "torch":
                            r = torch_run(runner, T, batch, steps, mem=False)
                        else:
                            r = gradc_steps(runner, T, batch, steps, system == "fused")
                        if r["rc"] != 0:
                            sys.exit(f"attention.py: {system} T={T} failed:\n{r['stderr'][-1500:]}")
                        times[system].append(statistics.median(r["step_times"][1:]))
                row = {"threads": threads, "T": T, "batch": batch}
                for system, ts in times.items():
                    row[system] = statistics.median(ts)
                    row[system + "_runs"] = ts
                log(f"speed {threads}t T={T} b={batch}: fused {row['fused'] * 1e3:.1f} ms, unfused "
                    f"{row['unfused'] * 1e3:.1f} ms, torch {row['torch'] * 1e3:.1f} ms")
                rows.append(row)
    return rows


def write_md(data, path):
    L = ["# Fused attention: memory and step time", "",
         "gpt-mini (4 blocks, d_model 256, 4 heads, causal attention), only the context T changes. "
         "Measured with `bench/attention.py` on this machine (2 cores, OpenBLAS Haswell kernels for both systems; "
         "gradc's fused attention runs its tile products on the same OpenBLAS).", ""]
    if "memory" in data:
        L += ["## Memory, batch 1", "",
              "| T | gradc fused, planned | gradc --no-fuse, planned | [T, T] buffers fused / unfused | "
              "PyTorch eager, measured peak RSS |", "|---|---|---|---|---|"]
        for r in data["memory"]:
            torch = f"{r['torch_rss'] / MiB:.1f} MiB" if r.get("torch_rss") else "failed"
            L.append(f"| {r['T']} | {r['fused_peak'] / MiB:.1f} MiB | {r['unfused_peak'] / MiB:.1f} MiB | "
                     f"{r['fused_square_buffers']} / {r['unfused_square_buffers']} | {torch} |")
        L.append("")
    if "longest" in data:
        L += ["## The longest context in 1 GiB, batch 1", "", "| system | longest T (multiple of 128) | probes |",
              "|---|---|---|"]
        for name, r in data["longest"].items():
            L.append(f"| {name} | {r['T']} | {len(r['probes'])} |")
        L += ["", "gradc: `gradc compile --budget 1GiB` succeeds (recompute allowed); PyTorch eager: the measured "
              "peak RSS of 2 steps is at most 1 GiB.", ""]
    if "speed" in data:
        L += ["## Step time", "", "| threads | T | batch | gradc fused | gradc --no-fuse | PyTorch eager | "
              "fused / unfused | fused / PyTorch |", "|---|---|---|---|---|---|---|---|"]
        for r in data["speed"]:
            L.append(f"| {r['threads']} | {r['T']} | {r['batch']} | {r['fused'] * 1e3:.1f} ms | "
                     f"{r['unfused'] * 1e3:.1f} ms | {r['torch'] * 1e3:.1f} ms | {r['fused'] / r['unfused']:.2f}x | "
                     f"{r['fused'] / r['torch']:.2f}x |")
        L += ["", "Each system run alternately; medians over runs of each run's median step time after the first.", ""]
    with open(path, "w") as f:
        f.write("\n".join(L))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gradc", default=os.path.join(ROOT, "build", "gradc"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--parts", default="memory,longest,speed")
    ap.add_argument("--threads", default="1,2")
    args = ap.parse_args()
    args.threads = [int(t) for t in args.threads.split(",")]
    parts = args.parts.split(",")

    def log(msg):
        print(msg, flush=True)

    data = {}
    jpath = os.path.join(args.out, "attention.json")
    if os.path.exists(jpath):
        with open(jpath) as f:
            data = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        runner = compare.Runner(args.gradc, 1, tmp, log)
        if "memory" in parts:
            data["memory"] = part_memory(args, runner, log)
        if "longest" in parts:
            data["longest"] = part_longest(args, runner, log)
    if "speed" in parts:
        data["speed"] = part_speed(args, log)
    with open(jpath, "w") as f:
        json.dump(data, f, indent=1)
    write_md(data, os.path.join(args.out, "attention.md"))


if __name__ == "__main__":
    main()
