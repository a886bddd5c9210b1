//! `tessera plugin run`: one plugin, one case file, the output printed — what the plugin
//! answers, without comparing it with the case's expectation.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::{Value, json};
use tessera::harness::converse_module;
use tessera::wasm::{CallContext, Failure, LoadedModule, LoadedPlugin, WasmRuntime};
use tessera_sdk::testing::{GoldenCase, ModuleAnswer, ModuleCase, ModuleOutcome, desired_values};

use super::DocFormat;
use super::plugin::read_plugin;
use tessera::wasm::Limits;
use tessera::wasm::Loaded;

/// Run `plugin` on `case` and print its answer; status 1 when the plugin refused or failed.
pub fn run_case(
    rt: &WasmRuntime,
    plugin: &Path,
    case: &Path,
    limits: &Limits,
    format: DocFormat,
) -> anyhow::Result<ExitCode> {
    let (doc, ok) = match read_plugin(rt, plugin)? {
        Loaded::Extension(p) => extension(rt, &p, case, limits)?,
        Loaded::Module(m) => module(rt, &m, case, limits)?,
    };
    format.print(&doc)?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn extension(
    rt: &WasmRuntime,
    plugin: &LoadedPlugin,
    case: &Path,
    limits: &Limits,
) -> anyhow::Result<(Value, bool)> {
    let case = GoldenCase::load(case)?;
    let ctx = CallContext {
        runtime_id: case.name.clone(),
    };
    Ok(match plugin.extend(rt, case.input(), limits, &ctx) {
        Ok(out) => {
            let shoot: Value = serde_json::from_str(&out.shoot)
                .context("the plugin returned a Shoot that is not JSON")?;
            (json!({"shoot": shoot, "warnings": out.warnings}), true)
        }
        Err(err) => (failure(err.cause), false),
    })
}

fn module(
    rt: &WasmRuntime,
    module: &LoadedModule,
    case: &Path,
    limits: &Limits,
) -> anyhow::Result<(Value, bool)> {
    let case = ModuleCase::load(case)?;
    let conversation = converse_module(rt, module, &case, limits);
    let head = json!({"calls": conversation.calls, "requirements": conversation.asked});
    let (answer, ok) = match conversation.outcome {
        ModuleOutcome::Answer(ModuleAnswer::Reconcile(out)) => {
            let desired = desired_values(&out).map_err(anyhow::Error::msg)?;
            let answer = json!({
                "state": out.state, "message": out.message,
                "requeueAfterSeconds": out.requeue_after_seconds, "desired": desired,
            });
            (answer, true)
        }
        ModuleOutcome::Answer(ModuleAnswer::Delete(out)) => (
            json!({"state": out.state, "message": out.message, "remove": out.remove}),
            true,
        ),
        ModuleOutcome::PluginError(err) => (json!({"error": err}), false),
        ModuleOutcome::HostError(message) => (json!({"failure": message}), false),
    };
    let mut doc = head;
    if let (Some(doc), Some(answer)) = (doc.as_object_mut(), answer.as_object()) {
        doc.extend(answer.clone());
    }
    Ok((doc, ok))
}

fn failure(cause: Failure) -> Value {
    match cause {
        Failure::Plugin(err) => json!({"error": err}),
        other => json!({"failure": other.to_string()}),
    }
}
