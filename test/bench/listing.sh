#!/usr/bin/env bash
# Listings of datasets of many small files (docs/benchmarks.md, "Ten
# million files"): what a training job's start costs through the mount.
#
# For each size in FILES (empty files, PER_DIR a directory, names as
# ImageFolder wants them), two sources:
#
#   tmpfs   the dataset on a tmpfs this script mounts (the source costs
#           nothing: what remains is epochfs); the reference "local" is a
#           copy on the local disk (warm in the page cache)
#   pfs     the dataset on the emulated PFS (test/bench/epochs/pfs.sh:
#           sshfs in a network namespace, DELAY_MS each way); "local" is
#           the copy the PFS serves, read directly
#
# and, interleaved over REPS repetitions (the order of the setups turns
# each repetition):
#
#   mount   a first mount on a fresh state (placement.walk = "names", the
#           default): mount-to-usable (the command returns), a job's mkdir
#           (the names numbered; the job is removed at once), walk complete
#           (catalog=ok), daemon RSS per file 12 s after the walk is done
#           and at IDLE_S s, idle; on the PFS, against `find -type f` and
#           `find -type f -printf '%s %T@'` (a stat a file: what the
#           catalog holds), each over a fresh sshfs mount of the same tree,
#           and a walk with stats (placement.walk = "stat") over another:
#           until a job's mkdir returns, and until catalog=ok
#   remount the same state mounted again: mount-to-usable (the command
#           returns), its catalog loaded (catalog=ok), RSS per file (the same
#           two)
#   walks   `ls -R`, `find -type f`, `os.walk` and torchvision's
#           `ImageFolder(root)` construction, each on a freshly remounted
#           mount (first) and again (second: the kernel's cached
#           listings), against the same walk on the source and the local
#           copy
#
# Every figure is a ratio against a run in the same repetition; the report
# gives the median and the range.
#
# Usage: bash test/bench/listing.sh   (as root; bin/epochfs built; make
# bench-deps for sshfs and Debian's torchvision)
# Env: FILES ("1000000"; "1000000 10000000" for the issue's figures; "" skips tmpfs)
#      PFS_FILES ("1000000"; "" skips the PFS) PER_DIR (1000) REPS (3)
#      DELAY_MS (1) RATE (100) TMPFS_SIZE (16g) WALKS ("ls-R find os.walk
#      imagefolder"; "" measures the mount, walk, remount and RSS only and
#      makes no local copy of the tmpfs trees) WORK (/var/tmp/epochfs-listing)
#      OUT (- = stdout) IDLE_S (60: when the idle RSS is read, after the
#      catalog is whole)
#      EPOCHFS (bin/epochfs: another binary to measure)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
FILES=${FILES-1000000}
PFS_FILES=${PFS_FILES-1000000}
PER_DIR=${PER_DIR:-1000}
REPS=${REPS:-3}
DELAY_MS=${DELAY_MS:-1}
IDLE_S=${IDLE_S:-60}
RATE=${RATE:-100}
TMPFS_SIZE=${TMPFS_SIZE:-16g}
WALKS=${WALKS-ls-R find os.walk imagefolder}
WORK=${WORK:-/var/tmp/epochfs-listing}
OUT=${OUT:--}
EPOCHFS=${EPOCHFS:-$ROOT/bin/epochfs}
PY=/usr/bin/python3
export PATH=$PATH:/usr/local/go/bin

log() { echo "listing: $*" >&2; }
[ -x "$EPOCHFS" ] || { log "build bin/epochfs first (make build)"; exit 2; }
"$PY" -c 'import torchvision' 2>/dev/null || { log "no torchvision for $PY: make bench-deps"; exit 2; }
# shellcheck source=epochs/pfs.sh
. "$ROOT/test/bench/epochs/pfs.sh"

RUN=$WORK/run
TMPFS=$WORK/tmpfs
TMPFS_MADE=
MNTS=()
cleanup() {
  local rc=$? m
  for m in "${MNTS[@]}"; do
    grep -q " $m fuse" /proc/mounts && { "$EPOCHFS" unmount "$m" >/dev/null 2>&1 || umount -l "$m" 2>/dev/null || true; }
  done
  pfs_cleanup
  [ -n "$TMPFS_MADE" ] && umount "$TMPFS" 2>/dev/null
  pfs_check_left "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$WORK/bin" "$TMPFS"
go build -o "$WORK/bin/delayproxy" "$ROOT/test/bench/delayproxy"
export PFS_DELAY_MS=$DELAY_MS PFS_DELAY_PROXY=$WORK/bin/delayproxy
mount -t tmpfs -o "size=$TMPFS_SIZE,nr_inodes=0" tmpfs "$TMPFS"
TMPFS_MADE=1

# make_tree DIR N: N empty files, PER_DIR a directory (dNNNN/fNNNNNNNN.jpg).
make_tree() {
  [ -f "$1.complete" ] && return 0
  rm -rf "$1"; log "making $2 files in $1"
  "$PY" - "$1" "$2" "$PER_DIR" <<'EOF'
import os, sys
root, n, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    if i % per == 0:
        d = os.path.join(root, "d%05d" % (i // per))
        os.makedirs(d)
    os.close(os.open(os.path.join(d, "f%08d.jpg" % i), os.O_CREAT | os.O_WRONLY, 0o644))
EOF
  touch "$1.complete"
}

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
stat_of() { "$EPOCHFS" status --raw "$1" | sed -n "s/^$2=//p"; }
rss_of() { awk '/^VmRSS/ { printf "%.0f\n", $2 * 1024 }' "/proc/$1/status"; }
# settled_rss MNT: the daemon's RSS 12 s after the catalog is whole, once
# it has returned the walk's or the load's garbage; idle_rss MNT: its RSS
# at IDLE_S (60) s, once it has been quiet long enough to return what
# the catalog database's compactions left (docs/admin.md).
settled_rss() { sleep 12; rss_of "$(stat_of "$1" pid)"; }
idle_rss() { sleep $((IDLE_S - 12)); rss_of "$(stat_of "$1" pid)"; }
ep_mount() { # SRC MNT STATE [ARGS]
  local src=$1 mnt=$2 state=$3; shift 3
  mkdir -p "$mnt"
  "$EPOCHFS" mount --state "$state" --tier "disk=$state-tier:1GiB" "$@" "$src" "$mnt" >/dev/null 2>&1
  MNTS+=("$mnt")
}
ep_down() { "$EPOCHFS" unmount "$1" >/dev/null; }
wait_walk() { # MNT
  local i
  for i in $(seq 72000); do
    [ "$(stat_of "$1" catalog)" = ok ] && return 0; sleep 0.05
  done
  log "the walk of $1 did not end"; return 1
}
# walk TOOL DIR: seconds and files found, one line.
walk() {
  local t0 out
  case $1 in
  ls-R) t0=$(now); out=$(ls -R "$2" | grep -c '\.jpg$' || true); echo "$(since "$t0") $out" ;;
  find) t0=$(now); out=$(find "$2" -type f -name '*.jpg' | wc -l); echo "$(since "$t0") $out" ;;
  os.walk | imagefolder) "$PY" "$ROOT/test/bench/listing.py" "$1" "$2" ;;
  esac
}

RESULTS=$(mktemp)
emit() { echo "$*" >>"$RESULTS"; }

# bench KIND N SRC LOCAL REP: one repetition over SRC (the mount's source)
# with LOCAL as the local reference.
bench() {
  local kind=$1 n=$2 src=$3 local=$4 rep=$5 mnt=$RUN/mnt state=$RUN/state t0 tmount twalk tfind="null" w s
  local tjobs_stat="null" twalk_stat="null" tfindstat="null" tjobs
  rm -rf "$state" "$state-tier"
  if [ "$kind" = pfs ]; then
    : >"$PFS_DIR/sftp.log"
    # find over a fresh sshfs mount, then the walk over another.
    pfs_unmount "$src" "$SSHFS_PID"; sshfs_up "$local" "$src"
    t0=$(now); find "$src" -type f >/dev/null; tfind=$(since "$t0")
    # What a walk with attributes gathers: a stat a file.
    pfs_unmount "$src" "$SSHFS_PID"; sshfs_up "$local" "$src"
    t0=$(now); find "$src" -type f -printf '%s %T@\n' >/dev/null; tfindstat=$(since "$t0")
    # A walk with stats (placement.walk = "stat") over another: a job's
    # mkdir waits for catalog=ok (the attributes read and the catalog
    # stored).
    pfs_unmount "$src" "$SSHFS_PID"; sshfs_up "$local" "$src"
    rm -rf "$state-stat" "$state-stat-tier"
    t0=$(now); ep_mount "$src" "$mnt" "$state-stat" --config "$WORK/stat.toml"
    mkdir "$mnt/.epochfs/jobs/bench"; tjobs_stat=$(since "$t0")
    wait_walk "$mnt"; twalk_stat=$(since "$t0")
    rmdir "$mnt/.epochfs/jobs/bench"; ep_down "$mnt"
    rm -rf "$state-stat" "$state-stat-tier"
    pfs_unmount "$src" "$SSHFS_PID"; sshfs_up "$local" "$src"
  fi
  t0=$(now); ep_mount "$src" "$mnt" "$state"; tmount=$(since "$t0")
  mkdir "$mnt/.epochfs/jobs/bench"; tjobs=$(since "$t0"); rmdir "$mnt/.epochfs/jobs/bench"
  wait_walk "$mnt"; twalk=$(since "$t0")
  local rss_walk rss_walk_idle; rss_walk=$(settled_rss "$mnt"); rss_walk_idle=$(idle_rss "$mnt")
  ep_down "$mnt"
  t0=$(now); ep_mount "$src" "$mnt" "$state"; local tremount tload; tremount=$(since "$t0")
  wait_walk "$mnt"; tload=$(since "$t0")
  local rss_remount rss_remount_idle; rss_remount=$(settled_rss "$mnt"); rss_remount_idle=$(idle_rss "$mnt")
  emit "{\"case\":\"mount\",\"kind\":\"$kind\",\"files\":$n,\"rep\":$rep,\"mount_s\":$tmount,\"walk_s\":$twalk,\"jobs_s\":$tjobs,\"find_s\":$tfind,\"findstat_s\":$tfindstat,\"stat_jobs_s\":$tjobs_stat,\"stat_walk_s\":$twalk_stat,\"remount_s\":$tremount,\"load_s\":$tload,\"rss_walk\":$rss_walk,\"rss_remount\":$rss_remount,\"rss_walk_idle\":$rss_walk_idle,\"rss_remount_idle\":$rss_remount_idle}"
  for w in $WALKS; do
    # A fresh daemon and kernel state for each tool's first walk, its
    # catalog loaded (as the figures before the load ran in the
    # background were taken).
    ep_down "$mnt"; ep_mount "$src" "$mnt" "$state"; wait_walk "$mnt"
    local order="mnt src local"
    [ $((rep % 2)) = 0 ] && order="local src mnt"
    local first second on_src on_local
    for s in $order; do
      case $s in
      mnt) first=$(walk "$w" "$mnt"); second=$(walk "$w" "$mnt") ;;
      src) on_src=$(walk "$w" "$src") ;;
      local) on_local=$(walk "$w" "$local") ;;
      esac
    done
    set -- $first; local f_s=$1 f_n=$2; set -- $second; local s_s=$1
    set -- $on_src; local src_s=$1 src_n=$2; set -- $on_local; local loc_s=$1
    [ "$f_n" = "$src_n" ] && [ "$f_n" = "$n" ] || { log "$w found $f_n files through the mount, $src_n on the source, want $n"; exit 1; }
    emit "{\"case\":\"walk\",\"kind\":\"$kind\",\"files\":$n,\"rep\":$rep,\"tool\":\"$w\",\"first_s\":$f_s,\"second_s\":$s_s,\"src_s\":$src_s,\"local_s\":$loc_s}"
  done
  ep_down "$mnt"
}

sshfs_up() { pfs_sshfs "$1" "$2"; SSHFS_PID=$PFS_SSHFS_PID; }

[ -n "$PFS_FILES" ] && pfs_setup "$WORK/pfs" "$RATE"
for n in $FILES; do
  make_tree "$TMPFS/src-$n" "$n"
  # The local copy is the walks' reference: without walks (WALKS=""), only
  # the mount, the walk, the remount and RSS are measured.
  if [ -n "$WALKS" ]; then make_tree "$WORK/local-$n" "$n"; fi
done
for n in $PFS_FILES; do make_tree "$WORK/local-$n" "$n"; done
rm -rf "$RUN"; mkdir -p "$RUN"
printf '[placement]\nwalk = "stat"\n' >"$WORK/stat.toml"
for rep in $(seq "$REPS"); do
  for n in $FILES; do
    log "rep $rep/$REPS: tmpfs, $n files"
    bench tmpfs "$n" "$TMPFS/src-$n" "$WORK/local-$n" "$rep"
  done
  for n in $PFS_FILES; do
    log "rep $rep/$REPS: pfs, $n files"
    mkdir -p "$RUN/sshfs"; sshfs_up "$WORK/local-$n" "$RUN/sshfs"
    bench pfs "$n" "$RUN/sshfs" "$WORK/local-$n" "$rep"
    pfs_unmount "$RUN/sshfs" "$SSHFS_PID"
  done
done
[ -n "$PFS_FILES" ] && pfs_cleanup

"$PY" - "$RESULTS" "$DELAY_MS" "$IDLE_S" <<'EOF' | { [ "$OUT" = - ] && cat || tee "$OUT"; }
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def med(xs, f="%.2f"):
    return (f + " (" + f + "-" + f + ")") % (st.median(xs), min(xs), max(xs)) if xs else "-"
for kind in ("tmpfs", "pfs"):
    for n in sorted({r["files"] for r in rows if r["kind"] == kind}):
        m = [r for r in rows if r["case"] == "mount" and r["kind"] == kind and r["files"] == n]
        src = "tmpfs" if kind == "tmpfs" else "the emulated PFS (%s ms each way)" % sys.argv[2]
        print("%d files on %s:" % (n, src))
        print("  mount usable %s s, a job's mkdir %s s, walk complete %s s; remount usable %s s, loaded %s s" % (
            med([r["mount_s"] for r in m]), med([r["jobs_s"] for r in m]), med([r["walk_s"] for r in m]),
            med([r["remount_s"] for r in m]), med([r.get("load_s", r["remount_s"]) for r in m])))
        if kind == "pfs":
            print("  over sshfs, against find -type f (%s s): a job's mkdir %s, walk complete (catalog=ok) %s" % (
                med([r["find_s"] for r in m]), med([r["jobs_s"] / r["find_s"] for r in m]),
                med([r["walk_s"] / r["find_s"] for r in m])))
            print("  walk complete / find -type f -printf '%%s %%T@' (a stat a file, %s s): %s" % (
                med([r["findstat_s"] for r in m]), med([r["walk_s"] / r["findstat_s"] for r in m])))
            print("  placement.walk = \"stat\": a job's mkdir / find -type f %s, catalog=ok / find -type f %s (%s s, %s s)" % (
                med([r["stat_jobs_s"] / r["find_s"] for r in m]), med([r["stat_walk_s"] / r["find_s"] for r in m]),
                med([r["stat_jobs_s"] for r in m]), med([r["stat_walk_s"] for r in m])))
        print("  daemon RSS per file: after the walk %s B, after a remount %s B" % (
            med([r["rss_walk"] / n for r in m], "%.1f"), med([r["rss_remount"] / n for r in m], "%.1f")))
        idle = [r for r in m if "rss_walk_idle" in r]
        if idle:
            print("  daemon RSS per file at %s s, idle: after the walk %s B, after a remount %s B" % (
                sys.argv[3], med([r["rss_walk_idle"] / n for r in idle], "%.1f"),
                med([r["rss_remount_idle"] / n for r in idle], "%.1f")))
        for tool in ("ls-R", "find", "os.walk", "imagefolder"):
            w = [r for r in rows if r["case"] == "walk" and r["kind"] == kind and r["files"] == n and r["tool"] == tool]
            if not w:
                continue
            print("  %-11s first / source %s, / local %s; second / source %s, / local %s (mount %s s, source %s s, local %s s)" % (
                tool, med([r["first_s"] / r["src_s"] for r in w]), med([r["first_s"] / r["local_s"] for r in w]),
                med([r["second_s"] / r["src_s"] for r in w]), med([r["second_s"] / r["local_s"] for r in w]),
                med([r["first_s"] for r in w]), med([r["src_s"] for r in w]), med([r["local_s"] for r in w])))
EOF
