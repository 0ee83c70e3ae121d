"""One PyTorch training run in its own process, driven by bench/compare.py (the PyTorch twin of
`gradc train --synthetic --metrics-out M`).

    /usr/bin/python3 bench/pytorch/worker.py --model gpt-mini --mode eager --steps 6 \
        [--set batch=32]... [--threads N] [--out result.json]

Sequence, chosen to mirror gradc train:
  1. import torch, set the intra-op threads, draw one random batch per step (as gradc makes its
     synthetic inputs before timing a step);
  2. print the marker line "memory plan: ready" on stderr, the first output on stderr, as gradc
     train's first is its "memory plan:" line (the driver blocks that write, reads the idle RSS
     and resets the RSS high-water mark, identically for both; see run_measured in
     bench/compare.py);
  3. build the model (parameters) and AdamW with gradc's defaults, then run the steps: each step
     is zero_grad(set_to_none=True), forward + loss, backward, optimizer step, loss.item(),
     timed with time.perf_counter (gradc times exec->run: forward, backward and update);
  4. write JSON: per-step losses and times, the process's VmRSS/VmHWM at the end (kB).

Modes are those of bench/pytorch/models.py (eager, seq, block, unrolled for lstm-lm).
"""
import argparse
import json
import os
import resource
import sys
import time

sys.dont_write_bytecode = True  # keep bench/ free of __pycache__
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def proc_status_kb(field, pid="self"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, choices=["mlp", "gpt-mini", "lstm-lm", "resnet18-cifar", "resnet-deep"])
    ap.add_argument("--mode", default="eager")
    ap.add_argument("--set", action="append", default=[], help="dim override, as gradc --set")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: leave the default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="-")
    a = ap.parse_args()

    import torch

    if a.threads > 0:
        torch.set_num_threads(a.threads)
    import models

    overrides = dict(kv.split("=", 1) for kv in a.set)
    dims = models.resolve_dims(a.model, overrides)
    gen = torch.Generator().manual_seed(a.seed + 1)
    batches = [models.make_batch(a.model, dims, gen) for _ in range(a.steps)]
    torch.manual_seed(a.seed)

    sys.stderr.write("memory plan: ready\n")
    sys.stderr.flush()

    model = models.build(a.model, dims)
    opt = models.adamw(model.parameters())
    model.train()
    names = model.input_names()
    losses, times, faults = [], [], []
    for b in batches:
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(b[names[0]], b[names[1]], mode=a.mode)
        loss.backward()
        opt.step()
        lv = loss.item()
        t1 = time.perf_counter()
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
        losses.append(lv)
        times.append(t1 - t0)

    result = {
        "model": a.model,
        "mode": a.mode,
        "dims": dims,
        "threads": torch.get_num_threads(),
        "params": sum(p.numel() for p in model.parameters()),
        "steps": [{"step": i + 1, "loss": l, "step_time_s": t, "minor_faults": f}
                  for i, (l, t, f) in enumerate(zip(losses, times, faults))],
        "vm_rss_kb_end": proc_status_kb("VmRSS"),
        "vm_hwm_kb_end": proc_status_kb("VmHWM"),
    }
    text = json.dumps(result)
    if a.out == "-":
        print(text)
    else:
        with open(a.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
