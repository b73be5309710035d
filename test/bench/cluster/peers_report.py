#!/usr/bin/python3
"""Tables of the peers benchmark (test/bench/cluster/peers.sh) from its JSON lines: per setup, the
median (min-max) over the repetitions of the PFS bytes over the whole job, each epoch's time (the
slowest rank), epochs >= 2 against the same job on a dataset that fits every node (same repetition),
and the share of samples read on the node that keeps them; and the peer read rate against the link."""
import json
import re
import statistics
import sys


def med(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "n/a"
    m = statistics.median(xs)
    return f"**{m:.3g}** ({min(xs):.3g}-{max(xs):.3g})" if len(xs) > 1 else f"**{m:.3g}**"


def sftp_bytes(pfs):
    m = re.search(r"sftp_bytes=(\d+)", pfs or "")
    return int(m.group(1)) if m else None


def rate_of(spec):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmg]?)bit", spec)
    scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]
    return float(m.group(1)) * scale / 8


def main(path):
    runs = [json.loads(line) for line in open(path) if line.strip()]
    meta = next(r for r in runs if r.get("meta"))
    jobs = [r for r in runs if "per_node" in r]
    links = [r for r in runs if r.get("setup") == "link"]
    setups = list(dict.fromkeys(r["setup"] for r in jobs))
    epochs = meta["epochs"]
    print(f"{meta['nodes']} nodes, {meta['files']} files ({meta['dataset_bytes'] / 1e6:.0f} MB), each node's tier 2/5 of it;"
          f" PFS {meta['rate_mb']} MB/s; links {meta['link']}; {meta['reps']} repetitions; commit {meta['commit']}\n")
    fits = {r["rep"]: r for r in jobs if r["setup"] == "fits"}

    def epoch_s(r, e):
        return max(n["epochs"][e]["seconds"] for n in r["per_node"])

    def later(r):
        return statistics.mean(epoch_s(r, e) for e in range(1, epochs))

    head = "| setup | PFS bytes ÷ dataset | " + " | ".join(f"epoch {e + 1} s" for e in range(epochs)) + \
        " | epochs ≥ 2 ÷ fits | read where kept, epochs ≥ 2 |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for s in setups:
        rs = [r for r in jobs if r["setup"] == s]
        pfs = [sftp_bytes(r["pfs"]) / r["dataset_bytes"] for r in rs]
        cols = [med([epoch_s(r, e) for r in rs]) for e in range(epochs)]
        ratio = [later(r) / later(fits[r["rep"]]) for r in rs if r["rep"] in fits]
        local = []
        for r in rs:
            l = t = 0
            for n in r["per_node"]:
                for e in range(2, epochs + 1):
                    j = n.get("job") or {}
                    vals = [int(j.get(f"epoch.{e}.reads_{k}", 0)) for k in ("local", "peer", "source")]
                    l, t = l + vals[0], t + sum(vals)
            local.append(l / t if t else None)
        print(f"| {s} | {med(pfs)} | " + " | ".join(cols) + f" | {med(ratio)} | {med(local)} |")
    peers = {r["rep"]: r for r in jobs if r["setup"] == "peers"}
    buf = [r for r in jobs if r["setup"] == "peersbuf"]
    if buf:
        # Prefetch by the known order: of the samples kept by a peer, the share that was in the
        # buffer (fetched or being fetched) when the rank was handed it; the buffer's opens that
        # still waited for the fetch; epochs >= 2 against the same job without the buffer.
        print()
        print("| with the shared buffer | peer-kept samples in the buffer at hand-out | buffer opens that waited | epochs ≥ 2 ÷ peers |")
        print("|---|---|---|---|")
        inbuf, waited = [], []
        for r in buf:
            b = sum(int((n.get("job") or {}).get("buffer_reads", 0)) for n in r["per_node"])
            p = sum(int((n.get("job") or {}).get("peer_reads", 0)) for n in r["per_node"])
            h = sum(int(n["status"].get("buffer_hits", 0)) for n in r["per_node"])
            w = sum(int(n["status"].get("buffer_hits_waiting", 0)) for n in r["per_node"])
            inbuf.append(b / (b + p) if b + p else None)
            waited.append(w / h if h else None)
        ratio = [later(r) / later(peers[r["rep"]]) for r in buf if r["rep"] in peers]
        print(f"| 1/10 of the dataset per node | {med(inbuf)} | {med(waited)} | {med(ratio)} |")
    if links:
        print()
        print("| link | files | peer read rate MB/s | ÷ link |")
        print("|---|---|---|---|")
        rates = []
        for r in links:
            sm = [(t, b) for t, b in r["samples"]]
            moving = [i for i in range(1, len(sm)) if sm[i][1] > sm[i - 1][1]]
            if not moving:
                continue
            a, b = moving[0] - 1, moving[-1]
            rates.append((sm[b][1] - sm[a][1]) / (sm[b][0] - sm[a][0]))
        link = rate_of(links[0]["link"])
        print(f"| {links[0]['link']} | {links[0]['files']} × 1 MiB | {med([x / 1e6 for x in rates])} | {med([x / link for x in rates])} |")


if __name__ == "__main__":
    main(sys.argv[1])
