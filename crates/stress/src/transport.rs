//! `-transport`: TLS on the lean client's connections (`-mode simplenative`),
//! with PEM files in the shape Cassandra 5's `PEMBasedSslContextFactory` and
//! Shoal read (crate `tls`): a truststore of CA certificates, and for servers
//! that require client certificates a keystore holding the private key and
//! its certificate chain.
//!
//! Invariants:
//! - The server's chain is always verified against the truststore; the name
//!   in its certificate only with `hostname-verification=true` (cassandra-stress
//!   does not check it either: nodes are addressed by IP).
//! - A file that is not PEM (a Java keystore, DER, anything else) is refused
//!   with what it looks like and how to get PEM instead, before rustls sees it.
//! - The handshake has the request timeout ([`crate::native::TIMEOUT`]): a
//!   server that never answers it does not hang the run.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use tls::rustls::pki_types::ServerName;
use tls::tokio_rustls::client::TlsStream;
use tls::tokio_rustls::TlsConnector;
use tokio::net::TcpStream;

use crate::settings::Transport;

/// The TLS side of a run's connections.
pub struct Tls {
    connector: TlsConnector,
}

impl Tls {
    /// Reads the truststore (and keystore) of `-transport`.
    pub fn new(transport: &Transport) -> Result<Tls, String> {
        check_pem(&transport.truststore, "truststore")?;
        let roots = tls::truststore(&transport.truststore).map_err(|e| format!("-transport: {e}"))?;
        let config = match &transport.keystore {
            Some(path) => {
                check_pem(path, "keystore")?;
                let keystore = tls::Keystore::read(path, None).map_err(|e| format!("-transport: {e}"))?;
                tls::client_config(keystore, roots, transport.hostname_verification)
            }
            None => tls::client_config_without_cert(roots, transport.hostname_verification),
        }
        .map_err(|e| format!("-transport: {e}"))?;
        Ok(Tls { connector: TlsConnector::from(Arc::new(config)) })
    }

    /// The TLS handshake on a connected socket; the server is named by its IP address.
    pub async fn handshake(&self, socket: TcpStream, addr: SocketAddr) -> Result<TlsStream<TcpStream>, String> {
        let name = ServerName::from(addr.ip());
        match tokio::time::timeout(crate::native::TIMEOUT, self.connector.connect(name, socket)).await {
            Ok(Ok(stream)) => Ok(stream),
            Ok(Err(e)) => Err(format!("{addr}: TLS handshake failed: {e} ({})", handshake_hint(&e))),
            Err(_) => Err(format!("{addr}: no TLS handshake within {} s", crate::native::TIMEOUT.as_secs())),
        }
    }
}

/// A TLS session's protocol version and cipher suite, as `TLSv1_3 TLS13_AES_256_GCM_SHA384`.
pub fn describe(stream: &TlsStream<TcpStream>) -> String {
    let (_, session) = stream.get_ref();
    let version = session.protocol_version().map_or("?".to_string(), |v| format!("{v:?}"));
    let suite = session.negotiated_cipher_suite().map_or("?".to_string(), |s| format!("{:?}", s.suite()));
    format!("{version} {suite}")
}

/// What a failed handshake most likely means.
fn handshake_hint(e: &std::io::Error) -> &'static str {
    use tls::rustls::{CertificateError, Error};
    match e.get_ref().and_then(|inner| inner.downcast_ref::<Error>()) {
        Some(Error::InvalidCertificate(CertificateError::NotValidForName))
        | Some(Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. })) => {
            "hostname-verification=true: the server's certificate must name the address connected to"
        }
        Some(Error::InvalidCertificate(_)) => "is the server's certificate signed by a CA of the truststore?",
        _ => "does the server speak TLS on this port (client_encryption_options)?",
    }
}

/// Whether `path` holds PEM text; a Java keystore or other binary data is named
/// as what it looks like, with how to get PEM instead.
pub fn check_pem(path: &Path, what: &str) -> Result<(), String> {
    let bytes = std::fs::read(path).map_err(|e| format!("-transport {what}: cannot read {}: {e}", path.display()))?;
    let looks_like = if bytes.starts_with(&[0xFE, 0xED, 0xFE, 0xED]) {
        Some("a Java keystore (JKS)")
    } else if bytes.starts_with(&[0xCE, 0xCE, 0xCE, 0xCE]) {
        Some("a Java keystore (JCEKS)")
    } else if bytes.first() == Some(&0x30) {
        Some("binary DER, such as a PKCS#12 keystore")
    } else if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        Some("no PEM block (-----BEGIN ...)")
    } else {
        None
    };
    match looks_like {
        None => Ok(()),
        Some(kind) => Err(format!(
            "-transport {what}={}: shoal stress needs a PEM file, and this is {kind}; export PEM with \
             `keytool -exportcert -rfc` (certificates) or `openssl pkcs12 -nodes` (a key and its chain)",
            path.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn transport(dir: &Path, truststore: &str, keystore: Option<&str>) -> Transport {
        Transport {
            truststore: dir.join(truststore),
            keystore: keystore.map(|k| dir.join(k)),
            hostname_verification: false,
        }
    }

    #[test]
    fn java_keystores_and_other_non_pem_files_are_refused_by_what_they_are() {
        let dir = tempfile::tempdir().unwrap();
        let cases: [(&str, &[u8], &str); 4] = [
            ("a.jks", &[0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2], "Java keystore (JKS)"),
            ("b.jceks", &[0xCE, 0xCE, 0xCE, 0xCE, 0, 0, 0, 2], "JCEKS"),
            ("c.p12", &[0x30, 0x82, 0x0a, 0x01], "PKCS#12"),
            ("d.txt", b"hello\n", "no PEM block"),
        ];
        for (name, bytes, expected) in cases {
            std::fs::write(dir.path().join(name), bytes).unwrap();
            let err = check_pem(&dir.path().join(name), "truststore").unwrap_err();
            assert!(err.contains(expected) && err.contains("needs a PEM file"), "{name}: {err}");
            let err = Tls::new(&transport(dir.path(), name, None)).err().unwrap();
            assert!(err.contains("needs a PEM file"), "{err}");
        }
        let err = check_pem(&dir.path().join("missing.pem"), "keystore").unwrap_err();
        assert!(err.contains("cannot read") && err.contains("missing.pem"), "{err}");
    }

    #[test]
    fn a_ca_pem_makes_a_client_with_or_without_a_certificate() {
        let dir = tempfile::tempdir().unwrap();
        let ca = tls::generate::Authority::create("stress test CA").unwrap();
        std::fs::write(dir.path().join("ca.pem"), &ca.cert_pem).unwrap();
        let client = ca.issue("client", &["127.0.0.1".parse().unwrap()]).unwrap();
        std::fs::write(dir.path().join("client.pem"), client).unwrap();
        assert!(Tls::new(&transport(dir.path(), "ca.pem", None)).is_ok());
        assert!(Tls::new(&transport(dir.path(), "ca.pem", Some("client.pem"))).is_ok());
        // A truststore without a key is no keystore.
        let err = Tls::new(&transport(dir.path(), "ca.pem", Some("ca.pem"))).err().unwrap();
        assert!(err.contains("no usable private key"), "{err}");
    }
}
