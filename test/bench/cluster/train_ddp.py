#!/usr/bin/python3
"""One rank of the peers benchmark's data-parallel job (test/bench/cluster/peers.sh): the training
loop of the transport benchmark (test/bench/transport/train.py: ImageFolder, RandomResizedCrop(128),
a small CNN, an SGD step per batch of 32, two DataLoader workers) over a node's mount, for EPOCHS
epochs, its indices from

  --sampler epochfs   epochfs.DistributedSampler(cluster=True, sampler="ods"): the job's ranks on
                      every node share each epoch through the cluster, ODS drawing each node's own
                      files first
  --sampler torch     torch's DistributedSampler (no cluster: the ranks split each epoch by index)

Prints one JSON object: {"epochs": [{"seconds": ..., "samples": ...}, ...], "scan_s": ...}. Run with
Debian's /usr/bin/python3, with the repository's python/ on PYTHONPATH for --sampler epochfs.
"""
import argparse
import json
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--sampler", choices=["epochfs", "torch"], default="epochfs")
    ap.add_argument("--job", default="bench")
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
    if args.sampler == "epochfs":
        from epochfs import DistributedSampler
        sampler = DistributedSampler(ds, job=args.job, num_replicas=args.world, rank=args.rank, seed=args.seed,
                                     batch_size=args.batch_size, cluster=True, local_rank=0, timeout=600)
    else:
        from torch.utils.data import DistributedSampler
        sampler = DistributedSampler(ds, num_replicas=args.world, rank=args.rank, seed=args.seed)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, len(ds.classes)),
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    epochs = []
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        dl = DataLoader(ds, batch_size=args.batch_size, sampler=sampler, num_workers=args.workers,
                        persistent_workers=False)
        samples = 0
        start = time.monotonic()
        for x, y in dl:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            samples += len(y)
        epochs.append({"seconds": time.monotonic() - start, "samples": samples})
    print(json.dumps({"epochs": epochs, "scan_s": scan}))


if __name__ == "__main__":
    main()
