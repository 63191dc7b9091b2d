//! The label selector of a `subscriptions` entry (Kubernetes' selector text): `key=value`, `key==value`,
//! `key!=value`, `key` (exists) and `!key` (does not), comma-separated, all of which must hold. The set forms
//! (`key in (a,b)`, `notin`) are refused with a message rather than misread.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq)]
enum Requirement {
    Equals(String, String),
    Differs(String, String),
    Exists(String),
    Absent(String),
}

/// A parsed selector; the empty one matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selector(Vec<Requirement>);

impl Selector {
    pub fn parse(text: &str) -> Result<Selector, String> {
        let mut requirements = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if part.contains(" in ") || part.contains(" notin ") || part.contains('(') {
                return Err(format!(
                    "selector `{text}`: set-based requirements (`in`, `notin`) are not supported; use `key=value`"
                ));
            }
            let requirement = if let Some((k, v)) = part.split_once("!=") {
                Requirement::Differs(k.trim().to_string(), v.trim().to_string())
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                Requirement::Equals(k.trim().to_string(), v.trim().to_string())
            } else if let Some(k) = part.strip_prefix('!') {
                Requirement::Absent(k.trim().to_string())
            } else {
                Requirement::Exists(part.to_string())
            };
            requirements.push(requirement);
        }
        Ok(Selector(requirements))
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::Differs(k, v) => labels.get(k) != Some(v),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::Absent(k) => !labels.contains_key(k),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn every_requirement_must_hold_and_the_empty_selector_matches_all() {
        let web = labels(&[("app", "web"), ("tier", "front")]);
        let parse = |s: &str| Selector::parse(s).expect("a selector");
        assert!(parse("").matches(&web));
        assert!(parse("app=web, tier==front").matches(&web));
        assert!(!parse("app=web,tier=back").matches(&web));
        assert!(parse("app!=api,tier").matches(&web));
        assert!(!parse("!tier").matches(&web));
        assert!(Selector::parse("app in (web)").is_err());
    }
}
