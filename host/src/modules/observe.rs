//! Requirements: read the objects a plugin asked to observe. A kind the cluster does not
//! serve yet reads as "no objects" (a plugin waiting for a CRD asks for its instances).

use kube::api::ListParams;
use tessera_sdk::Selector;

use super::error::ModuleError;
use super::target::Target;

/// The objects matching `selector`, as JSON text.
pub async fn observe(target: &Target, selector: &Selector) -> Result<Vec<String>, ModuleError> {
    let Some(kind) = target.kind(&selector.api_version, &selector.kind).await? else {
        return Ok(Vec::new());
    };
    let api = target.api(&kind, selector.namespace.as_deref());
    let objects = match (&selector.name, &selector.label_selector) {
        (Some(name), _) => api.get_opt(name).await?.into_iter().collect(),
        (None, labels) => {
            let mut params = ListParams::default();
            if let Some(labels) = labels {
                params = params.labels(labels);
            }
            api.list(&params).await?.items
        }
    };
    Ok(objects
        .into_iter()
        .map(|mut o| {
            // Big, noisy and never what a plugin decides on.
            o.metadata.managed_fields = None;
            serde_json::to_string(&o).expect("an object serializes")
        })
        .collect())
}
