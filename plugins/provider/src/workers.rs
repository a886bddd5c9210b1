//! Worker pools: validation, defaults, and the patch rules (keep Gardener's pool order, zone
//! order and update strategy; never lower a machine image version).

use std::cmp::Ordering;
use std::collections::HashSet;

use serde_json::json;
use tessera_sdk::PluginError;
use tessera_sdk::models::{MachineImage, Runtime, Worker};
use tessera_sdk::util::compare_versions;

use crate::config::Config;

/// A pool together with the Runtime field it came from, for error messages.
pub struct Pool {
    pub field: String,
    pub worker: Worker,
}

/// The Runtime's pools, main first, validated and defaulted.
pub fn desired(runtime: &Runtime, config: &Config) -> Result<Vec<Pool>, PluginError> {
    let mut pools = pools_of(runtime)?;
    let main_zones: Vec<String> = pools[0].worker.zones.clone();
    let mut names = HashSet::new();
    for pool in &mut pools {
        check_pool(pool, &main_zones, &mut names)?;
        apply_defaults(&mut pool.worker, &runtime.spec.shoot.provider.type_, config);
    }
    Ok(pools)
}

/// The main pool (exactly one) and the additional ones, each with its Runtime field.
fn pools_of(runtime: &Runtime) -> Result<Vec<Pool>, PluginError> {
    let provider = &runtime.spec.shoot.provider;
    if provider.workers.len() != 1 {
        return Err(PluginError::invalid_input(
            "spec.shoot.provider.workers",
            format!(
                "exactly one main worker pool is required, found {}",
                provider.workers.len()
            ),
        ));
    }
    let additional = provider.additional_workers.iter().flatten().enumerate();
    Ok(provider
        .workers
        .iter()
        .map(|w| ("spec.shoot.provider.workers[0]".to_string(), w))
        .chain(additional.map(|(i, w)| (format!("spec.shoot.provider.additionalWorkers[{i}]"), w)))
        .map(|(field, w)| Pool {
            field,
            worker: w.clone(),
        })
        .collect())
}

/// One pool's fields, its name unique among `names`, its zones within `main_zones`.
fn check_pool(
    pool: &Pool,
    main_zones: &[String],
    names: &mut HashSet<String>,
) -> Result<(), PluginError> {
    let (w, field) = (&pool.worker, &pool.field);
    let fail = |at: &str, message: String| {
        Err(PluginError::invalid_input(format!("{field}.{at}"), message))
    };
    // Gardener's own fields pass through to the Shoot; anything else is a typo that
    // Gardener would drop silently (or the API server reject much later).
    if let Some((path, message)) = w.unknown_field() {
        return fail(&path, message);
    }
    let name_ok = !w.name.is_empty()
        && w.name.len() <= 15
        && w.name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !name_ok {
        let why = format!(
            "pool name {:?} must be 1-15 lower-case letters, digits or '-'",
            w.name
        );
        return fail("name", why);
    }
    if !names.insert(w.name.clone()) {
        return fail("name", format!("pool name {:?} is used twice", w.name));
    }
    if w.machine.type_.is_empty() {
        return fail("machine.type", "machine type is empty".into());
    }
    if w.minimum < 0 || w.maximum < w.minimum {
        let why = format!(
            "pool {} needs 0 <= minimum <= maximum (minimum {}, maximum {})",
            w.name, w.minimum, w.maximum
        );
        return fail("maximum", why);
    }
    check_zones(w, main_zones)
        .map_err(|why| PluginError::invalid_input(format!("{field}.zones"), why))
}

/// Zones: at least one, none twice, each among the main pool's.
fn check_zones(w: &Worker, main_zones: &[String]) -> Result<(), String> {
    if w.zones.is_empty() {
        return Err(format!("pool {} has no zones", w.name));
    }
    let mut seen = HashSet::new();
    for zone in &w.zones {
        if !seen.insert(zone) {
            return Err(format!("zone {zone} is listed twice in pool {}", w.name));
        }
        if !main_zones.contains(zone) {
            return Err(format!(
                "zone {zone} of pool {} is missing from the main pool's zones ({}); the cluster network only spans those",
                w.name,
                main_zones.join(", ")
            ));
        }
    }
    Ok(())
}

fn apply_defaults(worker: &mut Worker, provider: &str, config: &Config) {
    if worker
        .machine
        .image
        .as_ref()
        .and_then(|i| i.name.as_ref())
        .is_none()
        && let Some(default) = config.machine_images.get(provider)
    {
        worker.machine.image = Some(MachineImage {
            name: Some(default.name.clone()),
            version: default.version.clone(),
            extra: Default::default(),
        });
    }
    if provider == "aws" && config.aws.enable_imdsv2 && !worker.extra.contains_key("providerConfig")
    {
        worker.extra.insert(
            "providerConfig".into(),
            json!({
                "apiVersion": "aws.provider.extensions.gardener.cloud/v1alpha1",
                "kind": "WorkerConfig",
                "instanceMetadataOptions": { "httpTokens": "required", "httpPutResponseHopLimit": 2 },
            }),
        );
    }
}

/// Merge the desired pools with the Shoot's current ones: Gardener's pool order and zone
/// order win, new pools and zones are appended, the update strategy is kept and a machine
/// image version is never lowered.
pub fn patch(desired: Vec<Worker>, current: &[Worker], warnings: &mut Vec<String>) -> Vec<Worker> {
    let mut desired: Vec<Option<Worker>> = desired.into_iter().map(Some).collect();
    let mut out = Vec::with_capacity(desired.len());
    for cur in current {
        if let Some(slot) = desired
            .iter_mut()
            .find(|w| w.as_ref().is_some_and(|w| w.name == cur.name))
        {
            let mut worker = slot.take().expect("matched a Some above");
            merge_existing(&mut worker, cur, warnings);
            out.push(worker);
        }
    }
    out.extend(desired.into_iter().flatten());
    out
}

fn merge_existing(worker: &mut Worker, current: &Worker, warnings: &mut Vec<String>) {
    // KIM's `alignWorkerZonesForExtension`: the pool keeps every zone it has (its machines
    // and subnets live there), in Gardener's order; new zones are appended.
    let mut zones = current.zones.clone();
    let dropped: Vec<&String> = zones.iter().filter(|z| !worker.zones.contains(z)).collect();
    if !dropped.is_empty() {
        warnings.push(format!(
            "pool {}: zones {} are kept; a pool's zones are never removed",
            worker.name,
            dropped
                .iter()
                .map(|z| z.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for zone in &worker.zones {
        if !zones.contains(zone) {
            zones.push(zone.clone());
        }
    }
    worker.zones = zones;
    if !worker.extra.contains_key("updateStrategy")
        && let Some(strategy) = current.extra.get("updateStrategy")
    {
        worker
            .extra
            .insert("updateStrategy".into(), strategy.clone());
    }
    let (Some(cur_image), Some(image)) = (&current.machine.image, &mut worker.machine.image) else {
        return;
    };
    if cur_image.name != image.name {
        return;
    }
    match (&cur_image.version, &image.version) {
        (Some(cur), Some(want)) if compare_versions(cur, want) == Ordering::Greater => {
            warnings.push(format!(
                "pool {}: machine image {} already at {cur}; not downgrading to {want}",
                worker.name,
                image.name.as_deref().unwrap_or_default()
            ));
            image.version = Some(cur.clone());
        }
        (Some(cur), None) => image.version = Some(cur.clone()),
        _ => {}
    }
}
