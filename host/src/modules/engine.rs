//! One module on one target: call the plugin until it stops asking for objects (a bounded
//! number of rounds), apply what it wants, prune what it no longer wants, judge readiness.
//! Deletion runs the plugin's `delete` the same way, then removes the inventory.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tessera_sdk::Selector;

use super::apply::{self, Applied};
use super::error::ModuleError;
use super::inventory::{Inventory, ModuleRecord, ObjectKey};
use super::observe::observe;
use super::readiness::not_ready;
use super::set::State;
use super::source::Candidate;
use super::target::Target;
use crate::wasm::{CallError, WasmRuntime, module_api as api};

/// How many times a plugin may answer with requirements before its answer counts.
pub const MAX_ROUNDS: usize = 5;
/// Look again this soon while objects roll out.
const ROLLOUT_REQUEUE: Duration = Duration::from_secs(5);

/// What happens to the custom resources of a module's CRDs when it is removed.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub enum CustomResourcePolicy {
    /// Delete every custom resource of the module's CRDs, then the CRDs.
    #[default]
    CreateAndDelete,
    /// Leave the CRDs and their custom resources in place.
    Ignore,
}

/// One module to reconcile.
pub struct ModuleRun<'a> {
    pub target: &'a Target,
    pub wasm: &'a Arc<WasmRuntime>,
    /// `<namespace>/<name>` of the set.
    pub set: &'a str,
    pub module: &'a str,
    pub candidate: &'a Candidate,
    /// The module's configuration (the Plugin's defaults merged with the set's), JSON.
    pub config: String,
}

/// The result of reconciling one module.
#[derive(Debug, Clone)]
pub struct Reconciled {
    pub state: State,
    pub message: Option<String>,
    pub objects: usize,
    pub requeue: Option<Duration>,
    /// Objects applied in this pass (for drift watches).
    pub applied: Vec<Applied>,
    /// What the plugin asked for, as it returned it (for shadow comparisons).
    pub desired: Vec<Value>,
}

fn to_wit(s: &Selector) -> api::ObjectSelector {
    api::ObjectSelector {
        api_version: s.api_version.clone(),
        kind: s.kind.clone(),
        namespace: s.namespace.clone(),
        name: s.name.clone(),
        label_selector: s.label_selector.clone(),
    }
}

fn from_wit(s: &api::ObjectSelector) -> Selector {
    Selector {
        api_version: s.api_version.clone(),
        kind: s.kind.clone(),
        namespace: s.namespace.clone(),
        name: s.name.clone(),
        label_selector: s.label_selector.clone(),
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

enum Call {
    Reconcile,
    Delete,
}

enum Answer {
    Reconcile(api::ReconcileOutput),
    Delete(api::DeleteOutput),
}

impl Answer {
    fn requirements(&self) -> &[api::ObjectSelector] {
        match self {
            Answer::Reconcile(o) => &o.requirements,
            Answer::Delete(o) => &o.requirements,
        }
    }
}

impl ModuleRun<'_> {
    fn error(&self, message: impl Into<String>) -> Reconciled {
        Reconciled {
            state: State::Error,
            message: Some(message.into()),
            objects: 0,
            requeue: None,
            applied: Vec::new(),
            desired: Vec::new(),
        }
    }

    async fn call_once(
        &self,
        call: &Call,
        input: api::ReconcileInput,
    ) -> Result<Result<Answer, CallError>, ModuleError> {
        let plugin = self.candidate.plugin.clone();
        let wasm = self.wasm.clone();
        let limits = self.candidate.limits;
        let delete = matches!(call, Call::Delete);
        tokio::task::spawn_blocking(move || {
            if delete {
                plugin.delete(&wasm, &input, &limits).map(Answer::Delete)
            } else {
                plugin
                    .reconcile(&wasm, &input, &limits)
                    .map(Answer::Reconcile)
            }
        })
        .await
        .map_err(|e| ModuleError::Join(e.to_string()))
    }

    /// The requirements loop; `Err(message)` when the plugin failed or never settled.
    async fn converse(&self, call: Call) -> Result<Result<Answer, String>, ModuleError> {
        let mut observed: Vec<api::ObservedObjects> = Vec::new();
        for _ in 0..MAX_ROUNDS {
            let input = api::ReconcileInput {
                module: self.module.to_string(),
                version: self.candidate.version.clone(),
                config: self.config.clone(),
                cluster: api::ClusterFacts {
                    kubernetes_version: self.target.facts.kubernetes_version.clone(),
                    provider: self.target.facts.provider.clone(),
                    region: self.target.facts.region.clone(),
                },
                observed: observed.clone(),
            };
            let answer = match self.call_once(&call, input).await? {
                Ok(answer) => answer,
                Err(err) => return Ok(Err(err.to_string())),
            };
            if answer.requirements().is_empty() {
                return Ok(Ok(answer));
            }
            let mut asked_new = false;
            for wanted in answer.requirements() {
                let selector = from_wit(wanted);
                if observed.iter().any(|o| from_wit(&o.selector) == selector) {
                    continue;
                }
                asked_new = true;
                let objects = observe(self.target, &selector).await?;
                observed.push(api::ObservedObjects {
                    selector: to_wit(&selector),
                    objects,
                });
            }
            if !asked_new {
                return Ok(Err(format!(
                    "plugin {} asks again for objects it was given",
                    self.candidate.plugin.info.name
                )));
            }
        }
        Ok(Err(format!(
            "plugin {} still asks for more objects after {MAX_ROUNDS} rounds",
            self.candidate.plugin.info.name
        )))
    }

    /// What the plugin would apply, without applying anything (shadow versions).
    pub async fn render(&self) -> Result<Result<Vec<Value>, String>, ModuleError> {
        let out = match self.converse(Call::Reconcile).await? {
            Ok(Answer::Reconcile(out)) => out,
            Ok(Answer::Delete(_)) => {
                unreachable!("a reconcile call answers with a reconcile output")
            }
            Err(message) => return Ok(Err(message)),
        };
        let mut objects = Vec::with_capacity(out.desired.len());
        for (i, json) in out.desired.iter().enumerate() {
            match serde_json::from_str(json) {
                Ok(v) => objects.push(v),
                Err(e) => return Ok(Err(format!("desired[{i}] is not JSON: {e}"))),
            }
        }
        Ok(Ok(objects))
    }

    /// Reconcile the module: apply, prune, judge readiness.
    pub async fn reconcile(
        &self,
        inventory: &mut Inventory,
        keep: &HashSet<ObjectKey>,
    ) -> Result<Reconciled, ModuleError> {
        let out = match self.converse(Call::Reconcile).await? {
            Ok(Answer::Reconcile(out)) => out,
            Ok(Answer::Delete(_)) => {
                unreachable!("a reconcile call answers with a reconcile output")
            }
            Err(message) => return Ok(self.error(message)),
        };
        let mut prepared = Vec::with_capacity(out.desired.len());
        let mut desired = Vec::with_capacity(out.desired.len());
        let mut seen = HashSet::new();
        for (i, json) in out.desired.iter().enumerate() {
            let value: Value = match serde_json::from_str(json) {
                Ok(v) => v,
                Err(e) => return Ok(self.error(format!("desired[{i}] is not JSON: {e}"))),
            };
            desired.push(value.clone());
            let (mut key, object) = match apply::prepare(value, self.set, self.module) {
                Ok(p) => p,
                Err(e) => return Ok(self.error(e.to_string())),
            };
            if let Some(kind) = self.target.kind(&key.api_version, &key.kind).await?
                && !kind.namespaced
            {
                key.namespace = None;
            }
            if !seen.insert(key.clone()) {
                return Ok(self.error(format!("{key} is returned twice")));
            }
            prepared.push((key, object));
        }
        apply::order(&mut prepared);
        let new_keys: Vec<ObjectKey> = prepared.iter().map(|(k, _)| k.clone()).collect();
        let previous = inventory
            .modules
            .get(self.module)
            .cloned()
            .unwrap_or_default();
        let record = |objects: Vec<ObjectKey>| ModuleRecord {
            version: self.candidate.version.clone(),
            digest: self.candidate.digest.clone(),
            objects,
        };
        // Listed before they exist: a crash while applying leaves nothing unlisted.
        let mut union = previous.objects.clone();
        union.extend(
            new_keys
                .iter()
                .filter(|k| !previous.objects.contains(k))
                .cloned(),
        );
        inventory
            .save(self.target, self.module, Some(record(union)))
            .await?;
        let applied = match apply::apply(self.target, self.module, prepared).await {
            Ok(applied) => applied,
            Err(ModuleError::Object { object, message }) => {
                return Ok(self.error(format!("{object}: {message}")));
            }
            Err(e) => return Err(e),
        };
        let gone: Vec<ObjectKey> = previous
            .objects
            .iter()
            .filter(|k| !new_keys.contains(k))
            .cloned()
            .collect();
        apply::prune(self.target, &gone, keep).await?;
        inventory
            .save(self.target, self.module, Some(record(new_keys.clone())))
            .await?;
        let mut state = state_of(out.state);
        let mut message = out.message;
        let mut requeue = out
            .requeue_after_seconds
            .map(|s| Duration::from_secs(s.into()));
        if state == State::Ready
            && let Some(reason) = applied.iter().find_map(|a| not_ready(&a.object))
        {
            state = State::Processing;
            message = Some(reason);
            requeue = Some(requeue.map_or(ROLLOUT_REQUEUE, |r| r.min(ROLLOUT_REQUEUE)));
        }
        Ok(Reconciled {
            state,
            message,
            objects: new_keys.len(),
            requeue,
            applied,
            desired,
        })
    }

    /// Uninstall: the plugin's delete answer, then the inventory. `Ready` means gone.
    pub async fn delete(
        &self,
        inventory: &mut Inventory,
        keep: &HashSet<ObjectKey>,
        policy: CustomResourcePolicy,
    ) -> Result<Reconciled, ModuleError> {
        let out = match self.converse(Call::Delete).await? {
            Ok(Answer::Delete(out)) => out,
            Ok(Answer::Reconcile(_)) => unreachable!("a delete call answers with a delete output"),
            Err(message) => return Ok(self.error(message)),
        };
        for selector in &out.remove {
            let selector = from_wit(selector);
            if let Some(kind) = self
                .target
                .kind(&selector.api_version, &selector.kind)
                .await?
            {
                for json in observe(self.target, &selector).await? {
                    let object: Value = serde_json::from_str(&json).unwrap_or_default();
                    if let Some(key) = ObjectKey::of(&object) {
                        let api = self.target.api(&kind, key.namespace.as_deref());
                        match api.delete(&key.name, &Default::default()).await {
                            Ok(_) => {}
                            Err(kube::Error::Api(e)) if e.code == 404 => {}
                            Err(e) => return Err(e.into()),
                        }
                    }
                }
            }
        }
        if state_of(out.state) == State::Deleting {
            return Ok(Reconciled {
                state: State::Deleting,
                message: out.message,
                objects: 0,
                requeue: Some(ROLLOUT_REQUEUE),
                applied: Vec::new(),
                desired: Vec::new(),
            });
        }
        prune_inventory(self.target, self.module, inventory, keep, policy).await
    }
}

/// Remove what the inventory lists for `module` (also used when its plugin is gone).
pub async fn prune_inventory(
    target: &Target,
    module: &str,
    inventory: &mut Inventory,
    keep: &HashSet<ObjectKey>,
    policy: CustomResourcePolicy,
) -> Result<Reconciled, ModuleError> {
    let record = inventory.modules.get(module).cloned().unwrap_or_default();
    let mut objects = record.objects.clone();
    match policy {
        CustomResourcePolicy::Ignore => objects.retain(|k| !k.is_crd()),
        CustomResourcePolicy::CreateAndDelete => {
            let mut crds = Vec::new();
            for key in record.objects.iter().filter(|k| k.is_crd()) {
                if let Some(kind) = target.kind(&key.api_version, &key.kind).await?
                    && let Some(crd) = target.api(&kind, None).get_opt(&key.name).await?
                {
                    crds.push(serde_json::to_value(crd).expect("a CRD serializes"));
                }
            }
            let present = apply::delete_custom_resources(target, &crds).await?;
            if present > 0 {
                return Ok(Reconciled {
                    state: State::Deleting,
                    message: Some(format!("waiting for {present} custom resources to go")),
                    objects: record.objects.len(),
                    requeue: Some(Duration::from_secs(2)),
                    applied: Vec::new(),
                    desired: Vec::new(),
                });
            }
        }
    }
    let remaining = apply::prune(target, &objects, keep).await?;
    if let Some(first) = remaining.first() {
        return Ok(Reconciled {
            state: State::Deleting,
            message: Some(format!(
                "waiting for {} objects to go, e.g. {first}",
                remaining.len()
            )),
            objects: remaining.len(),
            requeue: Some(Duration::from_secs(2)),
            applied: Vec::new(),
            desired: Vec::new(),
        });
    }
    inventory.save(target, module, None).await?;
    Ok(Reconciled {
        state: State::Ready,
        message: None,
        objects: 0,
        requeue: None,
        applied: Vec::new(),
        desired: Vec::new(),
    })
}
