//! Letting go against a mocked API server: what is deleted or released under which
//! preconditions, and how each answer is followed — 404s, 403s, conflicts, finalizers,
//! objects that are not this module's.

use http::Method;
use serde_json::{Value, json};

use super::{Last, LetGo, let_go};
use crate::api::mock::{Exchange, Received};
use crate::modules::error::ModuleError;
use crate::modules::fixtures::{CM_A, OWNER, cm_key, configmap, deleted, namespace, target};
use crate::modules::inventory::ObjectKey;
use crate::modules::ownership::Whose;
use crate::modules::types::Owner;

/// Let go of `key` for [`OWNER`] (the inventory recording `recorded`) against `script`.
async fn let_go_of(
    key: &ObjectKey,
    recorded: Option<&str>,
    last: Last,
    script: Vec<Exchange>,
) -> (Result<LetGo, ModuleError>, Vec<Received>) {
    let (target, server) = target(script);
    let kind = target
        .kind(&key.api_version, &key.kind)
        .await
        .unwrap()
        .unwrap();
    let api = target.api(&kind, key.namespace.as_deref());
    let result = let_go(&target, &api, key, OWNER, recorded, last).await;
    drop((api, target));
    (result, server.received().await)
}

fn ours(uid: &str) -> Value {
    configmap("a", Some(uid), Some(OWNER))
}

fn preconditions(got: &Received) -> &Value {
    &got.body["preconditions"]
}

#[tokio::test]
async fn deleting_sends_the_uid_as_a_precondition() {
    let (result, got) = let_go_of(
        &cm_key("a"),
        Some("u1"),
        Last::Delete,
        vec![
            Exchange::ok(Method::GET, CM_A, ours("u1")),
            Exchange::ok(Method::DELETE, CM_A, deleted()),
        ],
    )
    .await;
    assert_eq!(result.unwrap(), LetGo::Done);
    assert_eq!(preconditions(&got[1])["uid"], "u1");
    // Not shareable: a change since the read does not hold the delete up.
    assert!(preconditions(&got[1])["resourceVersion"].is_null());
    assert_eq!(got[1].body["propagationPolicy"], "Background");
}

#[tokio::test]
async fn a_delete_finalizers_hold_is_pending() {
    let mut going = ours("u1");
    going["metadata"]["deletionTimestamp"] = "2026-11-27T00:00:00Z".into();
    going["metadata"]["finalizers"] = json!(["example.com/cleanup"]);
    let (result, _) = let_go_of(
        &cm_key("a"),
        Some("u1"),
        Last::Delete,
        vec![
            Exchange::ok(Method::GET, CM_A, ours("u1")),
            Exchange::ok(Method::DELETE, CM_A, going),
        ],
    )
    .await;
    assert_eq!(result.unwrap(), LetGo::Pending);
}

#[tokio::test]
async fn an_object_already_gone_needs_nothing() {
    let (result, got) = let_go_of(
        &cm_key("a"),
        Some("u1"),
        Last::Delete,
        vec![Exchange::fails(Method::GET, CM_A, 404, "not found")],
    )
    .await;
    assert_eq!(result.unwrap(), LetGo::Done);
    assert_eq!(got.len(), 1, "no delete");
}

#[tokio::test]
async fn an_object_gone_between_the_read_and_the_delete_is_done() {
    let (result, _) = let_go_of(
        &cm_key("a"),
        Some("u1"),
        Last::Delete,
        vec![
            Exchange::ok(Method::GET, CM_A, ours("u1")),
            Exchange::fails(Method::DELETE, CM_A, 404, "not found"),
        ],
    )
    .await;
    assert_eq!(result.unwrap(), LetGo::Done);
}

#[tokio::test]
async fn another_modules_object_is_not_touched() {
    let other = Owner {
        set: "ns/other",
        module: "x",
    };
    let (result, got) = let_go_of(
        &cm_key("a"),
        None,
        Last::Delete,
        vec![Exchange::ok(
            Method::GET,
            CM_A,
            configmap("a", Some("u1"), Some(other)),
        )],
    )
    .await;
    assert_eq!(
        result.unwrap(),
        LetGo::NotOurs(Whose::Tessera {
            set: "ns/other".into(),
            module: "x".into()
        })
    );
    assert_eq!(got.len(), 1, "no delete");
}

#[tokio::test]
async fn an_object_made_anew_under_the_same_name_is_not_deleted() {
    // Labelled as ours, but not the object the inventory recorded.
    let (result, got) = let_go_of(
        &cm_key("a"),
        Some("u-old"),
        Last::Delete,
        vec![Exchange::ok(Method::GET, CM_A, ours("u-new"))],
    )
    .await;
    assert!(matches!(
        result.unwrap(),
        LetGo::NotOurs(Whose::Foreign { .. })
    ));
    assert_eq!(got.len(), 1, "no delete");
}

#[tokio::test]
async fn a_forbidden_delete_is_an_error() {
    let (result, _) = let_go_of(
        &cm_key("a"),
        Some("u1"),
        Last::Delete,
        vec![
            Exchange::ok(Method::GET, CM_A, ours("u1")),
            Exchange::fails(Method::DELETE, CM_A, 403, "forbidden"),
        ],
    )
    .await;
    let e = result.unwrap_err();
    assert!(
        matches!(&e, ModuleError::Kube(k) if crate::api::is_forbidden(k)),
        "{e}"
    );
}

#[tokio::test]
async fn releasing_strips_tesseras_labels_under_the_uid() {
    let (result, got) = let_go_of(
        &cm_key("a"),
        Some("u1"),
        Last::Release,
        vec![
            Exchange::ok(Method::GET, CM_A, ours("u1")),
            Exchange::ok(Method::PATCH, CM_A, configmap("a", Some("u1"), None)),
        ],
    )
    .await;
    assert_eq!(result.unwrap(), LetGo::Done);
    let meta = &got[1].body["metadata"];
    assert_eq!(meta["uid"], "u1");
    assert!(meta["labels"]["app.kubernetes.io/managed-by"].is_null());
    assert!(
        meta["labels"]
            .as_object()
            .unwrap()
            .contains_key("modules.tessera.dev/module")
    );
    assert!(meta["resourceVersion"].is_null());
}

#[tokio::test]
async fn a_release_that_finds_the_object_replaced_leaves_it() {
    let (result, got) = let_go_of(
        &cm_key("a"),
        Some("u1"),
        Last::Release,
        vec![
            Exchange::ok(Method::GET, CM_A, ours("u1")),
            Exchange::fails(
                Method::PATCH,
                CM_A,
                409,
                "Precondition failed: uid mismatch",
            ),
        ],
    )
    .await;
    assert_eq!(result.unwrap(), LetGo::Done);
    assert_eq!(got.len(), 2, "nothing more is tried");
}

#[tokio::test]
async fn a_shareable_object_is_deleted_only_unchanged_since_it_was_read() {
    let key = ObjectKey::of(&namespace("team", "u1", "7", OWNER)).unwrap();
    let path = "/api/v1/namespaces/team";
    let (result, got) = let_go_of(
        &key,
        Some("u1"),
        Last::Delete,
        vec![
            Exchange::ok(Method::GET, path, namespace("team", "u1", "7", OWNER)),
            Exchange::fails(Method::DELETE, path, 409, "the object has been modified"),
            Exchange::ok(Method::GET, path, namespace("team", "u1", "8", OWNER)),
            Exchange::ok(Method::DELETE, path, deleted()),
        ],
    )
    .await;
    assert_eq!(result.unwrap(), LetGo::Done);
    assert_eq!(preconditions(&got[1])["resourceVersion"], "7");
    assert_eq!(preconditions(&got[3])["resourceVersion"], "8");
    assert_eq!(preconditions(&got[3])["uid"], "u1");
}
