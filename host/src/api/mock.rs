//! A mocked API server for unit tests of code that talks to Kubernetes (the kube-rs
//! `controller-rs` way: `tower_test::mock::pair` behind a real `kube::Client`). A test lists
//! the requests it expects, in order, each with the answer to give; the server checks the
//! method and path of each, records its query and body, and fails the test on a request
//! nobody expected or an expected one that never came.

use http::{Method, Request, Response, StatusCode};
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};

/// One request the code under test is expected to make, and the answer to it.
#[derive(Debug, Clone)]
pub(crate) struct Exchange {
    method: Method,
    path: String,
    status: StatusCode,
    answer: Value,
}

impl Exchange {
    /// A request of `method` on `path` (without the query), answered 200 with `object`.
    pub(crate) fn ok(method: Method, path: &str, object: Value) -> Self {
        Self {
            method,
            path: path.to_string(),
            status: StatusCode::OK,
            answer: object,
        }
    }

    /// A request of `method` on `path` answered with an error Status of `code`, saying
    /// `message` (as the API server words it).
    pub(crate) fn fails(method: Method, path: &str, code: u16, message: &str) -> Self {
        let reason = match code {
            403 => "Forbidden",
            404 => "NotFound",
            409 => "Conflict",
            422 => "Invalid",
            _ => "InternalError",
        };
        Self {
            method,
            path: path.to_string(),
            status: StatusCode::from_u16(code).expect("an HTTP status"),
            answer: json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": message, "reason": reason, "code": code,
            }),
        }
    }
}

/// A request the server received: what the test asserts on afterwards.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) query: String,
    /// The body as JSON (`Null` when empty).
    pub(crate) body: Value,
}

/// The mocked server's side: await it (after dropping every client) for what it received.
pub(crate) struct Server(tokio::task::JoinHandle<Vec<Received>>);

impl Server {
    /// Every request, in order; panics (failing the test) if one was not as expected or
    /// an expected one never came.
    pub(crate) async fn received(self) -> Vec<Received> {
        match self.0.await {
            Ok(received) => received,
            Err(e) => std::panic::resume_unwind(e.into_panic()),
        }
    }
}

/// A client whose API server answers `script`, in order.
pub(crate) fn serve(script: Vec<Exchange>) -> (Client, Server) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let task = tokio::spawn(async move {
        let mut handle = std::pin::pin!(handle);
        let mut received = Vec::new();
        for expected in script {
            let what = format!("{} {}", expected.method, expected.path);
            let Some((request, send)) = handle.next_request().await else {
                panic!("expected {what}; no more requests came (got {received:#?})");
            };
            let got = read(request).await;
            assert_eq!(
                (&got.method, got.path.as_str()),
                (&expected.method, expected.path.as_str()),
                "request {} (after {received:#?})",
                received.len() + 1
            );
            received.push(got);
            let body = serde_json::to_vec(&expected.answer).expect("JSON");
            let response = Response::builder()
                .status(expected.status)
                .header("content-type", "application/json")
                .body(Body::from(body))
                .expect("a response");
            send.send_response(response);
        }
        if let Some((request, _)) = handle.next_request().await {
            let extra = read(request).await;
            panic!("an unexpected request: {extra:#?} (after {received:#?})");
        }
        received
    });
    (Client::new(service, "default"), Server(task))
}

async fn read(request: Request<Body>) -> Received {
    let (parts, body) = request.into_parts();
    let bytes = body.collect_bytes().await.expect("a request body");
    Received {
        method: parts.method,
        path: parts.uri.path().to_string(),
        query: parts.uri.query().unwrap_or_default().to_string(),
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::Api;

    #[tokio::test]
    async fn answers_in_order_and_records_what_it_got() {
        let path = "/api/v1/namespaces/ns/configmaps/a";
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}});
        let (client, server) = serve(vec![
            Exchange::ok(Method::GET, path, cm),
            Exchange::fails(Method::DELETE, path, 403, "forbidden"),
        ]);
        let api: Api<ConfigMap> = Api::namespaced(client, "ns");
        assert!(api.get("a").await.is_ok());
        let e = api.delete("a", &Default::default()).await.unwrap_err();
        assert!(crate::api::is_forbidden(&e));
        drop(api);
        let got = server.received().await;
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].method, Method::DELETE);
    }

    #[tokio::test]
    #[should_panic(expected = "an unexpected request")]
    async fn an_unexpected_request_fails_the_test() {
        let (client, server) = serve(vec![]);
        let api: Api<ConfigMap> = Api::namespaced(client, "ns");
        let _ = api.get("a").await;
        drop(api);
        server.received().await;
    }

    #[tokio::test]
    #[should_panic(expected = "no more requests came")]
    async fn a_missing_request_fails_the_test() {
        let path = "/api/v1/namespaces/ns/configmaps/a";
        let (client, server) = serve(vec![Exchange::ok(Method::GET, path, json!({}))]);
        drop(client);
        server.received().await;
    }
}
