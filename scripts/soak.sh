#!/usr/bin/env bash
# soak.sh DURATION: the chaos harness (test/chaos) one seed after another
# until DURATION (a Go duration: 30m, 2h) is spent, each seed a 10-minute
# budget (less at the end); stops at the first seed that fails. Prints
# each run's summary and the steps in all. make soak DURATION=... runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
total=${1:-1h}
secs=$(go run ./scripts/durs "$total")
end=$((SECONDS + secs))
steps=0
runs=0
while [ $SECONDS -lt $end ]; do
	left=$((end - SECONDS))
	budget=$((left < 600 ? left : 600))
	seed=$(( (RANDOM << 30) ^ (RANDOM << 15) ^ RANDOM ^ $(date +%s%N) ))
	seed=${seed#-}
	out=$(mktemp)
	if ! go test -count=1 -timeout 0 -v -run '^TestChaos$' ./test/chaos -chaos.seed="$seed" -chaos.duration="${budget}s" >"$out" 2>&1; then
		cat "$out"
		echo "soak: seed $seed failed after $runs passing runs ($steps steps)" >&2
		rm -f "$out"
		exit 1
	fi
	n=$(sed -n 's/.*chaos: \([0-9]*\) steps in.*/\1/p' "$out" | head -1)
	grep -E 'chaos: (seed|[0-9]+ steps)' "$out" || true
	rm -f "$out"
	steps=$((steps + ${n:-0}))
	runs=$((runs + 1))
done
echo "soak: $runs runs, $steps steps, no divergence, no hang past a deadline, no lost copy"
