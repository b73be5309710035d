#!/usr/bin/env bash
# The first minute and the first epoch over a latency-bound source.
#
# A dataset of small files sits on an emulated PFS (test/bench/epochs/pfs.sh:
# sshd in a network namespace, sshfs through test/bench/delayproxy, DELAY_MS
# each way, RATE MB/s). Every figure is a ratio against a reference run in the
# same script, interleaved over REPS repetitions; the report gives the median
# and the spread:
#
#   epoch1     cat of every file over epochfs on a fresh state vs cat over
#              sshfs directly (both on a fresh sshfs mount); also the source
#              operations per file, counted at the server (sftp-server's log)
#              and by epochfs (source_opens, source_stats)
#   remount    the first epoch after an unmount and a remount of the same
#              state (the per-job prolog/epilog) vs a later epoch of that
#              mount; source metadata requests of that first epoch
#   lsl        ls -lR of the mount vs of sshfs and of a local copy; the
#              GETXATTR requests it sent (go-fuse's counters in status)
#   walk       mount-to-ready, mount-to-first-read and mount-to-walk-complete
#              for WALK_FILES empty files vs find over sshfs (set WALK_FILES=
#              "" to skip; 200000 1000000 for the issue's figures)
#   rss        daemon RSS after copying every file vs after a remount of the
#              same catalog, per file
#
# Usage: bash test/bench/firstepoch.sh   (as root; bin/epochfs built)
# Env: FILES (4000) SIZE (8192 bytes) DELAY_MS (1) RATE (100) REPS (3)
#      WALK_FILES ("200000") WORK (/var/tmp/epochfs-firstepoch) OUT (- = stdout)
#      EPOCHFS (bin/epochfs: another binary to measure, e.g. one built from an
#      earlier commit)
#      ONLY_WALK=1 skips the epoch figures; ORDERS ("path shuffled") the
#      readers' orders; FILL_AFTER sets placement.fill_after (default: the
#      config's)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
FILES=${FILES:-4000}
SIZE=${SIZE:-8192}
DELAY_MS=${DELAY_MS:-1}
RATE=${RATE:-100}
REPS=${REPS:-3}
WALK_FILES=${WALK_FILES-200000}
WORK=${WORK:-/var/tmp/epochfs-firstepoch}
OUT=${OUT:--}
EPOCHFS=${EPOCHFS:-$ROOT/bin/epochfs}
export PATH=$PATH:/usr/local/go/bin

log() { echo "firstepoch: $*" >&2; }
[ -x "$EPOCHFS" ] || { log "build bin/epochfs first (make build)"; exit 2; }
# shellcheck source=epochs/pfs.sh
. "$ROOT/test/bench/epochs/pfs.sh"

RUN=$WORK/run
MNTS=()
PIDS=()
cleanup() {
  local rc=$? m
  for m in "${MNTS[@]}"; do
    grep -q " $m fuse" /proc/mounts && { "$EPOCHFS" unmount "$m" >/dev/null 2>&1 || umount -l "$m" 2>/dev/null || true; }
  done
  pfs_cleanup
  pfs_check_left "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$WORK/bin"
go build -o "$WORK/bin/delayproxy" "$ROOT/test/bench/delayproxy"
export PFS_DELAY_MS=$DELAY_MS PFS_DELAY_PROXY=$WORK/bin/delayproxy

# ---- datasets -----------------------------------------------------------------
DS=$WORK/ds-$FILES-$SIZE
if [ ! -f "$DS.complete" ]; then
  rm -rf "$DS"; log "making $FILES files of $SIZE bytes in $DS"
  /usr/bin/python3 - "$DS" "$FILES" "$SIZE" <<'EOF'
import os, sys
root, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    d = os.path.join(root, "c%03d" % (i % 100))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "s%07d.bin" % i), "wb") as f:
        f.write(os.urandom(size))
EOF
  touch "$DS.complete"
fi
walk_ds() { # N: a tree of N empty files, 1000 per directory
  local d=$WORK/walk-$1
  if [ ! -f "$d.complete" ]; then
    rm -rf "$d"; log "making $1 empty files in $d"
    /usr/bin/python3 - "$d" "$1" <<'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    d = os.path.join(root, "d%04d" % (i // 10000), "e%02d" % (i // 1000 % 10))
    if i % 1000 == 0:
        os.makedirs(d, exist_ok=True)
    open(os.path.join(d, "f%07d" % i), "wb").close()
EOF
    touch "$d.complete"
  fi
  echo "$d"
}

# ---- helpers -------------------------------------------------------------------
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
catall() { # DIR [ORDER]: read every file, one reader, in path order or shuffled (the same order in both setups)
  if [ "${2:-path}" = shuffled ]; then
    (cd "$1" && find . -type f -not -path './.epochfs/*' -print0 | sort -z | shuf -z --random-source=<(yes) | xargs -0 cat >/dev/null)
  else
    (cd "$1" && find . -type f -not -path './.epochfs/*' -print0 | sort -z | xargs -0 cat >/dev/null)
  fi
}
counter() { pfs_counters | sed -n "s/^$1=//p"; }
stat_of() { "$EPOCHFS" status --raw "$1" | sed -n "s/^$2=//p"; }
sshfs_up() { pfs_sshfs "$1" "$2"; SSHFS_PID=$PFS_SSHFS_PID; }
sshfs_down() { pfs_unmount "$1" "$SSHFS_PID"; }
ep_mount() { # SRC MNT STATE [ARGS]
  local src=$1 mnt=$2 state=$3; shift 3
  mkdir -p "$mnt"
  local cfg=()
  if [ -n "${FILL_AFTER:-}" ]; then
    printf '[placement]\nfill_after = %d\n' "$FILL_AFTER" >"$WORK/fill.toml"
    cfg=(--config "$WORK/fill.toml")
  fi
  "$EPOCHFS" mount "${cfg[@]}" --state "$state" --tier "disk=$state-tier:8GiB" "$@" "$src" "$mnt" >/dev/null
  MNTS+=("$mnt")
}
ep_down() { "$EPOCHFS" unmount "$1" >/dev/null; }
rss_of() { awk '/^VmRSS/ { printf "%.0f\n", $2 * 1024 }' "/proc/$1/status"; }
pid_of() { stat_of "$1" pid; }

RESULTS=$(mktemp)
emit() { echo "$*" >>"$RESULTS"; }

pfs_setup "$WORK/pfs" "$RATE"
for rep in $(seq "$REPS"); do
  log "rep $rep/$REPS"
  rm -rf "$RUN"; mkdir -p "$RUN"
  # -- epoch 1: sshfs directly vs epochfs on a fresh state (order alternates),
  # a reader in path order (read ahead), then a shuffled one
  orders=${ORDERS:-path shuffled}
  [ -n "${ONLY_WALK:-}" ] && orders=
  for order in $orders; do
  for setup in $( [ $((rep % 2)) = 1 ] && echo "direct epochfs" || echo "epochfs direct"); do
    drop_caches; : >"$PFS_DIR/sftp.log"
    sshfs_up "$DS" "$RUN/sshfs"
    if [ "$setup" = direct ]; then
      t0=$(now); catall "$RUN/sshfs" "$order"; t=$(since "$t0")
      emit "{\"case\":\"epoch1\",\"order\":\"$order\",\"setup\":\"direct\",\"rep\":$rep,\"s\":$t,\"sftp_opens\":$(counter sftp_opens),\"sftp_meta\":$(counter sftp_meta)}"
    else
      rm -rf "$RUN/state" "$RUN/state-tier"
      ep_mount "$RUN/sshfs" "$RUN/mnt" "$RUN/state"
      o0=$(counter sftp_opens) m0=$(counter sftp_meta)
      t0=$(now); catall "$RUN/mnt" "$order"; t=$(since "$t0")
      emit "{\"case\":\"epoch1\",\"order\":\"$order\",\"setup\":\"epochfs\",\"rep\":$rep,\"s\":$t,\"sftp_opens\":$(( $(counter sftp_opens) - o0 )),\"sftp_meta\":$(( $(counter sftp_meta) - m0 )),\"source_opens\":$(stat_of "$RUN/mnt" source_opens),\"source_stats\":$(stat_of "$RUN/mnt" source_stats)}"
      if [ "$order" = shuffled ]; then
        ep_down "$RUN/mnt"; sshfs_down "$RUN/sshfs"; continue
      fi
      # -- let the copies finish, then RSS after copying vs after a remount
      for _ in $(seq 600); do
        [ "$(stat_of "$RUN/mnt" files_resident)" = "$FILES" ] && break; sleep 0.1
      done
      sleep 12 # the daemon returns a burst's freed memory within 10 s of its end
      rss_copy=$(rss_of "$(pid_of "$RUN/mnt")")
      # -- a later epoch of the same mount
      drop_caches; t0=$(now); catall "$RUN/mnt"; later=$(since "$t0")
      ep_down "$RUN/mnt"
      # -- the next job: remount the same state, first epoch
      drop_caches; : >"$PFS_DIR/sftp.log"
      ep_mount "$RUN/sshfs" "$RUN/mnt" "$RUN/state"
      rss_remount=$(rss_of "$(pid_of "$RUN/mnt")")
      t0=$(now); catall "$RUN/mnt"; first=$(since "$t0")
      meta_first=$(counter sftp_meta) stats_first=$(stat_of "$RUN/mnt" source_stats)
      # -- a later epoch of the remounted mount (the same daemon and tier
      # layout as its first epoch)
      drop_caches; t0=$(now); catall "$RUN/mnt"; later2=$(since "$t0")
      emit "{\"case\":\"remount\",\"setup\":\"epochfs\",\"rep\":$rep,\"first_s\":$first,\"later_s\":$later,\"later2_s\":$later2,\"sftp_meta\":$meta_first,\"source_stats\":$stats_first,\"rss_copy\":$rss_copy,\"rss_remount_load\":$rss_remount,\"rss_remount\":$(rss_of "$(pid_of "$RUN/mnt")")}"
      # -- ls -lR: the mount, sshfs, a local copy
      x0=$(stat_of "$RUN/mnt" xattr_requests)
      drop_caches; t0=$(now); ls -lR "$RUN/mnt" >/dev/null; tm=$(since "$t0")
      x1=$(stat_of "$RUN/mnt" xattr_requests)
      drop_caches; t0=$(now); ls -lR "$RUN/sshfs" >/dev/null; ts=$(since "$t0")
      drop_caches; t0=$(now); ls -lR "$DS" >/dev/null; tl=$(since "$t0")
      emit "{\"case\":\"lsl\",\"rep\":$rep,\"epochfs_s\":$tm,\"sshfs_s\":$ts,\"local_s\":$tl,\"getxattr\":$(( x1 - x0 ))}"
      ep_down "$RUN/mnt"
    fi
    sshfs_down "$RUN/sshfs"
  done
  done
  # -- the walk: mount-to-ready, -to-first-read, -to-walk-complete vs find
  for n in $WALK_FILES; do
    wd=$(walk_ds "$n")
    drop_caches; sshfs_up "$wd" "$RUN/wsshfs"
    t0=$(now); find "$RUN/wsshfs" >/dev/null; tf=$(since "$t0")
    sshfs_down "$RUN/wsshfs"
    drop_caches; sshfs_up "$wd" "$RUN/wsshfs"
    rm -rf "$RUN/wstate" "$RUN/wstate-tier"
    t0=$(now); ep_mount "$RUN/wsshfs" "$RUN/wmnt" "$RUN/wstate"; tready=$(since "$t0")
    head -c1 "$RUN/wmnt/d0000/e00/f0000000" >/dev/null; tfirst=$(since "$t0")
    for _ in $(seq 36000); do
      [ "$(stat_of "$RUN/wmnt" catalog)" != walking ] && break; sleep 0.05
    done
    tdone=$(since "$t0")
    ep_down "$RUN/wmnt"
    sshfs_down "$RUN/wsshfs"
    # The same walk with the mount waiting for it (--wait-walk: as every
    # first mount did before the background walk).
    drop_caches; sshfs_up "$wd" "$RUN/wsshfs"
    rm -rf "$RUN/wstate" "$RUN/wstate-tier"
    t0=$(now); ep_mount "$RUN/wsshfs" "$RUN/wmnt" "$RUN/wstate" --wait-walk 2>/dev/null; twait=$(since "$t0")
    ep_down "$RUN/wmnt"
    sshfs_down "$RUN/wsshfs"
    emit "{\"case\":\"walk\",\"files\":$n,\"rep\":$rep,\"find_s\":$tf,\"ready_s\":$tready,\"first_read_s\":$tfirst,\"walked_s\":$tdone,\"wait_walk_s\":$twait}"
  done
done
pfs_cleanup

/usr/bin/python3 - "$RESULTS" "$FILES" "$DELAY_MS" <<'EOF' | { [ "$OUT" = - ] && cat || tee "$OUT"; }
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
files, delay = int(sys.argv[2]), sys.argv[3]
def med(xs):
    return "%.2f (%.2f-%.2f)" % (st.median(xs), min(xs), max(xs)) if xs else "-"
def pick(case, setup=None):
    return [r for r in rows if r["case"] == case and (setup is None or r.get("setup") == setup)]
print("first epoch, %d files, %s ms each way:" % (files, delay))
for order in ("path", "shuffled"):
    d = [r for r in pick("epoch1", "direct") if r.get("order", "path") == order]
    e = [r for r in pick("epoch1", "epochfs") if r.get("order", "path") == order]
    if d and e:
        ratios = [b["s"] / a["s"] for a, b in zip(sorted(d, key=lambda r: r["rep"]), sorted(e, key=lambda r: r["rep"]))]
        print("  epoch 1, one reader in %s order, over epochfs / over sshfs directly: %s (sshfs %s s)" % (
            order, med(ratios), med([a["s"] for a in d])))
d = [r for r in pick("epoch1", "direct") if r.get("order", "path") == "path"]
e = [r for r in pick("epoch1", "epochfs") if r.get("order", "path") == "path"]
if d and e:
    print("  per file, at the server: sshfs opens %s meta %s; epochfs opens %s meta %s" % (
        med([r["sftp_opens"] / files for r in d]), med([r["sftp_meta"] / files for r in d]),
        med([r["sftp_opens"] / files for r in e]), med([r["sftp_meta"] / files for r in e])))
    print("  per file, epochfs status: source_opens %s source_stats %s" % (
        med([r["source_opens"] / files for r in e]), med([r["source_stats"] / files for r in e])))
r = pick("remount")
if r:
    print("  next job (remount), first epoch / a later epoch of the first mount: %s (%s s / %s s); / the remounted mount's second epoch: %s (%s s); source metadata requests of its first epoch: server %s, source_stats %s" % (
        med([x["first_s"] / x["later_s"] for x in r]), med([x["first_s"] for x in r]), med([x["later_s"] for x in r]),
        med([x["first_s"] / x["later2_s"] for x in r]), med([x["later2_s"] for x in r]),
        med([x["sftp_meta"] for x in r]), med([x["source_stats"] for x in r])))
    print("  RSS after copying / after a remount: %s; per file after copying %s B, after a remount %s B" % (
        med([x["rss_copy"] / x["rss_remount"] for x in r]), med([x["rss_copy"] / files for x in r]),
        med([x["rss_remount"] / files for x in r])))
l = pick("lsl")
if l:
    print("  ls -lR: epochfs / sshfs %s, epochfs / local %s; xattr requests in all %s" % (
        med([x["epochfs_s"] / x["sshfs_s"] for x in l]), med([x["epochfs_s"] / x["local_s"] for x in l]),
        med([x["getxattr"] for x in l])))
for n in sorted({x["files"] for x in pick("walk")}):
    w = [x for x in pick("walk") if x["files"] == n]
    print("walk of %d files: find %s s; mount ready %s s, first read %s s, walk complete %s s (%s x find); mount --wait-walk %s s (%s x find)" % (
        n, med([x["find_s"] for x in w]), med([x["ready_s"] for x in w]), med([x["first_read_s"] for x in w]),
        med([x["walked_s"] for x in w]), med([x["walked_s"] / x["find_s"] for x in w]),
        med([x["wait_walk_s"] for x in w]), med([x["wait_walk_s"] / x["find_s"] for x in w])))
EOF
rm -f "$RESULTS"
