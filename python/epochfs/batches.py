"""Batches of preprocessed tensors from the mount (docs/views.md): the daemon decodes and augments
each sample once for every job on the node that uses the same pipeline, and hands each job its
batches whole:

    from epochfs import Batches
    loader = Batches("/mnt/imagenet/train", job="lr-0.1", batch_size=256, seed=7)
    for epoch in range(E):
        for x, y in loader:          # x: the stacked tensors, y: ImageFolder's labels
            ...

AugmentedFolder is a map-style dataset over the job's augmented views, for a DataLoader of your own.
"""
import math
import os
import queue
import threading

import numpy as np
import torch
from torch.utils.data import Dataset

from . import _state
from ._mount import mount_root, register, subset_of
from ._npz import load_npz, map_or_read, read_file
from ._paths import quote, unquote


class Batches:
    """An iterable over one epoch of (x, y) torch tensors per iteration of a for loop, read from the
    job's batch file (.epochfs/jobs/JOB/batch, or rank/R/batch for rank R of a data-parallel job of
    world_size ranks). The job is registered (or reused) with this config: every sample under root,
    once per epoch, in cache-aware random order (sampler="ods").

    view: "augmented" (the pipeline's random steps per epoch; the default), "decoded" (the static steps
    only) or "encoded" (x is the files' bytes: a list of bytes objects per batch). augment (a list of
    steps, e.g. ["random_resized_crop:160", "hflip:0.5"], or [] for none) and output ("uint8_hwc" or
    "float32_chw") override the mount's [preprocess] pipeline for this job. with_paths=True yields
    (x, y, paths). prefetch: batches a background thread reads ahead while the caller works on the
    current one, as a DataLoader's prefetch_factor (0: read each batch when it is asked for). A loop
    left early has drawn up to prefetch batches it never saw, like a DataLoader's."""

    def __init__(self, root, job, batch_size=256, seed=0, sampler="ods", view="augmented", augment=None,
                 output=None, rank=None, world_size=1, drop_last=False, with_paths=False, prefetch=1):
        root = os.path.abspath(root)
        self.mnt = mount_root(root)
        config = {"batch_size": batch_size, "seed": seed, "sampler": sampler, "subset": subset_of(root, self.mnt),
                  "view": view}
        if augment is not None:
            config["augment"] = ",".join(augment) if augment else "none"
        if output is not None:
            config["output"] = output
        if world_size > 1:
            config["world_size"] = world_size
            config["drop_last"] = "true" if drop_last else "false"
        self.job, self._config, self._registers = job, config, rank is None or rank == 0
        if self._registers:
            self.dir = register(self.mnt, job, config)
        else:
            self.dir = os.path.join(self.mnt, ".epochfs", "jobs", job)
        # Batches read from the job and not yet yielded (their paths), and the lock a read holds
        # while it takes a batch and records it: state_dict counts them as unread.
        self._ahead, self._io = [], threading.Lock()
        self.timeout = 120.0
        self.batch = os.path.join(self.dir, "batch") if world_size <= 1 else \
            os.path.join(self.dir, "rank", str(rank or 0), "batch")
        self.view, self.batch_size, self.with_paths = view, batch_size, with_paths
        self.prefetch = max(int(prefetch), 0)

    def __len__(self):
        """Batches per epoch (for this rank)."""
        with open(os.path.join(self.dir, "status"), encoding="utf-8") as f:
            st = dict(line.split("=", 1) for line in f.read().splitlines() if "=" in line)
        return math.ceil(int(st.get("per_rank", st.get("size", 0))) / self.batch_size)

    def __iter__(self):  # one epoch: batches until the 0-byte read that ends it
        with self._io:
            self._ahead.clear()
        for x, y, paths in self._batches():
            yield (x, y, paths) if self.with_paths else (x, y)

    def _take(self, gen, end):
        """The next batch of gen (or end), recorded as read ahead until it is yielded."""
        with self._io:
            item = next(gen, end)
            if item is not end:
                self._ahead.append(item[2])
        return item

    def _yielded(self):
        with self._io:
            self._ahead.pop(0)

    def _batches(self):
        if self.prefetch == 0:
            gen, end = self._epoch(), object()
            while (item := self._take(gen, end)) is not end:
                self._yielded()
                yield item
            return
        # A reader thread runs the epoch prefetch batches ahead: it reads a batch only with a slot,
        # and the caller frees one with each batch it takes. It stops at the epoch's end (the next
        # epoch starts only when the caller iterates again) or when the caller leaves the loop.
        q, slots, stop = queue.SimpleQueue(), threading.Semaphore(self.prefetch), threading.Event()
        end = object()

        def run():
            gen = self._epoch()
            try:
                while True:
                    while not slots.acquire(timeout=0.1):
                        if stop.is_set():
                            return
                    if stop.is_set():
                        return
                    item = self._take(gen, end)
                    q.put(item)
                    if item is end:
                        return
            except BaseException as e:  # handed to the caller, raised there
                q.put(e)

        t = threading.Thread(target=run, name="epochfs-batches", daemon=True)
        t.start()
        try:
            while True:
                item = q.get()
                if item is end:
                    return
                if isinstance(item, BaseException):
                    raise item
                slots.release()
                self._yielded()
                yield item
        finally:
            # Not joined: a read in flight may wait on the daemon (a rank ahead of the others); the
            # thread ends once it returns.
            stop.set()

    def state_dict(self):
        """The job's place in its epoch, for torch.save with the model: the batches read ahead and not
        yet yielded are handed out again on resume. A data-parallel job's ranks each save their own
        (their read-ahead batches); pass them all, as a list, to load_state_dict."""
        with self._io:  # no batch is taken meanwhile
            text = _state.read_state(self.job, self.dir)
            unread = [p for paths in self._ahead for p in paths]
        body, more = _state.joined([text], unread)
        return _state.state_dict(self.job, body, more)

    def load_state_dict(self, state_dict):
        """Continues the epoch of state_dict (a dict from state_dict(), or a list of every rank's), on
        any mount of the same files and with any world_size: call it before iterating, on every rank;
        rank 0 loads the state and the others wait until the job's status shows it. Raises
        EpochfsError (EINVAL, with the daemon's reason) for a state of other files, another sampler or
        seed, or a document changed or truncated."""
        sd = _state.merge(state_dict)
        if self._registers:
            self.dir = register(self.mnt, self.job, self._config)  # the job starts over: it may have read
            _state.apply(self.mnt, self.job, self.dir, sd)
        _state.wait_resumed(self.job, self.dir, sd, self.timeout)
        with self._io:
            self._ahead.clear()

    def _epoch(self):
        if self.view == "encoded":
            yield from self._encoded()
            return
        hint = 1 << 20
        while True:
            data = read_file(self.batch, hint)  # one read; the tensors are views of this buffer
            if not len(data):
                return
            hint = len(data) + (len(data) >> 4)
            z = load_npz(data)
            paths = [unquote(p) for p in z["paths"].tolist()]
            y = torch.from_numpy(z["y"])
            x = torch.from_numpy(z["x"])
            yield x, y, paths

    def _encoded(self):
        # view=encoded copies every member out of the batch (x into bytes, y into its own tensor), so
        # the batch is mapped (or read into one buffer for every batch) and let go of at once: the
        # next open of the batch file waits for this one's release.
        buf = bytearray(1 << 20)
        while True:
            data, buf, mapping = map_or_read(self.batch, buf)
            if not len(data):
                return
            try:
                x, y, paths = _copy_encoded(data)
            finally:
                try:
                    data.release()
                    if mapping is not None:
                        mapping.close()
                except BufferError:  # a view is still alive: the garbage collector unmaps it
                    pass
            yield x, y, paths


def _copy_encoded(data):
    """x (the files' bytes), y and paths of a view=encoded batch, copied out of data."""
    z = load_npz(data)
    paths = [unquote(p) for p in z["paths"].tolist()]
    y = torch.from_numpy(z["y"].copy())
    xs, off = z["x"], z["offsets"]
    return [xs[off[i]:off[i + 1]].tobytes() for i in range(len(paths))], y, paths


def find_classes(root):
    """torchvision ImageFolder's classes: the sorted subdirectories of root."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    return classes, {c: i for i, c in enumerate(classes)}


class AugmentedFolder(Dataset):
    """A map-style dataset of (tensor, label) over the job's augmented views
    (.epochfs/jobs/JOB/augmented/PATH.npy): each read takes an augmentation the job has not had,
    made once for every job with the same pipeline. Samples and labels are ImageFolder's: the files
    under root's class directories (extensions: IMG_EXTENSIONS of torchvision, or any with
    extensions=None)."""

    IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")

    def __init__(self, root, job, seed=0, augment=None, output=None, extensions=IMG_EXTENSIONS):
        root = os.path.abspath(root)
        self.mnt = mount_root(root)
        config = {"seed": seed, "subset": subset_of(root, self.mnt)}
        if augment is not None:
            config["augment"] = ",".join(augment) if augment else "none"
        if output is not None:
            config["output"] = output
        self.dir = register(self.mnt, job, config)
        self.classes, self.class_to_idx = find_classes(root)
        self.samples = []
        for c in self.classes:
            for dirpath, _, files in sorted(os.walk(os.path.join(root, c), followlinks=True)):
                for name in sorted(files):
                    if extensions is None or name.lower().endswith(extensions):
                        self.samples.append((os.path.join(dirpath, name), self.class_to_idx[c]))
        self.targets = [s[1] for s in self.samples]

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, label = self.samples[i]
        rel = os.path.relpath(path, self.mnt)
        return torch.from_numpy(np.load(os.path.join(self.dir, "augmented", rel + ".npy"))), label


__all__ = ["AugmentedFolder", "Batches", "find_classes", "quote"]
