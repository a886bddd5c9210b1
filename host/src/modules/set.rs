//! A whole set of modules on one target, one pass: resolve each module's plugin version
//! (refusing downgrades), order by dependencies, reconcile in that order, uninstall what
//! left the set dependents first, aggregate the states. `plan.rs` decides (from the spec,
//! the inventory and the catalog's answers); this file carries the decisions out, phase by
//! phase, against the target.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use super::apply::Applied;
use super::engine::{Reconciled, prune_inventory, removal_refused};
use super::error::ModuleError;
use super::inventory::{Inventory, ObjectKey};
use super::run::ModuleRun;
use super::source::{Candidate, ModuleSource};
use super::target::Target;
use super::types::Owner;
use super::windows::Maintenance;
use crate::crd::moduleset::ModuleSpec;
use crate::wasm::WasmRuntime;

mod config;
mod order;
mod plan;
mod preview;

pub(crate) use config::merge_config;
use order::{together, waves};

pub use super::types::Change;
use plan::{Gate, Offer, Offers, Plan, Ran, Removal, Run};
pub(crate) use plan::{with_mandatory, woken_by};
pub use preview::{ModulePreview, ObjectPreview, preview_set};

/// The channel when neither the module nor the set names one.
pub(crate) const DEFAULT_CHANNEL: &str = "regular";

use crate::crd::ShadowOutcome;
pub use crate::crd::moduleset::{ModuleReport, ModuleShadow, State};

/// Error > Warning > Processing > Ready (a module still being removed counts as
/// Processing unless the whole set is being deleted).
pub(crate) fn aggregate(states: impl IntoIterator<Item = State>, deleting: bool) -> State {
    if deleting {
        return State::Deleting;
    }
    states
        .into_iter()
        .map(|s| match s {
            State::Deleting => State::Processing,
            State::Unmanaged => State::Ready,
            s => s,
        })
        .max_by_key(|s| s.weight())
        .unwrap_or(State::Ready)
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
    /// The set's labels, which restricted modules' selectors match.
    pub labels: &'a BTreeMap<String, String>,
    /// Whether upgrades that need downtime may run now.
    pub maintenance: Maintenance,
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
    pub(crate) applied: Vec<Applied>,
    /// Deleting and nothing is left on the target.
    pub deleted: bool,
    pub notices: Vec<Notice>,
}

impl Offer for Candidate {
    fn version(&self) -> &str {
        &self.version
    }

    fn allows_downgrade(&self) -> bool {
        self.allow_downgrade
    }

    fn defaults(&self) -> Option<&Value> {
        self.defaults.as_ref()
    }

    fn locked_config(&self) -> &[String] {
        &self.locked_config
    }

    fn module_set_selector(&self) -> Option<&LabelSelector> {
        self.module_set_selector.as_ref()
    }

    fn requires_downtime(&self) -> bool {
        self.requires_downtime
    }
}

/// The catalog behind a [`ModuleSource`], as the plan asks it.
struct Catalog<'a>(&'a dyn ModuleSource);

impl Offers for Catalog<'_> {
    type Offer = Candidate;

    fn resolve(&self, module: &str, channel: &str) -> Result<Candidate, String> {
        self.0.resolve(module, channel)
    }

    fn version(&self, module: &str, version: &str) -> Option<Candidate> {
        self.0.version(module, version)
    }
}

/// A module that runs in this pass, with the modules its plugin says it requires.
struct Planned {
    run: Run<Candidate>,
    deps: Vec<String>,
}

/// How a module that left the set is removed: by the plugin version that installed it (or
/// the channel's), with the configuration it ran with; `None` when its plugin is gone, so
/// the inventory alone says what to remove.
struct Leaving {
    candidate: Option<Candidate>,
    config: String,
    deps: Vec<String>,
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

/// Reconcile `req` on `target` once: plan from the spec, the inventory and the catalog; ask
/// each planned module's plugin what it requires; install in dependency order; remove what
/// left the set, dependents first; report.
pub async fn reconcile_set(
    target: &Target,
    wasm: &Arc<WasmRuntime>,
    source: &dyn ModuleSource,
    req: &SetRequest<'_>,
) -> Result<SetOutcome, ModuleError> {
    let mut inventory = Inventory::load(target, &req.set).await?;
    let Plan {
        run,
        unmanaged,
        reports,
        notices,
    } = plan::plan(&Catalog(source), req, &installed(&inventory));
    // Unmanaged: left as installed, without Tessera's labels, no longer tracked.
    for name in &unmanaged {
        if let Some(record) = inventory.modules.get(name) {
            let owner = Owner {
                set: &req.set,
                module: name,
            };
            super::release::release(target, owner, &record.objects).await?;
            inventory.save(target, name, None).await?;
        }
    }
    let mut pass = Pass::new(target, wasm, req, inventory, reports, notices);
    if run.values().any(|r| r.pending.is_some()) {
        let opens_in = req.maintenance.opens_in(jiff::Timestamp::now());
        pass.out.requeue = shortest(pass.out.requeue, Some(opens_in.max(Duration::from_secs(1))));
    }
    let planned = pass.with_dependencies(run).await;
    pass.install(&planned).await?;
    pass.uninstall(source, &planned).await?;
    pass.finish().await
}

/// Each installed module's version, as the plan compares it.
fn installed(inventory: &Inventory) -> BTreeMap<String, String> {
    inventory
        .modules
        .iter()
        .map(|(module, record)| (module.clone(), record.version.clone()))
        .collect()
}

/// What one module's plugin is given and answers right now.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub input: tessera_sdk::module::RawModuleInput,
    pub output: tessera_sdk::module::RawReconcileOutput,
}

/// Module `module` of `req` as its plugin sees it now: its version and configuration as a
/// pass would plan them, the objects its requirements read live (through its read grant),
/// and its answer. Nothing is applied and the inventory is not written. `Err(message)` when
/// the module does not run in this pass or its plugin fails.
pub async fn record_module(
    target: &Target,
    wasm: &Arc<WasmRuntime>,
    source: &dyn ModuleSource,
    req: &SetRequest<'_>,
    module: &str,
) -> Result<Result<Recorded, String>, ModuleError> {
    let inventory = Inventory::load(target, &req.set).await?;
    let plan = plan::plan(&Catalog(source), req, &installed(&inventory));
    let Some(run) = plan.run.get(module) else {
        let why = plan.reports.get(module).and_then(|r| r.message.clone());
        return Ok(Err(why.unwrap_or_else(|| {
            format!("{module} is not a module of the set")
        })));
    };
    let run = ModuleRun {
        target,
        wasm,
        set: &req.set,
        module,
        candidate: &run.candidate,
        config: run.config.clone(),
        adopt: run.adopt,
    };
    Ok(run.capture().await?.map(|(input, output)| Recorded {
        input: crate::wasm::module::input_from_wit(&input),
        output: crate::wasm::module::reconcile_output_from_wit(output),
    }))
}

/// One pass in progress: the inventory as it changes and what is reported so far.
struct Pass<'a> {
    target: &'a Target,
    wasm: &'a Arc<WasmRuntime>,
    req: &'a SetRequest<'a>,
    inventory: Inventory,
    reports: BTreeMap<String, ModuleReport>,
    out: SetOutcome,
    /// The objects each module holds, so that no module prunes another's.
    objects_of: HashMap<String, HashSet<ObjectKey>>,
}

impl<'a> Pass<'a> {
    fn new(
        target: &'a Target,
        wasm: &'a Arc<WasmRuntime>,
        req: &'a SetRequest<'a>,
        inventory: Inventory,
        reports: BTreeMap<String, ModuleReport>,
        notices: Vec<Notice>,
    ) -> Self {
        let objects_of = inventory
            .modules
            .iter()
            .map(|(m, r)| (m.clone(), r.keys().cloned().collect()))
            .collect();
        Self {
            target,
            wasm,
            req,
            inventory,
            reports,
            out: SetOutcome {
                notices,
                ..SetOutcome::default()
            },
            objects_of,
        }
    }

    /// The planned modules with what each requires; a plugin that cannot say reports Error.
    async fn with_dependencies(
        &mut self,
        run: BTreeMap<String, Run<Candidate>>,
    ) -> BTreeMap<String, Planned> {
        let mut planned = BTreeMap::new();
        for (name, run) in run {
            match dependencies(self.wasm, &run.candidate, &run.config).await {
                Ok(deps) => {
                    planned.insert(name, Planned { run, deps });
                }
                Err(message) => {
                    let report = plan::report(&name, State::Error, message);
                    self.reports.insert(name, report);
                }
            }
        }
        planned
    }

    /// Run the planned modules, dependencies first, independent ones at once; a module
    /// whose dependencies are missing, cyclic or not Ready yet waits.
    async fn install(&mut self, planned: &BTreeMap<String, Planned>) -> Result<(), ModuleError> {
        let req = self.req;
        let in_set: HashSet<&str> = req.modules.iter().map(|m| m.name.as_str()).collect();
        let (waves, cyclic) = waves(&requirements(planned));
        for wave in waves {
            let mut open = Vec::new();
            for name in wave {
                let plan = &planned[&name];
                let report = match plan::gate(&name, &plan.deps, &in_set, &cyclic, &self.reports) {
                    Gate::Open => {
                        open.push(name);
                        continue;
                    }
                    Gate::Refused(message) => versioned(&name, &plan.run, State::Error, message, 0),
                    Gate::Waiting(message) => {
                        let objects = self.installed_objects(&name);
                        versioned(&name, &plan.run, State::Processing, message, objects)
                    }
                };
                self.reports.insert(name, report);
            }
            let mut left: &[String] = &open;
            while !left.is_empty() {
                let (batch, permits) = together(left);
                self.run_wave(&left[..batch], planned).await?;
                drop(permits);
                left = &left[batch..];
            }
        }
        Ok(())
    }

    /// Run `names` at once, each on its own copy of the inventory (a module writes only its
    /// own record), then take their records back.
    async fn run_wave(
        &mut self,
        names: &[String],
        planned: &BTreeMap<String, Planned>,
    ) -> Result<(), ModuleError> {
        // What earlier modules staged goes out first, so that no copy writes it again.
        self.inventory.flush(self.target).await?;
        let this = &*self;
        // Collected first: a lazy `map` closure in the stream trips the compiler's
        // higher-ranked lifetime check on the controller's future.
        let mut runs = Vec::with_capacity(names.len());
        for name in names {
            let keep = this.held_by_others(name);
            let mut inventory = this.inventory.fork();
            runs.push(async move {
                let done = this
                    .reconcile_module(name, &planned[name].run, &mut inventory, &keep)
                    .await;
                (name, inventory, done)
            });
        }
        let finished: Vec<_> = futures::future::join_all(runs).await;
        let mut failed = None;
        for (name, inventory, done) in finished {
            let previous = self.inventory.modules.get(name).map(|r| r.version.clone());
            self.inventory.absorb(name, inventory);
            match done {
                Ok(done) => {
                    let report = self.conclude(name, &planned[name].run, previous, done);
                    self.reports.insert(name.clone(), report);
                }
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Reconcile one module on `inventory`, and render its shadow version next to it.
    async fn reconcile_module(
        &self,
        name: &str,
        plan: &Run<Candidate>,
        inventory: &mut Inventory,
        keep: &HashSet<ObjectKey>,
    ) -> Result<(Reconciled, Option<ModuleShadow>), ModuleError> {
        let run = ModuleRun {
            target: self.target,
            wasm: self.wasm,
            set: &self.req.set,
            module: name,
            candidate: &plan.candidate,
            config: plan.config.clone(),
            adopt: plan.adopt,
        };
        let done = run.reconcile(inventory, keep).await?;
        let shadow = match &plan.candidate.shadow {
            Some(shadow) if done.state != State::Error => {
                let run = ModuleRun {
                    candidate: shadow,
                    ..run
                };
                let rendered = run.render(&done.observed).await?;
                Some(compare_shadow(shadow, &done.desired, rendered))
            }
            _ => None,
        };
        Ok((done, shadow))
    }

    /// The report of a module that ran (installed at `previous` before), and what the pass
    /// takes from it: its objects, requeue, applied objects and notices.
    fn conclude(
        &mut self,
        name: &str,
        plan: &Run<Candidate>,
        previous: Option<String>,
        (done, shadow): (Reconciled, Option<ModuleShadow>),
    ) -> ModuleReport {
        if let Some(record) = self.inventory.modules.get(name) {
            self.objects_of
                .insert(name.to_string(), record.keys().cloned().collect());
        }
        self.out.requeue = shortest(self.out.requeue, done.requeue);
        self.out.applied.extend(done.applied);
        let ran = Ran {
            state: done.state,
            message: done.message,
            objects: done.objects,
        };
        let version = &plan.candidate.version;
        let installed = self.installed_objects(name);
        let held = plan.held.as_deref();
        let (ran, notice) = plan::settle(name, version, held, previous.as_deref(), ran, installed);
        self.out.notices.extend(notice);
        let mut report = versioned(name, plan, ran.state, ran.message, ran.objects);
        report.shadow = shadow;
        report
    }

    /// Remove the modules that left the set; one that another module still requires waits
    /// for it to go first.
    async fn uninstall(
        &mut self,
        source: &dyn ModuleSource,
        planned: &BTreeMap<String, Planned>,
    ) -> Result<(), ModuleError> {
        let mut leaving = BTreeMap::new();
        for name in plan::dropped(self.inventory.modules.keys(), self.req) {
            let how = self.leaving(source, &name).await;
            leaving.insert(name, how);
        }
        let leaving_deps: BTreeMap<String, Vec<String>> = leaving
            .iter()
            .map(|(name, how)| (name.clone(), how.deps.clone()))
            .collect();
        let staying = requirements(planned);
        for (name, how) in &leaving {
            let version = self.inventory.modules[name].version.clone();
            if let Some(dependent) = plan::needed_by(name, &leaving_deps, &staying) {
                let report = plan::waiting_for_dependent(name, &version, dependent);
                self.reports.insert(name.clone(), report);
                self.out.requeue = shortest(self.out.requeue, Some(plan::WAIT_FOR_DEPENDENT));
                continue;
            }
            self.remove(name, &version, how).await?;
        }
        Ok(())
    }

    /// How to remove `name`: the installed version's plugin, else the channel's, with the
    /// set's configuration (locks no longer matter), and what it requires.
    async fn leaving(&self, source: &dyn ModuleSource, name: &str) -> Leaving {
        let req = self.req;
        let installed = &self.inventory.modules[name].version;
        let spec = req.modules.iter().find(|m| m.name == name);
        let candidate = source.version(name, installed).or_else(|| {
            let channel = match spec {
                Some(spec) => plan::channel_of(spec, req.channel),
                None => req.channel.unwrap_or(DEFAULT_CHANNEL).to_string(),
            };
            source.resolve(name, &channel).ok()
        });
        let config = candidate
            .as_ref()
            .and_then(|c| {
                merge_config(
                    c.defaults.as_ref(),
                    spec.and_then(|s| s.config.as_ref()),
                    &[],
                )
                .ok()
            })
            .map_or_else(|| "{}".to_string(), |c| c.to_string());
        let deps = match &candidate {
            Some(c) => dependencies(self.wasm, c, &config)
                .await
                .unwrap_or_default(),
            None => Vec::new(),
        };
        Leaving {
            candidate,
            config,
            deps,
        }
    }

    /// One attempt at removing `name` (installed at `version`).
    async fn remove(
        &mut self,
        name: &str,
        version: &str,
        how: &Leaving,
    ) -> Result<(), ModuleError> {
        let keep = self.held_by_others(name);
        let req = self.req;
        let policy = req
            .modules
            .iter()
            .find(|m| m.name == name)
            .and_then(|m| m.custom_resource_policy)
            .unwrap_or_default();
        let done = match &how.candidate {
            Some(candidate) => {
                let run = ModuleRun {
                    target: self.target,
                    wasm: self.wasm,
                    set: &req.set,
                    module: name,
                    candidate,
                    config: how.config.clone(),
                    adopt: false,
                };
                run.delete(&mut self.inventory, &keep, policy).await
            }
            None => {
                let owner = Owner {
                    set: &req.set,
                    module: name,
                };
                prune_inventory(self.target, owner, &mut self.inventory, &keep, policy).await
            }
        };
        let objects = self.installed_objects(name);
        let done = done.or_else(|e| removal_refused(e, name, objects))?;
        let blocked_by = done.blocked_by;
        let ran = Ran {
            state: done.state,
            message: done.message,
            objects: done.objects,
        };
        match plan::removal(name, version, ran, done.requeue) {
            Removal::Gone => {
                self.objects_of.remove(name);
                let module = name.to_string();
                self.out.notices.push(Notice::Removed { module });
            }
            Removal::Pending(mut report, requeue) => {
                self.out.requeue = shortest(self.out.requeue, Some(requeue));
                report.blocked_by = blocked_by;
                self.reports.insert(name.to_string(), *report);
            }
        }
        Ok(())
    }

    /// Write the inventory (or delete it once a deleted set left nothing) and report.
    async fn finish(mut self) -> Result<SetOutcome, ModuleError> {
        if self.req.deleting && self.inventory.modules.is_empty() {
            Inventory::delete(self.target, &self.req.set).await?;
            self.out.deleted = true;
        } else {
            self.inventory.flush(self.target).await?;
        }
        let modules = plan::in_status_order(self.req.modules, self.reports);
        self.out.state = Some(aggregate(
            modules.iter().map(|m| m.state),
            self.req.deleting,
        ));
        self.out.modules = modules;
        Ok(self.out)
    }

    /// The objects other modules than `name` hold.
    fn held_by_others(&self, name: &str) -> HashSet<ObjectKey> {
        self.objects_of
            .iter()
            .filter(|(m, _)| *m != name)
            .flat_map(|(_, o)| o.iter().cloned())
            .collect()
    }

    /// How many objects the inventory lists for `name`.
    fn installed_objects(&self, name: &str) -> usize {
        self.inventory
            .modules
            .get(name)
            .map_or(0, |r| r.objects.len())
    }
}

/// Each planned module's requirements.
fn requirements(planned: &BTreeMap<String, Planned>) -> BTreeMap<String, Vec<String>> {
    planned
        .iter()
        .map(|(name, p)| (name.clone(), p.deps.clone()))
        .collect()
}

/// The report of a planned module: its channel and version, and how it ran.
fn versioned(
    name: &str,
    plan: &Run<Candidate>,
    state: State,
    message: impl Into<Option<String>>,
    objects: usize,
) -> ModuleReport {
    ModuleReport {
        name: name.to_string(),
        channel: Some(plan.channel.clone()),
        version: Some(plan.candidate.version.clone()),
        pinned: plan.pinned,
        mandatory: false,
        pending_upgrade: plan.pending.clone(),
        channel_version: plan.channel_version.clone(),
        digest: Some(plan.candidate.digest.clone()),
        state,
        message: message.into(),
        objects: objects as u32,
        blocked_by: Vec::new(),
        shadow: None,
    }
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
        Err(error) => (ShadowOutcome::Failed, vec![error]),
        Ok(objects) => {
            let diff = crate::plugins::shadow::diff(&by_key(current), &by_key(&objects));
            (ShadowOutcome::of(&diff), diff)
        }
    };
    ModuleShadow {
        version: shadow.version.clone(),
        digest: shadow.digest.clone(),
        result,
        diff,
    }
}

fn shortest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
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
        assert_eq!(aggregate([Unmanaged, Unmanaged], false), Ready);
        assert_eq!(aggregate([], false), Ready);
        assert_eq!(aggregate([Ready], true), Deleting);
    }
}
