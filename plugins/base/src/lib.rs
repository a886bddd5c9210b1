//! `base`: the Shoot skeleton — purpose, region, networking — plus the Runtime-wide checks
//! every later plugin relies on. The Shoot's identity (name, project namespace, credentials
//! binding) is pinned by the host, which starts the chain with it; `base` checks the name
//! and binding and sets them again to the same values, so the plugin also renders a
//! complete skeleton on its own (golden cases).

use serde::Deserialize;
use tessera_sdk::models::{RuntimeShoot, Shoot, ShootNetworking};
use tessera_sdk::util::Cidr;
use tessera_sdk::{ExtendInput, ExtendOutput, PluginError, ShootExtension};

pub struct Base;

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// Networking type when the Runtime does not set one.
    pub default_networking_type: String,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            default_networking_type: "calico".into(),
        }
    }
}

const PURPOSES: &[&str] = &[
    "evaluation",
    "testing",
    "development",
    "production",
    "infrastructure",
];

fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Gardener refuses secret bindings from Kubernetes 1.34 (gardener
/// pkg/api/core/validation/shoot.go `ValidateShootSpec`): a Runtime naming such a version
/// with a secret binding is refused here, naming the field, rather than by Gardener.
fn check_secret_binding(version: Option<&str>) -> Result<(), PluginError> {
    let too_new = version.is_some_and(|v| {
        tessera_sdk::util::compare_versions(v, "1.34") != std::cmp::Ordering::Less
    });
    match too_new {
        true => Err(PluginError::invalid_input(
            "spec.shoot.secretBindingName",
            format!(
                "Gardener refuses secret bindings from Kubernetes 1.34 (the Runtime asks for {}): name a credentials binding (credentialsBindingName) instead",
                version.unwrap_or_default()
            ),
        )),
        false => Ok(()),
    }
}

impl ShootExtension for Base {
    const NAME: &'static str = "base";
    const DESCRIPTION: &'static str =
        "Shoot skeleton: name, namespace, purpose, region, credentials, networking";
    type Config = Config;

    fn extend(input: ExtendInput<Config>) -> Result<ExtendOutput, PluginError> {
        let rt = &input.runtime.spec.shoot;
        check(rt)?;
        let net = &rt.networking;
        let mut shoot: Shoot = input.draft;
        shoot.metadata.name = Some(rt.name.clone());
        let spec = &mut shoot.spec;
        spec.purpose = Some(rt.purpose.clone());
        spec.region = Some(rt.region.clone());
        match (&rt.credentials_binding_name, &rt.secret_binding_name) {
            (Some(credentials), _) => spec.credentials_binding_name = Some(credentials.clone()),
            // The host names the secret binding's credentials binding instead (KIM's
            // `gardener.enableCredentialBinding`): the draft says so.
            (None, Some(secret)) if spec.credentials_binding_name.as_ref() == Some(secret) => {}
            (None, Some(secret)) => {
                check_secret_binding(rt.kubernetes.version.as_deref())?;
                spec.secret_binding_name = Some(secret.clone());
            }
            (None, None) => {
                return Err(PluginError::invalid_input(
                    "spec.shoot.secretBindingName",
                    "set secretBindingName or credentialsBindingName",
                ));
            }
        }
        let networking = spec.networking.get_or_insert_with(ShootNetworking::default);
        networking.type_ = Some(
            net.type_
                .clone()
                .unwrap_or_else(|| input.config.default_networking_type.clone()),
        );
        networking.nodes = Some(net.nodes.clone());
        networking.pods = Some(net.pods.clone());
        networking.services = Some(net.services.clone());
        if let Some(families) = ip_families(rt, input.current.as_ref())? {
            networking.ip_families = Some(families);
        }
        // KIM `ExtendWithNetworking`: gdch runs Calico with VXLAN overlay.
        if rt.provider.type_ == "gdch" {
            networking.extra.insert(
                "providerConfig".into(),
                serde_json::json!({
                    "apiVersion": "calico.networking.extensions.gardener.cloud/v1alpha1",
                    "kind": "NetworkConfig",
                    "vxlan": {"enabled": true},
                    "overlay": {"enabled": true},
                }),
            );
        }
        Ok(ExtendOutput::new(shoot))
    }
}

/// The Runtime's name, purpose, region and networks as Gardener will accept them, or the
/// field at fault.
fn check(rt: &RuntimeShoot) -> Result<(), PluginError> {
    if !is_dns_label(&rt.name) {
        return Err(PluginError::invalid_input(
            "spec.shoot.name",
            format!(
                "{:?} is not a valid Shoot name (lower-case letters, digits and '-', at most 63)",
                rt.name
            ),
        ));
    }
    if !PURPOSES.contains(&rt.purpose.as_str()) {
        return Err(PluginError::invalid_input(
            "spec.shoot.purpose",
            format!(
                "unknown purpose {:?}; expected one of {}",
                rt.purpose,
                PURPOSES.join(", ")
            ),
        ));
    }
    if rt.region.is_empty() {
        return Err(PluginError::invalid_input(
            "spec.shoot.region",
            "region is empty",
        ));
    }
    let net = &rt.networking;
    let parse = |field: &str, value: &str| {
        Cidr::parse(value)
            .map_err(|e| PluginError::invalid_input(format!("spec.shoot.networking.{field}"), e))
    };
    let ranges = [
        ("nodes", parse("nodes", &net.nodes)?),
        ("pods", parse("pods", &net.pods)?),
        ("services", parse("services", &net.services)?),
    ];
    for (i, (a_name, a)) in ranges.iter().enumerate() {
        for (b_name, b) in &ranges[i + 1..] {
            if a.overlaps(b) {
                return Err(PluginError::invalid_input(
                    format!("spec.shoot.networking.{b_name}"),
                    format!("{b_name} range {b} overlaps {a_name} range {a}"),
                ));
            }
        }
    }
    Ok(())
}

/// Providers whose Gardener extension runs dual-stack (IPv4 and IPv6) Shoots.
const DUAL_STACK_PROVIDERS: &[&str] = &["aws", "gcp"];

/// `spec.networking.ipFamilies` for `networking.dualStack`. Gardener cannot take IPv6 away
/// from a running Shoot, so turning it off is refused.
fn ip_families(
    rt: &RuntimeShoot,
    current: Option<&Shoot>,
) -> Result<Option<Vec<String>>, PluginError> {
    let field = "spec.shoot.networking.dualStack";
    let running_dual = current
        .and_then(|s| s.spec.networking.as_ref())
        .and_then(|n| n.ip_families.as_ref())
        .is_some_and(|f| f.iter().any(|f| f == "IPv6"));
    if rt.networking.dual_stack != Some(true) {
        if running_dual {
            return Err(PluginError::invalid_input(
                field,
                "the Shoot runs dual-stack; Gardener cannot turn IPv6 off",
            ));
        }
        return Ok(None);
    }
    let provider = rt.provider.type_.as_str();
    if !DUAL_STACK_PROVIDERS.contains(&provider) {
        return Err(PluginError::invalid_input(
            field,
            format!(
                "dual-stack networking is offered on {} only, not on {provider}",
                DUAL_STACK_PROVIDERS.join(" and ")
            ),
        ));
    }
    Ok(Some(vec!["IPv4".into(), "IPv6".into()]))
}

tessera_sdk::export_shoot_extension!(Base);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(Base);
