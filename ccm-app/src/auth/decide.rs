//! The decisions of the secure port's authentication and authorization, as pure functions: which paths are always
//! allowed, the verb of a request, who a request-header proxy names, how the extension-apiserver-authentication
//! ConfigMap is read, and the Status bodies of a 401 and a 403 (Go's wording).

use std::collections::{BTreeMap, BTreeSet};

use http::HeaderMap;

/// The user name of a request without credentials (Go's `user.Anonymous`).
pub const ANONYMOUS_USER: &str = "system:anonymous";
/// The group of a request without credentials (Go's `user.AllUnauthenticated`).
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
/// The group added to every authenticated user (Go's `user.AllAuthenticated`).
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// The group that is always allowed (Go's `AlwaysAllowGroups` of the controller managers).
pub const MASTERS_GROUP: &str = "system:masters";

/// The namespace of the ConfigMap with the cluster's client and request-header CAs.
pub const AUTHENTICATION_CONFIGMAP_NAMESPACE: &str = "kube-system";
/// The ConfigMap with the cluster's client and request-header CAs, written by the API server.
pub const AUTHENTICATION_CONFIGMAP_NAME: &str = "extension-apiserver-authentication";
/// The Role that may read [`AUTHENTICATION_CONFIGMAP_NAME`] (bootstrapped by the API server).
pub const AUTHENTICATION_READER_ROLE: &str = "extension-apiserver-authentication-reader";

/// Who made a request.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct UserInfo {
    /// The user name.
    pub name: String,
    /// The user's UID, when the authenticator knows it.
    pub uid: String,
    /// The groups.
    pub groups: Vec<String>,
    /// Extra information (request-header `X-Remote-Extra-*`, TokenReview `extra`).
    pub extra: BTreeMap<String, Vec<String>>,
}

impl UserInfo {
    /// The anonymous user: `system:anonymous` in `system:unauthenticated`.
    pub fn anonymous() -> Self {
        UserInfo {
            name: ANONYMOUS_USER.to_owned(),
            groups: vec![UNAUTHENTICATED_GROUP.to_owned()],
            ..UserInfo::default()
        }
    }

    /// `name` in `groups`, plus `system:authenticated` unless already there (Go's `AuthenticatedGroupAdder`).
    pub fn authenticated(name: &str, groups: Vec<String>) -> Self {
        let mut user = UserInfo {
            name: name.to_owned(),
            groups,
            ..UserInfo::default()
        };
        user.add_authenticated_group();
        user
    }

    /// Add `system:authenticated` unless the user is anonymous or already has it.
    pub fn add_authenticated_group(&mut self) {
        if self.name != ANONYMOUS_USER
            && !self
                .groups
                .iter()
                .any(|g| g == AUTHENTICATED_GROUP || g == UNAUTHENTICATED_GROUP)
        {
            self.groups.push(AUTHENTICATED_GROUP.to_owned());
        }
    }
}

/// The paths of `--authorization-always-allow-paths`: exact paths, and prefixes written `/prefix/*`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AlwaysAllowPaths {
    exact: BTreeSet<String>,
    prefixes: Vec<String>,
}

/// Why `--authorization-always-allow-paths` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("only a trailing * is allowed in {path:?}; write an exact path or /prefix/*")]
pub struct BadAllowPath {
    /// The offending path.
    pub path: String,
}

impl AlwaysAllowPaths {
    /// Read the flag's paths as Go does: the leading `/` is optional, a trailing `*` makes a prefix, any other `*`
    /// is an error.
    ///
    /// # Errors
    ///
    /// [`BadAllowPath`] for a `*` that is not the last character.
    pub fn parse(paths: &[String]) -> Result<Self, BadAllowPath> {
        let mut allow = AlwaysAllowPaths::default();
        for path in paths {
            let trimmed = path.strip_prefix('/').unwrap_or(path);
            // Split off the last character, not the last byte: a path may hold any UTF-8.
            let (head, prefix) = match trimmed.strip_suffix('*') {
                Some(head) => (head, true),
                None => (trimmed, false),
            };
            if head.contains('*') {
                return Err(BadAllowPath { path: path.clone() });
            }
            if prefix {
                allow.prefixes.push(head.to_owned());
            } else {
                allow.exact.insert(trimmed.to_owned());
            }
        }
        Ok(allow)
    }

    /// Whether `path` (the request path, without the query) is always allowed.
    pub fn allows(&self, path: &str) -> bool {
        let path = path.strip_prefix('/').unwrap_or(path);
        self.exact.contains(path) || self.prefixes.iter().any(|p| path.starts_with(p.as_str()))
    }
}

/// The verb of a non-resource request: the lower-case HTTP method (`GET` → `get`), as Go's request info.
pub fn verb(method: &http::Method) -> String {
    method.as_str().to_ascii_lowercase()
}

/// Whether `user` is in the always-allowed group `system:masters`.
pub fn is_privileged(user: &UserInfo) -> bool {
    user.groups.iter().any(|g| g == MASTERS_GROUP)
}

/// The request-header (front-proxy) settings in force.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestHeaderNames {
    /// The common names a proxy certificate may have; empty allows any.
    pub allowed_names: Vec<String>,
    /// Headers naming the user, first set wins.
    pub username_headers: Vec<String>,
    /// Headers naming the user's UID, first set wins (Go 1.32+, `--requestheader-uid-headers`; none by default).
    pub uid_headers: Vec<String>,
    /// Headers naming groups.
    pub group_headers: Vec<String>,
    /// Prefixes of headers with extra information.
    pub extra_prefixes: Vec<String>,
}

impl RequestHeaderNames {
    /// Whether a proxy certificate with common name `cn` may name users.
    pub fn allows_proxy(&self, cn: &str) -> bool {
        self.allowed_names.is_empty() || self.allowed_names.iter().any(|n| n == cn)
    }

    /// The user the proxy names in `headers`, or `None` when no username header is set (then the request is not
    /// authenticated by the proxy). Groups are every value of every group header; extra keys are the lower-case,
    /// percent-decoded rest of a prefixed header's name.
    pub fn user(&self, headers: &HeaderMap) -> Option<UserInfo> {
        let first = |names: &[String]| {
            names
                .iter()
                .find_map(|h| header_values(headers, h).into_iter().next())
        };
        let name = first(&self.username_headers)?;
        let groups = self
            .group_headers
            .iter()
            .flat_map(|h| header_values(headers, h))
            .collect();
        let mut user = UserInfo::authenticated(&name, groups);
        user.uid = first(&self.uid_headers).unwrap_or_default();
        for (header, value) in headers {
            let lower = header.as_str();
            for prefix in &self.extra_prefixes {
                let prefix = prefix.to_ascii_lowercase();
                if let Some(key) = lower
                    .strip_prefix(prefix.as_str())
                    .filter(|k| !k.is_empty())
                    && let Ok(value) = value.to_str()
                {
                    user.extra
                        .entry(percent_decode(key))
                        .or_default()
                        .push(value.to_owned());
                }
            }
        }
        Some(user)
    }

    /// Remove every header the proxy authenticator reads, so they do not reach the handlers.
    pub fn strip(&self, headers: &mut HeaderMap) {
        for name in self
            .username_headers
            .iter()
            .chain(&self.uid_headers)
            .chain(&self.group_headers)
        {
            headers.remove(name.trim());
        }
        let prefixes: Vec<String> = self
            .extra_prefixes
            .iter()
            .map(|p| p.to_ascii_lowercase())
            .collect();
        let extra: Vec<http::HeaderName> = headers
            .keys()
            .filter(|h| prefixes.iter().any(|p| h.as_str().starts_with(p.as_str())))
            .cloned()
            .collect();
        for name in extra {
            headers.remove(name);
        }
    }
}

/// The non-empty, trimmed values of header `name`.
fn header_values(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers
        .get_all(name.trim())
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Decode `%XX` escapes (Go's `url.PathUnescape` of extra keys); an invalid escape is kept as written.
fn percent_decode(key: &str) -> String {
    percent_encoding::percent_decode_str(key)
        .decode_utf8_lossy()
        .into_owned()
}

/// The bearer token of an `Authorization` header, if it carries one (Go: `Bearer` then a non-empty token).
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let mut parts = value.trim().splitn(2, ' ');
    let scheme = parts.next()?;
    let token = parts.next()?.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// What the extension-apiserver-authentication ConfigMap says (each part absent when its key is).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterAuthentication {
    /// `client-ca-file`: the PEM bundle of client CAs.
    pub client_ca: Option<String>,
    /// `requestheader-client-ca-file`: the PEM bundle of proxy CAs.
    pub requestheader_ca: Option<String>,
    /// `requestheader-*` names (JSON lists in the ConfigMap).
    pub requestheader: RequestHeaderNames,
}

/// Read the ConfigMap's `data`.
///
/// # Errors
///
/// A message naming the key whose value is not a JSON list of strings.
pub fn parse_cluster_authentication(
    data: &BTreeMap<String, String>,
) -> Result<ClusterAuthentication, String> {
    let list = |key: &str| -> Result<Vec<String>, String> {
        match data.get(key).map(|v| v.trim()).filter(|v| !v.is_empty()) {
            None => Ok(Vec::new()),
            Some(json) => serde_json::from_str(json)
                .map_err(|e| format!("{key} is not a JSON list of strings: {e}")),
        }
    };
    let pem = |key: &str| data.get(key).filter(|v| !v.trim().is_empty()).cloned();
    Ok(ClusterAuthentication {
        client_ca: pem("client-ca-file"),
        requestheader_ca: pem("requestheader-client-ca-file"),
        requestheader: RequestHeaderNames {
            allowed_names: list("requestheader-allowed-names")?,
            username_headers: list("requestheader-username-headers")?,
            uid_headers: list("requestheader-uid-headers")?,
            group_headers: list("requestheader-group-headers")?,
            extra_prefixes: list("requestheader-extra-headers-prefix")?,
        },
    })
}

/// A `metav1.Status` as Go's API machinery writes it (field order included).
#[derive(Debug, serde::Serialize)]
struct Status<'a> {
    kind: &'static str,
    #[serde(rename = "apiVersion")]
    api_version: &'static str,
    metadata: serde_json::Map<String, serde_json::Value>,
    status: &'static str,
    message: &'a str,
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    details: Option<serde_json::Map<String, serde_json::Value>>,
    code: u16,
}

fn status_json(message: &str, reason: &'static str, code: u16, details: bool) -> String {
    let status = Status {
        kind: "Status",
        api_version: "v1",
        metadata: serde_json::Map::new(),
        status: "Failure",
        message,
        reason,
        details: details.then(serde_json::Map::new),
        code,
    };
    // Go's encoder ends the body with a newline.
    format!("{}\n", serde_json::to_string(&status).unwrap_or_default())
}

/// The body of a 401: Go's `Unauthorized` Status.
pub fn unauthorized_body() -> String {
    status_json("Unauthorized", "Unauthorized", 401, false)
}

/// The body of a 403 for a non-resource request: `forbidden: User "<name>" cannot <verb> path "<path>"`, then
/// `: <reason>` when the authorizer gave one, with `&`, `<` and `>` escaped as Go does.
pub fn forbidden_body(user: &str, verb: &str, path: &str, reason: &str) -> String {
    let mut message = format!("User {user:?} cannot {verb} path {path:?}");
    if !reason.is_empty() {
        message = format!("{message}: {reason}");
    }
    status_json(
        &format!("forbidden: {}", escape(&message)),
        "Forbidden",
        403,
        true,
    )
}

/// The plain-text body of a 500 when the authorizer failed, as Go's `InternalError`.
pub fn internal_error_body(request_uri: &str, error: &str) -> String {
    let text = format!("Internal Server Error: {request_uri:?}: {error}");
    format!("{}\n", escape(&text))
}

/// `&`, `<` and `>` escaped, as Go escapes them in these bodies.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_paths_may_end_in_any_character() {
        let allow =
            AlwaysAllowPaths::parse(&["®".to_owned(), "/城Ý*".to_owned()]).expect("valid paths");
        assert!(allow.allows("/®"));
        assert!(allow.allows("/城Ýx"));
        assert!(!allow.allows("/城"));
        assert!(AlwaysAllowPaths::parse(&["/a*Ý".to_owned()]).is_err());
    }

    fn strings(values: &[&str]) -> Vec<String> {
        values.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn always_allow_paths_as_go() {
        let allow = AlwaysAllowPaths::parse(&strings(&["/healthz", "/readyz", "/livez"])).unwrap();
        for path in ["/healthz", "/readyz", "/livez", "healthz"] {
            assert!(allow.allows(path), "{path}");
        }
        for path in ["/healthz/ping", "/metrics", "/", "/healthzz", "/configz"] {
            assert!(!allow.allows(path), "{path}");
        }
        let allow = AlwaysAllowPaths::parse(&strings(&["/healthz/*", "/", "metrics"])).unwrap();
        assert!(allow.allows("/healthz/ping"));
        assert!(allow.allows("/healthz/"));
        assert!(!allow.allows("/healthz"), "the prefix is healthz/");
        assert!(allow.allows("/"));
        assert!(allow.allows("/metrics"));
        assert!(!allow.allows("/configz"));
        let everything = AlwaysAllowPaths::parse(&strings(&["/*"])).unwrap();
        assert!(everything.allows("/anything/at/all"));
        assert!(AlwaysAllowPaths::parse(&[]).unwrap() == AlwaysAllowPaths::default());
        assert!(!AlwaysAllowPaths::default().allows("/healthz"));
        let err = AlwaysAllowPaths::parse(&strings(&["/a/*/b"])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "only a trailing * is allowed in \"/a/*/b\"; write an exact path or /prefix/*"
        );
        assert!(AlwaysAllowPaths::parse(&strings(&["*x"])).is_err());
    }

    #[test]
    fn verbs_are_lower_case_methods() {
        assert_eq!(verb(&http::Method::GET), "get");
        assert_eq!(verb(&http::Method::HEAD), "head");
        assert_eq!(verb(&http::Method::POST), "post");
        assert_eq!(verb(&http::Method::PUT), "put");
        assert_eq!(verb(&http::Method::DELETE), "delete");
    }

    #[test]
    fn users_and_groups() {
        let anonymous = UserInfo::anonymous();
        assert_eq!(anonymous.name, "system:anonymous");
        assert_eq!(anonymous.groups, vec!["system:unauthenticated"]);
        assert!(!is_privileged(&anonymous));
        let alice = UserInfo::authenticated("alice", strings(&["devs"]));
        assert_eq!(alice.groups, vec!["devs", "system:authenticated"]);
        let root =
            UserInfo::authenticated("root", strings(&["system:masters", "system:authenticated"]));
        assert_eq!(root.groups, vec!["system:masters", "system:authenticated"]);
        assert!(is_privileged(&root));
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                http::HeaderValue::from_str(v).unwrap(),
            );
        }
        map
    }

    fn go_defaults() -> RequestHeaderNames {
        RequestHeaderNames {
            allowed_names: strings(&["front-proxy-client"]),
            username_headers: strings(&["X-Remote-User"]),
            uid_headers: strings(&["X-Remote-Uid"]),
            group_headers: strings(&["X-Remote-Group"]),
            extra_prefixes: strings(&["X-Remote-Extra-"]),
        }
    }

    #[test]
    fn request_header_user() {
        let names = go_defaults();
        assert!(names.allows_proxy("front-proxy-client"));
        assert!(!names.allows_proxy("someone-else"));
        assert!(RequestHeaderNames::default().allows_proxy("anyone"));

        let map = headers(&[
            ("x-remote-user", "alice"),
            ("x-remote-group", "devs"),
            ("x-remote-group", " ops "),
            ("x-remote-group", ""),
            ("x-remote-extra-scopes", "a"),
            ("x-remote-extra-scopes", "b"),
            ("x-remote-extra-acme.com%2fproject", "p"),
            ("accept", "*/*"),
        ]);
        let user = names.user(&map).unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.uid, "", "no UID header: no UID");
        let mut with_uid = map.clone();
        with_uid.insert("x-remote-uid", http::HeaderValue::from_static("u-1"));
        assert_eq!(names.user(&with_uid).unwrap().uid, "u-1");
        let mut stripped = with_uid.clone();
        names.strip(&mut stripped);
        assert_eq!(
            stripped.keys().map(|k| k.as_str()).collect::<Vec<_>>(),
            ["accept"],
            "every header the proxy authenticator reads is removed"
        );
        assert_eq!(user.groups, vec!["devs", "ops", "system:authenticated"]);
        assert_eq!(user.extra["scopes"], vec!["a", "b"]);
        assert_eq!(user.extra["acme.com/project"], vec!["p"]);
        assert_eq!(user.extra.len(), 2);

        // no user header (or an empty one): the proxy authenticates nobody
        assert_eq!(names.user(&headers(&[("x-remote-group", "devs")])), None);
        assert_eq!(names.user(&headers(&[("x-remote-user", " ")])), None);

        // the first username header that is set wins
        let two = RequestHeaderNames {
            username_headers: strings(&["x-a", "x-b"]),
            ..RequestHeaderNames::default()
        };
        assert_eq!(two.user(&headers(&[("x-b", "bob")])).unwrap().name, "bob");
        assert_eq!(
            two.user(&headers(&[("x-b", "bob"), ("x-a", "ann")]))
                .unwrap()
                .name,
            "ann"
        );

        let mut map = map;
        names.strip(&mut map);
        assert_eq!(map.len(), 1, "{map:?}");
        assert!(map.contains_key("accept"));
    }

    #[test]
    fn percent_decoding_of_extra_keys() {
        assert_eq!(percent_decode("a%2fb"), "a/b");
        assert_eq!(percent_decode("plain"), "plain");
        assert_eq!(percent_decode("bad%zz"), "bad%zz");
        assert_eq!(percent_decode("end%2"), "end%2");
        assert_eq!(percent_decode("%41"), "A");
    }

    #[test]
    fn bearer_tokens() {
        assert_eq!(
            bearer_token(&headers(&[("authorization", "Bearer abc")])),
            Some("abc")
        );
        assert_eq!(
            bearer_token(&headers(&[("authorization", "bearer  abc ")])),
            Some("abc")
        );
        assert_eq!(
            bearer_token(&headers(&[("authorization", "Bearer ")])),
            None
        );
        assert_eq!(
            bearer_token(&headers(&[("authorization", "Basic abc")])),
            None
        );
        assert_eq!(bearer_token(&headers(&[])), None);
    }

    #[test]
    fn the_configmap() {
        let data: BTreeMap<String, String> = [
            ("client-ca-file", "PEM1"),
            ("requestheader-client-ca-file", "PEM2"),
            ("requestheader-allowed-names", "[\"front-proxy-client\"]"),
            ("requestheader-username-headers", "[\"X-Remote-User\"]"),
            ("requestheader-uid-headers", "[\"X-Remote-Uid\"]"),
            ("requestheader-group-headers", "[\"X-Remote-Group\"]"),
            (
                "requestheader-extra-headers-prefix",
                "[\"X-Remote-Extra-\"]",
            ),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into();
        let parsed = parse_cluster_authentication(&data).unwrap();
        assert_eq!(parsed.client_ca.as_deref(), Some("PEM1"));
        assert_eq!(parsed.requestheader_ca.as_deref(), Some("PEM2"));
        assert_eq!(parsed.requestheader, go_defaults());

        let only_client =
            parse_cluster_authentication(&[("client-ca-file".to_owned(), "PEM".to_owned())].into())
                .unwrap();
        assert_eq!(only_client.requestheader_ca, None);
        assert_eq!(only_client.requestheader, RequestHeaderNames::default());

        let bad = parse_cluster_authentication(
            &[(
                "requestheader-allowed-names".to_owned(),
                "front-proxy".to_owned(),
            )]
            .into(),
        )
        .unwrap_err();
        assert!(
            bad.starts_with("requestheader-allowed-names is not a JSON list of strings"),
            "{bad}"
        );
    }

    #[test]
    fn go_status_bodies() {
        assert_eq!(
            unauthorized_body(),
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\
             \"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}\n"
        );
        assert_eq!(
            forbidden_body("system:anonymous", "get", "/metrics", ""),
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\
             \"message\":\"forbidden: User \\\"system:anonymous\\\" cannot get path \\\"/metrics\\\"\",\
             \"reason\":\"Forbidden\",\"details\":{},\"code\":403}\n"
        );
        let with_reason = forbidden_body("a<b>", "get", "/configz", "no RBAC policy & more");
        let parsed: serde_json::Value = serde_json::from_str(&with_reason).unwrap();
        assert_eq!(
            parsed["message"],
            "forbidden: User \"a&lt;b&gt;\" cannot get path \"/configz\": no RBAC policy &amp; more"
        );
        assert_eq!(
            internal_error_body("/metrics?x=1", "the SubjectAccessReview failed: <timeout>"),
            "Internal Server Error: \"/metrics?x=1\": the SubjectAccessReview failed: &lt;timeout&gt;\n"
        );
    }
}
