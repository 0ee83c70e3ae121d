"""GPT-2 small on one GPU in PyTorch, eager and with torch.utils.checkpoint per block: the step
time and peak at a given batch, and the largest batch that fits a memory budget. The PyTorch side
of the GPU comparison in scripts/gpu-check.sh (gradc's side is `gradc-run ARTIFACT --device
cuda`). Prints one JSON object.

    python3 bench/pytorch/gpu_gpt2.py --mode eager --batch 8 --budget-gib 40 [--set vocab=50304]
        [--steps 6] [--largest]

Method: TF32 off (as gradc), AdamW as gradc's default, synthetic tokens; the step is
zero_grad(set_to_none) + forward + loss + backward + optimizer step + loss.item(), timed with
torch.cuda.synchronize before and after; the peak is torch.cuda.max_memory_allocated over the
timed steps (what the caching allocator handed out: the same quantity gradc reports, arena +
ATen's own). --largest doubles the batch, then bisects, until a step fails with out-of-memory
under torch.cuda.set_per_process_memory_fraction(budget / total).
"""
import argparse
import json
import os
import sys
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def run(models, torch, dims, mode, steps):
    gen = torch.Generator().manual_seed(1)
    torch.manual_seed(0)
    model = models.build("gpt2", dims).cuda()
    opt = models.adamw(model.parameters())
    model.train()
    names = model.input_names()
    times, losses = [], []
    torch.cuda.reset_peak_memory_stats()
    for _ in range(steps):
        b = models.make_batch("gpt2", dims, gen)
        x, y = b[names[0]].cuda(), b[names[1]].cuda()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(x, y, mode=mode)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    peak = torch.cuda.max_memory_allocated()
    del model, opt
    torch.cuda.empty_cache()
    return {"losses": losses, "step_times_s": times, "peak_bytes": peak}


def fits(models, torch, dims, mode):
    try:
        run(models, torch, dims, mode, 2)
        return True
    except torch.cuda.OutOfMemoryError:
        torch.cuda.empty_cache()
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", default="eager", choices=["eager", "block"])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--budget-gib", type=float, default=40)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--largest", action="store_true")
    a = ap.parse_args()

    import torch
    import models

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, a.budget_gib * 2**30 / total))
    overrides = dict(kv.split("=", 1) for kv in a.set)
    overrides["batch"] = str(a.batch)
    dims = models.resolve_dims("gpt2", overrides)
    result = {"mode": a.mode, "dims": dims, "budget_bytes": int(a.budget_gib * 2**30), "torch": torch.__version__}
    try:
        result.update(run(models, torch, dims, a.mode, a.steps))
    except torch.cuda.OutOfMemoryError:
        result["out_of_memory"] = True
        torch.cuda.empty_cache()
    if a.largest:
        lo, hi = 0, 1
        while fits(models, torch, dict(dims, batch=hi), a.mode):
            lo, hi = hi, hi * 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits(models, torch, dict(dims, batch=mid), a.mode) else (lo, mid)
        result["largest_batch"] = lo
    print(json.dumps(result))


if __name__ == "__main__":
    main()
