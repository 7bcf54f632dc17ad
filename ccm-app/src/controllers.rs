//! `--controllers`: which controllers run, with the Go reference's rules (`IsControllerEnabled`).
//!
//! The list is scanned in order and the **first explicit mention wins**: `name` enables, `-name` disables; a `*`
//! anywhere means "every controller that is not disabled by default"; with no `*` and no mention a controller is
//! off. Aliases (`cloud-node`, `cloud-node-lifecycle`, `service`, `route`, and any a vendor registers) are
//! rewritten to canonical names first, keeping the `-` prefix. Unknown names are an error:
//! `"foo" is not in the list of known controllers`.

use std::collections::{BTreeMap, BTreeSet};

use ccm_core::runtime::controller::ControllerDescriptor;

/// The `--controllers` entry meaning "the defaults".
pub const ALL: &str = "*";

/// The Go reference's `IsControllerEnabled`: whether `name` runs under the (canonicalised) list `controllers`.
pub fn is_controller_enabled(
    name: &str,
    disabled_by_default: &BTreeSet<String>,
    controllers: &[String],
) -> bool {
    let mentioned = controllers.iter().find_map(|entry| {
        (entry == name || entry.strip_prefix('-') == Some(name)).then(|| entry == name)
    });
    mentioned.unwrap_or_else(|| {
        controllers.iter().any(|e| e == ALL) && !disabled_by_default.contains(name)
    })
}

/// A registration that cannot be accepted (a programming error of the binary, reported at start-up).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// Two controllers have the same name, or a name equals another controller's alias.
    #[error(
        "controller name or alias {name:?} is registered twice; give every controller a unique name and \
         unique aliases"
    )]
    Duplicate {
        /// The name or alias.
        name: String,
    },
    /// A name or alias cannot be written in `--controllers`.
    #[error(
        "invalid controller name or alias {name:?}: it must be non-empty, must not be \"*\", must not start with \
         '-' and must not contain ',' or whitespace"
    )]
    InvalidName {
        /// The name or alias.
        name: String,
    },
}

/// Names in `--controllers` that match no controller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .names.iter().map(|n| format!("{n:?} is not in the list of known controllers")).collect::<Vec<_>>().join("; "))]
pub struct UnknownControllers {
    /// The unknown names, without their `-` prefix, in the order given.
    pub names: Vec<String>,
}

/// Every controller a CCM binary knows: canonical names in registration order, aliases, and the ones `*` leaves
/// off.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ControllerCatalog {
    names: Vec<String>,
    aliases: BTreeMap<String, String>,
    disabled_by_default: BTreeSet<String>,
}

fn check_name(name: &str) -> Result<(), CatalogError> {
    let bad = name.is_empty()
        || name == ALL
        || name.starts_with('-')
        || name.contains(',')
        || name.chars().any(char::is_whitespace);
    match bad {
        true => Err(CatalogError::InvalidName {
            name: name.to_owned(),
        }),
        false => Ok(()),
    }
}

impl ControllerCatalog {
    /// The catalog of `entries`, in order: each a controller's name, its aliases and whether `*` leaves it off; a
    /// [`CatalogError`] for a duplicate or unusable name or alias.
    pub fn new<'a, S: AsRef<str> + 'a>(
        entries: impl IntoIterator<Item = (&'a str, &'a [S], bool)>,
    ) -> Result<Self, CatalogError> {
        let mut catalog = ControllerCatalog::default();
        let mut seen = BTreeSet::new();
        for (name, aliases, disabled) in entries {
            let aliases = aliases.iter().map(AsRef::as_ref);
            for id in std::iter::once(name).chain(aliases.clone()) {
                check_name(id)?;
                if !seen.insert(id) {
                    return Err(CatalogError::Duplicate {
                        name: id.to_owned(),
                    });
                }
            }
            for alias in aliases {
                catalog.aliases.insert(alias.to_owned(), name.to_owned());
            }
            if disabled {
                catalog.disabled_by_default.insert(name.to_owned());
            }
            catalog.names.push(name.to_owned());
        }
        Ok(catalog)
    }

    /// The catalog of these descriptors, in order (errors as [`new`](Self::new)).
    pub fn from_descriptors(descriptors: &[ControllerDescriptor]) -> Result<Self, CatalogError> {
        Self::new(
            descriptors
                .iter()
                .map(|d| (d.name.as_str(), d.aliases.as_slice(), d.disabled_by_default)),
        )
    }

    /// Canonical names, in registration order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The canonical name of a name or alias, if known.
    pub fn canonical(&self, name: &str) -> Option<&str> {
        self.aliases
            .get(name)
            .or_else(|| self.names.iter().find(|n| n.as_str() == name))
            .map(String::as_str)
    }

    /// Rewrite aliases to canonical names, keeping `-` prefixes; `*` and unknown names are kept as they are.
    pub fn canonicalize(&self, controllers: &[String]) -> Vec<String> {
        controllers
            .iter()
            .map(|entry| {
                let bare = entry.strip_prefix('-').unwrap_or(entry);
                let prefix = &entry[..entry.len() - bare.len()];
                match self.aliases.get(bare) {
                    Some(canonical) => format!("{prefix}{canonical}"),
                    None => entry.clone(),
                }
            })
            .collect()
    }

    /// Check that every entry (other than `*`) names a known controller or alias, with or without `-`; else
    /// [`UnknownControllers`] lists every unknown name, as the Go reference reports them.
    pub fn validate(&self, controllers: &[String]) -> Result<(), UnknownControllers> {
        let names: Vec<String> = controllers
            .iter()
            .filter(|entry| entry.as_str() != ALL)
            .map(|entry| entry.strip_prefix('-').unwrap_or(entry))
            .filter(|bare| self.canonical(bare).is_none())
            .map(str::to_owned)
            .collect();
        match names.is_empty() {
            true => Ok(()),
            false => Err(UnknownControllers { names }),
        }
    }

    /// The canonical names that run under `controllers`, in registration order ([`UnknownControllers`] if the list
    /// names unknown controllers).
    pub fn enabled(&self, controllers: &[String]) -> Result<Vec<String>, UnknownControllers> {
        self.validate(controllers)?;
        let canonical = self.canonicalize(controllers);
        Ok(self
            .names
            .iter()
            .filter(|name| is_controller_enabled(name, &self.disabled_by_default, &canonical))
            .cloned()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl ControllerCatalog {
        /// Controllers `*` leaves off.
        pub(crate) fn disabled_by_default(&self) -> &BTreeSet<String> {
            &self.disabled_by_default
        }
    }

    /// The catalog of `(name, aliases, disabled by default)` entries.
    fn catalog(entries: &[(&str, &[&str], bool)]) -> Result<ControllerCatalog, CatalogError> {
        ControllerCatalog::new(entries.iter().copied())
    }

    fn list(entries: &[&str]) -> Vec<String> {
        entries.iter().map(|s| (*s).to_owned()).collect()
    }

    fn standard() -> ControllerCatalog {
        catalog(&[
            ("cloud-node-controller", &["cloud-node"], false),
            (
                "cloud-node-lifecycle-controller",
                &["cloud-node-lifecycle"],
                false,
            ),
            ("service-lb-controller", &["service"], false),
            ("node-route-controller", &["route"], false),
            ("tagging-controller", &["tagging"], true),
        ])
        .unwrap()
    }

    const DEFAULTS: [&str; 4] = [
        "cloud-node-controller",
        "cloud-node-lifecycle-controller",
        "service-lb-controller",
        "node-route-controller",
    ];

    #[test]
    fn is_enabled_truth_table() {
        let off: BTreeSet<String> = ["x".to_owned()].into();
        let none = BTreeSet::new();
        // (name, disabled-by-default set, list, expected)
        let cases: Vec<(&str, &BTreeSet<String>, Vec<String>, bool)> = vec![
            ("a", &none, list(&[]), false),
            ("a", &none, list(&["*"]), true),
            ("a", &none, list(&["a"]), true),
            ("a", &none, list(&["-a"]), false),
            ("a", &none, list(&["b"]), false),
            ("a", &none, list(&["-b"]), false),
            ("a", &none, list(&["*", "-a"]), false),
            ("a", &none, list(&["-a", "*"]), false),
            ("a", &none, list(&["a", "-a"]), true),
            ("a", &none, list(&["-a", "a"]), false),
            ("a", &none, list(&["b", "*"]), true),
            ("a", &none, list(&["*", "*"]), true),
            ("x", &off, list(&["*"]), false),
            ("x", &off, list(&["*", "x"]), true),
            ("x", &off, list(&["x"]), true),
            ("x", &off, list(&["-x", "*"]), false),
            ("a", &off, list(&["*"]), true),
            ("a", &none, list(&["aa", "-"]), false),
        ];
        for (name, disabled, controllers, want) in cases {
            assert_eq!(
                is_controller_enabled(name, disabled, &controllers),
                want,
                "{name} {controllers:?}"
            );
        }
    }

    #[test]
    fn default_list_enables_the_four_and_not_the_opt_in_one() {
        assert_eq!(standard().enabled(&list(&["*"])).unwrap(), DEFAULTS);
    }

    #[test]
    fn aliases_are_canonicalised_keeping_the_minus() {
        let c = standard();
        assert_eq!(
            c.canonicalize(&list(&[
                "cloud-node",
                "-route",
                "*",
                "x",
                "-y",
                "service-lb-controller"
            ])),
            list(&[
                "cloud-node-controller",
                "-node-route-controller",
                "*",
                "x",
                "-y",
                "service-lb-controller"
            ])
        );
        assert_eq!(
            c.enabled(&list(&["*", "-route", "-service"])).unwrap(),
            list(&["cloud-node-controller", "cloud-node-lifecycle-controller"])
        );
        assert_eq!(
            c.enabled(&list(&["route", "cloud-node"])).unwrap(),
            list(&["cloud-node-controller", "node-route-controller"])
        );
        // an alias and its canonical name are the same controller: the first mention wins
        assert_eq!(
            c.enabled(&list(&["-service", "service-lb-controller", "*"]))
                .unwrap(),
            list(&[
                "cloud-node-controller",
                "cloud-node-lifecycle-controller",
                "node-route-controller"
            ])
        );
        assert_eq!(
            c.enabled(&list(&["tagging", "*"])).unwrap(),
            list(&[
                "cloud-node-controller",
                "cloud-node-lifecycle-controller",
                "service-lb-controller",
                "node-route-controller",
                "tagging-controller"
            ])
        );
    }

    #[test]
    fn without_star_only_named_controllers_run() {
        let c = standard();
        assert!(c.enabled(&list(&[])).unwrap().is_empty());
        assert!(c.enabled(&list(&["-route"])).unwrap().is_empty());
        assert_eq!(
            c.enabled(&list(&["service"])).unwrap(),
            list(&["service-lb-controller"])
        );
    }

    #[test]
    fn unknown_names_are_reported_like_go() {
        let c = standard();
        let err = c
            .enabled(&list(&["*", "bogus", "-nope", "route", ""]))
            .unwrap_err();
        assert_eq!(err.names, list(&["bogus", "nope", ""]));
        assert_eq!(
            err.to_string(),
            "\"bogus\" is not in the list of known controllers; \"nope\" is not in the list of known \
             controllers; \"\" is not in the list of known controllers"
        );
        assert!(
            c.validate(&list(&["*", "-cloud-node", "tagging-controller"]))
                .is_ok()
        );
        // "-*" is not the star
        assert_eq!(c.validate(&list(&["-*"])).unwrap_err().names, list(&["*"]));
    }

    #[test]
    fn catalog_rejects_duplicates_and_bad_names() {
        let dup = catalog(&[("a", &["x"], false), ("b", &["x"], false)]).unwrap_err();
        assert_eq!(dup, CatalogError::Duplicate { name: "x".into() });
        let dup = catalog(&[("a", &[], false), ("b", &["a"], false)]).unwrap_err();
        assert_eq!(dup, CatalogError::Duplicate { name: "a".into() });
        let dup = catalog(&[("a", &["a"], false)]).unwrap_err();
        assert_eq!(dup, CatalogError::Duplicate { name: "a".into() });
        for bad in ["", "*", "-a", "a,b", "a b"] {
            let err = catalog(&[(bad, &[], false)]).unwrap_err();
            assert_eq!(err, CatalogError::InvalidName { name: bad.into() });
            let err = catalog(&[("ok", &[bad], false)]).unwrap_err();
            assert_eq!(err, CatalogError::InvalidName { name: bad.into() });
        }
    }

    #[test]
    fn catalog_from_descriptors() {
        use ccm_core::runtime::controller::ControllerDescriptor;
        let d = |name: &str| ControllerDescriptor::new(name, |_| Ok(None));
        let catalog = ControllerCatalog::from_descriptors(&[
            d("one").with_aliases(&["1"]),
            d("two").disabled_by_default(),
        ])
        .unwrap();
        assert_eq!(catalog.names(), list(&["one", "two"]));
        assert_eq!(catalog.canonical("1"), Some("one"));
        assert_eq!(catalog.canonical("two"), Some("two"));
        assert_eq!(catalog.canonical("three"), None);
        assert!(catalog.disabled_by_default().contains("two"));
        assert_eq!(catalog.enabled(&list(&["*"])).unwrap(), list(&["one"]));
    }

    /// Formerly the rustdoc example of an item that is now internal.
    #[test]
    fn doc_example_catalog_first_mention_wins() {
        use crate::controllers::ControllerCatalog;

        let catalog = ControllerCatalog::new([
            ("cloud-node-controller", &["cloud-node"][..], false),
            ("service-lb-controller", &["service"][..], false),
            ("tagging-controller", &["tagging"][..], true),
        ])
        .unwrap();
        let list = vec!["*".to_owned(), "-service".to_owned()];
        assert_eq!(
            catalog.enabled(&list).unwrap(),
            vec!["cloud-node-controller"]
        );
        let list = vec!["tagging".to_owned()];
        assert_eq!(catalog.enabled(&list).unwrap(), vec!["tagging-controller"]);
    }

    /// Formerly the rustdoc example of an item that is now internal.
    #[test]
    fn doc_example_is_controller_enabled() {
        use crate::controllers::is_controller_enabled;
        use std::collections::BTreeSet;

        let none = BTreeSet::new();
        let list = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(is_controller_enabled("a", &none, &list(&["*"])));
        assert!(!is_controller_enabled("a", &none, &list(&["-a", "*"])));
        assert!(!is_controller_enabled("a", &none, &list(&["b"])));
    }
}
