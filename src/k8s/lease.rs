//! Leader election on a `coordination.k8s.io/v1` Lease, the protocol client-go's leaderelection uses:
//! holderIdentity, acquireTime, renewTime, leaseDurationSeconds and leaseTransitions, every write a replace
//! guarded by the resourceVersion just read. A lease counts as expired when its record has not changed for
//! `lease_duration` as seen by this process's own monotonic clock, so clock skew between nodes cannot
//! make two leaders. Owns the Lease only; what a leader does is `controller`'s business.

use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};

use super::is_status;

#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub name: String,
    pub namespace: String,
    /// This process: pod name (or hostname) plus a random suffix, so a restarted pod is a new holder.
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

/// A candidate for leadership. Call [`Elector::try_acquire_or_renew`] every `retry_period`.
pub struct Elector {
    api: Api<Lease>,
    config: LeaseConfig,
    /// The last record seen (holder, renewTime, resourceVersion) and when it was first seen.
    observed: Option<(Option<String>, Option<Timestamp>, Instant)>,
}

impl Elector {
    pub fn new(client: kube::Client, config: LeaseConfig) -> Elector {
        Elector {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
        }
    }

    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// One round of the protocol at `now`: true when this process holds the lease afterwards. API errors
    /// are returned; a lost race (409, or 409 AlreadyExists on create) is simply `false`.
    pub async fn try_acquire_or_renew(&mut self, now: Timestamp) -> Result<bool, kube::Error> {
        let me = self.config.identity.clone();
        let seconds =
            i32::try_from(self.config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX);
        let existing = match self.api.get_opt(&self.config.name).await? {
            Some(lease) => lease,
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.name.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        ..Default::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(me),
                        acquire_time: Some(MicroTime(now)),
                        renew_time: Some(MicroTime(now)),
                        lease_duration_seconds: Some(seconds),
                        lease_transitions: Some(0),
                        ..Default::default()
                    }),
                };
                return match self.api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(e) if is_status(&e, 409) => Ok(false),
                    Err(e) => Err(e),
                };
            }
        };
        let spec = existing.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let renewed = spec.renew_time.as_ref().map(|t| t.0);
        let record = (holder.clone(), renewed);
        let first_seen = match &self.observed {
            Some((h, r, at)) if (h, r) == (&record.0, &record.1) => *at,
            _ => crate::time::monotonic(),
        };
        self.observed = Some((record.0, record.1, first_seen));
        let held_by_me = holder.as_deref() == Some(me.as_str());
        if let Some(other) = holder.as_deref()
            && !held_by_me
        {
            let duration = spec
                .lease_duration_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map_or(self.config.lease_duration, Duration::from_secs);
            if first_seen.elapsed() < duration {
                tracing::debug!(holder = other, "Lease held by another candidate");
                return Ok(false);
            }
        }
        let mut lease = existing;
        let transitions = spec.lease_transitions.unwrap_or(0);
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(me),
            acquire_time: if held_by_me {
                spec.acquire_time.clone()
            } else {
                Some(MicroTime(now))
            },
            renew_time: Some(MicroTime(now)),
            lease_duration_seconds: Some(seconds),
            lease_transitions: Some(if held_by_me {
                transitions
            } else {
                transitions.saturating_add(1)
            }),
            ..spec
        });
        // `replace` sends metadata.resourceVersion: the API server refuses it (409) if anyone wrote since.
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                let spec = written.spec.unwrap_or_default();
                self.observed = Some((
                    spec.holder_identity,
                    spec.renew_time.map(|t| t.0),
                    crate::time::monotonic(),
                ));
                Ok(true)
            }
            Err(e) if is_status(&e, 409) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Gives the lease up (when held), so a standby takes over at its next retry instead of waiting for
    /// the lease to expire.
    pub async fn release(&mut self, now: Timestamp) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.config.name).await? else {
            return Ok(());
        };
        let mut spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.renew_time = Some(MicroTime(now));
        spec.lease_duration_seconds = Some(1);
        lease.spec = Some(spec);
        self.api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
    }
}

/// `base` plus a random suffix: two processes in the same pod name (a restart) are different holders.
pub fn identity(base: &str) -> String {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded from the OS's randomness: a fresh suffix per process without a new dependency.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    format!("{base}_{:08x}", h.finish() as u32)
}
