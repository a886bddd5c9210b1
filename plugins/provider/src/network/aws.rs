use serde_json::{Value, json};
use tessera_sdk::PluginError;

use tessera_sdk::util::Cidr;

use super::{Layout, block, check_prefix, free_slot, inside, used_subnets};

const API_VERSION: &str = "aws.provider.extensions.gardener.cloud/v1alpha1";

pub fn configs(layout: &Layout) -> Result<(Value, Value), PluginError> {
    let nodes = layout.nodes;
    check_prefix(nodes, "aws")?;
    if layout.zones.len() > 8 {
        return Err(PluginError::invalid_input(
            layout.zones_field,
            format!("aws supports 1 to 8 zones, got {}", layout.zones.len()),
        ));
    }
    // Zones keep the subnets they already have; only new zones get fresh ones.
    let existing: Vec<Value> = layout
        .current
        .and_then(|c| c["networks"]["zones"].as_array().cloned())
        .unwrap_or_default();
    let w = nodes.prefix + 3;
    let h = 1u64 << (32 - (w + 1));
    let base = nodes.addr as u64;
    // Slot i's (workers, public, internal): three large slots, then five small ones.
    let slot = |i: usize| -> [Cidr; 3] {
        if i < 3 {
            let start = base + 4 * h * i as u64;
            [
                block(start, w),
                block(start + 2 * h, w + 1),
                block(start + 3 * h, w + 1),
            ]
        } else {
            let step = h / 4;
            let start = base + 12 * h + 3 * step * (i as u64 - 3);
            [
                block(start, w + 3),
                block(start + step, w + 3),
                block(start + 2 * step, w + 3),
            ]
        }
    };
    let kept: Vec<Value> = existing
        .iter()
        .filter(|z| layout.zones.iter().any(|name| z["name"] == name.as_str()))
        .cloned()
        .collect();
    let mut used = used_subnets(&kept);
    let mut zones = Vec::with_capacity(layout.zones.len());
    for (i, zone) in layout.zones.iter().enumerate() {
        if !zone.starts_with(layout.region) {
            return Err(PluginError::invalid_input(
                layout.zones_field,
                format!("zone {zone} is not in region {}", layout.region),
            ));
        }
        if let Some(kept) = existing.iter().find(|z| z["name"] == zone.as_str()) {
            zones.push(kept.clone());
            continue;
        }
        let free = free_slot(i, 8, &used, |s| slot(s).to_vec()).ok_or_else(|| {
            PluginError::invalid_input(
                layout.zones_field,
                format!("no free subnets left in {nodes} for zone {zone}"),
            )
        })?;
        let [workers, public, internal] = slot(free);
        used.extend([workers, public, internal]);
        zones.push(json!({
            "name": zone,
            "workers": inside(nodes, workers, zone, layout.zones_field)?,
            "public": inside(nodes, public, zone, layout.zones_field)?,
            "internal": inside(nodes, internal, zone, layout.zones_field)?,
        }));
    }
    let infra = json!({
        "apiVersion": API_VERSION,
        "kind": "InfrastructureConfig",
        "networks": { "vpc": { "cidr": nodes.to_string() }, "zones": zones },
    });
    let control_plane = json!({ "apiVersion": API_VERSION, "kind": "ControlPlaneConfig" });
    Ok((infra, control_plane))
}
