#!/usr/bin/python3
"""The largest batch under a budget: gradc's answer before the first step (--set batch=auto) vs
the same question answered by trial in PyTorch, as PyTorch Lightning's batch-size finder does.

    /usr/bin/python3 bench/batch_auto.py [--gradc build/gradc] [--out bench/results] [--threads 2] [--quick]

gradc: `gradc compile SPEC --set batch=auto --budget B -o DIR` (timed; the manifest's
flags.batch_search has the answer, every batch the planner probed and the next batch's smallest
feasible budget), then `gradc train SPEC --set batch=auto --budget B --synthetic --steps 2`
measured by bench/compare.py's run_measured: the peak RSS above the idle baseline, and the
arena's measured peak against the plan's.

PyTorch (bench/pytorch/worker.py, eager): Lightning's scale_batch_size with its defaults
(init_val 2, steps_per_trial 3): mode "power" doubles the batch until a trial fails, and mode
"binsearch" then bisects between the last success and the failure. On the CPU there is no
out-of-memory error to catch, so a trial fails when its measured peak RSS above the idle
baseline exceeds the budget (the same measurement as gradc's). Each trial is a fresh process.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402  (run_measured, Runner)

MiB = 1 << 20
FULL = [("gpt-mini", 128), ("gpt-mini", 256), ("resnet18-cifar", 512)]
QUICK = [("gpt-mini", 128)]
STEPS_PER_TRIAL = 3  # Lightning's default
INIT_VAL = 2         # Lightning's default


def gradc_side(runner, model, budget):
    spec = runner.spec(model)
    out = os.path.join(runner.tmp, f"{model}-{budget}")
    t0 = time.monotonic()
    r = subprocess.run([runner.gradc, "compile", spec, "--set", "batch=auto", "--budget", str(budget), "-o", out],
                       capture_output=True, text=True, env=runner.env)
    compile_s = time.monotonic() - t0
    if r.returncode != 0:
        return {"error": r.stderr.strip()[-400:]}
    with open(os.path.join(out, "manifest.json")) as f:
        search = json.load(f)["flags"]["batch_search"]
    mfile = os.path.join(runner.tmp, f"m-{model}-{budget}.json")
    cmd = [runner.gradc, "train", spec, "--set", "batch=auto", "--budget", str(budget), "--synthetic", "--steps", "2",
           "--metrics-out", mfile]
    m = compare.run_measured(cmd, runner.mem_env)
    entry = {"batch": search["per_rank"], "compile_s": round(compile_s, 2), "search_s": search["seconds"],
             "probes": [[p["batch"], p["fits"]] for p in search["probes"]], "summary": search["summary"],
             "next": search.get("next"), "peak_planned_bytes": search.get("peak_bytes"), "train_rc": m["rc"],
             "peak_rss_bytes": m.get("peak_rss_bytes")}
    if m["rc"] == 0:
        with open(mfile) as f:
            metrics = json.load(f)
        rank = metrics["ranks"][0]
        entry["peak_measured_bytes"] = rank["peak_bytes_measured"]
        entry["peak_bytes_planned"] = rank.get("peak_bytes_planned")
    entry["rss_within"] = entry["peak_rss_bytes"] is not None and entry["peak_rss_bytes"] <= budget * 1.05 + 8 * MiB
    return entry


def torch_side(runner, model, budget, log):
    """Lightning's finder by trial: power (doubling), then binsearch."""
    trials = []
    t0 = time.monotonic()

    def fits(b):
        r = runner.torch_train(model, b, STEPS_PER_TRIAL, "eager", mem=True)
        peak = r.get("peak_rss_bytes") if r["rc"] == 0 else None
        ok = peak is not None and peak <= budget
        trials.append({"batch": b, "peak_rss_bytes": peak, "fits": ok})
        log(f"  torch {model} {budget // MiB} MiB: batch {b}: {'fits' if ok else 'over'} ({peak})")
        return ok

    lo, hi, b = 0, None, INIT_VAL
    while True:
        if fits(b):
            lo, b = b, 2 * b
        else:
            hi = b
            break
    power = lo
    power_trials = len(trials)
    while hi is not None and lo > 0 and hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return {"power": power, "power_trials": power_trials, "binsearch": lo, "binsearch_trials": len(trials),
            "steps_per_trial": STEPS_PER_TRIAL, "trials": trials, "wall_s": round(time.monotonic() - t0, 1)}


def fmt(b):
    return "—" if b is None else f"{b / MiB:.1f} MiB"


def markdown(rows, threads):
    md = ["## The largest batch under a budget: gradc's answer vs PyTorch by trial", "",
          f"Method: bench/batch_auto.py ({threads} intra-op threads for both; memory runs return large freed blocks "
          "to the OS, as in bench/compare.py). gradc: `gradc compile --set batch=auto --budget B` (compile time and "
          "batches planned), then one `gradc train` run at that answer: the arena's measured peak vs the plan's, "
          "and the peak RSS above the idle baseline against B x 1.05 + 8 MiB. PyTorch eager: Lightning's finder by "
          f"trial (init_val {INIT_VAL}, {STEPS_PER_TRIAL} steps per trial, one process per trial), a trial failing "
          "when its peak RSS above the idle baseline exceeds B; power = doubling, binsearch = then bisecting.", "",
          "| model | budget | gradc batch | gradc plan | next batch: smallest feasible budget | gradc compile | "
          "measured = planned | gradc peak RSS (limit) | PyTorch power: batch (trials, steps) | "
          "PyTorch binsearch: batch (trials, steps) | PyTorch finder wall time |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        g, t, B = r["gradc"], r["torch"], r["budget_bytes"]
        if "error" in g:
            md.append(f"| {r['model']} | {fmt(B)} | error: {g['error']} | | | | | | | | |")
            continue
        plan = g["summary"].split("(predicted peak ", 1)[-1].split(")", 1)[0]
        nxt = g.get("next") or {}
        same = g.get("peak_measured_bytes") is not None and g["peak_measured_bytes"] == g.get("peak_bytes_planned")
        md.append(
            f"| {r['model']} | {fmt(B)} | {g['batch']} | {plan} | {nxt.get('per_rank')}: "
            f"{fmt(nxt.get('smallest_feasible_bytes'))} | {g['compile_s']:.1f} s ({len(g['probes'])} batches) | "
            f"{'yes' if same else '**no**'} ({fmt(g.get('peak_measured_bytes'))}) | {fmt(g.get('peak_rss_bytes'))} "
            f"({fmt(B * 1.05 + 8 * MiB)}{'' if g['rss_within'] else ', **over**'}) | {t['power']} "
            f"({t['power_trials']}, {t['power_trials'] * STEPS_PER_TRIAL}) | {t['binsearch']} ({t['binsearch_trials']}, "
            f"{t['binsearch_trials'] * STEPS_PER_TRIAL}) | {t['wall_s']:.0f} s |")
    return "\n".join(md) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gradc", default=os.path.join(compare.ROOT, "build", "gradc"))
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        runner = compare.Runner(os.path.abspath(a.gradc), a.threads, tmp, log)
        for model, mib in (QUICK if a.quick else FULL):
            budget = mib * MiB
            g = gradc_side(runner, model, budget)
            log(f"gradc {model} {mib} MiB: {g.get('summary', g.get('error'))}")
            t = torch_side(runner, model, budget, log)
            rows.append({"model": model, "budget_bytes": budget, "gradc": g, "torch": t})
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "batch_auto.json"), "w") as f:
        json.dump({"threads": a.threads, "rows": rows}, f, indent=1)
    with open(os.path.join(a.out, "batch_auto.md"), "w") as f:
        f.write(markdown(rows, a.threads))
    print(markdown(rows, a.threads))


if __name__ == "__main__":
    main()
