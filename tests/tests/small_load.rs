//! A small run of the load benchmark (`tests/src/bin/load.rs`) in every `./x test`, so that
//! its figures — the host's peak RSS, its requests per Runtime, what a restart costs
//! Gardener — show in every CI log and a regression is seen where it is made (the host's
//! memory once tripled unnoticed between two benchmark runs). The figures are printed,
//! not asserted (a debug build on a shared machine); what fails the test is what must
//! hold at any speed: every Runtime Ready, and a restarted host that writes nothing and
//! reads no Shoot from Gardener for a settled Runtime.

use std::io::Write;
use std::process::Command;

use tessera_tests::probe::tail;

/// Runtimes in the run: enough for the caches to dominate the host's memory.
const RUNTIMES: &str = "200";

#[test]
fn small_load_prints_its_figures_and_a_restart_costs_gardener_nothing() {
    let out = Command::new(env!("CARGO_BIN_EXE_load"))
        .args(["--runtimes", RUNTIMES, "--timeout", "900"])
        .output()
        .expect("the load benchmark starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Straight to the process's stderr: the test harness keeps what `println!` says of a
    // passing test to itself, and these figures are for every CI log.
    let _ = writeln!(std::io::stderr(), "{stdout}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the load benchmark failed ({}):\n{}",
        out.status,
        tail(&stderr, 40)
    );
    let resync = stdout
        .lines()
        .find(|l| l.starts_with("no-op resync"))
        .unwrap_or_else(|| panic!("no resync line in:\n{stdout}"));
    assert!(
        resync.contains(" 0 writes,") && resync.contains("(0 Shoot reads)"),
        "a restarted host wrote or read Shoots for settled Runtimes: {resync}"
    );
}
