//! "Did you mean ...?": the nearest of the names that exist to one that does not, for every message that
//! names a misspelling (unknown fields of templates, Rollouts and ApplicationSets, label keys). One rule, so
//! every suggestion canaryd makes is found the same way.

/// The candidate nearest to `word`, ignoring case: one it abbreviates or extends (`env` for `environment`,
/// `step` for `steps`; `word` of three characters or more), else one at most two edits away and fewer than
/// half its length. `None` when nothing is near enough to be a likely slip.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = word.to_ascii_lowercase();
    let score = |candidate: &str| {
        let c = candidate.to_ascii_lowercase();
        let extends = lower.len() >= 3 && (c.starts_with(&lower) || lower.starts_with(&c));
        if extends {
            return Some(0);
        }
        let d = edit_distance(&lower, &c);
        (d <= 2 && d < c.len() / 2 + 1).then_some(d)
    };
    candidates
        .into_iter()
        .filter(|c| *c != word)
        .filter_map(|c| score(c).map(|s| (s, c)))
        .min()
        .map(|(_, c)| c)
}

/// Levenshtein distance over characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abbreviations_extensions_and_near_misses_are_found() {
        let names = ["environment", "region", "steps", "interval"];
        assert_eq!(closest("env", names), Some("environment"));
        assert_eq!(closest("regoin", names), Some("region"));
        assert_eq!(closest("step", names), Some("steps"));
        assert_eq!(closest("intervall", names), Some("interval"));
    }

    #[test]
    fn far_or_tiny_words_get_no_suggestion() {
        assert_eq!(closest("zzz", ["interval"]), None);
        assert_eq!(closest("a", ["args"]), None);
    }
}
