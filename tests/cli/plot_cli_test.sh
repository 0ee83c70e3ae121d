#!/usr/bin/env bash
# gradc plot: metrics files become one well-formed SVG with a curve per run (training loss,
# validation loss where recorded, learning rate), a legend naming the runs, the title escaped;
# bad inputs are exit 2 naming the file.
# usage: plot_cli_test.sh PATH/TO/gradc SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"
py=/usr/bin/python3
$py - "$work" <<'PY'
import json, math, sys
d = sys.argv[1]
steps = [{"step": s, "loss": 4 * math.exp(-s / 20) + 1, "lr": 1e-3 * min(1, s / 5)} for s in range(1, 41)]
json.dump({"model": "gpt-mini", "steps": steps, "ranks": []}, open(d + "/a.json", "w"))
for s in steps:
    s["loss"] += 0.2
    if s["step"] % 10 == 0:
        s["val_loss"] = s["loss"] + 0.1
json.dump({"model": "gpt-mini", "steps": steps, "ranks": []}, open(d + "/b.json", "w"))
json.dump({"model": "x", "ranks": []}, open(d + "/nosteps.json", "w"))
PY
if timeout 60 "$gradc" plot "$work/a.json" "$work/b.json" -o "$work/curve.svg" --title 'loss <&> lr' 2>"$work/err"; then ok
else bad "plot: $(head -3 "$work/err")"; fi
if $py - "$work/curve.svg" <<'PY'; then ok; else bad "the SVG's contents"; fi
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
assert root.tag == ns + "svg", root.tag
lines = root.findall(ns + "polyline")
kinds = [l.get("class") for l in lines]
assert kinds.count("loss") == 2 and kinds.count("val-loss") == 1 and kinds.count("lr") == 2, kinds
for l in lines:
    xs = [float(p.split(",")[0]) for p in l.get("points").split()]
    assert xs == sorted(xs), "x not increasing"
loss = [l for l in lines if l.get("class") == "loss"][0]
assert len(loss.get("points").split()) == 40
# The loss falls: y grows downwards in SVG.
ys = [float(p.split(",")[1]) for p in loss.get("points").split()]
assert ys[-1] > ys[0], ys[:3]
texts = [t.text or "" for t in root.iter(ns + "text")]
assert "loss <&> lr" in texts, texts[:3]
legend = [t.text for t in root.iter(ns + "text") if t.get("class") == "legend"]
assert legend == ["a (gpt-mini)", "b (gpt-mini), dashed: validation"], legend
PY
expect_exit2 "missing file" "cannot read metrics file" timeout 60 "$gradc" plot "$work/none.json" -o "$work/x.svg"
expect_exit2 "not metrics" "is not a gradc metrics file" timeout 60 "$gradc" plot "$work/nosteps.json" -o "$work/x.svg"
expect_exit2 "output folder missing" "-o" timeout 60 "$gradc" plot "$work/a.json" -o "$work/no/such/x.svg"
[ ! -e "$work/x.svg" ] && ok || bad "a failed plot left a file"

# Any finite value plots with finite coordinates and a bounded number of ticks; values that are
# not finite are left out and counted; -o never names an input.
$py - "$work" <<'PY'
import json, sys
d = sys.argv[1]
def write(name, steps):
    json.dump({"model": "m", "steps": steps, "ranks": []}, open(f"{d}/{name}.json", "w"))
write("far_step", [{"step": 1e17, "loss": 2.0}])
write("huge", [{"step": 1, "loss": 1e308}, {"step": 2, "loss": -1e308}, {"step": 3, "loss": 1}])
write("close", [{"step": 1, "loss": 1e16}, {"step": 2, "loss": 1e16 + 4}])
write("one", [{"step": 1, "loss": 3.0, "lr": 0.0}])
with open(f"{d}/gaps.json", "w") as f:  # NaN or infinite losses as gradc writes them (null)
    f.write('{"model": "m", "ranks": [], "steps": [{"step": 1, "loss": 2.0}, {"step": 2, "loss": null}, '
            '{"step": 3, "loss": null, "lr": 1e-3}, {"step": 4, "loss": 1.5}]}')
PY
for name in far_step huge close one gaps; do
  if timeout 20 "$gradc" plot "$work/$name.json" -o "$work/$name.svg" 2>"$work/$name.err" &&
     $py - "$work/$name.svg" <<'PY'; then ok; else bad "plot of $name: $(head -2 "$work/$name.err")"; fi
import re, sys, xml.etree.ElementTree as ET
text = open(sys.argv[1]).read()
assert not re.search(r"nan|inf", text, re.I), "a coordinate is not finite"
root = ET.fromstring(text)
ns = "{http://www.w3.org/2000/svg}"
assert len(root.findall(ns + "line")) <= 40, "too many ticks"
for l in root.findall(ns + "polyline"):
    for p in l.get("points").split():
        x, y = map(float, p.split(","))
        assert -1 <= x <= 861 and -1 <= y <= 501, p
PY
done
grep -q "2 steps with a value that is not finite" "$work/gaps.err" && ok || bad "non-finite points not counted: $(cat "$work/gaps.err")"
cp "$work/a.json" "$work/a_copy.json"
expect_exit2 "output is an input" "is the metrics file" timeout 20 "$gradc" plot "$work/a.json" -o "$work/a.json"
cmp -s "$work/a.json" "$work/a_copy.json" && ok || bad "plot -o onto its input changed the metrics file"

echo "plot cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
