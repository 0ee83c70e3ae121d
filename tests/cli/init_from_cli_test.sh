#!/usr/bin/env bash
# Fine-tuning from the command line: gradc train --init-from a checkpoint folder or a weights
# file starts from exactly those parameters (a run at a learning rate too small to move them
# saves the same bytes) with the checkpoint's vocabulary, and a missing, extra, mis-shaped or
# integer tensor is exit 2 naming it; --init-from with --resume is refused.
# GPT-2 weights go to Hugging Face layout and back (scripts/gpt2_to_hf.py) and fine-tune from there.
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

# GPT-2's weights through Hugging Face's names and layouts and back (scripts/gpt2_to_hf.py): the
# round trip is exact, and the converted-back file fine-tunes models/gpt2.yaml strictly, from the
# loss the original weights give.
tiny=(--set layers=2 --set d_model=64 --set heads=2 --set context=32 --set vocab=256 --set batch=2)
gpt2() { timeout 300 "$gradc" train "$src/models/gpt2.yaml" "${tiny[@]}" --synthetic --steps 1 -q "$@"; }
gpt2 --save "$work/g2" --metrics-out "$work/g2.json" 2>"$work/err" || bad "gpt2: $(tail -2 "$work/err")"
/usr/bin/python3 "$src/scripts/gpt2_to_hf.py" "$work/g2/weights.safetensors" "$work/hf.safetensors" &&
  /usr/bin/python3 "$src/scripts/gpt2_to_hf.py" --reverse "$work/hf.safetensors" "$work/back.safetensors" && ok ||
  bad "gpt2_to_hf.py there and back"
gpt2 --init-from "$work/back.safetensors" --metrics-out "$work/back.json" 2>"$work/err" && ok ||
  bad "--init-from the converted weights: $(tail -2 "$work/err")"
gpt2 --init-from "$work/g2" --metrics-out "$work/orig.json" 2>"$work/err" || bad "--init-from g2: $(tail -2 "$work/err")"
/usr/bin/python3 - "$work/back.json" "$work/orig.json" "$work/hf.safetensors" <<'PY' && ok || bad "the round trip"
import json, sys
a, b = (json.load(open(p))["steps"][0]["loss"] for p in sys.argv[1:3])
assert a == b, (a, b)
import struct
head = open(sys.argv[3], "rb")
n = struct.unpack("<Q", head.read(8))[0]
names = json.loads(head.read(n))
assert "lm_head.weight" in names and "transformer.h.1.attn.c_attn.weight" in names, sorted(names)[:5]
assert names["transformer.h.0.attn.c_attn.weight"]["shape"] == [64, 192], names["transformer.h.0.attn.c_attn.weight"]
PY

echo "init-from cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
