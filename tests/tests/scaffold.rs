//! What a new plugin team does, on the real pieces: `tessera plugin new` outside any
//! checkout, the crate's golden cases natively, its component, `tessera plugin
//! test/run/inspect` on it; and for a module, the whole path on to a cluster: push and sign
//! to the local registry, a `Plugin` and a `ModuleSet`, the module Ready on the target.
//! Each step's time is printed (`--nocapture`), not asserted.

use std::path::PathBuf;
use std::time::Instant;

use serde_json::json;
use tessera::modules::State;
use tessera_tests::env::ControlPlane;
use tessera_tests::gardener_sim::Script;
use tessera_tests::modules::{Fixture, kubectl_ok, state_is};
use tessera_tests::scaffold::{new_plugin_built, run, tessera};
use tessera_tests::{scenario, scenarios, workspace};

type Result<T = ()> = std::result::Result<T, String>;

/// The crate passes its cases on the Wasm build too; `run` and `inspect` work on it.
fn passes_everywhere(kind: &str, name: &str, mark: &str) -> Result {
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = tmp.path().join(name);
    let component = new_plugin_built(kind, name, &dir);
    let (component, cases) = (component.display().to_string(), dir.join("cases"));
    let cases_arg = cases.display().to_string();
    let out = run(
        "tessera plugin test",
        &mut tessera(&["plugin", "test", &component, "--cases", &cases_arg]),
    );
    if !out.contains(&format!("{name} 0.1.0: 2 passed, 0 failed")) {
        return Err(out);
    }
    let rendered = cases.join(if kind == "module-reconciler" {
        "renders.yaml"
    } else {
        "labels-the-shoot.yaml"
    });
    let case_arg = rendered.display().to_string();
    let answer = run(
        "tessera plugin run",
        &mut tessera(&["plugin", "run", &component, "--case", &case_arg]),
    );
    if !answer.contains(mark) {
        return Err(format!("plugin run lacks {mark:?}:\n{answer}"));
    }
    let inspected = run(
        "tessera plugin inspect",
        &mut tessera(&["plugin", "inspect", &component]),
    );
    // The configuration's schema, from the crate's `Config` type, travels in the component.
    let field = if kind == "module-reconciler" {
        "greeting: string"
    } else {
        "team: string"
    };
    if !inspected.contains(&format!("kind:      {kind}")) || !inspected.contains(field) {
        return Err(inspected);
    }
    Ok(())
}

async fn both_kinds_pass_their_cases(_: &ControlPlane) -> Result {
    passes_everywhere("module-reconciler", "hello-module", "state: Ready")?;
    passes_everywhere(
        "shoot-extension",
        "team-label",
        "example.com/team: platform",
    )
}

/// The grants the new crate asks for, as the operator writes them on its Plugin.
fn requested(dir: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(dir.join("requests.yaml")).unwrap();
    let requests = tessera::grants::Requests::parse(&text).unwrap();
    serde_json::to_value(requests.grants).unwrap()
}

/// Push and sign with one command, verify, then a Plugin and a ModuleSet.
async fn publish_and_install(f: &Fixture<'_>, dir: &std::path::Path, component: PathBuf) -> Result {
    let prefix = f.dir.path().join("team").display().to_string();
    let password = [("COSIGN_PASSWORD", "secret")];
    run(
        "tessera plugin keygen",
        tessera(&["plugin", "keygen", "--output-prefix", &prefix]).envs(password),
    );
    let reference = f.reference("greeter", "0.1.0");
    let (file, key) = (component.display().to_string(), format!("{prefix}.key"));
    run(
        "tessera plugin push --sign",
        tessera(&["plugin", "push", &file, &reference, "--sign", &key]).envs(password),
    );
    let public = format!("{prefix}.pub");
    run(
        "tessera plugin verify",
        &mut tessera(&["plugin", "verify", &reference, "--key", &public]),
    );
    f.plugin(
        "greeter",
        json!({
            "kind": "module-reconciler",
            "versions": [{"version": "0.1.0", "ref": reference}],
            "channels": [{"name": "regular", "version": "0.1.0"}],
            "grants": requested(dir),
        }),
    )
    .await?;
    f.apply_set(
        "greeting",
        json!({"modules": [{"name": "greeter", "config": {"greeting": "hi from a new team"}}]}),
    )
    .await
}

/// `plugin new` to a Ready module on the cluster, as the plugin author guide walks it.
async fn a_new_module_reaches_ready(cp: &ControlPlane) -> Result {
    let started = Instant::now();
    let f = Fixture::new(cp, "scaffold").await?;
    let dir = f.dir.path().join("greeter");
    let component = new_plugin_built("module-reconciler", "greeter", &dir);
    let host = f.host("a");
    publish_and_install(&f, &dir, component).await?;
    f.wait_set("greeting", &host, "Ready", |s| state_is(s, State::Ready))
        .await?;
    let settings = kubectl_ok(
        &cp.garden,
        &[
            "get",
            "configmap",
            "greeter-settings",
            "-n",
            "greeter",
            "-o",
            "json",
        ],
    )?;
    if !settings.contains("hi from a new team") {
        return Err(format!("the module's ConfigMap:\n{settings}"));
    }
    eprintln!("plugin new → module Ready: {:.1?}", started.elapsed());
    Ok(())
}

/// A Python project from `plugin new --lang python`, built by componentize-py (from PyPI)
/// and tested with the same harness; the component's path. Sizes and times are printed.
fn python_component(f: &Fixture<'_>) -> Result<String> {
    let componentize = run(
        "ensure componentize-py",
        &mut std::process::Command::new(workspace().join("tests/python/ensure-componentize.sh")),
    );
    let dir = f.dir.path().join("py-greeter");
    let dir_arg = dir.display().to_string();
    let new = [
        "plugin",
        "new",
        "py-greeter",
        "--kind",
        "module-reconciler",
        "--lang",
        "python",
    ];
    run(
        "tessera plugin new --lang python",
        &mut tessera(&[&new[..], &["--dir", &dir_arg]].concat()),
    );
    let component = dir.join("py-greeter.wasm").display().to_string();
    run(
        "componentize-py",
        std::process::Command::new(componentize.trim())
            .current_dir(&dir)
            .args([
                "-d",
                "wit",
                "-w",
                "module-reconciler",
                "componentize",
                "app",
            ])
            .args(["-p", ".", "--stub-wasi", "-o", &component]),
    );
    let size = std::fs::metadata(&component)
        .map_err(|e| e.to_string())?
        .len();
    eprintln!("Python component: {size} bytes");
    let cases = dir.join("cases").display().to_string();
    let out = run(
        "tessera plugin test (compiles)",
        &mut tessera(&["plugin", "test", &component, "--cases", &cases]),
    );
    if !out.contains("py-greeter 0.1.0: 2 passed, 0 failed") {
        return Err(out);
    }
    let bench = [
        "plugin",
        "bench",
        &component,
        "--cases",
        &cases,
        "--iterations",
        "200",
    ];
    eprint!("{}", run("tessera plugin bench", &mut tessera(&bench)));
    Ok(component)
}

/// A Python module reconciler: built and tested as above, then a registry, a Plugin and a
/// ModuleSet, and the module Ready on the cluster.
async fn a_python_module_reaches_ready(cp: &ControlPlane) -> Result {
    let f = Fixture::new(cp, "scaffold-py").await?;
    let component = python_component(&f)?;
    f.push_path(std::path::Path::new(&component), "py-greeter", "0.1.0")?;
    f.plugin(
        "py-greeter",
        json!({
            "kind": "module-reconciler",
            "versions": [{"version": "0.1.0", "ref": f.reference("py-greeter", "0.1.0")}],
            "channels": [{"name": "regular", "version": "0.1.0"}],
            "grants": {"write": [
                {"apiGroups": [""], "kinds": ["Namespace"], "clusterScoped": true, "names": ["py-greeter"]},
                {"apiGroups": [""], "kinds": ["ConfigMap"], "namespaces": ["py-greeter"]},
            ]},
        }),
    )
    .await?;
    let host = f.host("a");
    f.apply_set(
        "py",
        json!({"modules": [{"name": "py-greeter", "config": {"greeting": "hi from Python"}}]}),
    )
    .await?;
    f.wait_set("py", &host, "Ready", |s| state_is(s, State::Ready))
        .await?;
    let settings = kubectl_ok(
        &cp.garden,
        &[
            "get",
            "configmap",
            "py-greeter-settings",
            "-n",
            "py-greeter",
            "-o",
            "json",
        ],
    )?;
    if !settings.contains("hi from Python") {
        return Err(format!("the module's ConfigMap:\n{settings}"));
    }
    Ok(())
}

fn main() {
    let sim = PathBuf::from(env!("CARGO_BIN_EXE_gardener-sim"));
    scenarios::run(
        &sim,
        &Script::quick(),
        vec![
            scenario!(both_kinds_pass_their_cases),
            scenario!(a_new_module_reaches_ready),
            scenario!(a_python_module_reaches_ready),
        ],
    )
}
