use serde_json::{Value, json};

use super::Layout;

const API_VERSION: &str = "openstack.provider.extensions.gardener.cloud/v1alpha1";

pub fn configs(layout: &Layout) -> (Value, Value) {
    let openstack = &layout.config.openstack;
    let infra = json!({
        "apiVersion": API_VERSION,
        "kind": "InfrastructureConfig",
        "floatingPoolName": openstack.floating_pool_name,
        // `worker` is deprecated, but KIM's Go type has no omitempty (provider-openstack
        // v1alpha1 `Networks.Worker`): every KIM Shoot carries it empty, and dropping it
        // would make Gardener reconcile the infrastructure once more.
        "networks": { "worker": "", "workers": layout.nodes.to_string() },
    });
    let control_plane = json!({
        "apiVersion": API_VERSION,
        "kind": "ControlPlaneConfig",
        "loadBalancerProvider": openstack.load_balancer_provider,
    });
    (infra, control_plane)
}
