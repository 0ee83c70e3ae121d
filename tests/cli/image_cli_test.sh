#!/usr/bin/env bash
# End-to-end checks of the image path: gradc train --data FILE.safetensors (images and labels)
# on resnet18-cifar at test size, measured == planned peak, a checkpoint resumed to the same
# losses as a straight run (data position included), gradc eval in evaluation mode (batch norm
# with its running statistics) with loss and accuracy, validation while training (--val-data),
# and the errors of bad image files.
# usage: image_cli_test.sh PATH/TO/gradc SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"
small=(--set batch=16 --set image=8 --set width=8)
make_data="python3 $src/scripts/make_image_data.py"
$make_data "$work/train.safetensors" --count 200 && $make_data "$work/test.safetensors" --count 96 --sample-seed 1 \
  && ok || bad "make_image_data.py"

# Straight: 40 steps (3 epochs of 12 batches, 8 images left over each). Split: 20, then resumed to 40.
loss_at() { python3 -c "import json,sys; print([s['loss'] for s in json.load(open(sys.argv[1]))['steps'] if s['step']==int(sys.argv[2])][0])" "$1" "$2"; }
if timeout 300 "$gradc" train "$src/models/resnet18-cifar.yaml" "${small[@]}" --data "$work/train.safetensors" --steps 40 \
    --save "$work/ck" --metrics-out "$work/m.json" >"$work/out" 2>"$work/err"; then ok
else bad "gradc train --data images: $(tail -3 "$work/err")"; fi
grep -Eq 'peak memory ([0-9]+) bytes measured, \1 planned' "$work/err" && ok || bad "measured != planned: $(tail -1 "$work/err")"
grep -q 'examples/s' "$work/err" && ok || bad "progress does not count examples"
timeout 300 "$gradc" train "$src/models/resnet18-cifar.yaml" "${small[@]}" --data "$work/train.safetensors" --steps 20 \
  --save "$work/half" -q 2>"$work/err" && ok || bad "train 20 steps: $(tail -2 "$work/err")"
timeout 300 "$gradc" train "$src/models/resnet18-cifar.yaml" "${small[@]}" --data "$work/train.safetensors" --steps 40 \
  --resume "$work/half" --metrics-out "$work/m2.json" -q 2>"$work/err" && ok || bad "resume: $(tail -2 "$work/err")"
[ "$(loss_at "$work/m.json" 40)" = "$(loss_at "$work/m2.json" 40)" ] && ok \
  || bad "resumed loss at step 40 $(loss_at "$work/m2.json" 40) != straight $(loss_at "$work/m.json" 40)"
first=$(loss_at "$work/m.json" 1); last=$(loss_at "$work/m.json" 40)
python3 -c "import sys; sys.exit(0 if float(sys.argv[2]) < 0.5 * float(sys.argv[1]) else 1)" "$first" "$last" && ok \
  || bad "the loss did not fall: $first -> $last"

# Evaluation on held-out images of the same classes: running statistics, loss and accuracy.
if timeout 120 "$gradc" eval "$src/models/resnet18-cifar.yaml" "${small[@]}" --weights "$work/ck" \
    --data "$work/test.safetensors" >"$work/out" 2>"$work/err"; then ok
else bad "gradc eval images: $(tail -2 "$work/err")"; fi
grep -Eq '^loss [0-9.e-]+, accuracy (0\.[5-9]|1)[0-9]* over 96 images$' "$work/out" && ok \
  || bad "eval output (accuracy above 0.5 expected): $(cat "$work/out")"

# Validation while training on the held-out images: the loss gradc eval prints for the same
# weights (the straight run's at step 40), its peak the plan's, the trajectory unchanged.
timeout 300 "$gradc" train "$src/models/resnet18-cifar.yaml" "${small[@]}" --data "$work/train.safetensors" --steps 40 \
  --val-data "$work/test.safetensors" --eval-every 20 --metrics-out "$work/val.json" -q 2>"$work/err" && ok \
  || bad "train with --val-data images: $(tail -2 "$work/err")"
python3 - "$work/val.json" "$work/m.json" "$(cut -d' ' -f2 "$work/out" | tr -d ,)" <<'PY' && ok || bad "image validation"
import json, sys
val, straight = (json.load(open(p)) for p in sys.argv[1:3])
assert [s["loss"] for s in val["steps"]] == [s["loss"] for s in straight["steps"]], "training changed"
evaluated = {s["step"]: s["val_loss"] for s in val["steps"] if "val_loss" in s}
assert sorted(evaluated) == [20, 40], evaluated
want = float(sys.argv[3])
assert abs(evaluated[40] - want) <= 1e-5 * abs(want), (evaluated[40], want)
r = val["ranks"][0]
assert r["eval_peak_bytes_measured"] == r["eval_peak_bytes_planned"], r
PY

# Two data-parallel ranks on the same file: each normalises its shard with its own batch
# statistics (as DDP without SyncBatchNorm); measured == planned on every rank.
if timeout 300 "$gradc" train "$src/models/resnet18-cifar.yaml" "${small[@]}" --data "$work/train.safetensors" --steps 4 \
    --devices 2 --save "$work/dp" --metrics-out "$work/dp.json" >"$work/out" 2>"$work/err"; then ok
else bad "2 ranks: $(tail -3 "$work/err")"; fi
python3 -c "
import json, sys
m = json.load(open(sys.argv[1]))
ranks = m['ranks']
sys.exit(0 if len(ranks) == 2 and all(r['peak_bytes_measured'] == r['peak_bytes_planned'] for r in ranks) else 1)" \
  "$work/dp.json" && ok || bad "2 ranks: measured != planned or not 2 ranks"
[ -f "$work/dp/weights.safetensors" ] && ok || bad "2 ranks: no checkpoint"

# Bad image files: exit 2 with the reason.
expect_error() {  # file, text
  timeout 60 "$gradc" train "$src/models/resnet18-cifar.yaml" "${small[@]}" --data "$1" --steps 1 -q >"$work/out" 2>"$work/err"
  local rc=$?
  [ $rc -eq 2 ] && grep -q "$2" "$work/err" && ok || bad "$(basename "$1"): exit $rc, $(cat "$work/err")"
}
$make_data "$work/big.safetensors" --count 20 --size 16
expect_error "$work/big.safetensors" "holds images of \[3, 16, 16\], but the model's \`images\` input takes \[3, 8, 8\]"
$make_data "$work/many.safetensors" --count 20 --classes 12
expect_error "$work/many.safetensors" "is not a class in \[0, 10)"
$make_data "$work/few.safetensors" --count 8
expect_error "$work/few.safetensors" "has 8 images; one batch needs 16"
expect_error "$src/data/corpus.txt" "corpus.txt"

echo "image cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
