//! One pass over a ModuleSet: finalizer, target, the modules pass, status and Events. What
//! to write and announce is decided in `decide.rs`; this file makes the calls.

use std::sync::Arc;
use std::time::Duration;

use kube::api::Api;
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use super::decide::Unreached;
use super::decide::{self, Start};
use super::drift::Drift;
use super::targets::{Targets, Unreachable};
use super::turns::Turns;
use crate::controllers::kit::{self, Controller, Note, finalizer};
use crate::controllers::labels::{self, is_true};
use crate::controllers::{Context, ReconcileError};
use crate::crd::{ModuleSet, ModuleSetStatus, patch_status};
use crate::modules::set::{SetRequest, reconcile_set, with_mandatory};
use crate::modules::source::CatalogSource;
use crate::modules::windows::Maintenance;
use crate::modules::{SetOutcome, State, Target};

/// The longest a set waits for a turn on its target before it asks again (each ask reads
/// its target Secret).
const TURN_WAIT_MAX: Duration = Duration::from_secs(10);

/// What ModuleSet reconciles share.
pub(crate) struct ModuleContext {
    pub(crate) ctx: Arc<Context>,
    pub(crate) targets: Targets,
    pub(crate) drift: Arc<Drift>,
    pub(crate) turns: Turns,
}

fn set_state_metric(ctx: &Context, set: &ModuleSet, state: Option<State>) {
    let (ns, name) = (set.namespace().unwrap_or_default(), set.name_any());
    ctx.metrics.set_moduleset_state(&ns, &name, state);
}

pub(crate) async fn reconcile(
    set: Arc<ModuleSet>,
    mctx: Arc<ModuleContext>,
) -> Result<Action, ReconcileError> {
    let pass = reconcile_set_object(set.clone(), mctx.clone());
    kit::guarded(Controller::ModuleSet, set.as_ref(), &mctx.ctx, pass).await
}

async fn reconcile_set_object(
    set: Arc<ModuleSet>,
    mctx: Arc<ModuleContext>,
) -> Result<Action, ReconcileError> {
    let ctx = &mctx.ctx;
    let set = set.as_ref();
    let ns = set.namespace().unwrap_or_default();
    let api: Api<ModuleSet> = Api::namespaced(ctx.client.clone(), &ns);
    let deleting = set.metadata.deletion_timestamp.is_some();
    let has_finalizer = finalizer::has(set, labels::MODULESET_FINALIZER);
    match decide::start(deleting, has_finalizer) {
        Start::Leave => return Ok(Action::await_change()),
        Start::HoldWithFinalizer => {
            finalizer::add(&api, set, labels::MODULESET_FINALIZER).await?;
        }
        Start::Proceed => {}
    }
    // Until the Plugins present at start-up are resolved, "no such Plugin" would be a lie.
    if !ctx.initial_sync.is_done() {
        return Ok(Action::requeue(Duration::from_millis(500)));
    }
    let old = set.status.clone().unwrap_or_default();
    let target = match mctx.targets.get(&ns, set.spec.target.as_ref()).await {
        Ok(t) => t,
        Err(unreachable) => return unreached(ctx, &api, set, &old, &unreachable).await,
    };
    // Waiting for a turn is no failure: its backoff is kept apart from the set's own.
    let turn_key = format!("{}#turn", kit::key(set));
    let Some(_turn) = mctx.turns.take(&target.server) else {
        ctx.metrics.module_turn_waited();
        let message = format!("waiting for a turn on {}", target.server);
        let wait = kit::quiet_retry(ctx, &turn_key, &message, TURN_WAIT_MAX);
        return Ok(Action::requeue(wait));
    };
    ctx.retries.succeeded(&turn_key, std::time::Instant::now());
    let version = target.facts.kubernetes_version.as_deref();
    let status = decide::target_reached(set, &old, version);
    let outcome = match modules_pass(ctx, set, &target).await {
        Ok(o) => o,
        Err(message) => {
            let status = decide::pass_failed(set, status, &message);
            write(&api, set, &old, &status).await?;
            return Ok(Action::requeue(retry_later(ctx, set, &message)));
        }
    };
    mctx.drift.track(&target, &outcome.applied).await;
    if decide::deletion_finished(set, &outcome) {
        set_state_metric(ctx, set, None);
        publish(ctx, set, vec![decide::deleted()]).await;
        finalizer::remove(&api, set, labels::MODULESET_FINALIZER).await?;
        return Ok(Action::await_change());
    }
    conclude(ctx, &api, set, &old, status, &outcome).await
}

/// Whether the set's downtime upgrades may run now: its maintenance windows (by set, by
/// target region, default), unless it skips them.
fn maintenance(ctx: &Context, set: &ModuleSet) -> Maintenance {
    if set.spec.skip_maintenance_windows == Some(true) {
        return Maintenance::Open;
    }
    let key = format!("{}/{}", set.namespace().unwrap_or_default(), set.name_any());
    let region = set.spec.target.as_ref().and_then(|t| t.region.as_deref());
    let windows = &ctx.config.maintenance_windows;
    windows.at(&key, region, jiff::Timestamp::now())
}

/// A set whose target cannot be reached: report it and retry, or, being deleted with its
/// Secret gone past the grace period, let it go.
async fn unreached(
    ctx: &Context,
    api: &Api<ModuleSet>,
    set: &ModuleSet,
    old: &ModuleSetStatus,
    unreachable: &Unreachable,
) -> Result<Action, ReconcileError> {
    let grace = ctx.config.module_target_gone_grace;
    let message = &unreachable.message;
    let now = jiff::Timestamp::now();
    let wait = match decide::unreached(set, unreachable.gone, now, grace) {
        Unreached::Release => {
            set_state_metric(ctx, set, None);
            let note = decide::released_without_target(message, grace);
            publish(ctx, set, vec![note]).await;
            finalizer::remove(api, set, labels::MODULESET_FINALIZER).await?;
            return Ok(Action::await_change());
        }
        Unreached::WaitForSecret(left) => left.min(retry_later(ctx, set, message)),
        Unreached::Retry => retry_later(ctx, set, message),
    };
    let (status, notes) = decide::target_unreachable(set, old, message);
    write(api, set, old, &status).await?;
    publish(ctx, set, notes).await;
    Ok(Action::requeue(wait))
}

/// Write the status after a modules pass, announce what changed, and say when to look again.
async fn conclude(
    ctx: &Context,
    api: &Api<ModuleSet>,
    set: &ModuleSet,
    old: &ModuleSetStatus,
    status: ModuleSetStatus,
    outcome: &SetOutcome,
) -> Result<Action, ReconcileError> {
    let (status, notes) = decide::status_after(set, old, status, outcome);
    // Events first: whoever sees the new status finds the Events that explain it.
    publish(ctx, set, notes).await;
    write(api, set, old, &status).await?;
    set_state_metric(ctx, set, status.state);
    let resync = ctx.config.requeue.modules;
    let requeue = decide::next_requeue(outcome.requeue, resync, &status);
    Ok(requeue.action(ctx, &kit::key(set)))
}

/// Install, upgrade and remove the set's modules on `target`, once; `Err` says why the
/// pass as a whole failed.
async fn modules_pass(
    ctx: &Context,
    set: &ModuleSet,
    target: &Target,
) -> Result<SetOutcome, String> {
    let catalog = ctx.renderer.resolver.catalog.clone();
    let (modules, mandatory) =
        with_mandatory(&set.spec.modules, &catalog.mandatory(), set.labels());
    let source = CatalogSource { catalog };
    let request = SetRequest {
        set: format!("{}/{}", set.namespace().unwrap_or_default(), set.name_any()),
        channel: set.spec.channel.as_deref(),
        modules: &modules,
        deleting: set.metadata.deletion_timestamp.is_some(),
        allow_downgrade: is_true(
            set.metadata.annotations.as_ref(),
            labels::MODULES_ALLOW_DOWNGRADE,
        ),
        labels: set.labels(),
        maintenance: maintenance(ctx, set),
    };
    let mut outcome = reconcile_set(target, &ctx.renderer.wasm, &source, &request)
        .await
        .map_err(|e| e.to_string())?;
    for report in &mut outcome.modules {
        report.mandatory = mandatory.contains(&report.name);
    }
    Ok(outcome)
}

/// A retryable wait: the set's backoff delay, counting `message` as one more failure.
fn retry_later(ctx: &Context, set: &ModuleSet, message: &str) -> Duration {
    kit::retry_later(ctx, &kit::key(set), message)
}

async fn write(
    api: &Api<ModuleSet>,
    set: &ModuleSet,
    old: &ModuleSetStatus,
    status: &ModuleSetStatus,
) -> Result<(), ReconcileError> {
    if old != status {
        patch_status(api, &set.name_any(), status).await?;
    }
    Ok(())
}

async fn publish(ctx: &Context, set: &ModuleSet, notes: Vec<Note>) {
    if !notes.is_empty() {
        ctx.events
            .publish(&set.object_ref(&()), "Reconcile", notes)
            .await;
    }
}
