//! Per-hyperscaler `infrastructureConfig` and `controlPlaneConfig`.

mod alicloud;
mod aws;
mod azure;
mod gcp;
mod gdch;
mod openstack;

use serde_json::Value;
use tessera_sdk::PluginError;
use tessera_sdk::util::Cidr;

use crate::config::Config;

/// What a provider needs to lay out its network.
pub struct Layout<'a> {
    pub provider: &'a str,
    pub region: &'a str,
    pub nodes: Cidr,
    /// The main pool's zones, in the order to lay them out.
    pub zones: &'a [String],
    /// The Runtime field holding those zones.
    pub zones_field: &'a str,
    /// The Shoot's current infrastructureConfig, when patching.
    pub current: Option<&'a Value>,
    pub config: &'a Config,
}

/// The providers this plugin knows.
pub const PROVIDERS: &[&str] = &["aws", "azure", "gcp", "openstack", "alicloud", "gdch"];

/// Build (infrastructureConfig, controlPlaneConfig).
pub fn configs(layout: &Layout) -> Result<(Value, Value), PluginError> {
    let (mut infra, control_plane) = generated(layout)?;
    if let Some(current) = layout.current {
        keep_from_current(layout.provider, &mut infra, current);
    }
    Ok((infra, control_plane))
}

/// Fields of the infrastructure config that Gardener or an operator set and a regenerated
/// config must carry over (KIM's `NewInfrastructureConfigForPatch`, aws and azure).
const KEPT: &[(&str, &[&str])] = &[
    (
        "aws",
        &[
            "ignoreTags",
            "enableECRAccess",
            "dualStack",
            "networks.vpc.id",
            "networks.vpc.gatewayEndpoints",
        ],
    ),
    (
        "azure",
        &[
            "resourceGroup",
            "networks.vnet",
            "networks.serviceEndpoints",
            "networks.natGateway",
            "networks.workers",
        ],
    ),
];

fn keep_from_current(provider: &str, infra: &mut Value, current: &Value) {
    let paths = KEPT.iter().find(|(p, _)| *p == provider).map(|(_, k)| *k);
    for path in paths.unwrap_or_default() {
        let pointer = format!("/{}", path.replace('.', "/"));
        let Some(value) = current.pointer(&pointer) else {
            continue;
        };
        let (parent, key) = pointer.rsplit_once('/').expect("starts with /");
        let parent = if parent.is_empty() {
            Some(&mut *infra)
        } else {
            infra.pointer_mut(parent)
        };
        if let Some(Value::Object(map)) = parent {
            map.insert(key.to_string(), value.clone());
        }
    }
}

fn generated(layout: &Layout) -> Result<(Value, Value), PluginError> {
    match layout.provider {
        "aws" => aws::configs(layout),
        "azure" => azure::configs(layout),
        "gcp" => Ok(gcp::configs(layout)),
        "openstack" => Ok(openstack::configs(layout)),
        "alicloud" => alicloud::configs(layout),
        "gdch" => gdch::configs(layout),
        other => Err(PluginError::unsupported(
            "spec.shoot.provider.type",
            format!(
                "unknown provider {other:?}; supported: {}",
                PROVIDERS.join(", ")
            ),
        )),
    }
}

/// Error when a zone is listed twice.
fn distinct(zones: &[String], field: &str) -> Result<(), PluginError> {
    match zones
        .iter()
        .enumerate()
        .find(|(i, z)| zones[..*i].contains(z))
    {
        Some((_, zone)) => Err(PluginError::invalid_input(
            field,
            format!("zone {zone} is listed twice"),
        )),
        None => Ok(()),
    }
}

/// Node ranges for AWS, Azure and Alibaba Cloud must be /16 to /24 so that every zone's
/// subnets fit.
fn check_prefix(nodes: Cidr, provider: &str) -> Result<(), PluginError> {
    if !(16..=24).contains(&nodes.prefix) {
        return Err(PluginError::invalid_input(
            "spec.shoot.networking.nodes",
            format!("{provider} needs a nodes range between /16 and /24, got {nodes}"),
        ));
    }
    Ok(())
}

fn block(addr: u64, prefix: u8) -> Cidr {
    Cidr {
        addr: addr as u32,
        prefix,
    }
}

/// Error unless `subnet` lies inside `nodes`.
fn inside(nodes: Cidr, subnet: Cidr, zone: &str, field: &str) -> Result<String, PluginError> {
    if subnet.addr as u64 + subnet.size() > nodes.addr as u64 + nodes.size()
        || !nodes.contains(&subnet)
    {
        return Err(PluginError::invalid_input(
            field,
            format!("subnet {subnet} for zone {zone} falls outside the nodes range {nodes}"),
        ));
    }
    Ok(subnet.to_string())
}

/// Subnets already taken by zones kept from the current layout (any `cidr`, `workers`,
/// `public` or `internal` field that parses).
fn used_subnets(zones: &[Value]) -> Vec<Cidr> {
    zones
        .iter()
        .flat_map(|z| {
            ["cidr", "workers", "public", "internal"].map(|k| z[k].as_str().map(str::to_string))
        })
        .flatten()
        .filter_map(|c| Cidr::parse(&c).ok())
        .collect()
}

/// The first slot from `from` on whose subnets overlap nothing in `used`.
fn free_slot(
    from: usize,
    slots: usize,
    used: &[Cidr],
    subnets: impl Fn(usize) -> Vec<Cidr>,
) -> Option<usize> {
    (from..slots).find(|&slot| {
        subnets(slot)
            .iter()
            .all(|s| used.iter().all(|u| !u.overlaps(s)))
    })
}
