"""A PyTorch Sampler that reads its order from epochfs (.epochfs/jobs/NAME/next), so that concurrent
jobs on a node share what they fetch from the PFS. Works with an unmodified torchvision ImageFolder:
    loader = DataLoader(ds, batch_size=256, sampler=EpochfsSampler(ds, "resnet50", 256, seed=7))

It is the epochfs package's Sampler (python/ in the repository: `pip install ./python`, or
PYTHONPATH=python from the source tree); quote() and unquote() are the ctl files' path rule."""
from epochfs import Sampler as EpochfsSampler, quote, unquote  # noqa: F401
