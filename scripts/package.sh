#!/usr/bin/env bash
# Builds the packages from packaging/nfpm.yaml: dist/epochfs_VERSION_amd64.deb
# and dist/epochfs-VERSION.x86_64.rpm (make package; VERSION from git
# describe, bin/epochfs built by make build with it).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${VERSION:?VERSION is not set (make package sets it)}"
GO=${GO:-go}
stage=build/pkg
rm -rf "$stage"
mkdir -p "$stage/bin" "$stage/slurm" "$stage/doc" dist
# The packaged binary: position-independent, stripped (a panic still shows
# its stack: Go keeps the line tables), no build paths in it.
: "${LDFLAGS:?LDFLAGS is not set (make package sets it)}"
"$GO" build -trimpath -buildmode=pie -ldflags "-s -w $LDFLAGS" -o "$stage/bin/epochfs" ./cmd/epochfs
[ "$("$stage/bin/epochfs" version | head -1)" = "epochfs $VERSION" ] || { echo "package: the binary is not version $VERSION" >&2; exit 1; }
# The manual and the completion scripts, from the binary's command tree.
"$stage/bin/epochfs" gen-docs --docs docs "$stage/man"
gzip -9n "$stage"/man/man*/*
# The Slurm settings name the packaged binary.
sed 's|^EPOCHFS=/usr/local/bin/epochfs$|EPOCHFS=/usr/bin/epochfs|' contrib/slurm/epochfs.env >"$stage/slurm/epochfs.env"
grep -q '^EPOCHFS=/usr/bin/epochfs$' "$stage/slurm/epochfs.env" || { echo "package: contrib/slurm/epochfs.env sets no EPOCHFS=/usr/local/bin/epochfs to replace" >&2; exit 1; }
cp README.md CHANGELOG.md docs/*.md "$stage/doc/"
rm "$stage/doc/mount.epochfs.md" # the man page's source
# Debian's changelog: one entry for the build (what changed is CHANGELOG.md).
date=$(date -u -R -d "@${SOURCE_DATE_EPOCH:-$(date +%s)}")
maint=$(sed -n 's/^maintainer: //p' packaging/nfpm.yaml)
printf 'epochfs (%s) unstable; urgency=medium\n\n  * Built from %s; the changes are in /usr/share/doc/epochfs/CHANGELOG.md.\n\n -- %s  %s\n' \
	"$VERSION" "$(git rev-parse --short HEAD 2>/dev/null || echo "a source tree")" "$maint" "$date" | gzip -9n >"$stage/changelog.gz"
# The packager, pinned in tools/go.mod.
(cd tools && "$GO" build -o ../bin/nfpm github.com/goreleaser/nfpm/v2/cmd/nfpm)
export VERSION
deb="dist/epochfs_${VERSION}_amd64.deb" rpm="dist/epochfs-${VERSION}.x86_64.rpm"
# Only this build's packages in dist/ (make test-package installs the one .deb there).
rm -f dist/epochfs_*_amd64.deb dist/epochfs-*.x86_64.rpm
bin/nfpm package --config packaging/nfpm.yaml --packager deb --target "$deb" >/dev/null
bin/nfpm package --config packaging/nfpm.yaml --packager rpm --target "$rpm" >/dev/null
echo "$deb"
echo "$rpm"
