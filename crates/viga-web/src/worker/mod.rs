//! A web worker: one warm Chromium and one tab, supervised like the Blender worker: every
//! call has a limit; a page that never finishes loading or a script that never ends is
//! stopped there (its tab closed, or the whole browser killed and restarted when the
//! browser itself does not answer), and the error says which.
//!
//! This module owns the worker's calls and their checks; `tabs` owns the browser and tab
//! behind them and the recovery from a lost call.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::sync::Mutex;
use viga_locate::{NotFound, real_folder};
use viga_process::{Confinement, LostReason, WorkerLost};

use crate::browser::Browser;
use crate::cdp::CdpError;
use crate::page::{
    ElementBox, ElementStyle, LoadReport, Matched, PageReport, Screenshot, Served, Shot, Signals,
    Site, Viewport, boxes_script, styles_script,
};

mod tabs;

use tabs::{browser_of, evaluate, isolated_world, set_viewport};

/// The largest window, in CSS pixels a side.
pub const MAX_VIEWPORT: u32 = 4096;
/// The tallest full-page screenshot.
pub const MAX_SHOT_HEIGHT: u32 = 16384;
/// Elements described per query at most.
pub const MAX_ELEMENTS: usize = 100;
const MAX_SELECTOR_CHARS: usize = 1000;
const MAX_PROPERTIES: usize = 64;
/// What `computed_styles` reads when no property is named.
pub const DEFAULT_STYLE_PROPERTIES: [&str; 15] = [
    "display",
    "position",
    "color",
    "background-color",
    "font-family",
    "font-size",
    "font-weight",
    "text-align",
    "margin",
    "padding",
    "border",
    "width",
    "height",
    "opacity",
    "z-index",
];
/// Chromium's settings on Debian: its wrapper script sources `/etc/chromium.d/*`, and the
/// browser reads its policies from `/etc/chromium`.
const DEBIAN_SETTINGS: [&str; 2] = ["/etc/chromium.d", "/etc/chromium"];
/// How long closing a stuck tab may take before the browser is restarted instead.
const TAB_CLOSE_LIMIT: Duration = Duration::from_secs(5);
/// How long after its load a page's timers may run before it is asked whether it answers:
/// work a page starts at once (`setTimeout(…, 0)`) has begun by then.
const SETTLE_AFTER_LOAD: Duration = Duration::from_millis(200);
/// How long a loaded page may keep its scripts busy before it is taken for one that never
/// gives the page back: nothing on it could be shown, read or clicked.
const BUSY_LIMIT: Duration = Duration::from_secs(2);

#[derive(Debug, Clone)]
pub struct WebConfig {
    pub chromium: PathBuf,
    /// Limit of a page load, from the request to its load event.
    pub load_timeout: Duration,
    /// Limit of every other call (a screenshot, a query).
    pub call_timeout: Duration,
    pub startup_timeout: Duration,
    /// Start Chromium through this launcher (no network, writes only in its scratch folder).
    pub confinement: Option<Confinement>,
    /// The largest document accepted.
    pub max_html_bytes: usize,
    pub name: String,
    /// A site on this machine (`http://127.0.0.1:PORT`) whose pages [`WebWorker::visit`]
    /// opens: its own requests and WebSockets go through, for testing a front end served
    /// here; every other request is still refused. Loopback only.
    pub site: Option<String>,
}

impl WebConfig {
    pub fn new(chromium: PathBuf) -> Self {
        Self {
            chromium,
            load_timeout: Duration::from_secs(15),
            call_timeout: Duration::from_secs(20),
            startup_timeout: Duration::from_secs(30),
            confinement: None,
            max_html_bytes: 8 * 1024 * 1024,
            name: "web".to_owned(),
            site: None,
        }
    }

    /// Chromium as [`crate::locate::find_chromium`] finds it, with the default limits.
    pub fn locate() -> Result<Self, NotFound> {
        crate::locate::find_chromium().map(Self::new)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error(transparent)]
    NotFound(#[from] NotFound),
    #[error("could not start Chromium: {0}")]
    Start(String),
    /// The request cannot be done as asked (a document too large, a window too big, a bad
    /// selector, nothing loaded yet).
    #[error("{0}")]
    BadRequest(String),
    /// The page could not be shown (its renderer crashed, out of memory).
    #[error("the page failed: {0}")]
    PageFailed(String),
    /// Chromium refused a command; the browser is fine.
    #[error("Chromium refused {0}")]
    Refused(String),
    /// The call did not finish (or the browser died): `recovery` says whether only the tab
    /// was replaced or the whole browser restarted.
    #[error(transparent)]
    Lost(WorkerLost),
    /// What Chromium sent back could not be used.
    #[error("unusable output of `{op}`: {message}")]
    Output { op: &'static str, message: String },
}

/// The tab pages are shown in, in a browser context (profile) of its own.
#[derive(Debug, Clone)]
struct Tab {
    context: String,
    target: String,
    session: String,
    viewport: Viewport,
    /// The isolated world the verifier's queries run in, made once per page.
    world: Option<i64>,
    /// A page has been loaded into it.
    loaded: bool,
}

#[derive(Debug, Default)]
struct State {
    browser: Option<Browser>,
    tab: Option<Tab>,
}

/// Why a step failed: Chromium said no (the browser is fine), or the step is lost.
enum Failure {
    Refused(String),
    Lost(LostReason),
    Page(WebError),
}

impl From<CdpError> for Failure {
    fn from(err: CdpError) -> Self {
        match err {
            CdpError::Protocol { .. } => Self::Refused(err.to_string()),
            CdpError::Closed(why) => Self::Lost(LostReason::Disconnected(why)),
        }
    }
}

/// A supervised Chromium.
#[derive(Debug)]
pub struct WebWorker {
    config: WebConfig,
    site: Option<Site>,
    readable: Vec<PathBuf>,
    state: Mutex<State>,
    version: String,
    restarts: AtomicU32,
    pages: AtomicU64,
    /// Chromium's home, profile and temporary files (mode 0700), removed with the worker:
    /// last, so Chromium (above) is killed before its folder goes.
    root: viga_process::PrivateFolder,
}

impl WebWorker {
    /// Starts Chromium and opens its tab.
    pub async fn start(config: WebConfig) -> Result<Self, WebError> {
        let root = viga_process::private_folder("viga-web-")
            .map_err(|err| WebError::Start(format!("could not make the worker's folder: {err}")))?;
        let mut readable: Vec<PathBuf> = real_folder(&config.chromium).into_iter().collect();
        // Debian's `chromium` is a shell script that reads its settings there first.
        readable.extend(
            DEBIAN_SETTINGS
                .iter()
                .map(PathBuf::from)
                .filter(|folder| folder.is_dir()),
        );
        let site = config
            .site
            .as_deref()
            .map(Site::parse)
            .transpose()
            .map_err(WebError::BadRequest)?;
        let mut worker = Self {
            site,
            config,
            root,
            readable,
            state: Mutex::default(),
            version: String::new(),
            restarts: AtomicU32::new(0),
            pages: AtomicU64::new(0),
        };
        let browser = Browser::start(&worker.launch())
            .await
            .map_err(WebError::Start)?;
        tracing::info!(worker = %worker.config.name, version = %browser.version, "Chromium ready");
        worker.version = browser.version.clone();
        worker.state.get_mut().browser = Some(browser);
        Ok(worker)
    }

    /// Chromium's product and version, as it reported them.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// How many times Chromium was restarted.
    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// Where Chromium may write.
    pub fn scratch_folder(&self) -> &Path {
        self.root.path()
    }

    /// What the containment launcher reported for the running browser (JSON), if any.
    pub async fn contained_report(&self) -> Option<String> {
        self.state.lock().await.browser.as_ref()?.contained_report()
    }

    /// Shows `html` in a window of `viewport` and waits for its load event. The document is
    /// served from memory at an address of its own; every other request is refused and
    /// reported. Replaces the page shown before.
    pub async fn load(&self, html: &str, viewport: Viewport) -> Result<LoadReport, WebError> {
        self.load_within(html, viewport, self.config.load_timeout)
            .await
    }

    /// [`Self::load`] with a limit of its own instead of [`WebConfig::load_timeout`] (a
    /// run's program timeout).
    pub async fn load_within(
        &self,
        html: &str,
        viewport: Viewport,
        limit: Duration,
    ) -> Result<LoadReport, WebError> {
        if html.len() > self.config.max_html_bytes {
            return Err(WebError::BadRequest(format!(
                "the document is {} bytes; at most {} are shown",
                html.len(),
                self.config.max_html_bytes
            )));
        }
        check_viewport(viewport)?;
        let page = self.pages.fetch_add(1, Ordering::Relaxed);
        // A site of its own per page: nothing one page stores (cookies, storage, cache) is
        // seen by the next.
        let url = format!("https://viga-page-{page}.invalid/");
        self.navigate(url, Some(html), viewport, limit).await
    }

    /// Opens `path` of the worker's site ([`WebConfig::site`]) in a window of `viewport`
    /// and waits for its load event: the page and its requests to the site are real, every
    /// other request is refused and reported.
    pub async fn visit(&self, path: &str, viewport: Viewport) -> Result<LoadReport, WebError> {
        let Some(site) = &self.site else {
            return Err(WebError::BadRequest(
                "this worker has no site to visit: set WebConfig::site".to_owned(),
            ));
        };
        check_viewport(viewport)?;
        self.navigate(site.url(path), None, viewport, self.config.load_timeout)
            .await
    }

    /// Navigates the tab to `url`, serving `html` there from memory when given, and waits
    /// at most `limit` for its load event.
    async fn navigate(
        &self,
        url: String,
        html: Option<&str>,
        viewport: Viewport,
        limit: Duration,
    ) -> Result<LoadReport, WebError> {
        let started = Instant::now();
        let mut state = self.state.lock().await;
        let step = async {
            let tab = self.open_tab(&mut state, viewport).await?;
            let Some(browser) = state.browser.as_ref() else {
                return Err(Failure::Lost(LostReason::Disconnected(
                    "no browser".to_owned(),
                )));
            };
            if let Ok(mut served) = browser.interceptor.served.lock() {
                *served = Served {
                    url: html.map(|_| url.clone()).unwrap_or_default(),
                    html: std::sync::Arc::new(html.unwrap_or_default().as_bytes().to_vec()),
                    report: PageReport::default(),
                };
            }
            browser
                .interceptor
                .signals
                .send_modify(|signals| signals.crashed = false);
            let mut signals = browser.interceptor.signals.subscribe();
            let loads_before = signals.borrow().loads;
            let navigated = browser
                .cdp
                .call("Page.navigate", json!({"url": url}), Some(&tab.session))
                .await?;
            if let Some(error) = navigated["errorText"].as_str() {
                return Err(Failure::Page(WebError::PageFailed(format!(
                    "the document did not load ({error})"
                ))));
            }
            let settled = signals
                .wait_for(|now: &Signals| now.loads > loads_before || now.crashed)
                .await
                .map(|now| *now)
                .map_err(|_| Failure::Lost(LostReason::Disconnected("no signals".to_owned())))?;
            if settled.crashed {
                return Err(Failure::Page(WebError::PageFailed(
                    "its renderer crashed (out of memory, or killed)".to_owned(),
                )));
            }
            Ok(())
        };
        let outcome = tokio::time::timeout(limit, step).await;
        let result = self.settle(&mut state, "load", limit, outcome).await;
        if let Err(WebError::PageFailed(_)) = &result {
            // A crashed renderer's tab is not used again.
            self.close_tab(&mut state).await;
        }
        result?;
        if let Some(tab) = state.tab.as_mut() {
            tab.loaded = true;
            tab.world = None;
        }
        if let Some(why) = kept_busy(&state).await {
            self.close_tab(&mut state).await;
            return Err(WebError::PageFailed(why));
        }
        let report = served_report(&state);
        Ok(LoadReport {
            url,
            report,
            elapsed: started.elapsed(),
        })
    }

    /// The value of a JavaScript `expression` in the page's own world (its scripts'
    /// variables are there), awaited when it is a promise; it must be JSON.
    pub async fn evaluate(&self, expression: &str) -> Result<Value, WebError> {
        let mut state = self.state.lock().await;
        let (session, _) = loaded_tab(&state)?;
        let step = async {
            let browser = browser_of(&state)?;
            evaluate(browser, &session, None, expression).await
        };
        let outcome = tokio::time::timeout(self.config.call_timeout, step).await;
        self.settle(&mut state, "evaluate", self.config.call_timeout, outcome)
            .await
    }

    /// Clicks the middle of the first element `selector` matches, as a mouse would
    /// (scrolled into view first).
    pub async fn click(&self, selector: &str) -> Result<(), WebError> {
        check_selector(selector)?;
        let mut state = self.state.lock().await;
        let (session, _) = loaded_tab(&state)?;
        let script = format!(
            r#"(() => {{
  const element = document.querySelector({selector});
  if (!element) return null;
  element.scrollIntoView({{block: "center", inline: "center"}});
  const rect = element.getBoundingClientRect();
  return {{x: rect.left + rect.width / 2, y: rect.top + rect.height / 2}};
}})()"#,
            selector = json!(selector)
        );
        let step = async {
            let browser = browser_of(&state)?;
            let point = evaluate(browser, &session, None, &script).await?;
            let (Some(x), Some(y)) = (point["x"].as_f64(), point["y"].as_f64()) else {
                return Err(Failure::Page(WebError::BadRequest(format!(
                    "nothing on the page matches {selector:?}"
                ))));
            };
            for kind in ["mousePressed", "mouseReleased"] {
                let event =
                    json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1});
                browser
                    .cdp
                    .call("Input.dispatchMouseEvent", event, Some(&session))
                    .await?;
            }
            Ok(())
        };
        let outcome = tokio::time::timeout(self.config.call_timeout, step).await;
        self.settle(&mut state, "click", self.config.call_timeout, outcome)
            .await
    }

    /// Types `text` into the element `selector` matches, as a keyboard would: the element
    /// is clicked first, so it has the focus.
    pub async fn type_into(&self, selector: &str, text: &str) -> Result<(), WebError> {
        self.click(selector).await?;
        let mut state = self.state.lock().await;
        let (session, _) = loaded_tab(&state)?;
        let step = async {
            let browser = browser_of(&state)?;
            browser
                .cdp
                .call("Input.insertText", json!({"text": text}), Some(&session))
                .await?;
            Ok(())
        };
        let outcome = tokio::time::timeout(self.config.call_timeout, step).await;
        self.settle(&mut state, "type_into", self.config.call_timeout, outcome)
            .await
    }

    /// A PNG of the page as it is now, after resizing or scrolling if asked.
    pub async fn screenshot(&self, shot: Shot) -> Result<Screenshot, WebError> {
        if let Some(viewport) = shot.viewport {
            check_viewport(viewport)?;
        }
        let mut state = self.state.lock().await;
        let (session, viewport) = loaded_tab(&state)?;
        let step = async {
            let browser = browser_of(&state)?;
            let viewport = shot.viewport.unwrap_or(viewport);
            if shot.viewport.is_some() {
                set_viewport(browser, &session, viewport).await?;
            }
            if let Some((x, y)) = shot.scroll {
                if !(x.is_finite() && y.is_finite()) {
                    return Err(Failure::Page(WebError::BadRequest(
                        "scroll to finite coordinates".to_owned(),
                    )));
                }
                // Scrolled, then two frames so the picture shows it.
                let scroll = format!(
                    "window.scrollTo({x}, {y}); new Promise(done => requestAnimationFrame(() => requestAnimationFrame(done)))"
                );
                evaluate(browser, &session, None, &scroll).await?;
            }
            let mut params = json!({"format": "png"});
            if shot.full_page {
                let metrics = browser
                    .cdp
                    .call("Page.getLayoutMetrics", json!({}), Some(&session))
                    .await?;
                let height = metrics["cssContentSize"]["height"]
                    .as_f64()
                    .unwrap_or(f64::from(viewport.height))
                    .clamp(1.0, f64::from(MAX_SHOT_HEIGHT))
                    .ceil();
                params = json!({
                    "format": "png",
                    "captureBeyondViewport": true,
                    "clip": {"x": 0, "y": 0, "width": viewport.width, "height": height, "scale": 1},
                });
            }
            let shot = browser
                .cdp
                .call("Page.captureScreenshot", params, Some(&session))
                .await?;
            Ok((shot, viewport))
        };
        let outcome = tokio::time::timeout(self.config.call_timeout, step).await;
        let (shot, viewport) = self
            .settle(&mut state, "screenshot", self.config.call_timeout, outcome)
            .await?;
        if let Some(tab) = state.tab.as_mut() {
            tab.viewport = viewport;
        }
        let picture = decode_png(&shot)?;
        // The window is shown at one device pixel per CSS pixel: a picture of another width
        // is not the one asked for.
        if picture.width != viewport.width {
            return Err(WebError::Output {
                op: "screenshot",
                message: format!(
                    "the picture is {} pixels wide, not the {} asked for",
                    picture.width, viewport.width
                ),
            });
        }
        Ok(picture)
    }

    /// Loads `html` and takes a screenshot of the window: what a program's render is.
    pub async fn render(
        &self,
        html: &str,
        viewport: Viewport,
    ) -> Result<(LoadReport, Screenshot), WebError> {
        let report = self.load(html, viewport).await?;
        let shot = self.screenshot(Shot::default()).await?;
        Ok((report, shot))
    }

    /// The boxes of the elements `selector` matches (the first [`MAX_ELEMENTS`]).
    pub async fn element_boxes(&self, selector: &str) -> Result<Matched<ElementBox>, WebError> {
        check_selector(selector)?;
        self.query("element_boxes", &boxes_script(selector, MAX_ELEMENTS))
            .await
    }

    /// Computed styles of the elements `selector` matches: `properties`, or
    /// [`DEFAULT_STYLE_PROPERTIES`] when empty.
    pub async fn computed_styles(
        &self,
        selector: &str,
        properties: &[&str],
    ) -> Result<Matched<ElementStyle>, WebError> {
        check_selector(selector)?;
        let properties = if properties.is_empty() {
            &DEFAULT_STYLE_PROPERTIES[..]
        } else {
            properties
        };
        if properties.len() > MAX_PROPERTIES || properties.iter().any(|name| name.len() > 100) {
            return Err(WebError::BadRequest(format!(
                "ask for at most {MAX_PROPERTIES} properties, each a CSS property name"
            )));
        }
        self.query(
            "computed_styles",
            &styles_script(selector, properties, MAX_ELEMENTS),
        )
        .await
    }

    /// What the page shown now did so far: refused requests, script errors.
    pub async fn page_report(&self) -> PageReport {
        served_report(&*self.state.lock().await)
    }

    /// Closes Chromium.
    pub async fn shutdown(self) {
        let mut state = self.state.into_inner();
        if let Some(browser) = state.browser.take() {
            browser.shutdown().await;
        }
    }

    async fn query<T: DeserializeOwned>(
        &self,
        op: &'static str,
        script: &str,
    ) -> Result<T, WebError> {
        let mut state = self.state.lock().await;
        let (session, _) = loaded_tab(&state)?;
        let world = state.tab.as_ref().and_then(|tab| tab.world);
        let step = async {
            let browser = browser_of(&state)?;
            let world = match world {
                Some(world) => world,
                None => isolated_world(browser, &session).await?,
            };
            let value = evaluate(browser, &session, Some(world), script).await?;
            Ok((value, world))
        };
        let outcome = tokio::time::timeout(self.config.call_timeout, step).await;
        let (value, world) = self
            .settle(&mut state, op, self.config.call_timeout, outcome)
            .await?;
        if let Some(tab) = state.tab.as_mut() {
            tab.world = Some(world);
        }
        if let Some(error) = value["error"].as_str() {
            return Err(WebError::BadRequest(format!(
                "the selector is not valid CSS: {error}"
            )));
        }
        serde_json::from_value(value).map_err(|err| WebError::Output {
            op,
            message: err.to_string(),
        })
    }
}

fn check_viewport(viewport: Viewport) -> Result<(), WebError> {
    let fits = |side: u32| (1..=MAX_VIEWPORT).contains(&side);
    if fits(viewport.width) && fits(viewport.height) {
        Ok(())
    } else {
        Err(WebError::BadRequest(format!(
            "a window is 1 to {MAX_VIEWPORT} pixels a side, not {}x{}",
            viewport.width, viewport.height
        )))
    }
}

fn check_selector(selector: &str) -> Result<(), WebError> {
    if selector.trim().is_empty() || selector.chars().count() > MAX_SELECTOR_CHARS {
        return Err(WebError::BadRequest(format!(
            "give a CSS selector of 1 to {MAX_SELECTOR_CHARS} characters, like `h1` or `#total`"
        )));
    }
    Ok(())
}

/// Why the page just loaded does not answer, when its scripts keep it busy past
/// [`BUSY_LIMIT`] (a loop that never yields, started during or right after the load): every
/// later look at it would wait for the call limit and fail, so it fails now, as the program's
/// fault, in words the model can act on. `None` when it answers.
async fn kept_busy(state: &State) -> Option<String> {
    tokio::time::sleep(SETTLE_AFTER_LOAD).await;
    let (session, _) = loaded_tab(state).ok()?;
    let browser = browser_of(state).ok()?;
    let asked = tokio::time::timeout(BUSY_LIMIT, evaluate(browser, &session, None, "1")).await;
    asked.is_err().then(|| {
        format!(
            "its scripts kept the page busy for more than {} s after it loaded, so nothing on it could be shown: a loop that never gives the page back (a while (true), or a timer that starts heavy work again and again); let the scripts finish, or leave them out",
            BUSY_LIMIT.as_secs()
        )
    })
}

fn loaded_tab(state: &State) -> Result<(String, Viewport), WebError> {
    match &state.tab {
        Some(tab) if tab.loaded => Ok((tab.session.clone(), tab.viewport)),
        _ => Err(WebError::BadRequest(
            "no page is shown (none was loaded, or it was lost): load the document first"
                .to_owned(),
        )),
    }
}

fn served_report(state: &State) -> PageReport {
    state
        .browser
        .as_ref()
        .and_then(|browser| {
            browser
                .interceptor
                .served
                .lock()
                .ok()
                .map(|s| s.report.clone())
        })
        .unwrap_or_default()
}

fn decode_png(shot: &Value) -> Result<Screenshot, WebError> {
    use base64::Engine as _;
    let unusable = |message: String| WebError::Output {
        op: "screenshot",
        message,
    };
    let data = shot["data"]
        .as_str()
        .ok_or_else(|| unusable("no picture".to_owned()))?;
    let png = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|err| unusable(err.to_string()))?;
    let picture = image::load_from_memory_with_format(&png, image::ImageFormat::Png)
        .map_err(|err| unusable(err.to_string()))?;
    Ok(Screenshot {
        width: picture.width(),
        height: picture.height(),
        png,
    })
}
