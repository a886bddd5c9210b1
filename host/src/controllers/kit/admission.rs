//! How many reconciles of one controller run at once (`--workers`), admitted first come,
//! first served. kube's own limit (`controller::Config::concurrency`) keeps the objects due
//! beyond it in a hash set and takes them in hash order: under a backlog that never drains
//! (10,000 Runtimes over three replicas) an object can wait for as long as the backlog
//! lasts. Two Runtimes waited 22 minutes for their next reconcile after their Shoot was
//! created, and the watchdog failed `/healthz` (`./x load --runtimes 10000 --replicas 3`).
//! So kube runs every due reconcile and each waits here, on a fair semaphore, before it
//! starts; what waits is a small future (the reconcile itself is built once admitted).

use tokio::sync::{Semaphore, SemaphorePermit};

use super::Controller;

/// One queue per controller.
#[derive(Debug)]
pub(crate) struct Admission {
    /// By `Controller as usize`; `None`: unbounded (`--workers 0`).
    turns: [Option<Semaphore>; 5],
}

impl Admission {
    /// `workers` reconciles at once per controller (0: no bound).
    pub(crate) fn new(workers: u16) -> Self {
        Self {
            turns: std::array::from_fn(|_| {
                (workers > 0).then(|| Semaphore::new(usize::from(workers)))
            }),
        }
    }

    /// Wait for a turn of `controller`, behind every reconcile of it that waited before.
    pub(crate) async fn turn(&self, controller: Controller) -> Option<SemaphorePermit<'_>> {
        let turns = self.turns[controller as usize].as_ref()?;
        // Never closed.
        turns.acquire().await.ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn turns_go_in_the_order_asked_for_and_controllers_do_not_share_them() {
        let admission = std::sync::Arc::new(Admission::new(1));
        let held = admission.turn(Controller::Runtime).await;
        assert!(held.is_some());
        let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut waiting = Vec::new();
        for i in 0..20 {
            let (admission, order) = (admission.clone(), order.clone());
            waiting.push(tokio::spawn(async move {
                let _turn = admission.turn(Controller::Runtime).await;
                order.lock().expect("order").push(i);
            }));
            // Each asks after the one before.
            tokio::task::yield_now().await;
        }
        assert!(
            admission.turn(Controller::Plugin).await.is_some(),
            "another controller's turns are its own"
        );
        assert!(order.lock().expect("order").is_empty(), "one at a time");
        drop(held);
        for task in waiting {
            task.await.expect("admitted");
        }
        assert_eq!(*order.lock().expect("order"), (0..20).collect::<Vec<_>>());
        assert!(Admission::new(0).turn(Controller::Runtime).await.is_none());
    }
}
