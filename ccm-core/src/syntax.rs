//! The API server's syntax rules for names and labels, checked in one place: RFC 1123 DNS labels (a namespace)
//! and subdomains (a Lease name, a label key's prefix), label keys and label values.
//!
//! Each check says why a value breaks the rule, in words a caller puts after the value it names
//! (`"Example.com" must start and end with a lower-case letter or digit`), so the leader election, the node
//! controller's label reconciliation, the fake cloud's inventory and the conformance suite accept and reject
//! exactly the same values and each words its own message.
//!
//! ```
//! use ccm_core::syntax::{dns_label, dns_subdomain, label_key, label_value, LabelKeyError};
//!
//! assert!(dns_label("kube-system").is_ok());
//! assert_eq!(dns_label("kube.system"), Err("may contain only lower-case letters, digits and '-'"));
//! assert!(dns_subdomain("cloud-controller-manager.example").is_ok());
//! assert!(label_key("topology.kubernetes.io/zone").is_ok());
//! assert!(matches!(label_key("Example.com/rack"), Err(LabelKeyError::Prefix(_))));
//! assert!(label_value("").is_ok());
//! assert_eq!(label_value("-a"), Err("must start and end with a letter or digit"));
//! ```

/// Why `value` is not an RFC 1123 DNS label: 1 to 63 lower-case letters, digits or `-`, starting and ending with
/// a letter or digit (the rule for a namespace).
///
/// ```
/// assert!(ccm_core::syntax::dns_label("kube-system").is_ok());
/// assert!(ccm_core::syntax::dns_label("-a").is_err());
/// ```
pub fn dns_label(value: &str) -> Result<(), &'static str> {
    dns_name(value, false)
}

/// Why `value` is not an RFC 1123 DNS subdomain: at most 253 characters of dot-separated parts, each lower-case
/// letters, digits or `-`, starting and ending with a letter or digit (the rule for most object names, a Lease's
/// among them, and for a label key's prefix). As in the API server's own check, a part may be longer than 63
/// characters.
///
/// ```
/// assert!(ccm_core::syntax::dns_subdomain("example.com").is_ok());
/// assert!(ccm_core::syntax::dns_subdomain("example..com").is_err());
/// ```
pub fn dns_subdomain(value: &str) -> Result<(), &'static str> {
    dns_name(value, true)
}

fn dns_name(value: &str, dots: bool) -> Result<(), &'static str> {
    if value.is_empty() {
        return Err("must not be empty");
    }
    match (dots, value.len()) {
        (true, 254..) => return Err("must be at most 253 characters"),
        (false, 64..) => return Err("must be at most 63 characters"),
        _ => {}
    }
    // A label is one part: `splitn(1, ..)` yields the whole value.
    for part in value.splitn(if dots { usize::MAX } else { 1 }, '.') {
        let bytes = part.as_bytes();
        let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
            return Err("must not contain empty dot-separated parts");
        };
        if !first.is_ascii_alphanumeric() || !last.is_ascii_alphanumeric() {
            return Err("must start and end with a lower-case letter or digit");
        }
        if !bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        {
            return Err(if dots {
                "may contain only lower-case letters, digits, '-' and '.'"
            } else {
                "may contain only lower-case letters, digits and '-'"
            });
        }
    }
    Ok(())
}

/// Why `value` is not a valid label value: empty, or at most 63 letters, digits, `-`, `_` or `.`, starting and
/// ending with a letter or digit. The name part of a label key follows the same rule, except that it must not be
/// empty.
///
/// ```
/// assert!(ccm_core::syntax::label_value("r-7").is_ok());
/// assert!(ccm_core::syntax::label_value("has space").is_err());
/// ```
pub fn label_value(value: &str) -> Result<(), &'static str> {
    if value.is_empty() {
        return Ok(());
    }
    if value.len() > 63 {
        return Err("must be at most 63 characters");
    }
    let alphanumeric = |c: char| c.is_ascii_alphanumeric();
    if !value.starts_with(alphanumeric) || !value.ends_with(alphanumeric) {
        return Err("must start and end with a letter or digit");
    }
    if !value
        .chars()
        .all(|c| alphanumeric(c) || matches!(c, '-' | '_' | '.'))
    {
        return Err("may contain only letters, digits, '-', '_' and '.'");
    }
    Ok(())
}

/// Which part of a label key (`[prefix/]name`) breaks its rule, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LabelKeyError {
    /// The prefix is not a DNS subdomain ([`dns_subdomain`]).
    #[error("the prefix {0}")]
    Prefix(&'static str),
    /// The name is empty or not a valid label value ([`label_value`]).
    #[error("the name {0}")]
    Name(&'static str),
}

/// Why `key` is not a valid label key: an optional DNS subdomain prefix and `/`, then a name of 1 to 63 letters,
/// digits, `-`, `_` or `.`, starting and ending with a letter or digit.
///
/// ```
/// use ccm_core::syntax::{label_key, LabelKeyError};
///
/// assert!(label_key("example.com/rack").is_ok());
/// assert_eq!(label_key("example.com/"), Err(LabelKeyError::Name("must not be empty")));
/// ```
pub fn label_key(key: &str) -> Result<(), LabelKeyError> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        dns_subdomain(prefix).map_err(LabelKeyError::Prefix)?;
    }
    if name.is_empty() {
        return Err(LabelKeyError::Name("must not be empty"));
    }
    label_value(name).map_err(LabelKeyError::Name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_labels() {
        for ok in ["a", "kube-system", "0", "a-0", &"a".repeat(63)] {
            assert_eq!(dns_label(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("", "must not be empty"),
            (&"a".repeat(64), "must be at most 63 characters"),
            ("a.b", "may contain only lower-case letters, digits and '-'"),
            ("A", "may contain only lower-case letters, digits and '-'"),
            ("-A", "must start and end with a lower-case letter or digit"),
            ("-a", "must start and end with a lower-case letter or digit"),
            ("a-", "must start and end with a lower-case letter or digit"),
        ] {
            assert_eq!(dns_label(bad), Err(why), "{bad}");
        }
    }

    #[test]
    fn dns_subdomains() {
        let long_part = format!("{}.com", "a".repeat(64));
        assert_eq!(
            dns_subdomain(&long_part),
            Ok(()),
            "the API server allows long parts"
        );
        for ok in [
            "a",
            "example.com",
            "a-b.c-d.e",
            "a.".repeat(126).trim_end_matches('.'),
        ] {
            assert_eq!(dns_subdomain(ok), Ok(()), "{ok}");
        }
        for (bad, why) in [
            ("", "must not be empty"),
            (&"a".repeat(254)[..], "must be at most 253 characters"),
            ("a..b", "must not contain empty dot-separated parts"),
            (".a", "must not contain empty dot-separated parts"),
            (
                "Example.com",
                "may contain only lower-case letters, digits, '-' and '.'",
            ),
            (
                "a_b",
                "may contain only lower-case letters, digits, '-' and '.'",
            ),
            (
                "a.-b",
                "must start and end with a lower-case letter or digit",
            ),
        ] {
            assert_eq!(dns_subdomain(bad), Err(why), "{bad}");
        }
    }

    #[test]
    fn label_values_and_keys() {
        for ok in ["", "a", "r-7", "A_b.c", &"a".repeat(63)] {
            assert_eq!(label_value(ok), Ok(()), "{ok}");
        }
        assert_eq!(
            label_value(&"a".repeat(64)),
            Err("must be at most 63 characters")
        );
        assert_eq!(
            label_value(".a"),
            Err("must start and end with a letter or digit")
        );
        assert_eq!(
            label_value("a b"),
            Err("may contain only letters, digits, '-', '_' and '.'")
        );
        for ok in ["rack", "example.com/rack", "a/B_c", "kubernetes.io/arch"] {
            assert_eq!(label_key(ok), Ok(()), "{ok}");
        }
        assert!(matches!(
            label_key("Example.com/x"),
            Err(LabelKeyError::Prefix(_))
        ));
        assert!(matches!(
            label_key("/x"),
            Err(LabelKeyError::Prefix("must not be empty"))
        ));
        assert_eq!(
            label_key("a/"),
            Err(LabelKeyError::Name("must not be empty"))
        );
        assert!(matches!(label_key("a/b/c"), Err(LabelKeyError::Name(_))));
        assert!(matches!(label_key("bad key!"), Err(LabelKeyError::Name(_))));
        assert_eq!(
            LabelKeyError::Prefix("must not be empty").to_string(),
            "the prefix must not be empty"
        );
    }
}
