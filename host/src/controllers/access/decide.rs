//! What a RuntimeAccess asks for, decided without a cluster: the objects of the runtime
//! cluster (ServiceAccount, roles, bindings), when to issue a new token, the kubeconfig.

use std::time::Duration;

use jiff::Timestamp;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::controllers::labels;
use crate::crd::{AccessGrant, RuntimeAccess, RuntimeAccessSpec};

pub(crate) use crate::crd::labels::ACCESS_UID;
/// The label telling the token anchors (Secrets a token is bound to) from the rest.
pub(crate) const PART: &str = "tessera.dev/access-part";
pub(crate) const ANCHOR: &str = "token-anchor";

pub(crate) const DEFAULT_LIFETIME: Duration = Duration::from_secs(12 * 3600);
const MIN_LIFETIME: Duration = Duration::from_secs(600);
const MAX_LIFETIME: Duration = Duration::from_secs(48 * 3600);

/// The kinds made in the runtime cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Kind {
    ServiceAccount,
    Role,
    ClusterRole,
    RoleBinding,
    ClusterRoleBinding,
}

impl Kind {
    pub(crate) const ALL: [Kind; 5] = [
        Kind::ServiceAccount,
        Kind::Role,
        Kind::ClusterRole,
        Kind::RoleBinding,
        Kind::ClusterRoleBinding,
    ];

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::ServiceAccount => "ServiceAccount",
            Kind::Role => "Role",
            Kind::ClusterRole => "ClusterRole",
            Kind::RoleBinding => "RoleBinding",
            Kind::ClusterRoleBinding => "ClusterRoleBinding",
        }
    }

    pub(crate) fn api_version(self) -> &'static str {
        match self {
            Kind::ServiceAccount => "v1",
            _ => "rbac.authorization.k8s.io/v1",
        }
    }
}

/// One object to apply in the runtime cluster.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Wanted {
    pub(crate) kind: Kind,
    pub(crate) namespace: Option<String>,
    pub(crate) name: String,
    /// The whole object, for server-side apply.
    pub(crate) doc: Value,
}

impl Wanted {
    /// `Kind namespace/name` (or `Kind name`), as status lists it.
    pub(crate) fn label(&self) -> String {
        describe(self.kind, self.namespace.as_deref(), &self.name)
    }
}

pub(crate) fn describe(kind: Kind, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{} {ns}/{name}", kind.as_str()),
        None => format!("{} {name}", kind.as_str()),
    }
}

/// A spec the host cannot carry out: the field at fault and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invalid {
    pub(crate) field: String,
    pub(crate) message: String,
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> Invalid {
    Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// The token lifetime the spec asks for.
pub(crate) fn lifetime(spec: &RuntimeAccessSpec) -> Result<Duration, Invalid> {
    let Some(text) = &spec.lifetime else {
        return Ok(DEFAULT_LIFETIME);
    };
    let parsed = crate::time::parse_duration(text)
        .map_err(|e| invalid("spec.lifetime", e))?;
    if !(MIN_LIFETIME..=MAX_LIFETIME).contains(&parsed) {
        return Err(invalid(
            "spec.lifetime",
            format!("{text:?} is outside 10m to 48h (the TokenRequest API needs at least 10 minutes)"),
        ));
    }
    Ok(parsed)
}

/// Check what 1.20's API server cannot (no CEL): one kind of grant per entry, a Role needs
/// a namespace, rules need verbs.
pub(crate) fn validate(spec: &RuntimeAccessSpec) -> Result<(), Invalid> {
    lifetime(spec)?;
    for (i, grant) in spec.grants.iter().enumerate() {
        let field = format!("spec.grants[{i}]");
        let given = [
            !grant.rules.is_empty(),
            grant.role.is_some(),
            grant.cluster_role.is_some(),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(invalid(
                field,
                "give exactly one of rules, role, clusterRole",
            ));
        }
        if grant.role.is_some() && grant.namespace.is_none() {
            return Err(invalid(
                format!("{field}.namespace"),
                "a Role is bound in its namespace: name it",
            ));
        }
        for (j, rule) in grant.rules.iter().enumerate() {
            if rule.verbs.is_empty() {
                return Err(invalid(format!("{field}.rules[{j}].verbs"), "name at least one verb"));
            }
            if rule.resources.is_empty() {
                return Err(invalid(format!("{field}.rules[{j}].resources"), "name at least one resource"));
            }
        }
    }
    Ok(())
}

/// The name of what the host makes for grant `index` (a role and its binding share it).
fn grant_name(access: &RuntimeAccess, index: usize) -> String {
    format!("tessera-access-{}-{index}", access.name_any())
}

/// Labels of every object made for `access`.
pub(crate) fn owned_labels(access: &RuntimeAccess) -> Value {
    json!({
        labels::MANAGED_BY: labels::MANAGED_BY_VALUE,
        labels::RUNTIME: access.spec.runtime,
        ACCESS_UID: access.uid().unwrap_or_default(),
    })
}

fn object(access: &RuntimeAccess, kind: Kind, namespace: Option<&str>, name: &str) -> Value {
    let mut meta = json!({ "name": name, "labels": owned_labels(access) });
    if let Some(ns) = namespace {
        meta["namespace"] = ns.into();
    }
    json!({ "apiVersion": kind.api_version(), "kind": kind.as_str(), "metadata": meta })
}

/// Everything `access` wants in the runtime cluster, ServiceAccount first.
pub(crate) fn wanted(access: &RuntimeAccess) -> Vec<Wanted> {
    let sa = &access.spec.service_account;
    let mut out = vec![Wanted {
        kind: Kind::ServiceAccount,
        namespace: Some(sa.namespace.clone()),
        name: sa.name.clone(),
        doc: object(access, Kind::ServiceAccount, Some(&sa.namespace), &sa.name),
    }];
    for (index, grant) in access.spec.grants.iter().enumerate() {
        out.extend(for_grant(access, index, grant));
    }
    out
}

/// The role (for rules) and binding of one grant.
fn for_grant(access: &RuntimeAccess, index: usize, grant: &AccessGrant) -> Vec<Wanted> {
    let name = grant_name(access, index);
    let ns = grant.namespace.as_deref();
    let mut out = Vec::new();
    let role_ref = if !grant.rules.is_empty() {
        let kind = if ns.is_some() { Kind::Role } else { Kind::ClusterRole };
        let mut doc = object(access, kind, ns, &name);
        doc["rules"] = serde_json::to_value(&grant.rules).unwrap_or_default();
        out.push(Wanted {
            kind,
            namespace: ns.map(String::from),
            name: name.clone(),
            doc,
        });
        (kind, name.clone())
    } else if let Some(role) = &grant.role {
        (Kind::Role, role.clone())
    } else {
        (Kind::ClusterRole, grant.cluster_role.clone().unwrap_or_default())
    };
    let kind = if ns.is_some() { Kind::RoleBinding } else { Kind::ClusterRoleBinding };
    let sa = &access.spec.service_account;
    let mut doc = object(access, kind, ns, &name);
    doc["roleRef"] = json!({
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": role_ref.0.as_str(),
        "name": role_ref.1,
    });
    doc["subjects"] =
        json!([{ "kind": "ServiceAccount", "name": sa.name, "namespace": sa.namespace }]);
    out.push(Wanted {
        kind,
        namespace: ns.map(String::from),
        name,
        doc,
    });
    out
}

/// Whether an object of the runtime cluster was made for `access` (its uid label).
pub(crate) fn ours(access: &RuntimeAccess, labels: &std::collections::BTreeMap<String, String>) -> bool {
    access
        .uid()
        .is_some_and(|uid| labels.get(ACCESS_UID) == Some(&uid))
}

/// Whether a new token is due: none yet, the spec changed since it was issued, a rotation
/// was asked for, or `fraction` of its life has passed.
pub(crate) fn token_due(
    access: &RuntimeAccess,
    secret_present: bool,
    now: Timestamp,
    fraction: f64,
) -> Result<(), Duration> {
    let status = access.status.clone().unwrap_or_default();
    let issued = crate::time::parse_rfc3339(status.issued.as_deref());
    let expiry = crate::time::parse_rfc3339(status.expiry.as_deref());
    let (Some(issued), Some(expiry)) = (issued, expiry) else {
        return Ok(());
    };
    let forced = access.annotations().contains_key(labels::FORCE_ROTATION);
    if !secret_present || forced || status.observed_generation != access.metadata.generation {
        return Ok(());
    }
    let life = expiry.duration_since(issued).as_secs_f64().max(0.0);
    let renew_at = issued + Duration::from_secs_f64(life * fraction.clamp(0.1, 0.95));
    let wait = renew_at.duration_since(now).as_secs_f64();
    if wait <= 0.0 {
        return Ok(());
    }
    Err(Duration::from_secs_f64(wait))
}

/// The cluster entry of the admin kubeconfig a consumer's kubeconfig may copy: server and
/// CA data only (never a file path, an exec or an auth provider).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Server {
    pub(crate) url: String,
    pub(crate) ca_data: Option<String>,
    pub(crate) insecure: bool,
    pub(crate) tls_server_name: Option<String>,
}

/// The server of the admin kubeconfig text `admin` (its current context's cluster).
pub(crate) fn server_of(admin: &str) -> Result<Server, String> {
    let config: kube::config::Kubeconfig =
        crate::input::from_yaml(admin, "").map_err(|e| e.message)?;
    let context = config
        .current_context
        .as_deref()
        .and_then(|c| config.contexts.iter().find(|n| n.name == c))
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone());
    let cluster = match context {
        Some(name) => config.clusters.iter().find(|c| c.name == name),
        None => config.clusters.first(),
    }
    .and_then(|c| c.cluster.as_ref())
    .ok_or("the admin kubeconfig names no cluster")?;
    Ok(Server {
        url: cluster.server.clone().ok_or("the admin kubeconfig's cluster has no server")?,
        ca_data: cluster.certificate_authority_data.clone(),
        insecure: cluster.insecure_skip_tls_verify.unwrap_or(false),
        tls_server_name: cluster.tls_server_name.clone(),
    })
}

/// A kubeconfig for ServiceAccount `user` with `token` on `server`.
pub(crate) fn kubeconfig(server: &Server, user: &str, token: &str) -> String {
    let mut cluster = json!({ "server": server.url });
    if let Some(ca) = &server.ca_data {
        cluster["certificate-authority-data"] = ca.clone().into();
    }
    if server.insecure {
        cluster["insecure-skip-tls-verify"] = true.into();
    }
    if let Some(name) = &server.tls_server_name {
        cluster["tls-server-name"] = name.clone().into();
    }
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "runtime", "cluster": cluster }],
        "users": [{ "name": user, "user": { "token": token } }],
        "contexts": [{ "name": "runtime", "context": { "cluster": "runtime", "user": user } }],
        "current-context": "runtime",
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

/// The Secret the kubeconfig lives in.
pub(crate) fn secret_name(access: &RuntimeAccess) -> String {
    access
        .spec
        .secret_name
        .clone()
        .unwrap_or_else(|| format!("{}-kubeconfig", access.name_any()))
}

/// The control-plane Secret holding `kubeconfig`, controlled by `access`.
pub(crate) fn secret_doc(access: &RuntimeAccess, kubeconfig: &str, expiry: &str) -> Value {
    let owner = access.controller_owner_ref(&());
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": secret_name(access),
            "namespace": access.namespace(),
            "labels": {
                labels::MANAGED_BY: labels::MANAGED_BY_VALUE,
                labels::RUNTIME: access.spec.runtime,
                ACCESS_UID: access.uid().unwrap_or_default(),
            },
            "annotations": { "tessera.dev/expiry": expiry },
            "ownerReferences": owner.map(|o| vec![o]),
        },
        "type": "Opaque",
        "stringData": { "config": kubeconfig },
    })
}
