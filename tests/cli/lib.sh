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
