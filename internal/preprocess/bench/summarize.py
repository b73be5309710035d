"""Summarise bench JSON lines: median and spread per (impl, mode), ratios."""
import json
import statistics
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {}
for r in rows:
    by.setdefault((r["impl"], r["mode"]), []).append(r["per_sec"])
med = {k: statistics.median(v) for k, v in by.items()}
first = rows[0]
print(f"files: {first['files']}, mean size {first['mean_bytes'] / 1000:.0f} KB; "
      f"{len(by[next(iter(by))])} repeats of {first['seconds']:.0f} s each, alternating implementations")
print()
print("| implementation | measurement | cores | median /s | min–max /s | per core /s |")
print("|---|---|---|---|---|---|")
names = {"decode": "decode only", "stdlib": "decode only, Go image/jpeg",
         "pipeline": "decode + RandomResizedCrop(224) + flip + float32 CHW",
         "pipeline_fast": "same, fast_upsample = true",
         "pool": "same, Pool on all cores", "dataloader": "same, DataLoader(num_workers=2)",
         "npy": ".npy encoding of 3×224×224 float32"}
cores = {(r["impl"], r["mode"]): r["cores"] for r in rows}
for (impl, mode), v in sorted(by.items(), key=lambda kv: (list(names).index(kv[0][1]), kv[0][0])):
    c = cores[(impl, mode)]
    print(f"| {impl} | {names.get(mode, mode)} | {c} | {med[(impl, mode)]:.0f} | {min(v):.0f}–{max(v):.0f} | {med[(impl, mode)] / c:.0f} |")
print()
for mode, other in (("decode", "decode"), ("pipeline", "pipeline"), ("pipeline_fast", "pipeline"),
                    ("pool", "dataloader")):
    a, b = med.get(("epochfs", mode)), med.get(("pil+torchvision", other))
    if a and b:
        print(f"- epochfs {mode} / torchvision {other}: {a / b:.2f}×")
if ("epochfs", "npy") in med and ("epochfs", "pipeline") in med:
    us = 1e6 / med[("epochfs", "npy")]
    print(f"- .npy encoding: {us:.0f} µs per 602 KB sample "
          f"({602112 * med[('epochfs', 'npy')] / 1e9:.1f} GB/s), "
          f"{100 * med[('epochfs', 'pipeline')] / med[('epochfs', 'npy')]:.1f} % of the per-core pipeline time")
