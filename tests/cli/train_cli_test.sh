#!/usr/bin/env bash
# End-to-end checks of training from the command line: gradc train (text and synthetic data,
# checkpoints, metrics JSON, resume), gradc grad and gradc eval, and their user errors.
# usage: train_cli_test.sh PATH/TO/gradc SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"
small=(--set batch=2 --set seq=16 --set d_model=32 --set heads=2 --set layers=1)

# Train a small gpt-mini on the bundled corpus, with a checkpoint and metrics.
if timeout 300 "$gradc" train "$src/models/gpt-mini.yaml" "${small[@]}" --data "$src/data/corpus.txt" --steps 6 \
    --save "$work/ck" --save-every 3 --metrics-out "$work/m.json" >"$work/out" 2>"$work/err"; then ok
else bad "gradc train: $(tail -3 "$work/err")"; fi
for f in weights.safetensors optimizer.safetensors state.json; do
  [ -f "$work/ck/$f" ] && ok || bad "checkpoint lacks $f"
done
grep -q '"peak_bytes_measured"' "$work/m.json" && grep -q '"tokens_per_s"' "$work/m.json" && ok || bad "metrics JSON fields"
[ "$(grep -c '"step":' "$work/m.json")" -eq 6 ] && ok || bad "metrics JSON has not 6 steps"
grep -q 'step 6/6' "$work/err" && ok || bad "plain progress lines on a non-terminal"

# --profile: time per op kind after the first step.
timeout 300 "$gradc" train "$src/models/gpt-mini.yaml" "${small[@]}" --synthetic --steps 3 --profile -q \
  >"$work/out" 2>"$work/err" && grep -q '^profile over 2 steps: ' "$work/err" \
  && grep -Eq '^  linear \(fwd\) +5\.0 ' "$work/err" && ok || bad "--profile: $(head -5 "$work/err")"

# Resume to step 8.
if timeout 300 "$gradc" train "$src/models/gpt-mini.yaml" "${small[@]}" --data "$src/data/corpus.txt" --steps 8 \
    --resume "$work/ck" --metrics-out "$work/m2.json" >"$work/out" 2>"$work/err"; then ok
else bad "gradc train --resume: $(tail -3 "$work/err")"; fi
grep -q '"step": 7' "$work/m2.json" && ok || bad "resumed run does not start at step 7"

# Evaluate the checkpoint (its folder: weights and vocabulary).
if timeout 120 "$gradc" eval "$src/models/gpt-mini.yaml" "${small[@]}" --weights "$work/ck" --data "$src/data/corpus.txt" \
    >"$work/out" 2>"$work/err" && grep -Eq '^loss [0-9.]+ over [0-9]+ windows' "$work/out"; then ok
else bad "gradc eval: $(cat "$work/out" "$work/err" | tail -3)"; fi
# Its attention ran fused (the default); the decomposition (--no-fuse) gives the same loss.
if timeout 120 "$gradc" eval "$src/models/gpt-mini.yaml" "${small[@]}" --weights "$work/ck" --data "$src/data/corpus.txt" \
    --no-fuse >"$work/out-unfused" 2>"$work/err" && /usr/bin/python3 - "$work/out" "$work/out-unfused" <<'PY'; then ok
import re, sys
fused, unfused = (float(re.match(r"loss ([0-9.]+)", open(f).read()).group(1)) for f in sys.argv[1:])
assert abs(fused - unfused) <= 1e-5 * abs(unfused), (fused, unfused)
PY
else bad "gradc eval --no-fuse: $(cat "$work/out" "$work/out-unfused" "$work/err" | tail -3)"; fi

# The weights file describes itself: a --vocab chars model evaluated from weights.safetensors
# alone uses the characters vocabulary (the same loss as from its folder); weights of another
# model are refused; a flipped bit in the folder's weights is named.
timeout 300 "$gradc" train "$src/models/gpt-mini.yaml" "${small[@]}" --data "$src/data/corpus.txt" --vocab chars \
  --set vocab=128 --steps 2 --save "$work/chars" -q 2>"$work/err" && ok || bad "train --vocab chars: $(tail -2 "$work/err")"
timeout 120 "$gradc" eval "$src/models/gpt-mini.yaml" "${small[@]}" --set vocab=128 --weights "$work/chars" \
  --data "$src/data/corpus.txt" >"$work/eval_dir.out" 2>&1
timeout 120 "$gradc" eval "$src/models/gpt-mini.yaml" "${small[@]}" --set vocab=128 \
  --weights "$work/chars/weights.safetensors" --data "$src/data/corpus.txt" >"$work/eval_file.out" 2>&1
grep -q '^loss ' "$work/eval_dir.out" && cmp -s "$work/eval_dir.out" "$work/eval_file.out" && ok \
  || bad "eval of the weights file != eval of its folder: $(cat "$work/eval_dir.out" "$work/eval_file.out")"
timeout 120 "$gradc" eval "$src/models/lm-seed.yaml" --weights "$work/chars/weights.safetensors" \
  --data "$src/data/corpus.txt" >/dev/null 2>"$work/err"
[ $? -eq 2 ] && grep -q "holds weights of model 'gpt-mini', but the spec is model 'lm-seed'" "$work/err" && ok \
  || bad "weights of another model: $(cat "$work/err")"
/usr/bin/python3 -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[-1]^=1; open(p,'wb').write(b)" \
  "$work/chars/weights.safetensors"
timeout 120 "$gradc" eval "$src/models/gpt-mini.yaml" "${small[@]}" --set vocab=128 --weights "$work/chars" \
  --data "$src/data/corpus.txt" >/dev/null 2>"$work/err"
[ $? -eq 2 ] && grep -q "weights.safetensors does not match its sha256" "$work/err" && ok \
  || bad "flipped bit in a checkpoint's weights: $(cat "$work/err")"

# Gradients for given weights and inputs (the inputs file written by hand in the safetensors format).
/usr/bin/python3 - "$work/inputs.safetensors" <<'PY'
import json, struct, sys
rows = [[(7 * r + c) % 256 for c in range(16)] for r in range(2)]
data = b"".join(struct.pack("<q", v) for row in rows for v in row)
nxt = b"".join(struct.pack("<q", (v + 1) % 256) for row in rows for v in row)
header = {"targets": {"dtype": "I64", "shape": [2, 16], "data_offsets": [0, len(nxt)]},
          "tokens": {"dtype": "I64", "shape": [2, 16], "data_offsets": [len(nxt), len(nxt) + len(data)]}}
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + nxt + data)
PY
# gradc grad writes an f64 loss with every digit (the shortest text that reads back exactly).
sed 's/^seed: 0/seed: 0\ndtype: f64/; s/dtype: f32/dtype: f64/' "$src/models/mlp.yaml" >"$work/mlp64.yaml"
"$gradc" train "$work/mlp64.yaml" --set batch=4 --synthetic --steps 1 -q --save "$work/ck64" 2>"$work/err" && ok \
  || bad "f64 mlp: $(tail -2 "$work/err")"
/usr/bin/python3 - "$work/mlp64.yaml" "$work/ck64/weights.safetensors" "$work/in64.safetensors" <<'PY'
import json, struct, sys
import torch
g = torch.Generator().manual_seed(3)
x, y = torch.randn(4, 32, generator=g, dtype=torch.float64), torch.randn(4, 8, generator=g, dtype=torch.float64)
items = [("x", x), ("y", y)]
header, off, blobs = {}, 0, []
for name, t in items:
    b = t.numpy().tobytes()
    header[name] = {"dtype": "F64", "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
    off += len(b)
    blobs.append(b)
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[3], "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
PY
"$gradc" grad "$work/mlp64.yaml" --set batch=4 --weights "$work/ck64/weights.safetensors" --inputs "$work/in64.safetensors" \
  -o "$work/g64.safetensors" >"$work/out" 2>"$work/err" && ok || bad "gradc grad f64: $(tail -2 "$work/err")"
/usr/bin/python3 - "$work/g64.safetensors" "$(cat "$work/out")" <<'PY' && ok || bad "f64 loss printed without its digits: $(cat "$work/out")"
import json, struct, sys
b = open(sys.argv[1], "rb").read()
meta = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])["__metadata__"]
printed = sys.argv[2].split()[1]
assert printed == meta["loss"], (printed, meta["loss"])
digits = printed.lstrip("-").replace(".", "").split("e")[0].lstrip("0")
assert len(digits) > 9, printed  # %.9g kept 9
assert repr(float(printed)) == printed, printed
PY

if timeout 120 "$gradc" grad "$src/models/gpt-mini.yaml" "${small[@]}" --weights "$work/ck/weights.safetensors" \
    --inputs "$work/inputs.safetensors" -o "$work/grads.safetensors" >"$work/out" 2>"$work/err"; then ok
else bad "gradc grad: $(tail -3 "$work/err")"; fi
/usr/bin/python3 - "$work/grads.safetensors" "$work/ck/weights.safetensors" <<'PY' && ok || bad "grad file does not hold one gradient per parameter"
import json, struct, sys
def header(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n])
g, w = header(sys.argv[1]), header(sys.argv[2])
meta = g.pop("__metadata__")
w.pop("__metadata__", None)
assert float(meta["loss"]) > 0
assert sorted(g) == sorted(w), (sorted(g), sorted(w))
assert all(g[k]["shape"] == w[k]["shape"] for k in g)
PY

# Under a byte budget the measured peak stays below it and equals the plan (recompute chosen).
if timeout 300 "$gradc" train "$src/models/gpt-mini.yaml" --set batch=8 --set seq=64 --set d_model=128 --set layers=2 \
    --data "$src/data/corpus.txt" --steps 2 --budget 12MB --metrics-out "$work/budget.json" >"$work/out" 2>"$work/err"; then ok
else bad "gradc train --budget: $(tail -3 "$work/err")"; fi
/usr/bin/python3 - "$work/budget.json" <<'PY' && ok || bad "measured peak above the budget or off the plan by more than 5%"
import json, sys
r = json.load(open(sys.argv[1]))["ranks"][0]
measured, planned = r["peak_bytes_measured"], r["peak_bytes_planned"]
assert measured <= 12_000_000, r
assert abs(planned - measured) / measured <= 0.05, r
PY
grep -q 'memory plan: remat' "$work/err" && ok || bad "no memory plan line in the log"

# Synthetic data for a model without text inputs.
if timeout 120 "$gradc" train "$src/models/mlp.yaml" --synthetic --steps 5 --optimizer sgd --lr 0.01 -q \
    --metrics-out "$work/mlp.json" >"$work/out" 2>"$work/err"; then ok
else bad "gradc train mlp --synthetic: $(tail -3 "$work/err")"; fi

# User errors: exit code 2 and a message.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  timeout 120 "$gradc" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  if [ $rc -eq 2 ] && grep -Eq -- "$pattern" "$work/err"; then ok; else bad "$name: exit $rc, $(head -3 "$work/err")"; fi
}
expect_error "no data" "exactly one of --data" train "$src/models/gpt-mini.yaml"
printf 'tiny' >"$work/tiny.txt"
expect_error "data too small" "needs" train "$src/models/gpt-mini.yaml" "${small[@]}" --data "$work/tiny.txt" --steps 2
expect_error "text data for mlp" "synthetic" train "$src/models/mlp.yaml" --data "$src/data/corpus.txt" --steps 2
expect_error "resume mismatch" "checkpoint" train "$src/models/gpt-mini.yaml" --data "$src/data/corpus.txt" \
  --steps 9 --resume "$work/ck"
# Another batch shape: the saved data position would name other windows.
expect_error "resume with another batch" "trained on batches of [0-9]+x[0-9]+ tokens .* this run's are" train \
  "$src/models/gpt-mini.yaml" "${small[@]}" --set batch=3 --data "$src/data/corpus.txt" --steps 9 --resume "$work/ck"
# grad is strict about its files: a tensor the model does not have is named.
/usr/bin/python3 - "$work/ck/weights.safetensors" "$work/extra.safetensors" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
meta = header.pop("__metadata__", None)
name, entry = next(iter(header.items()))
body = raw[8 + n:]
extra = dict(entry)
extra["data_offsets"] = [len(body), len(body) + entry["data_offsets"][1] - entry["data_offsets"][0]]
header["renamed.layer.weight"] = extra
body += body[entry["data_offsets"][0]:entry["data_offsets"][1]]
if meta is not None:
    header["__metadata__"] = meta
head = json.dumps(header).encode()
head += b" " * (-len(head) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(head)) + head + body)
PY
expect_error "grad: extra weight" "--weights: 'renamed.layer.weight' is not a parameter of this model" grad \
  "$src/models/gpt-mini.yaml" "${small[@]}" --weights "$work/extra.safetensors" --inputs "$work/inputs.safetensors" \
  -o "$work/g3.safetensors"
expect_error "infeasible budget" "smallest feasible budget" train "$src/models/gpt-mini.yaml" --data "$src/data/corpus.txt" \
  --steps 2 --budget 20MB
expect_error "bad budget" "budget" train "$src/models/gpt-mini.yaml" --data "$src/data/corpus.txt" --budget lots
expect_error "missing weights" "cannot|No such|open" grad "$src/models/mlp.yaml" --weights "$work/none.safetensors" \
  --inputs "$work/inputs.safetensors" -o "$work/g2.safetensors"

# BLAS kernels: what runs is reported; a user's OPENBLAS_CORETYPE is never changed (Prescott,
# OpenBLAS's oldest x86-64 kernels, is exactly what gradc would replace on a misdetected CPU).
"$gradc" train "$src/models/mlp.yaml" --synthetic --steps 1 --metrics-out "$work/blas.json" 2>"$work/blas.err" && ok \
  || bad "train for the BLAS report: $(cat "$work/blas.err")"
grep -q "^kernels: .* BLAS " "$work/blas.err" && ok || bad "no kernels/BLAS line: $(cat "$work/blas.err")"
python3 -c "import json,sys; b=json.load(open(sys.argv[1]))['blas']; sys.exit(0 if b['library'] and b['source'] else 1)" \
  "$work/blas.json" && ok || bad "no blas entry in the metrics"
if python3 -c "import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))['blas']['library']=='OpenBLAS' else 1)" "$work/blas.json"; then
  OPENBLAS_CORETYPE=Prescott "$gradc" train "$src/models/mlp.yaml" --synthetic --steps 1 --metrics-out "$work/blas2.json" \
    2>"$work/blas2.err" && ok || bad "train with OPENBLAS_CORETYPE: $(cat "$work/blas2.err")"
  python3 -c "import json,sys; b=json.load(open(sys.argv[1]))['blas']; sys.exit(0 if b['core'].lower()=='prescott' and 'user' in b['source'] else 1)" \
    "$work/blas2.json" && ok || bad "the user's OPENBLAS_CORETYPE was not respected: $(grep kernels "$work/blas2.err")"
  # The process gradc re-executes on a misdetected CPU (runtime/kernels/blas_kernels.h): its GEMM check
  # passes and the report says who chose.
  GRADC_BLAS_SELECTED=Prescott OPENBLAS_CORETYPE=Haswell "$gradc" train "$src/models/mlp.yaml" --synthetic --steps 1 \
    --metrics-out "$work/blas3.json" 2>"$work/blas3.err" && ok || bad "selected core run: $(cat "$work/blas3.err")"
  grep -q "core Haswell (selected by gradc (OpenBLAS chose Prescott" "$work/blas3.err" && ok \
    || bad "selected core not reported: $(grep kernels "$work/blas3.err")"
fi

# --profile: time per op kind and a roofline against the machine's measured ceilings.
"$gradc" train "$src/models/mlp.yaml" --synthetic --steps 3 --profile -q 2>"$work/prof.err" && ok || bad "--profile run"
grep -q "machine (probe): f32 GEMM .* GFLOP/s, memory .* GB/s" "$work/prof.err" && grep -q "linear (fwd)" "$work/prof.err" \
  && grep -q "%gemm" "$work/prof.err" && ok || bad "no roofline in the profile: $(head -5 "$work/prof.err")"

# Token inputs declared i32 read text as i64 ones do.
sed 's/dtype: i64/dtype: i32/g' "$src/models/gpt-mini.yaml" >"$work/i32.yaml"
timeout 300 "$gradc" train "$work/i32.yaml" "${small[@]}" --data "$src/data/corpus.txt" --steps 2 -q 2>"$work/err" \
  && ok || bad "i32 tokens with --data: $(tail -2 "$work/err")"

# A diverged run is exit 2 with the reason, and its metrics file holds the steps that ran (not a
# stale file from an earlier run).
printf '{"stale": true}\n' >"$work/div.json"
timeout 60 "$gradc" train "$src/models/mlp.yaml" --synthetic --steps 20 --optimizer sgd --lr 1e10 \
  --metrics-out "$work/div.json" >/dev/null 2>"$work/err"
rc=$?
[ $rc -eq 2 ] && grep -q "diverged" "$work/err" && ! grep -q "^trained" "$work/err" && python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
assert "stale" not in m and 1 <= len(m["steps"]) < 20, m
' "$work/div.json" && ok || bad "diverged run: exit $rc, $(tail -2 "$work/err"), metrics $(head -c 200 "$work/div.json")"

# A run that diverges after resuming never writes its non-finite weights over the good checkpoint
# (the loss of a step is computed before its update, so the weights are checked before each save).
rm -rf "$work/goodck"
timeout 60 "$gradc" train "$src/models/mlp.yaml" --synthetic --steps 2 --save "$work/goodck" -q \
  2>"$work/err" || bad "the good checkpoint: $(tail -2 "$work/err")"
timeout 60 "$gradc" train "$src/models/mlp.yaml" --synthetic --steps 40 --lr 3e38 \
  --resume "$work/goodck" --save "$work/goodck" --save-every 1 >/dev/null 2>"$work/err"
rc=$?
finite() { python3 -c '
import json, math, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
header = json.loads(b[8:8 + n])
data = b[8 + n:]
for name, t in header.items():
    if name == "__metadata__" or t["dtype"] != "F32":
        continue
    lo, hi = t["data_offsets"]
    vals = struct.unpack("<%df" % ((hi - lo) // 4), data[lo:hi])
    assert all(math.isfinite(v) for v in vals), name
' "$1"; }
[ $rc -eq 2 ] && grep -q "diverged" "$work/err" && finite "$work/goodck/weights.safetensors" \
  && ok || bad "a diverged resumed run: exit $rc, $(tail -2 "$work/err")"

# A checkpoint folder belongs to one run at a time: a second run saving there fails at once,
# naming the first one's pid; an unusable --save location fails before step 1.
"$gradc" train "$src/models/gpt-mini.yaml" --set batch=2 --set seq=32 --synthetic --steps 100000 --save "$work/shared" \
  -q 2>/dev/null &
first=$!
for _ in $(seq 100); do [ -s "$work/.shared.gradc-lock" ] && break; sleep 0.1; done
timeout 60 "$gradc" train "$src/models/mlp.yaml" --synthetic --steps 1 --save "$work/shared" >/dev/null 2>"$work/lock.err"
rc=$?
kill "$first" 2>/dev/null
wait "$first" 2>/dev/null
[ $rc -eq 2 ] && grep -q "checkpoint folder '.*shared' is in use by pid $first" "$work/lock.err" && ok \
  || bad "second saver: exit $rc, $(cat "$work/lock.err")"
touch "$work/plainfile"
timeout 60 "$gradc" train "$src/models/mlp.yaml" --synthetic --steps 3 --save "$work/plainfile/ckpt" >"$work/early.out" \
  2>"$work/early.err"
rc=$?
[ $rc -eq 2 ] && grep -q "cannot save checkpoints to" "$work/early.err" && ! grep -q "^step 1" "$work/early.err" && ok \
  || bad "unwritable --save not refused before training: exit $rc, $(tail -2 "$work/early.err")"

echo "train cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
