#!/usr/bin/python3
"""The FUSE transport benchmark's report: from the results-*.jsonl of
test/bench/transport/run.sh, markdown tables of the training epochs, the
8-reader passes and the requests per sample, each setup against the local
copy measured in the same round (ratio taken per round), median (min-max).

    /usr/bin/python3 test/bench/transport/report.py WORK/results-*.jsonl
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from readpath_epochs import spread  # noqa: E402  median (min–max), as the other reports


def main():
    rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
    meta = next(r for r in rows if r.get("meta"))
    end = next((r for r in rows if r.get("meta_end")), {})
    setups = meta["setups"].split()
    train = {}
    for r in rows:
        if r.get("workload") == "train":
            train.setdefault(r["setup"], {})[r["rep"]] = r
    raw = {}
    for r in rows:
        t = r.get("tags", {})
        if t.get("workload") == "raw8":
            raw.setdefault((t["setup"], t["temp"]), {})[t["rep"]] = r
    ops = {r["setup"]: r for r in rows if r.get("workload") == "ops"}

    out = []
    out.append(f"Run {meta['start']}, commit {meta['commit']}, {meta['files']} JPEGs (test/datagen, ~110 KB), "
               f"{meta['reps']} rounds in {end.get('seconds', '?')} s; load (1/5/15 min) {meta['load_start']} at the "
               f"start, {end.get('load_end', '?')} at the end (the machine is shared).")
    if meta.get("note"):
        out.append(f"Left out: {meta['note']}.")
    out.append("")
    out.append("Command: `make bench-transport` (`bash test/bench/transport/run.sh`, as root). Every run drops the "
               "page cache first; every file is resident (epochs after the first). local = a copy on the local "
               "disk; epochfs = the mount, default config, passthrough, over `/dev/fuse`; epochfs-uring = the "
               "same over FUSE over io_uring; epochfs-before = the epochfs setup with the binary of "
               f"{meta.get('base', 'BASE')}; php = libfuse 3.18.2 `passthrough_hp` (passthrough), php-uring = "
               "the same with `-o io_uring`. Ratios are taken per round against the local run of that round; "
               "cells are median (min–max) over the rounds.")
    out.append("")
    out.append("**Training loop** (`test/bench/transport/train.py`: ImageFolder, RandomResizedCrop(128) + flip + "
               "ToTensor, DataLoader with 2 workers, a small CNN and an SGD step; one epoch):")
    out.append("")
    out.append("| setup | epoch s | × local | daemon CPU µs per sample |")
    out.append("|---|---|---|---|")
    local = train.get("local", {})
    for s in setups:
        runs = train.get(s, {})
        secs = [r["run"]["seconds"] for r in runs.values()]
        ratio = [runs[k]["run"]["seconds"] / local[k]["run"]["seconds"] for k in runs if k in local]
        cpu = [r["cpu_ticks"] / r["hz"] / r["run"]["samples"] * 1e6 for r in runs.values()] if s != "local" else []
        out.append(f"| {s} | {spread(secs)} | {spread(ratio)} | {spread(cpu, '%.0f')} |")
    out.append("")
    out.append("**8 readers**, every file opened, read whole and closed (`test/bench/readpath`), cold (after "
               "`drop_caches`) and warm (the next pass):")
    out.append("")
    out.append("| setup | pass | files/s | × local | daemon CPU µs per open |")
    out.append("|---|---|---|---|---|")
    for temp in ("cold", "warm"):
        base = raw.get(("local", temp), {})
        for s in setups:
            runs = raw.get((s, temp), {})
            fs = [r["files_s"] for r in runs.values()]
            ratio = [runs[k]["files_s"] / base[k]["files_s"] for k in runs if k in base]
            cpu = [r["cpu_ms_per_1000_opens"] for r in runs.values() if r.get("cpu_ms_per_1000_opens") is not None]
            out.append(f"| {s} | {temp} | {spread(fs, '%.0f')} | {spread(ratio)} | {spread(cpu, '%.0f')} |")
    if ops:
        out.append("")
        out.append("**Requests per sample** the kernel sent in one more (unmeasured) training epoch, by opcode "
                   "(the `fuse:fuse_request_send` tracepoint, filtered on the mount's connection):")
        out.append("")
        names = sorted({k for r in ops.values() for k in r["ops"]})
        out.append("| setup | total | " + " | ".join(n.replace("FUSE_", "") for n in names) + " |")
        out.append("|---|---|" + "---|" * len(names))
        for s in setups:
            if s not in ops:
                continue
            r = ops[s]
            n = r["samples"]
            cells = [f"{r['ops'].get(k, 0) / n:.2f}" for k in names]
            out.append(f"| {s} | {sum(r['ops'].values()) / n:.2f} | " + " | ".join(cells) + " |")
    sys_rows = [s for s in setups if ops.get(s, {}).get("syscalls")]
    if sys_rows:
        out.append("")
        out.append("**System calls of the daemon per sample** in that epoch (`perf stat -e "
                   "syscalls:sys_enter_*,context-switches -p PID`; `nanosleep` is the Go runtime's monitor, "
                   "`futex` its thread hand-offs; read and writev include those of `/dev/fuse`):")
        out.append("")
        cols = ["nanosleep", "futex", "read", "writev", "io_uring_enter", "context-switches"]
        out.append("| setup | " + " | ".join(cols) + " |")
        out.append("|---|" + "---|" * len(cols))
        for s in sys_rows:
            r = ops[s]
            n = r["samples"]
            out.append(f"| {s} | " + " | ".join(f"{r['syscalls'].get(c, 0) / n:.2f}" for c in cols) + " |")
    print("\n".join(out))


if __name__ == "__main__":
    main()
