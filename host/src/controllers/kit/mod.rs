//! What every controller shares, so that all four are written one way: the finalizer
//! helper, the Event sink, the error policy (backoff with jitter per object, a cap on
//! repeated log lines), the reconcile guard (a span per reconcile, duration and outcome
//! per controller) and the watchdog behind `/healthz`.

pub(crate) mod finalizer;

mod events;
mod liveness;
mod requeue;
mod retries;
pub(crate) mod rotation;
mod secret;
pub(crate) mod shard;
mod wakes;
mod watch;

use std::future::Future;
use std::time::{Duration, Instant};

use kube::Resource;
use kube::runtime::controller::Action;
use tracing::Instrument;

pub(crate) use events::{EventSink, Note};
pub(crate) use liveness::{Progress, Watchdog, watch_progress};
pub(crate) use requeue::Requeue;
pub(crate) use retries::{LogLine, Retries, Retry};
pub(crate) use secret::SecretBuilder;
pub(crate) use wakes::catalog_wakes;
pub(crate) use watch::{Wake, controller};

use crate::controllers::{Context, ReconcileError};
use crate::metrics::ReconcileResult;

/// The controllers, as metric labels and span fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Controller {
    Runtime,
    Plugin,
    Kubeconfig,
    ModuleSet,
    Access,
}

impl Controller {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Runtime => "runtime",
            Self::Plugin => "plugin",
            Self::Kubeconfig => "kubeconfig",
            Self::ModuleSet => "moduleset",
            Self::Access => "access",
        }
    }
}

/// `Kind/namespace/name` (or `Kind/name`): the key of an object's retry state and the
/// identity its reconcile span carries.
pub(crate) fn key<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    let meta = obj.meta();
    let name = meta.name.as_deref().unwrap_or_default();
    match meta.namespace.as_deref() {
        Some(ns) => format!("{}/{ns}/{name}", K::kind(&())),
        None => format!("{}/{name}", K::kind(&())),
    }
}

/// Run one reconcile of `obj` inside a span naming it; record its duration and outcome,
/// and forget its failures once it succeeds.
pub(crate) async fn guarded<K, F>(
    controller: Controller,
    obj: &K,
    ctx: &Context,
    reconcile: F,
) -> Result<Action, ReconcileError>
where
    K: Resource<DynamicType = ()>,
    F: Future<Output = Result<Action, ReconcileError>>,
{
    if shard::draining(ctx, obj) {
        return shard::release(ctx, obj).await;
    }
    let key = key(obj);
    let span = tracing::info_span!("reconcile", controller = controller.as_str(), object = %key);
    // At debug, one line per reconcile shows what a trigger woke (the tests count them).
    span.in_scope(|| tracing::debug!("reconcile started"));
    let started = Instant::now();
    let running = ctx.progress.running(controller);
    let result = reconcile.instrument(span).await;
    drop(running);
    observe(ctx, controller, "Reconcile", started);
    ctx.progress.ended(&key);
    let outcome = match &result {
        Ok(_) => {
            ctx.retries.succeeded(&key, started);
            ReconcileResult::Ok
        }
        Err(e) if e.is_conflict() || e.is_fenced() => ReconcileResult::Conflict,
        Err(_) => ReconcileResult::Error,
    };
    ctx.metrics.reconciled(controller.as_str(), outcome);
    result
}

/// Record how long `step` of a reconcile took.
pub(crate) fn observe(ctx: &Context, controller: Controller, step: &str, started: Instant) {
    ctx.metrics
        .reconcile_took(controller.as_str(), step, started.elapsed());
}

/// The one error policy: conflicts retry at once (quietly), everything else backs off
/// exponentially with jitter per object, logging the same failure once per quiet period.
pub(crate) fn error_policy<K: Resource<DynamicType = ()>>(
    controller: Controller,
    obj: &K,
    error: &ReconcileError,
    ctx: &Context,
) -> Action {
    let key = key(obj);
    if error.is_conflict() || error.is_fenced() {
        // Someone wrote first (the next attempt sees their change), or the lease is being
        // confirmed: neither is a failure of this object.
        tracing::debug!(object = %key, error = %error, "retrying soon");
        return Action::requeue(Duration::from_millis(200 + fastrand_ms(800)));
    }
    if controller != Controller::Runtime {
        // The Runtime state machine counts its own, per step.
        ctx.metrics
            .stopped_unexpectedly(controller.as_str(), "Reconcile", error.reason());
    }
    let retry = ctx.retries.fail(&key, &error.to_string());
    log_retry(&key, &error.to_string(), &retry);
    Action::requeue(retry.delay)
}

/// What a controller's run stream yields besides reconciles: a failure of one of its
/// watches. kube's watcher no longer logs those (each 403 at WARN, every retry): reported
/// here under the log cap, once per failure and quiet period; the next reconcile that comes
/// through ends it. kube-runtime backs the watch off by itself.
pub(crate) fn run_outcome<T, E>(
    ctx: &Context,
    controller: Controller,
    outcome: Result<T, kube::runtime::controller::Error<E, kube::runtime::watcher::Error>>,
) -> std::future::Ready<()> {
    let key = format!("watch/{}", controller.as_str());
    match outcome {
        Err(kube::runtime::controller::Error::QueueError(e)) => {
            let message = crate::report::watch_error(&e);
            let retry = ctx.retries.fail(&key, &message);
            let controller = controller.as_str();
            match retry.log {
                LogLine::Write => {
                    tracing::warn!(controller, error = %message, "a watch failed; retrying with backoff")
                }
                LogLine::Repeat { suppressed } => {
                    tracing::warn!(controller, error = %message, suppressed, "a watch still fails; retrying with backoff")
                }
                LogLine::Quiet => {
                    tracing::debug!(controller, error = %message, "a watch still fails")
                }
            }
        }
        Ok(_) => ctx.retries.succeeded(&key, Instant::now()),
        Err(_) => {}
    }
    std::future::ready(())
}

/// A retryable wait decided by a reconcile (a plugin timed out, Gardener is down): the same
/// backoff and log cap as errors, without failing the reconcile.
pub(crate) fn retry_later(ctx: &Context, key: &str, message: &str) -> Duration {
    let retry = ctx.retries.fail(key, message);
    log_retry(key, message, &retry);
    retry.delay
}

/// A wait that is no failure (another pass has the turn): the same backoff with jitter,
/// at most `cap` (then a random half to whole of it, so waiters do not return in
/// lockstep), logged at debug level only.
pub(crate) fn quiet_retry(ctx: &Context, key: &str, message: &str, cap: Duration) -> Duration {
    let retry = ctx.retries.fail(key, message);
    let delay = if retry.delay > cap {
        let half = u64::try_from(cap.as_millis() / 2).unwrap_or(u64::MAX);
        Duration::from_millis(half + fastrand_ms(half))
    } else {
        retry.delay
    };
    let delay_s = delay.as_secs_f64();
    tracing::debug!(object = %key, reason = %message, retry_in_s = delay_s, "waiting");
    delay
}

fn log_retry(key: &str, message: &str, retry: &Retry) {
    let delay_s = retry.delay.as_secs_f64();
    match retry.log {
        LogLine::Write => {
            tracing::warn!(object = %key, error = %message, attempt = retry.attempt, retry_in_s = delay_s, "will retry")
        }
        LogLine::Repeat { suppressed } => {
            tracing::warn!(object = %key, error = %message, attempt = retry.attempt, retry_in_s = delay_s, suppressed, "still failing, will retry")
        }
        LogLine::Quiet => {
            tracing::debug!(object = %key, error = %message, attempt = retry.attempt, retry_in_s = delay_s, "still failing")
        }
    }
}

/// A few random milliseconds, so that conflicting writers do not retry in lockstep.
fn fastrand_ms(max: u64) -> u64 {
    use std::hash::{BuildHasher, RandomState};
    RandomState::new().hash_one(Instant::now()) % max.max(1)
}
