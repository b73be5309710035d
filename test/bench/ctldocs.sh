#!/usr/bin/env bash
# What ctl documents cost the root daemon, against another binary in the
# same run (docs/security.md, "Fairness between users"):
#   - daemon CPU of 20,000 writes of "#\n", then of "subset=d\n", to one job
#     config held open (bash's printf: a write per line);
#   - daemon RSS while one user holds 8 warmup documents of 63 MiB each.
#
#   bash test/bench/ctldocs.sh [BASE]     (BASE: another epochfs binary)
#
# Needs root (mounts, a test user made and removed). Uses bin/epochfs.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NEW=$ROOT/bin/epochfs
BASE=${1:-}
W=$(mktemp -d /tmp/epochfs-ctldocs-XXXXXX)
chmod 755 "$W"
USER_=efsdocs$$
useradd --system --no-create-home "$USER_"
trap 'userdel "$USER_" 2>/dev/null; rm -rf "$W"' EXIT
mkdir -p "$W/src/d"
for i in $(seq 1 2000); do echo x > "$W/src/d/f$i"; done
cat > "$W/hold.py" <<'PY'
import os, sys, time
path, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fds, res = [], []
for i in range(n):
    fd = os.open(path, os.O_WRONLY); fds.append(fd)
    chunk, left, r = b"x" * (1 << 20), size, "OK"
    try:
        while left > 0:
            left -= os.write(fd, chunk[:min(left, len(chunk))])
    except OSError as e:
        r = os.strerror(e.errno)
    res.append(r)
print(" ".join(r.replace(" ", "_") for r in res), flush=True)
time.sleep(5)
PY
chmod 644 "$W/hold.py"
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
rss() { awk '/VmRSS/{printf "%.0f MB", $2/1024}' "/proc/$1/status"; }
run() { # binary label
  local bin=$1 label=$2 m=$W/mnt-$2
  mkdir -p "$m"; chmod 755 "$m"
  "$bin" mount --state "$W/state-$label" --tier=m="$W/tier-$label:1GiB" "$W/src" "$m" >/dev/null
  local pid; pid=$(awk -F= '$1=="pid"{print $2}' "$m/.epochfs/status")
  while grep -Eq '^catalog=(walking|loading)' "$m/.epochfs/status"; do sleep 0.1; done
  mkdir "$m/.epochfs/jobs/j"
  local c0 c1 c2 t0 rc=0
  c0=$(cpu "$pid")
  bash -c "exec 3>$m/.epochfs/jobs/j/config; for i in \$(seq 20000); do printf '#\n' >&3; done; exec 3>&-"
  c1=$(cpu "$pid"); t0=$SECONDS
  timeout 120 bash -c "exec 3>$m/.epochfs/jobs/j/config; for i in \$(seq 20000); do printf 'subset=d\n' >&3; done; exec 3>&-" || rc=$?
  c2=$(cpu "$pid")
  local before; before=$(rss "$pid")
  runuser -u "$USER_" -- /usr/bin/python3 "$W/hold.py" "$m/.epochfs/warmup" 8 $((63 << 20)) > "$W/hold-$label" &
  local hp=$!; sleep 4
  printf '%s: "#\\n" x20000: %d ms CPU | "subset=d\\n" x20000: %d ms CPU, %d s%s | RSS %s, holding 8 x 63 MiB warmup: %s (%s)\n' \
    "$label" $(( (c1 - c0) * 10 )) $(( (c2 - c1) * 10 )) $((SECONDS - t0)) "$([ $rc = 124 ] && echo ' (stopped at 120 s)')" \
    "$before" "$(rss "$pid")" "$(head -c 120 "$W/hold-$label")"
  wait $hp || true
  "$bin" unmount --timeout 120s "$m" >/dev/null 2>&1 || "$bin" unmount --lazy "$m" >/dev/null 2>&1
}
run "$NEW" new
[ -n "$BASE" ] && run "$BASE" base
exit 0
