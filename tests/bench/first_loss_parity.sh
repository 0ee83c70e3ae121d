#!/bin/sh
# First-loss parity of the PyTorch benchmark models (bench/pytorch/models.py) with gradc:
# for every model of parity.py (mlp, gpt-mini with dropout 0, lstm-lm, nanogpt-char, ...) at its
# bundled sizes, the same initial weights
# and the same batch give the same loss (1e-5 relative) and the same gradients (1e-4 relative)
# through `gradc grad`, in every PyTorch mode (eager, checkpoint_sequential, per-block
# checkpoint, unrolled LSTM); gradc's own initial parameters have the PyTorch model's names and
# shapes. Usage: first_loss_parity.sh PATH/TO/gradc
# Exit 0: parity; 1: a mismatch; 77 (skipped): /usr/bin/python3 has no torch.
set -eu
gradc=${1:?usage: first_loss_parity.sh PATH/TO/gradc}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
py=/usr/bin/python3
if ! "$py" -c 'import torch' >/dev/null 2>&1; then
  echo "skipped: $py cannot import torch (Debian package python3-torch)"
  exit 77
fi
export OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1
exec "$py" "$root/bench/pytorch/parity.py" --gradc "$gradc"
