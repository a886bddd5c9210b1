//! ShootMutator (gardener plugin/pkg/shoot/mutator/admission.go `Admit`): CP4, CP5,
//! `gardener.cloud/created-by`, Kubernetes version defaulting (K2) and machine image
//! defaulting. (Seeds are not simulated: no seed lookup, no network defaults from a seed.)

use jiff::Timestamp;
use serde_json::Value;

use super::cloud_profile::{architecture, both_references, missing, spec_of};
use super::errors::{self, FieldError};
use super::obj::{
    at, deleting, k8s_version, list, name, opt_str, set_annotation, str_at, worker_named, workers,
};
use super::versions::{ImageRequest, default_kubernetes_version, default_machine_image};
use super::{Facts, Operation, Refusal, User};

/// gardener plugin/pkg/shoot/mutator/admission.go `Admit`: CP4 on create; the referenced
/// profile must exist (CP5; no reference: nothing to do); then `created-by`, the version and
/// image defaults. Field errors → one 403.
pub(crate) fn admit(
    op: Operation,
    new: &mut Value,
    old: Option<&Value>,
    user: &User,
    facts: &Facts,
) -> Result<(), Refusal> {
    if op == Operation::Create {
        both_references(new)?;
    }
    let profile = match spec_of(new, facts) {
        Err(e) => return Err(missing(&e)),
        Ok(None) => return Ok(()),
        Ok(Some(p)) => p,
    };
    if op == Operation::Create {
        set_annotation(new, "gardener.cloud/created-by", &user.name);
    }
    let mut errs = default_kubernetes(new, profile, facts.now);
    errs.extend(default_worker_versions(new, profile, facts.now));
    errs.extend(ensure_machine_images(new, old, profile, facts.now));
    match errs.is_empty() {
        true => Ok(()),
        false => Err(errors::forbidden_fields(name(new), &errs)),
    }
}

/// gardener plugin/pkg/shoot/mutator/admission.go `defaultKubernetes` (K2).
fn default_kubernetes(shoot: &mut Value, profile: &Value, now: Timestamp) -> Vec<FieldError> {
    let versions = list(profile, &["kubernetes", "versions"]);
    let path = "spec.kubernetes.version";
    match default_kubernetes_version(versions, k8s_version(shoot), path, now) {
        Err(e) => vec![e],
        Ok(None) => Vec::new(),
        Ok(Some(v)) => {
            if let Some(spec) = shoot.get_mut("spec").and_then(Value::as_object_mut) {
                let k8s = spec
                    .entry("kubernetes")
                    .or_insert_with(|| Value::Object(Default::default()));
                k8s["version"] = Value::String(v);
            }
            Vec::new()
        }
    }
}

/// gardener plugin/pkg/shoot/mutator/admission.go `defaultKubernetesVersionForWorkers` (K2):
/// the pools that name a version; the first error ends it.
fn default_worker_versions(shoot: &mut Value, profile: &Value, now: Timestamp) -> Vec<FieldError> {
    let versions = list(profile, &["kubernetes", "versions"]);
    let count = workers(shoot).len();
    for i in 0..count {
        let w = &shoot["spec"]["provider"]["workers"][i];
        let Some(v) = opt_str(w, &["kubernetes", "version"]) else {
            continue;
        };
        let path = format!("spec.provider.workers[{i}].kubernetes.version");
        match default_kubernetes_version(versions, v, &path, now) {
            Err(e) => return vec![e],
            Ok(None) => {}
            Ok(Some(v)) => {
                shoot["spec"]["provider"]["workers"][i]["kubernetes"]["version"] = Value::String(v)
            }
        }
    }
    Vec::new()
}

/// gardener plugin/pkg/shoot/mutator/admission.go `ensureMachineImages`/`ensureMachineImage`
/// (not while deleting): an existing pool keeps its image when the new one is unset or names
/// the same image without (or with the same) version; else `getDefaultMachineImage`.
fn ensure_machine_images(
    shoot: &mut Value,
    old: Option<&Value>,
    profile: &Value,
    now: Timestamp,
) -> Vec<FieldError> {
    if deleting(shoot) {
        return Vec::new();
    }
    let mut errs = Vec::new();
    let pools: Vec<Value> = workers(shoot).to_vec();
    for (i, w) in pools.iter().enumerate() {
        let image = &w["machine"]["image"];
        if let Some(kept) = kept_image(image, worker_named(old, str_at(w, &["name"]))) {
            shoot["spec"]["provider"]["workers"][i]["machine"]["image"] = kept;
            continue;
        }
        let t = str_at(w, &["machine", "type"]);
        let path = format!("spec.provider.workers[{i}]");
        let req = ImageRequest {
            image: (!image.is_null()).then_some(image),
            arch: architecture(profile, w),
            machine_type_found: list(profile, &["machineTypes"])
                .iter()
                .any(|m| str_at(m, &["name"]) == t),
            in_place: super::obj::in_place(w),
            path: &path,
        };
        match default_machine_image(list(profile, &["machineImages"]), &req, now) {
            Ok(img) => shoot["spec"]["provider"]["workers"][i]["machine"]["image"] = img,
            Err(e) => errs.push(e),
        }
    }
    errs
}

/// gardener plugin/pkg/shoot/mutator/admission.go `ensureMachineImage` (first half): the old
/// pool's image, if the pool keeps it.
fn kept_image(image: &Value, old: Option<&Value>) -> Option<Value> {
    let old_image = at(old?, &["machine", "image"]);
    if old_image.is_null() {
        return None;
    }
    if image.is_null() {
        return Some(old_image.clone());
    }
    let version = str_at(image, &["version"]);
    let same = str_at(old_image, &["name"]) == str_at(image, &["name"])
        && (version.is_empty() || version == str_at(old_image, &["version"]));
    if !same {
        return None;
    }
    let mut kept = old_image.clone();
    match &image["providerConfig"] {
        Value::Null => _ = kept.as_object_mut().map(|o| o.remove("providerConfig")),
        pc => kept["providerConfig"] = pc.clone(),
    }
    Some(kept)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::{Operation, mutate};
    use serde_json::{Value, json};

    fn mutated(
        op: Operation,
        mut new: Value,
        old: Option<&Value>,
    ) -> Result<Value, super::super::Refusal> {
        mutate(op, &mut new, old, &user(), &facts()).map(|()| new)
    }

    fn version_of(input: &str) -> String {
        let s = mutated(
            Operation::Create,
            with(shoot(), "/spec/kubernetes/version", json!(input)),
            None,
        )
        .unwrap();
        s["spec"]["kubernetes"]["version"]
            .as_str()
            .unwrap()
            .to_string()
    }

    #[test]
    fn k2_kubernetes_version_defaulting() {
        assert_eq!(version_of("1.33"), "1.33.5");
        assert_eq!(version_of("1.33.6"), "1.33.6");
        assert_eq!(version_of("1.33.5"), "1.33.5");
        assert_eq!(version_of("1.34"), "1.34.1");
        assert_eq!(version_of("1"), "1.34.1");
        assert_eq!(version_of(""), "1.34.1");
        let r = mutated(
            Operation::Create,
            with(shoot(), "/spec/kubernetes/version", json!("1.32")),
            None,
        )
        .unwrap_err();
        assert_eq!(r.code, 403);
        assert_eq!(
            r.message,
            "shoots.core.gardener.cloud \"s\" is forbidden: spec.kubernetes.version: Invalid value: \"1.32\": couldn't find a suitable version for 1.32. Suitable versions have a non-expired expiration date and are no 'preview' versions. 'Preview'-classified versions have to be selected explicitly"
        );
        assert_eq!(r.rules, vec!["K2"]);
        let r = mutated(
            Operation::Create,
            with(shoot(), "/spec/kubernetes/version", json!("v1.33")),
            None,
        )
        .unwrap_err();
        assert!(r.message.ends_with(
            "spec.kubernetes.version: Invalid value: \"v1\": must be a semantic version"
        ));
    }

    #[test]
    fn k2_worker_versions_and_update() {
        let s = with(
            shoot(),
            "/spec/provider/workers/0/kubernetes/version",
            json!("1.33"),
        );
        let s = mutated(Operation::Create, s, None).unwrap();
        assert_eq!(
            s["spec"]["provider"]["workers"][0]["kubernetes"]["version"],
            "1.33.5"
        );
        let new = with(shoot(), "/spec/kubernetes/version", json!("1.34"));
        let s = mutated(Operation::Update, new, Some(&shoot())).unwrap();
        assert_eq!(s["spec"]["kubernetes"]["version"], "1.34.1");
    }

    #[test]
    fn machine_image_defaulting() {
        let image = |v: Value| {
            let s = with(shoot(), "/spec/provider/workers/0/machine/image", v);
            mutated(Operation::Create, s, None)
                .map(|s| s["spec"]["provider"]["workers"][0]["machine"]["image"].clone())
        };
        assert_eq!(
            image(json!({"name": "gardenlinux", "version": "1592"})).unwrap(),
            json!({"name": "gardenlinux", "version": "1592.3.0"})
        );
        assert_eq!(
            image(json!({"name": "gardenlinux"})).unwrap(),
            json!({"name": "gardenlinux", "version": "1592.3.0"})
        );
        assert_eq!(
            image(Value::Null).unwrap(),
            json!({"name": "gardenlinux", "version": "1592.3.0"})
        );
        assert_eq!(
            image(json!({"name": "gardenlinux", "version": "1593.0.0"})).unwrap()["version"],
            "1593.0.0"
        );
        assert_eq!(
            image(json!({"name": "gardenlinux", "version": "1443"})).unwrap()["version"],
            "1443.9.0"
        );
        let r = image(json!({"name": "suse"})).unwrap_err();
        assert!(r.message.ends_with(
            "spec.provider.workers[0]: Invalid value: \"suse\": image is not supported"
        ));
        let r = image(json!({"name": "gardenlinux", "version": "7"})).unwrap_err();
        assert!(r.message.ends_with("spec.provider.workers[0]: Invalid value: \"gardenlinux@7\": failed to determine latest machine image from cloud profile: unable to determine latest expirable version"));
    }

    #[test]
    fn existing_pools_keep_their_image() {
        let old = with(
            shoot(),
            "/spec/provider/workers/0/machine/image/version",
            json!("1443.9.0"),
        );
        let new = with(
            shoot(),
            "/spec/provider/workers/0/machine/image",
            json!({"name": "gardenlinux"}),
        );
        let s = mutated(Operation::Update, new, Some(&old)).unwrap();
        assert_eq!(
            s["spec"]["provider"]["workers"][0]["machine"]["image"]["version"],
            "1443.9.0"
        );
    }

    #[test]
    fn created_by_and_no_profile() {
        let s = mutated(Operation::Create, shoot(), None).unwrap();
        assert_eq!(
            s["metadata"]["annotations"]["gardener.cloud/created-by"],
            "alice"
        );
        let none = without(without(shoot(), "/spec/cloudProfile"), "/spec/kubernetes");
        let s = mutated(Operation::Create, none.clone(), None).unwrap();
        assert_eq!(s, none);
    }
}
