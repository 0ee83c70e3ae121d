#!/usr/bin/env bash
# Prepares, on a CPU machine with a full build (build/gradc), everything scripts/gpu-check.sh needs
# on a GPU machine that has neither our header libraries nor a package registry nor LLVM:
#   OUT/debs/        CLI11, nlohmann-json, fmt, doctest (and gloo's headers) as Debian packages,
#                    unpacked there with dpkg -x into a private prefix (never into /);
#   OUT/artifacts/   compiled artifacts (--no-fuse: the GPU runs ATen's kernels), so the GPU
#                    machine builds and links only the runtime:
#                      gpt-mini, gpt-mini-{160,120}MiB[-ref]       parity; budgets, each with
#                                                                   its no-remat reference;
#                      gpt-mini-collectives                         a world of one over NCCL;
#                      gpt-mini-fused                               fused (the default), with the
#                                                                   regions' PTX: run on the GPU
#                                                                   against its own reference step;
#                      lm-seed                                      the seed's language model;
#                      gpt2-bN                                      GPT-2 small (vocab 50304, seq
#                                                                   1024) at batch N, --budget 40GiB,
#                                                                   for N up to the largest that
#                                                                   fits (gpt2-largest.txt);
#                      gpt2-nb-bN                                   the same without a budget (no
#                                                                   remat) for the step-time match.
# usage: scripts/gpu-prepare.sh [OUT (default .gpu)]   then carry OUT to the GPU machine.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$src/.gpu}
gradc=${GRADC:-$src/build/gradc}
[ -x "$gradc" ] || { echo "gpu-prepare: no $gradc (build gradc first: README)" >&2; exit 1; }
rm -rf "$out/artifacts"
mkdir -p "$out/debs" "$out/artifacts"
log() { echo "[gpu-prepare] $*" >&2; }

log "Debian packages -> $out/debs"
(cd "$out/debs" && apt-get download libcli11-dev nlohmann-json3-dev libfmt-dev libfmt9 doctest-dev libgloo-dev \
  >/dev/null)

compile() {  # compile NAME SPEC ARGS...
  local name=$1
  shift
  "$gradc" compile "$@" --no-fuse --device-reserve cuda -o "$out/artifacts/$name" 2>"$out/artifacts/$name.log"
}
log "artifacts -> $out/artifacts"
compile gpt-mini "$src/models/gpt-mini.yaml"
# Each budgeted artifact's reference: no budget (no remat), the same loss (fused in as many chunks,
# or not), so that remat alone separates the two runs.
for budget in 160MiB 120MiB; do
  compile "gpt-mini-$budget" "$src/models/gpt-mini.yaml" --budget "$budget"
  chunks=$(sed -n 's/.*fused loss in \([0-9]*\) chunk.*/\1/p' "$out/artifacts/gpt-mini-$budget.log")
  compile "gpt-mini-$budget-ref" "$src/models/gpt-mini.yaml" --loss-chunks "${chunks:-off}"
done
compile gpt-mini-collectives "$src/models/gpt-mini.yaml" --one-rank-collectives  # NCCL, a world of one
compile lm-seed "$src/models/lm-seed.yaml"
# Fused, as gradc compile -o makes it by default: its kernels as PTX beside the CPU's shared object,
# planned for CUDA's kernels (fused attention's workspace; --device-reserve cuda with it).
"$gradc" compile "$src/models/gpt-mini.yaml" --device cuda -o "$out/artifacts/gpt-mini-fused" \
  2>"$out/artifacts/gpt-mini-fused.log"
[ -f "$out/artifacts/gpt-mini-fused/step.kernels.ptx" ] || { log "gpt-mini-fused has no PTX"; exit 1; }

gpt2=(--set vocab=50304 --set seq=1024)
fits() { "$gradc" compile "$src/models/gpt2.yaml" "${gpt2[@]}" --set batch="$1" --budget 40GiB --device-reserve cuda --emit plan \
  -o "$out/artifacts/fits.json" >/dev/null 2>&1; }
lo=1
hi=2
while fits "$hi"; do lo=$hi; hi=$((hi * 2)); done
while [ $((hi - lo)) -gt 1 ]; do
  mid=$(((lo + hi) / 2))
  if fits "$mid"; then lo=$mid; else hi=$mid; fi
done
rm -f "$out/artifacts/fits.json"
echo "$lo" >"$out/artifacts/gpt2-largest.txt"
log "GPT-2 small: the largest batch under 40 GiB is $lo"
batches=$(printf '%s\n' 1 2 4 8 12 16 20 24 32 48 64 96 128 "$lo" | sort -n -u | awk -v m="$lo" '$1 <= m')
for b in $batches; do
  compile "gpt2-b$b" "$src/models/gpt2.yaml" "${gpt2[@]}" --set batch="$b" --budget 40GiB
done
for b in 1 2 4 8 12 16 20 24; do  # no budget, no remat: eager's batches
  compile "gpt2-nb-b$b" "$src/models/gpt2.yaml" "${gpt2[@]}" --set batch="$b" || true
done
du -sh "$out" >&2
