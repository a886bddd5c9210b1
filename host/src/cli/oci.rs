//! `tessera plugin push/pull/inspect/sign/verify/keygen/save/load`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use sigstore::crypto::SigningScheme;
use sigstore::crypto::signing_key::SigStoreKeyPair;
use tessera::oci::artifact::ArtifactMeta;
use tessera::oci::signature::{self, repository_of};
use tessera::oci::{PluginArtifact, TrustPolicy, layout, parse_reference};
use tessera::wasm::WasmRuntime;

use super::registry::{Bars, RegistryArgs};

pub async fn push(
    rt: &WasmRuntime,
    args: &RegistryArgs,
    file: &Path,
    reference: &str,
    version: Option<String>,
    sign_with: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    // Read the key first: a wrong password should fail before anything is pushed.
    let signer = sign_with.map(signer_of).transpose()?;
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let source = file.display().to_string();
    let inspection = rt.inspect(&bytes, &source)?;
    let kind = inspection.kind.with_context(|| {
        format!("{source} is not a Tessera plugin (it exports no Tessera world)")
    })?;
    // Loading proves the component links and answers `info()` before anyone pulls it.
    let info = rt.load_kind(&bytes, &source, kind)?.info().clone();
    let meta = ArtifactMeta {
        name: Some(info.name.clone()),
        version: Some(version.unwrap_or(info.version.clone())),
        kind: Some(kind.to_string()),
        contract: inspection.contract.clone(),
        description: (!info.description.is_empty()).then(|| info.description.clone()),
        // Only from $SOURCE_DATE_EPOCH: the same bytes pushed twice must give the same
        // digest, or a signature made for the first push is orphaned by the second.
        created: source_date(),
    };
    let parsed = parse_reference(reference)?;
    let new = PluginArtifact::build(bytes, &inspection, meta);
    let registry = args.registry();
    let digest = registry.push_artifact(&parsed, &new, &Bars::new()).await?;
    eprintln!(
        "pushed {} {} ({} bytes) to {}",
        info.name,
        new.artifact.meta.version.as_deref().unwrap_or_default(),
        new.component.len(),
        parsed.whole()
    );
    if let Some(signer) = &signer {
        let at = signature::sign(&registry, &parsed, &digest, signer).await?;
        eprintln!("signed {}@{digest} → {at}", parsed.whole());
    }
    println!("{digest}");
    Ok(ExitCode::SUCCESS)
}

/// `$SOURCE_DATE_EPOCH` (the reproducible-builds convention) as an RFC 3339 time.
fn source_date() -> Option<String> {
    let seconds: i64 = std::env::var("SOURCE_DATE_EPOCH")
        .ok()?
        .trim()
        .parse()
        .ok()?;
    jiff::Timestamp::from_second(seconds)
        .ok()
        .map(|t| t.to_string())
}

fn policy_for(
    reference: &oci_client::Reference,
    key: &Path,
    signed_as: &[String],
) -> anyhow::Result<TrustPolicy> {
    let pem =
        std::fs::read_to_string(key).with_context(|| format!("cannot read {}", key.display()))?;
    let mut policy = TrustPolicy::default();
    let repository = repository_of(reference);
    policy
        .add_key(&repository, &pem)
        .map_err(|e| anyhow::anyhow!("{}: {e}", key.display()))?;
    policy.add_signed_as(&repository, signed_as);
    Ok(policy)
}

pub async fn pull(
    args: &RegistryArgs,
    reference: &str,
    output: Option<PathBuf>,
    key: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    let parsed = parse_reference(reference)?;
    let registry = args.registry();
    let digest = registry.resolve(&parsed).await?;
    if let Some(key) = &key {
        let policy = policy_for(&parsed, key, &[])?;
        let signatures = signature::fetch(&registry, &parsed, &digest).await?;
        let outcome = policy
            .verify(&repository_of(&parsed), &digest, &signatures)
            .map_err(anyhow::Error::msg)?;
        eprintln!("signature verified with key {}", outcome.key);
    }
    let artifact = registry.pull_artifact(&parsed, &digest).await?;
    let pinned = parsed.clone_with_digest(digest.clone());
    let component = registry
        .pull_blob(&pinned, &artifact.layer, &Bars::new())
        .await?;
    let output = output.unwrap_or_else(|| {
        let name = parsed.repository().rsplit('/').next().unwrap_or("plugin");
        PathBuf::from(format!("{name}.wasm"))
    });
    std::fs::write(&output, &component)
        .with_context(|| format!("cannot write {}", output.display()))?;
    eprintln!(
        "pulled {}@{digest} → {} ({} bytes, component {})",
        parsed.whole(),
        output.display(),
        component.len(),
        artifact.component_digest()
    );
    Ok(ExitCode::SUCCESS)
}

pub async fn inspect_remote(
    args: &RegistryArgs,
    reference: &str,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let parsed = parse_reference(reference)?;
    let registry = args.registry();
    let digest = registry.resolve(&parsed).await?;
    let artifact = registry.pull_artifact(&parsed, &digest).await?;
    let signatures = signature::fetch(&registry, &parsed, &digest).await?;
    if json {
        let doc = serde_json::json!({
            "reference": parsed.whole(),
            "digest": digest,
            "componentDigest": artifact.component_digest(),
            "size": artifact.layer.size,
            "mediaType": artifact.layer.media_type,
            "configMediaType": artifact.manifest.config.media_type,
            "meta": artifact.meta,
            "signatures": signatures.len(),
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(ExitCode::SUCCESS);
    }
    let m = &artifact.meta;
    let or_dash = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
    println!("reference:  {}", parsed.whole());
    println!("digest:     {digest}");
    println!(
        "component:  {} ({} bytes)",
        artifact.component_digest(),
        artifact.layer.size
    );
    println!("name:       {}", or_dash(&m.name));
    println!("version:    {}", or_dash(&m.version));
    println!("kind:       {}", or_dash(&m.kind));
    println!("contract:   {}", or_dash(&m.contract));
    println!("created:    {}", or_dash(&m.created));
    println!("signatures: {}", signatures.len());
    Ok(ExitCode::SUCCESS)
}

fn password() -> Vec<u8> {
    std::env::var("COSIGN_PASSWORD")
        .unwrap_or_default()
        .into_bytes()
}

fn read_private_key(key: &Path) -> anyhow::Result<SigStoreKeyPair> {
    let pem = std::fs::read(key).with_context(|| format!("cannot read {}", key.display()))?;
    if String::from_utf8_lossy(&pem).contains("ENCRYPTED") {
        SigStoreKeyPair::from_encrypted_pem(&pem, &password()).map_err(|e| {
            anyhow::anyhow!(
                "{}: cannot decrypt (is $COSIGN_PASSWORD right?): {e}",
                key.display()
            )
        })
    } else {
        SigStoreKeyPair::from_pem(&pem).map_err(|e| anyhow::anyhow!("{}: {e}", key.display()))
    }
}

/// The signer for a private key file.
fn signer_of(key: &Path) -> anyhow::Result<sigstore::crypto::SigStoreSigner> {
    let pair = read_private_key(key)?;
    pair.to_sigstore_signer(&SigningScheme::ECDSA_P256_SHA256_ASN1)
        .or_else(|_| pair.to_sigstore_signer(&SigningScheme::ED25519))
        .map_err(|e| anyhow::anyhow!("{}: unsupported key: {e}", key.display()))
}

pub async fn sign(args: &RegistryArgs, reference: &str, key: &Path) -> anyhow::Result<ExitCode> {
    let signer = signer_of(key)?;
    let parsed = parse_reference(reference)?;
    let registry = args.registry();
    let digest = registry.resolve(&parsed).await?;
    // Only plugins are signed here: refuse anything else before writing to the registry.
    registry.pull_artifact(&parsed, &digest).await?;
    let at = signature::sign(&registry, &parsed, &digest, &signer).await?;
    eprintln!("signed {}@{digest} → {at}", parsed.whole());
    Ok(ExitCode::SUCCESS)
}

pub async fn verify(
    args: &RegistryArgs,
    reference: &str,
    key: &Path,
    signed_as: &[String],
) -> anyhow::Result<ExitCode> {
    let parsed = parse_reference(reference)?;
    let registry = args.registry();
    let digest = registry.resolve(&parsed).await?;
    let policy = policy_for(&parsed, key, signed_as)?;
    let signatures = signature::fetch(&registry, &parsed, &digest).await?;
    match policy.verify(&repository_of(&parsed), &digest, &signatures) {
        Ok(outcome) => {
            println!(
                "verified {}@{digest} with key {}",
                parsed.whole(),
                outcome.key
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(message) => bail!(message),
    }
}

pub fn keygen(prefix: &Path, allow_empty_password: bool) -> anyhow::Result<ExitCode> {
    if password().is_empty() && !allow_empty_password {
        bail!(
            "$COSIGN_PASSWORD is empty: set it to encrypt the private key, or pass \
             --allow-empty-password to write it with an empty password"
        );
    }
    let signer = SigningScheme::ECDSA_P256_SHA256_ASN1
        .create_signer()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let pair = signer
        .to_sigstore_keypair()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let private = pair
        .private_key_to_encrypted_pem(&password())
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let public = pair
        .public_key_to_pem()
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let key_path = prefix.with_extension("key");
    let pub_path = prefix.with_extension("pub");
    if key_path.exists() {
        bail!(
            "{} exists; not overwriting a private key",
            key_path.display()
        );
    }
    std::fs::write(&key_path, private.as_bytes())
        .with_context(|| format!("cannot write {}", key_path.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key_path, std::fs::Permissions::from_mode(0o600))?;
    }
    std::fs::write(&pub_path, public.as_bytes())
        .with_context(|| format!("cannot write {}", pub_path.display()))?;
    eprintln!("wrote {} and {}", key_path.display(), pub_path.display());
    Ok(ExitCode::SUCCESS)
}

pub async fn save(
    args: &RegistryArgs,
    references: &[String],
    output: &Path,
) -> anyhow::Result<ExitCode> {
    let parsed = references
        .iter()
        .map(|r| parse_reference(r))
        .collect::<Result<Vec<_>, _>>()?;
    let copied = layout::save(&args.registry(), &parsed, output, &Bars::new()).await?;
    for c in &copied {
        println!(
            "saved {} {}{}",
            c.reference,
            c.digest,
            if c.signature { " (signature)" } else { "" }
        );
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn load(
    args: &RegistryArgs,
    dir: &Path,
    to_registry: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let copied = layout::load(&args.registry(), dir, to_registry, &Bars::new()).await?;
    for c in &copied {
        println!(
            "loaded {} {}{}",
            c.reference,
            c.digest,
            if c.signature { " (signature)" } else { "" }
        );
    }
    Ok(ExitCode::SUCCESS)
}
