#!/usr/bin/python3
"""Step time of nanoGPT's shakespeare_char CPU recipe (docs/recipes.md): gradc against its
PyTorch twin (bench/pytorch/models.py, NanoGPTChar), one training step as the recipe runs it.

    /usr/bin/python3 bench/pytorch/recipe_steptime.py [--gradc build/gradc] [--threads 1|2]
        [--repeats 5] [--steps 60] [--warmup 10] [--set NAME=EXPR]... [--json out.json]

The step, identical on both sides: a batch of 12 windows of 64 characters drawn at random
offsets of data/shakespeare/train.txt (scripts/prepare-shakespeare.sh), forward, backward,
global-norm clipping to 1.0, the learning rate of the schedule (linear warmup over 100 steps,
cosine decay to 1e-4 over 1900), and AdamW (lr 1e-3, betas 0.9/0.99, eps 1e-8, weight decay
0.1 on the matrices only).
  gradc    `gradc train models/nanogpt-char.yaml --data ... --vocab chars --sampling random
           ... --metrics-out M`; a step's time is the metrics file's step_time_s (the executor's
           run of the whole step: forward, backward, clipping, schedule, updates; the batch is
           staged before the clock starts).
  PyTorch  this file run with --worker: NanoGPTChar, torch.optim.AdamW with nanoGPT's two
           parameter groups (PyTorch's default single-tensor implementation on the CPU, as
           nanoGPT gets it there), torch.nn.utils.clip_grad_norm_; a step's time is
           time.perf_counter around zero_grad(set_to_none=True), setting the rate, forward,
           backward, clipping, opt.step() and loss.item() (the batch is drawn before).

Conventions of bench/compare.py: both systems are fresh processes with the same intra-op
threads (--threads, exported as OMP_NUM_THREADS and OPENBLAS_NUM_THREADS to both and passed to
torch.set_num_threads); they alternate run by run, the order swapped every repeat; a run's figure
is the median of its steps after the warm-up, the reported figure the median over runs, and the
headline the ratio gradc / PyTorch of those medians (with the per-repeat ratios).

BLAS core: both systems run with the same OPENBLAS_CORETYPE. When the environment sets it, that
value is used for both; otherwise the core gradc selects on this machine (its "kernels:" line,
which may be a better one than OpenBLAS's own choice) is set for both, so that the comparison is
of the frameworks and not of the BLAS kernels. The core each side ran with is reported: gradc's
from its metrics file, and for both from OpenBLAS itself (OPENBLAS_VERBOSE=2, set for both, prints
"Core: X" when the library loads).

--cpus pins both systems to the same cores: on a shared virtual machine one core can be slower
than the other for the whole run (here core 0 by about 15% while this was written), which makes
unpinned runs bimodal.

Prints a markdown table; --json writes every run. Dims may be overridden as gradc --set does
(the GPU configuration is far too slow for 2 cores: a smoke test only).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # keep bench/ free of __pycache__
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

PY = "/usr/bin/python3"
SPEC = os.path.join(ROOT, "models", "nanogpt-char.yaml")
DATA = os.path.join(ROOT, "data", "shakespeare", "train.txt")

# The recipe (nanoGPT's config/train_shakespeare_char.py with its README's CPU overrides).
RECIPE = {"lr": 1e-3, "min_lr": 1e-4, "betas": (0.9, 0.99), "eps": 1e-8, "weight_decay": 0.1, "clip_norm": 1.0,
          "warmup_steps": 100, "decay_steps": 1900}


def gradc_recipe_flags():
    r = RECIPE
    return ["--vocab", "chars", "--sampling", "random", "--optimizer", "adamw", "--lr", str(r["lr"]),
            "--min-lr", str(r["min_lr"]), "--betas", f"{r['betas'][0]},{r['betas'][1]}", "--eps", str(r["eps"]),
            "--decay", "matrices", "--weight-decay", str(r["weight_decay"]), "--clip-norm", str(r["clip_norm"]),
            "--warmup-steps", str(r["warmup_steps"]), "--decay-steps", str(r["decay_steps"])]


def lr_at(step):
    """The learning rate of 1-based step `step`, as gradc's lr_schedule computes it: linear warmup
    to lr over warmup_steps, then cosine decay to min_lr over decay_steps, min_lr after that."""
    r = RECIPE
    w, lr, lo = r["warmup_steps"], r["lr"], r["min_lr"]
    if w > 0 and step <= w:
        return lr * step / w
    progress = min(max((step - w) / max(1, r["decay_steps"]), 0.0), 1.0)
    return lo + 0.5 * (lr - lo) * (1.0 + math.cos(math.pi * progress))


# ---- the PyTorch side (--worker, in its own process) ------------------------------------------


def worker(a):
    import torch

    torch.set_num_threads(a.threads)
    import models

    overrides = dict(kv.split("=", 1) for kv in a.set)
    dims = models.resolve_dims("nanogpt-char", overrides)
    raw = open(a.data, "rb").read()
    chars = sorted(set(raw))  # --vocab chars: the training file's distinct bytes
    if len(chars) > dims["vocab"]:
        sys.exit(f"recipe_steptime: {a.data} has {len(chars)} distinct characters, the model {dims['vocab']}")
    lut = torch.zeros(256, dtype=torch.int64)
    lut[torch.tensor(chars)] = torch.arange(len(chars))
    data = lut[torch.frombuffer(bytearray(raw), dtype=torch.uint8).long()]
    B, S = dims["batch"], dims["seq"]
    gen = torch.Generator().manual_seed(a.seed + 1)
    batches = []
    for _ in range(a.steps):  # nanoGPT's get_batch: offsets in [0, len - seq), with replacement
        ix = torch.randint(len(data) - S, (B,), generator=gen)
        batches.append((torch.stack([data[i:i + S] for i in ix]), torch.stack([data[i + 1:i + 1 + S] for i in ix])))

    torch.manual_seed(a.seed)
    model = models.build("nanogpt-char", dims)
    model.train()
    r = RECIPE
    opt = torch.optim.AdamW(model.optimizer_groups(r["weight_decay"]), lr=r["lr"], betas=r["betas"], eps=r["eps"])
    params = list(model.parameters())
    steps = []
    for step, (x, y) in enumerate(batches, start=1):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        lr = lr_at(step)
        for g in opt.param_groups:
            g["lr"] = lr
        loss = model(x, y)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, r["clip_norm"])
        opt.step()
        lv = loss.item()
        t1 = time.perf_counter()
        steps.append({"step": step, "loss": lv, "step_time_s": t1 - t0, "lr": lr, "grad_norm": norm.item()})
    result = {"dims": dims, "threads": torch.get_num_threads(), "torch": torch.__version__,
              "params": sum(p.numel() for p in params), "steps": steps}
    with open(a.out, "w") as f:
        json.dump(result, f)


# ---- the driver -------------------------------------------------------------------------------


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def fmt_ms(s):
    return "—" if s is None else f"{s * 1000:.1f} ms"


def kernels_core(text):
    """The core of gradc's "kernels: ... BLAS OpenBLAS core X (...)" line, or None."""
    for line in text.splitlines():
        if line.startswith("kernels:") and " core " in line:
            return line.split(" core ", 1)[1].split(" ", 1)[0]
    return None


def openblas_core(text):
    """The core OpenBLAS reports with OPENBLAS_VERBOSE=2 ("Core: Haswell"), or None."""
    for line in text.splitlines():
        if line.strip().startswith("Core:"):
            return line.split(":", 1)[1].strip()
    return None


class Runner:
    def __init__(self, a, env, tmp):
        self.a, self.env, self.tmp, self.count = a, env, tmp, 0

    def pin(self):
        # --cpus: both systems on the same cores (cores of a shared machine differ in speed).
        if self.a.cpus:
            os.sched_setaffinity(0, {int(c) for c in self.a.cpus.split(",")})

    def sets(self):
        return [x for kv in self.a.set for x in ("--set", kv)]

    def _run(self, system, cmd, out):
        """One run of `cmd`, which writes its steps to `out`; the run's record (steps or stderr)."""
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, env=self.env, cwd=ROOT, preexec_fn=self.pin)
        run = {"system": system, "cmd": cmd, "rc": p.returncode, "wall_s": time.monotonic() - t0,
               "openblas_core": openblas_core(p.stdout + p.stderr)}
        if p.returncode != 0:
            run["stderr"] = p.stderr[-2000:]
            return run, None
        with open(out) as f:
            return run, json.load(f)

    def gradc(self):
        self.count += 1
        m = os.path.join(self.tmp, f"g{self.count}.json")
        cmd = [self.a.gradc, "train", SPEC, "--data", self.a.data, "--steps", str(self.a.steps), "-q",
               "--metrics-out", m] + gradc_recipe_flags() + self.sets()
        run, metrics = self._run("gradc", cmd, m)
        if metrics:
            run.update(steps=metrics["steps"], threads=metrics.get("intra_op_threads"), blas=metrics.get("blas"))
        return run

    def torch(self):
        self.count += 1
        out = os.path.join(self.tmp, f"t{self.count}.json")
        cmd = [PY, os.path.abspath(__file__), "--worker", "--data", self.a.data, "--steps", str(self.a.steps),
               "--threads", str(self.a.threads), "--out", out] + self.sets()
        run, r = self._run("torch", cmd, out)
        if r:
            run.update(steps=r["steps"], threads=r["threads"], torch_version=r["torch"])
        return run

def main():
    ap = argparse.ArgumentParser(description="Step time of the shakespeare_char recipe: gradc vs its PyTorch twin")
    ap.add_argument("--gradc", default=os.path.join(ROOT, "build", "gradc"))
    ap.add_argument("--data", default=DATA, help="the training text (scripts/prepare-shakespeare.sh)")
    ap.add_argument("--threads", type=int, choices=(1, 2), default=1, help="intra-op threads for both (default 1)")
    ap.add_argument("--repeats", type=int, default=5, help="alternated runs per system (default 5)")
    ap.add_argument("--steps", type=int, default=60, help="steps per run (default 60)")
    ap.add_argument("--warmup", type=int, default=10, help="steps of each run left out of its median (default 10)")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=EXPR", help="a dim, as gradc --set")
    ap.add_argument("--cpus", help="pin both systems to these cores (e.g. 1, or 0,1); default: unpinned")
    ap.add_argument("--json", help="write the machine, the settings and every run here")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a)
    if a.warmup >= a.steps:
        ap.error("--warmup must be below --steps")
    if not os.access(a.gradc, os.X_OK):
        sys.exit(f"recipe_steptime: no gradc binary at {a.gradc}")
    if not os.path.exists(a.data):
        sys.exit(f"recipe_steptime: no {a.data} (run scripts/prepare-shakespeare.sh)")

    sys.path.insert(0, os.path.dirname(HERE))
    import compare  # bench/compare.py: the machine description

    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads), OPENBLAS_NUM_THREADS=str(a.threads))
    env.pop("MALLOC_MMAP_THRESHOLD_", None)
    env["OPENBLAS_VERBOSE"] = "2"  # OpenBLAS names its core on stderr at load, in both processes
    if env.get("OPENBLAS_CORETYPE"):
        core, core_source = env["OPENBLAS_CORETYPE"], "OPENBLAS_CORETYPE from the environment"
    else:
        probe = subprocess.run([a.gradc, "train", SPEC, "--synthetic", "--steps", "1", "--set", "batch=1"],
                               capture_output=True, text=True, env=env, cwd=ROOT)
        core = kernels_core(probe.stderr + probe.stdout)
        if not core:
            sys.exit("recipe_steptime: gradc printed no 'kernels:' line to take the BLAS core from:\n" + probe.stderr[-1000:])
        core_source = "the core gradc selects on this machine"
        env["OPENBLAS_CORETYPE"] = core
    t_start = time.monotonic()

    def log(msg):
        print(f"[{time.monotonic() - t_start:6.0f} s] {msg}", flush=True)

    info = compare.machine_info(os.path.relpath(a.gradc, ROOT))
    info["command"] = " ".join([PY, "bench/pytorch/recipe_steptime.py"] + sys.argv[1:])
    log(f"machine: {info['nproc']} cores, {info['cpu_model']}, torch {info['torch']}, threads {a.threads}, "
        f"OPENBLAS_CORETYPE={core} ({core_source}), load average {' '.join(compare.loadavg())}")
    runs = {"gradc": [], "torch": []}
    with tempfile.TemporaryDirectory(prefix="gradc-recipe-") as tmp:
        runner = Runner(a, env, tmp)
        for rep in range(a.repeats):
            order = ("gradc", "torch") if rep % 2 == 0 else ("torch", "gradc")
            for s in order:
                r = runner.gradc() if s == "gradc" else runner.torch()
                if r["rc"] == 0:
                    r["median_step_s"] = med([x["step_time_s"] for x in r["steps"][a.warmup:]])
                    log(f"repeat {rep + 1}/{a.repeats} {s}: median step {fmt_ms(r['median_step_s'])} "
                        f"({r['wall_s']:.1f} s wall)")
                else:
                    log(f"repeat {rep + 1}/{a.repeats} {s}: FAILED rc={r['rc']}: {r.get('stderr', '')[-400:]}")
                runs[s].append(r)
    loadavg_end = compare.loadavg()

    g = med([r.get("median_step_s") for r in runs["gradc"]])
    t = med([r.get("median_step_s") for r in runs["torch"]])
    per = [ratio(x.get("median_step_s"), y.get("median_step_s")) for x, y in zip(runs["gradc"], runs["torch"])]
    gcores = sorted({f"{(r.get('blas') or {}).get('core')} / {r.get('openblas_core')}"
                     for r in runs["gradc"] if r["rc"] == 0})
    tcores = sorted({r.get("openblas_core") for r in runs["torch"] if r["rc"] == 0} - {None})
    first = {s: next((f"{r['steps'][0]['loss']:.4f}" for r in runs[s] if r["rc"] == 0), "—") for s in runs}
    print()
    print(f"nanoGPT shakespeare_char recipe step ({', '.join(a.set) or 'batch 12 x 64, 4 layers, 4 heads, 128 wide'}), "
          f"{a.threads} intra-op thread(s), OPENBLAS_CORETYPE={core} ({core_source}); median of steps "
          f"{a.warmup + 1}-{a.steps} of each run, median over {a.repeats} alternated runs per system.")
    print()
    print("| system | median step | runs (median step each) | BLAS core | first loss |")
    print("|---|---|---|---|---|")
    rows = (("gradc", g, gcores, "gradc's metrics / OpenBLAS's report"), (f"PyTorch {info['torch']}", t, tcores, "OpenBLAS's report"))
    for (label, value, cores, where), s in zip(rows, ("gradc", "torch")):
        each = ", ".join(fmt_ms(r.get("median_step_s")) for r in runs[s])
        print(f"| {label} | {fmt_ms(value)} | {each} | {', '.join(cores) or '?'} ({where}) | {first[s]} |")
    rr = ratio(g, t)
    print()
    print(f"gradc / PyTorch: **{'—' if rr is None else f'{rr:.2f}x'}** (per repeat: "
          f"{', '.join('—' if x is None else f'{x:.2f}' for x in per)}); load average "
          f"{' '.join(info['loadavg_start'])} at the start, {' '.join(loadavg_end)} at the end.")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": info, "threads": a.threads, "openblas_coretype": core, "core_source": core_source,
                       "repeats": a.repeats, "steps": a.steps, "warmup": a.warmup, "sets": a.set, "recipe": RECIPE,
                       "gradc_s": g, "torch_s": t, "ratio": rr, "per_repeat_ratios": per, "runs": runs,
                       "loadavg_end": loadavg_end}, f, indent=1, default=str)
    bad = [r for rs in runs.values() for r in rs if r["rc"] != 0]
    return 1 if bad or g is None or t is None else 0


if __name__ == "__main__":
    sys.exit(main())
