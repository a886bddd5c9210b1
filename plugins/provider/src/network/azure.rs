use serde_json::{Value, json};
use tessera_sdk::PluginError;

use super::{Layout, block, check_prefix, inside};

const API_VERSION: &str = "azure.provider.extensions.gardener.cloud/v1alpha1";

pub fn configs(layout: &Layout) -> Result<(Value, Value), PluginError> {
    let nodes = layout.nodes;
    check_prefix(nodes, "azure")?;
    let current_zones: Vec<Value> = layout
        .current
        .and_then(|c| c["networks"]["zones"].as_array().cloned())
        .unwrap_or_default();
    let size = 1u64 << (32 - (nodes.prefix + 3));
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
        let subnet = block(nodes.addr as u64 + size * i as u64, nodes.prefix + 3);
        let mut entry = json!({
            "name": number,
            "cidr": inside(nodes, subnet, zone, layout.zones_field)?,
            "natGateway": { "enabled": true, "idleConnectionTimeoutMinutes": 4 },
        });
        // Existing zones keep their NAT gateway and service endpoints.
        if let Some(cur) = current_zones.iter().find(|z| z["name"] == number) {
            for key in ["natGateway", "serviceEndpoints", "cidr"] {
                if let Some(v) = cur.get(key) {
                    entry[key] = v.clone();
                }
            }
        }
        zones.push(entry);
    }
    let mut networks = json!({ "vnet": { "cidr": nodes.to_string() }, "zones": zones });
    if let Some(nat) = layout.current.and_then(|c| c["networks"].get("natGateway")) {
        networks["natGateway"] = nat.clone();
    }
    let infra = json!({
        "apiVersion": API_VERSION,
        "kind": "InfrastructureConfig",
        "networks": networks,
        "zoned": !layout.zones.is_empty(),
    });
    let control_plane = json!({ "apiVersion": API_VERSION, "kind": "ControlPlaneConfig" });
    Ok((infra, control_plane))
}
