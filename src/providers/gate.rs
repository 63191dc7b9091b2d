//! Sharing Prometheus between many runs: identical resolved queries due in the same second are sent once and
//! the answer handed to every asker (singleflight keyed by address, query, window, auth and the second), and
//! at most `max_concurrency` queries are in flight to one address. Owns no judging and no retries; the
//! answer (or error) is exactly what one [`Prometheus::query`] returned.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OnceCell, Semaphore};

use crate::observe::Histogram;

use super::prometheus::{Prometheus, PrometheusRequest, QueryKind};
use super::{ProviderError, ProviderResult};

type Answer = Result<ProviderResult, ProviderError>;

/// The key of one shared query. The hash covers headers and auth secrets, so two runs with different
/// credentials never share an answer; the hash is kept in memory only.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    second: i64,
    address: String,
    query: String,
    window: Option<(i64, i64, u128)>,
    identity: u64,
}

impl Key {
    fn of(req: &PrometheusRequest, second: i64) -> Key {
        let mut h = DefaultHasher::new();
        req.timeout.hash(&mut h);
        req.insecure.hash(&mut h);
        format!("{:?}", req.headers).hash(&mut h);
        for s in req.headers.values_as_secrets() {
            s.hash(&mut h);
        }
        format!("{:?}", req.auth).hash(&mut h);
        for s in req.auth.secrets() {
            s.hash(&mut h);
        }
        let window = match &req.kind {
            // A backtest's `time=` is part of the question.
            QueryKind::Instant { time } => time.map(|t| (t.as_second(), t.as_second(), 0)),
            QueryKind::Range { start, end, step } => {
                Some((start.as_second(), end.as_second(), step.as_millis()))
            }
        };
        Key {
            second,
            address: req.address.clone(),
            query: req.query.clone(),
            window,
            identity: h.finish(),
        }
    }
}

/// The answers being shared, and the newest second asked about.
#[derive(Debug, Default)]
struct Flights {
    cells: HashMap<Key, Arc<OnceCell<Answer>>>,
    newest: i64,
}

/// Singleflight and per-address limits in front of one [`Prometheus`]. Build once per process.
#[derive(Debug)]
pub struct Gate {
    max_concurrency: usize,
    flights: Mutex<Flights>,
    limits: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// How long the queries actually sent took, by provider (`prometheus`, `web`).
    pub durations: Mutex<HashMap<&'static str, Histogram>>,
}

impl Gate {
    pub fn new(max_concurrency: u32) -> Gate {
        Gate {
            max_concurrency: usize::try_from(max_concurrency.max(1)).unwrap_or(1),
            flights: Mutex::new(Flights::default()),
            limits: Mutex::new(HashMap::new()),
            durations: Mutex::new(HashMap::new()),
        }
    }

    /// Notes how long one request to `provider` took.
    pub fn observe(&self, provider: &'static str, took: std::time::Duration) {
        let mut d = self
            .durations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        d.entry(provider).or_default().observe(took.as_secs_f64());
    }

    /// Answers `req` as asked in unix second `second`: the first asker sends it (waiting for a slot at its
    /// address), everyone else asking the same in the same second gets the same answer.
    pub async fn query(
        &self,
        prometheus: &Prometheus,
        req: &PrometheusRequest,
        second: i64,
    ) -> Answer {
        let key = Key::of(req, second);
        let cell = {
            let mut flights = self.flights.lock().unwrap_or_else(PoisonError::into_inner);
            // Answers of past seconds can no longer be shared: drop them, once a second, so the map
            // stays small without a scan on every query.
            if second > flights.newest {
                flights.newest = second;
                flights.cells.retain(|k, _| k.second >= second - 1);
            }
            flights.cells.entry(key).or_default().clone()
        };
        cell.get_or_init(|| async {
            let limit = {
                let mut limits = self.limits.lock().unwrap_or_else(PoisonError::into_inner);
                limits
                    .entry(req.address.clone())
                    .or_insert_with(|| Arc::new(Semaphore::new(self.max_concurrency)))
                    .clone()
            };
            // The semaphore is never closed, so acquiring only fails if it were; then go unthrottled.
            let _permit = limit.acquire_owned().await.ok();
            let started = std::time::Instant::now();
            let answer = prometheus.query(req).await;
            self.observe("prometheus", started.elapsed());
            answer
        })
        .await
        .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::PrometheusMetric;

    fn request(query: &str) -> PrometheusRequest {
        let metric = PrometheusMetric {
            address: Some("http://127.0.0.1:9".into()),
            query: Some(query.into()),
            ..Default::default()
        };
        PrometheusRequest::from_metric(&metric, None, jiff::Timestamp::UNIX_EPOCH, None).unwrap()
    }

    #[test]
    fn the_same_query_in_the_same_second_has_one_key_and_credentials_split_it() {
        let a = request("up");
        assert_eq!(Key::of(&a, 5), Key::of(&request("up"), 5));
        assert_ne!(Key::of(&a, 5), Key::of(&a, 6));
        assert_ne!(Key::of(&a, 5), Key::of(&request("down"), 5));
        let metric = PrometheusMetric {
            address: Some("http://127.0.0.1:9".into()),
            query: Some("up".into()),
            headers: Some(vec![crate::api::WebMetricHeader {
                key: "Authorization".into(),
                value: "Bearer one".into(),
            }]),
            ..Default::default()
        };
        let one = PrometheusRequest::from_metric(&metric, None, jiff::Timestamp::UNIX_EPOCH, None)
            .unwrap();
        let mut other_metric = metric.clone();
        if let Some(h) = other_metric.headers.as_mut().and_then(|h| h.first_mut()) {
            h.value = "Bearer two".into();
        }
        let two =
            PrometheusRequest::from_metric(&other_metric, None, jiff::Timestamp::UNIX_EPOCH, None)
                .unwrap();
        assert_ne!(Key::of(&one, 5), Key::of(&two, 5));
        assert!(!format!("{:?}", Key::of(&one, 5)).contains("Bearer one"));
    }

    #[tokio::test]
    async fn concurrent_identical_queries_are_sent_once() {
        let gate = Arc::new(Gate::new(2));
        let prometheus = Prometheus::default();
        let req = request("up");
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..20 {
            let (gate, prometheus, req) = (gate.clone(), prometheus.clone(), req.clone());
            tasks.spawn(async move { gate.query(&prometheus, &req, 7).await });
        }
        let mut answers = Vec::new();
        while let Some(a) = tasks.join_next().await {
            answers.push(a.unwrap());
        }
        // One query sent: one duration observed.
        let sent = gate
            .durations
            .lock()
            .unwrap()
            .get("prometheus")
            .map(|h| h.count());
        assert_eq!(sent, Some(1));
        // Port 9 refuses: every asker got the same error.
        assert!(answers.iter().all(|a| a == &answers[0] && a.is_err()));
    }
}
