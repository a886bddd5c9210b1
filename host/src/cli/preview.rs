//! `tessera modules apply --dry-run`: print what one pass would create, change and delete.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::sync::Arc;

use tessera::modules::set::{Change, ModulePreview, SetRequest, preview_set};
use tessera::modules::{DirectorySource, State, Target};
use tessera::wasm::WasmRuntime;
use tessera_sdk::testing::{to_yaml, yaml_diff_labelled};

/// Preview `request` on `target` and print it; exit status 1 when a module errs or an
/// object would be refused.
pub(crate) async fn preview(
    target: &Target,
    wasm: &Arc<WasmRuntime>,
    source: &DirectorySource,
    request: &SetRequest<'_>,
) -> anyhow::Result<ExitCode> {
    let modules = preview_set(target, wasm, source, request).await?;
    print!("{}", render(&request.set, &modules));
    let failed = modules.iter().any(|m| {
        m.state == State::Error
            || m.objects
                .iter()
                .any(|o| matches!(o.change, Change::Refused(_)))
    });
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The whole preview as text: a block per module, a line per object (`+` created, `~`
/// changed with its diff, `-` deleted, `!` refused, `?` not checked), then the counts.
fn render(set: &str, modules: &[ModulePreview]) -> String {
    let mut out = format!("ModuleSet {set} (dry run: nothing was written)\n");
    let mut counts = [0usize; 4];
    for m in modules {
        let version = m.version.as_deref().unwrap_or("-");
        let message = m.message.as_deref().unwrap_or("");
        let _ = writeln!(out, "{} {version}: {} {message}", m.name, m.state);
        for o in &m.objects {
            let (mark, note, body) = match &o.change {
                Change::Create(after) => (
                    '+',
                    "created".to_string(),
                    Some(indent(&to_yaml(after), "+ ")),
                ),
                Change::Update { before, after } => (
                    '~',
                    "changed".to_string(),
                    Some(indent(
                        &yaml_diff_labelled(before, after, ("live", "after apply")),
                        "",
                    )),
                ),
                Change::Unchanged => ('=', "unchanged".to_string(), None),
                Change::Prune => ('-', "deleted".to_string(), None),
                Change::Refused(why) => ('!', format!("refused: {why}"), None),
                Change::Unchecked(why) => ('?', format!("not checked: {why}"), None),
            };
            if let Some(i) = "+~-=".find(mark) {
                counts[i] += 1;
            }
            let _ = writeln!(out, "  {mark} {} ({note})", o.object);
            if let Some(body) = body {
                out.push_str(&body);
            }
        }
    }
    let [created, changed, deleted, unchanged] = counts;
    let _ = writeln!(
        out,
        "{created} to create, {changed} to change, {deleted} to delete, {unchanged} unchanged"
    );
    out
}

fn indent(text: &str, prefix: &str) -> String {
    text.lines()
        .map(|l| format!("      {prefix}{l}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tessera::modules::set::ObjectPreview;

    #[test]
    fn a_preview_shows_diffs_and_counts() {
        let before = json!({"kind": "ConfigMap", "data": {"endpoint": "a:4317"}});
        let after = json!({"kind": "ConfigMap", "data": {"endpoint": "b:4317"}});
        let object = |name: &str, change| ObjectPreview {
            object: format!("ConfigMap ns/{name}"),
            change,
        };
        let modules = [ModulePreview {
            name: "telemetry".into(),
            version: Some("1.0.0".into()),
            state: State::Ready,
            message: None,
            objects: vec![
                object("config", Change::Update { before, after }),
                object("new", Change::Create(json!({"kind": "ConfigMap"}))),
                object("old", Change::Prune),
                object("same", Change::Unchanged),
                object("x", Change::Refused("exists".into())),
            ],
        }];
        let text = render("ops/edge", &modules);
        for line in [
            "telemetry 1.0.0: Ready",
            "~ ConfigMap ns/config (changed)",
            "-  endpoint: a:4317",
            "+  endpoint: b:4317",
            "+ kind: ConfigMap",
            "- ConfigMap ns/old (deleted)",
            "! ConfigMap ns/x (refused: exists)",
            "1 to create, 1 to change, 1 to delete, 1 unchanged",
        ] {
            assert!(text.contains(line), "{line:?} missing from:\n{text}");
        }
    }
}
