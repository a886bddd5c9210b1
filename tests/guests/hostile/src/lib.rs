//! A deliberately misbehaving shoot extension for the sandbox tests. Its configuration
//! `{"mode": ...}` picks the misbehaviour. It talks to the raw bindings so that it can also
//! return output the SDK would never produce.

#[cfg(target_family = "wasm")]
mod guest {
    use std::hint::black_box;
    use std::sync::atomic::{AtomicU32, Ordering};

    use tessera_sdk::__private::shoot::{
        ExtendInput, ExtendOutput, Guest, PluginError, PluginInfo,
    };

    static CALLS: AtomicU32 = AtomicU32::new(0);

    #[link(wasm_import_module = "wasi:random/random@0.2.0")]
    unsafe extern "C" {
        #[link_name = "get-random-u64"]
        fn get_random_u64() -> i64;
    }

    fn recurse(depth: u64) -> u64 {
        if black_box(depth) == u64::MAX {
            return 0;
        }
        black_box(recurse(depth + 1)) + 1
    }

    /// `draft` with `section.field` set to `value`.
    fn edit(draft: &str, section: &str, field: &str, value: &str) -> String {
        let mut doc: serde_json::Value = serde_json::from_str(draft).unwrap_or_default();
        doc[section][field] = value.into();
        doc.to_string()
    }

    struct Hostile;

    impl Guest for Hostile {
        fn info() -> PluginInfo {
            PluginInfo {
                name: "hostile".into(),
                version: env!("CARGO_PKG_VERSION").into(),
                contract_version: tessera_sdk::CONTRACT_VERSION.into(),
                description: "misbehaves on request".into(),
            }
        }

        fn extend(input: ExtendInput) -> Result<ExtendOutput, PluginError> {
            let config: serde_json::Value = serde_json::from_str(&input.config).unwrap_or_default();
            let mode = config["mode"].as_str().unwrap_or("ok").to_string();
            let ok = |shoot: String| {
                Ok(ExtendOutput {
                    shoot,
                    warnings: vec![],
                })
            };
            match mode.as_str() {
                "ok" => ok(input.draft),
                "counter" => {
                    let calls = CALLS.fetch_add(1, Ordering::SeqCst) + 1;
                    ok(format!("{{\"calls\":{calls}}}"))
                }
                "busy-loop" => {
                    let mut x = 0u64;
                    loop {
                        x = black_box(x.wrapping_add(1));
                    }
                }
                "grow-memory" => {
                    let mut hoard: Vec<Vec<u8>> = Vec::new();
                    loop {
                        hoard.push(vec![1u8; 1 << 20]);
                        black_box(&hoard);
                    }
                }
                "recursion" => ok(format!("{{\"depth\":{}}}", recurse(0))),
                "panic" => panic!("hostile plugin panicked on purpose"),
                "big-output" => ok(format!("{{\"blob\":\"{}\"}}", "x".repeat(100 << 20))),
                "invalid-json" => ok("{\"kind\": \"Shoot\", oops".into()),
                "not-an-object" => ok("[1, 2, 3]".into()),
                "read-file" => ok(format!("{{\"len\":{}}}", std::fs::read("/etc/passwd").map(|b| b.len()).unwrap_or(0))),
                "read-env" => ok(format!("{{\"home\":{:?}}}", std::env::var("HOME").unwrap_or_default())),
                "read-clock" => ok(format!("{{\"now\":{:?}}}", std::time::SystemTime::now())),
                "random" => ok(format!("{{\"random\":{}}}", unsafe { get_random_u64() })),
                "exit" => std::process::exit(3),
                // Output the host must refuse: the Shoot's identity and fields the plugin
                // was not granted.
                "set-namespace" => ok(edit(&input.draft, "metadata", "namespace", "garden-other")),
                "set-binding" => ok(edit(&input.draft, "spec", "secretBindingName", "other-project-aws")),
                "set-field" => ok(edit(&input.draft, "spec", "purpose", "evaluation")),
                "log-newlines" => {
                    tessera_sdk::log::warn(
                        "innocent\n2026-11-23T00:00:00.000000Z ERROR tessera: forged line\u{1b}[31m",
                    );
                    ok(input.draft)
                }
                "huge-error" => Err(PluginError {
                    kind: tessera_sdk::__private::shoot::bindings::tessera::plugin::types::ErrorKind::InvalidInput,
                    message: "x".repeat(8 << 20),
                    field: Some("f".repeat(10_000)),
                }),
                "many-warnings" => Ok(ExtendOutput {
                    shoot: input.draft,
                    warnings: (0..1000).map(|i| format!("warning {i}\n{}", "w".repeat(2000))).collect(),
                }),
                "log-flood" => {
                    for i in 0..10_000 {
                        tessera_sdk::log::info(&format!("line {i}"));
                    }
                    ok(input.draft)
                }
                other => Err(PluginError {
                    kind: tessera_sdk::__private::shoot::bindings::tessera::plugin::types::ErrorKind::InvalidInput,
                    message: format!("unknown mode {other}"),
                    field: Some("config.mode".into()),
                }),
            }
        }
    }

    tessera_sdk::__private::shoot::bindings::__tessera_export_shoot_world!(
        Hostile with_types_in tessera_sdk::__private::shoot::bindings
    );
}
