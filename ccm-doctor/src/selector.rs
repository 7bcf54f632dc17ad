//! Kubernetes label selectors in their string form (`k8s-app=ccm,tier!=x,env in (a,b),!legacy`), parsed so
//! that flags are validated before any request and manifests can be filtered without a cluster.
//!
//! ```
//! use std::collections::BTreeMap;
//! use ccm_doctor::selector::LabelSelector;
//!
//! let selector: LabelSelector = "k8s-app=cloud-controller-manager,tier in (control-plane)".parse().unwrap();
//! let labels = BTreeMap::from([
//!     ("k8s-app".to_owned(), "cloud-controller-manager".to_owned()),
//!     ("tier".to_owned(), "control-plane".to_owned()),
//! ]);
//! assert!(selector.matches(&labels));
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

/// A label selector string could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid label selector {selector:?}: {reason} (write requirements like key=value, key!=value, key, !key, \
     key in (a,b) or key notin (a,b), separated by commas)"
)]
pub struct SelectorError {
    /// The whole selector.
    pub selector: String,
    /// What is wrong.
    pub reason: String,
}

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `key` (the label exists).
    Exists(String),
    /// `!key` (the label does not exist).
    DoesNotExist(String),
    /// `key=value` or `key==value`.
    Equals(String, String),
    /// `key!=value` (also true when the label is absent).
    NotEquals(String, String),
    /// `key in (a,b)`.
    In(String, Vec<String>),
    /// `key notin (a,b)` (also true when the label is absent).
    NotIn(String, Vec<String>),
}

impl Requirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::DoesNotExist(k) => !labels.contains_key(k),
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|l| vs.contains(l)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|l| !vs.contains(l)),
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Requirement::Exists(k) => write!(f, "{k}"),
            Requirement::DoesNotExist(k) => write!(f, "!{k}"),
            Requirement::Equals(k, v) => write!(f, "{k}={v}"),
            Requirement::NotEquals(k, v) => write!(f, "{k}!={v}"),
            Requirement::In(k, vs) => write!(f, "{k} in ({})", vs.join(",")),
            Requirement::NotIn(k, vs) => write!(f, "{k} notin ({})", vs.join(",")),
        }
    }
}

/// A parsed label selector: every requirement must hold. The empty selector selects everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// The requirements, in the order written.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// True if `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// True if `labels` (absent labels = none) satisfy every requirement.
    pub fn matches_opt(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        match labels {
            Some(labels) => self.matches(labels),
            None => self.matches(&BTreeMap::new()),
        }
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.requirements.iter().map(|r| r.to_string()).collect();
        f.write_str(&parts.join(","))
    }
}

impl FromStr for LabelSelector {
    type Err = SelectorError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let err = |reason: String| SelectorError {
            selector: text.to_owned(),
            reason,
        };
        let mut requirements = Vec::new();
        for part in split_top_level(text).map_err(err)? {
            let part = part.trim();
            if part.is_empty() {
                if text.trim().is_empty() {
                    continue;
                }
                return Err(err("empty requirement".to_owned()));
            }
            requirements.push(parse_requirement(part).map_err(err)?);
        }
        Ok(LabelSelector { requirements })
    }
}

/// Split on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '(' => {
                if depth > 0 {
                    return Err("nested parentheses".to_owned());
                }
                depth += 1;
            }
            ')' => {
                if depth == 0 {
                    return Err("unbalanced ')'".to_owned());
                }
                depth -= 1;
            }
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("missing ')'".to_owned());
    }
    parts.push(&text[start..]);
    Ok(parts)
}

fn parse_requirement(part: &str) -> Result<Requirement, String> {
    if let Some(key) = part.strip_prefix('!') {
        return Ok(Requirement::DoesNotExist(key_of(key.trim())?));
    }
    if let Some((k, v)) = part.split_once("!=") {
        return Ok(Requirement::NotEquals(
            key_of(k.trim())?,
            value_of(v.trim())?,
        ));
    }
    if let Some((k, v)) = part.split_once("==") {
        return Ok(Requirement::Equals(key_of(k.trim())?, value_of(v.trim())?));
    }
    if let Some((k, v)) = part.split_once('=') {
        return Ok(Requirement::Equals(key_of(k.trim())?, value_of(v.trim())?));
    }
    if let Some(open) = part.find('(') {
        let head = part[..open].trim();
        let Some(list) = part[open + 1..].trim_end().strip_suffix(')') else {
            return Err(format!("unexpected text after ')' in {part:?}"));
        };
        let values = list
            .split(',')
            .map(|v| value_of(v.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        let mut words = head.split_whitespace();
        let (Some(key), Some(op), None) = (words.next(), words.next(), words.next()) else {
            return Err(format!(
                "expected `key in (...)` or `key notin (...)`, got {part:?}"
            ));
        };
        let key = key_of(key)?;
        return match op {
            "in" => Ok(Requirement::In(key, values)),
            "notin" => Ok(Requirement::NotIn(key, values)),
            other => Err(format!("unknown operator {other:?} (use in or notin)")),
        };
    }
    Ok(Requirement::Exists(key_of(part)?))
}

fn key_of(key: &str) -> Result<String, String> {
    if key.is_empty() {
        return Err("empty label key".to_owned());
    }
    if !key
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
    {
        return Err(format!("invalid label key {key:?}"));
    }
    Ok(key.to_owned())
}

fn value_of(value: &str) -> Result<String, String> {
    if !value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(format!("invalid label value {value:?}"));
    }
    Ok(value.to_owned())
}

/// Parse a selector flag (a clap value parser).
///
/// # Errors
/// [`SelectorError`] when `text` is not a valid label selector.
pub fn parse_selector_arg(text: &str) -> Result<LabelSelector, SelectorError> {
    text.parse()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn sel(text: &str) -> LabelSelector {
        text.parse().unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn parses_every_operator() {
        let s = sel("a=1, b==2,c!=3,d,!e,f in (x, y),g notin (z)");
        assert_eq!(
            s.requirements(),
            &[
                Requirement::Equals("a".into(), "1".into()),
                Requirement::Equals("b".into(), "2".into()),
                Requirement::NotEquals("c".into(), "3".into()),
                Requirement::Exists("d".into()),
                Requirement::DoesNotExist("e".into()),
                Requirement::In("f".into(), vec!["x".into(), "y".into()]),
                Requirement::NotIn("g".into(), vec!["z".into()]),
            ]
        );
        assert_eq!(s.to_string(), "a=1,b=2,c!=3,d,!e,f in (x,y),g notin (z)");
        assert_eq!(sel(&s.to_string()), s);
    }

    #[test]
    fn empty_selects_everything() {
        assert!(sel("").matches(&labels(&[])));
        assert!(sel("  ").matches(&labels(&[("a", "b")])));
        assert!(sel("").matches_opt(None));
    }

    #[test]
    fn matching() {
        let l = labels(&[
            ("k8s-app", "cloud-controller-manager"),
            ("node-role.kubernetes.io/control-plane", ""),
        ]);
        assert!(sel("k8s-app=cloud-controller-manager").matches(&l));
        assert!(!sel("k8s-app=other").matches(&l));
        assert!(sel("node-role.kubernetes.io/control-plane").matches(&l));
        assert!(sel("node-role.kubernetes.io/control-plane=").matches(&l));
        assert!(!sel("!node-role.kubernetes.io/control-plane").matches(&l));
        assert!(sel("missing!=x").matches(&l));
        assert!(!sel("k8s-app!=cloud-controller-manager").matches(&l));
        assert!(sel("k8s-app in (a,cloud-controller-manager)").matches(&l));
        assert!(!sel("k8s-app in (a,b)").matches(&l));
        assert!(!sel("missing in (a)").matches(&l));
        assert!(sel("missing notin (a)").matches(&l));
        assert!(!sel("k8s-app notin (cloud-controller-manager)").matches(&l));
        assert!(!sel("k8s-app=cloud-controller-manager,missing").matches(&l));
        assert!(!sel("a").matches_opt(None));
        assert!(sel("!a").matches_opt(None));
    }

    #[test]
    fn rejects_bad_selectors() {
        for bad in [
            "a=1,",
            ",a",
            "a in (x",
            "a in x)",
            "a in ((x))",
            "a between (x)",
            "in (x)",
            "a b",
            "=1",
            "a=b c",
            "!",
            "a in (x) y",
            "a=(x)",
        ] {
            let err = bad.parse::<LabelSelector>();
            assert!(err.is_err(), "{bad:?} should be rejected: {err:?}");
        }
        let msg = "a in (x".parse::<LabelSelector>().unwrap_err().to_string();
        assert!(msg.contains("invalid label selector \"a in (x\""), "{msg}");
        assert!(msg.contains("missing ')'"), "{msg}");
    }
}
