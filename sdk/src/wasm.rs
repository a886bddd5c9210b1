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
        crate::wasm::report_panics();
        PluginInfo {
            name: P::NAME.to_string(),
            version: version.to_string(),
            contract_version: crate::CONTRACT_VERSION.to_string(),
            description: P::DESCRIPTION.to_string(),
        }
    }

    pub fn extend<P: ShootExtension>(input: ExtendInput) -> Result<ExtendOutput, PluginError> {
        crate::wasm::report_panics();
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

pub mod module {
    pub mod bindings {
        wit_bindgen::generate!({
            path: "../wit",
            world: "module-reconciler",
            pub_export_macro: true,
            export_macro_name: "__tessera_export_module_world",
            default_bindings_module: "tessera_sdk::__private::module::bindings",
        });
    }

    pub use api::{DeleteOutput, Guest, PluginError, PluginInfo, ReconcileInput, ReconcileOutput};
    use api::{ModuleState as WitState, ObjectSelector};
    use bindings::exports::tessera::plugin::module_reconciler_api as api;
    use bindings::tessera::plugin::types::ErrorKind;

    use crate::module::{
        ClusterFacts, ModuleReconciler, ModuleState, RawModuleInput, Selector, delete_json,
        reconcile_json,
    };

    pub fn info<P: ModuleReconciler>(version: &str) -> PluginInfo {
        crate::wasm::report_panics();
        PluginInfo {
            name: P::NAME.to_string(),
            version: version.to_string(),
            contract_version: crate::CONTRACT_VERSION.to_string(),
            description: P::DESCRIPTION.to_string(),
        }
    }

    pub fn dependencies<P: ModuleReconciler>(config: String) -> Vec<String> {
        crate::wasm::report_panics();
        crate::module::dependencies_json::<P>(&config)
    }

    fn from_wit(s: ObjectSelector) -> Selector {
        Selector {
            api_version: s.api_version,
            kind: s.kind,
            namespace: s.namespace,
            name: s.name,
            label_selector: s.label_selector,
        }
    }

    fn to_wit(s: Selector) -> ObjectSelector {
        ObjectSelector {
            api_version: s.api_version,
            kind: s.kind,
            namespace: s.namespace,
            name: s.name,
            label_selector: s.label_selector,
        }
    }

    fn state(s: ModuleState) -> WitState {
        match s {
            ModuleState::Ready => WitState::Ready,
            ModuleState::Processing => WitState::Processing,
            ModuleState::Warning => WitState::Warning,
            ModuleState::Error => WitState::Error,
            ModuleState::Deleting => WitState::Deleting,
        }
    }

    fn error(err: crate::PluginError) -> PluginError {
        PluginError {
            kind: match err.kind {
                crate::ErrorKind::InvalidInput => ErrorKind::InvalidInput,
                crate::ErrorKind::Unsupported => ErrorKind::Unsupported,
                crate::ErrorKind::Internal => ErrorKind::Internal,
            },
            message: err.message,
            field: err.field,
        }
    }

    fn raw(input: ReconcileInput) -> RawModuleInput {
        RawModuleInput {
            module: input.module,
            version: input.version,
            config: input.config,
            cluster: ClusterFacts {
                kubernetes_version: input.cluster.kubernetes_version,
                provider: input.cluster.provider,
                region: input.cluster.region,
            },
            observed: input
                .observed
                .into_iter()
                .map(|o| (from_wit(o.selector), o.objects))
                .collect(),
        }
    }

    pub fn reconcile<P: ModuleReconciler>(
        input: ReconcileInput,
    ) -> Result<ReconcileOutput, PluginError> {
        crate::wasm::report_panics();
        let out = reconcile_json::<P>(raw(input)).map_err(error)?;
        Ok(ReconcileOutput {
            desired: out.desired,
            state: state(out.state),
            message: out.message,
            requeue_after_seconds: out.requeue_after_seconds,
            requirements: out.requirements.into_iter().map(to_wit).collect(),
        })
    }

    pub fn delete<P: ModuleReconciler>(input: ReconcileInput) -> Result<DeleteOutput, PluginError> {
        crate::wasm::report_panics();
        let out = delete_json::<P>(raw(input)).map_err(error)?;
        Ok(DeleteOutput {
            remove: out.remove.into_iter().map(to_wit).collect(),
            state: state(out.state),
            message: out.message,
            requirements: out.requirements.into_iter().map(to_wit).collect(),
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

/// Without WASI (`wasm32-unknown-unknown`) std has nowhere to print a panic message: send it
/// to the host's log, where the host picks it up for the trap's error. Every call runs in a
/// fresh instance, so the hook is set on every entry.
pub(crate) fn report_panics() {
    #[cfg(not(target_os = "wasi"))]
    std::panic::set_hook(Box::new(|info| {
        log(crate::log::Level::Error, &info.to_string());
    }));
}
