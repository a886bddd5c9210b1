//! Google Distributed Cloud Hosted, as KIM lays it out (`pkg/gardener/shoot/hyperscaler/gdch`):
//! 1 to 3 zones split the nodes range into 1, 2 or 4 equal parts (in the order given), the
//! parent network reference comes from the configuration (KIM's `provider.gdch.*`), egress
//! is on; the control plane config is empty.

use serde_json::{Map, Value, json};
use tessera_sdk::PluginError;

use super::{Layout, block, distinct};

const API_VERSION: &str = "gdch.provider.extensions.gardener.gdc.goog/v1alpha1";

pub fn configs(layout: &Layout) -> Result<(Value, Value), PluginError> {
    let nodes = layout.nodes;
    let count = layout.zones.len();
    let shift = match count {
        1 => 0,
        2 => 1,
        3 => 2,
        n => {
            return Err(PluginError::invalid_input(
                layout.zones_field,
                format!("gdch takes 1 to 3 zones, got {n}"),
            ));
        }
    };
    let prefix = nodes.prefix + shift;
    if prefix > 32 {
        return Err(PluginError::invalid_input(
            "spec.shoot.networking.nodes",
            format!("{nodes} is too small for {count} zones"),
        ));
    }
    let step = 1u64 << (32 - prefix);
    let mut zones = Vec::new();
    distinct(layout.zones, layout.zones_field)?;
    for (i, zone) in layout.zones.iter().enumerate() {
        let cidr = block(nodes.addr as u64 + i as u64 * step, prefix);
        zones.push(json!({ "name": zone, "CIDR": cidr.to_string() }));
    }
    let gdch = &layout.config.gdch;
    let mut parent = Map::new();
    parent.insert("name".into(), json!(gdch.parent_reference_name));
    for (key, value) in [
        ("namespace", &gdch.parent_reference_namespace),
        ("type", &gdch.parent_reference_type),
    ] {
        if !value.is_empty() {
            parent.insert(key.into(), json!(value));
        }
    }
    let infra = json!({
        "apiVersion": API_VERSION,
        "kind": "InfrastructureConfig",
        "enableEgress": true,
        "networks": { "nodeCIDR": nodes.to_string(), "zones": zones, "parentReference": parent },
    });
    let control_plane = json!({ "apiVersion": API_VERSION, "kind": "ControlPlaneConfig" });
    Ok((infra, control_plane))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use tessera_sdk::util::Cidr;

    fn networks(nodes: &str, zones: &[&str], config: &Config) -> Result<Value, PluginError> {
        let zones: Vec<String> = zones.iter().map(|z| z.to_string()).collect();
        let layout = Layout {
            provider: "gdch",
            region: "us-west16",
            nodes: Cidr::parse(nodes).unwrap(),
            zones: &zones,
            zones_field: "spec.shoot.provider.workers[0].zones",
            current: None,
            config,
        };
        configs(&layout).map(|(infra, _)| infra)
    }

    /// KIM `hyperscaler/gdch/zones_test.go`: "from /24 to three /26", "from /16 to three
    /// /18", "input order preserved (reversed names)", "N=3 boundary /30 to three /32";
    /// `config.go` `NewInfrastructureConfig`: nodeCIDR, parent reference, egress on.
    #[test]
    fn zones_split_the_nodes_range_as_kim_does() {
        let mut config = Config::default();
        config.gdch.parent_reference_name = "kyma-net".into();
        let infra = networks(
            "10.72.0.0/24",
            &["us-west16-b", "us-west16-c", "us-west16-d"],
            &config,
        )
        .unwrap();
        assert_eq!(
            infra,
            json!({"apiVersion": API_VERSION, "kind": "InfrastructureConfig", "enableEgress": true,
                "networks": {"nodeCIDR": "10.72.0.0/24", "parentReference": {"name": "kyma-net"},
                    "zones": [{"name": "us-west16-b", "CIDR": "10.72.0.0/26"},
                        {"name": "us-west16-c", "CIDR": "10.72.0.64/26"},
                        {"name": "us-west16-d", "CIDR": "10.72.0.128/26"}]}})
        );
        let wide = networks("10.180.0.0/16", &["a", "b", "c"], &config).unwrap();
        assert_eq!(wide["networks"]["zones"][2]["CIDR"], "10.180.128.0/18");
        let reversed = networks("10.72.0.0/24", &["us-west16-d", "us-west16-c"], &config).unwrap();
        assert_eq!(
            reversed["networks"]["zones"][1],
            json!({"name": "us-west16-c", "CIDR": "10.72.0.128/25"})
        );
        let tiny = networks("10.72.0.0/30", &["a", "b", "c"], &config).unwrap();
        assert_eq!(tiny["networks"]["zones"][2]["CIDR"], "10.72.0.2/32");
        config.gdch.parent_reference_namespace = "net".into();
        config.gdch.parent_reference_type = "SingleSubnet".into();
        let full = networks("10.72.0.0/24", &["a"], &config).unwrap();
        assert_eq!(
            full["networks"]["parentReference"],
            json!({"name": "kyma-net", "namespace": "net", "type": "SingleSubnet"})
        );
    }

    /// KIM's errors: zone count outside 1..=3, a zone twice, a range too small.
    #[test]
    fn kims_refusals() {
        let config = Config::default();
        assert!(networks("10.72.0.0/24", &["a", "b", "c", "d"], &config).is_err());
        assert!(networks("10.72.0.0/24", &[], &config).is_err());
        assert!(networks("10.72.0.0/24", &["a", "a"], &config).is_err());
        assert!(networks("10.72.0.0/31", &["a", "b", "c"], &config).is_err());
    }
}
