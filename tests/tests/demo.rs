//! `./x demo --keep` stopped by a signal that reaches the demo process alone (a supervisor,
//! `kill -INT`): every process it started ends, it says what it stopped, and it exits with
//! 128 + the signal's number.

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tessera_tests::stop::descendants;

/// Lines of a child's output as they come.
fn lines(out: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Whether `pid` still runs `name` (not a zombie).
fn alive(pid: i32, name: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        stat.contains(&format!("({name})")) && !after.trim_start().starts_with('Z')
    })
}

#[test]
fn sigint_to_the_demo_alone_stops_every_process_it_started() {
    let mut demo = Command::new(env!("CARGO_BIN_EXE_demo"))
        .arg("--keep")
        // Its own group, as under a supervisor: the signal below reaches the demo only.
        .process_group(0)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the demo");
    let pid = demo.id() as i32;
    let stdout = lines(demo.stdout.take().unwrap());
    let stderr = lines(demo.stderr.take().unwrap());
    let mut seen = Vec::new();
    loop {
        match stdout.recv_timeout(Duration::from_secs(240)) {
            Ok(line) if line.starts_with("running until stopped") => break,
            Ok(line) => seen.push(line),
            Err(_) => {
                let _ = demo.kill();
                panic!("the demo did not reach Ready and keep running: {seen:#?}");
            }
        }
    }
    let started = descendants(pid);
    for expected in ["etcd", "kube-apiserver", "gardener-sim", "tessera"] {
        assert!(
            started.values().any(|n| n.starts_with(expected)),
            "no {expected} among the demo's processes {started:?}"
        );
    }
    // SAFETY: kill has no memory effects.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGINT) }, 0);
    // Its grace for a busy main thread is 30 s; a demo that outlives that is stuck.
    let deadline = Instant::now() + tessera_tests::stop::GRACE + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = demo.try_wait().expect("wait for the demo") {
            break status;
        }
        if Instant::now() > deadline {
            // SAFETY: kill has no memory effects.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("the demo did not stop within a minute of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // Until its last words, or two quiet seconds (a child may hold the pipe open).
    let said: Vec<String> =
        std::iter::from_fn(|| stderr.recv_timeout(Duration::from_secs(2)).ok()).collect();
    assert_eq!(status.code(), Some(128 + libc::SIGINT), "{said:#?}");
    assert!(
        said.iter()
            .any(|l| l.starts_with("stopped") && l.contains("etcd") && l.contains("gardener-sim")),
        "it does not say what it stopped: {said:#?}"
    );
    assert!(
        !said
            .iter()
            .any(|l| l.contains("panicked") || l.contains("backtrace")),
        "{said:#?}"
    );
    // Orphans are reaped by init within moments of the demo's exit.
    std::thread::sleep(Duration::from_millis(500));
    let left: Vec<(&i32, &String)> = started.iter().filter(|(p, n)| alive(**p, n)).collect();
    assert!(
        left.is_empty(),
        "still running after the demo stopped: {left:?}"
    );
}
