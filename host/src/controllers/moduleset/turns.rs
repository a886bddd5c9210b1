//! Turns on target clusters: at most so many ModuleSet passes run against one API server at
//! once (`--module-target-concurrency`). The controller's workers are shared by every
//! target; without turns, sets of one slow or hanging cluster could hold all of them and
//! starve every other cluster. A set that finds its target's turns taken does not wait in a
//! worker: it is looked at again after its backoff (with jitter), quietly.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Passes per target, by API server URL.
pub(crate) struct Turns {
    /// 0: no limit.
    limit: usize,
    servers: Mutex<HashMap<String, Arc<Semaphore>>>,
}

/// A pass's turn on its target, given back when dropped.
#[derive(Debug)]
pub(crate) struct Turn {
    _permit: Option<OwnedSemaphorePermit>,
}

impl Turns {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit,
            servers: Mutex::new(HashMap::new()),
        }
    }

    /// A turn on `server`, or `None` while the limit's worth of passes run there.
    pub(crate) fn take(&self, server: &str) -> Option<Turn> {
        if self.limit == 0 {
            return Some(Turn { _permit: None });
        }
        let semaphore = {
            let mut servers = self.servers.lock().expect("turns lock");
            servers
                .entry(server.to_string())
                .or_insert_with(|| Arc::new(Semaphore::new(self.limit)))
                .clone()
        };
        let permit = semaphore.try_acquire_owned().ok()?;
        Some(Turn {
            _permit: Some(permit),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_target_has_its_own_turns() {
        let turns = Turns::new(2);
        let a1 = turns.take("https://a").expect("first turn");
        let _a2 = turns.take("https://a").expect("second turn");
        assert!(turns.take("https://a").is_none(), "a's turns are taken");
        // Another cluster is not held up by a busy one.
        let _b = turns.take("https://b").expect("b has its own");
        drop(a1);
        assert!(turns.take("https://a").is_some(), "a turn given back");
    }

    #[test]
    fn zero_means_no_limit() {
        let turns = Turns::new(0);
        let held: Vec<Turn> = (0..100).filter_map(|_| turns.take("https://a")).collect();
        assert_eq!(held.len(), 100);
    }
}
