# The Python walks of test/bench/listing.sh: prints the seconds the walk
# took (the interpreter's start and torchvision's import not counted) and
# what it found.
#
#   /usr/bin/python3 listing.py os.walk DIR       files found by os.walk
#   /usr/bin/python3 listing.py imagefolder DIR   samples of ImageFolder(DIR)
import os
import sys
import time

tool, root = sys.argv[1], sys.argv[2]
if tool == "os.walk":
    t0 = time.monotonic()
    n = 0
    for _, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".epochfs"]
        n += len(files)
elif tool == "imagefolder":
    from torchvision.datasets import ImageFolder

    t0 = time.monotonic()
    n = len(ImageFolder(root).samples)
else:
    sys.exit("listing.py: unknown walk %r" % tool)
print("%.3f %d" % (time.monotonic() - t0, n))
