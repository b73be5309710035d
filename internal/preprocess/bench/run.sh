#!/usr/bin/env bash
# Benchmark the preprocess package against PIL + torchvision in one run.
#
#   bash internal/preprocess/bench/run.sh        in-process measurements (REPEATS=5 SECONDS_EACH=3 FILES=400)
#   bash internal/preprocess/bench/run.sh e2e    end to end (E2E_REPEATS=7 FILES=400 CPU=1)
#   bash internal/preprocess/bench/run.sh all    both
#
# In process: makes an ImageNet-like JPEG set (test/datagen when it is
# present, else crops of the mate-backgrounds photographs), then alternates
# the Go and the PIL/torchvision measurements REPEATS times so both see the
# same machine noise, and prints the median, min–max and ratios as Markdown.
#
# End to end: `epochfs preprocess --workers 1` (files in, .npy files out on
# /dev/shm, start-up included) against PIL + torchvision writing the same
# .npy files with np.save in one process, each run pinned to one CPU, on
# two image sets (test/datagen and the crops of `bench -mkset`),
# interleaved, E2E_REPEATS times (internal/preprocess/bench/e2e.py).
#
# Knobs: SET_DIR (in-process set), DATAGEN_DIR and CROPS_DIR (e2e sets) to
# reuse sets; BASELINE=BINARY adds another epochfs binary (an earlier
# commit's) to the end-to-end rotation; WAIT_LOAD=1.0 waits (up to WAIT_MAX=1200 s) until the 1-minute
# load average is below it before measuring, and says when it never was.
set -euo pipefail
cd "$(dirname "$0")/../../.."
export PATH="$PATH:/usr/local/go/bin"
MODE=${1:-inproc}
REPEATS=${REPEATS:-5}
E2E_REPEATS=${E2E_REPEATS:-7}
SECONDS_EACH=${SECONDS_EACH:-3}
FILES=${FILES:-400}
CPU=${CPU:-1}
PY=/usr/bin/python3
case "$MODE" in inproc | e2e | all) ;; *)
  echo "usage: run.sh [inproc|e2e|all]" >&2
  exit 2
  ;;
esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# datagen_set DIR: test/datagen's ImageNet-like set, FILES files.
datagen_set() {
  [ -d test/datagen/cmd/datagen ] && go run ./test/datagen/cmd/datagen -out "$1" -files "$FILES" -seed 1 >/dev/null 2>"$work/datagen.err"
}

wait_load() {
  [ -n "${WAIT_LOAD:-}" ] || return 0
  local waited=0 max=${WAIT_MAX:-1200}
  while awk -v l="$WAIT_LOAD" '{exit !($1 >= l)}' /proc/loadavg; do
    if [ "$waited" -ge "$max" ]; then
      echo "load average still $(cut -d' ' -f1-3 /proc/loadavg) after ${max}s: measuring anyway" >&2
      return 0
    fi
    sleep 10
    waited=$((waited + 10))
  done
  echo "load average $(cut -d' ' -f1-3 /proc/loadavg) after waiting ${waited}s" >&2
}

if [ "$MODE" != e2e ]; then
  set_dir=${SET_DIR:-}
  if [ -z "$set_dir" ]; then
    set_dir="$work/set"
    if datagen_set "$set_dir"; then
      echo "dataset: test/datagen, $FILES files" >&2
    else
      rm -rf "$set_dir"
      go run ./internal/preprocess/bench -mkset "$set_dir" -files "$FILES"
      echo "dataset: crops of mate-backgrounds photographs, $FILES files" >&2
    fi
  fi
  go build -o "$work/bench" ./internal/preprocess/bench
  wait_load
  out="$work/results.jsonl"
  for r in $(seq "$REPEATS"); do
    echo "repeat $r/$REPEATS, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    "$work/bench" -dir "$set_dir" -mode decode -seconds "$SECONDS_EACH" >>"$out"
    $PY internal/preprocess/bench/pil_bench.py "$set_dir" decode "$SECONDS_EACH" >>"$out"
    "$work/bench" -dir "$set_dir" -mode pipeline -seconds "$SECONDS_EACH" >>"$out"
    $PY internal/preprocess/bench/pil_bench.py "$set_dir" pipeline "$SECONDS_EACH" >>"$out"
    "$work/bench" -dir "$set_dir" -mode pipeline_fast -seconds "$SECONDS_EACH" >>"$out"
    "$work/bench" -dir "$set_dir" -mode pool -seconds "$SECONDS_EACH" >>"$out"
    $PY internal/preprocess/bench/pil_bench.py "$set_dir" dataloader "$SECONDS_EACH" >>"$out"
    "$work/bench" -dir "$set_dir" -mode npy -seconds "$SECONDS_EACH" >>"$out"
    "$work/bench" -dir "$set_dir" -mode stdlib -seconds "$SECONDS_EACH" >>"$out"
  done
  echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  $PY internal/preprocess/bench/summarize.py "$out"
fi

if [ "$MODE" != inproc ]; then
  datagen_dir=${DATAGEN_DIR:-}
  if [ -z "$datagen_dir" ]; then
    datagen_dir="$work/datagen"
    datagen_set "$datagen_dir" || { echo "test/datagen failed: $(cat "$work/datagen.err")" >&2; exit 1; }
  fi
  crops_dir=${CROPS_DIR:-}
  if [ -z "$crops_dir" ]; then
    crops_dir="$work/crops"
    go run ./internal/preprocess/bench -mkset "$crops_dir" -files "$FILES"
  fi
  go build -o "$work/epochfs" ./cmd/epochfs
  cat >"$work/e2e.toml" <<'EOF'
[preprocess]
augment = ["random_resized_crop:224", "hflip:0.5"]
output = "float32_chw"
EOF
  outroot=/dev/shm/epochfs-bench-e2e.$$
  trap 'rm -rf "$work" "$outroot"' EXIT
  wait_load
  echo "end to end: start, load average $(cut -d' ' -f1-3 /proc/loadavg), commit $(git rev-parse --short HEAD 2>/dev/null || echo ?)" >&2
  BASELINE=${BASELINE:-} $PY internal/preprocess/bench/e2e.py "$work/epochfs" "$work/e2e.toml" "$outroot" "$E2E_REPEATS" "$CPU" \
    "datagen=$datagen_dir" "photo-crops=$crops_dir" >"$work/e2e.jsonl"
  echo
  echo "end to end, each run pinned to CPU $CPU: \`epochfs preprocess --workers 1\` vs PIL + torchvision + np.save, $E2E_REPEATS repeats, interleaved; load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  $PY internal/preprocess/bench/summarize_e2e.py "$work/e2e.jsonl"
  if [ -n "${KEEP_JSON:-}" ]; then cp "$work/e2e.jsonl" "$KEEP_JSON"; fi
fi
