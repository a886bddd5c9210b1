//! Fixtures of the unit tests: a valid Shoot, its CloudProfile and the facts around it.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Facts, Operation, Refusal, User};

/// The fixed "now" of the tests.
pub(crate) fn now() -> jiff::Timestamp {
    "2026-06-01T00:00:00Z".parse().expect("a timestamp")
}

/// A CloudProfile with every lifecycle case.
pub(crate) fn profile() -> Value {
    json!({
        "apiVersion": "core.gardener.cloud/v1beta1", "kind": "CloudProfile",
        "metadata": {"name": "aws"},
        "spec": {
            "type": "aws",
            "kubernetes": {"versions": [
                {"version": "1.35.0", "classification": "preview"},
                {"version": "1.34.1"},
                {"version": "1.34.0", "classification": "supported"},
                {"version": "1.33.7", "classification": "preview"},
                {"version": "1.33.6", "classification": "deprecated"},
                {"version": "1.33.5", "classification": "supported"},
                {"version": "1.33.4", "classification": "supported", "expirationDate": "2027-01-01T00:00:00Z"},
                {"version": "1.32.9", "expirationDate": "2026-01-01T00:00:00Z"},
                {"version": "1.32.8", "lifecycle": [
                    {"classification": "supported"},
                    {"classification": "expired", "startTime": "2026-02-01T00:00:00Z"}]},
                {"version": "1.36.0", "lifecycle": [
                    {"classification": "preview", "startTime": "2026-09-01T00:00:00Z"}]},
            ]},
            "machineImages": [{"name": "gardenlinux", "versions": [
                {"version": "1593.0.0", "classification": "preview"},
                {"version": "1592.4.0", "classification": "deprecated"},
                {"version": "1592.3.0", "architectures": ["amd64", "arm64"]},
                {"version": "1592.2.0"},
                {"version": "1443.9.0", "expirationDate": "2026-01-01T00:00:00Z"},
            ]}, {"name": "ubuntu", "versions": [{"version": "24.4.0"}]}],
            "machineTypes": [
                {"name": "m5.xlarge", "cpu": "4", "gpu": "0", "memory": "16Gi"},
                {"name": "m5.large", "cpu": "2", "gpu": "0", "memory": "8Gi", "architecture": "amd64"},
                {"name": "m6g.large", "cpu": "2", "gpu": "0", "memory": "8Gi", "architecture": "arm64"},
                {"name": "t2.old", "cpu": "1", "gpu": "0", "memory": "1Gi", "usable": false},
            ],
            "regions": [
                {"name": "eu-west-1", "zones": [
                    {"name": "eu-west-1a"}, {"name": "eu-west-1b"},
                    {"name": "eu-west-1c", "unavailableMachineTypes": ["m5.xlarge"]}]},
                {"name": "us-east-1"},
            ],
        },
    })
}

/// A Shoot that every rule accepts (with [`facts`]).
pub(crate) fn shoot() -> Value {
    json!({
        "apiVersion": "core.gardener.cloud/v1beta1", "kind": "Shoot",
        "metadata": {"name": "s", "namespace": "garden-p"},
        "spec": {
            "cloudProfile": {"kind": "CloudProfile", "name": "aws"},
            "region": "eu-west-1",
            "credentialsBindingName": "cb",
            "purpose": "evaluation",
            "kubernetes": {"version": "1.34.1"},
            "networking": {"type": "calico", "nodes": "10.250.0.0/16",
                           "pods": "100.96.0.0/11", "services": "100.64.0.0/13"},
            "provider": {"type": "aws", "workers": [{
                "name": "w1", "minimum": 1, "maximum": 3, "zones": ["eu-west-1a"],
                "machine": {"type": "m5.large", "image": {"name": "gardenlinux", "version": "1592.2.0"}},
            }]},
        },
    })
}

/// Facts under which [`shoot`] is valid.
pub(crate) fn facts() -> Facts {
    let mut cbs = BTreeMap::new();
    cbs.insert("cb".to_string(), Some(json!({"provider": {"type": "aws"}})));
    Facts {
        now: now(),
        project: Some(("p".into(), false)),
        cloud_profile: Some(profile()),
        secret_bindings: BTreeMap::new(),
        credentials_bindings: cbs,
        config_maps: BTreeMap::new(),
        secrets: BTreeMap::new(),
        may_bind: false,
    }
}

/// A project member.
pub(crate) fn user() -> User {
    User {
        name: "alice".into(),
        groups: vec!["system:authenticated".into()],
    }
}

/// `v` with the value at the JSON pointer `path` replaced (created if absent).
pub(crate) fn with(mut v: Value, path: &str, value: Value) -> Value {
    let mut cur = &mut v;
    for key in path.trim_start_matches('/').split('/') {
        let key = key.replace("~1", "/").replace("~0", "~");
        cur = match key.parse::<usize>() {
            Ok(i) if cur.is_array() => {
                let list = cur.as_array_mut().expect("an array");
                if i == list.len() {
                    list.push(Value::Null);
                }
                &mut list[i]
            }
            _ => {
                if !cur.is_object() {
                    *cur = json!({});
                }
                cur.as_object_mut()
                    .expect("an object")
                    .entry(key)
                    .or_insert(Value::Null)
            }
        };
    }
    *cur = value;
    v
}

/// `v` without the member at `path`.
pub(crate) fn without(mut v: Value, path: &str) -> Value {
    let (parent, key) = path.rsplit_once('/').expect("a path");
    if let Some(obj) = v.pointer_mut(parent).and_then(Value::as_object_mut) {
        obj.remove(key);
    }
    v
}

/// Validate a CREATE of `shoot` under the default facts.
pub(crate) fn create(shoot: &Value) -> Result<(), Refusal> {
    super::validate(Operation::Create, Some(shoot), None, &user(), &facts())
}

/// Validate an UPDATE from `old` to `new` under the default facts.
pub(crate) fn update(new: &Value, old: &Value) -> Result<(), Refusal> {
    super::validate(Operation::Update, Some(new), Some(old), &user(), &facts())
}

/// The refusal's message, panicking if the request passed.
pub(crate) fn refused(result: Result<(), Refusal>) -> Refusal {
    result.expect_err("the request should be refused")
}
