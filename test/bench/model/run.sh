#!/usr/bin/env bash
# The DSI model against the mount (docs/benchmarks.md, "The model against the mount"; Seneca §6):
# for two dataset sizes, one and three jobs, and several splits of one memory budget (the
# single-form splits, the three half-and-half ones, and the split the model chooses), mount with
# that split forced, run the jobs for EPOCHS epochs taking augmented batches (epochfs.Batches,
# RandomResizedCrop(224) + flip) as fast as they can, and measure the samples/s of all the jobs
# over epochs 2..EPOCHS. The prediction is the mount's own (.epochfs/model, views rules) from
# inputs profiled on this node first:
#
#   T_D+A, T_A, decoded and augmented sizes, B_cache   `epochfs model --profile` (our pipeline on the
#                                                      dataset, the RAM tier)
#   B_storage    8 threads reading the source whole with its files in the page cache (they stay
#                there on this node between epochs)
#   T_GPU        the jobs' own ingestion: K jobs whose whole epoch was made ahead (lookahead 64,
#                a large augmented cache) take it as fast as they can; ingest_on_cpu = true (no GPU:
#                ingestion and preprocessing share the cores)
#
# Prints every configuration's prediction and median measurement, the Pearson correlation over all
# of them, and for each dataset size and job count whether the model's split measures within 5 %
# of the best measured split. Needs root and Debian's python3-torch (/usr/bin/python3).
#
# Environment: WORK (/var/tmp/epochfs-bench-model), SIZES ("600 1800"), CLASSES (10),
# BUDGET (384MiB), WORKERS (3), BATCH (64), EPOCHS (3), REPS (3), JOBS ("1 3"),
# SPLITS ("100-0-0 0-100-0 0-0-100 50-50-0 50-0-50 0-50-50 mdp").
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
CONSUME=$ROOT/test/bench/views/consume.py
WORK=${WORK:-/var/tmp/epochfs-bench-model}
SIZES=${SIZES:-600 1800}
CLASSES=${CLASSES:-10}
BUDGET=${BUDGET:-384MiB}
WORKERS=${WORKERS:-3}
BATCH=${BATCH:-64}
EPOCHS=${EPOCHS:-3}
REPS=${REPS:-3}
JOBS=${JOBS:-1 3}
SPLITS=${SPLITS:-100-0-0 0-100-0 0-0-100 50-50-0 50-0-50 0-50-50 mdp}
PY=/usr/bin/python3
export PATH=$PATH:/usr/local/go/bin PYTHONPATH=$ROOT/python
EPOCHFS=$WORK/bin/epochfs
MNT=$WORK/mnt
SHM=/dev/shm/epochfs-bench-model
RESULTS=$WORK/results-$(date +%Y%m%d-%H%M%S).jsonl
AUGMENT='["random_resized_crop:224", "hflip:0.5"]'

log() { echo "model-bench: $*" >&2; }
die() { log "$*"; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root"
mounted() { awk -v m="$MNT" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; }
do_unmount() {
	if mounted; then "$EPOCHFS" unmount "$MNT" >/dev/null 2>&1 || "$EPOCHFS" unmount --lazy "$MNT" >/dev/null 2>&1 || umount -l "$MNT" || true; fi
}
cleanup() { do_unmount; rm -rf "$SHM"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$WORK/bin" "$MNT"
(cd "$ROOT" && go build -o "$WORK/bin/" ./cmd/epochfs ./test/datagen/cmd/datagen)
stat_of() { sed -n "s/^$1=//p" "$MNT/.epochfs/status"; }
model_of() { sed -n "s/^$1=//p" "$MNT/.epochfs/model"; }

# mount_cfg TOML: mounts with a fresh RAM tier.
mount_cfg() {
	rm -rf "$SHM/mem"
	mkdir -p "$SHM/mem"
	"$EPOCHFS" mount --config "$1" "$SRC" "$MNT" >/dev/null
	# A tier smaller than the dataset (the model's encoded share) holds what fits; the rest is read
	# from the source, and warmup says so.
	"$EPOCHFS" warmup --wait 100 "$MNT" >/dev/null 2>&1 || true
}

# run_jobs K EPOCHS PREFIX [ARGS]: K consumers at once; prints "samples seconds" of epochs
# 2..EPOCHS of all of them together.
run_jobs() {
	local k=$1 e=$2 prefix=$3 i
	shift 3
	rm -f "$WORK"/out.*
	for i in $(seq "$k"); do
		$PY "$CONSUME" batches "$MNT" "$prefix-$i" --epochs "$e" --batch "$BATCH" "$@" >"$WORK/out.$i" &
	done
	wait
	jq -s -r 'map(if length > 1 then .[1:] else . end) | add | "\([.[].samples] | add) \(([.[].end] | max) - ([.[].start] | min))"' "$WORK"/out.*
}

log "load at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
for N in $SIZES; do
	SRC=$WORK/src-$N
	if [ ! -e "$WORK/src-$N.complete" ]; then
		rm -rf "$SRC"
		"$WORK/bin/datagen" -out "$SRC" -files "$N" -classes "$CLASSES" -seed "$N" >&2
		touch "$WORK/src-$N.complete"
	fi
	STATE=$WORK/state-$N
	# Inputs: our pipeline, the RAM tier.
	cat >"$WORK/profile.toml" <<TOML
source = "$SRC"
[[tier]]
name = "mem"
path = "$SHM/mem"
quota = "1GiB"
[model]
memory_budget = "$BUDGET"
[preprocess]
augment = $AUGMENT
output = "uint8_hwc"
workers = $WORKERS
TOML
	mkdir -p "$SHM/mem"
	# Three profiles (the machine is shared): the median of each input.
	for i in 1 2 3; do
		"$EPOCHFS" model --config "$WORK/profile.toml" --profile --json >"$WORK/profile-$N.$i.json" 2>/dev/null
	done
	median3() { jq -s "[.[] | $1] | sort | .[1]" "$WORK"/profile-"$N".[123].json; }
	TDA=$(median3 .inputs.t_decode_augment.value) TA=$(median3 .inputs.t_augment.value) BCACHE=$(median3 .inputs.b_cache.value)
	DEC=$(median3 .profile.DecodedBytes.Value) AUG=$(median3 .profile.AugmentedBytes.Value)
	log "N=$N: T_D+A $(jq -s -c '[.[].inputs.t_decode_augment.value | round]' "$WORK"/profile-"$N".[123].json), T_A $(jq -s -c '[.[].inputs.t_augment.value | round]' "$WORK"/profile-"$N".[123].json) (three profiles)"
	cat "$SRC"/*/* >/dev/null
	BSTORAGE=$($PY "$CONSUME" native "$SRC" --threads 8 | jq '.[0].bytes / .[0].seconds')
	log "N=$N: T_D+A $TDA/s, T_A $TA/s, decoded $DEC B, augmented $AUG B, B_cache $BCACHE B/s, B_storage (warm) $BSTORAGE B/s"
	[ "$TDA" != null ] && [ "$TA" != null ] && [ "$DEC" != null ] || die "the profile measured no pipeline: $WORK/profile-$N.1.json"

	for K in $JOBS; do
		# T_GPU: K jobs take an epoch that was made ahead of them.
		cat >"$WORK/probe.toml" <<TOML
state_dir = "$STATE"
[[tier]]
name = "mem"
path = "$SHM/mem"
quota = "1GiB"
[preprocess]
augment = $AUGMENT
output = "uint8_hwc"
workers = $WORKERS
decoded_cache = "0"
augmented_cache = "4GiB"
[sampler]
lookahead = 64
TOML
		mount_cfg "$WORK/probe.toml"
		rm -f "$WORK"/out.* "$WORK"/ready.* "$WORK/go"
		for i in $(seq "$K"); do
			$PY "$CONSUME" batches "$MNT" "probe-$i" --batch "$BATCH" --ready "$WORK/ready.$i" --go "$WORK/go" >"$WORK/out.$i" &
		done
		until [ "$(ls "$WORK"/ready.* 2>/dev/null | wc -l)" = "$K" ]; do sleep 0.1; done
		# The producer is done when the rest of the epoch waits in the cache: every sample but
		# those of the first batches (taken by some jobs, still cached for the others).
		want=$((N - K * BATCH))
		for _ in $(seq 600); do
			[ "$(stat_of preprocess_in_flight)" = 0 ] && [ "$(stat_of augmented_cache_entries)" -ge "$want" ] && break
			sleep 0.1
		done
		touch "$WORK/go"
		wait
		TGPU=$(jq -s '([.[][0].samples] | add) / (([.[][0].end] | max) - ([.[][0].start] | min))' "$WORK"/out.*)
		do_unmount
		log "N=$N K=$K: T_GPU (ingestion of $K jobs) $TGPU samples/s"
		eval "TGPU_$K=$TGPU"
	done

	for REP in $(seq "$REPS"); do
		for K in $JOBS; do
			tgpu_var=TGPU_$K
			for SPLIT in $SPLITS; do
				forced=""
				[ "$SPLIT" != mdp ] && forced="split = \"$SPLIT\""
				cat >"$WORK/run.toml" <<TOML
state_dir = "$STATE"
[[tier]]
name = "mem"
path = "$SHM/mem"
quota = "model"
[preprocess]
augment = $AUGMENT
output = "uint8_hwc"
workers = $WORKERS
[model]
memory_budget = "$BUDGET"
t_decode_augment = $TDA
t_augment = $TA
decoded_bytes = $DEC
augmented_bytes = $AUG
b_cache = $BCACHE
b_storage = $BSTORAGE
t_gpu = ${!tgpu_var}
ingest_on_cpu = true
jobs = $K
batch_size = $BATCH
$forced
TOML
				mount_cfg "$WORK/run.toml"
				pred=$(model_of predicted_samples_per_s)
				chosen="$(model_of split_encoded_pct)-$(model_of split_decoded_pct)-$(model_of split_augmented_pct)"
				bound=$(model_of views.bound_by)
				read -r n s < <(run_jobs "$K" "$EPOCHS" "r$REP-$SPLIT")
				meas=$(echo "$n / $s" | bc -l)
				do_unmount
				log "rep $REP N=$N K=$K split $SPLIT ($chosen): predicted $pred, measured $(printf %.0f "$meas") samples/s (bound by $bound)"
				printf '{"n":%d,"k":%d,"split":"%s","chosen":"%s","rep":%d,"predicted":%s,"measured":%s,"bound":"%s"}\n' \
					"$N" "$K" "$SPLIT" "$chosen" "$REP" "$pred" "$meas" "$bound" >>"$RESULTS"
			done
		done
	done
done
log "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
$PY "$ROOT/test/bench/model/report.py" "$RESULTS"
log "results in $RESULTS"
