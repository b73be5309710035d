#!/usr/bin/env bash
# Epoch benchmarks: training through epochfs against its peers over an
# emulated slow PFS, then (full run only) the read-path and preprocessing
# benchmarks when they are present.
#
#   make bench          full set (~40-60 min on 2 cores)
#   make bench-quick    QUICK=1: small dataset, one repetition (a few minutes)
#
# The emulated PFS is real sshd + sshfs in a network namespace whose loopback
# has a tc tbf rate limit (test/bench/epochs/pfs.sh). Setups, run side by side
# in one invocation, each for 3 epochs and REPS times, in an order rotated per
# repetition:
#   pfs            the reader straight on the sshfs mount
#   epochfs-disk   epochfs over the sshfs mount, one tier on local disk
#   epochfs-shm    the same, one tier on /dev/shm
#   epochfs-2tier  (tier holds ~50 % case) mem=/dev/shm + disk, half each
#   rclone         rclone mount --vfs-cache-mode full over the same sshd
#                  (sftp backend), cache size = the epochfs tier quota
#   local          a local copy made beforehand with cp -r (copy time kept)
# Cases: "fits" (tier quota 1.25x the dataset) and "half" (quota 50 %). The
# dataset is far smaller than RAM here; in "half" the page cache is dropped
# between epochs too (outside the timed epochs), as on a node whose RAM does
# not hold the dataset, else the kernel's page cache of the mount would serve
# the non-resident half from memory.
# Readers: train.py (torchvision ImageFolder + DataLoader, decode +
# RandomResizedCrop + flip) on the JPEG tree, shardread (Go, raw) on the
# WebDataset-style tar shards of the same samples, and raw (readpath epochs:
# RAW_READERS Go readers, each JPEG read whole in a new random order every
# epoch, the page cache dropped before each epoch) on the JPEG tree.
# Every run starts cold: fresh tier / cache / state, fresh sshfs or rclone
# mount, `echo 3 > /proc/sys/vm/drop_caches`.
#
# Results: WORK/results-*.jsonl (one line per run), then
# test/bench/epochs/report.py regenerates the section between
# <!-- epochs:begin --> and <!-- epochs:end --> in docs/benchmarks.md and
# docs/bench-epoch-*.png. Everything this script mounts or starts is undone on
# exit (trap EXIT): mounts, daemons, sshd, the network namespace, tier dirs.
#
# Environment: QUICK=1; WORK (/var/tmp/epochfs-bench-epochs); FILES (4000,
# quick 1200); REPS (3, quick 1); TORCH_RATES (MB/s of the PFS for the torch
# reader, "20"; quick "20"); SHARD_RATES ("50 200"; quick "50"); CASES
# ("fits half"); RAW_RATES (MB/s of the PFS for the raw reader, "50");
# RAW_READERS (8); SAMPLER_BUFFER (epochfs [sampler] buffer, "1GiB" = the
# default; it serves registered jobs only); DROP_HALF (1: drop caches between epochs in "half"); READERS ("torch shards"); WORKERS (DataLoader workers and
# shard readers, 2); ONLY=epochs skips the read-path and preprocessing
# benchmarks; OUT (docs/benchmarks.md, "-" to skip the report); PFS_DELAY_MS
# (0: a delay added to each direction of the sshfs connection by
# test/bench/delayproxy; rclone is not delayed); SETUPS (the setups of every
# case instead of the defaults; "epochfs-jobs" = the disk tier read in the
# order of an epochfs job through docs/examples/epochfs_sampler.py).
# Needs root, ip/tc/nsenter, sshd, sshfs, rclone, Debian python3-torch,
# python3-torchvision, python3-matplotlib (make bench-deps).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
HERE=$ROOT/test/bench/epochs
export PATH=$PATH:/usr/local/go/bin
QUICK=${QUICK:-}
WORK=${WORK:-/var/tmp/epochfs-bench-epochs}
if [ -n "$QUICK" ]; then
  FILES=${FILES:-1200}; REPS=${REPS:-1}; TORCH_RATES=${TORCH_RATES:-20}; SHARD_RATES=${SHARD_RATES:-50}
  SHARD_BYTES=${SHARD_BYTES:-16MiB}
else
  FILES=${FILES:-4000}; REPS=${REPS:-3}; TORCH_RATES=${TORCH_RATES:-20}; SHARD_RATES=${SHARD_RATES:-50 200}
  SHARD_BYTES=${SHARD_BYTES:-64MiB}
fi
CLASSES=${CLASSES:-100}
SEED=${SEED:-1}
EPOCHS=${EPOCHS:-3}
WORKERS=${WORKERS:-2}
CASES=${CASES:-fits half}
READERS=${READERS:-torch shards}
RAW_RATES=${RAW_RATES:-50}
RAW_READERS=${RAW_READERS:-8}
VALIDATE=${VALIDATE:-once}
DROP_HALF=${DROP_HALF:-1}
ONLY=${ONLY:-}
PFS_DELAY_MS=${PFS_DELAY_MS:-0}
SETUPS=${SETUPS:-}
OUT=${OUT:-$ROOT/docs/benchmarks.md}
PY=/usr/bin/python3
EPOCHFS=$WORK/bin/epochfs   # a copy of bin/epochfs taken at the start (others may rebuild it)
SAMPLER_BUFFER=${SAMPLER_BUFFER:-1GiB}
RUN=$WORK/run
SHM=/dev/shm/epochfs-bench-$$
RESULTS=$WORK/results-$(date +%Y%m%d-%H%M%S).jsonl
EPOCHFS_MNT= EPOCHFS_PID=

log() { echo "bench: $(date +%H:%M:%S) $*" >&2; }
die() { log "$*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (network namespace, drop_caches, mounts)"
for t in ip tc nsenter sshd sshfs rclone ssh-keygen; do
  command -v "$t" >/dev/null || die "$t missing: run make bench-deps"
done
$PY -c 'import torch, torchvision, matplotlib' 2>/dev/null || die "Debian python3-torch/torchvision/matplotlib missing: run make bench-deps"
[ -x "$ROOT/bin/epochfs" ] || die "$ROOT/bin/epochfs missing: run make build"

source "$HERE/pfs.sh"

epochfs_down() {
  if [ -n "$EPOCHFS_MNT" ] && grep -q " $EPOCHFS_MNT fuse" /proc/mounts; then
    "$EPOCHFS" unmount "$EPOCHFS_MNT" >/dev/null 2>&1 || umount -l "$EPOCHFS_MNT" 2>/dev/null || true
  fi
  if [ -n "$EPOCHFS_PID" ]; then
    local i
    for i in $(seq 100); do kill -0 "$EPOCHFS_PID" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$EPOCHFS_PID" 2>/dev/null && { log "epochfs daemon $EPOCHFS_PID still alive after unmount: SIGTERM"; kill "$EPOCHFS_PID"; }
  fi
  EPOCHFS_MNT= EPOCHFS_PID=
}

cleanup() {
  local rc=$?
  epochfs_down
  pfs_cleanup
  rm -rf "$SHM" "$RUN"
  pfs_check_left "$WORK|$SHM"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# ---- dataset ----------------------------------------------------------------
DS=$WORK/ds-$FILES-c$CLASSES-s$SEED-$SHARD_BYTES
mkdir -p "$WORK/bin"
cp "$ROOT/bin/epochfs" "$EPOCHFS.tmp" && mv "$EPOCHFS.tmp" "$EPOCHFS"
EPOCHFS_SHA=$(sha256sum "$EPOCHFS" | cut -c1-12)
go build -o "$WORK/bin/shardread" "$ROOT/test/bench/shardread"
go build -o "$WORK/bin/delayproxy" "$ROOT/test/bench/delayproxy"
go build -o "$WORK/bin/readpath" "$ROOT/test/bench/readpath"
export PFS_DELAY_MS PFS_DELAY_PROXY=$WORK/bin/delayproxy
if [ ! -f "$DS/.complete" ]; then
  rm -rf "$DS"
  log "generating $FILES samples in $CLASSES classes (+ $SHARD_BYTES shards) in $DS"
  go run "$ROOT/test/datagen/cmd/datagen" -out "$DS/images" -files "$FILES" -classes "$CLASSES" \
    -seed "$SEED" -shards -shard-bytes "$SHARD_BYTES" -shard-dir "$DS/shards" >&2
  touch "$DS/.complete"
fi
dsbytes() { find "$DS/$1" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f", s }'; }
dsfiles() { find "$DS/$1" -type f | wc -l; }
declare -A BYTES NFILES
for sub in images shards; do BYTES[$sub]=$(dsbytes $sub); NFILES[$sub]=$(dsfiles $sub); done

# ---- one run ----------------------------------------------------------------
# run_one READER RATE CASE SETUP REP: mount SETUP, run the reader for EPOCHS
# epochs, append one JSON line to RESULTS, undo the mount.
run_one() {
  local reader=$1 rate=$2 case=$3 setup=$4 rep=$5
  local sub=images; [ "$reader" = shards ] && sub=shards
  local bytes=${BYTES[$sub]} quota pct=125
  [ "$case" = half ] && pct=50
  quota=$(( bytes * pct / 100 ))
  rm -rf "$RUN" "$SHM"; mkdir -p "$RUN"
  : >"$PFS_DIR/sftp.log"
  drop_caches
  local sshfs_mnt=$RUN/sshfs root status=- pids=() copy_s=null cachedir=
  pfs_sshfs "$DS" "$sshfs_mnt"
  local sshfs_pid=$PFS_SSHFS_PID
  case $setup in
    pfs)
      root=$sshfs_mnt/$sub; pids=("$sshfs_pid") ;;
    epochfs-*)
      local tiers=()
      case $setup in
        epochfs-disk | epochfs-jobs) tiers=(--tier "disk=$RUN/tier:$quota") ;;
        epochfs-shm) tiers=(--tier "mem=$SHM:$quota") ;;
        epochfs-2tier) tiers=(--tier "mem=$SHM:$((quota / 2))" --tier "disk=$RUN/tier:$((quota - quota / 2))") ;;
      esac
      printf '[placement]\nworkers = 6\nsource_bandwidth = "0"\nvalidate = "%s"\n\n[sampler]\nbuffer = "%s"\n' \
        "$VALIDATE" "$SAMPLER_BUFFER" >"$RUN/epochfs.toml"
      mkdir -p "$RUN/mnt"
      EPOCHFS_MNT=$RUN/mnt
      "$EPOCHFS" mount --config "$RUN/epochfs.toml" "${tiers[@]}" --state "$RUN/state" \
        "$sshfs_mnt/$sub" "$RUN/mnt" >&2
      EPOCHFS_PID=$(awk -F= '$1 == "pid" { print $2 }' "$RUN/mnt/.epochfs/status")
      [ -n "$EPOCHFS_PID" ] || die "no pid in .epochfs/status"
      root=$RUN/mnt; status=$RUN/mnt/.epochfs/status; pids=("$EPOCHFS_PID" "$sshfs_pid") ;;
    rclone)
      pfs_rclone "$DS/$sub" "$RUN/rmnt" "$RUN/rclone-cache" "${quota}B"
      root=$RUN/rmnt; pids=("$PFS_RCLONE_PID"); cachedir=$RUN/rclone-cache ;;
    local)
      local t0 t1
      t0=$(date +%s.%N)
      cp -r "$sshfs_mnt/$sub" "$RUN/local"
      sync
      t1=$(date +%s.%N)
      copy_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }')
      pfs_unmount "$sshfs_mnt" "$sshfs_pid"
      : >"$PFS_DIR/sftp.log"
      drop_caches
      root=$RUN/local ;;
  esac
  local snap="SNAP_CACHE_DIR=$cachedir bash $HERE/snap.sh $PFS_DIR $status ${pids[*]}"
  [ "$case" = half ] && [ "$DROP_HALF" = 1 ] && snap="sync; echo 3 >/proc/sys/vm/drop_caches; $snap"
  local out=$RUN/out.json err=null
  log "$reader rate=${rate}MB/s case=$case setup=$setup rep=$rep"
  local ok=1
  if [ "$reader" = torch ]; then
    local job=()
    [ "$setup" = epochfs-jobs ] && job=(--epochfs-job bench)
    $PY "$HERE/train.py" "$root" --epochs "$EPOCHS" --workers "$WORKERS" --seed "$rep" --snapshot "$snap" "${job[@]}" >"$out" || ok=
  elif [ "$reader" = raw ]; then
    "$WORK/bin/readpath" epochs -epochs "$EPOCHS" -concurrency "$RAW_READERS" -seed "$rep" -drop-caches \
      -snapshot "$snap" "$root" >"$out" || ok=
  else
    "$WORK/bin/shardread" -epochs "$EPOCHS" -workers "$WORKERS" -seed "$rep" -snapshot "$snap" "$root" >"$out" || ok=
  fi
  [ -n "$ok" ] || { err='"reader failed"'; echo '{}' >"$out"; log "FAILED: $reader $case $setup rep $rep"; }
  printf '{"reader":"%s","rate_mb":%s,"case":"%s","setup":"%s","rep":%s,"dataset_bytes":%s,"dataset_files":%s,"quota":%s,"copy_s":%s,"error":%s,"run":%s}\n' \
    "$reader" "$rate" "$case" "$setup" "$rep" "$bytes" "${NFILES[$sub]}" "$quota" "$copy_s" "$err" "$(cat "$out")" >>"$RESULTS"
  case $setup in
    epochfs-*) cp "$RUN/state/epochfs.log" "$WORK/last-epochfs-$setup.log" 2>/dev/null || true; epochfs_down ;;
    rclone) pfs_unmount "$RUN/rmnt" "$PFS_RCLONE_PID" ;;
  esac
  pfs_unmount "$sshfs_mnt" "$sshfs_pid"
  rm -rf "$RUN" "$SHM"
}

# calibrate RATE: one cold sequential read of the largest shard through sshfs.
calibrate() {
  rm -rf "$RUN"; mkdir -p "$RUN"
  drop_caches
  pfs_sshfs "$DS" "$RUN/sshfs"
  local f t0 t1 size
  f=$(ls -S "$DS/shards" | head -1); size=$(stat -c %s "$DS/shards/$f")
  t0=$(date +%s.%N); cat "$RUN/sshfs/shards/$f" >/dev/null; t1=$(date +%s.%N)
  pfs_unmount "$RUN/sshfs" "$PFS_SSHFS_PID"
  printf '{"calibration":true,"rate_mb":%s,"bytes":%s,"seconds":%s}\n' "$1" "$size" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" >>"$RESULTS"
}

setups_for() { # CASE
  if [ -n "$SETUPS" ]; then echo "$SETUPS"; return; fi
  if [ "$1" = fits ]; then echo "pfs epochfs-disk epochfs-shm rclone local"; else echo "epochfs-disk epochfs-2tier rclone"; fi
}

# rotate N WORDS...: the words rotated left by N.
rotate() { local n=$1; shift; local a=("$@") k=${#a[@]} i; for ((i = 0; i < k; i++)); do printf '%s ' "${a[$(( (i + n) % k ))]}"; done; }

START=$(date -u +%Y-%m-%dT%H:%MZ); T0=$SECONDS
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
printf '{"meta":true,"start":"%s","quick":"%s","commit":"%s","load_start":"%s","files":%s,"epochs":%s,"workers":%s,"validate":"%s","sampler_buffer":"%s","epochfs_sha":"%s","drop_half":"%s","pfs_delay_ms":%s,"shard_bytes":"%s","images_bytes":%s,"shards_bytes":%s,"shards":%s}\n' \
  "$START" "$QUICK" "$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)" "$LOAD0" \
  "$FILES" "$EPOCHS" "$WORKERS" "$VALIDATE" "$SAMPLER_BUFFER" "$EPOCHFS_SHA" "$DROP_HALF" "$PFS_DELAY_MS" "$SHARD_BYTES" "${BYTES[images]}" "${BYTES[shards]}" "${NFILES[shards]}" >"$RESULTS"

pfs_setup "$WORK/pfs" 50
for reader in $READERS; do
  rates=$TORCH_RATES; [ "$reader" = shards ] && rates=$SHARD_RATES; [ "$reader" = raw ] && rates=$RAW_RATES
  for rate in $rates; do
    pfs_rate "$rate"
    calibrate "$rate"
    for rep in $(seq "$REPS"); do
      for case in $CASES; do
        for setup in $(rotate "$rep" $(setups_for "$case")); do
          run_one "$reader" "$rate" "$case" "$setup" "$rep"
        done
      done
    done
  done
done
pfs_cleanup
printf '{"meta_end":true,"load_end":"%s","seconds":%s}\n' "$(cut -d' ' -f1-3 /proc/loadavg)" "$((SECONDS - T0))" >>"$RESULTS"
log "results: $RESULTS"

if [ "$OUT" != - ]; then
  $PY "$HERE/report.py" --results "$RESULTS" --out "$OUT" --png-dir "$(dirname "$OUT")" \
    --command "${BENCH_COMMAND:-$([ -n "$QUICK" ] && echo 'make bench-quick' || echo 'make bench')}"
fi

if [ -z "$QUICK" ] && [ "$ONLY" != epochs ]; then
  if [ -f "$ROOT/test/bench/readpath.sh" ]; then
    log "read-path benchmark: test/bench/readpath.sh"
    bash "$ROOT/test/bench/readpath.sh" || log "readpath.sh failed"
  fi
  if [ -f "$ROOT/preprocess/bench/run.sh" ]; then
    log "preprocessing benchmark: internal/preprocess/bench/run.sh"
    # all: the in-process pipeline and the end-to-end `epochfs preprocess`.
    if bash "$ROOT/preprocess/bench/run.sh" all >"$WORK/preprocess.md"; then
      [ "$OUT" = - ] || $PY "$HERE/report.py" --section preprocess --section-file "$WORK/preprocess.md" --out "$OUT" \
        --command "make bench (= bash internal/preprocess/bench/run.sh all)"
    else
      log "internal/preprocess/bench/run.sh failed"
    fi
  fi
fi
log "done in $((SECONDS - T0)) s"
