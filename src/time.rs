//! The clock: the only place canaryd reads the wall clock or sleeps. A virtual clock makes backtests jump
//! straight to the next wake-up, so `analyze --from/--to` runs as fast as Prometheus answers. The daemon
//! carries one in its context, so its tests can run it on time they control.
//!
//! Enforced: `clippy.toml` disallows `SystemTime::now`, `Instant::now`, jiff's `Timestamp::now` and
//! `tokio::time::sleep` everywhere else.

use std::sync::Mutex;

use jiff::Timestamp;

#[derive(Debug)]
pub enum Clock {
    /// Real time.
    Wall,
    /// Time that moves only when asked to: backtests and simulations.
    Virtual(Mutex<Timestamp>),
}

impl Clock {
    pub fn virtual_at(start: Timestamp) -> Clock {
        Clock::Virtual(Mutex::new(start))
    }

    #[allow(clippy::disallowed_methods)] // The one reading of the wall clock.
    pub fn now(&self) -> Timestamp {
        match self {
            Clock::Wall => Timestamp::now(),
            Clock::Virtual(t) => *t.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
        }
    }

    /// Now, as a status stores it: whole seconds ([`whole_second`]). The one rounding rule of the measuring
    /// loop, for the daemon and the command line alike.
    pub fn stamp(&self) -> Timestamp {
        whole_second(self.now())
    }

    pub fn is_virtual(&self) -> bool {
        matches!(self, Clock::Virtual(_))
    }

    /// Waits until `at` (a virtual clock jumps there; it never goes backwards).
    #[allow(clippy::disallowed_methods)] // The one sleep on the wall clock.
    pub async fn sleep_until(&self, at: Timestamp) {
        match self {
            Clock::Wall => {
                let wait = at.duration_since(Timestamp::now());
                if let Ok(wait) = std::time::Duration::try_from(wait) {
                    tokio::time::sleep(wait).await;
                }
            }
            Clock::Virtual(t) => {
                let mut now = t.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if at > *now {
                    *now = at;
                }
            }
        }
    }
}

/// A monotonic instant of this process, for what follows real time whatever the clock says: how long a
/// query took, when a cached token or an observed Lease record grew old.
#[allow(clippy::disallowed_methods)] // The one reading of the monotonic clock.
pub fn monotonic() -> std::time::Instant {
    std::time::Instant::now()
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
}
