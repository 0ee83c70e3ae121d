#!/usr/bin/env bash
# gradc's CUDA configuration built and linked against Debian 13's CUDA LibTorch 2.6, on a machine
# without a GPU, in the root scripts/debian13-root.sh makes (made first when missing).
#
#   scripts/debian13-build.sh HOST_BUILD [--suite]   (HOST_BUILD: this machine's build folder,
#                                                     whose gradc compiles the artifacts;
#                                                     GRADC_DEBIAN13_ROOT: the root's folder)
#
# In the root, from this clone (mounted read-only at /src), into /build/gradc-cuda there:
#   1. configure the runtime-only build (GRADC_RUNTIME_ONLY: ir/, the runtime, gradc-run and the
#      CUDA test suite; no frontend, passes or LLVM) with nvcc 12.4 (host compiler g++-13) and
#      LibTorch 2.6 with CUDA, so GRADC_WITH_CUDA_DEVICE is on and gradc_runtime links
#      libtorch_cuda, c10_cuda, NCCL and cudart;
#   2. build gradc-run and cuda_tests, and show what gradc-run links (ldd);
#   3. run artifacts compiled here by HOST_BUILD's gradc with that gradc-run:
#      - on the CPU, against LibTorch 2.6: gpt-mini (fused kernels, dropout, AdamW) and
#        resnet18-cifar (oneDNN convolutions, batch norm, SGD), whose first two losses must equal this machine's
#        gradc-run's (LibTorch 1.13) within 1e-5 relative, and whose measured peaks must be equal;
#      - with --device cuda: it must exit 2 with one line saying no GPU is visible (not a missing
#        symbol, not an abort);
#   4. run cuda_tests, whose every case must fail for want of a GPU, and for nothing else.
# With --suite, then: the whole of gradc (compiler with LLVM 19, runtime, every test) configured
# the same way into /build/gradc-full, built, and its CPU test suite run there with ctest, against
# LibTorch 2.6 (about 30 minutes of build and 15 of tests on 2 cores; not part of CI's run).
# Prints the versions (LibTorch, CUDA, NCCL) and the time of each part; exit 0 only when all hold,
# 1 when a build or check fails, 3 when this machine cannot make or enter the root (no archive,
# no mounts, no room: said in one line).
set -euo pipefail
# debootstrap, chroot and mount need root: as another user, the script runs itself with sudo.
[[ $(id -u) -eq 0 ]] || exec sudo -E "$0" "$@"
HOST_BUILD=$(readlink -f "${1:?usage: scripts/debian13-build.sh HOST_BUILD [--suite]}")
SUITE=0
[[ "${2:-}" == --suite ]] && SUITE=1
ROOT=${GRADC_DEBIAN13_ROOT:-/var/cache/gradc/trixie-root}
SRC=$(cd "$(dirname "$0")/.." && pwd)
JOBS=${GRADC_JOBS:-$(nproc)}

"$SRC/scripts/debian13-root.sh" "$ROOT"

mounted=()
unmount_all() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
}
trap unmount_all EXIT
mkdir -p "$ROOT/src"
cannot() { echo "debian13-build: $1" >&2; exit 3; }  # as debian13-root.sh: this machine, not gradc
{ mount --bind /dev "$ROOT/dev" && mounted+=("$ROOT/dev"); } || cannot "mount --bind is not permitted"
{ mount -t proc proc "$ROOT/proc" && mounted+=("$ROOT/proc"); } || cannot "mounting /proc is not permitted"
{ mount --bind "$SRC" "$ROOT/src" && mounted+=("$ROOT/src"); } || cannot "mount --bind is not permitted"
mount -o remount,bind,ro "$ROOT/src" || cannot "a read-only bind mount is not permitted"
in_root() { chroot "$ROOT" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-}" CCACHE_DIR=/var/cache/ccache "$@"; }
part() { echo; echo "== $1 ($(date -u +%H:%M:%S))"; }

part "versions"
in_root bash -c 'echo "LibTorch $(dpkg-query -W -f="\${Version}" libtorch-cuda-dev) (CUDA build)";
  nvcc --version | tail -1; echo "NCCL $(dpkg-query -W -f="\${Version}" libnccl-dev)";
  echo "cudart $(dpkg-query -W -f="\${Version}" libcudart12)"; g++-13 --version | head -1'

# configure BUILD_DIR [cmake options]: the CUDA configuration (nvcc 12.4 with g++-13 as its host
# compiler, sm_90), which must find the CUDA LibTorch.
configure() {
  local dir=$1
  shift
  in_root cmake -S /src -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CUDA_COMPILER=/usr/bin/nvcc \
    -DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++-13 -DCMAKE_CUDA_ARCHITECTURES=90 "$@" > "$ROOT/tmp/configure.log" 2>&1 ||
    { tail -40 "$ROOT/tmp/configure.log"; exit 1; }
  grep -E "^-- (LibTorch|NCCL|oneDNN|LLVM)" "$ROOT/tmp/configure.log" | sed 's/^-- //'
  grep -q "with CUDA: building the CUDA device" "$ROOT/tmp/configure.log" || { echo "not the CUDA configuration" >&2; exit 1; }
}

part "configure"
t0=$(date +%s)
configure /build/gradc-cuda -DGRADC_RUNTIME_ONLY=ON

part "build gradc-run and cuda_tests"
in_root ninja -C /build/gradc-cuda -j "$JOBS" gradc-run cuda_tests > "$ROOT/tmp/build.log" 2>&1 || {
  grep -E "error|Error" -A3 "$ROOT/tmp/build.log" | head -80; exit 1; }
t1=$(date +%s)
echo "configured and built in $((t1 - t0)) s"
in_root bash -c 'ldd /build/gradc-cuda/gradc-run | grep -E "libtorch_cuda|libc10_cuda|libnccl|libcudart|libtorch_cpu" | sed "s/ (0x.*//"'
missing=$(in_root bash -c 'ldd /build/gradc-cuda/gradc-run | grep -c "not found" || true')
[[ "$missing" == 0 ]] || { echo "gradc-run has unresolved libraries" >&2; exit 1; }

part "artifacts, compiled by $HOST_BUILD/gradc"
work=$(mktemp -d "$ROOT/tmp/check.XXXXXX")
rel=${work#"$ROOT"}
failed=0
for model in gpt-mini resnet18-cifar; do
  sets=(--set batch=4)
  [[ $model == gpt-mini ]] && sets+=(--set seq=64 --set layers=2)
  # resnet18-cifar trains with SGD here: AdamW's first update (about lr x sign(g)) turns the two
  # oneDNN versions' rounding of near-zero gradients into whole steps, and moved step 2's loss by
  # 1e-7 to 1.03e-5 from one unrelated kernel change to the next; SGD's update is linear in the
  # gradient, so step 2 checks the forward, backward and update without that amplifier.
  [[ $model == resnet18-cifar ]] && sets+=(--optimizer sgd)
  "$HOST_BUILD/gradc" compile "$SRC/models/$model.yaml" "${sets[@]}" -o "$work/$model.gradc" > /dev/null 2>&1
  # LibTorch 1.13 (this machine) and 2.6 (the root), the same artifact and seed, on one thread.
  OMP_NUM_THREADS=1 "$HOST_BUILD/gradc-run" "$work/$model.gradc" --synthetic --steps 4 \
    --metrics-out "$work/$model.host.json" > /dev/null 2> "$work/$model.host.err" || { cat "$work/$model.host.err"; exit 1; }
  # The root has its own HOME, without this machine's kernel key: the artifact was compiled just
  # now, here, so its native kernels are trusted explicitly.
  in_root env OMP_NUM_THREADS=1 /build/gradc-cuda/gradc-run "$rel/$model.gradc" --trust-kernels --synthetic --steps 4 \
    --metrics-out "$rel/$model.root.json" > /dev/null 2> "$work/$model.root.err" || { cat "$work/$model.root.err"; exit 1; }
  python3 - "$model" "$work/$model.host.json" "$work/$model.root.json" << 'EOF' || failed=1
import json, sys
model, a, b = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
la, lb = [s["loss"] for s in a["steps"]], [s["loss"] for s in b["steps"]]
rel = [abs(x - y) / max(abs(x), 1e-30) for x, y in zip(la, lb)]
pa, pb = a["ranks"][0]["peak_bytes_measured"], b["ranks"][0]["peak_bytes_measured"]
# Step 1's loss is the forward of the same weights; step 2's follows one backward and update.
# Later steps are shown, not held to 1e-5: a few steps of training at batch 4 amplify the rounding
# differences between two libraries' kernels (oneDNN 2.7 and 3.7 convolutions, for one).
ok = len(la) == len(lb) == 4 and max(rel[:2]) <= 1e-5 and pa == pb
print(f"{model}: CPU losses per step, LibTorch 1.13 / 2.6: " + ", ".join(f"{x:.7f} / {y:.7f}" for x, y in zip(la, lb)))
print(f"  relative differences {', '.join(f'{r:.1e}' for r in rel)} (steps 1-2 <= 1e-5); "
      f"measured peak {pa} / {pb} bytes (equal): {'ok' if ok else 'FAILED'}")
sys.exit(0 if ok else 1)
EOF
done

set +e
in_root /build/gradc-cuda/gradc-run "$rel/gpt-mini.gradc" --trust-kernels --synthetic --steps 1 --device cuda > /dev/null 2> "$work/cuda.err"
rc=$?
set -e
echo "gradc-run --device cuda: exit $rc: $(head -c 400 "$work/cuda.err")"
if [[ $rc != 2 || $(wc -l < "$work/cuda.err") != 1 ]] || ! grep -q "no CUDA GPU is visible" "$work/cuda.err"; then
  echo "expected exit 2 and one line saying no GPU is visible" >&2
  failed=1
fi

part "cuda_tests (no GPU here: each case must stop for want of a device)"
set +e
in_root /build/gradc-cuda/tests/cuda_tests > "$work/cuda_tests.out" 2>&1
rc=$?
set -e
grep -E "test cases" "$work/cuda_tests.out" | tail -1
failed_cases=$(sed -n 's/.*test cases: *[0-9]* *| *[0-9]* passed *| *\([0-9]*\) failed.*/\1/p' "$work/cuda_tests.out")
for_want=$(grep -c "logged: .*no CUDA-capable device is detected" "$work/cuda_tests.out" || true)
echo "cuda_tests exit $rc: $failed_cases cases failed, $for_want of them because no CUDA-capable device is detected"
if [[ -z "$failed_cases" || "$failed_cases" != "$for_want" ]]; then
  grep "logged:" "$work/cuda_tests.out" | grep -v "no CUDA-capable device" | head -5
  failed=1
fi
rm -rf "$work"

if [[ $SUITE == 1 ]]; then
  part "the whole of gradc and its CPU test suite, against LibTorch 2.6"
  t2=$(date +%s)
  configure /build/gradc-full
  in_root ninja -C /build/gradc-full -j "$JOBS" > "$ROOT/tmp/build-full.log" 2>&1 || {
    grep -E "error" -A3 "$ROOT/tmp/build-full.log" | head -80; exit 1; }
  t3=$(date +%s)
  echo "configured and built in $((t3 - t2)) s"
  set +e
  # cuda_tests ran above (they need a GPU); the rest is the CPU suite.
  in_root ctest --test-dir /build/gradc-full -j "$JOBS" -E "^cuda_tests/" --output-on-failure --timeout 900 > "$ROOT/tmp/ctest.log" 2>&1
  rc=$?
  set -e
  echo "ctest exit $rc in $(( $(date +%s) - t3 )) s: $(grep -E "tests passed" "$ROOT/tmp/ctest.log")"
  grep -A200 "The following tests FAILED" "$ROOT/tmp/ctest.log" | head -60 || true
  [[ $rc == 0 ]] || failed=1
fi
echo
[[ $failed == 0 ]] && echo "debian13-build: all checks hold" || echo "debian13-build: FAILED"
exit $failed
