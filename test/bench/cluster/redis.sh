# The benchmarks' Redis Cluster: NODES masters of Debian's redis-server on
# free ports of REDIS_BIND (default 127.0.0.1), maxmemory-policy noeviction,
# no persistence, joined by redis-cli --cluster create. Sourced by run.sh and
# peers.sh, which define WORK, NODES, log and die; the caller's EXIT trap
# calls redis_stop (every server is stopped by the PID recorded here).
REDIS_BIND=${REDIS_BIND:-127.0.0.1}
REDIS_PIDS=() REDIS_PORTS=()

port_free() { ! (echo >/dev/tcp/"$REDIS_BIND"/"$1") 2>/dev/null; }
rcli() { local p=$1; shift; redis-cli -h "$REDIS_BIND" -p "$p" "$@"; }

redis_start() {
  local i p d ok
  for i in $(seq 0 $((NODES - 1))); do
    for _ in $(seq 200); do
      p=$((20000 + RANDOM % 15000))
      port_free "$p" && port_free $((p + 10000)) && break
    done
    d=$WORK/redis/$i
    rm -rf "$d"; mkdir -p "$d"
    redis-server --port "$p" --bind "$REDIS_BIND" --protected-mode no \
      --cluster-enabled yes --cluster-config-file "$d/nodes.conf" --cluster-node-timeout 5000 \
      --dir "$d" --save "" --appendonly no --daemonize no \
      --maxmemory 4gb --maxmemory-policy noeviction --logfile "$d/redis.log" &
    REDIS_PIDS+=($!) REDIS_PORTS+=("$p")
    for _ in $(seq 100); do rcli "$p" PING 2>/dev/null | grep -q PONG && break; sleep 0.1; done
    rcli "$p" PING | grep -q PONG || die "redis-server on port $p did not start: $(tail -3 "$d/redis.log")"
  done
  local addrs=()
  for p in "${REDIS_PORTS[@]}"; do addrs+=("$REDIS_BIND:$p"); done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >"$WORK/redis/create.log" 2>&1 ||
    die "redis-cli --cluster create failed: $(tail -5 "$WORK/redis/create.log")"
  for _ in $(seq 300); do
    ok=1
    for p in "${REDIS_PORTS[@]}"; do rcli "$p" CLUSTER INFO | grep -q cluster_state:ok || ok=; done
    [ -n "$ok" ] && { log "Redis Cluster up: ${addrs[*]} (pids ${REDIS_PIDS[*]})"; return 0; }
    sleep 0.1
  done
  die "the Redis Cluster's state is not ok after 30 s"
}

redis_flush() { local p; for p in "${REDIS_PORTS[@]}"; do rcli "$p" FLUSHALL SYNC >/dev/null; done; }
redis_used() { # bytes of used_memory summed over the masters
  local p s=0 u
  for p in "${REDIS_PORTS[@]}"; do
    u=$(rcli "$p" INFO memory | tr -d '\r' | awk -F: '$1 == "used_memory" { print $2 }')
    s=$((s + u))
  done
  echo "$s"
}

redis_stop() {
  local p
  for p in "${REDIS_PIDS[@]}"; do kill -0 "$p" 2>/dev/null && kill "$p" 2>/dev/null; done
  for p in "${REDIS_PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && kill -9 "$p" 2>/dev/null
    wait "$p" 2>/dev/null || true
  done
  REDIS_PIDS=()
}

