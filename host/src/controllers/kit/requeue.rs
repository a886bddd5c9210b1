//! When to look at an object again, as a decide function says it: the one requeue decision
//! of every controller, carried out by [`Requeue::action`] through the one error policy.

use std::time::Duration;

use kube::runtime::controller::Action;

use crate::controllers::Context;

/// When to reconcile an object again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Requeue {
    /// After this long.
    After(Duration),
    /// Back off as for a failure described by `failure` (exponential, with jitter, per
    /// object; the log capped), but no later than `at_most` if given.
    Backoff {
        failure: String,
        at_most: Option<Duration>,
    },
}

impl Requeue {
    /// The requeue of object `key`: a backoff counts as one more failure of it.
    pub(crate) fn action(self, ctx: &Context, key: &str) -> Action {
        Action::requeue(match self {
            Requeue::After(after) => after,
            Requeue::Backoff { failure, at_most } => {
                let backoff = super::retry_later(ctx, key, &failure);
                at_most.map_or(backoff, |limit| limit.min(backoff))
            }
        })
    }
}
