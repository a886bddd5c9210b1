//! Shoot reads and writes, and the progress Gardener reports in `status`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
    Preconditions,
};
use serde_json::{Value, json};

use std::sync::Arc;

use super::FIELD_MANAGER;
use super::shoot_cache::{Freshness, ShootCache};
use crate::api;
use crate::plugins::ShootIdentity;

/// Gardener refuses to delete a Shoot without this annotation set to `"true"`.
pub(crate) const CONFIRM_DELETION: &str = "confirmation.gardener.cloud/deletion";
/// Lets Gardener skip waiting for hanging finalizers on deletion.
pub(crate) const FORCE_DELETION: &str = "confirmation.gardener.cloud/force-deletion";
/// Operations requested from Gardener (`retry`, `reconcile`, …).
pub(crate) const OPERATION_ANNOTATION: &str = "gardener.cloud/operation";

/// The Shoot kind as a dynamic resource.
pub fn shoot_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("core.gardener.cloud", "v1beta1", "Shoot"),
        "shoots",
    )
}

/// `status.lastOperation` of a Shoot.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LastOperation {
    /// Create, Reconcile, Delete, Migrate, Restore.
    pub(crate) type_: String,
    /// Processing, Pending, Succeeded, Error, Failed, Aborted.
    pub(crate) state: String,
    pub(crate) description: String,
    pub(crate) progress: i64,
    /// `lastUpdateTime`, when Gardener wrote it.
    pub(crate) last_update: Option<jiff::Timestamp>,
}

/// What Gardener reported about a Shoot.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ShootProgress {
    pub(crate) last_operation: Option<LastOperation>,
    /// Every error code of `status.lastErrors`.
    pub(crate) error_codes: Vec<String>,
    /// The descriptions of `status.lastErrors`, joined.
    pub(crate) error_description: String,
    /// `metadata.generation` minus `status.observedGeneration` is work Gardener has not started.
    pub(crate) generation: i64,
    pub(crate) observed_generation: i64,
}

impl ShootProgress {
    pub(crate) fn of(shoot: &DynamicObject) -> Self {
        let status = &shoot.data["status"];
        let last_operation = status["lastOperation"].as_object().map(|op| LastOperation {
            type_: op.get("type").and_then(Value::as_str).unwrap_or("").into(),
            state: op.get("state").and_then(Value::as_str).unwrap_or("").into(),
            description: op
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("")
                .into(),
            progress: op.get("progress").and_then(Value::as_i64).unwrap_or(0),
            last_update: crate::time::parse_rfc3339(
                op.get("lastUpdateTime").and_then(Value::as_str),
            ),
        });
        let errors = status["lastErrors"].as_array().cloned().unwrap_or_default();
        let error_codes = errors
            .iter()
            .flat_map(|e| e["codes"].as_array().cloned().unwrap_or_default())
            .filter_map(|c| c.as_str().map(str::to_string))
            .collect();
        let error_description = errors
            .iter()
            .filter_map(|e| e["description"].as_str())
            .collect::<Vec<_>>()
            .join("; ");
        Self {
            last_operation,
            error_codes,
            error_description,
            generation: shoot.metadata.generation.unwrap_or(0),
            observed_generation: status["observedGeneration"].as_i64().unwrap_or(0),
        }
    }
}

/// A Shoot write the host refused or the API server failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ShootError {
    /// The document is not the Shoot the Runtime owns (a bug if it ever happens: the chain
    /// already refuses identity changes).
    #[error("refusing to write {0}")]
    Identity(String),
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

fn name_of(shoot: &DynamicObject) -> (&str, &str) {
    (
        shoot.metadata.namespace.as_deref().unwrap_or_default(),
        shoot.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// How long a read waits for the watch of Shoots to finish listing (at start-up, after a
/// failure) before asking Gardener: the first list of 10,000 Shoots takes seconds.
const CACHE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(30);

/// Where a Shoot read came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Source {
    /// The watch's cache: judge by it, but read afresh before writing.
    Cache,
    /// Gardener, just now.
    Gardener,
}

/// Shoots in one Gardener project namespace or another, through one client.
#[derive(Clone)]
pub(crate) struct ShootClient {
    client: Client,
    url: String,
    /// What the watch of Shoots saw, and what this host saw since.
    cache: Arc<ShootCache>,
}

impl ShootClient {
    pub(crate) fn new(client: Client, url: String) -> Self {
        let cache = Arc::default();
        Self { client, url, cache }
    }

    /// The cache the watch of Shoots fills.
    pub(crate) fn cache(&self) -> &ShootCache {
        &self.cache
    }

    /// The Gardener API server, for messages.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    fn api(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &shoot_resource())
    }

    /// The Shoot, or `None` when it does not exist.
    pub(crate) async fn get(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<DynamicObject>, ShootError> {
        let shoot = self.api(namespace).get_opt(name).await?;
        match &shoot {
            Some(s) => self.cache.saw(s),
            None => self.cache.changed(namespace, name),
        }
        Ok(shoot)
    }

    /// The Shoot from the cache when it can answer for it as `freshness` asks, else from
    /// Gardener.
    pub(crate) async fn read(
        &self,
        namespace: &str,
        name: &str,
        freshness: Freshness,
    ) -> Result<(Option<DynamicObject>, Source), ShootError> {
        match self
            .cache
            .get(namespace, name, freshness, CACHE_PATIENCE)
            .await
        {
            Some(shoot) => Ok((Some(shoot), Source::Cache)),
            None => Ok((self.get(namespace, name).await?, Source::Gardener)),
        }
    }

    /// The outcome of a write of Shoot `namespace/name`. A failed write may have changed
    /// it all the same (a timeout) or found it changed (a conflict): it is read from
    /// Gardener again until the watch shows it anew.
    fn wrote(
        &self,
        namespace: &str,
        name: &str,
        written: kube::Result<DynamicObject>,
    ) -> Result<DynamicObject, ShootError> {
        match &written {
            Ok(shoot) => self.cache.saw(shoot),
            Err(_) => self.cache.changed(namespace, name),
        }
        Ok(written?)
    }

    /// Create or update the Shoot with server-side apply as field manager `tessera`, after
    /// checking that it is the Shoot `identity` pins. Forced: Gardener's own defaulting and
    /// operators' one-off edits of fields Tessera renders are taken back.
    pub(crate) async fn apply(
        &self,
        identity: &ShootIdentity,
        shoot: &Value,
    ) -> Result<DynamicObject, ShootError> {
        if let Some(why) = identity.mismatch(shoot) {
            return Err(ShootError::Identity(format!("{identity}: {why}")));
        }
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let written = self
            .api(&identity.namespace)
            .patch(&identity.name, &params, &Patch::Apply(shoot))
            .await;
        self.wrote(&identity.namespace, &identity.name, written)
    }

    /// Merge annotations into exactly `shoot` as read (its uid and resourceVersion are
    /// preconditions: a decision made on a Shoot that changed since is made again, after a
    /// quiet conflict, never sent to Gardener stale; `None` removes an annotation).
    pub(crate) async fn annotate(
        &self,
        shoot: &DynamicObject,
        annotations: &[(&str, Option<&str>)],
    ) -> Result<DynamicObject, ShootError> {
        let map: serde_json::Map<String, Value> = annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(Value::from).unwrap_or(Value::Null)))
            .collect();
        let patch = json!({ "metadata": {
            "uid": shoot.metadata.uid,
            "resourceVersion": shoot.metadata.resource_version,
            "annotations": map,
        } });
        let (namespace, name) = name_of(shoot);
        let written = self
            .api(namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        self.wrote(namespace, name, written)
    }

    fn seeds(&self) -> Api<DynamicObject> {
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("core.gardener.cloud", "v1beta1", "Seed"),
            "seeds",
        );
        Api::all_with(self.client.clone(), &resource)
    }

    /// Every Seed, as JSON.
    pub(crate) async fn list_seeds(&self) -> Result<Vec<Value>, ShootError> {
        let list = self.seeds().list(&Default::default()).await?;
        Ok(list
            .items
            .into_iter()
            .map(|s| serde_json::to_value(s).unwrap_or_default())
            .collect())
    }

    /// The region of Seed `name` (`spec.provider.region`), `None` if it has none.
    pub(crate) async fn seed_region(&self, name: &str) -> Result<Option<String>, ShootError> {
        let seed = self.seeds().get(name).await?;
        Ok(seed.data["spec"]["provider"]["region"]
            .as_str()
            .map(String::from))
    }

    /// Replace the field ownership of exactly `shoot` as read (uid and resourceVersion are
    /// preconditions, as for `annotate`); nothing else of the Shoot changes.
    pub(crate) async fn set_managed_fields(
        &self,
        shoot: &DynamicObject,
        entries: &[ManagedFieldsEntry],
    ) -> Result<DynamicObject, ShootError> {
        let patch = json!({ "metadata": {
            "uid": shoot.metadata.uid,
            "resourceVersion": shoot.metadata.resource_version,
            "managedFields": entries,
        } });
        let (namespace, name) = name_of(shoot);
        let written = self
            .api(namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await;
        self.wrote(namespace, name, written)
    }

    /// Ask Gardener to delete exactly `shoot` (its uid is a precondition: a Shoot recreated
    /// under the same name by someone else is not touched). It must carry the confirmation
    /// annotation.
    pub(crate) async fn delete(&self, shoot: &DynamicObject) -> Result<(), ShootError> {
        let (namespace, name) = name_of(shoot);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: shoot.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        self.cache.changed(namespace, name);
        match self.api(namespace).delete(name, &params).await {
            Ok(_) => Ok(()),
            Err(e) if api::is_not_found(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Shoots carrying `label_selector` in project namespace `namespace` (a project member
    /// has no rights elsewhere), from the API server's cache (a quorum read would fetch and
    /// decode every Shoot from etcd).
    pub(crate) async fn list(
        &self,
        namespace: &str,
        label_selector: &str,
    ) -> kube::Result<Vec<DynamicObject>> {
        Ok(self
            .api(namespace)
            .list(
                &kube::api::ListParams::default()
                    .labels(label_selector)
                    .match_any(),
            )
            .await?
            .items)
    }
}
