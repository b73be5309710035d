"""The zero-copy batch reader against numpy.load, on archives numpy itself wrote and ones shaped as
the daemon writes them."""
import io
import os
import tempfile
import unittest
import zipfile

import numpy as np

from epochfs._npz import _ends_archive, load_npz, map_or_read, read_file, read_into


class LoadNPZ(unittest.TestCase):
    def check(self, raw, want):
        got = load_npz(memoryview(bytearray(raw)))
        self.assertEqual(sorted(got), sorted(want))
        for k, v in want.items():
            self.assertEqual(got[k].dtype, v.dtype, k)
            np.testing.assert_array_equal(got[k], v, k)

    def test_stored_archive_numpy_wrote(self):
        want = {"x": np.arange(2 * 3 * 4 * 3, dtype=np.uint8).reshape(2, 3, 4, 3),
                "y": np.array([3, -1], dtype=np.int64),
                "paths": np.array(["a/b.jpg", "é/c d.jpg"]),
                "f": np.linspace(0, 1, 7, dtype=np.float32)}
        b = io.BytesIO()
        np.savez(b, **want)
        self.check(b.getvalue(), want)

    def test_arrays_are_views_of_the_buffer(self):
        b = io.BytesIO()
        np.savez(b, x=np.zeros(1000, dtype=np.uint8))
        buf = bytearray(b.getvalue())
        x = load_npz(memoryview(buf))["x"]
        self.assertTrue(x.flags.writeable)
        i = bytes(buf).index(b"\x00" * 1000)
        buf[i + 10] = 7
        self.assertEqual(x[10], 7)

    def test_compressed_archive_falls_back_to_numpy(self):
        want = {"x": np.arange(100, dtype=np.int64)}
        b = io.BytesIO()
        np.savez_compressed(b, **want)
        self.check(b.getvalue(), want)

    def test_archive_with_a_comment_falls_back(self):
        want = {"y": np.arange(5, dtype=np.int64)}
        b = io.BytesIO()
        np.savez(b, **want)
        with zipfile.ZipFile(b, "a") as z:
            z.comment = b"hello"
        self.check(b.getvalue(), want)

    def test_garbage_is_an_error(self):
        with self.assertRaises(Exception):
            load_npz(memoryview(bytearray(b"not a zip file at all, not even close")))


class ReadFile(unittest.TestCase):
    def test_reads_whole_files_of_any_size_whatever_the_hint(self):
        with tempfile.TemporaryDirectory() as d:
            for size in (0, 1, 65535, 65536, 65537, 3 << 20):
                p = os.path.join(d, str(size))
                data = os.urandom(size)
                with open(p, "wb") as f:
                    f.write(data)
                for hint in (1, 1 << 16, size, 1 << 22):
                    self.assertEqual(bytes(read_file(p, hint)), data, (size, hint))

    def test_a_reused_buffer_grows_while_views_of_it_remain(self):
        # Batches keeps the last batch's views while it reads the next into the same buffer.
        with tempfile.TemporaryDirectory() as d:
            buf = bytearray(0)
            views = []
            for size in (10, 70000, 5, 3 << 20, 100):
                p = os.path.join(d, str(size))
                data = os.urandom(size)
                with open(p, "wb") as f:
                    f.write(data)
                mv, buf = read_into(p, buf)
                self.assertEqual(bytes(mv), data, size)
                self.assertGreaterEqual(len(buf), size)
                views.append(mv)

class MapOrRead(unittest.TestCase):
    def test_an_archive_is_mapped_and_anything_else_read(self):
        with tempfile.TemporaryDirectory() as d:
            npz = os.path.join(d, "b.npz")
            np.savez(npz, x=np.arange(100000, dtype=np.uint8), y=np.arange(7))
            other = os.path.join(d, "other")
            with open(other, "wb") as f:
                f.write(os.urandom(70000))
            empty = os.path.join(d, "empty")
            open(empty, "wb").close()
            for path, mapped in ((npz, True), (other, False), (empty, False)):
                with open(path, "rb") as f:
                    want = f.read()
                mv, buf, m = map_or_read(path, bytearray(16))
                self.assertEqual(bytes(mv), want, path)
                self.assertEqual(m is not None, mapped, path)
                if m is not None:
                    z = load_npz(mv)
                    self.assertEqual(z["y"].tolist(), list(range(7)))
                    del z
                    mv.release()
                    m.close()

    def test_a_size_that_is_not_the_archives_end_is_refused(self):
        # With two opens of a batch file at once the kernel may report the other's size.
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "b.npz")
            np.savez(p, x=np.zeros(5000, dtype=np.uint8))
            size = os.path.getsize(p)
            fd = os.open(p, os.O_RDONLY)
            try:
                self.assertTrue(_ends_archive(fd, size))
                for wrong in (0, 21, size - 1, size + 1, size + 4096):
                    self.assertFalse(_ends_archive(fd, wrong), wrong)
            finally:
                os.close(fd)


if __name__ == "__main__":
    unittest.main()
