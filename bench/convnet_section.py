"""The `convnets` section of bench/compare.py: gradc vs PyTorch on the ResNets.

  step time and peak   resnet18-cifar at batch 32: gradc (no remat, --remat sqrt) vs PyTorch
                       eager, checkpoint_sequential (~sqrt(n) segments over the residual
                       blocks) and per-block checkpoint; alternated runs, medians
  largest batch        resnet18-cifar under a budget: gradc's planner (confirmed by a measured
                       step) vs the three PyTorch modes (peak RSS above the idle baseline <= B)
  recompute vs memory  resnet-deep (ResNet-164 at its bundled batch): gradc's plans over a sweep
                       of budgets, next to the sqrt(n) plan of Chen et al.

It reuses compare.py's runners, measurements and tables with its own configuration, and writes
its results under their own name (convnets.json / convnets.md) so the language-model tables are
untouched.
"""

FULL = {
    "steptime": {"resnet18-cifar": ([32], 4, 1)},
    "maxbatch": {"resnet18-cifar": ([512], 16, 512)},
    "planner": {"resnet-deep": 10},
}
QUICK = {
    "steptime": {"resnet18-cifar": ([16], 3, 1)},
    "maxbatch": {"resnet18-cifar": ([384], 16, 256)},
    "planner": {"resnet-deep": 6},
}


def section_convnets(runner, cfg, log, c):
    """c: the compare module (its section functions and helpers)."""
    own = cfg["convnets"]
    return {
        "steptime": c.section_steptime(runner, {"repeats": cfg["repeats"], "steptime": own["steptime"]}, log),
        "maxbatch": c.section_maxbatch(runner, {"maxbatch": own["maxbatch"]}, log),
        "planner": c.section_planner(runner, {"planner": own["planner"]}, log),
    }


def format_convnets(data, cfg, out_dir, c):
    parts = ["# Convolutional networks (ResNets)", ""]
    if data.get("steptime"):
        parts.append(c.format_steptime(data["steptime"], cfg, out_dir))
    if data.get("maxbatch"):
        parts.append(c.format_maxbatch(data["maxbatch"], cfg, out_dir))
    if data.get("planner"):
        parts.append(c.format_planner(data["planner"], cfg, out_dir))
    return "\n\n".join(parts)
