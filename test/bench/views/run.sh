#!/usr/bin/env bash
# Preprocessed views against torchvision (docs/benchmarks.md, "Preprocessed views"):
#
#   three   3 concurrent jobs taking augmented batches (epochfs.Batches) vs 3 torchvision
#           DataLoaders (RandomResizedCrop(224) + RandomHorizontalFlip + PILToTensor) over the same
#           mount, one epoch each, the same total worker count (WORKERS: the daemon's
#           [preprocess] workers, one DataLoader worker per job); aggregate samples/s, the
#           preprocessing operations per epoch, and the daemon's peak RSS against its budgets.
#   decoded one job, epochs 2-3 from a decoded cache that holds the dataset, vs one DataLoader
#           with WORKERS workers, epochs 2-3.
#   memory  three jobs, two epochs, caches that fill (512 MiB decoded, 256 MiB augmented, no shared
#           buffer): the daemon's peak RSS above the two budgets.
#   encoded view=encoded batches of 256 vs 8 threads reading the tier directory, with the page
#           cache warm (every file read just before) and cold (drop_caches before each side).
#
# The dataset (FILES ImageNet-like JPEGs from test/datagen, in CLASSES classes) is resident in the
# tier before anything is measured. Runs alternate which side goes first; REPS repetitions; the
# median and the spread are printed. Needs root, Debian's python3-torch/torchvision (/usr/bin/python3).
#
# With BASE (another epochfs binary, say one built from an earlier commit), every repetition of
# every case runs on both binaries, in alternating order, each on its own tier and state directory,
# and each figure is reported for both ("three[now]", "three[base]"): a change is compared with
# the binary from before in the same runs. Each repetition mounts anew.
#
# Environment: WORK (/var/tmp/epochfs-bench-views), FILES (2000), CLASSES (100), REPS (3),
# WORKERS (3), CASES ("three decoded memory encoded"), BASE (none).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
HERE=$ROOT/test/bench/views
WORK=${WORK:-/var/tmp/epochfs-bench-views}
FILES=${FILES:-2000}
CLASSES=${CLASSES:-100}
REPS=${REPS:-3}
WORKERS=${WORKERS:-3}
CASES=${CASES:-three decoded memory encoded}
BASE=${BASE:-}
PY=/usr/bin/python3
export PATH=$PATH:/usr/local/go/bin PYTHONPATH=$ROOT/python
EPOCHFS=$WORK/bin/epochfs
SRC=$WORK/src MNT=$WORK/mnt TIER=$WORK/tier STATE=$WORK/state
BINS=now
[ -n "$BASE" ] && BINS="now base"
RESULTS=$WORK/results-$(date +%Y%m%d-%H%M%S).jsonl
DAEMON=

log() { echo "views: $*" >&2; }
die() { log "$*"; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root"
mounted() { awk -v m="$MNT" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; }
do_unmount() {
	if mounted; then "$EPOCHFS" unmount --lazy "$MNT" >/dev/null 2>&1 || umount -l "$MNT" || true; fi
	DAEMON=
}
trap do_unmount EXIT
trap 'exit 130' INT TERM

mkdir -p "$WORK/bin" "$MNT"
(cd "$ROOT" && go build -o "$WORK/bin/" ./cmd/epochfs ./test/datagen/cmd/datagen)
if [ -n "$BASE" ]; then
	[ -x "$BASE" ] || die "BASE=$BASE: not an executable"
	cp "$BASE" "$WORK/bin/epochfs-base.tmp" && mv "$WORK/bin/epochfs-base.tmp" "$WORK/bin/epochfs-base"
fi
if [ ! -e "$WORK/src.complete" ] || [ "$(cat "$WORK/src.complete")" != "$FILES $CLASSES" ]; then
	log "generating $FILES files"
	rm -rf "$SRC" "$TIER" "$STATE"
	"$WORK/bin/datagen" -out "$SRC" -files "$FILES" -classes "$CLASSES" -seed 1 >&2
	echo "$FILES $CLASSES" >"$WORK/src.complete"
fi

# use_bin now|base: the binary the next mount runs, with its own tier and state directory.
use_bin() {
	if [ "$1" = base ]; then
		EPOCHFS=$WORK/bin/epochfs-base TIER=$WORK/tier-base STATE=$WORK/state-base
	else
		EPOCHFS=$WORK/bin/epochfs TIER=$WORK/tier STATE=$WORK/state
	fi
}
# bins_for REP: the binaries of repetition REP, in alternating order.
bins_for() { if [ $(($1 % 2)) = 0 ]; then echo "$BINS" | tr ' ' '\n' | tac | tr '\n' ' '; else echo "$BINS"; fi; }
# label CASE BIN: a figure's case, with its binary when there are two.
label() { if [ -n "$BASE" ]; then echo "$1[$2]"; else echo "$1"; fi; }

# mount_views NAME: mount with [preprocess] from $WORK/NAME.toml, the dataset resident.
mount_views() {
	local out
	out=$("$EPOCHFS" mount --config "$WORK/$1.toml" --tier "disk=$TIER:100GiB" --state "$STATE" "$SRC" "$MNT")
	DAEMON=$(sed -n 's/.*(pid \([0-9]*\),.*/\1/p' <<<"$out")
	"$EPOCHFS" warmup --wait 100 "$MNT" >/dev/null
}
stat_of() { sed -n "s/^$1=//p" "$MNT/.epochfs/status"; }
hwm_kb() { awk '/^VmHWM:/ { print $2 }' "/proc/$DAEMON/status"; }
clear_hwm() { echo 5 >"/proc/$DAEMON/clear_refs" 2>/dev/null || true; }

# run3 CMD...: runs 3 consumers at once; prints their samples and the seconds from the first
# consumer's start of the epoch to the last one's end (Python's start-up is not counted).
run3() {
	local pids=() i
	for i in 1 2 3; do
		"$@" "$i" >"$WORK/out.$i" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; done
	jq -s 'add | "\([.[].samples] | add) \(([.[].end] | max) - ([.[].start] | min))"' -r "$WORK"/out.[123]
}
epochfs_job() { $PY "$HERE/consume.py" batches "$MNT" "j$REP-$1" --epochs 1 --batch 64; }
# end_jobs NAME...: a finished job is removed, as a training script's epilogue would; a job left
# behind stays a consumer of the views until its lease ends and would keep what it has not taken.
end_jobs() { local j; for j in "$@"; do rmdir "$MNT/.epochfs/jobs/$j"; done; }
tv_job() { $PY "$HERE/consume.py" torchvision "$MNT" --epochs 1 --workers 1 --batch 64; }

report() { # CASE KEY VALUES...: median (min-max)
	local cs=$1 key=$2
	shift 2
	printf '%s\n' "$@" | sort -g | awk -v c="$cs" -v k="$key" '{ v[NR] = $1 } END { printf "%s %s: %.2f (%.2f-%.2f), n=%d\n", c, k, v[int((NR+1)/2)], v[1], v[NR], NR }'
}

log "load at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
for cs in $CASES; do
	case $cs in
	three)
		cat >"$WORK/three.toml" <<TOML
[preprocess]
augment = ["random_resized_crop:224", "hflip:0.5"]
output = "uint8_hwc"
workers = $WORKERS
decoded_cache = "0"
augmented_cache = "2GiB"
TOML
		declare -A ratios=() rss=() ops=()
		for REP in $(seq "$REPS"); do
			for B in $(bins_for "$REP"); do
				use_bin "$B"
				mount_views three
				order="epochfs tv"
				[ $((REP % 2)) = 0 ] && order="tv epochfs"
				for side in $order; do
					if [ "$side" = epochfs ]; then
						before=$(stat_of preprocess_augments)
						clear_hwm
						read -r n s < <(run3 epochfs_job)
						end_jobs "j$REP-1" "j$REP-2" "j$REP-3"
						# What the producer made ahead for an epoch that never came counts too.
						sleep 2
						after=$(stat_of preprocess_augments)
						e_rate=$(echo "$n / $s" | bc -l)
						rss[$B]+=" $(hwm_kb)"
						ops[$B]+=" $(echo "($after - $before) / $FILES" | bc -l)"
						log "three rep $REP $B: epochfs $n samples in ${s}s; $((after - before)) augmentations"
					else
						read -r n s < <(run3 tv_job)
						t_rate=$(echo "$n / $s" | bc -l)
						log "three rep $REP $B: torchvision $n samples in ${s}s"
					fi
				done
				ratios[$B]+=" $(echo "$e_rate / $t_rate" | bc -l)"
				echo "{\"case\":\"three\",\"bin\":\"$B\",\"rep\":$REP,\"epochfs_sps\":$e_rate,\"torchvision_sps\":$t_rate}" >>"$RESULTS"
				do_unmount
			done
		done
		for B in $BINS; do
			# shellcheck disable=SC2086 # the lists are words
			report "$(label three "$B")" "aggregate samples/s, epochfs batches / torchvision DataLoaders" ${ratios[$B]}
			# shellcheck disable=SC2086
			report "$(label three "$B")" "preprocessing operations per epoch of 3 jobs / dataset" ${ops[$B]}
			# shellcheck disable=SC2086
			report "$(label three "$B")" "daemon peak RSS (KiB; budgets: augmented 2GiB, decoded 0)" ${rss[$B]}
		done
		;;
	decoded)
		cat >"$WORK/decoded.toml" <<TOML
[preprocess]
augment = ["random_resized_crop:224", "hflip:0.5"]
output = "uint8_hwc"
workers = $WORKERS
decoded_cache = "8GiB"
augmented_cache = "512MiB"
TOML
		declare -A ratios=() over=()
		for REP in $(seq "$REPS"); do
			for B in $(bins_for "$REP"); do
				use_bin "$B"
				mount_views decoded
				clear_hwm
				e=$($PY "$HERE/consume.py" batches "$MNT" "d$REP" --epochs 3 --batch 64)
				# The daemon's peak RSS over what its caches held: the fixed overhead.
				held=$(($(stat_of decoded_cache_bytes) + $(stat_of augmented_cache_bytes)))
				over[$B]+=" $(echo "($(hwm_kb) * 1024 - $held) / 1048576" | bc -l)"
				log "decoded rep $REP $B: peak RSS $(hwm_kb) KiB, caches $held bytes"
				end_jobs "d$REP"
				t=$($PY "$HERE/consume.py" torchvision "$MNT" --epochs 3 --workers "$WORKERS" --batch 64)
				er=$(jq '([.[1:][].samples] | add) / ([.[1:][].seconds] | add)' <<<"$e")
				tr=$(jq '([.[1:][].samples] | add) / ([.[1:][].seconds] | add)' <<<"$t")
				log "decoded rep $REP $B: epochfs epochs 2-3 $er samples/s, torchvision $tr (cache $(stat_of decoded_cache_entries) entries)"
				ratios[$B]+=" $(echo "$er / $tr" | bc -l)"
				echo "{\"case\":\"decoded\",\"bin\":\"$B\",\"rep\":$REP,\"epochfs_sps\":$er,\"torchvision_sps\":$tr}" >>"$RESULTS"
				do_unmount
			done
		done
		for B in $BINS; do
			# shellcheck disable=SC2086
			report "$(label decoded "$B")" "samples/s in epochs 2-3, one job from the decoded cache / torchvision" ${ratios[$B]}
			# shellcheck disable=SC2086
			report "$(label decoded "$B")" "daemon peak RSS above the bytes its caches held (MiB)" ${over[$B]}
		done
		;;
	memory)
		# Caches that fill: the daemon's peak RSS against its budgets, three jobs.
		cat >"$WORK/memory.toml" <<TOML
[preprocess]
augment = ["random_resized_crop:224", "hflip:0.5"]
output = "uint8_hwc"
workers = $WORKERS
decoded_cache = "512MiB"
augmented_cache = "256MiB"
[sampler]
buffer = "0"
TOML
		declare -A over=()
		for REP in $(seq "$REPS"); do
			for B in $(bins_for "$REP"); do
				use_bin "$B"
				mount_views memory
				clear_hwm
				pids=()
				for i in 1 2 3; do
					$PY "$HERE/consume.py" batches "$MNT" "m$REP-$i" --epochs 2 --batch 64 >/dev/null &
					pids+=($!)
				done
				for p in "${pids[@]}"; do wait "$p"; done
				end_jobs "m$REP-1" "m$REP-2" "m$REP-3"
				log "memory rep $REP $B: peak RSS $(hwm_kb) KiB; decoded cache $(stat_of decoded_cache_bytes) of $((512 << 20)) bytes"
				over[$B]+=" $(echo "($(hwm_kb) * 1024 - (768 * 1048576)) / 1048576" | bc -l)"
				do_unmount
			done
		done
		for B in $BINS; do
			# shellcheck disable=SC2086
			report "$(label memory "$B")" "daemon peak RSS above its cache budgets (512 MiB decoded + 256 MiB augmented), MiB" ${over[$B]}
		done
		;;
	encoded)
		cat >"$WORK/encoded.toml" <<TOML
[preprocess]
workers = $WORKERS
TOML
		declare -A warm=() cold=()
		for REP in $(seq "$REPS"); do
			for B in $(bins_for "$REP"); do
				use_bin "$B"
				mount_views encoded
				$PY "$HERE/consume.py" batches "$MNT" "warm$REP" --view encoded --batch 256 >/dev/null
				end_jobs "warm$REP"
				for temp in warm cold; do
					order="epochfs native"
					[ $((REP % 2)) = 0 ] && order="native epochfs"
					for side in $order; do
						if [ "$temp" = cold ]; then sync; echo 3 >/proc/sys/vm/drop_caches; else
							cat "$TIER"/data/*/* >/dev/null; fi
						if [ "$side" = epochfs ]; then
							er=$($PY "$HERE/consume.py" batches "$MNT" "e$REP$temp" --view encoded --batch 256 | jq '.[0].samples / .[0].seconds')
							end_jobs "e$REP$temp"
						else
							nr=$($PY "$HERE/consume.py" native "$TIER/data" --threads 8 | jq '.[0].samples / .[0].seconds')
						fi
					done
					log "encoded rep $REP $B $temp: batches $er files/s, native 8 threads $nr"
					r=$(echo "$er / $nr" | bc -l)
					if [ "$temp" = warm ]; then warm[$B]+=" $r"; else cold[$B]+=" $r"; fi
					echo "{\"case\":\"encoded-$temp\",\"bin\":\"$B\",\"rep\":$REP,\"epochfs_sps\":$er,\"native_sps\":$nr}" >>"$RESULTS"
				done
				do_unmount
			done
		done
		for B in $BINS; do
			# shellcheck disable=SC2086
			report "$(label encoded "$B")" "files/s, view=encoded batches / native 8-reader reads of the tier, warm" ${warm[$B]}
			# shellcheck disable=SC2086
			report "$(label encoded "$B")" "files/s, view=encoded batches / native 8-reader reads of the tier, cold" ${cold[$B]}
		done
		;;
	esac
done
log "results in $RESULTS"
