//! `./x test`'s runner. Cargo builds every test binary once (`cargo test --no-run`); the
//! runner then runs them side by side, the longest first (by the durations of the last run,
//! kept in `<target>/test-durations.tsv`), prints each one's output whole when it ends, and
//! closes with each suite's duration and one line over all of them. Every binary runs even
//! when another failed; the run fails when anything failed.

use std::collections::{BTreeMap, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// One test binary, as cargo built it.
#[derive(Debug, Clone)]
pub(crate) struct Suite {
    /// `package::target` (`tessera-tests::install`, `tessera::lib`).
    pub(crate) name: String,
    package: String,
    version: String,
    manifest_path: PathBuf,
    executable: PathBuf,
    /// Arguments before the user's (the doc tests run through `cargo test --doc --`).
    leading: Vec<String>,
}

impl Suite {
    /// The workspace's doc tests (the SDK's examples), compiled and run by `cargo test --doc`.
    pub(crate) fn doc_tests(workspace_manifest: &Path) -> Self {
        Self {
            name: "doc-tests".into(),
            package: String::new(),
            version: String::new(),
            manifest_path: workspace_manifest.to_path_buf(),
            executable: std::env::var_os("CARGO")
                .unwrap_or_else(|| "cargo".into())
                .into(),
            leading: ["test", "--workspace", "--doc", "--"]
                .map(String::from)
                .to_vec(),
        }
    }
}

/// What one suite did.
struct Outcome {
    name: String,
    passed: u64,
    failed: u64,
    /// The binary ended unsuccessfully (a failed test, or a crash before any count).
    ok: bool,
    elapsed: Duration,
    /// What a failed binary said about its failures, repeated at the end of the run (CI
    /// shows a log's tail).
    failures: String,
}

/// Run `cargo test --no-run` (given, with its arguments) and return the test binaries it built.
pub(crate) fn build(mut cargo: Command) -> Result<Vec<Suite>> {
    cargo.args(["--no-run", "--message-format=json-render-diagnostics"]);
    cargo.stdout(Stdio::piped());
    eprintln!("+ {cargo:?}");
    let mut child = cargo.spawn().context("cannot run cargo test --no-run")?;
    let stdout = child.stdout.take().expect("piped stdout");
    let mut suites = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let message: serde_json::Value = match serde_json::from_str(&line?) {
            Ok(message) => message,
            Err(_) => continue,
        };
        if let Some(suite) = suite_of(&message) {
            suites.push(suite);
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("building the tests failed with {status}");
    }
    Ok(suites)
}

/// A compiler-artifact message of a test target, as a suite.
fn suite_of(message: &serde_json::Value) -> Option<Suite> {
    if message["reason"] != "compiler-artifact" || message["profile"]["test"] != true {
        return None;
    }
    let executable = PathBuf::from(message["executable"].as_str()?);
    let target = &message["target"];
    let kind = target["kind"][0].as_str()?;
    let manifest_path = PathBuf::from(message["manifest_path"].as_str()?);
    let (package, version) = package_of(message, &manifest_path);
    let target_name = target["name"].as_str()?;
    let name = match kind {
        "test" => format!("{package}::{target_name}"),
        "lib" => format!("{package}::lib"),
        _ => format!("{package}::{kind}/{target_name}"),
    };
    Some(Suite {
        name,
        package,
        version,
        manifest_path,
        executable,
        leading: Vec::new(),
    })
}

/// The package's name and version. The manifest's directory is not the name (`host/`
/// holds `tessera`); the id is `path+file:///w/host#tessera@0.1.0`, or `…/tests#0.1.0`
/// when the name is the directory's.
fn package_of(message: &serde_json::Value, manifest_path: &Path) -> (String, String) {
    let id = message["package_id"].as_str().unwrap_or_default();
    let tail = id.rsplit('#').next().unwrap_or_default();
    match tail.split_once('@') {
        Some((name, version)) => (name.to_string(), version.to_string()),
        None => (
            manifest_path
                .parent()
                .and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            tail.to_string(),
        ),
    }
}

/// The order to start suites in: the longest last time first; suites never timed before
/// go first of all (they may be long, and starting them late would end the run late).
fn schedule(suites: Vec<Suite>, last: &BTreeMap<String, f64>) -> VecDeque<Suite> {
    let mut suites = suites;
    suites.sort_by(|a, b| {
        let time = |s: &Suite| last.get(&s.name).copied().unwrap_or(f64::INFINITY);
        time(b)
            .total_cmp(&time(a))
            .then_with(|| a.name.cmp(&b.name))
    });
    suites.into()
}

/// The environment cargo gives a test binary it runs (our tests read the manifest
/// directory at run time, and the scaffold test runs `$CARGO`). The doc tests run through
/// cargo itself, without those variables (build scripts would see a changed environment).
fn suite_command(suite: &Suite, env: &[(String, PathBuf)], args: &[&str]) -> Command {
    let mut cmd = if suite.leading.is_empty() {
        let dir = suite.manifest_path.parent().unwrap_or(Path::new("."));
        let mut cmd = Command::new(&suite.executable);
        // xtask's own package variables (`cargo run` set them) are not the suite's.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("CARGO_PKG_") {
                cmd.env_remove(key);
            }
        }
        cmd.current_dir(dir)
            .env("CARGO_PKG_VERSION", &suite.version)
            .env("CARGO_MANIFEST_DIR", dir)
            .env("CARGO_MANIFEST_PATH", &suite.manifest_path)
            .env("CARGO_PKG_NAME", &suite.package)
            .env(
                "CARGO",
                std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()),
            );
        cmd
    } else {
        crate::cargo()
    };
    cmd.args(&suite.leading).args(args);
    for (key, value) in env {
        cmd.env(key, value);
    }
    cmd
}

/// Run one suite, its stdout and stderr in one pipe, and count its results.
fn run_one(suite: &Suite, env: &[(String, PathBuf)], args: &[&str]) -> (Outcome, Vec<u8>) {
    let started = Instant::now();
    let output = Arc::new(Mutex::new(Vec::new()));
    let status = run_captured(suite_command(suite, env, args), &output);
    let mut output = std::mem::take(&mut *output.lock().unwrap());
    let (passed, failed) = counts(&String::from_utf8_lossy(&output));
    let ok = match &status {
        Ok(status) => status.success(),
        Err(err) => {
            output.extend(format!("cannot run {}: {err}\n", suite.executable.display()).bytes());
            false
        }
    };
    let failures = match ok {
        true => String::new(),
        false => failure_report(&String::from_utf8_lossy(&output)),
    };
    let outcome = Outcome {
        name: suite.name.clone(),
        passed,
        failed,
        ok,
        elapsed: started.elapsed(),
        failures,
    };
    (outcome, output)
}

/// Run `cmd` with stdout and stderr into `output`. Waits for the binary, not for the end of
/// the pipe (a process it left behind may hold the pipe open), then gives the reader a
/// moment for the last bytes.
fn run_captured(mut cmd: Command, output: &Arc<Mutex<Vec<u8>>>) -> std::io::Result<ExitStatus> {
    let (mut reader, writer) = std::io::pipe()?;
    cmd.stdout(writer.try_clone()?).stderr(writer);
    let mut child = cmd.spawn()?;
    // The command holds the write ends: drop it so the pipe ends with the child's own.
    drop(cmd);
    let (done, finished) = mpsc::channel();
    let sink = output.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        while let Ok(n @ 1..) = reader.read(&mut buf) {
            sink.lock().unwrap().extend_from_slice(&buf[..n]);
        }
        let _ = done.send(());
    });
    let status = child.wait()?;
    let _ = finished.recv_timeout(Duration::from_secs(5));
    Ok(status)
}

/// Lines of a failure kept for the end of the run.
const FAILURE_LINES: usize = 40;

/// The start of each failed test's section of libtest's `failures:` (from its
/// `---- name ----` line to the next one or to the closing `failures:` list), or the
/// output's last lines when there is none (a binary that crashed).
fn failure_report(output: &str) -> String {
    let lines: Vec<&str> = output.lines().collect();
    let mut kept = Vec::new();
    let mut at = 0;
    while let Some(start) = lines[at..].iter().position(|l| l.starts_with("---- ")) {
        let start = at + start;
        let end = lines[start + 1..]
            .iter()
            .position(|l| l.starts_with("---- ") || *l == "failures:")
            .map_or(lines.len(), |n| start + 1 + n);
        let section = &lines[start..end];
        kept.extend(section.iter().take(FAILURE_LINES));
        if section.len() > FAILURE_LINES {
            kept.push("  (… the rest is in the suite's output above)");
        }
        at = end;
    }
    if kept.is_empty() {
        kept = lines[lines.len().saturating_sub(FAILURE_LINES / 2)..].to_vec();
    }
    kept.join("\n")
}

/// The passed and failed counts of every `test result:` line in a test binary's output.
fn counts(output: &str) -> (u64, u64) {
    let (mut passed, mut failed) = (0, 0);
    for line in output.lines() {
        if let Some(rest) = line.strip_prefix("test result: ") {
            passed += count(rest, "passed");
            failed += count(rest, "failed");
        }
    }
    (passed, failed)
}

fn count(result: &str, word: &str) -> u64 {
    result
        .split(';')
        .find_map(|part| {
            part.trim()
                .strip_suffix(word)?
                .trim()
                .rsplit(' ')
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0)
}

/// Suites that must not run at the same time. Each of these starts a node, and kubelet
/// keeps container logs in the machine-wide `/var/log/pods`, where one kubelet's garbage
/// collection deletes the logs of the other's pods (which its own containerd does not know).
/// (The apiserver suite's node test, run beside the install suite, took three times its
/// time.)
const ONE_AT_A_TIME: &[&str] = &[
    "tessera-tests::install",
    "tessera-tests::modules",
    "tessera-tests::apiserver",
];

/// The suites left to run and the exclusive ones running.
struct Queue {
    waiting: VecDeque<Suite>,
    exclusive_running: bool,
}

impl Queue {
    /// The first waiting suite that may start now; None when none may (or none is left).
    fn take(&mut self) -> Option<Suite> {
        let at = self
            .waiting
            .iter()
            .position(|s| !(self.exclusive_running && ONE_AT_A_TIME.contains(&s.name.as_str())))?;
        let suite = self.waiting.remove(at)?;
        if ONE_AT_A_TIME.contains(&suite.name.as_str()) {
            self.exclusive_running = true;
        }
        Some(suite)
    }
}

/// Run every suite, `jobs` at a time, then print the durations and the closing line.
/// Fails when a test failed or a binary ended unsuccessfully.
pub(crate) fn run_all(
    suites: Vec<Suite>,
    jobs: usize,
    env: &[(String, PathBuf)],
    args: &[&str],
    durations: &Path,
) -> Result<()> {
    let total = suites.len();
    let queue = Mutex::new(Queue {
        waiting: schedule(suites, &read_durations(durations)),
        exclusive_running: false,
    });
    let freed = Condvar::new();
    let outcomes = Mutex::new(Vec::new());
    let started = Instant::now();
    eprintln!("running {total} test binaries, {jobs} at a time");
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                while let Some(suite) = next(&queue, &freed) {
                    let (outcome, output) = run_one(&suite, env, args);
                    print_suite(&suite, &outcome, &output);
                    outcomes.lock().unwrap().push(outcome);
                    if ONE_AT_A_TIME.contains(&suite.name.as_str()) {
                        queue.lock().unwrap().exclusive_running = false;
                    }
                    freed.notify_all();
                }
            });
        }
    });
    let outcomes = outcomes.into_inner().unwrap();
    write_durations(durations, &outcomes);
    summarize(&outcomes, started.elapsed())
}

/// The next suite this worker runs, waiting while only excluded ones are left.
fn next(queue: &Mutex<Queue>, freed: &Condvar) -> Option<Suite> {
    let mut queue = queue.lock().unwrap();
    loop {
        if queue.waiting.is_empty() {
            return None;
        }
        if let Some(suite) = queue.take() {
            return Some(suite);
        }
        queue = freed.wait(queue).unwrap();
    }
}

fn print_suite(suite: &Suite, outcome: &Outcome, output: &[u8]) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "\n──── {} ({}) — {:.1} s{}",
        suite.name,
        suite.executable.display(),
        outcome.elapsed.as_secs_f64(),
        if outcome.ok { "" } else { " — FAILED" }
    );
    let _ = out.write_all(output);
    let _ = out.flush();
}

/// The durations table, the closing line, and the verdict.
fn summarize(outcomes: &[Outcome], wall: Duration) -> Result<()> {
    let mut sorted: Vec<&Outcome> = outcomes.iter().collect();
    sorted.sort_by_key(|o| std::cmp::Reverse(o.elapsed));
    let mut out = std::io::stdout().lock();
    writeln!(out, "\nsuite durations (wall {:.0} s):", wall.as_secs_f64())?;
    for o in sorted
        .iter()
        .filter(|o| o.elapsed >= Duration::from_secs(1) || !o.ok)
    {
        let verdict = if o.ok { "ok" } else { "FAILED" };
        writeln!(
            out,
            "  {:>7.1} s  {:<40} {:>4} passed {:>3} failed  {verdict}",
            o.elapsed.as_secs_f64(),
            o.name,
            o.passed,
            o.failed
        )?;
    }
    for o in sorted.iter().filter(|o| !o.ok) {
        writeln!(out, "\nfailures of {}:\n{}", o.name, o.failures)?;
    }
    let passed: u64 = outcomes.iter().map(|o| o.passed).sum();
    let failed: u64 = outcomes.iter().map(|o| o.failed).sum();
    let broken: Vec<&str> = outcomes
        .iter()
        .filter(|o| !o.ok)
        .map(|o| o.name.as_str())
        .collect();
    writeln!(
        out,
        "tests: {passed} passed, {failed} failed ({} of {} test binaries failed{})",
        broken.len(),
        outcomes.len(),
        if broken.is_empty() {
            String::new()
        } else {
            format!(": {}", broken.join(", "))
        }
    )?;
    if !broken.is_empty() || failed > 0 {
        bail!("{} test binaries failed", broken.len().max(1));
    }
    if passed == 0 {
        bail!("no test ran");
    }
    Ok(())
}

fn read_durations(path: &Path) -> BTreeMap<String, f64> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let (name, secs) = line.split_once('\t')?;
            Some((name.to_string(), secs.parse().ok()?))
        })
        .collect()
}

/// Record this run's durations over the last ones (a run of some suites keeps the others').
fn write_durations(path: &Path, outcomes: &[Outcome]) {
    let mut all = read_durations(path);
    for o in outcomes {
        all.insert(o.name.clone(), o.elapsed.as_secs_f64());
    }
    let text: String = all
        .iter()
        .map(|(name, secs)| format!("{name}\t{secs:.1}\n"))
        .collect();
    let _ = std::fs::write(path, text);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn suite(name: &str) -> Suite {
        Suite {
            name: name.into(),
            package: "p".into(),
            version: "0.1.0".into(),
            manifest_path: "p/Cargo.toml".into(),
            executable: name.into(),
            leading: Vec::new(),
        }
    }

    #[test]
    fn failures_are_cut_out_of_libtests_output() {
        let output = "test a ... ok\ntest b ... FAILED\n\nfailures:\n\n---- b stdout ----\nboom\n\n---- c stdout ----\nbang\n\nfailures:\n    b\n    c\n\ntest result: FAILED. 1 passed; 2 failed";
        assert_eq!(
            failure_report(output),
            "---- b stdout ----\nboom\n\n---- c stdout ----\nbang\n"
        );
        let long: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let report = failure_report(&format!("---- d stdout ----\n{long}"));
        assert_eq!(report.lines().count(), FAILURE_LINES + 1, "{report}");
        // A crash before libtest's report: the output's tail.
        assert_eq!(failure_report(&long).lines().last(), Some("line 99"));
    }

    #[test]
    fn counts_add_every_result_line() {
        let out = "test a ... ok\ntest result: ok. 3 passed; 0 failed; 1 ignored\n\
                   test result: FAILED. 2 passed; 1 failed; 0 ignored\n";
        assert_eq!(counts(out), (5, 1));
    }

    #[test]
    fn the_longest_suites_start_first_and_new_ones_before_them() {
        let last = BTreeMap::from([("short".to_string(), 1.0), ("long".to_string(), 100.0)]);
        let order: Vec<String> = schedule(vec![suite("short"), suite("long"), suite("new")], &last)
            .into_iter()
            .map(|s| s.name)
            .collect();
        assert_eq!(order, ["new", "long", "short"]);
    }

    #[test]
    fn suites_that_start_a_node_never_run_together() {
        let mut queue = Queue {
            waiting: ["tessera-tests::install", "tessera-tests::modules", "other"]
                .map(suite)
                .into(),
            exclusive_running: false,
        };
        assert_eq!(queue.take().unwrap().name, "tessera-tests::install");
        assert_eq!(queue.take().unwrap().name, "other");
        assert!(queue.take().is_none(), "modules waits for install");
        queue.exclusive_running = false;
        assert_eq!(queue.take().unwrap().name, "tessera-tests::modules");
        queue.exclusive_running = false;
        queue.waiting.push_back(suite("tessera-tests::apiserver"));
        assert_eq!(queue.take().unwrap().name, "tessera-tests::apiserver");
        queue.waiting.push_back(suite("tessera-tests::install"));
        assert!(queue.take().is_none(), "install waits for apiserver's node");
    }

    #[test]
    fn a_suite_is_named_by_its_package_and_target() {
        let message = serde_json::json!({
            "reason": "compiler-artifact",
            "profile": {"test": true},
            "executable": "/t/debug/deps/install-abc",
            "target": {"kind": ["test"], "name": "install"},
            "manifest_path": "/w/tests/Cargo.toml",
            "package_id": "path+file:///w/tests#tessera-tests@0.1.0",
        });
        let suite = suite_of(&message).unwrap();
        assert_eq!(suite.name, "tessera-tests::install");
        assert_eq!(suite.package, "tessera-tests");
        assert_eq!(suite.version, "0.1.0");
        let lib = serde_json::json!({
            "reason": "compiler-artifact",
            "profile": {"test": true},
            "executable": "/t/debug/deps/tessera-abc",
            "target": {"kind": ["lib"], "name": "tessera"},
            "manifest_path": "/w/host/Cargo.toml",
            "package_id": "path+file:///w/host#tessera@0.1.0",
        });
        assert_eq!(suite_of(&lib).unwrap().name, "tessera::lib");
        let mut bin = lib.clone();
        bin["target"] = serde_json::json!({"kind": ["bin"], "name": "demo"});
        assert_eq!(suite_of(&bin).unwrap().name, "tessera::bin/demo");
        let not_a_test =
            serde_json::json!({"reason": "compiler-artifact", "profile": {"test": false}});
        assert!(suite_of(&not_a_test).is_none());
    }
}
