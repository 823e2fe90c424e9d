//! Who may use the gateway. Every user has a token of their own, so a client cannot speak
//! for another user by naming them: the hello's user must be the user the token belongs to.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;
use viga_protocol::Secret;

/// `user: token` pairs, one per line or separated by commas (the users file's line format).
pub const USERS_ENV: &str = "VIGA_GATEWAY_USERS";
/// The single-user shortcut: the token of the user running the gateway (named by `$USER`).
pub const GATEWAY_TOKEN_ENV: &str = "VIGA_GATEWAY_TOKEN";
/// The shortest token the gateway accepts: anything shorter is guessable.
pub const MIN_TOKEN_CHARS: usize = 16;
/// User names become folder and log names, so they are short and plain.
const MAX_USER_NAME_CHARS: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("cannot read the users file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the users file {path} holds tokens but other users may read or change it (mode {mode:o}); make it yours alone with `chmod 600`"
    )]
    NotPrivate { path: PathBuf, mode: u32 },
    #[error("{origin}: {problem}")]
    Invalid { origin: String, problem: String },
    #[error(
        "the gateway needs its users: --users FILE (`user: token` lines or a JSON object), {USERS_ENV}, or {GATEWAY_TOKEN_ENV} for yourself alone"
    )]
    Missing,
    #[error("give the gateway's users one way only, but {given} are set")]
    Ambiguous { given: String },
}

/// A user name as the gateway accepts it: it names the user's folder under the files root
/// and their Blender in logs, so it is 1 to 64 of `A-Z a-z 0-9 _ - . @`, not starting with
/// `.` or `-` (no hidden folder, no `..`, nothing a shell or a path would read specially).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UserName(String);

impl UserName {
    pub fn parse(name: &str) -> Result<Self, String> {
        let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '@');
        let count = name.chars().count();
        if count == 0 || count > MAX_USER_NAME_CHARS {
            return Err(format!(
                "a user name has 1 to {MAX_USER_NAME_CHARS} characters, not {count}"
            ));
        }
        if !name.chars().all(plain) || name.starts_with(['.', '-']) {
            return Err(format!(
                "user name {name:?} may only hold A-Z a-z 0-9 _ - . @ and may not start with . or -"
            ));
        }
        Ok(Self(name.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for UserName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A token is kept only as its SHA-256 digest: comparing fixed-length digests in constant
/// time says nothing about a token's length or its first differing character.
type TokenDigest = [u8; 32];

fn digest(token: &str) -> TokenDigest {
    Sha256::digest(token.as_bytes()).into()
}

/// The gateway's users and their tokens.
#[derive(Clone)]
pub struct Credentials {
    users: HashMap<UserName, TokenDigest>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&str> = self.users.keys().map(UserName::as_str).collect();
        names.sort_unstable();
        f.debug_struct("Credentials")
            .field("users", &names)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// Users and their tokens; `origin` names where they came from in error messages.
    /// Refuses bad names, short or shared tokens and a user listed twice.
    pub fn from_pairs<I, U, T>(pairs: I, origin: &str) -> Result<Self, CredentialsError>
    where
        I: IntoIterator<Item = (U, T)>,
        U: AsRef<str>,
        T: AsRef<str>,
    {
        let invalid = |problem: String| CredentialsError::Invalid {
            origin: origin.to_owned(),
            problem,
        };
        let mut users = HashMap::new();
        let mut owners: HashMap<TokenDigest, UserName> = HashMap::new();
        for (user, token) in pairs {
            let user = UserName::parse(user.as_ref().trim()).map_err(invalid)?;
            let token = token.as_ref();
            if token.chars().count() < MIN_TOKEN_CHARS {
                return Err(invalid(format!(
                    "the token of {user} is shorter than {MIN_TOKEN_CHARS} characters; anything shorter is guessable"
                )));
            }
            let digest = digest(token);
            if let Some(owner) = owners.insert(digest, user.clone()) {
                return Err(invalid(format!(
                    "{owner} and {user} have the same token; a token must name one user"
                )));
            }
            if users.insert(user.clone(), digest).is_some() {
                return Err(invalid(format!("{user} is listed twice")));
            }
        }
        if users.is_empty() {
            return Err(invalid("names no user".to_owned()));
        }
        Ok(Self { users })
    }

    /// A JSON object of user names to tokens, or `user: token` pairs, one per line or
    /// separated by commas (blank lines and lines starting with `#` are skipped).
    pub fn parse(text: &str, origin: &str) -> Result<Self, CredentialsError> {
        if text.trim_start().starts_with('{') {
            return Self::parse_json(text, origin);
        }
        let mut pairs = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            for entry in line.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                let Some((user, token)) = entry.split_once(':') else {
                    return Err(CredentialsError::Invalid {
                        origin: origin.to_owned(),
                        problem: format!("line {}: expected `user: token`", index + 1),
                    });
                };
                pairs.push((user.trim().to_owned(), token.trim().to_owned()));
            }
        }
        Self::from_pairs(pairs, origin)
    }

    fn parse_json(text: &str, origin: &str) -> Result<Self, CredentialsError> {
        let invalid = |problem: String| CredentialsError::Invalid {
            origin: origin.to_owned(),
            problem,
        };
        // Never quote serde's message: it may hold a piece of a token.
        let value: Value = serde_json::from_str(text).map_err(|err| {
            invalid(format!(
                "not valid JSON (line {}, column {})",
                err.line(),
                err.column()
            ))
        })?;
        let Value::Object(map) = value else {
            return Err(invalid(
                "expected a JSON object of user names to tokens".to_owned(),
            ));
        };
        let mut pairs = Vec::with_capacity(map.len());
        for (user, token) in map {
            let Value::String(token) = token else {
                return Err(invalid(format!("the token of {user:?} is not a string")));
            };
            pairs.push((user, token));
        }
        Self::from_pairs(pairs, origin)
    }

    /// Reads a users file, refusing one that other users may read or change.
    pub fn load_file(path: &Path) -> Result<Self, CredentialsError> {
        let read_error = |source| CredentialsError::Read {
            path: path.to_owned(),
            source,
        };
        let metadata = std::fs::metadata(path).map_err(read_error)?;
        refuse_shared_file(path, &metadata)?;
        let text = std::fs::read_to_string(path).map_err(read_error)?;
        Self::parse(&text, &path.display().to_string())
    }

    /// The users from exactly one of: `users_file` (`--users`), [`USERS_ENV`], or
    /// [`GATEWAY_TOKEN_ENV`] (one user: the login name in `$USER`).
    pub fn from_environment(users_file: Option<&Path>) -> Result<Self, CredentialsError> {
        let set = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let users_env = set(USERS_ENV);
        let token_env = set(GATEWAY_TOKEN_ENV);
        let given: Vec<&str> = [
            users_file.map(|_| "--users"),
            users_env.as_ref().map(|_| USERS_ENV),
            token_env.as_ref().map(|_| GATEWAY_TOKEN_ENV),
        ]
        .into_iter()
        .flatten()
        .collect();
        if given.len() > 1 {
            return Err(CredentialsError::Ambiguous {
                given: given.join(" and "),
            });
        }
        if let Some(path) = users_file {
            return Self::load_file(path);
        }
        if let Some(text) = users_env {
            return Self::parse(&text, USERS_ENV);
        }
        let Some(token) = token_env else {
            return Err(CredentialsError::Missing);
        };
        let login = set("USER").ok_or_else(|| CredentialsError::Invalid {
            origin: GATEWAY_TOKEN_ENV.to_owned(),
            problem: format!(
                "its user is your login name, but $USER is not set; use {USERS_ENV} instead"
            ),
        })?;
        Self::from_pairs([(login, token)], GATEWAY_TOKEN_ENV)
    }

    /// The user `user` if `token` is theirs. Digests are compared, in constant time, so
    /// neither how much of a token is right nor its length shows in the time taken; an
    /// unknown user costs the same comparison as a known one, against a digest no token has.
    pub fn authenticate(&self, user: &str, token: &Secret) -> Option<UserName> {
        let presented = digest(token.expose());
        let (known, expected) = match UserName::parse(user) {
            Ok(name) => match self.users.get_key_value(&name) {
                Some((name, expected)) => (Some(name), *expected),
                None => (None, [0; 32]),
            },
            Err(_) => (None, [0; 32]),
        };
        let matches = bool::from(presented.ct_eq(&expected));
        known.filter(|_| matches).cloned()
    }

    /// The user names, sorted (for logs).
    pub fn user_names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.users.keys().map(UserName::as_str).collect();
        names.sort_unstable();
        names
    }
}

fn refuse_shared_file(path: &Path, metadata: &std::fs::Metadata) -> Result<(), CredentialsError> {
    match shared_mode(metadata) {
        Some(mode) => Err(CredentialsError::NotPrivate {
            path: path.to_owned(),
            mode,
        }),
        None => Ok(()),
    }
}

/// The file's permission bits when users other than its owner may use it (a secret file
/// must be its owner's alone), else `None`.
#[cfg(unix)]
pub(crate) fn shared_mode(metadata: &std::fs::Metadata) -> Option<u32> {
    use std::os::unix::fs::MetadataExt as _;
    let mode = metadata.mode() & 0o777;
    (mode & 0o077 != 0).then_some(mode)
}

#[cfg(not(unix))]
pub(crate) fn shared_mode(_metadata: &std::fs::Metadata) -> Option<u32> {
    // Elsewhere a file's readers are set by ACLs, which this check cannot read.
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const ALICE: &str = "alice-token-0123456789";
    const BOB: &str = "bob-token-0123456789ab";

    #[test]
    fn a_token_admits_its_own_user_only() {
        let credentials =
            Credentials::parse(&format!("alice: {ALICE}\n# a comment\n\nbob:{BOB}"), "test")
                .unwrap();
        assert_eq!(
            credentials
                .authenticate("alice", &Secret::new(ALICE))
                .unwrap()
                .as_str(),
            "alice"
        );
        assert_eq!(
            credentials
                .authenticate("bob", &Secret::new(BOB))
                .unwrap()
                .as_str(),
            "bob"
        );
        assert!(
            credentials
                .authenticate("alice", &Secret::new(BOB))
                .is_none()
        );
        assert!(
            credentials
                .authenticate("carol", &Secret::new(ALICE))
                .is_none()
        );
        assert!(
            credentials
                .authenticate("../alice", &Secret::new(ALICE))
                .is_none()
        );
        assert!(
            credentials
                .authenticate("alice", &Secret::new(&ALICE[..10]))
                .is_none()
        );
    }

    #[test]
    fn json_and_comma_separated_forms_read_the_same() {
        let json =
            Credentials::parse(&format!(r#"{{"alice": "{ALICE}", "bob": "{BOB}"}}"#), "t").unwrap();
        let commas = Credentials::parse(&format!("alice:{ALICE}, bob:{BOB}"), "t").unwrap();
        assert_eq!(json.user_names(), ["alice", "bob"]);
        assert_eq!(commas.user_names(), ["alice", "bob"]);
    }

    #[test]
    fn weak_or_ambiguous_lists_are_refused_without_quoting_tokens() {
        let refused = |text: &str| Credentials::parse(text, "t").unwrap_err().to_string();
        assert!(refused("alice: short").contains("shorter than 16"));
        assert!(refused(&format!("alice: {ALICE}\nbob: {ALICE}")).contains("same token"));
        assert!(refused(&format!("alice: {ALICE}\nalice: {BOB}")).contains("listed twice"));
        assert!(refused(&format!("../x: {ALICE}")).contains("may not start with"));
        assert!(refused(&format!("a/b: {ALICE}")).contains("may only hold"));
        assert!(refused("alice").contains("line 1: expected `user: token`"));
        assert!(refused("# nobody").contains("names no user"));
        let broken = refused(&format!(r#"{{"alice": "{ALICE}""#));
        assert!(
            broken.contains("not valid JSON") && !broken.contains(ALICE),
            "{broken}"
        );
    }

    #[test]
    #[cfg(unix)]
    fn a_users_file_others_may_read_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let folder = tempfile::tempdir().unwrap();
        let path = folder.path().join("users");
        std::fs::write(&path, format!("alice: {ALICE}")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let refused = Credentials::load_file(&path).unwrap_err().to_string();
        assert!(
            refused.contains("chmod 600") && refused.contains("640"),
            "{refused}"
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            Credentials::load_file(&path).unwrap().user_names(),
            ["alice"]
        );
    }
}
