//! Registry access: one `oci_client::Client` per registry (tokens are per registry),
//! credentials from flags or the Docker config file, plain HTTP only for loopback or
//! explicitly allowed registries, and every byte checked against its digest.

use std::collections::HashMap;
use std::sync::Mutex;

use futures::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor};
use oci_client::secrets::RegistryAuth;
use oci_client::{Reference, RegistryOperation};

use super::artifact::{NewArtifact, PluginArtifact};
use super::error::OciError;
use super::sha256_digest;

/// Reports transfer progress (the CLI draws bars; the host passes [`NoProgress`]).
pub trait Progress: Send + Sync {
    /// A transfer of `total` bytes named `what` begins.
    fn start(&self, what: &str, total: u64);
    /// `n` more bytes moved.
    fn advance(&self, n: u64);
    /// The transfer ended.
    fn finish(&self);
}

/// No progress reporting.
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _: &str, _: u64) {}
    fn advance(&self, _: u64) {}
    fn finish(&self) {}
}

/// Largest manifest pulled (a plugin's is a few hundred bytes).
pub const MAX_MANIFEST_BYTES: usize = 4 << 20;
/// Largest blob pulled unless configured otherwise (first-party plugins are ~0.4 MiB).
pub const DEFAULT_MAX_BLOB_BYTES: u64 = 64 << 20;

/// How to reach registries.
#[derive(Debug, Clone)]
pub struct RegistryOptions {
    /// Registries (`host[:port]`) reached over plain HTTP besides loopback ones.
    pub insecure: Vec<String>,
    /// Credentials for `credentials_for` (or, when that is `None`, for the one registry a
    /// CLI command talks to); every other registry asks the Docker config file
    /// (`$DOCKER_CONFIG/config.json` or `~/.docker/config.json`).
    pub username: Option<String>,
    pub password: Option<String>,
    /// The registry (`host[:port]`) the credentials are for.
    pub credentials_for: Option<String>,
    /// Largest blob (a component) pulled.
    pub max_blob_bytes: u64,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        Self {
            insecure: Vec::new(),
            username: None,
            password: None,
            credentials_for: None,
            max_blob_bytes: DEFAULT_MAX_BLOB_BYTES,
        }
    }
}

/// A registry client shared by all transfers of the process.
pub struct Registry {
    options: RegistryOptions,
    clients: Mutex<HashMap<String, oci_client::Client>>,
}

/// True for `localhost`, `127.x.x.x` and `[::1]` registries (with any port).
pub fn is_loopback(registry: &str) -> bool {
    let host = match registry.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => registry.rsplit_once(':').map_or(registry, |(h, _)| h),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Parse `registry/repository[:tag][@sha256:…]`.
pub fn parse_reference(reference: &str) -> Result<Reference, OciError> {
    reference
        .parse::<Reference>()
        .map_err(|e| OciError::BadReference {
            reference: reference.to_string(),
            message: e.to_string(),
        })
}

fn is_not_found(err: &OciDistributionError) -> bool {
    match err {
        OciDistributionError::ImageManifestNotFoundError(_) => true,
        OciDistributionError::ServerError { code, .. } => *code == 404,
        OciDistributionError::RegistryError { envelope, .. } => envelope.errors.iter().any(|e| {
            matches!(
                e.code,
                oci_client::errors::OciErrorCode::ManifestUnknown
                    | oci_client::errors::OciErrorCode::BlobUnknown
                    | oci_client::errors::OciErrorCode::NameUnknown
            )
        }),
        _ => false,
    }
}

fn registry_error(reference: &Reference, err: OciDistributionError) -> OciError {
    if is_not_found(&err) {
        return OciError::NotFound {
            reference: reference.whole(),
        };
    }
    // reqwest hides the cause (connection refused, TLS) behind "error sending request".
    let mut message = err.to_string();
    let mut source = std::error::Error::source(&err);
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message = format!("{message}: {text}");
        }
        source = cause.source();
    }
    OciError::Registry {
        reference: reference.whole(),
        message,
    }
}

impl Registry {
    pub fn new(options: RegistryOptions) -> Self {
        // reqwest is built without a provider of its own; kube's ring provider serves both.
        // Fails harmlessly when one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Self {
            options,
            clients: Mutex::new(HashMap::new()),
        }
    }

    fn client(&self, reference: &Reference) -> oci_client::Client {
        let registry = reference.resolve_registry().to_string();
        let mut clients = self.clients.lock().expect("registry clients lock");
        clients
            .entry(registry.clone())
            .or_insert_with(|| {
                let plain = is_loopback(&registry) || self.options.insecure.contains(&registry);
                oci_client::Client::new(ClientConfig {
                    protocol: if plain {
                        ClientProtocol::Http
                    } else {
                        ClientProtocol::Https
                    },
                    connect_timeout: Some(std::time::Duration::from_secs(10)),
                    read_timeout: Some(std::time::Duration::from_secs(60)),
                    ..Default::default()
                })
            })
            .clone()
    }

    /// Credentials for `reference`'s registry: the configured ones only for the registry
    /// they are for.
    pub fn auth(&self, reference: &Reference) -> RegistryAuth {
        let registry = reference.resolve_registry();
        let ours = self
            .options
            .credentials_for
            .as_deref()
            .is_none_or(|r| r == registry || r == reference.registry());
        if let (true, Some(user), Some(password)) =
            (ours, &self.options.username, &self.options.password)
        {
            return RegistryAuth::Basic(user.clone(), password.clone());
        }
        match docker_credential::get_credential(registry) {
            Ok(docker_credential::DockerCredential::UsernamePassword(user, password)) => {
                RegistryAuth::Basic(user, password)
            }
            Ok(docker_credential::DockerCredential::IdentityToken(token)) => {
                RegistryAuth::Bearer(token)
            }
            Err(_) => RegistryAuth::Anonymous,
        }
    }

    async fn authed(
        &self,
        reference: &Reference,
        operation: RegistryOperation,
    ) -> Result<oci_client::Client, OciError> {
        let client = self.client(reference);
        client
            .auth(reference, &self.auth(reference), operation)
            .await
            .map_err(|e| registry_error(reference, e))?;
        Ok(client)
    }

    /// The manifest digest a tag points at now (a digest reference resolves to itself).
    pub async fn resolve(&self, reference: &Reference) -> Result<String, OciError> {
        if let Some(digest) = reference.digest() {
            return Ok(digest.to_string());
        }
        let client = self.client(reference);
        client
            .fetch_manifest_digest(reference, &self.auth(reference))
            .await
            .map_err(|e| registry_error(reference, e))
    }

    /// The raw manifest and its digest. When `reference` names a digest, the bytes must
    /// hash to it.
    pub async fn pull_manifest(
        &self,
        reference: &Reference,
    ) -> Result<(Vec<u8>, String), OciError> {
        let client = self.client(reference);
        let (bytes, _) = client
            .pull_manifest_raw(
                reference,
                &self.auth(reference),
                &[
                    OCI_IMAGE_MEDIA_TYPE,
                    oci_client::manifest::IMAGE_MANIFEST_MEDIA_TYPE,
                ],
            )
            .await
            .map_err(|e| registry_error(reference, e))?;
        if bytes.len() > MAX_MANIFEST_BYTES {
            return Err(OciError::TooLarge {
                reference: reference.whole(),
                size: bytes.len() as u64,
                limit: MAX_MANIFEST_BYTES as u64,
            });
        }
        let actual = sha256_digest(&bytes);
        if let Some(expected) = reference.digest()
            && expected != actual
        {
            return Err(OciError::DigestMismatch {
                reference: reference.whole(),
                expected: expected.to_string(),
                actual,
            });
        }
        Ok((bytes.to_vec(), actual))
    }

    /// Pull a plugin's manifest by `digest` (from `reference`'s repository).
    pub async fn pull_artifact(
        &self,
        reference: &Reference,
        digest: &str,
    ) -> Result<PluginArtifact, OciError> {
        let pinned = reference.clone_with_digest(digest.to_string());
        let (bytes, _) = self.pull_manifest(&pinned).await?;
        PluginArtifact::parse(&pinned.whole(), bytes)
    }

    /// Pull one blob, checking size and sha256.
    pub async fn pull_blob(
        &self,
        reference: &Reference,
        descriptor: &OciDescriptor,
        progress: &dyn Progress,
    ) -> Result<Vec<u8>, OciError> {
        let limit = self.options.max_blob_bytes;
        if descriptor.size < 0 || descriptor.size as u64 > limit {
            return Err(OciError::TooLarge {
                reference: format!("{}@{}", reference.whole(), descriptor.digest),
                size: descriptor.size.max(0) as u64,
                limit,
            });
        }
        let client = self.authed(reference, RegistryOperation::Pull).await?;
        let mut stream = client
            .pull_blob_stream(reference, descriptor)
            .await
            .map_err(|e| registry_error(reference, e))?;
        progress.start(&descriptor.digest, descriptor.size.max(0) as u64);
        let mut bytes = Vec::with_capacity(descriptor.size.clamp(0, 64 << 20) as usize);
        let mismatch = |actual: String| OciError::DigestMismatch {
            reference: format!("{}@{}", reference.whole(), descriptor.digest),
            expected: descriptor.digest.clone(),
            actual,
        };
        while let Some(chunk) = stream.stream.next().await {
            let chunk = chunk.map_err(|e| {
                if e.to_string().to_lowercase().contains("digest") {
                    mismatch(e.to_string())
                } else {
                    OciError::Registry {
                        reference: reference.whole(),
                        message: e.to_string(),
                    }
                }
            })?;
            progress.advance(chunk.len() as u64);
            bytes.extend_from_slice(&chunk);
            if bytes.len() as i64 > descriptor.size {
                progress.finish();
                return Err(mismatch(format!("more than {} bytes", descriptor.size)));
            }
        }
        progress.finish();
        let actual = sha256_digest(&bytes);
        if actual != descriptor.digest {
            return Err(mismatch(actual));
        }
        Ok(bytes)
    }

    /// Push a blob unless the registry has it.
    pub async fn push_blob(
        &self,
        reference: &Reference,
        bytes: &[u8],
        what: &str,
        progress: &dyn Progress,
    ) -> Result<String, OciError> {
        let client = self.authed(reference, RegistryOperation::Push).await?;
        let digest = sha256_digest(bytes);
        progress.start(what, bytes.len() as u64);
        let exists = client
            .blob_exists(reference, &digest)
            .await
            .map_err(|e| registry_error(reference, e))?;
        if !exists {
            client
                .push_blob(reference, bytes.to_vec(), &digest)
                .await
                .map_err(|e| registry_error(reference, e))?;
        }
        progress.advance(bytes.len() as u64);
        progress.finish();
        Ok(digest)
    }

    /// Push a manifest under `reference` (a tag, or its own digest); returns its digest.
    pub async fn push_manifest(
        &self,
        reference: &Reference,
        bytes: &[u8],
        media_type: &str,
    ) -> Result<String, OciError> {
        let client = self.authed(reference, RegistryOperation::Push).await?;
        let content_type = media_type.parse().map_err(|_| OciError::Registry {
            reference: reference.whole(),
            message: format!("bad media type {media_type}"),
        })?;
        client
            .push_manifest_raw(reference, bytes.to_vec(), content_type)
            .await
            .map_err(|e| registry_error(reference, e))?;
        Ok(sha256_digest(bytes))
    }

    /// Push a whole plugin artifact; returns the manifest digest.
    pub async fn push_artifact(
        &self,
        reference: &Reference,
        new: &NewArtifact,
        progress: &dyn Progress,
    ) -> Result<String, OciError> {
        self.push_blob(reference, &new.config, "config", progress)
            .await?;
        self.push_blob(reference, &new.component, "component", progress)
            .await?;
        let media_type = new
            .artifact
            .manifest
            .media_type
            .clone()
            .unwrap_or_else(|| OCI_IMAGE_MEDIA_TYPE.into());
        self.push_manifest(reference, &new.artifact.manifest_bytes, &media_type)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_go_to_their_registry_only() {
        let registry = Registry::new(RegistryOptions {
            username: Some("a".into()),
            password: Some("secret".into()),
            credentials_for: Some("registry.a.example".into()),
            ..RegistryOptions::default()
        });
        let ours = parse_reference("registry.a.example/team/p:1").unwrap();
        assert!(matches!(registry.auth(&ours), RegistryAuth::Basic(u, _) if u == "a"));
        let theirs = parse_reference("registry.b.example/team/p:1").unwrap();
        assert!(!matches!(registry.auth(&theirs), RegistryAuth::Basic(u, _) if u == "a"));
    }

    #[test]
    fn loopback_registries() {
        assert!(is_loopback("127.0.0.1:5000"));
        assert!(is_loopback("localhost:5000"));
        assert!(is_loopback("localhost"));
        assert!(is_loopback("[::1]:5000"));
        assert!(!is_loopback("ghcr.io"));
        assert!(!is_loopback("registry.example.com:5000"));
        assert!(!is_loopback("10.0.0.1:5000"));
    }
}
