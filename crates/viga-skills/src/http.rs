//! Bounded HTTP for the services viga fetches things from on the model's behalf: Poly Haven
//! ([`crate::polyhaven`]), Meshy ([`crate::meshy`]) and a scene reconstruction service
//! ([`crate::reconstruct`]). What they answer is untrusted, so every client here is bounded
//! and checked the same way:
//!
//! - **Hosts.** A URL is fetched only on the service's own origin or, over HTTPS, on a host
//!   of its allowlist (where its downloads live); URLs with a user name or password never.
//! - **Redirects** are followed only to those same places, at most five; anything else is an
//!   error that names where it pointed.
//! - **Bodies** are read up to a limit and written to files as they arrive, never held whole
//!   when they go to disk; a body past its limit is stopped, not truncated silently.
//! - **Time.** Every call has a deadline, and a response silent for the idle limit is given up.
//! - **Keys.** A service's key header goes only to its own origin, marked sensitive.
//!
//! Every failure is a [`FetchError`] whose words say which service, what was asked, what went
//! wrong and what to do.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use reqwest::header::{HeaderValue, LOCATION};
use tokio::io::AsyncWriteExt as _;
use viga_io::net::error_chain;

use crate::registry::ToolError;

/// A failed call, in words for the model or the user.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct FetchError {
    pub message: String,
    /// The HTTP status the service refused with, when it answered one.
    pub status: Option<u16>,
}

impl FetchError {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            status: None,
        }
    }
}

impl From<FetchError> for ToolError {
    fn from(err: FetchError) -> Self {
        ToolError::Recoverable(err.message)
    }
}

/// What a service's failures advise beyond the generic words: said after "with HTTP 401: ".
pub type StatusAdvice = Arc<dyn Fn(u16) -> Option<String> + Send + Sync>;

/// How to reach one service.
#[derive(Clone)]
pub struct ServiceSpec {
    /// The service's name in messages ("Poly Haven", "Meshy").
    pub name: String,
    /// The service's base URL: its origin is always allowed.
    pub origin: Url,
    /// Further hosts URLs may point at, over HTTPS only (download hosts).
    pub hosts: Vec<String>,
    pub connect_timeout: Duration,
    /// How long a response may send nothing before it is given up.
    pub idle_timeout: Duration,
    /// Said when the service cannot be reached, after the cause.
    pub unreachable_hint: String,
    /// Said after a timeout or another transport failure.
    pub retry_hint: String,
    /// Advice for statuses the generic words do not cover well (401, 402, ...).
    pub status_advice: Option<StatusAdvice>,
    /// Whether an error body's `message` (JSON) is quoted in the error: for services whose
    /// refusals explain themselves.
    pub quote_error_message: bool,
    /// Sent with every request to the service's own origin (a key: marked sensitive).
    pub origin_authorization: Option<HeaderValue>,
}

impl std::fmt::Debug for ServiceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceSpec")
            .field("name", &self.name)
            .field("origin", &self.origin.as_str())
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl ServiceSpec {
    /// A service at `origin` with no further hosts, advice or key.
    pub fn new(name: impl Into<String>, origin: Url) -> Self {
        Self {
            name: name.into(),
            origin,
            hosts: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            unreachable_hint: "Check the network connection (and HTTPS_PROXY)".to_owned(),
            retry_hint: "try again later".to_owned(),
            status_advice: None,
            quote_error_message: false,
            origin_authorization: None,
        }
    }
}

/// A request body.
#[derive(Debug, Clone)]
pub struct Body {
    pub content_type: &'static str,
    pub bytes: Vec<u8>,
}

impl Body {
    pub fn json(value: &serde_json::Value) -> Self {
        Self {
            content_type: "application/json",
            bytes: value.to_string().into_bytes(),
        }
    }
}

/// The largest error body read for its message.
const MAX_ERROR_BODY: u64 = 16 << 10;
/// The longest server message quoted in an error.
const MAX_QUOTED_MESSAGE: usize = 300;

/// One service's HTTP client.
pub struct ServiceClient {
    spec: ServiceSpec,
    client: reqwest::Client,
}

impl std::fmt::Debug for ServiceClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceClient")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

impl ServiceClient {
    /// The client for `spec`; `Err` says why it cannot be built.
    pub fn new(spec: ServiceSpec) -> Result<Self, String> {
        viga_io::net::install_crypto_provider();
        let redirect_origin = spec.origin.clone();
        let redirect_hosts = spec.hosts.clone();
        let name = spec.name.clone();
        let policy = reqwest::redirect::Policy::custom(move |attempt| {
            if attempt.previous().len() >= 5 {
                attempt.error("more than 5 redirects")
            } else if url_allowed(attempt.url(), &redirect_origin, &redirect_hosts) {
                attempt.follow()
            } else {
                let target = attempt.url().to_string();
                attempt.error(format!(
                    "a redirect to {target} is not followed: it leaves {name}'s hosts"
                ))
            }
        });
        let mut builder = reqwest::Client::builder()
            .connect_timeout(spec.connect_timeout)
            .read_timeout(spec.idle_timeout)
            .redirect(policy)
            .user_agent(concat!("viga/", env!("CARGO_PKG_VERSION")));
        if viga_io::net::is_loopback(&spec.origin) {
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(|err| {
            format!(
                "the HTTP client for {} cannot be built: {}",
                spec.name,
                error_chain(&err)
            )
        })?;
        Ok(Self { spec, client })
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }

    pub fn origin(&self) -> &Url {
        &self.spec.origin
    }

    /// Whether `url` may be fetched: the service's origin, or an allowed host over HTTPS.
    pub fn allowed(&self, url: &Url) -> bool {
        url_allowed(url, &self.spec.origin, &self.spec.hosts)
    }

    /// A successful response to `method url`, or the error that says what went wrong.
    pub async fn send(
        &self,
        method: reqwest::Method,
        url: &Url,
        body: Option<Body>,
        timeout: Duration,
        what: &str,
    ) -> Result<reqwest::Response, FetchError> {
        let mut request = self.client.request(method, url.clone()).timeout(timeout);
        if let Some(authorization) = &self.spec.origin_authorization
            && same_origin(url, &self.spec.origin)
        {
            request = request.header(reqwest::header::AUTHORIZATION, authorization.clone());
        }
        if let Some(body) = body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, body.content_type)
                .body(body.bytes);
        }
        let response = request
            .send()
            .await
            .map_err(|err| self.transport(url, &err, what, timeout))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let code = status.as_u16();
        let location = response
            .headers()
            .get(LOCATION)
            .and_then(|value| value.to_str().ok())
            .unwrap_or("(no Location header)")
            .to_owned();
        let quoted = if self.spec.quote_error_message {
            server_message(response, MAX_ERROR_BODY).await
        } else {
            None
        };
        let name = &self.spec.name;
        let advice = self
            .spec
            .status_advice
            .as_ref()
            .and_then(|advice| advice(code))
            .unwrap_or_else(|| match code {
                300..=399 => format!("it redirects to {location}, which viga does not follow"),
                404 => format!("{name} does not have it (any more)"),
                429 => format!("{name} asks viga to slow down; try again in a minute"),
                500..=599 => format!("{name} has a problem of its own; try again later"),
                _ => "viga does not know what to make of that".to_owned(),
            });
        let quoted = quoted
            .map(|message| format!(" ({name} says: {message:?})"))
            .unwrap_or_default();
        Err(FetchError {
            message: format!("{name} answered {what} ({url}) with HTTP {status}{quoted}: {advice}"),
            status: Some(code),
        })
    }

    /// At most `limit` bytes of the body of `method url`.
    pub async fn fetch_bytes(
        &self,
        method: reqwest::Method,
        url: &Url,
        body: Option<Body>,
        limit: u64,
        timeout: Duration,
        what: &str,
    ) -> Result<Vec<u8>, FetchError> {
        let mut response = self.send(method, url, body, timeout, what).await?;
        let mut read = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|err| self.transport(url, &err, what, timeout))?
        {
            if (read.len() + chunk.len()) as u64 > limit {
                return Err(FetchError::new(format!(
                    "{}'s answer to {what} ({url}) is larger than the {} viga reads; viga stopped reading it",
                    self.spec.name,
                    bytes_text(limit)
                )));
            }
            read.extend_from_slice(&chunk);
        }
        Ok(read)
    }

    /// At most `limit` bytes of GET `url`'s body.
    pub async fn get_bytes(
        &self,
        url: &Url,
        limit: u64,
        timeout: Duration,
        what: &str,
    ) -> Result<Vec<u8>, FetchError> {
        self.fetch_bytes(reqwest::Method::GET, url, None, limit, timeout, what)
            .await
    }

    /// Streams GET `url` into a new file at `path`, at most `limit` bytes; returns how many
    /// were written. A body past the limit stops the download with an error (the caller
    /// removes what was written).
    pub async fn download(
        &self,
        url: &Url,
        path: &Path,
        limit: u64,
        timeout: Duration,
        what: &str,
    ) -> Result<u64, FetchError> {
        let mut response = self
            .send(reqwest::Method::GET, url, None, timeout, what)
            .await?;
        let mut file = tokio::fs::File::create(path)
            .await
            .map_err(|err| self.write_error(path, &err))?;
        let mut written = 0u64;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|err| self.transport(url, &err, what, timeout))?
        {
            written += chunk.len() as u64;
            if written > limit {
                return Err(FetchError::new(format!(
                    "{} {url} is larger than the {} viga accepts; viga stopped it",
                    self.download_noun(),
                    bytes_text(limit)
                )));
            }
            file.write_all(&chunk)
                .await
                .map_err(|err| self.write_error(path, &err))?;
        }
        file.sync_all()
            .await
            .map_err(|err| self.write_error(path, &err))?;
        Ok(written)
    }

    fn write_error(&self, path: &Path, err: &std::io::Error) -> FetchError {
        FetchError::new(format!(
            "{} cannot be written to {}: {err}",
            self.download_noun(),
            path.display()
        ))
    }

    /// "the Poly Haven download", or "the reconstruction service's download" for a name that
    /// is a noun phrase of its own.
    fn download_noun(&self) -> String {
        let name = &self.spec.name;
        if name.starts_with("the ") {
            format!("{name}'s download")
        } else {
            format!("the {name} download")
        }
    }

    fn transport(
        &self,
        url: &Url,
        err: &reqwest::Error,
        what: &str,
        after: Duration,
    ) -> FetchError {
        let name = &self.spec.name;
        let retry = &self.spec.retry_hint;
        FetchError::new(if err.is_connect() {
            format!(
                "{name} cannot be reached at {}: {}. {}",
                origin(url),
                error_chain(err),
                self.spec.unreachable_hint
            )
        } else if err.is_redirect() {
            format!(
                "{name}'s answer to {what} was refused: {}",
                error_chain(err)
            )
        } else if err.is_timeout() {
            format!(
                "{name} did not finish {what} ({url}) within {after:?} (or went silent for {:?}); {retry}",
                self.spec.idle_timeout
            )
        } else {
            format!(
                "{what} from {name} ({url}) failed: {}; {retry}",
                error_chain(err)
            )
        })
    }
}

/// The `message` of a JSON error body (`{"message": "..."}`), cut short and without control
/// characters, when there is one.
async fn server_message(mut response: reqwest::Response, limit: u64) -> Option<String> {
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        if (body.len() + chunk.len()) as u64 > limit {
            return None;
        }
        body.extend_from_slice(&chunk);
    }
    let value: serde_json::Value = serde_json::from_slice(&body).ok()?;
    let message = value.get("message")?.as_str()?;
    let clean: String = message
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_QUOTED_MESSAGE)
        .collect();
    (!clean.trim().is_empty()).then_some(clean)
}

/// Whether `url` may be fetched for a service at `origin` whose other hosts are `hosts`.
pub fn url_allowed(url: &Url, origin: &Url, hosts: &[String]) -> bool {
    if !url.username().is_empty() || url.password().is_some() {
        return false;
    }
    same_origin(url, origin)
        || (url.scheme() == "https"
            && url.host_str().is_some_and(|host| {
                hosts
                    .iter()
                    .any(|allowed| allowed.eq_ignore_ascii_case(host))
            }))
}

fn same_origin(url: &Url, origin: &Url) -> bool {
    url.scheme() == origin.scheme()
        && url.host_str() == origin.host_str()
        && url.port_or_known_default() == origin.port_or_known_default()
}

/// `scheme://host:port` of `url`.
pub fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// A service's base URL: an http(s) URL with a host, without a trailing slash; `Err` says
/// what is wrong with it.
pub fn base_url(text: &str, what: &str) -> Result<Url, String> {
    let url = Url::parse(text.trim_end_matches('/'))
        .map_err(|err| format!("{what} {text:?} is not a URL ({err})"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!("{what} {text:?} is not an http(s) URL with a host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{what} {text:?} has a user name or password in it; viga does not send those"
        ));
    }
    Ok(url)
}

/// `1167 bytes`, `3.5 MiB`.
pub fn bytes_text(bytes: u64) -> String {
    if bytes < 1 << 20 {
        format!("{bytes} bytes")
    } else {
        format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_must_stay_on_the_origin_or_allowed_https_hosts() {
        let api = Url::parse("https://api.polyhaven.com").unwrap();
        let hosts = vec!["dl.polyhaven.org".to_owned()];
        let allowed = |url: &str| url_allowed(&Url::parse(url).unwrap(), &api, &hosts);
        assert!(allowed(
            "https://dl.polyhaven.org/file/ph-assets/Models/gltf/1k/a/a_1k.gltf"
        ));
        assert!(allowed("https://api.polyhaven.com/files/a"));
        assert!(!allowed("http://dl.polyhaven.org/file/x"), "HTTPS only");
        assert!(!allowed("https://dl.polyhaven.org.evil.example/x"));
        assert!(!allowed("https://user:pw@dl.polyhaven.org/x"));
        assert!(!allowed("https://api.polyhaven.com:8443/files/a"));
        assert!(!allowed("file:///etc/passwd"));
    }

    #[test]
    fn base_urls_are_http_with_a_host_and_no_credentials() {
        assert_eq!(
            base_url("http://127.0.0.1:8080/", "the service")
                .unwrap()
                .as_str(),
            "http://127.0.0.1:8080/"
        );
        for bad in [
            "ftp://x",
            "not a url",
            "https://u:p@x.example",
            "file:///tmp",
        ] {
            assert!(base_url(bad, "the service").is_err(), "{bad}");
        }
    }
}
