#!/usr/bin/env bash
# Installs the Debian packages gradc needs to build, test and benchmark.
# Idempotent: packages already present are skipped, and when nothing is missing the script
# prints nothing and touches nothing (no apt-get update, no network).
#   scripts/setup.sh                    what building and testing need
#   scripts/setup.sh --with-ilp-solver  also the MILP solvers of bench/remat_ilp.py only: CBC
#                                       (coinor-cbc) and HiGHS (the npm package `highs`, HiGHS
#                                       compiled to WebAssembly, into bench/.highs; needs npm)
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache clang libclang-rt-14-dev
  libyaml-cpp-dev doctest-dev libcli11-dev nlohmann-json3-dev libfmt-dev
  libtorch-dev libgloo-dev libgoogle-glog-dev libopenblas0-openmp libsleef3 llvm-16-dev libdnnl-dev
  python3-torch procps
)
highs=0
for arg in "$@"; do
  case "$arg" in
    --with-ilp-solver) packages+=(coinor-cbc nodejs); highs=1 ;;
    *) echo "setup: unknown option $arg (known: --with-ilp-solver)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

install_highs() {
  local dir
  dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/bench/.highs"
  [[ $highs -eq 1 && ! -f "$dir/node_modules/highs/package.json" ]] || return 0
  command -v npm >/dev/null || { echo "setup: npm is needed to install HiGHS into $dir" >&2; exit 1; }
  echo "setup: installing HiGHS (npm package highs) into $dir"
  npm install --prefix "$dir" --no-audit --no-fund highs@1.15.3 >/dev/null
}
if [[ ${#missing[@]} -eq 0 ]]; then
  install_highs
  exit 0
fi

sudo=""
[[ $(id -u) -eq 0 ]] || sudo="sudo"
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_highs
echo "setup: done"
