#!/usr/bin/env bash
# gradc sample: text from a trained character model, the prompt first, exactly N tokens more,
# the same text for the same seed; refused for a model that is not a language model, a prompt
# outside the vocabulary and weights trained on token ids.
# usage: sample_cli_test.sh PATH/TO/gradc SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"
py=/usr/bin/python3
spec=$src/models/gpt-mini.yaml
small=(--set layers=1 --set d_model=64 --set heads=2 --set seq=32 --set batch=8)
corpus "$work/corpus.txt" 100000
timeout 300 "$gradc" train "$spec" "${small[@]}" --data "$work/corpus.txt" --vocab chars --steps 30 --lr 3e-3 \
  --save "$work/ck" >"$work/log" 2>&1 && ok || bad "train: $(tail -2 "$work/log")"
sample() { timeout 120 "$gradc" sample "$spec" "${small[@]}" --weights "$work/ck" "$@"; }
sample --prompt "Th" --tokens 50 --seed 1 --top-k 5 >"$work/a.txt" 2>"$work/err" && ok || bad "sample: $(tail -2 "$work/err")"
sample --prompt "Th" --tokens 50 --seed 1 --top-k 5 >"$work/b.txt" 2>/dev/null
sample --prompt "Th" --tokens 50 --seed 2 --temperature 1.5 >"$work/c.txt" 2>/dev/null
cmp -s "$work/a.txt" "$work/b.txt" && ok || bad "the same seed gave another text"
cmp -s "$work/a.txt" "$work/c.txt" && bad "another seed and temperature gave the same text" || ok
# Fused attention (the default) and its decomposition draw the same text here.
sample --prompt "Th" --tokens 50 --seed 1 --top-k 5 --no-fuse >"$work/d.txt" 2>/dev/null
cmp -s "$work/a.txt" "$work/d.txt" && ok || bad "--no-fuse gave another text: $(head -c 80 "$work/d.txt")"
if $py - "$work/a.txt" "$work/corpus.txt" <<'PY'; then ok; else bad "the sample's shape: $(head -c 100 "$work/a.txt")"; fi
import sys
text = open(sys.argv[1], "rb").read()
assert text.startswith(b"Th") and text.endswith(b"\n"), text[:20]
assert len(text) == 2 + 50 + 1, len(text)
assert set(text[2:-1]) <= set(open(sys.argv[2], "rb").read()), "a byte outside the vocabulary"
PY
# The weights file alone carries the vocabulary too.
timeout 120 "$gradc" sample "$spec" "${small[@]}" --weights "$work/ck/weights.safetensors" --prompt "Th" --tokens 50 \
  --seed 1 --top-k 5 >"$work/d.txt" 2>/dev/null && cmp -s "$work/a.txt" "$work/d.txt" && ok \
  || bad "sampling from the weights file differs from the folder"
expect_exit2 "not a language model" "needs a language model" timeout 60 "$gradc" sample "$src/models/mlp.yaml" \
  --weights "$work/ck"
expect_exit2 "prompt outside the vocabulary" "--prompt: byte 126 at offset 1 is not in the weights' vocabulary" \
  sample --prompt "T~" --tokens 3
expect_exit2 "bad temperature" "temperature" sample --temperature 0
printf '\x01\x00\x02\x00\x03\x00\x01\x00\x02\x00\x03\x00\x01\x00\x02\x00' >"$work/t.bin"
for i in $(seq 8); do cat "$work/t.bin" "$work/t.bin" >"$work/t2.bin"; mv "$work/t2.bin" "$work/t.bin"; done
timeout 300 "$gradc" train "$spec" "${small[@]}" --data "$work/t.bin" --vocab-size 4 --steps 1 --save "$work/tk" \
  >"$work/log" 2>&1 || bad "train on a token file: $(tail -2 "$work/log")"
expect_exit2 "token-id weights" "trained on token ids \(tokens:4" timeout 60 "$gradc" sample "$spec" "${small[@]}" \
  --weights "$work/tk"

echo "sample cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
