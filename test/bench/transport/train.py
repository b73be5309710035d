#!/usr/bin/python3
"""The training loop of the transport benchmark (test/bench/transport/run.sh):
a real, small PyTorch training step per batch, so that the input pipeline and
the file system share the CPU as they do in training.

torchvision ImageFolder over ROOT, RandomResizedCrop(128) + RandomHorizontalFlip
+ ToTensor, DataLoader(num_workers=2, shuffle=True, batch_size=32), a small CNN
and an SGD step. One epoch per run, timed from the first batch request to the
end of the last step (the ImageFolder scan and the worker start are outside).

Prints one JSON object: {"seconds": ..., "samples": ..., "scan_s": ...}.
Run with Debian's /usr/bin/python3 (torch and torchvision import only there).
"""
import argparse
import json
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    import torch
    from torch import nn
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    tf = transforms.Compose([
        transforms.RandomResizedCrop(128),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
    ])
    t0 = time.monotonic()
    ds = datasets.ImageFolder(args.root, transform=tf)
    scan = time.monotonic() - t0
    dl = DataLoader(ds, batch_size=args.batch_size, shuffle=True, num_workers=args.workers,
                    persistent_workers=False)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, len(ds.classes)),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    samples = 0
    start = time.monotonic()
    for x, y in dl:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        samples += len(y)
    took = time.monotonic() - start
    print(json.dumps({"seconds": took, "samples": samples, "scan_s": scan}))


if __name__ == "__main__":
    main()
