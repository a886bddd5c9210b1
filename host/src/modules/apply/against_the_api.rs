//! Writing against a mocked API server: what is sent (field manager, force, the uid
//! precondition) and how each answer is followed — conflicts, 404s, 403s, uid mismatches,
//! a failure part-way.

use http::Method;
use serde_json::{Value, json};

use super::{Applier, Plan, apply, plan};
use crate::api::mock::Exchange;
use crate::modules::error::ModuleError;
use crate::modules::fixtures::{CM_A, OWNER, configmap, target, wanted};
use crate::modules::inventory::ModuleRecord;

const APPLIER: Applier<'static> = Applier {
    owner: OWNER,
    adopt: false,
};

fn uid_sent(body: &Value) -> Option<&str> {
    body["metadata"]["uid"].as_str()
}

/// Apply ConfigMap `ns/a` as `plan` says, against `script`; the result and the requests.
async fn write_a(
    plan: Plan,
    script: Vec<Exchange>,
) -> (
    Result<Vec<super::Applied>, ModuleError>,
    Vec<crate::api::mock::Received>,
) {
    let (target, server) = target(script);
    let result = apply(&target, APPLIER, vec![wanted("a")], vec![plan]).await;
    drop(target);
    (result, server.received().await)
}

fn ours(uid: &str) -> Value {
    configmap("a", Some(uid), Some(OWNER))
}

fn object_error(result: Result<Vec<super::Applied>, ModuleError>) -> (String, String) {
    match result {
        Err(ModuleError::Object { object, message }) => (object, message),
        other => panic!("expected an error about an object, got {other:?}"),
    }
}

#[tokio::test]
async fn a_new_object_is_applied_by_the_modules_field_manager_without_force() {
    let (result, got) = write_a(
        Plan::CREATE,
        vec![Exchange::ok(Method::PATCH, CM_A, ours("u1"))],
    )
    .await;
    assert_eq!(result.unwrap()[0].uid().as_deref(), Some("u1"));
    assert!(got[0].query.contains("fieldManager=tessera-module-m"));
    assert!(!got[0].query.contains("force=true"));
    assert_eq!(uid_sent(&got[0].body), None);
    assert_eq!(
        got[0].body["metadata"]["labels"]["modules.tessera.dev/module"],
        "m"
    );
}

#[tokio::test]
async fn an_update_sends_the_recorded_uid_as_a_precondition() {
    let (result, got) = write_a(
        Plan::update(Some("u1".into()), false),
        vec![Exchange::ok(Method::PATCH, CM_A, ours("u1"))],
    )
    .await;
    assert!(result.is_ok());
    assert_eq!(uid_sent(&got[0].body), Some("u1"));
}

#[tokio::test]
async fn an_object_replaced_meanwhile_is_read_again_and_written_under_its_new_uid() {
    let replaced = "metadata.uid: Invalid value: \"u1\": field is immutable";
    let (result, got) = write_a(
        Plan::update(Some("u1".into()), false),
        vec![
            Exchange::fails(Method::PATCH, CM_A, 422, replaced),
            Exchange::ok(Method::GET, CM_A, ours("u2")),
            Exchange::ok(Method::PATCH, CM_A, ours("u2")),
        ],
    )
    .await;
    assert_eq!(result.unwrap()[0].uid().as_deref(), Some("u2"));
    assert_eq!(uid_sent(&got[2].body), Some("u2"));
    assert!(got[2].query.contains("force=true"));
}

#[tokio::test]
async fn an_object_deleted_meanwhile_is_made_again() {
    let gone = "Precondition failed: uid mismatch";
    let (result, got) = write_a(
        Plan::update(Some("u1".into()), false),
        vec![
            Exchange::fails(Method::PATCH, CM_A, 409, gone),
            Exchange::fails(Method::GET, CM_A, 404, "configmaps \"a\" not found"),
            Exchange::ok(Method::PATCH, CM_A, ours("u3")),
        ],
    )
    .await;
    assert_eq!(result.unwrap()[0].uid().as_deref(), Some("u3"));
    assert_eq!(
        uid_sent(&got[2].body),
        None,
        "a new object has no uid to send"
    );
}

#[tokio::test]
async fn fields_another_module_set_are_not_taken_over() {
    let conflict = "Apply failed with 1 conflict: conflict with \"tessera-module-other\": .data.k";
    let (result, got) = write_a(
        Plan::update(Some("u1".into()), false),
        vec![
            Exchange::fails(Method::PATCH, CM_A, 409, conflict),
            Exchange::ok(Method::GET, CM_A, ours("u1")),
        ],
    )
    .await;
    let (object, message) = object_error(result);
    assert_eq!(object, "ConfigMap ns/a");
    assert!(
        message.contains("tessera-module-other, another module"),
        "{message}"
    );
    assert_eq!(got.len(), 2, "nothing forced");
}

#[tokio::test]
async fn a_field_edited_by_hand_is_put_back_with_force() {
    let conflict = "Apply failed with 1 conflict: conflict with \"kubectl-edit\": .data.k";
    let (result, got) = write_a(
        Plan::update(Some("u1".into()), false),
        vec![
            Exchange::fails(Method::PATCH, CM_A, 409, conflict),
            Exchange::ok(Method::GET, CM_A, ours("u1")),
            Exchange::ok(Method::PATCH, CM_A, ours("u1")),
        ],
    )
    .await;
    assert!(result.is_ok());
    assert!(got[2].query.contains("force=true"));
    assert_eq!(uid_sent(&got[2].body), Some("u1"));
}

#[tokio::test]
async fn an_object_someone_else_made_in_its_place_is_refused() {
    let gone = "Precondition failed: uid mismatch";
    let (result, got) = write_a(
        Plan::update(Some("u1".into()), false),
        vec![
            Exchange::fails(Method::PATCH, CM_A, 409, gone),
            Exchange::ok(Method::GET, CM_A, configmap("a", Some("u9"), None)),
        ],
    )
    .await;
    let (_, message) = object_error(result);
    assert!(
        message.contains("not created by this module (field managers: kubectl-client-side-apply)"),
        "{message}"
    );
    assert_eq!(got.len(), 2);
}

#[tokio::test]
async fn a_forbidden_write_names_the_object_and_the_servers_words() {
    let forbidden = "configmaps \"a\" is forbidden: User \"m\" cannot patch resource";
    let (result, _) = write_a(
        Plan::CREATE,
        vec![Exchange::fails(Method::PATCH, CM_A, 403, forbidden)],
    )
    .await;
    assert_eq!(
        object_error(result),
        ("ConfigMap ns/a".to_string(), forbidden.to_string())
    );
}

#[tokio::test]
async fn a_failure_part_way_leaves_the_objects_before_it_written_and_stops() {
    let cm_b = "/api/v1/namespaces/ns/configmaps/b";
    let (target, server) = target(vec![
        Exchange::ok(Method::PATCH, CM_A, ours("u1")),
        Exchange::fails(Method::PATCH, cm_b, 403, "forbidden"),
    ]);
    let objects = vec![wanted("a"), wanted("b"), wanted("c")];
    let plans = vec![Plan::CREATE; 3];
    let result = apply(&target, APPLIER, objects, plans).await;
    drop(target);
    let got = server.received().await;
    assert_eq!(object_error(result).0, "ConfigMap ns/b");
    assert_eq!(got.len(), 2, "c is not written after b failed");
}

#[tokio::test]
async fn an_object_that_changes_under_every_attempt_is_left_for_the_next_pass() {
    let replaced = "metadata.uid: Invalid value: field is immutable";
    let mut script = Vec::new();
    for i in 0..super::ATTEMPTS {
        script.push(Exchange::fails(Method::PATCH, CM_A, 422, replaced));
        script.push(Exchange::ok(Method::GET, CM_A, ours(&format!("u{i}"))));
    }
    let (result, _) = write_a(Plan::update(Some("u".into()), false), script).await;
    let (_, message) = object_error(result);
    assert!(message.contains("changed under every attempt"), "{message}");
}

#[tokio::test]
async fn planning_refuses_an_object_this_module_did_not_make() {
    let (target, server) = target(vec![Exchange::ok(
        Method::GET,
        CM_A,
        configmap("a", Some("u9"), None),
    )]);
    let planned = plan(&target, APPLIER, &[wanted("a")], &ModuleRecord::default()).await;
    drop(target);
    server.received().await;
    let why = planned.unwrap().unwrap_err();
    assert!(
        why.starts_with("ConfigMap ns/a: exists and was not created by this module"),
        "{why}"
    );
}

#[tokio::test]
async fn planning_takes_an_object_over_when_the_set_adopts() {
    let (target, server) = target(vec![Exchange::ok(
        Method::GET,
        CM_A,
        configmap("a", Some("u9"), None),
    )]);
    let adopting = Applier {
        adopt: true,
        ..APPLIER
    };
    let planned = plan(&target, adopting, &[wanted("a")], &ModuleRecord::default()).await;
    drop(target);
    server.received().await;
    assert_eq!(
        planned.unwrap().unwrap(),
        vec![Plan::update(Some("u9".into()), true)]
    );
}

#[tokio::test]
async fn planning_needs_no_request_for_an_object_the_inventory_knows() {
    let (target, server) = target(vec![]);
    let record: ModuleRecord = serde_json::from_value(json!({
        "version": "1.0.0", "objects": [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": "ns", "name": "a", "uid": "u1"}]
    }))
    .unwrap();
    let planned = plan(&target, APPLIER, &[wanted("a")], &record).await;
    drop(target);
    assert!(server.received().await.is_empty());
    assert_eq!(
        planned.unwrap().unwrap(),
        vec![Plan::update(Some("u1".into()), false)]
    );
}
