#!/usr/bin/env bash
# third_party/go-fuse is go-fuse v2.12.1 as released plus the patch series
# third_party/go-fuse/patches/*.patch, applied in order, and nothing else.
# Needs no network: the released module is rebuilt by reverting the series
# from the copy, and it must have the release's module hash (go.sum's h1:).
#
#   bash scripts/go-fuse-series.sh check        every patch reverts from the
#        copy and applies to the release in order; the copy is the release
#        plus the series; after each patch `go build` passes for linux,
#        freebsd and darwin and `go vet` finds nothing the release does not
#        (make vet runs it)
#   bash scripts/go-fuse-series.sh trees DIR    the release and the tree
#        after each patch, as DIR/0 .. DIR/N
#   bash scripts/go-fuse-series.sh write N      rewrite patch N from the
#        copy: the copy's edits since the last commit belong to patch N (its
#        message and author are kept; later patches must still apply)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
GO=${GO:-go}
MOD=github.com/hanwen/go-fuse/v2
VER=v2.12.1
# The module hash of $MOD@$VER, as in go.sum and sum.golang.org.
SUM=h1:b6NXOPCraS9NvN4vtHZXDN1nsNKdoDlyafWxWnuO30Q=
DIR=third_party/go-fuse
# Files of ours in the directory, not part of the module.
OURS=(README.epochfs.md patches)
OSES=(linux freebsd darwin)

say() { echo "go-fuse-series: $*" >&2; }
die() { say "$*"; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mapfile -t PATCHES < <(cd "$DIR/patches" && ls -1 *.patch | LC_ALL=C sort)
[ ${#PATCHES[@]} -gt 0 ] || die "no patches in $DIR/patches"

# modhash DIR: the h1: hash of the module in DIR (golang.org/x/mod's
# dirhash.Hash1 over every file, named MOD@VER/PATH).
modhash() {
	(cd "$1" && find . -type f | sed 's|^\./||' | LC_ALL=C sort | while IFS= read -r f; do
		printf '%s  %s\n' "$(sha256sum <"$f" | cut -d' ' -f1)" "$MOD@$VER/$f"
	done) | sha256sum | cut -d' ' -f1 | perl -ne 'chomp; print pack("H*", $_)' | base64 | sed 's/^/h1:/'
}

# copy_tree SRC DST: the module files of SRC (ours left out), writable.
copy_tree() {
	mkdir -p "$2"
	(cd "$1" && tar cf - --exclude=./README.epochfs.md --exclude=./patches .) | (cd "$2" && tar xf -)
	chmod -R u+w "$2"
}

# apply DIR PATCH [-R]: apply (or revert) one patch exactly.
apply() {
	(cd "$1" && git apply --whitespace=nowarn ${3:-} "$ROOT/$DIR/patches/$2") ||
		die "$2 does not $([ -n "${3:-}" ] && echo revert from || echo apply to) $1"
}

# release SRC DST PATCHDIR: revert every patch of PATCHDIR from SRC into
# DST, which must then be the release.
release() {
	copy_tree "$1" "$2"
	local i
	for ((i = ${#PATCHES[@]} - 1; i >= 0; i--)); do
		(cd "$2" && git apply --whitespace=nowarn -R "$3/${PATCHES[i]}") ||
			die "${PATCHES[i]} does not revert from the copy (the copy is not the release plus the series)"
	done
	local got
	got=$(modhash "$2")
	[ "$got" = "$SUM" ] || die "the copy without the series is not $MOD@$VER (module hash $got, want $SUM)"
}

# trees DST: DST/0 the release, DST/k the release plus patches 1..k.
trees() {
	release "$DIR" "$1/0" "$ROOT/$DIR/patches"
	local i
	for ((i = 0; i < ${#PATCHES[@]}; i++)); do
		cp -r "$1/$i" "$1/$((i + 1))"
		apply "$1/$((i + 1))" "${PATCHES[i]}"
	done
	copy_tree "$DIR" "$tmp/copy"
	diff -r "$1/${#PATCHES[@]}" "$tmp/copy" >"$tmp/diff.txt" ||
		{ head -40 "$tmp/diff.txt" >&2; die "the release plus the series differs from $DIR"; }
}

# vetted TREE OS: the findings of go build (every package) and go vet (the
# packages the series changes) in TREE for OS, one per line, the tree's path
# taken out. -trimpath lets the trees share the build cache.
vetted() {
	(
		cd "$1"
		export GOOS=$2 GOFLAGS="-mod=mod -trimpath"
		$GO build ./... 2>&1 || true
		$GO vet ./fuse/... ./fs/... 2>&1 || true
	) | sed -e '/^#/d' -e "s|$1/||" | LC_ALL=C sort -u
}

check() {
	trees "$tmp/t"
	local os i new
	for os in "${OSES[@]}"; do
		vetted "$tmp/t/0" "$os" >"$tmp/vet0.$os"
		for ((i = 1; i <= ${#PATCHES[@]}; i++)); do
			new=$(vetted "$tmp/t/$i" "$os" | LC_ALL=C comm -13 "$tmp/vet0.$os" -)
			[ -z "$new" ] || die "GOOS=$os after ${PATCHES[i - 1]}: go build or go vet finds what the release does not:
$new"
		done
	done
	say "$DIR is $MOD@$VER plus ${#PATCHES[@]} patches; each applies in order and builds and vets clean for ${OSES[*]}"
}

# write N: rewrite patch N from the working copy.
write() {
	local n=$1 i
	[[ $n =~ ^[0-9]+$ ]] && ((n >= 1 && n <= ${#PATCHES[@]})) || die "write: no patch $n (1..${#PATCHES[@]})"
	local name=${PATCHES[n - 1]}
	# The release, from the committed copy and series.
	git archive HEAD "$DIR" | tar xf - -C "$tmp"
	mv "$tmp/$DIR" "$tmp/committed"
	release "$tmp/committed" "$tmp/a" "$tmp/committed/patches"
	for ((i = 0; i < n - 1; i++)); do apply "$tmp/a" "${PATCHES[i]}"; done
	# The working copy without the patches after N.
	copy_tree "$DIR" "$tmp/b"
	for ((i = ${#PATCHES[@]} - 1; i >= n; i--)); do apply "$tmp/b" "${PATCHES[i]}" -R; done
	# Patch N is the difference, with its message and author.
	git mailinfo "$tmp/msg" /dev/null <"$DIR/patches/$name" >"$tmp/info"
	local author email subject date
	author=$(sed -n 's/^Author: //p' "$tmp/info")
	date=$(sed -n 's/^Date: //p' "$tmp/info")
	email=$(sed -n 's/^Email: //p' "$tmp/info")
	subject=$(sed -n 's/^Subject: //p' "$tmp/info")
	local g=(git -C "$tmp/a" -c user.name="$author" -c user.email="$email" -c core.autocrlf=false)
	"${g[@]}" init -q && "${g[@]}" add -A && "${g[@]}" commit -q -m base
	find "$tmp/a" -mindepth 1 -maxdepth 1 ! -name .git -exec rm -rf {} +
	cp -r "$tmp/b/." "$tmp/a/"
	"${g[@]}" add -A
	{ echo "$subject"; echo; cat "$tmp/msg"; } | "${g[@]}" commit -q --author="$author <$email>" --date="$date" -F -
	"${g[@]}" format-patch -q --no-signature --zero-commit -N --stdout -1 HEAD >"$DIR/patches/$name"
	say "wrote $DIR/patches/$name"
}

case "${1:-check}" in
check) check ;;
trees) [ -n "${2:-}" ] || die "trees: name a directory"; mkdir -p "$2"; trees "$(realpath "$2")" ;;
write) write "${2:-}" ;;
*) die "unknown command ${1}: check, trees DIR or write N" ;;
esac
