"""PIL + torchvision doing what `bench -mode MODE` does, for the same files.

usage: pil_bench.py DIR MODE SECONDS
  decode      Image.open(...).convert("RGB") (libjpeg-turbo inside PIL), one core
  pipeline    + RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(), one core
  dataloader  the pipeline through torch DataLoader(num_workers=2, batch_size=32)
Prints one JSON line like the Go side.
"""
import io
import json
import os
import sys
import time

import torch
from PIL import Image
from torchvision import transforms

torch.set_num_threads(1)
d, mode, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
files = []
for root, _, names in os.walk(d):
    for n in sorted(names):
        if n.lower().endswith((".jpg", ".jpeg")):
            with open(os.path.join(root, n), "rb") as f:
                files.append(f.read())
tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor()])


def decode(b):
    return Image.open(io.BytesIO(b)).convert("RGB")


class DS(torch.utils.data.Dataset):
    def __len__(self):
        return 10 ** 9

    def __getitem__(self, i):
        return tf(decode(files[i % len(files)]))


def loop(f):
    for i in range(20):
        f(i)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < secs:
        for _ in range(10):
            f(n)
            n += 1
    return n, time.perf_counter() - t0


cores = 1
if mode == "decode":
    n, el = loop(lambda i: decode(files[i % len(files)]))
elif mode == "pipeline":
    n, el = loop(lambda i: tf(decode(files[i % len(files)])))
elif mode == "dataloader":
    cores = 2
    dl = torch.utils.data.DataLoader(DS(), batch_size=32, num_workers=2, shuffle=False)
    it = iter(dl)
    for _ in range(4):
        next(it)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < secs:
        n += next(it).shape[0]
    el = time.perf_counter() - t0
    del it
else:
    sys.exit("unknown mode " + mode)
print(json.dumps({"impl": "pil+torchvision", "mode": mode, "images": n, "seconds": el, "per_sec": n / el,
                  "cores": cores, "files": len(files), "mean_bytes": sum(map(len, files)) // len(files)}))
