//! The hostile-plugin suite: each misbehaviour fails with its own typed error within its
//! budget, the host keeps serving, and nothing leaks from one call into the next.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera::wasm::{CallContext, CallError, Failure, Limits, LoadError, LoadedPlugin};
use tessera_sdk::Operation;
use tessera_sdk::glue::{RawExtendInput, RawExtendOutput};
use tessera_tests::{plugin_dir, runtime, test_plugin_dir, workspace};

fn load(name: &str) -> Result<Arc<LoadedPlugin>, LoadError> {
    runtime().load_file(&test_plugin_dir().join(format!("{name}.wasm")))
}

fn hostile() -> Arc<LoadedPlugin> {
    load("hostile").expect("the hostile guest loads")
}

fn input(config: serde_json::Value) -> RawExtendInput {
    RawExtendInput {
        runtime: "{}".into(),
        draft: r#"{"kind":"Shoot"}"#.into(),
        operation: Operation::Create,
        current_shoot: None,
        config: config.to_string(),
    }
}

fn call(plugin: &LoadedPlugin, mode: &str, limits: Limits) -> Result<RawExtendOutput, CallError> {
    plugin.extend(
        runtime(),
        input(serde_json::json!({ "mode": mode })),
        &limits,
        &CallContext::default(),
    )
}

fn failure(mode: &str, limits: Limits) -> (Failure, Duration) {
    let plugin = hostile();
    let started = Instant::now();
    let err = call(&plugin, mode, limits).expect_err(mode);
    assert_eq!(err.plugin, "hostile");
    assert!(
        err.to_string().starts_with("plugin hostile 0.1.0: "),
        "{err}"
    );
    (err.cause, started.elapsed())
}

/// A well-behaved plugin still works (the host keeps serving).
fn assert_host_serves() {
    let plugin = hostile();
    let out = call(&plugin, "ok", Limits::default()).expect("a good call after a bad one");
    assert_eq!(out.shoot, r#"{"kind":"Shoot"}"#);
    let labels = runtime()
        .load_file(&plugin_dir().join("labels.wasm"))
        .expect("first-party plugin loads");
    let runtime_doc = serde_saphyr::from_str::<serde_json::Value>(
        &std::fs::read_to_string(workspace().join("examples/runtime-aws.yaml")).unwrap(),
    )
    .unwrap();
    let out = labels
        .extend(
            runtime(),
            RawExtendInput {
                runtime: runtime_doc.to_string(),
                draft: "{}".into(),
                operation: Operation::Create,
                current_shoot: None,
                config: "{}".into(),
            },
            &Limits::default(),
            &CallContext::default(),
        )
        .expect("labels runs");
    assert!(out.shoot.contains("8cd57dc2-edb2-45e0-af8b-7d881006e516"));
}

#[test]
fn busy_loop_times_out_within_its_budget() {
    let limits = Limits {
        timeout_ms: 200,
        ..Limits::default()
    };
    let (cause, elapsed) = failure("busy-loop", limits);
    assert!(
        matches!(cause, Failure::Timeout { budget } if budget == Duration::from_millis(200)),
        "{cause:?}"
    );
    // Generous bound: the epoch ticker interrupts within a few ticks of the budget.
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
    assert_host_serves();
}

#[test]
fn unbounded_memory_growth_hits_the_memory_limit() {
    let (cause, _) = failure("grow-memory", Limits::default());
    assert!(
        matches!(cause, Failure::MemoryLimit { limit_mib: 64 }),
        "{cause:?}"
    );
    let (cause, _) = failure(
        "grow-memory",
        Limits {
            memory_mib: 16,
            ..Limits::default()
        },
    );
    assert!(
        matches!(cause, Failure::MemoryLimit { limit_mib: 16 }),
        "{cause:?}"
    );
    assert_host_serves();
}

#[test]
fn deep_recursion_traps_with_stack_exhaustion() {
    let (cause, _) = failure("recursion", Limits::default());
    match &cause {
        Failure::Trap { message, .. } => assert!(message.contains("stack overflow"), "{message}"),
        other => panic!("expected a trap, got {other:?}"),
    }
    assert_host_serves();
}

#[test]
fn panic_is_reported_with_its_message() {
    let (cause, _) = failure("panic", Limits::default());
    match &cause {
        Failure::Trap { panic, .. } => {
            let panic = panic.as_deref().expect("panic message captured");
            assert!(
                panic.contains("hostile plugin panicked on purpose"),
                "{panic}"
            );
            assert!(panic.contains("src/lib.rs"), "{panic}");
        }
        other => panic!("expected a trap, got {other:?}"),
    }
    assert!(
        cause
            .to_string()
            .contains("hostile plugin panicked on purpose")
    );
    assert_host_serves();
}

#[test]
fn hundred_megabyte_output_is_refused() {
    // With room to build it, the output cap refuses it ...
    let (cause, _) = failure(
        "big-output",
        Limits {
            memory_mib: 512,
            ..Limits::default()
        },
    );
    assert!(
        matches!(cause, Failure::OutputTooLarge { size, limit } if size >= 100 << 20 && limit == 4 << 20),
        "{cause:?}"
    );
    // ... and with the default memory limit it cannot even be built.
    let (cause, _) = failure("big-output", Limits::default());
    assert!(matches!(cause, Failure::MemoryLimit { .. }), "{cause:?}");
    assert_host_serves();
}

#[test]
fn invalid_json_output_is_refused() {
    let (cause, _) = failure("invalid-json", Limits::default());
    assert!(
        matches!(&cause, Failure::InvalidOutput(m) if m.contains("not JSON")),
        "{cause:?}"
    );
    let (cause, _) = failure("not-an-object", Limits::default());
    assert!(
        matches!(&cause, Failure::InvalidOutput(m) if m.contains("an array")),
        "{cause:?}"
    );
    assert_host_serves();
}

#[test]
fn ambient_authority_is_denied() {
    for (mode, capability) in [
        ("read-file", "the filesystem"),
        ("read-env", "the environment"),
        ("read-clock", "the clock"),
        ("random", "randomness"),
    ] {
        let (cause, _) = failure(mode, Limits::default());
        assert!(
            matches!(&cause, Failure::CapabilityDenied { capability: c } if c == capability),
            "{mode}: {cause:?}"
        );
    }
    assert_host_serves();
}

#[test]
fn exit_is_a_trap() {
    let (cause, _) = failure("exit", Limits::default());
    assert!(
        matches!(&cause, Failure::Trap { message, .. } if message.contains("called exit (failure)")),
        "{cause:?}"
    );
    assert_host_serves();
}

#[test]
fn nothing_leaks_between_calls() {
    let plugin = hostile();
    for _ in 0..3 {
        let out = call(&plugin, "counter", Limits::default()).unwrap();
        assert_eq!(
            out.shoot, r#"{"calls":1}"#,
            "every call starts from a fresh instance"
        );
    }
}

#[test]
fn log_flood_is_capped_and_the_call_succeeds() {
    let out = call(&hostile(), "log-flood", Limits::default()).expect("logging is not an error");
    assert_eq!(out.shoot, r#"{"kind":"Shoot"}"#);
}

#[test]
fn plugin_error_is_passed_through_with_its_field() {
    let err = call(&hostile(), "no-such-mode", Limits::default()).unwrap_err();
    assert_eq!(err.field(), Some("config.mode"));
    assert!(
        err.to_string().contains("unknown mode no-such-mode"),
        "{err}"
    );
}

#[test]
fn network_import_is_refused_at_load_listing_it() {
    let err = load("hostile-net").expect_err("wasi:sockets is not offered");
    match &err {
        LoadError::MissingImports { missing, .. } => {
            assert!(
                missing.contains("wasi:sockets/instance-network@0.2"),
                "{missing}"
            )
        }
        other => panic!("expected MissingImports, got {other:?}"),
    }
    assert!(
        err.to_string()
            .contains("imports what the host does not offer"),
        "{err}"
    );
}

#[test]
fn other_major_contract_is_refused_naming_supported_versions() {
    let err = load("future-contract").expect_err("contract 9.0.0");
    match &err {
        LoadError::ContractMismatch {
            found, supported, ..
        } => {
            assert_eq!(found, "9.0.0");
            assert!(supported.contains("0.1"), "{supported}");
        }
        other => panic!("expected ContractMismatch, got {other:?}"),
    }
}

#[test]
fn garbage_is_not_a_component() {
    let err = runtime()
        .load(b"\0asm\x01\0\0\0", "core-module.wasm")
        .unwrap_err();
    assert!(matches!(err, LoadError::Compile { .. }), "{err:?}");
    let err = runtime().load(b"hello", "hello.wasm").unwrap_err();
    assert!(err.to_string().contains("hello.wasm"), "{err}");
}

/// Every sandbox slot in use: the next call fails as `Busy` at once (a retryable failure
/// the Runtime waits on as `HostBusy`), and works again when the slot is free.
#[test]
fn an_exhausted_pool_is_busy_not_a_plugin_failure() {
    use tessera::wasm::{EngineOptions, WasmRuntime};
    let rt = Arc::new(
        WasmRuntime::new(EngineOptions {
            cache_dir: None,
            pool_slots: 1,
            max_memory_mib: 256,
            ..EngineOptions::default()
        })
        .expect("engine"),
    );
    assert!(rt.pooling(), "the pooling allocator is in use");
    let plugin = rt
        .load_file(&test_plugin_dir().join("hostile.wasm"))
        .expect("loads");
    let slow = Limits {
        timeout_ms: 3000,
        ..Limits::default()
    };
    let busy = {
        let (rt, plugin) = (rt.clone(), plugin.clone());
        std::thread::spawn(move || {
            let input = input(serde_json::json!({ "mode": "busy-loop" }));
            plugin.extend(&rt, input, &slow, &CallContext::default())
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let ok = || {
        let input = input(serde_json::json!({ "mode": "ok" }));
        plugin.extend(&rt, input, &Limits::default(), &CallContext::default())
    };
    let err = ok().expect_err("no slot is free");
    assert!(matches!(err.cause, Failure::Busy { .. }), "{err}");
    assert!(matches!(
        busy.join().unwrap(),
        Err(CallError {
            cause: Failure::Timeout { .. },
            ..
        })
    ));
    ok().expect("the slot is free again");
}
