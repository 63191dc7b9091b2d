//! What a write leaves of an object, as a cache must show it before a reader may trust the cache: a
//! resourceVersion or later, or the object gone. Versions are compared as Kubernetes 1.35 lets clients compare
//! the resourceVersions of objects of one kind (KEP-5504): decimal integers without leading zeros, the longer
//! the newer. A version in any other shape compares with nothing.

use crate::engine::rollout::change::Kind;

/// Whether resourceVersion `held` is `wanted` or later (KEP-5504); `false` when either is not comparable.
pub fn at_least(held: &str, wanted: &str) -> bool {
    let comparable =
        |rv: &str| !rv.is_empty() && rv.bytes().all(|b| b.is_ascii_digit()) && !rv.starts_with('0');
    if !comparable(held) || !comparable(wanted) {
        return false;
    }
    (held.len(), held) >= (wanted.len(), wanted)
}

/// What a cache must show of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Least {
    /// This resourceVersion or a later one.
    Version(String),
    /// Not the object with this uid (it was deleted): absent, or made again since.
    Gone(Option<String>),
}

/// What a cache holds of one object: its resourceVersion and uid.
pub type Held = Option<(String, String)>;

/// One object of a Rollout's, and what a cache must show of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expected {
    pub kind: Kind,
    pub name: String,
    pub least: Least,
}

impl Expected {
    /// Whether what a cache holds of the object (`held`) shows this.
    pub fn met(&self, held: Held) -> bool {
        match (&self.least, held) {
            (Least::Version(wanted), Some((rv, _))) => at_least(&rv, wanted),
            (Least::Version(_), None) => false,
            (Least::Gone(_), None) => true,
            (Least::Gone(uid), Some((_, held_uid))) => uid.as_ref() != Some(&held_uid),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_as_numbers_and_only_when_both_are_decimal_without_leading_zeros() {
        assert!(at_least("10", "9"));
        assert!(at_least("10", "10"));
        assert!(!at_least("9", "10"));
        assert!(!at_least("123", "124"));
        for odd in ["", "012", "1a", "-1", " 1"] {
            assert!(!at_least(odd, "1"), "{odd:?}");
            assert!(!at_least("1", odd), "{odd:?}");
        }
    }

    #[test]
    fn a_deletion_is_shown_by_no_object_or_another_of_the_same_name() {
        let gone = Expected {
            kind: Kind::AnalysisRun,
            name: "web-1".into(),
            least: Least::Gone(Some("u".into())),
        };
        assert!(gone.met(None));
        assert!(gone.met(Some(("9".into(), "v".into()))));
        assert!(!gone.met(Some(("9".into(), "u".into()))));
    }
}
