//! Golden cases from what plugins are given: `tessera modules record` (a module's plugin,
//! its requirements read from the cluster now) and `tessera render --record STEP` (one step
//! of a Runtime's chain), each input and answer written as a case `tessera plugin test`
//! replays.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use serde_json::{Map, Value, json};
use tessera::modules::set::{Recorded, SetRequest, record_module};
use tessera::modules::{DirectorySource, Target};
use tessera::plugins::chain::RecordedStep;
use tessera::wasm::WasmRuntime;
use tessera::wasm::{CallError, Failure};

/// What a recorded Secret's values become: the case must not carry credentials.
const REDACTED: &str = "REDACTED";

/// Record `module` of `request` into `case` (standard output when `None`).
pub(crate) async fn record(
    target: &Target,
    wasm: &Arc<WasmRuntime>,
    source: &DirectorySource,
    request: &SetRequest<'_>,
    module: &str,
    case: Option<&Path>,
) -> anyhow::Result<ExitCode> {
    let recorded = match record_module(target, wasm, source, request, module).await? {
        Ok(recorded) => recorded,
        Err(why) => {
            eprintln!("module {module}: {why}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let description = format!("recorded from module {module} of {}", request.set);
    write_case(&case_document(&recorded, &description), case)?;
    Ok(ExitCode::SUCCESS)
}

/// Write a case to `case`, or to standard output.
pub(crate) fn write_case(document: &Value, case: Option<&Path>) -> anyhow::Result<()> {
    let text = serde_saphyr::to_string(document)?;
    match case {
        Some(path) => {
            std::fs::write(path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
        None => print!("{text}"),
    }
    Ok(())
}

/// A shoot extension's golden case: its input as the chain gave it, its answer (the Shoot
/// and warnings it returned, or its error: kind, field and message) as the expectation.
/// `Err` when the call failed for another reason (a trap, a limit), which no case replays.
pub(crate) fn shoot_case(recorded: &RecordedStep, description: &str) -> anyhow::Result<Value> {
    let input = &recorded.input;
    let expect = match &recorded.answer {
        Ok(output) => json!({"shoot": parsed(&output.shoot), "warnings": output.warnings}),
        Err(CallError {
            cause: Failure::Plugin(error),
            ..
        }) => {
            let mut e = json!({"kind": error.kind, "messageContains": error.message});
            if let Some(field) = &error.field {
                e["field"] = json!(field);
            }
            json!({ "error": e })
        }
        Err(other) => anyhow::bail!("{other}"),
    };
    let mut case = json!({
        "description": description,
        "operation": input.operation,
        "runtime": parsed(&input.runtime),
        "draft": parsed(&input.draft),
        "config": parsed(&input.config),
        "expect": expect,
    });
    if let Some(current) = &input.current_shoot {
        case["currentShoot"] = parsed(current);
    }
    Ok(case)
}

/// The golden case: the input as the plugin got it, its answer as the expectation.
fn case_document(recorded: &Recorded, description: &str) -> Value {
    let (input, output) = (&recorded.input, &recorded.output);
    let observed: Vec<Value> = input
        .observed
        .iter()
        .map(|(selector, objects)| {
            let objects: Vec<Value> = objects.iter().map(|o| redacted(parsed(o))).collect();
            json!({"selector": selector, "objects": objects})
        })
        .collect();
    let mut expect = Map::new();
    expect.insert("state".into(), json!(output.state));
    if let Some(message) = &output.message {
        expect.insert("message".into(), json!(message));
    }
    if let Some(seconds) = output.requeue_after_seconds {
        expect.insert("requeueAfterSeconds".into(), json!(seconds));
    }
    let asked: Vec<&tessera_sdk::Selector> = input.observed.iter().map(|(s, _)| s).collect();
    expect.insert("requirements".into(), json!(asked));
    let desired: Vec<Value> = output.desired.iter().map(|o| redacted(parsed(o))).collect();
    expect.insert("desired".into(), Value::Array(desired));
    json!({
        "description": description,
        "module": input.module,
        "version": input.version,
        "config": parsed(&input.config),
        "cluster": input.cluster,
        "observed": observed,
        "expect": expect,
    })
}

fn parsed(json: &str) -> Value {
    serde_json::from_str(json).unwrap_or(Value::Null)
}

/// Without server bookkeeping, and a Secret without its values.
fn redacted(mut object: Value) -> Value {
    if let Some(meta) = object["metadata"].as_object_mut() {
        meta.remove("managedFields");
    }
    if object["kind"] == "Secret" {
        for (field, value) in [("data", "UkVEQUNURUQ="), ("stringData", REDACTED)] {
            if let Some(map) = object[field].as_object_mut() {
                map.values_mut().for_each(|v| *v = json!(value));
            }
        }
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_lose_their_values_and_objects_their_managed_fields() {
        let secret = redacted(json!({
            "kind": "Secret", "metadata": {"name": "s", "managedFields": [{}]},
            "data": {"password": "c2VjcmV0"}, "stringData": {"token": "t"},
        }));
        assert_eq!(secret["data"]["password"], "UkVEQUNURUQ=");
        assert_eq!(secret["stringData"]["token"], REDACTED);
        assert!(secret["metadata"].get("managedFields").is_none());
        let map = redacted(json!({"kind": "ConfigMap", "data": {"a": "b"}}));
        assert_eq!(map["data"]["a"], "b");
    }

    #[test]
    fn a_plugin_error_becomes_the_expected_error_and_a_trap_no_case() {
        let input = tessera_sdk::glue::RawExtendInput {
            runtime: "{}".into(),
            draft: r#"{"kind":"Shoot"}"#.into(),
            operation: tessera_sdk::Operation::Create,
            current_shoot: None,
            config: "{}".into(),
        };
        let failed = |cause| RecordedStep {
            input: input.clone(),
            answer: Err(CallError {
                plugin: "dns".into(),
                version: "1.0.0".into(),
                cause,
            }),
        };
        let error = tessera_sdk::PluginError::invalid_input("spec.shoot.domain", "not a domain");
        let case = shoot_case(&failed(Failure::Plugin(error)), "d").unwrap();
        assert_eq!(case["expect"]["error"]["field"], "spec.shoot.domain");
        assert_eq!(case["expect"]["error"]["kind"], "invalid-input");
        assert_eq!(case["draft"]["kind"], "Shoot");
        let trap = Failure::InvalidOutput("not JSON".into());
        assert!(shoot_case(&failed(trap), "d").is_err());
    }
}
