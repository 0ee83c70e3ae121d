#!/usr/bin/env python3
"""gradc's recompute against the exact optimum: Checkmate's MILP, solved by CBC.

    python3 bench/remat_ilp.py [--exporter build/bench/remat_ilp_export] [--time-limit 120]
                               [--cases mlp4,mlp8,...] [--out bench/results]

For each case, bench/remat_ilp_export writes the training step (gradients as outputs, one
micro-batch) with gradc's cost model: FLOPs per node, bytes per storage-owning node, kernel
workspace, dependences, the persistent bytes, and gradc's own choice (--remat auto) at a few
budgets between its smallest feasible budget and the step without recompute. This script
writes Checkmate's MILP (Jain et al., "Checkmate: Breaking the Memory Wall with Optimal
Tensor Rematerialization", MLSys 2020) for the same graph, cost model and budgets, and solves
it with CBC (Debian's coinor-cbc; `scripts/setup.sh --with-ilp-solver` installs it).

The MILP, over the exported order 0..n-1 (the schedule pass's order of the step without
recompute, a topological order) as Checkmate's stages:
  R[t][i]  node i is computed in stage t (i <= t; R[t][t] = 1: stage t computes node t)
  S[t][i]  node i's storage is kept entering stage t (i < t)
  F[t][i][k]  i's storage is freed right after node k runs in stage t (i a dependence of k,
           or k itself): exactly when k ran, i is not kept into stage t+1, and no later node
           of stage t reads it (Checkmate's linearisation: 1 - F <= hazards, kappa (1 - F) >=
           hazards)
  U[t][k]  bytes held while node k runs in stage t: persistent + kept storage + what stage t
           computed so far - what it freed; U[t][k] + workspace(k) R[t][k] <= budget
  R[t][k] <= R[t][i] + S[t][i] for every dependence i of k; S[t+1][i] <= R[t][i] + S[t][i];
  graph outputs (the loss and the gradients) are kept from their stage to the end.
  Objective: min sum_t sum_i flops(i) R[t][i]; recompute = objective - sum_i flops(i).
Differences from gradc's own model, which the table's notes account for: the MILP fixes that
order within a stage (gradc's schedule pass reorders each plan), may recompute backward nodes
(gradc recomputes forward nodes only), counts a multi-result node's results as one storage,
and folds views into their owners (as gradc's liveness does).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CASES = {
    # Chains: activations (batch 256 x 64) outweigh the layers' parameters and gradients.
    "mlp4": ("models/mlp.yaml", ["depth=4", "batch=256", "hidden=64"]),
    "mlp8": ("models/mlp.yaml", ["depth=8", "batch=256", "hidden=64"]),
    "gpt2l": ("models/gpt-mini.yaml", ["layers=2", "batch=2", "seq=16", "d_model=32", "heads=2"]),
    "lstm8": ("models/lstm-lm.yaml", ["seq=8", "batch=32", "embed=8", "hidden=16", "vocab=8"]),
}


def write_lp(graph, budget, path, forward_only=False):
    nodes = graph["nodes"]
    n = len(nodes)
    deps = [sorted(set(x["deps"])) for x in nodes]
    users = [[] for _ in range(n)]
    for k in range(n):
        for i in deps[k]:
            users[i].append(k)
    kib = lambda b: b / 1024.0
    cost = [x["flops"] / 1e6 for x in nodes]
    mem = [kib(x["bytes"]) for x in nodes]
    ws = [kib(x["workspace"]) for x in nodes]
    persistent = kib(graph["persistent_bytes"])
    cap = kib(budget)
    out = [x["output"] for x in nodes]

    R = lambda t, i: f"R_{t}_{i}"
    S = lambda t, i: f"S_{t}_{i}"
    F = lambda t, i, k: f"F_{t}_{i}_{k}"
    U = lambda t, k: f"U_{t}_{k}"

    def term(c, v):
        return f"{'+' if c >= 0 else '-'} {abs(c):.6f} {v}"

    rows, binaries, fixed, free_vars = [], [], [], []
    obj = []
    for t in range(n):
        for i in range(t + 1):
            binaries.append(R(t, i))
            if cost[i] > 0:
                obj.append(term(cost[i], R(t, i)))
        fixed.append((R(t, t), 1))
        if forward_only:  # recompute forward nodes only, as gradc does
            for i in range(t):
                if nodes[i]["phase"] != "fwd":
                    fixed.append((R(t, i), 0))
        for i in range(t):
            binaries.append(S(t, i))
            if out[i]:
                fixed.append((S(t, i), 1))
        # Dependences: computed in this stage or kept into it.
        for k in range(t + 1):
            for i in deps[k]:
                rows.append(f"{R(t, k)} - {R(t, i)} - {S(t, i)} <= 0")
        # Keep only what exists.
        if t > 0:
            for i in range(t):
                rhs = f" - {S(t - 1, i)}" if i < t - 1 else ""
                rows.append(f"{S(t, i)} - {R(t - 1, i)}{rhs} <= 0")
        # Frees.
        for k in range(t + 1):
            for i in deps[k] + [k]:
                v = F(t, i, k)
                binaries.append(v)
                if out[i]:  # kept to the end
                    fixed.append((v, 0))
                    continue
                later = [j for j in users[i] if k < j <= t]
                hazards = [R(t, j) for j in later]
                keep = S(t + 1, i) if t + 1 < n else None
                kappa = 1 + len(hazards) + (1 if keep else 0)
                # F + (1 - R_tk) + S + sum R >= 1
                expr = f"{v} - {R(t, k)}" + (f" + {keep}" if keep else "") + "".join(f" + {h}" for h in hazards)
                rows.append(f"{expr} >= 0")
                # kappa (1 - F) >= (1 - R_tk) + S + sum R
                expr = f"- {kappa} {v} + {R(t, k)}" + (f" - {keep}" if keep else "") + "".join(f" - {h}" for h in hazards)
                rows.append(f"{expr} >= {1 - kappa}")
        # Memory.
        first = f"{U(t, 0)}" + "".join(f" {term(-mem[i], S(t, i))}" for i in range(t) if mem[i] > 0)
        if mem[0] > 0:
            first += f" {term(-mem[0], R(t, 0))}"
        rows.append(f"{first} = {persistent:.6f}")
        free_vars.append(U(t, 0))
        for k in range(1, t + 1):
            expr = f"{U(t, k)} - {U(t, k - 1)}"
            if mem[k] > 0:
                expr += f" {term(-mem[k], R(t, k))}"
            for i in deps[k - 1] + [k - 1]:
                if mem[i] > 0:
                    expr += f" {term(mem[i], F(t, i, k - 1))}"
            rows.append(f"{expr} = 0")
            free_vars.append(U(t, k))
        for k in range(t + 1):
            expr = U(t, k) + (f" {term(ws[k], R(t, k))}" if ws[k] > 0 else "")
            rows.append(f"{expr} <= {cap:.6f}")

    with open(path, "w") as f:
        f.write("Minimize\n obj: " + (" ".join(obj) if obj else "0 R_0_0") + "\nSubject To\n")
        for r, row in enumerate(rows):
            f.write(f" c{r}: {row}\n")
        f.write("Bounds\n")
        for v, value in fixed:
            f.write(f" {v} = {value}\n")
        f.write("Binaries\n")
        for b in range(0, len(binaries), 20):
            f.write(" " + " ".join(binaries[b:b + 20]) + "\n")
        f.write("End\n")
    return len(binaries), len(rows)


def solve(lp, limit):
    """CBC on the LP file: (status, objective of the best integer solution or None, lower
    bound or None, wall seconds)."""
    sol = lp + ".sol"
    start = time.time()
    p = subprocess.run(["cbc", lp, "sec", str(limit), "threads", "1", "solve", "solu", sol],
                       capture_output=True, text=True)
    wall = time.time() - start
    log = p.stdout
    number = r"([-0-9.eE+]+)"
    objective = bound = None
    if "Result - Optimal solution found" in log:
        status = "optimal"
    elif "Result - Linear relaxation infeasible" in log or "Result - Problem proven infeasible" in log \
            or "infeasible" in log.split("Result -")[-1].lower():
        status = "infeasible"
    elif "Result - Stopped on time" in log:
        status = "time limit" if "No feasible solution found" not in log else "time limit, no solution"
    else:
        status = "unknown"
    if status in ("optimal", "time limit"):
        m = re.search(r"Objective value:\s+" + number, log)
        if m:
            objective = float(m.group(1))
    m = re.search(r"Lower bound:\s+" + number, log)
    if m:
        bound = float(m.group(1))
    elif status == "optimal":
        bound = objective
    return status, objective, bound, wall


def write_report(rows, out, forward_only):
    """remat_ilp[_forward_only].json and .md under `out`; prints the table."""
    os.makedirs(out, exist_ok=True)
    suffix = "_forward_only" if forward_only else ""
    with open(os.path.join(out, f"remat_ilp{suffix}.json"), "w") as f:
        json.dump(rows, f, indent=1)
    pct = lambda x, fwd: "—" if x is None else f"{100.0 * x / fwd:.1f}%"
    md = ["# gradc's recompute vs the optimum (Checkmate's MILP, CBC)", "",
          "Generated by `bench/remat_ilp.py`; recompute as a share of one forward's FLOPs. Where CBC stopped",
          "on its time limit, the MILP column gives its best solution and its proven lower bound (>= x).", "",
          "| case | nodes | budget (bytes) | gradc | gradc plan | MILP | MILP status (solve time) | gradc / optimum |",
          "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        fwd = r["forward_flops"]
        ratio = "—"
        if r["gradc_recompute"] is not None and r["ilp_recompute"] is not None and r["ilp_status"] == "optimal":
            ratio = "equal" if abs(r["gradc_recompute"] - r["ilp_recompute"]) <= 1e-6 * fwd else \
                ("inf" if r["ilp_recompute"] <= 0 else f"{r['gradc_recompute'] / r['ilp_recompute']:.2f}x")
        milp = pct(r["ilp_recompute"], fwd)
        if r["ilp_status"] != "optimal" and r["ilp_lower_bound"] is not None:
            milp = (milp + ", " if r["ilp_recompute"] is not None else "") + ">= " + pct(max(r["ilp_lower_bound"], 0), fwd)
            if r["gradc_recompute"] is not None and r["ilp_lower_bound"] > 0:
                ratio = f"<= {r['gradc_recompute'] / r['ilp_lower_bound']:.2f}x"
        md.append(f"| {r['case']} | {r['nodes']} | {r['budget']:,} | "
                  f"{pct(r['gradc_recompute'], fwd) if r['gradc_fits'] else 'does not fit'} | "
                  f"{r['gradc_plan'] or ''} | {milp} | {r['ilp_status']} ({r['solve_s']} s) | {ratio} |")
    if forward_only:
        md[0] += ", forward recompute only"
    with open(os.path.join(out, f"remat_ilp{suffix}.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exporter", default=os.path.join(ROOT, "build", "bench", "remat_ilp_export"))
    ap.add_argument("--time-limit", type=int, default=120)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--budgets", default="0,0.25,0.5,0.75")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--forward-only", action="store_true",
                    help="let the MILP recompute forward nodes only (gradc's space); default: any node (Checkmate's)")
    a = ap.parse_args()
    rows = []
    for name in a.cases.split(","):
        spec, sets = CASES[name]
        cmd = [a.exporter, os.path.join(ROOT, spec)] + sum((["--set", s] for s in sets), []) + ["--budgets", a.budgets]
        graph = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        n = len(graph["nodes"])
        total = sum(x["flops"] for x in graph["nodes"])
        for g in graph["gradc"]:
            with tempfile.TemporaryDirectory() as d:
                lp = os.path.join(d, "m.lp")
                nbin, nrows = write_lp(graph, g["budget"], lp, a.forward_only)
                status, objective, bound, wall = solve(lp, a.time_limit)
            ilp = None if objective is None else objective * 1e6 - total
            lower = None if bound is None else bound * 1e6 - total
            row = {"case": name, "nodes": n, "binaries": nbin, "rows": nrows, "budget": g["budget"],
                   "forward_flops": graph["forward_flops"], "gradc_fits": g["fits"],
                   "gradc_recompute": g.get("recompute_flops"), "gradc_plan": g.get("plan"),
                   "gradc_peak": g.get("peak"), "ilp_status": status, "ilp_recompute": ilp,
                   "ilp_lower_bound": lower, "solve_s": round(wall, 1)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    write_report(rows, a.out, a.forward_only)


if __name__ == "__main__":
    main()
