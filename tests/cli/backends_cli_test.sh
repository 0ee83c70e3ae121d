#!/usr/bin/env bash
# The backends' descriptions (ir/kernel_target.h, runtime/backends/backends.def), end to end:
#  - `gradc compile --devices 2 --device cuda` plans a bf16 model (NCCL sums bf16), recording the
#    mesh dp=2 and the CUDA reserve, with every collective naming its group; on CPU ranks the
#    same compile is refused in the host's description's words (Gloo has no bf16 sum);
#  - `--device reference` (the CPU running the portable ATen kernels) trains gpt-mini, llama and
#    the MLP to the host's losses (rtol 1e-5: other kernels, other rounding; the weights after
#    AdamW differ more, as its normalised steps amplify tiny gradient differences), measured peak
#    == planned peak, with no step beyond its planned workspace, on one rank and on two.
# usage: backends_cli_test.sh PATH/TO/gradc SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"
compare() { python3 "$src/tests/cli/compare_runs.py" "$@"; }

sed 's/^dtype:.*/dtype: bf16/' "$src/models/llama.yaml" >"$work/llama-bf16.yaml"
"$gradc" compile "$work/llama-bf16.yaml" --devices 2 --device cuda -o "$work/cuda2" >"$work/cuda2.out" 2>"$work/cuda2.err" \
  && ok || bad "bf16 for 2 GPUs: $(tail -2 "$work/cuda2.err")"
grep -q '"mesh": "dp=2"' "$work/cuda2/manifest.json" && ok || bad "the manifest does not record the mesh dp=2"
grep -q 'mesh = "dp=2"' "$work/cuda2/rank0.gir" && grep -q 'kernel_target = "cuda"' "$work/cuda2/rank0.gir" \
  && ok || bad "rank 0's graph names neither its mesh nor its target"
# Every collective names its group, and the bf16 gradients are summed over it.
python3 - "$work/cuda2/rank0.gir" <<'PY' && ok || bad "a collective without its group, or no bf16 all-reduce"
import re, sys
lines = [l for l in open(sys.argv[1]) if re.search(r"= (all_reduce|reduce_scatter|all_gather|gather|scatter)", l)]
sys.exit(0 if lines and all('group = "dp"' in l for l in lines) and any(": bf16[" in l for l in lines) else 1)
PY
grep -q "36.0 MiB for the device's libraries" "$work/cuda2.err" && ok || bad "the CUDA plan keeps no library reserve"
expect_exit2 "bf16 on 2 CPU ranks" "CPU ranks communicate through Gloo, which cannot sum bf16 tensors" \
  "$gradc" compile "$work/llama-bf16.yaml" --devices 2 -o "$work/cpu2"
[ ! -e "$work/cpu2" ] && ok || bad "a refused compile left its output folder"
expect_exit2 "bf16 on 2 reference ranks" "CPU ranks communicate through Gloo" \
  "$gradc" compile "$work/llama-bf16.yaml" --devices 2 --device reference -o "$work/ref2"
expect_exit2 "unknown device" "--device" "$gradc" compile "$src/models/mlp.yaml" --device tpu -o "$work/tpu"

small=(--set batch=4 --set seq=32 --set d_model=64 --set heads=2 --set layers=2)
train() {  # train NAME DEVICE SPEC ARGS...
  local name=$1 device=$2
  shift 2
  timeout 600 "$gradc" train "$@" --synthetic --steps 4 --device "$device" --metrics-out "$work/$name.json" \
    --save "$work/$name" >"$work/$name.out" 2>"$work/$name.err" || { bad "$name: $(tail -3 "$work/$name.err")"; return 1; }
  ok
  # measured == planned, and nothing beyond a step's planned workspace
  grep -Ehq "peak memory ([0-9]+) bytes measured, \1 planned" "$work/$name.out" "$work/$name.err" && ok \
    || bad "$name: measured != planned: $(grep -h 'peak memory' "$work/$name.out" "$work/$name.err")"
  grep -q "beside the arena" "$work/$name.err" "$work/$name.out" && bad "$name: a step allocated beyond its plan" || ok
}
for model in gpt-mini llama mlp; do
  args=("$src/models/$model.yaml")
  [ "$model" != mlp ] && args+=("${small[@]}")
  [ "$model" = llama ] && args=("$src/models/llama.yaml" --set batch=2 --set seq=32)
  train "$model-cpu" cpu "${args[@]}" && train "$model-ref" reference "${args[@]}" \
    && { compare "$work/$model-cpu.json" "$work/$model-ref.json" --rtol 1e-5 \
         >"$work/$model.cmp" && ok || bad "$model: reference != cpu: $(tail -3 "$work/$model.cmp")"; }
done
# Two reference ranks over Gloo follow the one-rank trajectory.
train gpt-ref2 reference "$src/models/gpt-mini.yaml" "${small[@]}" --devices 2 \
  && { compare "$work/gpt-mini-ref.json" "$work/gpt-ref2.json" --rtol 1e-5 \
       >"$work/ref2.cmp" && ok || bad "2 reference ranks != 1: $(tail -3 "$work/ref2.cmp")"; }

echo "backends cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
