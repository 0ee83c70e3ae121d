"""The `fusion` section of bench/compare.py: gradc with elementwise fusion (the default) and with
--no-fuse, against PyTorch eager, alternated run by run (the order rotates each repeat), glibc's
default malloc settings, one intra-op thread unless --threads says otherwise. Per configuration:
median step times and their ratios, and each gradc variant's planned and measured (tracked) peak,
so the memory a fused region removes shows as the difference of the two plans.
"""


def section_fusion(runner, cfg, log, med, fmt_s, ratio, fmt_ratio):
    rows = []
    systems = [("fused", "gradc", []), ("unfused", "gradc", ["--no-fuse"]), ("torch", "torch", "eager")]
    for model, batch, steps, warmup in cfg["fusion"]:
        times = {name: [] for name, _, _ in systems}
        peaks = {}
        for rep in range(cfg["repeats"]):
            order = systems[rep % 3:] + systems[:rep % 3]
            for name, kind, arg in order:
                if kind == "gradc":
                    r = runner.gradc_train(model, batch, steps, arg)
                    if r["rc"] == 0:
                        peaks[name] = (r["peak_planned"], r["peak_tracked"])
                else:
                    r = runner.torch_train(model, batch, steps, arg)
                times[name].append(med(r["step_times"][warmup:]) if r["rc"] == 0 else None)
        row = {"model": model, "batch": batch, "runs_s": times,
               "fused_s": med(times["fused"]), "unfused_s": med(times["unfused"]), "torch_s": med(times["torch"]),
               "fused_peak_planned": peaks.get("fused", (None, None))[0],
               "fused_peak_measured": peaks.get("fused", (None, None))[1],
               "unfused_peak_planned": peaks.get("unfused", (None, None))[0],
               "unfused_peak_measured": peaks.get("unfused", (None, None))[1]}
        log(f"fusion {model} b={batch}: fused {fmt_s(row['fused_s'])}, unfused {fmt_s(row['unfused_s'])}, "
            f"torch {fmt_s(row['torch_s'])}; fused/torch {fmt_ratio(ratio(row['fused_s'], row['torch_s']))}, "
            f"fused/unfused {fmt_ratio(ratio(row['fused_s'], row['unfused_s']))}")
        rows.append(row)
    return rows


def format_fusion(rows, cfg, out_dir, fmt_s, ratio, fmt_ratio, fmt_bytes):
    md = ["## Elementwise fusion", "",
          "gradc with fused elementwise regions (generated kernels, the default) and with `--no-fuse`, against "
          "PyTorch eager; alternated run by run, medians, glibc defaults.", "",
          "| model | batch | fused | --no-fuse | PyTorch eager | fused / PyTorch | --no-fuse / PyTorch | fused / --no-fuse "
          "| peak planned = measured, fused | --no-fuse |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        def peak(kind):
            p, m = r[f"{kind}_peak_planned"], r[f"{kind}_peak_measured"]
            if p is None:
                return "—"
            return fmt_bytes(p) + ("" if p == m else f" (measured {fmt_bytes(m)})")
        md.append(f"| {r['model']} | {r['batch']} | {fmt_s(r['fused_s'])} | {fmt_s(r['unfused_s'])} | "
                  f"{fmt_s(r['torch_s'])} | **{fmt_ratio(ratio(r['fused_s'], r['torch_s']))}** | "
                  f"{fmt_ratio(ratio(r['unfused_s'], r['torch_s']))} | {fmt_ratio(ratio(r['fused_s'], r['unfused_s']))} | "
                  f"{peak('fused')} | {peak('unfused')} |")
    return "\n".join(md)
