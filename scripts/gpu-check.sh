#!/usr/bin/env bash
# Builds gradc's runtime on a GPU machine and measures what docs/gpu.md reports, in one run that
# fits a few minutes: the CUDA test suite, CPU/GPU parity, budgeted runs, GPT-2 small against
# PyTorch eager and torch.utils.checkpoint, and the seed's language model. Writes
# RESULTS_DIR/results.json and RESULTS_DIR/results.md (and every run's metrics and log), prints
# progress, and exits 1 naming each check that failed.
#
# Needs what scripts/gpu-prepare.sh made on a CPU machine (PREPARED, default .gpu: Debian packages
# of the header libraries, compiled artifacts), python3 with a CUDA torch (its CMake prefix is
# LibTorch), nvcc, and NCCL (pip's nvidia-nccl, found next to torch).
# usage: scripts/gpu-check.sh RESULTS_DIR [PREPARED]
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
results=$(mkdir -p "$1" && cd "$1" && pwd)
prepared=${2:-$src/.gpu}
work=${GPU_CHECK_WORK:-/tmp/gradc-gpu-check}
build=$work/build
python=${PYTHON:-python3}
mkdir -p "$work"
failures=()
t_start=$(date +%s)
log() { echo "[gpu-check +$(($(date +%s) - t_start))s] $*" >&2; }
fail() { log "FAILED: $*"; failures+=("$*"); }
record() { echo "$1" >>"$results/checks.jsonl"; }  # one JSON object per line
: >"$results/checks.jsonl"
[ -d "$prepared/artifacts" ] || { log "no $prepared/artifacts: run scripts/gpu-prepare.sh on a CPU machine first"; exit 1; }

# ---- toolchain ------------------------------------------------------------------------------------
log "toolchain"
nvidia-smi -L >"$results/gpus.txt" 2>&1 || true
torch_prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)') || { log "no torch in $python"; exit 1; }
torch_dir=$("$python" -c 'import torch, os; print(os.path.dirname(torch.__file__))')
site=$(dirname "$torch_dir")
"$python" -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))' \
  >"$results/torch.txt" 2>&1 || true
export NCCL_HOME=${NCCL_HOME:-$site/nvidia/nccl}
[ -f "$NCCL_HOME/include/nccl.h" ] || log "warning: no nccl.h under $NCCL_HOME"
export CUDACXX=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
prefix=$work/prefix
rm -rf "$prefix"
mkdir -p "$prefix"
for deb in "$prepared"/debs/*.deb; do dpkg -x "$deb" "$prefix"; done
# Gloo's headers: torch's own when its wheel ships them, else Debian's (used only to compile).
gloo_inc="-DGRADC_GLOO_INCLUDE_DIR=$torch_dir/include"
[ -f "$torch_dir/include/gloo/config.h" ] || gloo_inc="-DGRADC_GLOO_INCLUDE_DIR=$prefix/usr/include"
export LD_LIBRARY_PATH="$NCCL_HOME/lib:$torch_dir/lib:$prefix/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"

# ---- build ----------------------------------------------------------------------------------------
log "configure (runtime only) and build"
if ! cmake -S "$src" -B "$build" -G Ninja -DGRADC_RUNTIME_ONLY=ON -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_PREFIX_PATH="$torch_prefix;$prefix/usr" $gloo_inc \
  -DCLI11_DIR="$prefix/usr/share/cmake/CLI11" -Dnlohmann_json_DIR="$prefix/usr/share/cmake/nlohmann_json" \
  -Dfmt_DIR="$prefix/usr/lib/x86_64-linux-gnu/cmake/fmt" -Ddoctest_DIR="$prefix/usr/lib/cmake/doctest" \
  >"$results/cmake.log" 2>&1; then
  tail -30 "$results/cmake.log" >&2
  fail "configure"
  exit 1
fi
if ! cmake --build "$build" -j "$(nproc)" --target gradc-run cuda_tests -- -k 0 >"$results/build.log" 2>&1; then
  grep -E "error|Error" "$results/build.log" | head -40 >&2
  fail "build"
  exit 1
fi
run_bin=$build/gradc-run

# ---- the CUDA test suite --------------------------------------------------------------------------
log "cuda_tests"
if "$build/tests/cuda_tests" >"$results/cuda_tests.txt" 2>&1; then
  record '{"check": "cuda_tests", "passed": true}'
else
  tail -40 "$results/cuda_tests.txt" >&2
  record '{"check": "cuda_tests", "passed": false}'
  fail "cuda_tests"
fi

train() {  # train NAME ARTIFACT DEVICE STEPS [ARGS...]: a run with metrics and a checkpoint
  local name=$1 artifact=$2 device=$3 steps=$4
  shift 4
  timeout 300 "$run_bin" "$prepared/artifacts/$artifact" --synthetic --steps "$steps" --device "$device" \
    --metrics-out "$results/$name.json" --save "$work/ck-$name" "$@" >"$results/$name.log" 2>&1
}
compare() { "$python" "$src/tests/cli/compare_runs.py" "$@"; }

# ---- parity: gpt-mini, 20 steps, the same weights, data and dropout keys -------------------------
log "parity: gpt-mini on cpu and cuda, 20 steps"
if train mini-cpu gpt-mini cpu 20 && train mini-cuda gpt-mini cuda 20; then
  compare "$results/mini-cpu.json" "$results/mini-cuda.json" --rtol 1e-4 >"$results/parity-losses.txt" 2>&1 \
    && l=true || { l=false; fail "parity: losses beyond 1e-4 relative"; }
  compare "$results/mini-cpu.json" "$results/mini-cuda.json" "$work/ck-mini-cpu" "$work/ck-mini-cuda" --rtol 1e-3 \
    >"$results/parity-weights.txt" 2>&1 && w=true || { w=false; fail "parity: weights beyond 1e-3 relative"; }
  record "{\"check\": \"parity\", \"losses_within_1e-4\": $l, \"weights_within_1e-3\": $w}"
else
  fail "parity: a run failed ($(tail -2 "$results/mini-cpu.log" "$results/mini-cuda.log" | tr '\n' ' '))"
fi

# ---- budgets: measured peak <= budget and == plan within 1%; remat bit-identical to no remat ------
peak_check() {  # peak_check NAME BUDGET_BYTES
  "$python" - "$results/$1.json" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["ranks"][0]
m, p, b = r["peak_bytes_measured"], r["peak_bytes_planned"], int(sys.argv[2])
ok = m <= b and abs(m - p) <= 0.01 * p
print(json.dumps({"measured": m, "planned": p, "budget": b, "within": ok}))
sys.exit(0 if ok else 1)
PY
}
log "budgets: gpt-mini at 160 MiB and 120 MiB on cuda (36 MiB of each reserved for cuBLAS)"
train mini-none-ref-cuda gpt-mini cuda 6 || fail "gpt-mini, 6 steps on cuda"
for budget in 160 120; do
  name=mini-${budget}MiB-cuda
  ref=mini-${budget}MiB-ref-cuda  # no remat, the same loss
  train "$ref" "gpt-mini-${budget}MiB-ref" cuda 6 || fail "gpt-mini's reference for $budget MiB on cuda"
  if train "$name" "gpt-mini-${budget}MiB" cuda 6; then
    p=$(peak_check "$name" $((budget << 20))) || fail "budget $budget MiB: peak beyond the budget or 1% of the plan: $p"
    compare "$results/$ref.json" "$results/$name.json" "$work/ck-$ref" "$work/ck-$name" --rtol 0 \
      >"$results/$name-vs-none.txt" 2>&1 && same=true || { same=false; fail "budget $budget MiB: remat not bit-identical"; }
    record "{\"check\": \"budget\", \"budget_mib\": $budget, \"peak\": ${p:-null}, \"bit_identical_to_no_remat\": $same}"
  else
    fail "budget $budget MiB: the run failed: $(tail -2 "$results/$name.log" | tr '\n' ' ')"
  fi
done

# ---- NCCL: a world of one rank through the whole collective path ----------------------------------
log "NCCL: gpt-mini as a world of one with collectives, against one device without"
if train mini-nccl1-cuda gpt-mini-collectives cuda 6; then
  compare "$results/mini-none-ref-cuda.json" "$results/mini-nccl1-cuda.json" "$work/ck-mini-none-ref-cuda" \
    "$work/ck-mini-nccl1-cuda" --rtol 0 >"$results/nccl1.txt" 2>&1 && same=true || { same=false; fail "NCCL world of one != one device"; }
  record "{\"check\": \"nccl_world_of_one\", \"bit_identical_to_one_device\": $same}"
else
  fail "NCCL world of one: $(tail -3 "$results/mini-nccl1-cuda.log" | tr '\n' ' ')"
fi

# ---- fused regions as PTX: the compiled step against its reference step (ATen's kernels) -----------
# The artifact's kernels were tagged with the preparing machine's key: trusted here by flag.
log "fused PTX: gpt-mini's compiled step on cuda against its reference step, 20 steps"
if train mini-fused-ref-cuda gpt-mini-fused cuda 20 --no-generated-kernels \
  && train mini-fused-cuda gpt-mini-fused cuda 20 --trust-kernels; then
  compare "$results/mini-fused-ref-cuda.json" "$results/mini-fused-cuda.json" --rtol 1e-4 \
    >"$results/fused-losses.txt" 2>&1 && l=true || { l=false; fail "fused PTX: losses beyond 1e-4 of the reference step"; }
  p=$(peak_check mini-fused-cuda 999999999999) || fail "fused PTX: measured peak beyond 1% of the plan: $p"
  record "{\"check\": \"fused_ptx\", \"losses_within_1e-4\": $l, \"peak\": ${p:-null}}"
else
  fail "fused PTX: $(tail -2 "$results/mini-fused-ref-cuda.log" "$results/mini-fused-cuda.log" | tr '\n' ' ')"
fi

# ---- the seed's language model at its planned peak -----------------------------------------------
log "lm-seed on cuda"
if train lm-seed-cuda lm-seed cuda 5; then
  p=$(peak_check lm-seed-cuda 999999999999) || fail "lm-seed: measured peak beyond 1% of the plan: $p"
  record "{\"check\": \"lm-seed\", \"peak\": ${p:-null}}"
else
  fail "lm-seed on cuda: $(tail -2 "$results/lm-seed-cuda.log" | tr '\n' ' ')"
fi

# ---- GPT-2 small under 40 GiB: gradc vs PyTorch eager and checkpoint -----------------------------
log "GPT-2 small: PyTorch's largest batches under 40 GiB"
pt() { "$python" "$src/bench/pytorch/gpu_gpt2.py" --set vocab=50304 --budget-gib 40 "$@"; }
# GPU_CHECK_PT_LARGEST="EAGER,BLOCK" reuses the largest batches an earlier run of this check found
# on the same GPU and torch (the search takes about 80 s on an H200), saying so in the results.
if [ -n "${GPU_CHECK_PT_LARGEST:-}" ]; then
  IFS=, read -r eager_largest block_largest <<<"$GPU_CHECK_PT_LARGEST"
  for m in eager block; do
    v=eager_largest && [ $m = block ] && v=block_largest
    echo "{\"largest_batch\": ${!v}, \"from_earlier_run\": true}" >"$results/pt-$m-largest.json"
  done
  log "PyTorch's largest batches taken from an earlier run: eager $eager_largest, checkpoint $block_largest"
else
  pt --mode eager --batch 1 --steps 1 --largest >"$results/pt-eager-largest.json" 2>"$results/pt-eager.log" \
    || fail "PyTorch eager largest batch"
  pt --mode block --batch 1 --steps 1 --largest >"$results/pt-block-largest.json" 2>"$results/pt-block.log" \
    || fail "PyTorch checkpoint largest batch"
fi
eager_b=$("$python" -c "import json; print(json.load(open('$results/pt-eager-largest.json'))['largest_batch'])" 2>/dev/null || echo 8)
gradc_b=$(cat "$prepared/artifacts/gpt2-largest.txt")
# The step-time match at eager's largest batch (or the largest prepared batch below it).
match_b=$(ls "$prepared/artifacts" | sed -n 's/^gpt2-nb-b\([0-9]*\)$/\1/p' | sort -n | awk -v m="$eager_b" '$1 <= m' | tail -1)
log "GPT-2 small: alternated step times at batch ${match_b:-none} (eager's largest: $eager_b)"
for round in 1 2; do
  pt --mode eager --batch "$match_b" --steps 6 >"$results/pt-eager-$round.json" 2>>"$results/pt-eager.log" \
    || fail "PyTorch eager at batch $match_b"
  train "gpt2-nb-$round" "gpt2-nb-b$match_b" cuda 6 || fail "gradc at batch $match_b: $(tail -2 "$results/gpt2-nb-$round.log")"
  pt --mode block --batch "$match_b" --steps 6 >"$results/pt-block-$round.json" 2>>"$results/pt-block.log" \
    || fail "PyTorch checkpoint at batch $match_b"
  train "gpt2-b-$round" "gpt2-b$match_b" cuda 6 || fail "gradc 40GiB at batch $match_b: $(tail -2 "$results/gpt2-b-$round.log")"
done
log "GPT-2 small: gradc's largest batch under 40 GiB ($gradc_b)"
train gpt2-largest "gpt2-b$gradc_b" cuda 2 || fail "gradc at its largest batch $gradc_b: $(tail -2 "$results/gpt2-largest.log")"
p=$(peak_check gpt2-largest $((40 << 30))) || fail "GPT-2 at batch $gradc_b: peak beyond 40 GiB or 1% of the plan: $p"

# ---- summary ----------------------------------------------------------------------------------------
log "summary"
"$python" - "$results" "$match_b" "$eager_b" "$gradc_b" <<'PY'
import glob, json, os, statistics, sys
res, match_b, eager_b, gradc_b = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
def load(p):
    try:
        return json.load(open(os.path.join(res, p)))
    except Exception:
        return None
def gradc_times(name):  # steps after the first
    d = load(name)
    return [s["step_time_s"] for s in d["steps"][1:]] if d else []
def pt_times(name):
    d = load(name)
    return d["step_times_s"][1:] if d and "step_times_s" in d else []
def med(xs):
    return statistics.median(xs) if xs else None
rows = {
    "gradc (no remat)": med(sum((gradc_times(f"gpt2-nb-{r}.json") for r in (1, 2)), [])),
    "gradc (--budget 40GiB)": med(sum((gradc_times(f"gpt2-b-{r}.json") for r in (1, 2)), [])),
    "PyTorch eager": med(sum((pt_times(f"pt-eager-{r}.json") for r in (1, 2)), [])),
    "PyTorch checkpoint per block": med(sum((pt_times(f"pt-block-{r}.json") for r in (1, 2)), [])),
}
peaks = {
    "gradc (no remat)": (load("gpt2-nb-1.json") or {}).get("ranks", [{}])[0].get("peak_bytes_measured"),
    "gradc (--budget 40GiB)": (load("gpt2-b-1.json") or {}).get("ranks", [{}])[0].get("peak_bytes_measured"),
    "PyTorch eager": (load("pt-eager-1.json") or {}).get("peak_bytes"),
    "PyTorch checkpoint per block": (load("pt-block-1.json") or {}).get("peak_bytes"),
}
largest = {"gradc": int(gradc_b), "PyTorch eager": int(eager_b),
           "PyTorch checkpoint per block": (load("pt-block-largest.json") or {}).get("largest_batch")}
checks = [json.loads(l) for l in open(os.path.join(res, "checks.jsonl")) if l.strip()]
out = {"gpt2_batch": int(match_b) if match_b else None, "step_time_s": rows, "peak_bytes": peaks,
       "largest_batch_40GiB": largest, "checks": checks,
       "torch": open(os.path.join(res, "torch.txt")).read().strip() if os.path.exists(os.path.join(res, "torch.txt")) else None}
json.dump(out, open(os.path.join(res, "results.json"), "w"), indent=2)
lines = ["# gradc on one GPU", "", f"torch: {out['torch']}", "",
         f"## GPT-2 small (vocab 50304, seq 1024), batch {match_b}, AdamW, TF32 off; medians of 2 alternated rounds x 5 steps", "",
         "| system | step time (s) | peak (GiB) |", "|---|---|---|"]
for k in rows:
    t, p = rows[k], peaks[k]
    lines.append(f"| {k} | {t:.4f} |" if t else f"| {k} | - |")
    lines[-1] += f" {p / 2**30:.2f} |" if p else " - |"
lines += ["", "## Largest batch under 40 GiB", "", "| system | batch |", "|---|---|"]
lines += [f"| {k} | {v} |" for k, v in largest.items()]
lines += ["", "## Checks", ""] + [f"- `{json.dumps(c)}`" for c in checks]
open(os.path.join(res, "results.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
if [ ${#failures[@]} -gt 0 ]; then
  log "${#failures[@]} check(s) failed:"
  printf '  - %s\n' "${failures[@]}" >&2
  exit 1
fi
log "all checks passed in $(($(date +%s) - t_start)) s"
