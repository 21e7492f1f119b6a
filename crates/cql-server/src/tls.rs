//! TLS on the native port: cassandra.yaml's `client_encryption_options` in
//! Cassandra 5's PEM shape (`PEMBasedSslContextFactory`): one `keystore`
//! file holding the private key and the certificate chain, a `truststore`
//! of PEM CA certificates, `require_client_auth`, and `optional` (TLS and
//! plain connections on one port). The PEM files and rustls are crate `tls`'s.
//!
//! Invariants:
//! - A node with encryption enabled and not `optional` serves nothing in
//!   the clear: a connection whose handshake fails (a plain CQL client's
//!   first frame is not a TLS record) is closed at once, never left hanging.
//! - With `optional`, a connection is TLS exactly when its first byte is a
//!   TLS handshake record (0x16); a CQL frame's first byte is its version.
//! - With `require_client_auth`, only clients presenting a certificate
//!   chained to the truststore complete the handshake.
//! - A handshake, or the first byte of an `optional` connection, that does
//!   not arrive within `HANDSHAKE_TIMEOUT` closes the connection.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tls::tokio_rustls::server::TlsStream;
use tls::tokio_rustls::TlsAcceptor;
use tokio::net::TcpStream;

/// How long a client may take to send its first byte and finish the handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// `client_encryption_options`, as the node read them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientEncryption {
    pub enabled: bool,
    /// Plain connections are served too.
    pub optional: bool,
    /// PEM: the private key and the certificate chain.
    pub keystore: Option<PathBuf>,
    /// The password of an encrypted private key (not supported yet: refused with a clear error).
    pub keystore_password: Option<String>,
    /// Clients must present a certificate the truststore vouches for.
    pub require_client_auth: bool,
    /// PEM: CA certificates client certificates must chain to.
    pub truststore: Option<PathBuf>,
}

/// The server side of TLS, ready to accept.
pub struct ServerTls {
    acceptor: TlsAcceptor,
    optional: bool,
}

/// A connection after the accept: TLS, or plain where allowed.
pub enum Accepted {
    Tls(Box<TlsStream<TcpStream>>),
    Plain(TcpStream),
}

impl ServerTls {
    /// Reads the keystore (and truststore) and builds the acceptor; None
    /// when encryption is off. Errors name the file and what is wrong.
    pub fn from_options(options: &ClientEncryption) -> Result<Option<Arc<ServerTls>>, String> {
        if !options.enabled {
            return Ok(None);
        }
        let keystore = options
            .keystore
            .as_deref()
            .ok_or("client_encryption_options: enabled needs a keystore (a PEM file with the key and certificates)")?;
        let keystore = tls::Keystore::read(keystore, options.keystore_password.as_deref())?;
        let client_roots = match (options.require_client_auth, options.truststore.as_deref()) {
            (false, _) => None,
            (true, Some(truststore)) => Some(tls::truststore(truststore)?),
            (true, None) => {
                return Err(
                    "client_encryption_options: require_client_auth needs a truststore (PEM CA certificates)".into()
                )
            }
        };
        let config = tls::server_config(keystore, client_roots)?;
        Ok(Some(Arc::new(ServerTls { acceptor: TlsAcceptor::from(Arc::new(config)), optional: options.optional })))
    }

    /// The TLS handshake (or, with `optional`, plain when the client
    /// speaks CQL first). An error closes the connection.
    pub async fn accept(&self, stream: TcpStream) -> std::io::Result<Accepted> {
        let timed_out = || std::io::Error::new(std::io::ErrorKind::TimedOut, "no TLS handshake in time");
        if self.optional {
            let mut first = [0u8; 1];
            let n =
                tokio::time::timeout(HANDSHAKE_TIMEOUT, stream.peek(&mut first)).await.map_err(|_| timed_out())??;
            if n == 0 || first[0] != tls::HANDSHAKE_RECORD {
                return Ok(Accepted::Plain(stream));
            }
        }
        let tls =
            tokio::time::timeout(HANDSHAKE_TIMEOUT, self.acceptor.accept(stream)).await.map_err(|_| timed_out())??;
        Ok(Accepted::Tls(Box::new(tls)))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn off_means_no_tls() {
        assert!(ServerTls::from_options(&ClientEncryption::default()).unwrap().is_none());
    }

    #[test]
    fn on_needs_a_readable_keystore() {
        let no_keystore = ClientEncryption { enabled: true, ..ClientEncryption::default() };
        assert!(ServerTls::from_options(&no_keystore).err().unwrap().contains("needs a keystore"));
        let missing = ClientEncryption { keystore: Some(PathBuf::from("/nonexistent/keystore.pem")), ..no_keystore };
        assert!(ServerTls::from_options(&missing).err().unwrap().contains("cannot read the keystore"));
    }
}
