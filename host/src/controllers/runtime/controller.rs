use std::sync::Arc;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use super::machine::Machine;
use crate::controllers::kit;
use crate::controllers::{Context, ReconcileError, labels};
use crate::crd::{Runtime, RuntimeKubeconfig};
use crate::gardener::shoot_resource;

/// Run the Runtime controller until shutdown.
pub async fn run(ctx: Arc<Context>) {
    let (runtimes, kubeconfigs): (Api<Runtime>, Api<RuntimeKubeconfig>) =
        match &ctx.config.namespace {
            Some(ns) => (
                Api::namespaced(ctx.client.clone(), ns),
                Api::namespaced(ctx.client.clone(), ns),
            ),
            None => (Api::all(ctx.client.clone()), Api::all(ctx.client.clone())),
        };
    // Shoots live in Gardener project namespaces; the labels lead back to the Runtime.
    let shoots: Api<DynamicObject> = Api::all_with(ctx.shoots.client().clone(), &shoot_resource());
    let selector = match &ctx.config.namespace {
        Some(ns) => format!("{}={ns}", labels::RUNTIME_NAMESPACE),
        None => labels::RUNTIME.to_string(),
    };
    Controller::new(runtimes, watcher::Config::default().any_semantic())
        .owns(kubeconfigs, watcher::Config::default().any_semantic())
        .watches_with(
            shoots,
            shoot_resource(),
            watcher::Config::default().labels(&selector).any_semantic(),
            |shoot| {
                let labels = shoot.metadata.labels.as_ref()?;
                let id = labels.get(labels::RUNTIME)?;
                let ns = labels.get(labels::RUNTIME_NAMESPACE)?;
                Some(ObjectRef::<Runtime>::new(id).within(ns))
            },
        )
        // A channel of a registry plugin changed: every Runtime checks its chain.
        .reconcile_all_on(tokio_stream_of(ctx.renderer.resolver.catalog.subscribe()))
        .with_config(kube::runtime::controller::Config::default().concurrency(ctx.config.workers))
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx)
        .for_each(|_| futures::future::ready(()))
        .await;
}

/// Ticks of a watch channel as a stream (the first, current value is skipped).
pub fn tokio_stream_of(
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
