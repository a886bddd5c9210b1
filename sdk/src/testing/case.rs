use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::Outcome;
use super::diff::yaml_diff;
use crate::error::{ErrorKind, PluginError};
use crate::glue::RawExtendInput;
use crate::shoot_extension::Operation;
use crate::util::merge_patch;

/// A case file could not be read or understood.
#[derive(Debug)]
pub struct CaseError(pub String);

impl std::fmt::Display for CaseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CaseError {}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CaseFile {
    #[serde(default)]
    description: String,
    #[serde(default)]
    operation: Operation,
    runtime: Option<Value>,
    runtime_file: Option<PathBuf>,
    runtime_patch: Option<Value>,
    draft: Option<Value>,
    draft_file: Option<PathBuf>,
    current_shoot: Option<Value>,
    current_shoot_file: Option<PathBuf>,
    #[serde(default)]
    config: Option<Value>,
    expect: ExpectFile,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExpectFile {
    shoot: Option<Value>,
    shoot_file: Option<PathBuf>,
    warnings: Option<Vec<String>>,
    error: Option<ExpectedError>,
}

/// The error a case expects.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExpectedError {
    pub kind: ErrorKind,
    #[serde(default)]
    pub field: Option<String>,
    #[serde(default)]
    pub message_contains: Option<String>,
}

/// One loaded golden case, with every referenced file resolved.
#[derive(Debug, Clone)]
pub struct GoldenCase {
    pub name: String,
    pub description: String,
    pub operation: Operation,
    pub runtime: Value,
    pub draft: Value,
    pub current_shoot: Option<Value>,
    pub config: Value,
    pub expected_shoot: Option<Value>,
    /// Where `expect.shootFile` points, for `TESSERA_BLESS=1`.
    pub expected_shoot_file: Option<PathBuf>,
    pub expected_warnings: Option<Vec<String>>,
    pub expected_error: Option<ExpectedError>,
}

pub(super) fn read_yaml(path: &Path) -> Result<Value, CaseError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| CaseError(format!("cannot read {}: {e}", path.display())))?;
    serde_saphyr::from_str(&text)
        .map_err(|e| CaseError(format!("{} is not valid YAML: {e}", path.display())))
}

pub(super) fn pick(
    name: &str,
    inline: Option<Value>,
    file: Option<PathBuf>,
    base: &Path,
) -> Result<Option<Value>, CaseError> {
    match (inline, file) {
        (Some(_), Some(_)) => Err(CaseError(format!(
            "set either `{name}` or `{name}File`, not both"
        ))),
        (Some(v), None) => Ok(Some(v)),
        (None, Some(f)) => {
            let path = base.join(f);
            if !path.exists() && matches!(name, "shoot" | "desired") {
                return Err(CaseError(format!(
                    "snapshot `{name}File` {} does not exist: `TESSERA_BLESS=1 cargo test` writes it",
                    path.display()
                )));
            }
            read_yaml(&path).map(Some)
        }
        (None, None) => Ok(None),
    }
}

/// The case files of a cases directory, sorted by file name: its `*.yaml` files except the
/// ones a case names as a file of its own (`desiredFile`, `shootFile`, `objectsFile`, ...).
/// A snapshot blessed beside the cases is data of a case, never a case itself.
pub(super) fn case_paths(dir: &Path) -> Result<Vec<PathBuf>, CaseError> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        CaseError(format!(
            "cannot read cases directory {}: {e}",
            dir.display()
        ))
    })?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .filter(|p| matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
        .collect();
    paths.sort();
    let mut referenced = std::collections::BTreeSet::new();
    for path in &paths {
        // A file that does not parse is reported when it is loaded as a case.
        if let Ok(value) = read_yaml(path) {
            collect_file_references(&value, dir, &mut referenced);
        }
    }
    Ok(paths
        .into_iter()
        .filter(|p| !referenced.contains(&normalize(p)))
        .collect())
}

/// The files a case names as its own data (`runtimeFile`, `draftFile`,
/// `currentShootFile`, `expect.shootFile`, `expect.desiredFile`, `observed[].objectsFile`),
/// as paths relative to `dir`. Keys inside configuration or objects are the plugin's data.
fn collect_file_references(
    value: &Value,
    dir: &Path,
    into: &mut std::collections::BTreeSet<PathBuf>,
) {
    let mut add = |file: &Value| {
        if let Some(file) = file.as_str() {
            into.insert(normalize(&dir.join(file)));
        }
    };
    for key in ["runtimeFile", "draftFile", "currentShootFile"] {
        add(&value[key]);
    }
    for key in ["shootFile", "desiredFile"] {
        add(&value["expect"][key]);
    }
    for observed in value["observed"].as_array().into_iter().flatten() {
        add(&observed["objectsFile"]);
    }
}

/// `a/./b/../c` as `a/c`, without touching the file system (the file may not exist yet).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir if out.file_name().is_some() => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Write a blessed snapshot, making its directory first; the error names the case (`name`
/// in the cases directory `dir`) and the path.
pub(super) fn write_snapshot(
    dir: &str,
    name: &str,
    path: &Path,
    text: &str,
) -> Result<(), CaseError> {
    let write = || -> std::io::Result<()> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, text)
    };
    write().map_err(|e| {
        CaseError(format!(
            "case {name} in {dir}: cannot write its snapshot {}: {e}",
            path.display()
        ))
    })
}

/// Load every `*.yaml` case in `dir`, sorted by file name.
pub fn load_cases(dir: &Path) -> Result<Vec<GoldenCase>, CaseError> {
    case_paths(dir)?
        .iter()
        .map(|p| GoldenCase::load(p))
        .collect()
}

/// What is wrong with a plugin error against the expected one; `None` when it matches.
pub(super) fn error_problems(err: &PluginError, expected: &ExpectedError) -> Option<String> {
    let mut problems = Vec::new();
    if err.kind != expected.kind {
        problems.push(format!("kind {} instead of {}", err.kind, expected.kind));
    }
    if expected.field.is_some() && err.field != expected.field {
        let field = |f: &Option<String>| f.clone().unwrap_or_else(|| "none".into());
        problems.push(format!(
            "field {} instead of {}",
            field(&err.field),
            field(&expected.field)
        ));
    }
    if let Some(part) = &expected.message_contains
        && !err.message.contains(part.as_str())
    {
        problems.push(format!("message {:?} lacks {part:?}", err.message));
    }
    (!problems.is_empty()).then(|| format!("wrong error ({}): {err}", problems.join("; ")))
}

impl GoldenCase {
    /// Load one case file.
    pub fn load(path: &Path) -> Result<Self, CaseError> {
        let base = path.parent().unwrap_or(Path::new("."));
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let value = read_yaml(path)?;
        let file: CaseFile = serde_json::from_value(value)
            .map_err(|e| CaseError(format!("{}: {e}", path.display())))?;
        let ctx = |e: CaseError| CaseError(format!("{}: {}", path.display(), e.0));
        let mut runtime = pick("runtime", file.runtime, file.runtime_file, base)
            .map_err(ctx)?
            .ok_or_else(|| {
                CaseError(format!(
                    "{}: `runtime` or `runtimeFile` is required",
                    path.display()
                ))
            })?;
        if let Some(patch) = &file.runtime_patch {
            merge_patch(&mut runtime, patch);
        }
        let draft = pick("draft", file.draft, file.draft_file, base)
            .map_err(ctx)?
            .unwrap_or_else(|| serde_json::json!({}));
        let current_shoot = pick(
            "currentShoot",
            file.current_shoot,
            file.current_shoot_file,
            base,
        )
        .map_err(ctx)?;
        let expected_shoot_file = file.expect.shoot_file.as_ref().map(|f| base.join(f));
        let bless = std::env::var_os("TESSERA_BLESS").is_some();
        let expected_shoot = match (&expected_shoot_file, bless) {
            // A snapshot that is about to be (re)written need not exist yet.
            (Some(path), true) if !path.exists() => Some(Value::Null),
            _ => pick("shoot", file.expect.shoot, file.expect.shoot_file, base).map_err(ctx)?,
        };
        if expected_shoot.is_some() == file.expect.error.is_some() {
            return Err(CaseError(format!(
                "{}: `expect` needs exactly one of `shoot`/`shootFile` or `error`",
                path.display()
            )));
        }
        Ok(Self {
            name,
            description: file.description,
            operation: file.operation,
            runtime,
            draft,
            current_shoot,
            config: file.config.unwrap_or_else(|| serde_json::json!({})),
            expected_shoot,
            expected_shoot_file,
            expected_warnings: file.expect.warnings,
            expected_error: file.expect.error,
        })
    }

    /// The raw input the plugin gets, identical natively and in Wasm.
    pub fn input(&self) -> RawExtendInput {
        RawExtendInput {
            runtime: self.runtime.to_string(),
            draft: self.draft.to_string(),
            operation: self.operation,
            current_shoot: self.current_shoot.as_ref().map(Value::to_string),
            config: self.config.to_string(),
        }
    }

    /// Compare an outcome with the expectation; `None` means the case passed.
    pub fn check(&self, outcome: Outcome) -> Option<String> {
        match (outcome, &self.expected_shoot, &self.expected_error) {
            (Outcome::Output(out), Some(expected), _) => {
                let actual: Value = match serde_json::from_str(&out.shoot) {
                    Ok(v) => v,
                    Err(e) => return Some(format!("the plugin returned invalid JSON: {e}")),
                };
                let mut problems = Vec::new();
                if &actual != expected {
                    problems.push(format!(
                        "the Shoot differs from the expectation:\n{}",
                        yaml_diff(expected, &actual)
                    ));
                }
                if let Some(warnings) = &self.expected_warnings
                    && warnings != &out.warnings
                {
                    problems.push(format!(
                        "warnings differ: expected {warnings:?}, got {:?}",
                        out.warnings
                    ));
                }
                (!problems.is_empty()).then(|| problems.join("\n"))
            }
            (Outcome::Output(out), None, Some(expected)) => Some(format!(
                "expected a {} error, but the plugin returned a Shoot (warnings: {:?})",
                expected.kind, out.warnings
            )),
            (Outcome::Output(_), None, None) => Some("the case expects nothing".into()),
            (Outcome::PluginError(err), _, Some(expected)) => error_problems(&err, expected),
            (Outcome::PluginError(err), _, None) => {
                Some(format!("expected a Shoot, but the plugin failed: {err}"))
            }
            (Outcome::HostError(err), _, _) => {
                Some(format!("the host could not run the plugin: {err}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tessera-cases-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A snapshot blessed beside its case (`desiredFile: renders.desired.yaml`) is the
    /// case's data, not a second case that fails to parse.
    #[test]
    fn a_snapshot_beside_the_cases_is_not_a_case() {
        let dir = scratch("beside");
        let case = "expect: {state: Ready, desiredFile: renders.desired.yaml}\n";
        std::fs::write(dir.join("renders.yaml"), case).unwrap();
        std::fs::write(dir.join("renders.desired.yaml"), "- {kind: Namespace}\n").unwrap();
        std::fs::create_dir_all(dir.join("expected")).unwrap();
        // A `…File` key in a plugin's configuration names the plugin's data, not a case's.
        let other = "config: {valuesFile: other.yaml}\nexpect: {state: Ready}\n";
        std::fs::write(dir.join("other.yaml"), other).unwrap();
        let paths = case_paths(&dir).unwrap();
        assert_eq!(
            paths,
            vec![dir.join("other.yaml"), dir.join("renders.yaml")]
        );
        let cases = crate::testing::load_module_cases(&dir).unwrap();
        assert_eq!(cases.len(), 2);
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Blessing into `cases/expected/` before the directory exists makes it; a snapshot
    /// that cannot be written names the case and the path.
    #[test]
    fn bless_makes_the_snapshot_directory_and_names_what_failed() {
        let dir = scratch("bless");
        let path = dir.join("expected/renders.yaml");
        write_snapshot("cases", "renders", &path, "[]\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "[]\n");
        let blocked = dir.join("expected/renders.yaml/below.yaml");
        let err = write_snapshot("cases", "renders", &blocked, "[]\n").unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("case renders in cases") && text.contains(&blocked.display().to_string()),
            "{text}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A snapshot that was never blessed is named, with how to write it.
    #[test]
    fn a_missing_snapshot_is_named_with_how_to_write_it() {
        let dir = scratch("missing");
        let case = dir.join("renders.yaml");
        std::fs::write(
            &case,
            "expect: {state: Ready, desiredFile: expected/renders.yaml}\n",
        )
        .unwrap();
        let err = crate::testing::ModuleCase::load(&case)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&case.display().to_string())
                && err.contains(&dir.join("expected/renders.yaml").display().to_string())
                && err.contains("TESSERA_BLESS=1"),
            "{err}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
