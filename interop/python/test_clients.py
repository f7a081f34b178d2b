"""redis-py against flaked daemons, with redis-py's default options.

Run by the Go harness (interop/python_test.go) with Debian's python3-redis
under /usr/bin/python3. It reads one URL per daemon flavour (plain TCP,
password, TLS) and the CA file from the environment, and asks the harness
to restart a daemon with a POST to FLAKED_CONTROL/restart/<flavour>.
IDs are compared as decimal strings, never as floats.
"""

import os
import unittest
import urllib.request

import redis

FLAVOURS = ("plain", "auth", "tls")


def connect(flavour):
    """A client given only the address, password or TLS CA: the defaults."""
    url = os.environ["FLAKED_%s_URL" % flavour.upper()]
    if flavour == "tls":
        return redis.Redis.from_url(url, ssl_ca_certs=os.environ["FLAKED_TLS_CA"])
    return redis.Redis.from_url(url)


def restart(flavour):
    req = urllib.request.Request(os.environ["FLAKED_CONTROL"] + "/restart/" + flavour, method="POST")
    with urllib.request.urlopen(req, timeout=60) as resp:
        resp.read()


class Checks:
    """The checks, run once per flavour by the classes made below."""

    flavour = None

    def setUp(self):
        self.r = connect(self.flavour)
        info = self.r.info("flaked")
        self.seq_bits = int(info["layout"]["seq"])
        self.machine_bits = int(info["layout"]["machine"])
        self.machines = {int(m) for m in str(info["machine_ids"]).split(",")}

    def tearDown(self):
        self.r.close()

    def check_exact(self, id_text):
        """The ID's parts from PARSE put together again give the same
        decimal text, under one of the daemon's machine IDs."""
        self.assertRegex(id_text, r"^[1-9][0-9]*$")
        _, tick, seq, machine, mode = self.r.execute_command("PARSE", id_text)
        self.assertEqual(mode, b"flake")
        self.assertIn(machine, self.machines)
        whole = (tick << (self.seq_bits + self.machine_bits)) | (seq << self.machine_bits) | machine
        self.assertEqual(str(whole), id_text)
        self.assertLess(int(id_text), 1 << 63)

    def test_connect(self):
        self.assertTrue(self.r.ping())

    def test_nextid_exact(self):
        got = self.r.execute_command("NEXTID")
        self.assertIs(type(got), int)  # an integer reply, never a float
        self.check_exact(str(got))

    def test_nextid_string(self):
        got = self.r.execute_command("NEXTID", "STRING")
        self.assertIsInstance(got, bytes)
        self.check_exact(got.decode())

    def test_nextids(self):
        ids = self.r.execute_command("NEXTIDS", 100)
        self.assertEqual(len(ids), 100)
        self.assertTrue(all(type(i) is int for i in ids))
        self.assertEqual(ids, sorted(set(ids)), "strictly increasing")
        self.check_exact(str(ids[0]))
        self.check_exact(str(ids[-1]))

    def test_info(self):
        info = self.r.info()
        self.assertEqual(info["mode"], "flake")
        self.assertEqual(info["ready"], 1)

    def test_pipeline(self):
        p = self.r.pipeline(transaction=False)
        p.execute_command("NEXTID")
        p.execute_command("NEXTIDS", 3)
        p.ping()
        one, three, pong = p.execute()
        self.assertEqual(len(three), 3)
        self.assertLess(one, three[0])
        self.assertTrue(pong)

    def test_transaction(self):
        # redis-py's default pipeline() is a transaction: MULTI ... EXEC.
        with self.r.pipeline() as p:
            p.execute_command("NEXTID")
            p.execute_command("NEXTIDS", 2)
            one, two = p.execute()
        self.assertLess(one, two[0])
        self.check_exact(str(one))

    def test_reconnect_after_restart(self):
        before = self.r.execute_command("NEXTID")
        restart(self.flavour)
        # redis-py's pool checks a pooled connection before use: one the
        # server closed reads as ready, so it is dropped and dialled anew,
        # and the first command after the restart succeeds.
        after = self.r.execute_command("NEXTID")
        self.assertGreater(after, before)
        self.check_exact(str(after))


for _flavour in FLAVOURS:
    _name = "Test_" + _flavour
    globals()[_name] = type(_name, (Checks, unittest.TestCase), {"flavour": _flavour})


if __name__ == "__main__":
    unittest.main(verbosity=2)
