#!/usr/bin/env bash
# End-to-end checks of memory plans from the command line: gradc compile --emit plan (valid,
# byte-stable JSON), gradc inspect (text report, --html page, bad input exits 2), and the
# planned peak in gradc train's metrics.
# usage: plan_cli_test.sh PATH/TO/gradc SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"
py=/usr/bin/python3

# A plan for every bundled model (reduced sizes where the model is large).
for spec in "$src"/models/*.yaml; do
  name=$(basename "$spec" .yaml)
  sets=()
  [ "$name" = lstm-lm ] && sets=(--set seq=32)
  [ "$name" = lm-seed ] && sets=(--set layers=1 --set seq=64)
  if timeout 120 "$gradc" compile "$spec" "${sets[@]}" --emit plan -o "$work/$name.json" 2>"$work/err"; then ok
  else bad "compile --emit plan $name: $(tail -3 "$work/err")"; fi
done

# The gpt-mini plan: the documented fields, consistent numbers, byte-stable output.
plan=$work/gpt.json
timeout 120 "$gradc" compile "$src/models/gpt-mini.yaml" --emit plan -o "$plan" || bad "compile gpt-mini plan"
if $py - "$plan" <<'PY'; then ok; else bad "plan JSON schema"; fi
import json, sys
p = json.load(open(sys.argv[1]))
assert p["format"] == "gradc-memory-plan" and p["version"] == 2, "format"
for key in ["model", "strategy", "budget_bytes", "peak_bytes", "peak_step", "arena_bytes", "fragmentation",
            "persistent_bytes", "forward_flops", "backward_flops", "optimizer_flops", "recompute_flops",
            "ranks", "buffers", "steps", "timeline"]:
    assert key in p, key
assert p["model"] == "gpt-mini" and p["strategy"] == "none" and p["budget_bytes"] is None
assert p["peak_bytes"] == max(p["timeline"]) and p["arena_bytes"] >= p["peak_bytes"]
assert len(p["steps"]) == len(p["timeline"])
assert p["ranks"] == [{"rank": 0, "peak_bytes": p["peak_bytes"], "arena_bytes": p["arena_bytes"]}]
kinds = {"param", "opt_state", "input", "activation", "grad", "optimizer", "recompute", "workspace", "comm"}
live = [0] * len(p["timeline"])
for b in p["buffers"]:
    assert set(b) == {"name", "spec_name", "kind", "space", "residency", "type", "size", "offset", "first_step",
                      "last_step", "producer"}, b
    assert b["kind"] in kinds, b
    assert b["space"] == "device", b
    assert b["residency"] == ("persistent" if b["kind"] in ("param", "opt_state", "input") else "step"), b
    assert 0 <= b["first_step"] <= b["last_step"] < len(p["timeline"]), b
    assert 0 <= b["offset"] and b["offset"] + b["size"] <= p["arena_bytes"], b
    for s in range(b["first_step"], b["last_step"] + 1):
        live[s] += b["size"]
assert live == p["timeline"], "buffers do not add up to the timeline"
assert any(b["name"] == "%wte.weight" and b["kind"] == "param" and b["producer"] is None for b in p["buffers"])
assert any(b["kind"] == "opt_state" for b in p["buffers"]) and any(b["kind"] == "workspace" for b in p["buffers"])
PY
timeout 120 "$gradc" compile "$src/models/gpt-mini.yaml" --emit plan >"$work/again.json" || bad "compile to stdout"
cmp -s "$plan" "$work/again.json" && ok || bad "plan dumps differ between runs (or between -o and stdout)"

# --emit ir and summary still describe the forward graph.
timeout 60 "$gradc" compile "$src/models/gpt-mini.yaml" --emit ir >"$work/ir" && grep -q ' fwd ' "$work/ir" &&
  ! grep -q ' bwd ' "$work/ir" && ok || bad "--emit ir is not the forward graph"
timeout 60 "$gradc" compile "$src/models/gpt-mini.yaml" >"$work/summary" && grep -q '^model ' "$work/summary" && ok ||
  bad "--emit summary"

# A plan nested 100,000 levels deep (a damaged file) is refused with a message, not a crash.
$py -c "open('$work/deep.json', 'w').write('{\"format\": \"gradc-memory-plan\", \"x\": ' + '[' * 100000 + ']' * 100000 + '}')"
timeout 60 "$gradc" inspect "$work/deep.json" >/dev/null 2>"$work/err"
rc=$?
[ $rc -eq 2 ] && grep -q "nested more than 64 levels" "$work/err" && ok || bad "deep plan: exit $rc, $(tail -2 "$work/err")"

# inspect: the text report.
if timeout 60 "$gradc" inspect "$plan" >"$work/report" 2>"$work/err"; then ok; else bad "inspect: $(tail -3 "$work/err")"; fi
for pattern in '^memory plan of gpt-mini' '^  peak ' '^  arena .*fragmentation' 'largest buffers alive at the peak' \
    '^by kind at the peak' '^  activation ' 'live bytes over the schedule' '█' 'step 0 .* step [0-9]+$'; do
  grep -Eq "$pattern" "$work/report" && ok || bad "inspect report lacks /$pattern/"
done
[ "$(grep -c '|' "$work/report")" -ge 12 ] && ok || bad "inspect chart has fewer than 12 rows"
timeout 60 "$gradc" inspect "$plan" --top 3 | grep -q 'and [0-9]* more buffers' && ok || bad "inspect --top"

# The reader does not depend on the formatting: the same plan re-serialised reads the same.
$py -c 'import json,sys; json.dump(json.load(open(sys.argv[1])), open(sys.argv[2], "w"), indent=1, sort_keys=True)' \
  "$plan" "$work/resorted.json"
timeout 60 "$gradc" inspect "$work/resorted.json" >"$work/report2" && cmp -s "$work/report" "$work/report2" && ok ||
  bad "inspect of a re-serialised plan differs"

# inspect --html: one self-contained page that parses, with a band per buffer.
if timeout 60 "$gradc" inspect "$plan" --html "$work/plan.html" >/dev/null 2>"$work/err"; then ok
else bad "inspect --html: $(tail -3 "$work/err")"; fi
if $py - "$work/plan.html" <<'PY'; then ok; else bad "HTML page"; fi
import html.parser, re, sys
text = open(sys.argv[1], encoding="utf-8").read()
class Check(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.stack = {}, []
    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        for k, v in attrs:
            assert not (k in ("src", "href") and v and "//" in v), ("external resource", tag, k, v)
        if tag not in ("meta", "br", "img", "input", "link"):
            self.stack.append(tag)
    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, ("unbalanced", tag, self.stack[-3:])
        self.stack.pop()
c = Check()
c.feed(text)
c.close()
assert not c.stack, c.stack
assert c.tags.get("svg") == 1 and c.tags.get("script") == 1 and c.tags.get("canvas") == 1, c.tags
assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text
assert re.search(r"const plan = \{", text)
PY
# With a browser at hand, render both layouts: stacked columns on a canvas, and one band per
# buffer at its arena offset.
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -n "$browser" ]; then
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --dump-dom "file://$work/plan.html" >"$work/dom" 2>/dev/null
  grep -q 'data-layout="stacked"' "$work/dom" && grep -Eq 'data-columns="[1-9][0-9]*"' "$work/dom" && ok ||
    bad "the page did not draw the stacked layout"
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --dump-dom "file://$work/plan.html#arena" >"$work/dom" \
    2>/dev/null
  bands=$(grep -Eo 'class="buf" data-i="[0-9]+"' "$work/dom" | wc -l)
  buffers=$($py -c 'import json,sys; print(sum(1 for b in json.load(open(sys.argv[1]))["buffers"] if b["size"] > 0))' "$plan")
  [ "$bands" -eq "$buffers" ] && ok || bad "rendered page has $bands bands for $buffers buffers"
fi

# Bad input: exit 2 and a message that says what is wrong.
expect_error() {
  local name=$1 pattern=$2
  shift 2
  timeout 60 "$gradc" "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  if [ $rc -eq 2 ] && grep -Eq "$pattern" "$work/err"; then ok; else bad "$name: exit $rc, $(head -3 "$work/err")"; fi
}
expect_error "missing plan" "cannot read" inspect "$work/none.json"
printf '{"format": ' >"$work/broken.json"
expect_error "invalid JSON" "not valid JSON" inspect "$work/broken.json"
printf '[1, 2, 3]\n' >"$work/array.json"
expect_error "not an object" "not a memory plan" inspect "$work/array.json"
cp "$src/models/gpt-mini.yaml" "$work/spec.json"
expect_error "a spec, not a plan" "not valid JSON" inspect "$work/spec.json"
echo '{"model": "x"}' >"$work/noformat.json"
expect_error "no format" "missing field 'format'" inspect "$work/noformat.json"
mutate() {  # mutate OUT PYTHON-STATEMENT: a copy of the plan with one change
  $py -c "import json,sys; p=json.load(open(sys.argv[1])); $2; json.dump(p, open(sys.argv[2], 'w'))" "$plan" "$1"
}
mutate "$work/m1.json" 'p["buffers"][3]["size"] = "big"'
expect_error "wrong field type" 'buffers\[3\]\.size: expected an integer' inspect "$work/m1.json"
mutate "$work/m2.json" 'del p["timeline"]'
expect_error "missing timeline" "missing field 'timeline'" inspect "$work/m2.json"
mutate "$work/m3.json" 'p["version"] = 99'
expect_error "future version" "format version 99, but this gradc reads version 2" inspect "$work/m3.json"
mutate "$work/m4.json" 'p["buffers"][0]["last_step"] = 10**6'
expect_error "step out of range" 'buffers\[0\]: steps' inspect "$work/m4.json"
mutate "$work/m5.json" 'p["steps"].pop()'
expect_error "steps and timeline disagree" 'plan\.steps' inspect "$work/m5.json"
expect_error "unknown emit" "emit" compile "$src/models/gpt-mini.yaml" --emit plans

# gradc train reports the planned peak beside the measured one. (At toy sizes the op table's
# upper bound for cross_entropy_backward's workspace alone exceeds 5% of the step.)
reduced=(--set batch=8 --set seq=64 --set d_model=128 --set heads=4 --set layers=2)
if timeout 300 "$gradc" train "$src/models/gpt-mini.yaml" "${reduced[@]}" --synthetic --steps 2 -q \
    --metrics-out "$work/metrics.json" 2>"$work/err"; then ok
else bad "gradc train: $(tail -3 "$work/err")"; fi
if $py - "$work/metrics.json" <<'PY'; then ok; else bad "metrics lack a planned peak within 5% of the measured one"; fi
import json, sys
r = json.load(open(sys.argv[1]))["ranks"][0]
planned, measured = r["peak_bytes_planned"], r["peak_bytes_measured"]
assert isinstance(planned, int) and planned > 0, r
assert abs(planned - measured) / measured <= 0.05, r
PY

# The fused LM-head loss: forced chunks show in the plan, inspect, the summary and the training
# log; the plan's peak drops below the unfused one and is what train measures; bad values and a
# placement with nothing to fuse are exit 2 naming the flag.
wide=(--set batch=4 --set seq=32 --set vocab=4096 --set d_model=16 --set heads=2 --set layers=2)
timeout 120 "$gradc" compile "$src/models/gpt-mini.yaml" "${wide[@]}" --loss-chunks off --emit plan -o "$work/off.json" \
  && timeout 120 "$gradc" compile "$src/models/gpt-mini.yaml" "${wide[@]}" --loss-chunks 4 --emit plan -o "$work/lc4.json" \
  && ok || bad "compile --loss-chunks"
if $py - "$work/off.json" "$work/lc4.json" <<'PY'; then ok; else bad "fused-loss plan fields"; fi
import json, sys
off, fused = (json.load(open(f)) for f in sys.argv[1:3])
assert off["loss_chunks"] == 0 and fused["loss_chunks"] == 4, (off["loss_chunks"], fused["loss_chunks"])
# No recompute: the fused step does the unfused step's matrix products, and fewer elementwise passes.
total = lambda p: p["forward_flops"] + p["backward_flops"]
assert 0.9 * total(off) <= total(fused) <= total(off), (total(fused), total(off))
assert fused["recompute_flops"] == 0
assert fused["peak_bytes"] < 0.6 * off["peak_bytes"], (fused["peak_bytes"], off["peak_bytes"])
assert any(s["op"] == "linear_cross_entropy" for s in fused["steps"])
assert not any(s["op"] == "cross_entropy" for s in fused["steps"])
PY
timeout 60 "$gradc" inspect "$work/lc4.json" >"$work/inspect.txt" 2>&1 && grep -q "fused LM head + cross_entropy in 4 chunks" \
  "$work/inspect.txt" && ok || bad "inspect shows the fused loss: $(head -8 "$work/inspect.txt")"
timeout 120 "$gradc" compile "$src/models/gpt-mini.yaml" "${wide[@]}" --emit summary >"$work/summary.txt" 2>&1 \
  && grep -Eq "^64 +2 +" "$work/summary.txt" && grep -q "fused LM-head loss" "$work/summary.txt" && ok \
  || bad "summary lists the loss chunks: $(tail -10 "$work/summary.txt")"
if timeout 300 "$gradc" train "$src/models/gpt-mini.yaml" "${wide[@]}" --synthetic --steps 2 --loss-chunks 4 \
    --metrics-out "$work/fused.json" >"$work/train.txt" 2>&1; then ok; else bad "train --loss-chunks 4: $(tail -3 "$work/train.txt")"; fi
grep -q "fused loss in 4 chunks" "$work/train.txt" && ok || bad "train log names the fused loss: $(head -3 "$work/train.txt")"
if $py - "$work/fused.json" "$work/lc4.json" <<'PY'; then ok; else bad "fused-loss measured peak == planned"; fi
import json, sys
r = json.load(open(sys.argv[1]))["ranks"][0]
plan = json.load(open(sys.argv[2]))
assert r["peak_bytes_measured"] == r["peak_bytes_planned"] == plan["peak_bytes"], (r, plan["peak_bytes"])
PY
# Under a budget only the fused loss meets (3 MiB: the unfused step cannot go below 5.6 MiB), auto fuses.
timeout 120 "$gradc" compile "$src/models/gpt-mini.yaml" "${wide[@]}" --budget 3MiB --emit plan -o "$work/auto.json" \
  2>"$work/err" && $py -c 'import json,sys; p=json.load(open(sys.argv[1])); assert p["loss_chunks"] == 4, p["loss_chunks"]' \
  "$work/auto.json" && ok || bad "auto fuses under a budget: $(tail -2 "$work/err")"
expect_error "unfused under that budget" "no plan fits" compile "$src/models/gpt-mini.yaml" "${wide[@]}" --budget 3MiB \
  --loss-chunks off --emit plan -o "$work/x.json"
expect_error "zero chunks" "loss-chunks expects a positive number" compile "$src/models/gpt-mini.yaml" \
  --loss-chunks 0 --emit plan -o "$work/x.json"
expect_error "nothing to fuse" "the loss cannot be fused: the graph has no cross_entropy loss" compile "$src/models/mlp.yaml" --loss-chunks 4 --emit plan \
  -o "$work/x.json"
expect_error "gather placement" "use --loss-placement local" compile "$src/models/gpt-mini.yaml" "${wide[@]}" \
  --devices 2 --loss-placement gather --loss-chunks 4 --emit plan -o "$work/x.json"

# --device-reserve: the plan is sized for the budget less the reserve, records it, and a refusal's
# smallest feasible budget counts it; on the CPU the reserve is unused (measured == planned).
timeout 120 "$gradc" compile "$src/models/gpt-mini.yaml" --budget 120MiB --device-reserve cuda --emit plan \
  -o "$work/reserve.json" 2>"$work/err" && $py - "$work/reserve.json" <<'PY' && ok || bad "plan with a reserve: $(tail -2 "$work/err")"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["reserve_bytes"] == 36 << 20 and p["budget_bytes"] == 120 << 20, p["reserve_bytes"]
assert p["peak_bytes"] + p["reserve_bytes"] <= p["budget_bytes"], p["peak_bytes"]
PY
refusal() { timeout 120 "$gradc" compile "$src/models/gpt-mini.yaml" --budget 40MiB "$@" --emit plan -o "$work/x.json" 2>&1; }
without=$(refusal) || true
with=$(refusal --device-reserve 5MiB) || true
if $py - "$without" "$with" <<'PY'; then ok; else bad "a refusal counts the reserve: $with"; fi
import re, sys
smallest = [int(re.search(r"smallest feasible budget is [^(]*\(([\d,]+) bytes\)", m).group(1).replace(",", "")) for m in sys.argv[1:]]
assert smallest[1] - smallest[0] == 5 << 20, smallest
assert "of it reserved for the device's libraries" in sys.argv[2]
PY
expect_error "reserve not a size" "device-reserve: invalid byte" compile "$src/models/mlp.yaml" --budget 1GiB \
  --device-reserve 5x --emit plan -o "$work/x.json"
expect_error "reserve takes the whole budget" "leaves nothing for the step" compile "$src/models/mlp.yaml" \
  --budget 30MiB --device-reserve 30MiB --emit plan -o "$work/x.json"
if timeout 300 "$gradc" train "$src/models/gpt-mini.yaml" --budget 120MiB --device-reserve cuda --synthetic --steps 2 \
    --metrics-out "$work/reserve-m.json" >"$work/train.txt" 2>&1; then ok; else bad "train with a reserve: $(tail -3 "$work/train.txt")"; fi
grep -q "+ 36.0 MiB for the device's libraries of 120.0 MiB budget" "$work/train.txt" && ok \
  || bad "train log names the reserve: $(head -2 "$work/train.txt")"
if $py - "$work/reserve-m.json" "$work/reserve.json" <<'PY'; then ok; else bad "reserve on the CPU: measured == planned"; fi
import json, sys
r = json.load(open(sys.argv[1]))["ranks"][0]
plan = json.load(open(sys.argv[2]))
assert r["peak_bytes_measured"] == r["peak_bytes_planned"] == plan["peak_bytes"], (r, plan["peak_bytes"])
assert "beyond_plan" not in r, r
PY

# --device cuda: the plan is made for CUDA's kernels (fused attention's workspace is what they
# allocate beside the arena, not the host's tile slots) and keeps the CUDA libraries' reserve.
timeout 120 "$gradc" compile "$src/models/gpt-mini.yaml" --device cuda --emit plan -o "$work/cuda.json" 2>"$work/err" \
  && timeout 120 "$gradc" compile "$src/models/gpt-mini.yaml" --emit plan -o "$work/host.json" 2>>"$work/err" \
  && timeout 120 "$gradc" compile "$src/models/gpt2.yaml" --device cuda --emit plan -o "$work/gpt2-cuda.json" 2>>"$work/err" \
  && $py - "$work/cuda.json" "$work/host.json" "$work/gpt2-cuda.json" <<'PY' && ok || bad "plans for cuda: $(tail -2 "$work/err")"
import json, sys
cuda, host, gpt2 = (json.load(open(f)) for f in sys.argv[1:])
def attention_workspaces(plan):
    return {b["producer"]: b["size"] for b in plan["buffers"] if b["kind"] == "workspace" and b.get("producer", "").startswith("attention")}
assert cuda["reserve_bytes"] == 36 << 20 and host["reserve_bytes"] == 0, (cuda["reserve_bytes"], host["reserve_bytes"])
# gpt-mini's heads [16, 4, 128, 64] in f32 take CUDA's fused kernel: its output and its padded
# log-sum-exp forward; row statistics, dq/dk/dv, a dq accumulator and copies of dout and out backward.
assert attention_workspaces(cuda) == {"attention": (1 << 21) + (1 << 15) + 1024, "attention_backward": 2 * (1 << 15) + 6 * (1 << 21)}, attention_workspaces(cuda)
assert attention_workspaces(host)["attention"] != attention_workspaces(cuda)["attention"]
# gpt2 drops out its attention probabilities: the composed blocks, a larger bound, still far below
# one layer's [B, H, S, S] probabilities.
g = attention_workspaces(gpt2)
assert g["attention_backward"] > g["attention"] > 0, g
PY
# An artifact planned for CUDA, run on the CPU, says so; the CPU's kernels fit in its plan.
if timeout 120 "$gradc" compile "$src/models/gpt-mini.yaml" --set layers=1 --device cuda -o "$work/cuda-art" 2>"$work/err" \
  && timeout 120 "$gradc" train "$work/cuda-art" --synthetic --steps 1 >"$work/out" 2>&1 \
  && grep -q "workspaces were sized for cuda's kernels, and 2 node(s) allocate differently on cpu" "$work/out" \
  && grep -Eq "peak memory ([0-9]+) bytes measured, \1 planned" "$work/out"; then ok; else bad "cuda plan on the cpu: $(tail -3 "$work/out")"; fi
expect_error "unknown device kind" "tpu not in" compile "$src/models/mlp.yaml" --device tpu --emit plan -o "$work/x.json"

echo "plan cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
