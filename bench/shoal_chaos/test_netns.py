"""The nemesis' network faults on real namespaces: a partition and a bridge partition stop TCP between the
nodes they separate and only those, and healing restores them. Skipped (with the reason) where the harness
cannot run: not root, or no `ip netns` / nft."""

import os
import subprocess
import sys
import unittest

from shoal_chaos import netns

WHY = netns.available()

SERVER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 7777)); s.listen(16)
while True:
    c, _ = s.accept(); c.close()
"""
CONNECT = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], 7777), timeout=0.7).close(); print("yes")
except OSError:
    print("no")
"""


@unittest.skipIf(WHY, f"bench/chaos cannot run here: {WHY}")
class Partitions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.net = netns.Network(f"chaostest{os.getpid()}", 3)
        cls.servers = []
        try:
            cls.net.create()
            for i in (1, 2, 3):
                cls.servers.append(subprocess.Popen(
                    cls.net.exec_prefix(cls.net.node_ns(i)) + [sys.executable, "-c", SERVER, cls.net.address(i)],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        for p in cls.servers:
            p.kill()
            p.wait()
        cls.net.teardown()

    def reach(self, a, b):
        ns = self.net.client_ns if a == "cl" else self.net.node_ns(a)
        out = subprocess.run(self.net.exec_prefix(ns) + [sys.executable, "-c", CONNECT, self.net.address(b)],
                             capture_output=True, text=True, timeout=20).stdout.strip()
        return out == "yes"

    def matrix(self):
        return {(a, b): self.reach(a, b) for a in (1, 2, 3) for b in (1, 2, 3) if a != b}

    def wait_listening(self):
        for _ in range(50):
            if all(self.reach("cl", b) for b in (1, 2, 3)):
                return
        self.fail("the test servers do not listen")

    def test_partitions_cut_exactly_the_pairs_they_name_and_heal_restores(self):
        self.wait_listening()
        self.assertTrue(all(self.matrix().values()))
        self.net.partition([[1], [2, 3]])
        m = self.matrix()
        self.assertEqual({k for k, v in m.items() if not v}, {(1, 2), (2, 1), (1, 3), (3, 1)})
        # The client still reaches every node, the isolated one included.
        self.assertTrue(all(self.reach("cl", b) for b in (1, 2, 3)))
        self.net.heal()
        self.net.cut([(2, 3)])  # a bridge partition: 1 sees both, 2 and 3 do not see each other
        m = self.matrix()
        self.assertEqual({k for k, v in m.items() if not v}, {(2, 3), (3, 2)})
        self.net.heal()
        self.assertTrue(all(self.matrix().values()))

    def test_total_loss_cuts_a_node_and_healing_restores_it(self):
        self.wait_listening()
        self.net.set_loss(3, 100)
        self.assertFalse(self.reach(1, 3))
        self.assertFalse(self.reach("cl", 3))
        self.net.heal()
        self.assertTrue(self.reach(1, 3))


if __name__ == "__main__":
    unittest.main()
