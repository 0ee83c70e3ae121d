#!/usr/bin/python3
"""How well the throughput objective's cost model predicts data-parallel steps on CPU ranks.

    /usr/bin/python3 bench/dp_prediction.py [--gradc build/gradc] [--model gpt-mini] [--repeats 2]

Two cost tables: one profiled run on one device, one intra-op thread (`gradc train --profile
--cost-table-out`), and one on two ranks (`--devices 2`, which times the all-reduce too). Then,
for each global batch and table, `gradc train SPEC --set batch=B --objective
throughput --cost-table T --budget 1GiB --synthetic --steps 5` on one device (one thread) and
with `--devices 2` (two Gloo ranks of one thread each on this 2-core machine), alternated
`repeats` times: the plan line's predicted step time against the median measured step time
(steps 2-5). Writes bench/results/dp_prediction.{json,md}.
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
ROOT = os.path.dirname(HERE)


def run(gradc, spec, batch, devices, table, tmp, n):
    mfile = os.path.join(tmp, f"m{n}.json")
    cmd = [gradc, "train", spec, "--set", f"batch={batch}", "--objective", "throughput", "--cost-table", table,
           "--budget", "1GiB", "--synthetic", "--steps", "5", "--metrics-out", mfile]
    if devices > 1:
        cmd += ["--devices", str(devices)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return {"error": r.stderr.strip()[-300:]}
    with open(mfile) as f:
        times = [s["step_time_s"] for s in json.load(f)["steps"]][1:]
    plan = next((line for line in r.stderr.splitlines() if line.startswith("memory plan:")), "")
    predicted = float(plan.split("predicted step time ", 1)[1].split(" s", 1)[0]) if "predicted step time " in plan else None
    return {"measured_s": statistics.median(times), "predicted_s": predicted, "plan": plan.replace("memory plan: ", "")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gradc", default=os.path.join(ROOT, "build", "gradc"))
    ap.add_argument("--model", default="gpt-mini")
    ap.add_argument("--batches", default="8,16,32")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    a = ap.parse_args()
    spec = os.path.join(ROOT, "models", f"{a.model}.yaml")
    batches = [int(b) for b in a.batches.split(",")]
    with tempfile.TemporaryDirectory(prefix="gradc-dp-") as tmp:
        env = dict(os.environ, OMP_NUM_THREADS="1")
        tables = {}
        for profiled in (1, 2):
            tables[profiled] = os.path.join(tmp, f"table{profiled}.json")
            r = subprocess.run([a.gradc, "train", spec, "--synthetic", "--steps", "5", "--profile", "--cost-table-out",
                                tables[profiled]] + (["--devices", "2"] if profiled > 1 else []),
                               capture_output=True, text=True, env=env)
            if r.returncode != 0:
                sys.exit(r.stderr[-400:])
        runs = {(b, d, t): [] for b in batches for d in (1, 2) for t in (1, 2) if t <= d}
        n = 0
        for _ in range(a.repeats):
            for key in runs:
                n += 1
                runs[key].append(run(a.gradc, spec, key[0], key[1], tables[key[2]], tmp, n))
                print(key, runs[key][-1], file=sys.stderr, flush=True)
    rows = []
    for (b, d, t), rs in runs.items():
        ok = [x for x in rs if "error" not in x]
        if not ok:
            rows.append({"batch": b, "devices": d, "table_devices": t, "error": rs[0]["error"]})
            continue
        m = statistics.median(x["measured_s"] for x in ok)
        rows.append({"batch": b, "devices": d, "table_devices": t, "measured_s": m,
                     "predicted_s": ok[0]["predicted_s"], "plan": ok[0]["plan"]})
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "dp_prediction.json"), "w") as f:
        json.dump({"model": a.model, "repeats": a.repeats, "started": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                   "rows": rows}, f, indent=1)
    md = [f"## Predicted vs measured step time, one device and two CPU ranks ({a.model})", "",
          f"`/usr/bin/python3 bench/dp_prediction.py` ({time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC): cost "
          "tables from one profiled run on one device and one on two ranks, one thread each; each run `--objective throughput --cost-table T "
          f"--budget 1GiB`, one intra-op thread per rank, {a.repeats} alternated repeats, median of steps 2-5.", "",
          "| global batch | devices | table profiled on | plan | predicted | measured | predicted / measured |",
          "|---|---|---|---|---|---|---|"]
    for x in rows:
        head = f"| {x['batch']} | {x['devices']} | {x['table_devices']} device(s) |"
        if "error" in x:
            md.append(f"{head} error: {x['error']} | | | |")
            continue
        p = x["predicted_s"]
        plan = x["plan"].split(", predicted step time", 1)[0]
        md.append(f"{head} {plan} | {p:.3f} s | {x['measured_s']:.3f} s | {p / x['measured_s']:.2f} |" if p else
                  f"{head} {plan} | — | {x['measured_s']:.3f} s | — |")
    with open(os.path.join(a.out, "dp_prediction.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
