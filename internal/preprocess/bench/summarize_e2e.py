"""Summarise e2e.py's JSON lines: per image set and implementation the
median and min-max of images/s, and the ratios epochfs / torchvision.

  wall      images / wall seconds of the whole process (start-up included), one core
  cpu       images / (user + system) CPU seconds of the process
  loop      torchvision only: images / seconds of its loop (imports excluded)
"""
import json
import statistics
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
sets = list(dict.fromkeys(r["set"] for r in rows))


def rate(r, what):
    if what == "wall":
        return r["images"] / r["wall"]
    if what == "cpu":
        return r["images"] / (r["user"] + r["sys"])
    return r["images"] / r["loop_seconds"]


def fmt(v):
    return f"{statistics.median(v):.0f} ({min(v):.0f}–{max(v):.0f})"


print("| image set | implementation | wall /s, one core | CPU /s | torchvision loop only /s | load1 at start |")
print("|---|---|---|---|---|---|")
for s in sets:
    for impl in ("epochfs", "epochfs-baseline", "pil+torchvision"):
        rs = [r for r in rows if r["set"] == s and r["impl"] == impl]
        if not rs:
            continue
        loop = fmt([rate(r, "loop") for r in rs]) if impl == "pil+torchvision" else "—"
        la = [r["load1"] for r in rs]
        print(f"| {s} ({rs[0]['images']} files) | {impl} | {fmt([rate(r, 'wall') for r in rs])} | "
              f"{fmt([rate(r, 'cpu') for r in rs])} | {loop} | {min(la):.2f}–{max(la):.2f} |")
print()
for s in sets:
    t = {r["repeat"]: r for r in rows if r["set"] == s and r["impl"] == "pil+torchvision"}
    for impl in ("epochfs", "epochfs-baseline"):
        e = {r["repeat"]: r for r in rows if r["set"] == s and r["impl"] == impl}
        reps = sorted(set(e) & set(t))
        if not reps:
            continue
        for what, against, label in (("wall", "wall", "whole processes"),
                                     ("wall", "loop", "whole process / torchvision loop only"),
                                     ("cpu", "cpu", "CPU time")):
            ratios = [rate(e[i], what) / rate(t[i], against) for i in reps]
            print(f"- {s}, {impl} / torchvision, {label}: {statistics.median(ratios):.2f}× "
                  f"(per repeat {min(ratios):.2f}–{max(ratios):.2f}×)")
