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
import statistics
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


def runtime_overhead(runner, model):
    """gradc's RSS beyond its tracked tensors at the bundled batch (the libraries' buffers, the
    executor, the heap), rounded up to a MiB, as bench/compare.py's maxbatch section measures it."""
    r = runner.gradc_train(model, compare.models.DEFAULT_DIMS[model]["batch"], 2, [], mem=True)
    return -(-(r["peak_rss_bytes"] - r["peak_tracked"]) // MiB) * MiB


def gradc_side(runner, model, budget, reserve=0):
    spec = runner.spec(model)
    out = os.path.join(runner.tmp, f"{model}-{budget}-{reserve}")
    flags = ["--device-reserve", str(reserve)] if reserve else []
    t0 = time.monotonic()
    r = subprocess.run([runner.gradc, "compile", spec, "--set", "batch=auto", "--budget", str(budget), "-o", out] + flags,
                       capture_output=True, text=True, env=runner.env)
    compile_s = time.monotonic() - t0
    if r.returncode != 0:
        return {"error": r.stderr.strip()[-400:]}
    with open(os.path.join(out, "manifest.json")) as f:
        search = json.load(f)["flags"]["batch_search"]
    mfile = os.path.join(runner.tmp, f"m-{model}-{budget}.json")
    cmd = [runner.gradc, "train", spec, "--set", "batch=auto", "--budget", str(budget), "--synthetic", "--steps", "2",
           "--metrics-out", mfile] + flags
    m = compare.run_measured(cmd, runner.mem_env)
    entry = {"batch": search["per_rank"], "reserve_bytes": reserve, "compile_s": round(compile_s, 2), "search_s": search["seconds"],
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


def step_run(runner, model, batch, flags, steps=4):
    """One gradc train run at `batch`: median step time after the first, and the predicted step
    time from the memory plan line."""
    runner.count += 1
    mfile = os.path.join(runner.tmp, f"s{runner.count}.json")
    cmd = [runner.gradc, "train", runner.spec(model), "--set", f"batch={batch}", "--synthetic", "--steps", str(steps),
           "--metrics-out", mfile] + flags
    r = subprocess.run(cmd, capture_output=True, text=True, env=runner.env)
    if r.returncode != 0:
        return {"error": r.stderr.strip()[-300:]}
    with open(mfile) as f:
        times = [x["step_time_s"] for x in json.load(f)["steps"]][1:]
    plan = next((line for line in r.stderr.splitlines() if line.startswith("memory plan:")), "")
    predicted = None
    if "predicted step time " in plan:
        predicted = float(plan.split("predicted step time ", 1)[1].split(" s", 1)[0])
    return {"measured_s": statistics.median(times), "predicted_s": predicted, "plan": plan.replace("memory plan: ", "")}


def throughput_side(runner, model, budgets, log, repeats):
    """--objective throughput: the chosen batch's measured samples/s against every batch it
    compared (each planned for the least predicted time) and the largest batch's least-recompute
    plan, measured `repeats` times in alternation; predicted vs measured step time."""
    table = os.path.join(runner.tmp, "cost-table.json")
    r = subprocess.run([runner.gradc, "train", runner.spec(model), "--synthetic", "--steps", "5", "--profile",
                        "--cost-table-out", table], capture_output=True, text=True, env=runner.env)
    if r.returncode != 0:
        return {"error": r.stderr[-300:]}
    with open(table) as f:
        cost_table = json.load(f)
    rows = []
    for budget in budgets:
        out = os.path.join(runner.tmp, f"tp-{model}-{budget}")
        flags = ["--budget", str(budget), "--objective", "throughput", "--cost-table", table]
        t0 = time.monotonic()
        c = subprocess.run([runner.gradc, "compile", runner.spec(model), "--set", "batch=auto", "-o", out] + flags,
                           capture_output=True, text=True, env=runner.env)
        compile_s = time.monotonic() - t0
        if c.returncode != 0:
            rows.append({"budget_bytes": budget, "error": c.stderr[-300:]})
            continue
        with open(os.path.join(out, "manifest.json")) as f:
            search = json.load(f)["flags"]["batch_search"]
        batches = sorted({p["batch"] for p in search["probes"] + search.get("compared", []) if p["fits"]})
        runs = {b: [] for b in batches}
        largest = search["largest_per_rank"]
        runs["largest, least-recompute"] = []
        for _ in range(repeats):
            for b in batches:
                runs[b].append(step_run(runner, model, b, flags))
            runs["largest, least-recompute"].append(step_run(runner, model, largest, ["--budget", str(budget)]))
        measured = []
        for key, rs in runs.items():
            ok = [x for x in rs if "error" not in x]
            if not ok:
                continue
            b = largest if key == "largest, least-recompute" else key
            m = statistics.median(x["measured_s"] for x in ok)
            measured.append({"batch": b, "config": "least-recompute" if isinstance(key, str) else "throughput",
                             "measured_s": m, "predicted_s": ok[0]["predicted_s"], "samples_per_s": b / m,
                             "plan": ok[0]["plan"]})
            log(f"throughput {model} {budget // MiB} MiB batch {b} ({measured[-1]['config']}): measured {m:.3f} s, "
                f"predicted {ok[0]['predicted_s']}")
        best = max(measured, key=lambda x: x["samples_per_s"])
        chosen = next(x for x in measured if x["batch"] == search["per_rank"] and x["config"] == "throughput")
        rows.append({"budget_bytes": budget, "chosen": search["per_rank"], "summary": search["summary"],
                     "compile_s": round(compile_s, 2), "measured": measured, "best": best,
                     "chosen_vs_best": chosen["samples_per_s"] / best["samples_per_s"]})
    return {"cost_table_source": cost_table["source"], "rows": rows}


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


def throughput_markdown(tp, threads):
    md = ["## `--objective throughput`: the chosen batch's measured samples/s against the alternatives", "",
          f"Method: bench/batch_auto.py ({threads} intra-op threads). A cost table is fitted from one profiled run "
          "(`gradc train models/gpt-mini.yaml --synthetic --steps 5 --profile --cost-table-out T`, the bundled batch "
          "16). `gradc compile --set batch=auto --budget B --objective throughput --cost-table T` chooses; every batch "
          "it compared is then trained (4 steps, median step time of steps 2-4, runs alternated, median over repeats) "
          "with the same flags, and the largest batch also with the default objective's plan (least recompute).", ""]
    if "error" in tp:
        return "\n".join(md + ["error: " + tp["error"]]) + "\n"
    for row in tp["rows"]:
        if "error" in row:
            md += [f"budget {fmt(row['budget_bytes'])}: error {row['error']}", ""]
            continue
        md += [f"**Budget {fmt(row['budget_bytes'])}**: chosen batch {row['chosen']} (compile {row['compile_s']:.1f} s); "
               f"its measured samples/s are {100 * row['chosen_vs_best']:.1f}% of the best measured (batch "
               f"{row['best']['batch']}, {row['best']['config']}).", "",
               "| batch | plan | predicted step | measured step | predicted / measured | samples/s measured |",
               "|---|---|---|---|---|---|"]
        for x in sorted(row["measured"], key=lambda x: (x["batch"], x["config"])):
            mark = " **(chosen)**" if x["batch"] == row["chosen"] and x["config"] == "throughput" else ""
            pred, meas = x["predicted_s"], x["measured_s"]
            pred_text = "—" if pred is None else f"{pred:.3f} s"
            ratio_text = "—" if pred is None else f"{pred / meas:.2f}"
            md.append(f"| {x['batch']}{mark} | {x['plan']} | {pred_text} | {meas:.3f} s | {ratio_text} | "
                      f"{x['samples_per_s']:.1f} |")
        md.append("")
    return "\n".join(md) + "\n"


def markdown(rows, threads):
    md = ["## The largest batch under a budget: gradc's answer vs PyTorch by trial", "",
          f"Method: bench/batch_auto.py ({threads} intra-op threads for both; memory runs return large freed blocks "
          "to the OS, as in bench/compare.py). gradc: `gradc compile --set batch=auto --budget B` (compile time and "
          "batches planned), then one `gradc train` run at that answer: the arena's measured peak vs the plan's, "
          "and the peak RSS above the idle baseline against B x 1.05 + 8 MiB. PyTorch eager: Lightning's finder by "
          f"trial (init_val {INIT_VAL}, {STEPS_PER_TRIAL} steps per trial, one process per trial), a trial failing "
          "when its peak RSS above the idle baseline exceeds B; power = doubling, binsearch = then bisecting. The "
          "second gradc row of each budget reserves, with `--device-reserve`, gradc's RSS beyond its tracked tensors "
          "(what the process holds beside its arena: the libraries' buffers and heap, measured at the bundled batch as "
          "in bench/compare.py), so that the plan and the rest together are held to B.", "",
          "| model | budget | gradc batch | gradc plan | next batch: smallest feasible budget | gradc compile | "
          "measured = planned | gradc peak RSS (limit) | PyTorch power: batch (trials, steps) | "
          "PyTorch binsearch: batch (trials, steps) | PyTorch finder wall time |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r, g in [(r, g) for r in rows for g in (r["gradc"], r.get("gradc_reserved")) if g]:
        t, B = r["torch"], r["budget_bytes"]
        if "error" in g:
            md.append(f"| {r['model']} | {fmt(B)} | error: {g['error']} | | | | | | | | |")
            continue
        plan = g["summary"].split("(predicted peak ", 1)[-1].split("); ", 1)[0]
        nxt = g.get("next") or {}
        same = g.get("peak_measured_bytes") is not None and g["peak_measured_bytes"] == g.get("peak_bytes_planned")
        reserved = f" (`--device-reserve {g['reserve_bytes'] // MiB}MiB`)" if g.get("reserve_bytes") else ""
        md.append(
            f"| {r['model']} | {fmt(B)} | {g['batch']}{reserved} | {plan} | {nxt.get('per_rank')}: "
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
    ap.add_argument("--sections", default="largest,throughput")
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    sections = a.sections.split(",")

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    os.makedirs(a.out, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        runner = compare.Runner(os.path.abspath(a.gradc), a.threads, tmp, log)
        if "largest" in sections:
            rows = []
            for model, mib in (QUICK if a.quick else FULL):
                budget = mib * MiB
                g = gradc_side(runner, model, budget)
                log(f"gradc {model} {mib} MiB: {g.get('summary', g.get('error'))}")
                overhead = runtime_overhead(runner, model)
                gr = gradc_side(runner, model, budget, overhead)
                log(f"gradc {model} {mib} MiB, --device-reserve {overhead}: {gr.get('summary', gr.get('error'))}")
                t = torch_side(runner, model, budget, log)
                rows.append({"model": model, "budget_bytes": budget, "gradc": g, "gradc_reserved": gr, "torch": t})
            with open(os.path.join(a.out, "batch_auto.json"), "w") as f:
                json.dump({"threads": a.threads, "rows": rows}, f, indent=1)
            with open(os.path.join(a.out, "batch_auto.md"), "w") as f:
                f.write(markdown(rows, a.threads))
            print(markdown(rows, a.threads))
        if "throughput" in sections:
            budgets = [128 * MiB] if a.quick else [128 * MiB, 256 * MiB]
            tp = throughput_side(runner, "gpt-mini", budgets, log, 1 if a.quick else a.repeats)
            with open(os.path.join(a.out, "batch_throughput.json"), "w") as f:
                json.dump({"threads": a.threads, **tp}, f, indent=1)
            with open(os.path.join(a.out, "batch_throughput.md"), "w") as f:
                f.write(throughput_markdown(tp, a.threads))
            print(throughput_markdown(tp, a.threads))


if __name__ == "__main__":
    main()
