"""Tests of bench/compare --auth/--tls: the servers' YAML, the copy of Cassandra's scripts, the stress arguments,
the certificates (when openssl is installed), the stdlib CQL login against fake servers, the argument checks and
the report's section. No binary, server or Cassandra needed.

    python3 -m unittest discover -s bench/shoal_bench -t bench -p "test_*.py"
"""

import argparse
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import unittest
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bench/, as bench/compare does

from shoal_bench import cli, compare  # noqa: E402
from shoal_bench.security import Security, cql_login, make_certs  # noqa: E402
from shoal_bench.util import CASS_REF, Fail  # noqa: E402

TEMPLATE = os.path.join(CASS_REF, "cassandra.yaml.template")


class YamlTest(unittest.TestCase):
    def test_shoal_yaml_lines(self):
        both = Security(True, True)
        both.keystore = "/x/node.pem"
        self.assertEqual(both.shoal_yaml(), "authenticator: PasswordAuthenticator\nauthorizer: CassandraAuthorizer\n"
                         "client_encryption_options:\n  enabled: true\n  optional: false\n  keystore: /x/node.pem\n"
                         "  require_client_auth: false\n")
        self.assertEqual(Security(True, False).shoal_yaml().count("\n"), 2)
        self.assertNotIn("authenticator", Security(False, True).shoal_yaml())
        self.assertEqual(Security(False, False).shoal_yaml(), "")
        self.assertFalse(Security(False, False))
        self.assertEqual((both.label, both.name), ("auth+TLS", "auth-tls"))
        self.assertEqual((Security(False, True).label, Security(True, False).name), ("TLS", "auth"))

    def test_cassandra_yaml_from_the_template(self):
        with open(TEMPLATE) as f:
            template = f.read()
        sec = Security(True, True)
        sec.keystore = "/x/node.pem"
        text = sec.cassandra_yaml(template)
        lines = text.splitlines()
        self.assertIn("authenticator: PasswordAuthenticator", lines)
        self.assertIn("authorizer: CassandraAuthorizer", lines)
        self.assertNotIn("authenticator: AllowAllAuthenticator", lines)
        tail = lines[lines.index("client_encryption_options:"):]
        self.assertEqual(tail, ["client_encryption_options:", "  enabled: true", "  optional: false",
                                "  keystore: /x/node.pem", "  require_client_auth: false", "  ssl_context_factory:",
                                "    class_name: org.apache.cassandra.security.PEMBasedSslContextFactory"])
        # Everything else is the template's, line for line.
        self.assertEqual(len(lines), len(template.splitlines()) + 8)  # a comment and 7 lines
        self.assertEqual(Security(False, False).cassandra_yaml(template), template.rstrip("\n") + "\n")
        tls_only = Security(False, True)
        tls_only.keystore = "k.pem"
        self.assertIn("authenticator: AllowAllAuthenticator", tls_only.cassandra_yaml(template).splitlines())

    def test_a_changed_template_is_refused(self):
        with self.assertRaisesRegex(Fail, "no line `authenticator: AllowAllAuthenticator`"):
            Security(True, False).cassandra_yaml("cluster_name: x\nauthorizer: AllowAllAuthorizer\n")
        with self.assertRaisesRegex(Fail, "already sets client_encryption_options"):
            Security(False, True).cassandra_yaml("client_encryption_options:\n  enabled: false\n")

    def test_cassandra_ref_copies_the_scripts_beside_the_changed_template(self):
        with tempfile.TemporaryDirectory() as d:
            sec = Security(True, False)
            ref = sec.cassandra_ref(CASS_REF, os.path.join(d, "ref"))
            self.assertEqual(sorted(os.listdir(ref)),
                             ["cassandra.yaml.template", "jvm17.options", "logback.xml", "start.sh", "stop.sh"])
            self.assertTrue(os.access(os.path.join(ref, "start.sh"), os.X_OK))
            with open(os.path.join(ref, "cassandra.yaml.template")) as f:
                self.assertIn("authenticator: PasswordAuthenticator\n", f.read())
            with self.assertRaisesRegex(Fail, "no .*start.sh"):
                sec.cassandra_ref(d, os.path.join(d, "ref2"))

    def test_stress_words(self):
        sec = Security(True, True)
        sec.ca = "/x/ca.pem"
        self.assertEqual(sec.mode_words(), ["user=cassandra", "password=cassandra"])
        self.assertEqual(sec.transport_words(), ["-transport", "truststore=/x/ca.pem"])
        self.assertEqual((Security(False, True).mode_words(), Security(True, False).transport_words()), ([], []))
        self.assertEqual(compare.shown_arg("truststore=" + os.path.expanduser("~/x/ca.pem")), "truststore=$HOME/x/ca.pem")
        self.assertEqual(compare.shown_arg("user=cassandra"), "user=cassandra")


# ---------------------------------------------------------------------------------------------
# A fake CQL server: READY, or AUTHENTICATE then AUTH_SUCCESS for the right password (ERROR otherwise)

def _recv(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise OSError("closed")
        data += chunk
    return data


def _frame(opcode, body):
    return struct.pack(">BBhBi", 0x84, 0, 0, opcode, len(body)) + body


def _serve(listener, password, context=None):
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        try:
            if context:
                conn = context.wrap_socket(conn, server_side=True)
            with conn:
                _, _, _, _, n = struct.unpack(">BBhBi", _recv(conn, 9))
                _recv(conn, n)
                if password is None:
                    conn.sendall(_frame(0x02, b""))
                    continue
                name = b"org.apache.cassandra.auth.PasswordAuthenticator"
                conn.sendall(_frame(0x03, struct.pack(">H", len(name)) + name))
                _, _, _, _, n = struct.unpack(">BBhBi", _recv(conn, 9))
                token = _recv(conn, n)[4:]
                if token == b"\0cassandra\0" + password.encode():
                    conn.sendall(_frame(0x10, struct.pack(">i", -1)))
                else:
                    msg = b"Provided username cassandra and/or password are incorrect"
                    conn.sendall(_frame(0x00, struct.pack(">i", 0x100) + struct.pack(">H", len(msg)) + msg))
        except (OSError, ssl.SSLError):
            pass


def fake_server(password, context=None):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    threading.Thread(target=_serve, args=(listener, password, context), daemon=True).start()
    return listener, listener.getsockname()[1]


class LoginTest(unittest.TestCase):
    def test_plain_login_and_its_failures(self):
        listener, port = fake_server("cassandra")
        with listener:
            self.assertIsNone(cql_login("127.0.0.1", port, "cassandra", "cassandra"))
            self.assertIn("error 0x0100: Provided username", cql_login("127.0.0.1", port, "cassandra", "nope"))
            self.assertEqual(cql_login("127.0.0.1", port, None, ""), "the server asks for a login")
            sec = Security(True, False)
            self.assertGreaterEqual(sec.wait_login("127.0.0.1", port, 5), 0)
        listener, port = fake_server(None)
        with listener:
            self.assertIsNone(cql_login("127.0.0.1", port, None, ""))
            self.assertEqual(cql_login("127.0.0.1", port, "cassandra", "cassandra"), "the server asked for no login")
            with self.assertRaisesRegex(Fail, "no auth login on .* within 1s: the server asked for no login"):
                Security(True, False).wait_login("127.0.0.1", port, 1)
            with self.assertRaisesRegex(Fail, "exited before a login worked"):
                Security(True, False).wait_login("127.0.0.1", port, 5, alive=lambda: False)
        with socket.socket() as unused:
            unused.bind(("127.0.0.1", 0))
            closed = unused.getsockname()[1]
        self.assertIn("ConnectionRefusedError", cql_login("127.0.0.1", closed, None, ""))

    @unittest.skipUnless(shutil.which("openssl"), "needs the openssl command")
    def test_certificates_and_a_tls_login(self):
        with tempfile.TemporaryDirectory() as d:
            ca, keystore = make_certs(os.path.join(d, "tls"))
            with open(keystore) as f:
                text = f.read()
            self.assertTrue(text.startswith("-----BEGIN PRIVATE KEY-----"), text[:40])  # PKCS#8, unencrypted
            self.assertIn("-----BEGIN CERTIFICATE-----", text)
            self.assertEqual(os.stat(keystore).st_mode & 0o777, 0o600)
            verify = subprocess.run(["openssl", "verify", "-CAfile", ca, os.path.join(d, "tls", "node-cert.pem")],
                                    capture_output=True, text=True)
            self.assertEqual(verify.returncode, 0, verify.stdout + verify.stderr)
            san = subprocess.run(["openssl", "x509", "-noout", "-ext", "subjectAltName", "-in",
                                  os.path.join(d, "tls", "node-cert.pem")], capture_output=True, text=True).stdout
            self.assertIn("IP Address:127.0.0.1", san)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(keystore)
            listener, port = fake_server("cassandra", context)
            with listener:
                self.assertIsNone(cql_login("127.0.0.1", port, "cassandra", "cassandra", cafile=ca))
                sec = Security(True, True)
                sec.prepare(os.path.join(d, "other"))  # another CA: the chain does not verify
                self.assertIn("CERTIFICATE_VERIFY_FAILED", cql_login("127.0.0.1", port, None, "", cafile=sec.ca))


class ArgsTest(unittest.TestCase):
    def args(self, **kw):
        base = dict(auth=False, tls=False, steadiness=False, durability=False, rf3=False, rf3_only=False,
                    client="simplenative")
        base.update(kw)
        return argparse.Namespace(**base)

    def test_combinations(self):
        self.assertIsNone(cli.security_args_problem(self.args()))
        self.assertIsNone(cli.security_args_problem(self.args(auth=True, tls=True)))
        self.assertIsNone(cli.security_args_problem(self.args(auth=True, client="driver")))
        self.assertIn("RF=1 only", cli.security_args_problem(self.args(tls=True, rf3=True)))
        self.assertIn("RF=1 only", cli.security_args_problem(self.args(auth=True, rf3_only=True)))
        self.assertIn("not --steadiness", cli.security_args_problem(self.args(auth=True, steadiness=True)))
        self.assertIn("--client simplenative", cli.security_args_problem(self.args(tls=True, client="driver")))

    def test_the_command_line_refuses_them_with_exit_2(self):
        for argv in (["--tls", "--rf3"], ["--auth", "--durability"], ["--tls", "--client", "driver"]):
            with mock.patch.object(sys, "argv", ["bench/compare"] + argv), \
                    mock.patch("sys.stderr", new_callable=lambda: open(os.devnull, "w")):
                with self.assertRaises(SystemExit) as e:
                    cli.run()
                self.assertEqual(e.exception.code, 2, argv)


class ReportTest(unittest.TestCase):
    def bench(self):
        b = compare.Bench(argparse.Namespace(runs=1, threads=128, max_threads="", client="simplenative", fixed_s=10),
                          "/tmp", Security(True, True))
        b.started = "2026-11-27 08:00 UTC"
        for sc, system, cpu, ops in (("rf1", "cassandra", 60.0, 30000), ("rf1", "shoal", 5.0, 180000),
                                     ("rf1-auth-tls", "cassandra", 75.0, 25000), ("rf1-auth-tls", "shoal", 7.0, 150000)):
            b.rows.append(dict(scenario=sc, system=system, workload="write", run=1, ops_s=ops, cpu_us=cpu,
                               client_cpu_us=2.0, p99=3.0, p50=1.0, p95=2.0, p999=4.0, rss_mib=100.0))
        return b

    def test_the_cost_per_write_against_the_plain_run(self):
        b = self.bench()
        self.assertEqual(compare.security_cost_lines(b), [
            "- Server CPU-us per write, plain -> auth+TLS: Cassandra 60.0 -> 75.0 (+15.0, +25%); "
            "Shoal 5.0 -> 7.0 (+2.0, +40%).",
            "  Shoal/Cassandra: 0.09x with auth+TLS on both (Cassandra/Shoal = 10.7), 0.08x plain."])
        for sc, system, cpu in (("rf1", "shoal", 3.0), ("rf1-auth-tls", "shoal", 4.0)):
            b.rows.append(dict(scenario=sc, system=system, workload="fixed", run=1, ops_s=1000, cpu_us=cpu,
                               client_cpu_us=2.0, p99=3.0, p50=1.0, p95=2.0, p999=4.0, rss_mib=100.0))
        b.fixed_rate["rf1"] = b.fixed_rate["rf1-auth-tls"] = (1000, "cassandra")
        self.assertEqual(compare.security_cost_lines(b)[2],
                         "- Server CPU-us per write at the fixed rate (1,000/s), plain -> auth+TLS: Shoal 3.0 -> 4.0 "
                         "(+1.0, +33%).")
        table = compare.security_table(b)
        self.assertIn("| write | Shoal | 180,000 | 150,000 | -17% | 5.0 | 7.0 | **+2.0** (+40%) | 2.0 -> 2.0 | "
                      "3.00 -> 3.00 |", table)
        self.assertIn("RF1-AUTH-TLS | write | **Shoal/Cassandra**", compare.summary_table(b))
        section = "\n".join(compare.security_section(b, ["bench/compare", "--quick", "--auth", "--tls"]))
        self.assertTrue(section.startswith(compare.SECURITY_HEADING))
        self.assertIn("by `bench/compare --quick --auth --tls` on ", section)
        self.assertIn("class_name: org.apache.cassandra.security.PEMBasedSslContextFactory", section)
        self.assertIn("the same write, mixed and fixed-rate workloads (1 run each, the fixed-rate ones at the plain "
                      "runs' rate)", section)
        self.assertNotIn("Negotiated", section)
        b.tls_sessions = {"shoal": "TLSv1_3 TLS13_AES_256_GCM_SHA384"}
        section = "\n".join(compare.security_section(b, ["bench/compare", "--auth", "--tls"]))
        self.assertIn("- Negotiated (as `shoal stress` reported it): Shoal TLSv1_3 TLS13_AES_256_GCM_SHA384.", section)
        self.assertEqual([compare._signed(x) for x in (1.25, -0.04, -0.3)], ["+1.2", "+0.0", "-0.3"])
        self.assertEqual([compare._pct(x, 100) for x in (125, 99.7, 50)], ["+25%", "+0%", "-50%"])

    def test_a_plain_run_keeps_the_last_measured_section(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "RESULTS.md")
            self.assertEqual(compare.carried_section(path, compare.SECURITY_HEADING), [])
            with open(path, "w") as f:
                f.write(f"# R\n\n## Results\n\nx\n\n{compare.SECURITY_HEADING}\n\nMeasured then.\n\n| t |\n\n"
                        "## Issue 5 targets\n\n- MET\n")
            kept = compare.carried_section(path, compare.SECURITY_HEADING)
            self.assertEqual(kept[:5], [compare.SECURITY_HEADING, "", "Measured then.", "", "| t |"])
            self.assertIn("(Kept from the previous RESULTS.md: this run did not measure it.)", kept)
            with open(path, "w") as f:
                f.write("\n".join(["# R", ""] + kept + ["## Issue 5 targets", ""]))
            self.assertEqual(compare.carried_section(path, compare.SECURITY_HEADING), kept, "kept once, not twice")


if __name__ == "__main__":
    unittest.main()
