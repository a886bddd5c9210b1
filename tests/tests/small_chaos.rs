//! A small fixed-seed chaos run (`tests/src/bin/chaos.rs`) in every `./x test`: two hosts,
//! six SIGKILLs at random moments while Runtimes and RuntimeAccesses are created, patched
//! and deleted and Gardener fails for a while; it fails on any duplicate Shoot, orphan or
//! stuck finalizer, or on anything not Ready once the kills stop. `./x chaos --kills 50`
//! is the large run.

use std::io::Write;
use std::process::Command;

use tessera_tests::probe::tail;

#[test]
fn hosts_killed_at_random_lose_nothing_and_do_nothing_twice() {
    let out = Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args([
            "--seed",
            "2",
            "--kills",
            "6",
            "--hosts",
            "2",
            "--runtimes",
            "5",
        ])
        .output()
        .expect("the chaos run starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Straight to the process's stderr: the test harness keeps what `println!` says of a
    // passing test to itself, and these figures are for every CI log.
    let _ = writeln!(std::io::stderr(), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the chaos run found violations ({}):\n{stdout}\n{}",
        out.status,
        tail(&stderr, 40)
    );
}
