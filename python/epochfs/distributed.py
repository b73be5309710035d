"""torch's DistributedSampler, cache-aware: the ranks of a data-parallel job share one epochfs job
(.epochfs/jobs/NAME/, one rank/R/next per rank), so together they see every sample once per epoch,
each rank the same number, while the mount prefers what is already buffered or cached
(docs/sampling.md, "Ranks"). Same arguments and methods as torch.utils.data.DistributedSampler, plus
job=NAME:

    from epochfs import DistributedSampler
    sampler = DistributedSampler(dataset, job="resnet50", num_replicas=world_size, rank=rank, seed=7)
    for epoch in range(E):
        sampler.set_epoch(epoch)
        for x, y in DataLoader(dataset, batch_size=256, sampler=sampler): ...
"""
import collections
import errno
import math
import os
import time
from array import array

import torch.distributed as dist
from torch.utils.data import Sampler as _TorchSampler

from . import _state
from ._mount import EpochfsError, last_error, mount_root, per_rank, subset_of
from ._paths import quote, unquote


def samples_per_rank(n, num_replicas, drop_last):
    """What each rank gets per epoch, as torch's DistributedSampler counts it."""
    if drop_last and n % num_replicas != 0:
        return math.ceil((n - num_replicas) / num_replicas)
    return math.ceil(n / num_replicas)


def subset_lines(rels):
    """The subset= values that name exactly the directories holding the dataset-relative paths rels
    (a directory inside another is left out: the outer one holds it)."""
    dirs = sorted({os.path.dirname(r) for r in rels})
    out = []
    for d in dirs:
        if d in ("", "."):
            return ["all"]
        if out and (d == out[-1] or d.startswith(out[-1] + "/")):
            continue
        out.append(d)
    return [('"all"' if d == "all" else quote(d)) for d in out]


def _read_kv(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return dict(line.split("=", 1) for line in f.read().splitlines() if "=" in line)


class DistributedSampler(_TorchSampler):
    """Yields this rank's indices of dataset.samples, in the order the mount hands them out. dataset
    needs .root and .samples (torchvision's ImageFolder). The order of an epoch comes from the mount
    (seeded by seed, job and the job's epoch number); set_epoch is kept for torch's API and not needed.
    Unlike torch's, every iter() is the job's next epoch, whatever set_epoch said: iterate once per
    epoch (as a DataLoader does), not once more to count or inspect the indices (len() is free).

    Rank 0 registers the job (a fresh epoch 1 with this config); the other ranks wait for it at a
    barrier of the default process group when one is initialized, or else until the job's config
    says num_replicas ranks (start rank 0 first: a stale job of the same name would do).

    cluster=True: the ranks read on several nodes, each through its own mount of a [cluster] mount
    (docs/cluster.md), and the job's epochs are shared through the cluster. The first rank of each
    node (local_rank 0; default: LOCAL_RANK, which torchrun sets) registers the job on its node."""

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0, drop_last=False, *,
                 job=None, batch_size=64, sampler="ods", timeout=120.0, cluster=False, local_rank=None):
        if num_replicas is None:
            if not dist.is_available():
                raise RuntimeError("Requires distributed package to be available")
            num_replicas = dist.get_world_size()
        if rank is None:
            if not dist.is_available():
                raise RuntimeError("Requires distributed package to be available")
            rank = dist.get_rank()
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}]")
        if not job:
            raise ValueError("epochfs: DistributedSampler needs job=NAME, the same on every rank")
        self.dataset, self.num_replicas, self.rank, self.epoch = dataset, num_replicas, rank, 0
        self.shuffle, self.seed, self.drop_last, self.job = shuffle, seed, drop_last, job
        root = os.path.abspath(dataset.root)
        self.mnt = mount_root(root)
        self.paths = [os.path.relpath(os.path.abspath(p), self.mnt) for p, _ in dataset.samples]
        self.index = {p: i for i, p in enumerate(self.paths)}
        self._pending = collections.deque()  # the batch being yielded: handed out, not yielded yet
        self._yielded = array("q")  # this epoch's indices yielded so far
        self.timeout = timeout
        self.num_samples = samples_per_rank(len(self.index), num_replicas, drop_last)
        self.total_size = self.num_samples * num_replicas
        self.dir = os.path.join(self.mnt, ".epochfs", "jobs", job)
        config = [("batch_size", batch_size), ("seed", seed), ("sampler", sampler if shuffle else "sequential"),
                  ("world_size", num_replicas), ("drop_last", "true" if drop_last else "false"),
                  ("fixed", "true")]  # files a refresh adds are not in dataset: they do not join
        registers = rank == 0
        self.cluster = cluster
        if cluster:
            config.append(("cluster", "true"))
            if local_rank is None:
                if "LOCAL_RANK" not in os.environ:
                    raise ValueError("epochfs: DistributedSampler(cluster=True) needs local_rank (the rank's "
                                     "number on its node), or LOCAL_RANK set as torchrun sets it")
                local_rank = int(os.environ["LOCAL_RANK"])
            registers = local_rank == 0
        self._config, self._registers = config, registers
        self._subsets = ([subset_of(root, self.mnt)], subset_lines(self.index))
        if registers:
            self._register(config, *self._subsets)
        group = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
        if group:
            dist.barrier()
        self._await(config, 0 if group else timeout)
        self.next = os.path.join(self.dir, "rank", str(rank), "next")

    def _write(self, config, subsets):
        text = "".join(f"{k}={v}\n" for k, v in config) + "".join(f"subset={s}\n" for s in subsets)
        try:
            with open(os.path.join(self.dir, "config"), "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            if e.errno == errno.EINVAL:
                raise EpochfsError(e.errno, f"epochfs: job {self.job}: config refused: {last_error(self.mnt)}") from None
            raise

    def _size(self):
        return int(_read_kv(os.path.join(self.dir, "status")).get("size", -1))

    def _register(self, config, root, dirs):
        try:
            os.mkdir(self.dir)
        except FileExistsError:
            pass
        # The dataset's root, or else the directories of its samples: the job's subset must be the
        # dataset's samples exactly, or the ranks' counts would not be torch's.
        for subsets in (root, dirs):
            self._write(config, subsets)
            if self._size() == len(self.index):
                return
        raise EpochfsError(errno.EINVAL, f"epochfs: job {self.job}: the mount's subset ({' '.join(dirs)}) holds "
                                         f"{self._size()} files the job's owner may read, the dataset {len(self.index)} "
                                         "samples: every file under its class directories must be a sample")

    def _await(self, config, timeout):
        """Waits until the job has rank 0's config (its ranks, its size)."""
        want = {k: str(v) for k, v in config}
        deadline = time.monotonic() + timeout
        while True:
            try:
                got = _read_kv(os.path.join(self.dir, "config"))
                size = self._size()
            except FileNotFoundError:
                got, size = {}, -1
            got.setdefault("world_size", "1")
            got.setdefault("drop_last", "false")
            if all(got.get(k) == v for k, v in want.items()) and size == len(self.index):
                return
            if time.monotonic() >= deadline:
                raise EpochfsError(errno.ETIMEDOUT, f"epochfs: job {self.job}: rank 0 did not register it with "
                                                    f"this config ({want}; the job has {got}, size {size})")
            time.sleep(0.05)

    def __len__(self):
        # Torch's count over the job's samples this epoch: less the files a refresh removed, from the
        # first read of the epoch after it (docs/sampling.md).
        return per_rank(self.dir, self.num_samples)

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __iter__(self):  # one epoch of this rank: batches of paths until the 0-byte read that ends it
        self._pending.clear()
        self._yielded = array("q")
        while batch := open(self.next, encoding="utf-8", newline="", errors="surrogateescape").read():
            for line in batch.split("\n")[:-1]:
                path = unquote(line)
                if path not in self.index:
                    raise EpochfsError(errno.EINVAL, f"epochfs: job {self.job} handed out {path!r}, not a sample")
                self._pending.append(path)
            while self._pending:
                i = self.index[self._pending.popleft()]
                self._yielded.append(i)
                yield i

    def pause(self, seconds):
        """Says this rank reads nothing for seconds (a validation pass, a long checkpoint): it is not
        taken for dead, whatever the mount's lease; its next read ends the pause (at most a day)."""
        with open(os.path.join(self.dir, "rank", str(self.rank), "pause"), "w", encoding="utf-8") as f:
            f.write(f"{int(seconds)}\n")

    @staticmethod
    def _group():
        return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1

    def state_dict(self, consumed=None):
        """The job's place in its epoch, every rank's included, for torch.save with the model (rank 0
        saves it). With a process group it is collective, as torch's distributed checkpoints are: call
        it on every rank at the same step; each gets the same dict. consumed: how many of this epoch's
        samples this rank's training loop has used (steps × batch size); those yielded after them (a
        DataLoader's workers read ahead) are handed out again on resume. None: every sample yielded.
        Without a process group each rank's dict holds its own unread samples: pass them all, as a
        list, to load_state_dict."""
        unread = list(self._pending)
        if consumed is not None:
            if not 0 <= consumed <= len(self._yielded):
                raise ValueError(f"epochfs: consumed={consumed}: the sampler yielded {len(self._yielded)} this epoch")
            unread += [self.paths[i] for i in self._yielded[consumed:]]
        if not self._group():
            body, more = _state.joined([_state.read_state(self.job, self.dir)], unread)
            return _state.state_dict(self.job, body, more)
        # Every rank is here, its data loader's reads of the job stopped: one document for all. A cluster
        # job's nodes each give back, in their document, what their ranks drew ahead: each node's first
        # rank reads its node's.
        dist.barrier()
        reads = dist.get_rank() == 0 or (self.cluster and self._registers)
        text = _state.read_state(self.job, self.dir) if reads else None
        parts = [None] * dist.get_world_size()
        dist.all_gather_object(parts, (text, unread))
        texts = [t for t, _ in parts if t is not None]
        body, more = _state.joined(texts, [p for _, u in parts for p in u])
        return _state.state_dict(self.job, body, more)

    def load_state_dict(self, state_dict):
        """Continues the epoch of state_dict (a dict from state_dict(), or a list of every rank's), on
        any mount of the same files and with any num_replicas: the ranks share what the epoch had not
        handed out, each sample once, with torch's counts. Call it on every rank before iterating: the
        rank that registered the job loads the state (a cluster job's: the first rank of each node, on its
        node), the others wait for it (a barrier with a process group, else until the job's status shows
        it, up to timeout). Raises EpochfsError (EINVAL, with
        the daemon's reason) for a state of other files, another sampler or seed, or a document changed
        or truncated."""
        sd = _state.merge(state_dict)
        group = self._group()
        err = None
        if self._registers:
            try:
                self._register(self._config, *self._subsets)  # the job starts over: it may have read
                _state.apply(self.mnt, self.job, self.dir, sd)
            except Exception as e:  # raised after the barrier, so that no rank waits forever
                err = e
        if group:
            dist.barrier()
        if err is not None:
            raise err
        _state.wait_resumed(self.job, self.dir, sd, 0 if group else self.timeout)
        self._pending.clear()
        self._yielded = array("q")
