#!/usr/bin/env bash
# A refresh of a large directory (docs/benchmarks.md, "A refresh that adds
# files"): `epochfs refresh` of one directory of FILES empty files on a
# tmpfs, with nothing changed (the reference: the scan itself), then with
# ADD files added to it, then with those removed (--allow-drop), each
# binary on a fresh state in turn (EPOCHFS, and BASE when set), REPS times.
# The report gives each refresh's time, median (min-max), and its ratio to
# the reference refresh of the same mount.
#
# Usage: bash test/bench/refresh.sh   (as root; bin/epochfs built)
# Env: FILES (500000) ADD (5000) REPS (3) BASE (another binary to compare)
#      EPOCHFS (bin/epochfs) WORK (/var/tmp/epochfs-refresh) OUT (- = stdout)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
FILES=${FILES:-500000}
ADD=${ADD:-5000}
REPS=${REPS:-3}
BASE=${BASE:-}
EPOCHFS=${EPOCHFS:-$ROOT/bin/epochfs}
WORK=${WORK:-/var/tmp/epochfs-refresh}
OUT=${OUT:--}

log() { echo "refresh: $*" >&2; }
[ -x "$EPOCHFS" ] || { log "build bin/epochfs first (make build)"; exit 2; }
[ -z "$BASE" ] || [ -x "$BASE" ] || { log "BASE=$BASE is not an executable"; exit 2; }

TMPFS=$WORK/tmpfs
MNT=$WORK/mnt
TMPFS_MADE=
cleanup() {
  if grep -q " $MNT fuse" /proc/mounts; then
    "$EPOCHFS" unmount "$MNT" >/dev/null 2>&1 || umount -l "$MNT" 2>/dev/null || true
  fi
  [ -n "$TMPFS_MADE" ] && umount "$TMPFS" 2>/dev/null
  if grep -q " $WORK/" /proc/mounts; then log "a mount under $WORK is left"; fi
  return 0
}
trap cleanup EXIT
mkdir -p "$TMPFS" "$MNT"
mount -t tmpfs -o size=4g,nr_inodes=0 tmpfs "$TMPFS"
TMPFS_MADE=1
SRC=$TMPFS/src
mkdir -p "$SRC/flat"
log "making $FILES files in one directory"
# Empty files, named in order: what a refresh's scan of the directory reads.
make_files() { # dir prefix count
  local d=$1 p=$2 n=$3 i
  (cd "$d" && for ((i = 0; i < n; i += 10000)); do
    seq -f "$p%09.0f" "$i" "$((i + 10000 < n ? i + 9999 : n - 1))" | xargs touch
  done)
}
make_files "$SRC/flat" f "$FILES"
printf '[placement]\nrefresh_rate = 1000000\n' >"$WORK/config.toml"

now() { date +%s.%N; }
# refresh BIN [ARGS]: the seconds one `epochfs refresh` takes.
refresh() {
  local bin=$1 t0
  shift
  t0=$(now)
  "$bin" refresh "$@" "$MNT" >"$WORK/refresh.out" 2>&1 || { log "refresh failed: $(cat "$WORK/refresh.out")"; exit 1; }
  awk -v a="$(now)" -v b="$t0" 'BEGIN { printf "%.3f\n", a - b }'
}

RESULTS=$WORK/results
: >"$RESULTS"
bins=("$EPOCHFS")
[ -n "$BASE" ] && bins+=("$BASE")
for rep in $(seq "$REPS"); do
  for b in "${bins[@]}"; do
    name=new
    [ "$b" = "$BASE" ] && name=base
    rm -rf "$WORK/state" "$WORK/tier"
    "$b" mount --config "$WORK/config.toml" --state "$WORK/state" --tier "disk=$WORK/tier:1GiB" "$SRC" "$MNT" >/dev/null
    until [ "$("$b" status --raw "$MNT" | sed -n 's/^catalog=//p')" = ok ]; do sleep 0.5; done
    ref=$(refresh "$b")
    make_files "$SRC/flat" n "$ADD"
    add=$(refresh "$b")
    grep -q " $ADD added" "$WORK/refresh.out" || { log "$name: the refresh did not add $ADD: $(cat "$WORK/refresh.out")"; exit 1; }
    find "$SRC/flat" -name 'n*' -delete
    rm_=$(refresh "$b" --allow-drop)
    grep -q " $ADD removed" "$WORK/refresh.out" || { log "$name: the refresh did not remove $ADD: $(cat "$WORK/refresh.out")"; exit 1; }
    "$b" unmount "$MNT" >/dev/null
    log "rep $rep $name: nothing changed $ref s, $ADD added $add s, removed $rm_ s"
    echo "$name $ref $add $rm_" >>"$RESULTS"
  done
done

report() {
  python3 - "$RESULTS" "$FILES" "$ADD" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
files, add = sys.argv[2], sys.argv[3]
print("refresh of one directory of %s files (tmpfs), %s added then removed; seconds, median (min-max)" % (files, add))
def fmt(xs):
    return "%.2f (%.2f-%.2f)" % (statistics.median(xs), min(xs), max(xs))
for name in ("new", "base"):
    rs = [r for r in rows if r[0] == name]
    if not rs:
        continue
    ref = [float(r[1]) for r in rs]
    add_ = [float(r[2]) for r in rs]
    rm = [float(r[3]) for r in rs]
    print("  %-4s nothing changed %s; added %s, x%s of nothing changed; removed %s, x%s" % (
        name, fmt(ref), fmt(add_), fmt([a / r for a, r in zip(add_, ref)]),
        fmt(rm), fmt([a / r for a, r in zip(rm, ref)])))
PY
}
if [ "$OUT" = - ]; then report; else report | tee "$OUT"; fi
