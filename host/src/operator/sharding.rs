//! A replica's part in sharding (`tessera run --sharding`): it holds its shard Lease the
//! way a host without sharding holds the leader Lease (its writes pass that Lease's fence,
//! and losing it ends the process), reconciles the objects labelled for its shard, and
//! contends for the leader Lease beside them, watching what the [`Sharder`] looks at; the
//! leader runs the [`Sharder`].

use std::path::PathBuf;
use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};

use super::sharder::{Sharder, lease_name};
use super::{LeaderElection, OperatorError, OperatorOptions, Role, client, lead};
use crate::controllers::{Context, Controllers};
use crate::fence::Fence;

/// The two Leases of a sharding replica.
pub(super) struct Sharding {
    /// The Lease whose holder shards (the one leader election uses without sharding).
    leader: LeaderElection,
    /// This replica's own Lease.
    shard: LeaderElection,
}

/// With sharding, the Lease that fences this replica's controllers becomes its shard
/// Lease and its controllers select its shard; the leader Lease is kept for [`Sharding::lead`].
pub(super) fn shard_mode(options: &mut OperatorOptions) -> Result<Option<Sharding>, OperatorError> {
    if !options.sharding {
        return Ok(None);
    }
    let Some(leader) = options.leader_election.clone() else {
        return Err(OperatorError::Lease(
            "--sharding needs leader election: the leader assigns objects to shards".into(),
        ));
    };
    if !crate::plugins::identity::is_dns_label(&leader.identity) {
        return Err(OperatorError::Lease(format!(
            "identity {:?} cannot name a shard (a label value and part of a Lease name: lower-case letters, digits and '-', at most 63); pass --identity",
            leader.identity
        )));
    }
    let shard = LeaderElection {
        lease_name: lease_name(&leader.lease_name, &leader.identity),
        existing: false,
        ..leader.clone()
    };
    options.leader_election = Some(shard.clone());
    options.config.shard = Some(leader.identity.clone());
    Ok(Some(Sharding { leader, shard }))
}

impl Sharding {
    /// Contend for the leader Lease; once this replica leads, sweep and shard until it
    /// loses the Lease (why is returned).
    pub(super) async fn lead(
        &self,
        ctx: &Arc<Context>,
        kubeconfig: Option<&PathBuf>,
    ) -> OperatorError {
        match self.lead_and_shard(ctx, kubeconfig).await {
            Ok(never) => match never {},
            Err(e) => e,
        }
    }

    async fn lead_and_shard(
        &self,
        ctx: &Arc<Context>,
        kubeconfig: Option<&PathBuf>,
    ) -> Result<std::convert::Infallible, OperatorError> {
        // The sharder's writes pass the leader Lease's fence, not the shard's.
        let fence = Fence::closed();
        let writer = client(kubeconfig, Some(&fence)).await?;
        let leases = client(kubeconfig, None).await?;
        let sharder = Sharder {
            client: writer,
            fence: fence.clone(),
            lease_namespace: self.leader.namespace.clone(),
            leader_lease: self.leader.lease_name.clone(),
            namespace: ctx.config.namespace.clone(),
            controllers: ctx.config.controllers,
            lease_duration: std::time::Duration::from_secs(self.leader.duration),
            metrics: ctx.metrics.clone(),
        };
        // Watched while standing by: a new leader's first job is to move a dead replica's
        // objects, and its first pass can do it.
        let mut view = sharder.watch();
        let leading = lead(leases, self.leader.clone(), fence, Role::Leader);
        let lost = view.follow(leading).await?;
        ctx.metrics.set_leader(true);
        ctx.leading.send_replace(true);
        // Beside the sharder, once it has nothing to move: its lists of every kubeconfig
        // Secret and RuntimeKubeconfig would load the API server while the label writes
        // that move a dead replica's objects wait on it.
        let (quiet, sharded) = tokio::sync::oneshot::channel();
        let sweep = async {
            if sharded.await.is_ok() && ctx.config.controllers == Controllers::All {
                super::sweep_kubeconfig_secrets(ctx).await;
            }
        };
        tokio::select! {
            error = lost => Err(error),
            (_, never) = async { tokio::join!(sweep, sharder.run(view, quiet)) } => match never {},
        }
    }

    /// When the installer made the leader Lease, make it the owner of the shard Lease, so
    /// that uninstalling removes shard Leases with it (the host never makes the leader
    /// Lease then, and must not leave Leases of its own behind).
    pub(super) async fn adopt(&self, kubeconfig: Option<&PathBuf>) {
        if !self.leader.existing {
            return;
        }
        let Ok(client) = client(kubeconfig, None).await else {
            return;
        };
        let leases: Api<Lease> = Api::namespaced(client, &self.shard.namespace);
        let owner = match leases.get(&self.leader.lease_name).await {
            Ok(owner) => owner,
            Err(e) => {
                tracing::warn!(lease = %self.leader.lease_name, error = %crate::report::kube_error(&e), "cannot read the leader Lease to own the shard Lease");
                return;
            }
        };
        let patch = serde_json::json!({
            "metadata": { "ownerReferences": [{
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "name": self.leader.lease_name,
                "uid": owner.metadata.uid,
            }]}
        });
        if let Err(e) = leases
            .patch(
                &self.shard.lease_name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            tracing::warn!(lease = %self.shard.lease_name, error = %crate::report::kube_error(&e), "cannot make the leader Lease own the shard Lease; uninstalling leaves it behind");
        }
    }

    /// After a clean stop, give the shard Lease back (on the condition that this replica
    /// still holds it) so that the leader moves its objects at once, not a lease duration
    /// later.
    pub(super) async fn release(&self, kubeconfig: Option<&PathBuf>) {
        let Ok(client) = client(kubeconfig, None).await else {
            return;
        };
        let leases: Api<Lease> = Api::namespaced(client, &self.shard.namespace);
        let Ok(lease) = leases.get(&self.shard.lease_name).await else {
            return;
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.shard.identity.as_str()) {
            return;
        }
        let patch = serde_json::json!({
            "metadata": { "resourceVersion": lease.metadata.resource_version },
            "spec": { "holderIdentity": null, "renewTime": null, "acquireTime": null },
        });
        match leases
            .patch(
                &self.shard.lease_name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => tracing::info!(lease = %self.shard.lease_name, "gave the shard Lease back"),
            Err(e) => {
                tracing::warn!(lease = %self.shard.lease_name, error = %crate::report::kube_error(&e), "cannot give the shard Lease back; its objects move once it expires")
            }
        }
    }
}
