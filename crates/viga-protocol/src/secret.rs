//! The one type of a token on viga's wires (the bridge's handshake, a Blender's connection
//! file, the server's hellos): it never prints, and it is compared in constant time.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

// No `Display`, and a `Debug` that hides the value: a token in a logged message or error
// shows as `Secret(<redacted>)`. The value is reached only through `expose`.
/// A secret that never shows in Debug output or logs.
#[derive(Clone, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The token itself, for the one place that sends or digests it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// In constant time for tokens of one length: how long two tokens agree tells nothing. A
/// length differs only between a token and a guess of another length, which says nothing of
/// the token's bytes.
impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        let (ours, theirs) = (self.0.as_bytes(), other.0.as_bytes());
        ours.len() == theirs.len()
            && ours
                .iter()
                .zip(theirs)
                .fold(0u8, |differ, (a, b)| differ | (a ^ b))
                == 0
    }
}

#[cfg(test)]
mod tests {
    use super::Secret;

    #[test]
    fn a_secret_never_prints_and_travels_as_a_plain_string() {
        let token = Secret::new("tok-live-123");
        assert_eq!(format!("{token:?}"), "Secret(<redacted>)");
        assert_eq!(format!("{:?}", Some(&token)), "Some(Secret(<redacted>))");
        assert_eq!(serde_json::to_string(&token).unwrap(), r#""tok-live-123""#);
        let read: Secret = serde_json::from_str(r#""tok-live-123""#).unwrap();
        assert_eq!(read, token);
        assert_ne!(read, Secret::new("tok-live-124"));
        assert_ne!(read, Secret::new("tok-live-12"));
        assert_eq!(token.expose(), "tok-live-123");
    }
}
