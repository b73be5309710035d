#!/usr/bin/env bash
# soak.sh DURATION [JOBS]: the chaos harness (test/chaos) one seed after
# another until DURATION (a Go duration: 30m, 2h) is spent, each seed a
# 10-minute budget (less at the end), in JOBS runs side by side (default
# 1: most steps wait on timeouts, so a 2-core machine runs 3 at about 3
# times the steps). A run stops at its first seed that fails; the others go
# on. Each seed runs in a mount namespace of its own (unshare -m): its
# mounts are out of sight of the machine's other tests, and a mount it
# leaves behind fails it. Prints each seed's summary, a failing seed's
# whole output, and the steps in all; exits 1 if a seed failed.
# make soak DURATION=... JOBS=... runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
total=${1:-1h}
jobs=${2:-1}
case $jobs in
'' | *[!0-9]* | 0)
	echo "soak: JOBS must be a positive number, not \"$jobs\"" >&2
	exit 2
	;;
esac
secs=$(go run ./scripts/durs "$total")
end=$((SECONDS + secs))
# Built once: every run and seed uses this binary.
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go test -c -o "$bin/chaos.test" ./test/chaos
# run-seed TEST SEED SECONDS, inside the namespace: the FUSE mounts of the
# machine's other tests, copied into the namespace when it was made, are
# detached first (a copy would keep their file system alive after they
# unmount it: its server would wait for an end that never comes); then the
# seed, then a check that it left no mount behind.
cat >"$bin/run-seed" <<'RUN'
#!/usr/bin/env bash
fuse() { awk '$3 ~ /^fuse/ || $3 == "fusectl" { print $2 }' /proc/self/mounts; }
for m in $(fuse); do
	umount -l "$(printf '%b' "$m")" 2>/dev/null
done
rc=0
"$1" -test.count=1 -test.timeout=0 -test.v -test.run '^TestChaos$' -chaos.seed="$2" -chaos.duration="$3s" || rc=$?
if left=$(fuse | grep .); then
	echo "soak: mounts left behind by seed $2:"
	echo "$left"
	rc=1
fi
exit $rc
RUN
chmod +x "$bin/run-seed"

# worker N: seeds until the end or a failure; its last line is
# "steps RUNS STEPS" or "failed SEED RUNS STEPS".
worker() {
	local steps=0 runs=0 left budget seed out n
	while [ $SECONDS -lt $end ]; do
		left=$((end - SECONDS))
		budget=$((left < 600 ? left : 600))
		seed=$(((RANDOM << 30) ^ (RANDOM << 15) ^ RANDOM ^ $(date +%s%N) ^ ($1 << 20)))
		seed=${seed#-}
		out=$(mktemp)
		if ! (cd test/chaos && unshare -m --propagation private "$bin/run-seed" "$bin/chaos.test" "$seed" "$budget") >"$out" 2>&1; then
			cat "$out"
			rm -f "$out"
			echo "failed $seed $runs $steps"
			return
		fi
		n=$(sed -n 's/.*chaos: \([0-9]*\) steps in.*/\1/p' "$out" | head -1)
		grep -E 'chaos: (seed|[0-9]+ steps)' "$out" || true
		rm -f "$out"
		steps=$((steps + ${n:-0}))
		runs=$((runs + 1))
	done
	echo "steps $runs $steps"
}

logs=()
for i in $(seq 1 "$jobs"); do
	log="$bin/run$i.log"
	logs+=("$log")
	worker "$i" >"$log" 2>&1 &
done
wait
steps=0
runs=0
failed=0
for log in "${logs[@]}"; do
	sed '$d' "$log"
	read -r what a b c < <(tail -1 "$log")
	case $what in
	failed)
		echo "soak: seed $a failed after $b passing runs of its worker ($c steps)" >&2
		failed=1
		runs=$((runs + b))
		steps=$((steps + c))
		;;
	steps)
		runs=$((runs + a))
		steps=$((steps + b))
		;;
	*)
		echo "soak: a worker ended before its last line (killed?): its steps are not counted" >&2
		failed=1
		;;
	esac
done
if [ $failed = 1 ]; then
	echo "soak: $runs runs passed, $steps steps, before the failure above"
	exit 1
fi
echo "soak: $runs runs, $steps steps, no divergence, no hang past a deadline, no lost copy"
