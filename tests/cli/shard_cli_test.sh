#!/usr/bin/env bash
# End-to-end checks of ZeRO sharding over CPU ranks (gradc train --shard 1|2): 2 and 4 ranks
# follow the replicated run (AdamW losses with norm clipping; SGD parameters), every rank
# measures its planned peak, a sharded checkpoint is the replicated one and resumes on 2 ranks
# and on 1 device, and user errors.
# usage: shard_cli_test.sh PATH/TO/gradc SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"
compare() { python3 "$src/tests/cli/compare_runs.py" "$@"; }
small=(--set batch=8 --set seq=32 --set d_model=64 --set heads=2 --set layers=2)
run() {  # run NAME STEPS ARGS...: the small gpt-mini on the corpus, checkpoint and metrics
  local name=$1 steps=$2
  shift 2
  timeout 300 "$gradc" train "$src/models/gpt-mini.yaml" "${small[@]}" --data "$src/data/corpus.txt" --steps "$steps" \
    --lr "${lr:-3e-3}" --save "$work/$name" --metrics-out "$work/$name.json" -q "$@" >"$work/$name.out" 2>"$work/$name.err"
}
# every rank measured exactly its planned peak, and the sharded ranks' peaks are balanced
measured_is_planned() {
  python3 - "$1" <<'PY'
import json, sys
ranks = json.load(open(sys.argv[1]))["ranks"]
for r in ranks:
    assert r["peak_bytes_measured"] == r["peak_bytes_planned"] > 0, r
peaks = [r["peak_bytes_planned"] for r in ranks]
assert max(peaks) / min(peaks) <= 1.02, peaks
PY
}

# AdamW with clipping: under stage 2 no rank holds every gradient, so the norm is assembled from
# the ranks' shards.
for devices in 2 4; do
  run base$devices 20 --devices $devices --clip-norm 0.5 && ok || bad "$devices ranks: $(tail -3 "$work/base$devices.err")"
  for stage in 1 2; do
    name=s${stage}_$devices
    run $name 20 --devices $devices --shard $stage --clip-norm 0.5 && ok \
      || bad "$devices ranks --shard $stage: $(tail -3 "$work/$name.err")"
    compare "$work/base$devices.json" "$work/$name.json" --rtol 1e-5 && ok \
      || bad "$devices ranks: --shard $stage vs replicated (AdamW losses)"
    measured_is_planned "$work/$name.json" && ok || bad "$devices ranks --shard $stage: measured != planned peak"
    # the checkpoint is the replicated one: the same tensors, optimizer state included
    compare "$work/base$devices.json" "$work/$name.json" "$work/base$devices" "$work/$name" --rtol 1e-4 \
      --tensors optimizer.safetensors >/dev/null && ok || bad "$devices ranks --shard $stage: optimizer state layout"
  done
done

# SGD (momentum): the parameters themselves follow the replicated run.
lr=0.1 run sgd 20 --optimizer sgd --devices 4 && ok || bad "SGD, 4 ranks: $(tail -3 "$work/sgd.err")"
for stage in 1 2; do
  lr=0.1 run sgd$stage 20 --optimizer sgd --devices 4 --shard $stage && ok || bad "SGD --shard $stage"
  compare "$work/sgd.json" "$work/sgd$stage.json" "$work/sgd" "$work/sgd$stage" --rtol 1e-5 && ok \
    || bad "SGD, 4 ranks: --shard $stage vs replicated (losses and parameters)"
done

# Saved with 4 sharded ranks at step 10, resumed on 2 ranks (sharded) and on 1 device: the
# continuation follows the straight sharded run.
run half 10 --devices 4 --shard 2 --clip-norm 0.5 && ok || bad "10 steps on 4 ranks: $(tail -3 "$work/half.err")"
for how in "2 --shard 1" "1"; do
  set -- $how
  name=resume$1
  cp -r "$work/half" "$work/$name"
  timeout 300 "$gradc" train "$src/models/gpt-mini.yaml" "${small[@]}" --data "$src/data/corpus.txt" --steps 20 \
    --lr 3e-3 --clip-norm 0.5 --devices $how --resume "$work/$name" --save "$work/$name" \
    --metrics-out "$work/$name.json" -q >"$work/$name.out" 2>"$work/$name.err" && ok \
    || bad "resume on $1 device(s): $(tail -3 "$work/$name.err")"
  compare "$work/s2_4.json" "$work/$name.json" --common-steps --rtol 1e-6 && ok \
    || bad "resumed on $1 device(s) vs the straight run on 4 sharded ranks (losses)"
done

# Errors: sharding needs ranks; a stage that is not one.
"$gradc" train "$src/models/mlp.yaml" --synthetic --steps 1 --shard 1 2>"$work/e1.err"
[ $? -eq 2 ] && grep -q "nothing to shard" "$work/e1.err" && ok || bad "--shard 1 on one device: $(cat "$work/e1.err")"
"$gradc" compile "$src/models/mlp.yaml" --devices 2 --shard 3 --emit plan -o "$work/p.json" 2>"$work/e2.err"
[ $? -eq 2 ] && grep -q "shard" "$work/e2.err" && ok || bad "--shard 3: $(cat "$work/e2.err")"

echo "shard checks: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
