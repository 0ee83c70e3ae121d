#!/usr/bin/env bash
# Installs the Debian packages gradc needs to build, test and benchmark.
# Idempotent: packages already present are skipped, and when nothing is missing the script
# prints nothing and touches nothing (no apt-get update, no network).
#   scripts/setup.sh                    what building and testing need
#   scripts/setup.sh --with-ilp-solver  also CBC (coinor-cbc), for bench/remat_ilp.py only
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache clang libclang-rt-14-dev
  libyaml-cpp-dev doctest-dev libcli11-dev nlohmann-json3-dev libfmt-dev
  libtorch-dev libgloo-dev libgoogle-glog-dev libopenblas0-openmp libsleef3 llvm-16-dev
  python3-torch procps
)
for arg in "$@"; do
  case "$arg" in
    --with-ilp-solver) packages+=(coinor-cbc) ;;
    *) echo "setup: unknown option $arg (known: --with-ilp-solver)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
