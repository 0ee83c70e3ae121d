#!/usr/bin/python3
"""gradc vs PyTorch eager (with and without torch.utils.checkpoint) on the bundled models.

    /usr/bin/python3 bench/compare.py [--quick] [--gradc build-bench/gradc] [--out bench/results]
                                      [--sections parity,steptime,alloc,budget,maxbatch,planner] [--threads 1]
                                      [--repeats N] [--report-only]

Sections (each writes bench/results/<section>.json and .md; `report.md` collects the tables;
--report-only rewrites the tables, plots and report.md from the JSON without running anything):

  parity    first loss and gradients of gradc and the PyTorch twin for the same weights and
            batch (bench/pytorch/parity.py)
  steptime  step time and peak memory at several batch sizes: gradc (no remat, --remat sqrt)
            vs PyTorch eager, checkpoint_sequential with ~sqrt(n) segments and per-block
            checkpoint; the systems alternate run by run, every figure is a median
  alloc     step time of gradc and PyTorch eager with glibc's default malloc settings and with
            freed memory never returned to the OS (the same settings for both)
  budget    gradc under fixed budgets (--remat auto, with and without --micro-batches auto):
            step time, tracked and RSS peaks, peak <= budget
  maxbatch  the largest batch that fits a budget: gradc (its planner's answer, confirmed by a
            measured run; and judged like PyTorch, by RSS) vs PyTorch eager, checkpoint_sequential
            and per-block checkpoint (a batch fits when its measured peak RSS above the idle
            baseline is <= the budget)
  arena     arena execution: gradc's peak RSS against --budget 512MiB (arena vs GRADC_NO_ARENA=1)
            with glibc's defaults, and step time and page faults per step against PyTorch eager
  blas      gradc (automatic BLAS kernel selection) vs PyTorch eager: as a user gets each, with both
            forced to the same OpenBLAS core, and with both on Prescott (a misdetected CPU)
  fusion    gradc with elementwise fusion (the default) and with --no-fuse vs PyTorch eager: step
            time ratios and each variant's planned and measured peak (bench/fusion_section.py)
  convnets  the ResNets: resnet18-cifar step time, peak and largest batch under a budget vs PyTorch
            eager and checkpointing; resnet-deep's recompute-vs-memory sweep (bench/convnet_section.py)
  planner   predicted peak and recompute FLOPs of gradc's plans (chain, auto, sqrt,
            selective, memory-poor) over a sweep of budgets, and of checkpoint_sequential's segment
            choices on the same step (build/bench/remat_curve) against gradc at their peaks; an SVG plot

Memory, measured the same way for both systems (run_measured): each run is a child process
whose stderr is a pre-filled one-page pipe, so its first stderr write blocks. That write is the
"memory plan:" line, which gradc train prints after compiling and the PyTorch worker prints after
importing torch and drawing its batches, before either creates a parameter. While the child is
blocked there the driver reads its VmRSS (the idle baseline: LibTorch loaded, nothing trained),
resets its RSS high-water mark (5 > /proc/PID/clear_refs) and lets it go; then it reads VmHWM
every 2 ms until the child exits. Peak = last VmHWM - baseline: everything the training run
touched, parameters, gradients and optimizer state included, LibTorch's one-time kernel buffers
too. Memory runs set MALLOC_MMAP_THRESHOLD_=131072 for both systems, so that glibc returns
large freed blocks to the OS and RSS follows live memory; the timed runs keep glibc's defaults
and their peak RSS is reported too. gradc additionally reports its tracking allocator's peak
(metrics JSON), which PyTorch 1.13 on CPU has no equivalent of.

Step time: the median over the steps after the warm-up of one run, then the median over runs;
headline figures are ratios (gradc / PyTorch) of those medians. Both systems run with the same
number of intra-op threads (--threads, exported as OMP_NUM_THREADS to both and passed to
torch.set_num_threads).
"""
import argparse
import fcntl
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # keep bench/ free of __pycache__
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(HERE, "pytorch"))
sys.path.insert(0, HERE)
import models  # noqa: E402  (bench/pytorch/models.py)
import convnet_section  # noqa: E402  (bench/convnet_section.py)
import fusion_section  # noqa: E402  (bench/fusion_section.py)
from svg_axes import frame, ticks  # noqa: E402  (bench/svg_axes.py)

PY = "/usr/bin/python3"
WORKER = os.path.join(HERE, "pytorch", "worker.py")
MiB = 1 << 20
MMAP_THRESHOLD = 131072
F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ (Linux), absent from older Python versions

# ---- configuration ---------------------------------------------------------------------------

FULL = {
    "repeats": 3,
    "steptime": {
        # model: (batch sizes, steps per run, warm-up steps)
        "mlp": ([64, 4096], 15, 5),
        "gpt-mini": ([8, 16, 32], 6, 2),
        "lstm-lm": ([8, 16], 5, 2),
    },
    "budget": {
        # model: (batch, budgets in MiB) -- the budgets of docs/memory.md
        "gpt-mini": (16, [160, 120, 90]),
        "lstm-lm": (8, [48, 36, 24]),
    },
    "maxbatch": {
        # model: (budgets in MiB, batch granularity, largest batch searched)
        "gpt-mini": ([128, 256], 4, 256),
        "lstm-lm": ([64], 4, 64),
    },
    "planner": {"gpt-mini": 14, "lstm-lm": 8},  # budgets per sweep
    "planner_segments": ["gpt-mini"],  # checkpoint_sequential's segment choices (bench/remat_curve)
    "alloc": [("mlp", 4096, 15, 5), ("gpt-mini", 16, 6, 2)],  # model, batch, steps, warm-up
    "arena": {"budget_mib": 512, "rss_batches": [16, 96, 192],
              "speed": [("gpt-mini", 16, 6, 2), ("gpt-mini", 32, 6, 2), ("mlp", 4096, 15, 5)]},
    "blas": [("gpt-mini", 16, 5, 2), ("mlp", 4096, 12, 4), ("lstm-lm", 8, 4, 2)],
    "fusion": [("gpt-mini", 16, 6, 2), ("gpt-mini", 32, 6, 2), ("mlp", 4096, 15, 5), ("lstm-lm", 16, 5, 2)],
    "convnets": convnet_section.FULL,
}
QUICK = {
    "repeats": 2,
    "steptime": {
        "mlp": ([64], 20, 5),
        "gpt-mini": ([16], 5, 2),
        "lstm-lm": ([8], 4, 2),
    },
    "budget": {"gpt-mini": (16, [120]), "lstm-lm": (8, [36])},
    "maxbatch": {"gpt-mini": ([128], 4, 128)},
    "planner": {"gpt-mini": 8},
    "planner_segments": ["gpt-mini"],
    "alloc": [("gpt-mini", 16, 5, 2)],
    "arena": {"budget_mib": 512, "rss_batches": [16, 96], "speed": [("gpt-mini", 16, 5, 2), ("mlp", 4096, 12, 4)]},
    "blas": [("gpt-mini", 16, 4, 2)],
    "fusion": [("gpt-mini", 16, 5, 2)],
    "convnets": convnet_section.QUICK,
}

SYSTEMS = {
    # name: (kind, gradc flags | torch mode)
    "gradc": ("gradc", []),
    "gradc sqrt": ("gradc", ["--remat", "sqrt"]),
    "torch eager": ("torch", "eager"),
    "torch ckpt-seq": ("torch", "seq"),
    "torch ckpt-block": ("torch", "block"),
    "torch unrolled": ("torch", "unrolled"),
}


def systems_for(model):
    s = ["gradc", "torch eager", "gradc sqrt", "torch ckpt-seq", "torch ckpt-block"]
    if model == "lstm-lm":
        s.append("torch unrolled")
    return s


# ---- running one child with the common memory measurement ---------------------------------


def proc_rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


def _blocked_on_stderr(pid):
    """True when the process sleeps in a write to a pipe on fd 2 (wchan pipe_write or
    anon_pipe_write, depending on the kernel; /proc/PID/syscall: write = 1, fd 0x2)."""
    try:
        with open(f"/proc/{pid}/wchan") as f:
            wchan = f.read().strip()
        with open(f"/proc/{pid}/syscall") as f:
            sc = f.read().split()
    except OSError:
        return False
    return wchan.endswith("pipe_write") and sc[:2] == ["1", "0x2"]


def proc_hwm_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def proc_minflt(pid):
    """Minor page faults of a process so far (/proc/PID/stat field 10), or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[7])
    except (OSError, IndexError, ValueError):
        return None


def run_measured(cmd, env, timeout=900, poll_s=0.002):
    """Runs cmd and measures its peak RSS above the RSS it has when it is ready to train.

    Baseline: the child's stderr is a pipe of one page that the driver fills before the start,
    so the child's first write to stderr blocks. Both gradc train and the PyTorch worker write
    nothing to stderr before their "memory plan:" line, printed after compiling (gradc) or after
    importing torch and drawing the batches (worker), before any parameter exists. Once the child
    is blocked in that write (/proc/PID/wchan and /proc/PID/syscall) the driver stops it, reads
    VmRSS (the baseline), resets the RSS high-water mark (5 > /proc/PID/clear_refs), resumes it
    and drains the pipe from then on.
    Peak: VmHWM (the high-water mark since the reset, monotone) read every poll_s seconds until
    the child exits; the last reading is the peak. (wait4's ru_maxrss cannot be used: Linux
    folds the parent's high-water mark into it at exec.)
    Returns rc, stderr, baseline_kb, hwm_kb, peak_rss_bytes (= hwm - baseline), wall_s,
    marker_ok (the blocked write was the marker line)."""
    t0 = time.monotonic()
    rfd, wfd = os.pipe()
    size = fcntl.fcntl(wfd, F_SETPIPE_SZ, 4096)
    os.write(wfd, b"\0" * size)  # a full pipe: the child's first write blocks
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=wfd, env=env, cwd=ROOT)
    os.close(wfd)
    deadline = t0 + timeout
    baseline = None
    faults0 = faults = None
    while p.poll() is None and time.monotonic() < deadline:
        if _blocked_on_stderr(p.pid):
            os.kill(p.pid, signal.SIGSTOP)
            try:
                baseline = proc_rss_kb(p.pid)
                faults0 = proc_minflt(p.pid)
                with open(f"/proc/{p.pid}/clear_refs", "w") as f:
                    f.write("5")
            finally:
                os.kill(p.pid, signal.SIGCONT)
            break
        time.sleep(poll_s)
    err = bytearray()

    def drain():
        with os.fdopen(rfd, "rb") as reader:
            while True:
                chunk = reader.read1(65536)
                if not chunk:
                    break
                err.extend(chunk)

    th = threading.Thread(target=drain, daemon=True)
    th.start()
    hwm = None
    while p.poll() is None:
        v = proc_hwm_kb(p.pid)
        if v is not None:
            hwm = v if hwm is None else max(hwm, v)
        f = proc_minflt(p.pid)
        if f is not None:
            faults = f
        if time.monotonic() > deadline:
            p.kill()
        time.sleep(poll_s)
    th.join()
    wall = time.monotonic() - t0
    text = bytes(err).lstrip(b"\0").decode("utf-8", "replace")
    out = {"rc": p.returncode, "stderr": text[-3000:], "baseline_kb": baseline, "hwm_kb": hwm, "wall_s": wall,
           "marker_ok": text.startswith("memory plan:")}
    if baseline is not None and hwm is not None and out["marker_ok"]:
        out["peak_rss_bytes"] = (hwm - baseline) * 1024
    if faults0 is not None and faults is not None:
        out["minor_faults"] = faults - faults0  # after the baseline, up to the last poll
    return out


class Runner:
    def __init__(self, gradc, threads, tmp, log):
        self.gradc = gradc
        self.threads = threads
        self.tmp = tmp
        self.log = log
        self.env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
        self.env.pop("MALLOC_MMAP_THRESHOLD_", None)
        # Memory runs: glibc returns every freed block of 128 KiB or more to the OS, so RSS follows
        # live tensor memory instead of the heap's retained high-water mark (same for both systems).
        self.mem_env = dict(self.env, MALLOC_MMAP_THRESHOLD_=str(MMAP_THRESHOLD))
        self.count = 0

    def spec(self, model):
        return os.path.join(ROOT, "models", model + ".yaml")

    def gradc_train(self, model, batch, steps, flags, extra_sets=(), mem=False):
        self.count += 1
        mfile = os.path.join(self.tmp, f"m{self.count}.json")
        cmd = [self.gradc, "train", self.spec(model), "--synthetic", "--steps", str(steps), "--metrics-out", mfile,
               "--set", f"batch={batch}"] + [x for kv in extra_sets for x in ("--set", kv)] + list(flags)
        r = run_measured(cmd, self.mem_env if mem else self.env)
        r["cmd"] = cmd
        if r["rc"] == 0:
            with open(mfile) as f:
                m = json.load(f)
            os.unlink(mfile)
            r["step_times"] = [s["step_time_s"] for s in m["steps"]]
            r["step_faults"] = [s.get("minor_faults") for s in m["steps"]]
            r["losses"] = [s["loss"] for s in m["steps"]]
            r["peak_tracked"] = m["ranks"][0]["peak_bytes_measured"]
            r["peak_planned"] = m["ranks"][0].get("peak_bytes_planned")
        for line in r["stderr"].splitlines():
            if line.startswith("memory plan:"):
                r["plan_line"] = line.strip()
        return r

    def torch_train(self, model, batch, steps, mode, mem=False):
        self.count += 1
        ofile = os.path.join(self.tmp, f"t{self.count}.json")
        cmd = [PY, WORKER, "--model", model, "--mode", mode, "--steps", str(steps), "--threads", str(self.threads),
               "--set", f"batch={batch}", "--out", ofile]
        r = run_measured(cmd, self.mem_env if mem else self.env)
        r["cmd"] = cmd
        if r["rc"] == 0:
            with open(ofile) as f:
                m = json.load(f)
            os.unlink(ofile)
            r["step_times"] = [s["step_time_s"] for s in m["steps"]]
            r["step_faults"] = [s.get("minor_faults") for s in m["steps"]]
            r["losses"] = [s["loss"] for s in m["steps"]]
            r["threads"] = m["threads"]
            r["vm_hwm_kb_end"] = m["vm_hwm_kb_end"]
        return r

    def run_system(self, system, model, batch, steps, mem=False):
        kind, arg = SYSTEMS[system]
        if kind == "gradc":
            return self.gradc_train(model, batch, steps, arg, mem=mem)
        return self.torch_train(model, batch, steps, arg, mem=mem)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt_bytes(b):
    return "—" if b is None else f"{b / MiB:.1f} MiB"


def fmt_s(s):
    if s is None:
        return "—"
    return f"{s * 1000:.1f} ms" if s < 1 else f"{s:.3f} s"


def fmt_ratio(r):
    return "—" if r is None else f"{r:.2f}x"


def pairwise(a, b):
    """gradc / PyTorch per repeat (runs of one repeat are neighbours in time)."""
    xs = [ratio(x, y) for x, y in zip(a["step_time_runs_s"], b["step_time_runs_s"])]
    return ", ".join("—" if x is None else f"{x:.2f}" for x in xs)


def yesno(peak, budget):
    return "—" if peak is None else ("yes" if peak <= budget else "no")


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


# ---- sections ---------------------------------------------------------------------------------


def section_parity(runner, cfg, log):
    import parity

    t0 = time.monotonic()
    results = parity.run(runner.gradc, env=runner.env)
    log(f"parity: {time.monotonic() - t0:.0f} s, ok = {[r.get('ok') for r in results]}")
    return results


def format_parity(results, cfg, out_dir):
    import parity

    md = ["## First-loss parity (same initial weights, same batch)", "",
          "Weights: PyTorch's default initialisation (seed 0) saved as safetensors and fed to "
          "`gradc grad`; one random batch. gpt-mini with dropout 0 on both sides. Relative error = "
          "max |gradc - torch| / max |torch| per tensor; tolerance 1e-5 (loss), 1e-4 (gradients).", "",
          parity.format_table(results)]
    return "\n".join(md)


def section_steptime(runner, cfg, log):
    rows = []
    repeats = cfg["repeats"]
    for model, (batches, steps, warmup) in cfg["steptime"].items():
        for batch in batches:
            systems = systems_for(model)
            runs = {s: [] for s in systems}
            for rep in range(repeats):
                # Alternate: rotate the order each repeat so no system always runs first.
                order = systems[rep % len(systems):] + systems[:rep % len(systems)]
                for s in order:
                    r = runner.run_system(s, model, batch, steps)
                    if r["rc"] != 0:
                        log(f"  {model} b={batch} {s}: FAILED rc={r['rc']}: {r['stderr'][-300:]}")
                    runs[s].append(r)
            # One memory run per system with large freed blocks returned to the OS (see Runner).
            mem_runs = {}
            for s in systems:
                r = runner.run_system(s, model, batch, 3, mem=True)
                mem_runs[s] = r if r["rc"] == 0 else None
            row = {"model": model, "batch": batch, "steps": steps, "warmup": warmup, "repeats": repeats, "systems": {}}
            for s, rs in runs.items():
                ok = [r for r in rs if r["rc"] == 0]
                per_run = [med(r["step_times"][warmup:]) for r in ok]
                row["systems"][s] = {
                    "step_time_s": med(per_run),
                    "step_time_runs_s": per_run,
                    "peak_rss_bytes": med([r.get("peak_rss_bytes") for r in ok]),
                    "peak_rss_mmap_bytes": mem_runs[s] and mem_runs[s].get("peak_rss_bytes"),
                    "peak_rss_runs": [r.get("peak_rss_bytes") for r in ok],
                    "baseline_rss_kb": [r.get("baseline_kb") for r in ok],
                    "peak_tracked": med([r.get("peak_tracked") for r in ok]),
                    "peak_planned": med([r.get("peak_planned") for r in ok]),
                    "first_loss": ok[0]["losses"][0] if ok else None,
                    "failed": len(rs) - len(ok),
                    "plan_line": ok[0].get("plan_line") if ok else None,
                }
            S = row["systems"]
            g, te = S["gradc"], S["torch eager"]
            log(f"steptime {model} b={batch}: " + ", ".join(
                f"{s} {fmt_s(v['step_time_s'])} {fmt_bytes(v['peak_rss_mmap_bytes'])} {fmt_bytes(v['peak_rss_bytes'])}"
                for s, v in S.items()))
            rows.append(row)

    return rows


def format_steptime(rows, cfg, out_dir):
    repeats = rows[0]["repeats"] if rows else 0
    md = ["## Step time and peak memory", "",
          f"Median step time (steps after the warm-up, median over {repeats} alternated runs). Peak RSS above the "
          "idle baseline, two ways: *returned* = one extra 3-step run with `MALLOC_MMAP_THRESHOLD_="
          f"{MMAP_THRESHOLD}` (freed blocks of 128 KiB or more go back to the OS, so RSS follows live memory); "
          "*default* = glibc's default allocator settings, median over the timed runs (freed blocks stay in the heap). "
          "gradc's tracked peak is its allocator's high-water mark (every live tensor byte). Ratios are gradc / PyTorch.",
          ""]
    md.append("| model | batch | gradc | PyTorch eager | **time ratio** | per-repeat ratios | gradc peak RSS (returned) | "
              "PyTorch eager (returned) | **peak ratio** | gradc / PyTorch peak RSS (default) | gradc tracked peak |")
    md.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        S = row["systems"]
        g, te = S["gradc"], S["torch eager"]
        md.append(f"| {row['model']} | {row['batch']} | {fmt_s(g['step_time_s'])} | {fmt_s(te['step_time_s'])} | "
                  f"**{fmt_ratio(ratio(g['step_time_s'], te['step_time_s']))}** | {pairwise(g, te)} | "
                  f"{fmt_bytes(g['peak_rss_mmap_bytes'])} | "
                  f"{fmt_bytes(te['peak_rss_mmap_bytes'])} | "
                  f"**{fmt_ratio(ratio(g['peak_rss_mmap_bytes'], te['peak_rss_mmap_bytes']))}** | "
                  f"{fmt_bytes(g['peak_rss_bytes'])} / {fmt_bytes(te['peak_rss_bytes'])} | {fmt_bytes(g['peak_tracked'])} |")
    md += ["", "Every system, with and without recomputation: gradc `--remat sqrt`; PyTorch `checkpoint_sequential` "
           "(~sqrt(n) segments; lstm-lm: sqrt(seq) checkpointed time segments of an unrolled LSTM) and per-block "
           "`checkpoint`. *vs base* = the ratio to the same system without recompute (gradc without remat, "
           "PyTorch eager): the recompute overhead in time and the saving in memory.", ""]
    md.append("| model | batch | system | step time | time vs base | peak RSS (returned) | peak vs base | "
              "peak RSS (default) | tracked peak |")
    md.append("|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        S = row["systems"]
        for s, v in S.items():
            base = S["gradc"] if s.startswith("gradc") else S["torch eager"]
            md.append(f"| {row['model']} | {row['batch']} | {s} | {fmt_s(v['step_time_s'])} | "
                      f"{fmt_ratio(ratio(v['step_time_s'], base['step_time_s']))} | {fmt_bytes(v['peak_rss_mmap_bytes'])} | "
                      f"{fmt_ratio(ratio(v['peak_rss_mmap_bytes'], base['peak_rss_mmap_bytes']))} | "
                      f"{fmt_bytes(v['peak_rss_bytes'])} | {fmt_bytes(v['peak_tracked'])} |")
    md += ["", "gradc `--remat sqrt` / PyTorch `checkpoint_sequential`:", "",
           "| model | batch | time ratio | peak RSS ratio (returned) |", "|---|---|---|---|"]
    for row in rows:
        S = row["systems"]
        md.append(f"| {row['model']} | {row['batch']} | "
                  f"{fmt_ratio(ratio(S['gradc sqrt']['step_time_s'], S['torch ckpt-seq']['step_time_s']))} | "
                  f"{fmt_ratio(ratio(S['gradc sqrt']['peak_rss_mmap_bytes'], S['torch ckpt-seq']['peak_rss_mmap_bytes']))} |")
    return "\n".join(md)


def section_budget(runner, cfg, log):
    rows = []
    steps = 3
    for model, (batch, budgets) in cfg["budget"].items():
        for b in budgets:
            for micro in ("1", "auto"):
                flags = ["--budget", f"{b}MiB", "--remat", "auto", "--micro-batches", micro]
                r = runner.gradc_train(model, batch, steps, flags)
                rm = runner.gradc_train(model, batch, 2, flags, mem=True) if r["rc"] == 0 else None
                row = {"model": model, "batch": batch, "budget_bytes": b * MiB, "micro_batches": micro, "rc": r["rc"]}
                if r["rc"] == 0:
                    row.update({
                        "plan": r.get("plan_line", "").replace("memory plan: ", ""),
                        "step_time_s": med(r["step_times"][1:]),
                        "peak_tracked": r["peak_tracked"],
                        "peak_planned": r["peak_planned"],
                        "peak_rss_bytes": r.get("peak_rss_bytes"),
                        "tracked_within_budget": r["peak_tracked"] <= b * MiB,
                        "rss_within_budget": r.get("peak_rss_bytes") is not None and r["peak_rss_bytes"] <= b * MiB,
                        "peak_rss_mmap_bytes": rm.get("peak_rss_bytes") if rm and rm["rc"] == 0 else None,
                        "losses": r["losses"],
                    })
                else:
                    msg = [l for l in r["stderr"].splitlines() if "error" in l]
                    row["refused"] = msg[-1][:400] if msg else r["stderr"][-400:]
                log(f"budget {model} {b}MiB micro={micro}: rc={r['rc']} tracked={fmt_bytes(row.get('peak_tracked'))} "
                    f"rss={fmt_bytes(row.get('peak_rss_mmap_bytes'))} / {fmt_bytes(row.get('peak_rss_bytes'))}")
                rows.append(row)
    return rows


def format_budget(rows, cfg, out_dir):
    md = ["## gradc under a budget", "",
          "`gradc train SPEC --synthetic --steps 3 --budget B --remat auto --micro-batches 1|auto`. Planned = the "
          "memory plan's peak; tracked = the tracking allocator's measured peak (what the budget bounds); RSS = peak "
          "RSS above the idle baseline, with large freed blocks returned to the OS (a 2-step run) and with glibc's "
          "defaults (the timed run). Step time: median of steps 2-3.", "",
          "| model | batch | budget | micro-batches | plan | step time | planned (bytes) | tracked (bytes) | "
          "tracked <= budget | peak RSS returned / default | RSS <= budget (returned / default) |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["rc"] != 0:
            md.append(f"| {r['model']} | {r['batch']} | {fmt_bytes(r['budget_bytes'])} | {r['micro_batches']} | "
                      f"refused (exit {r['rc']}) | | | | | | |")
            continue
        md.append(f"| {r['model']} | {r['batch']} | {fmt_bytes(r['budget_bytes'])} | {r['micro_batches']} | {r['plan']} | "
                  f"{fmt_s(r['step_time_s'])} | {r['peak_planned']:,} | {r['peak_tracked']:,} | "
                  f"{'yes' if r['tracked_within_budget'] else '**NO**'} | {fmt_bytes(r['peak_rss_mmap_bytes'])} / "
                  f"{fmt_bytes(r['peak_rss_bytes'])} | {yesno(r['peak_rss_mmap_bytes'], r['budget_bytes'])} / "
                  f"{yesno(r['peak_rss_bytes'], r['budget_bytes'])} |")
    return "\n".join(md)


def alternated_step_times(runner, cfg, model, batch, steps, warmup, extra_env=None):
    """gradc and PyTorch eager alternated run by run (the order flips each repeat) under
    extra_env; per system, the median step time after the warm-up of each run."""
    saved = runner.env
    runner.env = dict(saved, **(extra_env or {}))
    times = {"gradc": [], "torch eager": []}
    try:
        for rep in range(cfg["repeats"]):
            order = ["gradc", "torch eager"] if rep % 2 == 0 else ["torch eager", "gradc"]
            for s in order:
                r = runner.run_system(s, model, batch, steps)
                times[s].append(med(r["step_times"][warmup:]) if r["rc"] == 0 else None)
    finally:
        runner.env = saved
    return times


def section_alloc(runner, cfg, log):
    """Step time of gradc and PyTorch eager with glibc's defaults and with glibc told never to
    return memory to the OS (MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ at 1 GiB, the
    same for both): how much of the step-time gap is the allocator's returning and re-faulting
    pages (an allocator effect, not a kernel one)."""
    rows = []
    big = str(1 << 30)
    variants = (("glibc defaults", {}), ("memory never returned", {"MALLOC_MMAP_THRESHOLD_": big,
                                                                    "MALLOC_TRIM_THRESHOLD_": big}))
    for model, batch, steps, warmup in cfg["alloc"]:
        for label, extra in variants:
            times = alternated_step_times(runner, cfg, model, batch, steps, warmup, extra)
            row = {"model": model, "batch": batch, "allocator": label, "env": extra,
                   "gradc_s": med(times["gradc"]), "torch_s": med(times["torch eager"]),
                   "gradc_runs_s": times["gradc"], "torch_runs_s": times["torch eager"]}
            log(f"alloc {model} b={batch} {label}: gradc {fmt_s(row['gradc_s'])}, torch {fmt_s(row['torch_s'])}, "
                f"ratio {fmt_ratio(ratio(row['gradc_s'], row['torch_s']))}")
            rows.append(row)
    return rows


def format_alloc(rows, cfg, out_dir):
    md = ["## Step time and the allocator", "",
          "gradc without remat vs PyTorch eager, alternated, with glibc's default malloc settings and with "
          "`MALLOC_MMAP_THRESHOLD_=MALLOC_TRIM_THRESHOLD_=1073741824` for both (freed memory is never returned to "
          "the OS, so no step faults fresh pages in).", "",
          "| model | batch | malloc | gradc | PyTorch eager | time ratio | per-repeat ratios |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        per = ", ".join("—" if x is None else f"{x:.2f}" for x in
                        (ratio(a, b) for a, b in zip(r["gradc_runs_s"], r["torch_runs_s"])))
        md.append(f"| {r['model']} | {r['batch']} | {r['allocator']} | {fmt_s(r['gradc_s'])} | {fmt_s(r['torch_s'])} | "
                  f"**{fmt_ratio(ratio(r['gradc_s'], r['torch_s']))}** | {per} |")
    return "\n".join(md)


def section_blas(runner, cfg, log):
    """gradc (automatic kernel selection) vs PyTorch eager, twice: as a PyTorch user gets it (no
    OPENBLAS_CORETYPE) and with both forced to the core gradc runs with; and both with
    OpenBLAS's oldest x86-64 kernels (Prescott), what a misdetected virtual CPU gives."""
    rows = []
    probe = runner.gradc_train("mlp", 8, 1, [])  # the core gradc runs with (its "kernels:" line)
    core = None
    for line in probe["stderr"].splitlines():
        if line.startswith("kernels:") and " core " in line:
            core = line.split(" core ", 1)[1].split(" ", 1)[0]
    variants = [("as the user gets it", {}), (f"both forced to {core}", {"OPENBLAS_CORETYPE": core or ""}),
                ("both forced to Prescott", {"OPENBLAS_CORETYPE": "Prescott"})]
    for model, batch, steps, warmup in cfg["blas"]:
        for label, extra in variants:
            times = alternated_step_times(runner, cfg, model, batch, steps, warmup, extra)
            row = {"model": model, "batch": batch, "variant": label, "env": extra, "core": core,
                   "gradc_s": med(times["gradc"]), "torch_s": med(times["torch eager"]),
                   "gradc_runs_s": times["gradc"], "torch_runs_s": times["torch eager"]}
            log(f"blas {model} b={batch} {label}: gradc {fmt_s(row['gradc_s'])}, torch {fmt_s(row['torch_s'])}, "
                f"ratio {fmt_ratio(ratio(row['gradc_s'], row['torch_s']))}")
            rows.append(row)
    return rows


def format_blas(rows, cfg, out_dir):
    md = ["## BLAS kernels: what kernel selection buys and what the compiler buys", "",
          "Step time, alternated, one thread, glibc defaults. \"As the user gets it\": no OPENBLAS_CORETYPE (gradc "
          "selects a better core itself when OpenBLAS misdetects the CPU; PyTorch runs OpenBLAS's choice). "
          "\"Forced\": OPENBLAS_CORETYPE set for both.", "",
          "| model | batch | kernels | gradc | PyTorch eager | ratio |", "|---|---|---|---|---|---|"]
    for r in rows:
        md.append(f"| {r['model']} | {r['batch']} | {r['variant']} | {fmt_s(r['gradc_s'])} | {fmt_s(r['torch_s'])} | "
                  f"**{fmt_ratio(ratio(r['gradc_s'], r['torch_s']))}** |")
    return "\n".join(md)


def section_arena(runner, cfg, log):
    """Arena execution, with glibc's default malloc settings for every run:
    rss    gradc's peak RSS above the idle baseline under --budget 512MiB (SGD, no momentum, as
           the budget's headline case) at several batches, arena vs GRADC_NO_ARENA=1, against the
           limit budget x 1.05 + 8 MiB;
    speed  gradc vs PyTorch eager step time, alternated run by run, and minor page faults per
           step after the first (each system counts its own with getrusage around every step)."""
    c = cfg["arena"]
    budget = c["budget_mib"] * MiB
    flags = ["--budget", f"{c['budget_mib']}MiB", "--optimizer", "sgd", "--momentum", "0"]
    rss = []
    for batch in c["rss_batches"]:
        row = {"model": "gpt-mini", "batch": batch, "budget_bytes": budget, "limit_bytes": budget * 1.05 + 8 * MiB}
        for label, extra in (("arena", {}), ("refcount", {"GRADC_NO_ARENA": "1"})):
            saved = runner.env
            runner.env = dict(saved, **extra)
            try:
                r = runner.gradc_train("gpt-mini", batch, 3, flags)
            finally:
                runner.env = saved
            row[label] = {"rc": r["rc"], "peak_rss_bytes": r.get("peak_rss_bytes"), "baseline_kb": r.get("baseline_kb"),
                          "peak_tracked": r.get("peak_tracked"), "peak_planned": r.get("peak_planned"),
                          "plan_line": r.get("plan_line")}
        a = row["arena"]["peak_rss_bytes"]
        row["within_limit"] = a is not None and a <= row["limit_bytes"]
        log(f"arena rss gpt-mini b={batch}: arena {fmt_bytes(a)}, refcount {fmt_bytes(row['refcount']['peak_rss_bytes'])},"
            f" limit {fmt_bytes(row['limit_bytes'])}")
        rss.append(row)
    speed = []
    for model, batch, steps, warmup in c["speed"]:
        times = {"gradc": [], "torch eager": []}
        faults = {"gradc": [], "torch eager": []}  # per run: median minor faults of the steps after the first
        for rep in range(cfg["repeats"]):
            order = ["gradc", "torch eager"] if rep % 2 == 0 else ["torch eager", "gradc"]
            for sname in order:
                r = runner.run_system(sname, model, batch, steps)
                times[sname].append(med(r["step_times"][warmup:]) if r["rc"] == 0 else None)
                f = [x for x in (r.get("step_faults") or [])[1:] if x is not None]
                faults[sname].append(med(f) if r["rc"] == 0 and f else None)
        per_step = {sname: med([x for x in f if x is not None]) for sname, f in faults.items()}
        row = {"model": model, "batch": batch, "steps": steps, "warmup": warmup,
               "gradc_s": med(times["gradc"]), "torch_s": med(times["torch eager"]),
               "gradc_runs_s": times["gradc"], "torch_runs_s": times["torch eager"], "faults_per_step": per_step}
        log(f"arena speed {model} b={batch}: gradc {fmt_s(row['gradc_s'])}, torch {fmt_s(row['torch_s'])}, ratio "
            f"{fmt_ratio(ratio(row['gradc_s'], row['torch_s']))}, faults/step {per_step}")
        speed.append(row)
    return {"rss": rss, "speed": speed}


def format_arena(data, cfg, out_dir):
    md = ["## Arena execution: peak RSS against the budget", "",
          "gpt-mini, `--budget 512MiB --optimizer sgd --momentum 0`, 3 steps, glibc's default malloc settings. Peak RSS "
          "above the idle baseline (LibTorch loaded, nothing trained), measured as in the other sections; the limit "
          "is budget x 1.05 + 8 MiB.", "",
          "| batch | plan | tracked peak | RSS, arena | RSS, GRADC_NO_ARENA=1 | limit | within |",
          "|---|---|---|---|---|---|---|"]
    for r in data["rss"]:
        a, rc = r["arena"], r["refcount"]
        md.append(f"| {r['batch']} | {a.get('plan_line') or '—'} | {fmt_bytes(a.get('peak_tracked'))} | "
                  f"**{fmt_bytes(a.get('peak_rss_bytes'))}** | {fmt_bytes(rc.get('peak_rss_bytes'))} | "
                  f"{fmt_bytes(r['limit_bytes'])} | {yesno(a.get('peak_rss_bytes'), r['limit_bytes'])} |")
    md += ["", "## Arena execution: step time and page faults against PyTorch eager", "",
           "Alternated run by run, glibc defaults for both, medians; minor page faults per step after the first "
           "(each system counts its own with getrusage around every step; median over steps and runs).", "",
           "| model | batch | gradc | PyTorch eager | time ratio | per-repeat ratios | faults/step gradc | faults/step PyTorch |",
           "|---|---|---|---|---|---|---|---|"]
    for r in data["speed"]:
        per = ", ".join("—" if x is None else f"{x:.2f}" for x in
                        (ratio(a, b) for a, b in zip(r["gradc_runs_s"], r["torch_runs_s"])))
        f = r["faults_per_step"]
        fg, ft = f.get("gradc"), f.get("torch eager")
        md.append(f"| {r['model']} | {r['batch']} | {fmt_s(r['gradc_s'])} | {fmt_s(r['torch_s'])} | "
                  f"**{fmt_ratio(ratio(r['gradc_s'], r['torch_s']))}** | {per} | "
                  f"{'—' if fg is None else f'{fg:.0f}'} | {'—' if ft is None else f'{ft:.0f}'} |")
    return "\n".join(md)


def search_max(fits, unit, cap, start):
    """Largest multiple of `unit` in [unit, cap] for which fits(b) holds, assuming monotonicity;
    doubling from `start`, then bisection. Returns (best, probes) where best is 0 if nothing fits."""
    probes = {}

    def f(b):
        if b not in probes:
            probes[b] = fits(b)
        return probes[b]

    lo, hi = 0, None  # lo fits (0 = nothing known), hi does not
    b = max(unit, min(cap, (start // unit) * unit))
    while True:
        if f(b):
            lo = b
            if b >= cap:
                return cap, probes
            b = min(cap, b * 2)
        else:
            hi = b
            break
        if lo == cap:
            return cap, probes
    if lo == 0:
        # b failed; go down.
        b2 = hi
        while b2 > unit:
            b2 = max(unit, (b2 // 2 // unit) * unit)
            if f(b2):
                lo = b2
                break
            hi = b2
        if lo == 0:
            return 0, probes
    while hi - lo > unit:
        mid = ((lo + hi) // 2 // unit) * unit
        if mid <= lo:
            mid = lo + unit
        if f(mid):
            lo = mid
        else:
            hi = mid
    return lo, probes


def gradc_feasible(runner, model, batch, budget, micro):
    """The planner's answer without running: gradc compile --emit plan under the budget."""
    out = os.path.join(runner.tmp, "probe-plan.json")
    cmd = [runner.gradc, "compile", runner.spec(model), "--set", f"batch={batch}", "--emit", "plan", "--budget",
           str(budget), "--remat", "auto", "--micro-batches", micro, "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True, env=runner.env)
    if r.returncode == 0:
        with open(out) as f:
            plan = json.load(f)
        return True, plan["peak_bytes"], None
    return False, None, (r.stderr.strip().splitlines() or [""])[-1][:300]


def section_maxbatch(runner, cfg, log):
    rows = []
    overheads = {}
    idle = {}  # gradc's baseline RSS at the bundled batch
    for model, (budgets, unit, cap) in cfg["maxbatch"].items():
        default_batch = models.DEFAULT_DIMS[model]["batch"]
        # gradc's RSS beyond its tracked tensors, at the bundled batch (LibTorch and OpenBLAS
        # buffers, executor and graph structures), rounded up to a MiB.
        r = runner.gradc_train(model, default_batch, 2, [], mem=True)
        overheads[model] = -(-(r["peak_rss_bytes"] - r["peak_tracked"]) // MiB) * MiB
        idle[model] = r["baseline_kb"]
        log(f"maxbatch {model}: gradc RSS overhead beyond tracked tensors {fmt_bytes(overheads[model])}")
        for mib in budgets:
            budget = mib * MiB
            row = {"model": model, "budget_bytes": budget, "unit": unit, "cap": cap, "systems": {},
                   "gradc_idle_baseline_kb": idle[model]}
            # gradc: the planner decides (exit 2 = refused), then one measured run confirms.
            for label, micro in (("gradc (remat auto)", "1"), ("gradc (remat auto, micro-batches auto)", "auto")):
                t0 = time.monotonic()
                best, probes = search_max(lambda b: gradc_feasible(runner, model, b, budget, micro)[0], unit, cap,
                                          default_batch)
                entry = {"max_batch": best, "probes": sorted(probes), "search_s": None}
                if best:
                    flags = ["--budget", str(budget), "--remat", "auto", "--micro-batches", micro]
                    r = runner.gradc_train(model, best, 1, flags, mem=True)
                    rd = runner.gradc_train(model, best, 1, flags)
                    entry.update({"confirm_rc": r["rc"], "peak_tracked": r.get("peak_tracked"),
                                  "baseline_kb": r.get("baseline_kb"),
                                  "peak_planned": r.get("peak_planned"), "peak_rss_bytes": r.get("peak_rss_bytes"),
                                  "peak_rss_default_bytes": rd.get("peak_rss_bytes"),
                                  "plan": r.get("plan_line", "").replace("memory plan: ", "")})
                    if best + unit <= cap:
                        entry["next_refused"] = gradc_feasible(runner, model, best + unit, budget, micro)[2]
                entry["search_s"] = round(time.monotonic() - t0, 1)
                row["systems"][label] = entry
                log(f"maxbatch {model} {mib}MiB {label}: {best} (tracked {fmt_bytes(entry.get('peak_tracked'))}, "
                    f"rss {fmt_bytes(entry.get('peak_rss_bytes'))})")
            # gradc judged like PyTorch (peak RSS <= B): pass B minus gradc's RSS overhead beyond its
            # tracked tensors (measured once per model), then confirm by RSS, stepping down if needed.
            delta = overheads[model]
            for label, micro in (("gradc (remat auto), budget B - overhead, fits by RSS", "1"),
                                 ("gradc (remat auto, micro-batches auto), budget B - overhead, fits by RSS", "auto")):
                t0 = time.monotonic()
                b2 = budget - delta
                best, probes = search_max(lambda b: gradc_feasible(runner, model, b, b2, micro)[0], unit, cap,
                                          default_batch)
                entry = {"max_batch": 0, "passed_budget": b2, "overhead": delta, "probes": sorted(probes)}
                flags = ["--budget", str(b2), "--remat", "auto", "--micro-batches", micro]
                while best > 0:
                    r = runner.gradc_train(model, best, 1, flags, mem=True)
                    if r["rc"] == 0 and r.get("peak_rss_bytes") is not None and r["peak_rss_bytes"] <= budget:
                        entry.update({"max_batch": best, "peak_tracked": r.get("peak_tracked"),
                                      "baseline_kb": r.get("baseline_kb"),
                                      "peak_planned": r.get("peak_planned"), "peak_rss_bytes": r.get("peak_rss_bytes"),
                                      "plan": r.get("plan_line", "").replace("memory plan: ", "")})
                        break
                    entry.setdefault("rss_rejected", []).append([best, r.get("peak_rss_bytes")])
                    best -= unit
                entry["search_s"] = round(time.monotonic() - t0, 1)
                row["systems"][label] = entry
                log(f"maxbatch {model} {mib}MiB {label}: {entry['max_batch']} "
                    f"(rss {fmt_bytes(entry.get('peak_rss_bytes'))})")
            # PyTorch: a batch fits when its measured peak RSS above baseline is <= the budget.
            for label, mode in (("PyTorch eager", "eager"), ("PyTorch checkpoint_sequential", "seq"),
                                ("PyTorch per-block checkpoint", "block")):
                t0 = time.monotonic()
                peaks = {}

                def fits(b, mode=mode, peaks=peaks):
                    r = runner.torch_train(model, b, 2, mode, mem=True)
                    peaks[b] = r.get("peak_rss_bytes") if r["rc"] == 0 else None
                    return r["rc"] == 0 and peaks[b] is not None and peaks[b] <= budget

                best, probes = search_max(fits, unit, cap, default_batch)
                row["systems"][label] = {"max_batch": best, "probes": sorted(probes),
                                         "peak_rss_bytes": peaks.get(best), "probe_peaks": peaks,
                                         "search_s": round(time.monotonic() - t0, 1)}
                log(f"maxbatch {model} {mib}MiB {label}: {best} (rss {fmt_bytes(peaks.get(best))})")
            rows.append(row)
    return rows


def format_maxbatch(rows, cfg, out_dir):
    md = ["## Largest batch under a budget", "",
          "Batch sizes searched in multiples of the unit shown, up to the cap. gradc: the planner's answer "
          "(`gradc compile --emit plan --budget B --remat auto --micro-batches 1|auto` exits 2 when nothing fits), "
          "confirmed by one `gradc train` step at that batch. PyTorch: 2 training steps per probe; a batch fits when "
          "its peak RSS above the idle baseline (large freed blocks returned to the OS, as for every memory run) is "
          "<= B. For gradc the same RSS is measured on the confirming run, also with glibc's default settings. The "
          "rows *budget B - overhead, fits by RSS* judge gradc exactly as PyTorch: gradc is given B minus its own RSS "
          "overhead beyond its tracked tensors (measured at the bundled batch, no budget), and a batch counts only if "
          "the measured peak RSS is <= B (its tracked peak is then <= B - overhead by the planner's guarantee). "
          "RSS above the baseline undercounts when the process's heap already holds freed memory at the baseline "
          "that training then reuses: gradc's planner leaves such heap behind when it searches many micro-batch "
          "counts on a large graph (the last column: gradc's baseline vs its usual one).", "",
          "| model | budget | system | max batch | its peak: tracked / RSS returned / RSS default | "
          "within budget: tracked / RSS returned / RSS default | gradc's baseline RSS |",
          "|---|---|---|---|---|---|---|"]
    for row in rows:
        B = row["budget_bytes"]
        for label, e in row["systems"].items():
            t = e.get("peak_tracked")
            rss = e.get("peak_rss_bytes")
            rssd = e.get("peak_rss_default_bytes")
            within_t = "—" if t is None else ("yes" if t <= B else "**NO**")
            capped = " (cap)" if e["max_batch"] == row["cap"] else ""
            base = e.get("baseline_kb")
            idle_kb = row.get("gradc_idle_baseline_kb")
            note = "" if base is None else f"{base / 1024:.0f} MiB"
            if base is not None and idle_kb is not None and base - idle_kb > 10 * 1024:
                note += f" (+{(base - idle_kb) / 1024:.0f} MiB of planning heap: RSS is a lower bound)"
            md.append(f"| {row['model']} | {fmt_bytes(B)} | {label} | {e['max_batch']}{capped} | "
                      f"{fmt_bytes(t)} / {fmt_bytes(rss)} / {fmt_bytes(rssd)} | {within_t} / {yesno(rss, B)} / "
                      f"{yesno(rssd, B)} | {note} |")
    return "\n".join(md)


def compile_plan(runner, model, strategy, budget=None, micro="1", extra=()):
    out = os.path.join(runner.tmp, "sweep-plan.json")
    cmd = [runner.gradc, "compile", runner.spec(model), "--emit", "plan", "--remat", strategy, "-o", out, *extra]
    if budget is not None:
        cmd += ["--budget", str(budget), "--micro-batches", micro]
    r = subprocess.run(cmd, capture_output=True, text=True, env=runner.env)
    if r.returncode != 0:
        return None
    with open(out) as f:
        p = json.load(f)
    return {"peak": p["peak_bytes"], "recompute_pct": 100.0 * p["recompute_flops"] / p["forward_flops"],
            "strategy": p["strategy"]}


def section_planner(runner, cfg, log):
    data = {}
    for model, npts in cfg["planner"].items():
        pts = {}
        fixed = {}
        for s in ("none", "sqrt", "selective", "memory-poor", "chain"):
            fixed[s] = compile_plan(runner, model, s)
        lo = fixed["memory-poor"]["peak"]
        hi = fixed["none"]["peak"]
        # From just above memory-poor's peak (the smallest any strategy reaches) to no-remat's.
        lo = lo * 1.002
        budgets = [int(lo + (hi - lo) * i / (npts - 1)) for i in range(npts)]
        for s in ("chain", "auto"):
            pts[s] = []
            for b in budgets:
                r = compile_plan(runner, model, s, b)
                pts[s].append({"budget": b, **(r or {"peak": None, "recompute_pct": None})})
        # sqrt at equal peak: chain and auto with the sqrt plan's peak as the budget.
        sq = fixed["sqrt"]
        # If nothing fits exactly sqrt's reported peak (the budget check and --emit plan can differ
        # slightly), 1% more is tried and the budget used is recorded.
        at_sqrt = {}
        for s in ("chain", "auto"):
            for f in (1.0, 1.01):
                r = compile_plan(runner, model, s, int(sq["peak"] * f))
                if r:
                    r["budget"] = int(sq["peak"] * f)
                    break
            at_sqrt[s] = r
        data[model] = {"fixed": fixed, "sweep": pts, "budgets": budgets, "at_sqrt_peak": at_sqrt,
                       "checkpoint_sequential": checkpoint_sequential_points(runner, model, log)
                       if model in cfg.get("planner_segments", ()) else []}
        log(f"planner {model}: {len(budgets)} budgets; sqrt {fmt_bytes(sq['peak'])} {sq['recompute_pct']:.1f}%; at that "
            f"budget: " + ", ".join(f"{k} {'no plan' if v is None else '%.1f%%' % v['recompute_pct']}"
                                    for k, v in at_sqrt.items()))
    return data


def checkpoint_sequential_points(runner, model, log):
    """torch.utils.checkpoint.checkpoint_sequential's segment choices, planned by gradc on the same
    step (build/bench/remat_curve, beside the gradc binary), each with gradc's own plan at that
    peak as the budget (the loss unfused in both, so only the recompute choice differs)."""
    tool = os.path.join(os.path.dirname(os.path.abspath(runner.gradc)), "bench", "remat_curve")
    if not os.path.exists(tool):
        log(f"planner {model}: no {tool}; build it (ninja -C build remat_curve) for the checkpoint_sequential series")
        return []
    r = subprocess.run([tool, runner.spec(model), "--budgets", "0"], capture_output=True, text=True, env=runner.env)
    if r.returncode != 0:
        log(f"planner {model}: remat_curve failed: {r.stderr.strip()}")
        return []
    curve = json.loads(r.stdout)
    out = []
    for p in curve["points"]:
        if p["series"] != "checkpoint_sequential":
            continue
        g = compile_plan(runner, model, "auto", p["peak"], extra=("--loss-chunks", "off"))
        out.append({"plan": p["plan"], "segments": int(p["plan"].split(": ")[1].split()[0]), "peak": p["peak"],
                    "recompute_pct": 100.0 * p["recompute_flops"] / curve["forward_flops"], "gradc": g})
    return out


def format_planner(data, cfg, out_dir):
    md = ["## Planner quality: recompute vs peak", "",
          "Predicted by gradc's memory plan (`gradc compile SPEC --emit plan --remat S [--budget B]`; the plan's "
          "peak matches the measured one to the byte on these models, docs/memory.md). Recompute = recompute FLOPs "
          "/ forward FLOPs. chain and auto swept over budgets from memory-poor's peak to no-remat's peak.", ""]
    for model, d in data.items():
        f = d["fixed"]
        md += [f"### {model}", "", "| strategy | predicted peak | recompute (% of a forward) |", "|---|---|---|"]
        for s, v in f.items():
            label = s + (" (no budget)" if s == "chain" else "")
            md.append(f"| {label} | {fmt_bytes(v['peak'])} | {v['recompute_pct']:.1f}% |")
        sq = f["sqrt"]
        md += ["", f"At sqrt's peak ({fmt_bytes(sq['peak'])}, {sq['recompute_pct']:.1f}% recompute) as the budget:"]
        for s, v in d["at_sqrt_peak"].items():
            if v:
                note = "" if v.get("budget", sq["peak"]) == sq["peak"] else \
                    f" (budget {fmt_bytes(v['budget'])}: nothing fits exactly {sq['peak']:,} bytes)"
                md.append(f"- {s}{note}: peak {fmt_bytes(v['peak'])}, recompute {v['recompute_pct']:.1f}% "
                          f"({'%.2f' % (v['recompute_pct'] / sq['recompute_pct']) if sq['recompute_pct'] else '—'}x sqrt's)")
            else:
                md.append(f"- {s}: no plan")
        md += ["", "| budget | chain: peak | chain: recompute | auto: peak | auto: recompute |", "|---|---|---|---|---|"]
        for c, a in zip(d["sweep"]["chain"], d["sweep"]["auto"]):
            md.append(f"| {fmt_bytes(c['budget'])} | {fmt_bytes(c['peak'])} | "
                      f"{'—' if c['recompute_pct'] is None else '%.1f%%' % c['recompute_pct']} | {fmt_bytes(a['peak'])} | "
                      f"{'—' if a['recompute_pct'] is None else '%.1f%%' % a['recompute_pct']} |")
        cs = d.get("checkpoint_sequential", [])
        if cs:
            md += ["", "torch.utils.checkpoint.checkpoint_sequential's segment choices (k segments: each segment's input "
                   "kept, every segment but the last recomputed), planned by gradc on the same step "
                   "(`build/bench/remat_curve`), against gradc's own plan with that peak as the budget (`--remat auto "
                   "--loss-chunks off`):", "",
                   "| segments | checkpoint_sequential: peak | recompute | gradc at that budget: peak | recompute |",
                   "|---|---|---|---|---|"]
            for p in cs:
                g = p["gradc"]
                md.append(f"| {p['segments']} | {fmt_bytes(p['peak'])} | {p['recompute_pct']:.1f}% | "
                          f"{fmt_bytes(g['peak']) if g else 'no plan'} | "
                          f"{'%.1f%%' % g['recompute_pct'] if g else '—'} |")
        md += ["", f"![recompute vs peak, {model}](planner-{model}.svg)", ""]
        write_svg(os.path.join(out_dir, f"planner-{model}.svg"), model, d)
    return "\n".join(md)


OFF_SCALE_ROW = {"memory-poor": 0, "auto": 1, "chain": 2, "checkpoint_sequential": 3}


def write_svg(path, model, d):
    """Peak (MiB) on x, recompute (% of a forward) on y; one series per strategy."""
    series = {}
    for s in ("chain", "auto"):
        series[s] = sorted({(p["peak"], p["recompute_pct"]) for p in d["sweep"][s] if p["peak"] is not None})
    for s, v in d["fixed"].items():
        if s != "chain":
            series.setdefault(s, []).append((v["peak"], v["recompute_pct"]))
    if d.get("checkpoint_sequential"):
        series["checkpoint_sequential"] = sorted((p["peak"], p["recompute_pct"]) for p in d["checkpoint_sequential"])
    allp = [p for v in series.values() for p in v]
    xs = [p[0] / MiB for p in allp]
    ys = [p[1] for p in allp]
    W, H, L, R, T, B = 640, 400, 70, 170, 30, 50
    x0, x1 = 0.0, max(xs) * 1.05
    # The y axis covers the single-plan strategies but memory-poor (several forwards of recompute,
    # which would flatten the rest); points above it are drawn on the top edge with their value.
    ys_main = [v["recompute_pct"] for k, v in d["fixed"].items() if k != "memory-poor" and v]
    y1 = max(max(ys_main) * 1.3 if ys_main else 0.0, 10.0)
    y0 = 0.0

    def X(v):
        return L + (v - x0) / (x1 - x0) * (W - L - R)

    def Y(v):
        return H - B - (v - y0) / (y1 - y0) * (H - T - B)

    colors = {"chain": "#1f77b4", "auto": "#ff7f0e", "sqrt": "#2ca02c", "selective": "#9467bd",
              "memory-poor": "#d62728", "none": "#333333", "checkpoint_sequential": "#8c564b"}
    out = frame(W, H, L, R, T, B, f"{model}: recompute vs predicted peak (gradc plans)")

    for v in ticks(x0, x1):
        out.append(f'<line x1="{X(v):.1f}" y1="{H - B}" x2="{X(v):.1f}" y2="{H - B + 4}" stroke="black"/>')
        out.append(f'<text x="{X(v):.1f}" y="{H - B + 17}" text-anchor="middle">{v:g}</text>')
    for v in ticks(y0, y1):
        out.append(f'<line x1="{L - 4}" y1="{Y(v):.1f}" x2="{L}" y2="{Y(v):.1f}" stroke="black"/>')
        out.append(f'<line x1="{L}" y1="{Y(v):.1f}" x2="{W - R}" y2="{Y(v):.1f}" stroke="#e0e0e0"/>')
        out.append(f'<text x="{L - 7}" y="{Y(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">predicted peak of the training step (MiB)</text>')
    out.append(f'<text transform="translate(18,{(T + H - B) / 2}) rotate(-90)" text-anchor="middle">'
               f'recompute (% of one forward)</text>')
    ly = T + 10
    for s, pts in series.items():
        c = colors.get(s, "black")
        pts = sorted(pts)
        if len(pts) > 1:
            points = " ".join(f"{X(p[0] / MiB):.1f},{Y(min(p[1], y1)):.1f}" for p in pts)
            out.append(f'<polyline points="{points}" fill="none" stroke="{c}" stroke-width="1.5"/>')
        for p in pts:
            if p[1] > y1:
                x = X(p[0] / MiB)
                out.append(f'<path d="M{x - 5:.1f},{T + 6} L{x + 5:.1f},{T + 6} L{x:.1f},{T - 2} Z" fill="{c}"/>')
                out.append(f'<text x="{x + 7:.1f}" y="{T + 14 + 12 * OFF_SCALE_ROW.get(s, 3)}" fill="{c}">'
                           f'{s} {p[1]:.0f}% (off scale)</text>')
            else:
                out.append(f'<circle cx="{X(p[0] / MiB):.1f}" cy="{Y(p[1]):.1f}" r="3.5" fill="{c}"/>')
        out.append(f'<circle cx="{W - R + 20}" cy="{ly}" r="4" fill="{c}"/>')
        out.append(f'<text x="{W - R + 30}" y="{ly + 4}">{s}</text>')
        ly += 18
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


# ---- machine ----------------------------------------------------------------------------------


def machine_info(gradc):
    import torch

    model_name = None
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model_name = line.split(":", 1)[1].strip()
                break
    mem_kb = None
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem_kb = int(line.split()[1])
    debian = open("/etc/debian_version").read().strip() if os.path.exists("/etc/debian_version") else None

    def dpkg(pkg):
        r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True)
        return r.stdout.strip() or None

    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model_name,
        "mem_total_gib": round(mem_kb / 2**20, 1) if mem_kb else None,
        "debian": debian,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "libtorch_deb": dpkg("libtorch1.13"),
        "python3_torch_deb": dpkg("python3-torch"),
        "openblas_deb": dpkg("libopenblas0-openmp"),
        "gradc": gradc,
        "gradc_built": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(os.path.getmtime(os.path.join(ROOT, gradc)))),
        "git_commit": commit.stdout.strip() or None,
        "loadavg_start": open("/proc/loadavg").read().split()[:3],
    }


# ---- headline ---------------------------------------------------------------------------------


def headline(out_dir):
    """The targets, from whatever section results exist in out_dir (reported, not asserted)."""

    def load(name):
        p = os.path.join(out_dir, name + ".json")
        return json.load(open(p))["results"] if os.path.exists(p) else None

    md = ["## Headline (targets are reported, not asserted)", ""]
    st = load("steptime")
    if st:
        md += ["Step time, gradc without remat / PyTorch eager (target: <= 1.10x), and peak RSS (returned) ratio:", "",
               "| model | batch | time ratio | within 1.1x | peak RSS ratio |", "|---|---|---|---|---|"]
        for row in st:
            S = row["systems"]
            t = ratio(S["gradc"]["step_time_s"], S["torch eager"]["step_time_s"])
            m = ratio(S["gradc"]["peak_rss_mmap_bytes"], S["torch eager"]["peak_rss_mmap_bytes"])
            md.append(f"| {row['model']} | {row['batch']} | {fmt_ratio(t)} | {'—' if t is None else ('yes' if t <= 1.1 else '**no**')} | "
                      f"{fmt_ratio(m)} |")
        md.append("")
    mb = load("maxbatch")
    if mb:
        md += ["Largest batch at equal budget (target: gradc above PyTorch checkpoint_sequential):", "",
               "| model | budget | gradc (planner) | gradc + micro-batches (planner) | gradc, fits by RSS | "
               "gradc + micro-batches, fits by RSS | PyTorch eager | PyTorch checkpoint_sequential | "
               "PyTorch per-block checkpoint |", "|---|---|---|---|---|---|---|---|---|"]
        for row in mb:
            S = row["systems"]

            def g(k):
                e = S.get(k)
                return "—" if e is None else str(e["max_batch"]) + (" (cap)" if e["max_batch"] == row["cap"] else "")

            md.append(f"| {row['model']} | {fmt_bytes(row['budget_bytes'])} | {g('gradc (remat auto)')} | "
                      f"{g('gradc (remat auto, micro-batches auto)')} | "
                      f"{g('gradc (remat auto), budget B - overhead, fits by RSS')} | "
                      f"{g('gradc (remat auto, micro-batches auto), budget B - overhead, fits by RSS')} | "
                      f"{g('PyTorch eager')} | {g('PyTorch checkpoint_sequential')} | {g('PyTorch per-block checkpoint')} |")
        md.append("")
    checks = []
    bu = load("budget")
    for r in bu or []:
        if r["rc"] == 0:
            checks.append((f"budget {r['model']} {fmt_bytes(r['budget_bytes'])} micro {r['micro_batches']}",
                           r["peak_tracked"], r.get("peak_rss_mmap_bytes"), r["budget_bytes"]))
    for row in mb or []:
        for label, e in row["systems"].items():
            if label.startswith("gradc (") and "fits by RSS" not in label and e.get("peak_tracked") is not None:
                checks.append((f"max batch {row['model']} {fmt_bytes(row['budget_bytes'])} {label}",
                               e["peak_tracked"], e.get("peak_rss_bytes"), row["budget_bytes"]))
    if checks:
        over_t = [c for c in checks if c[1] > c[3]]
        over_r = [c for c in checks if c[2] is not None and c[2] > c[3]]
        md += [f"gradc's measured peak vs its budget over {len(checks)} budgeted runs: tracked peak above the "
               f"budget in {len(over_t)}; peak RSS (returned) above the budget in {len(over_r)}"
               + (" (largest excess " + fmt_bytes(max(c[2] - c[3] for c in over_r)) + ")" if over_r else "") + ".", ""]
    return "\n".join(md)


# ---- main -------------------------------------------------------------------------------------


def loadavg():
    return open("/proc/loadavg").read().split()[:3]


def section_fusion(runner, cfg, log):
    return fusion_section.section_fusion(runner, cfg, log, med, fmt_s, ratio, fmt_ratio)


def format_fusion(rows, cfg, out_dir):
    return fusion_section.format_fusion(rows, cfg, out_dir, fmt_s, ratio, fmt_ratio, fmt_bytes)


def section_convnets(runner, cfg, log):
    return convnet_section.section_convnets(runner, cfg, log, sys.modules[__name__])


def format_convnets(data, cfg, out_dir):
    return convnet_section.format_convnets(data, cfg, out_dir, sys.modules[__name__])


FORMATTERS = {"parity": format_parity, "steptime": format_steptime, "alloc": format_alloc, "budget": format_budget,
              "maxbatch": format_maxbatch, "planner": format_planner, "arena": format_arena,
              "blas": format_blas, "fusion": format_fusion, "convnets": format_convnets}
SECTIONS = {"parity": section_parity, "steptime": section_steptime, "alloc": section_alloc, "budget": section_budget,
            "maxbatch": section_maxbatch, "planner": section_planner, "arena": section_arena,
            "blas": section_blas, "fusion": section_fusion, "convnets": section_convnets}


def write_report(out_dir):
    """report.md (and every SECTION.md and plot) from the SECTION.json files in out_dir."""
    parts = ["# gradc vs PyTorch: results", ""]
    machine = None
    runs = []
    for s in SECTIONS:
        p = os.path.join(out_dir, f"{s}.json")
        if not os.path.exists(p):
            continue
        d = json.load(open(p))
        machine = machine or d["machine"]
        md = FORMATTERS[s](d["results"], d.get("config"), out_dir)
        with open(os.path.join(out_dir, f"{s}.md"), "w") as f:
            f.write(md + "\n")
        m = d["machine"]
        runs.append(f"| {s} | {d.get('started', '?')} | {d['elapsed_s']:.0f} s | {' '.join(d.get('loadavg_start', []))} | "
                    f"{' '.join(d.get('loadavg_end', []))} | `{m['command']}` |")
        parts.append(md)
    if machine is None:
        return None
    m = machine
    head = [f"Machine: {m['nproc']} cores ({m['cpu_model']}), {m['mem_total_gib']} GiB, Debian {m['debian']} "
            f"(kernel {m['kernel']}), PyTorch/LibTorch {m['libtorch_deb']} (python3-torch {m['python3_torch_deb']}), "
            f"OpenBLAS {m['openblas_deb']} (OpenMP); {m['threads']} intra-op thread(s) for both systems; the "
            f"working tree was at commit {m['git_commit']} when the run started"
            + (f"; the gradc binary was built {m['gradc_built']}" if m.get("gradc_built") else "") + ".", "",
            "| section | started (UTC) | took | load average at start | at end | command |", "|---|---|---|---|---|---|"]
    head += runs + ["", headline(out_dir)]
    text = "\n".join(parts[:2] + head + parts[2:])
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(text)
    return os.path.join(out_dir, "report.md")


def main():
    ap = argparse.ArgumentParser(description="gradc vs PyTorch benchmarks (see the header of this file)")
    ap.add_argument("--quick", action="store_true", help="a reduced run of a few minutes")
    ap.add_argument("--gradc", default=os.path.join(ROOT, "build-bench", "gradc"))
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--sections", default=",".join(SECTIONS))
    ap.add_argument("--threads", type=int, default=1, help="intra-op threads for both systems (default 1)")
    ap.add_argument("--repeats", type=int, help="override the number of alternated runs per configuration")
    ap.add_argument("--report-only", action="store_true",
                    help="run nothing: rewrite the tables, plots and report.md from the JSON in --out")
    a = ap.parse_args()

    if a.report_only:
        print(write_report(a.out) or f"no results in {a.out}")
        return
    if not os.access(a.gradc, os.X_OK):
        sys.exit(f"compare.py: no gradc binary at {a.gradc} (build it: ninja -C build-bench gradc)")
    cfg = dict(QUICK if a.quick else FULL)
    if a.repeats:
        cfg["repeats"] = a.repeats
    os.makedirs(a.out, exist_ok=True)
    t_start = time.monotonic()

    def log(msg):
        print(f"[{time.monotonic() - t_start:6.0f} s] {msg}", flush=True)

    sections = [s.strip() for s in a.sections.split(",") if s.strip()]
    for s in sections:
        if s not in SECTIONS:
            sys.exit(f"compare.py: unknown section {s!r} (sections: {', '.join(SECTIONS)})")
    info = machine_info(os.path.relpath(a.gradc, ROOT))
    info["threads"] = a.threads
    info["mode"] = "quick" if a.quick else "full"
    info["command"] = " ".join(["/usr/bin/python3", "bench/compare.py"] + sys.argv[1:])
    log(f"machine: {info['nproc']} cores, {info['cpu_model']}, torch {info['torch']}, threads {a.threads}")
    with tempfile.TemporaryDirectory(prefix="gradc-bench-") as tmp:
        runner = Runner(a.gradc, a.threads, tmp, log)
        for s in sections:
            t0 = time.monotonic()
            started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
            la0 = loadavg()
            data = SECTIONS[s](runner, cfg, log)
            elapsed = time.monotonic() - t0
            with open(os.path.join(a.out, f"{s}.json"), "w") as f:
                json.dump({"machine": info, "config": cfg.get(s) if s not in ("steptime", "alloc", "blas") else
                           {"repeats": cfg["repeats"], "models": cfg[s]},
                           "started": started, "elapsed_s": round(elapsed, 1), "loadavg_start": la0,
                           "loadavg_end": loadavg(), "results": data}, f, indent=1, default=str)
            log(f"section {s} done in {elapsed:.0f} s")
    log(f"done: {write_report(a.out)}")


if __name__ == "__main__":
    main()
