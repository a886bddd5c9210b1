//! The `tessera` binary as users run it: output, exit codes and error messages.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn workspace() -> PathBuf {
    // Run time, not compile time: the binary may be cached from another checkout.
    Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap())
        .parent()
        .unwrap()
        .to_path_buf()
}

fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_tessera"))
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf()
}

fn plugins() -> PathBuf {
    std::env::var_os("TESSERA_PLUGIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("plugins"))
}

fn test_plugins() -> PathBuf {
    std::env::var_os("TESSERA_TEST_PLUGIN_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("test-plugins"))
}

/// One precompiled cache for the whole test binary, so each plugin compiles once.
fn cache_dir() -> &'static Path {
    static CACHE: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    CACHE.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

fn tessera(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
        .current_dir(workspace())
        .env("TESSERA_PLUGIN_DIR", plugins())
        .env("TESSERA_CACHE_DIR", cache_dir())
        .args(args)
        .output()
        .expect("run tessera")
}

/// Render the AWS example with a chain configuration file holding `config` (plus `args`).
fn render_with_config(config: &str, args: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tessera.yaml");
    std::fs::write(&path, config).unwrap();
    let mut all = args.to_vec();
    all.extend([
        "render",
        "--runtime",
        "examples/runtime-aws.yaml",
        "--config",
        path.to_str().unwrap(),
    ]);
    tessera(&all)
}

/// A chain of `base` and the hostile test plugin in `mode`, with extra YAML for its settings.
fn hostile_chain(mode: &str, settings: &str) -> String {
    format!(
        "chain: [base, hostile]\nplugins:\n  hostile:\n    file: {}\n    config: {{mode: {mode}}}\n{settings}",
        test_plugins().join("hostile.wasm").display()
    )
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn yaml(text: &str) -> serde_json::Value {
    serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn render_prints_the_shoot_and_warnings() {
    let out = tessera(&["render", "--runtime", "examples/runtime-aws.yaml"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let expected = yaml(
        &std::fs::read_to_string(workspace().join("examples/expected/shoot-aws.yaml")).unwrap(),
    );
    assert_eq!(yaml(&text(&out.stdout)), expected);
    assert!(
        text(&out.stderr).contains("warning: [auditlog] no audit log tenant"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn render_with_current_shoot_patches() {
    let dir = tempfile::tempdir().unwrap();
    let current = dir.path().join("current.yaml");
    let mut shoot = yaml(
        &std::fs::read_to_string(workspace().join("examples/expected/shoot-aws.yaml")).unwrap(),
    );
    shoot["spec"]["kubernetes"]["version"] = "1.34.2".into();
    std::fs::write(&current, shoot.to_string()).unwrap();
    let out = tessera(&[
        "render",
        "--runtime",
        "examples/runtime-aws.yaml",
        "--current-shoot",
        current.to_str().unwrap(),
        "--output",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rendered: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        rendered["spec"]["kubernetes"]["version"], "1.34.2",
        "no downgrade on patch"
    );
    assert!(text(&out.stderr).contains("not downgrading to 1.33"));
}

#[test]
fn compare_live_names_the_fields_a_takeover_would_patch() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live.yaml");
    let compare = |live_shoot: &serde_json::Value| {
        std::fs::write(&live, live_shoot.to_string()).unwrap();
        let path = live.to_str().unwrap();
        let args = [
            "render",
            "--runtime",
            "examples/runtime-aws.yaml",
            "--current-shoot",
            path,
        ];
        tessera(&[&args[..], &["--compare-live"]].concat())
    };
    // The live Shoot as Gardener keeps it: the render plus what Gardener and KIM add.
    let rendered = tessera(&[
        "render",
        "--runtime",
        "examples/runtime-aws.yaml",
        "-o",
        "json",
    ]);
    let mut shoot: serde_json::Value = serde_json::from_slice(&rendered.stdout).unwrap();
    shoot["status"] = serde_json::json!({"lastOperation": {"state": "Succeeded"}});
    shoot["spec"]["kubernetes"]["kubeProxy"] = serde_json::json!({"enabled": true});
    shoot["metadata"]["annotations"]["infrastructuremanager.kyma-project.io/runtime-generation"] =
        "12".into();
    let out = compare(&shoot);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("matches the live Shoot"));
    shoot["spec"]["provider"]["workers"][0]["maximum"] = 99.into();
    shoot["spec"]["region"] = "eu-west-1".into();
    let out = compare(&shoot);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let listed = text(&out.stdout);
    assert!(listed.contains("2 field(s) differ"), "{listed}");
    assert!(
        listed.contains("spec.provider.workers[name=cpu-worker-0].maximum: live 99 → rendered"),
        "{listed}"
    );
    assert!(
        listed.contains("spec.region: live \"eu-west-1\" → rendered"),
        "{listed}"
    );
}

#[test]
fn config_file_sets_order_configuration_and_limits() {
    let out = render_with_config(
        "limits: {timeoutMs: 2000}\nchain: [base, cloud-profile]\nplugins:\n  cloud-profile:\n    limits: {memoryMiB: 32}\n    config: {profiles: {aws: aws-kyma}}\n",
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shoot = yaml(&text(&out.stdout));
    assert_eq!(shoot["spec"]["cloudProfile"]["name"], "aws-kyma");
    assert!(
        shoot["spec"].get("provider").is_none(),
        "only the configured chain ran"
    );

    let out = render_with_config("chain: [base]\nplugins:\n  provider: {config: {}}\n", &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("plugins.provider is configured but not in the chain"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn plugin_time_limit_from_config_is_enforced() {
    let out = render_with_config(
        &hostile_chain("busy-loop", "    limits: {timeoutMs: 100}\n"),
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("plugin hostile 0.1.0: timed out"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn bad_input_exits_non_zero_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let bad_yaml = dir.path().join("bad.yaml");
    std::fs::write(&bad_yaml, "kind: Runtime\nspec: {shoot: [").unwrap();
    let out = tessera(&["render", "--runtime", bad_yaml.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("bad.yaml: not valid YAML"),
        "{}",
        text(&out.stderr)
    );

    let source = std::fs::read_to_string(workspace().join("examples/runtime-aws.yaml")).unwrap();
    for (from, to, expected) in [
        (
            "type: aws\n",
            "type: ibm\n",
            "plugin cloud-profile 0.1.0: spec.shoot.provider.type (unsupported): unknown provider \"ibm\"",
        ),
        (
            "pods: 10.96.0.0/13",
            "pods: 10.250.0.0/20",
            "plugin base 0.1.0: spec.shoot.networking.pods (invalid-input): pods range 10.250.0.0/20 overlaps nodes range 10.250.0.0/16",
        ),
        (
            "zones: [eu-central-1a]",
            "zones: [eu-central-1d]",
            "spec.shoot.provider.additionalWorkers[0].zones (invalid-input): zone eu-central-1d of pool gpu is missing from the main pool's zones",
        ),
        (
            "maximum: 20",
            "maximum: many",
            "invalid Runtime at spec.shoot.provider.workers[0].maximum",
        ),
        (
            "    purpose: production\n",
            "    purpose: production\n    licenseType: partner\n",
            "invalid Runtime at spec.shoot.licenseType: unknown field; did you mean licenceType?",
        ),
        (
            "maximum: 20",
            "maxumum: 20",
            "plugin provider 0.1.0: spec.shoot.provider.workers[0].maxumum (invalid-input): unknown field; did you mean maximum?",
        ),
    ] {
        assert!(source.contains(from), "{from}");
        let file = dir.path().join("runtime.yaml");
        std::fs::write(&file, source.replacen(from, to, 1)).unwrap();
        let out = tessera(&["render", "--runtime", file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{to}");
        assert!(out.stdout.is_empty(), "no partial Shoot is printed");
        assert!(
            text(&out.stderr).contains(expected),
            "{}",
            text(&out.stderr)
        );
    }

    let out = tessera(&[
        "render",
        "--runtime",
        "examples/runtime-aws.yaml",
        "--plugins",
        "/nonexistent",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("plugin base: no component at /nonexistent/base.wasm"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn plugin_test_runs_golden_cases_and_shows_diffs() {
    let labels = plugins().join("labels.wasm");
    let out = tessera(&[
        "plugin",
        "test",
        labels.to_str().unwrap(),
        "--cases",
        "plugins/labels/cases",
    ]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("labels 0.1.0: 5 passed, 0 failed"),
        "{}",
        text(&out.stdout)
    );

    let out = tessera(&[
        "plugin",
        "test",
        labels.to_str().unwrap(),
        "--cases",
        "plugins/annotations/cases",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("FAIL  create"), "{stdout}");
    assert!(
        stdout.contains("+    account: 8cd57dc2-edb2-45e0-af8b-7d881006e516"),
        "{stdout}"
    );
}

#[test]
fn plugin_inspect_shows_contract_imports_size_and_digest() {
    let out = tessera(&[
        "plugin",
        "inspect",
        plugins().join("provider.wasm").to_str().unwrap(),
    ]);
    assert!(out.status.success());
    let stdout = text(&out.stdout);
    for needle in [
        "digest:    sha256:",
        "kind:      shoot-extension",
        "contract:  0.1.0",
        "name:      provider",
        "tessera:plugin/shoot-extension-api@0.1.0",
        "tessera:plugin/types@0.1.0",
        "tessera:plugin/host@0.1.0",
    ] {
        assert!(stdout.contains(needle), "{needle} in {stdout}");
    }
    // First-party plugins are built without WASI: nothing but our own interfaces.
    assert!(!stdout.contains("wasi:"), "{stdout}");
    let out = tessera(&[
        "plugin",
        "inspect",
        test_plugins().join("hostile-net.wasm").to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("wasi:sockets/instance-network@0.2")
                && l.ends_with("(not offered by this host)")),
        "{stdout}"
    );
    assert!(stdout.contains("loads:     no"), "{stdout}");
    // What a plugin declares it needs is shown, and granted by nobody but the operator.
    let out = tessera(&[
        "plugin",
        "inspect",
        plugins().join("telemetry.wasm").to_str().unwrap(),
    ]);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("requests (granted only by the operator):")
            && stdout.contains("pipelines.telemetry.tessera.dev"),
        "{stdout}"
    );
}

#[test]
fn plugin_output_outside_its_grants_is_refused() {
    // spec.purpose belongs to `base`; the hostile plugin was granted nothing.
    let out = render_with_config(&hostile_chain("set-field", ""), &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("plugin hostile 0.1.0: not granted to set spec.purpose")
            && stderr.contains(r#"shootPaths: ["spec.purpose"]"#),
        "{stderr}"
    );
    // Granted, the same plugin works.
    let granted = hostile_chain("set-field", "    grants: {shootPaths: [spec.purpose]}\n");
    let out = render_with_config(&granted, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(yaml(&text(&out.stdout))["spec"]["purpose"], "evaluation");
    // The Shoot's identity is never the plugin's, granted paths or not.
    for (mode, path) in [
        ("set-namespace", "metadata.namespace"),
        ("set-binding", "spec.secretBindingName"),
    ] {
        let out = render_with_config(
            &hostile_chain(mode, "    grants: {shootPaths: [spec]}\n"),
            &[],
        );
        assert_eq!(out.status.code(), Some(1), "{mode}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(&format!(
                "plugin hostile 0.1.0: changed {path}, part of the Shoot's identity"
            )),
            "{stderr}"
        );
    }
    let out = render_with_config(
        &hostile_chain("ok", "    grants: {shootPaths: [metadata.namespace]}\n"),
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("plugins.hostile.grants.shootPaths[0]") && stderr.contains("identity"),
        "{stderr}"
    );
}

#[test]
fn plugin_text_is_escaped_and_clamped() {
    // A newline in a plugin's log line cannot start a forged host line.
    let out = render_with_config(
        &hostile_chain("log-newlines", ""),
        &["--log", "info", "--log-format", "text"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(
            r"innocent\n2026-11-23T00:00:00.000000Z ERROR tessera: forged line\u{1b}[31m"
        ),
        "{stderr}"
    );
    assert!(
        !stderr
            .lines()
            .any(|l| l.starts_with("2026-11-23T00:00:00.000000Z")),
        "{stderr}"
    );
    assert!(
        !stderr.contains('\u{1b}'),
        "colour codes or the plugin's escape: {stderr:?}"
    );
    // An 8 MiB error message is over the call's budget; the message is not echoed.
    let out = render_with_config(&hostile_chain("huge-error", ""), &[]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("plugin hostile 0.1.0: output too large"),
        "{stderr}"
    );
    assert!(stderr.len() < 4096, "{} bytes of stderr", stderr.len());
    // A thousand long warnings arrive as twenty clamped ones and a count.
    let out = render_with_config(&hostile_chain("many-warnings", ""), &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("warning: [hostile]"))
        .collect();
    assert_eq!(warnings.len(), 21, "{stderr}");
    assert!(
        warnings[0].len() < 600 && warnings[0].contains(r"warning 0\n"),
        "{}",
        warnings[0]
    );
    assert_eq!(warnings[20], "warning: [hostile] … 980 more warnings");
}

#[test]
fn plugin_bench_prints_percentiles() {
    let out = tessera(&[
        "plugin",
        "bench",
        plugins().join("labels.wasm").to_str().unwrap(),
        "--cases",
        "plugins/labels/cases",
        "--iterations",
        "50",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("p50") && stdout.contains("p99") && stdout.contains("account-labels"),
        "{stdout}"
    );
}

#[test]
fn plugin_logs_go_to_tracing_tagged_and_capped() {
    let out = render_with_config(
        &hostile_chain("log-flood", ""),
        &["--log", "info", "--log-format", "json"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<serde_json::Value> = text(&out.stderr)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let plugin_lines: Vec<&serde_json::Value> = lines
        .iter()
        .filter(|l| {
            l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("line "))
        })
        .collect();
    assert_eq!(plugin_lines.len(), 256, "capped per call");
    let first = plugin_lines[0];
    assert_eq!(first["fields"]["plugin"], "hostile");
    assert_eq!(first["fields"]["plugin_version"], "0.1.0");
    assert_eq!(
        first["fields"]["runtime_id"],
        "6f7d2b8a-7a1c-4f6e-9f5b-2d1c0e4b9a10"
    );
    // Inside the span of its call, which names plugin, version and call.
    let span = &first["span"];
    assert_eq!(
        (&span["name"], &span["plugin"], &span["call"]),
        (&"plugin_call".into(), &"hostile".into(), &"extend".into()),
        "{first}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["fields"]["message"] == "plugin log budget spent; dropping further lines")
    );
}

#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    use std::io::Read;
    // `tessera crds | head -1`, with the reader gone before the first write.
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .arg("crds")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run tessera");
    drop(child.stdout.take());
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        stderr.is_empty(),
        "nothing to say about a closed pipe: {stderr}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        const SIGPIPE: i32 = 13;
        assert!(
            status.success() || status.signal() == Some(SIGPIPE),
            "{status:?}"
        );
    }
}

#[test]
fn no_colour_codes_when_stderr_is_not_a_terminal() {
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .current_dir(workspace())
            .env("TERM", "xterm-256color")
            .env_remove("NO_COLOR")
            .env_remove("CLICOLOR_FORCE")
            .env("TESSERA_CACHE_DIR", cache_dir())
            .args(args)
            .output()
            .expect("run tessera");
        assert!(!out.status.success(), "{args:?}");
        text(&out.stderr)
    };
    // A log line, a library error and one of clap's usage errors, all with stderr piped.
    let logged = run(&[
        "--log",
        "debug",
        "render",
        "--runtime",
        "examples/runtime-aws.yaml",
        "--plugins",
        "/nonexistent",
    ]);
    assert!(logged.contains(" DEBUG "), "{logged}");
    assert!(logged.contains("error: plugin base"), "{logged}");
    let usage = run(&["--bogus"]);
    assert!(usage.contains("unexpected argument"), "{usage}");
    for stderr in [logged, usage] {
        assert!(!stderr.contains("\x1b["), "{stderr:?}");
    }
}

#[test]
fn a_file_of_another_kind_is_refused_naming_both_kinds() {
    // Before any cluster is contacted: the kubeconfig does not exist.
    let out = tessera(&[
        "modules",
        "apply",
        "--set",
        "examples/runtime-aws.yaml",
        "--kubeconfig",
        "/nonexistent",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "no summary: {}", text(&out.stdout));
    assert!(
        text(&out.stderr)
            .contains("examples/runtime-aws.yaml: kind: expected a ModuleSet, found a Runtime"),
        "{}",
        text(&out.stderr)
    );

    let dir = tempfile::tempdir().unwrap();
    let shoot = dir.path().join("shoot.yaml");
    std::fs::write(
        &shoot,
        "apiVersion: core.gardener.cloud/v1beta1\nkind: Shoot\n",
    )
    .unwrap();
    let out = tessera(&["render", "--runtime", shoot.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("invalid Runtime at kind: expected a Runtime, found a Shoot"),
        "{stderr}"
    );
    assert!(!stderr.contains("Some("), "{stderr}");

    let out = tessera(&[
        "render",
        "--runtime",
        "examples/runtime-aws.yaml",
        "--current-shoot",
        "examples/runtime-aws.yaml",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("invalid current Shoot: expected a Shoot, found a Runtime"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn unknown_fields_in_input_files_are_named_with_a_suggestion() {
    let dir = tempfile::tempdir().unwrap();
    let set = dir.path().join("set.yaml");
    std::fs::write(
        &set,
        "apiVersion: tessera.dev/v1alpha1\nkind: ModuleSet\nmetadata: {name: s}\nspec:\n  modules:\n    - name: manifest\n      confg: {a: b}\n",
    )
    .unwrap();
    let out = tessera(&[
        "modules",
        "apply",
        "--set",
        set.to_str().unwrap(),
        "--kubeconfig",
        "/nonexistent",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("spec.modules[0].confg: unknown field; did you mean config?"),
        "{}",
        text(&out.stderr)
    );

    let out = render_with_config(
        "chain: [base]\nplugins:\n  base:\n    limits: {timeoutMS: 5}\n",
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr)
            .contains("plugins.base.limits.timeoutMS: unknown field; did you mean timeoutMs?"),
        "{}",
        text(&out.stderr)
    );
}

/// An API server that answers every request with `status` and a Kubernetes `Status` body
/// whose message is `message`; returns its URL.
fn api_server_answering(status: u16, reason: &str, message: &str) -> String {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let body = serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": status,
    })
    .to_string();
    let reason = reason.to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let _ = write!(
                stream,
                "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

#[test]
fn api_errors_are_reported_in_words_without_debug_output() {
    let server = api_server_answering(404, "NotFound", "runtimes.tessera.dev \"rt\" not found");
    let dir = tempfile::tempdir().unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: \"{server}\"}}}}]\nusers: [{{name: u, user: {{token: t}}}}]\ncontexts: [{{name: x, context: {{cluster: c, user: u}}}}]\ncurrent-context: x\n"
        ),
    )
    .unwrap();
    let out = tessera(&["shadow", "rt", "--kubeconfig", kubeconfig.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert_eq!(
        stderr.trim(),
        "error: Runtime default/rt: runtimes.tessera.dev \"rt\" not found (HTTP 404 NotFound)"
    );
}
