"""One consumer of the views benchmark (test/bench/views/run.sh): takes batches as fast as it can and
prints one JSON line: samples, seconds, start and end (wall clock, for runs of several consumers) per
epoch.

  consume.py batches MNT JOB --epochs E [--view augmented|decoded|encoded] [--batch B]
  consume.py torchvision MNT --epochs E --workers W [--batch B] [--decoded]
  consume.py native DIR --threads T           (read every file of DIR whole, T threads)

With --ready FILE --go FILE (batches): take one batch, create the ready file, wait for the go file,
then time the rest of the epoch (the model benchmark's ingestion probe: the daemon has made the
rest of the epoch in between).
"""
import argparse
import json
import os
import sys
import threading
import time


def batches(a):
    from epochfs import Batches
    b = Batches(a.root, job=a.job, batch_size=a.batch, seed=a.seed, view=a.view)
    out = []
    if a.ready:
        it = iter(b)
        first = next(it)
        open(a.ready, "w").close()
        while not os.path.exists(a.go):
            time.sleep(0.01)
        t0, w0, n = time.monotonic(), time.time(), 0
        for x, y in it:
            n += len(y)
        return [{"samples": n, "seconds": time.monotonic() - t0, "start": w0, "end": time.time(),
                 "first": len(first[1])}]
    for _ in range(a.epochs):
        t0, w0, n = time.monotonic(), time.time(), 0
        for x, y in b:
            n += len(y)
        out.append({"samples": n, "seconds": time.monotonic() - t0, "start": w0, "end": time.time()})
    return out


def torchvision(a):
    import torch
    from torch.utils.data import DataLoader
    from torchvision import datasets, transforms
    tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(),
                             transforms.PILToTensor()])
    ds = datasets.ImageFolder(a.root, transform=tf)
    dl = DataLoader(ds, batch_size=a.batch, shuffle=True, num_workers=a.workers, persistent_workers=a.workers > 0)
    out = []
    for _ in range(a.epochs):
        t0, w0, n = time.monotonic(), time.time(), 0
        for x, y in dl:
            n += len(y)
        out.append({"samples": n, "seconds": time.monotonic() - t0, "start": w0, "end": time.time()})
    return out


def native(a):
    files = []
    for d, _, fs in os.walk(a.root):
        files.extend(os.path.join(d, f) for f in fs)
    lock, it, total = threading.Lock(), iter(files), [0]

    def worker():
        while True:
            with lock:
                p = next(it, None)
            if p is None:
                return
            with open(p, "rb") as f:
                n = len(f.read())
            with lock:
                total[0] += n
    t0 = time.monotonic()
    ts = [threading.Thread(target=worker) for _ in range(a.threads)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    return [{"samples": len(files), "seconds": time.monotonic() - t0, "bytes": total[0]}]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["batches", "torchvision", "native"])
    ap.add_argument("root")
    ap.add_argument("job", nargs="?", default="bench")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--view", default="augmented")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--ready")
    ap.add_argument("--go")
    a = ap.parse_args()
    out = {"batches": batches, "torchvision": torchvision, "native": native}[a.mode](a)
    print(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
