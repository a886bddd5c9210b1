use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::watcher;

use super::reconcile::reconcile_plugin;
use crate::controllers::kit;
use crate::controllers::runtime::tokio_stream_of;
use crate::controllers::{Context, ReconcileError};
use crate::crd::Plugin;

/// Run the Plugin controller until shutdown.
pub(crate) async fn run(ctx: Arc<Context>) {
    let plugins: Api<Plugin> = Api::all(ctx.client.clone());
    let mut config = watcher::Config::default().any_semantic();
    if let Some(selector) = &ctx.config.plugin_selector {
        config = config.labels(selector);
    }
    // A render refused a Plugin's configuration: its status says so.
    let refusals = tokio_stream_of(ctx.renderer.resolver.catalog.subscribe_refusals());
    // With sharding only the leader writes Plugin status: a replica that starts leading
    // writes what it found at once.
    let leading = futures::stream::unfold(ctx.leading.subscribe(), |mut rx| async move {
        rx.changed().await.ok()?;
        Some(((), rx))
    });
    kit::controller(plugins, config, kit::Wake::OnAnyChange)
        .reconcile_all_on(refusals)
        .reconcile_all_on(leading)
        .with_config(kube::runtime::controller::Config::default().concurrency(ctx.config.workers))
        .shutdown_on_signal()
        .run(reconcile, error_policy, ctx.clone())
        .for_each(|outcome| kit::run_outcome(&ctx, kit::Controller::Plugin, outcome))
        .await;
}

fn error_policy(plugin: Arc<Plugin>, error: &ReconcileError, ctx: Arc<Context>) -> Action {
    kit::error_policy(kit::Controller::Plugin, plugin.as_ref(), error, &ctx)
}

async fn reconcile(plugin: Arc<Plugin>, ctx: Arc<Context>) -> Result<Action, ReconcileError> {
    let reconcile = reconcile_plugin(plugin.clone(), ctx.clone());
    kit::guarded(kit::Controller::Plugin, plugin.as_ref(), &ctx, reconcile).await
}
