#!/usr/bin/env bash
# Benchmark the preprocess package against PIL + torchvision in one run.
#
#   bash preprocess/bench/run.sh            (REPEATS=5 SECONDS_EACH=3 FILES=400 by default)
#
# Makes an ImageNet-like JPEG set (test/datagen when it is present, else
# crops of the mate-backgrounds photographs), then alternates the Go and
# the PIL/torchvision measurements REPEATS times so both see the same
# machine noise, and prints the median, min–max and ratios as Markdown.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$PATH:/usr/local/go/bin"
REPEATS=${REPEATS:-5}
SECONDS_EACH=${SECONDS_EACH:-3}
FILES=${FILES:-400}
PY=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
set_dir=${SET_DIR:-}
if [ -z "$set_dir" ]; then
  set_dir="$work/set"
  if [ -d test/datagen/cmd/datagen ] && go run ./test/datagen/cmd/datagen -out "$set_dir" -files "$FILES" -seed 1 >/dev/null 2>"$work/datagen.err"; then
    echo "dataset: test/datagen, $FILES files" >&2
  else
    rm -rf "$set_dir"
    go run ./preprocess/bench -mkset "$set_dir" -files "$FILES"
    echo "dataset: crops of mate-backgrounds photographs, $FILES files" >&2
  fi
fi
go build -o "$work/bench" ./preprocess/bench
out="$work/results.jsonl"
for r in $(seq "$REPEATS"); do
  echo "repeat $r/$REPEATS" >&2
  "$work/bench" -dir "$set_dir" -mode decode -seconds "$SECONDS_EACH" >>"$out"
  $PY preprocess/bench/pil_bench.py "$set_dir" decode "$SECONDS_EACH" >>"$out"
  "$work/bench" -dir "$set_dir" -mode pipeline -seconds "$SECONDS_EACH" >>"$out"
  $PY preprocess/bench/pil_bench.py "$set_dir" pipeline "$SECONDS_EACH" >>"$out"
  "$work/bench" -dir "$set_dir" -mode pipeline_fast -seconds "$SECONDS_EACH" >>"$out"
  "$work/bench" -dir "$set_dir" -mode pool -seconds "$SECONDS_EACH" >>"$out"
  $PY preprocess/bench/pil_bench.py "$set_dir" dataloader "$SECONDS_EACH" >>"$out"
  "$work/bench" -dir "$set_dir" -mode npy -seconds "$SECONDS_EACH" >>"$out"
  "$work/bench" -dir "$set_dir" -mode stdlib -seconds "$SECONDS_EACH" >>"$out"
done
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
$PY preprocess/bench/summarize.py "$out"
