#!/usr/bin/env python3
"""gradc's recompute against the exact optimum: Checkmate's MILP, solved by HiGHS or CBC.

    python3 bench/remat_ilp.py [--exporter build/bench/remat_ilp_export] [--time-limit 300]
                               [--cases mlp4,mlp8,...] [--out bench/results] [--forward-only]
                               [--solver highs|cbc] [--formulation tight|checkmate]
                               [--order program|gradc] [--cutoff] [--start]

For each case, bench/remat_ilp_export writes the training step (gradients as outputs, one
micro-batch) with gradc's cost model: FLOPs per node, bytes per storage-owning node, kernel
workspace, dependences, the persistent bytes, and gradc's own choice (--remat auto) at a few
budgets between its smallest feasible budget and the step without recompute, with the plan's
scheduled computations. This script writes Checkmate's MILP (Jain et al., "Checkmate: Breaking
the Memory Wall with Optimal Tensor Rematerialization", MLSys 2020) for the same graph, cost
model and budgets, and solves it with HiGHS (the npm package `highs`, HiGHS compiled to
WebAssembly, run by bench/highs_solve.mjs under node; single-threaded) or CBC (Debian's
coinor-cbc, one thread). `scripts/setup.sh --with-ilp-solver` installs both.

The MILP, over a topological order 0..n-1 of the nodes as Checkmate's stages:
  R[t][i]  node i is computed in stage t (i <= t; R[t][t] = 1: stage t computes node t)
  S[t][i]  node i's storage is kept entering stage t (i < t)
  F[t][i][k]  i's storage is freed right after node k runs in stage t (i a dependence of k,
           or k itself): exactly when k ran, i is not kept into stage t+1, and no later node
           of stage t reads it (Checkmate's linearisation: 1 - F <= hazards, kappa (1 - F) >=
           hazards; --formulation tight writes it differently, see write_lp_tight)
  U[t][k]  bytes held while node k runs in stage t: persistent + kept storage + what stage t
           computed so far - what it freed; U[t][k] + workspace(k) R[t][k] <= budget
  R[t][k] <= R[t][i] + S[t][i] for every dependence i of k; S[t+1][i] <= R[t][i] + S[t][i];
  graph outputs (the loss and the gradients) are kept from their stage to the end.
  Objective: min sum_t sum_i flops(i) R[t][i]; recompute = objective - sum_i flops(i).
The order (--order):
  program  the schedule pass's order of the step without recompute, for every budget.
  gradc    per budget, the order in which gradc's scheduled plan first computes each node.
           Stage t is then the stretch of gradc's plan that ends with node t's first
           computation, so gradc's plan is a point of the MILP (plan_as_solution builds it,
           and gives the peak it has in the MILP's memory model) unless it recomputes a node
           twice in one stretch or holds two copies of one node; the MILP's optimum over
           this order is then <= gradc's cost.
--cutoff adds objective <= gradc's cost (plus 1e-7 relative) as a row (CBC: its cutoff): a
proven optimum below it is the optimum, and "infeasible" means no plan over this order costs
gradc's recompute or less ("above gradc" in the table). --start gives HiGHS gradc's plan as a
MIP start (--order gradc).
Differences from gradc's own model, which the table's notes account for: the MILP fixes the
order within a stage (gradc's schedule pass reorders each plan), may recompute backward nodes
(gradc recomputes forward nodes only; --forward-only restricts the MILP to that), counts a
multi-result node's results as one storage, and folds views into their owners (as gradc's
liveness does).
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
    # gpt-mini as bundled (4 blocks, batch 16 x 128 tokens, d_model 256): not run by default
    # (--cases gptmini), its solves take longer.
    "gptmini": ("models/gpt-mini.yaml", []),
}
DEFAULT_CASES = ["mlp4", "mlp8", "gpt2l", "lstm8"]


def write_lp_checkmate(graph, budget, path, forward_only=False):
    """Checkmate's formulation as published (see the module docstring); returns (binaries, rows)."""
    m = Model(graph, budget, forward_only)
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
        for i in range(t):  # a node's results are computed together (Model.has_r)
            group = m.members[m.group[i]]
            if len(group) > 1:
                if group[-1] >= t:
                    fixed.append((R(t, i), 0))
                elif i != group[0]:
                    rows.append(f"{R(t, i)} - {R(t, group[0])} = 0")
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


class Model:
    """The MILP's facts shared by the LP writers and the start built from gradc's plan."""

    def __init__(self, graph, budget, forward_only):
        nodes = graph["nodes"]
        self.n = n = len(nodes)
        self.deps = [sorted(set(x["deps"])) for x in nodes]
        self.users = [[] for _ in range(n)]
        for k in range(n):
            for i in self.deps[k]:
                self.users[i].append(k)
        kib = lambda b: b / 1024.0
        self.cost = [x["flops"] / 1e6 for x in nodes]
        self.mem = [kib(x["bytes"]) for x in nodes]
        self.ws = [kib(x["workspace"]) for x in nodes]
        self.persistent = kib(graph["persistent_bytes"])
        self.cap = kib(budget)
        self.out = [x["output"] for x in nodes]
        # A node recomputable in a later stage than its own.
        self.again = [not forward_only or x["phase"] == "fwd" for x in nodes]
        # The last stage in which some user of i can run (n: kept to the end).
        self.last_use = [n if self.out[i] else max([n - 1 if self.again[j] else j for j in self.users[i]], default=-1)
                         for i in range(n)]
        # A node with several storage-owning results is several ILP nodes (consecutive in every
        # order: the exporter's and gradc's); they are computed together.
        self.group = [x.get("group", i) for i, x in enumerate(nodes)]
        self.members = {}
        for i, gr in enumerate(self.group):
            self.members.setdefault(gr, []).append(i)
        for group in self.members.values():
            assert group == list(range(group[0], group[-1] + 1)), "a group's ILP nodes are consecutive"
        self._r = {}

    def has_s(self, t, i):
        return i < t < self.n and t <= self.last_use[i]

    def has_r(self, t, i):
        """R[t][i] exists in the tight formulation (see write_lp_tight)."""
        if t not in self._r:
            r = [False] * (t + 1)
            r[t] = True
            for v in range(t - 1, -1, -1):
                if self.again[v] and not self.out[v]:
                    r[v] = self.has_s(t + 1, v) or any(v < j <= t and r[j] for j in self.users[v])
                group = self.members[self.group[v]]
                if v == group[0] and len(group) > 1:
                    if t <= group[-1]:  # stages group[0]..group[-1] are the node's first run
                        both = False
                    else:  # recomputed: all results or none (none of them a graph output)
                        both = any(r[j] for j in group) and all(self.again[j] and not self.out[j] for j in group)
                    for j in group:
                        if j < t:
                            r[j] = both
            self._r[t] = r
        return i <= t and self._r[t][i]


def write_lp_tight(graph, budget, path, forward_only=False, cutoff=None):
    """The same MILP (same optimum), written tighter; returns (binaries, rows).

    Differences from write_lp_checkmate, each preserving the optimal objective:
    - Frees: only Checkmate's upper bounds, disaggregated: F[t][i][k] <= R[t][k],
      F[t][i][k] + S[t+1][i] <= 1, F[t][i][k] + R[t][j] <= 1 for every user j of i with
      k < j <= t, and sum_k F[t][i][k] <= R[t][i] + S[t][i]. For binaries these allow F = 1
      exactly where Checkmate's definition sets it (the last computed reader in the stage, i
      not kept) and nowhere else; F = 0 there is allowed too, but a free only lowers U, so
      every solution of this model is dominated by one with Checkmate's F, and the lower
      bounds (which force the free) are dropped. The LP relaxation is much tighter than
      Checkmate's kappa aggregation, which lets a fractional F approach 1.
    - No F for a storage of zero bytes or for a graph output (they never change U).
    - Useless work removed: R[t][i] (i < t) only where some user j of i with i < j <= t can be
      computed in stage t, or i can be kept into stage t+1; S[t][i] only where some user of i
      can run in stage t or later (or i is an output). Validity: take any optimal solution
      with Checkmate's frees and repeatedly (a) drop R[t][i] = 1 when no user of i is computed
      later in stage t and S[t+1][i] = 0, (b) drop S[t][i] = 1 when no user of i is computed
      in stage t and S[t+1][i] = 0. Neither breaks a dependence or keep constraint (nothing
      reads what is dropped), neither raises the objective, and neither raises any U[t][k]:
      (a) removes an allocation freed right after it was made, and the dependences it freed
      are then freed at an earlier reader or, if held and unread, dropped by (b); (b) removes a
      storage Checkmate's model holds through the whole stage without freeing it. Each step
      removes a one, so it ends, at an optimal solution satisfying every cut below:
        R[t][i] <= S[t+1][i] + sum_{users j, i < j <= t} R[t][j]   (i < t, not an output)
        S[t][i] <= S[t+1][i] + sum_{users j, j <= t} R[t][j]        (not an output)
      Variables those cuts force to zero in every stage (no user can run) are not written.
    - cutoff: objective <= cutoff as a row (an incumbent's cost: prunes without changing the
      optimum when the optimum is below it).
    """
    m = Model(graph, budget, forward_only)
    n = m.n
    R = lambda t, i: f"R_{t}_{i}"
    S = lambda t, i: f"S_{t}_{i}"
    F = lambda t, i, k: f"F_{t}_{i}_{k}"
    U = lambda t, k: f"U_{t}_{k}"
    num = lambda c: f"{c:.6f}"
    rows, binaries, fixed, obj = [], [], [], []
    has_r = m.has_r

    for t in range(n):
        rs = [i for i in range(t + 1) if has_r(t, i)]
        ss = [i for i in range(t) if m.has_s(t, i)]
        for i in rs:
            binaries.append(R(t, i))
            if m.cost[i] > 0:
                obj.append(f"+ {num(m.cost[i])} {R(t, i)}")
        fixed.append((R(t, t), 1))
        for i in ss:
            binaries.append(S(t, i))
            if m.out[i]:
                fixed.append((S(t, i), 1))
        present = lambda i: ([R(t, i)] if has_r(t, i) else []) + ([S(t, i)] if m.has_s(t, i) else [])
        # Dependences: computed in this stage or kept into it.
        for k in rs:
            for i in m.deps[k]:
                have = present(i)
                rows.append(f"{R(t, k)}" + "".join(f" - {v}" for v in have) + " <= 0")
        # Keep only what exists.
        for i in ss:
            before = ([R(t - 1, i)] if has_r(t - 1, i) else []) + ([S(t - 1, i)] if m.has_s(t - 1, i) else [])
            if m.out[i] and t - 1 == i:
                continue
            rows.append(f"{S(t, i)}" + "".join(f" - {v}" for v in before) + " <= 0")
        # A node's results are computed together.
        for i in rs:
            group = m.members[m.group[i]]
            if i != group[0] and group[-1] < t:
                rows.append(f"{R(t, i)} - {R(t, group[0])} = 0")
        # Usefulness cuts (not for a group's members: computed together, each need not be useful).
        for i in rs:
            if i == t or m.out[i] or len(m.members[m.group[i]]) > 1:
                continue
            rhs = ([S(t + 1, i)] if m.has_s(t + 1, i) else []) + [R(t, j) for j in m.users[i] if i < j <= t and has_r(t, j)]
            rows.append(f"{R(t, i)}" + "".join(f" - {v}" for v in rhs) + " <= 0")
        for i in ss:
            if m.out[i]:
                continue
            rhs = ([S(t + 1, i)] if m.has_s(t + 1, i) else []) + [R(t, j) for j in m.users[i] if j <= t and has_r(t, j)]
            rows.append(f"{S(t, i)}" + "".join(f" - {v}" for v in rhs) + " <= 0")
        # Frees: after k (a reader of i, or i itself) in stage t.
        frees = {k: [] for k in rs}  # k -> storages freed after it
        for i in range(t + 1):
            if m.out[i] or m.mem[i] <= 0 or not present(i):
                continue
            points = [k for k in ([i] if has_r(t, i) else []) + [j for j in m.users[i] if j <= t and has_r(t, j)]]
            if not points:
                continue
            for k in points:
                v = F(t, i, k)
                binaries.append(v)
                frees[k].append(i)
                rows.append(f"{v} - {R(t, k)} <= 0")
                if m.has_s(t + 1, i):
                    rows.append(f"{v} + {S(t + 1, i)} <= 1")
                for j in points:
                    if j > k:
                        rows.append(f"{v} + {R(t, j)} <= 1")
            rows.append("".join(f" + {F(t, i, k)}" for k in points)[3:] + "".join(f" - {v}" for v in present(i)) + " <= 0")
        # Memory: U[t][k] is what is held while k runs, for each k computable in stage t
        # (between two of them nothing is allocated, so the budget binds there only).
        held = "".join(f" - {num(m.mem[i])} {S(t, i)}" for i in ss if m.mem[i] > 0)
        prev = None
        for k in rs:
            if prev is None:
                expr, rhs = f"{U(t, k)}{held}", m.persistent
            else:
                expr = f"{U(t, k)} - {U(t, prev)}" + "".join(f" + {num(m.mem[i])} {F(t, i, prev)}" for i in frees[prev])
                rhs = 0.0
            if m.mem[k] > 0:
                expr += f" - {num(m.mem[k])} {R(t, k)}"
            rows.append(f"{expr} = {num(rhs)}")
            ws = f" + {num(m.ws[k])} {R(t, k)}" if m.ws[k] > 0 else ""
            rows.append(f"{U(t, k)}{ws} <= {num(m.cap)}")
            prev = k
    if cutoff is not None and obj:
        rows.append(" ".join(obj)[2:] + f" <= {num(cutoff)}")
    with open(path, "w") as f:
        f.write("Minimize\n obj: " + (" ".join(obj)[2:] if obj else "0 R_0_0") + "\nSubject To\n")
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


def reorder(graph, order):
    """The graph with its nodes in `order` (a list of old indices, a topological order)."""
    new = {old: k for k, old in enumerate(order)}
    g = dict(graph)
    g["nodes"] = [dict(graph["nodes"][old], deps=[new[d] for d in graph["nodes"][old]["deps"]]) for old in order]
    return g


def plan_as_solution(m, seq):
    """gradc's plan as a point of the MILP over its own order (stage t ends with node t's first
    computation). seq: the plan's computations in execution order, each (node, [positions in
    seq of the instances it reads]). Returns (values {column: value} with Checkmate's frees,
    the plan's peak in Checkmate's memory model in bytes, notes on what the MILP cannot
    express). Where the notes are empty and the peak is <= the budget, the values are a
    feasible solution of write_lp_tight's model (and of write_lp_checkmate's) and cost what
    gradc's plan costs."""
    n = m.n
    notes = []
    # stage_of[p]: the stage whose segment holds position p (the first computation at or after p).
    seen, stage_of = set(), []
    first = {}
    for p, (node, _) in enumerate(seq):
        if node not in seen:
            seen.add(node)
            first[node] = p
    if sorted(first) != list(range(n)) or any(first[a] > first[b] for a, b in zip(range(n), range(1, n))):
        raise ValueError("the plan's first computations are not the MILP's stage order")
    t = 0
    for p, (node, _) in enumerate(seq):
        if t >= n:
            raise ValueError("the plan computes after its last new node")
        stage_of.append(t)
        if p == first[t]:
            t += 1
    last_read = [-1] * len(seq)  # the last stage in which an instance is read
    for q, (_, reads) in enumerate(seq):
        for p in reads:
            last_read[p] = max(last_read[p], stage_of[q])
    R, S = set(), set()
    for p, (i, _) in enumerate(seq):
        t = stage_of[p]
        if (t, i) in R:
            notes.append(f"node {i} computed twice in stage {t}")
        R.add((t, i))
        end = n - 1 if m.out[i] else last_read[p]
        for u in range(t + 1, end + 1):
            if (u, i) in S:
                notes.append(f"two instances of node {i} held into stage {u}")
            S.add((u, i))
    for (t, i) in R:
        if (t, i) in S:
            notes.append(f"node {i} recomputed in stage {t} while an earlier instance is held")
    for (t, i) in R:
        if not m.has_r(t, i):
            notes.append(f"R[{t}][{i}] is outside the tight model")
    for (t, i) in S:
        if not m.has_s(t, i):
            notes.append(f"S[{t}][{i}] is outside the tight model")
    values = {f"R_{t}_{i}": 1 for (t, i) in R}
    values.update({f"S_{t}_{i}": 1 for (t, i) in S})
    peak = 0.0
    for t in range(n):
        computed = sorted(i for i in range(t + 1) if (t, i) in R)
        u = m.persistent + sum(m.mem[i] for i in range(t) if (t, i) in S)
        frees_after = {}
        for i in range(t + 1):
            if m.out[i] or m.mem[i] <= 0 or (t + 1, i) in S:
                continue
            points = [k for k in computed if k == i or k in m.users[i]]
            if points:
                frees_after.setdefault(points[-1], []).append(i)
                values[f"F_{t}_{i}_{points[-1]}"] = 1
        for k in range(t + 1):  # U of a node not computed: what is held when its turn passes
            if (t, k) not in R:
                if m.has_r(t, k):
                    values[f"U_{t}_{k}"] = u
                continue
            u += m.mem[k]
            values[f"U_{t}_{k}"] = u
            peak = max(peak, u + m.ws[k])
            u -= sum(m.mem[i] for i in frees_after.get(k, []))
    return values, peak * 1024.0, sorted(set(notes))

def solve_cbc(lp, limit, cutoff=None):
    """CBC on the LP file: (status, objective of the best integer solution or None, lower
    bound or None, wall seconds)."""
    sol = lp + ".sol"
    start = time.time()
    cmd = ["nice", "-n", "10", "cbc", lp, "sec", str(limit), "threads", "1"]
    if cutoff is not None:
        cmd += ["cutoff", f"{cutoff:.6f}"]
    p = subprocess.run(cmd + ["solve", "solu", sol], capture_output=True, text=True)
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


HIGHS_STATUS = {"optimal": "optimal", "infeasible": "infeasible", "timeLimit": "time limit",
                "objectiveBound": "cutoff reached"}


def solve_highs(lp, limit, start=None, values=None):
    """HiGHS (bench/highs_solve.mjs) on the LP file, one thread; same result as solve_cbc.
    start: a MIP start {column: value}. (A cutoff is a row of the LP: HiGHS's objective_bound
    is a simplex stopping rule, not a MIP cutoff.)"""
    cmd = ["nice", "-n", "10", "node", os.path.join(ROOT, "bench", "highs_solve.mjs"), lp, "--time-limit", str(limit)]
    if values is not None:  # a dict to fill with the best solution's nonzero columns
        cmd.append("--values")
    if start is not None:
        path = lp + ".start.json"
        with open(path, "w") as f:
            json.dump(start, f)
        cmd += ["--start", path]
    begin = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.time() - begin
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-2000:])
        return "solver error", None, None, wall
    r = json.loads(p.stdout.strip().splitlines()[-1])
    status = HIGHS_STATUS.get(r["status"], r["status"])
    if status == "time limit" and r["objective"] is None:
        status = "time limit, no solution"
    if values is not None:
        values.update(r.get("values", {}))
    bound = r["bound"]
    if status == "optimal" and bound is None:
        bound = r["objective"]
    return status, r["objective"], bound, wall


def write_report(rows, out, forward_only, suffix=""):
    """remat_ilp[_forward_only][suffix].json and .md under `out`; prints the table."""
    os.makedirs(out, exist_ok=True)
    suffix = ("_forward_only" if forward_only else "") + suffix
    with open(os.path.join(out, f"remat_ilp{suffix}.json"), "w") as f:
        json.dump(rows, f, indent=1)
    pct = lambda x, fwd: "—" if x is None else f"{100.0 * x / fwd:.1f}%"
    first = rows[0] if rows else {}
    setting = f"{first.get('solver', 'cbc')}, {first.get('formulation', 'checkmate')} formulation, stages in " + \
        ("gradc's order per budget" if first.get("order") == "gradc" else "the schedule pass's order of the step") + \
        (", gradc's cost as cutoff" if first.get("cutoff") else "") + (", gradc's plan as MIP start" if first.get("start") else "")
    md = ["# gradc's recompute vs the optimum (Checkmate's MILP)" + (", forward recompute only" if forward_only else ""), "",
          f"Generated by `bench/remat_ilp.py` ({setting}; at most {first.get('time_limit_s', '?')} s per solve, one",
          "thread). Recompute as a share of one forward's FLOPs. Where the solver stopped on its time limit, the MILP",
          "column gives its best solution and its proven lower bound (>= x). \"above gradc\": no solution of the",
          "MILP costs gradc's recompute or less. \"gradc's plan in the MILP\": the peak gradc's plan has in",
          "the MILP's memory model (--order gradc), which must be <= the budget for the plan to be a MILP solution.", "",
          "| case | nodes | budget (bytes) | gradc | gradc plan | gradc's plan in the MILP | MILP | MILP status (solve time) | gradc / optimum |",
          "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        fwd = r["forward_flops"]
        ratio = "—"
        gr, ilp, lb = r["gradc_recompute"], r["ilp_recompute"], r["ilp_lower_bound"]
        if gr is not None and ilp is not None and r["ilp_status"] == "optimal":
            ratio = "equal" if abs(gr - ilp) <= 1e-6 * fwd else ("inf" if ilp <= 0 else f"{gr / ilp:.3f}x")
        milp = pct(ilp, fwd)
        if r["ilp_status"] == "above gradc (cutoff)":
            milp, ratio = f"> {pct(gr, fwd)}", "< 1 (gradc better)"
        elif r["ilp_status"] != "optimal" and lb is not None:
            milp = (milp + ", " if ilp is not None else "") + ">= " + pct(max(lb, 0), fwd)
            if gr is not None:
                ratio = "equal (bound)" if lb >= gr - 1e-6 * fwd else (f"<= {gr / lb:.3f}x" if lb > 0 else "—")
                if lb > 0 and ilp is not None and 0 < ilp < gr:
                    ratio = f"{gr / ilp:.3f}x to {gr / lb:.3f}x"
        inside = "—"
        if r.get("plan_peak_in_milp") is not None:
            inside = f"{r['plan_peak_in_milp']:,}" + (" (fits)" if r["plan_peak_in_milp"] <= r["budget"] else " (over)")
            if r.get("plan_not_expressible"):
                inside += "; " + "; ".join(r["plan_not_expressible"][:2])
        md.append(f"| {r['case']} | {r['nodes']} | {r['budget']:,} | "
                  f"{pct(gr, fwd) if r['gradc_fits'] else 'does not fit'} | "
                  f"{r['gradc_plan'] or ''} | {inside} | {milp} | {r['ilp_status']} ({r['solve_s']} s) | {ratio} |")
    with open(os.path.join(out, f"remat_ilp{suffix}.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exporter", default=os.path.join(ROOT, "build", "bench", "remat_ilp_export"))
    ap.add_argument("--time-limit", type=int, default=300, help="seconds per solve")
    ap.add_argument("--cases", default=",".join(DEFAULT_CASES), help="of " + ", ".join(CASES))
    ap.add_argument("--budgets", default="0,0.25,0.5,0.75")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--forward-only", action="store_true",
                    help="let the MILP recompute forward nodes only (gradc's space); default: any node (Checkmate's)")
    ap.add_argument("--solver", choices=["highs", "cbc"], default="highs")
    ap.add_argument("--formulation", choices=["tight", "checkmate"], default="tight")
    ap.add_argument("--order", choices=["program", "gradc"], default="program",
                    help="the MILP's stages: the schedule pass's order of the step without recompute (program), "
                         "or, per budget, the order in which gradc's scheduled plan first computes each node")
    ap.add_argument("--cutoff", action="store_true", help="prune above gradc's cost (objective <= gradc's)")
    ap.add_argument("--start", action="store_true", help="--order gradc, HiGHS: gradc's plan as the MIP start")
    ap.add_argument("--keep-lp", help="write each LP file (and start) into this folder")
    ap.add_argument("--suffix", default="", help="appended to the result files' names")
    a = ap.parse_args()
    rows = []
    for name in a.cases.split(","):
        spec, sets = CASES[name]
        cmd = [a.exporter, os.path.join(ROOT, spec)] + sum((["--set", s] for s in sets), []) + ["--budgets", a.budgets]
        graph = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
        n = len(graph["nodes"])
        total = sum(x["flops"] for x in graph["nodes"])
        for g in graph["gradc"]:
            model_graph, seq = graph, None
            if a.order == "gradc" or a.start:
                if not g["fits"] or "sequence" not in g:
                    sys.exit(f"{name}: no gradc plan at budget {g['budget']}")
                order = []
                for node, _ in g["sequence"]:
                    if node not in order:
                        order.append(node)
                new = {old: k for k, old in enumerate(order)}
                seq = [(new[node], reads) for node, reads in g["sequence"]]
                if a.order == "gradc":
                    model_graph = reorder(graph, order)
            gradc_obj = None if g.get("recompute_flops") is None else (total + g["recompute_flops"]) / 1e6
            cutoff = gradc_obj * (1 + 1e-7) + 1e-6 if a.cutoff and gradc_obj is not None else None
            start, plan_peak, notes = None, None, []
            if seq is not None and a.order == "gradc":
                values, plan_peak, notes = plan_as_solution(Model(model_graph, g["budget"], a.forward_only), seq)
                if a.start:
                    start = values
            with tempfile.TemporaryDirectory() as d:
                lp = os.path.join(a.keep_lp or d, f"{name}_{g['budget']}.lp")
                if a.formulation == "tight":
                    nbin, nrows = write_lp_tight(model_graph, g["budget"], lp, a.forward_only, cutoff)
                else:
                    nbin, nrows = write_lp_checkmate(model_graph, g["budget"], lp, a.forward_only)
                    if a.cutoff and a.solver == "highs":
                        sys.exit("--cutoff with HiGHS needs --formulation tight (the cutoff is a row of its LP)")
                values = {}
                if a.solver == "highs":
                    status, objective, bound, wall = solve_highs(lp, a.time_limit, start, values)
                else:
                    status, objective, bound, wall = solve_cbc(lp, a.time_limit, cutoff)
            if cutoff is not None and status in ("infeasible", "cutoff reached"):
                status, bound = "above gradc (cutoff)", gradc_obj
            ilp = None if objective is None else objective * 1e6 - total
            lower = None if bound is None else bound * 1e6 - total
            row = {"case": name, "nodes": n, "binaries": nbin, "rows": nrows, "budget": g["budget"],
                   "forward_flops": graph["forward_flops"], "gradc_fits": g["fits"],
                   "gradc_recompute": g.get("recompute_flops"), "gradc_plan": g.get("plan"),
                   "gradc_peak": g.get("peak"), "solver": a.solver, "formulation": a.formulation,
                   "order": a.order, "cutoff": a.cutoff, "start": a.start,
                   "plan_peak_in_milp": None if plan_peak is None else round(plan_peak),
                   "plan_not_expressible": notes, "ilp_status": status, "ilp_recompute": ilp,
                   "ilp_lower_bound": lower, "time_limit_s": a.time_limit, "solve_s": round(wall, 1)}
            # What the MILP's best solution recomputes: node (op spec) -> stages computing it again.
            again = {}
            for v, x in values.items():
                if v.startswith("R_") and x > 0.5:
                    t, i = map(int, v[2:].split("_"))
                    if t != i:
                        node = model_graph["nodes"][i]
                        key = f"{i} {node['op']} {node['spec']}"
                        again[key] = again.get(key, 0) + 1
            row["ilp_recomputes"] = again
            if seq is not None and a.order == "gradc":
                mine, seen = {}, set()
                for i, _ in seq:
                    if i in seen:
                        node = model_graph["nodes"][i]
                        key = f"{i} {node['op']} {node['spec']}"
                        mine[key] = mine.get(key, 0) + 1
                    seen.add(i)
                row["gradc_recomputes"] = mine
            rows.append(row)
            print(json.dumps(row), flush=True)
    write_report(rows, a.out, a.forward_only, a.suffix)


if __name__ == "__main__":
    main()
