//! Server-side apply of a module's objects, in an order the API server accepts (namespaces,
//! then CRDs, then what uses them), and pruning of objects a module no longer wants.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use kube::api::{DeleteParams, Patch, PatchParams, PropagationPolicy};
use serde_json::Value;

use super::error::ModuleError;
use super::inventory::ObjectKey;
use super::labels;
use super::target::Target;
use crate::controllers::labels::{MANAGED_BY, MANAGED_BY_VALUE};

/// The field manager of a module: each module owns its fields, so two modules fighting
/// over one field show up as conflicts instead of silent flapping.
pub fn field_manager(module: &str) -> String {
    format!("tessera-module-{module}")
}

/// How long to wait for a CRD applied in the same batch to be served.
const CRD_SERVED: Duration = Duration::from_secs(20);

fn rank(kind: &str) -> u8 {
    match kind {
        "Namespace" => 0,
        "CustomResourceDefinition" => 1,
        "ServiceAccount" | "ClusterRole" | "Role" | "ConfigMap" | "Secret" | "PriorityClass" => 2,
        "ClusterRoleBinding" | "RoleBinding" | "Service" => 3,
        _ => 4,
    }
}

/// Sort objects for applying (deleting goes in reverse).
pub fn order(objects: &mut [(ObjectKey, Value)]) {
    objects.sort_by_key(|(key, _)| rank(&key.kind));
}

/// Label and annotate `object` as applied by `module` of `set`, and key it.
pub fn prepare(
    mut object: Value,
    set: &str,
    module: &str,
) -> Result<(ObjectKey, Value), ModuleError> {
    let key = ObjectKey::of(&object).ok_or_else(|| {
        ModuleError::module(
            module,
            format!(
                "the plugin returned an object without apiVersion, kind or metadata.name: {}",
                truncate(&object.to_string())
            ),
        )
    })?;
    let metadata = object["metadata"]
        .as_object_mut()
        .expect("ObjectKey::of checked metadata");
    let labels = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(Default::default()));
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(MANAGED_BY.into(), MANAGED_BY_VALUE.into());
        labels.insert(labels::MODULE.into(), module.into());
    }
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Default::default()));
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert(labels::SET.into(), set.into());
    }
    Ok((key, object))
}

fn truncate(text: &str) -> String {
    text.chars().take(120).collect()
}

/// One applied object as the API server returned it.
#[derive(Debug, Clone)]
pub struct Applied {
    pub key: ObjectKey,
    pub object: Value,
}

/// Server-side apply `objects` (already ordered) with `module`'s field manager.
pub async fn apply(
    target: &Target,
    module: &str,
    objects: Vec<(ObjectKey, Value)>,
) -> Result<Vec<Applied>, ModuleError> {
    let params = PatchParams::apply(&field_manager(module)).force();
    let crds: Vec<(String, String)> = objects
        .iter()
        .filter(|(k, _)| k.is_crd())
        .map(|(_, o)| {
            (
                o["spec"]["group"].as_str().unwrap_or_default().to_string(),
                o["spec"]["names"]["kind"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    let mut applied = Vec::with_capacity(objects.len());
    for (mut key, mut object) in objects {
        let kind = served(target, &key, &crds).await?;
        if !kind.namespaced && key.namespace.is_some() {
            key.namespace = None;
            if let Some(m) = object["metadata"].as_object_mut() {
                m.remove("namespace");
            }
        }
        if kind.namespaced && key.namespace.is_none() {
            return Err(ModuleError::object(
                &key,
                format!("{} is namespaced: set metadata.namespace", key.kind),
            ));
        }
        let api = target.api(&kind, key.namespace.as_deref());
        let result = api
            .patch(&key.name, &params, &Patch::Apply(&object))
            .await
            .map_err(|e| match e {
                kube::Error::Api(e) => ModuleError::object(&key, e.message),
                other => other.into(),
            })?;
        applied.push(Applied {
            key,
            object: serde_json::to_value(&result).expect("an object serializes"),
        });
    }
    Ok(applied)
}

/// The kind of `key`, waiting a little when a CRD of this batch is about to serve it.
async fn served(
    target: &Target,
    key: &ObjectKey,
    crds: &[(String, String)],
) -> Result<super::target::Kind, ModuleError> {
    let group = key
        .api_version
        .split_once('/')
        .map(|(g, _)| g)
        .unwrap_or("");
    let from_batch = crds.iter().any(|(g, k)| g == group && k == &key.kind);
    let started = Instant::now();
    loop {
        if let Some(kind) = target.kind(&key.api_version, &key.kind).await? {
            return Ok(kind);
        }
        if !from_batch || started.elapsed() > CRD_SERVED {
            return Err(ModuleError::object(
                key,
                format!(
                    "the cluster does not serve {} {}",
                    key.api_version, key.kind
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Delete `keys` (in reverse apply order) unless `keep` lists them; returns the objects
/// still present afterwards (finalizers pending).
pub async fn prune(
    target: &Target,
    keys: &[ObjectKey],
    keep: &HashSet<ObjectKey>,
) -> Result<Vec<ObjectKey>, ModuleError> {
    let mut keys: Vec<&ObjectKey> = keys.iter().filter(|k| !keep.contains(*k)).collect();
    keys.sort_by_key(|k| std::cmp::Reverse(rank(&k.kind)));
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..Default::default()
    };
    let mut remaining = Vec::new();
    for key in keys {
        let Some(kind) = target.kind(&key.api_version, &key.kind).await? else {
            continue;
        };
        let api = target.api(&kind, key.namespace.as_deref());
        match api.delete(&key.name, &params).await {
            Ok(either) => {
                if either.is_left() {
                    remaining.push(key.clone());
                }
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(remaining)
}

/// Delete every instance of the kinds `crds` define (customResourcePolicy
/// CreateAndDelete), before the CRDs themselves go. Returns how many were still present.
pub async fn delete_custom_resources(
    target: &Target,
    crds: &[Value],
) -> Result<usize, ModuleError> {
    let mut present = 0;
    for crd in crds {
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        let kind_name = crd["spec"]["names"]["kind"].as_str().unwrap_or_default();
        let versions = crd["spec"]["versions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let Some(version) = versions
            .iter()
            .find(|v| v["storage"] == true)
            .or(versions.first())
            .and_then(|v| v["name"].as_str())
        else {
            continue;
        };
        let Some(kind) = target
            .kind(&format!("{group}/{version}"), kind_name)
            .await?
        else {
            continue;
        };
        let api = target.api(&kind, None);
        let items = api.list(&Default::default()).await?.items;
        for item in items {
            present += 1;
            let api = target.api(&kind, item.metadata.namespace.as_deref());
            let name = item.metadata.name.unwrap_or_default();
            match api.delete(&name, &Default::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(present)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn namespaces_and_crds_go_first() {
        let objects = [
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "n"}}),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "n"}}),
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "x"}}),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n"}}),
        ];
        let mut prepared: Vec<_> = objects
            .into_iter()
            .map(|o| prepare(o, "ns/set", "m").unwrap())
            .collect();
        order(&mut prepared);
        let kinds: Vec<&str> = prepared.iter().map(|(k, _)| k.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "Namespace",
                "CustomResourceDefinition",
                "ConfigMap",
                "Deployment"
            ]
        );
        let (_, first) = &prepared[0];
        assert_eq!(first["metadata"]["labels"][labels::MODULE], "m");
        assert_eq!(first["metadata"]["annotations"][labels::SET], "ns/set");
    }

    #[test]
    fn objects_need_kind_and_name() {
        let err = prepare(
            json!({"apiVersion": "v1", "metadata": {"name": "x"}}),
            "s",
            "m",
        )
        .unwrap_err();
        assert!(err.to_string().contains("module m"), "{err}");
    }
}
