//! Drift repair: one watch per (cluster, kind) of the objects modules applied (label
//! `modules.tessera.dev/module`), shared by every ModuleSet on that cluster. A change the
//! host did not make itself re-queues the ModuleSet named in the object's annotation,
//! whose next pass applies its objects again. The periodic resync is the safety net.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::{self, Event};
use tokio::sync::mpsc;

use crate::crd::ModuleSet;
use crate::metrics::Metrics;
use crate::modules::Target;
use crate::modules::apply::Applied;
use crate::modules::labels;

/// The watches and what the host itself last wrote.
pub struct Drift {
    tx: mpsc::UnboundedSender<ObjectRef<ModuleSet>>,
    metrics: Metrics,
    watched: Mutex<HashSet<(String, String, String)>>,
    /// (cluster, uid) → resourceVersion our last apply produced.
    own: Mutex<HashMap<(String, String), String>>,
}

impl Drift {
    pub fn new(metrics: Metrics) -> (Arc<Self>, mpsc::UnboundedReceiver<ObjectRef<ModuleSet>>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (
            Arc::new(Self {
                tx,
                metrics,
                watched: Mutex::new(HashSet::new()),
                own: Mutex::new(HashMap::new()),
            }),
            rx,
        )
    }

    /// Remember what we applied and make sure its kinds are watched on `target`.
    pub async fn track(self: &Arc<Self>, target: &Arc<Target>, applied: &[Applied]) {
        let mut kinds = Vec::new();
        {
            let mut own = self.own.lock().expect("drift lock");
            for a in applied {
                let meta = &a.object["metadata"];
                if let (Some(uid), Some(rv)) =
                    (meta["uid"].as_str(), meta["resourceVersion"].as_str())
                {
                    own.insert((target.server.clone(), uid.to_string()), rv.to_string());
                }
                kinds.push((a.key.api_version.clone(), a.key.kind.clone()));
            }
        }
        kinds.sort();
        kinds.dedup();
        for (api_version, kind) in kinds {
            let key = (target.server.clone(), api_version.clone(), kind.clone());
            if !self.watched.lock().expect("drift lock").insert(key) {
                continue;
            }
            let Ok(Some(resolved)) = target.kind(&api_version, &kind).await else {
                // Not watchable now; the next apply of this kind tries again.
                self.watched.lock().expect("drift lock").remove(&(
                    target.server.clone(),
                    api_version,
                    kind,
                ));
                continue;
            };
            let api: Api<DynamicObject> = Api::all_with(target.client.clone(), &resolved.resource);
            let this = self.clone();
            let server = target.server.clone();
            tracing::debug!(%server, %kind, "watching module objects for drift");
            tokio::spawn(async move {
                let config = watcher::Config::default().labels(labels::MODULE);
                watcher::watcher(api, config)
                    .for_each(|event| {
                        match event {
                            Ok(Event::Apply(o)) => this.changed(&server, &o, false),
                            Ok(Event::Delete(o)) => this.changed(&server, &o, true),
                            Ok(_) => {}
                            Err(e) => tracing::debug!(%server, error = %e, "drift watch error"),
                        }
                        futures::future::ready(())
                    })
                    .await;
            });
        }
    }

    fn changed(&self, server: &str, object: &DynamicObject, deleted: bool) {
        let uid = object.metadata.uid.clone().unwrap_or_default();
        let rv = object.metadata.resource_version.clone().unwrap_or_default();
        if !deleted {
            let own = self.own.lock().expect("drift lock");
            if own.get(&(server.to_string(), uid)) == Some(&rv) {
                return;
            }
        }
        let Some(set) = object
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(labels::SET))
        else {
            return;
        };
        let Some((namespace, name)) = set.split_once('/') else {
            return;
        };
        let kind = object
            .types
            .as_ref()
            .map(|t| t.kind.as_str())
            .unwrap_or("unknown");
        self.metrics.module_drift.with_label_values(&[kind]).inc();
        tracing::debug!(
            %server,
            kind,
            object = object.metadata.name.as_deref().unwrap_or_default(),
            moduleset = %set,
            deleted,
            "managed object changed on the target"
        );
        let _ = self.tx.send(ObjectRef::new(name).within(namespace));
    }
}
