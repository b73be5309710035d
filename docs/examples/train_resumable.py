"""Data-parallel training that survives being killed: the model, the optimizer and the epochfs sampler's
state go into one checkpoint every --every steps, and a run started again (after a SIGKILL, a Slurm
preemption or requeue, on other nodes, with another number of ranks) continues the epoch it was in:
every sample the checkpoint had not trained on comes once, none it had comes again
(docs/sampling.md, "Resuming a job").

    torchrun --nproc_per_node=2 docs/examples/train_resumable.py /mnt/imagenet/train --job resnet \\
        --ckpt /scratch/$USER/resnet.pt --epochs 90

Start it the same way to resume: it loads --ckpt when the file exists. Run by torchrun, or with RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT set (one process: none needed). On SIGUSR1 or SIGTERM (Slurm's
--signal=USR1@120, scancel) it checkpoints at the next step and exits; Slurm's --requeue starts it
again. --log DIR writes, per rank, a line per step: "EPOCH STEP i,i,..." (the dataset indices trained
on), and "resume STEP" when it resumed from a checkpoint of step STEP.

Needs the epochfs package (python/ in the repository: `pip install ./python`, or PYTHONPATH=python),
PyTorch and torchvision."""
import argparse
import os
import signal
import sys

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset
from torchvision import datasets, transforms

from epochfs import DistributedSampler


class WithIndex(Dataset):
    """The dataset's samples with their index (for --log)."""

    def __init__(self, ds):
        self.ds = ds

    def __len__(self):
        return len(self.ds)

    def __getitem__(self, i):
        x, y = self.ds[i]
        return i, x, y


stop = False


def on_signal(signum, frame):
    global stop
    stop = True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", help="the dataset root on the mount (an ImageFolder: one directory per class)")
    ap.add_argument("--job", default="resumable")
    ap.add_argument("--ckpt", required=True, help="the checkpoint file: loaded when it exists")
    ap.add_argument("--every", type=int, default=100, help="steps between checkpoints")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--pace", type=float, default=0, help="seconds to sleep per step (tests)")
    ap.add_argument("--log", default="", help="a directory for the per-rank step logs")
    a = ap.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        dist.init_process_group("gloo")
    rank = dist.get_rank() if world > 1 else 0
    signal.signal(signal.SIGUSR1, on_signal)
    signal.signal(signal.SIGTERM, on_signal)

    tf = transforms.Compose([transforms.Resize((32, 32)), transforms.ToTensor()])
    ds = datasets.ImageFolder(a.root, transform=tf)
    sampler = DistributedSampler(ds, job=a.job, num_replicas=world, rank=rank, seed=a.seed,
                                 batch_size=a.batch_size)
    model = torch.nn.Linear(3 * 32 * 32, len(ds.classes))
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    log = open(os.path.join(a.log, f"rank-{rank}.log"), "a", buffering=1) if a.log else None

    start_epoch, step = 0, 0
    if os.path.exists(a.ckpt):
        ckpt = torch.load(a.ckpt)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["optimizer"])
        start_epoch, step = ckpt["epoch"], ckpt["step"]
        sampler.load_state_dict(ckpt["sampler"])  # on every rank, before the loader iterates
        if log:
            log.write(f"resume {step}\n")
        print(f"rank {rank}/{world}: resumed at epoch {start_epoch + 1}, step {step}: "
              f"{len(sampler)} samples of it left for this rank", flush=True)

    def checkpoint(epoch, consumed):
        # Collective: every rank gives the samples its loader read ahead back to the state.
        state = sampler.state_dict(consumed=consumed)
        if rank == 0:
            tmp = a.ckpt + ".tmp"
            torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch,
                        "step": step, "sampler": state}, tmp)
            os.replace(tmp, a.ckpt)  # a kill never leaves half a checkpoint

    for epoch in range(start_epoch, a.epochs):
        loader = DataLoader(WithIndex(ds), batch_size=a.batch_size, sampler=sampler, num_workers=a.workers)
        consumed = 0
        for idx, x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x.flatten(1)), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            consumed += len(idx)
            if log:
                log.write(f"{epoch + 1} {step} {','.join(str(int(i)) for i in idx)}\n")
            flag = torch.tensor([1 if stop else 0])
            if world > 1:
                dist.all_reduce(flag)  # every rank stops at the same step
            if step % a.every == 0 or flag.item():
                checkpoint(epoch, consumed)
            if flag.item():
                print(f"rank {rank}: signalled: checkpointed at step {step}, exiting", flush=True)
                sys.exit(0)
            if a.pace:
                import time
                time.sleep(a.pace)
        # The epoch is done: a checkpoint now resumes at the next one. (A validation pass would go
        # here too: the pause keeps the mount from taking the idle ranks for dead meanwhile.)
        sampler.pause(600)
        checkpoint(epoch + 1, 0)
        print(f"rank {rank}/{world}: epoch {epoch + 1} done, {consumed} samples, step {step}", flush=True)
    if world > 1:
        dist.barrier()


if __name__ == "__main__":
    main()
