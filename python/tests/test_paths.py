"""Unit tests of the ctl path rule; the cross-check with the daemon's Go implementation is
test/e2e/python_test.go (it passes a file of Go-quoted names in EPOCHFS_QUOTED)."""
import json
import os
import unittest

import epochfs


class PathRule(unittest.TestCase):
    def test_plain_names_stay_as_they_are(self):
        for name in ["a", "train/n01/img.JPEG", "ünïcødé ñame.dat", "x#y", "a b"]:
            self.assertEqual(epochfs.quote(name), name)
            self.assertEqual(epochfs.unquote(name), name)

    def test_names_that_are_not_lines_round_trip(self):
        for name in ["a\nb", "#hash", " lead", "trail ", '"quoted', "tab\there", "back\\slash\n",
                     os.fsdecode(b"latin1-\xe9"), "line\u2028sep", "bell\a"]:
            q = epochfs.quote(name)
            self.assertTrue(q.startswith('"') and q.endswith('"'), q)
            self.assertNotIn("\n", q)
            self.assertEqual(epochfs.unquote(q), name)

    def test_bad_quoting_is_an_error(self):
        for bad in ['"open', '"a"b"', '"\\q"', '""', '"\\000"']:
            with self.assertRaises(ValueError, msg=bad):
                epochfs.unquote(bad)

    def test_the_daemons_quoting_agrees(self):
        path = os.environ.get("EPOCHFS_QUOTED")
        if not path:
            self.skipTest("EPOCHFS_QUOTED not set (run through test/e2e)")
        n = 0
        with open(path, encoding="utf-8") as f:
            for line in f:
                case = json.loads(line)
                name = os.fsdecode(bytes.fromhex(case["name"]))
                self.assertEqual(epochfs.quote(name), case["quoted"], name)
                self.assertEqual(epochfs.unquote(case["quoted"]), name)
                n += 1
        self.assertGreater(n, 100)


if __name__ == "__main__":
    unittest.main()
