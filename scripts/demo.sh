#!/usr/bin/env bash
# `make demo`: mount a generated image dataset with epochfs, train two epochs
# over the mount with an unmodified torchvision ImageFolder + DataLoader, and
# show that epoch two is served from the RAM tier (no source reads).
#
# Environment (all optional):
#   EPOCHFS_DEMO_DIR      work directory (default ./demo-data; the dataset in it is reused)
#   EPOCHFS_DEMO_FILES    number of JPEGs to generate (default 500, ~55 MB)
#   EPOCHFS_DEMO_CLASSES  number of classes (default 10)
#   EPOCHFS_DEMO_TIER     RAM tier directory (default /dev/shm/epochfs-demo; emptied at start and exit)
#
# The mount is always unmounted on exit, including on Ctrl-C.
set -euo pipefail
export PATH="$PATH:/usr/local/go/bin"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$ROOT/bin/epochfs
PY=/usr/bin/python3
WORK=${EPOCHFS_DEMO_DIR:-$ROOT/demo-data}
WORK=$(mkdir -p "$WORK" && cd "$WORK" && pwd)
FILES=${EPOCHFS_DEMO_FILES:-500}
CLASSES=${EPOCHFS_DEMO_CLASSES:-10}
TIER=${EPOCHFS_DEMO_TIER:-/dev/shm/epochfs-demo}
DATA=$WORK/dataset
STATE=$WORK/state
MNT=$WORK/mnt
RUN=$WORK/run # status snapshots of this run

# status KEY [FILE]: one value from the mount's status (or a saved snapshot).
status() { sed -n "s/^$1=//p" "${2:-$MNT/.epochfs/status}"; }

is_mounted() { awk -v m="$1" '$2 == m { found = 1 } END { exit !found }' /proc/mounts; }

human() { awk -v n="$1" 'BEGIN { split("B KB MB GB", u); i = 1; while (n >= 1000 && i < 4) { n /= 1000; i++ } printf(i == 1 ? "%d %s" : "%.1f %s", n, u[i]) }'; }

# Called by demo_train.py after each epoch: wait for the background copies
# to settle, then save and show the status.
if [ "${1:-}" = --after-epoch ]; then
  epoch=$2
  for _ in $(seq 600); do
    [ "$(status placements_queued)" = 0 ] && break
    sleep 0.1
  done
  cp "$MNT/.epochfs/status" "$RUN/epoch-$epoch.status"
  prev=$RUN/epoch-$((epoch - 1)).status
  printf 'status after epoch %s: source_reads=%s (+%s) source_bytes=%s resident_pct=%s files_resident=%s/%s passthrough=%s\n' \
    "$epoch" "$(status source_reads)" "$(($(status source_reads) - $(status source_reads "$prev")))" \
    "$(status source_bytes)" "$(status resident_pct)" "$(status files_resident)" "$(status files_total)" \
    "$(status passthrough)"
  exit 0
fi

say() { printf '== %s\n' "$*"; }

if ! "$PY" -c 'import torch, torchvision' 2>/dev/null; then
  echo "demo: $PY cannot import torch and torchvision; run 'make deps' (or bash scripts/install-deps.sh)" >&2
  exit 1
fi
if [ ! -x "$BIN" ]; then
  say "building bin/epochfs"
  (cd "$ROOT" && make -s build)
fi

# The dataset: generated once, reused by later runs. The marker is written
# only after a complete generation.
if [ -f "$WORK/dataset.ok" ] && [ "$(cat "$WORK/dataset.ok")" = "$FILES $CLASSES" ]; then
  say "reusing the dataset in $DATA"
else
  say "generating $FILES JPEGs in $CLASSES classes into $DATA"
  rm -rf "$DATA" "$WORK/dataset.ok"
  (cd "$ROOT" && go run ./test/datagen/cmd/datagen -out "$DATA" -files "$FILES" -classes "$CLASSES" -seed 1)
  echo "$FILES $CLASSES" >"$WORK/dataset.ok"
fi
echo "dataset: $(find "$DATA" -type f | wc -l) files, $(human "$(du -sb "$DATA" | cut -f1)")"

# A cold start: no tier copies and no catalog from an earlier run.
if is_mounted "$MNT"; then
  "$BIN" unmount "$MNT" || "$BIN" unmount --lazy "$MNT"
fi
rm -rf "$STATE" "$TIER" "$RUN"
mkdir -p "$MNT" "$STATE" "$TIER" "$RUN"

cleanup() {
  rc=$?
  trap - EXIT INT TERM
  if is_mounted "$MNT"; then
    # A DataLoader worker may still be closing its files after Ctrl-C.
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      "$BIN" unmount "$MNT" >/dev/null 2>&1 && break
      sleep 0.5
    done
    if is_mounted "$MNT"; then
      "$BIN" unmount --lazy "$MNT" >/dev/null 2>&1 || true
    fi
    if is_mounted "$MNT"; then
      echo "demo: could not unmount $MNT" >&2
      rc=1
    else
      say "unmounted $MNT"
    fi
  fi
  if [ "$rc" -eq 130 ] || [ "$rc" -eq 143 ]; then
    echo "demo: interrupted" >&2
  elif [ "$rc" -ne 0 ] && [ -f "$STATE/epochfs.log" ]; then
    echo "demo: failed (exit $rc); last lines of $STATE/epochfs.log:" >&2
    tail -n 20 "$STATE/epochfs.log" >&2
  fi
  rm -rf "$TIER"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "mounting $DATA at $MNT (RAM tier $TIER)"
"$BIN" mount --tier "mem=$TIER:1GiB" --state "$STATE" "$DATA" "$MNT"
cp "$MNT/.epochfs/status" "$RUN/epoch-0.status"
echo "status after mount: files_total=$(status files_total) bytes_total=$(status bytes_total)" \
  "resident_pct=$(status resident_pct) source_reads=$(status source_reads) passthrough=$(status passthrough)"

say "training 2 epochs over the mount (scripts/demo_train.py)"
export EPOCHFS_DEMO_DIR=$WORK EPOCHFS_DEMO_TIER=$TIER EPOCHFS_DEMO_FILES=$FILES EPOCHFS_DEMO_CLASSES=$CLASSES
"$PY" "$ROOT/scripts/demo_train.py" "$MNT" --epochs 2 --after-epoch "bash $(printf %q "$ROOT/scripts/demo.sh") --after-epoch"

say "summary"
for e in 1 2; do
  cur=$RUN/epoch-$e.status prev=$RUN/epoch-$((e - 1)).status
  reads=$(($(status source_reads "$cur") - $(status source_reads "$prev")))
  bytes=$(($(status source_bytes "$cur") - $(status source_bytes "$prev")))
  pct=$(status resident_pct "$cur")
  [ "$pct" = 100.00 ] && pct=100
  echo "epoch $e: $reads source reads ($(human "$bytes") from the source), $pct% resident, passthrough=$(status passthrough "$cur")"
done
if [ "$(status source_reads "$RUN/epoch-2.status")" != "$(status source_reads "$RUN/epoch-1.status")" ]; then
  echo "demo: epoch 2 read from the source; expected it to be served from the tier" >&2
  exit 1
fi
