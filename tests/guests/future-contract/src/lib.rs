//! A plugin built against a future major version of the contract: the host must refuse it
//! and say which versions it supports.

#[cfg(target_family = "wasm")]
mod guest {
    wit_bindgen::generate!({
        inline: r#"
            package tessera:plugin@9.0.0;
            interface shoot-extension-api {
                info: func() -> string;
            }
            world later {
                export shoot-extension-api;
            }
        "#,
    });

    struct Future;

    impl exports::tessera::plugin::shoot_extension_api::Guest for Future {
        fn info() -> String {
            "future".into()
        }
    }

    export!(Future);
}
