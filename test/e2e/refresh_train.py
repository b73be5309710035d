"""Reads epochs of three jobs through MNT (the epochfs package's Sampler, DistributedSampler with two
ranks, Batches with view=encoded) while files are removed from and added to SOURCE and the mount
refreshed in the middle of an epoch. Writes what each job handed out to OUT as JSON:
{"parts": [{"name", "ranks", "len1", "len2", "removed", "added", "before", "after", "epoch2",
"expected2"}]} (one entry per job, or per rank; paths; len1 and len2: len() in epochs 1 and 2, in
samples; expected2: the files the job's epoch 2 must hand out, once each). Any exception
(FileNotFoundError, "not a sample") fails the run.

    refresh_train.py --mount MNT --source SOURCE --package DIR --out FILE
"""
import argparse
import json
import os
import shutil
import sys
import time


def kv(path):
    with open(path, encoding="utf-8") as f:
        return dict(line.split("=", 1) for line in f.read().splitlines() if "=" in line)


def change_and_refresh(mnt, source, removed, tag):
    """Removes removed from the source, adds two files (copies of a file left, in its directory), and
    refreshes the mount, waiting until the refresh is done. Returns the paths added."""
    for rel in removed:
        os.remove(os.path.join(source, rel))
    added = []
    for root, _, files in sorted(os.walk(source)):
        if files:
            src = os.path.join(root, sorted(files)[0])
            for k in range(2):
                dst = os.path.join(root, f"added-{tag}-{k}.JPEG")
                shutil.copyfile(src, dst)
                added.append(os.path.relpath(dst, source))
            break
    ctl = os.path.join(mnt, ".epochfs", "refresh")
    before = int(kv(ctl)["finished"])
    with open(ctl, "w", encoding="utf-8") as f:
        f.write("all\n")
    deadline = time.monotonic() + 60
    while True:
        st = kv(ctl)
        if st["running"] == "0" and st["pending"] == "0" and int(st["finished"]) > before:
            # The counters need not reach len(removed): a copy worker that opens a file already
            # removed from the source takes it out of the dataset itself, before the refresh sees it.
            # What the mount shows is the contract.
            still = [p for p in removed if os.path.lexists(os.path.join(mnt, p))]
            missing = [p for p in added if not os.path.exists(os.path.join(mnt, p))]
            if still or missing:
                raise RuntimeError(f"after the refresh the mount still has {still} and lacks {missing}: {st}")
            return added
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

    # Sampler (fixed: its dataset lists the samples): two whole batches of 8, then the refresh, then the
    # rest and a second epoch over the dataset's files left.
    ds = datasets.ImageFolder(mnt)
    s = Sampler(ds, "r-sampler", batch_size=8, seed=1)
    names = rels(ds)
    len1 = len(s)
    it = iter(s)
    before = [names[i] for i in take(it, 16)]
    removed = pick(names, before)
    added = change_and_refresh(mnt, a.source, removed, "s")
    after = [names[i] for i in it]
    epoch2 = [names[i] for i in s]
    parts.append({"name": "Sampler", "ranks": 1, "len1": len1, "len2": len(s), "removed": removed, "added": added,
                  "before": before, "after": after, "epoch2": epoch2,
                  "expected2": [p for p in names if p not in removed]})

    # DistributedSampler (fixed), two ranks in one process, a batch of each in turn.
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
    added = change_and_refresh(mnt, a.source, removed, "d")
    afters = [[names[i] for i in its[r]] for r in range(2)]
    epochs2 = [[names[i] for i in ranks[r]] for r in range(2)]
    for r in range(2):
        parts.append({"name": f"DistributedSampler rank {r}", "ranks": 2, "len1": len1[r], "len2": len(ranks[r]),
                      "removed": removed, "added": added, "before": befores[r], "after": afters[r],
                      "epoch2": epochs2[r], "expected2": [p for p in names if p not in removed]})

    # Batches, view=encoded (the files' bytes; paths from the mount): files added join it.
    names = rels(datasets.ImageFolder(mnt))
    b = Batches(mnt, "r-batches", batch_size=8, view="encoded", with_paths=True, prefetch=0)
    it = iter(b)
    before = []
    for _ in range(2):
        x, y, paths = next(it)
        if len(x) != len(paths) or len(y) != len(paths):
            raise RuntimeError(f"a batch of {len(paths)} paths with {len(x)} samples and {len(y)} labels")
        before += paths
    removed = pick(names, before)
    added = change_and_refresh(mnt, a.source, removed, "b")
    after = [p for _, _, paths in it for p in paths]
    epoch2 = [p for _, _, paths in b for p in paths]
    expected2 = [p for p in names if p not in removed] + added
    parts.append({"name": "Batches", "ranks": 1, "len1": len(names), "len2": len(expected2), "removed": removed,
                  "added": added, "before": before, "after": after, "epoch2": epoch2, "expected2": expected2})

    with open(a.out, "w", encoding="utf-8") as f:
        json.dump({"parts": parts}, f)


if __name__ == "__main__":
    main()
