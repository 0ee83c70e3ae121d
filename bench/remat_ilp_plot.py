#!/usr/bin/env python3
"""Recompute against budget for the graphs of bench/remat_ilp.py, one SVG per case:

    /usr/bin/python3 bench/remat_ilp_plot.py [--cases gpt2l,lstm8] [--points 41]

Series, all on the step remat_ilp_export writes (autodiff + dce, gradients as outputs, one
micro-batch, the loss unfused) and its cost model:
  - gradc: `--remat auto` at --points budgets from its smallest feasible one to the step without
    recompute (remat_ilp_export --budgets), a step line: recompute against the budget given;
  - the exact optimum: the MILP's rows for the case in bench/results/remat_ilp_forward_only.json
    (the optimum, or the best solution and the proven bound where the solver stopped on time);
  - sqrt and torch.utils.checkpoint.checkpoint_sequential's k segments: each at its own peak
    (the least budget it fits).
Writes bench/results/remat_ilp_CASE.svg (--out to write elsewhere).
"""
import argparse
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # keep bench/ free of __pycache__
from remat_ilp import CASES, ROOT  # noqa: E402
from svg_axes import frame, ticks  # noqa: E402

COLORS = {"gradc": "#ff7f0e", "optimum": "#000000", "sqrt": "#2ca02c", "checkpoint_sequential": "#8c564b"}


def export(exporter, case, points):
    spec, sets = CASES[case]
    fractions = ",".join(f"{i / (points - 1):.4f}" for i in range(points))
    cmd = [exporter, os.path.join(ROOT, spec)] + sum((["--set", s] for s in sets), []) + ["--budgets", fractions]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def write_svg(path, case, graph, rows):
    fwd = graph["forward_flops"]
    pct = lambda flops: 100.0 * flops / fwd
    gradc = [(g["budget"], pct(g["recompute_flops"])) for g in graph["gradc"] if g["fits"]]
    segments = [(p["peak"], pct(p["recompute_flops"]), p["segments"]) for p in graph["checkpoint_sequential"]
                if p["segments"] > 1]
    sqrt = graph["sqrt"]
    optimum = [(r["budget"], pct(r["ilp_recompute"]), None if r["ilp_status"] == "optimal" else pct(r["ilp_lower_bound"]))
               for r in rows if r["ilp_recompute"] is not None]
    xs = [b for b, _ in gradc] + [p for p, _, _ in segments] + [sqrt["peak"]] + [b for b, _, _ in optimum]
    unit, unitName = (1 << 20, "MiB") if max(xs) >= 16 << 20 else (1 << 10, "KiB")
    x0, x1 = min(xs) * 0.98 / unit, max(xs) * 1.01 / unit
    # The y axis covers gradc and the optimum with room; recompute above it (whole segments
    # recomputed) is drawn on the top edge with its value.
    y1 = max(1.0, 1.5 * max([y for _, y in gradc] + [y for _, y, _ in optimum]))
    W, H, L, R, T, B = 760, 420, 70, 250, 34, 50

    def X(v):
        return L + (v / unit - x0) / (x1 - x0) * (W - L - R)

    def Y(v):
        return H - B - min(v, y1) / y1 * (H - T - B)

    out = frame(W, H, L, R, T, B, f"{case}: recompute vs budget, gradc against the MILP", title_y=20)
    for v in ticks(x0, x1):
        x = L + (v - x0) / (x1 - x0) * (W - L - R)
        out.append(f'<line x1="{x:.1f}" y1="{H - B}" x2="{x:.1f}" y2="{H - B + 4}" stroke="black"/>')
        out.append(f'<text x="{x:.1f}" y="{H - B + 17}" text-anchor="middle">{v:g}</text>')
    for v in ticks(0.0, y1):
        out.append(f'<line x1="{L - 4}" y1="{Y(v):.1f}" x2="{L}" y2="{Y(v):.1f}" stroke="black"/>')
        out.append(f'<line x1="{L}" y1="{Y(v):.1f}" x2="{W - R}" y2="{Y(v):.1f}" stroke="#e0e0e0"/>')
        out.append(f'<text x="{L - 7}" y="{Y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">budget, or a plan\'s own peak ({unitName})</text>')
    out.append(f'<text transform="translate(18,{(T + H - B) / 2}) rotate(-90)" text-anchor="middle">'
               f'recompute (% of one forward)</text>')
    # gradc: recompute at each budget holds until the next budget's.
    steps = []
    for i, (b, y) in enumerate(gradc):
        steps.append((b, y))
        if i + 1 < len(gradc):
            steps.append((gradc[i + 1][0], y))
    out.append('<polyline points="' + " ".join(f"{X(b):.1f},{Y(y):.1f}" for b, y in steps) +
               f'" fill="none" stroke="{COLORS["gradc"]}" stroke-width="2"/>')
    for b, y in gradc:
        out.append(f'<circle cx="{X(b):.1f}" cy="{Y(y):.1f}" r="2.5" fill="{COLORS["gradc"]}"/>')
    for b, y, lower in optimum:
        c = COLORS["optimum"]
        if lower is not None:
            out.append(f'<line x1="{X(b):.1f}" y1="{Y(y):.1f}" x2="{X(b):.1f}" y2="{Y(lower):.1f}" stroke="{c}"/>')
            out.append(f'<line x1="{X(b) - 4:.1f}" y1="{Y(lower):.1f}" x2="{X(b) + 4:.1f}" y2="{Y(lower):.1f}" stroke="{c}"/>')
        out.append(f'<rect x="{X(b) - 4:.1f}" y="{Y(y) - 4:.1f}" width="8" height="8" fill="none" stroke="{c}" stroke-width="1.5"/>')
    # Points above the axis: a marker on the top edge; those at one peak share a label, and
    # labels close together go to separate rows.
    above = {}
    for p, y, k in segments:
        if y > y1:
            above.setdefault((p, "checkpoint_sequential"), []).append((k, y))
        else:
            out.append(f'<circle cx="{X(p):.1f}" cy="{Y(y):.1f}" r="3.5" fill="{COLORS["checkpoint_sequential"]}"/>')
    sq = pct(sqrt["recompute_flops"])
    if sq > y1:
        above.setdefault((sqrt["peak"], "sqrt"), []).append((None, sq))
    else:
        out.append(f'<circle cx="{X(sqrt["peak"]):.1f}" cy="{Y(sq):.1f}" r="3.5" fill="{COLORS["sqrt"]}"/>')
    last_x, row = None, 0
    for (p, series), members in sorted(above.items()):
        c = COLORS[series]
        ks = [k for k, _ in members if k is not None]
        lo, hi = min(y for _, y in members), max(y for _, y in members)
        name = "sqrt" if series == "sqrt" else "k=" + ",".join(map(str, ks))
        value = f"{lo:.0f}%" if round(lo) == round(hi) else f"{lo:.0f}-{hi:.0f}%"
        row = (row + 1) % 3 if last_x is not None and X(p) - last_x < 70 else 0
        last_x = X(p)
        out.append(f'<path d="M{X(p) - 5:.1f},{T + 6} L{X(p) + 5:.1f},{T + 6} L{X(p):.1f},{T - 2} Z" fill="{c}"/>')
        out.append(f'<text x="{X(p):.1f}" y="{T + 18 + 11 * row}" fill="{c}" font-size="9" text-anchor="middle">'
                   f'{name}: {value}</text>')
    legend = [("gradc (--remat auto)", "gradc"), ("MILP: optimum, or best found", "optimum"), ("sqrt", "sqrt"),
              ("checkpoint_sequential, k segments", "checkpoint_sequential")]
    ly = T + 10
    for text, key in legend:
        if key == "optimum":
            out.append(f'<rect x="{W - R + 16}" y="{ly - 4}" width="8" height="8" fill="none" stroke="{COLORS[key]}" stroke-width="1.5"/>')
        else:
            out.append(f'<circle cx="{W - R + 20}" cy="{ly}" r="4" fill="{COLORS[key]}"/>')
        out.append(f'<text x="{W - R + 30}" y="{ly + 4}">{text}</text>')
        ly += 18
    out.append(f'<text x="{W - R + 14}" y="{ly + 8}" font-size="10">points above {y1:.0f}%: top edge, value shown</text>')
    out.append(f'<text x="{W - R + 14}" y="{ly + 22}" font-size="10">bar: down to the proven lower bound</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exporter", default=os.path.join(ROOT, "build", "bench", "remat_ilp_export"))
    ap.add_argument("--cases", default="gpt2l,lstm8")
    ap.add_argument("--points", type=int, default=41, help="gradc's budgets")
    ap.add_argument("--results", default=os.path.join(ROOT, "bench", "results", "remat_ilp_forward_only.json"))
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    a = ap.parse_args()
    with open(a.results) as f:
        results = json.load(f)
    for case in a.cases.split(","):
        graph = export(a.exporter, case, a.points)
        path = os.path.join(a.out, f"remat_ilp_{case}.svg")
        write_svg(path, case, graph, [r for r in results if r["case"] == case])
        print(path)


if __name__ == "__main__":
    main()
