//! Module-reconciler plugins: loaded and sandboxed like shoot extensions, called with the
//! `module-reconciler-api` types. The ModuleSet controller that drives them (requirements
//! loop, apply, prune) builds on this.

use std::sync::Arc;

use tessera_sdk::Selector;
use tessera_sdk::module::{ModuleState, RawDeleteOutput, RawModuleInput, RawReconcileOutput};

use super::PluginKind;
use super::bindings::{module, module_api};
use super::engine::WasmRuntime;
use super::error::{CallError, Failure, LoadError};
use super::inspect::Inspection;
use super::limits::Limits;
use super::plugin::{Checked, PluginInfo, evaluate, from_wit_error, new_store};
use super::sandbox::PluginState;
use super::text;

/// A compiled, checked, pre-instantiated module reconciler.
pub struct LoadedModule {
    pub source: String,
    pub inspection: Inspection,
    pub info: PluginInfo,
    /// Whether the compiled code came from the on-disk cache.
    pub from_cache: bool,
    /// Time to compile or deserialize.
    pub load_time: std::time::Duration,
    pre: module::ModuleReconcilerPre<PluginState>,
    names: (Arc<str>, Arc<str>),
}

impl std::fmt::Debug for LoadedModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedModule")
            .field("source", &self.source)
            .field("info", &self.info)
            .field("digest", &self.inspection.digest)
            .finish()
    }
}

impl WasmRuntime {
    /// Compile, check and pre-instantiate a module reconciler, and ask it who it is (same
    /// checks as a shoot extension's; [`WasmRuntime::load_module`] keeps it by digest).
    pub(crate) fn load_module_uncached(
        &self,
        bytes: &[u8],
        source: &str,
    ) -> Result<LoadedModule, LoadError> {
        let Checked {
            instance_pre,
            inspection,
            from_cache,
            load_time,
            ..
        } = self.checked(bytes, source, PluginKind::ModuleReconciler)?;
        let link = |e: wasmtime::Error| LoadError::Link {
            source_name: source.to_string(),
            message: format!("{e:#}"),
        };
        let pre = module::ModuleReconcilerPre::new(instance_pre).map_err(link)?;
        let mut loaded = LoadedModule {
            source: source.to_string(),
            inspection,
            from_cache,
            load_time,
            info: PluginInfo {
                name: source.to_string(),
                version: "?".into(),
                contract_version: String::new(),
                description: String::new(),
            },
            pre,
            names: (Arc::from(source), Arc::from("?")),
        };
        let info = loaded
            .call(
                self,
                &Limits::default(),
                "",
                |api, store| api.call_info(store),
                |_| 0,
            )
            .map_err(|e| LoadError::Info {
                source_name: source.to_string(),
                cause: e.cause,
            })?;
        loaded.names = (
            Arc::from(info.name.as_str()),
            Arc::from(info.version.as_str()),
        );
        loaded.info = PluginInfo::clamped(
            info.name,
            info.version,
            info.contract_version,
            info.description,
        );
        Ok(loaded)
    }
}

type Api = module_api::Guest;

impl LoadedModule {
    /// One call in a fresh store; `size` measures what it returned against the budget.
    fn call<R>(
        &self,
        rt: &WasmRuntime,
        limits: &Limits,
        scope: &str,
        f: impl FnOnce(&Api, &mut wasmtime::Store<PluginState>) -> wasmtime::Result<R>,
        size: impl FnOnce(&R) -> usize,
    ) -> Result<R, CallError> {
        let mut store = new_store(rt, limits, &self.names, scope);
        let result = self.pre.instantiate(&mut store).and_then(|instance| {
            let api = instance.tessera_plugin_module_reconciler_api();
            f(api, &mut store)
        });
        let fail = |cause| CallError {
            plugin: self.info.name.clone(),
            version: self.info.version.clone(),
            cause,
        };
        evaluate(&mut store, limits, result, size).map_err(fail)
    }

    fn plugin_error(&self, err: module_api::PluginError) -> CallError {
        CallError {
            plugin: self.info.name.clone(),
            version: self.info.version.clone(),
            cause: Failure::Plugin(from_wit_error(err)),
        }
    }

    /// Modules that must be installed before this one.
    pub fn dependencies(
        &self,
        rt: &WasmRuntime,
        config: &str,
        limits: &Limits,
    ) -> Result<Vec<String>, CallError> {
        let names = self.call(
            rt,
            limits,
            "",
            |api, store| api.call_dependencies(store, config),
            |names| names.iter().map(String::len).sum(),
        )?;
        Ok(names
            .iter()
            .map(|n| text::clamp(n, text::NAME_CHARS))
            .collect())
    }

    /// One reconcile call in a fresh sandbox; the message is clamped.
    #[tracing::instrument(
        name = "plugin_call",
        skip_all,
        fields(plugin = %self.info.name, version = %self.info.version, call = "reconcile")
    )]
    pub fn reconcile(
        &self,
        rt: &WasmRuntime,
        input: &module_api::ReconcileInput,
        limits: &Limits,
    ) -> Result<module_api::ReconcileOutput, CallError> {
        let mut out = self
            .call(
                rt,
                limits,
                &input.module,
                |api, store| api.call_reconcile(store, input),
                |r| match r {
                    Ok(o) => {
                        o.desired.iter().map(String::len).sum::<usize>()
                            + o.message.as_ref().map_or(0, String::len)
                            + selectors_size(&o.requirements)
                    }
                    Err(e) => e.message.len(),
                },
            )?
            .map_err(|e| self.plugin_error(e))?;
        out.message = out.message.map(|m| text::clamp(&m, text::MESSAGE_CHARS));
        Ok(out)
    }

    /// One delete call in a fresh sandbox; the message is clamped.
    #[tracing::instrument(
        name = "plugin_call",
        skip_all,
        fields(plugin = %self.info.name, version = %self.info.version, call = "delete")
    )]
    pub fn delete(
        &self,
        rt: &WasmRuntime,
        input: &module_api::ReconcileInput,
        limits: &Limits,
    ) -> Result<module_api::DeleteOutput, CallError> {
        let mut out = self
            .call(
                rt,
                limits,
                &input.module,
                |api, store| api.call_delete(store, input),
                |r| match r {
                    Ok(o) => {
                        o.message.as_ref().map_or(0, String::len)
                            + selectors_size(&o.remove)
                            + selectors_size(&o.requirements)
                    }
                    Err(e) => e.message.len(),
                },
            )?
            .map_err(|e| self.plugin_error(e))?;
        out.message = out.message.map(|m| text::clamp(&m, text::MESSAGE_CHARS));
        Ok(out)
    }

    /// [`LoadedModule::reconcile`] on the SDK's raw types (the golden harness and tools).
    pub fn reconcile_raw(
        &self,
        rt: &WasmRuntime,
        input: &RawModuleInput,
        limits: &Limits,
    ) -> Result<RawReconcileOutput, CallError> {
        let out = self.reconcile(rt, &input_to_wit(input), limits)?;
        Ok(reconcile_output_from_wit(out))
    }

    /// [`LoadedModule::delete`] on the SDK's raw types.
    pub fn delete_raw(
        &self,
        rt: &WasmRuntime,
        input: &RawModuleInput,
        limits: &Limits,
    ) -> Result<RawDeleteOutput, CallError> {
        let out = self.delete(rt, &input_to_wit(input), limits)?;
        Ok(RawDeleteOutput {
            remove: out.remove.iter().map(selector_from_wit).collect(),
            state: state_from_wit(out.state),
            message: out.message,
            requirements: out.requirements.iter().map(selector_from_wit).collect(),
        })
    }
}

/// The SDK's selector as the WIT record.
pub fn selector_to_wit(s: &Selector) -> module_api::ObjectSelector {
    module_api::ObjectSelector {
        api_version: s.api_version.clone(),
        kind: s.kind.clone(),
        namespace: s.namespace.clone(),
        name: s.name.clone(),
        label_selector: s.label_selector.clone(),
    }
}

/// The WIT selector as the SDK's.
pub fn selector_from_wit(s: &module_api::ObjectSelector) -> Selector {
    Selector {
        api_version: s.api_version.clone(),
        kind: s.kind.clone(),
        namespace: s.namespace.clone(),
        name: s.name.clone(),
        label_selector: s.label_selector.clone(),
    }
}

fn state_from_wit(state: module_api::ModuleState) -> ModuleState {
    match state {
        module_api::ModuleState::Ready => ModuleState::Ready,
        module_api::ModuleState::Processing => ModuleState::Processing,
        module_api::ModuleState::Warning => ModuleState::Warning,
        module_api::ModuleState::Error => ModuleState::Error,
        module_api::ModuleState::Deleting => ModuleState::Deleting,
    }
}

/// A reconcile answer as the SDK's raw type.
pub fn reconcile_output_from_wit(out: module_api::ReconcileOutput) -> RawReconcileOutput {
    RawReconcileOutput {
        desired: out.desired,
        state: state_from_wit(out.state),
        message: out.message,
        requeue_after_seconds: out.requeue_after_seconds,
        requirements: out.requirements.iter().map(selector_from_wit).collect(),
    }
}

/// A reconcile input as the SDK's raw type.
pub fn input_from_wit(input: &module_api::ReconcileInput) -> RawModuleInput {
    RawModuleInput {
        module: input.module.clone(),
        version: input.version.clone(),
        config: input.config.clone(),
        cluster: tessera_sdk::ClusterFacts {
            kubernetes_version: input.cluster.kubernetes_version.clone(),
            provider: input.cluster.provider.clone(),
            region: input.cluster.region.clone(),
        },
        observed: input
            .observed
            .iter()
            .map(|o| (selector_from_wit(&o.selector), o.objects.clone()))
            .collect(),
    }
}

fn input_to_wit(input: &RawModuleInput) -> module_api::ReconcileInput {
    module_api::ReconcileInput {
        module: input.module.clone(),
        version: input.version.clone(),
        config: input.config.clone(),
        cluster: module_api::ClusterFacts {
            kubernetes_version: input.cluster.kubernetes_version.clone(),
            provider: input.cluster.provider.clone(),
            region: input.cluster.region.clone(),
        },
        observed: input
            .observed
            .iter()
            .map(|(selector, objects)| module_api::ObservedObjects {
                selector: selector_to_wit(selector),
                objects: objects.clone(),
            })
            .collect(),
    }
}

fn selectors_size(selectors: &[module_api::ObjectSelector]) -> usize {
    selectors
        .iter()
        .map(|s| {
            s.api_version.len()
                + s.kind.len()
                + [&s.namespace, &s.name, &s.label_selector]
                    .iter()
                    .map(|o| o.as_ref().map_or(0, String::len))
                    .sum::<usize>()
        })
        .sum()
}
