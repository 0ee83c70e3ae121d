#!/usr/bin/env bash
# Fine-tuning from the command line: gradc train --init-from a checkpoint folder or a weights
# file starts from exactly those parameters (a run at a learning rate too small to move them
# saves the same bytes) with the checkpoint's vocabulary, and a missing, extra, mis-shaped or
# integer tensor is exit 2 naming it; --init-from with --resume is refused.
# usage: init_from_cli_test.sh PATH/TO/gradc SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"
py=/usr/bin/python3
spec=$src/models/gpt-mini.yaml
small=(--set layers=1 --set d_model=64 --set heads=2 --set seq=32 --set batch=4)
corpus "$work/corpus.txt" 200000

train() { timeout 300 "$gradc" train "$spec" "${small[@]}" --data "$work/corpus.txt" --vocab chars "$@"; }
expect_error() { expect_exit2 "$1" "$2" train "${@:3}"; }

train --steps 4 --save "$work/base" >"$work/log" 2>&1 && ok || bad "base run: $(tail -2 "$work/log")"
# Folder and file: the parameters are the base's, bit for bit, and the optimizer starts afresh.
for from in "$work/base" "$work/base/weights.safetensors"; do
  rm -rf "$work/tuned"
  if train --steps 1 --lr 1e-30 --init-from "$from" --save "$work/tuned" >"$work/log" 2>&1 &&
    cmp -s "$work/base/weights.safetensors" "$work/tuned/weights.safetensors"; then ok
  else bad "--init-from $from: weights not the base's: $(tail -2 "$work/log")"; fi
done
# The first loss is the base's model's, not a fresh one's.
train --steps 1 --metrics-out "$work/fresh.json" >/dev/null 2>&1
train --steps 1 --init-from "$work/base" --metrics-out "$work/tuned.json" >/dev/null 2>&1
if $py - "$work/fresh.json" "$work/tuned.json" <<'PY'; then ok; else bad "fine-tuned first loss"; fi
import json, sys
fresh, tuned = (json.load(open(p))["steps"][0]["loss"] for p in sys.argv[1:])
assert tuned < fresh - 0.1, (fresh, tuned)  # 4 steps of training: 0.27 (a licence text) to 1.0 (Shakespeare)
PY

# Strict loading: files edited from the base's weights.
edit() {  # edit OUT ACTION NAME: drop | rename | add (a copy) | reshape | integer the tensor NAME
  $py - "$work/base/weights.safetensors" "$@" <<'PY'
import json, struct, sys
src, out, action, name = sys.argv[1:]
raw = open(src, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
meta = header.pop("__metadata__", None)
tensors = {}
for key, e in header.items():
    tensors[key] = [e["dtype"], e["shape"], data[e["data_offsets"][0]:e["data_offsets"][1]]]
if action == "drop":
    del tensors[name]
elif action == "rename":
    tensors[name + ".extra"] = tensors.pop(name)
elif action == "add":
    tensors[name + ".copy"] = list(tensors[name])
elif action == "reshape":
    dtype, shape, payload = tensors[name]
    tensors[name] = [dtype, [shape[0] * shape[1]] + shape[2:], payload]
elif action == "integer":
    tensors[name][0] = "I32"
body, new = b"", {}
for key, (dtype, shape, payload) in tensors.items():
    new[key] = {"dtype": dtype, "shape": shape, "data_offsets": [len(body), len(body) + len(payload)]}
    body += payload
if meta is not None:
    new["__metadata__"] = meta
head = json.dumps(new).encode()
head += b" " * (-len(head) % 8)
open(out, "wb").write(struct.pack("<Q", len(head)) + head + body)
PY
}
edit "$work/dropped.safetensors" drop blocks.0.ln1.weight
expect_error "missing tensor" "no tensor 'blocks.0.ln1.weight', which the model needs" --steps 1 \
  --init-from "$work/dropped.safetensors"
edit "$work/renamed.safetensors" rename blocks.0.fc1.bias
expect_error "renamed tensor" "no tensor 'blocks.0.fc1.bias'" --steps 1 --init-from "$work/renamed.safetensors"
edit "$work/extra.safetensors" add blocks.0.fc1.bias
expect_error "extra tensor" "'blocks.0.fc1.bias.copy' \(\[256\]\) is not a parameter of this model" --steps 1 \
  --init-from "$work/extra.safetensors"
edit "$work/reshaped.safetensors" reshape blocks.0.fc1.weight
expect_error "mis-shaped tensor" "'blocks.0.fc1.weight' is \[16384\], the model needs f32\[256, 64\]" --steps 1 \
  --init-from "$work/reshaped.safetensors"
edit "$work/integer.safetensors" integer blocks.0.ln1.bias
expect_error "integer tensor" "'blocks.0.ln1.bias' holds Int values" --steps 1 --init-from "$work/integer.safetensors"
expect_error "not there" "init-from" --steps 1 --init-from "$work/none.safetensors"
expect_error "with --resume" "excludes" --steps 5 --init-from "$work/base" --resume "$work/base"

echo "init-from cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
