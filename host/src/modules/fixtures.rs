//! What the unit tests of the writing and releasing code share: a target behind the mocked
//! API server ([`crate::api::mock`]) that knows ConfigMaps and Namespaces, one module of one
//! set, and objects as the API server returns them.

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::ApiResource;
use serde_json::{Value, json};

use super::inventory::ObjectKey;
use super::labels;
use super::target::{Kind, Target};
use super::types::Owner;
use crate::api::mock::{Exchange, Server, serve};
use crate::crd::labels::{MANAGED_BY, MANAGED_BY_VALUE};

/// Module `m` of ModuleSet `ns/set`.
pub(crate) const OWNER: Owner<'static> = Owner {
    set: "ns/set",
    module: "m",
};

/// Where ConfigMap `ns/a` is served.
pub(crate) const CM_A: &str = "/api/v1/namespaces/ns/configmaps/a";

/// A target on a mocked API server answering `script` in order.
pub(crate) fn target(script: Vec<Exchange>) -> (Target, Server) {
    let (client, server) = serve(script);
    let kinds = vec![
        (
            ("v1", "ConfigMap"),
            Kind {
                resource: ApiResource::erase::<ConfigMap>(&()),
                namespaced: true,
            },
        ),
        (
            ("v1", "Namespace"),
            Kind {
                resource: ApiResource::erase::<Namespace>(&()),
                namespaced: false,
            },
        ),
    ];
    (Target::knowing(client, kinds), server)
}

/// The key of ConfigMap `ns/<name>`.
pub(crate) fn cm_key(name: &str) -> ObjectKey {
    ObjectKey::of(&configmap(name, None, None)).expect("a key")
}

/// ConfigMap `ns/<name>` as a module wants it (already prepared: labelled as [`OWNER`]'s).
pub(crate) fn wanted(name: &str) -> (ObjectKey, Value) {
    let object = configmap(name, None, Some(OWNER));
    (cm_key(name), object)
}

/// ConfigMap `ns/<name>` as the API server returns it: with `uid`, labelled as `owner`'s
/// (`None`: made by someone else, with a `kubectl` field manager).
pub(crate) fn configmap(name: &str, uid: Option<&str>, owner: Option<Owner<'_>>) -> Value {
    let mut cm = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "ns", "resourceVersion": "7"},
        "data": {"k": "v"},
    });
    if let Some(uid) = uid {
        cm["metadata"]["uid"] = uid.into();
    }
    mark(&mut cm, owner);
    cm
}

/// Namespace `name` as the API server returns it, at `resource_version`.
pub(crate) fn namespace(name: &str, uid: &str, resource_version: &str, owner: Owner<'_>) -> Value {
    let mut ns = json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "uid": uid, "resourceVersion": resource_version},
    });
    mark(&mut ns, Some(owner));
    ns
}

fn mark(object: &mut Value, owner: Option<Owner<'_>>) {
    match owner {
        Some(owner) => {
            object["metadata"]["labels"] =
                json!({MANAGED_BY: MANAGED_BY_VALUE, labels::MODULE: owner.module});
            object["metadata"]["annotations"] = json!({labels::MODULE_SET: owner.set});
        }
        None => {
            object["metadata"]["managedFields"] =
                json!([{"manager": "kubectl-client-side-apply", "operation": "Update"}]);
        }
    }
}

/// The Status a successful DELETE answers once the object is gone.
pub(crate) fn deleted() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})
}
