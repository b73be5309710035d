"""A torch Sampler whose order comes from an epochfs job (.epochfs/jobs/NAME/next), so that
concurrent jobs on a node share what they fetch from the PFS (cache-aware sampling, docs/sampling.md).
Works with an unmodified torchvision ImageFolder:

    from epochfs import Sampler
    loader = DataLoader(ds, batch_size=256, sampler=Sampler(ds, "resnet50", 256, seed=7))
"""
import os

from torch.utils.data import Sampler as _TorchSampler

from ._mount import mount_root, per_rank, register, subset_of
from ._paths import unquote


class Sampler(_TorchSampler):
    """Yields indices of dataset.samples in the order the mount's job hands out; every sample of the
    dataset's root comes exactly once per epoch (a file a refresh removes is replaced by padding in the
    epoch running and left out from the next; docs/sampling.md). dataset needs .root and .samples
    (ImageFolder)."""

    def __init__(self, dataset, job, batch_size=256, seed=0, sampler="ods"):
        root = os.path.abspath(dataset.root)
        mnt = mount_root(root)
        # fixed: files a refresh adds do not join the job (dataset does not know them); files it
        # removes leave it from the next epoch (docs/sampling.md).
        self.dir = register(mnt, job, {"batch_size": batch_size, "seed": seed, "sampler": sampler,
                                       "subset": subset_of(root, mnt), "fixed": "true"})
        self.index = {os.path.relpath(os.path.abspath(p), mnt): i for i, (p, _) in enumerate(dataset.samples)}

    def __len__(self):
        # The job's count this epoch: the dataset's, less the files a refresh removed (from the first
        # read of the epoch after it; docs/sampling.md).
        return per_rank(self.dir, len(self.index))

    def __iter__(self):  # one epoch: batches of paths until the 0-byte read that ends it
        while batch := open(os.path.join(self.dir, "next"), encoding="utf-8", newline="",
                            errors="surrogateescape").read():
            yield from (self.index[p] for p in map(unquote, batch.split("\n")[:-1]) if p in self.index)
