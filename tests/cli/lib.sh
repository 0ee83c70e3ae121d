# Shared start of the CLI checks: the gradc binary and source folder from the arguments, a
# scratch folder removed on exit, and the pass/fail counters with ok/bad.
# usage (first lines of a check script): source "$(dirname "$0")/lib.sh" "$@"
set -u
gradc=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAIL: $*"; }
# corpus FILE BYTES: a text corpus, Tiny Shakespeare when the shared data is there, else a
# licence text every Debian system has.
corpus() {
  head -c "$2" "$src/../shared/data/tinyshakespeare.txt" >"$1" 2>/dev/null || head -c "$2" /usr/share/common-licenses/GPL-3 >"$1"
}
# expect_exit2 NAME PATTERN COMMAND...: COMMAND exits 2 with PATTERN (an extended regex) on stderr.
expect_exit2() {
  local name=$1 pattern=$2
  shift 2
  "$@" >"$work/out" 2>"$work/err"
  local rc=$?
  if [ $rc -eq 2 ] && grep -Eq -- "$pattern" "$work/err"; then ok; else bad "$name: exit $rc, $(head -3 "$work/err")"; fi
}
