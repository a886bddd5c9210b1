//! The one Event sink: every controller publishes through it, so text is clamped the same
//! way and a refused Event never fails a reconcile.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

use crate::crd::EventReason;

/// Longest Event note, in characters (the API server refuses more than 1 KiB).
const NOTE_CHARS: usize = 1024;

/// An Event waiting to be published after the status is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Note {
    pub(crate) warning: bool,
    pub(crate) reason: EventReason,
    pub(crate) text: String,
}

impl Note {
    pub(crate) fn normal(reason: EventReason, text: impl Into<String>) -> Self {
        Self {
            warning: false,
            reason,
            text: text.into(),
        }
    }

    pub(crate) fn warning(reason: EventReason, text: impl Into<String>) -> Self {
        Self {
            warning: true,
            reason,
            text: text.into(),
        }
    }
}

/// Publishes Events as the host's reporter.
#[derive(Clone)]
pub(crate) struct EventSink {
    recorder: Recorder,
}

impl EventSink {
    pub(crate) fn new(client: Client, instance: String) -> Self {
        let reporter = Reporter {
            controller: "tessera".into(),
            instance: Some(instance),
        };
        Self {
            recorder: Recorder::new(client, reporter),
        }
    }

    /// Publish `notes` about `reference` (`action`: what the controller was doing).
    pub(crate) async fn publish(
        &self,
        reference: &ObjectReference,
        action: &str,
        notes: Vec<Note>,
    ) {
        for note in notes {
            let event = Event {
                type_: if note.warning {
                    EventType::Warning
                } else {
                    EventType::Normal
                },
                reason: note.reason.as_str().into(),
                note: Some(note.text.chars().take(NOTE_CHARS).collect()),
                action: action.into(),
                secondary: None,
            };
            let published = match self.recorder.publish(&event, reference).await {
                // API servers before 1.22 refuse Events about cluster-scoped objects unless
                // the reference carries the Event's namespace.
                Err(kube::Error::Api(e)) if e.code == 422 && reference.namespace.is_none() => {
                    let mut in_default = reference.clone();
                    in_default.namespace = Some("default".into());
                    self.recorder.publish(&event, &in_default).await
                }
                other => other,
            };
            if let Err(e) = published {
                tracing::debug!(error = %e, reason = %note.reason, "event not published");
            }
        }
    }
}
