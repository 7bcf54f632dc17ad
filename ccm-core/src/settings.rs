//! What a controller's `Config::validate` reports: which setting breaks which rule ([`InvalidSetting`]).
//!
//! The rules of a controller's settings live once, in its `Config`; the runtime (ccm-app) reports a violation
//! under the flag that sets the field, so the same rule gives the same answer to a vendor building a `Config` in
//! code and to an operator passing flags.

use std::time::Duration;

/// The rule a setting breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rule {
    /// A count is 0; it must be at least 1.
    #[error("is 0; it must be at least 1")]
    Positive,
    /// A period is 0; it must be longer.
    #[error("is 0; it must be greater than 0s")]
    NonZeroDuration,
    /// Any other rule: what is wrong and what to do, naming the setting.
    #[error("{0}")]
    Other(String),
}

/// A setting of a controller's `Config` that breaks one of its rules.
///
/// ```no_run
/// use ccm_core::settings::{InvalidSetting, Rule};
///
/// let invalid = InvalidSetting::positive("concurrent_service_syncs", 0).expect("0 is not positive");
/// assert_eq!(invalid.rule, Rule::Positive);
/// assert_eq!(invalid.to_string(), "concurrent_service_syncs is 0; it must be at least 1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
#[non_exhaustive]
pub struct InvalidSetting {
    /// The `Config` field, e.g. `concurrent_node_syncs`.
    pub setting: &'static str,
    /// The rule it breaks.
    pub rule: Rule,
}

impl InvalidSetting {
    fn new(setting: &'static str, rule: Rule) -> Self {
        InvalidSetting { setting, rule }
    }

    /// `Some` when the count `value` of `setting` is 0.
    pub fn positive(setting: &'static str, value: usize) -> Option<Self> {
        (value == 0).then_some(Self::new(setting, Rule::Positive))
    }

    /// `Some` when the period `value` of `setting` is zero.
    pub fn non_zero(setting: &'static str, value: Duration) -> Option<Self> {
        value
            .is_zero()
            .then_some(Self::new(setting, Rule::NonZeroDuration))
    }

    /// `setting` breaks a rule `reason` explains; `reason` names the setting (it is the whole message).
    pub fn other(setting: &'static str, reason: impl Into<String>) -> Self {
        Self::new(setting, Rule::Other(reason.into()))
    }

    /// `<setting> <rule>`, or the reason alone for [`Rule::Other`].
    fn describe(&self) -> String {
        match &self.rule {
            Rule::Other(reason) => reason.clone(),
            rule => format!("{} {rule}", self.setting),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_zero_breaks_the_zero_rules() {
        assert_eq!(InvalidSetting::positive("n", 1), None);
        assert_eq!(
            InvalidSetting::non_zero("d", Duration::from_millis(1)),
            None
        );
        assert_eq!(
            InvalidSetting::non_zero("period", Duration::ZERO)
                .map(|i| i.to_string())
                .as_deref(),
            Some("period is 0; it must be greater than 0s")
        );
        assert_eq!(
            InvalidSetting::other("class", "the class is empty").to_string(),
            "the class is empty"
        );
    }
}
