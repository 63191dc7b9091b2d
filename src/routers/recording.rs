//! A router that moves no traffic: it keeps every route it is handed, per Rollout, so `rehearse` and
//! `demo` can show the weights a real router would have been given. No I/O.

use std::sync::Mutex;

use futures::future::BoxFuture;
use k8s_openapi::api::apps::v1::ReplicaSet;

use super::{Change, Route, RouterError, TrafficRouter};
use crate::api::Rollout;

#[derive(Debug, Default)]
pub struct RecordingRouter {
    applied: Mutex<Vec<(String, Route)>>,
}

impl RecordingRouter {
    /// Every (Rollout name, route) applied so far, oldest first; a route equal to the Rollout's previous
    /// one is not recorded again, as a real router would not write it again.
    pub fn applied(&self) -> Vec<(String, Route)> {
        self.applied
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

impl TrafficRouter for RecordingRouter {
    fn apply<'a>(
        &'a self,
        rollout: &'a Rollout,
        route: &'a Route,
        _replica_sets: &'a [ReplicaSet],
    ) -> BoxFuture<'a, Result<Vec<Change>, RouterError>> {
        Box::pin(async move {
            let name = rollout.metadata.name.clone().unwrap_or_default();
            let mut applied = self
                .applied
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let last = applied.iter().rev().find(|(n, _)| *n == name);
            if last.is_none_or(|(_, r)| r != route) {
                applied.push((name, route.clone()));
            }
            Ok(Vec::new())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_route_is_recorded_once_per_change() {
        let router = RecordingRouter::default();
        let rollout: Rollout =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "web"}, "spec": {}}))
                .unwrap();
        let route = |weight| Route {
            weight,
            canary_hash: "new".into(),
            stable_hash: "old".into(),
        };
        for w in [10, 10, 20] {
            futures::executor::block_on(router.apply(&rollout, &route(w), &[])).unwrap();
        }
        assert_eq!(
            router.applied(),
            [
                ("web".to_string(), route(10)),
                ("web".to_string(), route(20))
            ]
        );
    }
}
