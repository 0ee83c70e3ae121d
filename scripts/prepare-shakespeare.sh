#!/usr/bin/env bash
# Splits Tiny Shakespeare as nanoGPT's data/shakespeare_char/prepare.py does: the first 90% of the
# characters (n = int(len * 0.9), the same double arithmetic as Python's) for training, the rest
# for validation, byte for byte. gradc reads the text itself (--vocab chars), so nothing is
# tokenised here.
#
# usage: scripts/prepare-shakespeare.sh [SRC]
#   SRC  the corpus (default ../shared/data/tinyshakespeare.txt, relative to the repository root)
# writes data/shakespeare/train.txt and data/shakespeare/val.txt (ignored by git), and prints the
# sizes, each split's distinct characters, and any character of val that train lacks (gradc's
# --vocab chars takes the training file's distinct bytes, so such a character could not be
# evaluated).
#
# The input must be ASCII: nanoGPT splits by Unicode characters and gradc's vocabulary is made of
# bytes, and the two only agree (as they do for Tiny Shakespeare) when every character is a byte.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=${1:-$(dirname "$root")/shared/data/tinyshakespeare.txt}
out=$root/data/shakespeare

die() { echo "prepare-shakespeare: $*" >&2; exit 2; }
[ $# -le 1 ] || die "usage: scripts/prepare-shakespeare.sh [SRC]"
[ -f "$src" ] && [ -r "$src" ] || die "no readable file '$src' (pass the corpus as the argument)"
size=$(wc -c <"$src")
[ "$size" -gt 0 ] || die "'$src' is empty"
nonascii=$(LC_ALL=C tr -d '\000-\177' <"$src" | wc -c)
[ "$nonascii" -eq 0 ] || die "'$src' has $nonascii bytes outside ASCII: a split by characters would differ from one by bytes"

train_bytes=$(awk -v n="$size" 'BEGIN { printf "%d\n", int(n * 0.9) }')
val_bytes=$((size - train_bytes))

mkdir -p "$out"
# Written beside the destination and renamed, so an interrupted run leaves no half-written split.
head -c "$train_bytes" "$src" >"$out/.train.txt.part"
tail -c "$val_bytes" "$src" >"$out/.val.txt.part"
cat "$out/.train.txt.part" "$out/.val.txt.part" | cmp -s - "$src" || die "the two parts do not add up to '$src'"
mv "$out/.train.txt.part" "$out/train.txt"
mv "$out/.val.txt.part" "$out/val.txt"

# The distinct byte values of a file, one decimal code a line, in comm's (C locale) order.
chars() { od -An -v -tu1 "$1" | tr -s ' ' '\n' | sed '/^$/d' | LC_ALL=C sort -u; }
show() { while read -r c; do printf '%q ' "$(printf "\\$(printf '%03o' "$c")")"; done; }
chars "$out/train.txt" >"$out/.train.chars"
chars "$out/val.txt" >"$out/.val.chars"
missing=$(LC_ALL=C comm -13 "$out/.train.chars" "$out/.val.chars" | sort -n)
echo "source:  $src ($size bytes, $(chars "$src" | wc -l) distinct characters)"
echo "train:   $out/train.txt ($train_bytes bytes, $(wc -l <"$out/.train.chars") distinct characters)"
echo "val:     $out/val.txt ($val_bytes bytes, $(wc -l <"$out/.val.chars") distinct characters)"
if [ -n "$missing" ]; then
  echo "warning: val has characters train lacks (codes $(echo $missing)): $(echo "$missing" | show)" >&2
else
  echo "every character of val appears in train"
fi
rm -f "$out/.train.chars" "$out/.val.chars"
