use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::watcher;

use super::reconcile::reconcile;
use crate::controllers::kit;
use crate::controllers::{Context, ReconcileError, labels};
use crate::crd::RuntimeKubeconfig;

/// Run the RuntimeKubeconfig controller until shutdown.
pub(crate) async fn run(ctx: Arc<Context>) {
    let (kubeconfigs, secrets): (Api<RuntimeKubeconfig>, Api<Secret>) = match &ctx.config.namespace
    {
        Some(ns) => (
            Api::namespaced(ctx.client.clone(), ns),
            Api::namespaced(ctx.client.clone(), ns),
        ),
        None => (Api::all(ctx.client.clone()), Api::all(ctx.client.clone())),
    };
    kit::controller(
        kubeconfigs,
        kit::shard::selected(&ctx, watcher::Config::default().any_semantic()),
        // Not woken by its own status and finalizer writes: a refused RuntimeKubeconfig
        // looks at its Runtime again with backoff (`reconcile::refuse`) instead of
        // counting on such a wake (the kim scenario once passed only by it).
        kit::Wake::OnIntent,
    )
    .owns(
        secrets,
        watcher::Config::default()
            .labels(&format!("{}=true", labels::KUBECONFIG))
            .any_semantic(),
    )
    .with_config(kube::runtime::controller::Config::default().concurrency(ctx.config.workers))
    .shutdown_on_signal()
    .run(reconcile, error_policy, ctx.clone())
    .for_each(|outcome| kit::run_outcome(&ctx, kit::Controller::Kubeconfig, outcome))
    .await;
}

fn error_policy(
    kubeconfig: Arc<RuntimeKubeconfig>,
    error: &ReconcileError,
    ctx: Arc<Context>,
) -> Action {
    kit::error_policy(
        kit::Controller::Kubeconfig,
        kubeconfig.as_ref(),
        error,
        &ctx,
    )
}
