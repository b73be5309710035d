"""Unit tests of DistributedSampler's own arithmetic and arguments; its behaviour through a mount with
torch.distributed ranks is test/e2e/ddp_test.go."""
import os
import tempfile
import unittest

import torch.utils.data

import epochfs
from epochfs.distributed import samples_per_rank, subset_lines


class Counts(unittest.TestCase):
    def test_samples_per_rank_is_torchs(self):
        for n in range(1, 40):
            for w in range(1, 10):
                for drop_last in (False, True):
                    ds = list(range(n))
                    if drop_last and n < w:
                        continue
                    ref = torch.utils.data.DistributedSampler(ds, num_replicas=w, rank=0, drop_last=drop_last)
                    self.assertEqual(samples_per_rank(n, w, drop_last), len(ref), (n, w, drop_last))

    def test_subset_lines_name_the_sample_directories(self):
        self.assertEqual(subset_lines(["a/x", "a/y", "b/c/z"]), ["a", "b/c"])
        self.assertEqual(subset_lines(["a/x", "a/b/y"]), ["a"])
        self.assertEqual(subset_lines(["x", "a/y"]), ["all"])
        self.assertEqual(subset_lines(["all/x", "#c/y"]), ['"#c"', '"all"'])
        self.assertEqual(subset_lines(["ab/x", "a/y"]), ["a", "ab"])


class Arguments(unittest.TestCase):
    def test_torchs_argument_checks(self):
        ds = type("DS", (), {"root": "/", "samples": []})()
        with self.assertRaisesRegex(ValueError, "Invalid rank 2"):
            epochfs.DistributedSampler(ds, num_replicas=2, rank=2, job="j")
        with self.assertRaisesRegex(ValueError, "needs job=NAME"):
            epochfs.DistributedSampler(ds, num_replicas=2, rank=0)
        with self.assertRaises((RuntimeError, ValueError)):  # no process group: torch says so too
            epochfs.DistributedSampler(ds, job="j")

    def test_outside_a_mount_is_an_error(self):
        with tempfile.TemporaryDirectory() as d:
            ds = type("DS", (), {"root": d, "samples": [(os.path.join(d, "a"), 0)]})()
            with self.assertRaisesRegex(ValueError, "not inside an epochfs mount"):
                epochfs.DistributedSampler(ds, num_replicas=1, rank=0, job="j")

    def test_it_is_a_torch_sampler(self):
        self.assertTrue(issubclass(epochfs.DistributedSampler, torch.utils.data.Sampler))
        for m in ("set_epoch", "__len__", "__iter__"):
            self.assertTrue(hasattr(epochfs.DistributedSampler, m))


if __name__ == "__main__":
    unittest.main()
