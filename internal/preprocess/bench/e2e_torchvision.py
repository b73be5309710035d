"""What `epochfs preprocess` does, in PIL + torchvision: read each image file,
RandomResizedCrop(224) + RandomHorizontalFlip() + ToTensor(), and write
OUTDIR/<name>.npy with np.save, in one process on one thread.

usage: e2e_torchvision.py OUTDIR IMAGE...
Prints one JSON line: the seconds spent importing (start-up) and in the loop.
"""
import time

t0 = time.perf_counter()
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from PIL import Image  # noqa: E402
from torchvision import transforms  # noqa: E402

torch.set_num_threads(1)
t1 = time.perf_counter()
out, images = sys.argv[1], sys.argv[2:]
os.makedirs(out, exist_ok=True)
tf = transforms.Compose([transforms.RandomResizedCrop(224), transforms.RandomHorizontalFlip(), transforms.ToTensor()])
for path in images:
    with open(path, "rb") as f:
        img = Image.open(f).convert("RGB")
    t = tf(img)
    np.save(os.path.join(out, os.path.splitext(os.path.basename(path))[0] + ".npy"), t.numpy())
t2 = time.perf_counter()
print(json.dumps({"import_seconds": t1 - t0, "loop_seconds": t2 - t1, "images": len(images)}))
