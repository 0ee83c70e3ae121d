#!/usr/bin/env bash
# --set batch=auto --budget B: the largest batch whose step fits, chosen before the first step.
# The summary, the artifact's manifest and the training log report it; that batch compiles under
# the budget and the next one is refused with exactly the smallest feasible budget reported; the
# chosen batch trains with measured == planned; --batch-multiple, --micro-batches and --devices
# shape the search; misuse is exit 2 with the reason.
# usage: batch_auto_cli_test.sh PATH/TO/gradc SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"
py=/usr/bin/python3
spec=$src/models/gpt-mini.yaml
small=(--set layers=2 --set d_model=64 --set heads=2 --set seq=32)
budget=24MiB
compile() { timeout 300 "$gradc" compile "$spec" "${small[@]}" "$@"; }
json() { $py -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {"d": d}))' "$@"; }

# The artifact: its manifest records the search, and its spec dims the chosen batch.
compile --set batch=auto --budget $budget -o "$work/a" >"$work/log" 2>&1 && ok || bad "compile -o: $(tail -2 "$work/log")"
grep -q "^batch: batch=[0-9]*, the largest whose step fits the budget of 24.0 MiB" "$work/log" && ok ||
  bad "compile -o does not say the batch: $(head -2 "$work/log")"
b=$(json "$work/a/manifest.json" 'd["flags"]["batch_search"]["per_rank"]')
next=$(json "$work/a/manifest.json" 'd["flags"]["batch_search"]["next"]["per_rank"]')
least=$(json "$work/a/manifest.json" 'd["flags"]["batch_search"]["next"]["smallest_feasible_bytes"]')
[ "$(json "$work/a/manifest.json" 'd["dims"]["batch"]')" = "$b" ] && [ "$next" = $((b + 1)) ] && [ "$b" -gt 1 ] && ok ||
  bad "manifest: batch $b, next $next, dims $(json "$work/a/manifest.json" 'd["dims"]')"

# That batch fits the budget; the next is refused with the smallest feasible budget reported.
compile --set batch="$b" --budget $budget --emit plan -o "$work/plan.json" 2>"$work/err" &&
  [ "$(json "$work/plan.json" 'd["peak_bytes"] <= 24 * 2**20')" = True ] && ok || bad "batch $b does not fit: $(cat "$work/err")"
expect_exit2 "the next batch" "smallest feasible budget is [0-9.]+ [KMG]iB \($($py -c "print(f'{$least:,}')") bytes\)" \
  compile --set batch="$next" --budget $budget --emit plan -o "$work/next.json"
# ... and that budget fits it.
compile --set batch="$next" --budget "$least" --emit plan -o "$work/next.json" 2>"$work/err" && ok ||
  bad "the next batch's smallest feasible budget is refused: $(cat "$work/err")"

# The summary says it first, and describes the step at that batch.
compile --set batch=auto --budget $budget --emit summary >"$work/summary" 2>&1 && head -1 "$work/summary" |
  grep -q "^batch: batch=$b, " && grep -q "tokens i64\[$b, 32\]" "$work/summary" && ok ||
  bad "summary: $(head -3 "$work/summary")"

# Training at the chosen batch: the log says it, and the arena's peak is the plan's.
timeout 300 "$gradc" train "$spec" "${small[@]}" --set batch=auto --budget $budget --synthetic --steps 1 \
  --metrics-out "$work/m.json" >"$work/log" 2>&1 && ok || bad "train: $(tail -2 "$work/log")"
grep -q "^batch: batch=$b, " "$work/log" && ok || bad "the training log does not say the batch: $(head -3 "$work/log")"
[ "$(json "$work/m.json" 'd["ranks"][0]["peak_bytes_measured"] == d["ranks"][0]["peak_bytes_planned"] <= 24 * 2**20')" = True ] &&
  ok || bad "measured != planned: $(json "$work/m.json" 'd["ranks"]')"

# --batch-multiple 4 and --micro-batches 3: multiples of 12, the next one 12 more.
compile --set batch=auto --budget $budget --batch-multiple 4 --micro-batches 3 --emit plan -o "$work/p.json" \
  2>"$work/err" && ok || bad "multiple: $(cat "$work/err")"
grep -Eq "^batch: batch=([0-9]+), the largest multiple of 12 .*; batch [0-9]+ needs" "$work/err" &&
  m=$(sed -E 's/^batch: batch=([0-9]+),.*/\1/' "$work/err") && n=$(sed -E 's/.*; batch ([0-9]+) needs.*/\1/' "$work/err") &&
  [ $((m % 12)) -eq 0 ] && [ "$n" = $((m + 12)) ] && ok || bad "multiple of 12: $(cat "$work/err")"
# --devices 2: per rank, with the global batch.
compile --set batch=auto --budget $budget --devices 2 --emit plan -o "$work/p.json" 2>"$work/err" &&
  grep -Eq "^batch: batch=([0-9]+) \(([0-9]+) per rank on 2 ranks\)" "$work/err" &&
  g=$(sed -E 's/^batch: batch=([0-9]+) .*/\1/' "$work/err") && r=$(sed -E 's/^[^(]*\(([0-9]+) per rank.*/\1/' "$work/err") &&
  [ "$g" = $((2 * r)) ] && ok || bad "devices: $(cat "$work/err")"
# Batch norm cannot be split into micro-batches: --micro-batches auto leaves the multiple alone.
timeout 300 "$gradc" compile "$src/models/resnet18-cifar.yaml" --set image=8 --set width=8 --set batch=auto \
  --budget 8MiB --micro-batches auto --emit plan -o "$work/p.json" 2>"$work/err" &&
  grep -Eq "^batch: batch=[0-9]+, the largest whose step fits .*, 1 micro-batch[,)]" "$work/err" && ok ||
  bad "batch norm with auto micro-batches: $(cat "$work/err")"

# --objective throughput: a cost table fitted from a profiled run, then the batch with the most
# predicted samples per second, reported with the largest and the batches compared.
timeout 300 "$gradc" train "$spec" "${small[@]}" --set batch=4 --synthetic --steps 3 --profile \
  --cost-table-out "$work/costs.json" >"$work/log" 2>&1 &&
  [ "$(json "$work/costs.json" 'd["format"] == "gradc-cost-table" and d["ops"]["matmul"]["per_call_s"] >= 0')" = True ] &&
  ok || bad "--cost-table-out: $(tail -2 "$work/log")"
compile --set batch=auto --budget $budget --objective throughput --cost-table "$work/costs.json" -o "$work/t" \
  >"$work/log" 2>&1 && ok || bad "throughput: $(tail -2 "$work/log")"
grep -Eq "^batch: batch=[0-9]+, the batch with the most predicted samples per second under the budget of 24.0 MiB \([0-9.]+/s" \
  "$work/log" && ok || bad "throughput line: $(head -2 "$work/log")"
# The choice has the most predicted samples per second of every fitting batch planned.
[ "$(json "$work/t/manifest.json" '(lambda s: max((p["batch"] / p["predicted_step_seconds"], p["batch"]) for p in s["probes"] + s["compared"] if p["fits"])[1] == s["per_rank"] and s["per_rank"] <= s["largest_per_rank"])(d["flags"]["batch_search"])')" = True ] &&
  ok || bad "throughput manifest: $(json "$work/t/manifest.json" 'd["flags"]["batch_search"]')"
# Without a table the probe of this machine predicts.
compile --set batch=auto --budget $budget --objective throughput --emit plan -o "$work/p.json" 2>"$work/err" &&
  grep -q "most predicted samples per second" "$work/err" && ok || bad "throughput with the probe: $(cat "$work/err")"
echo '{"format": "other"}' >"$work/bad.json"
expect_exit2 "a foreign cost table" "not a gradc cost table" \
  compile --set batch=4 --objective throughput --cost-table "$work/bad.json" --emit plan -o "$work/x.json"
expect_exit2 "a cost table without throughput" "--cost-table predicts step times for --objective throughput" \
  compile --set batch=4 --cost-table "$work/costs.json" --emit plan -o "$work/x.json"
expect_exit2 "--cost-table-out of one step" "the first step of a run is not timed" \
  timeout 300 "$gradc" train "$spec" "${small[@]}" --set batch=4 --synthetic --steps 1 --profile --cost-table-out "$work/c2.json"
expect_exit2 "--cost-table-out without --profile" "give --profile too" \
  timeout 300 "$gradc" train "$spec" "${small[@]}" --set batch=4 --synthetic --steps 1 --cost-table-out "$work/c2.json"
# Refused before the first step (a run of 100,000 steps would outlast the timeout), not after the last.
expect_exit2 "--cost-table-out into a missing folder" "--cost-table-out" \
  timeout 20 "$gradc" train "$spec" "${small[@]}" --set batch=4 --synthetic --steps 100000 --profile --cost-table-out "$work/no/such/c.json"
expect_exit2 "--cost-table-out onto a folder" "--cost-table-out" \
  timeout 20 "$gradc" train "$spec" "${small[@]}" --set batch=4 --synthetic --steps 100000 --profile --cost-table-out "$work"

# Misuse.
expect_exit2 "no budget" "batch=auto needs --budget" compile --set batch=auto --emit plan -o "$work/x.json"
expect_exit2 "no such dim" "the spec has no dim 'batchh' \(its dims are 'batch', " \
  compile --set batchh=auto --budget $budget --emit plan -o "$work/x.json"
expect_exit2 "a dim that does not size the inputs" "dim 'seq' does not size the batched inputs" \
  compile --set seq=auto --budget $budget --emit plan -o "$work/x.json"
expect_exit2 "multiple alone" "--batch-multiple applies to a searched batch" \
  compile --batch-multiple 4 --budget $budget --emit plan -o "$work/x.json"
expect_exit2 "nothing fits" "no batch fits the budget of 1.0 MiB .*the smallest, batch=1, needs" \
  compile --set batch=auto --budget 1MiB --emit plan -o "$work/x.json"
expect_exit2 "auto elsewhere" "only gradc compile and gradc train choose" \
  "$gradc" sample "$spec" --set batch=auto --weights "$work/none"
# An explicit value after auto wins.
compile --set batch=auto --set batch=3 --budget $budget --emit plan -o "$work/p.json" 2>"$work/err" &&
  ! grep -q "^batch:" "$work/err" && ok || bad "batch=3 after auto: $(cat "$work/err")"

echo "batch auto: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
