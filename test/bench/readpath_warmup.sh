#!/usr/bin/env bash
# Warmup speed: placing a whole dataset from a local source with
# `epochfs warmup`, against `cp -r` of the same tree followed by `sync`.
#
#   bash test/bench/readpath_warmup.sh
#
# The source (FILES files of SIZE bytes in 100 directories, on local disk)
# is generated once in WORK. Each of REPS rounds runs, in an order rotated
# per round, with the page cache dropped before each (echo 3 >
# /proc/sys/vm/drop_caches) and a fresh destination:
#   cp     cp -r SRC DST; sync
#   new    bin/epochfs mount (default configuration, one disk tier in WORK),
#          epochfs warmup --wait 100, sync; then unmount
#   base   the same with the BASE binary, if BASE is set
# and reports each run's seconds: for epochfs the mount (the source walk) and
# the warmup (from the request to 100 % resident) separately; speed ratio =
# cp seconds / epochfs warmup seconds (≥ 1: faster than cp), per round.
#
# Environment: WORK (/var/tmp/epochfs-bench-warmup), FILES (100000), SIZE
# (20000), REPS (5), BASE (another epochfs binary, or empty), OUT
# (docs/benchmarks.md, "-" for stdout only). Needs root (drop_caches).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${WORK:-/var/tmp/epochfs-bench-warmup}
FILES=${FILES:-100000}
SIZE=${SIZE:-20000}
REPS=${REPS:-5}
BASE=${BASE:-}
OUT=${OUT:-$ROOT/docs/benchmarks.md}
export PATH=$PATH:/usr/local/go/bin

SRC=$WORK/src
RUN=$WORK/run
MNT=$WORK/mnt
EPOCHFS=$WORK/bin/epochfs
RESULTS=$WORK/results-$(date +%Y%m%d-%H%M%S).jsonl
CUR_BIN=

log() { echo "readpath_warmup.sh: $*" >&2; }
die() { log "$*"; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (drop_caches)"

mounted() { awk -v m="$MNT" '$2 == m { f = 1 } END { exit !f }' /proc/mounts; }
cleanup() {
	if mounted; then
		"$EPOCHFS" unmount "$MNT" >/dev/null 2>&1 || umount -l "$MNT" || true
	fi
	rm -rf "$RUN"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }

mkdir -p "$WORK/bin" "$MNT"
mounted && die "$MNT is already mounted (an earlier run?)"
log "building"
make -C "$ROOT" --no-print-directory build >&2
cp "$ROOT/bin/epochfs" "$EPOCHFS.tmp" && mv "$EPOCHFS.tmp" "$EPOCHFS"
bins=(cp new)
if [ -n "$BASE" ]; then
	cp "$BASE" "$WORK/bin/epochfs-base.tmp" && mv "$WORK/bin/epochfs-base.tmp" "$WORK/bin/epochfs-base"
	bins+=(base)
fi

if [ ! -e "$SRC/.complete" ] || [ "$(cat "$SRC/.complete")" != "$FILES $SIZE" ]; then
	log "generating $FILES files of $SIZE bytes in $SRC (once)"
	rm -rf "$SRC"
	(cd "$ROOT" && go run ./test/bench/readpath gen -out "$SRC" -lists "$WORK" -small "$FILES" -small-size "$SIZE" -large-size 0) >&2
	echo "$FILES $SIZE" >"$SRC/.complete"
	sync
fi
[ "$(stat -f -c %T "$WORK")" = tmpfs ] && log "warning: $WORK is on tmpfs"

# run_one WHAT REP: one run, one JSON line.
run_one() {
	local what=$1 rep=$2 t0 t1 t2 t3
	rm -rf "$RUN"
	mkdir -p "$RUN"
	drop_caches
	case $what in
	cp)
		t0=$(now)
		cp -r "$SRC" "$RUN/copy"
		sync
		t1=$(now)
		printf '{"what":"cp","rep":%s,"seconds":%s}\n' "$rep" "$(secs "$t0" "$t1")"
		;;
	new | base)
		local exe=$EPOCHFS
		[ "$what" = base ] && exe=$WORK/bin/epochfs-base
		CUR_BIN=$exe
		t0=$(now)
		"$exe" mount --tier "disk=$RUN/tier:100GiB" --state "$RUN/state" "$SRC" "$MNT" >/dev/null
		t1=$(now)
		"$exe" warmup --wait 100 "$MNT" >/dev/null
		t2=$(now)
		sync
		t3=$(now)
		local st resident total
		st=$(cat "$MNT/.epochfs/status")
		resident=$(sed -n 's/^files_resident=//p' <<<"$st")
		total=$(sed -n 's/^files_total=//p' <<<"$st")
		"$exe" unmount "$MNT" >/dev/null
		[ "$resident" = "$total" ] || die "$what: $resident of $total files resident after the warmup"
		printf '{"what":"%s","rep":%s,"mount_s":%s,"seconds":%s,"sync_s":%s,"files":%s}\n' \
			"$what" "$rep" "$(secs "$t0" "$t1")" "$(secs "$t1" "$t2")" "$(secs "$t2" "$t3")" "$resident"
		;;
	esac
}

start=$(date +%s)
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
for rep in $(seq "$REPS"); do
	n=${#bins[@]}
	for ((i = 0; i < n; i++)); do
		what=${bins[$(((i + rep) % n))]}
		run_one "$what" "$rep" | tee -a "$RESULTS" >&2
	done
done
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
elapsed=$(($(date +%s) - start))

# The table: median (min–max) per setup, and per round the speed ratio
# cp / epochfs.
table=$(python3 - "$RESULTS" <<'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in runs:
    by.setdefault(r["what"], {})[r["rep"]] = r
def spread(v, f="%.1f"):
    return (f + " (" + f + "–" + f + ")") % (statistics.median(v), min(v), max(v))
print("| setup | runs | seconds | mount (walk) s | sync after s | speed vs cp -r + sync | target |")
print("|---|---|---|---|---|---|---|")
cp = by.get("cp", {})
for what, label in (("cp", "cp -r + sync"), ("new", "epochfs warmup"), ("base", "epochfs warmup, base binary")):
    rs = by.get(what)
    if not rs:
        continue
    secs = [r["seconds"] for r in rs.values()]
    mount = [r["mount_s"] for r in rs.values() if "mount_s" in r]
    sync = [r["sync_s"] for r in rs.values() if "sync_s" in r]
    ratio = [cp[k]["seconds"] / r["seconds"] for k, r in rs.items() if k in cp]
    verdict = "—"
    if what != "cp" and ratio:
        verdict = "≥ 0.90: " + ("met" if statistics.median(ratio) >= 0.9 else "**not met**")
    print("| %s | %d | %s | %s | %s | %s | %s |" % (label, len(secs), spread(secs),
          spread(mount) if mount else "–", spread(sync, "%.2f") if sync else "–",
          spread(ratio, "%.2f") if what != "cp" else "1", verdict))
EOF
)
echo "$table"
log "results in $RESULTS; ${elapsed}s"
[ "$OUT" = - ] && exit 0

block=$(
	cat <<EOF
<!-- warmup:begin (generated by test/bench/readpath_warmup.sh; edit outside these markers) -->
Run $(date -u +%Y-%m-%dT%H:%MZ), commit $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown), ${elapsed} s,
load average (1/5/15 min) $load_start at the start and $load_end at the end (the machine is shared).
Command: \`${BENCH_COMMAND:-REPS=$REPS bash test/bench/readpath_warmup.sh}\`. Source: $FILES files of $SIZE bytes in 100
directories on $(df --output=fstype "$WORK" | tail -1) (local disk), destination on the same file system. Each run starts
with \`echo 3 > /proc/sys/vm/drop_caches\` and an empty destination; the setups run in an order
rotated per round. cp = \`cp -r SRC DST; sync\`. epochfs = \`epochfs mount --tier disk=DST:100GiB
--state S SRC MNT\` (default configuration: 6 workers), then \`epochfs warmup --wait 100 MNT\`
(seconds: the warmup alone; the mount's source walk is the next column), then \`sync\`. Speed
vs cp = cp seconds / warmup seconds, taken per round; median (min–max).${BASE:+
base = \`$BASE\` ($(sha256sum "$WORK/bin/epochfs-base" | cut -c1-12)), in the same rounds.}

$table
<!-- warmup:end -->
EOF
)
section="## Warmup from a local source"
tmp=$(mktemp "$OUT.XXXXXX")
if grep -qF '<!-- warmup:begin' "$OUT"; then
	BLOCK="$block" awk '
		/<!-- warmup:begin/ { print ENVIRON["BLOCK"]; skip = 1; next }
		/<!-- warmup:end/ { skip = 0; next }
		!skip { print }' "$OUT" >"$tmp"
else
	# After the read-path section.
	BLOCK="$block" S="$section" awk '
		/^## / && seen && !done { print ENVIRON["S"]; print ""; print ENVIRON["BLOCK"]; print ""; done = 1 }
		/^## Read path overhead/ { seen = 1 }
		{ print }
		END { if (!done) { print ""; print ENVIRON["S"]; print ""; print ENVIRON["BLOCK"] } }' "$OUT" >"$tmp"
fi
mv "$tmp" "$OUT"
chmod 644 "$OUT"
log "wrote $OUT"
