#!/usr/bin/env bash
# End-to-end checks of data-parallel training over CPU processes (Gloo): gradc train --devices 2
# against one device at the same global batch (losses and parameters), bucket sizes, the gather
# placement, torchrun-style variables, a killed rank, and user errors.
# usage: parallel_cli_test.sh PATH/TO/gradc SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"
compare() { python3 "$src/tests/cli/compare_runs.py" "$@"; }
# Dropout stays on (p = 0.1): each rank draws its rows of the one-device masks.
small=(--set batch=8 --set seq=32 --set d_model=64 --set heads=2 --set layers=2)
run() {  # run NAME ARGS...: 20 steps of the small gpt-mini on the corpus, checkpoint and metrics
  local name=$1
  shift
  timeout 300 "$gradc" train "$src/models/gpt-mini.yaml" "${small[@]}" --data "$src/data/corpus.txt" --steps "${steps:-20}" \
    --lr "${lr:-3e-3}" --save "$work/$name" --metrics-out "$work/$name.json" "$@" >"$work/$name.out" 2>"$work/$name.err"
}

# await_ranks LOG PATTERN LAUNCHER: wait (up to 60 s) for PATTERN in rank 0's log, then set
# `workers` to the launcher's worker pids and `victim` to rank 1's.
await_ranks() {
  for _ in $(seq 1 600); do grep -q "$2" "$1" 2>/dev/null && break; sleep 0.1; done
  workers=$(pgrep -P "$3" | tr '\n' ' ')
  victim=""
  for w in $workers; do tr '\0' '\n' <"/proc/$w/environ" 2>/dev/null | grep -qx 'RANK=1' && victim=$w; done
}

# Two ranks follow the one-device trajectory. With AdamW the losses agree; the parameters are
# compared under SGD: AdamW divides each gradient by its own running magnitude, so a gradient
# that is zero in exact arithmetic (attention's key bias: softmax ignores a constant added to
# every score) turns float rounding noise into full-size steps that differ between any two
# summation orders, one device included.
run one && ok || bad "one device: $(tail -3 "$work/one.err")"
run two --devices 2 && ok || bad "--devices 2: $(tail -3 "$work/two.err")"
compare "$work/one.json" "$work/two.json" --rtol 1e-5 && ok || bad "2 ranks vs 1 device (AdamW losses)"
lr=0.1 run one_sgd --optimizer sgd && ok || bad "one device, SGD: $(tail -3 "$work/one_sgd.err")"
lr=0.1 run two_sgd --optimizer sgd --devices 2 && ok || bad "--devices 2, SGD: $(tail -3 "$work/two_sgd.err")"
compare "$work/one_sgd.json" "$work/two_sgd.json" "$work/one_sgd" "$work/two_sgd" --rtol 1e-5 && ok \
  || bad "2 ranks vs 1 device (SGD losses and parameters)"
grep -q 'step 20/20' "$work/two.err" && ok || bad "progress lines from rank 0"
[ "$(grep -c 'step 20/20' "$work/two.err")" -eq 1 ] && ok || bad "progress from more than one rank"
grep -q 'data parallel: 2 ranks (gloo), loss placement local' "$work/two.err" && ok || bad "no data-parallel log line"
python3 - "$work/two.json" <<'PY' && ok || bad "per-rank metrics"
import json, sys
ranks = json.load(open(sys.argv[1]))["ranks"]
assert [r["rank"] for r in ranks] == [0, 1], ranks
for r in ranks:
    assert r["peak_bytes_measured"] == r["peak_bytes_planned"] > 0, r
    assert r["comm_wait_s"] >= 0, r
PY

# Tied weights (gpt2's LM head shares wte): 1 and 2 ranks follow the same trajectory, and the
# saved weights hold the shared matrix once, under its first name.
tiny_gpt2=(--set batch=4 --set context=32 --set seq=24 --set vocab=256 --set d_model=32 --set heads=4 --set layers=2)
for devices in 1 2; do
  timeout 300 "$gradc" train "$src/models/gpt2.yaml" "${tiny_gpt2[@]}" --data "$src/data/corpus.txt" --steps 20 \
    --lr 3e-3 --devices $devices --save "$work/tied$devices" --metrics-out "$work/tied$devices.json" -q \
    2>"$work/tied$devices.err" && ok || bad "tied gpt2 on $devices device(s): $(tail -3 "$work/tied$devices.err")"
done
compare "$work/tied1.json" "$work/tied2.json" --rtol 1e-5 && ok || bad "tied gpt2: 2 ranks vs 1 device (losses)"
python3 - "$work/tied2/weights.safetensors" <<'PY' && ok || bad "tied weight saved more than once or not at all"
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
names = [k for k in header if k != "__metadata__"]
assert "wte.weight" in names and "lm_head.weight" not in names, names
assert header["wte.weight"]["shape"] == [256, 32], header["wte.weight"]
PY

# An input marked batched: false (one [seq, seq] matrix for every example) is read whole by
# every micro-batch and every rank: 2 ranks and 3 micro-batches follow the one-device run.
cat >"$work/mix.yaml" <<'YAML'
model: mix
dims: {batch: 6, seq: 5, d: 4}
inputs:
  x:   {shape: [batch, seq, d]}
  mix: {shape: [seq, seq], batched: false}
  y:   {shape: [batch, seq, d]}
layers:
  - {op: matmul, inputs: [mix, x]}
  - {op: linear, name: fc, out: d}
loss: {op: mse, input: _, target: y}
YAML
for v in "one:" "micro:--micro-batches 3" "ranks:--devices 2" "both:--devices 3 --micro-batches 2"; do
  name=${v%%:*}
  # shellcheck disable=SC2086
  timeout 120 "$gradc" train "$work/mix.yaml" --synthetic --steps 5 ${v#*:} --metrics-out "$work/mix_$name.json" -q \
    2>"$work/mix.err" && ok || bad "unbatched input, $name: $(tail -2 "$work/mix.err")"
done
for name in micro ranks both; do
  compare "$work/mix_one.json" "$work/mix_$name.json" --rtol 1e-5 && ok || bad "unbatched input: $name vs one device"
done

# The bucket size changes when gradients travel, not what they sum to.
run tiny_buckets --devices 2 --bucket-mib 0.01 && ok || bad "--bucket-mib 0.01: $(tail -3 "$work/tiny_buckets.err")"
[ "$(grep -Eo '[0-9]+ gradient buckets' "$work/tiny_buckets.err" | cut -d' ' -f1)" -ge 10 ] && ok \
  || bad "0.01 MiB made few buckets: $(grep 'gradient bucket' "$work/tiny_buckets.err")"
compare "$work/two.json" "$work/tiny_buckets.json" "$work/two" "$work/tiny_buckets" --rtol 1e-6 && ok \
  || bad "bucket size changed the results"

# The DataParallel baseline: same trajectory, the loss on rank 0.
run gather --devices 2 --loss-placement gather && ok || bad "--loss-placement gather: $(tail -3 "$work/gather.err")"
compare "$work/one.json" "$work/gather.json" --rtol 1e-5 && ok || bad "gather vs 1 device"

# Rank 0 checkpoints; every rank resumes from it, and the run continues bit for bit.
steps=10 run half --devices 2 && ok || bad "10 steps on 2 ranks: $(tail -3 "$work/half.err")"
run resumed --devices 2 --resume "$work/half" && ok || bad "resume on 2 ranks: $(tail -3 "$work/resumed.err")"
cmp -s "$work/resumed/weights.safetensors" "$work/two/weights.safetensors" && ok \
  || bad "20 steps != 10 + resumed 10 on 2 ranks"

# The budget is per device, after partitioning: each rank's measured peak stays under it.
timeout 300 "$gradc" train "$src/models/gpt-mini.yaml" "${small[@]}" --synthetic --steps 2 --devices 2 --budget 2.75MiB \
  --metrics-out "$work/budget.json" >"$work/budget.out" 2>"$work/budget.err" && ok \
  || bad "--devices 2 --budget 2.75MiB: $(tail -3 "$work/budget.err")"
grep -Eq "remat [a-z-]+, 1 micro-batch, predicted peak [0-9.]+ MiB of 2.8 MiB budget" "$work/budget.err" && ok || bad "no budget in the plan line: $(head -2 "$work/budget.err")"
python3 - "$work/budget.json" <<'PY' && ok || bad "a rank went over its budget or off its plan"
import json, sys
for r in json.load(open(sys.argv[1]))["ranks"]:
    assert r["peak_bytes_measured"] == r["peak_bytes_planned"] <= 2.75 * 1024 * 1024, r
PY

# Ctrl-C (SIGINT to the launcher) stops every rank.
"$gradc" train "$src/models/gpt-mini.yaml" "${small[@]}" --synthetic --steps 100000 --devices 2 \
  >"$work/int.out" 2>"$work/int.err" &
launcher=$!
await_ranks "$work/int.err" 'step 1/' "$launcher"
kill -INT "$launcher"
wait "$launcher"
code=$?
[ "$code" -eq 130 ] && ok || bad "Ctrl-C: exit code $code, expected 130"
sleep 0.5
left=""
for p in $workers; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
[ -z "$left" ] && ok || bad "ranks left after Ctrl-C:$left"

# torchrun-style: two processes started by hand with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 300 "$gradc" train \
    "$src/models/gpt-mini.yaml" "${small[@]}" --synthetic --steps 3 --metrics-out "$work/env$r.json" \
    >"$work/env$r.out" 2>"$work/env$r.err" &
  pids[$r]=$!
done
wait "${pids[0]}" && wait "${pids[1]}" && ok || bad "torchrun-style ranks: $(tail -3 "$work/env0.err" "$work/env1.err")"
[ -f "$work/env0.json" ] && [ ! -f "$work/env1.json" ] && ok || bad "metrics must come from rank 0 only"

# Ranks started by hand with different flags or data (or one on the reference step): refused
# before step 1, naming the flag.
head -c 20000 "$src/data/corpus.txt" >"$work/corpus-a.txt"
tail -c 20000 "$src/data/corpus.txt" >"$work/corpus-b.txt"
for case in "lr:--lr 0.5 --data $work/corpus-a.txt:--data $work/corpus-a.txt" \
  "data:--data $work/corpus-b.txt:--data $work/corpus-a.txt" \
  "reference_step:--no-generated-kernels --data $work/corpus-a.txt:--data $work/corpus-a.txt"; do
  name=${case%%:*}
  rest=${case#*:}
  one=${rest%%:*}
  zero=${rest#*:}
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  for r in 0 1; do
    args=$zero
    [ $r -eq 1 ] && args=$one
    # shellcheck disable=SC2086
    RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=$port timeout 120 "$gradc" train \
      "$src/models/gpt-mini.yaml" "${small[@]}" --steps 3 $args >"$work/diff$r.out" 2>"$work/diff$r.err" &
    pids[$r]=$!
  done
  wait "${pids[0]}"
  c0=$?
  wait "${pids[1]}"
  c1=$?
  [ $c0 -ne 0 ] && [ $c1 -ne 0 ] && grep -q "rank 1 was started with other settings than rank 0: '$name'" \
    "$work/diff0.err" "$work/diff1.err" && ! grep -q "^step 1/" "$work/diff0.err" && ok \
    || bad "ranks with different $name: exits $c0 $c1, $(tail -n 2 "$work/diff0.err" "$work/diff1.err")"
done

# A rank killed mid-run: every process ends, well inside the timeout, naming the rank.
"$gradc" train "$src/models/gpt-mini.yaml" "${small[@]}" --synthetic --steps 100000 --devices 2 \
  --timeout 120 >"$work/kill.out" 2>"$work/kill.err" &
launcher=$!
await_ranks "$work/kill.err" 'step 3/' "$launcher"
if [ -n "$victim" ]; then
  start=$(date +%s)
  kill -KILL "$victim"
  wait "$launcher"
  code=$?
  elapsed=$(($(date +%s) - start))
  [ "$code" -eq 2 ] && ok || bad "a killed rank must fail the run with exit 2, got $code"
  [ "$elapsed" -lt 30 ] && ok || bad "the run took ${elapsed}s to end after a rank was killed"
  grep -q "rank 1 (pid $victim) was killed by signal SIGKILL" "$work/kill.err" && ok || bad "no line naming rank 1"
  grep -Eq 'rank 0: .*(all_reduce|all_gather).* at step [0-9]+ failed' "$work/kill.err" && ok \
    || bad "rank 0 did not name the collective and step: $(tail -5 "$work/kill.err")"
  left=""
  for p in $launcher $workers; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
  [ -z "$left" ] && ok || bad "processes left behind:$left"
else
  bad "could not find rank 1 among the launcher's children ($workers): $(tail -3 "$work/kill.err")"
  kill -KILL "$launcher" $workers 2>/dev/null
fi

# A rank that stops answering (SIGSTOP): rank 0 gives up after --timeout, naming the collective
# and the step, and the launcher then removes the stopped rank.
"$gradc" train "$src/models/gpt-mini.yaml" "${small[@]}" --synthetic --steps 100000 --devices 2 \
  --timeout 3 >"$work/stop.out" 2>"$work/stop.err" &
launcher=$!
await_ranks "$work/stop.err" 'step 1/' "$launcher"
if [ -n "$victim" ]; then
  start=$(date +%s)
  kill -STOP "$victim"
  wait "$launcher"
  code=$?
  elapsed=$(($(date +%s) - start))
  [ "$code" -ne 0 ] && [ "$elapsed" -lt 30 ] && ok || bad "stopped rank: exit $code after ${elapsed}s"
  grep -Eq 'rank 0: .* at step [0-9]+ failed after 3 s: no answer within the 3 s timeout' "$work/stop.err" && ok \
    || bad "no timeout message: $(tail -5 "$work/stop.err")"
  left=""
  for p in $launcher $workers; do kill -0 "$p" 2>/dev/null && left="$left $p"; done
  [ -z "$left" ] && ok || bad "processes left behind after a stopped rank:$left"
else
  bad "could not find rank 1 among the launcher's children ($workers)"
  kill -KILL "$launcher" $workers 2>/dev/null
fi

# An f64 model under the gather placement: the other ranks' stand-in loss has the loss's dtype.
sed 's/f32/f64/g; s/^model: \(.*\)$/model: \1\ndtype: f64/' "$src/models/mlp.yaml" >"$work/mlp64.yaml"
timeout 300 "$gradc" train "$work/mlp64.yaml" --synthetic --steps 3 --devices 2 --loss-placement gather \
  --metrics-out "$work/mlp64_gather.json" >"$work/out" 2>"$work/err" && ok || bad "f64 gather: $(tail -3 "$work/err")"
timeout 300 "$gradc" train "$work/mlp64.yaml" --synthetic --steps 3 --metrics-out "$work/mlp64_one.json" \
  >"$work/out" 2>"$work/err" && ok || bad "f64 one device: $(tail -3 "$work/err")"
compare "$work/mlp64_one.json" "$work/mlp64_gather.json" --rtol 1e-12 && ok || bad "f64 gather vs one device"

# Plans of lm-seed over 4 ranks: balanced under local, the logits' excess on rank 0 under gather.
for placement in local gather; do
  "$gradc" compile "$src/models/lm-seed.yaml" --devices 4 --loss-placement $placement --emit plan \
    -o "$work/seed-$placement.json" 2>"$work/err" && "$gradc" inspect "$work/seed-$placement.json" >"$work/seed-$placement.txt" \
    && ok || bad "lm-seed plan ($placement): $(cat "$work/err")"
done
grep -q 'balance     max / min peak over 4 ranks: 1.000' "$work/seed-local.txt" && ok || bad "local placement is not balanced"
grep -Eq 'balance     max / min peak over 4 ranks: 1\.6[0-9]+' "$work/seed-gather.txt" && ok || bad "gather balance"
grep -q 'rank 0      peak 5.2 GiB.*1.2 GiB activation f32\[32, 250, 40000\], 1.2 GiB grad f32\[32, 250, 40000\]' \
  "$work/seed-gather.txt" && ok || bad "rank 0 under gather: $(grep 'rank 0' "$work/seed-gather.txt")"

# User errors, reported once by the launcher before any worker starts.
"$gradc" train "$src/models/gpt-mini.yaml" "${small[@]}" --synthetic --steps 1 --devices 3 >"$work/out" 2>"$work/err"
[ $? -eq 2 ] && grep -q 'batch of 8 examples does not split evenly over 3 devices; use a batch of 6 or 9' "$work/err" \
  && [ "$(grep -c 'error' "$work/err")" -eq 1 ] && ok || bad "uneven batch: $(cat "$work/err")"
"$gradc" train "$src/models/gpt-mini.yaml" "${small[@]}" --synthetic --steps 1 --devices 2 --loss-placement gather \
  --micro-batches 2 >"$work/out" 2>"$work/err"
[ $? -eq 2 ] && grep -q 'does not combine with micro-batching' "$work/err" && ok || bad "gather + micro-batches: $(cat "$work/err")"

sed 's/^dtype: f32/dtype: bf16/' "$src/models/gpt-mini.yaml" >"$work/gpt-bf16.yaml"
"$gradc" train "$work/gpt-bf16.yaml" "${small[@]}" --synthetic --steps 1 --devices 2 >"$work/out" 2>"$work/err"
[ $? -eq 2 ] && grep -q 'Gloo, which cannot sum bf16 tensors' "$work/err" && ok || bad "bf16 over Gloo: $(cat "$work/err")"
# Under gather the other ranks compile their own step; a budget only rank 0 fits is refused
# before any worker starts, naming the rank (replicated: ZeRO stage 3 would fit both).
"$gradc" train "$src/models/gpt-mini.yaml" --synthetic --steps 1 --devices 2 --loss-placement gather \
  --remat selective --budget 94700000 --shard 0 >"$work/out" 2>"$work/err"
[ $? -eq 2 ] && grep -q 'rank 1 (loss placement gather): no plan fits' "$work/err" && ! grep -q 'exited with code' "$work/err" \
  && ok || bad "rank 1's budget under gather: $(cat "$work/err")"

# --trace-out: one Chrome trace-event file for both ranks, valid against the format: metadata
# naming each rank and track, complete events with durations inside their step, the gradient
# all-reduce on the communication track, live bytes as a counter.
timeout 300 "$gradc" train "$src/models/gpt-mini.yaml" --set batch=4 --set seq=32 --set d_model=64 --set layers=2 \
  --devices 2 --synthetic --steps 2 --trace-out "$work/trace.json" -q 2>"$work/err" && ok || bad "--trace-out run: $(tail -2 "$work/err")"
if python3 - "$work/trace.json" <<'PY'; then ok; else bad "trace file does not follow the trace-event format"; fi
import json, sys
doc = json.load(open(sys.argv[1]))
assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list), "not the JSON object format"
events = doc["traceEvents"]
for e in events:
    assert e["ph"] in ("X", "C", "M", "i"), e
    assert isinstance(e["name"], str) and isinstance(e["pid"], int), e
    if e["ph"] == "X":
        assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0 and isinstance(e["tid"], int), e
        assert isinstance(e["cat"], str) and isinstance(e["args"], dict), e
    if e["ph"] == "C":
        assert all(isinstance(v, (int, float)) for v in e["args"].values()), e
    if e["ph"] == "M":
        assert isinstance(e["args"]["name" if e["name"] != "process_sort_index" else "sort_index"], (str, int)), e
assert {e["pid"] for e in events} == {0, 1}
for pid in (0, 1):
    mine = [e for e in events if e["pid"] == pid]
    names = {e["args"]["name"] for e in mine if e["name"] == "process_name"}
    assert names == {"rank %d" % pid}, names
    steps = {e["name"]: e for e in mine if e["ph"] == "X" and e["cat"] == "step"}
    assert set(steps) == {"step 1", "step 2"}, steps.keys()
    nodes = [e for e in mine if e["ph"] == "X" and e["cat"] != "step"]
    assert any(e["name"] == "all_reduce_start" and e["tid"] == 1 for e in nodes)
    assert any(e["name"] == "linear" and e["tid"] == 0 and e["args"]["spec"].startswith("blocks.") for e in nodes)
    for e in nodes:
        s = steps["step %d" % e["args"]["step"]]
        assert s["ts"] - 1 <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"] + 1, (e, s)
    assert sum(e["ph"] == "C" and e["name"] == "live bytes" for e in mine) == len(nodes)
PY

# A worker whose MASTER_ADDR:MASTER_PORT answers with garbage (another program's port): one
# clear line naming the rank and the rendezvous, exit 2, never an abort or a backtrace.
gport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 - "$gport" <<'PY' &
import os, socket, sys, threading, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(8)
s.settimeout(40)
def serve(c):
    try:
        c.settimeout(5)
        try:
            c.recv(65536)
        except OSError:
            pass
        c.sendall(b"\xff" * 64 + os.urandom(4096))
        time.sleep(3)
    finally:
        c.close()
try:
    while True:
        c, _ = s.accept()
        threading.Thread(target=serve, args=(c,), daemon=True).start()
except OSError:
    pass
PY
garbage=$!
sleep 0.5
"$gradc" compile "$src/models/mlp.yaml" --devices 2 -o "$work/g2" 2>/dev/null
RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$gport timeout 60 "$gradc" train "$work/g2" \
  --synthetic --steps 1 --timeout 5 >/dev/null 2>"$work/err"
rc=$?
kill "$garbage" 2>/dev/null
[ $rc -eq 2 ] && [ "$(wc -l <"$work/err")" -eq 1 ] && grep -q "^gradc: error: rank 1: rendezvous of 2 ranks at" "$work/err" \
  && grep -q "not gradc's rendezvous protocol" "$work/err" && ok || bad "garbage from the rendezvous peer: exit $rc, $(head -3 "$work/err")"

# A rendezvous peer that accepts and resets every connection (c10d's store client fails on its
# own thread there): one line naming the rank and the store, exit 2, never "internal".
rport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
python3 - "$rport" <<'PY' &
import socket, struct, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(8)
s.settimeout(40)
try:
    while True:
        c, _ = s.accept()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
        c.close()
except OSError:
    pass
PY
resetter=$!
sleep 0.5
for attempt in 1 2 3; do
  RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$rport timeout 60 "$gradc" train "$work/g2" \
    --synthetic --steps 1 --timeout 5 >/dev/null 2>"$work/err"
  rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l <"$work/err")" -eq 1 ] && grep -q "rank 1: .*rendezvous.* at 127.0.0.1:$rport" "$work/err" \
    && ! grep -q "internal" "$work/err" && ok || bad "a resetting rendezvous peer (try $attempt): exit $rc, $(head -3 "$work/err")"
done
kill "$resetter" 2>/dev/null

# A rank whose rendezvous store never answers: gradc's one line names the rank and the store;
# c10d's own log lines (and glog's banner) appear only with --verbose.
qport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$qport timeout 60 "$gradc" train "$work/g2" \
  --synthetic --steps 1 --timeout 2 >/dev/null 2>"$work/err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$work/err")" -eq 1 ] && grep -q "^gradc: error: rank 1: connecting to the rendezvous store" "$work/err" \
  && ok || bad "unanswered rendezvous without --verbose: exit $rc, $(head -3 "$work/err")"
RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$qport timeout 60 "$gradc" train "$work/g2" \
  --synthetic --steps 1 --timeout 2 --verbose >/dev/null 2>"$work/err"
rc=$?
[ $rc -eq 2 ] && grep -q "\[c10d\]" "$work/err" && grep -q "^gradc: error: rank 1: connecting to the rendezvous store" "$work/err" \
  && ok || bad "unanswered rendezvous with --verbose: exit $rc, $(head -3 "$work/err")"

echo "parallel_cli_test: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
