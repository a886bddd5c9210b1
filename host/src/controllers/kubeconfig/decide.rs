//! The RuntimeKubeconfig controller's decisions: whether a kubeconfig is due for rotation,
//! what the Secret holding it says, and which status a pass writes. Pure; `reconcile.rs`
//! fetches and writes what these decide.
//!
//! Every condition type and reason the controller writes is spelled here.

use std::time::Duration;

use crate::controllers::kit::SecretBuilder;
use crate::controllers::kit::rotation::{self, Rotation};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Secret;
use kube::{Resource, ResourceExt};

use crate::controllers::labels;
use crate::crd::{
    ConditionStatus, ConditionType, KubeconfigState, Reason, RuntimeKubeconfig,
    RuntimeKubeconfigStatus, set_condition,
};
use crate::time::parse_rfc3339;

/// How long the kubeconfig held lives: from its sync to the expiry Gardener granted
/// (Gardener lowers a request above its maximum without saying so), at most `configured`
/// (the lifetime asked for; also when the expiry is unknown).
pub(crate) fn lifetime(held: &Held, configured: Duration) -> Duration {
    match (held.last_sync, held.expiry) {
        (Some(sync), Some(expiry)) => granted(sync, expiry).min(configured),
        _ => configured,
    }
}

/// The time from `from` to `expiry` (zero when it is past).
pub(crate) fn granted(from: Timestamp, expiry: Timestamp) -> Duration {
    Duration::try_from(expiry.duration_since(from)).unwrap_or_default()
}

/// What the Secret and the RuntimeKubeconfig say about the kubeconfig held now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Held {
    /// When the Secret was last written (its `last-sync` annotation).
    pub(crate) last_sync: Option<Timestamp>,
    /// When its credential expires, as Gardener said (`status.expiry`).
    pub(crate) expiry: Option<Timestamp>,
    /// An operator asked for a rotation now (annotation on the RuntimeKubeconfig).
    pub(crate) forced: bool,
    /// The Secret holds the key the kubeconfig is expected under.
    pub(crate) has_key: bool,
}

pub(crate) fn held(rkc: &RuntimeKubeconfig, secret: Option<&Secret>) -> Held {
    let annotation = secret.and_then(|s| s.annotations().get(labels::LAST_SYNC));
    Held {
        last_sync: parse_rfc3339(annotation.map(String::as_str)),
        expiry: parse_rfc3339(rkc.status.as_ref().and_then(|s| s.expiry.as_deref())),
        forced: labels::is_true(rkc.metadata.annotations.as_ref(), labels::FORCE_ROTATION),
        has_key: secret
            .and_then(|s| s.data.as_ref())
            .is_some_and(|d| d.contains_key(&rkc.spec.secret.key)),
    }
}

/// Whether to fetch a new kubeconfig now: never synced, forced, missing from the Secret,
/// or due after the rotation fraction of its lifetime (the one rotation decision,
/// [`rotation`]).
pub(crate) fn rotation(held: &Held, now: Timestamp, lifetime: Duration, fraction: f64) -> Rotation {
    let stale = held.forced || !held.has_key;
    rotation::rotation(held.last_sync, lifetime, stale, now, fraction)
}

/// The Secret holds a kubeconfig whose fetch the status never recorded: the host that
/// wrote it stopped before its status write (a crash, a shard handed over). What Gardener
/// granted is unknown and nothing says the RuntimeKubeconfig is Ready, so it is fetched
/// anew rather than waited on.
pub(crate) fn unrecorded(held: &Held) -> bool {
    held.last_sync.is_some() && held.expiry.is_none()
}

/// Why a RuntimeKubeconfig does nothing: the `Ready` reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub(crate) reason: Reason,
    pub(crate) message: String,
}

/// It is not bound to the Runtime it names (see `binding::unbound`).
pub(crate) fn not_bound(why: &str) -> Refusal {
    Refusal {
        reason: Reason::NotBound,
        message: format!("refused: {why}; nothing is fetched or written"),
    }
}

/// Its Secret exists and was created by someone else: never overwritten.
pub(crate) fn secret_not_owned(namespace: &str, name: &str) -> Refusal {
    Refusal {
        reason: Reason::SecretNotOwned,
        message: format!(
            "Secret {namespace}/{name} exists and was not created for this RuntimeKubeconfig; it is left as it is"
        ),
    }
}

/// The status of a refused RuntimeKubeconfig: failed, until a look after it or its Runtime
/// changed finds it bound.
pub(crate) fn refused(
    mut status: RuntimeKubeconfigStatus,
    generation: Option<i64>,
    refusal: Refusal,
) -> RuntimeKubeconfigStatus {
    status.state = Some(KubeconfigState::Failed);
    status.observed_generation = generation;
    set_condition(
        &mut status.conditions,
        ConditionType::Ready,
        ConditionStatus::False,
        refusal.reason,
        refusal.message,
        generation,
    );
    status
}

/// The status after Gardener did not issue a kubeconfig. A kubeconfig written before still
/// works until it expires, so a Ready one stays Ready; the condition says what failed.
pub(crate) fn fetch_failed(
    mut status: RuntimeKubeconfigStatus,
    generation: Option<i64>,
    shoot: &str,
    error: &str,
) -> RuntimeKubeconfigStatus {
    set_condition(
        &mut status.conditions,
        ConditionType::Ready,
        ConditionStatus::False,
        Reason::FetchFailed,
        format!("admin kubeconfig for Shoot {shoot}: {error}"),
        generation,
    );
    if status.state != Some(KubeconfigState::Ready) {
        status.state = Some(KubeconfigState::Failed);
    }
    status
}

/// The status after the Secret `secret` got a kubeconfig valid until `expiry`.
pub(crate) fn synced(
    mut status: RuntimeKubeconfigStatus,
    generation: Option<i64>,
    secret: &str,
    last_sync: String,
    expiry: String,
) -> RuntimeKubeconfigStatus {
    status.state = Some(KubeconfigState::Ready);
    status.last_sync = Some(last_sync);
    status.expiry = Some(expiry);
    status.observed_generation = generation;
    set_condition(
        &mut status.conditions,
        ConditionType::Ready,
        ConditionStatus::True,
        Reason::KubeconfigSynced,
        format!("Secret {secret} holds a kubeconfig"),
        generation,
    );
    status
}

/// The Secret to apply: the kubeconfig under its key, labelled as the kubeconfig of its
/// Runtime, stamped with the sync time and controlled by `rkc` (so `binding::owns` holds
/// and it goes with its owner).
pub(crate) fn secret_doc(rkc: &RuntimeKubeconfig, kubeconfig: String, synced: &str) -> Secret {
    let secret_ref = &rkc.spec.secret;
    let namespace = Some(secret_ref.namespace.clone());
    SecretBuilder::named(namespace, secret_ref.name.clone())
        .label(labels::RUNTIME, &rkc.spec.runtime)
        .label(labels::KUBECONFIG, "true")
        .annotate(labels::LAST_SYNC, synced)
        .owned_by(rkc.controller_owner_ref(&()))
        .data(&secret_ref.key, kubeconfig.into_bytes())
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use serde_json::json;

    const HOUR: Duration = Duration::from_secs(3600);

    fn rkc(annotations: serde_json::Value) -> RuntimeKubeconfig {
        serde_json::from_value(json!({
            "apiVersion": "tessera.dev/v1alpha1", "kind": "RuntimeKubeconfig",
            "metadata": {"name": "rt", "namespace": "team-a", "uid": "k1",
                "annotations": annotations},
            "spec": {"runtime": "rt", "shoot": {"name": "s1", "namespace": "garden-kyma-dev"},
                "secret": {"namespace": "team-a", "name": "kubeconfig-rt", "key": "config"}},
        }))
        .unwrap()
    }

    fn secret(last_sync: Option<&str>, key: &str) -> Secret {
        let annotations = last_sync.map(|t| json!({ labels::LAST_SYNC: t }));
        serde_json::from_value(json!({
            "metadata": {"name": "kubeconfig-rt", "annotations": annotations},
            "data": { key: "a3ViZWNvbmZpZw==" },
        }))
        .unwrap()
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn synced_at(text: &str) -> Held {
        Held {
            last_sync: Some(at(text)),
            expiry: None,
            forced: false,
            has_key: true,
        }
    }

    fn ready(status: &RuntimeKubeconfigStatus) -> (ConditionStatus, &str, &str) {
        let c = status
            .conditions
            .iter()
            .find(|c| c.is(ConditionType::Ready))
            .unwrap();
        (c.status, c.reason.as_str(), c.message.as_str())
    }

    #[test]
    fn rotation_comes_after_the_configured_fraction_of_the_lifetime() {
        let held = synced_at("2026-01-01T00:00:00Z");
        let early = at("2026-01-01T11:00:00Z");
        assert_eq!(rotation(&held, early, 24 * HOUR, 0.5), Rotation::Wait(HOUR));
    }

    #[test]
    fn the_lifetime_is_what_gardener_granted_at_most_what_was_asked() {
        let mut held = synced_at("2026-01-01T00:00:00Z");
        // Unknown expiry: the lifetime asked for.
        assert_eq!(lifetime(&held, 24 * HOUR), 24 * HOUR);
        // Gardener lowered 24 h to its maximum of 2 h.
        held.expiry = Some(at("2026-01-01T02:00:00Z"));
        assert_eq!(lifetime(&held, 24 * HOUR), 2 * HOUR);
        assert_eq!(
            rotation::rotate_after(lifetime(&held, 24 * HOUR), 0.5),
            HOUR
        );
        // Never longer than asked.
        assert_eq!(lifetime(&held, HOUR), HOUR);
        // An expiry before the sync (a status write lost, a clock off): rotate soon, but
        // not every second.
        held.expiry = Some(at("2025-12-31T00:00:00Z"));
        assert_eq!(lifetime(&held, 24 * HOUR), Duration::ZERO);
        assert_eq!(
            rotation::rotate_after(Duration::ZERO, 0.57),
            Duration::from_secs(5)
        );
    }

    #[test]
    fn the_secret_tells_when_it_was_synced_and_whether_it_holds_the_key() {
        let held = held(
            &rkc(json!(null)),
            Some(&secret(Some("2026-01-01T00:00:00Z"), "config")),
        );
        assert_eq!(held, synced_at("2026-01-01T00:00:00Z"));
    }

    #[test]
    fn a_secret_without_the_key_does_not_hold_the_kubeconfig() {
        let held = held(&rkc(json!(null)), Some(&secret(None, "other")));
        assert!(!held.has_key);
        assert_eq!(held.last_sync, None);
    }

    #[test]
    fn the_force_annotation_asks_for_a_rotation() {
        let annotations = json!({ labels::FORCE_ROTATION: "true" });
        assert!(held(&rkc(annotations), None).forced);
    }

    #[test]
    fn a_fresh_kubeconfig_waits_until_it_is_due() {
        let held = synced_at("2026-01-01T00:00:00Z");
        let now = at("2026-01-01T04:00:00Z");
        assert_eq!(
            rotation(&held, now, 24 * HOUR, 0.5),
            Rotation::Wait(8 * HOUR)
        );
    }

    #[test]
    fn a_kubeconfig_whose_fetch_no_status_recorded_is_fetched_anew() {
        let mut held = synced_at("2026-01-01T00:00:00Z");
        assert!(unrecorded(&held));
        held.expiry = Some(at("2026-01-02T00:00:00Z"));
        assert!(!unrecorded(&held));
        held.last_sync = None;
        assert!(!unrecorded(&held), "never synced: rotated anyway");
    }

    #[test]
    fn a_kubeconfig_is_rotated_once_due() {
        let held = synced_at("2026-01-01T00:00:00Z");
        let now = at("2026-01-01T12:00:00Z");
        assert_eq!(rotation(&held, now, 24 * HOUR, 0.5), Rotation::Rotate);
    }

    #[test]
    fn a_kubeconfig_never_synced_is_rotated() {
        let held = Held {
            last_sync: None,
            expiry: None,
            forced: false,
            has_key: true,
        };
        assert_eq!(
            rotation(&held, at("2026-01-01T00:00:00Z"), HOUR, 0.5),
            Rotation::Rotate
        );
    }

    #[test]
    fn a_forced_rotation_does_not_wait() {
        let mut held = synced_at("2026-01-01T00:00:00Z");
        held.forced = true;
        assert_eq!(
            rotation(&held, at("2026-01-01T00:00:01Z"), HOUR, 0.5),
            Rotation::Rotate
        );
    }

    #[test]
    fn a_missing_key_does_not_wait() {
        let mut held = synced_at("2026-01-01T00:00:00Z");
        held.has_key = false;
        assert_eq!(
            rotation(&held, at("2026-01-01T00:00:01Z"), HOUR, 0.5),
            Rotation::Rotate
        );
    }

    #[test]
    fn a_refusal_fails_the_kubeconfig_with_its_reason() {
        let status = refused(
            Default::default(),
            Some(3),
            not_bound("it has no controller owner"),
        );
        assert_eq!(status.state, Some(KubeconfigState::Failed));
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(
            ready(&status),
            (
                ConditionStatus::False,
                "NotBound",
                "refused: it has no controller owner; nothing is fetched or written"
            )
        );
    }

    #[test]
    fn a_foreign_secret_is_named_in_the_refusal() {
        let refusal = secret_not_owned("team-a", "kubeconfig-rt");
        assert_eq!(refusal.reason, Reason::SecretNotOwned);
        assert!(
            refusal
                .message
                .starts_with("Secret team-a/kubeconfig-rt exists and was not created"),
            "{}",
            refusal.message
        );
    }

    #[test]
    fn a_failed_fetch_fails_a_kubeconfig_that_never_was_ready() {
        let status = fetch_failed(Default::default(), Some(1), "s1", "403 Forbidden");
        assert_eq!(status.state, Some(KubeconfigState::Failed));
        assert_eq!(
            ready(&status),
            (
                ConditionStatus::False,
                "FetchFailed",
                "admin kubeconfig for Shoot s1: 403 Forbidden"
            )
        );
    }

    #[test]
    fn a_failed_fetch_keeps_a_ready_kubeconfig_ready_until_it_expires() {
        let before = RuntimeKubeconfigStatus {
            state: Some(KubeconfigState::Ready),
            ..Default::default()
        };
        let status = fetch_failed(before, Some(1), "s1", "timeout");
        assert_eq!(status.state, Some(KubeconfigState::Ready));
        assert_eq!(ready(&status).1, "FetchFailed");
    }

    #[test]
    fn a_sync_records_when_and_until_when() {
        let before = fetch_failed(Default::default(), Some(1), "s1", "timeout");
        let status = synced(
            before,
            Some(2),
            "kubeconfig-rt",
            "2026-01-01T00:00:00Z".into(),
            "2026-01-02T00:00:00Z".into(),
        );
        assert_eq!(status.state, Some(KubeconfigState::Ready));
        assert_eq!(status.last_sync.as_deref(), Some("2026-01-01T00:00:00Z"));
        assert_eq!(status.expiry.as_deref(), Some("2026-01-02T00:00:00Z"));
        assert_eq!(status.observed_generation, Some(2));
        assert_eq!(
            ready(&status),
            (
                ConditionStatus::True,
                "KubeconfigSynced",
                "Secret kubeconfig-rt holds a kubeconfig"
            )
        );
    }

    #[test]
    fn the_secret_written_holds_the_kubeconfig_under_its_key_with_the_sync_time() {
        let doc = secret_doc(
            &rkc(json!(null)),
            "apiVersion: v1".into(),
            "2026-01-01T00:00:00Z",
        );
        let written = doc;
        assert_eq!(written.metadata.namespace.as_deref(), Some("team-a"));
        assert_eq!(
            written.annotations()[labels::LAST_SYNC],
            "2026-01-01T00:00:00Z"
        );
        assert_eq!(
            written.data.as_ref().unwrap()["config"],
            ByteString(b"apiVersion: v1".to_vec())
        );
    }

    #[test]
    fn the_secret_written_is_one_its_kubeconfig_owns() {
        let kubeconfig = rkc(json!(null));
        let doc = secret_doc(&kubeconfig, String::new(), "2026-01-01T00:00:00Z");
        let written = doc;
        assert!(super::super::binding::owns(&kubeconfig, &written));
    }
}
