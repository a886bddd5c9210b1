//! Worker pools in the strategy validation (§3.7, §3.6, the worker parts of §3.4). Absent
//! `maxSurge`/`maxUnavailable`/`updateStrategy`/`systemComponents` are read as their
//! v1beta1 defaults.

use std::collections::BTreeMap;

use serde_json::Value;

use super::errors::{FieldError, duplicate, forbidden, invalid, not_supported, required, too_long};
use super::gofmt::{json, json_str, q};
use super::meta::validate_dns1123_label;
use super::obj::{
    at, in_place, int_at, k8s_version, list, opt_str, str_at, update_strategy, worker_named,
    workers,
};
use super::spec::{immutable, kubernetes_version_update};
use super::versions::{Op, Semver, compare};

const GATE_OFF: &str = "can not configure `AutoInPlaceUpdate` or `ManualInPlaceUpdate` update strategies when the `InPlaceNodeUpdates` feature gate is disabled.";

/// `spec.provider.workers[i].<rest>`.
fn wpath(i: usize, rest: &str) -> String {
    match rest.is_empty() {
        true => format!("spec.provider.workers[{i}]"),
        false => format!("spec.provider.workers[{i}].{rest}"),
    }
}

/// gardener pkg/api/core/validation/shoot.go `validateProvider` (worker part): each pool
/// (`ValidateWorker`), unique names (`ValidateWorkers`), system-component pools
/// (`ValidateSystemComponentWorkers`).
pub(crate) fn validate(shoot: &Value) -> Vec<FieldError> {
    let pools = workers(shoot);
    let mut errs = Vec::new();
    for (i, w) in pools.iter().enumerate() {
        errs.extend(validate_worker(w, k8s_version(shoot), i));
    }
    for (i, w) in pools.iter().enumerate() {
        let name = str_at(w, &["name"]);
        if pools[..i].iter().any(|o| str_at(o, &["name"]) == name) {
            errs.push(duplicate(&wpath(i, "name"), q(name), "W*"));
        }
    }
    errs.extend(system_component_pools(pools));
    errs
}

/// gardener pkg/api/core/validation/shoot.go `ValidateWorker`, the rules of §3.7/§3.6.
fn validate_worker(w: &Value, cp_version: &str, i: usize) -> Vec<FieldError> {
    let mut errs = names_and_machine(w, i);
    let (min, max) = (int_at(w, &["minimum"]), int_at(w, &["maximum"]));
    if min < 0 {
        errs.push(invalid(
            &wpath(i, "minimum"),
            min.to_string(),
            "minimum value must not be negative",
            "W*",
        ));
    }
    if max < 0 {
        errs.push(invalid(
            &wpath(i, "maximum"),
            max.to_string(),
            "maximum value must not be negative",
            "W*",
        ));
    }
    if max < min {
        errs.push(forbidden(
            &wpath(i, "maximum"),
            "maximum value must not be less than minimum value",
            "W*",
        ));
    }
    errs.extend(surge_and_unavailable(w, i));
    if let Some(v) = opt_str(w, &["kubernetes", "version"]) {
        errs.extend(worker_group_version(
            cp_version,
            v,
            &wpath(i, "kubernetes.version"),
        ));
    }
    errs.extend(machine_details(w, i));
    errs
}

/// gardener pkg/api/core/validation/shoot.go `ValidateWorker`: a DNS-label name of at most 15 bytes, a machine type and image.
fn names_and_machine(w: &Value, i: usize) -> Vec<FieldError> {
    let name = str_at(w, &["name"]);
    let mut errs = validate_dns1123_label(name, &wpath(i, "name"), "W*");
    if name.len() > 15 {
        errs.push(too_long(&wpath(i, "name"), 15, "W*"));
    }
    if str_at(w, &["machine", "type"]).is_empty() {
        errs.push(required(
            &wpath(i, "machine.type"),
            "must specify a machine type",
            "W*",
        ));
    }
    let image = at(w, &["machine", "image"]);
    if image.is_null() {
        errs.push(required(
            &wpath(i, "machine.image"),
            "must specify a machine image",
            "W*",
        ));
        return errs;
    }
    if str_at(image, &["name"]).is_empty() {
        errs.push(required(
            &wpath(i, "machine.image.name"),
            "must specify a machine image name",
            "W*",
        ));
    }
    if str_at(image, &["version"]).is_empty() {
        errs.push(required(
            &wpath(i, "machine.image.version"),
            "must specify a machine image version",
            "W*",
        ));
    }
    errs
}

/// apimachinery `IsValidPercent`: `^[0-9]+%$`; the number.
fn percent(s: &str) -> Option<i64> {
    let digits = s.strip_suffix('%')?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().unwrap_or(i64::MAX))
}

/// gardener pkg/api/core/validation/utils.go `getIntOrPercentValue`.
fn int_or_percent_value(v: &Value) -> i64 {
    match v {
        Value::String(s) => percent(s).or_else(|| s.parse().ok()).unwrap_or(0),
        other => other.as_i64().unwrap_or(0),
    }
}

/// gardener pkg/api/core/validation/shoot.go `ValidateWorker` (`ValidatePositiveIntOrPercent`,
/// `IsNotMoreThan100Percent`, "not both 0") for
/// `maxSurge`/`maxUnavailable` (defaults: 1/0, AutoInPlaceUpdate 0/1, ManualInPlaceUpdate none).
fn surge_and_unavailable(w: &Value, i: usize) -> Vec<FieldError> {
    let strategy = update_strategy(w);
    let (surge_default, unavailable_default) = match strategy {
        "AutoInPlaceUpdate" => (Value::from(0), Value::from(1)),
        "ManualInPlaceUpdate" => (Value::Null, Value::Null),
        _ => (Value::from(1), Value::from(0)),
    };
    let or = |v: &Value, d: Value| if v.is_null() { d } else { v.clone() };
    let surge = or(&w["maxSurge"], surge_default);
    let unavailable = or(&w["maxUnavailable"], unavailable_default);
    let mut errs = Vec::new();
    for (key, v) in [("maxSurge", &surge), ("maxUnavailable", &unavailable)] {
        match v {
            Value::String(s) if percent(s).is_none() => {
                let msg = "must be an integer or percentage (e.g '5%')";
                errs.push(invalid(&wpath(i, key), json(v), msg, "W*"));
            }
            Value::Number(n) if n.as_i64().is_some_and(|n| n < 0) => {
                let msg = "must be greater than or equal to 0";
                errs.push(invalid(&wpath(i, key), json(v), msg, "W*"));
            }
            _ => {}
        }
    }
    if let Value::String(s) = &unavailable
        && percent(s).is_some_and(|p| p > 100)
    {
        errs.push(invalid(
            &wpath(i, "maxUnavailable"),
            json(&unavailable),
            "must not be greater than 100%",
            "W*",
        ));
    }
    let zero = |v: &Value| v.is_null() || int_or_percent_value(v) == 0;
    if zero(&unavailable) && zero(&surge) && strategy != "ManualInPlaceUpdate" {
        let msg = "may not be 0 when `maxSurge` is 0";
        errs.push(invalid(
            &wpath(i, "maxUnavailable"),
            json(&unavailable),
            msg,
            "W*",
        ));
    }
    errs
}

/// gardener pkg/api/core/validation/shoot.go `ValidateWorker`: volume size, CRI, architecture and update strategy values.
fn machine_details(w: &Value, i: usize) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !w["volume"].is_null() {
        let size = str_at(w, &["volume", "size"]);
        let ok = size
            .strip_suffix("Gi")
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
        if !ok {
            let msg = "volume size must match the regex ^(\\d)+Gi$";
            errs.push(invalid(&wpath(i, "volume.size"), q(size), msg, "W*"));
        }
    }
    if !w["cri"].is_null() {
        let cri = str_at(w, &["cri", "name"]);
        if cri != "containerd" {
            errs.push(not_supported(
                &wpath(i, "cri.name"),
                q(cri),
                &["containerd"],
                "W*",
            ));
        }
    }
    if let Some(arch) = opt_str(w, &["machine", "architecture"])
        && arch != "amd64"
        && arch != "arm64"
    {
        errs.push(not_supported(
            &wpath(i, "machine.architecture"),
            q(arch),
            &["amd64", "arm64"],
            "W*",
        ));
    }
    if let Some(s) = opt_str(w, &["updateStrategy"]) {
        let known = [
            "AutoInPlaceUpdate",
            "AutoRollingUpdate",
            "ManualInPlaceUpdate",
        ];
        if !known.contains(&s) {
            errs.push(not_supported(
                &wpath(i, "updateStrategy"),
                json_str(s),
                &known,
                "W*",
            ));
        }
    }
    errs
}

/// gardener pkg/api/core/validation/shoot.go `validateWorkerGroupAndControlPlaneKubernetesVersion`
/// (K6): a pool's version is not above the control plane's and at most three minors behind.
pub(crate) fn worker_group_version(cp: &str, worker: &str, path: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match compare(worker, Op::Gt, cp) {
        Err(e) => errs.push(invalid(path, q(cp), e, "K6")),
        Ok(true) => errs.push(forbidden(
            path,
            "worker group kubernetes version must not be higher than control plane version",
            "K6",
        )),
        Ok(false) => {}
    }
    let skew = match Semver::parse(worker) {
        Ok(w) => w.inc_minor().inc_minor().inc_minor().inc_minor(),
        Err(e) => {
            errs.push(invalid(path, q(worker), e, "K6"));
            return errs;
        }
    };
    match compare(cp, Op::Ge, &skew.to_string()) {
        Err(e) => errs.push(invalid(path, q(cp), e, "K6")),
        Ok(true) => errs.push(forbidden(path, "worker group kubernetes version must be at most three minor versions behind control plane version", "K6")),
        Ok(false) => {}
    }
    errs
}

/// gardener pkg/api/core/validation/shoot.go `ValidateSystemComponentWorkers`: at least one
/// active pool allows system components; such pools have at least one node per zone.
fn system_component_pools(pools: &[Value]) -> Vec<FieldError> {
    let mut any = false;
    let mut sufficient: Vec<String> = Vec::new();
    let mut insufficient: BTreeMap<String, usize> = BTreeMap::new();
    for (i, w) in pools.iter().enumerate() {
        let allowed = w["systemComponents"].is_null() || w["systemComponents"]["allow"] == true;
        let max = int_at(w, &["maximum"]);
        if !allowed || max == 0 {
            continue;
        }
        any = true;
        let zones: Vec<&str> = list(w, &["zones"])
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let mut key_zones = zones.clone();
        key_zones.sort_unstable();
        key_zones.dedup();
        let key = key_zones.join("--");
        if max >= zones.len() as i64 {
            insufficient.remove(&key);
            sufficient.push(key);
        } else if !sufficient.contains(&key) {
            insufficient.insert(key, i);
        }
    }
    let mut indices: Vec<usize> = insufficient.into_values().collect();
    indices.sort_unstable();
    let msg = "maximum node count should be greater than or equal to the number of zones specified for this pool";
    let mut errs: Vec<FieldError> = indices
        .into_iter()
        .map(|i| forbidden(&wpath(i, "maximum"), msg, "W*"))
        .collect();
    if !any {
        let msg = "at least one active (workers[i].maximum > 0) worker pool with systemComponents.allow=true needed";
        errs.push(forbidden("spec.provider.workers", msg, "W*"));
    }
    errs
}

/// gardener pkg/api/core/validation/shoot.go `ValidateInPlaceUpdateStrategyOnCreation`: the
/// `InPlaceNodeUpdates` feature gate is off by default at the pinned commit.
pub(crate) fn in_place_on_creation(shoot: &Value) -> Vec<FieldError> {
    workers(shoot)
        .iter()
        .enumerate()
        .filter(|(_, w)| in_place(w))
        .map(|(i, w)| {
            invalid(
                &wpath(i, "updateStrategy"),
                json_str(update_strategy(w)),
                GATE_OFF,
                "W*",
            )
        })
        .collect()
}

/// gardener pkg/api/core/validation/shoot.go `ValidateProviderUpdate`: the provider type is
/// immutable (P2); no switch between rolling and in-place updates; no new in-place pools.
pub(crate) fn provider_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let (n, o) = (
        &new["spec"]["provider"]["type"],
        &old["spec"]["provider"]["type"],
    );
    let mut errs: Vec<FieldError> = immutable(
        n,
        o,
        "spec.provider.type",
        q(n.as_str().unwrap_or("")),
        "P2",
    )
    .into_iter()
    .collect();
    for (i, w) in workers(new).iter().enumerate() {
        let path = wpath(i, "updateStrategy");
        let value = json_str(update_strategy(w));
        let Some(ow) = worker_named(Some(old), str_at(w, &["name"])) else {
            if in_place(w) {
                errs.push(invalid(&path, value, GATE_OFF, "W*"));
            }
            continue;
        };
        match (in_place(ow), in_place(w)) {
            (true, false) => errs.push(invalid(&path, value, "update strategy cannot be changed from AutoInPlaceUpdate/ManualInPlaceUpdate to AutoRollingUpdate", "W*")),
            (false, true) => errs.push(invalid(&path, value, "update strategy cannot be changed from AutoRollingUpdate to AutoInPlaceUpdate/ManualInPlaceUpdate", "W*")),
            _ => {}
        }
    }
    errs
}

/// gardener pkg/api/core/validation/shoot.go `ValidateShootSpecUpdate` (workers): a pool's
/// Kubernetes version (its own, else the control plane's) is not downgraded (K4); rolling
/// pools may skip minors, in-place pools may not (K5).
pub(crate) fn versions_update(new: &Value, old: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (i, w) in workers(new).iter().enumerate() {
        let ow = worker_named(Some(old), str_at(w, &["name"])).unwrap_or(w);
        let old_v = opt_str(ow, &["kubernetes", "version"]).unwrap_or(k8s_version(old));
        let new_v = opt_str(w, &["kubernetes", "version"]).unwrap_or(k8s_version(new));
        let path = wpath(i, "kubernetes.version");
        errs.extend(kubernetes_version_update(new_v, old_v, !in_place(w), &path));
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use serde_json::json;

    fn errs(shoot: serde_json::Value) -> Vec<String> {
        super::validate(&shoot)
            .iter()
            .map(|e| e.message())
            .collect()
    }

    const W: &str = "/spec/provider/workers/0";

    #[test]
    fn worker_names() {
        assert_eq!(
            errs(with(
                shoot(),
                &format!("{W}/name"),
                json!("a-very-long-pool")
            )),
            vec!["spec.provider.workers[0].name: Too long: may not be more than 15 bytes"]
        );
        let two = with(
            shoot(),
            "/spec/provider/workers/1",
            shoot()["spec"]["provider"]["workers"][0].clone(),
        );
        assert_eq!(
            errs(two),
            vec!["spec.provider.workers[1].name: Duplicate value: \"w1\""]
        );
        let bad = errs(with(shoot(), &format!("{W}/name"), json!("W1")));
        assert!(bad[0].starts_with(
            "spec.provider.workers[0].name: Invalid value: \"W1\": a lowercase RFC 1123 label"
        ));
        assert!(errs(shoot()).is_empty());
    }

    #[test]
    fn worker_machine_and_sizes() {
        let s = with(shoot(), &format!("{W}/machine"), json!({"type": ""}));
        assert_eq!(
            errs(s),
            vec![
                "spec.provider.workers[0].machine.type: Required value: must specify a machine type",
                "spec.provider.workers[0].machine.image: Required value: must specify a machine image",
            ]
        );
        let s = with(shoot(), &format!("{W}/machine/image"), json!({}));
        assert_eq!(errs(s).len(), 2);
        let s = with(shoot(), &format!("{W}/minimum"), json!(-1));
        assert_eq!(
            errs(s),
            vec![
                "spec.provider.workers[0].minimum: Invalid value: -1: minimum value must not be negative"
            ]
        );
        let s = with(shoot(), &format!("{W}/minimum"), json!(4));
        assert_eq!(
            errs(s),
            vec![
                "spec.provider.workers[0].maximum: Forbidden: maximum value must not be less than minimum value"
            ]
        );
    }

    #[test]
    fn surge_volume_cri_arch_strategy() {
        let s = with(shoot(), &format!("{W}/maxSurge"), json!(0));
        assert_eq!(
            errs(s),
            vec![
                "spec.provider.workers[0].maxUnavailable: Invalid value: 0: may not be 0 when `maxSurge` is 0"
            ]
        );
        let s = with(shoot(), &format!("{W}/volume"), json!({"size": "20G"}));
        assert_eq!(
            errs(s),
            vec![
                "spec.provider.workers[0].volume.size: Invalid value: \"20G\": volume size must match the regex ^(\\d)+Gi$"
            ]
        );
        let s = with(shoot(), &format!("{W}/cri"), json!({"name": "docker"}));
        assert_eq!(
            errs(s),
            vec![
                "spec.provider.workers[0].cri.name: Unsupported value: \"docker\": supported values: \"containerd\""
            ]
        );
        let s = with(
            shoot(),
            &format!("{W}/machine/architecture"),
            json!("s390x"),
        );
        assert_eq!(
            errs(s),
            vec![
                "spec.provider.workers[0].machine.architecture: Unsupported value: \"s390x\": supported values: \"amd64\", \"arm64\""
            ]
        );
        let s = with(shoot(), &format!("{W}/updateStrategy"), json!("Foo"));
        assert_eq!(
            errs(s),
            vec![
                "spec.provider.workers[0].updateStrategy: Unsupported value: \"Foo\": supported values: \"AutoInPlaceUpdate\", \"AutoRollingUpdate\", \"ManualInPlaceUpdate\""
            ]
        );
        let s = with(
            shoot(),
            &format!("{W}/updateStrategy"),
            json!("AutoInPlaceUpdate"),
        );
        let r = refused(create(&s));
        assert!(r.message.ends_with("spec.provider.workers[0].updateStrategy: Invalid value: \"AutoInPlaceUpdate\": can not configure `AutoInPlaceUpdate` or `ManualInPlaceUpdate` update strategies when the `InPlaceNodeUpdates` feature gate is disabled."));
    }

    #[test]
    fn system_component_pools() {
        let s = with(shoot(), &format!("{W}/maximum"), json!(0));
        let s = with(s, &format!("{W}/minimum"), json!(0));
        assert_eq!(
            errs(s),
            vec![
                "spec.provider.workers: Forbidden: at least one active (workers[i].maximum > 0) worker pool with systemComponents.allow=true needed"
            ]
        );
        let s = with(
            shoot(),
            &format!("{W}/zones"),
            json!(["eu-west-1a", "eu-west-1b"]),
        );
        let s = with(s, &format!("{W}/maximum"), json!(1));
        assert_eq!(
            errs(s),
            vec![
                "spec.provider.workers[0].maximum: Forbidden: maximum node count should be greater than or equal to the number of zones specified for this pool"
            ]
        );
        let off = with(
            shoot(),
            &format!("{W}/systemComponents"),
            json!({"allow": false}),
        );
        assert_eq!(errs(off).len(), 1);
    }

    #[test]
    fn k6_worker_version_skew() {
        let s = with(shoot(), &format!("{W}/kubernetes/version"), json!("1.35.0"));
        assert_eq!(
            errs(s),
            vec![
                "spec.provider.workers[0].kubernetes.version: Forbidden: worker group kubernetes version must not be higher than control plane version"
            ]
        );
        let e = super::worker_group_version("1.34.1", "1.30.5", "p");
        assert_eq!(
            e[0].message(),
            "p: Forbidden: worker group kubernetes version must be at most three minor versions behind control plane version"
        );
        assert!(super::worker_group_version("1.34.1", "1.31.5", "p").is_empty());
    }

    #[test]
    fn worker_version_updates() {
        let old = with(shoot(), &format!("{W}/kubernetes/version"), json!("1.33.5"));
        let new = with(shoot(), &format!("{W}/kubernetes/version"), json!("1.33.4"));
        let e = super::versions_update(&new, &old);
        assert_eq!(
            e[0].message(),
            "spec.provider.workers[0].kubernetes.version: Forbidden: kubernetes version downgrade is not supported"
        );
        let old = with(shoot(), &format!("{W}/kubernetes/version"), json!("1.31.5"));
        assert!(super::versions_update(&shoot(), &old).is_empty());
    }
}
