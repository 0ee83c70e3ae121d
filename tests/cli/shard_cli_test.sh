#!/usr/bin/env bash
# End-to-end checks of ZeRO sharding over CPU ranks (gradc train --shard 1|2|3): 2 and 4 ranks
# follow the replicated run (AdamW losses with norm clipping; SGD parameters), every rank
# measures its planned peak, a sharded checkpoint is the replicated one and resumes on 2 ranks
# and on 1 device, and user errors. Stage 3 also with recompute, micro-batches, kept
# parameters, without prefetch, on a ResNet (batch norm), resumed across stages, and validated.
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
  for stage in 1 2 3; do
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
  # stage 3 runs stage 2's arithmetic on gathered parameters: bit-identical to it (losses,
  # weights, optimizer state), and its losses within 1e-6 of the replicated run's (clipping's
  # norm is summed in another order from the ranks' shards, so the weights drift further)
  compare "$work/base$devices.json" "$work/s3_$devices.json" --rtol 1e-6 && ok \
    || bad "$devices ranks: --shard 3 losses vs replicated within 1e-6"
  for file in weights.safetensors optimizer.safetensors; do
    compare "$work/s2_$devices.json" "$work/s3_$devices.json" "$work/s2_$devices" "$work/s3_$devices" --rtol 0 \
      --tensors $file >/dev/null && ok || bad "$devices ranks: --shard 3 vs --shard 2 not bit-identical ($file)"
  done
done

# Stage 3 in smaller buckets (more parameter groups, gathered one by one) with recompute, with
# micro-batches, with the fused loss, with every bucket kept from the forward, without
# prefetch, and recompute combined with the others (recomputed segments gather their buckets
# again): the same losses, and every rank measures its planned peak.
# (Micro-batches and the fused loss are compared with the replicated run doing the same.)
buckets=(--bucket-mib 0.02)
run mb_base 8 --devices 2 --clip-norm 0.5 --micro-batches 2 && ok || bad "2 micro-batches: $(tail -3 "$work/mb_base.err")"
run fl_base 8 --devices 2 --clip-norm 0.5 --loss-chunks 4 && ok || bad "fused loss: $(tail -3 "$work/fl_base.err")"
for variant in "--remat sqrt" "--micro-batches 2" "--loss-chunks 4" "--keep-gathered all" "--no-prefetch" \
  "--keep-gathered 1 --remat sqrt" "--micro-batches 2 --remat sqrt" "--loss-chunks 4 --remat sqrt --no-prefetch" \
  "--micro-batches 2 --remat memory-poor --keep-gathered 2"; do
  name=s3_$(echo "$variant" | tr -dc 'a-z0-9')
  base=base2
  [[ $variant == *micro* ]] && base=mb_base
  [[ $variant == *chunks* ]] && base=fl_base
  run $name 8 --devices 2 --shard 3 "${buckets[@]}" --clip-norm 0.5 $variant && ok \
    || bad "--shard 3 $variant: $(tail -3 "$work/$name.err")"
  compare "$work/$base.json" "$work/$name.json" --common-steps --rtol 1e-6 && ok \
    || bad "--shard 3 $variant vs replicated (AdamW losses)"
  measured_is_planned "$work/$name.json" && ok || bad "--shard 3 $variant: measured != planned peak"
done

# Under recompute a bucket gathered again for the backward is gathered again for its recomputed
# nodes too (the plan's recompute steps all-gather); a kept bucket is read from the forward.
regathers() {  # regathers ARGS...: how many all-gathers the plan's recompute steps start
  "$gradc" compile "$src/models/gpt-mini.yaml" "${small[@]}" --devices 2 --shard 3 "${buckets[@]}" --remat sqrt "$@" \
    --emit plan -o "$work/regather.json" 2>"$work/regather.err" || { echo -1; return; }
  python3 -c 'import json, sys
steps = json.load(open(sys.argv[1]))["steps"]
print(sum(1 for s in steps if s.get("op") == "all_gather_start" and s.get("phase") == "recompute"))' "$work/regather.json"
}
[ "$(regathers)" -gt 0 ] && ok || bad "--shard 3 --remat sqrt: no bucket gathered again for recompute"
[ "$(regathers --keep-gathered all)" -eq 0 ] && ok || bad "--keep-gathered all --remat sqrt: a kept bucket gathered again"

# SGD (momentum): the parameters themselves follow the replicated run.
lr=0.1 run sgd 20 --optimizer sgd --devices 4 && ok || bad "SGD, 4 ranks: $(tail -3 "$work/sgd.err")"
for stage in 1 2 3; do
  lr=0.1 run sgd$stage 20 --optimizer sgd --devices 4 --shard $stage && ok || bad "SGD --shard $stage"
  compare "$work/sgd.json" "$work/sgd$stage.json" "$work/sgd" "$work/sgd$stage" --rtol 1e-5 && ok \
    || bad "SGD, 4 ranks: --shard $stage vs replicated (losses and parameters)"
done
# SGD under stage 3 is the replicated arithmetic on gathered copies: bit-identical.
compare "$work/sgd.json" "$work/sgd3.json" "$work/sgd" "$work/sgd3" --rtol 0 >/dev/null && ok \
  || bad "SGD, 4 ranks: --shard 3 is not bit-identical to replicated"

# A ResNet (convolutions, batch norm with per-rank statistics) on 2 ranks: stage 3 follows stage 0.
for stage in 0 3; do
  timeout 300 "$gradc" train "$src/models/resnet18-cifar.yaml" --set batch=4 --synthetic --steps 3 --devices 2 \
    --shard $stage --metrics-out "$work/resnet$stage.json" -q >"$work/resnet$stage.out" 2>"$work/resnet$stage.err" && ok \
    || bad "resnet18-cifar --shard $stage: $(tail -3 "$work/resnet$stage.err")"
done
compare "$work/resnet0.json" "$work/resnet3.json" --rtol 1e-6 && ok || bad "resnet18-cifar: --shard 3 vs replicated"
measured_is_planned "$work/resnet3.json" && ok || bad "resnet18-cifar --shard 3: measured != planned peak"
# ... and on 4 ranks, with recompute and with micro-batches (several parameter groups).
for variant in "--remat sqrt" "--micro-batches 2"; do
  name=resnet4_$(echo "$variant" | tr -dc 'a-z0-9')
  for stage in 0 3; do
    timeout 300 "$gradc" train "$src/models/resnet18-cifar.yaml" --set batch=8 --synthetic --steps 3 --devices 4 \
      --bucket-mib 2 --shard $stage $variant --metrics-out "$work/${name}_$stage.json" -q >"$work/$name.out" \
      2>"$work/$name.err" && ok || bad "resnet18-cifar, 4 ranks, --shard $stage $variant: $(tail -3 "$work/$name.err")"
  done
  compare "$work/${name}_0.json" "$work/${name}_3.json" --rtol 1e-6 && ok || bad "resnet18-cifar, 4 ranks, $variant"
  measured_is_planned "$work/${name}_3.json" && ok || bad "resnet18-cifar, 4 ranks, --shard 3 $variant: measured != planned"
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

# Saved at stage 3 on 4 ranks, resumed at stage 3 on 2 ranks and on 1 device; saved at stage 2,
# resumed at stage 3: each continuation follows the straight run.
run half3 10 --devices 4 --shard 3 --clip-norm 0.5 && ok || bad "10 steps on 4 ranks at stage 3: $(tail -3 "$work/half3.err")"
for how in "half3 2 --shard 3" "half3 1" "half 2 --shard 3"; do
  set -- $how
  from=$1
  shift
  name=resume3_$from$1
  cp -r "$work/$from" "$work/$name"
  timeout 300 "$gradc" train "$src/models/gpt-mini.yaml" "${small[@]}" --data "$src/data/corpus.txt" --steps 20 \
    --lr 3e-3 --clip-norm 0.5 --devices "$@" --resume "$work/$name" --save "$work/$name" \
    --metrics-out "$work/$name.json" -q >"$work/$name.out" 2>"$work/$name.err" && ok \
    || bad "resume $from on $*: $(tail -3 "$work/$name.err")"
  compare "$work/s3_4.json" "$work/$name.json" --common-steps --rtol 1e-6 && ok \
    || bad "resumed $from on $* vs the straight run on 4 ranks at stage 3 (losses)"
done

# Errors: sharding needs ranks; a stage that is not one; --keep-gathered and --no-prefetch misused.
"$gradc" train "$src/models/mlp.yaml" --synthetic --steps 1 --shard 1 2>"$work/e1.err"
[ $? -eq 2 ] && grep -q "nothing to shard" "$work/e1.err" && ok || bad "--shard 1 on one device: $(cat "$work/e1.err")"
"$gradc" compile "$src/models/mlp.yaml" --devices 2 --shard 4 --emit plan -o "$work/p.json" 2>"$work/e2.err"
[ $? -eq 2 ] && grep -q "shard" "$work/e2.err" && ok || bad "--shard 4: $(cat "$work/e2.err")"

"$gradc" compile "$src/models/mlp.yaml" --devices 2 --shard 3 --keep-gathered some --emit plan -o "$work/p.json" \
  2>"$work/e4.err"
[ $? -eq 2 ] && grep -q "keep-gathered" "$work/e4.err" && ok || bad "--keep-gathered some: $(cat "$work/e4.err")"
"$gradc" compile "$src/models/mlp.yaml" --devices 2 --shard 2 --no-prefetch --emit plan -o "$work/p.json" 2>"$work/e5.err"
[ $? -eq 2 ] && grep -q "only --shard 3" "$work/e5.err" && ok || bad "--no-prefetch at --shard 2: $(cat "$work/e5.err")"

# Validation under stage 3: the evaluation step gathers the rank's shards bucket by bucket as
# the training forward does. The validation losses are stage 2's (its weights are bit-identical),
# on 2 ranks and on 4 with small buckets, and every rank measures its planned evaluation peak.
for how in "2" "4 --bucket-mib 0.02"; do
  set -- $how
  for stage in 2 3; do
    name=val${stage}_$1
    run $name 10 --devices "$@" --shard $stage --clip-norm 0.5 --val-data "$src/data/corpus.txt" --eval-every 5 \
      --eval-batches 2 && ok || bad "--val-data at --shard $stage on $1 ranks: $(tail -3 "$work/$name.err")"
  done
  python3 - "$work/val2_$1.json" "$work/val3_$1.json" <<'PY' && ok || bad "--val-data under --shard 3 on $1 ranks"
import json, sys
stage2, stage3 = (json.load(open(f)) for f in sys.argv[1:])
val = lambda m: [s["val_loss"] for s in m["steps"] if "val_loss" in s]
assert len(val(stage3)) == 2 and val(stage3) == val(stage2), (val(stage2), val(stage3))
for r in stage3["ranks"]:
    assert r["eval_peak_bytes_measured"] == r["eval_peak_bytes_planned"] > 0, r
PY
done

# --init-from under stage 3: the weights are cut into the shards, as a replicated run starts from them.
run w0 2 && ok || bad "weights to start from: $(tail -3 "$work/w0.err")"
for stage in 0 3; do
  run init$stage 3 --devices 2 --shard $stage --init-from "$work/w0" && ok || bad "--init-from at --shard $stage"
done
compare "$work/init0.json" "$work/init3.json" --rtol 1e-6 && ok || bad "--init-from: --shard 3 vs replicated"

echo "shard checks: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
