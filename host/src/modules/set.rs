//! A whole set of modules on one target, one pass: resolve each module's plugin version
//! (refusing downgrades), order by dependencies, reconcile in that order, uninstall what
//! left the set in reverse order, aggregate the states.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::apply::Applied;
use super::engine::{ModuleRun, Reconciled, prune_inventory};
use super::error::ModuleError;
use super::inventory::{Inventory, ObjectKey};
use super::ownership::Owner;
use super::source::{Candidate, ModuleSource};
use super::target::Target;
use crate::crd::moduleset::ModuleSpec;
use crate::wasm::WasmRuntime;

/// The channel when neither the module nor the set names one.
pub const DEFAULT_CHANNEL: &str = "regular";

/// A module's (and the set's) state, as KLM reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum State {
    Ready,
    Processing,
    Warning,
    Error,
    Deleting,
}

impl State {
    fn weight(self) -> u8 {
        match self {
            State::Error => 4,
            State::Warning => 3,
            State::Deleting => 2,
            State::Processing => 1,
            State::Ready => 0,
        }
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

/// Error > Warning > Processing > Ready (a module still being removed counts as
/// Processing unless the whole set is being deleted).
pub fn aggregate(states: impl IntoIterator<Item = State>, deleting: bool) -> State {
    if deleting {
        return State::Deleting;
    }
    states
        .into_iter()
        .map(|s| {
            if s == State::Deleting {
                State::Processing
            } else {
                s
            }
        })
        .max_by_key(|s| s.weight())
        .unwrap_or(State::Ready)
}

/// One module in the set's status.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleReport {
    pub name: String,
    /// The channel the version came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// The installed (or installing) version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// `sha256:` of the plugin component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    pub state: State,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// How many objects the module has applied.
    #[serde(default)]
    pub objects: u32,
    /// The channel's shadow version, rendered next to this one and never applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<ModuleShadow>,
}

/// How a shadow version's objects compare with the applied version's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModuleShadow {
    pub version: String,
    pub digest: String,
    /// `Same`, `Differs` or `Failed`.
    pub result: String,
    /// Changed fields, `<Kind namespace/name>.<path>`, at most 40; or the shadow's error.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diff: Vec<String>,
}

/// One pass over a set.
pub struct SetRequest<'a> {
    /// `<namespace>/<name>`, the inventory key.
    pub set: String,
    /// The set's channel (`None`: [`DEFAULT_CHANNEL`]).
    pub channel: Option<&'a str>,
    pub modules: &'a [ModuleSpec],
    /// The set is being deleted: uninstall everything.
    pub deleting: bool,
    /// Versions below the installed one may be applied (annotation on the set).
    pub allow_downgrade: bool,
}

/// A version change the caller should announce.
#[derive(Debug, Clone, PartialEq)]
pub enum Notice {
    /// The channel offers a lower version than the installed one; it was not applied.
    DowngradeRefused {
        module: String,
        offered: String,
        installed: String,
    },
    /// A module moved to another version.
    Upgraded {
        module: String,
        from: String,
        to: String,
    },
    /// A module's objects are gone.
    Removed { module: String },
}

/// The result of a pass.
#[derive(Debug, Default)]
pub struct SetOutcome {
    pub modules: Vec<ModuleReport>,
    pub state: Option<State>,
    /// Look again after this long (the shortest a module asked for).
    pub requeue: Option<Duration>,
    pub applied: Vec<Applied>,
    /// Deleting and nothing is left on the target.
    pub deleted: bool,
    pub notices: Vec<Notice>,
}

/// The value at dot path `path` of `value`.
fn at<'v>(value: &'v Value, path: &str) -> Option<&'v Value> {
    path.split('.').try_fold(value, |v, key| v.get(key))
}

/// The module's configuration: the Plugin's defaults with the set's values merged over;
/// `Err` names a `locked` key the set tries to replace.
pub fn merge_config(
    defaults: Option<&Value>,
    config: Option<&Value>,
    locked: &[String],
) -> Result<Value, String> {
    fn merge(base: &mut Value, over: &Value) {
        match (base, over) {
            (Value::Object(b), Value::Object(o)) => {
                for (k, v) in o {
                    merge(b.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
            (b, o) => *b = o.clone(),
        }
    }
    if let (Some(defaults), Some(config)) = (defaults, config)
        && let Some(key) = locked.iter().find(|k| {
            at(defaults, k).is_some() && at(config, k).is_some_and(|v| Some(v) != at(defaults, k))
        })
    {
        return Err(format!(
            "config.{key} is set by the Plugin and locked (lockedConfig): a ModuleSet cannot replace it"
        ));
    }
    let mut out = defaults
        .cloned()
        .unwrap_or_else(|| Value::Object(Default::default()));
    if let Some(config) = config {
        merge(&mut out, config);
    }
    Ok(out)
}

fn newer(a: &str, b: &str) -> bool {
    match (semver::Version::parse(a), semver::Version::parse(b)) {
        (Ok(a), Ok(b)) => a > b,
        _ => false,
    }
}

struct Planned {
    channel: String,
    candidate: Candidate,
    config: String,
    deps: Vec<String>,
    /// The set allows taking over existing objects.
    adopt: bool,
    /// Set when the channel's version was refused as a downgrade.
    held: Option<String>,
}

fn report(name: &str, state: State, message: impl Into<String>) -> ModuleReport {
    ModuleReport {
        name: name.to_string(),
        channel: None,
        version: None,
        digest: None,
        state,
        message: Some(message.into()),
        objects: 0,
        shadow: None,
    }
}

async fn dependencies(
    wasm: &Arc<WasmRuntime>,
    candidate: &Candidate,
    config: &str,
) -> Result<Vec<String>, String> {
    let plugin = candidate.plugin.clone();
    let wasm = wasm.clone();
    let limits = candidate.limits;
    let config = config.to_string();
    tokio::task::spawn_blocking(move || plugin.dependencies(&wasm, &config, &limits))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())
}

/// Reconcile `req` on `target` once.
pub async fn reconcile_set(
    target: &Target,
    wasm: &Arc<WasmRuntime>,
    source: &dyn ModuleSource,
    req: &SetRequest<'_>,
) -> Result<SetOutcome, ModuleError> {
    let mut inventory = Inventory::load(target, &req.set).await?;
    let mut out = SetOutcome::default();
    let mut reports: BTreeMap<String, ModuleReport> = BTreeMap::new();
    let set_channel = req.channel.unwrap_or(DEFAULT_CHANNEL);
    let mut planned: BTreeMap<String, Planned> = BTreeMap::new();
    let mut unmanaged = HashSet::new();
    let wanted: Vec<&ModuleSpec> = if req.deleting {
        Vec::new()
    } else {
        req.modules.iter().collect()
    };
    for spec in wanted {
        let name = spec.name.clone();
        if !spec.managed.unwrap_or(true) {
            unmanaged.insert(name.clone());
            // Unmanaged: left as installed, and no longer tracked for pruning.
            inventory.save(target, &name, None).await?;
            reports.insert(
                name.clone(),
                report(
                    &name,
                    State::Ready,
                    "not managed: objects are left as they are",
                ),
            );
            continue;
        }
        let channel = spec
            .channel
            .clone()
            .unwrap_or_else(|| set_channel.to_string());
        let mut candidate = match source.resolve(&name, &channel) {
            Ok(c) => c,
            Err(message) => {
                reports.insert(name.clone(), report(&name, State::Error, message));
                continue;
            }
        };
        let mut held = None;
        if let Some(installed) = inventory.modules.get(&name).map(|r| r.version.clone())
            && newer(&installed, &candidate.version)
            && !candidate.allow_downgrade
            && !req.allow_downgrade
        {
            out.notices.push(Notice::DowngradeRefused {
                module: name.clone(),
                offered: candidate.version.clone(),
                installed: installed.clone(),
            });
            let message = format!(
                "channel {channel} offers {}, lower than the installed {installed}: kept {installed}",
                candidate.version
            );
            match source.version(&name, &installed) {
                Some(kept) => {
                    candidate = kept;
                    held = Some(message);
                }
                None => {
                    let mut r = report(&name, State::Warning, message);
                    r.version = Some(installed);
                    r.channel = Some(channel);
                    reports.insert(name.clone(), r);
                    continue;
                }
            }
        }
        let config = match merge_config(
            candidate.defaults.as_ref(),
            spec.config.as_ref(),
            &candidate.locked_config,
        ) {
            Ok(c) => c.to_string(),
            Err(message) => {
                reports.insert(name.clone(), report(&name, State::Error, message));
                continue;
            }
        };
        let deps = match dependencies(wasm, &candidate, &config).await {
            Ok(d) => d,
            Err(message) => {
                reports.insert(name.clone(), report(&name, State::Error, message));
                continue;
            }
        };
        planned.insert(
            name.clone(),
            Planned {
                channel,
                candidate,
                config,
                deps,
                adopt: spec.adopt.unwrap_or(false),
                held,
            },
        );
    }

    // Install in dependency order.
    let in_set: HashSet<&str> = req.modules.iter().map(|m| m.name.as_str()).collect();
    let deps: BTreeMap<String, Vec<String>> = planned
        .iter()
        .map(|(n, p)| (n.clone(), p.deps.clone()))
        .collect();
    let (order, cyclic) = topological(&deps);
    let mut objects_of: HashMap<String, HashSet<ObjectKey>> = inventory
        .modules
        .iter()
        .map(|(m, r)| (m.clone(), r.keys().cloned().collect()))
        .collect();
    for name in order {
        let plan = &planned[&name];
        let base = |state: State, message: Option<String>, objects: u32| ModuleReport {
            name: name.clone(),
            channel: Some(plan.channel.clone()),
            version: Some(plan.candidate.version.clone()),
            digest: Some(plan.candidate.digest.clone()),
            state,
            message,
            objects,
            shadow: None,
        };
        if let Some(missing) = plan.deps.iter().find(|d| !in_set.contains(d.as_str())) {
            reports.insert(
                name.clone(),
                base(
                    State::Error,
                    Some(format!(
                        "requires module {missing}, which is not in the ModuleSet"
                    )),
                    0,
                ),
            );
            continue;
        }
        if cyclic.contains(&name) {
            reports.insert(
                name.clone(),
                base(
                    State::Error,
                    Some(format!(
                        "dependency cycle: {name} requires {}",
                        plan.deps.join(", ")
                    )),
                    0,
                ),
            );
            continue;
        }
        let waiting: Vec<&String> = plan
            .deps
            .iter()
            .filter(|d| reports.get(*d).is_none_or(|r| r.state != State::Ready))
            .collect();
        if !waiting.is_empty() {
            let names: Vec<&str> = waiting.iter().map(|s| s.as_str()).collect();
            reports.insert(
                name.clone(),
                base(
                    State::Processing,
                    Some(format!("waiting for {} to be Ready", names.join(", "))),
                    inventory
                        .modules
                        .get(&name)
                        .map_or(0, |r| r.objects.len() as u32),
                ),
            );
            continue;
        }
        let keep: HashSet<ObjectKey> = objects_of
            .iter()
            .filter(|(m, _)| *m != &name)
            .flat_map(|(_, o)| o.iter().cloned())
            .collect();
        let previous_version = inventory.modules.get(&name).map(|r| r.version.clone());
        let run = ModuleRun {
            target,
            wasm,
            set: &req.set,
            module: &name,
            candidate: &plan.candidate,
            config: plan.config.clone(),
            adopt: plan.adopt,
        };
        let Reconciled {
            mut state,
            mut message,
            objects,
            requeue,
            applied,
            desired,
            observed,
        } = run.reconcile(&mut inventory, &keep).await?;
        let shadow = match &plan.candidate.shadow {
            Some(shadow) if state != State::Error => {
                let run = ModuleRun {
                    candidate: shadow,
                    ..run
                };
                Some(compare_shadow(
                    shadow,
                    &desired,
                    run.render(&observed).await?,
                ))
            }
            _ => None,
        };
        if let Some(held) = &plan.held
            && matches!(state, State::Ready | State::Processing)
        {
            state = State::Warning;
            message = Some(held.clone());
        }
        if let Some(from) = previous_version
            && from != plan.candidate.version
            && state != State::Error
        {
            out.notices.push(Notice::Upgraded {
                module: name.clone(),
                from,
                to: plan.candidate.version.clone(),
            });
        }
        if let Some(r) = inventory.modules.get(&name) {
            objects_of.insert(name.clone(), r.keys().cloned().collect());
        }
        out.requeue = shortest(out.requeue, requeue);
        out.applied.extend(applied);
        // A failed pass applied nothing new; what is installed is what the inventory lists.
        let objects = if state == State::Error {
            inventory.modules.get(&name).map_or(0, |r| r.objects.len())
        } else {
            objects
        };
        let mut r = base(state, message, objects as u32);
        r.shadow = shadow;
        reports.insert(name.clone(), r);
    }

    // Uninstall what left the set, dependents first.
    let leaving: Vec<String> = inventory
        .modules
        .keys()
        .filter(|m| {
            !planned.contains_key(*m) && !unmanaged.contains(*m) && !reports.contains_key(*m)
        })
        .cloned()
        .collect();
    let mut leaving_deps: HashMap<String, (Option<Candidate>, String, Vec<String>)> =
        HashMap::new();
    for name in &leaving {
        let installed = inventory.modules[name].version.clone();
        let spec = req.modules.iter().find(|m| &m.name == name);
        let candidate = source.version(name, &installed).or_else(|| {
            let channel = spec
                .and_then(|s| s.channel.clone())
                .unwrap_or_else(|| set_channel.to_string());
            source.resolve(name, &channel).ok()
        });
        // Locks do not matter here: the module is being removed.
        let config = match &candidate {
            Some(c) => merge_config(
                c.defaults.as_ref(),
                spec.and_then(|s| s.config.as_ref()),
                &[],
            )
            .map(|c| c.to_string())
            .unwrap_or_else(|_| "{}".into()),
            None => "{}".into(),
        };
        let deps = match &candidate {
            Some(c) => dependencies(wasm, c, &config).await.unwrap_or_default(),
            None => Vec::new(),
        };
        leaving_deps.insert(name.clone(), (candidate, config, deps));
    }
    for name in &leaving {
        let needed_by: Vec<&String> = leaving_deps
            .iter()
            .filter(|(other, (_, _, deps))| *other != name && deps.contains(name))
            .map(|(other, _)| other)
            .chain(
                planned
                    .iter()
                    .filter(|(_, p)| p.deps.contains(name))
                    .map(|(n, _)| n),
            )
            .collect();
        if let Some(first) = needed_by.first() {
            let mut r = report(
                name,
                State::Deleting,
                format!("waiting for {first} to be removed first"),
            );
            r.version = Some(inventory.modules[name].version.clone());
            reports.insert(name.clone(), r);
            out.requeue = shortest(out.requeue, Some(Duration::from_secs(2)));
            continue;
        }
        let keep: HashSet<ObjectKey> = objects_of
            .iter()
            .filter(|(m, _)| *m != name)
            .flat_map(|(_, o)| o.iter().cloned())
            .collect();
        let policy = req
            .modules
            .iter()
            .find(|m| &m.name == name)
            .and_then(|m| m.custom_resource_policy)
            .unwrap_or_default();
        let (candidate, config, _) = &leaving_deps[name];
        let version = inventory.modules[name].version.clone();
        let result = match candidate {
            Some(candidate) => {
                let run = ModuleRun {
                    target,
                    wasm,
                    set: &req.set,
                    module: name,
                    candidate,
                    config: config.clone(),
                    adopt: false,
                };
                run.delete(&mut inventory, &keep, policy).await?
            }
            None => {
                let owner = Owner {
                    set: &req.set,
                    module: name,
                };
                prune_inventory(target, owner, &mut inventory, &keep, policy).await?
            }
        };
        if result.state == State::Ready {
            objects_of.remove(name);
            out.notices.push(Notice::Removed {
                module: name.clone(),
            });
            continue;
        }
        out.requeue = shortest(out.requeue, result.requeue.or(Some(Duration::from_secs(5))));
        let mut r = report(
            name,
            if result.state == State::Error {
                State::Error
            } else {
                State::Deleting
            },
            result.message.unwrap_or_default(),
        );
        r.version = Some(version);
        r.objects = result.objects as u32;
        reports.insert(name.clone(), r);
    }

    if req.deleting && inventory.modules.is_empty() {
        Inventory::delete(target, &req.set).await?;
        out.deleted = true;
    } else {
        inventory.flush(target).await?;
    }
    // Status lists modules in the set's order, then those still being removed.
    let mut modules = Vec::new();
    for spec in req.modules {
        if let Some(r) = reports.remove(&spec.name) {
            modules.push(r);
        }
    }
    modules.extend(reports.into_values());
    out.state = Some(aggregate(modules.iter().map(|m| m.state), req.deleting));
    out.modules = modules;
    Ok(out)
}

/// Compare what a shadow version would apply with what the current version applied.
fn compare_shadow(
    shadow: &Candidate,
    current: &[Value],
    rendered: Result<Vec<Value>, String>,
) -> ModuleShadow {
    let by_key = |objects: &[Value]| -> Value {
        let map: serde_json::Map<String, Value> = objects
            .iter()
            .map(|o| {
                let key = ObjectKey::of(o).map(|k| k.to_string()).unwrap_or_default();
                (key, o.clone())
            })
            .collect();
        Value::Object(map)
    };
    let (result, diff) = match rendered {
        Err(error) => ("Failed", vec![error]),
        Ok(objects) => {
            let diff = crate::plugins::shadow::diff(&by_key(current), &by_key(&objects));
            (if diff.is_empty() { "Same" } else { "Differs" }, diff)
        }
    };
    ModuleShadow {
        version: shadow.version.clone(),
        digest: shadow.digest.clone(),
        result: result.to_string(),
        diff,
    }
}

fn shortest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Modules in an order where dependencies come first, and the modules that are in (or
/// depend on) a cycle.
fn topological(deps: &BTreeMap<String, Vec<String>>) -> (Vec<String>, HashSet<String>) {
    let mut done: Vec<String> = Vec::new();
    let mut left: Vec<&String> = deps.keys().collect();
    while !left.is_empty() {
        let before = left.len();
        left.retain(|name| {
            let ready = deps[*name]
                .iter()
                .all(|d| !deps.contains_key(d) || done.contains(d));
            if ready {
                done.push((*name).clone());
            }
            !ready
        });
        if left.len() == before {
            let cyclic: HashSet<String> = left.iter().map(|s| (*s).clone()).collect();
            done.extend(left.iter().map(|s| (*s).clone()));
            return (done, cyclic);
        }
    }
    (done, HashSet::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregation_follows_klm() {
        use State::*;
        assert_eq!(aggregate([Ready, Processing, Warning], false), Warning);
        assert_eq!(aggregate([Ready, Error, Warning], false), Error);
        assert_eq!(aggregate([Ready, Deleting], false), Processing);
        assert_eq!(aggregate([Ready, Ready], false), Ready);
        assert_eq!(aggregate([], false), Ready);
        assert_eq!(aggregate([Ready], true), Deleting);
    }

    #[test]
    fn config_merges_over_plugin_defaults() {
        let defaults = serde_json::json!({"manifest": "x", "values": {"a": 1, "b": 2}});
        let config = serde_json::json!({"values": {"b": 3}});
        let locked = ["manifest".to_string()];
        assert_eq!(
            merge_config(Some(&defaults), Some(&config), &locked),
            Ok(serde_json::json!({"manifest": "x", "values": {"a": 1, "b": 3}}))
        );
        assert_eq!(merge_config(None, None, &[]), Ok(serde_json::json!({})));
        // A locked key the Plugin sets cannot be replaced by the set, nor nested below.
        let replace = serde_json::json!({"manifest": "kind: ClusterRoleBinding"});
        let err = merge_config(Some(&defaults), Some(&replace), &locked).unwrap_err();
        assert!(err.starts_with("config.manifest"), "{err}");
        let nested = ["values.a".to_string()];
        let over = serde_json::json!({"values": {"a": 9}});
        assert!(merge_config(Some(&defaults), Some(&over), &nested).is_err());
        // Without a Plugin value (the CLI), the set provides it.
        assert!(merge_config(None, Some(&replace), &locked).is_ok());
    }

    #[test]
    fn dependencies_first_and_cycles_found() {
        let deps = |pairs: &[(&str, &[&str])]| -> BTreeMap<String, Vec<String>> {
            pairs
                .iter()
                .map(|(n, d)| (n.to_string(), d.iter().map(|s| s.to_string()).collect()))
                .collect()
        };
        let (order, cyclic) = topological(&deps(&[("a", &["c"]), ("b", &[]), ("c", &["b"])]));
        assert_eq!(order, ["b", "c", "a"]);
        assert!(cyclic.is_empty());
        let (_, cyclic) = topological(&deps(&[("a", &["b"]), ("b", &["a"]), ("c", &[])]));
        assert_eq!(cyclic, HashSet::from(["a".to_string(), "b".to_string()]));
    }

    #[test]
    fn versions_compare_as_semver() {
        assert!(newer("1.10.0", "1.9.0"));
        assert!(!newer("1.0.0", "1.0.0"));
        assert!(!newer("x", "1.0.0"));
    }
}
