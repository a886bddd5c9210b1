//! Alibaba Cloud, as KIM lays it out (`pkg/gardener/shoot/hyperscaler/alicloud`): the nodes
//! range is the VPC, each zone (at most 8, in the order given) gets the next /prefix+3
//! slice of it; the control plane config is empty.

use serde_json::{Value, json};
use tessera_sdk::PluginError;

use super::{Layout, block, check_prefix, distinct, inside};

const API_VERSION: &str = "alicloud.provider.extensions.gardener.cloud/v1alpha1";
const MAX_ZONES: usize = 8;

pub fn configs(layout: &Layout) -> Result<(Value, Value), PluginError> {
    let nodes = layout.nodes;
    check_prefix(nodes, "alicloud")?;
    if layout.zones.len() > MAX_ZONES {
        return Err(PluginError::invalid_input(
            layout.zones_field,
            format!(
                "alicloud takes at most {MAX_ZONES} zones, got {}",
                layout.zones.len()
            ),
        ));
    }
    let prefix = nodes.prefix + 3;
    let step = 1u64 << (32 - prefix);
    let mut zones = Vec::new();
    distinct(layout.zones, layout.zones_field)?;
    for (i, zone) in layout.zones.iter().enumerate() {
        let subnet = block(nodes.addr as u64 + i as u64 * step, prefix);
        let workers = inside(nodes, subnet, zone, layout.zones_field)?;
        zones.push(json!({ "name": zone, "workers": workers }));
    }
    let infra = json!({
        "apiVersion": API_VERSION,
        "kind": "InfrastructureConfig",
        "networks": { "vpc": { "cidr": nodes.to_string() }, "zones": zones },
    });
    let control_plane = json!({ "apiVersion": API_VERSION, "kind": "ControlPlaneConfig" });
    Ok((infra, control_plane))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use tessera_sdk::util::Cidr;

    fn zones_of(nodes: &str, zones: &[&str]) -> Result<Value, PluginError> {
        let zones: Vec<String> = zones.iter().map(|z| z.to_string()).collect();
        let config = Config::default();
        let layout = Layout {
            provider: "alicloud",
            region: "eu-central-1",
            nodes: Cidr::parse(nodes).unwrap(),
            zones: &zones,
            zones_field: "spec.shoot.provider.workers[0].zones",
            current: None,
            config: &config,
        };
        configs(&layout).map(|(infra, _)| infra["networks"].clone())
    }

    /// KIM `hyperscaler/alicloud/zones_test.go:TestZonesWithCustomNodeIPRange` ("three zones
    /// and Default 10.250.0.0/16", "three zones reverse order", a /24) and
    /// `config_test.go`: the VPC is the nodes range.
    #[test]
    fn zones_take_consecutive_slices_as_kim_lays_them_out() {
        let networks = zones_of(
            "10.250.0.0/16",
            &["eu-central-1a", "eu-central-1b", "eu-central-1c"],
        );
        assert_eq!(
            networks.unwrap(),
            json!({"vpc": {"cidr": "10.250.0.0/16"}, "zones": [
                {"name": "eu-central-1a", "workers": "10.250.0.0/19"},
                {"name": "eu-central-1b", "workers": "10.250.32.0/19"},
                {"name": "eu-central-1c", "workers": "10.250.64.0/19"}]})
        );
        let reversed = zones_of(
            "10.250.0.0/16",
            &["eu-central-1c", "eu-central-1b", "eu-central-1a"],
        );
        assert_eq!(
            reversed.unwrap()["zones"][0],
            json!({"name": "eu-central-1c", "workers": "10.250.0.0/19"})
        );
        let small = zones_of("10.250.0.0/24", &["a", "b"]).unwrap();
        assert_eq!(small["zones"][1]["workers"], "10.250.0.32/27");
    }

    /// KIM `generateZones` errors: more than 8 zones, a prefix outside /16../24, a zone
    /// twice.
    #[test]
    fn kims_refusals() {
        let nine: Vec<String> = (0..9).map(|i| format!("z{i}")).collect();
        let nine: Vec<&str> = nine.iter().map(String::as_str).collect();
        assert!(zones_of("10.250.0.0/16", &nine).is_err());
        assert!(zones_of("10.250.0.0/25", &["a"]).is_err());
        assert!(zones_of("10.0.0.0/15", &["a"]).is_err());
        assert!(zones_of("10.250.0.0/16", &["a", "a"]).is_err());
    }
}
