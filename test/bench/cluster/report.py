#!/usr/bin/env python3
"""Tables of the cluster benchmark (test/bench/cluster/run.sh) from its results JSONL.

    report.py RESULTS.jsonl

Cells are median (min-max) over the repetitions. Ratios are taken within one
repetition (the runs of a repetition are interleaved, so they saw the same
machine) and then summarised.
"""
import json
import re
import statistics
import sys


def cell(vals, fmt="{:.2f}"):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "–"
    m = statistics.median(vals)
    if len(vals) == 1:
        return fmt.format(m)
    return f"{fmt.format(m)} ({fmt.format(min(vals))}–{fmt.format(max(vals))})"


def kv(s):
    return {k: float(v) for k, v in re.findall(r"(\w+)=([0-9.]+)", s or "")}


def num(st, key):
    try:
        return float(st.get(key, 0))
    except ValueError:
        return 0.0


def main(path):
    rows = [json.loads(l) for l in open(path) if l.strip()]
    meta = next(r for r in rows if r.get("meta"))
    end = next((r for r in rows if r.get("meta_end")), {})
    runs = [r for r in rows if r.get("setup") in ("one", "cluster", "plain")]
    fromc = [r for r in rows if r.get("setup") == "from-cluster"]
    models = [r for r in rows if r.get("setup") == "model"]
    ds = meta["dataset_bytes"]
    print(f"Run {meta['start']}, commit {meta['commit']} (epochfs sha256 {meta['epochfs_sha']}), "
          f"{'QUICK, ' if meta['quick'] else ''}{end.get('seconds', '?')} s; "
          f"load average {meta['load_start']} at the start, {end.get('load_end', '?')} at the end.  ")
    print(f"Dataset: {meta['files']} JPEGs, {ds / 1e6:.0f} MB (mean {meta['mean_bytes'] / 1e3:.0f} KB); "
          f"PFS limited to {meta['rate_mb']} MB/s; {meta['nodes']} nodes × {meta['readers']} readers; "
          f"local disk tier and cluster quota {meta['quota'] / 1e6:.0f} MB each; {meta['reps']} repetition(s).")
    print()

    one = {r["rep"]: max(n["seconds"] for n in r["per_node"]) for r in runs if r["setup"] == "one"}
    print("| setup | nodes | runs | epoch 1 s, slowest node | ÷ one node | PFS bytes ÷ dataset | "
          "per node source_bytes ÷ dataset | cluster hits / fills / lease waits (all nodes) | "
          "catalogs walked | Redis used ÷ dataset | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    names = {"one": "one node alone", "cluster": "with the cluster", "plain": "without the cluster"}
    for setup in ("one", "cluster", "plain"):
        rs = [r for r in runs if r["setup"] == setup]
        if not rs:
            continue
        slow = [max(n["seconds"] for n in r["per_node"]) for r in rs]
        ratio = [max(n["seconds"] for n in r["per_node"]) / one[r["rep"]] for r in rs if r["rep"] in one]
        pfs = [kv(r["pfs"]).get("sftp_bytes", 0) / ds for r in rs]
        pern = [num(n["status"], "source_bytes") / ds for r in rs for n in r["per_node"]]
        hits = [sum(num(n["status"], "cluster.hits") for n in r["per_node"]) for r in rs]
        fills = [sum(num(n["status"], "cluster.fills") for n in r["per_node"]) for r in rs]
        waits = [sum(num(n["status"], "cluster.lease_waits") for n in r["per_node"]) for r in rs]
        walked = [sum(1 for n in r["per_node"] if n["status"].get("cluster.catalog", "walked") == "walked") for r in rs]
        used = [r["redis_used"] / ds for r in rs if r.get("redis_used")]
        load = [r["load_end"] for r in rs]
        cl = setup == "cluster"
        print(f"| {names[setup]} | {rs[0]['nodes']} | {len(rs)} | {cell(slow, '{:.1f}')} | "
              f"{cell(ratio) if setup != 'one' else '1'} | {cell(pfs, '{:.3f}')} | {cell(pern, '{:.3f}')} | "
              f"{cell(hits, '{:.0f}') + ' / ' + cell(fills, '{:.0f}') + ' / ' + cell(waits, '{:.0f}') if cl else '–'} | "
              f"{cell(walked, '{:.0f}')} | {cell(used) if cl else '–'} | {cell(load, '{:.1f}')} |")
    print()

    if fromc:
        print("| nodes reading from the cluster (local tiers empty) | runs | measured samples/s, all nodes | "
              "MB/s, all nodes | PFS bytes | B_cache from | B_cache MB/s | model (remote cache) samples/s | "
              "model ÷ measured |")
        print("|---|---|---|---|---|---|---|---|---|")
        for k in sorted({r["nodes"] for r in fromc}):
            rs = [r for r in fromc if r["nodes"] == k]
            meas = {r["rep"]: sum(n["samples"] for n in r["per_node"]) / max(n["seconds"] for n in r["per_node"]) for r in rs}
            mbs = [sum(n["bytes"] for n in r["per_node"]) / max(n["seconds"] for n in r["per_node"]) / 1e6 for r in rs]
            pfs = [kv(r["pfs"]).get("sftp_bytes", 0) for r in rs]
            for src, what in (("redis-benchmark", "redis-benchmark GET"), ("node", "one node's pass")):
                if src == "node" and k == 1:
                    continue  # the measurement itself
                ms = {m["rep"]: m for m in models if m["nodes"] == k and m.get("b_from", "redis-benchmark") == src}
                bc = [ms[r]["b_cache"] / 1e6 for r in meas if r in ms]
                pred = [ms[r]["predicted"] for r in meas if r in ms]
                ratio = [ms[r]["predicted"] / meas[r] for r in meas if r in ms and meas[r] > 0]
                print(f"| {k} node{'s' if k > 1 else ''} | {len(rs)} | {cell(list(meas.values()), '{:.0f}')} | "
                      f"{cell(mbs, '{:.0f}')} | {cell(pfs, '{:.0f}')} | {what} | {cell(bc, '{:.0f}')} | "
                      f"{cell(pred, '{:.0f}')} | {cell(ratio)} |")
        print()

if __name__ == "__main__":
    main(sys.argv[1])
