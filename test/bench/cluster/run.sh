#!/usr/bin/env bash
# Many nodes, one PFS fetch: the cluster tier against one node alone and
# against N nodes without it (docs/benchmarks.md, "Many nodes: the cluster
# tier"; docs/cluster.md).
#
#   make bench-cluster            full run (~20 min on 2 cores)
#   QUICK=1 make bench-cluster    smoke run: small dataset, one repetition
#
# The emulated PFS is test/bench/epochs/pfs.sh: sshd in a network namespace
# whose loopback has a tc tbf rate limit (RATE MB/s, shared by every client,
# like a PFS's link), the sftp-server logging every read so the source bytes
# are counted at the server. A "node" is one epochfs mount with its own
# sshfs client of that server, its own local disk tier and state directory,
# in its own mount namespace (unshare -m, propagation slave) where its sshfs
# is bind-mounted on one common path: every node sees the PFS at the same
# path, as real nodes do, so the catalog the first node walks is the one the
# others load (it is keyed by the source path). Each node's epochfs mount
# point is its own, visible only in its namespace; its readers run there.
#
# The Redis Cluster is NODES masters of Debian's redis-server on free
# localhost ports (maxmemory-policy noeviction, no persistence), joined by
# redis-cli --cluster create, emptied (FLUSHALL) before each run that uses it.
#
# Runs (fresh tiers and state, page cache dropped, fresh sshfs clients), in
# an order rotated per repetition, REPS times:
#   one      one node alone, no cluster
#   cluster  NODES nodes with the same [cluster] section
#   plain    NODES nodes without it (each copies the whole dataset)
# In each run every node reads the whole dataset once with READERS threads
# (test/bench/readpath epochs: every file read whole, the node's own random
# order), all nodes at once: epoch 1 of a training job. After each cluster
# run, with the cluster still holding every file:
#   from-cluster   every node unmounted, its tier and state wiped; one node,
#                  then NODES nodes at once, mounted afresh and read the
#                  dataset again: everything comes from the cluster
#   redis-benchmark  the cluster's own GET bandwidth for values of the mean
#                  file size (READERS clients): B_cache of the DSI model
# and `epochfs model` (cache = "remote", the whole dataset encoded in the
# cluster, no decode: the readers only read) predicts the from-cluster
# samples/s from that B_cache.
#
# Results: one JSON line per run in WORK/results-*.jsonl, and the tables
# (median (min-max) over the repetitions) from test/bench/cluster/report.py
# on stdout and in WORK/report.md. Everything started here (sshd, sshfs,
# redis-server, the namespace holders, the epochfs daemons) is recorded by
# PID and stopped on exit; every mount is unmounted and the network
# namespace deleted.
#
# Environment: QUICK=1; WORK (/var/tmp/epochfs-bench-cluster); FILES (6000,
# quick 1000; ~110 KB JPEGs from test/datagen); CLASSES (100); RATE (MB/s of
# the PFS, 50); REPS (5, quick 1); NODES (3); READERS (threads per node, 8);
# WORKERS (epochfs [placement] workers, 6); SETUPS ("one cluster plain").
# Needs root, ip/tc/nsenter/unshare, sshd, sshfs (make bench-deps),
# redis-server and redis-cli/redis-benchmark (Debian redis-server,
# redis-tools), jq.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
HERE=$ROOT/test/bench/cluster
export PATH=$PATH:/usr/local/go/bin
QUICK=${QUICK:-}
WORK=${WORK:-/var/tmp/epochfs-bench-cluster}
if [ -n "$QUICK" ]; then
  FILES=${FILES:-1000}; REPS=${REPS:-1}
else
  FILES=${FILES:-6000}; REPS=${REPS:-5}
fi
CLASSES=${CLASSES:-100}
SEED=${SEED:-1}
RATE=${RATE:-50}
NODES=${NODES:-3}
READERS=${READERS:-8}
WORKERS=${WORKERS:-6}
SETUPS=${SETUPS:-one cluster plain}
EPOCHFS=$WORK/bin/epochfs   # a copy of bin/epochfs taken at the start (others may rebuild it)
RUN=$WORK/run
SRC=$RUN/src                # every node's view of the PFS, one path
RESULTS=$WORK/results-$(date +%Y%m%d-%H%M%S).jsonl
PFS_NS=epochfs-bench-cluster-$$

log() { echo "bench-cluster: $(date +%H:%M:%S) $*" >&2; }
die() { log "$*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (network and mount namespaces, drop_caches, mounts)"
for t in ip tc nsenter unshare sshd sshfs ssh-keygen redis-server redis-cli redis-benchmark jq; do
  command -v "$t" >/dev/null || die "$t missing (make bench-deps; apt-get install redis-server redis-tools jq)"
done
[ -x "$ROOT/bin/epochfs" ] || die "$ROOT/bin/epochfs missing: run make build"

source "$ROOT/test/bench/epochs/pfs.sh"

# ---- processes and mounts of this run ------------------------------------------
source "$HERE/nodes.sh"

# ---- Redis Cluster: test/bench/cluster/redis.sh ------------------------------------
source "$HERE/redis.sh"

# ---- nodes ------------------------------------------------------------------------
# node_up I CLUSTER(0|1): node I's sshfs, mount namespace and epochfs mount,
# tiers empty.
node_up() {
  local i=$1 cl=$2 d
  d=$(node_dir "$i")
  node_ns "$i" "$DS"
  {
    printf '[placement]\nworkers = %s\nsource_bandwidth = "0"\nvalidate = "once"\n' "$WORKERS"
    if [ "$cl" = 1 ]; then
      # The bench's Redis has no password: insecure, with a key (the
      # chunks' MACs cost what they cost in production).
      [ -s "$RUN/cluster.key" ] || (umask 077; head -c 32 /dev/urandom | base64 >"$RUN/cluster.key")
      printf '\n[cluster]\nredis = [%s]\ntier_quota = "%s"\ndataset = "bench"\nkey_file = "%s"\ninsecure = true\n' \
        "$(printf '"127.0.0.1:%s",' "${REDIS_PORTS[@]}" | sed 's/,$//')" "$QUOTA" "$RUN/cluster.key"
    fi
  } >"$d/epochfs.toml"
  nsx "$i" "$EPOCHFS" mount --config "$d/epochfs.toml" --tier "disk=$d/tier:$QUOTA" --state "$d/state" \
    "$SRC" "$d/mnt" >&2
  node_pid "$i"
}


cleanup() {
  local rc=$? i
  for i in "${!HOLDER[@]}"; do node_down "$i" || true; done
  for i in "${!NODE_PID[@]}"; do
    [ -n "${NODE_PID[$i]}" ] && kill -0 "${NODE_PID[$i]}" 2>/dev/null && kill "${NODE_PID[$i]}" 2>/dev/null
  done
  redis_stop
  pfs_cleanup
  rm -rf "$RUN"
  pfs_check_left "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# ---- dataset and tools --------------------------------------------------------------
mkdir -p "$WORK/bin"
rm -rf "$WORK/logs"; mkdir -p "$WORK/logs"   # the nodes' epochfs.log of the last invocation
RUN_TAG=start
cp "$ROOT/bin/epochfs" "$EPOCHFS.tmp" && mv "$EPOCHFS.tmp" "$EPOCHFS"
EPOCHFS_SHA=$(sha256sum "$EPOCHFS" | cut -c1-12)
go build -o "$WORK/bin/readpath" "$ROOT/test/bench/readpath"
DS=$WORK/ds-$FILES-c$CLASSES-s$SEED
if [ ! -f "$DS/.complete" ]; then
  rm -rf "$DS"
  log "generating $FILES samples in $CLASSES classes in $DS"
  go run "$ROOT/test/datagen/cmd/datagen" -out "$DS/images" -files "$FILES" -classes "$CLASSES" -seed "$SEED" >&2
  touch "$DS/.complete"
fi
DS_BYTES=$(find "$DS/images" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f", s }')
DS_FILES=$(find "$DS/images" -type f | wc -l)
MEAN=$((DS_BYTES / DS_FILES))
QUOTA=$((DS_BYTES * 5 / 4))   # local tiers and the cluster quota: 1.25x the dataset

# ---- one run ------------------------------------------------------------------------
# read_nodes TAG N SEED0: nodes 0..N-1 read the whole dataset at once, each
# in its own order; prints nothing, leaves WORK/out.I.
read_nodes() {
  local n=$2 seed0=$3 i pids=()
  for i in $(seq 0 $((n - 1))); do
    local d; d=$(node_dir "$i")
    nsx "$i" "$WORK/bin/readpath" epochs -epochs 1 -concurrency "$READERS" -seed $((seed0 + i)) \
      -snapshot "cat $d/mnt/.epochfs/status" "$d/mnt" >"$WORK/out.$i" 2>"$WORK/err.$i" &
    pids+=($!)
  done
  local ok=1
  for i in "${pids[@]}"; do wait "$i" || ok=; done
  [ -n "$ok" ] || { tail -n 3 "$WORK"/err.* >&2; die "a reader failed"; }
}

# nodes_json N: the nodes' reader outputs as one JSON array (epoch seconds,
# bytes, the status after the epoch).
nodes_json() {
  local n=$1 i
  for i in $(seq 0 $((n - 1))); do
    jq -c '{seconds: .epochs[0].seconds, samples: .epochs[0].samples, bytes: .epochs[0].bytes,
      scan_s: .scan_s, status: (.snapshots[1] | with_entries(select(.key | test("^(source_bytes|source_reads|source_opens|cluster\\.|catalog|resident)"))))}' "$WORK/out.$i"
  done | jq -s -c .
}

# run_one SETUP REP
run_one() {
  local setup=$1 rep=$2 n=$NODES cl=0 i
  [ "$setup" = one ] && n=1
  [ "$setup" = cluster ] && cl=1
  log "rep $rep: $setup ($n node(s))"
  RUN_TAG=$setup-$rep
  [ "$cl" = 1 ] && redis_flush
  rm -rf "$RUN"; mkdir -p "$RUN"
  drop_caches
  : >"$PFS_DIR/sftp.log"
  local load0; load0=$(cut -d' ' -f1 /proc/loadavg)
  for i in $(seq 0 $((n - 1))); do node_up "$i" "$cl"; done
  local walk; walk=$(pfs_counters | tr '\n' ' ')
  : >"$PFS_DIR/sftp.log"
  local t0 t1; t0=$(date +%s.%N)
  read_nodes "$setup" "$n" $((rep * 100))
  t1=$(date +%s.%N)
  local nodes; nodes=$(nodes_json "$n")
  local used=0; [ "$cl" = 1 ] && used=$(redis_used)
  # The source bytes this run caused, counted at the server once every node
  # is unmounted (nothing a daemon did after the readers is missed).
  for i in $(seq 0 $((n - 1))); do node_down "$i"; done
  local pfs; pfs=$(pfs_counters | tr '\n' ' ')
  printf '{"setup":"%s","rep":%s,"nodes":%s,"dataset_bytes":%s,"dataset_files":%s,"wall_s":%s,"load_start":%s,"load_end":%s,"redis_used":%s,"walk":"%s","pfs":"%s","per_node":%s}\n' \
    "$setup" "$rep" "$n" "$DS_BYTES" "$DS_FILES" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" \
    "$load0" "$(cut -d' ' -f1 /proc/loadavg)" "$used" "$walk" "$pfs" "$nodes" >>"$RESULTS"
  log "  $(tail -1 "$RESULTS" | jq -r '"slowest node \([.per_node[].seconds] | max | . * 10 | round / 10) s, PFS bytes / dataset \((.pfs | capture("sftp_bytes=(?<b>[0-9]+)").b | tonumber) / .dataset_bytes | . * 1000 | round / 1000)"')"
  [ "$cl" = 1 ] && from_cluster "$rep"
  return 0
}

# from_cluster REP: the cluster holds the dataset (a cluster run just
# ended, its nodes unmounted). Nodes are mounted afresh, empty tiers and
# state; node 0 alone, then all nodes at once, read the dataset again,
# all of it from the cluster. Then redis-benchmark measures the cluster's
# own GET bandwidth, and the model predicts both passes from it.
from_cluster() {
  local rep=$1 i k
  for k in 1 "$NODES"; do
    RUN_TAG=from-cluster-$k-$rep
    drop_caches
    : >"$PFS_DIR/sftp.log"
    for i in $(seq 0 $((k - 1))); do node_up "$i" 1; done
    : >"$PFS_DIR/sftp.log"
    local t0 t1; t0=$(date +%s.%N)
    read_nodes from-cluster "$k" $((rep * 100 + 50))
    t1=$(date +%s.%N)
    local nodes; nodes=$(nodes_json "$k")
    for i in $(seq 0 $((k - 1))); do node_down "$i"; done
    printf '{"setup":"from-cluster","rep":%s,"nodes":%s,"dataset_bytes":%s,"dataset_files":%s,"wall_s":%s,"load_end":%s,"pfs":"%s","per_node":%s}\n' \
      "$rep" "$k" "$DS_BYTES" "$DS_FILES" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" \
      "$(cut -d' ' -f1 /proc/loadavg)" "$(pfs_counters | tr '\n' ' ')" "$nodes" >>"$RESULTS"
    log "  from the cluster, $k node(s): $(tail -1 "$RESULTS" | jq -r '"\(([.per_node[].samples] | add) / ([.per_node[].seconds] | max) | round) samples/s, \(([.per_node[].bytes] | add) / ([.per_node[].seconds] | max) / 1e6 | round) MB/s"')"
  done
  # B_cache: the cluster's GET bandwidth for values of the mean file size,
  # READERS clients, 1000 keys (set first), outside epochfs's key space.
  local csv rps
  redis-benchmark -h 127.0.0.1 -p "${REDIS_PORTS[0]}" --cluster -t set -n 3000 -r 1000 -d "$MEAN" -c "$READERS" -q --csv >/dev/null 2>&1
  csv=$(redis-benchmark -h 127.0.0.1 -p "${REDIS_PORTS[0]}" --cluster -t get -n 6000 -r 1000 -d "$MEAN" -c "$READERS" -q --csv 2>/dev/null)
  rps=$(echo "$csv" | awk -F'","' '/GET/ { print $2; exit }')
  [ -n "$rps" ] || { log "redis-benchmark gave no GET rate: $csv"; rps=0; }
  local bcache; bcache=$(awk -v r="$rps" -v m="$MEAN" 'BEGIN { printf "%.0f", r * m }')
  # B_cache measured the other way: bytes/s of one node reading the whole
  # dataset from the cluster through epochfs (the first pass above).
  local bnode; bnode=$(grep '"from-cluster"' "$RESULTS" | tail -2 | head -1 |
    jq '([.per_node[].bytes] | add) / ([.per_node[].seconds] | max) | round')
  local from b model_nodes pred
  for from in redis-benchmark node; do
    b=$bcache; [ "$from" = node ] && b=$bnode
    for model_nodes in 1 "$NODES"; do
      pred=0
      if [ "$b" != 0 ]; then
        cat >"$WORK/model.toml" <<TOML
[model]
cache = "remote"
split = "100-0-0"
memory_budget = $QUOTA
sample_bytes = $MEAN
dataset_samples = $DS_FILES
nodes = $model_nodes
t_decode_augment = inf
t_augment = inf
b_cache = $b
b_storage = "${RATE}MB/s"
TOML
        pred=$("$EPOCHFS" model --config "$WORK/model.toml" --json | jq '.predicted_samples_per_s')
      fi
      printf '{"setup":"model","rep":%s,"nodes":%s,"b_from":"%s","redis_get_per_s":%s,"mean_bytes":%s,"b_cache":%s,"predicted":%s}\n' \
        "$rep" "$model_nodes" "$from" "$rps" "$MEAN" "$b" "$pred" >>"$RESULTS"
      log "  model, B_cache from $from ($((b / 1000000)) MB/s), $model_nodes node(s): $(printf '%.0f' "$pred") samples/s"
    done
  done
}

# rotate N WORDS...: the words rotated left by N.
rotate() { local n=$1; shift; local a=("$@") k=${#a[@]} i; for ((i = 0; i < k; i++)); do printf '%s ' "${a[$(( (i + n) % k ))]}"; done; }

START=$(date -u +%Y-%m-%dT%H:%MZ); T0=$SECONDS
printf '{"meta":true,"start":"%s","quick":"%s","commit":"%s","epochfs_sha":"%s","load_start":"%s","files":%s,"dataset_bytes":%s,"mean_bytes":%s,"rate_mb":%s,"nodes":%s,"readers":%s,"workers":%s,"reps":%s,"quota":%s}\n' \
  "$START" "$QUICK" "$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)" "$EPOCHFS_SHA" \
  "$(cut -d' ' -f1-3 /proc/loadavg)" "$DS_FILES" "$DS_BYTES" "$MEAN" "$RATE" "$NODES" "$READERS" "$WORKERS" "$REPS" "$QUOTA" >"$RESULTS"
log "dataset: $DS_FILES files, $DS_BYTES bytes (mean $MEAN); PFS $RATE MB/s; $NODES nodes x $READERS readers"

pfs_setup "$WORK/pfs" "$RATE"
redis_start
for rep in $(seq "$REPS"); do
  for setup in $(rotate "$((rep - 1))" $SETUPS); do
    run_one "$setup" "$rep"
  done
done
printf '{"meta_end":true,"load_end":"%s","seconds":%s}\n' "$(cut -d' ' -f1-3 /proc/loadavg)" "$((SECONDS - T0))" >>"$RESULTS"
log "results: $RESULTS ($((SECONDS - T0)) s)"
/usr/bin/python3 "$HERE/report.py" "$RESULTS" | tee "$WORK/report.md"
