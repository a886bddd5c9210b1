//! A small fixed-seed chaos run (`tests/src/bin/chaos/main.rs`) in every `./x test`: three
//! hosts sharding the objects (the chart's default with more than one replica), six
//! SIGKILLs at random moments while Runtimes, RuntimeAccesses and ModuleSets are created,
//! patched and deleted and Gardener fails for a while; it fails on any duplicate Shoot or
//! module object, orphan or stuck finalizer, or on anything not Ready (or not as last
//! asked) once the kills stop. `./x chaos --kills 50`
//! is the large run.

use tessera_tests::probe::run_bench;

#[test]
fn hosts_killed_at_random_lose_nothing_and_do_nothing_twice() {
    let args = [
        "--seed",
        "2",
        "--kills",
        "6",
        "--hosts",
        "3",
        "--runtimes",
        "5",
        "--sharding",
        "--modulesets",
        "3",
    ];
    if let Err(e) = run_bench(env!("CARGO_BIN_EXE_chaos"), &args) {
        panic!("the chaos run found violations: {e}");
    }
}
