"""Reads an image tree with an unmodified torchvision ImageFolder and DataLoader
and records a checksum of every sample's tensor, for torch_test.go.

    train.py --reference SRC --mount MNT --epochs 2 --sync DIR

First one pass over SRC (the source directly), written to DIR/reference.json;
then EPOCHS passes over MNT. After mount epoch N the checksums go to
DIR/epoch-N.json and the script waits for DIR/go-N before starting the next
epoch, so the test can read .epochfs/status between epochs. Each JSON file is
{"classes": {...class_to_idx...}, "samples": {relpath: "label:sha256"}} and is
written under a temporary name and renamed. Exits 1 with a message on any
problem, and 3 if the go-ahead does not come within --wait seconds.
"""

import argparse
import hashlib
import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets, transforms


class WithIndex(Dataset):
    """Returns (index, image, label) from an unmodified ImageFolder, so a
    shuffled batch can be matched back to its files."""

    def __init__(self, ds):
        self.ds = ds

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        x, y = self.ds[i]
        return i, x, y


def one_pass(root, seed):
    tf = transforms.Compose([
        transforms.Resize(64),
        transforms.CenterCrop(64),
        transforms.ToTensor(),
    ])
    ds = datasets.ImageFolder(root, transform=tf)
    g = torch.Generator()
    g.manual_seed(seed)
    dl = DataLoader(WithIndex(ds), batch_size=16, shuffle=True, num_workers=2, generator=g)
    out = {}
    start = time.monotonic()
    for idx, x, y in dl:
        for i, t, label in zip(idx.tolist(), x, y.tolist()):
            rel = os.path.relpath(ds.samples[i][0], root)
            if rel in out:
                sys.exit(f"train.py: {rel} read twice in one epoch")
            h = hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()
            out[rel] = f"{label}:{h}"
    el = time.monotonic() - start
    print(f"{root}: {len(out)} samples, {len(ds.classes)} classes, {el:.2f}s ({len(out) / el:.0f} images/s)",
          flush=True)
    return {"classes": ds.class_to_idx, "samples": out}


def dump(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.rename(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reference", required=True)
    ap.add_argument("--mount", required=True)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--sync", required=True)
    ap.add_argument("--wait", type=float, default=120)
    a = ap.parse_args()

    dump(os.path.join(a.sync, "reference.json"), one_pass(a.reference, 0))
    for e in range(1, a.epochs + 1):
        dump(os.path.join(a.sync, f"epoch-{e}.json"), one_pass(a.mount, e))
        go = os.path.join(a.sync, f"go-{e}")
        deadline = time.monotonic() + a.wait
        while not os.path.exists(go):
            if time.monotonic() > deadline:
                print(f"train.py: no go-ahead {go} within {a.wait}s", file=sys.stderr)
                sys.exit(3)
            time.sleep(0.05)


if __name__ == "__main__":
    main()
