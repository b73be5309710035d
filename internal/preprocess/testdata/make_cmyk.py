"""Save a CMYK and a grayscale JPEG made by PIL from an RGB JPEG, and the
RGB PIL gets back from each (convert("RGB")) as .npy.

usage: make_cmyk.py SRC.jpg OUTDIR
"""
import os
import sys

import numpy as np
from PIL import Image

src, out = sys.argv[1], sys.argv[2]
img = Image.open(src).convert("RGB")
for mode in ("CMYK", "L"):
    p = os.path.join(out, mode.lower() + ".jpg")
    img.convert(mode).save(p, quality=92)
    back = Image.open(p)
    assert back.mode == mode, back.mode
    np.save(os.path.join(out, mode.lower() + "_ref.npy"), np.asarray(back.convert("RGB")))
print("ok")
