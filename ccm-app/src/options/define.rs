//! The machinery behind the settings table in `options/mod.rs`: the `settings!` macro, which turns it into
//! [`Settings`](super::Settings) and [`CcmOptions`](super::CcmOptions), and the conversions of [`SettingValue`].

use std::time::Duration;

use ccm_core::duration::GoDuration;

/// How a resolved setting (a field of `CcmOptions`) is read from its flag or config-file value `Raw` (a field of
/// `Settings`), and written back for `/configz`. `from_raw(&to_raw(v)) == v` for every value `v`.
pub(crate) trait SettingValue<Raw> {
    /// The resolved value of a flag or config-file value.
    fn from_raw(raw: &Raw) -> Self;
    /// The flag or config-file value that resolves to `self`.
    fn to_raw(&self) -> Raw;
}

/// Durations are written in Go's notation (`10s`, `1h30m`).
impl SettingValue<GoDuration> for Duration {
    fn from_raw(raw: &GoDuration) -> Self {
        raw.get()
    }
    fn to_raw(&self) -> GoDuration {
        GoDuration::from(*self)
    }
}

/// An optional path or string: empty (the default) means none.
impl<T: Clone + Default + PartialEq> SettingValue<T> for Option<T> {
    fn from_raw(raw: &T) -> Self {
        (*raw != T::default()).then(|| raw.clone())
    }
    fn to_raw(&self) -> T {
        self.clone().unwrap_or_default()
    }
}

/// A list: as with Go's string-slice flags, `--flag=` (one empty value) means an empty list.
impl SettingValue<Vec<String>> for Vec<String> {
    fn from_raw(raw: &Vec<String>) -> Self {
        if raw.len() == 1 && raw[0].is_empty() {
            Vec::new()
        } else {
            raw.clone()
        }
    }
    fn to_raw(&self) -> Vec<String> {
        self.clone()
    }
}

/// Declares every setting once and derives from the declarations:
///
/// - [`Settings`](super::Settings): one `Option<Raw>` field per setting with the declaration's doc comment and
///   `#[arg]`/`#[serde]` attributes, plus `#[serde(skip_serializing_if = "Option::is_none")]`;
/// - [`CcmOptions`](super::CcmOptions): one resolved field per setting, and its `Default`;
/// - `CcmOptions::apply` (a value given in the file or on the command line replaces the current one, as given or
///   through [`SettingValue::from_raw`]) and `CcmOptions::to_settings` (every setting, as it is or through
///   [`SettingValue::to_raw`]);
/// - for tests, `Settings::sample(n)`: every field set, from the test-only `samples::Sample` trait.
///
/// A declaration is one of
///
/// ```text
/// /// doc comment
/// #[arg(...)] #[serde(...)]
/// name: Type = default,                   // the flag/file value is the resolved value (cloned)
/// name: Resolved as Raw = default,        // converted with SettingValue<Raw> for Resolved (a list is declared
///                                         // `Vec<String> as Vec<String>`: `--flag=` means an empty list)
/// name: bool = default,                   // a Go boolean flag (value name BOOL, parse_go_bool)
/// flag_only name: Raw => merge,           // a flag (never in the file or /configz) without a resolved field of
///                                         // its own; apply calls merge(&mut CcmOptions, &Raw)
/// ```
///
/// Declarations end with a comma; their order is the order of `--help`, the schema and `/configz`.
macro_rules! settings {
    // A flag that only adds to other settings.
    (@munch [$($s:tt)*] [$($o:tt)*] [$($f:tt)*]
        $(#[$attr:meta])* flag_only $name:ident : $raw:ty => $merge:path, $($rest:tt)*) => {
        settings!(@munch
            [$($s)* { $(#[$attr])* #[serde(skip)] $name: $raw }]
            [$($o)*]
            [$($f)* { $name => $merge }]
            $($rest)*);
    };
    // A Go boolean: `--flag` or `--flag=VALUE` in Go's spellings (`--flag VALUE` is not accepted).
    (@munch [$($s:tt)*] [$($o:tt)*] [$($f:tt)*]
        $(#[$attr:meta])* $name:ident : bool = $default:expr, $($rest:tt)*) => {
        settings!(@munch
            [$($s)* { $(#[$attr])* #[serde(skip_serializing_if = "Option::is_none")]
                #[arg(value_name = "BOOL", num_args = 0..=1, require_equals = true,
                      default_missing_value = "true", value_parser = $crate::options::parse_go_bool)]
                $name: bool }]
            [$($o)* { $name: bool = $default; Clone::clone, Clone::clone }]
            [$($f)*]
            $($rest)*);
    };
    // A setting whose flag/file value is converted.
    (@munch [$($s:tt)*] [$($o:tt)*] [$($f:tt)*]
        $(#[$attr:meta])* $name:ident : $res:ty as $raw:ty = $default:expr, $($rest:tt)*) => {
        settings!(@munch
            [$($s)* { $(#[$attr])* #[serde(skip_serializing_if = "Option::is_none")] $name: $raw }]
            [$($o)* { $name: $res = $default;
                <$res as $crate::options::define::SettingValue<$raw>>::from_raw,
                <$res as $crate::options::define::SettingValue<$raw>>::to_raw }]
            [$($f)*]
            $($rest)*);
    };
    // A setting whose flag/file value is the resolved value.
    (@munch [$($s:tt)*] [$($o:tt)*] [$($f:tt)*]
        $(#[$attr:meta])* $name:ident : $res:ty = $default:expr, $($rest:tt)*) => {
        settings!(@munch
            [$($s)* { $(#[$attr])* #[serde(skip_serializing_if = "Option::is_none")] $name: $res }]
            [$($o)* { $name: $res = $default; Clone::clone, Clone::clone }]
            [$($f)*]
            $($rest)*);
    };
    // Every declaration read: emit.
    (@munch
        [$({ $(#[$sattr:meta])* $sname:ident : $sraw:ty })*]
        [$({ $oname:ident : $ores:ty = $odefault:expr; $ofrom:expr, $oto:expr })*]
        [$({ $fname:ident => $fmerge:path })*]) => {
        /// Every setting of the CCM, each optional: the command-line flags and the config file's keys.
        ///
        /// On the command line the names are the Go reference's (`--kube-api-qps`); in the config file they are
        /// camelCase (`kubeApiQps`). Booleans on the command line are written `--flag` or `--flag=false` (as with
        /// Go's flag package, `--flag false` does not work). Durations use Go's notation (`10s`, `5m`, `1h30m`).
        #[derive(
            Debug,
            Clone,
            Default,
            PartialEq,
            ::clap::Args,
            ::serde::Serialize,
            ::serde::Deserialize,
            ::schemars::JsonSchema,
        )]
        #[serde(deny_unknown_fields, rename_all = "camelCase")]
        #[schemars(
            title = "Cloud controller manager configuration",
            description = "Settings of a cloud controller manager built with ccm-app (--config FILE). Every key is \
                           optional and has the same meaning and default as the command-line flag of the same \
                           name; flags given on the command line override the file."
        )]
        #[non_exhaustive]
        pub struct Settings {
            $(
                $(#[$sattr])*
                pub $sname: Option<$sraw>,
            )*
        }

        /// The effective, resolved settings of a CCM. `Default` gives the Go reference's defaults.
        #[derive(Debug, Clone, PartialEq)]
        #[non_exhaustive]
        pub struct CcmOptions {
            $(
                #[doc = concat!("The resolved [`Settings::", stringify!($oname), "`].")]
                pub $oname: $ores,
            )*
        }

        impl Default for CcmOptions {
            fn default() -> Self {
                CcmOptions {
                    $($oname: $odefault,)*
                }
            }
        }

        impl CcmOptions {
            /// Override every setting that `settings` sets.
            pub fn apply(&mut self, settings: &Settings) {
                $(
                    if let Some(raw) = &settings.$oname {
                        self.$oname = $ofrom(raw);
                    }
                )*
                $(
                    if let Some(raw) = &settings.$fname {
                        $fmerge(self, raw);
                    }
                )*
            }

            /// Every setting, as a complete [`Settings`]: what `/configz` serves, and a valid config file.
            pub fn to_settings(&self) -> Settings {
                Settings {
                    $($oname: Some($oto(&self.$oname)),)*
                    // (a flag-only setting is part of the settings it adds to)
                    $($fname: None,)*
                }
            }
        }

        #[cfg(test)]
        impl Settings {
            /// Every field set, to one of two different values (`n` = 0 or 1) per type.
            pub(crate) fn sample(n: usize) -> Settings {
                use $crate::options::define::samples::Sample;
                Settings {
                    $($sname: Some(<$sraw as Sample>::sample(n)),)*
                }
            }
        }
    };
    // Anything else is a declaration the macro cannot read.
    (@munch [$($s:tt)*] [$($o:tt)*] [$($f:tt)*] $($rest:tt)*) => {
        compile_error!(concat!(
            "settings!: expected `name: Type = default,`, `name: Resolved as Raw = default,` or ",
            "`flag_only name: Raw => merge,` (after the doc comment and attributes) at: ",
            stringify!($($rest)*)
        ));
    };
    ($($declarations:tt)*) => {
        settings!(@munch [] [] [] $($declarations)*);
    };
}

pub(super) use settings;

#[cfg(test)]
pub(crate) mod samples {
    use super::*;

    /// Two different values of a setting's flag/file type, for the round-trip test of every setting.
    pub(crate) trait Sample {
        /// Value `n` (0 or 1).
        fn sample(n: usize) -> Self;
    }
    use crate::options::{
        KubeApiLimit, LogFormat, NodeOwnershipOption, OperationLimit, RouteSyncModeOption,
        ServiceTakeoverOption, parse_operation_limit,
    };
    use ccm_core::budget::OperationBudget;
    use clap::ValueEnum;
    use std::collections::BTreeMap;
    use std::net::IpAddr;
    use std::path::PathBuf;

    macro_rules! sample {
        ($($ty:ty => |$n:ident| $value:expr;)*) => {$(
            impl Sample for $ty {
                fn sample($n: usize) -> Self {
                    $value
                }
            }
        )*};
    }

    sample! {
        String => |n| format!("sample-{n}");
        PathBuf => |n| PathBuf::from(format!("/sample/{n}"));
        bool => |n| n == 0;
        f32 => |n| n as f32 + 0.5;
        f64 => |n| n as f64 + 0.25;
        i32 => |n| 7 + n as i32;
        u8 => |n| 7 + n as u8;
        u16 => |n| 7 + n as u16;
        u32 => |n| 7 + n as u32;
        IpAddr => |n| if n == 0 { "127.0.0.1".parse().unwrap() } else { "::1".parse().unwrap() };
        GoDuration => |n| GoDuration::from(Duration::from_millis(1500 + 1000 * n as u64));
        Vec<String> => |n| (0..=n).map(|i| format!("sample-{i}")).collect();
        LogFormat => |n| LogFormat::value_variants()[n % 2];
        NodeOwnershipOption => |n| NodeOwnershipOption::value_variants()[n % 2];
        RouteSyncModeOption => |n| RouteSyncModeOption::value_variants()[n % 2];
        ServiceTakeoverOption => |n| ServiceTakeoverOption::value_variants()[n % 2];
        KubeApiLimit<f32> => |n| if n == 0 { KubeApiLimit::Auto } else { KubeApiLimit::Value(1.5) };
        KubeApiLimit<i32> => |n| if n == 0 { KubeApiLimit::Value(8) } else { KubeApiLimit::Auto };
        BTreeMap<String, OperationBudget> => |n| BTreeMap::from([(
            ["create", "delete"][n % 2].to_owned(),
            OperationBudget { qps: 1.5 + n as f64, burst: 3 + n as u32 },
        )]);
        // the operation of the map's sample with another limit: the flag replaces the file's entry
        Vec<OperationLimit> => |n| vec![parse_operation_limit(["create=2:4", "delete=1"][n % 2]).unwrap()];
    }
}
