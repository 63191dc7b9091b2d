//! The clock: the only place canaryd reads the wall clock or sleeps. A virtual clock makes backtests jump
//! straight to the next wake-up, so `analyze --from/--to` runs as fast as Prometheus answers. The daemon
//! carries one in its context and reads time and sleeps only through it, so its tests run it on a manual
//! clock: time they move, jumping from one wake-up of the daemon to the next.
//!
//! Enforced: `clippy.toml` disallows `SystemTime::now`, `Instant::now`, jiff's `Timestamp::now` and tokio's
//! timers (`sleep`, `sleep_until`, `interval`, `timeout`, its `Instant::now`) everywhere else. What must follow
//! real time whatever the clock says (bounds on API requests, the Lease's ticker) goes through the `real_*`
//! functions below, so each such use is named as real time where it is made.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use jiff::Timestamp;
use tokio::sync::watch;

#[derive(Debug)]
pub enum Clock {
    /// Real time.
    Wall,
    /// Time that moves only when asked to: backtests and simulations.
    Virtual(Mutex<Timestamp>),
    /// Time a test moves: sleepers wait until it does.
    Manual(ManualClock),
}

impl Clock {
    pub fn virtual_at(start: Timestamp) -> Clock {
        Clock::Virtual(Mutex::new(start))
    }

    pub fn manual_at(start: Timestamp) -> Clock {
        Clock::Manual(ManualClock {
            now: watch::Sender::new(start),
            sleepers: Mutex::new(BTreeSet::new()),
            serial: AtomicU64::new(0),
        })
    }

    /// The controls of a manual clock; `None` for any other.
    pub fn manual(&self) -> Option<&ManualClock> {
        match self {
            Clock::Manual(m) => Some(m),
            _ => None,
        }
    }

    #[allow(clippy::disallowed_methods)] // The one reading of the wall clock.
    pub fn now(&self) -> Timestamp {
        match self {
            Clock::Wall => Timestamp::now(),
            Clock::Virtual(t) => *t.lock().unwrap_or_else(PoisonError::into_inner),
            Clock::Manual(m) => m.now(),
        }
    }

    /// Now, as a status stores it: whole seconds ([`whole_second`]). The one rounding rule of the measuring
    /// loop, for the daemon and the command line alike.
    pub fn stamp(&self) -> Timestamp {
        whole_second(self.now())
    }

    /// Now, for scheduling: what the daemon's queue counts its due times in. A manual or virtual clock's own
    /// time; for the wall clock, a reading that moves only forward and at the pace of real time (the wall
    /// clock's time at the process's first such reading, plus the monotonic time since), so a wall clock
    /// stepped back (NTP, a restored VM) cannot hold the queue for as long as it went back, nor one stepped
    /// forward make everything due at once.
    pub fn steady(&self) -> Timestamp {
        match self {
            Clock::Wall => {
                let (wall, start) = wall_anchor();
                wall.checked_add(monotonic().duration_since(*start))
                    .unwrap_or(Timestamp::MAX)
            }
            Clock::Virtual(_) | Clock::Manual(_) => self.now(),
        }
    }

    /// Waits until [`Clock::steady`] reaches `at`. Cancel-safe.
    pub async fn sleep_until_steady(&self, at: Timestamp) {
        match self {
            Clock::Wall => sleep_from(self.steady(), at).await,
            Clock::Virtual(_) | Clock::Manual(_) => self.sleep_until(at).await,
        }
    }

    /// A backtest's clock, whose queries are evaluated at its time. A manual clock is not one: it stands in
    /// for the wall clock of a daemon under test, whose queries carry no time.
    pub fn is_virtual(&self) -> bool {
        matches!(self, Clock::Virtual(_))
    }

    /// Waits until `at` (a virtual clock jumps there; it never goes backwards; a manual one waits until it is
    /// moved there). Cancel-safe.
    pub async fn sleep_until(&self, at: Timestamp) {
        match self {
            Clock::Wall => sleep_from(self.now(), at).await,
            Clock::Virtual(t) => {
                let mut now = t.lock().unwrap_or_else(PoisonError::into_inner);
                if at > *now {
                    *now = at;
                }
            }
            Clock::Manual(m) => m.sleep_until(at).await,
        }
    }
}

/// Real time passing from `now` to `at` (none when `at` is not later): the one sleep on the wall clock.
#[allow(clippy::disallowed_methods)]
async fn sleep_from(now: Timestamp, at: Timestamp) {
    if let Ok(wait) = std::time::Duration::try_from(at.duration_since(now)) {
        tokio::time::sleep(wait).await;
    }
}

/// The wall clock's time and the monotonic instant of the process's first [`Clock::steady`] reading.
fn wall_anchor() -> &'static (Timestamp, std::time::Instant) {
    static ANCHOR: std::sync::OnceLock<(Timestamp, std::time::Instant)> =
        std::sync::OnceLock::new();
    ANCHOR.get_or_init(|| (Clock::Wall.now(), monotonic()))
}

/// A clock that moves only when its owner moves it, and never backwards; it knows the deadlines its
/// sleepers wait for, so a test can jump to the next one.
#[derive(Debug)]
pub struct ManualClock {
    now: watch::Sender<Timestamp>,
    /// (deadline, serial) of each sleeper waiting now; the serial tells equal deadlines apart.
    sleepers: Mutex<BTreeSet<(Timestamp, u64)>>,
    serial: AtomicU64,
}

impl ManualClock {
    pub fn now(&self) -> Timestamp {
        *self.now.borrow()
    }

    /// Moves the clock to `t`; a `t` in its past changes nothing.
    pub fn set(&self, t: Timestamp) {
        self.now.send_if_modified(|now| {
            let later = t > *now;
            if later {
                *now = t;
            }
            later
        });
    }

    /// Moves the clock `d` on (not at all when that would overflow).
    pub fn advance(&self, d: Duration) {
        if let Ok(t) = self.now().checked_add(d) {
            self.set(t);
        }
    }

    /// The earliest deadline a sleeper still waits for.
    pub fn next_wakeup(&self) -> Option<Timestamp> {
        let now = self.now();
        let sleepers = self.sleepers.lock().unwrap_or_else(PoisonError::into_inner);
        sleepers.iter().map(|(at, _)| *at).find(|at| *at > now)
    }

    /// Moves the clock to [`ManualClock::next_wakeup`] and returns it; `None` (and no move) when no sleeper
    /// waits.
    pub fn advance_to_next(&self) -> Option<Timestamp> {
        let next = self.next_wakeup()?;
        self.set(next);
        Some(next)
    }

    async fn sleep_until(&self, at: Timestamp) {
        let mut moved = self.now.subscribe();
        if *moved.borrow_and_update() >= at {
            return;
        }
        let key = (at, self.serial.fetch_add(1, Ordering::Relaxed));
        let _waiting = Sleeper::new(self, key);
        // The sender lives as long as `self`, so this ends only when the clock reaches `at`.
        let _ = moved.wait_for(|now| *now >= at).await;
    }
}

/// A sleeper's deadline, registered while it waits and forgotten when it wakes or is dropped.
struct Sleeper<'a> {
    clock: &'a ManualClock,
    key: (Timestamp, u64),
}

impl<'a> Sleeper<'a> {
    fn new(clock: &'a ManualClock, key: (Timestamp, u64)) -> Sleeper<'a> {
        clock
            .sleepers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key);
        Sleeper { clock, key }
    }
}

impl Drop for Sleeper<'_> {
    fn drop(&mut self) {
        self.clock
            .sleepers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.key);
    }
}

/// A monotonic instant of this process, for what follows real time whatever the clock says: how long a
/// query took, when a cached token or an observed Lease record grew old.
#[allow(clippy::disallowed_methods)] // The one reading of the monotonic clock.
pub fn monotonic() -> std::time::Instant {
    std::time::Instant::now()
}

/// Real time passing until the monotonic instant `at`: a drain bounded in real time.
#[allow(clippy::disallowed_methods)]
pub async fn real_sleep_until(at: std::time::Instant) {
    tokio::time::sleep_until(at.into()).await;
}

/// `work`, given up after `limit` of real time: a bound on a request, whatever the daemon's clock says.
#[allow(clippy::disallowed_methods)]
pub async fn real_timeout<F: Future>(limit: Duration, work: F) -> Option<F::Output> {
    tokio::time::timeout(limit, work).await.ok()
}

/// A ticker every `period` of real time, the first tick at once; a late tick delays the next rather than
/// bursting (a retry period of requests).
#[allow(clippy::disallowed_methods)]
pub fn real_ticker(period: Duration) -> tokio::time::Interval {
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker
}

/// `t` at the resolution Kubernetes stores a status timestamp in (`metav1.Time`: whole seconds, truncated).
/// Status is stamped with it, so what the daemon computes from a status it has just written (the next due
/// time, above all) is what it computes from the stored copy after a watch event or a restart, and the
/// command line schedules as the daemon does.
pub fn whole_second(t: Timestamp) -> Timestamp {
    // Toward the past, as the civil time written is (`as_second` alone truncates toward 1970).
    let second = t.as_second() - i64::from(t.subsec_nanosecond() < 0);
    Timestamp::from_second(second).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_second_truncates_as_a_stored_status_timestamp_does() {
        let t: Timestamp = "2026-01-01T00:00:07.999Z".parse().unwrap();
        let stored: Timestamp = "2026-01-01T00:00:07Z".parse().unwrap();
        assert_eq!(whole_second(t), stored);
        assert_eq!(whole_second(stored), stored);
        let before_epoch: Timestamp = "1969-12-31T23:59:59.5Z".parse().unwrap();
        assert_eq!(
            whole_second(before_epoch),
            "1969-12-31T23:59:59Z".parse::<Timestamp>().unwrap()
        );
    }

    #[tokio::test]
    async fn a_virtual_clock_jumps_forward_and_never_back() {
        let start: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        let clock = Clock::virtual_at(start);
        let later: Timestamp = "2026-01-01T00:05:00Z".parse().unwrap();
        clock.sleep_until(later).await;
        assert_eq!(clock.now(), later);
        clock.sleep_until(start).await;
        assert_eq!(clock.now(), later);
    }

    fn at(t: &str) -> Timestamp {
        t.parse().expect("a timestamp")
    }

    #[tokio::test]
    async fn a_manual_clock_wakes_a_sleeper_only_once_moved_to_its_deadline() {
        let clock = std::sync::Arc::new(Clock::manual_at(at("2026-01-01T00:00:00Z")));
        let m = clock.manual().expect("a manual clock");
        assert_eq!(m.next_wakeup(), None);
        let sleeper = tokio::spawn({
            let clock = clock.clone();
            async move { clock.sleep_until(at("2026-01-01T00:10:00Z")).await }
        });
        while m.next_wakeup().is_none() {
            tokio::task::yield_now().await;
        }
        assert_eq!(m.next_wakeup(), Some(at("2026-01-01T00:10:00Z")));
        m.advance(Duration::from_secs(599));
        tokio::task::yield_now().await;
        assert!(!sleeper.is_finished());
        assert_eq!(m.advance_to_next(), Some(at("2026-01-01T00:10:00Z")));
        real_timeout(Duration::from_secs(5), sleeper)
            .await
            .expect("the sleeper wakes")
            .expect("the sleeper ends");
        assert_eq!(m.next_wakeup(), None);
        assert_eq!(m.advance_to_next(), None);
        assert_eq!(clock.now(), at("2026-01-01T00:10:00Z"));
    }

    #[tokio::test]
    async fn a_manual_clock_forgets_a_dropped_sleeper_and_never_goes_back() {
        let clock = Clock::manual_at(at("2026-01-01T00:00:00Z"));
        let m = clock.manual().expect("a manual clock");
        {
            let early = std::pin::pin!(clock.sleep_until(at("2026-01-01T00:05:00Z")));
            let late = std::pin::pin!(clock.sleep_until(at("2026-01-01T01:00:00Z")));
            // Polled once each: registered, still waiting.
            assert!(futures::poll!(early).is_pending());
            assert!(futures::poll!(late).is_pending());
            assert_eq!(m.next_wakeup(), Some(at("2026-01-01T00:05:00Z")));
        }
        assert_eq!(m.next_wakeup(), None);
        m.set(at("2026-01-01T02:00:00Z"));
        m.set(at("2026-01-01T01:00:00Z"));
        assert_eq!(clock.now(), at("2026-01-01T02:00:00Z"));
        // A deadline already passed does not wait.
        clock.sleep_until(at("2026-01-01T01:30:00Z")).await;
        assert_eq!(clock.now(), at("2026-01-01T02:00:00Z"));
    }

    #[tokio::test]
    async fn the_steady_wall_time_starts_at_the_wall_clock_and_moves_at_the_pace_of_real_time() {
        let clock = Clock::Wall;
        let (first, wall) = (clock.steady(), clock.now());
        assert!(
            wall.duration_since(first).abs() < jiff::SignedDuration::from_secs(1),
            "{first} against {wall}"
        );
        let before = monotonic();
        clock
            .sleep_until_steady(
                first
                    .checked_add(jiff::SignedDuration::from_millis(50))
                    .expect("a time"),
            )
            .await;
        assert!(before.elapsed() >= std::time::Duration::from_millis(40));
        assert!(clock.steady().duration_since(first) >= jiff::SignedDuration::from_millis(50));
        let manual = Clock::manual_at(first);
        assert_eq!(manual.steady(), first);
    }
}
