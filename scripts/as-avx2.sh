#!/usr/bin/env bash
# Runs a command on an AVX-512 machine with the kernels an AVX2-only CPU (an AMD EPYC before
# Zen 4) would run, so that the paths such a CPU takes can be tested and timed anywhere:
#   - gradc's tile kernels capped at AVX2 (GRADC_TILE_KERNELS=avx2);
#   - oneDNN capped at AVX2 (ONEDNN_MAX_CPU_ISA=AVX2): no bf16 kernel, as on such a CPU;
#   - ATen's vector kernels at AVX2 (ATEN_CPU_CAPABILITY=avx2), and ATen's oneDNN paths off
#     (they are taken only where the CPU reports AVX-512): a preloaded library answers
#     at::Context::userEnabledMkldnn() with false, as torch.backends.mkldnn.enabled = False does;
#   - OpenBLAS on its Haswell kernels (OPENBLAS_CORETYPE=Haswell).
# Instruction-set facts differ (cache sizes, clocks): times taken so are the AVX2 code paths on
# this CPU, not an AVX2 CPU's times.
# usage: scripts/as-avx2.sh COMMAND [ARGS...]
set -euo pipefail
shim_dir=${TMPDIR:-/tmp}/gradc-as-avx2
shim=$shim_dir/libaten-no-onednn.so
if [[ ! -f $shim ]]; then
  mkdir -p "$shim_dir"
  printf '%s\n' 'namespace at { struct Context { bool userEnabledMkldnn() const; };' \
    'bool Context::userEnabledMkldnn() const { return false; } }' >"$shim_dir/shim.cpp"
  c++ -shared -fPIC -O2 -o "$shim.tmp" "$shim_dir/shim.cpp"
  mv "$shim.tmp" "$shim"
fi
export LD_PRELOAD=$shim${LD_PRELOAD:+:$LD_PRELOAD}
export GRADC_TILE_KERNELS=avx2 ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2 OPENBLAS_CORETYPE=Haswell
exec "$@"
