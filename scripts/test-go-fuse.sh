#!/usr/bin/env bash
# go-fuse's own tests in third_party/go-fuse (the patched copy epochfs
# builds with), over /dev/fuse and then over FUSE over io_uring
# (scripts/with-transport.sh). Packages run one at a time: a test compares
# statfs of the backing directory and the mount, which other packages' files
# would change in between.
#
# TestHasAccess is skipped: it assumes a uid other than root and fails as
# root on go-fuse v2.12.1 as released. (TestForget, which gave the kernel's
# FORGETs 10 ms to arrive, waits for them since the series' first patch.)
# TestAbort and TestReconnectByFileHandle
# abort a connection through the fusectl file system, which is mounted for
# the run when it is not (and unmounted after). Needs root.
#
# With --series, the tests run on the release plus each prefix of the patch
# series (scripts/go-fuse-series.sh trees): over /dev/fuse after every
# patch, and over io_uring too after the last (before it there is none).
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
CONN=/sys/fs/fuse/connections
cleanup=()
trap 'for c in "${cleanup[@]}"; do eval "$c"; done' EXIT
if ! mountpoint -q "$CONN"; then
	mount -t fusectl none "$CONN"
	cleanup+=("umount $CONN")
fi

# run DIR MODE: go-fuse's tests in DIR over MODE.
run() {
	echo "== go-fuse's tests in $1 over $2"
	bash scripts/with-transport.sh "$2" sh -c "cd '$1' && $GO test -count=1 -p 1 -skip '^TestHasAccess\$' ./..."
}

if [ "${1:-}" = --series ]; then
	trees=$(mktemp -d)
	cleanup+=("rm -rf $trees")
	bash scripts/go-fuse-series.sh trees "$trees"
	n=$(ls third_party/go-fuse/patches/*.patch | wc -l)
	for ((i = 1; i <= n; i++)); do
		echo "== after patch $i of $n: $(ls third_party/go-fuse/patches/*.patch | sed -n "${i}p" | xargs basename)"
		run "$trees/$i" dev
	done
	run "$trees/$n" io_uring
	echo "go-fuse's tests pass after each of the $n patches"
	exit 0
fi
for mode in dev io_uring; do
	run "$PWD/third_party/go-fuse" "$mode"
done
