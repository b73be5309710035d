"""The path rule of the ctl files (docs/ctl.md, "Paths in ctl files"): a name that is not a plain
line (a newline or other control character, bytes that are not UTF-8, a leading '#' or '"', leading
or trailing white space) is written in double quotes with C escapes. The daemon's side is the Go
package ctlpath; the two are tested against each other."""
import os
import unicodedata

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
