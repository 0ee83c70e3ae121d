#!/usr/bin/env bash
# bf16 training on the CPU: every bundled model that trains in bf16 here measures exactly its
# planned peak (matrix products included: their temporaries are planned, on the route this CPU
# takes, and on each route imposed), with and without the fused loss, recompute and
# micro-batches. The convolutional networks and mlp do not train in bf16 on a CPU (LibTorch has
# no CPU bf16 batch_norm nor mse_loss): not listed.
# usage: bf16_cli_test.sh PATH/TO/gradc SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"

# exact NAME SPEC ARGS...: trains 2 steps and checks "N bytes measured, N planned".
exact() {
  local name=$1 spec=$2
  shift 2
  if ! timeout 300 "$gradc" train "$spec" --synthetic --steps 2 "$@" >"$work/out" 2>"$work/err"; then
    bad "$name: exit $?, $(tail -3 "$work/err")"
    return
  fi
  local line
  line=$(cat "$work/out" "$work/err" | grep -Eo 'peak memory [0-9]+ bytes measured, [0-9]+ planned')
  local measured planned
  measured=$(echo "$line" | awk '{print $3}')
  planned=$(echo "$line" | awk '{print $6}')
  if [ -n "$measured" ] && [ "$measured" = "$planned" ] && ! grep -q "beside the arena" "$work/out" "$work/err"; then ok
  else bad "$name: $line $(grep 'beside the arena' "$work/out" "$work/err" | head -2)"; fi
}

small=(--set batch=2 --set seq=16 --set vocab=64 --set d_model=32 --set layers=2)
for model in gpt-mini gpt2 llama lm-seed bert-mlm nanogpt-char lstm-lm; do
  # The spec's element type: its top-level dtype line, or a new one (the default is f32).
  if grep -q '^dtype: f32' "$src/models/$model.yaml"; then
    sed 's/^dtype: f32/dtype: bf16/' "$src/models/$model.yaml" >"$work/$model.yaml"
  else
    { echo "dtype: bf16"; cat "$src/models/$model.yaml"; } >"$work/$model.yaml"
  fi
  args=()
  for set in "${small[@]}"; do
    [ "$set" = --set ] && continue
    grep -Eq "^  ${set%%=*}:" "$work/$model.yaml" && args+=(--set "$set")
  done
  grep -Eq '^  heads:' "$work/$model.yaml" && args+=(--set heads=4)
  grep -Eq '^  kv_heads:' "$work/$model.yaml" && args+=(--set kv_heads=2)
  grep -Eq '^  context:' "$work/$model.yaml" && args+=(--set context=16)
  exact "$model bf16" "$work/$model.yaml" "${args[@]}"
done
gpt=(--set batch=4 --set seq=32 --set d_model=64 --set layers=2)
exact "gpt-mini bf16, fused loss" "$work/gpt-mini.yaml" "${gpt[@]}" --loss-chunks 4
exact "gpt-mini bf16, selective remat" "$work/gpt-mini.yaml" "${gpt[@]}" --remat selective
exact "gpt-mini bf16, 2 micro-batches" "$work/gpt-mini.yaml" "${gpt[@]}" --micro-batches 2
# Both routes of the products (=onednn is the widened route again where oneDNN has no kernel).
for route in widened onednn; do
  export GRADC_BF16_PRODUCTS=$route
  exact "gpt-mini bf16, products $route" "$work/gpt-mini.yaml" "${gpt[@]}"
done
unset GRADC_BF16_PRODUCTS

echo "bf16 cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
