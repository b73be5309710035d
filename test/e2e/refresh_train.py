"""Reads epochs of three jobs through MNT (the epochfs package's Sampler, DistributedSampler with two
ranks, Batches with view=encoded) while files are removed from SOURCE and the mount refreshed in the
middle of an epoch. Writes what each job handed out to OUT as JSON:
{"parts": [{"name", "len1", "len2", "removed": [paths], "before": [paths], "after": [paths],
"epoch2": [paths]}]} (one entry per job, or per rank; len1 and len2: len() in epochs 1 and 2, samples). Any exception (FileNotFoundError, "not a sample") fails the run.

    refresh_train.py --mount MNT --source SOURCE --package DIR --out FILE
"""
import argparse
import json
import os
import sys
import time


def kv(path):
    with open(path, encoding="utf-8") as f:
        return dict(line.split("=", 1) for line in f.read().splitlines() if "=" in line)


def remove_and_refresh(mnt, source, rels):
    """Removes rels from the source and refreshes the mount, waiting until the refresh is done."""
    for rel in rels:
        os.remove(os.path.join(source, rel))
    ctl = os.path.join(mnt, ".epochfs", "refresh")
    before = int(kv(ctl)["finished"])
    with open(ctl, "w", encoding="utf-8") as f:
        f.write("all\n")
    deadline = time.monotonic() + 60
    while True:
        st = kv(ctl)
        if st["running"] == "0" and st["pending"] == "0" and int(st["finished"]) > before:
            if int(st["removed"]) < len(rels):
                raise RuntimeError(f"refresh removed {st['removed']} files, want {len(rels)}: {st}")
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"refresh not done in 60 s: {st}")
        time.sleep(0.05)


def pick(all_rels, before, n_handed=2, n_unseen=2):
    """Two paths already handed out and two not yet."""
    handed = [p for p in before if p in set(all_rels)][:n_handed]
    unseen = [p for p in all_rels if p not in set(before)][:n_unseen]
    return handed + unseen


def take(it, n):
    return [next(it) for _ in range(n)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mount", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--package", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    sys.path.insert(0, a.package)
    from torchvision import datasets
    from epochfs import Batches, DistributedSampler, Sampler

    mnt, parts = a.mount, []

    def rels(ds):
        return [os.path.relpath(p, mnt) for p, _ in ds.samples]

    # Sampler: two whole batches of 8, then the refresh, then the rest and a second epoch.
    ds = datasets.ImageFolder(mnt)
    s = Sampler(ds, "r-sampler", batch_size=8, seed=1)
    names = rels(ds)
    len1 = len(s)
    it = iter(s)
    before = [names[i] for i in take(it, 16)]
    removed = pick(names, before)
    remove_and_refresh(mnt, a.source, removed)
    after = [names[i] for i in it]
    epoch2 = [names[i] for i in s]
    parts.append({"name": "Sampler", "len1": len1, "len2": len(s), "removed": removed, "before": before,
                  "after": after, "epoch2": epoch2})

    # DistributedSampler, two ranks in one process, a batch of each in turn.
    ds = datasets.ImageFolder(mnt)
    names = rels(ds)
    ranks = [DistributedSampler(ds, num_replicas=2, rank=r, job="r-ddp", batch_size=8, seed=2) for r in range(2)]
    len1 = [len(r) for r in ranks]
    its = [iter(r) for r in ranks]
    befores = [[], []]
    for _ in range(2):
        for r in range(2):
            befores[r] += [names[i] for i in take(its[r], 8)]
    removed = pick(names, befores[0] + befores[1])
    remove_and_refresh(mnt, a.source, removed)
    afters = [[names[i] for i in its[r]] for r in range(2)]
    epochs2 = [[names[i] for i in ranks[r]] for r in range(2)]
    for r in range(2):
        parts.append({"name": f"DistributedSampler rank {r}", "len1": len1[r], "len2": len(ranks[r]),
                      "removed": removed, "before": befores[r], "after": afters[r], "epoch2": epochs2[r], "ranks": 2})

    # Batches, view=encoded: the files' bytes of each batch.
    n = len(datasets.ImageFolder(mnt).samples)
    b = Batches(mnt, "r-batches", batch_size=8, view="encoded", with_paths=True, prefetch=0)
    it = iter(b)
    before = []
    for _ in range(2):
        x, y, paths = next(it)
        if len(x) != len(paths) or len(y) != len(paths):
            raise RuntimeError(f"a batch of {len(paths)} paths with {len(x)} samples and {len(y)} labels")
        before += paths
    removed = pick(rels(datasets.ImageFolder(mnt)), before)
    remove_and_refresh(mnt, a.source, removed)
    after = [p for _, _, paths in it for p in paths]
    epoch2 = [p for _, _, paths in b for p in paths]
    parts.append({"name": "Batches", "len1": n, "len2": n - len(removed), "removed": removed, "before": before,
                  "after": after, "epoch2": epoch2})

    with open(a.out, "w", encoding="utf-8") as f:
        json.dump({"parts": parts}, f)


if __name__ == "__main__":
    main()
