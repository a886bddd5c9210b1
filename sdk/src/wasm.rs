//! Wasm export glue: generated bindings and conversions between WIT and SDK types.

pub mod shoot {
    pub mod bindings {
        wit_bindgen::generate!({
            path: "../wit",
            world: "shoot-extension",
            pub_export_macro: true,
            export_macro_name: "__tessera_export_shoot_world",
            default_bindings_module: "tessera_sdk::__private::shoot::bindings",
        });
    }

    pub use api::{ExtendInput, ExtendOutput, Guest, PluginError, PluginInfo};
    use bindings::exports::tessera::plugin::shoot_extension_api as api;
    use bindings::tessera::plugin::types::ErrorKind;

    use crate::glue::{RawExtendInput, extend_json};
    use crate::shoot_extension::{Operation, ShootExtension};

    pub fn info<P: ShootExtension>(version: &str) -> PluginInfo {
        PluginInfo {
            name: P::NAME.to_string(),
            version: version.to_string(),
            contract_version: crate::CONTRACT_VERSION.to_string(),
            description: P::DESCRIPTION.to_string(),
        }
    }

    pub fn extend<P: ShootExtension>(input: ExtendInput) -> Result<ExtendOutput, PluginError> {
        let raw = RawExtendInput {
            runtime: input.runtime,
            draft: input.draft,
            operation: match input.operation {
                api::Operation::Create => Operation::Create,
                api::Operation::Patch => Operation::Patch,
            },
            current_shoot: input.current_shoot,
            config: input.config,
        };
        extend_json::<P>(&raw)
            .map(|out| ExtendOutput {
                shoot: out.shoot,
                warnings: out.warnings,
            })
            .map_err(|err| PluginError {
                kind: match err.kind {
                    crate::ErrorKind::InvalidInput => ErrorKind::InvalidInput,
                    crate::ErrorKind::Unsupported => ErrorKind::Unsupported,
                    crate::ErrorKind::Internal => ErrorKind::Internal,
                },
                message: err.message,
                field: err.field,
            })
    }
}

pub(crate) fn log(level: crate::log::Level, message: &str) {
    use crate::log::Level;
    use shoot::bindings::tessera::plugin::host;
    use shoot::bindings::tessera::plugin::types::LogLevel;
    let level = match level {
        Level::Trace => LogLevel::Trace,
        Level::Debug => LogLevel::Debug,
        Level::Info => LogLevel::Info,
        Level::Warn => LogLevel::Warn,
        Level::Error => LogLevel::Error,
    };
    host::log(level, message);
}
