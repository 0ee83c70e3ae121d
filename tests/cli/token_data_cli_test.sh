#!/usr/bin/env bash
# Token files from the command line: nanoGPT's raw uint16 .bin (--vocab-size N) and llm.c's .bin
# (recognised by its header) feed the same batches for the same ids; --sampling random resumes
# bit for bit; gradc eval reads a token file with the vocabulary stored in the weights; bad files
# and ids outside the vocabulary are exit 2 with the reason.
# usage: token_data_cli_test.sh PATH/TO/gradc SOURCE_DIR
source "$(dirname "$0")/lib.sh" "$@"
py=/usr/bin/python3
spec=$src/models/gpt-mini.yaml
small=(--set layers=1 --set d_model=64 --set heads=2 --set seq=32 --set batch=4)
corpus "$work/corpus.txt" 100000
# The corpus's characters as ids, written as nanoGPT's prepare.py and llm.c write them.
$py - "$work/corpus.txt" "$work" <<'PY'
import struct, sys
text = open(sys.argv[1], "rb").read()
chars = sorted(set(text))
ids = [chars.index(c) for c in text]
body = struct.pack("<%dH" % len(ids), *ids)
open(sys.argv[2] + "/raw.bin", "wb").write(body)
open(sys.argv[2] + "/llmc.bin", "wb").write(struct.pack("<256i", 20240520, 1, len(ids), *[0] * 253) + body)
open(sys.argv[2] + "/vocab.txt", "w").write(str(len(chars)))
open(sys.argv[2] + "/odd.bin", "wb").write(body[:1001])
open(sys.argv[2] + "/short.bin", "wb").write(struct.pack("<256i", 20240520, 1, len(ids), *[0] * 253) + body[:4000])
PY
vocab=$(cat "$work/vocab.txt")
train() { timeout 300 "$gradc" train "$spec" "${small[@]}" "$@"; }
first_loss() { $py -c 'import json,sys; print(json.load(open(sys.argv[1]))["steps"][0]["loss"])' "$1"; }

train --data "$work/raw.bin" --vocab-size "$vocab" --steps 6 --metrics-out "$work/raw.json" >"$work/log" 2>&1 && ok ||
  bad "nanoGPT .bin: $(tail -2 "$work/log")"
$py -c 'import json,sys; s=json.load(open(sys.argv[1]))["steps"]; assert s[-1]["loss"] < s[0]["loss"], s' "$work/raw.json" && ok ||
  bad "the loss falls on a token file"
# llm.c's file, recognised without --vocab-size: the same ids, the same batches, the same loss.
train --data "$work/llmc.bin" --steps 1 --metrics-out "$work/llmc.json" >"$work/log" 2>&1 && ok ||
  bad "llm.c .bin: $(tail -2 "$work/log")"
[ "$(first_loss "$work/raw.json")" = "$(first_loss "$work/llmc.json")" ] && ok ||
  bad "the two formats give different first losses: $(first_loss "$work/raw.json") vs $(first_loss "$work/llmc.json")"

# --sampling random: 3 steps, then 3 more from the checkpoint, equal the 6 straight.
random=(--data "$work/raw.bin" --vocab-size "$vocab" --sampling random)
train "${random[@]}" --steps 6 --save "$work/r6" >/dev/null 2>&1
train "${random[@]}" --steps 3 --save "$work/r3" >/dev/null 2>&1
train "${random[@]}" --steps 6 --resume "$work/r3" --save "$work/r3b" >"$work/log" 2>&1 &&
  cmp -s "$work/r6/weights.safetensors" "$work/r3b/weights.safetensors" && ok ||
  bad "--sampling random does not resume bit for bit: $(tail -2 "$work/log")"
# gradc eval: the vocabulary comes with the weights.
timeout 120 "$gradc" eval "$spec" "${small[@]}" --weights "$work/r6" --data "$work/raw.bin" >"$work/eval.txt" 2>&1 &&
  grep -q "^loss " "$work/eval.txt" && ok || bad "eval on a token file: $(tail -2 "$work/eval.txt")"

expect_error() { expect_exit2 "$1" "$2" train "${@:3}"; }
expect_error "other sampling on resume" "trained with --sampling random; resume it with the same" \
  --data "$work/raw.bin" --vocab-size "$vocab" --steps 6 --resume "$work/r3"
expect_error "odd length" "odd length \(1001 bytes\)" --data "$work/odd.bin" --vocab-size "$vocab" --steps 1
expect_error "llm.c count" "its header counts [0-9]+ tokens, but 4000 bytes follow it" --data "$work/short.bin" --steps 1
expect_error "id outside the vocabulary" "holds token [0-9]+ \(in the batch of step 1\), outside its vocabulary of 3 " \
  --data "$work/raw.bin" --vocab-size 3 --steps 1
expect_error "both vocabularies" "excludes" --data "$work/raw.bin" --vocab-size "$vocab" --vocab chars --steps 1
expect_error "vocabulary too large for the model" "has 5000 symbols, but tokens feed embedding" \
  --data "$work/raw.bin" --vocab-size 5000 --steps 1

echo "token data cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
