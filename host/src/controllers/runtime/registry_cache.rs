//! Registry-cache credentials, as KIM keeps them (`sFnSyncRegistryCacheGardenSecrets`,
//! `sFnCleanupRegistryCacheGardenSecrets`, `internal/registrycache`): a Runtime's cache
//! names a Secret of its own runtime cluster (`imageRegistryCache[].namespace` and
//! `config.secretReferenceName`). Gardener's extension reads credentials from the Shoot's
//! project, so the host copies that Secret there as an immutable `reg-cache-…`; changed
//! credentials become a new copy and the old one is marked dirty. The render names the copy
//! ([`resolve`]); copies nobody wants are deleted once the Shoot no longer refers to them,
//! and all of them with the Runtime.
//!
//! The tenant names a Secret of its own cluster, never one of the project (shared by every
//! Runtime there): a name the host did not resolve is left out of the render. Only copies
//! labelled with this Runtime (or, for a Runtime taken over from KIM, KIM's copies of its
//! runtime id) are ever used, changed or deleted.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;

use crate::controllers::kit::SecretBuilder;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tessera_sdk::models::ImageRegistryCache;

use super::machine::Machine;
use super::takeover;
use crate::api;
use crate::controllers::{ReconcileError, labels};
use crate::crd::{ConditionStatus, ConditionType, FIELD_MANAGER, Reason};

/// The name prefix of every copy (KIM's `RegistryCacheSecretPrefix`).
pub(crate) const PREFIX: &str = "reg-cache-";
use crate::crd::labels::{
    KIM_DIRTY, KIM_MANAGED_BY_VALUE, KIM_REGISTRY_CACHE_ID, KIM_REGISTRY_CACHE_NAME,
    KIM_REGISTRY_CACHE_NAMESPACE, KIM_RUNTIME_ID,
};

type Data = BTreeMap<String, ByteString>;

/// A copy in the project.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Copy {
    pub(crate) name: String,
    /// The Secret's uid (the precondition of its deletion).
    pub(crate) uid: Option<String>,
    /// The cache uid it holds credentials for.
    pub(crate) cache: Option<String>,
    pub(crate) dirty: bool,
    pub(crate) data: Data,
}

/// A Runtime cache with credentials and, when the runtime cluster answered, its Secret's
/// data (`None`: not known this time, the copy there is kept as it is).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Wanted {
    pub(crate) uid: String,
    pub(crate) name: String,
    pub(crate) namespace: String,
    pub(crate) data: Option<Data>,
}

/// What to do in the project.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Act {
    /// A new copy (the API server names it: `generateName` `reg-cache-`).
    Create(Wanted),
    MarkDirty(String),
    /// A copy's name and uid.
    Delete(String, Option<String>),
}

/// The acts, and the existing copy each cache uid uses (a created copy adds its own).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Plan {
    pub(crate) acts: Vec<Act>,
    pub(crate) names: BTreeMap<String, String>,
}

/// Decide: each wanted cache (uids are unique, `wanted` checks) uses a clean copy holding
/// its data (any clean one, the Shoot's first, when the data are unknown), else a new copy;
/// a copy that lost its place is marked dirty while the live Shoot still refers to it
/// (`referenced`), deleted otherwise.
pub(crate) fn decide(wanted: &[Wanted], copies: &[Copy], referenced: &BTreeSet<String>) -> Plan {
    let mut plan = Plan::default();
    for cache in wanted {
        let mut clean: Vec<&Copy> = copies
            .iter()
            .filter(|c| c.cache.as_deref() == Some(&cache.uid) && !c.dirty)
            .collect();
        clean.sort_by_key(|c| (!referenced.contains(&c.name), c.name.clone()));
        let usable = match &cache.data {
            Some(data) => clean.iter().find(|c| &c.data == data),
            None => clean.first(),
        };
        match (usable, &cache.data) {
            (Some(c), _) => {
                plan.names.insert(cache.uid.clone(), c.name.clone());
            }
            (None, Some(_)) => plan.acts.push(Act::Create(cache.clone())),
            (None, None) => {}
        }
    }
    let used: BTreeSet<&String> = plan.names.values().collect();
    for copy in copies.iter().filter(|c| !used.contains(&c.name)) {
        match (referenced.contains(&copy.name), copy.dirty) {
            (false, _) => plan
                .acts
                .push(Act::Delete(copy.name.clone(), copy.uid.clone())),
            (true, false) => plan.acts.push(Act::MarkDirty(copy.name.clone())),
            (true, true) => {}
        }
    }
    plan
}

/// The caches of `caches` that name a Secret, with their index.
/// Whether every reconcile of the Runtime reads its cluster (caches with credentials are
/// copied from there each pass): then its cluster client is worth keeping.
pub(crate) fn reads_cluster(m: &Machine) -> bool {
    let caches = m.runtime.spec.inner.image_registry_cache.as_deref();
    m.ctx.config.registry_cache_credentials
        && caches.is_some_and(|c| with_secrets(c).next().is_some())
}

fn with_secrets(
    caches: &[ImageRegistryCache],
) -> impl Iterator<Item = (usize, &ImageRegistryCache, &str)> {
    caches.iter().enumerate().filter_map(|(i, c)| {
        let secret = c.config.secret_reference_name.as_deref()?;
        (!secret.is_empty()).then_some((i, c, secret))
    })
}

/// The copies the live Shoot refers to (`spec.resources`).
pub(crate) fn referenced(shoot: &Value) -> BTreeSet<String> {
    shoot["spec"]["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["resourceRef"]["name"].as_str())
        .filter(|n| n.starts_with(PREFIX))
        .map(String::from)
        .collect()
}

/// The copies the registry-cache extension of `shoot` names.
fn named_by_extension(shoot: &Value) -> BTreeSet<String> {
    crate::render::caches::live_copies(shoot)
        .map(|(_, name)| name.to_string())
        .collect()
}

/// What the sync found: whether the live Shoot names other copies than the render will (a
/// patch is due), and whether a cache still waits for its runtime cluster.
#[derive(Debug, Default)]
pub(crate) struct Synced {
    pub(crate) stale: bool,
    pub(crate) waiting: bool,
}

/// Sync the copies of the Runtime's caches, record which copy each cache uses
/// (`m.cache_secrets`), and clean up. Nothing is read when the Runtime has no cache with
/// credentials and its Shoot refers to no copy.
pub(crate) async fn sync(m: &mut Machine) -> Result<Synced, ReconcileError> {
    let caches = m
        .runtime
        .spec
        .inner
        .image_registry_cache
        .clone()
        .unwrap_or_default();
    let shoot = m
        .shoot
        .as_ref()
        .map(|s| serde_json::to_value(s).unwrap_or_default());
    let live = shoot.as_ref().map(referenced).unwrap_or_default();
    let any = with_secrets(&caches).next().is_some();
    if !m.ctx.config.registry_cache_credentials {
        credentials_off(m, any);
        return Ok(Synced::default());
    }
    // Nothing asks for copies and none are left to clean up: not a single request.
    if !any && live.is_empty() && !has_condition(m) {
        return Ok(Synced::default());
    }
    let api = project_secrets(m);
    let copies = copies(m, &api).await?;
    let (wanted, missing) = wanted(m, &caches).await;
    let mut plan = decide(&wanted, &copies, &live);
    let mut deleted = 0;
    for act in &plan.acts {
        deleted += usize::from(matches!(act, Act::Delete(..)));
        if let Some((uid, name)) = perform(m, &api, act).await? {
            plan.names.insert(uid, name);
        }
    }
    let waiting = with_secrets(&caches).count() > plan.names.len() + missing.len();
    report(m, &plan, &missing, waiting, copies.len() - deleted);
    // Only this Runtime's copies count: the operator's caches may name other Secrets.
    let ours: BTreeSet<String> = copies
        .iter()
        .map(|c| c.name.clone())
        .chain(plan.names.values().cloned())
        .collect();
    let named: BTreeSet<String> = shoot
        .as_ref()
        .map(named_by_extension)
        .unwrap_or_default()
        .into_iter()
        .filter(|n| ours.contains(n))
        .collect();
    let stale = plan.names.values().cloned().collect::<BTreeSet<_>>() != named;
    m.cache_secrets = plan.names;
    Ok(Synced { stale, waiting })
}

fn has_condition(m: &Machine) -> bool {
    m.status
        .conditions
        .iter()
        .any(|c| c.is(ConditionType::RegistryCacheConfigured))
}

/// `--registry-cache-credentials` is off: say so while a cache names credentials (the
/// condition keeps its transition time), else nothing.
fn credentials_off(m: &mut Machine, any: bool) {
    if !any {
        m.status
            .conditions
            .retain(|c| !c.is(ConditionType::RegistryCacheConfigured));
        return;
    }
    let message = "a registry cache names credentials but the host does not copy them (--registry-cache-credentials, chart registryCache.credentials): the cache is left out of the Shoot";
    m.condition(
        ConditionType::RegistryCacheConfigured,
        ConditionStatus::False,
        Reason::RegistryCacheGardenClusterConfigurationFailed,
        message,
    );
}

fn project_secrets(m: &Machine) -> Api<Secret> {
    Api::namespaced(m.ctx.shoots.client().clone(), &m.identity().namespace)
}

/// The copies of this Runtime: Tessera's (labelled with its namespace too) and, taking
/// over from KIM, KIM's for its runtime id.
async fn copies(m: &Machine, api: &Api<Secret>) -> Result<Vec<Copy>, ReconcileError> {
    let selector = format!("{KIM_RUNTIME_ID}={}", m.id());
    let list = api.list(&ListParams::default().labels(&selector)).await?;
    let kim = takeover::takes_over(&m.runtime, &m.ctx.config.kim);
    Ok(list
        .items
        .into_iter()
        .filter(|s| s.name_any().starts_with(PREFIX))
        .filter(|s| {
            let l = s.labels();
            match l.get(labels::RUNTIME_NAMESPACE) {
                Some(ns) => *ns == m.namespace(),
                None => {
                    kim && l.get(labels::MANAGED_BY).map(String::as_str)
                        == Some(KIM_MANAGED_BY_VALUE)
                }
            }
        })
        .map(|s| Copy {
            name: s.name_any(),
            uid: s.uid(),
            cache: s.labels().get(KIM_REGISTRY_CACHE_ID).cloned(),
            dirty: s.labels().get(KIM_DIRTY).map(String::as_str) == Some("true"),
            data: s.data.clone().unwrap_or_default(),
        })
        .collect())
}

/// The caches with credentials, with their Secrets' data when the runtime cluster answers;
/// and, for each cache that cannot be served (its Secret missing or unreadable there, no or
/// a repeated uid), why, naming the field.
async fn wanted(m: &mut Machine, caches: &[ImageRegistryCache]) -> (Vec<Wanted>, Vec<String>) {
    let client = m.cluster().await.ok();
    let mut wanted = Vec::new();
    let mut missing = Vec::new();
    for (i, cache, secret) in with_secrets(caches) {
        let field = format!("spec.imageRegistryCache[{i}]");
        let (Some(uid), Some(namespace)) = (&cache.uid, &cache.namespace) else {
            missing.push(format!("{field} names a Secret but no uid and namespace"));
            continue;
        };
        if !is_label_value(uid) || wanted.iter().any(|w: &Wanted| &w.uid == uid) {
            missing.push(format!(
                "{field}.uid {uid:?} is not a unique label value (each cache's copy is found by it)"
            ));
            continue;
        }
        let data = match &client {
            Some(client) => {
                let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
                match api.get_opt(secret).await {
                    Ok(Some(s)) => Some(s.data.unwrap_or_default()),
                    Ok(None) => {
                        missing.push(format!(
                            "{field}.config.secretReferenceName: Secret {namespace}/{secret} does not exist in the runtime cluster"
                        ));
                        None
                    }
                    Err(e) => {
                        missing.push(format!(
                            "{field}.config.secretReferenceName: reading Secret {namespace}/{secret} in the runtime cluster failed: {}",
                            crate::report::kube_error(&e)
                        ));
                        None
                    }
                }
            }
            None => None,
        };
        wanted.push(Wanted {
            uid: uid.clone(),
            name: cache.name.clone().unwrap_or_default(),
            namespace: namespace.clone(),
            data,
        });
    }
    (wanted, missing)
}

/// Kubernetes' label value syntax: at most 63 characters, alphanumerics with `-`, `_`
/// and `.` inside.
fn is_label_value(v: &str) -> bool {
    let ends = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    !v.is_empty()
        && v.len() <= 63
        && ends(v.chars().next())
        && ends(v.chars().last())
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// Carry out `act`; a created copy's (cache uid, name).
async fn perform(
    m: &Machine,
    api: &Api<Secret>,
    act: &Act,
) -> Result<Option<(String, String)>, ReconcileError> {
    match act {
        Act::Create(cache) => {
            let params = PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            };
            let name = api.create(&params, &copy_of(m, cache)).await?.name_any();
            tracing::info!(runtime = %m.id(), secret = %name, cache = %cache.name, "registry cache credentials copied into the project");
            return Ok(Some((cache.uid.clone(), name)));
        }
        Act::MarkDirty(name) => {
            let patch = json!({"metadata": {"labels": {KIM_DIRTY: "true"}}});
            match api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Err(e) if api::is_not_found(&e) => {}
                Ok(_) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Act::Delete(name, uid) => {
            let params = DeleteParams {
                preconditions: Some(kube::api::Preconditions {
                    uid: uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            delete(m, api, name, &params).await?;
        }
    }
    Ok(None)
}

/// Delete copy `name`; gone already or replaced (404, 409) is fine.
async fn delete(
    m: &Machine,
    api: &Api<Secret>,
    name: &str,
    params: &DeleteParams,
) -> Result<(), ReconcileError> {
    match api.delete(name, params).await {
        Err(e) if api::is_not_found(&e) || api::is_conflict(&e) => Ok(()),
        Ok(_) => {
            tracing::info!(runtime = %m.id(), secret = %name, "registry cache credentials deleted from the project");
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// A copy as KIM's `newGardenSecret` makes it, plus Tessera's labels.
fn copy_of(m: &Machine, cache: &Wanted) -> Secret {
    SecretBuilder::generated(PREFIX.to_string())
        .label(KIM_RUNTIME_ID, m.id())
        .label(KIM_REGISTRY_CACHE_ID, &cache.uid)
        .label(labels::MANAGED_BY, labels::MANAGED_BY_VALUE)
        .label(labels::RUNTIME, m.id())
        .label(labels::RUNTIME_NAMESPACE, m.namespace())
        .annotate(KIM_REGISTRY_CACHE_NAME, &cache.name)
        .annotate(KIM_REGISTRY_CACHE_NAMESPACE, &cache.namespace)
        .immutable()
        .all_data(cache.data.clone())
        .build()
}

/// `RegistryCacheConfigured` (KIM's condition): True once every cache with credentials
/// has its copy (or, with none left, while `left` copies wait to be deleted — the
/// condition is what brings the cleanup back); False naming the field of a Secret that is
/// missing, or waiting for the runtime cluster; gone once nothing is left.
fn report(m: &mut Machine, plan: &Plan, missing: &[String], waiting: bool, left: usize) {
    let (status, reason, message) = if !missing.is_empty() {
        (
            ConditionStatus::False,
            Reason::RegistryCacheGardenClusterConfigurationFailed,
            missing.join("; "),
        )
    } else if waiting {
        (
            ConditionStatus::False,
            Reason::RegistryCacheGardenClusterConfigurationFailed,
            "waiting for the runtime cluster to copy the registry cache credentials".to_string(),
        )
    } else if plan.names.is_empty() && left == 0 {
        m.status
            .conditions
            .retain(|c| !c.is(ConditionType::RegistryCacheConfigured));
        return;
    } else {
        (
            ConditionStatus::True,
            Reason::RegistryCacheConfigured,
            format!(
                "{} registry cache credential(s) in the project, {} cop(ies) kept",
                plan.names.len(),
                left
            ),
        )
    };
    m.condition(
        ConditionType::RegistryCacheConfigured,
        status,
        reason,
        message,
    );
}

/// Delete every copy of this Runtime (it is gone), when the host copies credentials.
pub(crate) async fn remove_all(m: &Machine) -> Result<(), ReconcileError> {
    if !m.ctx.config.registry_cache_credentials {
        return Ok(());
    }
    let api = project_secrets(m);
    let copies = match copies(m, &api).await {
        Ok(copies) => copies,
        Err(ReconcileError::Kube(e)) if api::is_forbidden(&e) => return Ok(()),
        Err(e) => return Err(e),
    };
    for copy in copies {
        perform(m, &api, &Act::Delete(copy.name, copy.uid)).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(v: &str) -> Data {
        BTreeMap::from([("password".to_string(), ByteString(v.as_bytes().to_vec()))])
    }

    fn wanted(uid: &str, v: Option<&str>) -> Wanted {
        Wanted {
            uid: uid.into(),
            name: "hub".into(),
            namespace: "kyma-system".into(),
            data: v.map(data),
        }
    }

    fn copy(name: &str, uid: &str, dirty: bool, v: &str) -> Copy {
        Copy {
            name: name.into(),
            uid: None,
            cache: Some(uid.into()),
            dirty,
            data: data(v),
        }
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    /// KIM `garden_secret_syncer_test.go:TestGardenSecretSyncer` "should create" and
    /// "should not change when data is equal".
    #[test]
    fn a_cache_gets_a_copy_once_and_keeps_it_while_the_data_agree() {
        let plan = decide(&[wanted("u1", Some("a"))], &[], &set(&[]));
        assert_eq!(plan.acts, vec![Act::Create(wanted("u1", Some("a")))]);
        let copies = [copy("reg-cache-1", "u1", false, "a")];
        let plan = decide(&[wanted("u1", Some("a"))], &copies, &set(&["reg-cache-1"]));
        assert!(plan.acts.is_empty());
        assert_eq!(plan.names["u1"], "reg-cache-1");
    }

    /// KIM "should mark the old secret dirty and create a new one when data changed", then
    /// `garden_secret_manager_test.go` (DeleteUnused): dirty copies go once unreferenced.
    #[test]
    fn changed_credentials_make_a_new_copy_and_the_old_one_goes_when_unreferenced() {
        let copies = [copy("reg-cache-1", "u1", false, "a")];
        let plan = decide(&[wanted("u1", Some("b"))], &copies, &set(&["reg-cache-1"]));
        assert_eq!(
            plan.acts,
            vec![
                Act::Create(wanted("u1", Some("b"))),
                Act::MarkDirty("reg-cache-1".into())
            ]
        );
        let copies = [
            copy("reg-cache-1", "u1", true, "a"),
            copy("reg-cache-2", "u1", false, "b"),
        ];
        let plan = decide(&[wanted("u1", Some("b"))], &copies, &set(&["reg-cache-2"]));
        assert_eq!(plan.acts, vec![Act::Delete("reg-cache-1".into(), None)]);
        let plan = decide(&[wanted("u1", Some("b"))], &copies, &set(&["reg-cache-1"]));
        assert!(plan.acts.is_empty(), "a dirty copy still referenced stays");
    }

    /// KIM `TestFnCleanupRegistryCacheGardenSecrets`: a copy of a cache that went is
    /// orphaned; an unreachable runtime cluster keeps the copy there.
    /// Of two clean copies the one holding the cache's data is used (a crash between a
    /// create and the dirty mark leaves two), the other goes; the last cache gone, its copy
    /// is marked dirty while the Shoot names it, deleted after.
    #[test]
    fn the_copy_with_the_data_wins_and_copies_of_a_gone_cache_go() {
        let copies = [
            copy("reg-cache-1", "u1", false, "a"),
            copy("reg-cache-2", "u1", false, "b"),
        ];
        let plan = decide(&[wanted("u1", Some("b"))], &copies, &set(&["reg-cache-1"]));
        assert_eq!(plan.names["u1"], "reg-cache-2");
        assert_eq!(plan.acts, vec![Act::MarkDirty("reg-cache-1".into())]);
        let plan = decide(&[], &copies[..1], &set(&["reg-cache-1"]));
        assert_eq!(plan.acts, vec![Act::MarkDirty("reg-cache-1".into())]);
        let plan = decide(&[], &copies[..1], &set(&[]));
        assert_eq!(plan.acts, vec![Act::Delete("reg-cache-1".into(), None)]);
    }

    #[test]
    fn cache_uids_must_be_label_values() {
        assert!(is_label_value("0f6c1d2e-3b4a-4c5d-8e9f-a0b1c2d3e4f5"));
        assert!(!is_label_value(""));
        assert!(!is_label_value("-a"));
        assert!(!is_label_value("a/b"));
        assert!(!is_label_value(&"a".repeat(64)));
    }

    #[test]
    fn orphans_go_and_unknown_data_keep_the_copy() {
        let copies = [
            copy("reg-cache-1", "u1", false, "a"),
            copy("reg-cache-9", "gone", false, "z"),
        ];
        let plan = decide(&[wanted("u1", None)], &copies, &set(&["reg-cache-1"]));
        assert_eq!(plan.acts, vec![Act::Delete("reg-cache-9".into(), None)]);
        assert_eq!(plan.names["u1"], "reg-cache-1");
        let plan = decide(&[wanted("u2", None)], &[], &set(&[]));
        assert_eq!(plan, Plan::default());
    }
}
