//! Runtimes for the scenarios that need one next to what they test.

use kube::api::Api;
use serde_json::{Value, json};
use tessera::crd::{Runtime, RuntimeState};

use crate::env::Host;
use crate::modules::LIMIT;
use crate::probe::{eventually, tail};

/// A Runtime in `ns` whose Shoot is named `shoot`, from `examples/runtime-aws.yaml`.
pub fn runtime_doc(ns: &str, id: &str, shoot: &str) -> Runtime {
    let path = crate::workspace().join("examples/runtime-aws.yaml");
    let text = std::fs::read_to_string(path).expect("examples/runtime-aws.yaml");
    let mut doc: Value = serde_saphyr::from_str(&text).expect("the example parses");
    doc["metadata"] = json!({"name": id, "namespace": ns, "labels": doc["metadata"]["labels"]});
    doc["spec"]["shoot"]["name"] = shoot.into();
    serde_json::from_value(doc).expect("the example is a Runtime")
}

/// Wait until Runtime `id` is in `state`, and return it; on timeout, say where it stands.
pub async fn runtime_in(
    api: &Api<Runtime>,
    id: &str,
    state: RuntimeState,
    host: &Host,
) -> Result<Runtime, String> {
    let found = eventually(&format!("Runtime {id} {state:?}"), LIMIT, || async {
        let rt = api.get(id).await.ok()?;
        (rt.status.as_ref()?.state == Some(state)).then_some(rt)
    })
    .await;
    match found {
        Ok(rt) => Ok(rt),
        Err(e) => {
            let status = api
                .get(id)
                .await
                .ok()
                .and_then(|r| serde_json::to_string_pretty(&r.status).ok());
            Err(format!(
                "{e}\nstatus: {}\nhost log tail:\n{}",
                status.unwrap_or_default(),
                tail(&host.logs(), 30)
            ))
        }
    }
}
