//! Cosign-style signatures with public keys: cosign's "simple signing" payload, signed
//! with a key pair, stored in the same repository under the tag `sha256-<hex>.sig` (the
//! fallback cosign uses where a registry has no referrers API, as distribution 2.8).
//!
//! Which keys verify which artifacts is the [`TrustPolicy`]: public keys per
//! `registry/repository` prefix. Key handling and the signature check are the `sigstore`
//! crate's; this module adds the registry side and the payload check, so that a signature
//! only counts for the exact manifest digest it names.

use std::collections::BTreeMap;
use std::path::Path;

use oci_client::Reference;
use oci_client::manifest::{
    IMAGE_CONFIG_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest,
};
use serde::Deserialize;
use sigstore::crypto::{CosignVerificationKey, SigStoreSigner, Signature};

use super::client::{NoProgress, Registry};
use super::error::OciError;
use super::store::StoredSignature;
use super::{sha256_digest, sha256_hex};

/// Layer media type of a cosign simple-signing payload.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// Layer annotation holding the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";

/// The tag cosign stores signatures of `digest` under.
pub fn signature_tag(digest: &str) -> Option<String> {
    Some(format!("sha256-{}.sig", sha256_hex(digest)?))
}

/// The simple-signing payload for `digest`, naming `docker_reference` (registry/repository).
pub fn payload(docker_reference: &str, digest: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "critical": {
            "identity": { "docker-reference": docker_reference },
            "image": { "docker-manifest-digest": digest },
            "type": "cosign container image signature",
        },
        "optional": null,
    }))
    .expect("payload serialises")
}

/// `registry/repository` of a reference, the key of trust rules.
pub fn repository_of(reference: &Reference) -> String {
    format!("{}/{}", reference.registry(), reference.repository())
}

/// Public keys for the artifacts under one prefix.
pub struct TrustRule {
    /// `registry/repository` prefix, e.g. `ghcr.io/acme/plugins`; it covers that repository
    /// and those below it (`ghcr.io/acme/plugins/dns`), never `ghcr.io/acme/plugins-evil`.
    pub prefix: String,
    keys: Vec<(String, CosignVerificationKey)>,
    /// Repositories a signature may name besides the one pulled (a mirror's origin).
    signed_as: Vec<String>,
}

impl TrustRule {
    fn covers(&self, repository: &str) -> bool {
        let prefix = self.prefix.trim_end_matches('/');
        repository == prefix
            || repository
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('/'))
    }
}

/// Which keys verify which artifacts, and whether every artifact must be signed.
#[derive(Default)]
pub struct TrustPolicy {
    /// Refuse unsigned plugins everywhere, not only where a Plugin asks for it.
    pub require_signatures: bool,
    pub rules: Vec<TrustRule>,
}

impl std::fmt::Debug for TrustPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustPolicy")
            .field("require_signatures", &self.require_signatures)
            .field(
                "prefixes",
                &self.rules.iter().map(|r| &r.prefix).collect::<Vec<_>>(),
            )
            .finish()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PolicyFile {
    #[serde(default)]
    require_signatures: bool,
    #[serde(default)]
    keys: Vec<KeyEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct KeyEntry {
    prefix: String,
    public_key: Option<String>,
    /// Relative to the policy file.
    public_key_file: Option<String>,
    /// Repositories the signatures may name instead of the one pulled (for mirrors).
    #[serde(default)]
    signed_as: Vec<String>,
}

/// Short, stable name of a key for messages: sha256 of its PEM, 12 hex digits.
fn key_id(pem: &str) -> String {
    sha256_digest(pem.trim().as_bytes())[7..19].to_string()
}

impl TrustPolicy {
    /// Read a policy file:
    ///
    /// ```yaml
    /// requireSignatures: false           # keys make signatures required under their prefix
    /// keys:
    ///   - prefix: ghcr.io/acme/plugins
    ///     publicKeyFile: cosign.pub      # or publicKey: "-----BEGIN PUBLIC KEY-----…"
    ///   - prefix: registry.internal/acme # a mirror
    ///     publicKeyFile: cosign.pub
    ///     signedAs: [ghcr.io/acme/plugins/dns]
    /// ```
    pub fn from_file(path: &Path) -> Result<Self, OciError> {
        let text = std::fs::read_to_string(path).map_err(|e| OciError::io(path, e))?;
        let file: PolicyFile = serde_saphyr::from_str(&text).map_err(|e| OciError::io(path, e))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let mut policy = TrustPolicy {
            require_signatures: file.require_signatures,
            rules: Vec::new(),
        };
        for (i, entry) in file.keys.into_iter().enumerate() {
            let pem = match (entry.public_key, entry.public_key_file) {
                (Some(pem), None) => pem,
                (None, Some(file)) => {
                    let key_path = base.join(file);
                    std::fs::read_to_string(&key_path).map_err(|e| OciError::io(&key_path, e))?
                }
                _ => {
                    return Err(OciError::io(
                        path,
                        format!("keys[{i}]: give exactly one of publicKey and publicKeyFile"),
                    ));
                }
            };
            policy
                .add_key(&entry.prefix, &pem)
                .map_err(|e| OciError::io(path, format!("keys[{i}].publicKey: {e}")))?;
            policy.add_signed_as(&entry.prefix, &entry.signed_as);
        }
        Ok(policy)
    }

    /// Trust `pem` (a PEM public key: ECDSA P-256/384, Ed25519 or RSA) under `prefix`.
    pub fn add_key(&mut self, prefix: &str, pem: &str) -> Result<(), String> {
        let key = CosignVerificationKey::try_from_pem(pem.as_bytes())
            .map_err(|e| format!("not a usable public key: {e}"))?;
        let entry = (key_id(pem), key);
        match self.rules.iter_mut().find(|r| r.prefix == prefix) {
            Some(rule) => rule.keys.push(entry),
            None => self.rules.push(TrustRule {
                prefix: prefix.to_string(),
                keys: vec![entry],
                signed_as: Vec::new(),
            }),
        }
        Ok(())
    }

    /// Let the rule for `prefix` accept signatures naming `repositories` (mirrors).
    pub fn add_signed_as(&mut self, prefix: &str, repositories: &[String]) {
        if let Some(rule) = self.rules.iter_mut().find(|r| r.prefix == prefix) {
            rule.signed_as.extend(repositories.iter().cloned());
        }
    }

    /// The most specific rule for a `registry/repository` (prefixes match on path
    /// boundaries).
    pub fn rule_for(&self, repository: &str) -> Option<&TrustRule> {
        self.rules
            .iter()
            .filter(|r| r.covers(repository))
            .max_by_key(|r| r.prefix.len())
    }

    /// Whether artifacts of `repository` must be signed: everywhere when the policy says so,
    /// and wherever a key is configured (a key that is not required protects nothing).
    pub fn requires(&self, repository: &str) -> bool {
        self.require_signatures || self.rule_for(repository).is_some()
    }

    /// Check `signatures` for manifest `digest` of `repository`. Returns the id of the key
    /// that verified, or why none did.
    pub fn verify(
        &self,
        repository: &str,
        digest: &str,
        signatures: &[StoredSignature],
    ) -> Result<VerifyOutcome, String> {
        let rule = self.rule_for(repository).ok_or_else(|| {
            format!("no public key is configured for {repository} in the trust policy")
        })?;
        if signatures.is_empty() {
            return Err(format!(
                "{repository}@{digest} is not signed (no {} tag)",
                signature_tag(digest).unwrap_or_default()
            ));
        }
        let mut reasons = BTreeMap::new();
        for sig in signatures {
            for (id, key) in &rule.keys {
                match key.verify_signature(
                    Signature::Base64Encoded(sig.signature.as_bytes()),
                    &sig.payload,
                ) {
                    Ok(()) => match payload_claims(&sig.payload) {
                        Some((signed, identity)) if signed == digest => {
                            let accepted =
                                identity == repository || rule.signed_as.contains(&identity);
                            if accepted {
                                return Ok(VerifyOutcome {
                                    key: id.clone(),
                                    prefix: rule.prefix.clone(),
                                });
                            }
                            reasons.insert(
                                "identity",
                                format!("a valid signature names another repository ({identity}); a mirror lists it in signedAs"),
                            );
                        }
                        Some((signed, _)) => {
                            reasons.insert(
                                "digest",
                                format!("a valid signature names another digest ({signed})"),
                            );
                        }
                        None => {
                            reasons.insert(
                                "payload",
                                "a signed payload is not a cosign simple-signing payload"
                                    .to_string(),
                            );
                        }
                    },
                    Err(_) => {
                        reasons.insert(
                            "key",
                            format!("no signature verifies with the key(s) for {}", rule.prefix),
                        );
                    }
                }
            }
        }
        Err(format!(
            "{repository}@{digest}: signature refused: {}",
            reasons.into_values().collect::<Vec<_>>().join("; ")
        ))
    }
}

/// Which key verified an artifact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyOutcome {
    /// Short id of the key (sha256 of its PEM).
    pub key: String,
    /// The trust rule's prefix.
    pub prefix: String,
}

/// The digest and the repository (`docker-reference`) a simple-signing payload names.
fn payload_claims(payload: &[u8]) -> Option<(String, String)> {
    let doc: serde_json::Value = serde_json::from_slice(payload).ok()?;
    let critical = doc.get("critical")?;
    if critical.pointer("/type")?.as_str()? != "cosign container image signature" {
        return None;
    }
    let digest = critical
        .pointer("/image/docker-manifest-digest")?
        .as_str()?;
    let identity = critical.pointer("/identity/docker-reference")?.as_str()?;
    Some((digest.to_string(), identity.to_string()))
}

/// The signature manifest of `digest` in `reference`'s repository, if any.
async fn signature_manifest(
    registry: &Registry,
    reference: &Reference,
    digest: &str,
) -> Result<Option<(Reference, OciImageManifest)>, OciError> {
    let tag = signature_tag(digest).ok_or_else(|| OciError::BadReference {
        reference: digest.to_string(),
        message: "not a sha256 digest".into(),
    })?;
    let sig_ref = Reference::with_tag(
        reference.registry().to_string(),
        reference.repository().to_string(),
        tag,
    );
    match registry.pull_manifest(&sig_ref).await {
        Ok((bytes, _)) => {
            let manifest = serde_json::from_slice(&bytes).map_err(|e| OciError::Signature {
                reference: sig_ref.whole(),
                message: format!("not an image manifest: {e}"),
            })?;
            Ok(Some((sig_ref, manifest)))
        }
        Err(OciError::NotFound { .. }) => Ok(None),
        Err(err) => Err(err),
    }
}

/// Fetch the simple-signing signatures of manifest `digest` (none when unsigned).
pub async fn fetch(
    registry: &Registry,
    reference: &Reference,
    digest: &str,
) -> Result<Vec<StoredSignature>, OciError> {
    let Some((sig_ref, manifest)) = signature_manifest(registry, reference, digest).await? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for layer in &manifest.layers {
        if layer.media_type != SIMPLE_SIGNING_MEDIA_TYPE {
            continue;
        }
        let Some(signature) = layer
            .annotations
            .as_ref()
            .and_then(|a| a.get(SIGNATURE_ANNOTATION))
        else {
            continue;
        };
        let payload = registry.pull_blob(&sig_ref, layer, &NoProgress).await?;
        out.push(StoredSignature {
            payload,
            signature: signature.clone(),
        });
    }
    Ok(out)
}

/// Sign manifest `digest` of `reference`'s repository and push the signature, keeping
/// signatures already there. Returns the signature reference.
pub async fn sign(
    registry: &Registry,
    reference: &Reference,
    digest: &str,
    signer: &SigStoreSigner,
) -> Result<String, OciError> {
    let payload = payload(&repository_of(reference), digest);
    let signature = signer.sign(&payload).map_err(|e| OciError::Signature {
        reference: reference.whole(),
        message: e.to_string(),
    })?;
    push_signature_layer(
        registry,
        reference,
        digest,
        StoredSignature {
            payload,
            signature: base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                signature,
            ),
        },
    )
    .await
}

/// Add one signature to the `sha256-<hex>.sig` manifest (created when missing).
pub async fn push_signature_layer(
    registry: &Registry,
    reference: &Reference,
    digest: &str,
    sig: StoredSignature,
) -> Result<String, OciError> {
    let existing = signature_manifest(registry, reference, digest).await?;
    let sig_ref = Reference::with_tag(
        reference.registry().to_string(),
        reference.repository().to_string(),
        signature_tag(digest).expect("checked above"),
    );
    let mut layers: Vec<OciDescriptor> = existing.map(|(_, m)| m.layers).unwrap_or_default();
    if layers.iter().any(|l| {
        l.digest == sha256_digest(&sig.payload)
            && l.annotations
                .as_ref()
                .and_then(|a| a.get(SIGNATURE_ANNOTATION))
                == Some(&sig.signature)
    }) {
        return Ok(sig_ref.whole());
    }
    let payload_digest = registry
        .push_blob(&sig_ref, &sig.payload, "signature", &NoProgress)
        .await?;
    layers.push(OciDescriptor {
        media_type: SIMPLE_SIGNING_MEDIA_TYPE.into(),
        digest: payload_digest,
        size: sig.payload.len() as i64,
        annotations: Some(BTreeMap::from([(
            SIGNATURE_ANNOTATION.to_string(),
            sig.signature,
        )])),
        ..Default::default()
    });
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "",
        "config": {},
        "created": "0001-01-01T00:00:00Z",
        "os": "",
        "rootfs": { "type": "layers", "diff_ids": layers.iter().map(|l| l.digest.clone()).collect::<Vec<_>>() },
    }))
    .expect("config serialises");
    let config_digest = registry
        .push_blob(&sig_ref, &config, "signature config", &NoProgress)
        .await?;
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(OCI_IMAGE_MEDIA_TYPE.into()),
        config: OciDescriptor {
            media_type: IMAGE_CONFIG_MEDIA_TYPE.into(),
            digest: config_digest,
            size: config.len() as i64,
            ..Default::default()
        },
        layers,
        subject: None,
        artifact_type: None,
        annotations: None,
    };
    let bytes = serde_json::to_vec(&manifest).expect("manifest serialises");
    registry
        .push_manifest(&sig_ref, &bytes, OCI_IMAGE_MEDIA_TYPE)
        .await?;
    Ok(sig_ref.whole())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sigstore::crypto::SigningScheme;

    fn signed(signer: &SigStoreSigner, digest: &str) -> StoredSignature {
        signed_as(signer, "r/p", digest)
    }

    fn signed_as(signer: &SigStoreSigner, repository: &str, digest: &str) -> StoredSignature {
        let payload = payload(repository, digest);
        let signature = signer.sign(&payload).unwrap();
        StoredSignature {
            payload,
            signature: base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                signature,
            ),
        }
    }

    /// A fresh P-256 signer and its public key (PEM).
    fn signer_and_key() -> (sigstore::crypto::SigStoreSigner, String) {
        let signer = SigningScheme::ECDSA_P256_SHA256_ASN1
            .create_signer()
            .unwrap();
        let pem = signer
            .to_sigstore_keypair()
            .unwrap()
            .public_key_to_pem()
            .unwrap();
        (signer, pem)
    }

    #[test]
    fn verifies_only_the_named_digest_with_the_right_key() {
        let (signer, pem) = signer_and_key();
        let (other, _) = signer_and_key();
        let mut policy = TrustPolicy::default();
        policy.add_key("r/", &pem).unwrap();
        let digest = sha256_digest(b"manifest");
        let good = signed(&signer, &digest);
        assert!(
            policy
                .verify("r/p", &digest, std::slice::from_ref(&good))
                .is_ok()
        );
        let err = policy
            .verify("r/p", &sha256_digest(b"other"), &[good])
            .unwrap_err();
        assert!(err.contains("another digest"), "{err}");
        let err = policy
            .verify("r/p", &digest, &[signed(&other, &digest)])
            .unwrap_err();
        assert!(err.contains("no signature verifies"), "{err}");
        let err = policy.verify("r/p", &digest, &[]).unwrap_err();
        assert!(err.contains("not signed"), "{err}");
        let err = policy.verify("elsewhere/p", &digest, &[]).unwrap_err();
        assert!(err.contains("no public key"), "{err}");
    }

    #[test]
    fn prefixes_end_at_path_boundaries_and_keys_require_signatures() {
        let (signer, pem) = signer_and_key();
        let mut policy = TrustPolicy::default();
        policy.add_key("ghcr.io/acme", &pem).unwrap();
        assert!(policy.rule_for("ghcr.io/acme").is_some());
        assert!(policy.rule_for("ghcr.io/acme/dns").is_some());
        assert!(policy.rule_for("ghcr.io/acme-evil/dns").is_none());
        assert!(policy.requires("ghcr.io/acme/dns"));
        assert!(!policy.requires("ghcr.io/other/dns"));
        // A signature counts only for the repository it names (or one listed as its origin).
        let digest = sha256_digest(b"manifest");
        let elsewhere = signed_as(&signer, "ghcr.io/acme/other", &digest);
        let err = policy
            .verify(
                "ghcr.io/acme/dns",
                &digest,
                std::slice::from_ref(&elsewhere),
            )
            .unwrap_err();
        assert!(err.contains("another repository"), "{err}");
        policy.rules[0].signed_as.push("ghcr.io/acme/other".into());
        assert!(
            policy
                .verify("ghcr.io/acme/dns", &digest, &[elsewhere])
                .is_ok()
        );
    }
}
