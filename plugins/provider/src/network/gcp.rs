use serde_json::{Value, json};

use super::Layout;

const API_VERSION: &str = "gcp.provider.extensions.gardener.cloud/v1alpha1";

pub fn configs(layout: &Layout) -> (Value, Value) {
    let nodes = layout.nodes.to_string();
    let infra = json!({
        "apiVersion": API_VERSION,
        "kind": "InfrastructureConfig",
        // `worker` is deprecated but still read by older extension versions.
        "networks": { "worker": nodes, "workers": nodes },
    });
    let control_plane = json!({
        "apiVersion": API_VERSION,
        "kind": "ControlPlaneConfig",
        "zone": layout.zones.first(),
    });
    (infra, control_plane)
}
