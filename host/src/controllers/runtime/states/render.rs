//! Rendering shared by create and patch: run the chain, turn plugin errors into `Failed`.

use kube::api::DynamicObject;
use serde_json::Value;

use super::super::machine::{Machine, Transition};
use super::super::shoot_doc;
use crate::controllers::ReconcileError;
use crate::crd::PluginStamp;
use crate::plugins::ChainOutput;
use crate::wasm::Failure;

/// The Shoot to apply and the chain output it came from, or the `Failed` transition.
pub async fn render(
    m: &mut Machine,
    current: Option<&DynamicObject>,
) -> Result<Result<(Value, ChainOutput), Transition>, ReconcileError> {
    let result = m
        .ctx
        .renderer
        .render(
            shoot_doc::runtime_json(&m.runtime),
            m.id(),
            current.map(shoot_doc::current_json),
            &m.ctx.metrics,
        )
        .await
        .map_err(|e| ReconcileError::Join(e.to_string()))?;
    match result {
        Ok(output) => {
            for (plugin, warning) in &output.warnings {
                tracing::info!(runtime = %m.id(), plugin, warning, "plugin warning");
            }
            let desired = shoot_doc::desired(&output.shoot, &m.runtime);
            Ok(Ok((desired, output)))
        }
        Err(error) => {
            // Nothing reaches Gardener: the Runtime (or a plugin) must change first.
            let reason = match (&error.cause, error.field()) {
                (Failure::Plugin(_), Some(_)) => "InvalidRuntime",
                (Failure::Plugin(_), None) => "PluginRejected",
                _ => "PluginFailed",
            };
            let message = match error.field() {
                Some(field) => format!("{error} (field {field})"),
                None => error.to_string(),
            };
            Ok(Err(m.fail(reason, message)))
        }
    }
}

/// Remember what produced the applied Shoot.
pub fn record_applied(m: &mut Machine, desired: &Value, output: &ChainOutput) {
    m.status.plugins = output
        .digests
        .iter()
        .map(|(name, version, digest)| PluginStamp {
            name: name.clone(),
            version: version.clone(),
            digest: format!("sha256:{digest}"),
        })
        .collect();
    m.status.contract_version = m
        .ctx
        .renderer
        .chain
        .steps
        .first()
        .map(|s| s.plugin.info.contract_version.clone());
    m.status.shoot_hash = Some(shoot_doc::hash(desired));
}
