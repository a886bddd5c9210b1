//! The sharder's view of one sharded kind: for every object only what placing it needs.
//! Every sharding replica holds every sharded object so (a new leader acts on its first
//! pass). A reflector store of slimmed `DynamicObject`s cost ~1.7 KiB per object (the
//! object's whole `ObjectMeta`, and each store key carries the kind's `ApiResource`, five
//! strings): ~34 MiB per replica at 10,000 Runtimes and their kubeconfigs. A [`Slim`] is
//! a few short strings.

use std::collections::HashMap;

use kube::ResourceExt;
use kube::api::DynamicObject;
use kube::runtime::watcher;

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
    fn of(kind: &str, object: &DynamicObject) -> Option<(Box<str>, Self)> {
        let meta = &object.metadata;
        let uid = meta.uid.as_deref()?;
        let labels = object.labels();
        let slim = Self {
            namespace: object.namespace().unwrap_or_default().into(),
            name: object.name_any().into(),
            version: meta.resource_version.as_deref()?.into(),
            shard: labels.get(labels::SHARD).map(|s| s.as_str().into()),
            draining: labels.contains_key(labels::DRAIN),
            deleting: meta.deletion_timestamp.is_some(),
            key: shard_key(kind, object).into(),
        };
        Some((uid.into(), slim))
    }
}

/// What every object of a sharded kind is hashed by: its Runtime (`namespace/runtime id`),
/// so that a Runtime's kubeconfig and accesses, and the ModuleSets on its cluster (named by
/// its kubeconfig Secret), share its shard and one cluster's client lives on one replica.
fn shard_key(kind: &str, object: &DynamicObject) -> String {
    let ns = object.namespace().unwrap_or_default();
    let spec = &object.data["spec"];
    let runtime = spec["runtime"].as_str();
    match kind {
        "Runtime" => format!("{ns}/{}", object.name_any()),
        "ModuleSet" => match spec["target"]["secretName"].as_str() {
            Some(secret) => match secret.strip_prefix("kubeconfig-") {
                Some(id) => format!("{ns}/{id}"),
                None => format!("{ns}/secret/{secret}"),
            },
            None => format!("{ns}/moduleset/{}", object.name_any()),
        },
        _ => format!("{ns}/{}", runtime.unwrap_or_default()),
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
    /// Take in one event of the watch of `kind`.
    pub(crate) fn apply(&mut self, kind: &str, event: watcher::Event<DynamicObject>) {
        match event {
            watcher::Event::Apply(object) => {
                if let Some((uid, slim)) = Slim::of(kind, &object) {
                    self.objects.insert(uid, slim);
                }
            }
            watcher::Event::Delete(object) => {
                if let Some(uid) = object.metadata.uid.as_deref() {
                    self.objects.remove(uid);
                }
            }
            watcher::Event::Init => self.relisting = Some(HashMap::new()),
            watcher::Event::InitApply(object) => {
                if let Some((uid, slim)) = Slim::of(kind, &object) {
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
    }

    #[test]
    fn a_relist_replaces_the_objects_once_complete() {
        use watcher::Event;
        let mut store = SlimStore::default();
        let (a, b) = (
            object("a", serde_json::json!({})),
            object("b", serde_json::json!({})),
        );
        store.apply("Runtime", Event::Init);
        store.apply("Runtime", Event::InitApply(a.clone()));
        assert!(
            !store.listed() && !store.contains("uid-a"),
            "not before done"
        );
        store.apply("Runtime", Event::InitDone);
        assert!(store.listed() && store.contains("uid-a"));
        store.apply("Runtime", Event::Apply(b.clone()));
        assert_eq!(store.iter().count(), 2);
        // The watch broke; `a` went meanwhile: the relist drops it.
        store.apply("Runtime", Event::Init);
        store.apply("Runtime", Event::InitApply(b.clone()));
        assert!(store.contains("uid-a"), "kept until the relist is complete");
        store.apply("Runtime", Event::InitDone);
        assert!(!store.contains("uid-a") && store.contains("uid-b"));
        store.apply("Runtime", Event::Delete(b));
        assert_eq!(store.iter().count(), 0);
    }
}
