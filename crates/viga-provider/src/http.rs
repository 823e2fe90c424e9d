//! The HTTP client every adapter shares: one reqwest client per provider, retries with
//! backoff, and the classification of failed responses into [`ProviderError`]s that say what
//! to do.

use std::future::Future;
use std::time::{Duration, Instant};

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, LOCATION};
use serde_json::Value;

use crate::ProviderError;
use crate::config::{Secret, Timeouts};
use crate::retry::{MAX_RETRY_AFTER, RetryPolicy};
use crate::sse::StreamContext;
use viga_io::net::error_chain;

/// The largest response body viga reads, a whole answer or a whole stream: far above any
/// real model answer, and a server that sends without end is cut off here.
pub(crate) const MAX_RESPONSE_BYTES: usize = 64 << 20;
/// Of an error response only the start is read: its message is all that is shown.
const MAX_ERROR_BODY_BYTES: usize = 1 << 20;

/// Who we talk to, without the key: what errors name, and what stream tasks carry.
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    pub(crate) provider: &'static str,
    pub(crate) model: String,
    /// Without a trailing slash.
    pub(crate) base_url: String,
    /// Where the key came from, named in authentication errors.
    pub(crate) key_env: String,
}

/// The origin and its key, resolved from the config when the provider is built.
#[derive(Debug)]
pub(crate) struct Endpoint {
    pub(crate) origin: Origin,
    pub(crate) key: Option<Secret>,
}

impl Endpoint {
    /// A header carrying the key, marked sensitive so that the HTTP stack never logs it.
    pub(crate) fn key_header(
        &self,
        name: &'static str,
        prefix: &str,
    ) -> Result<Option<(HeaderName, HeaderValue)>, ProviderError> {
        let Some(key) = &self.key else {
            return Ok(None);
        };
        let mut value =
            HeaderValue::from_str(&format!("{prefix}{}", key.expose())).map_err(|_| {
                ProviderError::Config(format!(
                    "the API key in ${} contains characters that cannot go in an HTTP header; \
                     check for stray quotes or line breaks",
                    self.origin.key_env
                ))
            })?;
        value.set_sensitive(true);
        Ok(Some((HeaderName::from_static(name), value)))
    }
}

/// A successful answer to a non-streaming call.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) body: Vec<u8>,
    pub(crate) request_id: Option<String>,
}

/// A failed attempt: the error, and how long the server asked us to wait before the next.
#[derive(Debug)]
struct Failure {
    error: ProviderError,
    retry_after: Option<Duration>,
}

impl From<ProviderError> for Failure {
    fn from(error: ProviderError) -> Self {
        Self {
            error,
            retry_after: None,
        }
    }
}

#[derive(Debug)]
pub(crate) struct HttpClient {
    client: reqwest::Client,
    origin: Origin,
    timeouts: Timeouts,
    retry: RetryPolicy,
}

impl HttpClient {
    /// `headers` go on every request (authentication, API version).
    pub(crate) fn new(
        origin: Origin,
        headers: HeaderMap,
        timeouts: Timeouts,
        retry: RetryPolicy,
    ) -> Result<Self, ProviderError> {
        viga_io::net::install_crypto_provider();
        let mut builder = reqwest::Client::builder()
            .connect_timeout(timeouts.connect)
            // A redirect would carry the key headers (`x-api-key`, `x-goog-api-key`) to
            // wherever it points; it is reported instead (see `redirected`).
            .redirect(reqwest::redirect::Policy::none())
            .default_headers(headers)
            .user_agent(concat!("viga/", env!("CARGO_PKG_VERSION")));
        // HTTP(S)_PROXY is honoured, except for a server on this machine (Ollama, vLLM, ...),
        // which a proxy elsewhere could not reach.
        if is_loopback(&origin.base_url) {
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(|err| {
            ProviderError::Config(format!(
                "cannot build the HTTP client: {}",
                error_chain(&err)
            ))
        })?;
        Ok(Self {
            client,
            origin,
            timeouts,
            retry,
        })
    }

    pub(crate) fn origin(&self) -> &Origin {
        &self.origin
    }

    /// The context of a stream whose call began at `started`.
    pub(crate) fn stream_context(&self, started: Instant) -> StreamContext {
        StreamContext {
            provider: self.origin.provider,
            idle: self.timeouts.stream_idle,
            total: self.timeouts.stream_total,
            started,
            request_id: None,
            structured_output_fallback: false,
        }
    }

    /// POSTs a JSON body and returns the successful answer, retrying what may succeed later.
    pub(crate) async fn post_json(&self, url: &str, body: &[u8]) -> Result<Reply, ProviderError> {
        self.retrying(|| self.json_attempt(url, body)).await
    }

    /// POSTs a JSON body that asks for an event stream and returns the response once its
    /// headers say it succeeded. Only this part is retried: once events flow, a failure is
    /// the caller's to handle, since the text already shown cannot be taken back.
    pub(crate) async fn post_sse(
        &self,
        url: &str,
        body: &[u8],
    ) -> Result<reqwest::Response, ProviderError> {
        self.retrying(|| self.sse_attempt(url, body)).await
    }

    async fn json_attempt(&self, url: &str, body: &[u8]) -> Result<Reply, Failure> {
        let response = self
            .client
            .post(url)
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_vec())
            .timeout(self.timeouts.request)
            .send()
            .await
            .map_err(|err| self.transport(&err, "the request", self.timeouts.request))?;
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let succeeded = (200..300).contains(&status);
        let limit = if succeeded {
            MAX_RESPONSE_BYTES
        } else {
            MAX_ERROR_BODY_BYTES
        };
        let (body, complete) = read_limited(response, limit)
            .await
            .map_err(|err| self.transport(&err, "reading the response", self.timeouts.request))?;
        if !succeeded {
            return Err(self.classify(status, &headers, &body));
        }
        if !complete {
            return Err(ProviderError::MalformedResponse {
                provider: self.origin.provider.to_owned(),
                message: format!(
                    "the response is larger than {} MiB; viga stopped reading it",
                    MAX_RESPONSE_BYTES >> 20
                ),
            }
            .into());
        }
        Ok(Reply {
            body,
            request_id: request_id(&headers),
        })
    }

    async fn sse_attempt(&self, url: &str, body: &[u8]) -> Result<reqwest::Response, Failure> {
        let idle = self.timeouts.stream_idle;
        let send = self
            .client
            .post(url)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .body(body.to_vec())
            .send();
        let response = tokio::time::timeout(idle, send)
            .await
            .map_err(|_| self.timed_out("waiting for the response to start", idle))?
            .map_err(|err| self.transport(&err, "the request", idle))?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(response);
        }
        let headers = response.headers().clone();
        let (body, _) = tokio::time::timeout(idle, read_limited(response, MAX_ERROR_BODY_BYTES))
            .await
            .map_err(|_| self.timed_out("reading the error response", idle))?
            .map_err(|err| self.transport(&err, "reading the error response", idle))?;
        Err(self.classify(status, &headers, &body))
    }

    async fn retrying<T, F, Fut>(&self, mut attempt: F) -> Result<T, ProviderError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, Failure>>,
    {
        let policy = &self.retry;
        let mut waited = Duration::ZERO;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let failure = match attempt().await {
                Ok(value) => return Ok(value),
                Err(failure) => failure,
            };
            if !failure.error.is_retryable() {
                return Err(failure.error);
            }
            if attempts >= policy.max_attempts {
                return Err(gave_up(failure.error, attempts));
            }
            let wait = policy.delay(attempts, failure.retry_after, rand::random::<f64>());
            if waited
                .checked_add(wait)
                .is_none_or(|total| total > policy.max_total_wait)
            {
                return Err(gave_up(failure.error, attempts));
            }
            tracing::warn!(
                provider = self.origin.provider,
                attempt = attempts,
                wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                error = %failure.error,
                "model call failed; retrying"
            );
            tokio::time::sleep(wait).await;
            waited = waited.saturating_add(wait);
        }
    }

    fn classify(&self, status: u16, headers: &HeaderMap, body: &[u8]) -> Failure {
        if (300..400).contains(&status) {
            return self.redirected(status, headers).into();
        }
        let retry_after = retry_after(headers);
        let mut failure = classify(&self.origin, status, body);
        failure.retry_after = retry_after
            .or(failure.retry_after)
            .map(|after| after.min(MAX_RETRY_AFTER));
        if let ProviderError::RateLimited {
            retry_after: field, ..
        } = &mut failure.error
        {
            *field = failure.retry_after;
        }
        failure
    }

    /// Redirects are not followed: the key headers would go along to wherever they point,
    /// and a model API that moved is a base_url to correct, not a hop to take on every call.
    fn redirected(&self, status: u16, headers: &HeaderMap) -> ProviderError {
        let target = headers
            .get(LOCATION)
            .and_then(|value| value.to_str().ok())
            .map_or_else(|| "(no Location header)".to_owned(), snippet);
        ProviderError::Config(format!(
            "{} answered with a redirect (HTTP {status}) to {target}; viga does not follow \
             redirects for model calls, since the API key would go along: set base_url to \
             the address the API really has",
            self.origin.base_url
        ))
    }

    fn transport(&self, err: &reqwest::Error, what: &str, after: Duration) -> Failure {
        let provider = self.origin.provider.to_owned();
        // A connect timeout is also a timeout; it is reported as the connection failure it is.
        let error = if err.is_connect() {
            ProviderError::Network {
                provider,
                message: format!(
                    "cannot connect to {}: {}",
                    self.origin.base_url,
                    error_chain(err)
                ),
            }
        } else if err.is_timeout() {
            ProviderError::Timeout {
                provider,
                what: what.to_owned(),
                after,
            }
        } else {
            ProviderError::Network {
                provider,
                message: error_chain(err),
            }
        };
        error.into()
    }

    fn timed_out(&self, what: &str, after: Duration) -> Failure {
        ProviderError::Timeout {
            provider: self.origin.provider.to_owned(),
            what: what.to_owned(),
            after,
        }
        .into()
    }
}

/// Whether `url` (a configured base URL, which may not parse) names this machine.
fn is_loopback(url: &str) -> bool {
    reqwest::Url::parse(url).is_ok_and(|url| viga_io::net::is_loopback(&url))
}

/// Adds the attempt count to errors that ended a retry loop.
fn gave_up(error: ProviderError, attempts: u32) -> ProviderError {
    let note = |message: String| {
        let plural = if attempts == 1 { "" } else { "s" };
        format!("{message} (gave up after {attempts} attempt{plural})")
    };
    match error {
        ProviderError::Server {
            provider,
            status,
            message,
        } => ProviderError::Server {
            provider,
            status,
            message: note(message),
        },
        ProviderError::Network { provider, message } => ProviderError::Network {
            provider,
            message: note(message),
        },
        ProviderError::RateLimited {
            provider,
            retry_after,
            message,
        } => ProviderError::RateLimited {
            provider,
            retry_after,
            message: note(message),
        },
        other => other,
    }
}

/// The provider's id for the request: OpenAI sends `x-request-id`, Anthropic `request-id`.
pub(crate) fn request_id(headers: &HeaderMap) -> Option<String> {
    ["x-request-id", "request-id"].iter().find_map(|name| {
        headers
            .get(*name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    })
}

/// Reads at most `limit` bytes of a response's body, chunk by chunk as it arrives; the flag
/// says whether that was all of it. A body that goes on without end costs `limit` bytes.
async fn read_limited(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<(Vec<u8>, bool), reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, false));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, true))
}

/// `retry-after-ms` (OpenAI, fractional milliseconds) or `Retry-After` in seconds. The
/// HTTP-date form is not honoured; backoff applies instead. A wait too long for a Duration
/// is read as the longest one (and bounded by the caller).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let millis = header("retry-after-ms")
        .and_then(|value| value.trim().parse::<f64>().ok())
        .filter(|ms| *ms >= 0.0)
        .map(|ms| Duration::try_from_secs_f64(ms / 1000.0).unwrap_or(Duration::MAX));
    millis.or_else(|| {
        header("retry-after")
            .and_then(|value| value.trim().parse::<u64>().ok())
            .map(Duration::from_secs)
    })
}

/// What an error body says, across the providers' shapes: OpenAI `{"error": {"message",
/// "type", "code"}}`, Anthropic `{"type": "error", "error": {"type", "message"}}`, Gemini
/// `{"error": {"code", "message", "status", "details"}}`, and the looser ones of compatible
/// servers (`{"error": "text"}`, `{"detail": ...}`, `{"message": ...}`, plain text).
#[derive(Debug, Default)]
struct ErrorDetail {
    message: String,
    /// Machine-readable codes: `code`, `type`, `status` and Gemini's `details[].reason`.
    codes: Vec<String>,
    /// Gemini's `RetryInfo.retryDelay`, e.g. `"36s"`.
    retry_delay: Option<Duration>,
}

impl ErrorDetail {
    fn parse(body: &[u8]) -> Self {
        let text = String::from_utf8_lossy(body);
        let Ok(value) = serde_json::from_slice::<Value>(body) else {
            return Self {
                message: snippet(&text),
                ..Self::default()
            };
        };
        let error = value.get("error").unwrap_or(&value);
        let message = match error {
            Value::String(message) => Some(message.clone()),
            _ => ["message", "detail"]
                .iter()
                .find_map(|key| error.get(key).or_else(|| value.get(key)))
                .map(as_text),
        };
        let mut codes: Vec<String> = ["code", "type", "status"]
            .iter()
            .filter_map(|key| error.get(key))
            .filter(|code| !code.is_null())
            .map(as_text)
            .collect();
        let details = error.get("details").and_then(Value::as_array);
        let mut retry_delay = None;
        for detail in details.into_iter().flatten() {
            if let Some(reason) = detail.get("reason").and_then(Value::as_str) {
                codes.push(reason.to_owned());
            }
            if let Some(delay) = detail.get("retryDelay").and_then(Value::as_str) {
                retry_delay = delay
                    .strip_suffix('s')
                    .and_then(|secs| secs.parse::<f64>().ok())
                    .and_then(|secs| Duration::try_from_secs_f64(secs).ok());
            }
        }
        Self {
            message: message.unwrap_or_else(|| snippet(&text)),
            codes,
            retry_delay,
        }
    }

    fn has_code(&self, code: &str) -> bool {
        self.codes.iter().any(|c| c.eq_ignore_ascii_case(code))
    }

    /// The providers' documented context-overflow errors: OpenAI's `context_length_exceeded`,
    /// Anthropic's "prompt is too long", Gemini's "input token count ... exceeds", vLLM's
    /// "maximum context length", llama.cpp's `exceed_context_size_error`.
    fn is_context_overflow(&self) -> bool {
        const PHRASES: &[&str] = &[
            "context_length_exceeded",
            "maximum context length",
            "context length",
            "context window",
            "prompt is too long",
            "input token count",
            "exceed_context_size",
            "exceeds the available context size",
            "too many tokens",
        ];
        let message = self.message.to_lowercase();
        self.has_code("context_length_exceeded")
            || self.has_code("exceed_context_size_error")
            || PHRASES.iter().any(|phrase| message.contains(phrase))
    }

    /// Gemini answers a bad key with 400 `API_KEY_INVALID`, not 401.
    fn is_bad_key(&self) -> bool {
        self.has_code("API_KEY_INVALID") || self.message.contains("API key not valid")
    }
}

fn as_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

fn snippet(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        return "(empty body)".to_owned();
    }
    let mut cut: String = text.chars().take(300).collect();
    if cut.len() < text.len() {
        cut.push_str("...");
    }
    cut
}

/// Turns a failed response into the error that tells the user what to do.
fn classify(origin: &Origin, status: u16, body: &[u8]) -> Failure {
    let detail = ErrorDetail::parse(body);
    let provider = origin.provider.to_owned();
    let message = detail.message.clone();
    let error = match status {
        401 | 403 => ProviderError::Auth {
            provider,
            key_env: origin.key_env.clone(),
            message,
        },
        400 if detail.is_bad_key() => ProviderError::Auth {
            provider,
            key_env: origin.key_env.clone(),
            message,
        },
        // Retrying cannot refill a quota.
        429 if detail.has_code("insufficient_quota") => ProviderError::BadRequest {
            provider,
            status,
            message: format!(
                "{message} (the account's quota is used up: check its plan and billing)"
            ),
        },
        429 => ProviderError::RateLimited {
            provider,
            retry_after: detail.retry_delay,
            message,
        },
        400..=599 if detail.is_context_overflow() => {
            ProviderError::ContextTooLong { provider, message }
        }
        413 => ProviderError::ContextTooLong {
            provider,
            message: format!("the request is too large: {message}"),
        },
        404 => ProviderError::BadRequest {
            provider,
            status,
            message: format!(
                "{message}; check the model name ({}) and base_url ({})",
                origin.model, origin.base_url
            ),
        },
        400..=499 => ProviderError::BadRequest {
            provider,
            status,
            message,
        },
        500..=599 => ProviderError::Server {
            provider,
            status,
            message,
        },
        _ => ProviderError::MalformedResponse {
            provider,
            message: format!("unexpected HTTP status {status}: {message}"),
        },
    };
    Failure {
        error,
        retry_after: detail.retry_delay,
    }
}

/// An error reported inside a stream that had started well (OpenAI's `{"error": ...}` chunk,
/// Anthropic's `error` event, Gemini's error chunk), classified like the HTTP status its type
/// stands for.
pub(crate) fn stream_error(origin: &Origin, error: &Value) -> ProviderError {
    let kind = ["type", "status", "code"]
        .iter()
        .find_map(|key| error.get(key).and_then(Value::as_str))
        .unwrap_or_default();
    let status = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|code| u16::try_from(code).ok())
        .unwrap_or(match kind {
            "invalid_request_error" | "INVALID_ARGUMENT" => 400,
            "authentication_error" | "UNAUTHENTICATED" => 401,
            "permission_error" | "PERMISSION_DENIED" => 403,
            "not_found_error" | "NOT_FOUND" => 404,
            "request_too_large" => 413,
            "rate_limit_error" | "rate_limit_exceeded" | "RESOURCE_EXHAUSTED" => 429,
            "overloaded_error" | "UNAVAILABLE" => 503,
            _ => 500,
        });
    let body = serde_json::json!({ "error": error }).to_string();
    classify(origin, status, body.as_bytes()).error
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> Origin {
        Origin {
            provider: "test",
            model: "m".to_owned(),
            base_url: "http://127.0.0.1:1/v1".to_owned(),
            key_env: "TEST_API_KEY".to_owned(),
        }
    }

    fn kind_of(status: u16, body: &str) -> crate::ErrorKind {
        classify(&origin(), status, body.as_bytes()).error.kind()
    }

    #[test]
    fn statuses_and_documented_error_bodies_map_to_kinds() {
        use crate::ErrorKind::*;
        let cases = [
            (401, r#"{"error":{"message":"Incorrect API key"}}"#, Auth),
            (403, "forbidden", Auth),
            (
                400,
                r#"{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}"#,
                Auth,
            ),
            (
                429,
                r#"{"error":{"message":"slow down","type":"requests"}}"#,
                RateLimit,
            ),
            (
                429,
                r#"{"error":{"message":"You exceeded your current quota","code":"insufficient_quota"}}"#,
                BadRequest,
            ),
            (
                400,
                r#"{"error":{"message":"This model's maximum context length is 128000 tokens.","code":"context_length_exceeded"}}"#,
                ContextTooLong,
            ),
            (
                400,
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}"#,
                ContextTooLong,
            ),
            (
                400,
                r#"{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#,
                ContextTooLong,
            ),
            (
                400,
                r#"{"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}}"#,
                ContextTooLong,
            ),
            (
                413,
                r#"{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}"#,
                ContextTooLong,
            ),
            (
                400,
                r#"{"error":{"message":"Invalid value for 'tool_choice'"}}"#,
                BadRequest,
            ),
            (404, r#"{"error":"model 'llava' not found"}"#, BadRequest),
            (422, r#"{"detail":[{"msg":"field required"}]}"#, BadRequest),
            (500, "<html>oops</html>", Server),
            (
                529,
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
                Server,
            ),
        ];
        for (status, body, kind) in cases {
            assert_eq!(kind_of(status, body), kind, "HTTP {status}: {body}");
        }
    }

    #[test]
    fn messages_carry_the_advice() {
        let auth = classify(&origin(), 401, b"{}").error.to_string();
        assert!(auth.contains("$TEST_API_KEY"), "{auth}");
        let missing = classify(&origin(), 404, br#"{"error":"model 'llava' not found"}"#)
            .error
            .to_string();
        assert!(
            missing.contains("model 'llava' not found") && missing.contains("check the model name"),
            "{missing}"
        );
    }

    #[test]
    fn gemini_retry_info_becomes_retry_after() {
        let body =
            br#"{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED",
            "details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"36s"}]}}"#;
        let failure = classify(&origin(), 429, body);
        assert_eq!(failure.retry_after, Some(Duration::from_secs(36)));
        match failure.error {
            ProviderError::RateLimited { retry_after, .. } => {
                assert_eq!(retry_after, Some(Duration::from_secs(36)))
            }
            other => panic!("expected a rate limit, got {other:?}"),
        }
    }

    #[test]
    fn retry_after_headers_are_read_in_both_forms() {
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_static("3"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(3)));
        headers.insert("retry-after-ms", HeaderValue::from_static("250.5"));
        assert_eq!(retry_after(&headers), Some(Duration::from_micros(250_500)));
        let mut date = HeaderMap::new();
        date.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&date), None);
    }

    #[test]
    fn stream_errors_are_classified_by_type() {
        let overloaded = serde_json::json!({"type": "overloaded_error", "message": "Overloaded"});
        assert_eq!(
            stream_error(&origin(), &overloaded).kind(),
            crate::ErrorKind::Server
        );
        let limited =
            serde_json::json!({"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"});
        assert_eq!(
            stream_error(&origin(), &limited).kind(),
            crate::ErrorKind::RateLimit
        );
    }

    #[test]
    fn only_servers_on_this_machine_bypass_proxies() {
        for local in [
            "http://localhost:11434/v1",
            "http://127.0.0.1:8000",
            "http://[::1]:1234/v1",
        ] {
            assert!(is_loopback(local), "{local}");
        }
        for remote in [
            "https://api.openai.com/v1",
            "http://192.168.1.5:11434",
            "not a url",
        ] {
            assert!(!is_loopback(remote), "{remote}");
        }
    }

    #[test]
    fn the_key_header_is_sensitive_and_the_endpoint_debug_hides_the_key() {
        let endpoint = Endpoint {
            origin: origin(),
            key: Some(Secret::new("sk-very-secret")),
        };
        let (name, value) = endpoint
            .key_header("authorization", "Bearer ")
            .unwrap()
            .unwrap();
        assert_eq!(name, "authorization");
        assert!(value.is_sensitive());
        assert!(!format!("{endpoint:?}").contains("sk-very-secret"));
        assert!(!format!("{value:?}").contains("sk-very-secret"));
    }
}
