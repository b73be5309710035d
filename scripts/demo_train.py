"""A small, ordinary PyTorch training loop for `make demo`.

    demo_train.py ROOT [--epochs 2] [--batch-size 32] [--workers 2] [--after-epoch CMD]

It knows nothing about epochfs: an unmodified torchvision ImageFolder over
ROOT, a DataLoader with worker processes, the usual ImageNet training
transforms and a tiny model, so the time goes to reading and decoding, as in
an input-bound job. After each epoch it prints the epoch's time and images/s
and, if --after-epoch is given, runs CMD with the epoch number appended (the
demo uses it to show the mount's status between epochs).
"""

import argparse
import shlex
import subprocess
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--after-epoch", default="")
    a = ap.parse_args()

    torch.manual_seed(0)
    tf = transforms.Compose([
        transforms.RandomResizedCrop(224),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])
    ds = datasets.ImageFolder(a.root, transform=tf)
    dl = DataLoader(ds, batch_size=a.batch_size, shuffle=True, num_workers=a.workers)
    model = nn.Sequential(
        nn.Conv2d(3, 16, kernel_size=8, stride=8), nn.ReLU(),
        nn.AdaptiveAvgPool2d(4), nn.Flatten(),
        nn.Linear(16 * 4 * 4, len(ds.classes)),
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    print(f"train: ImageFolder({a.root}): {len(ds)} images, {len(ds.classes)} classes; "
          f"DataLoader(batch_size={a.batch_size}, shuffle=True, num_workers={a.workers})", flush=True)

    for epoch in range(1, a.epochs + 1):
        start = time.monotonic()
        n, total_loss = 0, 0.0
        for x, y in dl:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            n += len(y)
            total_loss += loss.item() * len(y)
        el = time.monotonic() - start
        print(f"train: epoch {epoch}: {n} images in {el:.2f} s, {n / el:.0f} images/s, "
              f"loss {total_loss / n:.3f}", flush=True)
        if a.after_epoch:
            r = subprocess.run(shlex.split(a.after_epoch) + [str(epoch)])
            if r.returncode != 0:
                sys.exit(f"train: --after-epoch command failed (exit {r.returncode})")


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)
