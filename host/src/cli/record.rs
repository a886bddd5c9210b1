//! `tessera modules record`: the exact input a module's plugin gets from the cluster now, and
//! its answer, written as a golden case that `tessera plugin test` replays.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use serde_json::{Map, Value, json};
use tessera::modules::set::{Recorded, SetRequest, record_module};
use tessera::modules::{DirectorySource, Target};
use tessera::wasm::WasmRuntime;

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
    let text = serde_saphyr::to_string(&case_document(&recorded, &description))?;
    match case {
        Some(path) => {
            std::fs::write(path, text)
                .with_context(|| format!("cannot write {}", path.display()))?;
            eprintln!("wrote {}", path.display());
        }
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
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
}
