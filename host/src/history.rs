//! Render history: every Shoot the host applies for a Runtime is recorded as a
//! `ControllerRevision` (Kubernetes' kind for exactly this) in the Runtime's namespace,
//! owned by it and labelled with its name. Each holds what produced the Shoot: the
//! Runtime's generation, each plugin's name, version, component digest and channel, a hash
//! of each plugin's configuration, the render's inputs (the Runtime as the chain saw it, the
//! current Shoot of a patch) and the Shoot itself with its hash. The last [`KEPT`] are kept;
//! the Runtime's deletion removes them. `tessera history` lists them and shows what changed
//! between two.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::api;
use crate::crd::labels::{MANAGED_BY, MANAGED_BY_VALUE, RUNTIME};
use crate::crd::{PluginStamp, Runtime};

/// Revisions kept per Runtime.
pub const KEPT: usize = 10;

/// What made the host apply the Shoot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Operation {
    /// The Shoot was created.
    Create,
    /// An existing Shoot was patched.
    Patch,
}

/// One applied render, as a revision holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RenderRecord {
    pub runtime_generation: i64,
    pub operation: Operation,
    /// The chain's steps in order: plugin, version, component digest, channel.
    pub plugins: Vec<PluginStamp>,
    /// `sha256:` of each plugin's configuration (the JSON text it was given), by plugin.
    pub config_hashes: BTreeMap<String, String>,
    /// The Shoot paths each plugin was granted (they decide what it sees), by plugin.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub grants: BTreeMap<String, Vec<String>>,
    /// `sha256:` of the Shoot (as `status.shootHash` shows it).
    pub shoot_hash: String,
    /// The Runtime as the chain was given it.
    pub runtime: Value,
    /// The Shoot a patch started from (absent for a create).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current: Option<Value>,
    /// The Shoot applied.
    pub shoot: Value,
}

/// A recorded revision: its number, when it was written, and the record.
#[derive(Debug, Clone, PartialEq)]
pub struct Revision {
    pub number: i64,
    pub name: String,
    pub created: Option<String>,
    pub record: RenderRecord,
}

/// Why the history could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("Kubernetes API: {}", crate::report::kube_error(.0))]
    Kube(#[from] kube::Error),
    #[error("ControllerRevision {name}: not a render record: {message}")]
    Unreadable { name: String, message: String },
}

fn api(client: &Client, namespace: &str) -> Api<ControllerRevision> {
    Api::namespaced(client.clone(), namespace)
}

/// The revisions labelled for `runtime`, from the API server's watch cache
/// (`resourceVersion=0`). Read from etcd instead, a label selector makes etcd read every
/// revision of the namespace, and KCP keeps all Runtimes in one: each Shoot applied read all
/// their revisions (30 MB at 2,400 Runtimes, every few seconds, in
/// `./x load --runtimes 10000 --replicas 3`) until the API server stalled for longer than a
/// lease. The cache may lag, usually by far less than the time between two applies of one
/// Runtime; a revision it missed would be recorded again under the same number, were the
/// new one not named after its number ([`record`]); on deletion, where no garbage
/// collector runs, it is left behind. `tessera history` reads etcd (`cached: false`):
/// rare, and it must show what was just written. Not "no older than the Runtime": on 1.20
/// the cache of revisions moves only when a revision changes, so such a list waited 3 s
/// and failed on a quiet cluster.
fn selector(runtime: &Runtime, cached: bool) -> ListParams {
    let params = ListParams::default().labels(&format!(
        "{RUNTIME}={},{MANAGED_BY}={MANAGED_BY_VALUE}",
        runtime.name_any()
    ));
    if cached { params.match_any() } else { params }
}

/// The revisions of Runtime `runtime` in `namespace`, oldest first: those owned by it (its
/// uid), so that a ControllerRevision someone else labelled with its name is not shown as
/// its history. None when the Runtime does not exist.
pub async fn list(
    client: &Client,
    namespace: &str,
    runtime: &str,
) -> Result<Vec<Revision>, HistoryError> {
    let runtimes: Api<Runtime> = Api::namespaced(client.clone(), namespace);
    let Some(runtime) = runtimes.get_opt(runtime).await? else {
        return Ok(Vec::new());
    };
    let mut out = owned(client, &runtime, false)
        .await?
        .into_iter()
        .map(revision_of)
        .collect::<Result<Vec<_>, _>>()?;
    out.sort_by_key(|r| r.number);
    Ok(out)
}

fn revision_of(cr: ControllerRevision) -> Result<Revision, HistoryError> {
    let name = cr.name_any();
    let data = cr.data.0;
    let record = serde_json::from_value(data).map_err(|e| HistoryError::Unreadable {
        name: name.clone(),
        message: e.to_string(),
    })?;
    Ok(Revision {
        number: cr.revision.unwrap_or_default(),
        created: cr.metadata.creation_timestamp.map(|t| t.0.to_string()),
        name,
        record,
    })
}

/// Whether `record` repeats the last revision (a retried apply): same Shoot, same plugins.
fn repeats(last: Option<&Revision>, record: &RenderRecord) -> bool {
    last.is_some_and(|l| {
        l.record.shoot_hash == record.shoot_hash
            && l.record.plugins == record.plugins
            && l.record.config_hashes == record.config_hashes
            && l.record.grants == record.grants
    })
}

/// The revisions beyond the newest [`KEPT`], oldest first (`revisions` sorted oldest first).
fn beyond_kept<T>(revisions: &[T]) -> &[T] {
    &revisions[..revisions.len().saturating_sub(KEPT)]
}

/// The revisions the host wrote for `runtime`, oldest first: labelled with it and owned by
/// this very Runtime (its uid). Others in the namespace, whoever made them, are neither
/// counted nor deleted, and one that does not read as a record stops nothing. `cached`:
/// from the API server's cache (see [`selector`]).
async fn owned(
    client: &Client,
    runtime: &Runtime,
    cached: bool,
) -> Result<Vec<ControllerRevision>, HistoryError> {
    let namespace = runtime.namespace().unwrap_or_default();
    let items = api(client, &namespace)
        .list(&selector(runtime, cached))
        .await?
        .items;
    let mut ours: Vec<ControllerRevision> = items
        .into_iter()
        .filter(|cr| of_runtime(cr, runtime))
        .collect();
    ours.sort_by_key(|cr| cr.revision.unwrap_or_default());
    Ok(ours)
}

/// Whether `revision` is owned by this very Runtime (its uid).
fn of_runtime(revision: &ControllerRevision, runtime: &Runtime) -> bool {
    let uid = runtime.metadata.uid.as_deref();
    revision
        .owner_references()
        .iter()
        .any(|o| Some(o.uid.as_str()) == uid)
}

/// Record `record` as the next revision of `runtime` (unless it repeats the last one), and
/// let the oldest beyond [`KEPT`] go. The revisions are read from the API server's cache
/// and the new one is named after its number: should the cache lag behind one this host
/// wrote, the name is taken (409), and that revision is read by name (one key, not a list)
/// and the next number tried. A name someone else's object holds gets a generated name.
/// Revisions named before names followed numbers were generated: a cache lagging behind
/// one of those is not caught.
pub async fn record(
    client: &Client,
    runtime: &Runtime,
    record: RenderRecord,
) -> Result<(), HistoryError> {
    let mut ours = owned(client, runtime, true).await?;
    for _ in 0..=KEPT {
        match write_next(client, runtime, &ours, &record, Naming::ByNumber).await {
            Err(HistoryError::Kube(e)) if crate::api::is_conflict(&e) => {}
            written => return written,
        }
        let name = format!("{}-{}", runtime.name_any(), next_number(&ours));
        let namespace = runtime.namespace().unwrap_or_default();
        match api(client, &namespace).get_opt(&name).await? {
            Some(taken) if of_runtime(&taken, runtime) => ours.push(taken),
            _ => break,
        }
    }
    write_next(client, runtime, &ours, &record, Naming::Generated).await
}

/// The number after the last of `ours` (oldest first).
fn next_number(ours: &[ControllerRevision]) -> i64 {
    ours.last()
        .map_or(1, |cr| cr.revision.unwrap_or_default() + 1)
}

/// How a new revision is named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Naming {
    /// `<runtime>-<number>`: a second write of one number fails.
    ByNumber,
    /// `<runtime>-<random>`.
    Generated,
}

/// Write `record` after the revisions `ours` (oldest first), unless it repeats the last.
async fn write_next(
    client: &Client,
    runtime: &Runtime,
    ours: &[ControllerRevision],
    record: &RenderRecord,
    naming: Naming,
) -> Result<(), HistoryError> {
    let last = ours.last().and_then(|cr| revision_of(cr.clone()).ok());
    if repeats(last.as_ref(), record) {
        return Ok(());
    }
    let namespace = runtime.namespace().unwrap_or_default();
    let name = runtime.name_any();
    let number = next_number(ours);
    let (fixed, generated) = match naming {
        Naming::ByNumber => (Some(format!("{name}-{number}")), None),
        Naming::Generated => (None, Some(format!("{name}-"))),
    };
    let revision = ControllerRevision {
        metadata: ObjectMeta {
            name: fixed,
            generate_name: generated,
            namespace: Some(namespace.clone()),
            labels: Some(BTreeMap::from([
                (RUNTIME.to_string(), name.clone()),
                (MANAGED_BY.to_string(), MANAGED_BY_VALUE.to_string()),
            ])),
            owner_references: owner(runtime).map(|o| vec![o]),
            ..Default::default()
        },
        revision: Some(number),
        data: RawExtension(serde_json::to_value(record).expect("a record serializes")),
    };
    let created = api(client, &namespace)
        .create(&PostParams::default(), &revision)
        .await?;
    let mut names: Vec<String> = ours.iter().map(|cr| cr.name_any()).collect();
    names.push(created.name_any());
    for old in beyond_kept(&names) {
        delete(client, &namespace, old).await?;
    }
    Ok(())
}

fn owner(runtime: &Runtime) -> Option<OwnerReference> {
    let mut owner = runtime.controller_owner_ref(&())?;
    // The Runtime's deletion removes its revisions itself ([`forget`]); nothing waits.
    owner.block_owner_deletion = Some(false);
    Some(owner)
}

async fn delete(client: &Client, namespace: &str, name: &str) -> Result<(), HistoryError> {
    match api(client, namespace)
        .delete(name, &DeleteParams::default())
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if api::is_not_found(&e) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Remove every revision of `runtime` (it is being deleted; a cluster's garbage collector
/// would too, through the owner reference, where one runs).
pub async fn forget(client: &Client, runtime: &Runtime) -> Result<(), HistoryError> {
    let namespace = runtime.namespace().unwrap_or_default();
    for cr in owned(client, runtime, true).await? {
        delete(client, &namespace, &cr.name_any()).await?;
    }
    Ok(())
}

/// What changed from revision `a` to revision `b`, in lines: the Runtime's generation, each
/// plugin's version and digest, each configuration, then the Shoot's fields.
pub fn changes(a: &RenderRecord, b: &RenderRecord) -> Vec<String> {
    let mut out = Vec::new();
    if a.runtime_generation != b.runtime_generation {
        out.push(format!(
            "runtime generation {} → {}",
            a.runtime_generation, b.runtime_generation
        ));
    }
    out.extend(plugin_changes(&a.plugins, &b.plugins));
    let names: std::collections::BTreeSet<&String> = a
        .config_hashes
        .keys()
        .chain(b.config_hashes.keys())
        .collect();
    for name in names {
        let (x, y) = (a.config_hashes.get(name), b.config_hashes.get(name));
        if x != y && x.is_some() && y.is_some() {
            out.push(format!("configuration of {name} changed"));
        }
    }
    for (name, paths) in &b.grants {
        if a.grants.get(name).is_some_and(|before| before != paths) {
            out.push(format!("grants of {name} changed"));
        }
    }
    out.extend(crate::plugins::shadow::diff(&a.shoot, &b.shoot));
    out
}

/// How the plugins of `a` became those of `b`, one line per plugin that changed.
pub fn plugin_changes(a: &[PluginStamp], b: &[PluginStamp]) -> Vec<String> {
    let by_name = |s: &[PluginStamp]| -> BTreeMap<String, PluginStamp> {
        s.iter().map(|p| (p.name.clone(), p.clone())).collect()
    };
    let (a, b) = (by_name(a), by_name(b));
    let names: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    let label = |p: &PluginStamp| format!("{} ({})", p.version, short(&p.digest));
    names
        .into_iter()
        .filter_map(|name| match (a.get(name), b.get(name)) {
            (Some(x), Some(y)) if x.digest != y.digest || x.version != y.version => {
                Some(format!("plugin {name}: {} → {}", label(x), label(y)))
            }
            (Some(x), None) => Some(format!("plugin {name}: {} → removed", label(x))),
            (None, Some(y)) => Some(format!("plugin {name}: added {}", label(y))),
            _ => None,
        })
        .collect()
}

/// The first 12 hex digits of a `sha256:` digest.
pub fn short(digest: &str) -> &str {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    &hex[..hex.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stamp(name: &str, version: &str, digest: &str) -> PluginStamp {
        PluginStamp {
            name: name.into(),
            version: version.into(),
            digest: digest.into(),
            channel: None,
        }
    }

    fn record(generation: i64, plugins: Vec<PluginStamp>, shoot: Value) -> RenderRecord {
        RenderRecord {
            runtime_generation: generation,
            operation: Operation::Patch,
            plugins,
            config_hashes: BTreeMap::from([("provider".into(), "sha256:1".into())]),
            grants: BTreeMap::from([("provider".into(), vec!["spec.provider".into()])]),
            shoot_hash: crate::oci::sha256_digest(shoot.to_string().as_bytes()),
            runtime: json!({}),
            current: None,
            shoot,
        }
    }

    #[test]
    fn changes_name_generation_plugins_and_fields() {
        let a = record(
            1,
            vec![
                stamp("provider", "1.0.0", "sha256:aaaa"),
                stamp("dns", "1.0.0", "sha256:dd"),
            ],
            json!({"spec": {"provider": {"workers": [{"maximum": 3}]}}}),
        );
        let mut b = record(
            3,
            vec![
                stamp("provider", "1.1.0", "sha256:bbbb"),
                stamp("oidc", "1.0.0", "sha256:ee"),
            ],
            json!({"spec": {"provider": {"workers": [{"maximum": 5}]}}}),
        );
        b.config_hashes.insert("provider".into(), "sha256:2".into());
        b.grants
            .insert("provider".into(), vec!["spec.provider.**".into()]);
        assert_eq!(
            changes(&a, &b),
            [
                "runtime generation 1 → 3",
                "plugin dns: 1.0.0 (dd) → removed",
                "plugin oidc: added 1.0.0 (ee)",
                "plugin provider: 1.0.0 (aaaa) → 1.1.0 (bbbb)",
                "configuration of provider changed",
                "grants of provider changed",
                "~ spec.provider.workers[0].maximum: 3 → 5",
            ]
        );
        assert!(changes(&a, &a).is_empty());
    }

    #[test]
    fn a_retried_apply_is_not_a_new_revision_and_ten_are_kept() {
        let r = record(
            1,
            vec![stamp("provider", "1.0.0", "sha256:a")],
            json!({"a": 1}),
        );
        let revision = |number: i64, record: RenderRecord| Revision {
            number,
            name: format!("rt-{number}"),
            created: None,
            record,
        };
        assert!(repeats(Some(&revision(1, r.clone())), &r));
        let mut moved = r.clone();
        moved.plugins[0].digest = "sha256:b".into();
        assert!(!repeats(Some(&revision(1, r.clone())), &moved));
        assert!(!repeats(None, &r));
        let twelve: Vec<Revision> = (1..=12).map(|n| revision(n, r.clone())).collect();
        let gone: Vec<i64> = beyond_kept(&twelve).iter().map(|r| r.number).collect();
        assert_eq!(gone, [1, 2]);
        assert!(beyond_kept(&twelve[..10]).is_empty());
    }

    #[test]
    fn revisions_are_recorded_from_the_cache_and_shown_from_etcd() {
        let text = include_str!("../../examples/runtime-aws.yaml");
        let mut doc: Value = serde_saphyr::from_str(text).expect("the example");
        doc["metadata"] = json!({"name": "rt-1", "namespace": "kcp-system"});
        let runtime: Runtime = serde_json::from_value(doc).expect("a Runtime");
        let params = selector(&runtime, true);
        assert_eq!(params.resource_version.as_deref(), Some("0"));
        assert_eq!(
            params.limit, None,
            "kube drops resourceVersion=0 with a limit"
        );
        let labels = params.label_selector.unwrap_or_default();
        assert!(labels.contains("=rt-1,"), "{labels}");
        assert_eq!(selector(&runtime, false).resource_version, None);
    }

    /// A ControllerRevision of `runtime` numbered `number`, as the API server lists it.
    fn listed(runtime: &Runtime, number: i64, record: &RenderRecord) -> Value {
        json!({
            "metadata": {
                "name": format!("rt-1-{number}"), "namespace": "kcp-system",
                "ownerReferences": [owner(runtime)],
            },
            "revision": number,
            "data": record,
        })
    }

    fn runtime_with_uid() -> Runtime {
        let text = include_str!("../../examples/runtime-aws.yaml");
        let mut doc: Value = serde_saphyr::from_str(text).expect("the example");
        doc["metadata"] = json!({"name": "rt-1", "namespace": "kcp-system", "uid": "u-1"});
        serde_json::from_value(doc).expect("a Runtime")
    }

    fn list(items: Vec<Value>) -> Value {
        json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items})
    }

    const REVISIONS: &str = "/apis/apps/v1/namespaces/kcp-system/controllerrevisions";

    #[tokio::test]
    async fn a_number_the_cache_has_not_seen_yet_is_read_by_name_and_the_next_taken() {
        use crate::api::mock::{Exchange, serve};
        use http::Method;
        let runtime = runtime_with_uid();
        let (one, two, three) = (
            record(1, vec![], json!({"a": 1})),
            record(2, vec![], json!({"a": 2})),
            record(3, vec![], json!({"a": 3})),
        );
        let (client, server) = serve(vec![
            // The cache lags: revision 2, just written by this host, is not in it.
            Exchange::ok(
                Method::GET,
                REVISIONS,
                list(vec![listed(&runtime, 1, &one)]),
            ),
            Exchange::fails(Method::POST, REVISIONS, 409, "rt-1-2 already exists"),
            Exchange::ok(
                Method::GET,
                &format!("{REVISIONS}/rt-1-2"),
                listed(&runtime, 2, &two),
            ),
            Exchange::ok(Method::POST, REVISIONS, listed(&runtime, 3, &three)),
        ]);
        super::record(&client, &runtime, three.clone())
            .await
            .expect("recorded");
        drop(client);
        let got = server.received().await;
        assert!(
            got[0].query.contains("resourceVersion=0"),
            "{}",
            got[0].query
        );
        assert_eq!(got[1].body["metadata"]["name"], "rt-1-2");
        let written = &got[3].body;
        assert_eq!(written["revision"], 3, "the next number, not 2 again");
        assert_eq!(written["metadata"]["name"], "rt-1-3");
    }

    #[tokio::test]
    async fn the_same_record_found_under_its_name_is_not_written_twice() {
        use crate::api::mock::{Exchange, serve};
        use http::Method;
        let runtime = runtime_with_uid();
        let one = record(1, vec![], json!({"a": 1}));
        let (client, server) = serve(vec![
            Exchange::ok(Method::GET, REVISIONS, list(vec![])),
            Exchange::fails(Method::POST, REVISIONS, 409, "rt-1-1 already exists"),
            Exchange::ok(
                Method::GET,
                &format!("{REVISIONS}/rt-1-1"),
                listed(&runtime, 1, &one),
            ),
        ]);
        super::record(&client, &runtime, one.clone())
            .await
            .expect("recorded already");
        drop(client);
        assert_eq!(server.received().await.len(), 3);
    }

    #[tokio::test]
    async fn a_name_someone_else_holds_gets_a_generated_name_with_the_same_number() {
        use crate::api::mock::{Exchange, serve};
        use http::Method;
        let runtime = runtime_with_uid();
        let one = record(1, vec![], json!({"a": 1}));
        let mut foreign = listed(&runtime, 7, &one);
        foreign["metadata"]["ownerReferences"] = json!([]);
        let (client, server) = serve(vec![
            Exchange::ok(Method::GET, REVISIONS, list(vec![])),
            Exchange::fails(Method::POST, REVISIONS, 409, "rt-1-1 already exists"),
            Exchange::ok(Method::GET, &format!("{REVISIONS}/rt-1-1"), foreign),
            Exchange::ok(Method::POST, REVISIONS, listed(&runtime, 1, &one)),
        ]);
        super::record(&client, &runtime, one.clone())
            .await
            .expect("recorded");
        drop(client);
        let written = &server.received().await[3].body;
        assert_eq!(written["revision"], 1);
        assert_eq!(written["metadata"]["generateName"], "rt-1-");
        assert_eq!(written["metadata"]["name"], Value::Null);
    }
}
