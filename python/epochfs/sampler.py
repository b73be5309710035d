"""A torch Sampler whose order comes from an epochfs job (.epochfs/jobs/NAME/next), so that
concurrent jobs on a node share what they fetch from the PFS (cache-aware sampling, docs/sampling.md).
Works with an unmodified torchvision ImageFolder:

    from epochfs import Sampler
    loader = DataLoader(ds, batch_size=256, sampler=Sampler(ds, "resnet50", 256, seed=7))

Its state_dict() goes into the checkpoint with the model; load_state_dict() of a new Sampler, on any
mount of the same files, continues the epoch (docs/sampling.md, "Resuming a job").
"""
import collections
import os
from array import array

from torch.utils.data import Sampler as _TorchSampler

from . import _state
from ._mount import mount_root, per_rank, register, subset_of
from ._paths import unquote


class Sampler(_TorchSampler):
    """Yields indices of dataset.samples in the order the mount's job hands out; every sample of the
    dataset's root comes exactly once per epoch (a file a refresh removes is replaced by padding in the
    epoch running and left out from the next; docs/sampling.md). dataset needs .root and .samples
    (ImageFolder)."""

    def __init__(self, dataset, job, batch_size=256, seed=0, sampler="ods"):
        root = os.path.abspath(dataset.root)
        self.mnt, self.job = mount_root(root), job
        # fixed: files a refresh adds do not join the job (dataset does not know them); files it
        # removes leave it from the next epoch (docs/sampling.md).
        self._config = {"batch_size": batch_size, "seed": seed, "sampler": sampler,
                        "subset": subset_of(root, self.mnt), "fixed": "true"}
        self.dir = register(self.mnt, job, self._config)
        self.paths = [os.path.relpath(os.path.abspath(p), self.mnt) for p, _ in dataset.samples]
        self.index = {p: i for i, p in enumerate(self.paths)}
        self._pending = collections.deque()  # the batch being yielded: handed out, not yielded yet
        self._yielded = array("q")  # this epoch's indices yielded so far

    def __len__(self):
        # The job's count this epoch: the dataset's, less the files a refresh removed (from the first
        # read of the epoch after it; docs/sampling.md), or what is left of a resumed epoch.
        return per_rank(self.dir, len(self.index))

    def __iter__(self):  # one epoch: batches of paths until the 0-byte read that ends it
        self._pending.clear()
        self._yielded = array("q")
        while batch := open(os.path.join(self.dir, "next"), encoding="utf-8", newline="",
                            errors="surrogateescape").read():
            self._pending.extend(p for p in map(unquote, batch.split("\n")[:-1]) if p in self.index)
            while self._pending:
                i = self.index[self._pending.popleft()]
                self._yielded.append(i)
                yield i

    def state_dict(self, consumed=None):
        """The job's place in its epoch, for torch.save with the model. consumed: how many of this
        epoch's samples the training loop has used (e.g. steps × batch size); those yielded after them
        (a DataLoader's workers read ahead) are handed out again on resume. None: every sample yielded."""
        unread = list(self._pending)
        if consumed is not None:
            if not 0 <= consumed <= len(self._yielded):
                raise ValueError(f"epochfs: consumed={consumed}: the sampler yielded {len(self._yielded)} this epoch")
            unread += [self.paths[i] for i in self._yielded[consumed:]]
        body, more = _state.joined([_state.read_state(self.job, self.dir)], unread)
        return _state.state_dict(self.job, body, more)

    def load_state_dict(self, state_dict):
        """Continues the epoch of state_dict (from state_dict(), here or on another mount of the same
        files): the next iter() hands out what it had not, each sample once. Call it before iterating.
        Raises EpochfsError (EINVAL, with the daemon's reason) for a state of other files, another
        sampler or seed, or a document changed or truncated."""
        self.dir = register(self.mnt, self.job, self._config)  # the job starts over: it may have read
        _state.apply(self.mnt, self.job, self.dir, _state.merge(state_dict))
        self._pending.clear()
        self._yielded = array("q")
