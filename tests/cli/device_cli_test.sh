#!/usr/bin/env bash
# `--device cpu|cuda|auto`: on a build without CUDA support (a CPU-only LibTorch, as in CI) or a
# machine without a GPU, `--device cuda` is a one-line error and exit 2 -- from a spec, from an
# artifact, from gradc-run, from a local multi-rank launch -- and `auto` trains on the CPU with
# the losses of `--device cpu`. A world of one with collectives (--one-rank-collectives) trains
# as one device does. An unknown device is a flag error. (The GPU side is
# tests/cuda/, run by scripts/gpu-check.sh.)
# usage: device_cli_test.sh PATH/TO/gradc SOURCE_DIR CUDA_BUILT(ON|OFF)
source "$(dirname "$0")/lib.sh" "$@"
cuda_built=${3:-OFF}
run_bin="$(dirname "$gradc")/gradc-run"
compare() { python3 "$src/tests/cli/compare_runs.py" "$@"; }
gpu_visible=0
if [ "$cuda_built" = ON ] && command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then gpu_visible=1; fi
if [ "$gpu_visible" = 1 ]; then
  echo "device cli: a GPU is visible; the no-GPU checks do not apply (tests/cuda covers the GPU)"
  exit 0
fi
if [ "$cuda_built" = ON ]; then expected="no CUDA GPU is visible"; else expected="built against a CPU-only LibTorch"; fi

expect_refusal() {  # expect_refusal NAME COMMAND...: exit 2, one gradc error line naming the cause, no trace
  local name=$1
  shift
  timeout 120 "$@" >"$work/$name.out" 2>"$work/$name.err"
  local code=$?
  if [ "$code" -eq 2 ] && grep -q "^gradc: error: --device cuda: .*$expected" "$work/$name.err" \
    && ! grep -Eq "terminate called|Traceback|Exception raised from" "$work/$name.err"; then
    ok
  else
    bad "$name: exit $code, $(head -c 600 "$work/$name.err")"
  fi
}

expect_refusal spec "$gradc" train "$src/models/mlp.yaml" --synthetic --steps 1 --device cuda
"$gradc" compile "$src/models/mlp.yaml" -o "$work/A" 2>/dev/null && ok || bad "compile -o DIR"
# compile -o carries the fused kernels as PTX for GPUs, tagged for this user as the CPU's shared
# object is (a GPU rank loads them only then), with the one-pass AdamW update among them.
python3 - "$work/A" <<'PY' && ok || bad "compile -o: the PTX is missing, untagged or without the update"
import json, os, sys
r = json.load(open(os.path.join(sys.argv[1], "manifest.json")))["ranks"][0]
ok = r.get("ptx") and r.get("ptx_tag") and r.get("kernels_tag") and r["ptx_tag"] != r["kernels_tag"]
ok = ok and ".entry gradc_adamw_f32(" in open(os.path.join(sys.argv[1], r["ptx"])).read()
sys.exit(0 if ok else 1)
PY
expect_refusal artifact "$gradc" train "$work/A" --synthetic --steps 1 --device cuda
expect_refusal run "$run_bin" "$work/A" --synthetic --steps 1 --device cuda
expect_refusal launch "$gradc" train "$src/models/mlp.yaml" --synthetic --steps 1 --devices 2 --device cuda
# Nothing was trained: no checkpoint folder appears.
expect_refusal save "$gradc" train "$src/models/mlp.yaml" --synthetic --steps 1 --device cuda --save "$work/ck"
[ ! -e "$work/ck" ] && ok || bad "a refused --device cuda run created its --save folder"

# auto is the CPU here, with the CPU's losses, bit for bit.
for device in cpu auto; do
  timeout 300 "$gradc" train "$src/models/mlp.yaml" --synthetic --steps 3 --device "$device" --save "$work/$device" \
    --metrics-out "$work/$device.json" >/dev/null 2>"$work/$device.err" && ok || bad "--device $device: $(tail -3 "$work/$device.err")"
done
compare "$work/cpu.json" "$work/auto.json" "$work/cpu" "$work/auto" --rtol 0 && ok || bad "--device auto != --device cpu"
grep -q "^device:" "$work/auto.err" && bad "--device auto on the CPU printed a device line" || ok

# A world of one that communicates anyway (the path NCCL takes on a single GPU): collectives in
# the artifact, a rendezvous, and the losses and weights of the run without them, bit for bit.
"$gradc" compile "$src/models/mlp.yaml" --one-rank-collectives -o "$work/C" 2>/dev/null \
  && grep -q "all_reduce_start" "$work/C/step.gir" && ok || bad "--one-rank-collectives: no collectives in the artifact"
timeout 300 "$gradc" train "$work/C" --synthetic --steps 3 --save "$work/coll" --metrics-out "$work/coll.json" \
  >/dev/null 2>"$work/coll.err" && ok || bad "--one-rank-collectives run: $(tail -3 "$work/coll.err")"
compare "$work/cpu.json" "$work/coll.json" "$work/cpu" "$work/coll" --rtol 0 && ok \
  || bad "--one-rank-collectives != one device without collectives"

"$gradc" train "$src/models/mlp.yaml" --synthetic --steps 1 --device tpu >/dev/null 2>"$work/tpu.err"
code=$?
[ "$code" -eq 2 ] && grep -q -- "--device" "$work/tpu.err" && ok || bad "--device tpu: exit $code, $(cat "$work/tpu.err")"

echo "device cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
