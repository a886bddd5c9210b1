//! Generic readiness of applied objects, for modules whose plugin reports Ready as soon as
//! its objects are applied: workloads rolled out, CRDs established.

use serde_json::Value;

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// Why `object` (as returned by the API server) is not ready yet; `None` when it is, or
/// when its kind has no generic check.
pub(crate) fn not_ready(object: &Value) -> Option<String> {
    let kind = object["kind"].as_str().unwrap_or_default();
    let status = &object["status"];
    let generation = int(&object["metadata"]["generation"]);
    let observed = int(&status["observedGeneration"]);
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    match kind {
        "Deployment" | "StatefulSet" => {
            let replicas = object["spec"]["replicas"].as_i64().unwrap_or(1);
            if observed < generation {
                return Some(format!(
                    "{kind} {name}: generation {generation} not observed yet"
                ));
            }
            let updated = int(&status["updatedReplicas"]);
            let ready = if kind == "Deployment" {
                int(&status["availableReplicas"])
            } else {
                int(&status["readyReplicas"])
            };
            (updated < replicas || ready < replicas)
                .then(|| format!("{kind} {name}: {ready}/{replicas} replicas ready"))
        }
        "DaemonSet" => {
            let desired = int(&status["desiredNumberScheduled"]);
            let ready = int(&status["numberReady"]);
            (observed < generation || ready < desired)
                .then(|| format!("DaemonSet {name}: {ready}/{desired} pods ready"))
        }
        "CustomResourceDefinition" => {
            let established = status["conditions"].as_array().is_some_and(|c| {
                c.iter()
                    .any(|c| c["type"] == "Established" && c["status"] == "True")
            });
            (!established).then(|| format!("CustomResourceDefinition {name} not established"))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deployment_needs_available_replicas() {
        let mut d = json!({"kind": "Deployment", "metadata": {"name": "a", "generation": 2},
            "spec": {"replicas": 2}, "status": {"observedGeneration": 1}});
        assert!(not_ready(&d).unwrap().contains("generation 2"));
        d["status"] =
            json!({"observedGeneration": 2, "updatedReplicas": 2, "availableReplicas": 1});
        assert_eq!(not_ready(&d).unwrap(), "Deployment a: 1/2 replicas ready");
        d["status"]["availableReplicas"] = json!(2);
        assert_eq!(not_ready(&d), None);
    }

    #[test]
    fn crd_needs_established() {
        let mut c = json!({"kind": "CustomResourceDefinition", "metadata": {"name": "x"}});
        assert!(not_ready(&c).is_some());
        c["status"] = json!({"conditions": [{"type": "Established", "status": "True"}]});
        assert_eq!(not_ready(&c), None);
        assert_eq!(not_ready(&json!({"kind": "ConfigMap"})), None);
    }
}
