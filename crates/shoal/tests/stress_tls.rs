//! `shoal stress -transport` (TLS) end to end against a real `shoal server`
//! with PasswordAuthenticator, CassandraAuthorizer and client TLS only
//! (`optional: false`), its certificates from a throw-away CA
//! (`tls::generate`): a write and a verify through TLS with a login, and the
//! clear failures: a plain client, another CA, a Java keystore, the driver mode.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

#[allow(dead_code)] // only free_port: the node here needs its own configuration
mod common;

fn stress(args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_shoal")).arg("stress").args(args).output().expect("run shoal stress");
    eprintln!(
        "$ shoal stress {}\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A node serving CQL only through TLS, with logins; killed when dropped.
struct TlsNode {
    child: Child,
    port: u16,
}

impl TlsNode {
    fn start(dir: &Path, keystore: &Path) -> TlsNode {
        let port = common::free_port();
        let config = dir.join("shoal.yaml");
        let yaml = format!(
            "storage_port: {}\nauthenticator: PasswordAuthenticator\nauthorizer: CassandraAuthorizer\n\
             client_encryption_options:\n  enabled: true\n  optional: false\n  keystore: {}\n",
            common::free_port(),
            keystore.display()
        );
        std::fs::write(&config, yaml).expect("write config");
        let child = Command::new(env!("CARGO_BIN_EXE_shoal"))
            .args(["server", "--listen-address", "127.0.0.1", "--native-port", &port.to_string()])
            .args(["--admin-port", &common::free_port().to_string()])
            .arg("--config")
            .arg(&config)
            .arg("--data-dir")
            .arg(dir.join("data"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start shoal");
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "shoal did not start listening on {addr}");
            std::thread::sleep(Duration::from_millis(50));
        }
        TlsNode { child, port }
    }
}

impl Drop for TlsNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn simplenative_through_tls_with_a_login() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = |name: &str| dir.path().join(name).display().to_string();
    let ca = tls::generate::Authority::create("stress TLS test CA").expect("CA");
    std::fs::write(path("ca.pem"), &ca.cert_pem).expect("ca.pem");
    let keystore = ca.issue("node1", &["127.0.0.1".parse().expect("ip")]).expect("keystore");
    std::fs::write(path("node1.pem"), keystore).expect("node1.pem");
    let node = TlsNode::start(dir.path(), &dir.path().join("node1.pem"));
    let port = format!("native={}", node.port);
    let pid = node.child.id().to_string();
    let login = ["-mode", "simplenative", "user=cassandra", "password=cassandra"];
    let ca_pem = format!("truststore={}", path("ca.pem"));
    let tls = ["-transport", ca_pem.as_str()];

    let write = stress(
        &[&["write", "n=2000", "-rate", "threads=16", "-port", &port, "--json", &path("w.json")][..], &login, &tls]
            .concat(),
    );
    assert_eq!(write.status.code(), Some(0), "write through TLS");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path("w.json")).expect("w.json")).expect("JSON");
    assert_eq!((report["summary"]["ops"].as_u64(), report["summary"]["errors"].as_u64()), (Some(2000), Some(0)));
    assert_eq!(report["settings"]["tls"], true);

    let verify = stress(&[&["verify", "n=2000", "-port", &port, "--server-pid", &pid][..], &login, &tls].concat());
    assert_eq!(verify.status.code(), Some(0), "verify through TLS");
    assert!(String::from_utf8_lossy(&verify.stdout).contains("0 missing, 0 with wrong values"));

    // A wrong password: the server's own error.
    let wrong = stress(
        &[&["write", "n=10", "-port", &port, "-mode", "simplenative", "user=cassandra", "password=nope"][..], &tls]
            .concat(),
    );
    assert_eq!(wrong.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("authentication failed"));

    // The server's certificate comes from another CA.
    let other = tls::generate::Authority::create("another CA").expect("CA");
    std::fs::write(path("other.pem"), &other.cert_pem).expect("other.pem");
    let other_ca = format!("truststore={}", path("other.pem"));
    let untrusted = stress(&[&["write", "n=10", "-port", &port][..], &login, &["-transport", &other_ca]].concat());
    assert_eq!(untrusted.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&untrusted.stderr).contains("TLS handshake failed"));

    // A Java keystore is named as such.
    std::fs::write(path("trust.store"), [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]).expect("jks");
    let jks = format!("truststore={}", path("trust.store"));
    let refused = stress(&[&["write", "n=10", "-port", &port][..], &login, &["-transport", &jks]].concat());
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("needs a PEM file, and this is a Java keystore (JKS)"));

    // TLS needs simplenative: the driver mode is refused as a bad command line.
    let driver =
        stress(&[&["write", "n=10", "-port", &port, "-mode", "native", "cql3", "prepared"][..], &tls].concat());
    assert_eq!(driver.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&driver.stderr).contains("-transport (TLS) needs -mode simplenative"));

    // A plain client on the TLS-only port fails (exit 1), whichever client.
    let plain = stress(&[&["write", "n=10", "no-warmup", "-port", &port][..], &login].concat());
    assert_eq!(plain.status.code(), Some(1));
}
