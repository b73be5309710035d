"""A PyTorch Sampler that reads its order from epochfs (.epochfs/jobs/NAME/next), so that concurrent
jobs on a node share what they fetch from the PFS. Works with an unmodified torchvision ImageFolder:
    loader = DataLoader(ds, batch_size=256, sampler=EpochfsSampler(ds, "resnet50", 256, seed=7))"""
import os
from torch.utils.data import Sampler


class EpochfsSampler(Sampler):
    def __init__(self, dataset, job, batch_size=256, seed=0, sampler="ods"):
        root = mnt = os.path.abspath(dataset.root)
        while not os.path.isdir(os.path.join(mnt, ".epochfs")):  # find the mount root
            if mnt == os.path.dirname(mnt):
                raise ValueError(f"{root} is not inside an epochfs mount")
            mnt = os.path.dirname(mnt)
        self.dir = os.path.join(mnt, ".epochfs", "jobs", job)
        os.makedirs(self.dir, exist_ok=True)  # registers the job
        subset = os.path.relpath(root, mnt)
        with open(os.path.join(self.dir, "config"), "w") as f:
            f.write(f"batch_size={batch_size}\nseed={seed}\nsampler={sampler}\nsubset={subset if subset != '.' else 'all'}\n")
        self.index = {os.path.relpath(os.path.abspath(p), mnt): i for i, (p, _) in enumerate(dataset.samples)}

    def __len__(self):
        return len(self.index)

    def __iter__(self):  # one epoch: batches of paths until the 0-byte read that ends it
        while batch := open(os.path.join(self.dir, "next")).read():
            yield from (self.index[p] for p in batch.splitlines() if p in self.index)
