//! Per-worker settings KIM adds on create and patch after the pools are merged
//! (`pkg/gardener/shoot/extender/provider/provider.go`): machine-controller-manager
//! defaults (`workers/machinecontroller`), kubelet `maxPods` clamped to what the pod range
//! can hold (`workers/maxpods`), and gVisor's `net-raw` flag (`gvisor_net_raw.go`).

use serde_json::{Map, Value, json};
use tessera_sdk::PluginError;
use tessera_sdk::models::Worker;
use tessera_sdk::util::{Cidr, go_duration};

use crate::config::WorkerConfig;

/// Usable addresses of a /24 — KIM's per-node ceiling (`CanonicalPodsCIDRSlash24`).
const PER_NODE_MAX_PODS: i64 = 254;

/// KIM's `ApplyMachineControllerManagerConfig`: `machineDrainTimeout` and
/// `maxEvictRetries` set on every pool that does not set them itself.
pub fn machine_controller(
    workers: &mut [Worker],
    config: &WorkerConfig,
) -> Result<(), PluginError> {
    let field = |name: &str| format!("plugin configuration worker.{name}");
    let drain = or_default(&config.default_machine_drain_timeout, "15m");
    let drain = go_duration::seconds(drain).ok_or_else(|| {
        PluginError::invalid_input(
            field("defaultMachineDrainTimeout"),
            format!("{drain:?} is not a duration like 15m or 1h30m"),
        )
    })?;
    let retries = or_default(&config.default_max_evict_retries, "2");
    let retries: i32 = retries.parse().map_err(|_| {
        PluginError::invalid_input(
            field("defaultMaxEvictRetries"),
            format!("{retries:?} is not a whole number"),
        )
    })?;
    for worker in workers {
        let settings = object_at(&mut worker.extra, "machineControllerManager");
        settings
            .entry("maxEvictRetries")
            .or_insert_with(|| json!(retries));
        settings
            .entry("machineDrainTimeout")
            .or_insert_with(|| json!(go_duration::text(drain)));
    }
    Ok(())
}

fn or_default<'a>(value: &'a str, default: &'a str) -> &'a str {
    if value.is_empty() { default } else { value }
}

/// KIM's `setWorkerSettings`: each pool's kubelet `maxPods` at most 254
/// (`ApplyPerNodeMaxPodsCap`), then capped in total by the pod range.
pub fn max_pods(workers: &mut [Worker], pods: &str) -> Result<(), PluginError> {
    // Gardener's kubelet `maxPods` is an int32 of at least 1.
    if let Some(worker) = workers.iter().find(|w| {
        let value = &w.extra.get("kubernetes").map(|k| &k["kubelet"]["maxPods"]);
        value.is_some_and(|v| {
            !v.is_null()
                && !v
                    .as_i64()
                    .is_some_and(|n| (1..=i32::MAX as i64).contains(&n))
        })
    }) {
        return Err(PluginError::invalid_input(
            "spec.shoot.provider.workers",
            format!(
                "pool {}: kubernetes.kubelet.maxPods must be a whole number from 1 to {}",
                worker.name,
                i32::MAX
            ),
        ));
    }
    for value in max_pods_values(workers) {
        if value.as_i64().unwrap_or(0) > PER_NODE_MAX_PODS {
            *value = json!(PER_NODE_MAX_PODS);
        }
    }
    if pods.is_empty() {
        return Ok(());
    }
    total_cap(workers, usable_addresses(pods)?).map_err(|pools| {
        PluginError::invalid_input(
            "spec.shoot.provider.workers",
            format!(
                "kubelet maxPods cannot fit the pod range {pods}: {pools} pools set maxPods, each needs at least 1"
            ),
        )
    })
}

fn max_pods_values(workers: &mut [Worker]) -> Vec<&mut Value> {
    workers
        .iter_mut()
        .filter_map(|w| {
            w.extra
                .get_mut("kubernetes")?
                .get_mut("kubelet")?
                .get_mut("maxPods")
        })
        .filter(|v| v.is_i64())
        .collect()
}

/// KIM's `ApplyMaxPodsWithTotalCap`: the sum over the pools that set `maxPods` at most
/// `total`, the excess taken from the last pool backwards, never below 1 per pool. Err
/// carries how many pools set it when that cannot be done.
fn total_cap(workers: &mut [Worker], total: i64) -> Result<(), usize> {
    let mut set = max_pods_values(workers);
    let mut excess = set.iter().map(|v| v.as_i64().unwrap_or(0)).sum::<i64>() - total;
    for value in set.iter_mut().rev() {
        let current = value.as_i64().unwrap_or(0);
        if excess <= 0 || current <= 1 {
            continue;
        }
        let reduction = excess.min(current - 1);
        **value = json!(current - reduction);
        excess -= reduction;
    }
    if excess > 0 { Err(set.len()) } else { Ok(()) }
}

/// KIM's `MaxPodsFromCIDR`: /32 → 1, /31 → 2, otherwise all addresses but network and
/// broadcast; masks below /2 are refused.
fn usable_addresses(pods: &str) -> Result<i64, PluginError> {
    let cidr = Cidr::parse(pods)
        .map_err(|e| PluginError::invalid_input("spec.shoot.networking.pods", e))?;
    match cidr.prefix {
        0 | 1 => Err(PluginError::invalid_input(
            "spec.shoot.networking.pods",
            format!("pod range {pods} is too large: its mask must be /2 to /32"),
        )),
        32 => Ok(1),
        31 => Ok(2),
        _ => Ok((cidr.size() - 2).min(i32::MAX as u64) as i64),
    }
}

/// KIM's `ExtendWithGVisorNetRawDefault`: every gVisor container runtime gets
/// `configFlags.net-raw: "true"` (Istio needs it) unless the Runtime sets that flag.
pub fn gvisor_net_raw(workers: &mut [Worker]) {
    for worker in workers {
        let runtimes = worker
            .extra
            .get_mut("cri")
            .and_then(|c| c.get_mut("containerRuntimes"))
            .and_then(Value::as_array_mut);
        for runtime in runtimes.into_iter().flatten() {
            if runtime["type"] != "gvisor" {
                continue;
            }
            let Some(runtime) = runtime.as_object_mut() else {
                continue;
            };
            let config = object_at(runtime, "providerConfig");
            if !config.get("configFlags").is_some_and(Value::is_object) {
                config.insert(
                    "apiVersion".into(),
                    json!("gvisor.runtime.extensions.config.gardener.cloud/v1alpha1"),
                );
                config.insert("kind".into(), json!("GVisorConfiguration"));
            }
            object_at(config, "configFlags")
                .entry("net-raw")
                .or_insert_with(|| json!("true"));
        }
    }
}

/// The object under `key`, made (replacing a non-object) when missing.
fn object_at<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let slot = map.entry(key).or_insert_with(|| json!({}));
    if !slot.is_object() {
        *slot = json!({});
    }
    slot.as_object_mut().expect("made an object above")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pools(max_pods: &[Option<i64>]) -> Vec<Worker> {
        max_pods
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let mut w = json!({"name": format!("w{i}"), "machine": {"type": "m"}});
                if let Some(m) = m {
                    w["kubernetes"] = json!({"kubelet": {"maxPods": m}});
                }
                serde_json::from_value(w).unwrap()
            })
            .collect()
    }

    fn max_pods_of(workers: &[Worker]) -> Vec<Option<i64>> {
        workers
            .iter()
            .map(|w| {
                w.extra
                    .get("kubernetes")
                    .map(|k| k["kubelet"]["maxPods"].as_i64().unwrap())
            })
            .collect()
    }

    /// KIM's `TestMaxPodsFromPodsCIDR` (`workers/maxpods/maxpods_test.go`), case by case.
    #[test]
    fn usable_addresses_as_kim_counts_them() {
        let cases = [
            ("100.64.0.0/24", 254),
            ("100.64.0.0/26", 62),
            ("100.64.0.0/16", 65534),
            ("10.96.0.0/28", 14),
            ("10.0.0.0/31", 2),
            ("10.0.0.1/32", 1),
            ("0.0.0.0/2", 1_073_741_822),
        ];
        for (cidr, want) in cases {
            assert_eq!(usable_addresses(cidr).unwrap(), want, "{cidr}");
        }
        for bad in ["invalid", "2001:db8::/120", "0.0.0.0/0", "128.0.0.0/1"] {
            assert!(usable_addresses(bad).is_err(), "{bad}");
        }
    }

    /// KIM's `TestApplyMaxPodsWithTotalCap`, its cases ("totalIPs less than 1" cannot happen
    /// here: `usable_addresses` is at least 1).
    #[test]
    fn total_cap_as_kim_clamps() {
        type Pools<'a> = &'a [Option<i64>];
        let cases: [(Pools, i64, Result<Pools, usize>); 9] = [
            (&[None, None, None], 256, Ok(&[None, None, None])),
            (&[Some(100), Some(125)], 256, Ok(&[Some(100), Some(125)])),
            (&[Some(100), Some(200)], 256, Ok(&[Some(100), Some(156)])),
            (&[Some(500)], 254, Ok(&[Some(254)])),
            (
                &[Some(100), Some(50), Some(100)],
                200,
                Ok(&[Some(100), Some(50), Some(50)]),
            ),
            (&[None, Some(256)], 256, Ok(&[None, Some(256)])),
            (
                &[Some(i32::MAX as i64), Some(i32::MAX as i64)],
                100,
                Ok(&[Some(99), Some(1)]),
            ),
            (&[Some(1), Some(1)], 1, Err(2)),
            (&[Some(100), Some(1)], 50, Ok(&[Some(49), Some(1)])),
        ];
        for (given, total, want) in cases {
            let mut w = pools(given);
            let got = total_cap(&mut w, total).map(|()| max_pods_of(&w));
            assert_eq!(got, want.map(<[_]>::to_vec), "{given:?} within {total}");
        }
    }

    /// KIM's `TestApplyPerNodeMaxPodsCap`: above 254 capped, unset left alone; and the
    /// error names the pools.
    #[test]
    fn max_pods_capped_per_node_then_in_total() {
        let mut w = pools(&[Some(300), None, Some(110)]);
        max_pods(&mut w, "100.64.0.0/12").unwrap();
        assert_eq!(max_pods_of(&w), [Some(254), None, Some(110)]);
        let mut w = pools(&[Some(5), Some(5)]);
        let err = max_pods(&mut w, "10.0.0.1/32").unwrap_err();
        assert!(err.to_string().contains("cannot fit"), "{err}");
        for bad in [0, -3, i64::MIN, i64::from(i32::MAX) + 1] {
            let mut w = pools(&[Some(bad)]);
            let err = max_pods(&mut w, "10.0.0.0/24").unwrap_err();
            assert!(err.to_string().contains("from 1 to"), "{bad}: {err}");
        }
    }

    /// KIM's `TestApplyMachineControllerManagerConfig`: defaults 15m and 2, values the
    /// Runtime sets kept, a bad configuration refused.
    #[test]
    fn machine_controller_defaults_only_fill_gaps() {
        let mut w = pools(&[None, None]);
        w[1].extra.insert(
            "machineControllerManager".into(),
            json!({"machineDrainTimeout": "1h0m0s"}),
        );
        machine_controller(&mut w, &WorkerConfig::default()).unwrap();
        assert_eq!(
            w[0].extra["machineControllerManager"],
            json!({"machineDrainTimeout": "15m0s", "maxEvictRetries": 2})
        );
        assert_eq!(
            w[1].extra["machineControllerManager"],
            json!({"machineDrainTimeout": "1h0m0s", "maxEvictRetries": 2})
        );
        let bad = WorkerConfig {
            default_machine_drain_timeout: "15 minutes".into(),
            ..WorkerConfig::default()
        };
        assert!(machine_controller(&mut w, &bad).is_err());
    }

    /// KIM's `TestExtendWithGVisorNetRawDefault` (`gvisor_net_raw_test.go`).
    #[test]
    fn gvisor_gets_net_raw_unless_set() {
        let mut w = pools(&[None, None]);
        w[0].extra.insert(
            "cri".into(),
            json!({"name": "containerd", "containerRuntimes": [{"type": "gvisor"}]}),
        );
        let set = json!({"name": "containerd", "containerRuntimes": [{"type": "gvisor",
            "providerConfig": {"apiVersion": "x", "kind": "GVisorConfiguration",
                "configFlags": {"net-raw": "false", "debug": "true"}}}]});
        w[1].extra.insert("cri".into(), set.clone());
        gvisor_net_raw(&mut w);
        assert_eq!(
            w[0].extra["cri"]["containerRuntimes"][0]["providerConfig"],
            json!({"apiVersion": "gvisor.runtime.extensions.config.gardener.cloud/v1alpha1",
                "kind": "GVisorConfiguration", "configFlags": {"net-raw": "true"}})
        );
        assert_eq!(w[1].extra["cri"], set, "the Runtime's own flag is kept");
    }
}
