"""A PyTorch Sampler that reads its order from epochfs (.epochfs/jobs/NAME/next), so that concurrent
jobs on a node share what they fetch from the PFS. Works with an unmodified torchvision ImageFolder:
    loader = DataLoader(ds, batch_size=256, sampler=EpochfsSampler(ds, "resnet50", 256, seed=7))

quote() and unquote() are the path rule of the ctl files (docs/ctl.md, "Paths in ctl files"): a name
that is not a plain line (a newline or other control character, bytes that are not UTF-8, a leading
'#' or '"', leading or trailing white space) is written in double quotes with C escapes."""
import os
import unicodedata
from torch.utils.data import Sampler

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", '"': '"', "\\": "\\"}
_QUOTE = {v: "\\" + k for k, v in _ESCAPES.items()}


def unquote(line):
    """The dataset path a line of next (or of a ctl file) names: the line itself, or, when it starts
    with '"', its escapes decoded. Bytes that are not UTF-8 come back as os.fsdecode gives them, so
    the path opens."""
    if not line.startswith('"'):
        return line
    if len(line) < 2 or not line.endswith('"'):
        raise ValueError(f"epochfs: bad quoted path {line!r}: no closing quote")
    body, out, i = line[1:-1], bytearray(), 0
    while i < len(body):
        c = body[i]
        if c == '"':
            raise ValueError(f"epochfs: bad quoted path {line!r}: unescaped quote")
        if c != "\\":
            out += c.encode("utf-8", "surrogateescape")
            i += 1
            continue
        e, digits = body[i + 1:i + 2], body[i + 1:i + 4]
        if len(digits) == 3 and digits[0] in "0123" and all(d in "01234567" for d in digits):
            out.append(int(digits, 8))
            i += 4
        elif e in _ESCAPES:
            out += _ESCAPES[e].encode()
            i += 2
        else:
            raise ValueError(f"epochfs: bad quoted path {line!r}: unknown escape \\{e}")
    if not out or 0 in out:
        raise ValueError(f"epochfs: bad quoted path {line!r}: empty or NUL")
    return os.fsdecode(bytes(out))


def quote(path):
    """path (str or bytes, dataset-relative) as one line of a ctl file: itself when it is a plain
    line, else quoted."""
    raw = os.fsencode(path)
    text = raw.decode("utf-8", "surrogateescape")

    def odd(ch):
        return "\udc80" <= ch <= "\udcff" or unicodedata.category(ch) == "Cc" or ch in "\u2028\u2029"

    if text and not (text[0] in '#"' or text[0].isspace() or text[-1].isspace() or any(odd(ch) for ch in text)):
        return text
    out = []
    for ch in text:
        if ch in _QUOTE:
            out.append(_QUOTE[ch])
        elif "\udc80" <= ch <= "\udcff":
            out.append("\\%03o" % (ord(ch) - 0xDC00))
        elif odd(ch):
            out.extend("\\%03o" % b for b in ch.encode())
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


class EpochfsSampler(Sampler):
    def __init__(self, dataset, job, batch_size=256, seed=0, sampler="ods"):
        root = mnt = os.path.abspath(dataset.root)
        while not os.path.isdir(os.path.join(mnt, ".epochfs")):  # find the mount root
            if mnt == os.path.dirname(mnt):
                raise ValueError(f"{root} is not inside an epochfs mount")
            mnt = os.path.dirname(mnt)
        self.dir = os.path.join(mnt, ".epochfs", "jobs", job)
        os.makedirs(self.dir, exist_ok=True)  # registers the job
        subset = os.path.relpath(root, mnt)
        subset = "all" if subset == "." else "./all" if subset == "all" else quote(subset)
        with open(os.path.join(self.dir, "config"), "w") as f:  # one document, applied at close
            f.write(f"batch_size={batch_size}\nseed={seed}\nsampler={sampler}\nsubset={subset}\n")
        self.index = {os.path.relpath(os.path.abspath(p), mnt): i for i, (p, _) in enumerate(dataset.samples)}

    def __len__(self):
        return len(self.index)

    def __iter__(self):  # one epoch: batches of paths until the 0-byte read that ends it
        while batch := open(os.path.join(self.dir, "next"), encoding="utf-8", newline="").read():
            yield from (self.index[p] for p in map(unquote, batch.split("\n")[:-1]) if p in self.index)
