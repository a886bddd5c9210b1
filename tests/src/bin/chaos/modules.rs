//! The ModuleSets of a chaos run (`--modulesets N`): two modules of the first-party
//! `manifest` plugin, pulled from a real registry, installed through each Runtime's own
//! kubeconfig Secret (the one its RuntimeKubeconfig keeps) into one namespace of the
//! runtime cluster, which every Runtime of the simulator shares; each set's objects are
//! named after it. A watch on that namespace notes every uid an object name had, so an
//! object made twice (deleted and made again, or made anew by a second host) is seen
//! even if the end state looks right.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use tessera::crd::{ModuleSet, Plugin};
use tessera::modules::State;
use tessera_tests::modules::{plugin_file, tessera};
use tessera_tests::registry::TestRegistry;

/// The runtime cluster's namespace the modules install into.
pub(crate) const TARGET_NS: &str = "chaos-modules";
/// The label selecting this run's Plugins (`--plugin-selector`).
pub(crate) const SELECTOR: &str = "tessera.dev/test=chaos";

/// A ConfigMap carrying the set's colour.
const BASE: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: '${set}-base', namespace: chaos-modules}
data: {color: '${color}'}
";

/// A ServiceAccount and a ConfigMap, after `chaos-base` (it requires it).
const EXTRA: &str = "apiVersion: v1
kind: ServiceAccount
metadata: {name: '${set}-extra', namespace: chaos-modules}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: '${set}-extra', namespace: chaos-modules}
data: {color: '${color}'}
";

/// The objects a set's modules make: (kind, name).
pub(crate) fn objects_of(set: &str) -> [(&'static str, String); 3] {
    [
        ("ConfigMap", format!("{set}-base")),
        ("ConfigMap", format!("{set}-extra")),
        ("ServiceAccount", format!("{set}-extra")),
    ]
}

pub(crate) fn set_name(s: usize) -> String {
    format!("chaos-s{s}")
}

/// ModuleSet `s` on Runtime `runtime`'s cluster, its objects coloured `color`.
pub(crate) fn set_doc(s: usize, runtime: &str, color: u32) -> Value {
    let values = json!({"set": set_name(s), "color": color.to_string()});
    json!({
        "apiVersion": "tessera.dev/v1alpha1", "kind": "ModuleSet",
        "metadata": {"name": set_name(s)},
        "spec": {
            "target": {"secretName": tessera::crd::labels::kubeconfig_secret(runtime)},
            "modules": [
                {"name": "chaos-base", "config": {"values": values}},
                {"name": "chaos-extra", "config": {"values": values}},
            ],
        },
    })
}

/// Ready at its generation.
pub(crate) fn is_ready(set: &ModuleSet) -> bool {
    let status = set.status.as_ref();
    status.and_then(|s| s.state) == Some(State::Ready)
        && status.and_then(|s| s.observed_generation) == set.metadata.generation
}

/// The registry, the hosts' plugin store and the uids seen in the target namespace.
pub(crate) struct Modules {
    _registry: TestRegistry,
    _store: tempfile::TempDir,
    /// `tessera run` arguments for the plugins.
    pub(crate) host_args: Vec<String>,
    /// "Kind/name" → every uid the name had.
    uids: Arc<Mutex<BTreeMap<String, BTreeSet<String>>>>,
}

impl Modules {
    /// Push the plugin, write the two Plugins, make the target namespace and start
    /// noting uids there (on the caller's runtime).
    pub(crate) async fn start(
        garden: &kube::Client,
        target: &kube::Client,
    ) -> anyhow::Result<Self> {
        let registry = TestRegistry::start().map_err(anyhow::Error::msg)?;
        let reference = format!("{}/chaos/manifest:1.0.0", registry.host());
        push(&reference)?;
        write_plugins(garden, &reference).await?;
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": TARGET_NS}}))?;
        Api::<Namespace>::all(target.clone())
            .create(&PostParams::default(), &ns)
            .await?;
        let store = tempfile::tempdir()?;
        let host_args = vec![
            "--plugin-selector".into(),
            SELECTOR.into(),
            "--plugin-store".into(),
            store.path().display().to_string(),
        ];
        let uids = Arc::default();
        note_uids::<ConfigMap>(target, &uids);
        note_uids::<ServiceAccount>(target, &uids);
        Ok(Self {
            _registry: registry,
            _store: store,
            host_args,
            uids,
        })
    }

    /// Object names of the target namespace made more than once.
    pub(crate) fn made_twice(&self) -> Vec<String> {
        let uids = self.uids.lock().expect("not poisoned");
        uids.iter()
            .filter(|(_, made)| made.len() > 1)
            .map(|(name, made)| format!("{name} was made {} times", made.len()))
            .collect()
    }

    /// Object names seen in the target namespace.
    pub(crate) fn seen(&self) -> usize {
        self.uids.lock().expect("not poisoned").len()
    }
}

fn push(reference: &str) -> anyhow::Result<()> {
    let manifest = plugin_file("manifest").display().to_string();
    let (ok, out) = tessera(&["plugin", "push", &manifest, reference, "--version", "1.0.0"]);
    anyhow::ensure!(ok, "push: {out}");
    Ok(())
}

async fn write_plugins(client: &kube::Client, reference: &str) -> anyhow::Result<()> {
    let grants = json!({"write": [
        {"apiGroups": [""], "kinds": ["ConfigMap", "ServiceAccount"], "namespaces": [TARGET_NS]},
    ]});
    let (label, value) = SELECTOR.split_once('=').expect("a label selector");
    for (name, config) in [
        ("chaos-base", json!({"manifest": BASE})),
        (
            "chaos-extra",
            json!({"manifest": EXTRA, "requires": ["chaos-base"]}),
        ),
    ] {
        let doc = json!({
            "apiVersion": "tessera.dev/v1alpha1", "kind": "Plugin",
            "metadata": {"name": name, "labels": {label: value}},
            "spec": {"kind": "module-reconciler",
                "versions": [{"version": "1.0.0", "ref": reference}],
                "channels": [{"name": "regular", "version": "1.0.0"}],
                "config": config,
                "grants": grants},
        });
        Api::<Plugin>::all(client.clone())
            .patch(
                name,
                &PatchParams::apply("chaos").force(),
                &Patch::Apply(&doc),
            )
            .await?;
    }
    Ok(())
}

/// Note the uid of every `K` the target namespace holds, for the whole run.
fn note_uids<K>(target: &kube::Client, uids: &Arc<Mutex<BTreeMap<String, BTreeSet<String>>>>)
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + 'static,
    K::DynamicType: Default,
{
    let api: Api<K> = Api::namespaced(target.clone(), TARGET_NS);
    let uids = uids.clone();
    let kind = K::kind(&K::DynamicType::default()).to_string();
    tokio::spawn(async move {
        let mut events = watcher(api, watcher::Config::default()).boxed();
        loop {
            match events.try_next().await {
                Ok(Some(watcher::Event::Apply(o) | watcher::Event::InitApply(o))) => {
                    let name = format!("{kind}/{}", o.name_any());
                    let uid = o.uid().unwrap_or_default();
                    uids.lock()
                        .expect("not poisoned")
                        .entry(name)
                        .or_default()
                        .insert(uid);
                }
                Ok(Some(_)) => {}
                Ok(None) => return,
                // The watcher relists after an error; the uids seen stay.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(200)).await,
            }
        }
    });
}

/// What the target namespace holds: (kind, name) → the colour in its data, if any.
pub(crate) async fn target_objects(
    target: &kube::Client,
) -> anyhow::Result<BTreeMap<(&'static str, String), Option<String>>> {
    let lp = ListParams::default();
    let mut found = BTreeMap::new();
    let maps: Api<ConfigMap> = Api::namespaced(target.clone(), TARGET_NS);
    for map in maps.list(&lp).await?.items {
        let color = map.data.as_ref().and_then(|d| d.get("color")).cloned();
        found.insert(("ConfigMap", map.name_any()), color);
    }
    let accounts: Api<ServiceAccount> = Api::namespaced(target.clone(), TARGET_NS);
    for account in accounts.list(&lp).await?.items {
        let name = account.name_any();
        // Each namespace has its `default` account; the modules make no other.
        if name != "default" {
            found.insert(("ServiceAccount", name), None);
        }
    }
    Ok(found)
}

/// Sets not settled: live ones missing or not Ready at their generation, any still being
/// deleted.
pub(crate) fn unsettled(sets: &[ModuleSet], live: &BTreeMap<usize, (usize, u32)>) -> Vec<String> {
    let mut left = Vec::new();
    for set in sets {
        let name = set.name_any();
        if set.metadata.deletion_timestamp.is_some() {
            left.push(format!("ModuleSet {name} still being deleted"));
        } else if !is_ready(set) {
            let state = set.status.as_ref().and_then(|s| s.state);
            left.push(format!("ModuleSet {name} is {state:?}"));
        }
    }
    let names: BTreeSet<String> = sets.iter().map(|s| s.name_any()).collect();
    for s in live.keys() {
        if !names.contains(&set_name(*s)) {
            left.push(format!("ModuleSet {} is missing", set_name(*s)));
        }
    }
    left
}

/// Module objects made twice, missing or not as last asked for a live set, or left after
/// a deleted one.
pub(crate) async fn leftovers(
    m: &Modules,
    target: &kube::Client,
    live: &BTreeMap<usize, (usize, u32)>,
    deleted: &BTreeMap<usize, usize>,
) -> anyhow::Result<Vec<String>> {
    let objects = target_objects(target).await?;
    let mut found = m.made_twice();
    for (s, (_, color)) in live {
        for (kind, name) in objects_of(&set_name(*s)) {
            match objects.get(&(kind, name.clone())) {
                None => found.push(format!("{kind} {name} of a live ModuleSet is missing")),
                Some(Some(has)) if *has != color.to_string() => found.push(format!(
                    "{kind} {name} has colour {has}, its ModuleSet asked for {color}"
                )),
                Some(_) => {}
            }
        }
    }
    for s in deleted.keys() {
        for (kind, name) in objects_of(&set_name(*s)) {
            if objects.contains_key(&(kind, name.clone())) {
                found.push(format!("{kind} {name} outlived its ModuleSet"));
            }
        }
    }
    Ok(found)
}
