"""One rank of a data-parallel job over an ImageFolder in an epochfs mount, with
epochfs.DistributedSampler (or torch's own, --sampler torch). Run by torchrun, or with RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT set. Writes OUT/rank-R.json: {"n": len(dataset),
"len": len(sampler), "epochs": [[idx, ...], ...], "status": the job's status file, "ranks": each
rank's status file} after every epoch.

    ddp_train.py --mount MNT --out DIR [--job NAME] [--epochs 2] [--batch 16] [--train]
                 [--die-after K] [--pace S] [--sampler epochfs|torch] [--workers 0]
                 [--uncached] [--start DIR:N] [--cluster]

--train wraps a tiny model in DistributedDataParallel (gloo) and all-reduces every step; without
it the ranks only load. --die-after K: the rank SIGKILLs itself after K batches of epoch 1.
--pace S: rank 0 sleeps S seconds after each batch of epoch 1 until the job's status says a rank
was lost (its reads renew its lease meanwhile; the dead rank's runs out).
--uncached: every file is read with its page cache dropped after (a dataset larger than RAM).
--start DIR:N: the rank starts its first epoch once N ranks (of every job) are ready (files in DIR).
--cluster: the job is cluster-wide (each rank may read on its own node's mount; LOCAL_RANK says
which rank registers the job on each node).
"""
import argparse
import io
import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from PIL import Image
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets, transforms

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import epochfs  # noqa: E402


def uncached_loader(path):
    with open(path, "rb") as f:
        data = f.read()
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return Image.open(io.BytesIO(data)).convert("RGB")


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
    ap.add_argument("--out", required=True)
    ap.add_argument("--job", default="ddp")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--die-after", type=int, default=0)
    ap.add_argument("--pace", type=float, default=0)
    ap.add_argument("--sampler", default="epochfs")
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--uncached", action="store_true")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--cluster", action="store_true", help="the job's ranks read on several nodes' mounts")
    ap.add_argument("--start", default="", help="DIR:N: start the first epoch once N ranks (of all jobs) are ready")
    a = ap.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    tf = transforms.Compose([transforms.Resize((32, 32)), transforms.ToTensor()])
    ds = datasets.ImageFolder(a.mount, transform=tf, loader=uncached_loader if a.uncached else datasets.folder.default_loader)
    if a.sampler == "torch":
        sampler = torch.utils.data.DistributedSampler(ds, seed=a.seed)
    else:
        # The DataLoader's batches are the job's: a rank that dies after a batch was handed all
        # it read from next.
        sampler = epochfs.DistributedSampler(ds, job=a.job, seed=a.seed, batch_size=a.batch, cluster=a.cluster)
    loader = DataLoader(WithIndex(ds), batch_size=a.batch, sampler=sampler, num_workers=a.workers)
    model = torch.nn.Linear(3 * 32 * 32, len(ds.classes))
    if a.train:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    out = os.path.join(a.out, f"rank-{rank}.json")
    if a.start:
        d, n = a.start.rsplit(":", 1)
        open(os.path.join(d, f"{a.job}-{rank}"), "w").close()
        deadline = time.monotonic() + 300
        while len(os.listdir(d)) < int(n):
            if time.monotonic() > deadline:
                sys.exit(f"only {len(os.listdir(d))} of {n} ranks ready after 300 s")
            time.sleep(0.01)
    epochs = []
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        seen = []
        for k, (idx, x, y) in enumerate(loader):
            seen.extend(int(i) for i in idx)
            if a.train:
                loss = torch.nn.functional.cross_entropy(model(x.flatten(1)), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            if epoch == 0 and k + 1 == a.die_after:
                with open(out, "w") as f:
                    json.dump({"n": len(ds), "len": len(sampler), "epochs": epochs + [seen]}, f)
                os.kill(os.getpid(), signal.SIGKILL)
            if epoch == 0 and a.pace and rank == 0:
                with open(os.path.join(a.mount, ".epochfs", "jobs", a.job, "status")) as f:
                    if "ranks_lost=none" in f.read():
                        time.sleep(a.pace)
        epochs.append(seen)
        report = {"n": len(ds), "len": len(sampler), "epochs": epochs}
        if a.sampler != "torch":  # the job as it was right after this rank's last read
            job = os.path.join(a.mount, ".epochfs", "jobs", a.job)
            report["status"] = open(os.path.join(job, "status")).read()
            report["ranks"] = [open(os.path.join(job, "rank", str(r), "status")).read() for r in range(world)]
        with open(out, "w") as f:
            json.dump(report, f)
    if a.train:
        dist.barrier()
    print(f"rank {rank}/{world}: {[len(e) for e in epochs]} samples per epoch, len(sampler)={len(sampler)}", flush=True)


if __name__ == "__main__":
    main()
