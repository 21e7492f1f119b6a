//! TLS material for both of a node's listeners (the native port and the
//! internode port): PEM keystores and truststores in Cassandra 5's shape
//! (`PEMBasedSslContextFactory`: one keystore file holding the private key
//! and its certificate chain; a truststore of CA certificates), and the
//! rustls configurations built from them, with ring as the crypto provider.
//!
//! Invariants:
//! - Every error names the file and what is wrong with it; nothing here
//!   panics on a bad file.
//! - A client configuration verifies the server's chain against the
//!   truststore; the name in the certificate is checked only with
//!   `endpoint_verification` (Cassandra's `require_endpoint_verification`,
//!   off by default: nodes are addressed by IP and certificates are often
//!   issued per cluster, not per host).
//! - Encrypted private keys are refused with a message that says how to
//!   store the key instead (Shoal does not decrypt keys yet).

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error, RootCertStore, SignatureScheme};

pub mod generate;

pub use rustls;
pub use tokio_rustls;

/// The first byte of a TLS record carrying a handshake (a ClientHello):
/// what tells a TLS client from a plain one on a port serving both.
pub const HANDSHAKE_RECORD: u8 = 0x16;

/// The crypto provider every configuration uses.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &Path, what: &str) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("cannot read the {what} {}: {e}", path.display()))
}

/// The certificates of a PEM file (none is an error).
fn certificates(text: &str, path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(text.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the {what} {} is not valid PEM: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("the {what} {} holds no certificate", path.display()));
    }
    Ok(certs)
}

/// A keystore: the certificate chain and the private key of one PEM file.
pub struct Keystore {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
}

impl Keystore {
    /// Reads a PEM keystore. `password` is `keystore_password`: a key that
    /// needs one is refused (not supported yet).
    pub fn read(path: &Path, password: Option<&str>) -> Result<Keystore, String> {
        let text = read(path, "keystore")?;
        if text.contains("ENCRYPTED PRIVATE KEY") || password.is_some_and(|p| !p.is_empty()) {
            return Err(format!(
                "the keystore {} holds an encrypted private key (keystore_password): Shoal does not decrypt keys yet; \
                 store it unencrypted (openssl pkcs8 -topk8 -nocrypt) and protect the file instead",
                path.display()
            ));
        }
        let chain = certificates(&text, path, "keystore")?;
        let key = PrivateKeyDer::from_pem_slice(text.as_bytes())
            .map_err(|e| format!("the keystore {} holds no usable private key: {e}", path.display()))?;
        Ok(Keystore { chain, key })
    }
}

/// The CA certificates of a PEM truststore.
pub fn truststore(path: &Path) -> Result<Arc<RootCertStore>, String> {
    let text = read(path, "truststore")?;
    let mut roots = RootCertStore::empty();
    for cert in certificates(&text, path, "truststore")? {
        roots.add(cert).map_err(|e| format!("the truststore {} holds a bad certificate: {e}", path.display()))?;
    }
    Ok(Arc::new(roots))
}

/// A server configuration presenting `keystore`; with `client_roots`,
/// clients must present a certificate chained to them.
pub fn server_config(
    keystore: Keystore,
    client_roots: Option<Arc<RootCertStore>>,
) -> Result<rustls::ServerConfig, String> {
    let provider = provider();
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = match client_roots {
        Some(roots) => {
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| format!("TLS client verification: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    builder
        .with_single_cert(keystore.chain, keystore.key)
        .map_err(|e| format!("the keystore's key does not fit its certificate: {e}"))
}

/// A client configuration that presents `keystore` (for servers that
/// require client certificates) and trusts servers chained to `roots`.
pub fn client_config(
    keystore: Keystore,
    roots: Arc<RootCertStore>,
    endpoint_verification: bool,
) -> Result<rustls::ClientConfig, String> {
    client_builder(roots, endpoint_verification)?
        .with_client_auth_cert(keystore.chain, keystore.key)
        .map_err(|e| format!("the keystore's key does not fit its certificate: {e}"))
}

/// A client configuration that trusts servers chained to `roots` and
/// presents no certificate (servers with `require_client_auth: false`).
pub fn client_config_without_cert(
    roots: Arc<RootCertStore>,
    endpoint_verification: bool,
) -> Result<rustls::ClientConfig, String> {
    Ok(client_builder(roots, endpoint_verification)?.with_no_client_auth())
}

/// A client configuration up to its certificate: the server's chain is
/// verified against `roots` (its name only with `endpoint_verification`).
fn client_builder(
    roots: Arc<RootCertStore>,
    endpoint_verification: bool,
) -> Result<rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert>, String> {
    let provider = provider();
    let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(roots, Arc::clone(&provider))
        .build()
        .map_err(|e| format!("TLS server verification: {e}"))?;
    let verifier = Arc::new(ChainVerifier { webpki, endpoint_verification });
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier))
}

/// WebPKI verification of the server's chain, with the name check only
/// when `endpoint_verification` is on.
#[derive(Debug)]
struct ChainVerifier {
    webpki: Arc<rustls::client::WebPkiServerVerifier>,
    endpoint_verification: bool,
}

impl ServerCertVerifier for ChainVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match self.webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(Error::InvalidCertificate(CertificateError::NotValidForName))
            | Err(Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. }))
                if !self.endpoint_verification =>
            {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn bad_files_are_named_with_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let err = Keystore::read(&missing, None).err().unwrap();
        assert!(err.contains("cannot read the keystore") && err.contains("missing.pem"), "{err}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "nothing here\n").unwrap();
        assert!(Keystore::read(&empty, None).err().unwrap().contains("holds no certificate"));
        assert!(truststore(&empty).err().unwrap().contains("truststore"));
        let encrypted = dir.path().join("enc.pem");
        std::fs::write(
            &encrypted,
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n",
        )
        .unwrap();
        assert!(Keystore::read(&encrypted, None).err().unwrap().contains("encrypted private key"));
        assert!(Keystore::read(&empty, Some("secret")).err().unwrap().contains("keystore_password"));
    }
}
