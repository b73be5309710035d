"""Finding the mount a path lies in, and a job's directory under .epochfs/jobs/."""
import errno
import os

from ._paths import quote


class EpochfsError(OSError):
    """A ctl file refused a write; the message is the daemon's reason (.epochfs/errors)."""


def mount_root(path):
    """The root of the epochfs mount that holds path (a directory with .epochfs/ in it)."""
    start = mnt = os.path.abspath(path)
    while not os.path.isdir(os.path.join(mnt, ".epochfs")):
        if mnt == os.path.dirname(mnt):
            raise ValueError(f"epochfs: {start} is not inside an epochfs mount")
        mnt = os.path.dirname(mnt)
    return mnt


def last_error(mnt):
    """The daemon's last ctl error line, without its time stamp ('' if none)."""
    try:
        with open(os.path.join(mnt, ".epochfs", "errors"), encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    return lines[-1].split(" ", 1)[-1] if lines else ""


def per_rank(job_dir, default):
    """Samples per rank in the job's current epoch (its status' per_rank): the count at registration,
    less what a refresh removed once an epoch begun after it has started. default when unreadable."""
    try:
        with open(os.path.join(job_dir, "status"), encoding="utf-8", errors="replace") as f:
            for line in f.read().splitlines():
                if line.startswith("per_rank="):
                    return int(line.split("=", 1)[1])
    except (OSError, ValueError):
        pass
    return default


def subset_of(root, mnt):
    """The job config's subset line for a dataset root inside the mount."""
    rel = os.path.relpath(root, mnt)
    return "all" if rel == "." else '"all"' if rel == "all" else quote(rel)


def register(mnt, job, config):
    """Registers job (mkdir; an existing job of the same owner is reused) and writes its config
    (a dict of key: value, written as one document). Returns the job's directory."""
    d = os.path.join(mnt, ".epochfs", "jobs", job)
    try:
        os.mkdir(d)
    except FileExistsError:
        pass
    text = "".join(f"{k}={v}\n" for k, v in config.items())
    try:
        with open(os.path.join(d, "config"), "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        if e.errno == errno.EINVAL:
            raise EpochfsError(e.errno, f"epochfs: job {job}: config refused: {last_error(mnt)}") from None
        raise
    return d
