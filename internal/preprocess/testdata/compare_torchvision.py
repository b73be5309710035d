"""Compare epochfs .npy outputs with PIL + torchvision on the same JPEGs.

usage: compare_torchvision.py STATIC_JSON IMAGE NPY [IMAGE NPY]...
STATIC_JSON is e.g. '{"resize": 256, "center_crop": 224}'.
Prints one JSON object per pair: shapes, mean absolute difference.
"""
import json
import sys

import numpy as np
import torch
from PIL import Image
from torchvision import transforms

torch.set_num_threads(1)
cfg = json.loads(sys.argv[1])
steps = []
if "resize" in cfg:
    steps.append(transforms.Resize(cfg["resize"]))
if "center_crop" in cfg:
    steps.append(transforms.CenterCrop(cfg["center_crop"]))
tf = transforms.Compose(steps)
args = sys.argv[2:]
for img_path, npy_path in zip(args[0::2], args[1::2]):
    with open(img_path, "rb") as f:
        img = Image.open(f).convert("RGB")
    ref = np.asarray(tf(img), dtype=np.uint8)
    got = np.load(npy_path)
    out = {"image": img_path, "ref_shape": list(ref.shape), "got_shape": list(got.shape),
           "dtype": str(got.dtype)}
    if ref.shape == got.shape:
        d = np.abs(ref.astype(np.int16) - got.astype(np.int16))
        out["mad"] = float(d.mean())
        out["max"] = int(d.max())
    print(json.dumps(out))
