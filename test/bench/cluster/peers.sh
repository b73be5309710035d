#!/usr/bin/env bash
# Datasets larger than a node: data = "peers" against data = "redis", against
# no cluster, and against a dataset that fits every node (docs/benchmarks.md,
# "Datasets larger than a node"; docs/cluster.md).
#
#   SCENARIO=peers make bench-cluster    full run (~20-40 min on 2 cores)
#   QUICK=1 SCENARIO=peers make bench-cluster    smoke run
#
# Each of NODES nodes is an epochfs mount in its own network namespace (a veth
# into one bridge, a tc tbf of LINK each way: the node's NIC) and its own
# mount namespace, with its own sshfs client of the emulated PFS
# (test/bench/epochs/pfs.sh: sshd whose link is limited to RATE MB/s, reads
# counted at the server) bind-mounted at one common path. The Redis Cluster
# (redis.sh) listens on the bridge. Every node's tier takes 2/5 of the
# dataset, so no node can hold it and the three together hold 1.2x it.
#
# Setups, each run with fresh tiers, state and page cache, in an order
# rotated per repetition, REPS times:
#   peers   [cluster] data = "peers": each node keeps its share
#   peersbuf  the same with a shared buffer of 1/10 of the dataset per node
#           ([sampler] buffer): the samples a rank reads next are fetched
#           from their holders ahead of the reads
#   redis   [cluster] data = "redis" (tier_quota 1.25x the dataset): Redis
#           holds every file, each node keeps what fits
#   none    no cluster: torch's DistributedSampler, each node on its own
#   fits    data = "redis" with tiers of 1.25x the dataset, every node warmed
#           whole before the job (the reference of epochs >= 2)
# In each, one rank per node runs the training loop of the transport
# benchmark (train_ddp.py) for EPOCHS epochs as one data-parallel job:
# epochfs.DistributedSampler(cluster=True, sampler="ods") with a cluster,
# torch's without. Measured: each epoch's time (the slowest rank), the PFS
# bytes over the whole job, and each node's jobs/bench/status (samples of
# each epoch read locally, from a peer, from the PFS).
#
# Then the link (setup "link", once per repetition): NODES=2 nodes, LINK_TEST
# each way, a dataset of 1 MiB files: node 0 mounts alone and copies it all;
# node 1 joins, and its share moves to it over the link. Its cluster.peer_bytes,
# sampled every 0.2 s, gives the peer read rate against the link's.
#
# Results: one JSON line per run in WORK/results-*.jsonl; the tables from
# peers_report.py on stdout and in WORK/report-peers.md. Everything started
# here is stopped by PID on exit; every mount, namespace and the bridge are
# removed.
#
# Environment: QUICK=1; WORK (/var/tmp/epochfs-bench-peers); FILES (3000,
# quick 600); CLASSES (50); RATE (50 MB/s); LINK (10gbit); LINK_TEST (200mbit:
# slow enough to sample on this machine); LINK_FILES (400, quick 200); REPS (3, quick 1); NODES (3); EPOCHS (3);
# WORKERS (epochfs [placement] workers, 6); SETUPS ("peers peersbuf redis none fits";
# any subset); LINK_RUN (1: the link measurement each repetition; 0: none).
# Needs root, ip/tc/nsenter/unshare, sshd, sshfs, redis-server, redis-cli, jq,
# Debian's python3-torch and python3-torchvision (make bench-deps).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
HERE=$ROOT/test/bench/cluster
export PATH=$PATH:/usr/local/go/bin
QUICK=${QUICK:-}
WORK=${WORK:-/var/tmp/epochfs-bench-peers}
if [ -n "$QUICK" ]; then
  FILES=${FILES:-600}; REPS=${REPS:-1}; LINK_FILES=${LINK_FILES:-200}
else
  FILES=${FILES:-3000}; REPS=${REPS:-3}; LINK_FILES=${LINK_FILES:-400}
fi
CLASSES=${CLASSES:-50}
SEED=${SEED:-1}
RATE=${RATE:-50}
LINK=${LINK:-10gbit}
LINK_TEST=${LINK_TEST:-200mbit}
NODES=${NODES:-3}
EPOCHS=${EPOCHS:-3}
WORKERS=${WORKERS:-6}
SETUPS=${SETUPS:-peers peersbuf redis none fits}
LINK_RUN=${LINK_RUN:-1}
EPOCHFS=$WORK/bin/epochfs
RUN=$WORK/run
SRC=$RUN/src
RESULTS=$WORK/results-peers-$(date +%Y%m%d-%H%M%S).jsonl
PFS_NS=epochfs-bench-peers-pfs-$$
NET=epb$$                  # the bridge; node i's namespace is $NET-$i
SUBNET=10.213.$(($$ % 200 + 20))
export REDIS_BIND=$SUBNET.1

log() { echo "bench-peers: $(date +%H:%M:%S) $*" >&2; }
die() { log "$*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (network and mount namespaces, drop_caches, mounts)"
for t in ip tc nsenter unshare sshd sshfs ssh-keygen redis-server redis-cli jq; do
  command -v "$t" >/dev/null || die "$t missing (make bench-deps; apt-get install redis-server redis-tools jq)"
done
[ -x "$ROOT/bin/epochfs" ] || die "$ROOT/bin/epochfs missing: run make build"
/usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null || die "Debian's python3-torch and python3-torchvision missing"

source "$ROOT/test/bench/epochs/pfs.sh"
source "$HERE/redis.sh"

# ---- the network: a bridge, a namespace per node ------------------------------------
NET_MADE=()
net_setup() { # N RATE
  local n=$1 rate=$2 i ns
  ip link add "$NET" type bridge
  NET_MADE+=(bridge)
  ip addr add "$SUBNET.1/24" dev "$NET"
  ip link set "$NET" up
  for i in $(seq 0 $((n - 1))); do
    ns=$NET-$i
    ip netns add "$ns"
    NET_MADE+=("$ns")
    ip -n "$ns" link set lo up
    ip link add "${NET}v$i" type veth peer name eth0 netns "$ns"
    ip link set "${NET}v$i" master "$NET" up
    ip -n "$ns" addr add "$SUBNET.$((10 + i))/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
  net_rate "$n" "$rate"
}
net_rate() { # N RATE: tbf of RATE each way on every node's link
  local n=$1 rate=$2 i
  for i in $(seq 0 $((n - 1))); do
    tc qdisc replace dev "${NET}v$i" root tbf rate "$rate" burst 4mb latency 50ms
    ip netns exec "$NET-$i" tc qdisc replace dev eth0 root tbf rate "$rate" burst 4mb latency 50ms
  done
}
net_cleanup() {
  local x
  for x in "${NET_MADE[@]}"; do
    if [ "$x" = bridge ]; then ip link del "$NET" 2>/dev/null || true; else ip netns del "$x" 2>/dev/null || true; fi
  done
  NET_MADE=()
}

# ---- nodes ------------------------------------------------------------------------
source "$HERE/nodes.sh"
node_mnt() { echo "/proc/${HOLDER[$1]}/root$(node_dir "$1")/mnt"; }
stat_of() { node_status "$1" | awk -F= -v k="$2" '$1 == k { print $2 }'; }

# node_up I SETUP DATASET_DIR DATASET_BYTES
node_up() {
  local i=$1 setup=$2 ds=$3 bytes=$4 d quota
  d=$(node_dir "$i")
  node_ns "$i" "$ds"
  quota=$((bytes * 2 / 5))
  if [ "$setup" = fits ] || [ "$setup" = link ]; then quota=$((bytes * 5 / 4)); fi
  [ -s "$RUN/cluster.key" ] || (umask 077; head -c 32 /dev/urandom | base64 >"$RUN/cluster.key")
  {
    printf '[placement]\nworkers = %s\nsource_bandwidth = "0"\nvalidate = "once"\n' "$WORKERS"
    if [ "$setup" = peersbuf ]; then printf '\n[sampler]\nbuffer = "%s"\n' $((bytes / 10)); fi
    if [ "$setup" != none ]; then
      printf '\n[cluster]\nredis = [%s]\ndataset = "bench"\nkey_file = "%s"\ninsecure = true\n' \
        "$(printf '"%s:%s",' "$REDIS_BIND" "${REDIS_PORTS[@]}" | sed 's/,$//')" "$RUN/cluster.key"
      if [ "$setup" = peers ] || [ "$setup" = peersbuf ] || [ "$setup" = link ]; then
        printf 'data = "peers"\npeer_listen = "%s.%s:7070"\n' "$SUBNET" $((10 + i))
      else
        printf 'tier_quota = "%s"\n' $((bytes * 5 / 4))
      fi
    fi
  } >"$d/epochfs.toml"
  nsenter -t "${HOLDER[$i]}" -m --net="/run/netns/$NET-$i" -- "$EPOCHFS" mount --config "$d/epochfs.toml" \
    --tier "disk=$d/tier:$quota" --state "$d/state" "$SRC" "$d/mnt" >&2
  node_pid "$i"
}


TRAIN_PIDS=()
cleanup() {
  local rc=$? i
  for i in "${TRAIN_PIDS[@]}"; do kill "$i" 2>/dev/null || true; done
  for i in "${!HOLDER[@]}"; do node_down "$i" || true; done
  redis_stop
  pfs_cleanup
  net_cleanup
  rm -rf "$RUN"
  pfs_check_left "$WORK"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
wait_until() { # SECONDS CMD...: poll CMD every 0.2 s
  local t=$1; shift
  for _ in $(seq $((t * 5))); do "$@" && return 0; sleep 0.2; done
  return 1
}
settled() { [ "$(stat_of "$1" cluster.members_settled)" = yes ] && [ "$(stat_of "$1" cluster.members)" = "$2" ]; }
idle() { [ "$(stat_of "$1" placements_queued)" = 0 ]; }

# ---- datasets and tools --------------------------------------------------------------
mkdir -p "$WORK/bin"
rm -rf "$WORK/logs"; mkdir -p "$WORK/logs"
RUN_TAG=start
cp "$ROOT/bin/epochfs" "$EPOCHFS.tmp" && mv "$EPOCHFS.tmp" "$EPOCHFS"
EPOCHFS_SHA=$(sha256sum "$EPOCHFS" | cut -c1-12)
DS=$WORK/ds-$FILES-c$CLASSES-s$SEED
if [ ! -f "$DS/.complete" ]; then
  rm -rf "$DS"
  log "generating $FILES samples in $CLASSES classes in $DS"
  go run "$ROOT/test/datagen/cmd/datagen" -out "$DS/images" -files "$FILES" -classes "$CLASSES" -seed "$SEED" >&2
  touch "$DS/.complete"
fi
LDS=$WORK/ds-link-$LINK_FILES
if [ ! -f "$LDS/.complete" ]; then
  rm -rf "$LDS"; mkdir -p "$LDS/images/c0"
  for f in $(seq "$LINK_FILES"); do head -c 1048576 /dev/urandom >"$LDS/images/c0/f$f.bin"; done
  touch "$LDS/.complete"
fi
bytes_of() { find "$1/images" -type f -printf '%s\n' | awk '{ s += $1 } END { printf "%.0f", s }'; }
DS_BYTES=$(bytes_of "$DS"); DS_FILES=$(find "$DS/images" -type f | wc -l)
LDS_BYTES=$(bytes_of "$LDS")

# ---- one training run -------------------------------------------------------------------
run_job() { # SETUP REP
  local setup=$1 rep=$2 i sampler=epochfs
  [ "$setup" = none ] && sampler=torch
  RUN_TAG=$setup-$rep
  log "rep $rep: $setup"
  redis_flush
  rm -rf "$RUN"; mkdir -p "$RUN"
  net_rate "$NODES" "$LINK"
  drop_caches
  : >"$PFS_DIR/sftp.log"   # from the mounts on: the walk, the shares' copies, the job
  for i in $(seq 0 $((NODES - 1))); do node_up "$i" "$setup" "$DS" "$DS_BYTES"; done
  if [ "$setup" = peers ] || [ "$setup" = peersbuf ]; then
    for i in $(seq 0 $((NODES - 1))); do wait_until 60 settled "$i" "$NODES" || die "node $i: members not settled"; done
  fi
  local warm_pfs=""
  if [ "$setup" = fits ]; then
    for i in $(seq 0 $((NODES - 1))); do nsx "$i" "$EPOCHFS" warmup --wait 100 "$(node_dir "$i")/mnt" >&2; done
    warm_pfs=$(pfs_counters | tr '\n' ' ')
    : >"$PFS_DIR/sftp.log"   # fits: the job's own reads only
  fi
  local t0; t0=$(date +%s.%N)
  TRAIN_PIDS=()
  for i in $(seq 0 $((NODES - 1))); do
    nsx "$i" env PYTHONPATH="$ROOT/python" /usr/bin/python3 "$HERE/train_ddp.py" "$(node_dir "$i")/mnt" \
      --rank "$i" --world "$NODES" --epochs "$EPOCHS" --sampler "$sampler" --seed "$rep" >"$WORK/out.$i" 2>"$WORK/err.$i" &
    TRAIN_PIDS+=($!)
  done
  local ok=1
  for i in "${TRAIN_PIDS[@]}"; do wait "$i" || ok=; done
  TRAIN_PIDS=()
  [ -n "$ok" ] || { tail -n 5 "$WORK"/err.* >&2; die "a rank failed"; }
  local t1; t1=$(date +%s.%N)
  # The job's PFS bytes: before the nodes unmount (a node left, the others
  # would take its share).
  local pfs; pfs=$(pfs_counters | tr '\n' ' ')
  local per_node="" jobst
  for i in $(seq 0 $((NODES - 1))); do
    jobst='{}'
    [ "$sampler" = epochfs ] && jobst=$(cat "$(node_mnt "$i")/.epochfs/jobs/bench/status" 2>/dev/null |
      jq -R -s -c 'split("\n") | map(select(test("^(epoch\\.|resident_reads|buffer_reads|peer_reads|source_reads)")) | split("=") | {(.[0]): .[1]}) | add // {}')
    per_node+=$(jq -c --argjson job "$jobst" --arg st "$(node_status "$i")" \
      '. + {job: $job, status: ($st | split("\n") | map(select(test("^(source_bytes|files_resident|buffer_|cluster\\.(peer_|hits|fills|members))")) | split("=") | {(.[0]): .[1]}) | add)}' \
      "$WORK/out.$i"),
  done
  for i in $(seq 0 $((NODES - 1))); do node_down "$i"; done
  printf '{"setup":"%s","rep":%s,"nodes":%s,"dataset_bytes":%s,"dataset_files":%s,"wall_s":%s,"pfs":"%s","warm_pfs":"%s","per_node":[%s]}\n' \
    "$setup" "$rep" "$NODES" "$DS_BYTES" "$DS_FILES" "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')" \
    "$pfs" "$warm_pfs" "${per_node%,}" >>"$RESULTS"
  log "  $(tail -1 "$RESULTS" | jq -r '"epochs \([range(0; .per_node[0].epochs | length) as $e | [.per_node[].epochs[$e].seconds] | max | . * 10 | round / 10]) s, PFS bytes / dataset \((.pfs | capture("sftp_bytes=(?<b>[0-9]+)").b | tonumber) / .dataset_bytes | . * 1000 | round / 1000)"')"
}

# ---- the link ---------------------------------------------------------------------------
run_link() { # REP
  local rep=$1
  RUN_TAG=link-$rep
  log "rep $rep: link ($LINK_TEST, $LINK_FILES files of 1 MiB)"
  redis_flush
  rm -rf "$RUN"; mkdir -p "$RUN"
  net_rate 2 "$LINK_TEST"
  drop_caches
  # Node 0 alone keeps everything; it must fit.
  node_up 0 link "$LDS" "$LDS_BYTES"
  wait_until 60 settled 0 1 || die "node 0 not settled"
  nsx 0 "$EPOCHFS" warmup --wait 100 "$(node_dir 0)/mnt" >&2
  node_up 1 link "$LDS" "$LDS_BYTES"
  wait_until 60 settled 1 2 || die "node 1 not settled"
  local samples="" t b
  for _ in $(seq 3000); do
    t=$(date +%s.%N); b=$(stat_of 1 cluster.peer_bytes)
    samples+="[$t,${b:-0}],"
    if idle 1 && [ "${b:-0}" != 0 ]; then break; fi
    sleep 0.2
  done
  local held; held=$(stat_of 1 files_resident)
  node_down 1; node_down 0
  printf '{"setup":"link","rep":%s,"link":"%s","files":%s,"file_bytes":1048576,"held_by_joiner":%s,"samples":[%s]}\n' \
    "$rep" "$LINK_TEST" "$LINK_FILES" "${held:-0}" "${samples%,}" >>"$RESULTS"
}

rotate() { local n=$1; shift; local a=("$@") k=${#a[@]} i; for ((i = 0; i < k; i++)); do printf '%s ' "${a[$(( (i + n) % k ))]}"; done; }

T0=$SECONDS
printf '{"meta":true,"start":"%s","quick":"%s","commit":"%s","epochfs_sha":"%s","load_start":"%s","files":%s,"dataset_bytes":%s,"rate_mb":%s,"link":"%s","link_test":"%s","nodes":%s,"epochs":%s,"workers":%s,"reps":%s}\n' \
  "$(date -u +%Y-%m-%dT%H:%MZ)" "$QUICK" "$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)" "$EPOCHFS_SHA" \
  "$(cut -d' ' -f1-3 /proc/loadavg)" "$DS_FILES" "$DS_BYTES" "$RATE" "$LINK" "$LINK_TEST" "$NODES" "$EPOCHS" "$WORKERS" "$REPS" >"$RESULTS"
log "dataset: $DS_FILES files, $DS_BYTES bytes; tiers 2/5 of it; PFS $RATE MB/s; links $LINK; $NODES nodes"

pfs_setup "$WORK/pfs" "$RATE"
net_setup "$NODES" "$LINK"
redis_start
for rep in $(seq "$REPS"); do
  for setup in $(rotate "$((rep - 1))" $SETUPS); do
    run_job "$setup" "$rep"
  done
  [ "$LINK_RUN" = 0 ] || run_link "$rep"
done
printf '{"meta_end":true,"load_end":"%s","seconds":%s}\n' "$(cut -d' ' -f1-3 /proc/loadavg)" "$((SECONDS - T0))" >>"$RESULTS"
log "results: $RESULTS ($((SECONDS - T0)) s)"
/usr/bin/python3 "$HERE/peers_report.py" "$RESULTS" | tee "$WORK/report-peers.md"
