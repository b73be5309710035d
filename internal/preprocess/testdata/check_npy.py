"""Load .npy files written by epochfs with numpy and torch and report how.

usage: check_npy.py NPY...
Prints one JSON object per file: dtype, shape, C-contiguous, aligned,
whether torch.from_numpy shares the array's memory (no copy) for both
numpy.load and numpy.load(mmap_mode="r"), and the sum of the values.
"""
import json
import sys
import warnings

import numpy as np
import torch

for path in sys.argv[1:]:
    a = np.load(path)
    t = torch.from_numpy(a)
    m = np.load(path, mmap_mode="r")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # read-only mmap: torch warns, still no copy
        tm = torch.from_numpy(m)
    print(json.dumps({
        "path": path,
        "dtype": str(a.dtype),
        "shape": list(a.shape),
        "c_contiguous": bool(a.flags["C_CONTIGUOUS"]),
        "aligned": bool(a.flags["ALIGNED"]),
        "torch_shares": t.data_ptr() == a.ctypes.data,
        "mmap_torch_shares": tm.data_ptr() == m.ctypes.data,
        "mmap_offset": int(m.offset),
        "sum": float(a.astype(np.float64).sum()),
        "first": float(a.flat[0]),
        "last": float(a.flat[-1]),
    }))
