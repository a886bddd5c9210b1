//! `extensions`: Gardener extensions Kyma clusters run — networking filter, certificates,
//! OIDC, NVIDIA OpenShell, the API server ACL (`kubeAPIServer.acl`) and the registry cache (the
//! operator's and the Runtime's `imageRegistryCache`). Upserted by type; the ACL and
//! OpenShell are disabled and the registry cache removed when nothing asks for them; on
//! patch every other extension on the Shoot stays untouched. `shoot-dns-service` is the
//! `dns` plugin's.

use serde::Deserialize;
use serde_json::{Value, json};
use std::net::IpAddr;

use tessera_sdk::models::{Acl, Extension, Filter, ImageRegistryCache, Shoot, ShootSpec};
use tessera_sdk::{ExtendInput, ExtendOutput, Operation, PluginError, ShootExtension};

pub struct Extensions;

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// The networking filter on the landscape (KIM's flag `-network-restriction-enabled`):
    /// off, no filter extension is added and an existing one is left as it is.
    pub networking_filter: bool,
    pub cert_service: bool,
    pub oidc_service: bool,
    /// Registry cache `providerConfig` (a `RegistryConfig`); unset: no registry cache.
    pub registry_cache: Option<Value>,
    /// The API server ACL (KIM's flag `-api-server-acl-enabled` and the ConfigMap
    /// `kubeApiServer.acl.configMapName` names).
    pub acl: AclConfig,
}

/// Who may always reach an API server with an ACL, and where ACLs apply.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(schemars::JsonSchema))]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct AclConfig {
    /// Off: a Runtime's `acl` is ignored (with a warning) and an existing ACL disabled.
    pub enabled: bool,
    /// Provider types whose Shoots get the ACL (KIM: aws and azure).
    pub providers: Vec<String>,
    /// Operators' CIDRs, appended to every ACL (KIM's ConfigMap key `acl-list.json`).
    pub operator_cidrs: Vec<String>,
    /// The control plane's egress address, appended last (`kcp-external-nat-ip.json`).
    pub kcp_nat_ip: String,
}

impl Default for AclConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            providers: vec!["aws".into(), "azure".into()],
            operator_cidrs: Vec::new(),
            kcp_nat_ip: String::new(),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            networking_filter: true,
            cert_service: true,
            oidc_service: true,
            registry_cache: None,
            acl: AclConfig::default(),
        }
    }
}

fn extension(type_: &str, provider_config: Option<Value>, disabled: Option<bool>) -> Extension {
    Extension {
        type_: type_.into(),
        provider_config,
        disabled,
        extra: Default::default(),
    }
}

impl ShootExtension for Extensions {
    const NAME: &'static str = "extensions";
    const DESCRIPTION: &'static str =
        "Networking filter, cert, OIDC, ACL, NVIDIA OpenShell and registry-cache extensions";
    type Config = Config;

    fn extend(input: ExtendInput<Config>) -> Result<ExtendOutput, PluginError> {
        let config = &input.config;
        let mut shoot = input.draft;
        if input.operation == Operation::Patch {
            start_from_current(&mut shoot, input.current.as_ref());
        }
        let spec = &mut shoot.spec;
        kyma_defaults(spec, config, &input.runtime.spec.security.networking.filter);
        let rt = &input.runtime.spec;
        let mut warnings = Vec::new();
        let requested = rt.shoot.kubernetes.kube_api_server.acl.as_ref();
        acl(
            spec,
            requested,
            &rt.shoot.provider.type_,
            &config.acl,
            &mut warnings,
        )?;
        nvidia_openshell(spec, rt.shoot.enable_nvidia_openshell);
        let caches = rt.image_registry_cache.as_deref().unwrap_or_default();
        host_copies(caches)?;
        let registry = registry_config(config.registry_cache.as_ref(), caches)?;
        match &registry {
            Some(r) => {
                spec.upsert_extension(extension("registry-cache", Some(r.clone()), Some(false)))
            }
            None => remove_extension(spec, "registry-cache"),
        }
        reference_secrets(
            &mut shoot,
            input.current.as_ref(),
            caches,
            registry.as_ref(),
        );
        Ok(ExtendOutput::with_warnings(shoot, warnings))
    }
}

/// On patch: start from the extensions Gardener has, then upsert ours.
fn start_from_current(shoot: &mut Shoot, current: Option<&Shoot>) {
    let Some(mut merged) = current.and_then(|s| s.spec.extensions.clone()) else {
        return;
    };
    for ext in shoot.spec.extensions.take().unwrap_or_default() {
        match merged.iter_mut().find(|e| e.type_ == ext.type_) {
            Some(slot) => *slot = ext,
            None => merged.push(ext),
        }
    }
    shoot.spec.extensions = Some(merged);
}

/// The extensions every Kyma cluster runs, as configured.
fn kyma_defaults(spec: &mut ShootSpec, config: &Config, filter: &Filter) {
    if config.networking_filter {
        // KIM's `NewNetworkFilterExtension`: off is `disabled: true` alone; on carries a
        // providerConfig (without apiVersion and kind, as KIM writes it) only to blackhole
        // ingress.
        let ingress = filter.ingress.as_ref().is_some_and(|i| i.enabled);
        let config = (filter.egress.enabled && ingress)
            .then(|| json!({ "egressFilter": { "blackholingEnabled": true } }));
        spec.upsert_extension(extension(
            "shoot-networking-filter",
            config,
            Some(!filter.egress.enabled),
        ));
    }
    if config.cert_service {
        spec.upsert_extension(extension(
            "shoot-cert-service",
            Some(json!({
                "apiVersion": "service.cert.extensions.gardener.cloud/v1alpha1",
                "kind": "CertConfig",
                "shootIssuers": { "enabled": true },
            })),
            None,
        ));
    }
    if config.oidc_service {
        spec.upsert_extension(extension("shoot-oidc-service", None, Some(false)));
    }
}

fn remove_extension(spec: &mut ShootSpec, type_: &str) {
    if let Some(extensions) = spec.extensions.as_mut() {
        extensions.retain(|e| e.type_ != type_);
    }
}

/// Whether `text` is an IPv4 or IPv6 CIDR.
fn is_cidr(text: &str) -> bool {
    let Some((address, prefix)) = text.split_once('/') else {
        return false;
    };
    let Ok(prefix) = prefix.parse::<u8>() else {
        return false;
    };
    match address.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => prefix <= 32,
        Ok(IpAddr::V6(_)) => prefix <= 128,
        Err(_) => false,
    }
}

/// `kubeAPIServer.acl`: Gardener's ACL extension letting only the Runtime's CIDRs, the
/// operators' and the control plane's reach the API server (KIM's `AclNeedsToBeEnabled`,
/// `NewApiServerACLExtension`). Without an ACL to apply, an ACL the Shoot has is disabled,
/// not removed, and none is added.
fn acl(
    spec: &mut ShootSpec,
    acl: Option<&Acl>,
    provider: &str,
    config: &AclConfig,
    warnings: &mut Vec<String>,
) -> Result<(), PluginError> {
    let field = "spec.shoot.kubernetes.kubeAPIServer.acl.allowedCIDRs";
    let cidrs = acl.map(|a| a.allowed_cidrs.as_slice()).unwrap_or_default();
    for (i, cidr) in cidrs.iter().enumerate() {
        if !is_cidr(cidr) {
            return Err(PluginError::invalid_input(
                format!("{field}[{i}]"),
                format!("{cidr:?} is not a CIDR (like 10.0.0.0/8 or 2001:db8::/32)"),
            ));
        }
    }
    let applies = config.enabled && config.providers.iter().any(|p| p == provider);
    if !cidrs.is_empty() && !applies {
        warnings.push(format!(
            "{field}: no API server ACL for provider {provider} on this landscape; the list is ignored"
        ));
    }
    if cidrs.is_empty() || !applies {
        let existing = spec.extension("acl").is_some();
        if existing {
            spec.upsert_extension(extension("acl", None, Some(true)));
        }
        return Ok(());
    }
    let landscape = config.operator_cidrs.iter().chain([&config.kcp_nat_ip]);
    if let Some(bad) = landscape.filter(|c| !c.is_empty()).find(|c| !is_cidr(c)) {
        return Err(PluginError::invalid_input(
            "plugin configuration acl.operatorCidrs, acl.kcpNatIp",
            format!("{bad:?} is not a CIDR (like 10.0.0.0/8 or 2001:db8::/32)"),
        ));
    }
    if config.kcp_nat_ip.is_empty() {
        warnings.push(
            "plugin configuration acl.kcpNatIp is empty: the API server ACL leaves out the control plane's address, so the host may lose access to this cluster".into(),
        );
    }
    let mut all: Vec<&str> = cidrs.iter().map(String::as_str).collect();
    all.extend(config.operator_cidrs.iter().map(String::as_str));
    all.push(config.kcp_nat_ip.as_str());
    all.retain(|c| !c.is_empty());
    let rule = json!({ "action": "ALLOW", "cidrs": all, "type": "remote_ip" });
    spec.upsert_extension(extension("acl", Some(json!({ "rule": rule })), Some(false)));
    Ok(())
}

/// KIM's `shoot-nvidia-openshell`: enabled as the Runtime asks; once on the Shoot, turned
/// off by `disabled: true`.
fn nvidia_openshell(spec: &mut ShootSpec, enabled: Option<bool>) {
    const TYPE: &str = "shoot-nvidia-openshell";
    let existing = spec.extension(TYPE).is_some();
    match enabled {
        Some(true) => spec.upsert_extension(extension(TYPE, None, Some(false))),
        _ if existing => spec.upsert_extension(extension(TYPE, None, Some(true))),
        _ => {}
    }
}

/// The registry cache's `RegistryConfig`: the operator's configuration with the Runtime's
/// caches (a Runtime cache replaces the operator's for the same upstream); `None`: no cache.
fn registry_config(
    configured: Option<&Value>,
    caches: &[ImageRegistryCache],
) -> Result<Option<Value>, PluginError> {
    if caches.is_empty() {
        return Ok(configured.cloned());
    }
    let mut upstreams = Vec::new();
    for (i, cache) in caches.iter().enumerate() {
        let field = format!("spec.imageRegistryCache[{i}].config.upstream");
        let upstream = cache.config.upstream.as_str();
        if upstream.is_empty() || upstream.contains("://") || upstream.contains('/') {
            return Err(PluginError::invalid_input(
                field,
                format!(
                    "{upstream:?} is not a registry host (like docker.io or registry.example.com:5000)"
                ),
            ));
        }
        if upstreams.contains(&upstream) {
            return Err(PluginError::invalid_input(
                field,
                format!("{upstream} is cached twice"),
            ));
        }
        upstreams.push(upstream);
    }
    let mut registry = configured.cloned().unwrap_or_else(|| {
        json!({ "apiVersion": "registry.extensions.gardener.cloud/v1alpha3", "kind": "RegistryConfig" })
    });
    let mut merged: Vec<Value> = registry["caches"].as_array().cloned().unwrap_or_default();
    merged.retain(|c| !upstreams.iter().any(|u| c["upstream"] == *u));
    merged.extend(
        caches
            .iter()
            .map(|c| serde_json::to_value(&c.config).unwrap_or_default()),
    );
    registry["caches"] = Value::Array(merged);
    Ok(Some(registry))
}

/// The host gives each cache's credentials as its copy in the project (`reg-cache-…`,
/// KIM's `registry_config.go`); the Runtime names a Secret of its runtime cluster, so any
/// other name here means the host did not resolve it, and the project's Secrets are shared
/// by every Runtime there.
fn host_copies(caches: &[ImageRegistryCache]) -> Result<(), PluginError> {
    for (i, cache) in caches.iter().enumerate() {
        if let Some(name) = &cache.config.secret_reference_name
            && !name.starts_with("reg-cache-")
        {
            return Err(PluginError::invalid_input(
                format!("spec.imageRegistryCache[{i}].config.secretReferenceName"),
                format!(
                    "{name:?} is not the host's copy of the cache's credentials (reg-cache-…): the host copies the runtime cluster's Secret into the project"
                ),
            ));
        }
    }
    Ok(())
}

/// The Secret names the caches of a registry config refer to.
fn secret_names(registry: Option<&Value>) -> Vec<String> {
    registry
        .and_then(|r| r["caches"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|c| c["secretReferenceName"].as_str().map(String::from))
        .collect()
}

/// The Secret references the Runtime's caches name, in `spec.resources` (the Secrets live
/// in the Shoot's project); references of caches that went are dropped. On patch the
/// current resources are carried over first.
fn reference_secrets(
    shoot: &mut Shoot,
    current: Option<&Shoot>,
    caches: &[ImageRegistryCache],
    registry: Option<&Value>,
) {
    let names: Vec<&str> = caches
        .iter()
        .filter_map(|c| c.config.secret_reference_name.as_deref())
        .collect();
    let wanted = secret_names(registry);
    let had = current
        .and_then(|s| s.spec.extensions.as_ref())
        .and_then(|e| e.iter().find(|x| x.type_ == "registry-cache"))
        .and_then(|x| x.provider_config.as_ref());
    let stale: Vec<String> = secret_names(had)
        .into_iter()
        .filter(|n| !wanted.contains(n))
        .collect();
    if names.is_empty() && stale.is_empty() {
        return;
    }
    if shoot.spec.resources.is_none() {
        shoot.spec.resources = current.and_then(|s| s.spec.resources.clone());
    }
    let resources = shoot.spec.resources.get_or_insert_with(Vec::new);
    resources.retain(|r| !stale.iter().any(|s| r["name"] == s.as_str()));
    for name in names {
        let resource = json!({
            "name": name,
            "resourceRef": { "apiVersion": "v1", "kind": "Secret", "name": name },
        });
        match resources.iter_mut().find(|r| r["name"] == name) {
            Some(slot) => *slot = resource,
            None => resources.push(resource),
        }
    }
}

tessera_sdk::export_shoot_extension!(Extensions);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(Extensions);
