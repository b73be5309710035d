# A benchmark's nodes on one machine: each its own mount namespace (a
# holder process, unshare -m) with its own sshfs client of the emulated PFS
# (pfs.sh) bind-mounted on the common path SRC. Sourced by run.sh and
# peers.sh, which define RUN, SRC, EPOCHFS, WORK, RUN_TAG, log and die; the
# caller's EXIT trap calls node_down for every node.
HOLDER=()      # node i's mount namespace holder (unshare -m ... sleep)
NODE_PID=()    # node i's epochfs daemon
NODE_SSHFS=()  # node i's sshfs client
node_dir() { echo "$RUN/node$1"; }
nsx() { local i=$1; shift; nsenter -t "${HOLDER[$i]}" -m -- "$@"; }

# node_ns I DATASET_DIR: node I's fresh directories, its sshfs of the
# PFS's DATASET_DIR, its mount namespace and the bind mount at SRC.
node_ns() {
  local i=$1 ds=$2 d
  d=$(node_dir "$i")
  rm -rf "$d"; mkdir -p "$d/tier" "$d/mnt" "$SRC"
  pfs_sshfs "$ds" "$d/sshfs"
  NODE_SSHFS[$i]=$PFS_SSHFS_PID
  unshare --mount --propagation slave sleep infinity &
  HOLDER[$i]=$!
  for _ in $(seq 100); do
    [ "$(readlink /proc/"${HOLDER[$i]}"/ns/mnt)" != "$(readlink /proc/self/ns/mnt)" ] && break
    sleep 0.05
  done
  nsx "$i" mount --bind "$d/sshfs/images" "$SRC"
}

# node_pid I: node I's daemon, from its status (dies without one).
node_pid() {
  NODE_PID[$1]=$(awk -F= '$1 == "pid" { print $2 }' "/proc/${HOLDER[$1]}/root$(node_dir "$1")/mnt/.epochfs/status")
  [ -n "${NODE_PID[$1]}" ] || die "node $1: no pid in .epochfs/status"
}

# node_status I: node I's .epochfs/status.
node_status() { cat "/proc/${HOLDER[$1]}/root$(node_dir "$1")/mnt/.epochfs/status"; }

# node_down I: unmount node I's epochfs, wait for its daemon, end its
# namespace and its sshfs.
node_down() {
  local i=$1 d p
  d=$(node_dir "$i")
  p=${NODE_PID[$i]:-}
  if [ -n "${HOLDER[$i]:-}" ] && kill -0 "${HOLDER[$i]}" 2>/dev/null; then
    if grep -q " $d/mnt fuse" "/proc/${HOLDER[$i]}/mounts" 2>/dev/null; then
      nsx "$i" "$EPOCHFS" unmount "$d/mnt" >/dev/null 2>&1 ||
        nsx "$i" umount -l "$d/mnt" 2>/dev/null || true
    fi
  elif [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
    nsenter -t "$p" -m -- "$EPOCHFS" unmount "$d/mnt" >/dev/null 2>&1 || true
  fi
  if [ -n "$p" ]; then
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && { log "node $i: epochfs daemon $p alive after unmount: SIGTERM"; kill "$p"; sleep 1; }
    kill -0 "$p" 2>/dev/null && kill -9 "$p" 2>/dev/null
  fi
  NODE_PID[$i]=
  [ -f "$d/state/epochfs.log" ] && cp "$d/state/epochfs.log" "$WORK/logs/$RUN_TAG-node$i.log"
  if [ -n "${HOLDER[$i]:-}" ]; then
    kill "${HOLDER[$i]}" 2>/dev/null || true
    wait "${HOLDER[$i]}" 2>/dev/null || true
    HOLDER[$i]=
  fi
  if [ -n "${NODE_SSHFS[$i]:-}" ]; then
    pfs_unmount "$d/sshfs" "${NODE_SSHFS[$i]}"
    NODE_SSHFS[$i]=
  fi
}
