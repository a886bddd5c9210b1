use serde_json::{Value, json};
use tessera_sdk::PluginError;

use super::{Layout, block, check_prefix, free_slot, inside, used_subnets};

const API_VERSION: &str = "azure.provider.extensions.gardener.cloud/v1alpha1";

pub fn configs(layout: &Layout) -> Result<(Value, Value), PluginError> {
    let nodes = layout.nodes;
    check_prefix(nodes, "azure")?;
    let current_zones: Vec<Value> = layout
        .current
        .and_then(|c| c["networks"]["zones"].as_array().cloned())
        .unwrap_or_default();
    let size = 1u64 << (32 - (nodes.prefix + 3));
    let subnet = |i: usize| block(nodes.addr as u64 + size * i as u64, nodes.prefix + 3);
    let kept: Vec<Value> = current_zones
        .iter()
        .filter(|z| layout.zones.iter().any(|name| same_zone(&z["name"], name)))
        .cloned()
        .collect();
    let mut used = used_subnets(&kept);
    let mut zones = Vec::with_capacity(layout.zones.len());
    for (i, zone) in layout.zones.iter().enumerate() {
        let number: u8 = zone
            .parse()
            .ok()
            .filter(|n| (1..=8).contains(n))
            .ok_or_else(|| {
                PluginError::invalid_input(
                    layout.zones_field,
                    format!("azure zone {zone:?} must be a number from 1 to 8"),
                )
            })?;
        // Existing zones keep their subnet, NAT gateway and service endpoints.
        if let Some(cur) = kept.iter().find(|z| same_zone(&z["name"], zone)) {
            let mut entry = json!({
                "name": number,
                "natGateway": { "enabled": true, "idleConnectionTimeoutMinutes": 4 },
            });
            for key in ["natGateway", "serviceEndpoints", "cidr"] {
                if let Some(v) = cur.get(key) {
                    entry[key] = v.clone();
                }
            }
            zones.push(entry);
            continue;
        }
        let free = free_slot(i, 8, &used, |s| vec![subnet(s)]).ok_or_else(|| {
            PluginError::invalid_input(
                layout.zones_field,
                format!("no free subnet left in {nodes} for zone {zone}"),
            )
        })?;
        used.push(subnet(free));
        zones.push(json!({
            "name": number,
            "cidr": inside(nodes, subnet(free), zone, layout.zones_field)?,
            "natGateway": { "enabled": true, "idleConnectionTimeoutMinutes": 4 },
        }));
    }
    let networks = json!({ "vnet": { "cidr": nodes.to_string() }, "zones": zones });
    let infra = json!({
        "apiVersion": API_VERSION,
        "kind": "InfrastructureConfig",
        "networks": networks,
        "zoned": !layout.zones.is_empty(),
    });
    let control_plane = json!({ "apiVersion": API_VERSION, "kind": "ControlPlaneConfig" });
    Ok((infra, control_plane))
}

/// Azure zone names appear as numbers or strings in existing configs.
fn same_zone(name: &Value, zone: &str) -> bool {
    match name {
        Value::Number(n) => n.to_string() == zone,
        Value::String(s) => s == zone,
        _ => false,
    }
}
