//! Golden cases for module reconcilers: module configuration, cluster facts and the objects
//! the cluster holds for each requirement → the desired objects, state, message, requeue
//! and requirements the plugin answers with (or the error it refuses with).
//!
//! The runner talks to the plugin the way the host does: it calls `reconcile` (or
//! `delete`), answers every requirement from the case's `observed` list (an empty list when
//! the case has none for a selector, as a cluster without such objects would), calls again,
//! and checks the last answer. The same bound on rounds applies.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;

use super::case::{CaseError, ExpectedError, case_paths, error_problems, pick, read_yaml};
use super::diff::{to_yaml, yaml_diff};
use crate::error::PluginError;
use crate::module::{
    ClusterFacts, MAX_REQUIREMENT_ROUNDS, ModuleState, RawDeleteOutput, RawModuleInput,
    RawReconcileOutput, Selector,
};

/// Which export a case calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModuleCall {
    #[default]
    Reconcile,
    Delete,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CaseFile {
    #[serde(default)]
    description: String,
    #[serde(default)]
    call: ModuleCall,
    module: Option<String>,
    version: Option<String>,
    config: Option<Value>,
    #[serde(default)]
    cluster: ClusterFacts,
    #[serde(default)]
    observed: Vec<ObservedFile>,
    expect: ExpectFile,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ObservedFile {
    selector: Selector,
    objects: Option<Vec<Value>>,
    objects_file: Option<PathBuf>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExpectFile {
    state: Option<ModuleState>,
    desired: Option<Vec<Value>>,
    desired_file: Option<PathBuf>,
    message: Option<String>,
    message_contains: Option<String>,
    requeue_after_seconds: Option<u32>,
    requirements: Option<Vec<Selector>>,
    remove: Option<Vec<Selector>>,
    error: Option<ExpectedError>,
}

/// What a module case expects; unset parts are not checked.
#[derive(Debug, Clone, Default)]
pub struct ModuleExpectation {
    pub state: Option<ModuleState>,
    pub desired: Option<Vec<Value>>,
    /// Where `expect.desiredFile` points, for `TESSERA_BLESS=1`.
    pub desired_file: Option<PathBuf>,
    pub message: Option<String>,
    pub message_contains: Option<String>,
    pub requeue_after_seconds: Option<u32>,
    /// Every selector the plugin asked for on the way, in order.
    pub requirements: Option<Vec<Selector>>,
    pub remove: Option<Vec<Selector>>,
    pub error: Option<ExpectedError>,
}

/// One loaded module case, with every referenced file resolved.
#[derive(Debug, Clone)]
pub struct ModuleCase {
    pub name: String,
    pub description: String,
    pub call: ModuleCall,
    /// The module's name in the ModuleSet; `None`: the plugin's name.
    pub module: Option<String>,
    pub version: String,
    pub config: Value,
    pub cluster: ClusterFacts,
    /// What the cluster holds for each selector the plugin may ask for.
    pub observed: Vec<(Selector, Vec<Value>)>,
    pub expect: ModuleExpectation,
}

/// A plugin's answer to one call.
#[derive(Debug, Clone, PartialEq)]
pub enum ModuleAnswer {
    Reconcile(RawReconcileOutput),
    Delete(RawDeleteOutput),
}

impl ModuleAnswer {
    fn requirements(&self) -> &[Selector] {
        match self {
            Self::Reconcile(out) => &out.requirements,
            Self::Delete(out) => &out.requirements,
        }
    }

    fn state_and_message(&self) -> (ModuleState, Option<&str>) {
        match self {
            Self::Reconcile(out) => (out.state, out.message.as_deref()),
            Self::Delete(out) => (out.state, out.message.as_deref()),
        }
    }
}

/// How one call ended, from the runner's point of view.
#[derive(Debug)]
pub enum ModuleOutcome {
    Answer(ModuleAnswer),
    /// The plugin returned a `plugin-error`.
    PluginError(PluginError),
    /// The host could not get an answer (trap, timeout, bad output ...), or the plugin broke
    /// the requirements protocol.
    HostError(String),
}

/// The end of a conversation: the last outcome and what the plugin asked for on the way.
#[derive(Debug)]
pub struct Conversation {
    pub outcome: ModuleOutcome,
    pub asked: Vec<Selector>,
    /// Requirements the case had no `observed` entry for (answered with no objects).
    pub unanswered: Vec<Selector>,
    pub calls: usize,
}

fn load_observed(
    entries: Vec<ObservedFile>,
    base: &Path,
) -> Result<Vec<(Selector, Vec<Value>)>, CaseError> {
    entries
        .into_iter()
        .map(|o| {
            let objects = pick("objects", o.objects.map(Value::from), o.objects_file, base)?
                .unwrap_or(Value::Array(Vec::new()));
            match objects {
                Value::Array(items) => Ok((o.selector, items)),
                _ => Err(CaseError("`objects`/`objectsFile` must be a list".into())),
            }
        })
        .collect()
}

fn load_expectation(
    file: ExpectFile,
    call: ModuleCall,
    base: &Path,
) -> Result<ModuleExpectation, CaseError> {
    let desired_file = file.desired_file.as_ref().map(|f| base.join(f));
    let bless = std::env::var_os("TESSERA_BLESS").is_some();
    let desired = match (&desired_file, bless) {
        // A snapshot that is about to be (re)written need not exist yet.
        (Some(path), true) if !path.exists() => Some(Vec::new()),
        _ => match pick(
            "desired",
            file.desired.map(Value::from),
            file.desired_file,
            base,
        )? {
            Some(Value::Array(items)) => Some(items),
            Some(_) => return Err(CaseError("`desired`/`desiredFile` must be a list".into())),
            None => None,
        },
    };
    if file.state.is_some() == file.error.is_some() {
        return Err(CaseError(
            "`expect` needs exactly one of `state` or `error`".into(),
        ));
    }
    if call == ModuleCall::Delete && desired.is_some() {
        return Err(CaseError(
            "a delete call has no `desired`; expect `remove`".into(),
        ));
    }
    if call == ModuleCall::Reconcile && file.remove.is_some() {
        return Err(CaseError(
            "a reconcile call has no `remove`; expect `desired`".into(),
        ));
    }
    Ok(ModuleExpectation {
        state: file.state,
        desired,
        desired_file,
        message: file.message,
        message_contains: file.message_contains,
        requeue_after_seconds: file.requeue_after_seconds,
        requirements: file.requirements,
        remove: file.remove,
        error: file.error,
    })
}

/// Load every `*.yaml` module case in `dir`, sorted by file name.
pub fn load_module_cases(dir: &Path) -> Result<Vec<ModuleCase>, CaseError> {
    case_paths(dir)?
        .iter()
        .map(|p| ModuleCase::load(p))
        .collect()
}

impl ModuleCase {
    /// Load one case file.
    pub fn load(path: &Path) -> Result<Self, CaseError> {
        let base = path.parent().unwrap_or(Path::new("."));
        let ctx = |e: CaseError| CaseError(format!("{}: {}", path.display(), e.0));
        let file: CaseFile = serde_json::from_value(read_yaml(path)?)
            .map_err(|e| CaseError(format!("{}: {e}", path.display())))?;
        Ok(Self {
            name: path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            description: file.description,
            call: file.call,
            module: file.module,
            version: file.version.unwrap_or_else(|| "1.0.0".into()),
            config: file.config.unwrap_or_else(|| serde_json::json!({})),
            cluster: file.cluster,
            observed: load_observed(file.observed, base).map_err(ctx)?,
            expect: load_expectation(file.expect, file.call, base).map_err(ctx)?,
        })
    }

    /// The raw input of one call, identical natively and in Wasm.
    pub fn input(&self, plugin: &str, observed: &[(Selector, Vec<String>)]) -> RawModuleInput {
        RawModuleInput {
            module: self.module.clone().unwrap_or_else(|| plugin.to_string()),
            version: self.version.clone(),
            config: self.config.to_string(),
            cluster: self.cluster.clone(),
            observed: observed.to_vec(),
        }
    }

    fn answer(&self, selector: &Selector) -> Option<Vec<String>> {
        self.observed
            .iter()
            .find(|(s, _)| s == selector)
            .map(|(_, objects)| objects.iter().map(Value::to_string).collect())
    }

    /// Talk to the plugin as the host does: call, answer its requirements, call again.
    pub fn converse(
        &self,
        plugin: &str,
        mut call: impl FnMut(ModuleCall, &RawModuleInput) -> ModuleOutcome,
    ) -> Conversation {
        let mut observed: Vec<(Selector, Vec<String>)> = Vec::new();
        let (mut asked, mut unanswered) = (Vec::new(), Vec::new());
        for calls in 1..=MAX_REQUIREMENT_ROUNDS {
            let outcome = call(self.call, &self.input(plugin, &observed));
            let wanted = match &outcome {
                ModuleOutcome::Answer(answer) if !answer.requirements().is_empty() => {
                    answer.requirements().to_vec()
                }
                _ => {
                    return Conversation {
                        outcome,
                        asked,
                        unanswered,
                        calls,
                    };
                }
            };
            let new: Vec<Selector> = wanted
                .into_iter()
                .filter(|s| !observed.iter().any(|(o, _)| o == s))
                .collect();
            if new.is_empty() {
                let outcome = ModuleOutcome::HostError(format!(
                    "{plugin} asks again for objects it was given"
                ));
                return Conversation {
                    outcome,
                    asked,
                    unanswered,
                    calls,
                };
            }
            for selector in new {
                let objects = self.answer(&selector).unwrap_or_else(|| {
                    unanswered.push(selector.clone());
                    Vec::new()
                });
                observed.push((selector.clone(), objects));
                asked.push(selector);
            }
        }
        let outcome = ModuleOutcome::HostError(format!(
            "{plugin} still asks for more objects after {MAX_REQUIREMENT_ROUNDS} rounds"
        ));
        Conversation {
            outcome,
            asked,
            unanswered,
            calls: MAX_REQUIREMENT_ROUNDS,
        }
    }

    /// Compare a conversation's end with the expectation; `None` means the case passed.
    pub fn check(&self, conversation: &Conversation) -> Option<String> {
        let mut problems = match (&conversation.outcome, &self.expect.error) {
            (ModuleOutcome::Answer(answer), None) => self.answer_problems(answer),
            (ModuleOutcome::Answer(answer), Some(expected)) => vec![format!(
                "expected a {} error, but the plugin answered {:?}",
                expected.kind,
                answer.state_and_message().0
            )],
            (ModuleOutcome::PluginError(err), Some(expected)) => {
                error_problems(err, expected).into_iter().collect()
            }
            (ModuleOutcome::PluginError(err), None) => {
                vec![format!("expected an answer, but the plugin failed: {err}")]
            }
            (ModuleOutcome::HostError(err), _) => {
                vec![format!("the plugin could not be run: {err}")]
            }
        };
        if let Some(expected) = &self.expect.requirements
            && expected != &conversation.asked
        {
            problems.push(format!(
                "requirements differ:\n{}",
                yaml_diff(
                    &selectors_value(expected),
                    &selectors_value(&conversation.asked)
                )
            ));
        }
        if problems.is_empty() {
            return None;
        }
        if !conversation.unanswered.is_empty() {
            problems.push(format!(
                "answered with no objects (the case's `observed` has no entry for them):\n{}",
                to_yaml(&selectors_value(&conversation.unanswered))
            ));
        }
        Some(problems.join("\n"))
    }

    fn answer_problems(&self, answer: &ModuleAnswer) -> Vec<String> {
        let expect = &self.expect;
        let (state, message) = answer.state_and_message();
        let mut problems = Vec::new();
        if let Some(expected) = expect.state
            && expected != state
        {
            problems.push(format!(
                "state {state:?} instead of {expected:?} (message: {})",
                message.unwrap_or("none")
            ));
        }
        if let Some(expected) = &expect.message
            && Some(expected.as_str()) != message
        {
            problems.push(format!("message {message:?} instead of {expected:?}"));
        }
        if let Some(part) = &expect.message_contains
            && !message.is_some_and(|m| m.contains(part.as_str()))
        {
            problems.push(format!("message {message:?} lacks {part:?}"));
        }
        match answer {
            ModuleAnswer::Reconcile(out) => problems.extend(self.reconcile_problems(out)),
            ModuleAnswer::Delete(out) => {
                if let Some(expected) = &expect.remove
                    && expected != &out.remove
                {
                    problems.push(format!(
                        "remove differs:\n{}",
                        yaml_diff(&selectors_value(expected), &selectors_value(&out.remove))
                    ));
                }
            }
        }
        problems
    }

    fn reconcile_problems(&self, out: &RawReconcileOutput) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(expected) = self.expect.requeue_after_seconds
            && Some(expected) != out.requeue_after_seconds
        {
            problems.push(format!(
                "requeueAfterSeconds {:?} instead of {expected}",
                out.requeue_after_seconds
            ));
        }
        if let Some(expected) = &self.expect.desired {
            match desired_values(out) {
                Ok(actual) if &actual == expected => {}
                Ok(actual) => problems.push(format!(
                    "the desired objects differ from the expectation:\n{}",
                    yaml_diff(&Value::from(expected.clone()), &Value::from(actual))
                )),
                Err(err) => problems.push(err),
            }
        }
        problems
    }
}

/// The desired objects of an answer, parsed.
pub fn desired_values(out: &RawReconcileOutput) -> Result<Vec<Value>, String> {
    out.desired
        .iter()
        .enumerate()
        .map(|(i, json)| {
            serde_json::from_str(json).map_err(|e| format!("desired[{i}] is not JSON: {e}"))
        })
        .collect()
}

fn selectors_value(selectors: &[Selector]) -> Value {
    serde_json::to_value(selectors).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selector(name: &str) -> Selector {
        Selector::named("v1", "ConfigMap", Some("default"), name)
    }

    fn case(yaml: &str) -> ModuleCase {
        let dir = tempfile_dir();
        let path = dir.join("case.yaml");
        std::fs::write(&path, yaml).unwrap();
        let case = ModuleCase::load(&path).unwrap();
        std::fs::remove_dir_all(dir).unwrap();
        case
    }

    fn tempfile_dir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "tessera-module-case-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn asking(requirements: Vec<Selector>) -> ModuleOutcome {
        ModuleOutcome::Answer(ModuleAnswer::Reconcile(RawReconcileOutput {
            desired: vec![],
            state: ModuleState::Processing,
            message: None,
            requeue_after_seconds: None,
            requirements,
        }))
    }

    const READY: &str = "expect: {state: Ready}";

    #[test]
    fn requirements_are_answered_from_observed_then_called_again() {
        let case = case(
            "observed:\n  - selector: {apiVersion: v1, kind: ConfigMap, namespace: default, name: a}\n    objects: [{apiVersion: v1, kind: ConfigMap, metadata: {name: a}}]\nexpect: {state: Ready, requirements: [{apiVersion: v1, kind: ConfigMap, namespace: default, name: a}]}",
        );
        let conversation = case.converse("p", |_, input| match input.observed.as_slice() {
            [] => asking(vec![selector("a")]),
            [(s, objects)] if s == &selector("a") && objects.len() == 1 => {
                ModuleOutcome::Answer(ModuleAnswer::Reconcile(RawReconcileOutput {
                    desired: vec![],
                    state: ModuleState::Ready,
                    message: None,
                    requeue_after_seconds: None,
                    requirements: vec![],
                }))
            }
            other => panic!("unexpected input {other:?}"),
        });
        assert_eq!(conversation.calls, 2);
        assert_eq!(case.check(&conversation), None);
    }

    #[test]
    fn asking_again_or_forever_is_a_failure_like_in_the_host() {
        let again = case(READY).converse("p", |_, _| asking(vec![selector("a")]));
        let failure = case(READY).check(&again).unwrap();
        assert!(
            failure.contains("asks again for objects it was given"),
            "{failure}"
        );
        let mut n = 0;
        let forever = case(READY).converse("p", |_, _| {
            n += 1;
            asking(vec![selector(&format!("x{n}"))])
        });
        assert_eq!(forever.calls, MAX_REQUIREMENT_ROUNDS);
        let failure = case(READY).check(&forever).unwrap();
        assert!(failure.contains("after 5 rounds"), "{failure}");
        assert!(failure.contains("answered with no objects"), "{failure}");
    }

    #[test]
    fn a_wrong_answer_shows_a_diff_of_the_desired_objects() {
        let case = case(
            "expect: {state: Ready, desired: [{apiVersion: v1, kind: Namespace, metadata: {name: a}}]}",
        );
        let conversation = case.converse("p", |_, _| {
            ModuleOutcome::Answer(ModuleAnswer::Reconcile(RawReconcileOutput {
                desired: vec![
                    r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"b"}}"#.into(),
                ],
                state: ModuleState::Ready,
                message: None,
                requeue_after_seconds: None,
                requirements: vec![],
            }))
        });
        let failure = case.check(&conversation).unwrap();
        assert!(
            failure.contains("-    name: a") && failure.contains("+    name: b"),
            "{failure}"
        );
    }

    #[test]
    fn case_files_that_cannot_be_checked_are_refused() {
        let dir = tempfile_dir();
        for (yaml, why) in [
            ("expect: {}", "exactly one of `state` or `error`"),
            (
                "call: delete\nexpect: {state: Ready, desired: []}",
                "no `desired`",
            ),
            ("expect: {state: Ready, remove: []}", "no `remove`"),
            ("expect: {state: Ready}\nconfg: {}", "unknown field"),
        ] {
            let path = dir.join("bad.yaml");
            std::fs::write(&path, yaml).unwrap();
            let err = ModuleCase::load(&path).unwrap_err().to_string();
            assert!(err.contains(why), "{yaml}: {err}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }
}
