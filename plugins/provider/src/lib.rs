//! `provider`: provider type, worker pools and the per-hyperscaler network layout
//! (`infrastructureConfig`, `controlPlaneConfig`) for AWS, Azure, GCP and OpenStack.
//!
//! On patch the Shoot's pool order, zone order and update strategies are kept, machine
//! images are never downgraded, and the infrastructure config is only regenerated when the
//! main pool gained zones (existing zones keep their subnets).

mod config;
mod network;
mod settings;
mod workers;

pub use config::Config;
use serde_json::json;
use tessera_sdk::models::{ShootProvider, Worker};
use tessera_sdk::util::Cidr;
use tessera_sdk::{ExtendInput, ExtendOutput, Operation, PluginError, ShootExtension};

pub struct Provider;

impl ShootExtension for Provider {
    const NAME: &'static str = "provider";
    const DESCRIPTION: &'static str =
        "Provider, worker pools and per-hyperscaler infrastructure/control-plane config";
    type Config = Config;

    fn extend(input: ExtendInput<Config>) -> Result<ExtendOutput, PluginError> {
        let rt = &input.runtime.spec.shoot;
        let provider = rt.provider.type_.as_str();
        if !network::PROVIDERS.contains(&provider) {
            return Err(PluginError::unsupported(
                "spec.shoot.provider.type",
                format!(
                    "unknown provider {provider:?}; supported: {}",
                    network::PROVIDERS.join(", ")
                ),
            ));
        }
        let nodes = Cidr::parse(&rt.networking.nodes)
            .map_err(|e| PluginError::invalid_input("spec.shoot.networking.nodes", e))?;
        let pools = workers::desired(&input.runtime, &input.config)?;
        let main_name = pools[0].worker.name.clone();
        let mut warnings = Vec::new();

        let current = match input.operation {
            Operation::Patch => input.current.as_ref().map(|s| &s.spec.provider),
            Operation::Create => None,
        };
        let desired: Vec<_> = pools.into_iter().map(|p| p.worker).collect();
        let desired_main_zones = desired[0].zones.clone();
        let mut workers = match current {
            Some(cur) => workers::patch(desired, &cur.workers, &mut warnings),
            None => desired,
        };
        settings::max_pods(&mut workers, &rt.networking.pods)?;
        settings::machine_controller(&mut workers, &input.config.worker)?;
        settings::gvisor_net_raw(&mut workers);
        let main = workers
            .iter()
            .find(|w| w.name == main_name)
            .expect("the main pool is always desired");

        let (infra, control_plane) =
            network_configs(&input, current, main, &desired_main_zones, nodes)?;

        let mut shoot = input.draft;
        let p = &mut shoot.spec.provider;
        p.type_ = provider.to_string();
        p.workers = workers;
        p.infrastructure_config = Some(infra);
        p.control_plane_config = Some(control_plane);
        if input.config.disable_ssh_access {
            p.extra.insert(
                "workersSettings".into(),
                json!({ "sshAccess": { "enabled": false } }),
            );
        }
        Ok(ExtendOutput::with_warnings(shoot, warnings))
    }
}

/// The infrastructure and control-plane configs: the Shoot's kept unless the main pool
/// gained zones (or none exist yet), else generated for the provider.
fn network_configs(
    input: &ExtendInput<Config>,
    current: Option<&ShootProvider>,
    main: &Worker,
    desired_main_zones: &[String],
    nodes: Cidr,
) -> Result<(serde_json::Value, serde_json::Value), PluginError> {
    let rt = &input.runtime.spec.shoot;
    let main_name = &main.name;
    // Regenerate the network layout only when zones were added (or none exists yet).
    let current_main_zones = current
        .and_then(|c| c.workers.iter().find(|w| w.name == *main_name))
        .map(|w| w.zones.clone())
        .unwrap_or_default();
    let zones_added = desired_main_zones
        .iter()
        .any(|z| !current_main_zones.contains(z));
    // KIM's `isAzureLiteSetup`: an old Azure Shoot without zones keeps its network.
    let azure_lite = |c: &ShootProvider| {
        c.type_ == "azure"
            && c.infrastructure_config
                .as_ref()
                .is_some_and(|i| i["networks"]["zones"].as_array().is_none_or(Vec::is_empty))
    };
    let keep = current.filter(|c| {
        (!zones_added || azure_lite(c))
            && c.infrastructure_config.is_some()
            && c.control_plane_config.is_some()
    });
    let configs = match keep {
        Some(c) => (
            c.infrastructure_config.clone().expect("checked above"),
            c.control_plane_config.clone().expect("checked above"),
        ),
        None => network::configs(&network::Layout {
            provider: &rt.provider.type_,
            region: &rt.region,
            nodes,
            zones: &main.zones,
            zones_field: "spec.shoot.provider.workers[0].zones",
            current: current.and_then(|c| c.infrastructure_config.as_ref()),
            config: &input.config,
        })?,
    };

    Ok(configs)
}

tessera_sdk::export_shoot_extension!(Provider);
tessera_sdk::declare_config_schema!(Config, "config.schema.json");
tessera_sdk::declare_requests!("requests.yaml");
tessera_sdk::golden_tests!(Provider);
