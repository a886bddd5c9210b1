//! `tessera modules apply --dry-run`: what a pass would apply and prune, asked of the
//! plugins (requirements read live) and of the API server (server-side dry run), writing
//! nothing — not the objects, not the inventory.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use super::{Catalog, SetRequest, State, dependencies, plan, waves};
use crate::modules::error::ModuleError;
use crate::modules::inventory::{Inventory, ObjectKey};
use crate::modules::run::ModuleRun;
use crate::modules::source::ModuleSource;
use crate::modules::target::Target;
use crate::modules::types::Change;
use crate::wasm::WasmRuntime;

/// One object of a module's preview.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectPreview {
    pub object: String,
    pub change: Change,
}

/// One module's preview: the plugin's answer, and each object's change.
#[derive(Debug, Clone, PartialEq)]
pub struct ModulePreview {
    pub name: String,
    pub version: Option<String>,
    /// The state the plugin (or the plan) reports; readiness of applied objects is not
    /// judged, since nothing is applied.
    pub state: State,
    pub message: Option<String>,
    pub objects: Vec<ObjectPreview>,
}

impl ModulePreview {
    fn settled(name: &str, version: Option<String>, state: State, message: String) -> Self {
        Self {
            name: name.to_string(),
            version,
            state,
            message: Some(message),
            objects: Vec::new(),
        }
    }
}

/// What one pass of `req` would do, module by module, in the order a pass runs them
/// (dependencies first, then the modules leaving the set).
pub async fn preview_set(
    target: &Target,
    wasm: &Arc<WasmRuntime>,
    source: &dyn ModuleSource,
    req: &SetRequest<'_>,
) -> Result<Vec<ModulePreview>, ModuleError> {
    let inventory = Inventory::load(target, &req.set).await?;
    let plan = plan::plan(&Catalog(source), req, &super::installed(&inventory));
    let mut out = Vec::new();
    let mut deps = BTreeMap::new();
    for (name, run) in &plan.run {
        match dependencies(wasm, &run.candidate, &run.config).await {
            Ok(d) => drop(deps.insert(name.clone(), d)),
            Err(message) => out.push(ModulePreview::settled(
                name,
                Some(run.candidate.version.clone()),
                State::Error,
                message,
            )),
        }
    }
    for name in waves(&deps).0.into_iter().flatten() {
        let run = &plan.run[&name];
        let module = ModuleRun {
            target,
            wasm,
            set: &req.set,
            module: &name,
            candidate: &run.candidate,
            config: run.config.clone(),
            adopt: run.adopt,
        };
        let version = Some(run.candidate.version.clone());
        let record = inventory.modules.get(&name).cloned().unwrap_or_default();
        let keep = held_by_others(&inventory, &name);
        out.push(match module.preview(&record, &keep).await? {
            Ok((state, message, changes)) => ModulePreview {
                name: name.clone(),
                version,
                state,
                message,
                objects: listed(changes),
            },
            Err(message) => ModulePreview::settled(&name, version, State::Error, message),
        });
    }
    out.extend(not_run(&plan.reports, &plan.unmanaged));
    out.extend(leaving(&inventory, req));
    Ok(out)
}

/// Modules the plan settled without running (unresolvable, misconfigured, unmanaged).
fn not_run(
    reports: &BTreeMap<String, super::ModuleReport>,
    unmanaged: &[String],
) -> Vec<ModulePreview> {
    reports
        .values()
        .map(|r| {
            let mut message = r.message.clone().unwrap_or_default();
            if unmanaged.contains(&r.name) {
                message =
                    "unmanaged: Tessera's labels are removed; its objects stay, no longer tracked"
                        .to_string();
            }
            ModulePreview::settled(&r.name, r.version.clone(), r.state, message)
        })
        .collect()
}

/// Modules the inventory lists that left the set: all their objects go (unless another
/// module of the set holds them too).
fn leaving(inventory: &Inventory, req: &SetRequest<'_>) -> Vec<ModulePreview> {
    plan::dropped(inventory.modules.keys(), req)
        .into_iter()
        .map(|name| {
            let record = &inventory.modules[&name];
            let keep = held_by_others(inventory, &name);
            let changes = record
                .keys()
                .filter(|k| !keep.contains(*k))
                .map(|k| (k.clone(), Change::Prune))
                .collect();
            ModulePreview {
                name: name.clone(),
                version: Some(record.version.clone()),
                state: State::Deleting,
                message: Some("left the set: its objects are removed".to_string()),
                objects: listed(changes),
            }
        })
        .collect()
}

fn held_by_others(inventory: &Inventory, name: &str) -> HashSet<ObjectKey> {
    inventory
        .modules
        .iter()
        .filter(|(m, _)| m.as_str() != name)
        .flat_map(|(_, r)| r.keys().cloned())
        .collect()
}

fn listed(changes: Vec<(ObjectKey, Change)>) -> Vec<ObjectPreview> {
    changes
        .into_iter()
        .map(|(key, change)| ObjectPreview {
            object: key.to_string(),
            change,
        })
        .collect()
}
