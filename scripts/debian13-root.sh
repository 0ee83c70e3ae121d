#!/usr/bin/env bash
# A Debian 13 ("trixie") root made only of Debian's archive, with the CUDA build of LibTorch 2.6
# (libtorch-cuda-dev, contrib), the CUDA 12.4 toolkit (nvidia-cuda-toolkit, non-free) and NCCL
# (libnccl-dev, contrib): the configuration gradc's CUDA device links against, on a machine
# without a GPU (scripts/debian13-build.sh builds and checks gradc in it). With LLVM 19, yaml-cpp,
# glog and Python's torch, the whole of gradc and its test suite build there too (--suite).
#
#   scripts/debian13-root.sh [ROOT]      (ROOT defaults to /var/cache/gradc/trixie-root)
#
# Kept outside the clone and reused: a root whose marker file names this script's package list
# is left as it is; otherwise it is made again from nothing (about 4 minutes and 4 GB of
# downloads here, 11 GB installed).
#
# One package cannot install offline: `nvidia-cudnn` is an installer that downloads cuDNN from
# NVIDIA. The root gets a stand-in package of that name (empty, so apt's dependency holds) and a
# stand-in libcudnn.so.9 in /usr/local/lib that defines, under the soname's symbol version,
# every cuDNN function LibTorch imports: each returns a failure status (the error string
# function says what it is). It lets gradc link and load; nothing here can reach cuDNN, since
# the CUDA runtime finds no device first. A GPU machine uses its own cuDNN.
set -euo pipefail
# debootstrap, chroot and mount need root: as another user, the script runs itself with sudo.
[[ $(id -u) -eq 0 ]] || exec sudo -E "$0" "$@"
ROOT=${1:-/var/cache/gradc/trixie-root}
MIRROR=${GRADC_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PACKAGES="g++ g++-13 cmake ninja-build ccache libtorch-cuda-dev nvidia-cuda-toolkit libnccl-dev \
libgloo-cuda-dev libdnnl-dev libcli11-dev nlohmann-json3-dev libfmt-dev doctest-dev libopenblas0-openmp \
llvm-19-dev libyaml-cpp-dev libgoogle-glog-dev python3 python3-numpy python3-torch-cuda"
MARKER="$ROOT/etc/gradc-root"
WANT="trixie: $PACKAGES; cudnn stand-in 2"

if [[ -f "$MARKER" && "$(cat "$MARKER")" == "$WANT" ]]; then
  echo "debian13-root: $ROOT is ready (reused)"
  exit 0
fi

mounted=()
unmount_all() {
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
}
trap unmount_all EXIT

# Exit 3: this machine cannot make the root (no debootstrap, no archive, no mounts, no room);
# what the root's builds find wrong exits 1 (scripts/debian13-build.sh).
cannot() {
  echo "debian13-root: cannot make the root on this machine: $1" >&2
  exit 3
}

start=$(date +%s)
mkdir -p "$(dirname "$ROOT")" || cannot "cannot create $(dirname "$ROOT")"
free_kib=$(df -Pk "$(dirname "$ROOT")" | awk 'NR == 2 {print $4}')
(( free_kib > 16 * 1024 * 1024 )) || cannot "it needs 16 GiB free under $(dirname "$ROOT"), $((free_kib / 1024)) MiB are"
command -v debootstrap > /dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap > /dev/null ||
  cannot "debootstrap is not installed and apt-get could not install it"
if [[ -e "$ROOT" ]]; then
  # A root left by an older package list or an interrupted run: nothing in it is gradc's to keep.
  for m in "$ROOT/proc" "$ROOT/dev" "$ROOT/src"; do umount -l "$m" 2>/dev/null || true; done
  if grep -q " $ROOT/" /proc/mounts; then
    echo "debian13-root: something is still mounted under $ROOT; not removing it" >&2
    exit 2
  fi
  rm -rf --one-file-system "$ROOT"
fi
debootstrap --variant=minbase --components=main,contrib,non-free trixie "$ROOT" "$MIRROR" > /dev/null ||
  cannot "debootstrap of trixie from $MIRROR failed"

{ mount --bind /dev "$ROOT/dev" && mounted+=("$ROOT/dev"); } || cannot "mount --bind is not permitted"
{ mount -t proc proc "$ROOT/proc" && mounted+=("$ROOT/proc"); } || cannot "mounting /proc is not permitted"

# The stand-in for the cuDNN downloader (see above), installed before anything depends on it.
pkg=$(mktemp -d)
mkdir -p "$pkg/DEBIAN"
cat > "$pkg/DEBIAN/control" << 'EOF'
Package: nvidia-cudnn
Version: 9.0.0.312~cuda12+offline1
Architecture: amd64
Maintainer: gradc build root <root@localhost>
Description: offline stand-in for the cuDNN downloader
 The real package downloads cuDNN from NVIDIA when it installs.
EOF
dpkg-deb --build "$pkg" "$ROOT/tmp/nvidia-cudnn-offline.deb" > /dev/null
rm -rf "$pkg"
chroot "$ROOT" dpkg -i /tmp/nvidia-cudnn-offline.deb > /dev/null

chroot "$ROOT" env DEBIAN_FRONTEND=noninteractive apt-get update -q > /dev/null || cannot "apt-get update in the root failed"
# shellcheck disable=SC2086
chroot "$ROOT" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q -o Dpkg::Use-Pty=0 --no-install-recommends $PACKAGES > /dev/null ||
  cannot "apt-get install in the root failed"
chroot "$ROOT" apt-get clean

# The stand-in libcudnn.so.9: every cudnn* symbol libtorch_cuda and libtorch_python (Python's
# torch, which the test suite's parity scripts import) import, at version libcudnn.so.9.
chroot "$ROOT" bash -euo pipefail -c '
  work=$(mktemp -d)
  for lib in /usr/lib/x86_64-linux-gnu/libtorch_cuda.so /usr/lib/x86_64-linux-gnu/libtorch_python.so; do
    nm -D --undefined-only "$(readlink -f "$lib")" | sed -n "s/^ *U \(cudnn[A-Za-z0-9_]*\)@libcudnn\.so\.9$/\1/p"
  done | sort -u > "$work/names"
  {
    echo "/* Stand-in cuDNN for a build root without a GPU: every function fails. */"
    echo "static const char kWhat[] = \"cuDNN stand-in of the gradc build root: no cuDNN here\";"
    while read -r name; do
      case "$name" in
        cudnnGetErrorString) echo "const char* $name(int s) { (void)s; return kWhat; }" ;;
        cudnnGetVersion|cudnnGetCudartVersion|cudnnGetMaxDeviceVersion) echo "unsigned long $name(void) { return 0; }" ;;
        *) echo "int $name(void) { return 1001; }" ;;  # CUDNN_STATUS_NOT_INITIALIZED (cuDNN 9)
      esac
    done < "$work/names"
  } > "$work/cudnn_stub.c"
  echo "libcudnn.so.9 { global: *; };" > "$work/cudnn.map"
  gcc -shared -fPIC -O1 -o /usr/local/lib/libcudnn.so.9 -Wl,-soname,libcudnn.so.9 \
      -Wl,--version-script="$work/cudnn.map" "$work/cudnn_stub.c"
  ln -sf libcudnn.so.9 /usr/local/lib/libcudnn.so
  ldconfig
  echo "debian13-root: cuDNN stand-in with $(wc -l < "$work/names") functions"
  rm -rf "$work"
'
echo "$WANT" > "$MARKER"
echo "debian13-root: $ROOT made in $(( $(date +%s) - start )) s"
