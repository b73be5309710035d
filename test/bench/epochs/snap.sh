#!/usr/bin/env bash
# Counters snapshot for one epoch boundary, printed as key=value lines; the
# readers (train.py, shardread) run it before epoch 1 and after each epoch.
#
#   snap.sh PFS_DIR STATUS_FILE|- [PID...]
#
# sftp_*     totals from the emulated PFS's server log (every setup's source
#            traffic, counted at the server: opens, read requests, bytes, stats)
# cpu_s      user+system CPU seconds of the first PID and its children (the
#            setup's daemon: epochfs, rclone, or sshfs + its ssh)
# cpu_aux_s  the same for the other PIDs (the sshfs under epochfs)
# rss_kb     resident memory of the first PID
# cache_bytes bytes under $SNAP_CACHE_DIR when set (rclone's cache)
# loadavg    the 1-minute load average (the machine may be shared)
# epochfs.*  the mount's .epochfs/status lines, when STATUS_FILE is given
set -euo pipefail
PFS_DIR=$1 STATUS=$2
shift 2
source "$(dirname "$0")/pfs.sh"
pfs_counters
hz=$(getconf CLK_TCK)
# cpu_ticks PID: utime+stime of PID and its direct children (fields 12 and
# 13 after the ")" that ends comm).
cpu_ticks() {
  local p c t=0 pids=("$1")
  for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do pids+=("$c"); done
  for p in "${pids[@]}"; do
    [ -r /proc/"$p"/stat ] || continue
    t=$((t + $(sed 's/.*) //' /proc/"$p"/stat | awk '{print $12 + $13}')))
  done
  echo "$t"
}
main=0 aux=0
if [ $# -gt 0 ]; then
  main=$(cpu_ticks "$1")
  for p in "${@:2}"; do aux=$((aux + $(cpu_ticks "$p"))); done
fi
awk -v m="$main" -v a="$aux" -v hz="$hz" 'BEGIN { printf "cpu_s=%.2f\ncpu_aux_s=%.2f\n", m / hz, a / hz }'
if [ $# -gt 0 ] && [ -r /proc/"$1"/status ]; then
  awk '/^VmRSS:/ { print "rss_kb=" $2 }' /proc/"$1"/status
fi
if [ -n "${SNAP_CACHE_DIR:-}" ]; then
  echo "cache_bytes=$(du -sb "$SNAP_CACHE_DIR" 2>/dev/null | cut -f1)"
fi
echo "loadavg=$(cut -d' ' -f1 /proc/loadavg)"
if [ "$STATUS" != - ]; then
  sed 's/^/epochfs./' "$STATUS"
fi
