use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;

use super::machine::Machine;
use super::states::channel_choice;
use crate::controllers::kit;
use crate::controllers::{Context, ReconcileError};
use crate::crd::{Runtime, RuntimeKubeconfig};

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
    let controller = kit::controller(
        runtimes,
        kit::shard::selected(&ctx, watcher::Config::default().any_semantic()),
        kit::Wake::OnAnyChange,
    );
    let catalog = catalog_changes(&ctx, controller.store());
    let shoots = super::shoot_watch::shoot_changes(ctx.clone(), controller.store());
    controller
        .owns(
            kubeconfigs,
            kit::shard::selected(&ctx, watcher::Config::default().any_semantic()),
        )
        .reconcile_on(shoots)
        .reconcile_on(catalog)
        .with_config(kube::runtime::controller::Config::default().concurrency(ctx.config.workers))
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|outcome| kit::run_outcome(&ctx, kit::Controller::Runtime, outcome))
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
