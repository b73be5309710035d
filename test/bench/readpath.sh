#!/usr/bin/env bash
# Read path overhead of resident data: read throughput through an epochfs
# mount against native reads of the tier directory, in the same run.
#
#   bash test/bench/readpath.sh          (or: make bench-readpath)
#
# Cases: one 2 GiB file read sequentially with 1 MiB buffers (cold and warm
# page cache) and 20,000 files of 110 KB read whole by 8 concurrent readers
# (cold and warm). Each case is measured in every configuration of CONFIGS:
# a mount mode, passthrough or cached (--no-passthrough), and a
# placement.validate value (the large file only in the first configuration:
# one open per run). With BASE (another epochfs binary, say the last
# release) every configuration is also mounted with it, interleaved, and
# the rows say which binary ("new" is bin/epochfs). REPS rounds each mount
# every configuration once and measure one native/mount pair of every case,
# native and mount alternating which goes first; "cold" drops the page
# cache (echo 3 > /proc/sys/vm/drop_caches) before every single run. The
# daemon's user+system CPU time is read from /proc/PID/stat around every
# mount run and reported per 1,000 opens.
#
# The dataset, the tier and the catalog are generated once and kept in WORK
# (local disk, not tmpfs, so a cold read reads the disk). The generated part
# of the "Read path overhead (resident data)" section of docs/benchmarks.md is
# replaced; text outside its markers is kept.
#
# Environment: WORK (default /var/tmp/epochfs-bench-readpath), REPS (7),
# SMALL (20000), SMALL_SIZE (110000), LARGE_SIZE (2GiB), CONFIGS (mode and
# validate pairs separated by commas, "passthrough once,cached once"),
# CASES ("large-cold large-warm small-cold small-warm small-cold-again";
# small-cold-again is small-cold once every file was opened since the
# mount), BASE (path of a
# second epochfs binary to compare, or empty), OUT (docs/benchmarks.md,
# "-" for stdout only). Needs root (drop_caches, FUSE passthrough).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${WORK:-/var/tmp/epochfs-bench-readpath}
REPS=${REPS:-7}
SMALL=${SMALL:-20000}
SMALL_SIZE=${SMALL_SIZE:-110000}
LARGE_SIZE=${LARGE_SIZE:-2GiB}
CONFIGS=${CONFIGS:-passthrough once,cached once}
CASES=${CASES:-large-cold large-warm small-cold small-warm small-cold-again}
BASE=${BASE:-}
OUT=${OUT:-$ROOT/docs/benchmarks.md}
GO=${GO:-go}
export PATH=$PATH:/usr/local/go/bin

EPOCHFS=$WORK/bin/epochfs # a copy of bin/epochfs taken at the start (others may rebuild it)
EPOCHFS_BASE=$WORK/bin/epochfs-base
RP=$WORK/bin/readpath
SRC=$WORK/src
TIER=$WORK/tier
NATIVE=$TIER/data
MNT=$WORK/mnt
STATE=$WORK/state
RESULTS=$WORK/results-$(date +%Y%m%d-%H%M%S).jsonl
DAEMON=

log() { echo "readpath.sh: $*" >&2; }
die() { log "$*"; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (drop_caches, FUSE passthrough)"
[ -e /dev/fuse ] || die "no /dev/fuse"

mounted() { awk -v m="$MNT" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; }

do_unmount() {
	if mounted; then
		"$EPOCHFS" unmount "$MNT" >/dev/null || "$EPOCHFS" unmount --lazy "$MNT" >/dev/null || umount -l "$MNT" || true
	fi
	if [ -n "$DAEMON" ]; then
		# Only the daemon this script started; unmount lets it exit.
		for _ in $(seq 50); do kill -0 "$DAEMON" 2>/dev/null || break; sleep 0.1; done
		if kill -0 "$DAEMON" 2>/dev/null; then
			kill "$DAEMON" 2>/dev/null || true
		fi
		DAEMON=
	fi
}
trap 'do_unmount' EXIT
trap 'exit 130' INT TERM

# mount_fs BIN MODE VALIDATE: BIN is new or base, MODE passthrough or cached.
mount_fs() {
	local bin=$1 mode=$2 validate=$3 extra=() exe=$EPOCHFS
	[ "$bin" = base ] && exe=$EPOCHFS_BASE
	[ "$mode" = cached ] && extra=(--no-passthrough)
	printf '[placement]\nvalidate = "%s"\n' "$validate" >"$WORK/validate-$validate.toml"
	local out
	out=$("$exe" mount --config "$WORK/validate-$validate.toml" --tier "disk=$TIER:100GiB" \
		--state "$STATE" "${extra[@]}" "$SRC" "$MNT")
	DAEMON=$(sed -n 's/.*(pid \([0-9]*\),.*/\1/p' <<<"$out")
	[ -n "$DAEMON" ] || die "cannot find the daemon's pid in: $out"
	# The read path, not the mount: a remount loads its catalog in the
	# background; its CPU and time are not the readers'.
	while grep -Eq '^catalog=(walking|loading)$' "$MNT/.epochfs/status"; do sleep 0.02; done
	local pt
	pt=$(sed -n 's/^passthrough=//p' "$MNT/.epochfs/status")
	local want=on
	[ "$mode" = cached ] && want=off
	[ "$pt" = "$want" ] || die "mount mode $mode: status says passthrough=$pt"
}

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# read_once SIDE LIST CONC: one measured run, JSON to stdout; a mount run
# also measures the daemon's CPU time.
read_once() {
	local side=$1 list=$2 conc=$3 dir=$NATIVE cpu=()
	shift 3
	[ "$side" = mount ] && dir=$MNT cpu=(-cpu-pid "$DAEMON")
	"$RP" read -dir "$dir" -files "$WORK/$list" -concurrency "$conc" -bufsize 1MiB "${cpu[@]}" -tag side="$side" "$@"
}

# run_case CASE LIST CONC BIN MODE VALIDATE REP: one native and one mount
# run, in an order that alternates with REP.
run_case() {
	local cs=$1 list=$2 conc=$3 bin=$4 mode=$5 validate=$6 rep=$7 side order="native mount"
	[[ " $CASES " == *" $cs "* ]] || return 0
	[ $((rep % 2)) = 0 ] && order="mount native"
	if [[ $cs == *-warm ]]; then
		# Fill the page cache (and the mount's dentries and inodes) first.
		read_once native "$list" "$conc" >/dev/null
		read_once mount "$list" "$conc" >/dev/null
	fi
	for side in $order; do
		[[ $cs == *-cold* ]] && drop_caches
		read_once "$side" "$list" "$conc" -tag case="$cs" -tag bin="$bin" -tag mode="$mode" -tag validate="$validate" -tag rep="$rep" |
			tee -a "$RESULTS" |
			jq -r '"  \(.tags.case) \(.tags.bin) \(.tags.mode)/\(.tags.validate) rep \(.tags.rep) \(.tags.side): \(.mb_s|floor) MB/s, \(.files_s|floor) files/s, open p50 \(.open_p50_us|floor) µs\(if .cpu_ms_per_1000_opens then ", daemon \(.cpu_ms_per_1000_opens|floor) ms CPU/1000 opens" else "" end)"' >&2
	done
}

start=$(date +%s)
mkdir -p "$WORK/bin" "$MNT"
[ "$(stat -f -c %T "$WORK")" = tmpfs ] && log "warning: $WORK is on tmpfs; cold runs will not read a disk"
mounted && die "$MNT is already mounted (an earlier run?): epochfs unmount $MNT"

log "building"
make -C "$ROOT" --no-print-directory build >&2
cp "$ROOT/bin/epochfs" "$EPOCHFS.tmp" && mv "$EPOCHFS.tmp" "$EPOCHFS"
bins=(new)
if [ -n "$BASE" ]; then
	cp "$BASE" "$EPOCHFS_BASE.tmp" && mv "$EPOCHFS_BASE.tmp" "$EPOCHFS_BASE"
	bins=(new base)
fi
(cd "$ROOT" && $GO build -o "$RP" ./test/bench/readpath)

if [ ! -e "$SRC/.complete" ] || [ "$(cat "$SRC/.complete")" != "$SMALL $SMALL_SIZE $LARGE_SIZE" ]; then
	log "generating the dataset in $SRC (once)"
	rm -rf "$SRC" "$TIER" "$STATE"
	"$RP" gen -out "$SRC" -lists "$WORK" -small "$SMALL" -small-size "$SMALL_SIZE" -large-size "$LARGE_SIZE" >&2
	sync
	echo "$SMALL $SMALL_SIZE $LARGE_SIZE" >"$SRC/.complete"
fi

# A warm read of the large file takes ~0.1 s: read it 4 times per run.
for _ in 1 2 3 4; do cat "$WORK/large.list"; done >"$WORK/large-x4.list"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

log "placing the dataset in the tier $TIER"
mount_fs new passthrough once
"$EPOCHFS" warmup --wait 100 "$MNT" >&2
status=$(cat "$MNT/.epochfs/status")
files_total=$(sed -n 's/^files_total=//p' <<<"$status")
files_resident=$(sed -n 's/^files_resident=//p' <<<"$status")
[ "$files_total" = "$files_resident" ] && [ "$files_total" -gt 0 ] ||
	die "not all files resident: $files_resident of $files_total"
do_unmount

# Rounds: each round mounts every configuration once (in alternating order)
# and takes one native/mount pair of every case, so a change in the
# machine's load hits all configurations alike.
IFS=, read -r -a cfgs <<<"$CONFIGS"
configs=()
for bin in "${bins[@]}"; do
	for c in "${cfgs[@]}"; do configs+=("$bin $c"); done
done
for rep in $(seq "$REPS"); do
	log "round $rep of $REPS"
	order=("${configs[@]}")
	if [ $((rep % 2)) = 0 ]; then
		order=()
		for ((i = ${#configs[@]} - 1; i >= 0; i--)); do order+=("${configs[i]}"); done
	fi
	for cfg in "${order[@]}"; do
		read -r bin mode validate <<<"$cfg"
		mount_fs "$bin" "$mode" "$validate"
		if [ "$mode $validate" = "${cfgs[0]}" ]; then
			# One open per run: the configuration hardly matters for the
			# large file.
			run_case large-cold large.list 1 "$bin" "$mode" "$validate" "$rep"
			run_case large-warm large-x4.list 1 "$bin" "$mode" "$validate" "$rep"
		fi
		run_case small-cold small.list 8 "$bin" "$mode" "$validate" "$rep"
		run_case small-warm small.list 8 "$bin" "$mode" "$validate" "$rep"
		# Every file was opened since the mount by now.
		run_case small-cold-again small.list 8 "$bin" "$mode" "$validate" "$rep"
		do_unmount
	done
done
elapsed=$(($(date +%s) - start))
load_end=$(cut -d' ' -f1-3 /proc/loadavg)

table=$("$RP" report "$RESULTS")
echo "$table"
log "results in $RESULTS; ${elapsed}s"
[ "$OUT" = - ] && exit 0

# The generated block of the section.
base_note=
if [ -n "$BASE" ]; then
	base_note="
binary: new = this commit's \`bin/epochfs\`; base = \`$BASE\` ($(sha256sum "$EPOCHFS_BASE" | cut -c1-12)), mounted in the same rounds."
fi
dev=$(df --output=source "$WORK" | tail -1)
disk=$(lsblk -dno NAME,SIZE "$dev" 2>/dev/null | awk '{ printf "%s, %s", $1, $2 }' || true)
drv=$(basename "$(readlink -f "/sys/block/$(basename "$dev")/device/driver" 2>/dev/null)" 2>/dev/null || true)
[ -n "$drv" ] && disk="$disk, $drv"
block=$(
	cat <<EOF
<!-- readpath:begin (generated by test/bench/readpath.sh; edit outside these markers) -->
Run $(date -u +%Y-%m-%dT%H:%MZ), commit $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown), ${elapsed} s,
load average (1/5/15 min) $load_start at the start and $load_end at the end (the machine is shared).
Machine: $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)),
$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM, kernel $(uname -r),
tier and source on $(df --output=fstype "$WORK" | tail -1) on \`${disk:-unknown disk}\` (local disk, not tmpfs).

Command: \`${BENCH_COMMAND:-REPS=$REPS make bench-readpath}\` (runs \`bash test/bench/readpath.sh\` as root).
Data: $SMALL files of $SMALL_SIZE bytes in 100 directories, read in one fixed random order
by 8 readers (open, read whole with a 1 MiB buffer, close); one $LARGE_SIZE file read
sequentially with 1 MiB reads by one reader (warm: read 4 times per run). All of it resident in one disk tier.
native = the same files read from the tier directory (\`TIER/data/...\`); mount = read through
the epochfs mount. MB/s = 10^6 bytes/s; each cell is the median (min–max) of the runs, and the
ratio is taken per repetition (mount run / native run next to it), native and mount alternating
which goes first; each of the $REPS rounds mounts every configuration once, in alternating order.
cold = \`echo 3 > /proc/sys/vm/drop_caches\` before every run; warm = after a
full unmeasured pass through both. "open p50" is the median open(2) latency the readers saw;
daemon CPU = the daemon's user+system time (\`/proc/PID/stat\`) over the mount run, per 1,000 files opened.
small-cold reads each file for the first time since the mount; small-cold-again reads them again after
\`drop_caches\` (an epoch after the first whose pages were evicted).$base_note

$table
<!-- readpath:end -->
EOF
)

section="## Read path overhead (resident data)"
if [ ! -e "$OUT" ]; then
	printf '# Benchmarks\n\nMeasured by the scripts in `test/bench/`; each section says how to reproduce it.\nRatios are taken within one run on one machine; absolute numbers vary with the machine and its load.\n' >"$OUT"
fi
tmp=$(mktemp "$OUT.XXXXXX")
if grep -qF '<!-- readpath:begin' "$OUT"; then
	BLOCK="$block" awk '
		/<!-- readpath:begin/ { print ENVIRON["BLOCK"]; skip = 1; next }
		/<!-- readpath:end/ { skip = 0; next }
		!skip { print }' "$OUT" >"$tmp"
elif grep -qxF "$section" "$OUT"; then
	BLOCK="$block" awk -v s="$section" '{ print } $0 == s { print ""; print ENVIRON["BLOCK"] }' "$OUT" >"$tmp"
else
	{ cat "$OUT"; printf '\n%s\n\n%s\n' "$section" "$block"; } >"$tmp"
fi
mv "$tmp" "$OUT"
chmod 644 "$OUT"
log "wrote $OUT"
