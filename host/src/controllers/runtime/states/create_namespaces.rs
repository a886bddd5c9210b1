//! The namespaces every runtime cluster starts with (`--runtime-namespace`; KIM makes
//! `kyma-system`): created when missing, labelled as Tessera's, never changed or deleted
//! afterwards (modules live in them; the cluster goes with its Shoot).

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};

use super::super::machine::{Machine, Step, Transition};
use crate::controllers::{ReconcileError, labels, runtime_cluster};
use crate::crd::{ConditionStatus, ConditionType, FIELD_MANAGER, Reason};

pub(crate) async fn run(m: &mut Machine) -> Result<Transition, ReconcileError> {
    let names = m.ctx.config.runtime_namespaces.clone();
    if names.is_empty() {
        return Ok(Transition::Next(Step::ConfigureOidc));
    }
    let id = m.id();
    let client = runtime_cluster::client(&m.ctx, &m.namespace(), &id).await?;
    let api: Api<Namespace> = Api::all(client);
    let mut created = Vec::new();
    for name in &names {
        if api.get_opt(name).await?.is_some() {
            continue;
        }
        let labels = [
            (labels::MANAGED_BY, labels::MANAGED_BY_VALUE),
            (labels::RUNTIME, id.as_str()),
        ];
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: Some(labels.map(|(k, v)| (k.into(), v.into())).into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..PostParams::default()
        };
        match api.create(&params, &namespace).await {
            // Made by someone else meanwhile: it exists, which is all that is asked.
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            other => {
                other?;
                created.push(name.as_str());
            }
        }
    }
    if !created.is_empty() {
        tracing::info!(runtime = %id, namespaces = ?created, "runtime namespaces created");
    }
    m.condition(
        ConditionType::KymaSystemNSCreated,
        ConditionStatus::True,
        Reason::KymaSystemNSCreated,
        format!("namespace(s) {} exist", names.join(", ")),
    );
    Ok(Transition::Next(Step::ConfigureOidc))
}
