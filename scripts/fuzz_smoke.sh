#!/usr/bin/env bash
# Bounded fuzzing of gradc's input readers, for CI: each libFuzzer target (the spec frontend with
# its round-trip oracle, the IR text parser) runs for FUZZ_SECONDS (default 60) from the bundled
# models and golden files, under address and undefined-behaviour sanitizers; any finding (crash,
# sanitizer report, timeout, out-of-memory) fails with the input that caused it kept in
# fuzz-findings/. The longer manual runs are in docs/development.md.
# usage: scripts/fuzz_smoke.sh [BUILD_DIR]   (default: build-fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
build=${1:-build-fuzz}
seconds=${FUZZ_SECONDS:-60}
if ! command -v clang++ >/dev/null; then
  echo "fuzz smoke: clang++ is not installed (scripts/setup.sh installs it)" >&2
  exit 1
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DGRADC_FUZZ=ON -DGRADC_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" --target spec_fuzzer ir_parser_fuzzer
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
findings=$root/fuzz-findings
mkdir -p "$work/spec" "$work/ir"
status=0
run() {  # run NAME ARGS...: one target, findings copied out
  local name=$1
  shift
  echo "fuzz smoke: $name for ${seconds} s"
  if ! "$@" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -artifact_prefix="$work/$name-" \
      -print_final_stats=1 >"$work/$name.log" 2>&1; then
    echo "fuzz smoke: $name found a problem:" >&2
    tail -30 "$work/$name.log" >&2
    mkdir -p "$findings"
    cp "$work/$name"-* "$findings/" 2>/dev/null || true
    status=1
  else
    grep -E "stat::number_of_executed_units" "$work/$name.log" || true
  fi
}
run spec_fuzzer "$build/fuzz/spec_fuzzer" "$work/spec" models tests/golden -max_len=4096
run ir_parser_fuzzer "$build/fuzz/ir_parser_fuzzer" "$work/ir" tests/golden
exit $status
