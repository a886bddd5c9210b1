//! What an operator grants a plugin, and the checks the host runs on everything a plugin
//! returns before acting on it: which objects a module reconciler may write and read, which
//! Shoot paths a shoot extension may set.
//!
//! Nothing is granted by default. Wildcards never reach what can take over a cluster: RBAC
//! objects, admission webhooks, API services, CRDs and Secrets are granted only by group and
//! kind named explicitly, system namespaces only by name, cluster-scoped objects only by
//! kind. A leaf module (it uses only `crate::pattern`), so the resources (`crd`),
//! the chain (`plugins`) and the module engine (`modules`) share one definition.

mod objects;
mod paths;
mod view;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use objects::{Access, ObjectRef, ObjectRule, Refusal, Scope, is_system_namespace};
pub use paths::{
    IDENTITY_PATHS, PathError, PathPattern, Segment, display_path, first_change, touches,
};
pub use view::ShootView;

/// Everything granted to one plugin.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Grants {
    /// Module reconcilers: objects the plugin may have applied (and so pruned).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub write: Vec<ObjectRule>,
    /// Module reconcilers: objects its requirements may read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read: Vec<ObjectRule>,
    /// Shoot extensions: Shoot paths the plugin may set, e.g. `spec.provider.workers`,
    /// `metadata.annotations["example.com/*"]`, `spec.extensions[type=shoot-dns-service]`.
    /// A path covers everything below it; `*` matches any characters within one segment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shoot_paths: Vec<String>,
}

/// What a plugin declares it needs (the `tessera:requests` custom section of its
/// component): shown by `tessera plugin inspect` and next to the grants in a Plugin's
/// status. A request grants nothing; `lockedConfig` only restricts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Requests {
    #[serde(default)]
    pub grants: Grants,
    /// Configuration keys only the operator sets (the Plugin's `config`); a ModuleSet's
    /// module `config` may not replace them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locked_config: Vec<String>,
}

impl Grants {
    /// Problems in the grants themselves, naming the field under `prefix` (e.g.
    /// `spec.grants`).
    pub fn validate(&self, prefix: &str) -> Result<(), String> {
        for (i, rule) in self.write.iter().enumerate() {
            rule.validate(Access::Write)
                .map_err(|e| format!("{prefix}.write[{i}].{e}"))?;
        }
        for (i, rule) in self.read.iter().enumerate() {
            rule.validate(Access::Read)
                .map_err(|e| format!("{prefix}.read[{i}].{e}"))?;
        }
        for (i, path) in self.shoot_paths.iter().enumerate() {
            let pattern: PathPattern = path
                .parse()
                .map_err(|e: PathError| format!("{prefix}.shootPaths[{i}]: {e}"))?;
            if let Some(pinned) = pattern.identity() {
                return Err(format!(
                    "{prefix}.shootPaths[{i}]: {path} is {pinned}, part of the Shoot's identity, which the host pins and no plugin may set"
                ));
            }
        }
        Ok(())
    }

    /// Whether `object` may be written (`Access::Write`) or read (`Access::Read`).
    pub fn allows(&self, access: Access, object: &ObjectRef<'_>) -> Result<(), Refusal> {
        let rules = match access {
            Access::Write => &self.write,
            Access::Read => &self.read,
        };
        objects::check(rules, access, object)
    }

    /// The Shoot path patterns, parsed (call [`Grants::validate`] first for errors).
    pub fn path_patterns(&self) -> Vec<PathPattern> {
        self.shoot_paths
            .iter()
            .filter_map(|p| p.parse().ok())
            .collect()
    }

    /// Requested rules and paths that these grants do not cover, in words.
    pub fn missing(&self, requested: &Grants) -> Vec<String> {
        let mut out = Vec::new();
        for (access, rules) in [
            (Access::Write, &requested.write),
            (Access::Read, &requested.read),
        ] {
            for rule in rules {
                out.extend(
                    rule.examples()
                        .into_iter()
                        .filter_map(|o| self.allows(access, &o.as_ref()).err())
                        .map(|r| format!("{access} {}", r.object)),
                );
            }
        }
        let granted = self.path_patterns();
        for path in &requested.shoot_paths {
            let Ok(pattern) = path.parse::<PathPattern>() else {
                continue;
            };
            if !granted.iter().any(|g| g.covers_pattern(&pattern)) {
                out.push(format!("set {path}"));
            }
        }
        out.dedup();
        out
    }

    /// True when nothing is granted at all.
    pub fn is_empty(&self) -> bool {
        self.write.is_empty() && self.read.is_empty() && self.shoot_paths.is_empty()
    }
}

impl Requests {
    /// Parse the `tessera:requests` section (YAML or JSON).
    pub fn parse(text: &str) -> Result<Self, String> {
        let requests: Requests = serde_saphyr::from_str(text).map_err(|e| e.to_string())?;
        requests.grants.validate("grants")?;
        Ok(requests)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(yaml: &str) -> Grants {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn validation_names_the_field() {
        let g = grants("write: [{apiGroups: [''], kinds: []}]");
        let err = g.validate("spec.grants").unwrap_err();
        assert!(err.starts_with("spec.grants.write[0].kinds"), "{err}");
        let g = grants("shootPaths: [spec.secretBindingName]");
        let err = g.validate("grants").unwrap_err();
        assert!(err.contains("identity"), "{err}");
        let g =
            grants("read: [{apiGroups: [''], kinds: [Secret], namespaces: [a], names: ['db-*']}]");
        let err = g.validate("grants").unwrap_err();
        assert!(err.contains("names"), "{err}");
    }

    #[test]
    fn missing_lists_what_requests_exceed() {
        let granted = grants(
            "write: [{apiGroups: [''], kinds: [ConfigMap], namespaces: [kyma-system]}]\nshootPaths: [spec.provider]",
        );
        let requested = grants(
            "write: [{apiGroups: [''], kinds: [ConfigMap, Service], namespaces: [kyma-system]}]\nshootPaths: [spec.provider.workers, spec.dns]",
        );
        let missing = granted.missing(&requested);
        assert_eq!(
            missing,
            vec![
                "write Service <any name> in kyma-system (core)",
                "set spec.dns"
            ],
            "{missing:?}"
        );
        assert!(requested.missing(&requested).is_empty());
    }
}
