"""Train on preprocessed batches from an epochfs mount: the daemon decodes and augments each sample once
per epoch for every job on the node that uses the same pipeline (the mount's [preprocess], or this job's
own augment steps), and hands each batch over whole. Run several of these at once (different --job
names, e.g. a hyperparameter search) and the node preprocesses the dataset once per epoch for all of them.

    /usr/bin/python3 docs/examples/train_batches.py /mnt/imagenet/train --job lr-0.1 --lr 0.1 --epochs 2

Needs the epochfs package (python/ in the repository: `pip install ./python`, or PYTHONPATH=python) and
PyTorch. The mount's pipeline should end at a fixed size (e.g. random_resized_crop:224) so that a batch
stacks; output float32_chw (normalized) feeds a model directly, uint8_hwc is converted here."""
import argparse
import os
import time

import torch
from torch import nn

from epochfs import Batches


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", help="the dataset root on the mount (an ImageFolder: one directory per class)")
    ap.add_argument("--job", default="example")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    loader = Batches(a.root, job=a.job, batch_size=a.batch_size, seed=a.seed)
    classes = sorted(e.name for e in os.scandir(a.root) if e.is_dir())
    model = nn.Sequential(nn.AdaptiveAvgPool2d(8), nn.Flatten(), nn.LazyLinear(len(classes)))
    opt = None
    for epoch in range(a.epochs):
        t0, seen, loss_sum = time.monotonic(), 0, 0.0
        for x, y in loader:
            if x.dtype == torch.uint8:  # uint8_hwc: to float CHW
                x = x.permute(0, 3, 1, 2).float().div_(255)
            out = model(x)
            if opt is None:
                opt = torch.optim.SGD(model.parameters(), lr=a.lr)
            loss = nn.functional.cross_entropy(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            seen += len(y)
            loss_sum += float(loss) * len(y)
        took = time.monotonic() - t0
        print(f"epoch {epoch + 1}: {seen} samples in {took:.1f}s ({seen / max(took, 1e-9):.0f}/s), "
              f"mean loss {loss_sum / max(seen, 1):.3f}", flush=True)


if __name__ == "__main__":
    main()
