"""Trains a tiny model for EPOCHS epochs over an ImageFolder in MNT, in the order of
docs/examples/epochfs_sampler.py, and writes the indices each epoch delivered to OUT as JSON:
{"n": len(dataset), "epochs": [[idx, ...], ...]}.

    sampler_train.py --mount MNT --examples DIR --out FILE [--epochs 2]
"""
import argparse
import json
import os
import sys

import torch
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets, transforms


class WithIndex(Dataset):
    def __init__(self, ds):
        self.ds = ds

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        x, y = self.ds[i]
        return i, x, y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mount", required=True)
    ap.add_argument("--examples", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--epochs", type=int, default=2)
    a = ap.parse_args()
    sys.path.insert(0, a.examples)
    sys.path.insert(0, os.path.join(a.examples, "..", "..", "python"))  # the epochfs package
    from epochfs_sampler import EpochfsSampler

    ds = datasets.ImageFolder(a.mount, transform=transforms.Compose([transforms.Resize((32, 32)), transforms.ToTensor()]))
    sampler = EpochfsSampler(ds, "e2e-train", batch_size=16, seed=3)
    loader = DataLoader(WithIndex(ds), batch_size=16, sampler=sampler, num_workers=2)
    model = torch.nn.Linear(3 * 32 * 32, len(ds.classes))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    epochs = []
    for _ in range(a.epochs):
        seen = []
        for idx, x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x.flatten(1)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen.extend(int(i) for i in idx)
        epochs.append(seen)
    with open(a.out, "w") as f:
        json.dump({"n": len(ds), "epochs": epochs}, f)


if __name__ == "__main__":
    main()
