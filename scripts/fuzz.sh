#!/usr/bin/env bash
# Runs every fuzz target of the repository for FUZZTIME each (default 30s).
# New failing inputs land in the package's testdata/fuzz/ and fail `make ci`
# until fixed.
set -euo pipefail
cd "$(dirname "$0")/.."
t="${FUZZTIME:-30s}"
grep -rl --include='*_test.go' '^func Fuzz' . | while read -r f; do
  pkg="./$(dirname "${f#./}")"
  for fn in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //'); do
    echo "== $pkg $fn ($t)"
    go test -run '^$' -fuzz "^${fn}\$" -fuzztime "$t" "$pkg"
  done
done
