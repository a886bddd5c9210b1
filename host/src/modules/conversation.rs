//! The plugin conversation: call the module's plugin until it stops asking for objects (a
//! bounded number of rounds, each requirement read only as far as the read grant reaches),
//! typed by the call so that each caller gets the answer of the call it made.

use super::error::ModuleError;
use super::observe::{Reads, Spent};
use super::run::ModuleRun;
use crate::wasm::module::{selector_from_wit as from_wit, selector_to_wit as to_wit};
use crate::wasm::{CallError, Limits, LoadedModule, WasmRuntime, module_api as api};

/// How many times a plugin may answer with requirements before its answer counts.
pub(crate) const MAX_ROUNDS: usize = tessera_sdk::module::MAX_REQUIREMENT_ROUNDS;

/// A plugin call of the requirements loop: what it answers and how it is made, so that
/// each caller gets the answer of the call it made (no other can come back).
pub(crate) trait Call: Copy + Send + 'static {
    type Answer: Send + 'static;
    fn make(
        self,
        plugin: &LoadedModule,
        wasm: &WasmRuntime,
        input: &api::ReconcileInput,
        limits: &Limits,
    ) -> Result<Self::Answer, CallError>;
    fn requirements(answer: &Self::Answer) -> &[api::ObjectSelector];
}

/// `reconcile`: the objects the module wants.
#[derive(Clone, Copy)]
pub(crate) struct Reconcile;

/// `delete`: what to remove before the module's objects go.
#[derive(Clone, Copy)]
pub(crate) struct Delete;

impl Call for Reconcile {
    type Answer = api::ReconcileOutput;
    fn make(
        self,
        plugin: &LoadedModule,
        wasm: &WasmRuntime,
        input: &api::ReconcileInput,
        limits: &Limits,
    ) -> Result<Self::Answer, CallError> {
        plugin.reconcile(wasm, input, limits)
    }
    fn requirements(answer: &Self::Answer) -> &[api::ObjectSelector] {
        &answer.requirements
    }
}

impl Call for Delete {
    type Answer = api::DeleteOutput;
    fn make(
        self,
        plugin: &LoadedModule,
        wasm: &WasmRuntime,
        input: &api::ReconcileInput,
        limits: &Limits,
    ) -> Result<Self::Answer, CallError> {
        plugin.delete(wasm, input, limits)
    }
    fn requirements(answer: &Self::Answer) -> &[api::ObjectSelector] {
        &answer.requirements
    }
}

impl ModuleRun<'_> {
    pub(crate) fn live_reads(&self) -> Reads<'_> {
        Reads::Live {
            target: self.target,
            grants: &self.candidate.grants,
            limits: &self.candidate.limits,
        }
    }

    async fn call_once<C: Call>(
        &self,
        call: C,
        input: api::ReconcileInput,
    ) -> Result<Result<C::Answer, CallError>, ModuleError> {
        let plugin = self.candidate.plugin.clone();
        let wasm = self.wasm.clone();
        let limits = self.candidate.limits;
        tokio::task::spawn_blocking(move || call.make(&plugin, &wasm, &input, &limits))
            .await
            .map_err(|e| ModuleError::Join(e.to_string()))
    }

    pub(crate) fn input(&self, observed: &[api::ObservedObjects]) -> api::ReconcileInput {
        api::ReconcileInput {
            module: self.module.to_string(),
            version: self.candidate.version.clone(),
            config: self.config.clone(),
            cluster: api::ClusterFacts {
                kubernetes_version: self.target.facts.kubernetes_version.clone(),
                provider: self.target.facts.provider.clone(),
                region: self.target.facts.region.clone(),
            },
            observed: observed.to_vec(),
        }
    }

    /// The requirements loop; `Err(message)` when the plugin failed, read what it may not,
    /// or never settled.
    pub(crate) async fn converse<C: Call>(
        &self,
        call: C,
        reads: &Reads<'_>,
    ) -> Result<Result<(C::Answer, Vec<api::ObservedObjects>), String>, ModuleError> {
        let mut observed: Vec<api::ObservedObjects> = Vec::new();
        let mut spent = Spent::default();
        for _ in 0..MAX_ROUNDS {
            let answer = match self.call_once(call, self.input(&observed)).await? {
                Ok(answer) => answer,
                Err(err) => return Ok(Err(err.to_string())),
            };
            if C::requirements(&answer).is_empty() {
                return Ok(Ok((answer, observed)));
            }
            let mut asked_new = false;
            for wanted in C::requirements(&answer) {
                let selector = from_wit(wanted);
                if observed.iter().any(|o| from_wit(&o.selector) == selector) {
                    continue;
                }
                asked_new = true;
                let objects = match reads.observe(&selector, &mut spent).await? {
                    Ok(objects) => objects,
                    Err(why) => return Ok(Err(format!("{}: {why}", self.plugin()))),
                };
                observed.push(api::ObservedObjects {
                    selector: to_wit(&selector),
                    objects,
                });
            }
            if !asked_new {
                return Ok(Err(format!(
                    "{} asks again for objects it was given",
                    self.plugin()
                )));
            }
        }
        Ok(Err(format!(
            "{} still asks for more objects after {MAX_ROUNDS} rounds",
            self.plugin()
        )))
    }

    /// The input the plugin gets now (requirements read live through its read grant) and
    /// its answer, applying nothing: `tessera modules record`.
    pub(crate) async fn capture(
        &self,
    ) -> Result<Result<(api::ReconcileInput, api::ReconcileOutput), String>, ModuleError> {
        match self.converse(Reconcile, &self.live_reads()).await? {
            Ok((out, observed)) => Ok(Ok((self.input(&observed), out))),
            Err(message) => Ok(Err(message)),
        }
    }
}
