"""Resumable jobs: a job's state (.epochfs/jobs/NAME/state) goes into the training checkpoint with the
model, and a new job, on any mount of the same files and with any number of ranks, continues the
epoch from it (its resume file; docs/sampling.md, "Resuming a job").

The state_dict of a sampler is {"epochfs_state": 1, "job": NAME, "state": TEXT, "unread": [PATH...]}:
TEXT is the daemon's state document, and unread the samples it counts as handed out that the training
loop never used (the rest of a batch being yielded, batches read ahead), which the resumed job hands
out again."""
import errno
import os
import time

from ._mount import EpochfsError, last_error
from ._paths import quote, unquote

VERSION = 1


def read_state(job, job_dir):
    """The job's state document."""
    with open(os.path.join(job_dir, "state"), encoding="utf-8", newline="") as f:
        text = f.read()
    if not text:
        raise EpochfsError(errno.EINVAL, f"epochfs: job {job}: it has no state (a cluster job's cannot be saved)")
    return text


def state_dict(job, text, unread):
    return {"epochfs_state": VERSION, "job": job, "state": text, "unread": list(unread)}


def check_of(sd):
    """The check of a state_dict's document (its last line's), after checking the dict's shape."""
    if not isinstance(sd, dict) or sd.get("epochfs_state") != VERSION or not isinstance(sd.get("state"), str) \
            or not isinstance(sd.get("unread", []), list):
        raise ValueError(f"epochfs: not an epochfs sampler state (version {VERSION}): {type(sd).__name__}")
    for line in reversed(sd["state"].splitlines()):
        if line.startswith("check "):
            return line[len("check "):]
    raise ValueError("epochfs: the sampler state's document has no check line: it is truncated")


def apply(mnt, job, job_dir, sd):
    """Writes the state (and its unread samples) to the job's resume file; the job must not have read."""
    check_of(sd)
    doc = sd["state"] + "".join(f"unread {quote(p)}\n" for p in sd.get("unread", []))
    try:
        with open(os.path.join(job_dir, "resume"), "w", encoding="utf-8", newline="") as f:
            f.write(doc)
    except OSError as e:
        if e.errno == errno.EINVAL:
            raise EpochfsError(e.errno, f"epochfs: job {job}: state refused: {last_error(mnt)}") from None
        raise


def wait_resumed(job, job_dir, sd, timeout):
    """Waits until the job resumed from sd (its status' resume is the state's check)."""
    want = check_of(sd)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(os.path.join(job_dir, "status"), encoding="utf-8") as f:
                st = dict(line.split("=", 1) for line in f.read().splitlines() if "=" in line)
        except FileNotFoundError:
            st = {}
        if st.get("resume") == want:
            return
        if time.monotonic() >= deadline:
            raise EpochfsError(errno.ETIMEDOUT, f"epochfs: job {job}: not resumed from the state after {timeout} s "
                                                "(the rank that registers the job loads it)")
        time.sleep(0.05)


def split(text):
    """A state document's checked part (through its check line) and the paths of its unread lines."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith("check "):
            body = "".join(lines[:i + 1])
            return body, [unquote(l[len("unread "):].rstrip("\n")) for l in lines[i + 1:] if l.startswith("unread ")]
    raise ValueError("epochfs: the job's state has no check line: it is truncated")


def joined(texts, unread):
    """One state document from the documents of a job's nodes (a cluster job's name, in their unread
    lines, the samples each node drew ahead) and the ranks' unread samples: the first document's checked
    part, with every unread sample in the dict's unread list."""
    body, first = split(texts[0])
    out = list(first)
    for t in texts[1:]:
        out += split(t)[1]
    return body, out + list(unread)


def merge(sds):
    """One state_dict from the state_dicts of the ranks of a job: the first one's document, every rank's
    unread samples. (Exact when the ranks took them together: a process group's state_dict does.)"""
    if isinstance(sds, dict):
        return sds
    sds = list(sds)
    if not sds:
        raise ValueError("epochfs: no sampler state to load")
    for sd in sds:
        check_of(sd)
    out = dict(sds[0])
    out["unread"] = [p for sd in sds for p in sd.get("unread", [])]
    return out
