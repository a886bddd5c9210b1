//! Certificate authorities of the test clusters and the Gardener simulator, made with rcgen:
//! each API server serves a certificate of its own cluster CA (so clients verify TLS, as
//! with a real Shoot) and accepts client certificates of its own client CA (Gardener's
//! admin kubeconfigs are client certificates of the Shoot's client CA, valid for exactly
//! the lifetime granted).

use std::net::IpAddr;
use std::path::Path;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

/// A certificate and its private key, PEM.
#[derive(Debug, Clone)]
pub struct Pair {
    pub cert: String,
    pub key: String,
}

/// A certificate authority: its certificate and the means to sign with it.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate, PEM.
    pub cert: String,
}

fn name(common_name: &str, organizations: &[&str]) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    for org in organizations {
        dn.push(DnType::OrganizationName, *org);
    }
    dn
}

/// The parameters of a CA called `common_name` (the same ones whenever it is loaded, so a
/// loaded CA signs exactly as the one that made the certificate).
fn ca_params(common_name: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = name(common_name, &[]);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

fn at(unix_seconds: i64) -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp(unix_seconds).expect("a time rcgen can encode")
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

impl Ca {
    /// A new CA valid for ten years.
    pub fn new(common_name: &str) -> Result<Self, String> {
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        let mut params = ca_params(common_name);
        params.not_before = at(now() - 3600);
        params.not_after = at(now() + 10 * 365 * 86400);
        let cert = params.self_signed(&key).map_err(|e| e.to_string())?.pem();
        Ok(Self {
            issuer: Issuer::new(ca_params(common_name), key),
            cert,
        })
    }

    /// The CA `common_name` whose certificate and key [`Ca::write`] put at `cert` and `key`.
    pub fn load(common_name: &str, cert: &Path, key: &Path) -> Result<Self, String> {
        let read =
            |p: &Path| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
        let key = KeyPair::from_pem(&read(key)?).map_err(|e| e.to_string())?;
        Ok(Self {
            issuer: Issuer::new(ca_params(common_name), key),
            cert: read(cert)?,
        })
    }

    /// Write the certificate and key to `cert` and `key`.
    pub fn write(&self, cert: &Path, key: &Path) -> Result<(), String> {
        std::fs::write(cert, &self.cert).map_err(|e| e.to_string())?;
        std::fs::write(key, self.issuer.key().serialize_pem()).map_err(|e| e.to_string())
    }

    /// A serving certificate for `hosts` (IP addresses or DNS names), valid for ten years.
    pub fn serving(&self, common_name: &str, hosts: &[String]) -> Result<Pair, String> {
        let mut params = CertificateParams::new(hosts.to_vec()).map_err(|e| e.to_string())?;
        params.distinguished_name = name(common_name, &[]);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.not_before = at(now() - 3600);
        params.not_after = at(now() + 10 * 365 * 86400);
        self.sign(params)
    }

    /// A client certificate for user `user` in `groups`, valid from a minute ago until
    /// `not_after` (seconds since the epoch).
    pub fn client(&self, user: &str, groups: &[&str], not_after: i64) -> Result<Pair, String> {
        let mut params = CertificateParams::default();
        params.distinguished_name = name(user, groups);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.not_before = at(now() - 60);
        params.not_after = at(not_after);
        self.sign(params)
    }

    fn sign(&self, mut params: CertificateParams) -> Result<Pair, String> {
        params.use_authority_key_identifier_extension = true;
        let key = KeyPair::generate().map_err(|e| e.to_string())?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| e.to_string())?;
        Ok(Pair {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }
}

/// The names an API server at `address` is reached by: loopback, its address and the
/// in-cluster names of the `kubernetes` Service.
pub fn apiserver_hosts(address: IpAddr) -> Vec<String> {
    let mut hosts: Vec<String> = [
        "127.0.0.1",
        "10.0.0.1",
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    ]
    .map(String::from)
    .to_vec();
    if !hosts.contains(&address.to_string()) {
        hosts.push(address.to_string());
    }
    hosts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loaded_ca_signs_like_the_one_that_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("ca.crt"), dir.path().join("ca.key"));
        let ca = Ca::new("test-ca").unwrap();
        ca.write(&cert, &key).unwrap();
        let loaded = Ca::load("test-ca", &cert, &key).unwrap();
        assert_eq!(loaded.cert, ca.cert);
        let client = loaded.client("alice", &["admins"], now() + 60).unwrap();
        let serving = ca
            .serving("api", &apiserver_hosts([10, 1, 2, 3].into()))
            .unwrap();
        // openssl checks the chain: signed by the written CA, for the purpose each claims.
        for (pair, purpose) in [(&client, "sslclient"), (&serving, "sslserver")] {
            let leaf = dir.path().join(format!("{purpose}.crt"));
            std::fs::write(&leaf, &pair.cert).unwrap();
            let out = std::process::Command::new("openssl")
                .args(["verify", "-purpose", purpose, "-CAfile"])
                .args([&cert, &leaf])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let other = Ca::new("other-ca").unwrap();
        let stranger = dir.path().join("stranger.crt");
        std::fs::write(
            &stranger,
            other.client("eve", &[], now() + 60).unwrap().cert,
        )
        .unwrap();
        let out = std::process::Command::new("openssl")
            .args(["verify", "-CAfile"])
            .args([&cert, &stranger])
            .output()
            .unwrap();
        assert!(
            !out.status.success(),
            "another CA's certificate must not verify"
        );
    }
}
