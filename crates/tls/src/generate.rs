//! Throw-away certificates: a certificate authority for one cluster and the
//! keystores it issues to nodes and clients (`shoal cluster up --tls`, the
//! tests). Not for production: keys are written unencrypted and certificates
//! never expire before the year 4096 (rcgen's default).
//!
//! Invariants:
//! - An authority is its key and its name: loading it back from its key
//!   (`Authority::load`) signs certificates the first certificate's holders
//!   trust, so a cluster grown later gets certificates from the same CA.
//! - Every issued certificate names its IP addresses and `localhost`, and
//!   serves both as a server and as a client certificate (nodes are both).

use std::net::IpAddr;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SanType,
};

/// A certificate authority: its key and its self-signed certificate.
pub struct Authority {
    params: CertificateParams,
    key: KeyPair,
    /// The CA certificate (PEM): the truststore of its cluster.
    pub cert_pem: String,
}

fn err(e: rcgen::Error) -> String {
    format!("cannot make a certificate: {e}")
}

fn ca_params(name: &str) -> Result<CertificateParams, String> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    Ok(params)
}

impl Authority {
    /// A new authority named `name` (its certificate's common name).
    pub fn create(name: &str) -> Result<Authority, String> {
        let params = ca_params(name)?;
        let key = KeyPair::generate().map_err(err)?;
        let cert_pem = params.self_signed(&key).map_err(err)?.pem();
        Ok(Authority { params, key, cert_pem })
    }

    /// The authority named `name` whose key is `key_pem` and certificate `cert_pem`.
    pub fn load(name: &str, key_pem: &str, cert_pem: String) -> Result<Authority, String> {
        let key = KeyPair::from_pem(key_pem).map_err(|e| format!("not a usable CA key: {e}"))?;
        Ok(Authority { params: ca_params(name)?, key, cert_pem })
    }

    /// The authority's private key (PEM, unencrypted).
    pub fn key_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// A keystore in Cassandra 5's PEM shape (the private key, then the
    /// certificate) for `common_name`, valid for `ips` and `localhost`.
    pub fn issue(&self, common_name: &str, ips: &[IpAddr]) -> Result<String, String> {
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).map_err(err)?;
        params.distinguished_name.push(DnType::CommonName, common_name);
        params.subject_alt_names.extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().map_err(err)?;
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).map_err(err)?;
        Ok(format!("{}{}", key.serialize_pem(), cert.pem()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn an_issued_keystore_reads_back_and_a_reloaded_authority_signs_alike() {
        let dir = tempfile::tempdir().unwrap();
        let ca = Authority::create("test CA").unwrap();
        let ca_file = dir.path().join("ca.pem");
        std::fs::write(&ca_file, &ca.cert_pem).unwrap();
        let roots = crate::truststore(&ca_file).unwrap();
        assert_eq!(roots.len(), 1);
        let again = Authority::load("test CA", &ca.key_pem(), ca.cert_pem.clone()).unwrap();
        for (i, authority) in [ca, again].iter().enumerate() {
            let file = dir.path().join(format!("node{i}.pem"));
            std::fs::write(&file, authority.issue("node", &["127.0.0.1".parse().unwrap()]).unwrap()).unwrap();
            let keystore = crate::Keystore::read(&file, None).unwrap();
            assert_eq!(keystore.chain.len(), 1);
            // Both a server and a client configuration take it.
            crate::server_config(crate::Keystore::read(&file, None).unwrap(), Some(roots.clone())).unwrap();
            crate::client_config(keystore, roots.clone(), false).unwrap();
        }
    }
}
