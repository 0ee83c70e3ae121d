#!/usr/bin/env bash
# compile_scale: how compile time grows with the spec's size. Times
# `gradc compile models/mlp.yaml --set depth=N --emit summary` and `--emit plan` for each N
# (default 2500 5000 10000 20000), one run each, and prints seconds, peak RSS and the time per
# layer; a time per layer that grows with N means something superlinear is left.
#
#   bench/compile_scale.sh [--gradc build/gradc] [N ...]
set -euo pipefail
gradc=build/gradc
if [[ ${1:-} == --gradc ]]; then
  gradc=$2
  shift 2
fi
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(2500 5000 10000 20000)
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf "%-8s %-8s %10s %10s %14s\n" emit depth seconds "RSS MiB" "ms per layer"
for n in "${sizes[@]}"; do
  for emit in summary plan; do
    out=/dev/null
    args=(--emit "$emit")
    [[ $emit == plan ]] && args+=(-o "$tmp/plan.json")
    /usr/bin/time -f "%e %M" -o "$tmp/time" "$gradc" compile "$root/models/mlp.yaml" --set "depth=$n" "${args[@]}" >"$out"
    read -r secs kb <"$tmp/time"
    awk -v e="$emit" -v n="$n" -v s="$secs" -v k="$kb" \
      'BEGIN { printf "%-8s %-8d %10.2f %10.0f %14.3f\n", e, n, s, k / 1024, 1000 * s / n }'
  done
done
