"""torchvision RandomResizedCrop/RandomHorizontalFlip references.

usage:
  rrc_torchvision.py params H W N SEED
      N draws of RandomResizedCrop.get_params on an H×W image (default
      scale and ratio); prints JSON {"area": [...], "ratio": [...], "h": [...], "w": [...]}
  rrc_torchvision.py pixels SIZE IMAGE NPY TOP LEFT H W FLIP [...]
      F.resized_crop + optional hflip on the JPEG, compared with the .npy
      (uint8 HWC); prints JSON {"image", "ref_shape", "got_shape", "mad", "max"} per image.
"""
import json
import sys

import numpy as np
import torch
from PIL import Image
from torchvision import transforms
from torchvision.transforms import functional as F

torch.set_num_threads(1)
mode = sys.argv[1]
if mode == "params":
    h, w, n, seed = (int(x) for x in sys.argv[2:6])
    torch.manual_seed(seed)
    rrc = transforms.RandomResizedCrop(224)
    img = Image.new("RGB", (w, h))
    out = {"area": [], "ratio": [], "h": [], "w": []}
    for _ in range(n):
        i, j, ch, cw = rrc.get_params(img, rrc.scale, rrc.ratio)
        out["area"].append(ch * cw / (h * w))
        out["ratio"].append(cw / ch)
        out["h"].append(ch)
        out["w"].append(cw)
    print(json.dumps(out))
elif mode == "pixels":
    size = int(sys.argv[2])
    args = sys.argv[3:]
    for k in range(0, len(args), 7):
        path, npy, top, left, ch, cw, flip = args[k:k + 7]
        with open(path, "rb") as f:
            img = Image.open(f).convert("RGB")
        ref = F.resized_crop(img, int(top), int(left), int(ch), int(cw), [size, size])
        if flip == "1":
            ref = F.hflip(ref)
        ref = np.asarray(ref, dtype=np.uint8)
        got = np.load(npy)
        o = {"image": path, "ref_shape": list(ref.shape), "got_shape": list(got.shape), "dtype": str(got.dtype)}
        if ref.shape == got.shape:
            d = np.abs(ref.astype(np.int16) - got.astype(np.int16))
            o["mad"] = float(d.mean())
            o["max"] = int(d.max())
        print(json.dumps(o))
