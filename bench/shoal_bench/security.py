"""`bench/compare --auth` and `--tls`: both servers with the same security settings, and what the client
needs to get through them.

- --auth: PasswordAuthenticator and CassandraAuthorizer on both (the default superuser cassandra/cassandra,
  which `shoal stress` logs in as: `-mode ... user=cassandra password=cassandra`).
- --tls: client encryption only (the native port; internode is one node here), TLS-only (`optional: false`),
  no client certificates; one throw-away CA and one node keystore made with the `openssl` command line (EC
  P-256, the key unencrypted PKCS#8 as Cassandra's PEMBasedSslContextFactory reads it), used by both servers;
  `shoal stress` verifies the chain against the CA (`-transport truststore=ca.pem`), not the host name.

`Security` turns the flags into the lines of each server's YAML (`shoal_yaml`, `cassandra_yaml`), Cassandra's
script directory with that YAML (`cassandra_ref`: start.sh reads its template from its own directory, so a copy of
the scripts beside a changed template starts Cassandra with it, scripts/cassandra untouched), the stress
arguments (`mode_words`, `transport_words`) and the readiness check (`wait_login`: Cassandra creates its default
superuser about 10 s after it opens the port, superuser_setup_delay_ms). `cql_login` is a stdlib CQL client just
big enough for that: STARTUP, and SASL PLAIN when the server asks, through TLS when given a CA."""

import os
import shutil
import socket
import ssl
import struct
import time

from . import cassconf
from .util import Fail, sh

USER, PASSWORD = "cassandra", "cassandra"  # both systems' default superuser
CASSANDRA_SCRIPTS = ("start.sh", "stop.sh", "logback.xml", "jvm17.options")
CASSANDRA_AUTH = {"authenticator: AllowAllAuthenticator": "authenticator: PasswordAuthenticator",
                  "authorizer: AllowAllAuthorizer": "authorizer: CassandraAuthorizer"}


class Security:
    """The --auth/--tls settings of one run: `prepare(dir)` makes the certificates (with --tls) in `dir`."""

    def __init__(self, auth, tls):
        self.auth, self.tls = auth, tls
        self.ca = self.keystore = None

    def __bool__(self):
        return self.auth or self.tls

    @property
    def label(self):
        """`auth+TLS`, `auth` or `TLS`."""
        return "+".join(n for n, on in (("auth", self.auth), ("TLS", self.tls)) if on)

    @property
    def name(self):
        """The variant's scenario suffix: `auth-tls`, `auth` or `tls`."""
        return self.label.lower().replace("+", "-")

    def prepare(self, directory):
        if self.tls:
            self.ca, self.keystore = make_certs(directory)

    def shoal_yaml(self):
        """The lines to add to shoal.yaml."""
        lines = []
        if self.auth:
            lines += ["authenticator: PasswordAuthenticator", "authorizer: CassandraAuthorizer"]
        if self.tls:
            lines += ["client_encryption_options:", "  enabled: true", "  optional: false",
                      f"  keystore: {self.keystore}", "  require_client_auth: false"]
        return "\n".join(lines) + ("\n" if lines else "")

    def cassandra_yaml(self, template):
        """scripts/cassandra's cassandra.yaml.template with the same settings; Fail when the template no longer
        has the lines this replaces."""
        text = template
        if self.auth:
            lines = text.split("\n")
            for old, new in CASSANDRA_AUTH.items():
                if old not in lines:
                    raise Fail(f"cassandra.yaml.template has no line `{old}` to replace for --auth")
                lines = [new if line == old else line for line in lines]
            text = "\n".join(lines)
        if self.tls:
            if "client_encryption_options" in text:
                raise Fail("cassandra.yaml.template already sets client_encryption_options")
            text = text.rstrip("\n") + "\n" + "\n".join([
                "# bench/compare --tls: TLS-only native port, a PEM keystore (unencrypted PKCS#8 key + certificate)",
                "client_encryption_options:", "  enabled: true", "  optional: false",
                f"  keystore: {self.keystore}", "  require_client_auth: false",
                "  ssl_context_factory:", "    class_name: org.apache.cassandra.security.PEMBasedSslContextFactory"])
        return text.rstrip("\n") + "\n"

    def cassandra_ref(self, cass_ref, directory):
        """A copy of the Cassandra scripts in `directory` whose template carries these settings."""
        return cassconf.scripts_with_template(cass_ref, directory, CASSANDRA_SCRIPTS, self.cassandra_yaml, "--auth/--tls")

    def mode_words(self):
        return [f"user={USER}", f"password={PASSWORD}"] if self.auth else []

    def transport_words(self):
        return ["-transport", f"truststore={self.ca}"] if self.tls else []

    def wait_login(self, host, port, seconds, alive=lambda: True):
        """Until a CQL connection gets through (TLS with --tls, the default superuser's login with --auth);
        Fail after `seconds` or when `alive()` turns false. Returns the seconds waited."""
        t0 = time.time()
        why = "not tried"
        while time.time() - t0 < seconds:
            if not alive():
                raise Fail(f"the server on {host}:{port} exited before a login worked ({why})")
            why = cql_login(host, port, USER if self.auth else None, PASSWORD, self.ca if self.tls else None)
            if why is None:
                return time.time() - t0
            time.sleep(0.5)
        raise Fail(f"no {self.label} login on {host}:{port} within {seconds}s: {why}")


def make_certs(directory):
    """A throw-away CA and a node keystore (key + certificate, PEM) for 127.0.0.1-3 and localhost, made with the
    openssl command line: (ca.pem, node.pem) in `directory`."""
    if not shutil.which("openssl"):
        raise Fail("--tls needs the openssl command (scripts/setup.sh installs Debian's openssl package)")
    os.makedirs(directory, exist_ok=True)
    p = lambda name: os.path.join(directory, name)  # noqa: E731
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    with open(p("node.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,IP:127.0.0.2,IP:127.0.0.3,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n")
    sh(["openssl", "req", "-x509"] + ec + ["-keyout", p("ca-key.pem"), "-out", p("ca.pem"), "-days", "30",
                                           "-subj", "/CN=shoal bench CA"], timeout=60)
    sh(["openssl", "req"] + ec + ["-keyout", p("node-key.pem"), "-out", p("node.csr"), "-subj", "/CN=bench node"],
       timeout=60)
    sh(["openssl", "x509", "-req", "-in", p("node.csr"), "-CA", p("ca.pem"), "-CAkey", p("ca-key.pem"),
        "-CAcreateserial", "-out", p("node-cert.pem"), "-days", "30", "-extfile", p("node.ext")], timeout=60)
    with open(p("node-key.pem")) as key, open(p("node-cert.pem")) as cert:
        text = key.read() + cert.read()
    if "BEGIN PRIVATE KEY" not in text:  # Cassandra's PEMReader reads PKCS#8 only
        raise Fail(f"openssl wrote no unencrypted PKCS#8 key ({p('node-key.pem')})")
    fd = os.open(p("node.pem"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    for name in ("ca-key.pem", "node-key.pem"):
        os.chmod(p(name), 0o600)
    return p("ca.pem"), p("node.pem")


# ---------------------------------------------------------------------------------------------
# A minimal CQL (protocol v4) login, stdlib only

def _frame(opcode, body, stream=0):
    return struct.pack(">BBhBi", 4, 0, stream, opcode, len(body)) + body


def _string(text):
    data = text.encode()
    return struct.pack(">H", len(data)) + data


def _recv(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise OSError("the server closed the connection")
        data += chunk
    return data


def _read_frame(sock):
    _, _, _, opcode, length = struct.unpack(">BBhBi", _recv(sock, 9))
    if not 0 <= length <= 1 << 20:
        raise OSError(f"a frame of {length} bytes")
    return opcode, _recv(sock, length)


def _error_text(body):
    code = struct.unpack(">i", body[:4])[0] if len(body) >= 4 else 0
    msg = body[6:6 + struct.unpack(">H", body[4:6])[0]].decode(errors="replace") if len(body) >= 6 else ""
    return f"error 0x{code:04X}: {msg}"


def cql_login(host, port, user, password, cafile=None, timeout=5.0):
    """One connection: STARTUP, and SASL PLAIN as `user` when the server asks; through TLS (the chain verified
    against `cafile`, not the host name) when `cafile` is given. None when it worked, else why not."""
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
        if cafile:
            ctx = ssl.create_default_context(cafile=cafile)
            ctx.check_hostname = False
            sock = ctx.wrap_socket(sock)
        with sock:
            sock.sendall(_frame(0x01, struct.pack(">H", 1) + _string("CQL_VERSION") + _string("3.0.0")))
            opcode, body = _read_frame(sock)
            if opcode == 0x02:  # READY
                return None if user is None else "the server asked for no login"
            if opcode != 0x03:  # AUTHENTICATE
                return _error_text(body) if opcode == 0x00 else f"STARTUP answered with opcode 0x{opcode:02X}"
            if user is None:
                return "the server asks for a login"
            token = b"\0" + user.encode() + b"\0" + password.encode()
            sock.sendall(_frame(0x0F, struct.pack(">i", len(token)) + token))
            opcode, body = _read_frame(sock)
            if opcode == 0x10:  # AUTH_SUCCESS
                return None
            return _error_text(body) if opcode == 0x00 else f"AUTH_RESPONSE answered with opcode 0x{opcode:02X}"
    except (OSError, ssl.SSLError, struct.error) as e:
        return f"{type(e).__name__}: {e}"
