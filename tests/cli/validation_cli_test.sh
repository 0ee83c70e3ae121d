#!/usr/bin/env bash
# Validation while training: --val-data with --eval-every/--eval-batches reports a validation
# loss equal to gradc eval's on the same batches, leaves the training trajectory untouched (the
# evaluation step shares the step's arena), measures its peak equal to its plan, keeps the best
# checkpoint with --save-best (also across a resume), agrees over two ranks, and refuses what
# it cannot do with exit 2; a resume with other optimizer settings is noted.
# usage: validation_cli_test.sh PATH/TO/gradc SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"
py=/usr/bin/python3
spec=$src/models/gpt-mini.yaml
small=(--set layers=1 --set d_model=64 --set heads=2 --set seq=32 --set batch=8)
corpus "$work/all.txt" 120000
head -c 100000 "$work/all.txt" >"$work/train.txt"
tail -c 20000 "$work/all.txt" >"$work/val.txt"
train() { timeout 300 "$gradc" train "$spec" "${small[@]}" --lr 3e-3 "$@"; }
d=(--data "$work/train.txt")

train "${d[@]}" --steps 30 --metrics-out "$work/plain.json" >"$work/log" 2>&1 || bad "train: $(tail -2 "$work/log")"
train "${d[@]}" --steps 30 --val-data "$work/val.txt" --eval-every 10 --save "$work/ck" --save-best "$work/best" \
  --metrics-out "$work/val.json" >"$work/log" 2>&1 && ok || bad "train with --val-data: $(tail -2 "$work/log")"
grep -q "val " "$work/log" && ok || bad "no validation loss in the progress lines: $(head -5 "$work/log")"
timeout 120 "$gradc" eval "$spec" "${small[@]}" --weights "$work/ck" --data "$work/val.txt" >"$work/eval.txt" 2>&1 ||
  bad "gradc eval: $(cat "$work/eval.txt")"
if $py - "$work/plain.json" "$work/val.json" "$work/eval.txt" "$work/best/state.json" <<'PY'; then ok; else bad "validation metrics"; fi
import json, sys
plain, val = (json.load(open(p)) for p in sys.argv[1:3])
# Evaluation leaves training alone: the same losses, bit for bit.
assert [s["loss"] for s in plain["steps"]] == [s["loss"] for s in val["steps"]], "training changed"
evaluated = {s["step"]: s["val_loss"] for s in val["steps"] if "val_loss" in s}
assert sorted(evaluated) == [10, 20, 30], evaluated
# The whole file's full batches, as gradc eval reads them (it prints 6 significant digits).
eval_loss = float(open(sys.argv[3]).read().split()[1])
assert abs(evaluated[30] - eval_loss) <= 1e-5 * abs(eval_loss), (evaluated[30], eval_loss)
rank = val["ranks"][0]
assert rank["eval_peak_bytes_measured"] == rank["eval_peak_bytes_planned"], rank
assert rank["eval_peak_bytes_planned"] <= rank["peak_bytes_planned"] * 2, rank
best = min(evaluated, key=evaluated.get)
state = json.load(open(sys.argv[4]))
assert state["step"] == best and abs(state["config"]["val_loss"] - evaluated[best]) < 1e-12, (state["step"], best)
PY

# The evaluation step fuses attention as its training step does: at a context of 256 it plans
# less than with --no-fuse (no [S, S] scores), with the same validation loss, measured == planned.
for f in fused plain; do
  flag=(); [[ $f == plain ]] && flag=(--no-fuse)
  timeout 300 "$gradc" train "$spec" --set layers=1 --set d_model=64 --set heads=2 --set seq=256 --set batch=2 \
    "${d[@]}" --steps 2 --val-data "$work/val.txt" --eval-every 2 --eval-batches 1 "${flag[@]}" \
    --metrics-out "$work/attn_$f.json" >"$work/log" 2>&1 || bad "train with --val-data ($f): $(tail -2 "$work/log")"
done
if $py - "$work/attn_fused.json" "$work/attn_plain.json" <<'PY'; then ok; else bad "evaluation with fused attention"; fi
import json, sys
fused, plain = (json.load(open(p)) for p in sys.argv[1:3])
vf, vp = fused["steps"][-1]["val_loss"], plain["steps"][-1]["val_loss"]
assert abs(vf - vp) <= 1e-5 * abs(vp), (vf, vp)
rf, rp = fused["ranks"][0], plain["ranks"][0]
assert rf["eval_peak_bytes_measured"] == rf["eval_peak_bytes_planned"], rf
assert rf["eval_peak_bytes_planned"] < rp["eval_peak_bytes_planned"], (rf, rp)
PY

# --eval-batches K: K batches spread over the file, the same at every evaluation; a resumed run
# evaluates as the uninterrupted one did, and --save-best keeps the best of both parts.
train "${d[@]}" --steps 20 --val-data "$work/val.txt" --eval-every 10 --eval-batches 2 --save "$work/half" \
  --save-best "$work/best2" --metrics-out "$work/k1.json" >"$work/log" 2>&1 || bad "train K=2: $(tail -2 "$work/log")"
train "${d[@]}" --steps 30 --val-data "$work/val.txt" --eval-every 10 --eval-batches 2 --resume "$work/half" \
  --save-best "$work/best2" --metrics-out "$work/k2.json" >"$work/log" 2>&1 || bad "resume K=2: $(tail -2 "$work/log")"
train "${d[@]}" --steps 30 --val-data "$work/val.txt" --eval-every 10 --eval-batches 2 --metrics-out "$work/k.json" \
  >"$work/log" 2>&1 || bad "train K=2 whole: $(tail -2 "$work/log")"
if $py - "$work/k1.json" "$work/k2.json" "$work/k.json" "$work/val.json" "$work/best2/state.json" <<'PY'; then ok; else bad "--eval-batches and resume"; fi
import json, sys
k1, k2, k, whole = (json.load(open(p)) for p in sys.argv[1:5])
vals = lambda m: {s["step"]: s["val_loss"] for s in m["steps"] if "val_loss" in s}
assert vals(k1) | vals(k2) == vals(k), (vals(k1), vals(k2), vals(k))
assert vals(k)[30] != vals(whole)[30], "two batches gave the whole file's loss"
best = min(vals(k), key=vals(k).get)
assert json.load(open(sys.argv[5]))["step"] == best
PY

# A resume with other optimizer settings than the checkpoint's says which.
timeout 300 "$gradc" train "$spec" "${small[@]}" "${d[@]}" --steps 21 --resume "$work/half" --lr 5e-3 \
  --betas 0.9,0.99 >"$work/log" 2>&1 || bad "resume, other lr: $(tail -2 "$work/log")"
grep -q 'note: resuming .* lr 0.003 -> 0.005; min_lr 0.003 -> 0.005; betas \[0.9,0.999\] -> \[0.9,0.99\]' "$work/log" && ok \
  || bad "no note of the changed settings: $(grep -i note "$work/log")"

# Two ranks evaluate a share each; the loss is the one-device loss.
train "${d[@]}" --steps 10 --val-data "$work/val.txt" --eval-every 10 --devices 2 --metrics-out "$work/two.json" \
  >"$work/log" 2>&1 && ok || bad "two ranks: $(tail -3 "$work/log")"
$py - "$work/two.json" "$work/val.json" <<'PY' && ok || bad "two ranks' validation loss"
import json, sys
two, one = (json.load(open(p)) for p in sys.argv[1:3])
a = [s["val_loss"] for s in two["steps"] if "val_loss" in s][0]
b = [s["val_loss"] for s in one["steps"] if s["step"] == 10][0]
assert abs(a - b) <= 1e-4 * abs(b), (a, b)
for r in two["ranks"]:
    assert r["eval_peak_bytes_measured"] == r["eval_peak_bytes_planned"], r
PY

# Under a budget where the whole rank batch does not fit beside the training state, the rows are
# evaluated in parts, inside the budget, to the same loss.
wide=(--set layers=1 --set d_model=64 --set heads=2 --set seq=64 --set batch=16 --set vocab=8192)
for b in none 18MiB; do
  budget=(); [ "$b" = none ] || budget=(--budget "$b")
  timeout 300 "$gradc" train "$spec" "${wide[@]}" "${budget[@]}" "${d[@]}" --steps 5 --val-data "$work/val.txt" \
    --eval-every 5 --metrics-out "$work/wide-$b.json" >"$work/log" 2>&1 || bad "wide model, budget $b: $(tail -2 "$work/log")"
done
grep -q "16 runs per batch" "$work/log" && ok || bad "the budgeted evaluation was not split: $(grep evaluation "$work/log")"
$py - "$work/wide-none.json" "$work/wide-18MiB.json" <<'PY' && ok || bad "split evaluation"
import json, sys
whole, split = (json.load(open(p)) for p in sys.argv[1:3])
a, b = whole["steps"][-1]["val_loss"], split["steps"][-1]["val_loss"]
assert abs(a - b) <= 1e-4 * abs(a), (a, b)
r = split["ranks"][0]
assert r["eval_peak_bytes_measured"] == r["eval_peak_bytes_planned"] <= 18 << 20, r
PY

expect_exit2 "--save-best alone" "evaluate --val-data" train "${d[@]}" --steps 2 --save-best "$work/b3"
expect_exit2 "validation of synthetic data" "synthetic data" timeout 120 "$gradc" train "$spec" "${small[@]}" \
  --synthetic --steps 2 --val-data "$work/val.txt"
printf 'abcabcabc%.0s' $(seq 400) >"$work/abc.txt"
printf 'abd%.0s' $(seq 400) >"$work/abd.txt"
expect_exit2 "a symbol outside the vocabulary" "val-data" train --steps 2 --vocab chars --data "$work/abc.txt" \
  --val-data "$work/abd.txt"
head -c 100 "$work/val.txt" >"$work/tiny.txt"
expect_exit2 "a file shorter than a batch" "fewer than one batch" train "${d[@]}" --steps 2 --val-data "$work/tiny.txt"
[ ! -e "$work/b3" ] && ok || bad "a refused run created --save-best's folder"

echo "validation cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
