#!/usr/bin/env bash
# Static checks beyond go vet: staticcheck, deadcode (no function that
# nothing, tests included, reaches), and sizecheck (no file over 600 lines
# and no function over 100 without a reason written: scripts/sizecheck).
# staticcheck and deadcode are pinned and built from the Go module proxy
# into bin/tools on first use.
#
# Usage: bash scripts/lint.sh   (from the repository root; make lint)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
STATICCHECK=honnef.co/go/tools/cmd/staticcheck@v0.8.2
DEADCODE=golang.org/x/tools/cmd/deadcode@v0.52.0
tools=$PWD/bin/tools
mkdir -p "$tools"
install() { # name module@version
  local stamp="$tools/.$1-${2##*@}"
  if [ ! -x "$tools/$1" ] || [ ! -e "$stamp" ]; then
    echo "lint: installing $2"
    # Outside the module: the tools' dependencies are not ours.
    (cd "$tools" && GOBIN="$tools" GOFLAGS= go install "$2")
    rm -f "$tools/.$1-"*
    touch "$stamp"
  fi
}
install staticcheck "$STATICCHECK"
install deadcode "$DEADCODE"

echo "lint: staticcheck"
"$tools/staticcheck" ./...
echo "lint: skips"
bash scripts/check-skips.sh
echo "lint: sizecheck"
go run ./scripts/sizecheck
echo "lint: deadcode"
# A function only tests reach is still reached (-test): the ones reported
# are reached by nothing. third_party is another module's code.
out=$("$tools/deadcode" -test ./... | grep -v '^third_party/' || true)
if [ -n "$out" ]; then
  echo "$out"
  echo "lint: unreachable functions above: delete them (or use them)"
  exit 1
fi
