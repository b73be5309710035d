#!/usr/bin/python3
"""Epochs after the first against a local copy, from a results file of
test/bench/run.sh (setups epochfs-* and local, any readers):

    python3 test/bench/readpath_epochs.py WORK/results-*.jsonl

Prints a markdown table per reader: epoch times (median, min-max), the
ratio epochfs / local for every epoch >= 2 taken per repetition, the source
metadata requests of epochs >= 2 (epochfs's source_stats, and what the
PFS server logged), the daemon's CPU per 1,000 opens in epochs >= 2, and the
1-minute load average at the epoch ends.
"""
import json
import statistics
import sys


def num(snap, key):
    try:
        return float(snap[key])
    except (KeyError, TypeError, ValueError):
        return None


def spread(v, f="%.2f"):
    if not v:
        return "–"
    return (f + " (" + f + "–" + f + ")") % (statistics.median(v), min(v), max(v))


def main():
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    meta = next(r for r in rows if r.get("meta"))
    end = next((r for r in rows if r.get("meta_end")), {})
    runs = [r for r in rows if "setup" in r and not r.get("error")]
    print(f"Run {meta['start']}, commit {meta['commit']}, {meta['files']} files, validate = {meta['validate']}, "
          f"load (1/5/15 min) {meta['load_start']} at the start and {end.get('load_end', '?')} at the end.\n")
    by = {}
    for r in runs:
        by.setdefault((r["reader"], r["rate_mb"]), {}).setdefault(r["setup"], {})[r["rep"]] = r
    for (reader, rate), setups in sorted(by.items()):
        local = setups.get("local", {})
        print(f"{reader}, source limited to {rate} MB/s:\n")
        print("| setup | runs | epoch 1 s | epoch 2 s | epoch 3 s | epochs ≥ 2 / local | source stats e≥2 (epochfs / server) | daemon CPU ms per 1,000 opens, e≥2 | load at epoch ends |")
        print("|---|---|---|---|---|---|---|---|---|")
        for setup in sorted(setups, key=lambda s: (s == "local", s)):
            rs = setups[setup]
            n = min(len(r["run"]["epochs"]) for r in rs.values())
            cells = [spread([r["run"]["epochs"][i]["seconds"] for r in rs.values()]) for i in range(min(n, 3))]
            cells += ["–"] * (3 - len(cells))
            ratio, stats, meta_srv, cpu, load = [], [], [], [], []
            for rep, r in rs.items():
                snaps = r["run"]["snapshots"]
                for i in range(1, n):
                    if setup != "local" and rep in local:
                        ratio.append(r["run"]["epochs"][i]["seconds"] / local[rep]["run"]["epochs"][i]["seconds"])
                    a, b = snaps[i], snaps[i + 1]
                    if num(b, "epochfs.source_stats") is not None:
                        stats.append(num(b, "epochfs.source_stats") - num(a, "epochfs.source_stats"))
                    if num(b, "sftp_meta") is not None:
                        meta_srv.append(num(b, "sftp_meta") - num(a, "sftp_meta"))
                    if setup != "local" and num(b, "cpu_s") is not None:
                        cpu.append((num(b, "cpu_s") - num(a, "cpu_s")) * 1e6 / r["run"]["epochs"][i]["samples"])
                for s in snaps[1:]:
                    if num(s, "loadavg") is not None:
                        load.append(num(s, "loadavg"))
            mx = lambda v: "%.0f" % max(v) if v else "–"
            st = f"{mx(stats)} / {mx(meta_srv)} (max)"
            print(f"| {setup} | {len(rs)} | {cells[0]} | {cells[1]} | {cells[2]} | {spread(ratio) if ratio else '–'} | "
                  f"{st} | {spread(cpu, '%.0f') if cpu else '–'} | {spread(load, '%.1f')} |")
        print()


if __name__ == "__main__":
    main()
