//! `kyma-system/kyma-provisioning-info` in the runtime cluster (`--kyma-provisioning-info`):
//! what Kyma's components read about the cluster they run in, as KIM writes it
//! (`pkg/gardener/skrdetails/configmap.go` `ToKymaProvisioningInfo`, applied by
//! `runtime_fsm_configure_skr.go` `applyKymaProvisioningInfoCM`): key `details`, YAML with
//! the worker pools, the Runtime's KEB labels, regions, the Shoot's infrastructure config,
//! dual-stack and ACL, and the region of the Seed the Shoot runs on. Server-side applied
//! with Tessera's field manager (forced, as KIM does), so KIM's ConfigMap is taken over in
//! place.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Map, Value, json};
use tessera_sdk::models::{RuntimeSpec, Worker};

use super::super::machine::{Machine, Step, Transition};
use crate::controllers::{ReconcileError, runtime_cluster};
use crate::crd::FIELD_MANAGER;

/// The ConfigMap's name and namespace (KIM's).
pub(crate) const NAME: &str = "kyma-provisioning-info";
pub(crate) const NAMESPACE: &str = "kyma-system";

pub(crate) async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    if !m.ctx.config.kyma_provisioning_info {
        return Ok(Transition::Next(Step::Ready));
    }
    let shoot = m
        .shoot
        .as_ref()
        .map(|s| serde_json::to_value(s).unwrap_or_default())
        .unwrap_or_default();
    let seed_region = match shoot["spec"]["seedName"].as_str() {
        Some(seed) => m.ctx.shoots.seed_region(seed).await?,
        None => None,
    };
    let labels = m.runtime.metadata.labels.clone().unwrap_or_default();
    let info = details(&m.runtime.spec.inner, &labels, &shoot, seed_region);
    let text = serde_saphyr::to_string(&info).unwrap_or_default();
    let doc = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": runtime_cluster::owned_labels(&m.id()),
        },
        "data": { "details": text },
    });
    let id = m.id();
    let client = m.cluster().await?;
    let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(NAME, &params, &Patch::Apply(&doc))
        .await
        .map_err(runtime_cluster::failed(
            &id,
            &format!("ConfigMap {NAMESPACE}/{NAME}"),
        ))?;
    Ok(Transition::Next(Step::Ready))
}

/// KIM's `KymaProvisioningInfo` of a Runtime (its `labels`) and its live `shoot`; keys
/// sorted as `sigs.k8s.io/yaml` writes them, empty values left out (`omitzero`).
pub(crate) fn details(
    spec: &RuntimeSpec,
    labels: &std::collections::BTreeMap<String, String>,
    shoot: &Value,
    seed_region: Option<String>,
) -> Value {
    let label = |key: &str| labels.get(key).cloned().unwrap_or_default();
    let mut out = Map::new();
    out.insert("workerPools".into(), worker_pools(spec));
    out.insert("networkDetails".into(), network_details(spec, shoot));
    let strings = [
        (
            "globalAccountID",
            label("kyma-project.io/global-account-id"),
        ),
        ("subaccountID", label("kyma-project.io/subaccount-id")),
        (
            "environmentInstanceID",
            label("kyma-project.io/instance-id"),
        ),
        ("instanceName", label("operator.kyma-project.io/kyma-name")),
        ("runtimeID", label("kyma-project.io/runtime-id")),
        ("instanceID", label("kyma-project.io/instance-id")),
        ("region", spec.shoot.region.clone()),
        ("platformRegion", spec.shoot.platform_region.clone()),
        ("seedRegion", seed_region.unwrap_or_default()),
        (
            "lastReconcileTime",
            shoot["status"]["lastOperation"]["lastUpdateTime"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        ),
    ];
    for (key, value) in strings.into_iter().filter(|(_, v)| !v.is_empty()) {
        out.insert(key.into(), Value::String(value));
    }
    let infrastructure = &shoot["spec"]["provider"]["infrastructureConfig"];
    if !infrastructure.is_null() {
        out.insert("infrastructureConfig".into(), infrastructure.clone());
    }
    sorted(Value::Object(out))
}

/// KIM `WorkerPools`: the main pool as `kyma`, the additional ones as `custom`.
fn worker_pools(spec: &RuntimeSpec) -> Value {
    let provider = &spec.shoot.provider;
    let mut pools = Map::new();
    pools.insert(
        "kyma".into(),
        provider
            .workers
            .first()
            .map(pool)
            .unwrap_or_else(|| pool(&Worker::default())),
    );
    let custom: Vec<Value> = provider
        .additional_workers
        .iter()
        .flatten()
        .map(pool)
        .collect();
    if !custom.is_empty() {
        pools.insert("custom".into(), Value::Array(custom));
    }
    Value::Object(pools)
}

/// KIM `NetworkDetails`: dual-stack, and the Runtime's ACL on aws and azure (`AppliedACL`).
fn network_details(spec: &RuntimeSpec, shoot: &Value) -> Value {
    let mut network = Map::new();
    network.insert("dualStackIPEnabled".into(), json!(dual_stack(shoot)));
    let provider = spec.shoot.provider.type_.as_str();
    let acl = spec.shoot.kubernetes.kube_api_server.acl.as_ref();
    if let Some(acl) =
        acl.filter(|a| !a.allowed_cidrs.is_empty() && matches!(provider, "aws" | "azure"))
    {
        network.insert("kubeAPIServer".into(), json!({ "acl": acl.allowed_cidrs }));
    }
    Value::Object(network)
}

/// One pool as KIM lists it: `haZones` when it spans an odd number of zones, at least 3.
fn pool(w: &Worker) -> Value {
    let ha = w.zones.len() >= 3 && w.zones.len() % 2 == 1;
    json!({
        "name": w.name,
        "machineType": w.machine.type_,
        "haZones": ha,
        "autoScalerMin": w.minimum,
        "autoScalerMax": w.maximum,
    })
}

/// KIM `IsDualStackEnabled`: exactly IPv4 and IPv6.
fn dual_stack(shoot: &Value) -> bool {
    let families = shoot["spec"]["networking"]["ipFamilies"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    families.len() == 2 && families.contains(&json!("IPv4")) && families.contains(&json!("IPv6"))
}

/// `v` with every object's keys in order (whatever order `serde_json` keeps).
fn sorted(v: Value) -> Value {
    match v {
        Value::Object(map) => {
            let entries: std::collections::BTreeMap<String, Value> =
                map.into_iter().map(|(k, v)| (k, sorted(v))).collect();
            Value::Object(entries.into_iter().collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn spec(provider: &str, acl: Option<&[&str]>) -> RuntimeSpec {
        let mut api = json!({});
        if let Some(cidrs) = acl {
            api = json!({"acl": {"allowedCIDRs": cidrs}});
        }
        serde_json::from_value(json!({"shoot": {
            "name": "test-shoot", "purpose": "production", "platformRegion": "cf-eu12",
            "region": "eu-central-1", "kubernetes": {"kubeAPIServer": api},
            "provider": {"type": provider, "workers": [{"name": "worker-1",
                "machine": {"type": "m5.xlarge"}, "minimum": 1, "maximum": 3,
                "zones": ["eu-west-1a"]}]},
            "networking": {"nodes": "10.250.0.0/16", "pods": "10.96.0.0/13",
                "services": "10.104.0.0/13"},
        }, "security": {}}))
        .unwrap()
    }

    fn shoot() -> Value {
        json!({"spec": {"provider": {"infrastructureConfig": {
            "apiVersion": "aws.provider.extensions.gardener.cloud/v1alpha1",
            "kind": "InfrastructureConfig"}}},
            "status": {"lastOperation": {"lastUpdateTime": "2026-01-01T00:00:00Z"}}})
    }

    /// KIM `skrdetails/configmap_test.go:TestToKymaProvisioningInfo` "Should include
    /// environmentInstanceID and instanceName from labels".
    #[test]
    fn labels_regions_seed_and_pools_as_kim_lists_them() {
        let labels = BTreeMap::from([
            (
                "kyma-project.io/instance-id".to_string(),
                "test-instance-id".to_string(),
            ),
            (
                "operator.kyma-project.io/kyma-name".into(),
                "test-kyma-name".into(),
            ),
            (
                "kyma-project.io/global-account-id".into(),
                "test-global-account-id".into(),
            ),
            (
                "kyma-project.io/subaccount-id".into(),
                "test-subaccount-id".into(),
            ),
        ]);
        let info = details(
            &spec("aws", None),
            &labels,
            &shoot(),
            Some("eu-west-1".into()),
        );
        assert_eq!(
            info,
            json!({
                "environmentInstanceID": "test-instance-id",
                "globalAccountID": "test-global-account-id",
                "infrastructureConfig": {"apiVersion": "aws.provider.extensions.gardener.cloud/v1alpha1",
                    "kind": "InfrastructureConfig"},
                "instanceID": "test-instance-id",
                "instanceName": "test-kyma-name",
                "lastReconcileTime": "2026-01-01T00:00:00Z",
                "networkDetails": {"dualStackIPEnabled": false},
                "platformRegion": "cf-eu12",
                "region": "eu-central-1",
                "seedRegion": "eu-west-1",
                "subaccountID": "test-subaccount-id",
                "workerPools": {"kyma": {"autoScalerMax": 3, "autoScalerMin": 1,
                    "haZones": false, "machineType": "m5.xlarge", "name": "worker-1"}},
            })
        );
    }

    /// KIM "Should handle missing labels gracefully": empty values are left out.
    #[test]
    fn missing_labels_and_seed_are_left_out() {
        let mut s = shoot();
        s["status"] = json!({});
        let info = details(&spec("aws", None), &BTreeMap::new(), &s, None);
        for key in [
            "environmentInstanceID",
            "instanceName",
            "globalAccountID",
            "subaccountID",
            "seedRegion",
            "lastReconcileTime",
        ] {
            assert!(info.get(key).is_none(), "{key}: {info}");
        }
    }

    /// KIM `TestToKymaProvisioningInfoWithACL` and `check_acl_test.go`: the Runtime's ACL on
    /// aws and azure only; `check_highavailability_test.go`: an odd number of zones, ≥ 3;
    /// `check_dualstack_test.go`: exactly both IP families.
    #[test]
    fn acl_ha_zones_and_dual_stack() {
        let cidrs: &[&str] = &["10.0.0.0/8"];
        let aws = details(&spec("aws", Some(cidrs)), &BTreeMap::new(), &shoot(), None);
        assert_eq!(
            aws["networkDetails"]["kubeAPIServer"]["acl"],
            json!(["10.0.0.0/8"])
        );
        let gcp = details(&spec("gcp", Some(cidrs)), &BTreeMap::new(), &shoot(), None);
        assert!(gcp["networkDetails"].get("kubeAPIServer").is_none());
        let mut three = spec("aws", None);
        three.shoot.provider.workers[0].zones = vec!["a".into(), "b".into(), "c".into()];
        let info = details(&three, &BTreeMap::new(), &shoot(), None);
        assert_eq!(info["workerPools"]["kyma"]["haZones"], true);
        three.shoot.provider.workers[0].zones.push("d".into());
        let info = details(&three, &BTreeMap::new(), &shoot(), None);
        assert_eq!(info["workerPools"]["kyma"]["haZones"], false);
        let mut s = shoot();
        s["spec"]["networking"] = json!({"ipFamilies": ["IPv4", "IPv6"]});
        let info = details(&spec("aws", None), &BTreeMap::new(), &s, None);
        assert_eq!(info["networkDetails"]["dualStackIPEnabled"], true);
    }
}
