#!/usr/bin/env bash
# third_party/go-fuse must be go-fuse v2.12.1 as released plus
# third_party/go-fuse/epochfs.patch, and nothing else: apply the patch to the
# released module (from the Go module proxy) and compare every file.
#
#   bash scripts/check-go-fuse-patch.sh           check (make vet runs it)
#   bash scripts/check-go-fuse-patch.sh --write   regenerate epochfs.patch
#                                                 from third_party/go-fuse
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
GO=${GO:-go}
MOD=github.com/hanwen/go-fuse/v2
VER=v2.12.1
DIR=third_party/go-fuse
PATCH=$DIR/epochfs.patch
# Files of ours in the directory, not part of the module.
OURS=(README.epochfs.md epochfs.patch)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# A throwaway module, so that the download touches neither go.mod nor go.sum.
(cd "$tmp" && $GO mod init check >/dev/null 2>&1 && $GO mod download -json "$MOD@$VER" >dl.json)
released=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' "$tmp/dl.json")
[ -d "$released" ] || { echo "check-go-fuse-patch: cannot download $MOD@$VER" >&2; exit 1; }
mkdir "$tmp/a" "$tmp/b"
cp -r "$released/." "$tmp/a/"
cp -r "$DIR/." "$tmp/b/"
for f in "${OURS[@]}"; do rm -f "$tmp/b/$f"; done
chmod -R u+w "$tmp/a" "$tmp/b"

if [ "${1:-}" = --write ]; then
	# The difference as git sees it, in a throwaway repository.
	g=(git -C "$tmp/w" -c user.name=check -c user.email=check@localhost -c core.autocrlf=false)
	cp -r "$tmp/a" "$tmp/w"
	"${g[@]}" init -q && "${g[@]}" add -A && "${g[@]}" commit -q -m released
	rm -rf "$tmp/w"/* && cp -r "$tmp/b/." "$tmp/w/"
	"${g[@]}" add -A
	"${g[@]}" diff --cached --binary >"$ROOT/$PATCH"
	echo "wrote $PATCH ($(grep -c '^diff --git' "$ROOT/$PATCH") files)"
	exit 0
fi

cd "$tmp/a"
git apply --whitespace=nowarn "$ROOT/$PATCH"
cd "$tmp"
if ! diff -r a b >"$tmp/diff.txt"; then
	echo "check-go-fuse-patch: $DIR differs from $MOD@$VER plus $PATCH:" >&2
	head -40 "$tmp/diff.txt" >&2
	echo "(regenerate the patch with: bash scripts/check-go-fuse-patch.sh --write)" >&2
	exit 1
fi
echo "check-go-fuse-patch: $DIR is $MOD@$VER plus $PATCH ($(grep -c '^diff --git' "$ROOT/$PATCH") files)"
