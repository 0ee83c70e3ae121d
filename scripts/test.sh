#!/usr/bin/env bash
# Builds gradc and runs every test (doctest suites and CLI checks, through ctest).
# usage: scripts/test.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
scripts/setup.sh
cmake -S . -B "$build" -G Ninja >/dev/null
cmake --build "$build"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
