#!/usr/bin/python3
"""Elementwise fusion and generated kernels: what they cost to build and what they save.

    /usr/bin/python3 bench/codegen_bench.py [--gradc build/gradc] [--repeats 3] [--out bench/results]

Three tables, written to bench/results/codegen.json and codegen.md:
  build    time of `gradc compile MODEL -o DIR` with fusion (planning + kernel generation: the CPU
           shared object and the PTX) and with --no-fuse (planning only), alternated, medians;
           the difference is what generating and compiling the kernels costs
  memory   planned and measured peak of one training step with fusion and with --no-fuse
           (`gradc train --synthetic --steps 2`, tracked allocator, arena execution)
  adamw    the optimizer update's time per step (`--profile`, adamw_step rows): the one-pass
           kernel (fusion) against one ATen call per operation (--no-fuse), alternated, medians
One intra-op thread (OMP_NUM_THREADS=1), glibc defaults.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

BUILD_MODELS = ["mlp", "gpt-mini", "lstm-lm", "llama", "bert-mlm", "gpt2"]
MEMORY = [("mlp", ["--set", "batch=4096"]), ("gpt-mini", []), ("lstm-lm", [])]
ADAMW = [("gpt-mini", []), ("mlp", ["--set", "batch=4096"])]


def run(cmd, env):
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"codegen_bench: {' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    return time.perf_counter() - t, r.stdout + r.stderr


def spec(model):
    return os.path.join(ROOT, "models", model + ".yaml")


def build_times(gradc, env, repeats, tmp):
    rows = []
    for model in BUILD_MODELS:
        times = {"fused": [], "unfused": []}
        kernels = None
        for rep in range(repeats):
            for variant in (["fused", "unfused"] if rep % 2 == 0 else ["unfused", "fused"]):
                out = os.path.join(tmp, f"{model}.{variant}")
                shutil.rmtree(out, ignore_errors=True)
                flags = [] if variant == "fused" else ["--no-fuse"]
                s, _ = run([gradc, "compile", spec(model), "-o", out] + flags, env)
                times[variant].append(s)
                if variant == "fused":
                    with open(os.path.join(out, "manifest.json")) as f:
                        manifest = json.load(f)
                    so = manifest["ranks"][0].get("kernels")
                    kernels = 0
                    if so:
                        ll, _ = run([gradc, "compile", spec(model), "--emit", "llvm", "-o", os.path.join(tmp, "k.ll")], env)
                        with open(os.path.join(tmp, "k.ll")) as f:
                            kernels = sum(1 for line in f if line.startswith("; kernel "))
        fused, unfused = statistics.median(times["fused"]), statistics.median(times["unfused"])
        rows.append({"model": model, "kernels": kernels, "fused_s": fused, "unfused_s": unfused,
                     "generation_s": fused - unfused, "runs": times})
        print(f"build {model}: {kernels} kernels, compile {fused:.2f} s fused, {unfused:.2f} s --no-fuse", flush=True)
    return rows


PEAK = re.compile(r"peak memory (\d+) bytes measured, (\d+) planned")


def memory(gradc, env):
    rows = []
    for model, sets in MEMORY:
        row = {"model": model, "sets": sets}
        for variant, flags in (("fused", []), ("unfused", ["--no-fuse"])):
            _, text = run([gradc, "train", spec(model), "--synthetic", "--steps", "2"] + sets + flags, env)
            m = PEAK.search(text)
            row[variant] = {"measured": int(m.group(1)), "planned": int(m.group(2))}
        rows.append(row)
        print(f"memory {model}: fused {row['fused']}, unfused {row['unfused']}", flush=True)
    return rows


ADAMW_ROW = re.compile(r"^\s*adamw_step \(opt\)\s+([\d.]+)\s+([\d.]+)", re.M)


def adamw(gradc, env, repeats):
    rows = []
    for model, sets in ADAMW:
        times = {"fused": [], "unfused": []}
        for rep in range(repeats):
            for variant in (["fused", "unfused"] if rep % 2 == 0 else ["unfused", "fused"]):
                flags = [] if variant == "fused" else ["--no-fuse"]
                _, text = run([gradc, "train", spec(model), "--synthetic", "--steps", "6", "--profile"] + sets + flags, env)
                m = ADAMW_ROW.search(text)
                times[variant].append(float(m.group(2)))
        fused, unfused = statistics.median(times["fused"]), statistics.median(times["unfused"])
        rows.append({"model": model, "sets": sets, "fused_ms": fused, "unfused_ms": unfused, "speedup": unfused / fused,
                     "runs_ms": times})
        print(f"adamw {model}: {fused:.2f} ms fused, {unfused:.2f} ms unfused, {unfused / fused:.2f}x", flush=True)
    return rows


def mib(b):
    return f"{b / (1 << 20):.1f} MiB"


def report(data):
    md = ["# Elementwise fusion and generated kernels", "",
          f"Machine: {data['machine']}; one intra-op thread; medians of {data['repeats']} alternated runs.", "",
          "## Building the kernels", "",
          "`gradc compile MODEL -o DIR` with fusion (planning, then the CPU shared object and the PTX of every "
          "distinct kernel) and with `--no-fuse`; the difference is the kernels' generation and compilation.", "",
          "| model | distinct kernels | compile, fused | compile, --no-fuse | kernels cost |", "|---|---|---|---|---|"]
    for r in data["build"]:
        md.append(f"| {r['model']} | {r['kernels']} | {r['fused_s']:.2f} s | {r['unfused_s']:.2f} s | "
                  f"{r['generation_s']:+.2f} s |")
    md += ["", "## Memory of one training step", "",
           "Planned and measured (tracked, arena execution) peak, `gradc train --synthetic --steps 2`.", "",
           "| model | fused planned | fused measured | --no-fuse planned | --no-fuse measured | saved |",
           "|---|---|---|---|---|---|"]
    for r in data["memory"]:
        f, u = r["fused"], r["unfused"]
        name = r["model"] + (" " + " ".join(r["sets"][1::2]) if r["sets"] else "")
        md.append(f"| {name} | {mib(f['planned'])} | {mib(f['measured'])} | {mib(u['planned'])} | "
                  f"{mib(u['measured'])} | {mib(u['planned'] - f['planned'])} |")
    md += ["", "## The AdamW update", "",
           "Time per step of all `adamw_step` nodes (`--profile`): the one-pass kernel that fusion selects against "
           "one ATen call per operation (`--no-fuse`).", "",
           "| model | one pass | op by op | speed-up |", "|---|---|---|---|"]
    for r in data["adamw"]:
        name = r["model"] + (" " + " ".join(r["sets"][1::2]) if r["sets"] else "")
        md.append(f"| {name} | {r['fused_ms']:.2f} ms | {r['unfused_ms']:.2f} ms | **{r['speedup']:.2f}x** |")
    return "\n".join(md) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gradc", default=os.path.join(ROOT, "build", "gradc"))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    a = ap.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    data = {"machine": f"{cpu}, {os.cpu_count()} cores", "repeats": a.repeats}
    with tempfile.TemporaryDirectory() as tmp:
        data["build"] = build_times(a.gradc, env, a.repeats, tmp)
    data["memory"] = memory(a.gradc, env)
    data["adamw"] = adamw(a.gradc, env, a.repeats)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "codegen.json"), "w") as f:
        json.dump(data, f, indent=1)
    with open(os.path.join(a.out, "codegen.md"), "w") as f:
        f.write(report(data))
    print(report(data))


if __name__ == "__main__":
    main()
