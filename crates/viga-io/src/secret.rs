//! An API key or token. `Debug` shows `Secret(<redacted>)`, so a key cannot leak through a
//! logged struct; the value is reachable only through [`Secret::expose`].

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The key itself, for the one place that puts it in a request header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use super::Secret;

    #[test]
    fn a_secret_never_prints() {
        let key = Secret::new("sk-live-123");
        assert_eq!(format!("{key:?}"), "Secret(<redacted>)");
        assert_eq!(key.expose(), "sk-live-123");
    }
}
