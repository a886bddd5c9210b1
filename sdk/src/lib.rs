//! # tessera-sdk
//!
//! Write Tessera plugins in plain Rust. A shoot extension is a type implementing
//! [`ShootExtension`] plus one [`export_shoot_extension!`] line; the same type runs natively
//! in `cargo test` (see [`testing`], feature `testing`) and as a Wasm component (`wasm32-unknown-unknown` linked by
//! `wasm-component-ld`, or `wasm32-wasip2`) in
//! the host. A module reconciler is a type implementing [`ModuleReconciler`] plus one
//! [`export_module_reconciler!`] line.
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use tessera_sdk::{ShootExtension, ExtendInput, ExtendOutput, PluginError};
//!
//! pub struct Labels;
//!
//! impl ShootExtension for Labels {
//!     const NAME: &'static str = "labels";
//!     const DESCRIPTION: &'static str = "Copies account labels onto the Shoot";
//!     type Config = BTreeMap<String, String>;
//!     fn extend(input: ExtendInput<Self::Config>) -> Result<ExtendOutput, PluginError> {
//!         let mut shoot = input.draft;
//!         shoot.metadata.labels.insert("account".into(), "42".into());
//!         Ok(ExtendOutput::new(shoot))
//!     }
//! }
//! tessera_sdk::export_shoot_extension!(Labels);
//! ```

pub mod error;
pub mod glue;
pub mod log;
pub mod models;
pub mod module;
pub mod objects;
#[cfg(feature = "schema")]
pub mod schema;
pub mod shoot_extension;
pub mod util;

#[cfg(feature = "testing")]
pub mod testing;

#[cfg(target_family = "wasm")]
#[doc(hidden)]
pub mod wasm;

#[cfg(all(target_family = "wasm", feature = "bump-allocator"))]
mod bump;

pub use error::{ErrorKind, PluginError};
pub use models::{Runtime, Shoot};
pub use module::{
    ClusterFacts, DeleteOutput, ModuleInput, ModuleOutput, ModuleReconciler, ModuleState, Observed,
    Selector,
};
pub use shoot_extension::{ExtendInput, ExtendOutput, Operation, ShootExtension};

/// The contract version this SDK implements (`wit/tessera.wit`, package `tessera:plugin`).
pub const CONTRACT_VERSION: &str = "0.1.0";

#[doc(hidden)]
pub mod __private {
    #[cfg(target_family = "wasm")]
    pub use crate::wasm::module;
    #[cfg(target_family = "wasm")]
    pub use crate::wasm::shoot;

    /// The bytes of `text` as an array (a custom section must be a sized static).
    pub const fn bytes<const N: usize>(text: &str) -> [u8; N] {
        let src = text.as_bytes();
        let mut out = [0u8; N];
        let mut i = 0;
        while i < N {
            out[i] = src[i];
            i += 1;
        }
        out
    }
}

/// Declare what the plugin asks the operator to grant, from a YAML file next to the
/// crate's `Cargo.toml`:
///
/// ```yaml
/// grants:
///   write:                     # module reconcilers: objects it returns
///     - {apiGroups: [""], kinds: [ConfigMap], namespaces: [kyma-system]}
///   read:                      # module reconcilers: objects its requirements read
///     - {apiGroups: [apiextensions.k8s.io], kinds: [CustomResourceDefinition], clusterScoped: true}
///   shootPaths: [spec.dns]     # shoot extensions: Shoot paths it sets
/// lockedConfig: [manifest]     # configuration only the Plugin's operator may set
/// ```
///
/// The file is embedded in the Wasm component as the custom section `tessera:requests`;
/// `tessera plugin inspect` and the `Plugin` status show it next to what is granted. A
/// request grants nothing: the operator writes the grants. Expands to nothing outside Wasm.
#[macro_export]
macro_rules! declare_requests {
    ($file:literal) => {
        #[cfg(target_family = "wasm")]
        const _: () = {
            const TEXT: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $file));
            #[unsafe(link_section = "tessera:requests")]
            #[used]
            static REQUESTS: [u8; TEXT.len()] = $crate::__private::bytes::<{ TEXT.len() }>(TEXT);
        };
    };
}

/// Declare the JSON Schema of the plugin's configuration, kept in a file next to the
/// crate's `Cargo.toml` and generated from the `Config` type:
///
/// ```ignore
/// #[derive(Debug, Deserialize)]
/// #[cfg_attr(test, derive(schemars::JsonSchema))] // schemars: a dev-dependency
/// pub struct Config { /* … */ }
///
/// tessera_sdk::declare_config_schema!(Config, "config.schema.json");
/// ```
///
/// The file is embedded in the Wasm component as the custom section
/// `tessera:config-schema`, which `tessera plugin inspect` shows (field, type, default and
/// the doc comment as description). Under `cargo test` it declares a test that fails, with a
/// diff, when the file is not the schema of `Config`; `TESSERA_BLESS=1 cargo test` writes it.
#[macro_export]
macro_rules! declare_config_schema {
    ($config:ty, $file:literal) => {
        #[cfg(target_family = "wasm")]
        const _: () = {
            const TEXT: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $file));
            #[unsafe(link_section = "tessera:config-schema")]
            #[used]
            static SCHEMA: [u8; TEXT.len()] = $crate::__private::bytes::<{ TEXT.len() }>(TEXT);
        };
        #[cfg(test)]
        #[test]
        fn config_schema_is_current() {
            let dir = $crate::testing::manifest_dir(env!("CARGO_MANIFEST_DIR"));
            $crate::testing::assert_config_schema::<$config>(&format!("{dir}/{}", $file));
        }
    };
}

/// Export a [`ShootExtension`] implementation as the component's `shoot-extension` world.
///
/// Expands to nothing outside Wasm builds, so the plugin crate also builds as an ordinary
/// library for native tests and benchmarks.
#[macro_export]
macro_rules! export_shoot_extension {
    ($plugin:ty) => {
        #[cfg(target_family = "wasm")]
        const _: () = {
            use $crate::__private::shoot as __shoot;
            struct __TesseraExport;
            impl __shoot::Guest for __TesseraExport {
                fn info() -> __shoot::PluginInfo {
                    __shoot::info::<$plugin>(env!("CARGO_PKG_VERSION"))
                }
                fn extend(
                    input: __shoot::ExtendInput,
                ) -> ::core::result::Result<__shoot::ExtendOutput, __shoot::PluginError> {
                    __shoot::extend::<$plugin>(input)
                }
            }
            __shoot::bindings::__tessera_export_shoot_world!(__TesseraExport with_types_in $crate::__private::shoot::bindings);
        };
    };
}

/// Export a [`ModuleReconciler`] implementation as the component's `module-reconciler`
/// world. Like [`export_shoot_extension!`], it expands to nothing outside Wasm builds.
#[macro_export]
macro_rules! export_module_reconciler {
    ($plugin:ty) => {
        #[cfg(target_family = "wasm")]
        const _: () = {
            use $crate::__private::module as __module;
            struct __TesseraExport;
            impl __module::Guest for __TesseraExport {
                fn info() -> __module::PluginInfo {
                    __module::info::<$plugin>(env!("CARGO_PKG_VERSION"))
                }
                fn dependencies(config: ::std::string::String) -> ::std::vec::Vec<::std::string::String> {
                    __module::dependencies::<$plugin>(config)
                }
                fn reconcile(
                    input: __module::ReconcileInput,
                ) -> ::core::result::Result<__module::ReconcileOutput, __module::PluginError> {
                    __module::reconcile::<$plugin>(input)
                }
                fn delete(
                    input: __module::ReconcileInput,
                ) -> ::core::result::Result<__module::DeleteOutput, __module::PluginError> {
                    __module::delete::<$plugin>(input)
                }
            }
            __module::bindings::__tessera_export_module_world!(__TesseraExport with_types_in $crate::__private::module::bindings);
        };
    };
}

/// Declare a `#[test]` that runs the crate's `cases/` golden cases natively (needs the
/// `testing` feature of `tessera-sdk` as a dev-dependency).
#[macro_export]
macro_rules! golden_tests {
    ($plugin:ty) => {
        #[cfg(test)]
        #[test]
        fn golden_cases() {
            $crate::testing::assert_golden_cases::<$plugin>(&$crate::testing::cases_dir(env!(
                "CARGO_MANIFEST_DIR"
            )));
        }
    };
}

/// Declare a `#[test]` that runs the crate's `cases/` module cases natively (needs the
/// `testing` feature of `tessera-sdk` as a dev-dependency).
#[macro_export]
macro_rules! module_golden_tests {
    ($plugin:ty) => {
        #[cfg(test)]
        #[test]
        fn golden_cases() {
            $crate::testing::assert_module_cases::<$plugin>(&$crate::testing::cases_dir(env!(
                "CARGO_MANIFEST_DIR"
            )));
        }
    };
}
