//! Object grants: which objects a module reconciler may write and read.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::pattern::glob;

/// Kinds that can take over a cluster or read its credentials: granted only when a rule
/// names both their API group and kind (`*` never reaches them). `None`: every kind of the
/// group.
const SENSITIVE_KINDS: &[(&str, Option<&str>)] = &[
    ("rbac.authorization.k8s.io", None),
    ("admissionregistration.k8s.io", None),
    ("apiregistration.k8s.io", Some("APIService")),
    ("apiextensions.k8s.io", Some("CustomResourceDefinition")),
    ("", Some("Secret")),
];

/// Namespaces only granted by name: the system's own, and Tessera's inventories.
const SYSTEM_NAMESPACES: &[&str] = &[
    "kube-system",
    "kube-public",
    "kube-node-lease",
    "tessera-system",
];

fn is_sensitive_kind(group: &str, kind: &str) -> bool {
    SENSITIVE_KINDS
        .iter()
        .any(|(g, k)| *g == group && k.is_none_or(|k| k == kind))
}

/// Whether `namespace` is one only granted by name.
pub fn is_system_namespace(namespace: &str) -> bool {
    SYSTEM_NAMESPACES.contains(&namespace)
}

fn is_secret(group: &str, kind: &str) -> bool {
    group.is_empty() && kind == "Secret"
}

/// One rule of a write or read grant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObjectRule {
    /// API groups; `""` is the core group, `"*"` any group (never a sensitive kind).
    #[schemars(schema_with = "api_groups_schema")]
    pub api_groups: Vec<String>,
    /// Kinds; `"*"` any kind (never a sensitive or cluster-scoped one).
    pub kinds: Vec<String>,
    /// Namespaces of namespaced objects; `"*"` any namespace except `kube-system`,
    /// `kube-public`, `kube-node-lease` and `tessera-system`. Empty: no namespaced object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
    /// Also cluster-scoped objects of the kinds this rule lists by name.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cluster_scoped: bool,
    /// Object names; `*` matches any characters. Empty: any name. Secrets are read only by
    /// names listed exactly.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
}

/// Kubernetes 1.20 validates `""` in a custom resource's string array as `null` and
/// refuses it unless the items are nullable (the stored value stays `""`).
fn api_groups_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "items": {"type": "string", "nullable": true}
    })
}

/// Where an object lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    Cluster,
    Namespace(&'a str),
    /// A list across every namespace (reads only); each object found is checked again.
    AllNamespaces,
}

/// An object, or the objects a requirement reaches.
#[derive(Debug, Clone, Copy)]
pub struct ObjectRef<'a> {
    /// API group (`""`: core).
    pub group: &'a str,
    pub kind: &'a str,
    pub scope: Scope<'a>,
    /// `None`: any name (a list).
    pub name: Option<&'a str>,
}

impl std::fmt::Display for ObjectRef<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            self.group
        };
        let name = self.name.unwrap_or("<any name>");
        match self.scope {
            Scope::Cluster => write!(f, "{} {name} ({group}, cluster-scoped)", self.kind),
            Scope::Namespace(ns) => write!(f, "{} {name} in {ns} ({group})", self.kind),
            Scope::AllNamespaces => write!(f, "{} {name} in every namespace ({group})", self.kind),
        }
    }
}

/// Reading or writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Write,
    Read,
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Access::Write => "write",
            Access::Read => "read",
        })
    }
}

/// A refused access: what was asked, why no rule grants it, and a rule that would.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not granted to {access} {object}: {why}; a {access} grant for it: {rule}")]
pub struct Refusal {
    pub access: Access,
    pub object: String,
    pub why: String,
    pub rule: String,
}

/// Why one rule does not grant an access (ordered: later ones are closer misses).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Miss {
    NoRule,
    SensitiveKind,
    ClusterScoped,
    Namespace(String),
    SystemNamespace(String),
    SecretByName,
    Name,
}

impl Miss {
    fn describe(&self) -> String {
        match self {
            Miss::NoRule => "no rule lists this API group and kind".into(),
            Miss::SensitiveKind => "RBAC objects, admission webhooks, API services, CRDs and Secrets are granted only by API group and kind named explicitly".into(),
            Miss::ClusterScoped => "cluster-scoped objects need a rule with clusterScoped: true that names the kind".into(),
            Miss::Namespace(ns) => format!("namespace {ns} is not among the rule's namespaces"),
            Miss::SystemNamespace(ns) => format!("{ns} is a system namespace, granted only by name"),
            Miss::SecretByName => "Secrets are read only by names listed exactly".into(),
            Miss::Name => "the name is not among the rule's names".into(),
        }
    }
}

impl ObjectRule {
    /// Problems in the rule, naming the field (relative to the rule).
    pub(super) fn validate(&self, access: Access) -> Result<(), String> {
        if self.api_groups.is_empty() {
            return Err("apiGroups: list at least one API group (\"\" is the core group)".into());
        }
        if self.kinds.is_empty() {
            return Err("kinds: list at least one kind".into());
        }
        if self.namespaces.is_empty() && !self.cluster_scoped {
            return Err(
                "namespaces: the rule grants nothing; list namespaces or set clusterScoped".into(),
            );
        }
        let secrets = self.kinds.iter().any(|k| k == "Secret")
            && self.api_groups.iter().any(String::is_empty);
        if access == Access::Read && secrets && self.names.iter().any(|n| n.contains('*')) {
            return Err("names: Secrets are read only by names listed exactly, without *".into());
        }
        Ok(())
    }

    fn check(&self, access: Access, o: &ObjectRef<'_>) -> Result<(), Miss> {
        let sensitive = is_sensitive_kind(o.group, o.kind);
        let listed_group = self.api_groups.iter().any(|g| g == o.group);
        let listed_kind = self.kinds.iter().any(|k| k == o.kind);
        let any_group = self.api_groups.iter().any(|g| g == "*");
        let any_kind = self.kinds.iter().any(|k| k == "*");
        if !((listed_group || any_group) && (listed_kind || any_kind)) {
            return Err(Miss::NoRule);
        }
        if sensitive && !(listed_group && listed_kind) {
            return Err(Miss::SensitiveKind);
        }
        self.check_scope(access, o, listed_kind)?;
        self.check_name(access, o)
    }

    fn check_scope(
        &self,
        access: Access,
        o: &ObjectRef<'_>,
        listed_kind: bool,
    ) -> Result<(), Miss> {
        match o.scope {
            Scope::Cluster if !(self.cluster_scoped && listed_kind) => Err(Miss::ClusterScoped),
            Scope::Cluster => Ok(()),
            Scope::Namespace(ns) => {
                if self.namespaces.iter().any(|n| n == ns) {
                    Ok(())
                } else if is_system_namespace(ns) {
                    Err(Miss::SystemNamespace(ns.to_string()))
                } else if self.namespaces.iter().any(|n| n == "*") {
                    Ok(())
                } else {
                    Err(Miss::Namespace(ns.to_string()))
                }
            }
            // A list across namespaces reads only what the rule covers (each object is
            // checked again); writing (a delete answer's `remove`) needs every namespace.
            Scope::AllNamespaces if access == Access::Read && !self.namespaces.is_empty() => Ok(()),
            Scope::AllNamespaces if self.namespaces.iter().any(|n| n == "*") => Ok(()),
            Scope::AllNamespaces => Err(Miss::Namespace("(every namespace)".into())),
        }
    }

    fn check_name(&self, access: Access, o: &ObjectRef<'_>) -> Result<(), Miss> {
        let exact = |n: &str| self.names.iter().any(|x| x == n);
        if o.group.is_empty()
            && o.kind == "Namespace"
            && let Some(name) = o.name
            && is_system_namespace(name)
            && !exact(name)
        {
            return Err(Miss::SystemNamespace(name.to_string()));
        }
        if access == Access::Read && is_secret(o.group, o.kind) {
            return match o.name {
                _ if self.names.is_empty() => Err(Miss::SecretByName),
                Some(name) if !exact(name) => Err(Miss::SecretByName),
                _ => Ok(()),
            };
        }
        match o.name {
            Some(name) if !self.names.is_empty() && !self.names.iter().any(|p| glob(p, name)) => {
                Err(Miss::Name)
            }
            _ => Ok(()),
        }
    }

    /// Concrete accesses this rule stands for (for comparing requests with grants).
    pub(super) fn examples(&self) -> Vec<OwnedRef> {
        let mut out = Vec::new();
        let names: Vec<Option<String>> = if self.names.is_empty() {
            vec![None]
        } else {
            self.names.iter().cloned().map(Some).collect()
        };
        let mut scopes: Vec<Option<String>> = self.namespaces.iter().cloned().map(Some).collect();
        if self.cluster_scoped {
            scopes.push(None);
        }
        for group in &self.api_groups {
            for kind in &self.kinds {
                for scope in &scopes {
                    for name in &names {
                        out.push(OwnedRef {
                            group: group.clone(),
                            kind: kind.clone(),
                            namespace: scope.clone(),
                            name: name.clone(),
                        });
                    }
                }
            }
        }
        out
    }
}

/// An [`ObjectRef`] that owns its strings.
pub(super) struct OwnedRef {
    group: String,
    kind: String,
    /// `None`: cluster-scoped.
    namespace: Option<String>,
    name: Option<String>,
}

impl OwnedRef {
    pub(super) fn as_ref(&self) -> ObjectRef<'_> {
        ObjectRef {
            group: &self.group,
            kind: &self.kind,
            scope: match &self.namespace {
                Some(ns) => Scope::Namespace(ns),
                None => Scope::Cluster,
            },
            name: self.name.as_deref(),
        }
    }
}

/// A rule granting exactly `o` (shown with a refusal).
fn suggestion(access: Access, o: &ObjectRef<'_>) -> String {
    let mut parts = vec![
        format!("apiGroups: [{:?}]", o.group),
        format!("kinds: [{}]", o.kind),
    ];
    match o.scope {
        Scope::Cluster => parts.push("clusterScoped: true".into()),
        Scope::Namespace(ns) => parts.push(format!("namespaces: [{ns}]")),
        Scope::AllNamespaces => parts.push("namespaces: [\"*\"]".into()),
    }
    let needs_name = access == Access::Read && is_secret(o.group, o.kind);
    match o.name {
        Some(name) => parts.push(format!("names: [{name}]")),
        None if needs_name => parts.push("names: [<each Secret>]".into()),
        None => {}
    }
    format!("{{{}}}", parts.join(", "))
}

/// Check `object` against `rules`: granted when one rule grants it.
pub(super) fn check(
    rules: &[ObjectRule],
    access: Access,
    object: &ObjectRef<'_>,
) -> Result<(), Refusal> {
    let mut closest = Miss::NoRule;
    for rule in rules {
        match rule.check(access, object) {
            Ok(()) => return Ok(()),
            Err(miss) => closest = closest.max(miss),
        }
    }
    Err(Refusal {
        access,
        object: object.to_string(),
        why: closest.describe(),
        rule: suggestion(access, object),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grants::Grants;

    fn grants(yaml: &str) -> Grants {
        serde_saphyr::from_str(yaml).unwrap()
    }

    fn ns<'a>(group: &'a str, kind: &'a str, ns: &'a str, name: &'a str) -> ObjectRef<'a> {
        ObjectRef {
            group,
            kind,
            scope: Scope::Namespace(ns),
            name: Some(name),
        }
    }

    fn cluster<'a>(group: &'a str, kind: &'a str, name: &'a str) -> ObjectRef<'a> {
        ObjectRef {
            group,
            kind,
            scope: Scope::Cluster,
            name: Some(name),
        }
    }

    #[test]
    fn wildcards_never_reach_sensitive_kinds_or_system_namespaces() {
        let g = grants(
            "write: [{apiGroups: ['*'], kinds: ['*'], namespaces: ['*'], clusterScoped: true}]",
        );
        assert!(
            g.allows(Access::Write, &ns("apps", "Deployment", "team-a", "d"))
                .is_ok()
        );
        let rbac = "rbac.authorization.k8s.io";
        let err = g
            .allows(Access::Write, &cluster(rbac, "ClusterRoleBinding", "evil"))
            .unwrap_err();
        assert!(err.why.contains("explicitly"), "{err}");
        assert!(err.rule.contains("clusterScoped: true"), "{err}");
        assert!(
            g.allows(Access::Write, &ns("", "Secret", "team-a", "s"))
                .is_err()
        );
        let err = g
            .allows(
                Access::Write,
                &ns("", "ConfigMap", "kube-system", "coredns"),
            )
            .unwrap_err();
        assert!(err.why.contains("system namespace"), "{err}");
        assert!(
            g.allows(
                Access::Write,
                &ns("", "ConfigMap", "tessera-system", "modules.a.b")
            )
            .is_err()
        );
        // Cluster-scoped kinds only by name, even with clusterScoped.
        let err = g
            .allows(
                Access::Write,
                &cluster("scheduling.k8s.io", "PriorityClass", "p"),
            )
            .unwrap_err();
        assert!(err.why.contains("cluster-scoped"), "{err}");
        // A Namespace object named kube-system is a system namespace.
        let g = grants("write: [{apiGroups: [''], kinds: [Namespace], clusterScoped: true}]");
        assert!(
            g.allows(Access::Write, &cluster("", "Namespace", "team-a"))
                .is_ok()
        );
        assert!(
            g.allows(Access::Write, &cluster("", "Namespace", "kube-system"))
                .is_err()
        );
    }

    #[test]
    fn explicit_rules_grant_sensitive_kinds() {
        let g = grants(
            "write:\n- {apiGroups: [rbac.authorization.k8s.io], kinds: [Role, RoleBinding], namespaces: ['*']}\n- {apiGroups: [''], kinds: [ConfigMap], namespaces: [kube-system], names: ['tessera-*']}",
        );
        let rbac = "rbac.authorization.k8s.io";
        assert!(
            g.allows(Access::Write, &ns(rbac, "Role", "team-a", "r"))
                .is_ok()
        );
        assert!(
            g.allows(Access::Write, &cluster(rbac, "ClusterRole", "r"))
                .is_err()
        );
        assert!(
            g.allows(
                Access::Write,
                &ns("", "ConfigMap", "kube-system", "tessera-x")
            )
            .is_ok()
        );
        let err = g
            .allows(
                Access::Write,
                &ns("", "ConfigMap", "kube-system", "coredns"),
            )
            .unwrap_err();
        assert!(err.why.contains("names"), "{err}");
    }

    #[test]
    fn secrets_are_read_by_exact_name() {
        let g = grants(
            "read:\n- {apiGroups: ['*'], kinds: ['*'], namespaces: ['*']}\n- {apiGroups: [''], kinds: [Secret], namespaces: [team-a], names: [db]}",
        );
        assert!(
            g.allows(Access::Read, &ns("", "Secret", "team-a", "db"))
                .is_ok()
        );
        let err = g
            .allows(Access::Read, &ns("", "Secret", "team-a", "other"))
            .unwrap_err();
        assert!(err.why.contains("Secrets"), "{err}");
        assert!(
            g.allows(Access::Read, &ns("", "Secret", "team-b", "db"))
                .is_err()
        );
        let list = ObjectRef {
            group: "",
            kind: "ConfigMap",
            scope: Scope::AllNamespaces,
            name: None,
        };
        assert!(g.allows(Access::Read, &list).is_ok());
        // Nothing written by a read grant.
        assert!(
            g.allows(Access::Write, &ns("", "ConfigMap", "team-a", "c"))
                .is_err()
        );
    }
}
