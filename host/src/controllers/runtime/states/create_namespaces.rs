//! The namespaces every runtime cluster starts with (`--runtime-namespace`; KIM makes
//! `kyma-system`): created when missing, labelled as Tessera's, never changed or deleted
//! afterwards (modules live in them; the cluster goes with its Shoot).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};

use super::super::machine::{Machine, Step, Transition};
use crate::api;
use crate::controllers::{ReconcileError, labels};
use crate::crd::{Condition, ConditionStatus, ConditionType, FIELD_MANAGER, Reason};

/// The `KymaSystemNSCreated` message once `names` exist.
fn exist_message(names: &[String]) -> String {
    format!("namespace(s) {} exist", names.join(", "))
}

/// Whether `conditions` already say what the configured `names` ask for: the condition
/// True for exactly these names, or (none configured) no condition at all. A settled
/// Runtime whose host was given other names is prepared again.
pub(crate) fn up_to_date(conditions: &[Condition], names: &[String]) -> bool {
    let current = conditions
        .iter()
        .find(|c| c.is(ConditionType::KymaSystemNSCreated));
    match current {
        None => names.is_empty(),
        Some(c) => c.status == ConditionStatus::True && c.message == exist_message(names),
    }
}

pub(crate) async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    let names = m.ctx.config.runtime_namespaces.clone();
    if names.is_empty() {
        m.status
            .conditions
            .retain(|c| !c.is(ConditionType::KymaSystemNSCreated));
        return Ok(Transition::Next(Step::ConfigureOidc));
    }
    let id = m.id();
    let client = m.cluster().await?;
    let api: Api<Namespace> = Api::all(client);
    for name in &names {
        ensure(&api, name, &id)
            .await
            .map_err(|message| ReconcileError::RuntimeCluster {
                runtime: id.clone(),
                message: format!("namespace {name}: {message}"),
            })?;
    }
    m.condition(
        ConditionType::KymaSystemNSCreated,
        ConditionStatus::True,
        Reason::KymaSystemNSCreated,
        exist_message(&names),
    );
    Ok(Transition::Next(Step::ConfigureOidc))
}

/// Make namespace `name` exist (labelled with Runtime `id` when made here); one still
/// terminating is waited for.
async fn ensure(api: &Api<Namespace>, name: &str, id: &str) -> Result<(), String> {
    if let Some(existing) = api.get_opt(name).await.map_err(|e| e.to_string())? {
        let terminating = existing.metadata.deletion_timestamp.is_some();
        return match terminating {
            true => Err("is being deleted; waiting to make it again".into()),
            false => Ok(()),
        };
    }
    let labels = BTreeMap::from([
        (
            labels::MANAGED_BY.to_string(),
            labels::MANAGED_BY_VALUE.to_string(),
        ),
        (labels::RUNTIME.to_string(), id.to_string()),
    ]);
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    match api.create(&params, &namespace).await {
        Ok(_) => {
            tracing::info!(runtime = %id, namespace = %name, "runtime namespace created");
            Ok(())
        }
        // Made by someone else meanwhile: it exists, which is all that is asked.
        Err(e) if api::is_conflict(&e) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::set_condition;

    #[test]
    fn prepared_again_when_the_configured_namespaces_change() {
        let names = vec!["kyma-system".to_string()];
        let mut conditions = Vec::new();
        assert!(up_to_date(&conditions, &[]));
        assert!(!up_to_date(&conditions, &names));
        set_condition(
            &mut conditions,
            ConditionType::KymaSystemNSCreated,
            ConditionStatus::True,
            Reason::KymaSystemNSCreated,
            exist_message(&names),
            Some(1),
        );
        assert!(up_to_date(&conditions, &names));
        assert!(!up_to_date(&conditions, &[]));
        assert!(!up_to_date(&conditions, &["other".to_string()]));
    }
}
