"""End to end: `epochfs preprocess` against PIL + torchvision writing the same
.npy files (e2e_torchvision.py), files in and files out, start-up included.

usage: e2e.py EPOCHFS CONFIG OUTROOT REPEATS CPU NAME=DIR [NAME=DIR ...]

With BASELINE=BINARY in the environment, a second epochfs binary (e.g. an
earlier commit's) runs in the same rotation as "epochfs-baseline".

Each run is a new process pinned to CPU (taskset -c), so "per core" is
literal: a run cannot use a second core for its garbage collector, a
background worker or a thread pool. For each repeat and each image set it
runs the implementations back to back, rotating which goes first, with
an empty output directory (removed outside the timing). It prints one JSON
line per run: wall seconds of the whole process, its user and system CPU
seconds (getrusage of the child), the 1-minute load average just before
it, and what it wrote (files, bytes), which must agree between the two.
"""
import json
import os
import resource
import shutil
import subprocess
import sys
import time

epochfs, config, outroot, repeats, cpu = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
sets = [a.split("=", 1) for a in sys.argv[6:]]
here = os.path.dirname(os.path.abspath(__file__))
exts = (".jpg", ".jpeg", ".png")


def images(d):
    out = []
    for root, _, names in os.walk(d):
        out += [os.path.join(root, n) for n in names if n.lower().endswith(exts)]
    return sorted(out)


def load1():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


baseline = os.environ.get("BASELINE", "")
impls = ["epochfs", "pil+torchvision"] + (["epochfs-baseline"] if baseline else [])


def run(impl, name, files, out):
    shutil.rmtree(out, ignore_errors=True)
    if impl.startswith("epochfs"):
        binary = baseline if impl == "epochfs-baseline" else epochfs
        cmd = [binary, "preprocess", "--config", config, "--workers", "1", "--seed", "1", "--out", out] + files
    else:
        cmd = ["/usr/bin/python3", os.path.join(here, "e2e_torchvision.py"), out] + files
    la = load1()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(["taskset", "-c", cpu] + cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        sys.exit(f"{impl} failed ({p.returncode}): {p.stderr[-2000:]}")
    written = [os.path.join(out, n) for n in os.listdir(out) if n.endswith(".npy")]
    row = {"impl": impl, "set": name, "images": len(files), "wall": wall,
           "user": r1.ru_utime - r0.ru_utime, "sys": r1.ru_stime - r0.ru_stime, "load1": la,
           "files_out": len(written), "bytes_out": sum(os.path.getsize(w) for w in written)}
    if impl == "pil+torchvision":
        row.update(json.loads(p.stdout.strip().splitlines()[-1]))
    shutil.rmtree(out, ignore_errors=True)
    return row


lists = {name: images(d) for name, d in sets}
for name, files in lists.items():
    if not files:
        sys.exit(f"no images under {dict(sets)[name]}")
for r in range(repeats):
    for name, files in lists.items():
        order = impls[r % len(impls):] + impls[:r % len(impls)]
        rows = [run(impl, name, files, os.path.join(outroot, impl)) for impl in order]
        for row in rows:
            row["repeat"] = r
            print(json.dumps(row), flush=True)
        if len({(x["files_out"], x["bytes_out"]) for x in rows}) != 1:
            sys.exit(f"outputs differ in number or size: {rows}")
        print(f"repeat {r + 1}/{repeats} {name}: " + ", ".join(
            f"{x['impl']} {x['images'] / x['wall']:.0f}/s (load {x['load1']:.2f})" for x in rows), file=sys.stderr)
