//! Sharing Prometheus between many runs: identical resolved queries (same address, query, window, headers and
//! auth) due in the same second are sent once and the answer handed to every asker; with a sharing window of
//! W seconds, a successful answer also serves measurements due up to W - 1 seconds after it was asked. At most
//! `max_concurrency` queries are in flight to one address. Owns no judging and no retries; the answer (or
//! error) is exactly what one [`Prometheus::query`] returned.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OnceCell, Semaphore};

use crate::observe::Histogram;

use super::prometheus::{Prometheus, PrometheusRequest, QueryKind};
use super::{ProviderError, ProviderResult};

type Answer = Result<ProviderResult, ProviderError>;

/// The question one shared answer is for. The hash covers headers and auth secrets, so two runs with
/// different credentials never share an answer; the hash is kept in memory only.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    address: String,
    query: String,
    window: Option<(i64, i64, u128)>,
    identity: u64,
}

impl Key {
    fn of(req: &PrometheusRequest) -> Key {
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
            address: req.address.clone(),
            query: req.query.clone(),
            window,
            identity: h.finish(),
        }
    }
}

/// One answer being shared: the second it was asked in, and the answer once it is in.
#[derive(Debug, Clone)]
struct Flight {
    second: i64,
    answer: Arc<OnceCell<Answer>>,
}

impl Flight {
    /// Whether a measurement due in `second` may take this answer: one asked in the same second always
    /// (in flight or answered, error or not); a successful one asked less than `window` seconds before.
    fn serves(&self, second: i64, window: i64) -> bool {
        self.second == second
            || (self.second < second
                && second - self.second < window
                && self.answer.get().is_some_and(Result::is_ok))
    }
}

/// The newest answer for each question, and the newest second asked about.
#[derive(Debug, Default)]
struct Flights {
    newest: HashMap<Key, Flight>,
    second: i64,
}

/// Singleflight and per-address limits in front of one [`Prometheus`]. Build once per process.
#[derive(Debug)]
pub struct Gate {
    max_concurrency: usize,
    /// In whole seconds, at least 1 (the same second only).
    share_window: i64,
    flights: Mutex<Flights>,
    limits: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// How long the queries actually sent took, by provider (`prometheus`, `web`).
    pub durations: Mutex<HashMap<&'static str, Histogram>>,
}

impl Gate {
    /// `share_window`: how long a successful answer serves later measurements of the same question, rounded
    /// up to whole seconds; anything up to one second shares within the same second only.
    pub fn new(max_concurrency: u32, share_window: std::time::Duration) -> Gate {
        let window = share_window.as_secs() + u64::from(share_window.subsec_nanos() > 0);
        Gate {
            max_concurrency: usize::try_from(max_concurrency.max(1)).unwrap_or(1),
            share_window: i64::try_from(window).unwrap_or(i64::MAX).max(1),
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

    /// Answers `req` for a measurement due in unix second `second`: the first asker sends it (waiting for a
    /// slot at its address); everyone else asking the same question in that second, or within the sharing
    /// window after a successful answer, gets the same answer.
    pub async fn query(
        &self,
        prometheus: &Prometheus,
        req: &PrometheusRequest,
        second: i64,
    ) -> Answer {
        let cell = {
            let mut flights = self.flights.lock().unwrap_or_else(PoisonError::into_inner);
            // Answers too old to serve anyone are dropped once a second, so the map stays small without a
            // scan on every query.
            if second > flights.second {
                flights.second = second;
                let window = self.share_window;
                flights
                    .newest
                    .retain(|_, f| second - f.second < window.max(2));
            }
            let key = Key::of(req);
            match flights.newest.get(&key) {
                Some(f) if f.serves(second, self.share_window) => f.answer.clone(),
                // A measurement due before the newest answer's second (a late one) asks on its own
                // rather than replacing a newer answer.
                Some(f) if f.second > second => Arc::default(),
                _ => {
                    let answer = Arc::<OnceCell<Answer>>::default();
                    let flight = Flight {
                        second,
                        answer: answer.clone(),
                    };
                    flights.newest.insert(key, flight);
                    answer
                }
            }
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
            let started = crate::time::monotonic();
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

    fn request_to(address: &str, query: &str) -> PrometheusRequest {
        let metric = PrometheusMetric {
            address: Some(address.into()),
            query: Some(query.into()),
            ..Default::default()
        };
        PrometheusRequest::from_metric(&metric, None, jiff::Timestamp::UNIX_EPOCH, None).unwrap()
    }

    /// To a port that refuses connections: every answer is an error.
    fn request(query: &str) -> PrometheusRequest {
        request_to("http://127.0.0.1:9", query)
    }

    /// A Prometheus answering every instant query with the scalar 1.
    async fn answering_prometheus() -> wiremock::MockServer {
        let server = wiremock::MockServer::start().await;
        wiremock::Mock::given(wiremock::matchers::path("/api/v1/query"))
            .respond_with(
                wiremock::ResponseTemplate::new(200).set_body_json(serde_json::json!({
                    "status": "success", "data": {"resultType": "scalar", "result": [1.0, "1"]}
                })),
            )
            .mount(&server)
            .await;
        server
    }

    fn sent(gate: &Gate) -> u64 {
        let durations = gate.durations.lock().unwrap();
        durations.get("prometheus").map_or(0, |h| h.count())
    }

    #[test]
    fn the_same_question_has_one_key_and_credentials_split_it() {
        let a = request("up");
        assert_eq!(Key::of(&a), Key::of(&request("up")));
        assert_ne!(Key::of(&a), Key::of(&request("down")));
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
        assert_ne!(Key::of(&one), Key::of(&two));
        assert!(!format!("{:?}", Key::of(&one)).contains("Bearer one"));
    }

    #[tokio::test]
    async fn by_default_only_measurements_due_in_the_same_second_share_an_answer() {
        let server = answering_prometheus().await;
        let (prometheus, req) = (Prometheus::default(), request_to(&server.uri(), "up"));
        let gate = Gate::new(10, std::time::Duration::from_secs(1));
        for second in [100, 100, 101, 101, 100] {
            assert!(gate.query(&prometheus, &req, second).await.is_ok());
        }
        // 100 and 101 asked once each; the late 100 after 101 asks again rather than displace 101's answer.
        assert_eq!(sent(&gate), 3);
    }

    #[tokio::test]
    async fn a_sharing_window_serves_later_measurements_with_a_successful_answer() {
        let server = answering_prometheus().await;
        let (prometheus, req) = (Prometheus::default(), request_to(&server.uri(), "up"));
        // 9.5 s rounds up to 10 s: answers serve measurements due up to 9 s later.
        let gate = Gate::new(10, std::time::Duration::from_millis(9500));
        for second in [100, 104, 109] {
            assert!(gate.query(&prometheus, &req, second).await.is_ok());
        }
        assert_eq!(sent(&gate), 1);
        for second in [110, 115, 119] {
            assert!(gate.query(&prometheus, &req, second).await.is_ok());
        }
        assert_eq!(sent(&gate), 2);
        // A different question is asked on its own.
        let other = request_to(&server.uri(), "down");
        assert!(gate.query(&prometheus, &other, 119).await.is_ok());
        assert_eq!(sent(&gate), 3);
    }

    #[tokio::test]
    async fn an_error_is_shared_within_its_second_only() {
        let gate = Gate::new(10, std::time::Duration::from_secs(10));
        let (prometheus, req) = (Prometheus::default(), request("up"));
        for second in [100, 100, 101] {
            assert!(gate.query(&prometheus, &req, second).await.is_err());
        }
        assert_eq!(sent(&gate), 2);
    }

    #[tokio::test]
    async fn concurrent_identical_queries_are_sent_once() {
        let gate = Arc::new(Gate::new(2, std::time::Duration::from_secs(1)));
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
        assert_eq!(sent(&gate), 1);
        // Port 9 refuses: every asker got the same error.
        assert!(answers.iter().all(|a| a == &answers[0] && a.is_err()));
    }
}
