# Emulated parallel file system for the epoch benchmarks, built from real parts:
# an sshd in a network namespace whose loopback carries a tc tbf rate limit,
# and the clients (sshfs, rclone) started with `nsenter --net=...` so their
# FUSE mounts are visible outside the namespace (`ip netns exec` would put
# them in a private mount namespace).
#
# Sourced by test/bench/run.sh. Every process started here is recorded by PID
# and every mount and the namespace are recorded, so pfs_cleanup (called from
# the caller's EXIT trap) removes exactly what this run made and nothing else.
#
# The sftp-server runs at log level DEBUG1 into $PFS_DIR/sftp.log: one line
# per open, read request, close (with the bytes read) and stat, which is how
# the source traffic of every setup is counted at the server side.

PFS_NS=${PFS_NS:-epochfs-bench-$$}
PFS_PORT=${PFS_PORT:-2222}
PFS_PIDS=()       # processes this script started (sshd, sshfs, rclone)
PFS_MOUNTS=()     # mount points this script mounted
PFS_NS_MADE=
PFS_RUNDIR_MADE=

pfs_log() { echo "pfs: $*" >&2; }

# pfs_setup DIR RATE_MBYTES: namespace, rate limit, keys, sshd. DIR holds keys,
# config and logs.
pfs_setup() {
  PFS_DIR=$1
  mkdir -p "$PFS_DIR"
  ip netns add "$PFS_NS"
  PFS_NS_MADE=1
  ip -n "$PFS_NS" link set lo up
  pfs_rate "$2"
  [ -f "$PFS_DIR/host_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -f "$PFS_DIR/host_ed25519"
  [ -f "$PFS_DIR/client_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -f "$PFS_DIR/client_ed25519"
  cp "$PFS_DIR/client_ed25519.pub" "$PFS_DIR/authorized_keys"
  chmod 600 "$PFS_DIR/authorized_keys"
  cat >"$PFS_DIR/sftp-server.sh" <<EOF
#!/bin/sh
exec /usr/lib/openssh/sftp-server -e -l DEBUG1 2>>"$PFS_DIR/sftp.log"
EOF
  chmod 755 "$PFS_DIR/sftp-server.sh"
  cat >"$PFS_DIR/sshd_config" <<EOF
ListenAddress 127.0.0.1:$PFS_PORT
HostKey $PFS_DIR/host_ed25519
PidFile none
AuthorizedKeysFile $PFS_DIR/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
Compression no
MaxStartups 64
MaxSessions 64
Ciphers aes128-gcm@openssh.com
Subsystem sftp $PFS_DIR/sftp-server.sh
EOF
  : >"$PFS_DIR/sftp.log"
  if [ ! -d /run/sshd ]; then mkdir -p /run/sshd; chmod 755 /run/sshd; PFS_RUNDIR_MADE=1; fi
  nsenter --net="/run/netns/$PFS_NS" /usr/sbin/sshd -D -e -f "$PFS_DIR/sshd_config" \
    2>>"$PFS_DIR/sshd.log" &
  PFS_SSHD=$!
  PFS_PIDS+=("$PFS_SSHD")
  local i
  for i in $(seq 100); do
    if nsenter --net="/run/netns/$PFS_NS" bash -c "echo >/dev/tcp/127.0.0.1/$PFS_PORT" 2>/dev/null; then
      pfs_log "sshd $PFS_SSHD up in netns $PFS_NS"
      return 0
    fi
    kill -0 "$PFS_SSHD" 2>/dev/null || { cat "$PFS_DIR/sshd.log" >&2; return 1; }
    sleep 0.1
  done
  pfs_log "sshd did not start"; return 1
}

# pfs_rate MBYTES: (re)set the loopback rate limit to MBYTES * 10^6 bytes/s.
# Every byte between client and server crosses lo once, so this caps the
# sum of all client traffic. lo's MTU is 64 KiB and tbf drops any packet
# larger than its bucket, so burst = 4 ms at rate, at least 256 KiB; queue 50 ms.
pfs_rate() {
  local bits=$(( $1 * 8 ))mbit burst=$(( $1 * 4000 ))
  [ "$burst" -ge 262144 ] || burst=262144
  tc -n "$PFS_NS" qdisc replace dev lo root tbf rate "$bits" burst "$burst" latency 50ms
  PFS_RATE=$1
}

# PFS_DELAY_MS (0) and PFS_DELAY_PROXY (a built test/bench/delayproxy): with
# a delay, sshfs reaches sshd through the proxy, which holds each chunk for
# PFS_DELAY_MS in each direction (round trip + 2 x PFS_DELAY_MS; this kernel
# has no tc netem). rclone's own sftp client does not go through it.
pfs_ssh_opts() {
  if [ "${PFS_DELAY_MS:-0}" != 0 ]; then
    printf 'ProxyCommand=%s -delay %sms %%h %%p,' "$PFS_DELAY_PROXY" "$PFS_DELAY_MS"
  fi
  echo "IdentityFile=$PFS_DIR/client_ed25519,StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,LogLevel=ERROR,port=$PFS_PORT,Ciphers=aes128-gcm@openssh.com,Compression=no"
}

pfs_wait_mount() { # MNT PID
  local i
  for i in $(seq 300); do
    grep -q " $1 fuse" /proc/mounts && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# pfs_sshfs REMOTE_DIR MNT: mount the server's REMOTE_DIR at MNT with sshfs
# defaults (no kernel_cache: every open re-reads from the server, like a PFS
# client whose data does not fit its page cache). Sets PFS_SSHFS_PID.
pfs_sshfs() {
  mkdir -p "$2"
  nsenter --net="/run/netns/$PFS_NS" sshfs -f -o ro,"$(pfs_ssh_opts)" \
    "root@127.0.0.1:$1" "$2" 2>>"$PFS_DIR/sshfs.log" &
  PFS_SSHFS_PID=$!
  PFS_PIDS+=("$PFS_SSHFS_PID")
  PFS_MOUNTS+=("$2")
  pfs_wait_mount "$2" "$PFS_SSHFS_PID" || { pfs_log "sshfs mount of $2 failed"; tail "$PFS_DIR/sshfs.log" >&2; return 1; }
}

# pfs_rclone REMOTE_DIR MNT CACHE_DIR CACHE_BYTES: rclone mount of the same
# server over its sftp backend, --vfs-cache-mode full with a cache of
# CACHE_BYTES (enforced every 5 s instead of rclone's default 1 min, so the
# cache holds to its size within a run). Long directory and attribute caching
# like epochfs (the data is read-only). Sets PFS_RCLONE_PID.
pfs_rclone() {
  mkdir -p "$2" "$3"
  RCLONE_CONFIG=/dev/null \
  RCLONE_CONFIG_PFS_TYPE=sftp RCLONE_CONFIG_PFS_HOST=127.0.0.1 RCLONE_CONFIG_PFS_PORT=$PFS_PORT \
  RCLONE_CONFIG_PFS_USER=root RCLONE_CONFIG_PFS_KEY_FILE=$PFS_DIR/client_ed25519 \
  RCLONE_CONFIG_PFS_KNOWN_HOSTS_FILE= RCLONE_CONFIG_PFS_DISABLE_HASHCHECK=true \
  RCLONE_CONFIG_PFS_CIPHERS=aes128-gcm@openssh.com \
    nsenter --net="/run/netns/$PFS_NS" rclone mount "pfs:$1" "$2" --read-only \
      --vfs-cache-mode full --vfs-cache-max-size "$4" --cache-dir "$3" \
      --vfs-cache-max-age 24h --vfs-cache-poll-interval 5s \
      --dir-cache-time 24h --attr-timeout 1h \
      --log-file "$PFS_DIR/rclone.log" --log-level NOTICE &
  PFS_RCLONE_PID=$!
  PFS_PIDS+=("$PFS_RCLONE_PID")
  PFS_MOUNTS+=("$2")
  pfs_wait_mount "$2" "$PFS_RCLONE_PID" || { pfs_log "rclone mount of $2 failed"; tail "$PFS_DIR/rclone.log" >&2; return 1; }
}

# pfs_unmount MNT PID: unmount a client mount and wait for its process.
pfs_unmount() {
  local mnt=$1 pid=$2 i
  if grep -q " $mnt fuse" /proc/mounts; then
    umount "$mnt" 2>/dev/null || umount -l "$mnt" 2>/dev/null || true
  fi
  for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null || true
}

# pfs_check_left REGEX: warns of mounts under paths matching REGEX, and of
# this run's namespace, still there after pfs_cleanup.
pfs_check_left() {
  local left
  left=$(grep -E " ($1)[^ ]* " /proc/mounts || true)
  [ -z "$left" ] || pfs_log "WARNING: mounts left behind: $left"
  if ip netns list | grep -q "^$PFS_NS\b"; then pfs_log "WARNING: netns $PFS_NS left behind"; fi
}

# pfs_cleanup: unmount what we mounted, stop what we started, delete the
# namespace. Safe to call twice.
pfs_cleanup() {
  local m p
  for m in "${PFS_MOUNTS[@]}"; do
    grep -q " $m fuse" /proc/mounts && { umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; }
  done
  for p in "${PFS_PIDS[@]}"; do
    kill -0 "$p" 2>/dev/null && kill "$p" 2>/dev/null
  done
  for p in "${PFS_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PFS_PIDS=(); PFS_MOUNTS=()
  if [ -n "$PFS_NS_MADE" ]; then ip netns del "$PFS_NS" 2>/dev/null || true; PFS_NS_MADE=; fi
  if [ -n "$PFS_RUNDIR_MADE" ]; then rmdir /run/sshd 2>/dev/null || true; PFS_RUNDIR_MADE=; fi
}

# pfs_counters: key=value totals of the server log so far: opens, read
# requests, bytes sent in read replies, metadata requests (stat, lstat, fstat,
# opendir, readdir, realpath, statvfs).
pfs_counters() {
  awk '
    /^open "/ { opens++ }
    /: read "/ { reads++ }
    /: sent data len / { b += $NF }
    /^(stat name|lstat name|opendir|statvfs|realpath) |: (fstat|realpath|readdir) / { meta++ }
    END { printf "sftp_opens=%d\nsftp_reads=%d\nsftp_bytes=%.0f\nsftp_meta=%d\n", opens, reads, b, meta }
  ' "$PFS_DIR/sftp.log"
}
