use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::watcher;

use super::decide::ACCESS_UID;
use super::reconcile::reconcile;
use crate::controllers::kit;
use crate::controllers::{Context, ReconcileError};
use crate::crd::RuntimeAccess;

/// Run the RuntimeAccess controller until shutdown; a kubeconfig Secret deleted or edited
/// by hand wakes its RuntimeAccess.
pub(crate) async fn run(ctx: Arc<Context>) {
    let (accesses, secrets): (Api<RuntimeAccess>, Api<Secret>) = match &ctx.config.namespace {
        Some(ns) => (
            Api::namespaced(ctx.client.clone(), ns),
            Api::namespaced(ctx.client.clone(), ns),
        ),
        None => (Api::all(ctx.client.clone()), Api::all(ctx.client.clone())),
    };
    kit::controller(
        accesses,
        kit::shard::selected(&ctx, watcher::Config::default().any_semantic()),
        kit::Wake::OnAnyChange,
    )
    .owns(
        secrets,
        watcher::Config::default().labels(ACCESS_UID).any_semantic(),
    )
    .with_config(kube::runtime::controller::Config::default().concurrency(ctx.config.workers))
    .shutdown_on_signal()
    .run(reconcile, error_policy, ctx.clone())
    .for_each(|outcome| kit::run_outcome(&ctx, kit::Controller::Access, outcome))
    .await;
}

fn error_policy(access: Arc<RuntimeAccess>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    kit::error_policy(kit::Controller::Access, access.as_ref(), error, &ctx)
}
