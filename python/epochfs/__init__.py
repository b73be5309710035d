"""epochfs for PyTorch: read a dataset from an epochfs mount in the order its cache-aware jobs
choose. See python/README.md and docs/ctl.md."""
from ._mount import EpochfsError, mount_root
from ._paths import quote, unquote

__all__ = ["AugmentedFolder", "Batches", "DistributedSampler", "EpochfsError", "Sampler", "mount_root", "quote",
           "unquote"]


def __getattr__(name):  # torch is imported only by what needs it
    if name == "Sampler":
        from .sampler import Sampler
        return Sampler
    if name in ("Batches", "AugmentedFolder"):
        from . import batches
        return getattr(batches, name)
    if name == "DistributedSampler":
        from .distributed import DistributedSampler
        return DistributedSampler
    raise AttributeError(f"module 'epochfs' has no attribute {name!r}")
