use std::time::Duration;

/// Coarse classes of provider failure, for retry decisions and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    Auth,
    RateLimit,
    BadRequest,
    ContextTooLong,
    Server,
    Network,
    Timeout,
    MalformedResponse,
    Config,
    Script,
}

/// Why a model call failed, with what the user can do about it.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProviderError {
    #[error("{provider}: authentication failed ({message}); check the API key in ${key_env}")]
    Auth {
        provider: String,
        key_env: String,
        message: String,
    },
    #[error("{provider}: rate limited ({message}){}; wait, lower concurrency, or raise your quota", retry_hint(.retry_after))]
    RateLimited {
        provider: String,
        retry_after: Option<Duration>,
        message: String,
    },
    #[error("{provider}: the request was rejected (HTTP {status}): {message}")]
    BadRequest {
        provider: String,
        status: u16,
        message: String,
    },
    #[error(
        "{provider}: the prompt is too long for the model ({message}); lower the memory window (--memory) or the image size"
    )]
    ContextTooLong { provider: String, message: String },
    #[error(
        "{provider}: server error (HTTP {status}): {message}; retried until the retry budget ran out"
    )]
    Server {
        provider: String,
        status: u16,
        message: String,
    },
    #[error("{provider}: network error: {message}; check the endpoint URL and your connection")]
    Network { provider: String, message: String },
    #[error(
        "{provider}: {what} timed out after {after:?}; try again, or raise the timeouts in the provider config if the model is this slow"
    )]
    Timeout {
        provider: String,
        what: String,
        after: Duration,
    },
    /// The request could not be turned into the provider's wire format (an image that does
    /// not decode, a tool result that answers no call); sending it again will not help.
    #[error("{provider}: the request cannot be sent: {message}")]
    InvalidRequest { provider: String, message: String },
    #[error("{provider}: malformed response: {message}")]
    MalformedResponse { provider: String, message: String },
    #[error("provider configuration: {0}")]
    Config(String),
    #[error("scripted provider: {0}")]
    Script(String),
}

fn retry_hint(retry_after: &Option<Duration>) -> String {
    retry_after
        .map(|after| format!(", retry after {after:?}"))
        .unwrap_or_default()
}

impl ProviderError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Auth { .. } => ErrorKind::Auth,
            Self::RateLimited { .. } => ErrorKind::RateLimit,
            Self::BadRequest { .. } | Self::InvalidRequest { .. } => ErrorKind::BadRequest,
            Self::ContextTooLong { .. } => ErrorKind::ContextTooLong,
            Self::Server { .. } => ErrorKind::Server,
            Self::Network { .. } => ErrorKind::Network,
            Self::Timeout { .. } => ErrorKind::Timeout,
            Self::MalformedResponse { .. } => ErrorKind::MalformedResponse,
            Self::Config(_) => ErrorKind::Config,
            Self::Script(_) => ErrorKind::Script,
        }
    }

    /// Whether trying the same request again may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.kind(),
            ErrorKind::RateLimit | ErrorKind::Server | ErrorKind::Network | ErrorKind::Timeout
        )
    }
}
