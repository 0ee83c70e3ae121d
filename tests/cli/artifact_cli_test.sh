#!/usr/bin/env bash
# End-to-end checks of compiled artifacts and arena execution: compile once then train the
# artifact (same losses as training the spec), gradc-run (no compiler linked), the graph file
# round trip, corruption and flag errors (exit 2, file or flag named), no folder destroyed,
# and arena execution against GRADC_NO_ARENA=1 (bit-identical losses and weights, one and two
# ranks) with the measured peak equal to the plan's.
# usage: artifact_cli_test.sh PATH/TO/gradc SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"
run_bin="$(dirname "$gradc")/gradc-run"
compare() { python3 "$src/tests/cli/compare_runs.py" "$@"; }
small=(--set batch=4 --set seq=32 --set d_model=64 --set heads=2 --set layers=2)
train() {  # train NAME TARGET ARGS...: 6 steps on the corpus with a checkpoint and metrics
  local name=$1 target=$2
  shift 2
  timeout 300 "$gradc" train "$target" --data "$src/data/corpus.txt" --steps 6 --save "$work/$name" \
    --metrics-out "$work/$name.json" "$@" >"$work/$name.out" 2>"$work/$name.err"
}
peaks_equal() {  # the metrics' measured peak equals the planned one on every rank
  python3 -c "import json,sys; r=json.load(open(sys.argv[1]))['ranks']; sys.exit(0 if r and all(x['peak_bytes_measured']==x['peak_bytes_planned'] for x in r) else 1)" "$1"
}

# Compile once, run the artifact: the losses of training the spec directly.
"$gradc" compile "$src/models/gpt-mini.yaml" "${small[@]}" --budget 12MiB -o "$work/A" 2>"$work/compile.err" && ok \
  || bad "compile -o DIR: $(cat "$work/compile.err")"
for f in manifest.json step.gir step.plan.json; do [ -f "$work/A/$f" ] && ok || bad "artifact has no $f"; done
train spec "$src/models/gpt-mini.yaml" "${small[@]}" --budget 12MiB && ok || bad "train SPEC: $(tail -3 "$work/spec.err")"
train art "$work/A" && ok || bad "train ARTIFACT: $(tail -3 "$work/art.err")"
compare "$work/spec.json" "$work/art.json" "$work/spec" "$work/art" --rtol 0 && ok || bad "artifact run != spec run"
peaks_equal "$work/art.json" && ok || bad "measured peak != planned peak"
grep -q "(arena execution)" "$work/art.err" && ok || bad "artifact run not in the arena"

# The whole pipeline runs under the PassManager: --dump-dir shows every stage of -o DIR and
# --emit plan, --print-after-all prints them.
"$gradc" compile "$src/models/gpt-mini.yaml" "${small[@]}" --budget 12MiB --dump-dir "$work/stages" -o "$work/A2" \
  2>/dev/null && ok || bad "compile -o DIR --dump-dir"
for stage in input micro-batch optimizer dce remat schedule; do
  ls "$work/stages" | grep -q -- "-$stage.gir" && ok || bad "--dump-dir has no $stage stage: $(ls "$work/stages" | tr '\n' ' ')"
done
cmp -s "$(ls "$work/stages"/*-schedule.gir)" "$work/A2/step.gir" && ok || bad "the scheduled stage is not the artifact's graph"
"$gradc" compile "$src/models/gpt-mini.yaml" "${small[@]}" --devices 2 --dump-dir "$work/stages2" --emit plan \
  -o "$work/p2.json" 2>/dev/null && ls "$work/stages2/rank0" | grep -q -- "-partition.gir" && ls "$work/stages2/rank0" \
  | grep -q -- "-collectives.gir" && ok || bad "--emit plan --devices 2 --dump-dir: no partition/collectives stages"
"$gradc" compile "$src/models/mlp.yaml" --print-after-all -o "$work/A3" 2>"$work/paa.err" >/dev/null
grep -q "micro-batch" "$work/paa.err" && grep -q "schedule" "$work/paa.err" && ok || bad "--print-after-all with -o DIR"

# gradc-run: the same run, without the compiler.
timeout 300 "$run_bin" "$work/A" --data "$src/data/corpus.txt" --steps 6 --save "$work/run" --metrics-out "$work/run.json" \
  >"$work/run.out" 2>"$work/run.err" && ok || bad "gradc-run: $(tail -3 "$work/run.err")"
compare "$work/spec.json" "$work/run.json" "$work/spec" "$work/run" --rtol 0 && ok || bad "gradc-run != gradc train"
if command -v ldd >/dev/null; then
  ! ldd "$run_bin" | grep -Eiq 'yaml|llvm' && ok || bad "gradc-run links yaml-cpp or LLVM"
fi

# The graph file is IR text that round-trips.
"$gradc" opt "$work/A/step.gir" -o "$work/reprinted.gir" && cmp -s "$work/A/step.gir" "$work/reprinted.gir" && ok \
  || bad "step.gir does not round-trip through gradc opt"

# Graph-shaping flags are refused with an artifact, naming the flag; run-only flags are not.
for flag in "--budget 1GiB" "--set batch=8" "--lr 0.1" "--devices 2" "--remat sqrt" "--loss-chunks 4"; do
  # shellcheck disable=SC2086
  "$gradc" train "$work/A" --synthetic --steps 1 $flag >/dev/null 2>"$work/flag.err"
  code=$?
  [ "$code" -eq 2 ] && grep -q -- "${flag%% *}" "$work/flag.err" && ok || bad "$flag with an artifact: exit $code, $(cat "$work/flag.err")"
done

# One byte changed in the graph or the manifest, a missing plan, a truncated manifest: exit 2, file named.
corrupt() {  # corrupt FILE OFFSET: flips one bit of a copy of the artifact
  rm -rf "$work/C" && cp -r "$work/A" "$work/C"
  python3 -c "import sys; p=sys.argv[1]; b=bytearray(open(p,'rb').read()); b[int(sys.argv[2])]^=1; open(p,'wb').write(b)" "$work/C/$1" "$2"
}
for target in step.gir:100 step.gir:-3 manifest.json:40 manifest.json:-10 step.plan.json:500; do
  corrupt "${target%%:*}" "${target##*:}"
  "$gradc" train "$work/C" --synthetic --steps 1 >/dev/null 2>"$work/c.err"
  code=$?
  [ "$code" -eq 2 ] && grep -q "${target%%:*}" "$work/c.err" && ok || bad "corrupted ${target}: exit $code, $(cat "$work/c.err")"
done
rm -rf "$work/C" && cp -r "$work/A" "$work/C" && rm "$work/C/step.plan.json"
"$gradc" train "$work/C" --synthetic --steps 1 >/dev/null 2>"$work/c.err"
[ $? -eq 2 ] && grep -q "step.plan.json" "$work/c.err" && ok || bad "missing plan: $(cat "$work/c.err")"
head -c 100 "$work/A/manifest.json" >"$work/C/manifest.json"
"$gradc" train "$work/C" --synthetic --steps 1 >/dev/null 2>"$work/c.err"
[ $? -eq 2 ] && grep -q "manifest.json" "$work/c.err" && ok || bad "truncated manifest: $(cat "$work/c.err")"

# A plan edited and resealed (its checksums recomputed): the runtime's own checks of the plan
# against the graph refuse it, exit 2, where it used to train with other losses or crash.
"$gradc" compile "$src/models/mlp.yaml" -o "$work/P" 2>/dev/null || bad "compile mlp for the plan edits"
for edit in "overlap:share bytes while both are alive" "param-overlap:share bytes while both are alive" \
  "early-free:ends at step" "overflow:is not inside the arena"; do
  mode=${edit%%:*}
  rm -rf "$work/P-$mode" && cp -r "$work/P" "$work/P-$mode"
  python3 "$src/tests/cli/edit_artifact_plan.py" "$work/P-$mode" "$mode" || bad "editing the plan ($mode)"
  timeout 60 "$run_bin" "$work/P-$mode" --synthetic --steps 2 >/dev/null 2>"$work/err"
  rc=$?
  [ $rc -eq 2 ] && grep -q "${edit#*:}" "$work/err" && ok || bad "plan edit $mode: exit $rc, $(tail -2 "$work/err")"
done

# Native kernels load only when the running user's key tags them (runtime/io/kernel_trust.h): a
# shared object put in an artifact (checksums recomputed) is refused before it is loaded, so its
# constructor never runs; another compile's kernels too; another user's key refuses the
# artifact; --trust-kernels loads them (and the names the graph needs must still be there).
"$gradc" compile "$src/models/mlp.yaml" -o "$work/K" 2>/dev/null && [ -f "$work/K/step.kernels.so" ] && ok \
  || bad "compile mlp with kernels"
timeout 60 "$run_bin" "$work/K" --synthetic --steps 1 -q 2>"$work/err" && ok || bad "own kernels refused: $(tail -1 "$work/err")"
printf '#include <fcntl.h>\n#include <stdlib.h>\n#include <unistd.h>\n__attribute__((constructor)) static void planted(void) { const char* p = getenv("GRADC_TEST_MARKER"); if (p) close(creat(p, 0600)); }\n' \
  >"$work/planted.c"
cc -shared -fPIC -o "$work/planted.so" "$work/planted.c" || bad "cc planted.so"
rm -rf "$work/K-planted" && cp -r "$work/K" "$work/K-planted" && cp "$work/planted.so" "$work/K-planted/step.kernels.so"
python3 "$src/tests/cli/reseal_artifact.py" "$work/K-planted"
rm -f "$work/marker"
GRADC_TEST_MARKER="$work/marker" timeout 60 "$run_bin" "$work/K-planted" --synthetic --steps 1 >/dev/null 2>"$work/err"
rc=$?
[ $rc -eq 2 ] && grep -q "refusing to load the native kernels" "$work/err" && [ ! -e "$work/marker" ] && ok \
  || bad "a planted shared object: exit $rc, marker $([ -e "$work/marker" ] && echo made), $(tail -1 "$work/err")"
GRADC_TEST_MARKER="$work/marker" timeout 60 "$run_bin" "$work/K-planted" --synthetic --steps 1 --trust-kernels \
  >/dev/null 2>"$work/err"
rc=$?
[ $rc -eq 2 ] && [ -e "$work/marker" ] && grep -q "kernel" "$work/err" && ok \
  || bad "--trust-kernels with a planted object: exit $rc, $(tail -1 "$work/err")"
"$gradc" compile "$src/models/gpt-mini.yaml" "${small[@]}" -o "$work/K-gpt" 2>/dev/null
rm -rf "$work/K-swapped" && cp -r "$work/K" "$work/K-swapped" && cp "$work/K-gpt/step.kernels.so" "$work/K-swapped/"
python3 "$src/tests/cli/reseal_artifact.py" "$work/K-swapped"
timeout 60 "$run_bin" "$work/K-swapped" --synthetic --steps 1 >/dev/null 2>"$work/err"
rc=$?
[ $rc -eq 2 ] && grep -q "not compiled for this graph by this user" "$work/err" && ok \
  || bad "another compile's kernels: exit $rc, $(tail -1 "$work/err")"
GRADC_KERNEL_KEY="$work/other-user-key" "$gradc" compile "$src/models/mlp.yaml" -o "$work/K-other" 2>/dev/null
timeout 60 "$run_bin" "$work/K-other" --synthetic --steps 1 >/dev/null 2>"$work/err"
rc=$?
[ $rc -eq 2 ] && grep -q "refusing to load the native kernels" "$work/err" && ok \
  || bad "another user's artifact: exit $rc, $(tail -1 "$work/err")"
timeout 60 "$run_bin" "$work/K-other" --synthetic --steps 1 --trust-kernels -q 2>"$work/err" && ok \
  || bad "another user's artifact with --trust-kernels: $(tail -1 "$work/err")"
[ "$(stat -c %a "$work/other-user-key")" = 600 ] && ok || bad "the key file is not private: $(stat -c %a "$work/other-user-key")"

# --no-generated-kernels runs the artifact's reference step (passes/unfuse.h): no native code
# from the artifact is loaded (the planted constructor never runs), the losses are the compiled
# step's, and the measured peak is the reference plan's.
losses_close() {  # the per-step losses of two metrics files agree to 1e-5 relative
  python3 -c "import json,sys; a,b=[[s['loss'] for s in json.load(open(f))['steps']] for f in sys.argv[1:]]; sys.exit(0 if len(a)==len(b)>0 and all(abs(x-y)<=1e-5*max(1,abs(x)) for x,y in zip(a,b)) else 1)" "$1" "$2"
}
timeout 60 "$run_bin" "$work/K" --synthetic --steps 3 -q --metrics-out "$work/K-compiled.json" 2>"$work/err" && ok \
  || bad "compiled step: $(tail -1 "$work/err")"
rm -f "$work/marker"
GRADC_TEST_MARKER="$work/marker" timeout 60 "$run_bin" "$work/K-planted" --synthetic --steps 3 --no-generated-kernels \
  --metrics-out "$work/K-reference.json" >"$work/out" 2>"$work/err"
rc=$?
[ $rc -eq 0 ] && [ ! -e "$work/marker" ] && grep -q "reference step (no generated kernels)" "$work/err" && ok \
  || bad "--no-generated-kernels on a planted object: exit $rc, marker $([ -e "$work/marker" ] && echo made), $(tail -1 "$work/err")"
losses_close "$work/K-compiled.json" "$work/K-reference.json" && ok || bad "the reference step's losses differ from the compiled step's"
peaks_equal "$work/K-reference.json" && ok || bad "the reference step's measured peak != its plan"
timeout 60 "$run_bin" "$work/K-other" --synthetic --steps 1 --no-generated-kernels -q 2>"$work/err" && ok \
  || bad "another user's artifact with --no-generated-kernels: $(tail -1 "$work/err")"
grep -q -- "--no-generated-kernels" <(timeout 60 "$run_bin" "$work/K-other" --synthetic --steps 1 2>&1) && ok \
  || bad "the refusal does not name --no-generated-kernels"
# A manifest of a rank with generated kernels and no reference step is refused as damaged, and
# an artifact of an older format version is refused naming both versions.
rm -rf "$work/K-old" && cp -r "$work/K" "$work/K-old"
python3 - "$work/K-old" <<'PY'
import json, os, sys
path = os.path.join(sys.argv[1], "manifest.json")
m = json.load(open(path))
for r in m["ranks"]:
    for name in r.pop("reference").values():
        del m["files"][name]
        os.remove(os.path.join(sys.argv[1], name))
json.dump(m, open(path, "w"), indent=2)
PY
python3 "$src/tests/cli/reseal_artifact.py" "$work/K-old"
timeout 60 "$run_bin" "$work/K-old" --synthetic --steps 1 --no-generated-kernels >/dev/null 2>"$work/err"
rc=$?
[ $rc -eq 2 ] && grep -q "has no reference step" "$work/err" && ok || bad "no reference step: exit $rc, $(tail -1 "$work/err")"
rm -rf "$work/K-v1" && cp -r "$work/K" "$work/K-v1"
python3 - "$work/K-v1" <<'PY'
import json, os, sys
path = os.path.join(sys.argv[1], "manifest.json")
m = json.load(open(path))
m["version"] = 1
json.dump(m, open(path, "w"), indent=2)
PY
python3 "$src/tests/cli/reseal_artifact.py" "$work/K-v1"
timeout 60 "$run_bin" "$work/K-v1" --synthetic --steps 1 >/dev/null 2>"$work/err"
rc=$?
[ $rc -eq 2 ] && grep -q "format version 1, but this gradc reads version 2 only: recompile" "$work/err" && ok \
  || bad "an artifact of version 1: exit $rc, $(tail -1 "$work/err")"

# A resealed manifest whose summary carries terminal escape sequences and 10 KB of text: shown
# with the control characters as '?' and clipped, never raw.
rm -rf "$work/K-esc" && cp -r "$work/K" "$work/K-esc"
python3 - "$work/K-esc/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
flags = m["flags"] if isinstance(m["flags"], dict) else json.loads(m["flags"])
flags["summary"] = "\x1b]0;retitled\x07\x1b[2Jmemory plan" + "A" * 10000
m["flags"] = flags if isinstance(m["flags"], dict) else json.dumps(flags)
json.dump(m, open(sys.argv[1], "w"), indent=2)
PY
python3 "$src/tests/cli/reseal_artifact.py" "$work/K-esc"
timeout 60 "$run_bin" "$work/K-esc" --synthetic --steps 1 --trust-kernels >/dev/null 2>"$work/err"
rc=$?
[ $rc -eq 0 ] && ! grep -q $'\x1b' "$work/err" && grep -q "?]0;retitled??\[2Jmemory plan" "$work/err" \
  && grep -q "more bytes)" "$work/err" && ok || bad "an artifact's summary reached the terminal raw: exit $rc, $(head -c 200 "$work/err")"

# -o onto a folder that is not an artifact leaves it alone; onto an artifact, replaces it.
mkdir -p "$work/mine" && echo keep >"$work/mine/notes.txt"
"$gradc" compile "$src/models/mlp.yaml" -o "$work/mine" >/dev/null 2>"$work/mine.err"
[ $? -eq 2 ] && [ "$(cat "$work/mine/notes.txt")" = keep ] && ok || bad "compile -o over a user folder: $(cat "$work/mine.err")"
"$gradc" compile "$src/models/mlp.yaml" -o "$work/A" >/dev/null 2>&1 && grep -q '"model": "mlp"' "$work/A/manifest.json" && ok \
  || bad "compile -o over an artifact does not replace it"
[ -z "$(ls -a "$work" | grep -E '^\.A\.(tmp|old)')" ] && ok || bad "compile left temporary folders behind"

# Arena execution against reference counting: bit-identical losses and weights, one and two ranks.
train arena "$src/models/gpt-mini.yaml" "${small[@]}" --optimizer sgd --lr 0.1 && ok || bad "arena run: $(tail -3 "$work/arena.err")"
GRADC_NO_ARENA=1 train refcount "$src/models/gpt-mini.yaml" "${small[@]}" --optimizer sgd --lr 0.1 && ok \
  || bad "GRADC_NO_ARENA=1 run: $(tail -3 "$work/refcount.err")"
grep -q "(reference counting" "$work/refcount.err" && ok || bad "GRADC_NO_ARENA=1 did not take the reference path"
compare "$work/arena.json" "$work/refcount.json" "$work/arena" "$work/refcount" --rtol 0 && ok || bad "arena != refcount"
peaks_equal "$work/arena.json" && ok || bad "arena: measured peak != planned"
GRADC_ARENA_CHECK=1 train checked "$src/models/gpt-mini.yaml" "${small[@]}" --budget 11MiB && ok \
  || bad "arena check under a budget: $(tail -3 "$work/checked.err")"
peaks_equal "$work/checked.json" && ok || bad "budgeted arena run: measured peak != planned"
train arena2 "$src/models/gpt-mini.yaml" "${small[@]}" --optimizer sgd --lr 0.1 --devices 2 && ok \
  || bad "arena, 2 ranks: $(tail -3 "$work/arena2.err")"
GRADC_NO_ARENA=1 train refcount2 "$src/models/gpt-mini.yaml" "${small[@]}" --optimizer sgd --lr 0.1 --devices 2 && ok \
  || bad "GRADC_NO_ARENA=1, 2 ranks: $(tail -3 "$work/refcount2.err")"
compare "$work/arena2.json" "$work/refcount2.json" "$work/arena2" "$work/refcount2" --rtol 0 && ok \
  || bad "2 ranks: arena != refcount"
peaks_equal "$work/arena2.json" && ok || bad "2 ranks: measured peak != planned on some rank"

# The intra-op thread count is a parameter of the plan: the graph records the count its
# workspaces were sized for (layer_norm_backward keeps per-thread partial rows), the manifest
# the count the runtime runs with, and the two must agree.
OMP_NUM_THREADS=3 "$gradc" compile "$src/models/gpt-mini.yaml" "${small[@]}" -o "$work/T3" 2>/dev/null && ok \
  || bad "compile with OMP_NUM_THREADS=3"
grep -q "kernel_threads = 3" "$work/T3/step.gir" && grep -q '"kernel_threads": 3' "$work/T3/manifest.json" && ok \
  || bad "the graph and manifest do not record 3 kernel threads: $(head -1 "$work/T3/step.gir")"
OMP_NUM_THREADS=1 "$gradc" compile "$src/models/gpt-mini.yaml" "${small[@]}" -o "$work/T1" 2>/dev/null
python3 - "$work/T1/step.plan.json" "$work/T3/step.plan.json" <<'PY' && ok || bad "3 threads did not plan 2 more layer_norm_backward rows each"
import json, sys
def ln_workspace(path):
    return sorted(b["size"] for b in json.load(open(path))["buffers"] if b["kind"] == "workspace" and b["producer"] == "layer_norm_backward")
one, three = ln_workspace(sys.argv[1]), ln_workspace(sys.argv[2])
sys.exit(0 if one and len(one) == len(three) and all(t > o for o, t in zip(one, three)) else 1)
PY
grep -q "kernel_threads = 1" "$work/T1/step.gir" && ok || bad "a graph planned for 1 thread does not say so"
# runs_other_threads NAME PLANNED RUN EXPECTED: the artifact NAME's manifest edited to run RUN
# threads (resealed) is refused with EXPECTED in its error.
runs_other_threads() {
  local name=$1 planned=$2 run=$3 expected=$4
  rm -rf "$work/$name-edited" && cp -r "$work/$name" "$work/$name-edited"
  sed -i "s/\"kernel_threads\": $planned/\"kernel_threads\": $run/" "$work/$name-edited/manifest.json"
  python3 "$src/tests/cli/reseal_artifact.py" "$work/$name-edited"
  timeout 60 "$run_bin" "$work/$name-edited" --synthetic --steps 1 >/dev/null 2>"$work/err"
  local rc=$?
  [ $rc -eq 2 ] && grep -q "$expected" "$work/err" && ok \
    || bad "a $planned-thread plan run with $run threads: exit $rc, $(tail -1 "$work/err")"
}
runs_other_threads T1 1 4 "made for 1 intra-op thread, but the manifest runs 4"
runs_other_threads T3 3 5 "made for 3 intra-op threads, but the manifest runs 5"

echo "artifact cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
