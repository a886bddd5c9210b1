//! Leader fencing: a host writes only while it is sure it still holds the lease. Every
//! client the host writes with passes through [`FenceLayer`], which refuses writes (any
//! method but GET/HEAD) once the fence is closed. The fence is held open by a watcher that
//! reads the Lease and sees this host as its holder; it closes by itself half a renewal
//! grace before the lease can expire (see [`hold_for`]), which is before another host can
//! take the lease over. A host frozen (SIGSTOP, a stalled VM) or cut off from the API server therefore
//! stops writing before its lease can have expired for the others, whatever its tasks were
//! doing when it stopped.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::{Method, Request};
use tower::{Layer, Service};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Until when this host may write.
#[derive(Debug)]
pub struct Fence {
    /// `None`: fencing is off (no leader election); writes always pass.
    open_until: Mutex<Option<Instant>>,
    enabled: bool,
}

/// A write refused because this host may no longer be the leader.
#[derive(Debug, thiserror::Error)]
#[error("write refused: this host is not sure it still holds the leader lease")]
pub struct Fenced;

impl Fence {
    /// A fence that never closes (one host, no leader election).
    pub fn open() -> Arc<Self> {
        Arc::new(Self {
            open_until: Mutex::new(None),
            enabled: false,
        })
    }

    /// A closed fence, opened by [`Fence::hold_until`].
    pub fn closed() -> Arc<Self> {
        Arc::new(Self {
            open_until: Mutex::new(Some(Instant::now())),
            enabled: true,
        })
    }

    /// Keep writes allowed until `until` (never shortens).
    pub fn hold_until(&self, until: Instant) {
        let mut open = self.open_until.lock().expect("fence lock");
        if open.is_none_or(|o| o < until) {
            *open = Some(until);
        }
    }

    /// Whether writes are allowed now.
    pub fn allows_writes(&self) -> bool {
        if !self.enabled {
            return true;
        }
        self.open_until
            .lock()
            .expect("fence lock")
            .is_some_and(|until| Instant::now() < until)
    }

    /// The layer that enforces this fence on a client.
    pub fn layer(self: &Arc<Self>) -> FenceLayer {
        FenceLayer(self.clone())
    }
}

/// How long before the end of the lease the lease manager renews it.
pub fn renew_grace(lease_duration: Duration) -> Duration {
    Duration::from_secs(lease_duration.as_secs().div_ceil(3).max(1))
}

/// How long after the last renewal the fence stays open: past the next renewal (due a
/// grace before the lease ends) by half the grace, so that a reading soon after that
/// renewal extends it without a gap, yet still half a grace before the lease can expire
/// for the others (a standby takes over only a full duration after the last renewal).
pub fn hold_for(lease_duration: Duration) -> Duration {
    lease_duration.saturating_sub(renew_grace(lease_duration) / 2)
}

/// How often the Lease is read to keep the fence open: often enough that a reading
/// follows each renewal well within the half grace [`hold_for`] leaves.
pub fn confirm_every(lease_duration: Duration) -> Duration {
    (renew_grace(lease_duration) / 4).max(Duration::from_millis(100))
}

/// Whether a client error is a write this fence refused.
pub fn refused(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Service(e) if e.downcast_ref::<Fenced>().is_some())
}

/// A tower layer refusing writes while the fence is closed.
#[derive(Clone)]
pub struct FenceLayer(Arc<Fence>);

impl<S> Layer<S> for FenceLayer {
    type Service = FenceService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        FenceService {
            inner,
            fence: self.0.clone(),
        }
    }
}

/// See [`FenceLayer`].
#[derive(Clone)]
pub struct FenceService<S> {
    inner: S,
    fence: Arc<Fence>,
}

type Pending<R> = Pin<Box<dyn std::future::Future<Output = Result<R, BoxError>> + Send>>;

impl<S, B> Service<Request<B>> for FenceService<S>
where
    S: Service<Request<B>>,
    S::Error: Into<BoxError>,
    S::Response: Send + 'static,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pending<S::Response>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let reads = matches!(*request.method(), Method::GET | Method::HEAD);
        if !reads && !self.fence.allows_writes() {
            return Box::pin(std::future::ready(Err(Box::new(Fenced) as BoxError)));
        }
        let pending = self.inner.call(request);
        Box::pin(async move { pending.await.map_err(Into::into) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fence_closes_by_itself() {
        let fence = Fence::closed();
        assert!(!fence.allows_writes());
        fence.hold_until(Instant::now() + Duration::from_millis(50));
        assert!(fence.allows_writes());
        // A reading that arrives late cannot shorten what an earlier one allowed.
        fence.hold_until(Instant::now());
        assert!(fence.allows_writes());
        std::thread::sleep(Duration::from_millis(60));
        assert!(!fence.allows_writes());
        assert!(Fence::open().allows_writes());
    }

    /// The client's transport, answering every request.
    struct Sent;

    impl Service<Request<()>> for Sent {
        type Response = &'static str;
        type Error = BoxError;
        type Future = std::future::Ready<Result<&'static str, BoxError>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: Request<()>) -> Self::Future {
            std::future::ready(Ok("sent"))
        }
    }

    #[tokio::test]
    async fn writes_are_refused_and_reads_pass_when_closed() {
        let fence = Fence::closed();
        let mut service = fence.layer().layer(Sent);
        let get = Request::get("/api/v1/secrets").body(()).unwrap();
        assert_eq!(service.call(get).await.unwrap(), "sent");
        let patch = Request::patch("/api/v1/namespaces/a/secrets/b")
            .body(())
            .unwrap();
        let err = service.call(patch).await.unwrap_err();
        assert!(err.to_string().contains("leader lease"), "{err}");
        fence.hold_until(Instant::now() + Duration::from_secs(5));
        let patch = Request::patch("/api/v1/namespaces/a/secrets/b")
            .body(())
            .unwrap();
        assert_eq!(service.call(patch).await.unwrap(), "sent");
    }
}
