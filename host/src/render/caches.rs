//! Registry-cache credentials in a render: a Runtime's cache names a Secret of its runtime
//! cluster; the chain gets the name of the host's copy in the Shoot's project instead
//! (`controllers::runtime::registry_cache` makes the copies).

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// Each cache's Secret name replaced by its copy (`names`, by cache uid); a cache without
/// a copy (yet) is left out. The upstreams of the caches left out.
pub fn resolve(runtime: &mut Value, names: &BTreeMap<String, String>) -> Vec<String> {
    let Some(caches) = runtime["spec"]["imageRegistryCache"].as_array_mut() else {
        return Vec::new();
    };
    let mut left_out = Vec::new();
    caches.retain_mut(|cache| {
        let secret = &cache["config"]["secretReferenceName"];
        if secret.as_str().is_none_or(str::is_empty) {
            // KIM: an empty name is no credentials.
            if let Some(config) = cache["config"].as_object_mut() {
                config.remove("secretReferenceName");
            }
            return true;
        }
        match cache["uid"].as_str().and_then(|uid| names.get(uid)) {
            Some(copy) => {
                cache["config"]["secretReferenceName"] = json!(copy);
                true
            }
            None => {
                left_out.push(
                    cache["config"]["upstream"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                );
                false
            }
        }
    });
    left_out
}

/// The (upstream, copy) pairs of the registry-cache extension of `shoot`: caches naming a
/// `reg-cache-…` Secret.
pub fn live_copies(shoot: &Value) -> impl Iterator<Item = (&str, &str)> {
    shoot["spec"]["extensions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["type"] == "registry-cache")
        .flat_map(|e| {
            e["providerConfig"]["caches"]
                .as_array()
                .into_iter()
                .flatten()
        })
        .filter_map(|c| Some((c["upstream"].as_str()?, c["secretReferenceName"].as_str()?)))
        .filter(|(_, name)| name.starts_with("reg-cache-"))
}

/// The copies a live Shoot uses, by the uid of the Runtime cache with the same upstream
/// (what an offline render of a live Runtime can know without the project's Secrets).
pub fn in_use(runtime: &Value, shoot: &Value) -> BTreeMap<String, String> {
    let live: BTreeMap<&str, &str> = live_copies(shoot).collect();
    runtime["spec"]["imageRegistryCache"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| {
            let copy = live.get(c["config"]["upstream"].as_str()?)?;
            Some((c["uid"].as_str()?.to_string(), copy.to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_render_names_the_copy_and_leaves_out_a_cache_without_one() {
        let mut runtime = json!({"spec": {"imageRegistryCache": [
            {"uid": "u1", "config": {"upstream": "docker.io", "secretReferenceName": "creds"}},
            {"uid": "u2", "config": {"upstream": "quay.io", "secretReferenceName": "other"}},
            {"uid": "u3", "config": {"upstream": "ghcr.io"}},
            {"uid": "u4", "config": {"upstream": "gcr.io", "secretReferenceName": ""}},
        ]}});
        let names = BTreeMap::from([("u1".to_string(), "reg-cache-1".to_string())]);
        assert_eq!(resolve(&mut runtime, &names), vec!["quay.io".to_string()]);
        assert_eq!(
            runtime["spec"]["imageRegistryCache"],
            json!([
                {"uid": "u1", "config": {"upstream": "docker.io", "secretReferenceName": "reg-cache-1"}},
                {"uid": "u3", "config": {"upstream": "ghcr.io"}},
                {"uid": "u4", "config": {"upstream": "gcr.io"}},
            ])
        );
    }

    #[test]
    fn a_live_shoot_tells_the_copy_of_each_upstream() {
        let runtime = json!({"spec": {"imageRegistryCache": [
            {"uid": "u1", "config": {"upstream": "docker.io", "secretReferenceName": "creds"}},
            {"uid": "u2", "config": {"upstream": "quay.io"}},
        ]}});
        let shoot = json!({"spec": {"extensions": [{"type": "registry-cache", "providerConfig": {
            "caches": [{"upstream": "docker.io", "secretReferenceName": "reg-cache-1"}]}}]}});
        let names = in_use(&runtime, &shoot);
        assert_eq!(
            names,
            BTreeMap::from([("u1".to_string(), "reg-cache-1".to_string())])
        );
    }
}
