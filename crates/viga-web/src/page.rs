//! What a page load, a screenshot and the verifier's look at the page give back, and the
//! state the request interceptor keeps for the page being shown.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::cdp::{Event, EventHandler, Outgoing};

/// Refused requests and page errors kept per page; more are only counted.
const MAX_RECORDS: usize = 200;
/// The longest URL or message kept.
const MAX_RECORD_CHARS: usize = 2000;

/// A browser window's size in CSS pixels (device scale 1, so also in picture pixels).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Viewport {
    pub width: u32,
    pub height: u32,
}

/// What to show in a screenshot.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Shot {
    /// Resize the window first (it stays at that size for later calls).
    pub viewport: Option<Viewport>,
    /// Scroll to this point (CSS pixels from the page's top left) first.
    pub scroll: Option<(f64, f64)>,
    /// The whole page's height, not only the window (cut at [`crate::MAX_SHOT_HEIGHT`]).
    pub full_page: bool,
}

#[derive(Debug, Clone)]
pub struct Screenshot {
    pub width: u32,
    pub height: u32,
    pub png: Vec<u8>,
}

/// A request the page made that was refused: nothing outside the page itself is fetched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RefusedRequest {
    pub url: String,
    /// Chromium's resource type (`Image`, `Script`, `Fetch`, `WebSocket`, …).
    pub resource_type: String,
}

/// What happened while the page was shown: requests refused and errors its scripts raised.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageReport {
    pub refused: Vec<RefusedRequest>,
    /// All refused requests, also those past the kept ones.
    pub refused_total: usize,
    /// Uncaught exceptions and `console.error` messages of the page's scripts.
    pub errors: Vec<String>,
    pub errors_total: usize,
    /// The uncaught exceptions among [`Self::errors`] (a script that failed, not one that
    /// logged an error).
    #[serde(default)]
    pub uncaught: Vec<String>,
}

/// A loaded page.
#[derive(Debug, Clone)]
pub struct LoadReport {
    /// The address the document was served at (a name of its own, never on the network).
    pub url: String,
    /// What the page did while loading.
    pub report: PageReport,
    pub elapsed: Duration,
}

/// An element's box in CSS pixels, relative to the top left of the page (not the window).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElementBox {
    pub tag: String,
    pub id: Option<String>,
    pub classes: Option<String>,
    /// The start of its text.
    pub text: String,
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

/// An element's computed styles, by property.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElementStyle {
    pub tag: String,
    pub id: Option<String>,
    pub classes: Option<String>,
    pub styles: std::collections::BTreeMap<String, String>,
}

/// Elements matched by a selector: the first ones, and how many matched in all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Matched<T> {
    pub count: usize,
    pub elements: Vec<T>,
}

/// A site on this machine whose pages are visited rather than served from memory: its own
/// requests (and WebSockets) go through, every other request is still refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Site {
    /// `http://127.0.0.1:PORT` (or `https://`, or `[::1]`), without a slash at the end.
    origin: String,
}

impl Site {
    /// A loopback origin; anything else is refused, so a visited page can reach nothing
    /// beyond this machine's own server.
    pub(crate) fn parse(origin: &str) -> Result<Self, String> {
        let origin = origin.trim_end_matches('/');
        let rest = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .ok_or_else(|| format!("a site is http://127.0.0.1:PORT, not {origin:?}"))?;
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| format!("a site names its port: {origin:?}"))?;
        if !matches!(host, "127.0.0.1" | "[::1]") || port.parse::<u16>().is_err() {
            return Err(format!(
                "a site must be on loopback (127.0.0.1 or [::1]) with a port and no path, not {origin:?}"
            ));
        }
        Ok(Self {
            origin: origin.to_owned(),
        })
    }

    /// `host:port`, as Chromium's proxy bypass list names it.
    pub(crate) fn host_port(&self) -> &str {
        self.origin
            .split_once("://")
            .map_or(self.origin.as_str(), |(_, rest)| rest)
    }

    /// The host alone (`127.0.0.1`, `[::1]`).
    pub(crate) fn host(&self) -> &str {
        self.host_port()
            .rsplit_once(':')
            .map_or(self.host_port(), |(host, _)| host)
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}/{}", self.origin, path.trim_start_matches('/'))
    }

    /// Whether `url` is on the site (ws:// and wss:// for its http and https).
    fn holds(&self, url: &str) -> bool {
        url.strip_prefix(&self.origin)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(['/', '?', '#']))
    }
}

/// The page being shown, as the interceptor serves and watches it.
#[derive(Debug, Default)]
pub(crate) struct Served {
    /// The document's address and body; every other request is refused.
    pub url: String,
    pub html: Arc<Vec<u8>>,
    pub report: PageReport,
}

/// Signals from the tab: loads finished and a crashed renderer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Signals {
    pub loads: u64,
    pub crashed: bool,
}

/// Answers every paused request (the page's document, or a refusal), dismisses dialogs, and
/// notes loads, crashes and script errors.
#[derive(Debug)]
pub(crate) struct Interceptor {
    pub served: Mutex<Served>,
    pub signals: tokio::sync::watch::Sender<Signals>,
    site: Option<Site>,
}

impl Interceptor {
    pub fn new(site: Option<Site>) -> Self {
        Self {
            served: Mutex::default(),
            signals: tokio::sync::watch::Sender::new(Signals::default()),
            site,
        }
    }

    fn paused(&self, event: &Event, out: &Outgoing) {
        let request_id = event.params["requestId"].clone();
        let url = event.params["request"]["url"].as_str().unwrap_or_default();
        if self.site.as_ref().is_some_and(|site| site.holds(url)) {
            out.send(
                "Fetch.continueRequest",
                json!({"requestId": request_id}),
                event.session.as_deref(),
            );
            return;
        }
        let Ok(mut served) = self.served.lock() else {
            return;
        };
        let document = url.split('#').next() == Some(served.url.as_str());
        if document && !served.url.is_empty() {
            use base64::Engine as _;
            let body = base64::engine::general_purpose::STANDARD.encode(served.html.as_slice());
            out.send(
                "Fetch.fulfillRequest",
                json!({
                    "requestId": request_id,
                    "responseCode": 200,
                    "responseHeaders": [{"name": "Content-Type", "value": "text/html; charset=utf-8"}],
                    "body": body,
                }),
                event.session.as_deref(),
            );
            return;
        }
        out.send(
            "Fetch.failRequest",
            json!({"requestId": request_id, "errorReason": "BlockedByClient"}),
            event.session.as_deref(),
        );
        // The browser's own favicon request is not the page's.
        if url != format!("{}favicon.ico", served.url) {
            let resource_type = event.params["resourceType"].as_str().unwrap_or("Other");
            served.report.refuse(url, resource_type);
        }
    }
}

impl PageReport {
    fn refuse(&mut self, url: &str, resource_type: &str) {
        self.refused_total += 1;
        if self.refused.len() < MAX_RECORDS {
            self.refused.push(RefusedRequest {
                url: cut(url),
                resource_type: resource_type.to_owned(),
            });
        }
    }

    fn error(&mut self, message: &str) {
        self.errors_total += 1;
        if self.errors.len() < MAX_RECORDS {
            self.errors.push(cut(message));
        }
    }

    fn uncaught(&mut self, message: &str) {
        self.error(message);
        if self.uncaught.len() < MAX_RECORDS {
            self.uncaught.push(cut(message));
        }
    }
}

impl EventHandler for Interceptor {
    fn handle(&self, event: Event, out: &Outgoing) {
        match event.method.as_str() {
            "Fetch.requestPaused" => self.paused(&event, out),
            "Page.loadEventFired" => self.signals.send_modify(|signals| signals.loads += 1),
            "Inspector.targetCrashed" | "Target.targetCrashed" => {
                self.signals.send_modify(|signals| signals.crashed = true)
            }
            // An alert or confirm would block the page: dismissed at once.
            "Page.javascriptDialogOpening" => out.send(
                "Page.handleJavaScriptDialog",
                json!({"accept": false}),
                event.session.as_deref(),
            ),
            // WebSockets are not intercepted by Fetch; they fail at the browser's dead proxy
            // and are reported here (a site's own go through).
            "Network.webSocketCreated" => {
                let url = event.params["url"].as_str().unwrap_or_default();
                let to_site = self.site.as_ref().is_some_and(|site| {
                    let http = url.replacen("ws", "http", 1);
                    site.holds(&http)
                });
                if !to_site && let Ok(mut served) = self.served.lock() {
                    served.report.refuse(url, "WebSocket");
                }
            }
            "Runtime.exceptionThrown" => {
                let details = &event.params["exceptionDetails"];
                let message = details["exception"]["description"]
                    .as_str()
                    .or_else(|| details["text"].as_str())
                    .unwrap_or("an exception");
                if let Ok(mut served) = self.served.lock() {
                    served.report.uncaught(message);
                }
            }
            "Runtime.consoleAPICalled" if event.params["type"] == "error" => {
                let words: Vec<String> = event.params["args"]
                    .as_array()
                    .map(|args| {
                        args.iter()
                            .map(|arg| match arg["value"].as_str() {
                                Some(text) => text.to_owned(),
                                None => arg["description"].as_str().unwrap_or_default().to_owned(),
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                if let Ok(mut served) = self.served.lock() {
                    served
                        .report
                        .error(&format!("console.error: {}", words.join(" ")));
                }
            }
            _ => {}
        }
    }
}

fn cut(text: &str) -> String {
    match text.char_indices().nth(MAX_RECORD_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// Element boxes (in the isolated world, whose DOM functions the page cannot replace).
pub(crate) fn boxes_script(selector: &str, max: usize) -> String {
    format!(
        r#"(() => {{
  let nodes;
  try {{ nodes = document.querySelectorAll({selector}); }}
  catch (error) {{ return {{error: String(error.message)}}; }}
  const elements = Array.from(nodes).slice(0, {max}).map((element) => {{
    const rect = element.getBoundingClientRect();
    return {{
      tag: element.tagName.toLowerCase(),
      id: element.id || null,
      classes: element.getAttribute('class') ? String(element.getAttribute('class')).slice(0, 200) : null,
      text: String(element.innerText || element.textContent || '').trim().slice(0, 200),
      x: rect.left + window.scrollX, y: rect.top + window.scrollY,
      width: rect.width, height: rect.height,
    }};
  }});
  return {{count: nodes.length, elements}};
}})()"#,
        selector = json!(selector),
    )
}

/// Computed styles of the matched elements, by property.
pub(crate) fn styles_script(selector: &str, properties: &[&str], max: usize) -> String {
    format!(
        r#"(() => {{
  let nodes;
  try {{ nodes = document.querySelectorAll({selector}); }}
  catch (error) {{ return {{error: String(error.message)}}; }}
  const properties = {properties};
  const elements = Array.from(nodes).slice(0, {max}).map((element) => {{
    const computed = window.getComputedStyle(element);
    const styles = {{}};
    for (const name of properties) styles[name] = String(computed.getPropertyValue(name)).slice(0, 500);
    return {{
      tag: element.tagName.toLowerCase(),
      id: element.id || null,
      classes: element.getAttribute('class') ? String(element.getAttribute('class')).slice(0, 200) : null,
      styles,
    }};
  }});
  return {{count: nodes.length, elements}};
}})()"#,
        selector = json!(selector),
        properties = json!(properties),
    )
}
