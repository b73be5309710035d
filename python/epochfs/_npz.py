"""Reading batch files without copying them: a batch is a stored (uncompressed) .npz, so every
member is a run of bytes inside the file. read_file reads the file in one system call into a fresh
buffer, map_or_read maps it where the mount serves it by passthrough, and load_npz returns NumPy
arrays that are views of that buffer (no zlib, no per-member copy). Anything that is not such an
archive is handed to numpy.load."""
import io
import mmap
import os
import struct

import numpy as np

_END = struct.Struct("<IHHHHIIH")  # end of central directory, 22 bytes
_CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")  # central directory header, 46 bytes
_LOCAL_NAMES = struct.Struct("<HH")  # name and extra lengths at offset 26 of a local header


def read_file(path, hint=1 << 20):
    """The whole file at path, as a memoryview of a new bytearray; hint: the size expected."""
    return read_into(path, bytearray(max(hint, 1 << 16)))[0]


def read_into(path, buf):
    """The whole file at path read into the bytearray buf, which grows if it is too small: reusing one
    buffer saves zeroing and faulting in fresh memory for every file. Returns (memoryview, buffer),
    the buffer being buf or its grown replacement."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return _read_fd(fd, buf)
    finally:
        os.close(fd)


def _read_fd(fd, buf):
    n = 0
    while True:
        if n == len(buf):
            # A new object: views of the caller's buffer (the last batch) may still exist.
            buf = buf + bytearray(max(len(buf), 1 << 16))
        k = os.preadv(fd, [memoryview(buf)[n:]], n)
        if k == 0:
            return memoryview(buf)[:n], buf
        n += k


def map_or_read(path, buf):
    """The whole file at path without a copy where the mount can: one open, the size of the batch that
    open took (lseek to the end), and a read-only shared mapping of it, which the kernel serves from
    the daemon's memory file by passthrough. The size is checked against the open's own bytes (the
    archive's end record must end there: with two opens of the file at once, the kernel may report
    the other's size), so the mapping never reaches past the file. Else (the mount has no
    passthrough, another open of the file is live, an empty file) as read_into. Returns (memoryview,
    buffer, mapping or None): close the mapping once no view of the memoryview is left, or leave it
    to the garbage collector."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        if _ends_archive(fd, size):
            try:
                m = mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
                return memoryview(m), buf, m
            except (OSError, ValueError):
                pass  # ENODEV: the open is served by the daemon; ValueError: fstat saw another size  # ENODEV: the open is served by the daemon; ValueError: fstat saw another size
        return (*_read_fd(fd, buf), None)
    finally:
        os.close(fd)


def _ends_archive(fd, size):
    """Whether the zip archive open at fd ends at size: its end record is the last bytes before it."""
    if size < _END.size:
        return False
    tail = os.pread(fd, _END.size, size - _END.size)
    if len(tail) != _END.size:
        return False
    sig, _, _, _, _, dir_size, dir_off, comment = _END.unpack(tail)
    return sig == 0x06054B50 and comment == 0 and dir_off + dir_size + _END.size == size


def load_npz(mv):
    """The arrays of the .npz in mv, by name (without .npy): views of mv when the archive is stored
    and its members are NumPy 1.0 arrays, else what numpy.load gives."""
    try:
        return _stored(mv)
    except (ValueError, struct.error, KeyError):
        with np.load(io.BytesIO(mv)) as z:
            return {k: z[k] for k in z.files}


def _stored(mv):
    if len(mv) < _END.size:
        raise ValueError("too short")
    sig, _, _, _, count, _, off, comment = _END.unpack_from(mv, len(mv) - _END.size)
    if sig != 0x06054B50 or comment != 0:
        raise ValueError("no end record")
    out = {}
    p = off
    for _ in range(count):
        (sig, _, _, _, method, _, _, _, csize, usize, nlen, xlen, clen, _, _, _, local) = _CENTRAL.unpack_from(mv, p)
        if sig != 0x02014B50 or method != 0 or csize != usize:
            raise ValueError("not a stored member")
        name = bytes(mv[p + 46:p + 46 + nlen]).decode("utf-8")
        p += 46 + nlen + xlen + clen
        lnlen, lxlen = _LOCAL_NAMES.unpack_from(mv, local + 26)
        out[name[:-4] if name.endswith(".npy") else name] = _npy(mv, local + 30 + lnlen + lxlen, usize)
    return out


def _npy(mv, start, size):
    if bytes(mv[start:start + 8]) != b"\x93NUMPY\x01\x00":
        raise ValueError("not a NumPy 1.0 array")
    (hl,) = struct.unpack_from("<H", mv, start + 8)
    # read_array_header_1_0 reads the header's length and the header that follow magic and version.
    shape, fortran, dtype = np.lib.format.read_array_header_1_0(io.BytesIO(bytes(mv[start + 8:start + 10 + hl])))
    if fortran:
        raise ValueError("Fortran order")
    count = 1
    for d in shape:
        count *= d
    data = start + 10 + hl
    if count * dtype.itemsize != size - 10 - hl:
        raise ValueError("size does not match the header")
    return np.frombuffer(mv, dtype=dtype, count=count, offset=data).reshape(shape)

