//! The sharder's view of one sharded kind: for every object only what placing it needs.
//! Every sharding replica holds every sharded object so (a new leader acts on its first
//! pass). A reflector store of slimmed `DynamicObject`s cost ~1.7 KiB per object (the
//! object's whole `ObjectMeta`, and each store key carries the kind's `ApiResource`, five
//! strings): ~34 MiB per replica at 10,000 Runtimes and their kubeconfigs. A [`Slim`] is
//! a few short strings.

use std::collections::HashMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};

use crate::crd::labels;

/// One sharded object as the sharder judges it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Slim {
    pub(crate) namespace: Box<str>,
    pub(crate) name: Box<str>,
    pub(crate) version: Box<str>,
    /// Its `tessera.dev/shard` label.
    pub(crate) shard: Option<Box<str>>,
    /// It carries the drain label.
    pub(crate) draining: bool,
    pub(crate) deleting: bool,
    /// What it is hashed by ([`shard_key`]).
    pub(crate) key: Box<str>,
}

impl Slim {
    /// `object` slimmed, with its uid; `None` without a uid or version (never from a watch).
    pub(crate) fn of(kind: &str, object: &DynamicObject) -> Option<(Box<str>, Self)> {
        Self::placed(&object.metadata, shard_key(kind, object))
    }

    /// A Runtime from its metadata alone: it is hashed by its own name, so the sharder
    /// watches Runtimes, the largest sharded kind and the one written most, as metadata.
    pub(crate) fn of_runtime(meta: &ObjectMeta) -> Option<(Box<str>, Self)> {
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        let key = runtime_key(namespace, meta.name.as_deref()?);
        Self::placed(meta, key)
    }

    fn placed(meta: &ObjectMeta, key: String) -> Option<(Box<str>, Self)> {
        let uid = meta.uid.as_deref()?;
        let labels = meta.labels.as_ref();
        let label = |name: &str| labels.and_then(|l| l.get(name));
        let slim = Self {
            namespace: meta.namespace.as_deref().unwrap_or_default().into(),
            name: meta.name.as_deref().unwrap_or_default().into(),
            version: meta.resource_version.as_deref()?.into(),
            shard: label(labels::SHARD).map(|s| s.as_str().into()),
            draining: label(labels::DRAIN).is_some(),
            deleting: meta.deletion_timestamp.is_some(),
            key: key.into(),
        };
        Some((uid.into(), slim))
    }
}

/// The key of the Runtime `name` in `namespace`, and of everything that follows it.
fn runtime_key(namespace: &str, name: &str) -> String {
    format!("{namespace}/{name}")
}

/// What every object of a sharded kind is hashed by: its Runtime (`namespace/runtime id`),
/// so that a Runtime's kubeconfig and accesses, and the ModuleSets on its cluster (named by
/// its kubeconfig Secret), share its shard and one cluster's client lives on one replica.
fn shard_key(kind: &str, object: &DynamicObject) -> String {
    let ns = object.namespace().unwrap_or_default();
    let spec = &object.data["spec"];
    let runtime = spec["runtime"].as_str();
    match kind {
        "Runtime" => runtime_key(&ns, &object.name_any()),
        "ModuleSet" => match spec["target"]["secretName"].as_str() {
            Some(secret) => match secret.strip_prefix("kubeconfig-") {
                Some(id) => runtime_key(&ns, id),
                None => format!("{ns}/secret/{secret}"),
            },
            None => format!("{ns}/moduleset/{}", object.name_any()),
        },
        _ => runtime_key(&ns, runtime.unwrap_or_default()),
    }
}

/// The objects of one sharded kind by uid, kept from its watch's events.
#[derive(Debug, Default)]
pub(crate) struct SlimStore {
    objects: HashMap<Box<str>, Slim>,
    /// A relist in progress: replaces `objects` once complete, so that an object deleted
    /// while the watch was down does not stay.
    relisting: Option<HashMap<Box<str>, Slim>>,
    /// The first list is complete: before that, a shard would look empty and an object
    /// unassigned.
    listed: bool,
}

impl SlimStore {
    /// Take in one event of a watch, each object slimmed by `slim`.
    pub(crate) fn apply<K: Resource>(
        &mut self,
        event: watcher::Event<K>,
        slim: impl Fn(&K) -> Option<(Box<str>, Slim)>,
    ) {
        match event {
            watcher::Event::Apply(object) => {
                if let Some((uid, slim)) = slim(&object) {
                    self.objects.insert(uid, slim);
                }
            }
            watcher::Event::Delete(object) => {
                if let Some(uid) = object.meta().uid.as_deref() {
                    self.objects.remove(uid);
                }
            }
            watcher::Event::Init => self.relisting = Some(HashMap::new()),
            watcher::Event::InitApply(object) => {
                if let Some((uid, slim)) = slim(&object) {
                    self.relisting.get_or_insert_default().insert(uid, slim);
                }
            }
            watcher::Event::InitDone => {
                self.objects = self.relisting.take().unwrap_or_default();
                self.listed = true;
            }
        }
    }

    pub(crate) fn listed(&self) -> bool {
        self.listed
    }

    pub(crate) fn contains(&self, uid: &str) -> bool {
        self.objects.contains_key(uid)
    }

    /// Every object, with its uid.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &Slim)> {
        self.objects.iter().map(|(uid, slim)| (&**uid, slim))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::Runtime;
    use kube::api::ApiResource;

    fn object(name: &str, spec: serde_json::Value) -> DynamicObject {
        let mut o = DynamicObject::new(name, &ApiResource::erase::<Runtime>(&())).within("kcp");
        o.data = serde_json::json!({ "spec": spec });
        o.metadata.uid = Some(format!("uid-{name}"));
        o.metadata.resource_version = Some("7".into());
        o
    }

    #[test]
    fn a_runtime_its_kubeconfig_its_accesses_and_the_module_sets_on_its_cluster_share_a_key() {
        let runtime = shard_key("Runtime", &object("rt-1", serde_json::json!({})));
        assert_eq!(runtime, "kcp/rt-1");
        let owned = object("whatever", serde_json::json!({ "runtime": "rt-1" }));
        assert_eq!(shard_key("RuntimeKubeconfig", &owned), runtime);
        assert_eq!(shard_key("RuntimeAccess", &owned), runtime);
        let set = object(
            "modules",
            serde_json::json!({ "target": { "secretName": "kubeconfig-rt-1" } }),
        );
        assert_eq!(shard_key("ModuleSet", &set), runtime);
        let other = object(
            "modules",
            serde_json::json!({ "target": { "secretName": "dev-cluster" } }),
        );
        assert_eq!(shard_key("ModuleSet", &other), "kcp/secret/dev-cluster");
        let local = object("modules", serde_json::json!({}));
        assert_eq!(shard_key("ModuleSet", &local), "kcp/moduleset/modules");
    }

    #[test]
    fn an_object_is_kept_as_its_placement_and_key() {
        let mut o = object("rt-1", serde_json::json!({ "big": "spec" }));
        o.metadata.labels = Some(
            [
                (labels::SHARD, "s1"),
                (labels::DRAIN, "true"),
                ("kyma-project.io/region", "eu"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .into(),
        );
        let (uid, slim) = Slim::of("Runtime", &o).expect("uid and version");
        assert_eq!(&*uid, "uid-rt-1");
        let expected = Slim {
            namespace: "kcp".into(),
            name: "rt-1".into(),
            version: "7".into(),
            shard: Some("s1".into()),
            draining: true,
            deleting: false,
            key: "kcp/rt-1".into(),
        };
        assert_eq!(slim, expected);
        // The sharder watches Runtimes as metadata: the same placement and key from it.
        assert_eq!(Slim::of_runtime(&o.metadata), Some((uid, expected)));
    }

    #[test]
    fn a_relist_replaces_the_objects_once_complete() {
        use watcher::Event;
        let mut store = SlimStore::default();
        let slim = |o: &DynamicObject| Slim::of("Runtime", o);
        let (a, b) = (
            object("a", serde_json::json!({})),
            object("b", serde_json::json!({})),
        );
        store.apply(Event::Init, slim);
        store.apply(Event::InitApply(a.clone()), slim);
        assert!(
            !store.listed() && !store.contains("uid-a"),
            "not before done"
        );
        store.apply(Event::InitDone, slim);
        assert!(store.listed() && store.contains("uid-a"));
        store.apply(Event::Apply(b.clone()), slim);
        assert_eq!(store.iter().count(), 2);
        // The watch broke; `a` went meanwhile: the relist drops it.
        store.apply(Event::Init, slim);
        store.apply(Event::InitApply(b.clone()), slim);
        assert!(store.contains("uid-a"), "kept until the relist is complete");
        store.apply(Event::InitDone, slim);
        assert!(!store.contains("uid-a") && store.contains("uid-b"));
        store.apply(Event::Delete(b), slim);
        assert_eq!(store.iter().count(), 0);
    }
}
