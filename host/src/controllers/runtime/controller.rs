use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use super::machine::{GardenerFailure, Machine};
use super::states::channel_choice;
use crate::controllers::kit;
use crate::controllers::{Context, ReconcileError, labels};
use crate::crd::{Runtime, RuntimeKubeconfig};
use crate::gardener::shoot_resource;
use crate::metrics::{Dependency, GardenerCall};
use kube::runtime::WatchStreamExt;

/// Run the Runtime controller until shutdown.
pub(crate) async fn run(ctx: Arc<Context>) {
    let (runtimes, kubeconfigs): (Api<Runtime>, Api<RuntimeKubeconfig>) =
        match &ctx.config.namespace {
            Some(ns) => (
                Api::namespaced(ctx.client.clone(), ns),
                Api::namespaced(ctx.client.clone(), ns),
            ),
            None => (Api::all(ctx.client.clone()), Api::all(ctx.client.clone())),
        };
    let controller = Controller::new(runtimes, watcher::Config::default().any_semantic());
    let catalog = catalog_changes(&ctx, controller.store());
    controller
        .owns(kubeconfigs, watcher::Config::default().any_semantic())
        .reconcile_on(shoot_changes(ctx.clone()))
        .reconcile_on(catalog)
        .with_config(kube::runtime::controller::Config::default().concurrency(ctx.config.workers))
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|_| futures::future::ready(()))
        .await;
}

/// The Runtimes whose chain a catalog change concerns: a registry step runs the changed
/// plugin on a changed channel (by the same choice of channel that resolving makes).
fn catalog_changes(
    ctx: &Context,
    store: Store<Runtime>,
) -> impl futures::Stream<Item = ObjectRef<Runtime>> + Send + 'static {
    let template = ctx.renderer.resolver.template.clone();
    kit::catalog_wakes(
        ctx,
        kit::Controller::Runtime,
        store,
        move |runtime, wake| template.woken_by(&channel_choice(runtime), wake),
    )
}

/// The Runtimes whose Shoots changed. The Shoot watch runs on its own, with its own
/// backoff: were it one of the controller's watches, each of its failures would pause every
/// trigger of the controller (kube-runtime backs off the merged trigger stream), so new
/// Runtimes would wait for Gardener's side to come back.
fn shoot_changes(ctx: Arc<Context>) -> impl futures::Stream<Item = ObjectRef<Runtime>> + Send {
    // Shoots live in Gardener project namespaces; the labels lead back to the Runtime.
    let shoots: Api<DynamicObject> = Api::all_with(ctx.shoots.client().clone(), &shoot_resource());
    let selector = match &ctx.config.namespace {
        Some(ns) => format!("{}={ns}", labels::RUNTIME_NAMESPACE),
        None => labels::RUNTIME.to_string(),
    };
    let config = watcher::Config::default().labels(&selector).any_semantic();
    watcher::watcher(shoots, config)
        .default_backoff()
        .filter_map(move |event| futures::future::ready(runtime_of(&ctx, event)))
}

/// The Runtime a Shoot watch event is about; failures are reported, not propagated.
fn runtime_of(
    ctx: &Context,
    event: Result<watcher::Event<DynamicObject>, watcher::Error>,
) -> Option<ObjectRef<Runtime>> {
    let shoot = match event {
        Ok(watcher::Event::Apply(s) | watcher::Event::Delete(s) | watcher::Event::InitApply(s)) => {
            s
        }
        Ok(watcher::Event::InitDone) => {
            ctx.metrics.dependencies.up(Dependency::Gardener);
            return None;
        }
        Ok(watcher::Event::Init) => return None,
        Err(e) => {
            let message = format!(
                "the watch of Shoots at {} failed: {}",
                ctx.shoots.url(),
                crate::report::watch_error(&e)
            );
            ctx.metrics
                .dependencies
                .down(Dependency::Gardener, &message);
            // A failing watch gets no answer from Gardener, whatever the status code.
            ctx.metrics
                .gardener_failed(GardenerCall::Watch, GardenerFailure::Down);
            let _ = kit::retry_later(ctx, "watch/Shoot", &message);
            return None;
        }
    };
    let labels = shoot.metadata.labels.as_ref()?;
    let id = labels.get(labels::RUNTIME)?;
    let ns = labels.get(labels::RUNTIME_NAMESPACE)?;
    Some(ObjectRef::<Runtime>::new(id).within(ns))
}

/// Ticks of a watch channel as a stream (the first, current value is skipped).
pub(crate) fn tokio_stream_of(
    mut rx: tokio::sync::watch::Receiver<u64>,
) -> impl futures::Stream<Item = ()> + Send + 'static {
    rx.mark_unchanged();
    futures::stream::unfold(rx, |mut rx| async move {
        rx.changed().await.ok()?;
        Some(((), rx))
    })
}

async fn reconcile(runtime: Arc<Runtime>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let machine = Machine::new(runtime.clone(), ctx.clone());
    kit::guarded(
        kit::Controller::Runtime,
        runtime.as_ref(),
        &ctx,
        machine.run(),
    )
    .await
}

fn error_policy(runtime: Arc<Runtime>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    kit::error_policy(kit::Controller::Runtime, runtime.as_ref(), error, &ctx)
}
