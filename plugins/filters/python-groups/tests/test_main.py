"""The entry point's housekeeping."""

import os
import subprocess
import sys
import tempfile
import unittest

from groupfilter import __main__ as entry


class SweepTest(unittest.TestCase):
    def test_dirs_of_dead_processes_go_and_others_stay(self):
        with tempfile.TemporaryDirectory() as parent:
            dead = subprocess.Popen([sys.executable, "-c", "pass"])
            dead.wait()
            gone = os.path.join(parent, f"{entry.PRIVATE_PREFIX}{dead.pid}-abc")
            mine = os.path.join(parent, f"{entry.PRIVATE_PREFIX}{os.getpid()}-def")
            other = os.path.join(parent, "kmirror-something-else-1-x")
            odd = os.path.join(parent, f"{entry.PRIVATE_PREFIX}notapid")
            for d in (gone, mine, other, odd):
                os.mkdir(d)
            open(os.path.join(gone, "grpc.sock"), "w").close()
            entry.sweep_stale_dirs(parent)
            self.assertEqual(sorted(os.listdir(parent)), sorted(os.path.basename(d) for d in (mine, other, odd)))


if __name__ == "__main__":
    unittest.main()
