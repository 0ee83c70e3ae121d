#!/usr/bin/env bash
# End-to-end checks of the gradc binary: every bundled model compiles, its IR text survives
# `gradc opt` byte for byte, summaries carry the figures users rely on, and user mistakes exit
# with code 2 and a file:line:col message within a bounded time (a hang fails the check).
# usage: cli_test.sh PATH/TO/gradc SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"

# run_gradc OUT ERR ARGS...: runs with a hang guard; sets $rc.
run_gradc() {
  local out=$1 err=$2
  shift 2
  timeout 20 "$gradc" "$@" >"$out" 2>"$err"
  rc=$?
}

for model in "$src"/models/*.yaml; do
  name=$(basename "$model" .yaml)
  run_gradc "$work/$name.gir" "$work/err" compile "$model" --emit ir
  if [ $rc -ne 0 ]; then bad "$name: compile --emit ir exited $rc: $(head -5 "$work/err")"; continue; fi
  timeout 20 "$gradc" opt - <"$work/$name.gir" >"$work/$name.again.gir" 2>"$work/err"
  if cmp -s "$work/$name.gir" "$work/$name.again.gir"; then ok; else bad "$name: gradc opt does not reprint identical IR"; fi
  timeout 20 "$gradc" opt - --passes dce <"$work/$name.gir" >"$work/$name.dce.gir" 2>"$work/err"
  if cmp -s "$work/$name.gir" "$work/$name.dce.gir"; then ok; else bad "$name: dce changed an already compiled graph"; fi
  run_gradc "$work/$name.dot" "$work/err" compile "$model" --emit dot
  if [ $rc -eq 0 ] && head -1 "$work/$name.dot" | grep -q '^digraph'; then ok; else bad "$name: --emit dot"; fi
  run_gradc "$work/$name.txt" "$work/err" compile "$model" --emit summary
  if [ $rc -eq 0 ] && grep -q '^parameters' "$work/$name.txt"; then ok; else bad "$name: --emit summary"; fi
done

# The seed article's arithmetic: 32 x 250 x 40,000 logits = 320,000,000 elements = 1.28 GB (1.2 GiB).
if grep -E '1\.2 GiB .* 320,000,000 +f32\[32, 250, 40000\] +linear +lm_head' "$work/lm-seed.txt" >/dev/null; then ok
else bad "lm-seed summary does not report the logits as 320,000,000 elements / 1.2 GiB"; fi

# --set overrides dims (and dependents), -o writes a file, --dump-dir writes every stage.
run_gradc "$work/out" "$work/err" compile "$src/models/gpt-mini.yaml" --set batch=2 --set seq=64 --emit ir -o "$work/small.gir"
if [ $rc -eq 0 ] && grep -q 'input %tokens : i64\[2, 64\]' "$work/small.gir"; then ok; else bad "--set batch=2 --set seq=64 -o FILE"; fi
run_gradc "$work/out" "$work/err" compile "$src/models/mlp.yaml" --emit ir --dump-dir "$work/dump" --print-after-all
if [ $rc -eq 0 ] && [ -f "$work/dump/00-input.gir" ] && [ -f "$work/dump/01-dce.gir" ] && grep -q 'IR after dce' "$work/err"; then ok
else bad "--dump-dir / --print-after-all"; fi

# Exit codes come from an error's kind, never its words: a compiler bug reached under the plan
# search is exit 1 naming the pass (injected here); a budget no plan meets is exit 2, and the
# smallest feasible budget it names is met.
export GRADC_FAIL_AFTER_PASS=optimizer
run_gradc "$work/out" "$work/err" compile "$src/models/mlp.yaml" --emit plan --budget 64MiB --micro-batches auto
unset GRADC_FAIL_AFTER_PASS
if [ $rc -eq 1 ] && grep -q "pass 'optimizer' failed: optimizer: internal error" "$work/err"; then ok
else bad "an internal error under the search: exit $rc (want 1): $(head -2 "$work/err")"; fi
run_gradc "$work/out" "$work/err" compile "$src/models/mlp.yaml" --emit plan --budget 1KiB
smallest=$(grep -o 'the smallest feasible budget is [^(]*([0-9,]* bytes)' "$work/err" | sed 's/.*(\([0-9,]*\) bytes)/\1/; s/,//g')
if [ $rc -eq 2 ] && [ -n "$smallest" ]; then ok; else bad "an infeasible budget: exit $rc (want 2)"; fi
run_gradc "$work/out" "$work/err" compile "$src/models/mlp.yaml" --emit plan --budget "${smallest:-0}"
if [ $rc -eq 0 ]; then ok; else bad "the smallest feasible budget named ($smallest) is refused: $(head -2 "$work/err")"; fi

for sub in compile opt; do
  run_gradc "$work/out" "$work/err" $sub --help
  if [ $rc -eq 0 ] && grep -q 'Usage' "$work/out"; then ok; else bad "gradc $sub --help"; fi
done

# expect_user_error NAME REGEX ARGS...: exit code 2 and a message matching REGEX on stderr.
expect_user_error() {
  local name=$1 pattern=$2
  shift 2
  run_gradc "$work/out" "$work/err" "$@"
  if [ $rc -eq 2 ] && grep -Eq "$pattern" "$work/err"; then ok
  else bad "$name: exit $rc (want 2), stderr: $(head -3 "$work/err")"; fi
}

cat >"$work/misspelled.yaml" <<'YAML'
model: m
inputs:
  x: {shape: [4, 8], dtype: f32}
layers:
  - {op: lienar, name: fc, input: x, out: 2}
loss: {op: mse, target: x}
YAML
expect_user_error "misspelled op" "misspelled.yaml:5:[0-9]+: error: .*lienar.*" compile "$work/misspelled.yaml"
grep -q "linear" "$work/err" && ok || bad "misspelled op: no close-match hint"

cat >"$work/undefined_dim.yaml" <<'YAML'
model: m
dims:
  batch: 4
inputs:
  x: {shape: [batch, widht], dtype: f32}
layers:
  - {op: relu, input: x}
loss: {op: mse, target: x}
YAML
expect_user_error "undefined dim" "undefined_dim.yaml:5:[0-9]+: error: .*widht" compile "$work/undefined_dim.yaml"

cat >"$work/mismatch.yaml" <<'YAML'
model: m
inputs:
  a: {shape: [4, 8], dtype: f32}
  b: {shape: [3, 8], dtype: f32}
layers:
  - {op: matmul, name: mm, inputs: [a, b]}
loss: {op: mse, target: a}
YAML
expect_user_error "shape mismatch" "mismatch.yaml:6:[0-9]+: error: .*f32\[4, 8\].*f32\[3, 8\]" compile "$work/mismatch.yaml"

printf 'model: [unclosed\n  - {op: relu\n' >"$work/notyaml.yaml"
expect_user_error "not YAML" "notyaml.yaml:[0-9]+:[0-9]+: error:" compile "$work/notyaml.yaml"

{
  echo 'a0: &a0 [x, x, x, x, x, x, x, x, x, x]'
  for i in $(seq 1 12); do
    p=$((i - 1))
    echo "a$i: &a$i [*a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p, *a$p]"
  done
  echo 'model: bomb'
} >"$work/bomb.yaml"
start=$(date +%s%N)
expect_user_error "alias bomb" "bomb.yaml:[0-9]+:[0-9]+: error: .*alias" compile "$work/bomb.yaml"
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
echo "alias bomb rejected in ${elapsed_ms} ms"

expect_user_error "unknown --set" "batchsize" compile "$src/models/gpt-mini.yaml" --set batchsize=4
expect_user_error "missing file" "cannot read" compile "$work/does-not-exist.yaml"
printf 'graph g\n  input %%x : f32[2]\n  %%0 = relu(%%y) : f32[2] fwd\n' >"$work/bad.gir"
expect_user_error "bad IR" "bad.gir:3:13: error: '%y' is not defined" opt "$work/bad.gir"
expect_user_error "unknown pass" "unknown pass 'cse'" opt "$work/bad.gir" --passes cse
expect_user_error "bad --emit" "emit" compile "$src/models/mlp.yaml" --emit pdf

# An unknown command is named (with a suggestion when one is close).
expect_user_error "unknown command" "unknown command 'frobnicate'" frobnicate
expect_user_error "misspelled command" "unknown command 'trian'; did you mean 'train'" trian "$src/models/mlp.yaml"
# A learning rate beyond f32 is a flag error, not a kernel's message at step 1.
expect_user_error "--lr 1e300" "^gradc: error: --lr: .*1e300" train "$src/models/mlp.yaml" --synthetic --steps 1 --lr 1e300
# Output paths are checked before training, not after it.
expect_user_error "--metrics-out in a missing folder" "error: --metrics-out: the folder '/nonexistent-gradc' does not exist" \
  train "$src/models/mlp.yaml" --synthetic --steps 1 --metrics-out /nonexistent-gradc/m.json
grep -q "^step 1" "$work/err" && bad "--metrics-out checked only after training" || ok
mkdir -p "$work/trace-folder"
expect_user_error "--trace-out onto a folder" "error: --trace-out: .* is a folder" \
  train "$src/models/mlp.yaml" --synthetic --steps 1 --trace-out "$work/trace-folder"
# A warmup longer than the run trains, and says the peak learning rate is never reached.
"$gradc" train "$src/models/mlp.yaml" --synthetic --steps 2 --warmup-steps 10 >/dev/null 2>"$work/err" \
  && grep -q "warning: the learning-rate warmup (--warmup-steps 10) is longer than the run (--steps 2)" "$work/err" \
  && ok || bad "warmup longer than the run: $(tail -2 "$work/err")"

# Output paths never destroy what they point at: a character device or FIFO is written, not
# replaced; a symlink's target is written and the link stays; a folder is refused; a failed
# write to stdout is an error.
null_before=$(stat -c '%F %t:%T' /dev/null)
"$gradc" compile "$src/models/mlp.yaml" --emit ir -o /dev/null && [ "$(stat -c '%F %t:%T' /dev/null)" = "$null_before" ] \
  && ok || bad "-o /dev/null replaced the device: $(stat -c '%F' /dev/null)"
echo old >"$work/target.gir" && ln -s target.gir "$work/link.gir"
"$gradc" compile "$src/models/mlp.yaml" --emit ir -o "$work/link.gir" && [ -L "$work/link.gir" ] \
  && grep -q '^graph mlp' "$work/target.gir" && ok || bad "-o SYMLINK: the link was replaced or the target not written"
mkfifo "$work/pipe" && (cat "$work/pipe" >"$work/pipe.out" &) && \
  timeout 20 "$gradc" compile "$src/models/mlp.yaml" --emit ir -o "$work/pipe" && sleep 0.3 && [ -p "$work/pipe" ] \
  && grep -q '^graph mlp' "$work/pipe.out" && ok || bad "-o FIFO: replaced or not written"
# A FIFO given as an input is refused at once, never waited on (nothing writes to it here).
mkfifo "$work/in.fifo"
"$gradc" compile "$src/models/mlp.yaml" -o "$work/fifo.art" 2>/dev/null
cp -r "$work/fifo.art" "$work/fifo2.art" && rm "$work/fifo2.art/step.gir" && mkfifo "$work/fifo2.art/step.gir"
for args in "compile $work/in.fifo" "inspect $work/in.fifo" "opt $work/in.fifo" \
  "train $src/models/gpt-mini.yaml --set layers=1 --set seq=16 --data $work/in.fifo --steps 1" \
  "eval $src/models/mlp.yaml --weights $work/in.fifo --data $src/data/corpus.txt" \
  "train $work/fifo2.art --synthetic --steps 1"; do
  # shellcheck disable=SC2086
  timeout 20 "$gradc" $args >/dev/null 2>"$work/fifo.err"
  rc=$?
  [ $rc -eq 2 ] && grep -q "not a regular file" "$work/fifo.err" && ok || bad "FIFO input ($args): exit $rc, $(tail -1 "$work/fifo.err")"
done
mkdir "$work/folder.gir"
"$gradc" compile "$src/models/mlp.yaml" --emit ir -o "$work/folder.gir" 2>"$work/folder.err"
[ $? -ne 0 ] && [ -d "$work/folder.gir" ] && grep -q "folder" "$work/folder.err" && ok || bad "-o FOLDER not refused"
if [ -w /dev/full ]; then
  "$gradc" compile "$src/models/mlp.yaml" --emit ir >/dev/full 2>"$work/full.err"
  [ $? -eq 1 ] && grep -q "standard output" "$work/full.err" && ok || bad "a failed write to stdout exits 0"
fi

# Numeric flags: one message format, exit 2, nothing wrapped or silently replaced.
for case in "--steps 0|--steps: must be a positive integer, got '0'" "--steps 1.5|--steps: must be a positive integer" \
    "--lr 0|--lr: must be a positive number" "--lr inf|--lr: must be a positive number" \
    "--weight-decay -1|--weight-decay: must be a non-negative number" \
    "--decay-steps -5|--decay-steps: must be a non-negative integer" \
    "--save-every -1|--save-every: must be a non-negative integer" "--seed -1|--seed: must be a non-negative integer" \
    "--momentum 2|--momentum: must be a number in \[0, 1\)" "--devices 0|--devices: must be an integer from 1" \
    "--timeout 0|--timeout: must be a positive number"; do
  flag=${case%%|*}
  expect_user_error "train $flag" "^gradc: error: ${case#*|}.*; see gradc train --help" \
    train "$src/models/mlp.yaml" --synthetic $flag
  if grep -q "1797693" "$work/err"; then bad "train $flag prints a 309-digit bound"; else ok; fi
done

# An allocation that fails (injected: every tracked allocation after the first N) is one line
# on stderr and exit 1, wherever it happens: never terminate, an abort or a backtrace.
for n in 0 5 40; do  # 40: inside a kernel of step 2
  GRADC_FAIL_ALLOCATION_AFTER=$n timeout 60 "$gradc" train "$src/models/mlp.yaml" --synthetic --steps 2 \
    >"$work/out" 2>"$work/err"
  rc=$?
  errors=$(grep -c "^gradc: error: " "$work/err")
  if [ $rc -eq 1 ] && [ "$errors" -eq 1 ] && grep -q "not enough memory" "$work/err" \
      && ! grep -Eq "terminate called|Exception raised from|frame #" "$work/err"; then ok
  else bad "failing allocation after $n: exit $rc, $(head -3 "$work/err")"; fi
done

# Memory preflight: a step larger than this host can give is refused before anything is
# allocated, naming both sizes; with the check skipped, the arena allocation fails cleanly.
expect_user_error "preflight" "needs .* per device .* but this host has .* available .*--budget" \
  train "$src/models/gpt-mini.yaml" --set vocab=30000000 --synthetic --steps 1
expect_user_error "preflight, 4 ranks" "for the 4 ranks on this host.*fewer --devices" \
  train "$src/models/gpt-mini.yaml" --set vocab=3000000 --devices 4 --synthetic --steps 1
GRADC_NO_MEMORY_CHECK=1 timeout 60 "$gradc" train "$src/models/gpt-mini.yaml" --set vocab=30000000 --synthetic \
  --steps 1 >"$work/out" 2>"$work/err"
rc=$?
[ $rc -eq 1 ] && grep -q "cannot allocate the .*arena" "$work/err" && ok || bad "arena too large: exit $rc, $(tail -2 "$work/err")"

# Control characters from the input never reach the terminal raw: an ESC sequence in a spec
# (error message and source excerpt) or in a plan's names is shown as \x1b.
printf 'model: m\ninputs:\n  x: {shape: [4, 8], dtype: f32}\nlayers:\n  - {op: "lin\033[31mear", input: x, out: 2}\n' \
  >"$work/esc.yaml"
expect_user_error "ESC in a spec" 'unknown op .lin\\x1b\[31mear' compile "$work/esc.yaml"
if grep -q $'\033' "$work/err"; then bad "a raw ESC reached the terminal from a spec"; else ok; fi
timeout 60 "$gradc" compile "$src/models/mlp.yaml" --emit plan -o "$work/esc_plan.json" 2>/dev/null
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["model"]="m\x1b[2J"; json.dump(p, open(sys.argv[1], "w"))' \
  "$work/esc_plan.json"
timeout 60 "$gradc" inspect "$work/esc_plan.json" >"$work/out" 2>&1
grep -q 'memory plan of m\\x1b\[2J' "$work/out" && ! grep -q $'\033' "$work/out" && ok \
  || bad "a raw ESC reached the terminal from a plan: $(head -1 "$work/out" | cat -v)"

# dtype f16 cannot train on CPU: refused before anything runs, naming what to use instead.
sed 's/^dtype: f32/dtype: f16/' "$src/models/gpt-mini.yaml" >"$work/f16.yaml"
expect_user_error "f16 on CPU" "cannot train f16 models.*use dtype: f32 or bf16" train "$work/f16.yaml" --set batch=2 \
  --set seq=16 --set d_model=32 --set layers=1 --synthetic --steps 1
if grep -q "^step 1" "$work/err"; then bad "f16 refused only after step 1"; else ok; fi

# Exit codes by one rule: 2 for a path the user gave that cannot work, found before any work;
# 1 for the environment (a full disk).
mkdir -p "$work/mine-save" && echo keep >"$work/mine-save/notes.txt"
expect_user_error "--save onto a user's folder" "cannot save checkpoints to .*not a checkpoint" train \
  "$src/models/mlp.yaml" --synthetic --steps 1 --save "$work/mine-save"
if grep -q "^step 1" "$work/err"; then bad "--save onto a user's folder refused only after step 1"; else ok; fi
[ "$(cat "$work/mine-save/notes.txt")" = keep ] && ok || bad "--save touched a user's folder"
echo x >"$work/a-file"
expect_user_error "--dump-dir onto a file" "dump-dir: .* exists and is not a folder" compile "$src/models/mlp.yaml" \
  --dump-dir "$work/a-file"
expect_user_error "-o into a missing folder" "No such file or directory" compile "$src/models/mlp.yaml" --emit ir \
  -o "$work/missing/out.gir"
run_gradc "$work/out" "$work/err" compile "$src/models/mlp.yaml" --emit ir -o /dev/full
[ $rc -eq 1 ] && grep -q "No space left on device" "$work/err" && ok || bad "-o /dev/full: exit $rc (want 1)"
# A full file system under compile -o (a 256 KiB tmpfs, where this machine lets us mount one).
mkdir -p "$work/tiny"
if mount -t tmpfs -o size=256k tmpfs "$work/tiny" 2>/dev/null; then
  timeout 120 "$gradc" compile "$src/models/gpt-mini.yaml" -o "$work/tiny/A" >"$work/out" 2>"$work/err"
  rc=$?
  [ $rc -eq 1 ] && grep -q "No space left on device" "$work/err" && [ -z "$(ls -A "$work/tiny")" ] && ok \
    || bad "compile -o onto a full disk: exit $rc (want 1), left $(ls -A "$work/tiny"), $(tail -1 "$work/err")"
  umount "$work/tiny"
else
  echo "note: no tmpfs could be mounted here; the full-disk compile -o check is skipped"
fi

# A data file truncated while a run reads it (the file is mapped): one line and exit 1, never
# a bus error's core dump.
head -c 8000000 /dev/urandom | base64 -w 100 >"$work/shrinking.txt"
timeout 120 "$gradc" train "$src/models/gpt-mini.yaml" --set batch=2 --set seq=16 --set d_model=32 --set layers=1 \
  --data "$work/shrinking.txt" --sampling random --steps 1000000 >/dev/null 2>"$work/err" &
trainer=$!
for _ in $(seq 1 600); do grep -q "^step " "$work/err" && break; sleep 0.1; done
: >"$work/shrinking.txt"
wait "$trainer"
rc=$?
[ $rc -eq 1 ] && [ "$(grep -c "error" "$work/err")" -eq 1 ] && grep -q "truncated or became unreadable while in use" "$work/err" \
  && ok || bad "a data file truncated mid-run: exit $rc, $(head -3 "$work/err")"

echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
