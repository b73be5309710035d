#!/usr/bin/env bash
# with-transport.sh dev|io_uring COMMAND...: runs COMMAND with every new FUSE
# mount on the given transport, by setting the fuse module's enable_uring
# (N for dev, Y for io_uring) for the run and setting it back after it, and
# exports EPOCHFS_TEST_TRANSPORT so that the mount tests check each mount's
# transport. make ci runs the tests once per transport.
#
# A kernel without FUSE over io_uring has only dev: an io_uring run is then
# skipped, and fails instead when EPOCHFS_REQUIRE_FUSE=1 (CI). Needs root to
# change the parameter.
set -euo pipefail
mode=${1:-}
shift || true
case $mode in
dev) want=N ;;
io_uring) want=Y ;;
*)
	echo "usage: with-transport.sh dev|io_uring COMMAND..." >&2
	exit 2
	;;
esac
[ $# -gt 0 ] || { echo "usage: with-transport.sh dev|io_uring COMMAND..." >&2; exit 2; }
PARAM=/sys/module/fuse/parameters/enable_uring
[ -e "$PARAM" ] || modprobe fuse 2>/dev/null || true
export EPOCHFS_TEST_TRANSPORT=$mode
if [ ! -e "$PARAM" ] && [ "$mode" = dev ]; then
	exec "$@" # this kernel has no FUSE over io_uring: every mount is dev
fi
if [ ! -w "$PARAM" ]; then
	msg="with-transport: cannot set $PARAM (no FUSE over io_uring in this kernel, or not root)"
	if [ "$mode" = io_uring ] && [ "${EPOCHFS_REQUIRE_FUSE:-}" != 1 ]; then
		echo "$msg: the $mode run is skipped" >&2
		exit 0
	fi
	echo "$msg" >&2
	exit 1
fi
orig=$(cat "$PARAM")
trap 'echo "$orig" >"$PARAM"' EXIT
echo "$want" >"$PARAM"
echo "with-transport: $mode run ($PARAM=$want, was $orig)" >&2
"$@"
