//! One module's pass on one target: converse with the plugin (`conversation.rs`),
//! check its answer against the write grant (`check.rs`), plan and write it without
//! taking over what others own (`apply.rs`), let go of what it no longer wants
//! (`release.rs`), judge readiness. Deletion runs the plugin's `delete` the same way,
//! then removes what the module created.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::Value;

use super::apply::{self, Applied, Applier};
use super::conversation::{Delete, Reconcile};
use super::error::ModuleError;
use super::inventory::{Entry, Inventory, ModuleRecord, ObjectKey};
use super::observe::Reads;
use super::ownership::{Whose, whose};
use super::readiness::not_ready;
use super::release::{self, Last};
use super::run::ModuleRun;
use super::sharing;
use super::target::Target;
use super::types::{Change, Owner};
use crate::crd::moduleset::State;
use crate::grants::{Access, ObjectRef, Scope};
use crate::wasm::module::selector_from_wit as from_wit;
use crate::wasm::module_api as api;

/// Look again this soon while objects roll out.
const ROLLOUT_REQUEUE: Duration = Duration::from_secs(5);

/// The shortest requeue a plugin may ask for: a plugin answering 0 s would otherwise spin
/// its ModuleSet in a hot loop.
pub(crate) const MIN_PLUGIN_REQUEUE: Duration = Duration::from_secs(5);

/// A plugin's requested requeue, raised to [`MIN_PLUGIN_REQUEUE`].
pub(crate) fn plugin_requeue(seconds: Option<u32>) -> Option<Duration> {
    seconds.map(|s| Duration::from_secs(s.into()).max(MIN_PLUGIN_REQUEUE))
}

pub(crate) use crate::crd::moduleset::CustomResourcePolicy;

/// The result of reconciling one module.
#[derive(Debug, Clone)]
pub(crate) struct Reconciled {
    pub(crate) state: State,
    pub(crate) message: Option<String>,
    pub(crate) objects: usize,
    pub(crate) requeue: Option<Duration>,
    /// Objects applied in this pass (for drift watches).
    pub(crate) applied: Vec<Applied>,
    /// What the plugin asked for, as it returned it (for shadow comparisons).
    pub(crate) desired: Vec<Value>,
    /// What the plugin read (a shadow version is given the same).
    pub(crate) observed: Vec<api::ObservedObjects>,
    /// Custom resources others made that hold up the module's removal.
    pub(crate) blocked_by: Vec<String>,
}

impl Reconciled {
    fn settled(state: State, message: Option<String>, objects: usize) -> Self {
        Self {
            state,
            message,
            objects,
            requeue: (state == State::Deleting).then_some(Duration::from_secs(2)),
            applied: Vec::new(),
            desired: Vec::new(),
            observed: Vec::new(),
            blocked_by: Vec::new(),
        }
    }
}

pub(crate) fn state_of(s: api::ModuleState) -> State {
    match s {
        api::ModuleState::Ready => State::Ready,
        api::ModuleState::Processing => State::Processing,
        api::ModuleState::Warning => State::Warning,
        api::ModuleState::Error => State::Error,
        api::ModuleState::Deleting => State::Deleting,
    }
}

/// A module's preview: the plugin's state and message, and each object's change.
pub(crate) type Previewed = (State, Option<String>, Vec<(ObjectKey, Change)>);

impl ModuleRun<'_> {
    fn error(&self, message: impl Into<String>) -> Reconciled {
        Reconciled::settled(State::Error, Some(message.into()), 0)
    }

    /// What reconciling would do, writing nothing: the plugin's answer (requirements read
    /// live), each object dry-run applied by the API server, and what would be pruned
    /// (objects of `record` no longer wanted and not in `keep`): `tessera modules apply
    /// --dry-run`.
    pub(crate) async fn preview(
        &self,
        record: &ModuleRecord,
        keep: &HashSet<ObjectKey>,
    ) -> Result<Result<Previewed, String>, ModuleError> {
        let out = match self.capture().await? {
            Ok((_, out)) => out,
            Err(message) => return Ok(Err(message)),
        };
        let (prepared, _) = match self.check_answer(&out.desired).await? {
            Ok(checked) => checked,
            Err(message) => return Ok(Err(message)),
        };
        let applier = Applier {
            owner: self.owner(),
            adopt: self.adopt,
        };
        let crds = apply::batch_crds(&prepared);
        let mut changes = Vec::with_capacity(prepared.len());
        for (key, object) in &prepared {
            let change = apply::dry_run(self.target, applier, key, object, &crds).await?;
            changes.push((key.clone(), change));
        }
        let wanted: HashSet<&ObjectKey> = prepared.iter().map(|(k, _)| k).collect();
        changes.extend(
            record
                .keys()
                .filter(|k| !wanted.contains(k) && !keep.contains(*k))
                .map(|k| (k.clone(), Change::Prune)),
        );
        Ok(Ok((state_of(out.state), out.message, changes)))
    }

    /// What the plugin would apply, without applying anything (shadow versions), given
    /// what the current version read.
    pub(crate) async fn render(
        &self,
        recorded: &[api::ObservedObjects],
    ) -> Result<Result<Vec<Value>, String>, ModuleError> {
        let out = match self.converse(Reconcile, &Reads::Recorded(recorded)).await? {
            Ok((out, _)) => out,
            Err(message) => return Ok(Err(message)),
        };
        Ok(self.check_answer(&out.desired).await?.map(|(_, v)| v))
    }

    fn record(&self, objects: Vec<Entry>) -> ModuleRecord {
        ModuleRecord {
            version: self.candidate.version.clone(),
            digest: self.candidate.digest.clone(),
            objects,
        }
    }

    /// Reconcile the module: apply, prune, judge readiness.
    #[tracing::instrument(
        name = "module",
        skip_all,
        fields(set = %self.set, module = %self.module, version = %self.candidate.version)
    )]
    pub(crate) async fn reconcile(
        &self,
        inventory: &mut Inventory,
        keep: &HashSet<ObjectKey>,
    ) -> Result<Reconciled, ModuleError> {
        let (out, observed) = match self.converse(Reconcile, &self.live_reads()).await? {
            Ok(answered) => answered,
            Err(message) => return Ok(self.error(message)),
        };
        let (prepared, desired) = match self.check_answer(&out.desired).await? {
            Ok(checked) => checked,
            Err(message) => return Ok(self.error(message)),
        };
        let objects = prepared.len();
        match self.install(inventory, keep, prepared).await? {
            Ok(applied) => Ok(judge(out, objects, applied, desired, observed)),
            Err(message) => Ok(self.error(message)),
        }
    }

    /// Plan, record, apply and prune a checked answer; `Err(message)` when an object is
    /// refused (nothing of the answer is applied when the plan refuses it).
    async fn install(
        &self,
        inventory: &mut Inventory,
        keep: &HashSet<ObjectKey>,
        prepared: Vec<(ObjectKey, Value)>,
    ) -> Result<Result<Vec<Applied>, String>, ModuleError> {
        let recorded = inventory.modules.get(self.module).cloned();
        let previous = recorded.clone().unwrap_or_default();
        let applier = Applier {
            owner: self.owner(),
            adopt: self.adopt,
        };
        let new_keys: Vec<ObjectKey> = prepared.iter().map(|(k, _)| k.clone()).collect();
        // Listed before they exist: a crash while applying leaves nothing unlisted. Written
        // while the objects are looked up; a refused answer takes the listing back.
        let listed = self.record(listed_with(&previous, &new_keys));
        inventory.stage(self.module, Some(listed));
        let (plans, saved) = futures::join!(
            apply::plan(self.target, applier, &prepared, &previous),
            inventory.flush(self.target)
        );
        saved?;
        let plans = match plans.map_err(refused_by_target) {
            Ok(Ok(plans)) => plans,
            Err(Err(e)) => return Err(e),
            Err(Ok(why)) | Ok(Err(why)) => {
                inventory.save(self.target, self.module, recorded).await?;
                let plugin = self.plugin();
                return Ok(Err(format!(
                    "{plugin}: {why}; nothing of this answer was applied"
                )));
            }
        };
        let applied = match apply::apply(self.target, applier, prepared, plans).await {
            Ok(applied) => applied,
            Err(e) => {
                return refused_by_target(e).map(|why| Err(format!("{}: {why}", self.plugin())));
            }
        };
        let gone: Vec<Entry> = previous
            .objects
            .into_iter()
            .filter(|e| !new_keys.contains(&e.key))
            .collect();
        if let Err(e) =
            release::prune(self.target, self.owner(), &gone, keep, &|_| Last::Delete).await
        {
            return refused_by_target(e).map(|why| Err(format!("{}: {why}", self.plugin())));
        }
        let entries = applied
            .iter()
            .map(|a| Entry {
                key: a.key.clone(),
                uid: a.uid(),
            })
            .collect();
        inventory.stage(self.module, Some(self.record(entries)));
        Ok(Ok(applied))
    }

    /// Check a delete answer's `remove` selectors against the write grant, then delete
    /// what they reach of this module's own objects; `Err(message)` when one is refused.
    async fn remove(
        &self,
        selectors: &[api::ObjectSelector],
        record: &ModuleRecord,
    ) -> Result<Result<(), String>, ModuleError> {
        let mut reached = Vec::new();
        for wanted in selectors {
            let selector = from_wit(wanted);
            let Some(kind) = self
                .target
                .kind(&selector.api_version, &selector.kind)
                .await?
            else {
                continue;
            };
            let scope = match (kind.namespaced, selector.namespace.as_deref()) {
                (false, _) => Scope::Cluster,
                (true, Some(ns)) => Scope::Namespace(ns),
                (true, None) => Scope::AllNamespaces,
            };
            let object = ObjectRef {
                group: selector.api_version.split_once('/').map_or("", |(g, _)| g),
                kind: &selector.kind,
                scope,
                name: selector.name.as_deref(),
            };
            if let Err(refusal) = self.candidate.grants.allows(Access::Write, &object) {
                return Ok(Err(format!(
                    "{}: remove: {refusal}; nothing was removed",
                    self.plugin()
                )));
            }
            reached.push((selector, kind));
        }
        for (selector, kind) in reached {
            let api = self.target.api(&kind, selector.namespace.as_deref());
            let objects = match (&selector.name, &selector.label_selector) {
                (Some(name), _) => api.get_opt(name).await?.into_iter().collect(),
                (None, labels) => {
                    let mut params = kube::api::ListParams::default();
                    if let Some(labels) = labels {
                        params = params.labels(labels);
                    }
                    api.list(&params).await?.items
                }
            };
            release::remove_own(self.target, self.owner(), record, &kind, objects).await?;
        }
        Ok(Ok(()))
    }

    /// Uninstall: the plugin's delete answer, then the inventory. `Ready` means gone.
    #[tracing::instrument(
        name = "module_delete",
        skip_all,
        fields(set = %self.set, module = %self.module, version = %self.candidate.version)
    )]
    pub(crate) async fn delete(
        &self,
        inventory: &mut Inventory,
        keep: &HashSet<ObjectKey>,
        policy: CustomResourcePolicy,
    ) -> Result<Reconciled, ModuleError> {
        let out = match self.converse(Delete, &self.live_reads()).await? {
            Ok((out, _)) => out,
            Err(message) => return Ok(self.error(message)),
        };
        let record = inventory
            .modules
            .get(self.module)
            .cloned()
            .unwrap_or_default();
        if let Err(message) = self.remove(&out.remove, &record).await? {
            return Ok(self.error(message));
        }
        if state_of(out.state) == State::Deleting {
            let mut waiting = Reconciled::settled(State::Deleting, out.message, 0);
            waiting.requeue = Some(ROLLOUT_REQUEUE);
            return Ok(waiting);
        }
        prune_inventory(self.target, self.owner(), inventory, keep, policy).await
    }
}

/// The module's state from the plugin's answer and the applied objects' readiness.
fn judge(
    out: api::ReconcileOutput,
    objects: usize,
    applied: Vec<Applied>,
    desired: Vec<Value>,
    observed: Vec<api::ObservedObjects>,
) -> Reconciled {
    let mut state = state_of(out.state);
    let mut message = out.message;
    let mut requeue = plugin_requeue(out.requeue_after_seconds);
    if state == State::Ready
        && let Some(reason) = applied.iter().find_map(|a| not_ready(&a.object))
    {
        state = State::Processing;
        message = Some(reason);
        requeue = Some(requeue.map_or(ROLLOUT_REQUEUE, |r| r.min(ROLLOUT_REQUEUE)));
    }
    Reconciled {
        state,
        message,
        objects,
        requeue,
        applied,
        desired,
        observed,
        blocked_by: Vec::new(),
    }
}

/// How many blocking objects a message and the status name.
const BLOCKERS_SHOWN: usize = 5;

/// The first few of `objects`, and how many more there are.
fn some_of(objects: &[String]) -> String {
    let shown = objects[..objects.len().min(BLOCKERS_SHOWN)].join(", ");
    match objects.len().saturating_sub(BLOCKERS_SHOWN) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// The module's own CRDs among `record`'s, as they are on the target, that removing it
/// deletes (no other module shares them).
async fn own_crds(
    target: &Target,
    owner: Owner<'_>,
    record: &ModuleRecord,
) -> Result<Vec<Value>, ModuleError> {
    let mut crds = Vec::new();
    for entry in record.objects.iter().filter(|e| e.key.is_crd()) {
        let key = &entry.key;
        if let Some(kind) = target.kind(&key.api_version, &key.kind).await?
            && let Some(crd) = target.api(&kind, None).get_opt(&key.name).await?
        {
            let crd = serde_json::to_value(crd).expect("a CRD serializes");
            if whose(&crd, owner, entry.uid.as_deref()) == Whose::Ours
                && sharing::wanting(target, key, &crd, owner).await?.is_empty()
            {
                crds.push(crd);
            }
        }
    }
    Ok(crds)
}

/// Remove what the inventory lists for `owner.module` and the module created (also used
/// when its plugin is gone).
pub(crate) async fn prune_inventory(
    target: &Target,
    owner: Owner<'_>,
    inventory: &mut Inventory,
    keep: &HashSet<ObjectKey>,
    policy: CustomResourcePolicy,
) -> Result<Reconciled, ModuleError> {
    let record = inventory
        .modules
        .get(owner.module)
        .cloned()
        .unwrap_or_default();
    // CRDs go only when their custom resources were checked this pass; a shared CRD is
    // handed over (or left) instead.
    let mut checked = HashSet::new();
    match policy {
        CustomResourcePolicy::Ignore => {}
        CustomResourcePolicy::CreateAndDelete => {
            let crds = own_crds(target, owner, &record).await?;
            checked.extend(crds.iter().filter_map(ObjectKey::of));
            let foreign = release::foreign_custom_resources(target, owner, &record, &crds).await?;
            if !foreign.is_empty() {
                let message = format!(
                    "waiting: {} custom resources of the module's CRDs were not created by it ({}); delete them, or set customResourcePolicy: Ignore to keep the CRDs",
                    foreign.len(),
                    some_of(&foreign)
                );
                let mut waiting =
                    Reconciled::settled(State::Deleting, Some(message), record.objects.len());
                waiting.blocked_by = foreign.into_iter().take(BLOCKERS_SHOWN).collect();
                return Ok(waiting);
            }
        }
    }
    let last = |key: &ObjectKey| match (key.is_crd(), policy) {
        (false, _) => Last::Delete,
        (true, CustomResourcePolicy::Ignore) => Last::Keep,
        (true, CustomResourcePolicy::CreateAndDelete) if checked.contains(key) => Last::Delete,
        (true, CustomResourcePolicy::CreateAndDelete) => Last::NextPass,
    };
    let remaining = release::prune(target, owner, &record.objects, keep, &last).await?;
    if let Some(first) = remaining.first() {
        let message = format!(
            "waiting for {} objects to go, e.g. {first}",
            remaining.len()
        );
        return Ok(Reconciled::settled(
            State::Deleting,
            Some(message),
            remaining.len(),
        ));
    }
    inventory.save(target, owner.module, None).await?;
    Ok(Reconciled::settled(State::Ready, None, 0))
}

/// `previous`'s objects and `keys` not among them yet (uid unknown until applied).
fn listed_with(previous: &ModuleRecord, keys: &[ObjectKey]) -> Vec<Entry> {
    let mut union = previous.objects.clone();
    union.extend(keys.iter().filter(|k| !previous.lists(k)).map(|k| Entry {
        key: k.clone(),
        uid: None,
    }));
    union
}

/// A removal the target refused (a 403 through a least-privilege kubeconfig, a refused
/// object) is an error of that module, retried like any pending removal; anything else
/// stays an error of the pass. `objects`: what the inventory still lists of it.
pub(crate) fn removal_refused(
    e: ModuleError,
    module: &str,
    objects: usize,
) -> Result<Reconciled, ModuleError> {
    refused_by_target(e).map(|why| {
        let message = format!("removing {module}: {why}");
        Reconciled::settled(State::Error, Some(message), objects)
    })
}

/// A refused object (by the host's checks, or by a target lacking the right: 403 through a
/// least-privilege kubeconfig, say) fails that module, not the whole pass: `Ok(message)`;
/// anything else stays an error of the pass.
fn refused_by_target(e: ModuleError) -> Result<String, ModuleError> {
    match e {
        ModuleError::Object { object, message } => Ok(format!("{object}: {message}")),
        ModuleError::Kube(kube::Error::Api(status)) if status.code == 403 => Ok(format!(
            "the target refused it (its kubeconfig lacks the right): {}",
            status.message
        )),
        other => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_refusing_an_object_fails_the_module_and_an_outage_the_pass() {
        let status = |code: u16| {
            ModuleError::Kube(kube::Error::Api(
                kube::core::Status::failure("nope", "Forbidden")
                    .with_code(code)
                    .boxed(),
            ))
        };
        assert!(
            refused_by_target(status(403))
                .unwrap()
                .contains("lacks the right")
        );
        assert!(refused_by_target(status(500)).is_err());
        let removal = removal_refused(status(403), "availability", 2).unwrap();
        assert_eq!((removal.state, removal.objects), (State::Error, 2));
        assert!(
            removal
                .message
                .unwrap()
                .starts_with("removing availability: the target refused it")
        );
        assert!(removal_refused(status(503), "availability", 2).is_err());
        let object = ModuleError::object("ConfigMap a/b", "not granted");
        assert_eq!(
            refused_by_target(object).unwrap(),
            "ConfigMap a/b: not granted"
        );
    }

    #[test]
    fn a_plugin_requeue_of_zero_is_raised_to_the_floor() {
        assert_eq!(plugin_requeue(Some(0)), Some(MIN_PLUGIN_REQUEUE));
        assert_eq!(plugin_requeue(Some(1)), Some(MIN_PLUGIN_REQUEUE));
        assert_eq!(plugin_requeue(Some(60)), Some(Duration::from_secs(60)));
        assert_eq!(plugin_requeue(None), None);
    }
}
