#!/usr/bin/python3
"""Every output of `gradc compile` over the bundled models, recorded, so that two builds can be
compared byte for byte (a refactor of the compiler should change none of them).

    /usr/bin/python3 bench/compiler_outputs.py record --gradc PATH --out DIR
                     [--models a,b,...] [--jobs N] [--cases FILE] [--timeout S]
    /usr/bin/python3 bench/compiler_outputs.py compare DIR_A DIR_B [--lines N] [--models a,b,...]

A typical check of a refactor:

    /usr/bin/python3 bench/compiler_outputs.py record --gradc /tmp/old/gradc --out /tmp/co-old
    /usr/bin/python3 bench/compiler_outputs.py record --gradc build/gradc --out /tmp/co-new \\
                     --cases /tmp/co-old/cases.json
    /usr/bin/python3 bench/compiler_outputs.py compare /tmp/co-old /tmp/co-new

record runs, for each model, these `gradc compile` command lines (from the repository root, the
spec given as models/NAME.yaml):

  ir                       --emit ir
  plan[-dN]                --emit plan, no budget; without --devices and with --devices 1, 2, 4
  plan-bP[-dN]             --emit plan --budget B, B = P% of the model's own no-budget plan peak
                           (the peak_bytes of case `plan`), P = 90, 60, 35, rounded to bytes;
                           same four device variants
  plan-bP-auto[-dN]        the same plus --shard auto --loss-chunks auto --micro-batches auto
  summary, summary-b60     --emit summary, no budget and at the middle budget

31 cases per model. A refusal (an infeasible budget with its "smallest feasible budget", a batch
the devices do not divide) is an output like any other. Each case becomes DIR/MODEL/CASE.txt: the
command line, the exit status (or "timeout"), then stdout and stderr with their sizes.

The models are models/*.yaml at their own dims, plus two large variants under their own names:
llama-1b (the Llama 3.2 1B sizes of models/llama.yaml's header, set with --set; rope_base stays
at the spec's value, which changes no size) and resnet-deep-1001 (--set depth=1001). --models
picks some of them.

Budgets are derived once, from the binary of the first recording, and written with every
command line to DIR/cases.json; `record --cases FILE` replays exactly those command lines (a
subset with --models), so both binaries see identical arguments. Without --cases the `plan` case
of each model runs first and its peak gives the budgets; when it fails, only the no-budget cases
of that model are recorded (cases.json says so).

Normalisation: the binary's path and the repository root are replaced by <gradc> and <root> in
what is stored. Nothing else varied between two recordings with the same binary (checked: two
full recordings compared identical), so nothing else is rewritten; the summary prints no
times. Case durations go to DIR/timings.json, which compare ignores.

Cost, measured on the 2-core development machine (shared with a build) at --jobs 1: a full
recording (372 cases, 12 models) took 8 min 12 s and 9 min 9 s of wall time; a case takes ~1 s,
most of it loading the binary, and the slowest, lstm-lm and resnet-deep under the 35% budget,
take 4-11 s. That is well under the ~25 minutes that would call for trimming the large models to
fewer cases, so every model, the large variants included, runs the whole matrix. 59 of the 372
cases are refusals (exit 2; mlp fits none of its budgets: its peak is mostly parameters and
AdamW state). A recording takes ~380 MB, mostly plan JSON (resnet-deep-1001: 6 MB a plan).

compare exits 0 when both directories hold the same cases with identical contents, 1 otherwise (2:
a usage error), printing each differing case as a unified diff (the first --lines lines, default
40) and a count.
"""
import argparse
import concurrent.futures
import difflib
import itertools
import json
import os
import re
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CASES_FORMAT = "gradc-compiler-outputs-cases"
LARGE_VARIANTS = {
    # name: (bundled spec, --set arguments)
    "llama-1b": ("llama", ["vocab=128256", "d_model=2048", "heads=32", "kv_heads=8", "layers=16",
                           "d_ff=8192", "seq=2048"]),
    "resnet-deep-1001": ("resnet-deep", ["depth=1001"]),
}
BUDGET_PERCENTS = [90, 60, 35]
MIDDLE_PERCENT = 60
DEVICE_VARIANTS = [None, 1, 2, 4]   # None: no --devices flag (the default)
AUTO_FLAGS = ["--shard", "auto", "--loss-chunks", "auto", "--micro-batches", "auto"]
DEFAULT_TIMEOUT = 300


def die(msg):
    sys.stderr.write(f"compiler_outputs: {msg}\n")
    sys.exit(2)


def catalogue(root):
    """name -> (spec path relative to root, --set values), bundled models then large variants."""
    models = {}
    for f in sorted(os.listdir(os.path.join(root, "models"))):
        if f.endswith(".yaml"):
            models[f[:-5]] = (f"models/{f}", [])
    for name, (base, sets) in LARGE_VARIANTS.items():
        if base in models:
            models[name] = (models[base][0], list(sets))
    return models


def base_args(spec, sets):
    args = ["compile", spec]
    for s in sets:
        args += ["--set", s]
    return args


def device_suffix(n):
    return "" if n is None else f"-d{n}"


def device_args(n):
    return [] if n is None else ["--devices", str(n)]


def model_cases(model, spec, sets, budgets):
    """The case list of one model; budgets maps percent -> bytes (empty: no budgeted cases)."""
    b = base_args(spec, sets)
    cases = [("ir", b + ["--emit", "ir"])]
    for n in DEVICE_VARIANTS:
        cases.append((f"plan{device_suffix(n)}", b + ["--emit", "plan"] + device_args(n)))
    for p in BUDGET_PERCENTS:
        if p not in budgets:
            continue
        budget = ["--budget", str(budgets[p])]
        for n in DEVICE_VARIANTS:
            cases.append((f"plan-b{p}{device_suffix(n)}", b + ["--emit", "plan"] + budget + device_args(n)))
        for n in DEVICE_VARIANTS:
            cases.append((f"plan-b{p}-auto{device_suffix(n)}",
                          b + ["--emit", "plan"] + budget + AUTO_FLAGS + device_args(n)))
    cases.append(("summary", b + ["--emit", "summary"]))
    if MIDDLE_PERCENT in budgets:
        cases.append((f"summary-b{MIDDLE_PERCENT}",
                       b + ["--emit", "summary", "--budget", str(budgets[MIDDLE_PERCENT])]))
    return [{"model": model, "case": c, "args": a} for c, a in cases]


class Runner:
    def __init__(self, gradc, root, timeout):
        self.gradc = gradc
        self.root = root
        self.timeout = timeout
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("GRADC_")}
        self.env["LC_ALL"] = "C"
        # What is replaced in stored outputs, longest first so a path inside another goes whole.
        subs = {gradc: "<gradc>", os.path.realpath(gradc): "<gradc>",
                root: "<root>", os.path.realpath(root): "<root>"}
        self.subs = sorted(((k.encode(), v.encode()) for k, v in subs.items()), key=lambda kv: -len(kv[0]))

    def normalise(self, data):
        for k, v in self.subs:
            data = data.replace(k, v)
        return data

    def run(self, args):
        """(status line, stdout, stderr, seconds); stdout and stderr normalised bytes."""
        t = time.perf_counter()
        try:
            r = subprocess.run([self.gradc] + args, cwd=self.root, env=self.env,
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            # Partial output of a killed process is not reproducible; only the timeout is kept.
            return f"timeout after {self.timeout} s", b"", b"", time.perf_counter() - t
        dt = time.perf_counter() - t
        status = f"{r.returncode}" if r.returncode >= 0 else f"killed by signal {-r.returncode}"
        return status, self.normalise(r.stdout), self.normalise(r.stderr), dt


HEADER = b"# gradc compile output (bench/compiler_outputs.py)\n"


def case_text(args, status, out, err):
    head = HEADER + f"args: {' '.join(args)}\nexit: {status}\n".encode()
    return (head + f"--- stdout ({len(out)} bytes) ---\n".encode() + out
            + f"\n--- stderr ({len(err)} bytes) ---\n".encode() + err + b"\n")


def write_atomic(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def peak_of(plan_stdout):
    try:
        peak = json.loads(plan_stdout.decode())["peak_bytes"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None
    return peak if isinstance(peak, int) and peak > 0 else None


def cmd_record(a):
    gradc = os.path.abspath(a.gradc)
    if not (os.path.isfile(gradc) and os.access(gradc, os.X_OK)):
        die(f"{a.gradc}: not an executable file")
    root = os.path.abspath(a.root)
    if not os.path.isdir(os.path.join(root, "models")):
        die(f"{root}: no models/ folder (--root is the repository root)")
    if a.jobs < 1:
        die("--jobs must be at least 1")
    names = [m for m in a.models.split(",") if m] if a.models else None

    replay = None
    if a.cases:
        with open(a.cases) as f:
            replay = json.load(f)
        if replay.get("format") != CASES_FORMAT:
            die(f"{a.cases}: not a cases file of this script")
        timeout = a.timeout if a.timeout is not None else replay.get("timeout_s", DEFAULT_TIMEOUT)
    else:
        timeout = a.timeout if a.timeout is not None else DEFAULT_TIMEOUT

    runner = Runner(gradc, root, timeout)
    os.makedirs(a.out, exist_ok=True)
    lock = threading.Lock()
    results = {}   # (model, case) -> seconds
    started = time.perf_counter()

    def do(case):
        status, out, err, dt = runner.run(case["args"])
        d = os.path.join(a.out, case["model"])
        os.makedirs(d, exist_ok=True)
        write_atomic(os.path.join(d, case["case"] + ".txt"), case_text(case["args"], status, out, err))
        with lock:
            results[(case["model"], case["case"])] = dt
            if a.verbose or status != "0":
                print(f"  {case['model']}/{case['case']}: exit {status} ({dt:.1f} s)", flush=True)
        return status, out

    def clear_stale(models):
        # Results of an earlier recording into the same folder would be compared as if new; only
        # files this script wrote (its header) are removed.
        for m in models:
            d = os.path.join(a.out, m)
            if not os.path.isdir(d):
                continue
            for f in os.listdir(d):
                p = os.path.join(d, f)
                if f.endswith(".txt") and os.path.isfile(p):
                    with open(p, "rb") as fh:
                        own = fh.read(len(HEADER)) == HEADER
                    if own:
                        os.remove(p)

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs)
    if replay is not None:
        models_info = replay["models"]
        cases = [c for c in replay["cases"] if names is None or c["model"] in names]
        if names:
            unknown = sorted(set(names) - {c["model"] for c in replay["cases"]})
            if unknown:
                die(f"{a.cases} has no cases for: {', '.join(unknown)}")
            models_info = {m: v for m, v in models_info.items() if m in names}
        done_first = set()
        clear_stale({c["model"] for c in cases})
    else:
        cat = catalogue(root)
        if names:
            unknown = [n for n in names if n not in cat]
            if unknown:
                die(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(cat)}")
        chosen = names or list(cat)
        clear_stale(chosen)
        # The no-budget plan of each model first: its peak sets the budgets.
        firsts = {m: model_cases(m, cat[m][0], cat[m][1], {})[1] for m in chosen}
        assert all(c["case"] == "plan" for c in firsts.values())
        futures = {m: pool.submit(do, c) for m, c in firsts.items()}
        models_info, cases = {}, []
        for m in chosen:
            status, out = futures[m].result()
            peak = peak_of(out) if status == "0" else None
            budgets = {p: round(peak * p / 100) for p in BUDGET_PERCENTS} if peak else {}
            info = {"spec": cat[m][0], "set": cat[m][1], "baseline_peak_bytes": peak,
                    "budgets": {f"b{p}": b for p, b in budgets.items()}}
            if peak is None:
                info["note"] = f"no-budget plan failed (exit {status}): budgeted cases left out"
                print(f"  {m}: {info['note']}", flush=True)
            models_info[m] = info
            cases += model_cases(m, cat[m][0], cat[m][1], budgets)
        done_first = {(m, "plan") for m in chosen}
        write_atomic(os.path.join(a.out, "cases.json"), (json.dumps({
            "format": CASES_FORMAT, "version": 1, "timeout_s": timeout,
            "budget_percents": BUDGET_PERCENTS, "models": models_info, "cases": cases,
        }, indent=1) + "\n").encode())

    if replay is not None and os.path.abspath(a.cases) != os.path.abspath(os.path.join(a.out, "cases.json")):
        # The replayed list travels with the recording, so it can itself be replayed.
        write_atomic(os.path.join(a.out, "cases.json"), (json.dumps(
            dict(replay, timeout_s=timeout, models=models_info, cases=cases), indent=1) + "\n").encode())

    todo = [c for c in cases if (c["model"], c["case"]) not in done_first]
    for f in [pool.submit(do, c) for c in todo]:
        f.result()
    pool.shutdown()
    wall = time.perf_counter() - started

    per_model = {}
    for (m, c), dt in results.items():
        per_model.setdefault(m, []).append(dt)
    write_atomic(os.path.join(a.out, "timings.json"), (json.dumps({
        "gradc": gradc, "jobs": a.jobs, "wall_s": round(wall, 2),
        "models": {m: {"cases": len(v), "sum_s": round(sum(v), 2), "max_s": round(max(v), 2)}
                   for m, v in per_model.items()},
        "cases": {f"{m}/{c}": round(dt, 3) for (m, c), dt in sorted(results.items())},
    }, indent=1) + "\n").encode())
    for m in sorted(per_model):
        v = per_model[m]
        print(f"{m:18} {len(v):3} cases  {sum(v):7.1f} s (slowest {max(v):.1f} s)")
    print(f"recorded {len(results)} cases of {len(per_model)} models into {a.out} in {wall:.1f} s "
          f"(--jobs {a.jobs})")
    return 0


def case_files(d):
    out = {}
    for m in sorted(os.listdir(d)):
        p = os.path.join(d, m)
        if os.path.isdir(p):
            for f in sorted(os.listdir(p)):
                if f.endswith(".txt"):
                    out[f"{m}/{f[:-4]}"] = os.path.join(p, f)
    return out


HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def short_diff(a, b, name, limit):
    """A unified diff of two differing files, at most `limit` lines. Only a window from the first
    differing line is handed to difflib, so that two large plans that differ everywhere stay quick;
    the hunk headers are shifted back to the files' own line numbers."""
    la = a.decode("utf-8", "replace").splitlines(keepends=True)
    lb = b.decode("utf-8", "replace").splitlines(keepends=True)
    start = 0
    while start < len(la) and start < len(lb) and la[start] == lb[start]:
        start += 1
    start = max(0, start - 3)
    window = max(200, limit * 20)
    wa, wb = la[start:start + window], lb[start:start + window]
    lines = []
    for line in itertools.islice(difflib.unified_diff(wa, wb, f"A/{name}", f"B/{name}"), limit + 1):
        m = HUNK.match(line)
        if m:
            line = HUNK.sub(lambda m: f"@@ -{int(m.group(1)) + start}{m.group(2) or ''} "
                                      f"+{int(m.group(3)) + start}{m.group(4) or ''} @@", line)
        lines.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    truncated = len(lines) > limit or len(la) > start + window or len(lb) > start + window
    text = "".join(lines[:limit])
    if truncated:
        text += f"... (diff truncated: {len(la)} lines in A, {len(lb)} in B)\n"
    return text


def cmd_compare(a):
    for d in (a.a, a.b):
        if not os.path.isdir(d):
            die(f"{d}: not a directory")
    fa, fb = case_files(a.a), case_files(a.b)
    if a.models:
        keep = set(m for m in a.models.split(",") if m)
        fa = {k: v for k, v in fa.items() if k.split("/")[0] in keep}
        fb = {k: v for k, v in fb.items() if k.split("/")[0] in keep}
    if not fa and not fb:
        die("no recorded cases in either directory")
    differ = 0
    for name in sorted(set(fa) | set(fb)):
        if name not in fb:
            print(f"ONLY IN A: {name}")
            differ += 1
            continue
        if name not in fa:
            print(f"ONLY IN B: {name}")
            differ += 1
            continue
        with open(fa[name], "rb") as f:
            da = f.read()
        with open(fb[name], "rb") as f:
            db = f.read()
        if da != db:
            differ += 1
            print(f"DIFFERS: {name}")
            sys.stdout.write(short_diff(da, db, name, a.lines))
    total = len(set(fa) | set(fb))
    if differ:
        print(f"{differ} of {total} cases differ")
        return 1
    print(f"all {total} cases identical")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("record", help="run the matrix of gradc compile cases and store every output")
    r.add_argument("--gradc", required=True, help="the gradc binary")
    r.add_argument("--out", required=True, help="directory to write (MODEL/CASE.txt, cases.json, timings.json)")
    r.add_argument("--models", help="comma-separated model names (default: all)")
    r.add_argument("--jobs", type=int, default=1, help="cases run at once (default 1)")
    r.add_argument("--cases", help="replay the command lines of this cases.json instead of deriving them")
    r.add_argument("--timeout", type=int, help=f"seconds per case (default {DEFAULT_TIMEOUT}, or the cases file's)")
    r.add_argument("--root", default=ROOT, help="repository root to run from (default: this script's)")
    r.add_argument("-v", "--verbose", action="store_true", help="print every case as it finishes")
    c = sub.add_parser("compare", help="compare two recorded directories; exit 0 only if identical")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--lines", type=int, default=40, help="diff lines shown per case (default 40)")
    c.add_argument("--models", help="comma-separated model names: compare only these (recordings of a subset)")
    a = ap.parse_args()
    return cmd_record(a) if a.command == "record" else cmd_compare(a)


if __name__ == "__main__":
    sys.exit(main())
