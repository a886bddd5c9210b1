//! What each module applied, kept in a ConfigMap on the target (`tessera-system/
//! modules.<set namespace>.<set name>`, one key per module). It lives next to the objects
//! it lists, so it survives host restarts and works the same with and without a control
//! plane. Written before applying (old ∪ new) and after pruning (new), so a crash in
//! between leaves nothing unlisted; the record after pruning is only staged and goes out
//! with the next write (the next module's, or the end of the set's pass). Each entry records the uid the API server gave the
//! object when this module created it. Anyone with access to the target can edit the
//! ConfigMap, so it is a list of candidates, never a licence: the host deletes an object
//! only after checking that it carries this set's and module's labels and, where one is
//! recorded, the recorded uid.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, Patch, PatchParams};
use serde::{Deserialize, Serialize};

use super::error::ModuleError;
use super::target::Target;
use crate::api;

/// Namespace of the inventories on the target.
pub(crate) const NAMESPACE: &str = "tessera-system";
const MANAGER: &str = "tessera-inventory";

/// One object on the target.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ObjectKey {
    pub(crate) api_version: String,
    pub(crate) kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) namespace: Option<String>,
    pub(crate) name: String,
}

impl ObjectKey {
    /// The key of a manifest (`apiVersion`, `kind`, `metadata.namespace/name`).
    pub(crate) fn of(object: &serde_json::Value) -> Option<Self> {
        Some(Self {
            api_version: object["apiVersion"].as_str()?.to_string(),
            kind: object["kind"].as_str()?.to_string(),
            namespace: object["metadata"]["namespace"].as_str().map(str::to_string),
            name: object["metadata"]["name"].as_str()?.to_string(),
        })
    }

    pub(crate) fn is_crd(&self) -> bool {
        self.kind == "CustomResourceDefinition"
    }

    /// The API group (`""`: core).
    pub(crate) fn group(&self) -> &str {
        self.api_version
            .split_once('/')
            .map(|(g, _)| g)
            .unwrap_or("")
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}", self.kind, ns, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// One object a module applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    #[serde(flatten)]
    pub(crate) key: ObjectKey,
    /// The uid of the object this module created (absent while it is being created, and in
    /// inventories from before uids were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) uid: Option<String>,
}

/// What one module has installed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ModuleRecord {
    /// The version that applied these objects (the downgrade guard compares with it).
    pub(crate) version: String,
    #[serde(default)]
    pub(crate) digest: String,
    #[serde(default)]
    pub(crate) objects: Vec<Entry>,
}

impl ModuleRecord {
    /// The keys of the objects, in order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &ObjectKey> {
        self.objects.iter().map(|e| &e.key)
    }

    /// The recorded uid of `key`.
    pub(crate) fn uid(&self, key: &ObjectKey) -> Option<&str> {
        self.objects
            .iter()
            .find(|e| &e.key == key)
            .and_then(|e| e.uid.as_deref())
    }

    /// Whether the record lists `key`.
    pub(crate) fn lists(&self, key: &ObjectKey) -> bool {
        self.objects.iter().any(|e| &e.key == key)
    }
}

/// The inventory of one ModuleSet on its target.
#[derive(Debug, Clone, Default)]
pub(crate) struct Inventory {
    /// `<namespace>/<name>` of the set.
    pub(crate) set: String,
    pub(crate) modules: BTreeMap<String, ModuleRecord>,
    /// Modules whose record changed here but not yet on the target ([`Inventory::stage`]).
    unsaved: BTreeSet<String>,
}

fn name_of(set: &str) -> String {
    format!("modules.{}", set.replace('/', "."))
}

impl Inventory {
    /// Read the inventory of `set` (empty when there is none).
    pub(crate) async fn load(target: &Target, set: &str) -> Result<Self, ModuleError> {
        let api: Api<ConfigMap> = Api::namespaced(target.client.clone(), NAMESPACE);
        let mut modules = BTreeMap::new();
        if let Some(cm) = api.get_opt(&name_of(set)).await? {
            for (module, json) in cm.data.unwrap_or_default() {
                let record = serde_json::from_str(&json).map_err(|e| {
                    ModuleError::object(
                        format!("ConfigMap {NAMESPACE}/{}", name_of(set)),
                        format!("key {module} is not an inventory record: {e}"),
                    )
                })?;
                modules.insert(module, record);
            }
        }
        Ok(Self {
            set: set.to_string(),
            modules,
            unsaved: BTreeSet::new(),
        })
    }

    /// Store `record` for `module` (`None`: forget the module), with whatever was staged.
    pub(crate) async fn save(
        &mut self,
        target: &Target,
        module: &str,
        record: Option<ModuleRecord>,
    ) -> Result<(), ModuleError> {
        self.stage(module, record);
        self.flush(target).await
    }

    /// Change `module`'s record here only; the next [`Inventory::save`] or
    /// [`Inventory::flush`] writes it. For what only refines a record already written (the
    /// uids of objects it lists): lost in a crash, it is found again by looking the objects
    /// up, so it need not cost a write of its own.
    pub(crate) fn stage(&mut self, module: &str, record: Option<ModuleRecord>) {
        let changed = match record {
            Some(r) if self.modules.get(module) != Some(&r) => {
                self.modules.insert(module.to_string(), r);
                true
            }
            Some(_) => false,
            None => self.modules.remove(module).is_some(),
        };
        if changed {
            self.unsaved.insert(module.to_string());
        }
    }

    /// A copy for one module running next to others: it writes only what that module
    /// stages (call after [`Inventory::flush`], so nothing else is staged).
    pub(crate) fn fork(&self) -> Self {
        Self {
            set: self.set.clone(),
            modules: self.modules.clone(),
            unsaved: BTreeSet::new(),
        }
    }

    /// Take `module`'s record back from `fork`, staged if the fork had not written it.
    pub(crate) fn absorb(&mut self, module: &str, fork: Inventory) {
        match fork.modules.get(module) {
            Some(record) => self.modules.insert(module.to_string(), record.clone()),
            None => self.modules.remove(module),
        };
        if fork.unsaved.contains(module) {
            self.unsaved.insert(module.to_string());
        }
    }

    /// Write every staged record, in one request.
    pub(crate) async fn flush(&mut self, target: &Target) -> Result<(), ModuleError> {
        if self.unsaved.is_empty() {
            return Ok(());
        }
        let api: Api<ConfigMap> = Api::namespaced(target.client.clone(), NAMESPACE);
        let data: serde_json::Map<String, serde_json::Value> = self
            .unsaved
            .iter()
            .map(|module| {
                let value = match self.modules.get(module) {
                    Some(r) => serde_json::to_string(r).expect("a record").into(),
                    None => serde_json::Value::Null,
                };
                (module.clone(), value)
            })
            .collect();
        let name = name_of(&self.set);
        let body = serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": NAMESPACE,
                "annotations": {super::labels::MODULE_SET: self.set},
                "labels": {crate::crd::labels::MANAGED_BY: crate::crd::labels::MANAGED_BY_VALUE},
            },
            "data": data,
        });
        // A merge patch touches only these modules' keys; create when missing.
        match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(_) => {
                self.unsaved.clear();
                Ok(())
            }
            Err(e) if api::is_not_found(&e) => {
                ensure_namespace(target).await?;
                self.create(&api, body).await?;
                self.unsaved.clear();
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Create the ConfigMap with every record; when another module of the set (running at
    /// once) created it first, merge `body` (the staged records) into it instead.
    async fn create(
        &self,
        api: &Api<ConfigMap>,
        body: serde_json::Value,
    ) -> Result<(), ModuleError> {
        let mut create = body.clone();
        let data: BTreeMap<String, String> = self
            .modules
            .iter()
            .map(|(k, v)| (k.clone(), serde_json::to_string(v).expect("a record")))
            .collect();
        create["data"] = serde_json::to_value(data).expect("data");
        let cm: ConfigMap = serde_json::from_value(create).expect("a ConfigMap");
        match api.create(&Default::default(), &cm).await {
            Ok(_) => Ok(()),
            Err(e) if api::is_conflict(&e) => {
                let name = name_of(&self.set);
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&body))
                    .await?;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Remove the inventory ConfigMap (after the last module is gone).
    pub(crate) async fn delete(target: &Target, set: &str) -> Result<(), ModuleError> {
        let api: Api<ConfigMap> = Api::namespaced(target.client.clone(), NAMESPACE);
        match api.delete(&name_of(set), &Default::default()).await {
            Ok(_) => Ok(()),
            Err(e) if api::is_not_found(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

async fn ensure_namespace(target: &Target) -> Result<(), ModuleError> {
    let api: Api<Namespace> = Api::all(target.client.clone());
    let ns = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": NAMESPACE},
    });
    api.patch(NAMESPACE, &PatchParams::apply(MANAGER), &Patch::Apply(&ns))
        .await?;
    Ok(())
}
