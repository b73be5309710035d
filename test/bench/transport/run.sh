#!/usr/bin/env bash
# The FUSE transport: what the daemon's request path costs a training job
# once the dataset is resident, against a local copy of the same files and
# against libfuse's passthrough_hp (C++, FUSE passthrough), with and without
# FUSE over io_uring.
#
#   bash test/bench/transport/run.sh          (or: make bench-transport)
#
# Setups, all over the same FILES JPEGs (test/datagen) in CLASSES classes:
#   local        a plain copy on the local disk
#   epochfs      the epochfs mount of the source, every file resident in a
#                disk tier (passthrough), default config, over /dev/fuse
#                (the fuse module's enable_uring off for its mount)
#   epochfs-uring  the same over FUSE over io_uring (enable_uring on for
#                its mount, then set back), when the kernel has it
#   epochfs-before the epochfs setup with the binary BASE (e.g. built from
#                an earlier commit), when BASE is set
#   php          passthrough_hp SRC MNT (built from ../shared/anchors when the
#                tarball is there; its rows are left out, and the report says
#                so, when it is not)
#   php-uring    passthrough_hp -o io_uring, when the kernel has FUSE over
#                io_uring (/sys/module/fuse/parameters/enable_uring: set to Y
#                for its mount only, then set back)
# Workloads, each run once per setup per round, the page cache dropped
# before every run (epochs after the first: everything resident):
#   train        test/bench/transport/train.py: ImageFolder,
#                RandomResizedCrop(128) + flip + ToTensor, DataLoader with 2
#                workers, a small CNN and an SGD step; one epoch
#   raw8         every file opened, read whole and closed by 8 readers
#                (test/bench/readpath), cold, then warm (a second pass)
# REPS rounds, the setups' order rotated each round. The daemon's CPU
# (user+system, /proc/PID/stat) is read around every run of a FUSE setup.
# One more, unmeasured, training epoch per FUSE setup counts the requests
# the kernel sent by opcode (the fuse_request_send tracepoint, tracefs) and
# the daemon's system calls and context switches (perf stat, when perf is
# installed).
#
# Output: results-*.jsonl in WORK and the generated part of the "FUSE
# transport" section of docs/benchmarks.md (OUT, "-" for stdout only).
# Environment: WORK (/var/tmp/epochfs-bench-transport), REPS (4), FILES
# (1500), CLASSES (10), SETUPS ("local epochfs epochfs-uring php php-uring",
# plus epochfs-before with BASE), BASE (an epochfs binary), OUT.
# Needs root (mounts, drop_caches, tracefs) and Debian's python3-torch and
# python3-torchvision; installs meson, ninja-build, g++, pkg-config,
# liburing-dev and libnuma-dev to build passthrough_hp.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
HERE=$ROOT/test/bench/transport
WORK=${WORK:-/var/tmp/epochfs-bench-transport}
REPS=${REPS:-4}
FILES=${FILES:-1500}
CLASSES=${CLASSES:-10}
BASE=${BASE:-}
SETUPS=${SETUPS:-local epochfs epochfs-uring php php-uring${BASE:+ epochfs-before}}
OUT=${OUT:-$ROOT/docs/benchmarks.md}
ANCHOR=${ANCHOR:-$ROOT/../shared/anchors/libfuse-3.18.2.tar.gz}
PY=/usr/bin/python3
GO=${GO:-go}
export PATH=$PATH:/usr/local/go/bin

EPOCHFS=$WORK/bin/epochfs # a copy of bin/epochfs taken at the start
RP=$WORK/bin/readpath
DS=$WORK/ds-$FILES-c$CLASSES
LOCAL=$WORK/local
STATE=$WORK/state
TIER=$WORK/tier
PHP=$WORK/libfuse/libfuse-3.18.2/build/example/passthrough_hp
RESULTS=$WORK/results-$(date +%Y%m%d-%H%M%S).jsonl
URING=/sys/module/fuse/parameters/enable_uring
TRACE=/sys/kernel/tracing
# The daemon's system calls counted in the ops epoch (perf stat).
SYSCALLS=syscalls:sys_enter_nanosleep,syscalls:sys_enter_futex,syscalls:sys_enter_read,syscalls:sys_enter_writev,syscalls:sys_enter_io_uring_enter,context-switches
INSTANCE=$TRACE/instances/epochfs-bench-transport

log() { echo "transport: $*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (mounts, drop_caches, tracefs)"
$PY -c 'import torch, torchvision' 2>/dev/null || die "$PY cannot import torch and torchvision (apt-get install python3-torch python3-torchvision)"

declare -A MNT PID
URING_ORIG=
TRACEFS_MOUNTED=

cleanup() {
	local rc=$?
	set +e
	for s in php php-uring; do
		if [ -n "${MNT[$s]:-}" ] && mountpoint -q "${MNT[$s]}"; then umount "${MNT[$s]}"; fi
		if [ -n "${PID[$s]:-}" ]; then
			for _ in $(seq 100); do kill -0 "${PID[$s]}" 2>/dev/null || break; sleep 0.1; done
			kill "${PID[$s]}" 2>/dev/null
			wait "${PID[$s]}" 2>/dev/null
		fi
	done
	for s in epochfs epochfs-uring epochfs-before; do
		if [ -n "${MNT[$s]:-}" ] && mountpoint -q "${MNT[$s]}"; then
			"$EPOCHFS" unmount --timeout 60s "${MNT[$s]}" >/dev/null
		fi
	done
	[ -n "$URING_ORIG" ] && echo "$URING_ORIG" >"$URING"
	[ -d "$INSTANCE" ] && rmdir "$INSTANCE"
	[ -n "$TRACEFS_MOUNTED" ] && umount "$TRACE"
	exit $rc
}
trap cleanup EXIT

mkdir -p "$WORK/bin"
log "building"
(cd "$ROOT" && $GO build -o "$WORK/bin/epochfs" ./cmd/epochfs && $GO build -o "$RP" ./test/bench/readpath \
	&& $GO build -o "$WORK/bin/datagen" ./test/datagen/cmd/datagen)
COMMIT=$(cd "$ROOT" && git describe --always --dirty 2>/dev/null || echo unknown)

# passthrough_hp, when libfuse's source is here.
PHP_NOTE=
if [[ " $SETUPS " == *" php"* ]]; then
	if [ ! -x "$PHP" ]; then
		if [ -f "$ANCHOR" ]; then
			log "building libfuse's passthrough_hp from $ANCHOR"
			apt-get install -y -qq meson ninja-build g++ pkg-config liburing-dev libnuma-dev >/dev/null
			rm -rf "$WORK/libfuse" && mkdir -p "$WORK/libfuse"
			tar xzf "$ANCHOR" -C "$WORK/libfuse"
			(cd "$WORK/libfuse/libfuse-3.18.2" && meson setup build >/dev/null && ninja -C build example/passthrough_hp >/dev/null)
		else
			PHP_NOTE="no libfuse source at $ANCHOR: the passthrough_hp rows are left out"
			log "$PHP_NOTE"
			SETUPS=$(echo "$SETUPS" | tr ' ' '\n' | grep -v '^php' | tr '\n' ' ')
		fi
	fi
fi
if [[ " $SETUPS " == *"-uring "* ]] && [ ! -w "$URING" ]; then
	PHP_NOTE="${PHP_NOTE:+$PHP_NOTE; }this kernel has no FUSE over io_uring ($URING): the -uring setups left out"
	log "$PHP_NOTE"
	SETUPS=$(echo "$SETUPS" | tr ' ' '\n' | grep -v -- '-uring$' | tr '\n' ' ')
fi
if [[ " $SETUPS " == *" epochfs-before "* ]]; then
	[ -x "$BASE" ] || die "BASE=$BASE is not an executable epochfs binary"
	cp "$BASE" "$WORK/bin/epochfs-before"
fi

# The dataset and its local copy, once.
if [ ! -d "$DS" ]; then
	log "generating $FILES JPEGs in $DS (once)"
	"$WORK/bin/datagen" -out "$DS" -files "$FILES" -classes "$CLASSES" >&2
fi
SRC=$DS
[ -d "$DS/images" ] && SRC=$DS/images
if [ ! -d "$LOCAL" ]; then
	cp -a "$SRC" "$LOCAL.tmp" && mv "$LOCAL.tmp" "$LOCAL"
fi
(cd "$LOCAL" && find . -type f -printf '%P\n' | sort) >"$WORK/files.list"
NFILES=$(wc -l <"$WORK/files.list")

mount_all() {
	local s
	for s in $SETUPS; do
		case $s in
		local) MNT[local]=$LOCAL ;;
		epochfs | epochfs-uring | epochfs-before)
			local bin=$EPOCHFS want=dev param=N
			[ "$s" = epochfs-before ] && bin=$WORK/bin/epochfs-before
			[ "$s" = epochfs-uring ] && want=io_uring param=Y
			MNT[$s]=$WORK/mnt-$s
			mkdir -p "${MNT[$s]}"
			rm -rf "$STATE-$s" "$TIER-$s"
			if [ -w "$URING" ]; then
				URING_ORIG=$(cat "$URING")
				echo $param >"$URING"
			fi
			"$bin" mount --state "$STATE-$s" --tier "disk=$TIER-$s:20GiB" "$SRC" "${MNT[$s]}" >&2
			if [ -n "$URING_ORIG" ]; then echo "$URING_ORIG" >"$URING" && URING_ORIG=; fi
			"$EPOCHFS" warmup --wait 100 "${MNT[$s]}" >&2
			PID[$s]=$(awk -F= '$1 == "pid" { print $2 }' "${MNT[$s]}/.epochfs/status")
			got=$(awk -F= '$1 == "transport" { print $2 }' "${MNT[$s]}/.epochfs/status")
			if [ "$s" != epochfs-before ] && [ "$got" != "$want" ]; then
				die "$s: the mount's transport is ${got:-unknown}, want $want"
			fi
			;;
		php | php-uring)
			MNT[$s]=$WORK/mnt-$s
			mkdir -p "${MNT[$s]}"
			local opt=()
			if [ "$s" = php-uring ]; then
				URING_ORIG=$(cat "$URING")
				echo Y >"$URING"
				opt=(-o io_uring)
			fi
			"$PHP" --foreground "${opt[@]}" "$SRC" "${MNT[$s]}" >"$WORK/$s.log" 2>&1 &
			PID[$s]=$!
			for _ in $(seq 100); do mountpoint -q "${MNT[$s]}" && break; sleep 0.1; done
			mountpoint -q "${MNT[$s]}" || die "$s did not mount (see $WORK/$s.log)"
			# The queues register right after INIT: give them a moment
			# before the module parameter goes back.
			ls "${MNT[$s]}" >/dev/null
			sleep 1
			if [ "$s" = php-uring ]; then echo "$URING_ORIG" >"$URING" && URING_ORIG=; fi
			;;
		*) die "unknown setup $s" ;;
		esac
	done
}

cpu_ticks() { # user+system ticks of a process
	awk '{ print $14 + $15 }' "/proc/$1/stat"
}

drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }

# run_train S REP: one measured epoch of the training loop over setup S.
run_train() {
	local s=$1 rep=$2 c0=0 c1=0 out
	drop
	[ -n "${PID[$s]:-}" ] && c0=$(cpu_ticks "${PID[$s]}")
	out=$($PY "$HERE/train.py" "${MNT[$s]}")
	[ -n "${PID[$s]:-}" ] && c1=$(cpu_ticks "${PID[$s]}")
	echo "{\"workload\":\"train\",\"setup\":\"$s\",\"rep\":$rep,\"cpu_ticks\":$((c1 - c0)),\"hz\":$(getconf CLK_TCK),\"run\":$out}" >>"$RESULTS"
	log "train $s rep $rep: $out"
}

# run_raw S REP: the 8-reader pass, cold then warm.
run_raw() {
	local s=$1 rep=$2 temp cpu=()
	[ -n "${PID[$s]:-}" ] && cpu=(-cpu-pid "${PID[$s]}")
	for temp in cold warm; do
		[ "$temp" = cold ] && drop
		"$RP" read -dir "${MNT[$s]}" -files "$WORK/files.list" -concurrency 8 "${cpu[@]}" \
			-tag workload=raw8 -tag setup="$s" -tag rep="$rep" -tag temp="$temp" >>"$RESULTS"
	done
	log "raw8 $s rep $rep: $(tail -1 "$RESULTS" | cut -c1-160)"
}

# count_ops S: one unmeasured training epoch over S with the kernel's
# requests to its connection counted by opcode.
count_ops() {
	local s=$1 dev
	if [ ! -d "$TRACE/events" ]; then
		mount -t tracefs nodev "$TRACE" && TRACEFS_MOUNTED=1
	fi
	[ -d "$TRACE/events/fuse/fuse_request_send" ] || { log "no fuse tracepoints: requests per sample left out"; return; }
	[ -d "$INSTANCE" ] || mkdir "$INSTANCE"
	echo 16384 >"$INSTANCE/buffer_size_kb"
	echo >"$INSTANCE/trace"
	dev=$(stat -c %d "${MNT[$s]}")
	echo "connection == $dev" >"$INSTANCE/events/fuse/fuse_request_send/filter"
	echo 1 >"$INSTANCE/events/fuse/fuse_request_send/enable"
	drop
	local stat=$WORK/perf-$s.csv perf=()
	rm -f "$stat"
	if command -v perf >/dev/null && [ -n "${PID[$s]:-}" ]; then
		perf=(perf stat -x, -o "$stat" -p "${PID[$s]}" -e "$SYSCALLS" --)
	fi
	"${perf[@]}" $PY "$HERE/train.py" "${MNT[$s]}" >/dev/null
	echo 0 >"$INSTANCE/events/fuse/fuse_request_send/enable"
	{
		grep -o '(FUSE_[A-Z_]*)' "$INSTANCE/trace" | tr -d '()' | sort | uniq -c | awk '{ print "op", $2, $1 }'
		# perf stat -x,: COUNT,UNIT,EVENT,...
		[ -f "$stat" ] && awk -F, '$1 ~ /^[0-9]+$/ { sub(/^syscalls:sys_enter_/, "", $3); print "sys", $3, $1 }' "$stat"
	} | awk -v s="$s" -v n="$NFILES" '
		$1 == "op" { ops = ops (ops == "" ? "" : ",") "\"" $2 "\":" $3 }
		$1 == "sys" { sys = sys (sys == "" ? "" : ",") "\"" $2 "\":" $3 }
		END { printf "{\"workload\":\"ops\",\"setup\":\"%s\",\"samples\":%d,\"ops\":{%s},\"syscalls\":{%s}}\n", s, n, ops, sys }' >>"$RESULTS"
	log "ops $s: $(tail -1 "$RESULTS")"
}

START=$(date -u +%Y-%m-%dT%H:%MZ)
T0=$SECONDS
echo "{\"meta\":true,\"start\":\"$START\",\"commit\":\"$COMMIT\",\"files\":$NFILES,\"setups\":\"$SETUPS\",\"reps\":$REPS,\"load_start\":\"$(cut -d' ' -f1-3 /proc/loadavg)\",\"note\":\"$PHP_NOTE\",\"base\":\"${BASE_NAME:-$BASE}\"}" >"$RESULTS"
log "mounting: $SETUPS"
mount_all
# One unmeasured epoch per setup: the mounts' metadata and the python
# imports are warm; every file is resident in the epochfs tier already.
for s in $SETUPS; do $PY "$HERE/train.py" "${MNT[$s]}" >/dev/null; done

read -r -a order <<<"$SETUPS"
for rep in $(seq "$REPS"); do
	n=${#order[@]}
	for i in $(seq 0 $((n - 1))); do
		s=${order[$(((i + rep) % n))]}
		run_train "$s" "$rep"
		run_raw "$s" "$rep"
	done
done
for s in $SETUPS; do
	[ "$s" = local ] || count_ops "$s"
done
echo "{\"meta_end\":true,\"seconds\":$((SECONDS - T0)),\"load_end\":\"$(cut -d' ' -f1-3 /proc/loadavg)\"}" >>"$RESULTS"
log "results in $RESULTS; $((SECONDS - T0))s"

REPORT=$($PY "$HERE/report.py" "$RESULTS")
if [ "$OUT" = - ]; then
	echo "$REPORT"
else
	$PY - "$OUT" <<EOF
import sys
path = sys.argv[1]
text = open(path).read()
begin, end = "<!-- transport:begin", "<!-- transport:end -->"
block = begin + " (generated by test/bench/transport/run.sh; edit outside these markers) -->\n" + """$REPORT""" + "\n" + end
if begin in text:
    i = text.index(begin)
    j = text.index(end) + len(end)
    text = text[:i] + block + text[j:]
else:
    text += "\n## FUSE transport\n\n" + block + "\n"
open(path, "w").write(text)
EOF
	log "wrote the FUSE transport section of $OUT"
fi
