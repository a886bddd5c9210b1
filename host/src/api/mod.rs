//! What a failed Kubernetes API request means, for the host's decisions: one reading of
//! the status codes, so that "already gone", "someone else wrote first" and "not allowed"
//! are told apart the same way everywhere.

/// The HTTP status of an error the API server answered, if it answered.
pub(crate) fn status(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

/// 404: the object (or its kind) is not there.
pub(crate) fn is_not_found(e: &kube::Error) -> bool {
    status(e) == Some(404)
}

/// 409: a conflict: an optimistic-concurrency or uid precondition failed, the object
/// already exists, or server-side apply found fields another manager owns.
pub(crate) fn is_conflict(e: &kube::Error) -> bool {
    status(e) == Some(409)
}

/// 403: the credentials may not do this.
pub(crate) fn is_forbidden(e: &kube::Error) -> bool {
    status(e) == Some(403)
}

/// Objects per page of a fleet-wide listing.
pub(crate) const PAGE: u32 = 100;

/// Hand every object of a listing to `each`, a page at a time (`params.limit`, else
/// [`PAGE`]): a listing of the whole fleet parsed at once holds every object, managed
/// fields and all, at the same moment; a new leader's sweep of 1,000 Runtimes' kubeconfig
/// Secrets held 22 MiB that way (heap profile of `./x load --runtimes 1000 --replicas 3`).
/// `list` asks for one page. Pages come from etcd (no `resourceVersion`): a listing from
/// the API server's cache ignores `limit`.
pub(crate) async fn for_each_page<T, E, Fut>(
    params: &kube::api::ListParams,
    mut list: impl FnMut(kube::api::ListParams) -> Fut,
    mut each: impl FnMut(T),
) -> Result<(), E>
where
    T: Clone,
    Fut: Future<Output = Result<kube::core::ObjectList<T>, E>>,
{
    let mut params = params.clone();
    params.limit = Some(params.limit.unwrap_or(PAGE));
    loop {
        let page = list(params.clone()).await?;
        let next = page.metadata.continue_.filter(|token| !token.is_empty());
        page.items.into_iter().for_each(&mut each);
        match next {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(()),
        }
    }
}

#[cfg(test)]
pub(crate) mod mock;

/// An error the API server answered with `code`, for tests.
#[cfg(test)]
pub(crate) fn answered(code: u16) -> kube::Error {
    kube::Error::Api(Box::new(
        kube::core::Status::failure("no", "Reason").with_code(code),
    ))
}

/// The annotation `kubectl apply` keeps a whole copy of the object in.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// `object` as the host's caches keep it: each managed-fields entry without its field set
/// (the bulk of it: a map of every field its manager set, often as large as the spec) and
/// without the whole copy `kubectl apply` keeps in an annotation. Who wrote the object
/// stays (KIM's field manager marks KIM's Shoots); which fields each manager owns only a
/// write needs, and a write reads the object afresh.
pub(crate) fn slim<K: kube::Resource>(object: &mut K) {
    let meta = object.meta_mut();
    for entry in meta.managed_fields.iter_mut().flatten() {
        entry.fields_v1 = None;
    }
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        answered(code)
    }

    #[test]
    fn codes_are_read_once() {
        assert!(is_not_found(&api(404)) && !is_not_found(&api(409)));
        assert!(is_conflict(&api(409)) && !is_conflict(&api(404)));
        assert!(is_forbidden(&api(403)) && !is_forbidden(&api(401)));
        assert_eq!(status(&kube::Error::Service("down".into())), None);
    }

    #[test]
    fn slim_drops_field_sets_and_kubectls_copy_and_keeps_the_rest() {
        use k8s_openapi::api::core::v1::ConfigMap;
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
        let mut object = ConfigMap::default();
        object.metadata.annotations = Some(
            [(LAST_APPLIED, "{}"), ("keep", "me")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into(),
        );
        object.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("kim".into()),
            fields_v1: Some(FieldsV1(serde_json::json!({"f:data": {}}))),
            ..ManagedFieldsEntry::default()
        }]);
        object.data = Some([("k".to_string(), "v".to_string())].into());
        super::slim(&mut object);
        let entries = object.metadata.managed_fields.expect("who wrote it stays");
        assert_eq!(entries[0].manager.as_deref(), Some("kim"));
        assert_eq!(entries[0].fields_v1, None);
        let annotations = object.metadata.annotations.expect("annotations");
        assert_eq!(annotations.len(), 1);
        assert_eq!(annotations["keep"], "me");
        assert_eq!(object.data.expect("data")["k"], "v");
    }
}
