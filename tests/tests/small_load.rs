//! A small run of the load benchmark (`tests/src/bin/load.rs`) in every `./x test`, so that
//! its figures — the host's peak RSS, its requests per Runtime, what a restart costs
//! Gardener — show in every CI log and a regression is seen where it is made (the host's
//! memory once tripled unnoticed between two benchmark runs). The figures are printed,
//! not asserted (a debug build on a shared machine); what fails the test is what must
//! hold at any speed: every Runtime Ready, and a restarted host that writes nothing and
//! reads no Shoot from Gardener for a settled Runtime.

use tessera_tests::probe::run_bench;

/// Runtimes in the run: enough for the caches to dominate the host's memory.
const RUNTIMES: &str = "200";

#[test]
fn small_load_prints_its_figures_and_a_restart_costs_gardener_nothing() {
    let args = ["--runtimes", RUNTIMES, "--timeout", "900"];
    let stdout = run_bench(env!("CARGO_BIN_EXE_load"), &args)
        .unwrap_or_else(|e| panic!("the load benchmark failed: {e}"));
    let resync = stdout
        .lines()
        .find(|l| l.starts_with("no-op resync"))
        .unwrap_or_else(|| panic!("no resync line in:\n{stdout}"));
    assert!(
        resync.contains(" 0 writes,") && resync.contains("(0 Shoot reads)"),
        "a restarted host wrote or read Shoots for settled Runtimes: {resync}"
    );
}
