#!/usr/bin/env python3
"""The fused LM-head loss (--loss-chunks): memory and step time against the unfused loss.

usage: /usr/bin/python3 bench/fused_loss.py [--gradc build/gradc] [--out bench/results] [--repeats 5] [--quick]
                                            [--parts plan,measured,speed]

Three parts, all through the gradc command line:
  plan      lm-seed at full size on 4 data-parallel ranks: the planned per-rank peak with the
            loss on rank 0 after a gather (torch.nn.DataParallel's placement), on every rank
            (DataParallelCriterion's), and on every rank fused in K chunks (gradc compile
            --emit plan; planning only: one step of this model on 4 CPU ranks takes minutes).
  measured  the same three placements trained for 2 steps on 4 CPU ranks with lm-seed reduced
            to 1 layer of 64 features (batch, tokens and the 40,000-word vocabulary kept, so the
            logits dominate as at full size): measured per-rank peaks (the tracking allocator)
            beside the planned ones.
  speed     gpt-mini, and gpt-mini with --set vocab=32768, on one device and one intra-op
            thread: step time and measured peak, unfused vs fused, alternated run by run; the
            median over runs of each run's median step time after the first step.
Writes fused_loss.json and fused_loss.md to --out.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MB = 1e6


def run(cmd, env=None):
    r = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        sys.exit(f"fused_loss.py: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr[-2000:]}")
    return r


def plan(gradc, spec, flags):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "plan.json")
        run([gradc, "compile", spec, *flags, "--emit", "plan", "-o", path])
        with open(path) as f:
            return json.load(f)


def train(gradc, spec, flags, steps, threads=None):
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "metrics.json")
        r = run([gradc, "train", spec, *flags, "--synthetic", "--steps", str(steps), "--metrics-out", path], env)
        with open(path) as f:
            m = json.load(f)
    m["plan_line"] = next((l for l in r.stderr.splitlines() if l.startswith("memory plan:")), "")
    return m


PLACEMENTS = [("DataParallel: loss on rank 0 (gather)", ["--loss-placement", "gather", "--loss-chunks", "off"]),
              ("DataParallelCriterion-like: loss on every rank (local)", ["--loss-placement", "local", "--loss-chunks", "off"]),
              ("gradc fused loss: local, 16 chunks", ["--loss-placement", "local", "--loss-chunks", "16"])]


def part_plan(gradc):
    rows = []
    for label, flags in PLACEMENTS:
        p = plan(gradc, "models/lm-seed.yaml", ["--devices", "4", *flags])
        peaks = [r["peak_bytes"] for r in p["ranks"]]
        rows.append({"placement": label, "flags": flags, "rank_peaks": peaks})
        print(f"plan lm-seed 4 ranks {label}: {[round(x / MB) for x in peaks]} MB", flush=True)
    return rows


def part_measured(gradc):
    reduced = ["--set", "layers=1", "--set", "d_model=64", "--set", "heads=2", "--devices", "4"]
    rows = []
    for label, flags in PLACEMENTS:
        m = train(gradc, "models/lm-seed.yaml", [*reduced, *flags], 2)
        rows.append({"placement": label, "flags": reduced + flags,
                     "measured": [r["peak_bytes_measured"] for r in m["ranks"]],
                     "planned": [r["peak_bytes_planned"] for r in m["ranks"]], "losses": [s["loss"] for s in m["steps"]]})
        print(f"measured lm-seed reduced 4 ranks {label}: {[round(x / MB, 1) for x in rows[-1]['measured']]} MB",
              flush=True)
    return rows


def part_speed(gradc, repeats, steps, chunks):
    rows = []
    for model_label, sets in (("gpt-mini", []), ("gpt-mini vocab 32768", ["--set", "vocab=32768"])):
        variants = [("unfused", ["--loss-chunks", "off"])] + [(f"fused, {k} chunks", ["--loss-chunks", str(k)])
                                                               for k in chunks]
        times = {v: [] for v, _ in variants}
        peaks = {}
        plan_lines = {}
        for rep in range(repeats):
            order = variants if rep % 2 == 0 else list(reversed(variants))
            for label, flags in order:
                m = train(gradc, "models/gpt-mini.yaml", [*sets, *flags], steps, threads=1)
                times[label].append(statistics.median(s["step_time_s"] for s in m["steps"][1:]))
                r = m["ranks"][0]
                peaks[label] = (r["peak_bytes_measured"], r["peak_bytes_planned"])
                plan_lines[label] = m["plan_line"]
        base = statistics.median(times["unfused"])
        for label, _ in variants:
            t = statistics.median(times[label])
            rows.append({"model": model_label, "variant": label, "step_s": t, "ratio": t / base, "runs_s": times[label],
                         "peak_measured": peaks[label][0], "peak_planned": peaks[label][1],
                         "plan_line": plan_lines[label], "blas": m.get("blas"), "threads": m.get("intra_op_threads")})
            print(f"speed {model_label} {label}: {t:.3f} s/step ({t / base:.2f}x), peak {peaks[label][0] / MB:.1f} MB",
                  flush=True)
    return rows


def markdown(data):
    md = ["## Never materialise the logits: the fused LM-head loss", "",
          "### lm-seed on 4 data-parallel ranks, full size (planned per-rank peak)", "",
          "32 sequences x 250 tokens, 40,000-word vocabulary, 12 blocks, AdamW, f32; `gradc compile models/lm-seed.yaml "
          "--devices 4 --loss-placement P --loss-chunks K --emit plan`.", "",
          "| placement | rank 0 | ranks 1-3 | rank 0 vs local |", "|---|---|---|---|"]
    local = data["plan"][1]["rank_peaks"][0]
    for r in data["plan"]:
        p = r["rank_peaks"]
        md.append(f"| {r['placement']} | {p[0] / MB:,.0f} MB | {p[1] / MB:,.0f} MB | {p[0] / local:.3f} |")
    md += ["", "### The same placements trained on 4 CPU ranks (lm-seed reduced to 1 layer of 64 features)", "",
           "`--set layers=1 --set d_model=64 --set heads=2`: batch 32 x 250 tokens and the 40,000-word vocabulary as at "
           "full size, so a rank's logits are 320 MB. Peak bytes per rank measured by the tracking allocator beside "
           "the plan's, 2 steps (synthetic data).", "",
           "| placement | rank 0 measured | rank 0 planned | ranks 1-3 measured | losses |", "|---|---|---|---|---|"]
    for r in data["measured"]:
        md.append(f"| {r['placement']} | {r['measured'][0] / MB:,.1f} MB | {r['planned'][0] / MB:,.1f} MB | "
                  f"{r['measured'][1] / MB:,.1f} MB | {', '.join(f'{x:.4f}' for x in r['losses'])} |")
    sp = data["speed"]
    md += ["", "### Step time and peak on one device (gpt-mini, batch 16 x 128 tokens, one thread)", "",
           f"Alternated run by run, {data['repeats']} runs of {data['steps']} steps each, median of each run's median "
           f"step time after the first; BLAS {sp[0]['blas']}, {sp[0]['threads']} intra-op thread(s).", "",
           "| model | loss | step time | vs unfused | peak measured | peak planned |", "|---|---|---|---|---|---|"]
    for r in sp:
        md.append(f"| {r['model']} | {r['variant']} | {r['step_s']:.3f} s | **{r['ratio']:.2f}x** | "
                  f"{r['peak_measured'] / MB:,.1f} MB | {r['peak_planned'] / MB:,.1f} MB |")
    return "\n".join(md) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gradc", default=os.path.join(ROOT, "build", "gradc"))
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--quick", action="store_true", help="2 repeats of 3 steps")
    ap.add_argument("--parts", default="plan,measured,speed", help="which parts to run; the others are kept from "
                    "an earlier fused_loss.json in --out")
    a = ap.parse_args()
    if a.quick:
        a.repeats, a.steps = 2, 3
    gradc = os.path.abspath(a.gradc)
    parts = set(a.parts.split(","))
    previous = os.path.join(a.out, "fused_loss.json")
    data = json.load(open(previous)) if os.path.exists(previous) and parts != {"plan", "measured", "speed"} else {}
    if "plan" in parts:
        data["plan"] = part_plan(gradc)
    if "measured" in parts:
        data["measured"] = part_measured(gradc)
    if "speed" in parts:
        data.update(repeats=a.repeats, steps=a.steps, speed=part_speed(gradc, a.repeats, a.steps, [8, 64]))
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "fused_loss.json"), "w") as f:
        json.dump(data, f, indent=1)
    with open(os.path.join(a.out, "fused_loss.md"), "w") as f:
        f.write(markdown(data))
    print(markdown(data))


if __name__ == "__main__":
    main()
