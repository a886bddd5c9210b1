//! What a RuntimeAccess asks for, decided without a cluster: the objects of the runtime
//! cluster (ServiceAccount, roles, bindings), when to issue a new token, the kubeconfig.

use std::time::Duration;

use crate::controllers::kit::SecretBuilder;
use crate::controllers::kit::rotation::{self, Rotation};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::controllers::labels;
use crate::crd::{
    AccessGrant, ConditionStatus, ConditionType, KubeconfigState, Reason, RuntimeAccess,
    RuntimeAccessSpec, RuntimeAccessStatus, set_condition,
};

pub(crate) use crate::crd::labels::ACCESS_UID;
pub(crate) use crate::crd::labels::{ACCESS_PART, ACCESS_PART_ANCHOR, ACCESS_TOKEN_ANCHOR};

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
    let parsed = crate::time::parse_duration(text).map_err(|e| invalid("spec.lifetime", e))?;
    if !(MIN_LIFETIME..=MAX_LIFETIME).contains(&parsed) {
        return Err(invalid(
            "spec.lifetime",
            format!(
                "{text:?} is outside 10m to 48h (the TokenRequest API needs at least 10 minutes)"
            ),
        ));
    }
    Ok(parsed)
}

/// Check what 1.20's API server cannot (no CEL): one kind of grant per entry, a Role needs
/// a namespace, rules need verbs.
pub(crate) fn validate(access: &RuntimeAccess) -> Result<(), Invalid> {
    let spec = &access.spec;
    lifetime(spec)?;
    if access.name_any().len() > MAX_NAME {
        return Err(invalid(
            "metadata.name",
            format!("longer than {MAX_NAME} characters: the names made from it would not fit"),
        ));
    }
    if let Some(status) = &access.status
        && let Some(made_in) = &status.runtime
        && *made_in != spec.runtime
    {
        return Err(invalid(
            "spec.runtime",
            format!(
                "its objects are in the cluster of Runtime {made_in}; it cannot move (delete it and create another)"
            ),
        ));
    }
    for (i, grant) in spec.grants.iter().enumerate() {
        validate_grant(&format!("spec.grants[{i}]"), grant)?;
    }
    Ok(())
}

/// One grant: exactly one kind, names Kubernetes takes, a Role with its namespace, rules
/// with verbs and resources.
fn validate_grant(field: &str, grant: &AccessGrant) -> Result<(), Invalid> {
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
    for (key, name) in [("role", &grant.role), ("clusterRole", &grant.cluster_role)] {
        if let Some(name) = name
            && !is_role_name(name)
        {
            return Err(invalid(
                format!("{field}.{key}"),
                format!("{name:?} is not a role name (1 to 253 characters, no '/' or '%')"),
            ));
        }
    }
    if grant.role.is_some() && grant.namespace.is_none() {
        return Err(invalid(
            format!("{field}.namespace"),
            "a Role is bound in its namespace: name it",
        ));
    }
    for (j, rule) in grant.rules.iter().enumerate() {
        if rule.verbs.is_empty() {
            return Err(invalid(
                format!("{field}.rules[{j}].verbs"),
                "name at least one verb",
            ));
        }
        if rule.resources.is_empty() {
            return Err(invalid(
                format!("{field}.rules[{j}].resources"),
                "name at least one resource",
            ));
        }
    }
    Ok(())
}

/// What Kubernetes accepts as the name of a role (a path segment).
fn is_role_name(name: &str) -> bool {
    (1..=253).contains(&name.len()) && !name.contains(['/', '%']) && name != "." && name != ".."
}

/// The name of the role the host makes for the rules of grant `index` (rules can change in
/// place).
fn role_name(access: &RuntimeAccess, index: usize) -> String {
    format!("tessera-access-{}-{index}", access.name_any())
}

/// The name of a binding: from what it binds (where, which role), because a binding's
/// `roleRef` cannot change — another role is another binding, and the old one is pruned.
fn binding_name(access: &RuntimeAccess, namespace: Option<&str>, kind: Kind, role: &str) -> String {
    let key = format!("{}/{}/{role}", namespace.unwrap_or(""), kind.as_str());
    let digest = crate::oci::sha256_digest(key.as_bytes());
    let hex = digest.trim_start_matches("sha256:");
    format!("tessera-access-{}-{}", access.name_any(), &hex[..10])
}

/// Longest RuntimeAccess name: the names made from it stay within 253 characters.
const MAX_NAME: usize = 200;

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
    let name = role_name(access, index);
    let ns = grant.namespace.as_deref();
    let mut out = Vec::new();
    let role_ref = if !grant.rules.is_empty() {
        let kind = if ns.is_some() {
            Kind::Role
        } else {
            Kind::ClusterRole
        };
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
        (
            Kind::ClusterRole,
            grant.cluster_role.clone().unwrap_or_default(),
        )
    };
    let kind = if ns.is_some() {
        Kind::RoleBinding
    } else {
        Kind::ClusterRoleBinding
    };
    let sa = &access.spec.service_account;
    let name = binding_name(access, ns, role_ref.0, &role_ref.1);
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

/// Whether a control-plane Secret was written for `access`: its uid label, and controlled
/// by it (a labelled copy made by someone else is not).
pub(crate) fn owns_secret(
    access: &RuntimeAccess,
    secret: &k8s_openapi::api::core::v1::Secret,
) -> bool {
    let controlled = secret.owner_references().iter().any(|o| {
        o.controller == Some(true)
            && o.kind == "RuntimeAccess"
            && access.uid().as_deref() == Some(o.uid.as_str())
    });
    controlled && ours(access, secret.labels())
}

/// Whether an object of the runtime cluster was made for `access` (its uid label).
pub(crate) fn ours(
    access: &RuntimeAccess,
    labels: &std::collections::BTreeMap<String, String>,
) -> bool {
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
    let forced = labels::is_true(access.metadata.annotations.as_ref(), labels::FORCE_ROTATION);
    let stale = !secret_present || forced || status.token_generation != access.metadata.generation;
    let life = Duration::try_from(expiry.duration_since(issued)).unwrap_or_default();
    match rotation::rotation(Some(issued), life, stale, now, fraction) {
        Rotation::Rotate => Ok(()),
        Rotation::Wait(wait) => Err(wait),
    }
}

/// One status outcome: state, the Ready condition's reason and message.
pub(crate) struct Outcome {
    pub(crate) state: KubeconfigState,
    pub(crate) reason: Reason,
    pub(crate) message: String,
}

/// The status after a pass that ended in `outcome`, having issued a token at `issued`
/// (time, expiry) or not. The objects listed are those made, as of the last Ready pass.
pub(crate) fn status_after(
    access: &RuntimeAccess,
    outcome: &Outcome,
    issued: Option<(String, String)>,
) -> RuntimeAccessStatus {
    let before = access.status.clone().unwrap_or_default();
    let mut status = RuntimeAccessStatus {
        state: Some(outcome.state),
        observed_generation: access.metadata.generation,
        ..before
    };
    if outcome.state == KubeconfigState::Ready {
        status.objects = wanted(access).iter().map(Wanted::label).collect();
        status.runtime = Some(access.spec.runtime.clone());
    }
    if let Some((at, expiry)) = issued {
        status.issued = Some(at);
        status.expiry = Some(expiry);
        status.token_generation = access.metadata.generation;
        status.secret_name = Some(secret_name(access));
    }
    let ready = match outcome.state {
        KubeconfigState::Ready => ConditionStatus::True,
        _ => ConditionStatus::False,
    };
    set_condition(
        &mut status.conditions,
        ConditionType::Ready,
        ready,
        outcome.reason,
        &outcome.message,
        access.metadata.generation,
    );
    status
}

/// When to look again after issuing a token expiring at `expiry` (as the API server
/// granted it, which may be less than `lifetime`): the one rotation decision's, on what is
/// left of it.
pub(crate) fn renew_after(
    expiry: &str,
    now: Timestamp,
    lifetime: Duration,
    fraction: f64,
) -> Duration {
    let left = crate::time::parse_rfc3339(Some(expiry))
        .map(|e| Duration::try_from(e.duration_since(now)).unwrap_or_default())
        .unwrap_or(lifetime);
    rotation::after_issue(left, fraction)
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
    // Not the parser's message: it may quote the kubeconfig, credentials included.
    let config: kube::config::Kubeconfig = crate::input::from_yaml(admin, "")
        .map_err(|_| "the admin kubeconfig does not parse".to_string())?;
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
        url: cluster
            .server
            .clone()
            .ok_or("the admin kubeconfig's cluster has no server")?,
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
pub(crate) fn secret_doc(
    access: &RuntimeAccess,
    kubeconfig: &str,
    expiry: &str,
    anchor: &str,
) -> Secret {
    SecretBuilder::named(access.namespace(), secret_name(access))
        .label(labels::MANAGED_BY, labels::MANAGED_BY_VALUE)
        .label(labels::RUNTIME, &access.spec.runtime)
        .label(ACCESS_UID, access.uid().unwrap_or_default())
        .annotate("tessera.dev/expiry", expiry)
        .annotate(ACCESS_TOKEN_ANCHOR, anchor)
        .owned_by(access.controller_owner_ref(&()))
        .data("config", kubeconfig.as_bytes().to_vec())
        .build()
}

/// The token anchors to keep after issuing the one of `issued`: a forced rotation (a
/// leaked kubeconfig) revokes every earlier token; a routine one keeps the one the Secret
/// (as read before) held until now, for consumers still reading it.
pub(crate) fn kept_anchors(
    access: &RuntimeAccess,
    secret: Option<&Secret>,
    issued: &str,
) -> Vec<String> {
    let forced = labels::is_true(access.metadata.annotations.as_ref(), labels::FORCE_ROTATION);
    let previous = secret
        .and_then(|s| s.annotations().get(ACCESS_TOKEN_ANCHOR).cloned())
        .filter(|_| !forced);
    std::iter::once(issued.to_string())
        .chain(previous)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{AccessRule, RuntimeAccessSpec, RuntimeAccessStatus, ServiceAccountRef};

    fn access(grants: Vec<AccessGrant>) -> RuntimeAccess {
        let mut a = RuntimeAccess::new(
            "monitor",
            RuntimeAccessSpec {
                runtime: "rt-1".into(),
                service_account: ServiceAccountRef {
                    name: "agent".into(),
                    namespace: "kyma-system".into(),
                },
                grants,
                lifetime: None,
                secret_name: None,
            },
        );
        a.metadata.namespace = Some("team-a".into());
        a.metadata.uid = Some("u-1".into());
        a.metadata.generation = Some(1);
        a
    }

    #[test]
    fn a_routine_rotation_keeps_the_token_the_secret_held_and_a_forced_one_none() {
        let mut a = access(vec![]);
        let secret = secret_doc(&a, "kubeconfig", "2026-11-25T12:00:00Z", "anchor-1");
        assert_eq!(
            secret.metadata.owner_references.as_ref().map(Vec::len),
            Some(1)
        );
        assert_eq!(
            kept_anchors(&a, Some(&secret), "anchor-2"),
            ["anchor-2", "anchor-1"]
        );
        assert_eq!(kept_anchors(&a, None, "anchor-2"), ["anchor-2"]);
        a.metadata.annotations =
            Some([(labels::FORCE_ROTATION.to_string(), "false".to_string())].into());
        assert_eq!(
            kept_anchors(&a, Some(&secret), "anchor-2"),
            ["anchor-2", "anchor-1"]
        );
        a.metadata.annotations =
            Some([(labels::FORCE_ROTATION.to_string(), "true".to_string())].into());
        assert_eq!(kept_anchors(&a, Some(&secret), "anchor-2"), ["anchor-2"]);
    }

    fn rules(namespace: Option<&str>) -> AccessGrant {
        AccessGrant {
            namespace: namespace.map(String::from),
            rules: vec![AccessRule {
                api_groups: vec!["".into()],
                resources: vec!["pods".into()],
                resource_names: vec![],
                verbs: vec!["get".into()],
            }],
            ..Default::default()
        }
    }

    #[test]
    fn grants_become_roles_and_bindings_of_the_service_account() {
        let by_name = AccessGrant {
            namespace: Some("apps".into()),
            cluster_role: Some("view".into()),
            ..Default::default()
        };
        let a = access(vec![rules(Some("apps")), rules(None), by_name]);
        let kinds: Vec<(Kind, String)> = wanted(&a)
            .iter()
            .map(|w| {
                (
                    w.kind,
                    w.label().split_whitespace().nth(1).unwrap().to_string(),
                )
            })
            .collect();
        let names: Vec<&str> = kinds.iter().map(|(_, n)| n.as_str()).collect();
        assert_eq!(
            kinds.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
            [
                Kind::ServiceAccount,
                Kind::Role,
                Kind::RoleBinding,
                Kind::ClusterRole,
                Kind::ClusterRoleBinding,
                Kind::RoleBinding,
            ]
        );
        assert_eq!(
            names[..2],
            ["kyma-system/agent", "apps/tessera-access-monitor-0"]
        );
        assert_eq!(names[3], "tessera-access-monitor-1");
        // A binding is named by what it binds: another role is another binding (roleRef
        // cannot change), the same role keeps its binding when grants move.
        let mut narrowed = a.clone();
        narrowed.spec.grants[2].cluster_role = Some("edit".into());
        assert_ne!(wanted(&narrowed)[5].name, wanted(&a)[5].name);
        let mut moved = a.clone();
        moved.spec.grants.remove(0);
        assert_eq!(wanted(&moved)[3].name, wanted(&a)[5].name);
        let all = wanted(&a);
        assert_eq!(all[5].doc["roleRef"]["kind"], "ClusterRole");
        assert_eq!(all[5].doc["roleRef"]["name"], "view");
        assert_eq!(all[2].doc["subjects"][0]["namespace"], "kyma-system");
        assert_eq!(all[1].doc["metadata"]["labels"][ACCESS_UID], "u-1");
        let theirs = std::collections::BTreeMap::from([(ACCESS_UID.to_string(), "u-2".into())]);
        assert!(!ours(&a, &theirs));
        assert!(!ours(&a, &Default::default()));
    }

    #[test]
    fn invalid_specs_name_the_field() {
        let both = AccessGrant {
            role: Some("r".into()),
            cluster_role: Some("c".into()),
            namespace: Some("apps".into()),
            ..Default::default()
        };
        let role_without_namespace = AccessGrant {
            role: Some("r".into()),
            ..Default::default()
        };
        let mut no_verbs = rules(None);
        no_verbs.rules[0].verbs.clear();
        let field = |grants: Vec<AccessGrant>| validate(&access(grants)).unwrap_err().field;
        assert_eq!(field(vec![rules(None), both]), "spec.grants[1]");
        assert_eq!(field(vec![AccessGrant::default()]), "spec.grants[0]");
        assert_eq!(
            field(vec![role_without_namespace]),
            "spec.grants[0].namespace"
        );
        assert_eq!(field(vec![no_verbs]), "spec.grants[0].rules[0].verbs");
        let slash = AccessGrant {
            cluster_role: Some("a/b".into()),
            ..Default::default()
        };
        assert_eq!(field(vec![slash]), "spec.grants[0].clusterRole");
        let mut moved = access(vec![]);
        moved.status = Some(RuntimeAccessStatus {
            runtime: Some("rt-0".into()),
            ..Default::default()
        });
        assert_eq!(validate(&moved).unwrap_err().field, "spec.runtime");
        let mut a = access(vec![]);
        for (text, ok) in [
            ("5m", false),
            ("10m", true),
            ("49h", false),
            ("soon", false),
        ] {
            a.spec.lifetime = Some(text.into());
            assert_eq!(validate(&a).is_ok(), ok, "{text}");
        }
    }

    #[test]
    fn a_token_is_renewed_when_due_asked_for_or_the_spec_changed() {
        let mut a = access(vec![]);
        let issued: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        a.status = Some(RuntimeAccessStatus {
            issued: Some("2026-01-01T00:00:00Z".into()),
            expiry: Some("2026-01-01T10:00:00Z".into()),
            token_generation: Some(1),
            ..Default::default()
        });
        let at = |hours: i64| issued + jiff::SignedDuration::from_hours(hours);
        assert_eq!(
            token_due(&a, true, at(1), 0.5),
            Err(Duration::from_secs(4 * 3600))
        );
        assert_eq!(token_due(&a, true, at(6), 0.5), Ok(()));
        assert_eq!(token_due(&a, false, at(1), 0.5), Ok(()), "Secret deleted");
        a.metadata.generation = Some(2);
        assert_eq!(token_due(&a, true, at(1), 0.5), Ok(()), "spec changed");
        a.metadata.generation = Some(1);
        // The annotation is read as the kubeconfig controller reads it: only "true" forces.
        for value in ["false", "x", ""] {
            a.metadata.annotations =
                Some([(labels::FORCE_ROTATION.to_string(), value.to_string())].into());
            assert!(
                token_due(&a, true, at(1), 0.5).is_err(),
                "{value:?} forced a rotation"
            );
        }
        a.metadata.annotations =
            Some([(labels::FORCE_ROTATION.to_string(), "true".to_string())].into());
        assert_eq!(token_due(&a, true, at(1), 0.5), Ok(()), "forced");
    }

    #[test]
    fn status_lists_objects_when_ready_and_the_generation_a_token_was_issued_for() {
        let mut a = access(vec![rules(Some("apps"))]);
        let pending = Outcome {
            state: KubeconfigState::Pending,
            reason: Reason::NamespaceMissing,
            message: "namespace apps does not exist".into(),
        };
        let status = status_after(&a, &pending, None);
        assert!(status.objects.is_empty() && status.token_generation.is_none());
        assert_eq!(status.conditions[0].reason, "NamespaceMissing");
        let ready = Outcome {
            state: KubeconfigState::Ready,
            reason: Reason::TokenIssued,
            message: "ok".into(),
        };
        let issued = Some(("t0".to_string(), "t1".to_string()));
        a.status = Some(status_after(&a, &ready, issued));
        let status = a.status.clone().unwrap();
        assert_eq!(status.objects.len(), 3);
        assert_eq!(status.token_generation, Some(1));
        assert_eq!(status.secret_name.as_deref(), Some("monitor-kubeconfig"));
        a.metadata.generation = Some(2);
        let later = status_after(&a, &pending, None);
        assert_eq!((later.token_generation, later.objects.len()), (Some(1), 3));
    }

    #[test]
    fn renewal_follows_the_expiry_granted() {
        let now: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let hour = Duration::from_secs(3600);
        let capped = renew_after("2026-01-01T01:00:00Z", now, 12 * hour, 0.5);
        assert_eq!(capped, Duration::from_secs(1800));
        assert_eq!(
            renew_after("garbage", now, hour, 0.5),
            Duration::from_secs(1800)
        );
        // Already expired: soon, as the one rotation decision's floor says, not at once.
        assert_eq!(
            renew_after("2025-01-01T00:00:00Z", now, hour, 0.5),
            Duration::from_secs(5)
        );
    }

    #[test]
    fn the_kubeconfig_copies_only_server_and_ca_of_the_admin_one() {
        let admin = r#"
apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: k, user: admin}}]
clusters:
- {name: other, cluster: {server: "https://wrong"}}
- {name: k, cluster: {server: "https://api.rt-1", certificate-authority-data: Q0E=, certificate-authority: /etc/ca.pem}}
users: [{name: admin, user: {exec: {command: /bin/sh, apiVersion: client.authentication.k8s.io/v1}}}]
"#;
        let server = server_of(admin).unwrap();
        assert_eq!(server.url, "https://api.rt-1");
        let text = kubeconfig(&server, "system:serviceaccount:kyma-system:agent", "tok");
        let doc: Value = serde_json::from_str(&text).unwrap();
        let cluster = &doc["clusters"][0]["cluster"];
        assert_eq!(cluster["certificate-authority-data"], "Q0E=");
        assert!(cluster.get("certificate-authority").is_none());
        assert_eq!(doc["users"][0]["user"], json!({"token": "tok"}));
        assert!(!text.contains("exec"));
    }
}
