//! Requirements: read the objects a plugin asked to observe — only what its read grant
//! covers, within its per-reconcile caps. A kind the cluster does not serve yet reads as
//! "no objects" (a plugin waiting for a CRD asks for its instances). Shadow versions read
//! nothing themselves: they get what the current version read.

use kube::api::{DynamicObject, ListParams};
use tessera_sdk::Selector;

use super::error::ModuleError;
use super::target::Target;
use crate::grants::{Access, Grants, ObjectRef, Scope};
use crate::wasm::{Limits, module_api as api};

/// Where a conversation's reads come from.
pub(crate) enum Reads<'a> {
    /// The target cluster, through the plugin's read grant.
    Live {
        target: &'a Target,
        grants: &'a Grants,
        limits: &'a Limits,
    },
    /// What the current version read in this pass (shadow versions).
    Recorded(&'a [api::ObservedObjects]),
}

/// Running totals of a conversation, against the plugin's caps.
#[derive(Debug, Default)]
pub(crate) struct Spent {
    objects: u32,
    bytes: usize,
}

/// The group of an `apiVersion`.
fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map(|(g, _)| g).unwrap_or("")
}

fn describe(s: &Selector) -> String {
    let mut out = format!("{} {}", s.api_version, s.kind);
    if let Some(ns) = &s.namespace {
        out.push_str(&format!(" in {ns}"));
    }
    match (&s.name, &s.label_selector) {
        (Some(name), _) => out.push_str(&format!(" named {name}")),
        (None, Some(labels)) => out.push_str(&format!(" labelled {labels}")),
        (None, None) => {}
    }
    crate::wasm::text::clamp(&out, 300)
}

impl Reads<'_> {
    /// The objects for `selector` as JSON text; `Ok(Err(why))` when the plugin may not
    /// have them (the module fails with that message).
    pub(crate) async fn observe(
        &self,
        selector: &Selector,
        spent: &mut Spent,
    ) -> Result<Result<Vec<String>, String>, ModuleError> {
        match self {
            Reads::Recorded(observed) => Ok(recorded(observed, selector)),
            Reads::Live {
                target,
                grants,
                limits,
            } => live(target, grants, limits, selector, spent).await,
        }
    }
}

fn recorded(observed: &[api::ObservedObjects], selector: &Selector) -> Result<Vec<String>, String> {
    observed
        .iter()
        .find(|o| {
            o.selector.api_version == selector.api_version
                && o.selector.kind == selector.kind
                && o.selector.namespace == selector.namespace
                && o.selector.name == selector.name
                && o.selector.label_selector == selector.label_selector
        })
        .map(|o| o.objects.clone())
        .ok_or_else(|| {
            format!(
                "asks to read {}, which the current version did not read; a shadow version only sees what the current one read",
                describe(selector)
            )
        })
}

async fn live(
    target: &Target,
    grants: &Grants,
    limits: &Limits,
    selector: &Selector,
    spent: &mut Spent,
) -> Result<Result<Vec<String>, String>, ModuleError> {
    let Some(kind) = target.kind(&selector.api_version, &selector.kind).await? else {
        return Ok(Ok(Vec::new()));
    };
    let scope = match (kind.namespaced, selector.namespace.as_deref()) {
        (false, _) => Scope::Cluster,
        (true, Some(ns)) => Scope::Namespace(ns),
        (true, None) => Scope::AllNamespaces,
    };
    let asked = ObjectRef {
        group: group_of(&selector.api_version),
        kind: &selector.kind,
        scope,
        name: selector.name.as_deref(),
    };
    if let Err(refusal) = grants.allows(Access::Read, &asked) {
        return Ok(Err(format!(
            "requirement {}: {refusal}",
            describe(selector)
        )));
    }
    let api = target.api(&kind, selector.namespace.as_deref());
    let objects: Vec<DynamicObject> = match (&selector.name, &selector.label_selector) {
        (Some(name), _) => api.get_opt(name).await?.into_iter().collect(),
        (None, labels) => {
            let mut params = ListParams::default();
            if let Some(labels) = labels {
                params = params.labels(labels);
            }
            api.list(&params).await?.items
        }
    };
    Ok(admit(objects, grants, limits, selector, spent))
}

/// The objects of a read the grant covers (a list may reach further), as JSON, within the
/// caps of the reconcile.
fn admit(
    objects: Vec<DynamicObject>,
    grants: &Grants,
    limits: &Limits,
    selector: &Selector,
    spent: &mut Spent,
) -> Result<Vec<String>, String> {
    let mut out = Vec::with_capacity(objects.len());
    for mut object in objects {
        let name = object.metadata.name.clone().unwrap_or_default();
        let one = ObjectRef {
            group: group_of(&selector.api_version),
            kind: &selector.kind,
            scope: object
                .metadata
                .namespace
                .as_deref()
                .map_or(Scope::Cluster, Scope::Namespace),
            name: Some(&name),
        };
        if grants.allows(Access::Read, &one).is_err() {
            continue;
        }
        // Big, noisy and never what a plugin decides on.
        object.metadata.managed_fields = None;
        let json = serde_json::to_string(&object).expect("an object serializes");
        spent.objects += 1;
        spent.bytes += json.len();
        if spent.objects > limits.read_objects || spent.bytes > limits.read_bytes() {
            return Err(format!(
                "requirement {} reads more than the {} objects / {} KiB a reconcile may read (limits readObjects, readKiB); narrow it with a namespace, name or label selector",
                describe(selector),
                limits.read_objects,
                limits.read_kib
            ));
        }
        out.push(json);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selector(namespace: Option<&str>) -> Selector {
        Selector {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: namespace.map(str::to_string),
            name: Some("cluster-info".into()),
            label_selector: None,
        }
    }

    #[test]
    fn shadows_see_only_what_the_current_version_read() {
        let read = api::ObservedObjects {
            selector: api::ObjectSelector {
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                namespace: Some("kube-system".into()),
                name: Some("cluster-info".into()),
                label_selector: None,
            },
            objects: vec!["{}".into()],
        };
        let observed = [read];
        assert_eq!(
            recorded(&observed, &selector(Some("kube-system"))),
            Ok(vec!["{}".to_string()])
        );
        let err = recorded(&observed, &selector(Some("other"))).unwrap_err();
        assert!(err.contains("did not read"), "{err}");
    }
}
