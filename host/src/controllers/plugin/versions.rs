//! Per-version decisions of one pass: which digest a version runs (pinned, moved, held for
//! approval, served from the store), what a failed resolution leaves, and whether what ran
//! before can be reused. Pure; `reconcile.rs` does the fetching.

use kube::ResourceExt;

use crate::controllers::kit::Note;
use crate::controllers::labels;
use crate::crd::EventReason;
use crate::crd::{Plugin, PluginStatus, PluginVersion, ResolvedVersion, UpdatePolicy};
use crate::plugins::Resolved;

/// What the decisions need of a loaded version. The act layer passes [`Resolved`]; tests
/// pass a stand-in, since a real one holds a compiled component.
pub(crate) trait Runnable: Clone {
    fn version(&self) -> &str;
    fn reference(&self) -> &str;
    fn manifest_digest(&self) -> &str;
    fn component_digest(&self) -> &str;
    fn verified_by(&self) -> Option<&str>;
}

impl Runnable for Resolved {
    fn version(&self) -> &str {
        &self.version
    }
    fn reference(&self) -> &str {
        &self.reference
    }
    fn manifest_digest(&self) -> &str {
        &self.manifest_digest
    }
    fn component_digest(&self) -> &str {
        &self.component_digest
    }
    fn verified_by(&self) -> Option<&str> {
        self.verified_by.as_deref()
    }
}

/// The status line of `v` before anything is known about it.
pub(crate) fn version_status(v: &PluginVersion) -> ResolvedVersion {
    ResolvedVersion {
        version: v.version.clone(),
        reference: v.reference.clone(),
        ..Default::default()
    }
}

/// The digest `v` was pinned to, if its reference is still the one that was pinned: a
/// changed reference starts over.
pub(crate) fn pinned_digest(old: &PluginStatus, v: &PluginVersion) -> Option<String> {
    old.versions
        .iter()
        .find(|s| s.version == v.version && s.reference == v.reference)
        .and_then(|s| s.digest.clone())
}

/// On this host's first pass, a pinned digest whose bytes are in the store is used as it
/// is, so a restarted host serves at once; the tag is re-resolved on the next pass.
pub(crate) fn stored_pin(
    pinned: Option<&str>,
    first_pass: bool,
    in_store: impl Fn(&str) -> bool,
) -> Option<&str> {
    pinned.filter(|p| first_pass && in_store(p))
}

/// A tag that did not resolve: with a pinned digest the version goes on with it (the
/// registry is down, the digest still names the right bytes), without one it is unusable.
/// Returns the digest to go on with, and the error to record either way.
pub(crate) fn unresolved(pinned: Option<&str>, error: &str) -> (Option<String>, String) {
    match pinned {
        Some(p) => (
            Some(p.to_string()),
            format!("cannot resolve the reference now, using the pinned digest: {error}"),
        ),
        None => (None, error.to_string()),
    }
}

/// What ran before, if it is exactly `digest` of `reference` (and verified when verification
/// is required): reused without fetching or compiling again.
pub(crate) fn reusable<R: Runnable>(
    previous: Option<&R>,
    digest: &str,
    reference: &str,
    require_signature: bool,
) -> Option<R> {
    previous
        .filter(|r| {
            r.manifest_digest() == digest
                && r.reference() == reference
                && (!require_signature || r.verified_by().is_some())
        })
        .cloned()
}

/// `st` once its version loaded as `r`.
pub(crate) fn loaded_status(mut st: ResolvedVersion, r: &impl Runnable) -> ResolvedVersion {
    st.component_digest = Some(r.component_digest().to_string());
    st.verified_by = r.verified_by().map(str::to_string);
    st
}

/// What a version's pinned digest becomes when its tag resolved to another.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pin {
    /// Nothing moved (or nothing was pinned yet: the first resolution pins).
    Keep,
    /// Follow the tag.
    Move { from: String },
    /// Keep running the pinned digest; the new one waits for approval.
    Hold { pinned: String },
}

/// A moved tag is followed only when the Plugin opts into automatic updates or an operator
/// approved exactly that digest; otherwise the fleet keeps what it runs.
pub(crate) fn next_pin(
    pinned: Option<&str>,
    resolved: &str,
    automatic: bool,
    approved: Option<&str>,
) -> Pin {
    match pinned {
        None => Pin::Keep,
        Some(p) if p == resolved => Pin::Keep,
        Some(p) if automatic || approved == Some(resolved) => Pin::Move {
            from: p.to_string(),
        },
        Some(p) => Pin::Hold {
            pinned: p.to_string(),
        },
    }
}

/// The digest version `v` runs: the resolved one, unless the tag moved under a pinned
/// digest that nobody approved (and the Plugin does not update automatically); then the
/// pinned one, with the new one pending in `st`.
pub(crate) fn pin_digest(
    plugin: &Plugin,
    old: &PluginStatus,
    v: &PluginVersion,
    pinned: Option<&str>,
    resolved: String,
    st: &mut ResolvedVersion,
    events: &mut Vec<Note>,
) -> String {
    let automatic = plugin.spec.update_policy == Some(UpdatePolicy::Automatic);
    let approved = approval(plugin, &v.version);
    match next_pin(pinned, &resolved, automatic, approved.as_deref()) {
        Pin::Keep => resolved,
        Pin::Move { from } => {
            let note = format!(
                "version {} ({}) moved from {from} to {resolved}",
                v.version, v.reference
            );
            events.push(Note::normal(EventReason::DigestChanged, note));
            resolved
        }
        Pin::Hold { pinned } => {
            let was_pending = old.versions.iter().any(|o| {
                o.version == v.version && o.pending_digest.as_deref() == Some(resolved.as_str())
            });
            if !was_pending {
                events.push(Note::warning(
                    EventReason::DigestPending,
                    held_note(v, &pinned, &resolved),
                ));
            }
            st.pending_digest = Some(resolved);
            pinned
        }
    }
}

fn held_note(v: &PluginVersion, pinned: &str, resolved: &str) -> String {
    format!(
        "version {} ({}) moved to {resolved}; still running {pinned} until an operator approves it (annotation {}{}: {resolved}, or spec.updatePolicy: Automatic)",
        v.version,
        v.reference,
        labels::APPROVE_PREFIX,
        v.version
    )
}

/// The digest an operator approved for `version` (annotation `approve.tessera.dev/<version>`).
fn approval(plugin: &Plugin, version: &str) -> Option<String> {
    let key = format!("{}{version}", labels::APPROVE_PREFIX);
    plugin.annotations().get(&key).cloned()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A loaded version without a component behind it.
    #[derive(Debug, Clone, PartialEq)]
    pub(crate) struct Ran {
        pub(crate) version: String,
        pub(crate) reference: String,
        pub(crate) manifest: String,
        pub(crate) component: String,
        pub(crate) verified_by: Option<String>,
    }

    impl Ran {
        pub(crate) fn new(version: &str) -> Self {
            Self {
                version: version.into(),
                reference: format!("registry.test/p:{version}"),
                manifest: format!("sha256:m-{version}"),
                component: format!("sha256:c-{version}"),
                verified_by: None,
            }
        }
    }

    impl Runnable for Ran {
        fn version(&self) -> &str {
            &self.version
        }
        fn reference(&self) -> &str {
            &self.reference
        }
        fn manifest_digest(&self) -> &str {
            &self.manifest
        }
        fn component_digest(&self) -> &str {
            &self.component
        }
        fn verified_by(&self) -> Option<&str> {
            self.verified_by.as_deref()
        }
    }

    fn v(version: &str, reference: &str) -> PluginVersion {
        PluginVersion {
            version: version.into(),
            reference: reference.into(),
            requires_downtime: false,
        }
    }

    fn pinned_status(version: &str, reference: &str, digest: &str) -> PluginStatus {
        PluginStatus {
            versions: vec![ResolvedVersion {
                digest: Some(digest.into()),
                ..version_status(&v(version, reference))
            }],
            ..Default::default()
        }
    }

    #[test]
    fn moved_tags_wait_for_approval() {
        assert_eq!(next_pin(None, "sha256:b", false, None), Pin::Keep);
        assert_eq!(
            next_pin(Some("sha256:a"), "sha256:a", false, None),
            Pin::Keep
        );
        assert_eq!(
            next_pin(Some("sha256:a"), "sha256:b", false, None),
            Pin::Hold {
                pinned: "sha256:a".into()
            }
        );
        // Approving another digest approves nothing.
        assert_eq!(
            next_pin(Some("sha256:a"), "sha256:b", false, Some("sha256:c")),
            Pin::Hold {
                pinned: "sha256:a".into()
            }
        );
        assert_eq!(
            next_pin(Some("sha256:a"), "sha256:b", false, Some("sha256:b")),
            Pin::Move {
                from: "sha256:a".into()
            }
        );
        assert_eq!(
            next_pin(Some("sha256:a"), "sha256:b", true, None),
            Pin::Move {
                from: "sha256:a".into()
            }
        );
    }

    #[test]
    fn a_version_keeps_its_pin_while_its_reference_stays() {
        let old = pinned_status("1.0.0", "r/p:1", "sha256:a");
        assert_eq!(
            pinned_digest(&old, &v("1.0.0", "r/p:1")).as_deref(),
            Some("sha256:a")
        );
    }

    #[test]
    fn a_changed_reference_drops_the_pin() {
        let old = pinned_status("1.0.0", "r/p:1", "sha256:a");
        assert_eq!(pinned_digest(&old, &v("1.0.0", "r/p:1.0")), None);
    }

    #[test]
    fn the_first_pass_serves_a_stored_pin_without_the_registry() {
        assert_eq!(
            stored_pin(Some("sha256:a"), true, |_| true),
            Some("sha256:a")
        );
    }

    #[test]
    fn later_passes_resolve_the_tag_even_when_the_pin_is_stored() {
        assert_eq!(stored_pin(Some("sha256:a"), false, |_| true), None);
    }

    #[test]
    fn a_pin_whose_bytes_are_not_stored_is_resolved() {
        assert_eq!(stored_pin(Some("sha256:a"), true, |_| false), None);
        assert_eq!(stored_pin(None, true, |_| true), None);
    }

    #[test]
    fn an_unresolved_tag_goes_on_with_its_pinned_digest() {
        let (digest, error) = unresolved(Some("sha256:a"), "registry down");
        assert_eq!(digest.as_deref(), Some("sha256:a"));
        assert_eq!(
            error,
            "cannot resolve the reference now, using the pinned digest: registry down"
        );
    }

    #[test]
    fn an_unresolved_tag_without_a_pin_is_unusable() {
        assert_eq!(
            unresolved(None, "registry down"),
            (None, "registry down".to_string())
        );
    }

    #[test]
    fn the_same_digest_and_reference_is_reused() {
        let before = Ran::new("1.0.0");
        let reused = reusable(Some(&before), "sha256:m-1.0.0", &before.reference, false);
        assert_eq!(reused, Some(before));
    }

    #[test]
    fn a_moved_digest_or_reference_is_fetched_again() {
        let before = Ran::new("1.0.0");
        assert_eq!(
            reusable(Some(&before), "sha256:other", &before.reference, false),
            None
        );
        assert_eq!(
            reusable(Some(&before), "sha256:m-1.0.0", "r/p:other", false),
            None
        );
    }

    #[test]
    fn an_unverified_version_is_fetched_again_once_verification_is_required() {
        let mut before = Ran::new("1.0.0");
        assert_eq!(
            reusable(
                Some(&before),
                "sha256:m-1.0.0",
                &before.reference.clone(),
                true
            ),
            None
        );
        before.verified_by = Some("key-1".into());
        assert!(
            reusable(
                Some(&before),
                "sha256:m-1.0.0",
                &before.reference.clone(),
                true
            )
            .is_some()
        );
    }

    #[test]
    fn a_loaded_version_reports_its_component_and_signer() {
        let mut ran = Ran::new("1.0.0");
        ran.verified_by = Some("key-1".into());
        let st = loaded_status(version_status(&v("1.0.0", "r/p:1")), &ran);
        assert_eq!(st.component_digest.as_deref(), Some("sha256:c-1.0.0"));
        assert_eq!(st.verified_by.as_deref(), Some("key-1"));
    }
}
