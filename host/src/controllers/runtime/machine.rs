//! The Runtime state machine: a loop over [`Step`]s sharing one working copy of the status,
//! written back once at the end and only when it changed.

use std::sync::Arc;
use std::time::Instant;

use kube::api::{Api, DynamicObject};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};

use super::states;
use crate::controllers::kit::{self, Controller, Note};
use crate::controllers::{Context, ReconcileError, labels};
use crate::crd::EventReason;
use crate::crd::{
    ConditionStatus, ConditionType, Reason, Runtime, RuntimeState, RuntimeStatus, set_condition,
};
use crate::gardener::{GardenerFailure, ShootSource, gardener_failure};
use crate::metrics::{Dependency, GardenerCall};

/// Every step of the machine, one file each in `states/` (the type `status.step` names).
pub(crate) use crate::crd::RuntimeStep as Step;

/// What a Runtime can ask for by annotation (Tessera's key or KIM's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    ForcePatch,
    SuspendPatch,
}

/// What a step decided.
#[derive(Debug)]
pub(crate) enum Transition {
    /// Go on with another step in this reconcile.
    Next(Step),
    /// Stop here; write the status and come back as `Action` says (or on a watch event).
    Stop(Action),
}

/// Upper bound on steps per reconcile: the graph has no cycles, so hitting it is a bug.
const MAX_STEPS: usize = 32;

/// One reconcile of one Runtime.
pub(crate) struct Machine {
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) ctx: Arc<Context>,
    /// Working copy, written back when it differs from the Runtime's status.
    pub(crate) status: RuntimeStatus,
    /// The Shoot as last read or written in this reconcile.
    pub(crate) shoot: Option<DynamicObject>,
    /// Where `shoot` came from: one from the cache is read afresh before a write.
    pub(crate) shoot_source: ShootSource,
    events: Vec<Note>,
    /// Set by `RemoveFinalizer`.
    pub(crate) finalizer_removed: bool,
    /// The Runtime's chain, once resolved in this reconcile.
    pub(crate) chain: Option<Arc<crate::plugins::ResolvedChain>>,
    /// A Shoot API call of this reconcile succeeded.
    pub(crate) gardener_answered: bool,
    /// The project copy of each registry cache's credentials, by cache uid (see
    /// `registry_cache`).
    pub(crate) cache_secrets: std::collections::BTreeMap<String, String>,
    /// A registry cache waits for its runtime cluster: come back soon after Ready.
    pub(crate) caches_waiting: bool,
    /// The runtime cluster's client, once a step of this reconcile needed it: the steps
    /// that prepare the cluster share one read of the kubeconfig Secret.
    cluster: Option<kube::Client>,
}

impl Machine {
    pub(crate) fn new(runtime: Arc<Runtime>, ctx: Arc<Context>) -> Self {
        let status = runtime.status.clone().unwrap_or_default();
        Self {
            runtime,
            ctx,
            status,
            shoot: None,
            shoot_source: ShootSource::Gardener,
            events: Vec::new(),
            finalizer_removed: false,
            chain: None,
            gardener_answered: false,
            cache_secrets: Default::default(),
            caches_waiting: false,
            cluster: None,
        }
    }

    /// The runtime cluster's client (see `runtime_cluster::client`), read once per
    /// reconcile.
    pub(crate) async fn cluster(&mut self) -> Result<kube::Client, ReconcileError> {
        if let Some(client) = &self.cluster {
            return Ok(client.clone());
        }
        let client =
            crate::controllers::runtime_cluster::client(&self.ctx, &self.namespace(), &self.id())
                .await?;
        self.cluster = Some(client.clone());
        Ok(client)
    }

    /// The runtime id.
    pub(crate) fn id(&self) -> String {
        self.runtime.name_any()
    }

    pub(crate) fn namespace(&self) -> String {
        self.runtime.namespace().unwrap_or_default()
    }

    /// The Shoot this Runtime owns, as the host pins it.
    pub(crate) fn identity(&self) -> crate::plugins::ShootIdentity {
        let template = &self.ctx.renderer.resolver.template;
        crate::plugins::ShootIdentity::of(&self.runtime.spec.inner, &template.project)
            .with_credentials_binding(template.credentials_binding)
    }

    pub(crate) fn generation(&self) -> i64 {
        self.runtime.metadata.generation.unwrap_or(0)
    }

    pub(crate) fn runtimes(&self) -> Api<Runtime> {
        Api::namespaced(self.ctx.client.clone(), &self.namespace())
    }

    /// Read the Shoot from Gardener if this reconcile judged it from the cache, so that a
    /// write is decided on the Shoot as it is. `Some(step)`: judge again from `step` (the
    /// Shoot changed, or is gone and `CreateShoot` takes over).
    pub(crate) async fn fresh_shoot(&mut self, step: Step) -> Result<Option<Step>, ReconcileError> {
        if self.shoot_source == ShootSource::Gardener {
            return Ok(None);
        }
        let Some(cached) = self.shoot.take() else {
            return Ok(None);
        };
        let meta = &cached.metadata;
        let (namespace, name) = (
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
        );
        self.shoot = self.ctx.shoots.get(namespace, name).await?;
        self.shoot_source = ShootSource::Gardener;
        Ok(match &self.shoot {
            None => Some(Step::CreateShoot),
            Some(s) if s.metadata.resource_version != meta.resource_version => Some(step),
            Some(_) => None,
        })
    }

    /// A failure when `shoot` is not this Runtime's to use: another Runtime's, or KIM's
    /// while takeover is off.
    pub(crate) fn refuse_foreign(&mut self, shoot: &DynamicObject) -> Option<Transition> {
        let owner = super::takeover::owner(shoot, &self.runtime, &self.ctx.config.kim);
        let name = format!(
            "{}/{}",
            shoot.metadata.namespace.as_deref().unwrap_or_default(),
            shoot.metadata.name.as_deref().unwrap_or_default()
        );
        let (reason, why) =
            super::takeover::refusal(owner, &self.runtime, &self.ctx.config.kim, &name)?;
        Some(self.fail(reason, why))
    }

    /// Whether the Runtime failed for `reason` (its `Provisioned` condition says so).
    pub(crate) fn failed_for(&self, reason: Reason) -> bool {
        self.status
            .conditions
            .iter()
            .any(|c| c.is(ConditionType::Provisioned) && c.reason == reason.as_str())
    }

    /// Whether the Runtime asks for `ask`, by Tessera's annotation or KIM's.
    pub(crate) fn asks(&self, ask: Ask) -> bool {
        let (ours, kims) = match ask {
            Ask::ForcePatch => (labels::FORCE_PATCH, labels::KIM_FORCE_PATCH),
            Ask::SuspendPatch => (labels::SUSPEND_PATCH, labels::KIM_SUSPEND_PATCH),
        };
        self.annotated(ours) || self.annotated(kims)
    }

    pub(crate) fn annotated(&self, key: &str) -> bool {
        labels::is_true(self.runtime.metadata.annotations.as_ref(), key)
    }

    /// Set the coarse state; transitions become Events.
    pub(crate) fn set_state(&mut self, state: RuntimeState) {
        // Pending is only ever a moment before Provisioning: not worth an Event.
        if self.status.state != Some(state) && state != RuntimeState::Pending {
            self.event(
                EventType::Normal,
                EventReason::StateChanged,
                format!("Runtime is {}", state.as_str()),
            );
        }
        self.status.state = Some(state);
    }

    pub(crate) fn condition(
        &mut self,
        type_: ConditionType,
        status: ConditionStatus,
        reason: Reason,
        message: impl Into<String>,
    ) {
        let generation = Some(self.generation());
        set_condition(
            &mut self.status.conditions,
            type_,
            status,
            reason,
            message,
            generation,
        );
    }

    /// Queue an Event, published after the status is written.
    pub(crate) fn event(&mut self, type_: EventType, reason: EventReason, note: String) {
        self.events.push(match type_ {
            EventType::Warning => Note::warning(reason, note),
            EventType::Normal => Note::normal(reason, note),
        });
    }

    /// Ready for this generation with the cluster prepared: nothing to do.
    pub(crate) fn is_settled(&self) -> bool {
        let generation = Some(self.generation());
        self.status.state == Some(RuntimeState::Ready)
            && self.status.observed_generation == generation
            && !self.asks(Ask::ForcePatch)
            && super::states::namespaces_up_to_date(
                &self.status.conditions,
                &self.ctx.config.runtime_namespaces,
            )
            && self.status.conditions.iter().any(|c| {
                c.is(ConditionType::Configured)
                    && c.status == ConditionStatus::True
                    && c.observed_generation == generation
            })
    }

    /// Give up until the Runtime changes: state Failed, the reason in `Provisioned`.
    pub(crate) fn fail(&mut self, reason: Reason, message: String) -> Transition {
        tracing::warn!(runtime = %self.id(), %reason, %message, "runtime failed");
        self.set_state(RuntimeState::Failed);
        self.condition(
            ConditionType::Provisioned,
            ConditionStatus::False,
            reason,
            message.clone(),
        );
        self.status.observed_generation = Some(self.generation());
        self.event(
            EventType::Warning,
            EventReason::Failed,
            format!("{reason}: {message}"),
        );
        Transition::Stop(Action::await_change())
    }

    /// Stop and retry with backoff: something the Runtime does not control failed
    /// (a plugin timed out, Gardener is unreachable). The state stays; condition `type_`
    /// says why and when the next attempt is; an Event is published when the reason or
    /// message is new.
    pub(crate) fn wait_retrying(
        &mut self,
        type_: ConditionType,
        reason: Reason,
        message: String,
    ) -> Transition {
        let delay = kit::retry_later(&self.ctx, &kit::key(self.runtime.as_ref()), &message);
        let known = self
            .status
            .conditions
            .iter()
            .any(|c| c.is(type_) && c.because(reason) && c.message.starts_with(&message));
        if !known {
            self.event(
                EventType::Warning,
                EventReason::Retrying,
                format!("{reason}: {message}"),
            );
        }
        self.condition(
            type_,
            ConditionStatus::False,
            reason,
            // Stable text: a status write wakes the Runtime again, a changing message
            // would turn the backoff into a loop.
            format!("{message}; retrying by itself with backoff"),
        );
        Transition::Stop(Action::requeue(delay))
    }

    /// The Gardener side failed a request: not the Runtime's fault, nor an unexpected stop.
    /// Unreachable (no answer, 404: the Shoot API is missing, 5xx) is a dependency down;
    /// any other refusal (400, 403, 422, …) is Gardener rejecting this Shoot. Both wait
    /// with backoff and say so in `GardenerReachable`.
    fn gardener_failed(&mut self, e: &kube::Error) -> Transition {
        let failure = gardener_failure(e);
        self.ctx
            .metrics
            .gardener_failed(GardenerCall::Shoot, failure);
        let (reason, verb) = match failure {
            GardenerFailure::Down => (Reason::GardenerUnavailable, "failed"),
            GardenerFailure::Rejected => (Reason::ShootRejected, "rejected the Shoot"),
        };
        let message = format!(
            "the Gardener Shoot API at {} {verb}: {}",
            self.ctx.shoots.url(),
            crate::report::kube_error(e)
        );
        if failure == GardenerFailure::Down {
            let dependencies = &self.ctx.metrics.dependencies;
            dependencies.down(Dependency::Gardener, &message);
        }
        self.wait_retrying(ConditionType::GardenerReachable, reason, message)
    }

    /// `GardenerReachable` after a pass: false while the watch of Shoots fails (so that
    /// every Runtime waiting for its Shoot says why it only polls), true again once Gardener
    /// answered.
    fn gardener_health(&mut self) {
        let watch = self.ctx.shoot_watch.lock().expect("watch lock").clone();
        match watch {
            Some(problem) => self.condition(
                ConditionType::GardenerReachable,
                ConditionStatus::False,
                Reason::ShootWatchFailed,
                problem,
            ),
            None if self.gardener_answered => {
                self.ctx.metrics.dependencies.up(Dependency::Gardener);
                self.waited_for(
                    ConditionType::GardenerReachable,
                    "the Gardener Shoot API answers",
                );
            }
            None => {}
        }
    }

    /// What `wait_retrying` waited for under condition `type_` works again.
    pub(crate) fn waited_for(&mut self, type_: ConditionType, message: &str) {
        let waiting = self
            .status
            .conditions
            .iter()
            .any(|c| c.is(type_) && c.status == ConditionStatus::False);
        if waiting {
            self.condition(type_, ConditionStatus::True, Reason::Recovered, message);
        }
    }

    /// Run steps from `Initialise` until one stops, then persist.
    pub(crate) async fn run(mut self) -> Result<Action, ReconcileError> {
        let id = self.id();
        let mut step = Step::Initialise;
        for _ in 0..MAX_STEPS {
            let started = Instant::now();
            let result = states::run(step, &mut self).await;
            kit::observe(&self.ctx, Controller::Runtime, step.name(), started);
            match result {
                Ok(Transition::Next(next)) => {
                    tracing::info!(runtime = %id, from = step.name(), to = next.name(), "transition");
                    step = next;
                }
                Ok(Transition::Stop(action)) => {
                    self.gardener_health();
                    return self.stop(step, Transition::Stop(action)).await;
                }
                Err(ReconcileError::RuntimeCluster { message, .. }) => {
                    // The Runtime's own cluster failed (unreachable, a certificate it cannot
                    // verify, a refusal): not an unexpected stop; said on the Runtime.
                    let waiting = self.wait_retrying(
                        ConditionType::Configured,
                        Reason::RuntimeClusterFailed,
                        format!("the runtime cluster: {message}"),
                    );
                    return self.stop(step, waiting).await;
                }
                Err(ReconcileError::Gardener(e)) => {
                    let waiting = self.gardener_failed(&e);
                    return self.stop(step, waiting).await;
                }
                Err(error) => return self.failed(step, error).await,
            }
        }
        let error = ReconcileError::StepBudget {
            steps: MAX_STEPS,
            step: step.name(),
        };
        self.failed(step, error).await
    }

    /// End the pass at `step` with `error`, counted (unless a conflict or the fence), and
    /// retried by the controller with backoff.
    async fn failed(
        &mut self,
        step: Step,
        error: ReconcileError,
    ) -> Result<Action, ReconcileError> {
        if !error.is_conflict() && !error.is_fenced() {
            let metrics = &self.ctx.metrics;
            metrics.stopped_unexpectedly("runtime", step.name(), error.reason());
        }
        self.status.step = Some(step);
        // Keep what was learnt before the error; the error itself is retried.
        let _ = self.persist().await;
        Err(error)
    }

    /// End the pass at `step` as `transition` says: the status written, the action taken.
    async fn stop(&mut self, step: Step, transition: Transition) -> Result<Action, ReconcileError> {
        self.status.step = Some(step);
        self.persist().await?;
        Ok(match transition {
            Transition::Stop(action) => action,
            Transition::Next(_) => Action::await_change(),
        })
    }

    /// Write the status if it changed, publish queued events, update metrics.
    async fn persist(&mut self) -> Result<(), ReconcileError> {
        let id = self.id();
        let ns = self.namespace();
        let before = self.runtime.status.clone().unwrap_or_default();
        // Once the finalizer is gone the Runtime may be gone too: nothing left to write.
        if self.status != before && !self.finalizer_removed {
            if before.state != self.status.state {
                tracing::info!(
                    runtime = %id,
                    from = before.state.map(|s| s.as_str()).unwrap_or("-"),
                    to = self.status.state.map(|s| s.as_str()).unwrap_or("-"),
                    step = self.status.step.map_or("-", Step::name),
                    "state changed"
                );
            }
            crate::crd::patch_status(&self.runtimes(), &id, &self.status).await?;
        }
        if self.finalizer_removed {
            self.ctx.metrics.set_runtime_state(&ns, &id, None);
        } else {
            self.ctx
                .metrics
                .set_runtime_state(&ns, &id, self.status.state);
        }
        if self.finalizer_removed {
            self.events.clear();
        }
        let notes = std::mem::take(&mut self.events);
        self.ctx
            .events
            .publish(&self.runtime.object_ref(&()), "Reconcile", notes)
            .await;
        Ok(())
    }
}
