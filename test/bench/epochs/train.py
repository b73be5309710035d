#!/usr/bin/python3
"""Training-like reader for the epoch benchmarks: ImageNet training's input
pipeline with no model.

torchvision ImageFolder over ROOT, DataLoader(num_workers=N, shuffle=True),
each sample decoded (PIL) and augmented like ImageNet training
(RandomResizedCrop(224), RandomHorizontalFlip, ToTensor, Normalize); with
--epochfs-job the order comes from the mount's jobs/NAME/next instead. Each
epoch is timed from the first batch request to the last batch; between
epochs the --snapshot command is run and its key=value output kept, so the
caller can charge source traffic and daemon CPU to each epoch.

Prints one JSON object on stdout:
  {"scan_s": ..., "epochs": [{"epoch": 1, "seconds": ..., "samples": ...,
   "bytes": ...}, ...], "snapshots": [{...}, ...]}
snapshots[0] is taken after the ImageFolder scan, snapshots[i] after epoch i.

Run with Debian's /usr/bin/python3 (torch and torchvision import only there).
"""
import argparse
import json
import os
import subprocess
import sys
import time


def snapshot(cmd):
    if not cmd:
        return {}
    out = subprocess.run(cmd, shell=True, check=True, capture_output=True, text=True).stdout
    kv = {}
    for line in out.splitlines():
        k, sep, v = line.partition("=")
        if sep:
            kv[k.strip()] = v.strip()
    return kv


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--snapshot", default="", help="shell command printing key=value counters")
    ap.add_argument("--epochfs-job", default="", metavar="NAME",
                    help="take the order from the epochfs job NAME (docs/examples/epochfs_sampler.py) "
                         "instead of shuffle=True; ROOT must be in an epochfs mount")
    args = ap.parse_args()

    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    tf = transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize(mean=[0.485, 0.456, 0.406], std=[0.229, 0.224, 0.225]),
    ])
    t0 = time.monotonic()
    ds = datasets.ImageFolder(args.root, transform=tf)
    scan_s = time.monotonic() - t0
    if args.epochfs_job:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../python"))
        from epochfs import Sampler as EpochfsSampler
        sampler = EpochfsSampler(ds, args.epochfs_job, args.batch_size, seed=args.seed)
        dl = DataLoader(ds, batch_size=args.batch_size, sampler=sampler, num_workers=args.workers,
                        drop_last=False, persistent_workers=False)
    else:
        dl = DataLoader(ds, batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
                        drop_last=False, persistent_workers=False)
    snaps = [snapshot(args.snapshot)]
    epochs = []
    for ep in range(1, args.epochs + 1):
        n = 0
        t = time.monotonic()
        for images, _labels in dl:
            n += images.shape[0]
        secs = time.monotonic() - t
        snaps.append(snapshot(args.snapshot))
        epochs.append({"epoch": ep, "seconds": secs, "samples": n})
        print(f"train.py: epoch {ep}: {secs:.2f} s, {n / secs:.0f} samples/s", file=sys.stderr)
    json.dump({"scan_s": scan_s, "samples": len(ds), "epochs": epochs, "snapshots": snaps}, sys.stdout)
    print()


if __name__ == "__main__":
    main()
