//! Shoot reads and writes, and the progress Gardener reports in `status`.

use kube::Client;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
};
use serde_json::{Value, json};

use super::FIELD_MANAGER;

/// Gardener refuses to delete a Shoot without this annotation set to `"true"`.
pub const CONFIRM_DELETION: &str = "confirmation.gardener.cloud/deletion";
/// Lets Gardener skip waiting for hanging finalizers on deletion.
pub const FORCE_DELETION: &str = "confirmation.gardener.cloud/force-deletion";
/// Operations requested from Gardener (`retry`, `reconcile`, …).
pub const OPERATION_ANNOTATION: &str = "gardener.cloud/operation";

/// The Shoot kind as a dynamic resource.
pub fn shoot_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("core.gardener.cloud", "v1beta1", "Shoot"),
        "shoots",
    )
}

/// `status.lastOperation` of a Shoot.
#[derive(Debug, Clone, PartialEq)]
pub struct LastOperation {
    /// Create, Reconcile, Delete, Migrate, Restore.
    pub type_: String,
    /// Processing, Pending, Succeeded, Error, Failed, Aborted.
    pub state: String,
    pub description: String,
    pub progress: i64,
    /// `lastUpdateTime`, when Gardener wrote it.
    pub last_update: Option<jiff::Timestamp>,
}

/// What Gardener reported about a Shoot.
#[derive(Debug, Clone, PartialEq)]
pub struct ShootProgress {
    pub last_operation: Option<LastOperation>,
    /// Every error code of `status.lastErrors`.
    pub error_codes: Vec<String>,
    /// The descriptions of `status.lastErrors`, joined.
    pub error_description: String,
    /// `metadata.generation` minus `status.observedGeneration` is work Gardener has not started.
    pub generation: i64,
    pub observed_generation: i64,
    /// An error in `status.lastErrors` says `retryable: false`.
    pub non_retryable: bool,
}

impl ShootProgress {
    pub fn of(shoot: &DynamicObject) -> Self {
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
        let non_retryable = errors.iter().any(|e| e["retryable"] == Value::Bool(false));
        Self {
            last_operation,
            error_codes,
            error_description,
            generation: shoot.metadata.generation.unwrap_or(0),
            observed_generation: status["observedGeneration"].as_i64().unwrap_or(0),
            non_retryable,
        }
    }
}

/// Shoots in one Gardener project namespace or another, through one client.
#[derive(Clone)]
pub struct ShootClient {
    client: Client,
}

impl ShootClient {
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    fn api(&self, namespace: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), namespace, &shoot_resource())
    }

    /// The Shoot, or `None` when it does not exist.
    pub async fn get(&self, namespace: &str, name: &str) -> kube::Result<Option<DynamicObject>> {
        self.api(namespace).get_opt(name).await
    }

    /// Create or update the Shoot with server-side apply as field manager `tessera`.
    pub async fn apply(&self, shoot: &Value) -> kube::Result<DynamicObject> {
        let namespace = shoot["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = shoot["metadata"]["name"].as_str().unwrap_or_default();
        let params = PatchParams::apply(FIELD_MANAGER).force();
        self.api(namespace)
            .patch(name, &params, &Patch::Apply(shoot))
            .await
    }

    /// Merge annotations into the Shoot (`None` removes one).
    pub async fn annotate(
        &self,
        namespace: &str,
        name: &str,
        annotations: &[(&str, Option<&str>)],
    ) -> kube::Result<DynamicObject> {
        let map: serde_json::Map<String, Value> = annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.map(Value::from).unwrap_or(Value::Null)))
            .collect();
        let patch = json!({ "metadata": { "annotations": map } });
        self.api(namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
    }

    /// Ask Gardener to delete the Shoot (it must carry the confirmation annotation).
    pub async fn delete(&self, namespace: &str, name: &str) -> kube::Result<()> {
        match self
            .api(namespace)
            .delete(name, &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Shoots carrying `label_selector`, in all namespaces, from the API server's cache
    /// (a quorum read would fetch and decode every Shoot from etcd).
    pub async fn list(&self, label_selector: &str) -> kube::Result<Vec<DynamicObject>> {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &shoot_resource());
        Ok(api
            .list(
                &kube::api::ListParams::default()
                    .labels(label_selector)
                    .match_any(),
            )
            .await?
            .items)
    }
}
