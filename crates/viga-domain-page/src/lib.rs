//! A web page as a domain of the loop: a program is one HTML document with its CSS (and
//! scripts), shown by a warm headless Chromium ([`viga_web::WebWorker`]) in a window of the
//! run's viewport; the "render" is a screenshot. A page reaches no network: its document is
//! served from memory and every other request is refused, and the refusals are told to the
//! model, logged as warnings and kept in the run folder (`network.jsonl`). A target picture
//! shows the page at a viewport (its view is `WIDTHxHEIGHT`; the run's viewport by default).
//! The verifier may take screenshots at other viewport sizes, scroll, and read element boxes
//! and computed styles.
//!
//! **Owns:** the domain ([`PageDomain`]), its settings as run folders record them, its kind
//! for reports and resume ([`PageKind`]: the report's network section), its prompts
//! (`prompts/`).
//!
//! **Must not:** parse command lines, print, or start its browser: the front end starts the
//! [`viga_web::WebWorker`] under its containment and hands it in.

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

mod tools;

use std::fmt::Write as _;

/// The page domain as run folders know it.
#[derive(Debug, Clone, Copy, Default)]
pub struct PageKind;

#[async_trait]
impl viga_core::DomainKind for PageKind {
    fn name(&self) -> &'static str {
        PAGE_DOMAIN
    }

    fn view_words(&self, view: Option<&str>, _frame: Option<i32>) -> String {
        match view {
            Some(window) => format!("the page at {window}"),
            None => "the page".to_owned(),
        }
    }

    fn describe(&self, recorded: &viga_core::RecordedDomain, _has_target: bool) -> String {
        match serde_json::from_value::<PageSettings>(recorded.settings.clone()) {
            Ok(settings) => format!(
                "web page: HTML in headless Chromium, window {}x{}, no network",
                settings.viewport.width, settings.viewport.height
            ),
            Err(_) => "web page: HTML in headless Chromium, no network".to_owned(),
        }
    }

    fn report_sections(&self, folder: &viga_core::RunFolder) -> String {
        network_section(folder.root())
    }

    async fn reopen(
        &self,
        run_folder: &Path,
        contained: &ContainedWorkers,
        _provider: std::sync::Arc<dyn viga_provider::Provider>,
    ) -> Result<std::sync::Arc<dyn viga_core::Domain>, CoreError> {
        let settings = PageDomain::recorded_settings(run_folder)?;
        let (config, _) = viga_core::RunFolder::open(run_folder)?.read_args()?;
        let domain = start(settings, contained, config.program_timeout).await?;
        Ok(std::sync::Arc::new(domain))
    }
}

/// A Chromium of its own for pages, started under `contained` (reading nothing beyond its
/// own folder), with what holds for it (its launcher's report).
pub async fn start_browser(
    contained: &ContainedWorkers,
    load_timeout: Duration,
) -> Result<(WebWorker, ContainmentStatus), CoreError> {
    let not_started = |err| CoreError::not_started("Chromium did not start", err);
    let mut config = WebConfig::locate().map_err(|err| CoreError::not_started("web pages", err))?;
    config.confinement = contained
        .confinement(&viga_sandbox::Access::default())
        .map_err(not_started)?;
    config.load_timeout = load_timeout;
    let worker = WebWorker::start(config)
        .await
        .map_err(|err| CoreError::not_started("Chromium did not start", err))?;
    let status = contained
        .renderer_status(worker.contained_report().await.as_deref())
        .map_err(not_started)?;
    Ok((worker, status))
}

/// The page domain on a Chromium of its own (see [`start_browser`]); the run records what
/// holds for it.
pub async fn start(
    settings: PageSettings,
    contained: &ContainedWorkers,
    load_timeout: Duration,
) -> Result<PageDomain, CoreError> {
    let (worker, status) = start_browser(contained, load_timeout).await?;
    Ok(PageDomain::new(settings, std::sync::Arc::new(worker))?.with_containment(status))
}

/// The requests a page run's pages made outside themselves, refused, per iteration
/// (`network.jsonl`); nothing when none was made.
fn network_section(run_folder: &Path) -> String {
    let Ok(text) = std::fs::read_to_string(run_folder.join(NETWORK_FILE)) else {
        return String::new();
    };
    let mut rows = String::new();
    for line in text.lines() {
        let Ok(record) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let iteration = record["iteration"]
            .as_u64()
            .map_or_else(|| "?".to_owned(), |n| n.to_string());
        let requests: Vec<String> = record["refused"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|request| {
                format!(
                    "{} ({})",
                    request["url"].as_str().unwrap_or_default(),
                    request["resource_type"].as_str().unwrap_or_default()
                )
            })
            .collect();
        let _ = write!(
            rows,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            viga_core::report::escape(&iteration),
            record["refused_total"].as_u64().unwrap_or_default(),
            viga_core::report::escape(&requests.join(", "))
        );
    }
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "<section><h2>Network</h2><p class=\"warn\">The pages asked for resources outside themselves. Pages reach no network: every such request was refused and got no response.</p>\
         <table><tr><th>iteration</th><th>refused</th><th>requests</th></tr>{rows}</table></section>"
    )
}

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use viga_contain::ContainedWorkers;
use viga_protocol::iteration::{ExecutionError, ExecutionResult};
use viga_protocol::message::{ImageData, ToolSpec};
use viga_sandbox::ContainmentStatus;
use viga_skills::{CapturedRender, ToolError, ToolOutput};
use viga_web::{PageReport, Shot, Viewport, WebConfig, WebError, WebWorker};

use viga_core::domain::{
    Domain, FaultKind, ProgramFormat, RoleTools, TargetView, ToolRole, ViewRender, WorkerFault,
    WorkerWatch,
};
use viga_core::renderer::{elapsed_ms, lost, not_started, picture};
use viga_core::{CoreError, Prompts};

/// The domain's name, in run folders and args.json.
pub const PAGE_DOMAIN: &str = "page";
/// The page a finished run leaves in its folder, beside its screenshot.
pub const FINAL_PAGE: &str = "final.html";
/// The screenshot of the final page at the run's viewport.
pub const FINAL_SCREENSHOT: &str = "final.png";
/// Every iteration whose page asked for something outside itself: one JSON line each, with
/// the requests refused.
pub const NETWORK_FILE: &str = "network.jsonl";
/// `error_type` of a page whose scripts raised and did not catch.
pub const UNCAUGHT_ERROR: &str = "UncaughtException";
/// The window when the run names none and has no target picture to take it from.
pub const DEFAULT_VIEWPORT: Viewport = Viewport {
    width: 1280,
    height: 800,
};
/// Refused requests named to the model per iteration; the rest are counted.
const REQUESTS_TOLD: usize = 8;

/// How the pages of a run are shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PageSettings {
    /// The window every page is loaded into, in CSS pixels (also picture pixels).
    pub viewport: Viewport,
}

impl Default for PageSettings {
    fn default() -> Self {
        Self {
            viewport: DEFAULT_VIEWPORT,
        }
    }
}

impl PageSettings {
    /// The settings of a run whose window is `viewport` when given (`WIDTHxHEIGHT`), else
    /// the size of its first target picture without a view of its own, else
    /// [`DEFAULT_VIEWPORT`]: a screenshot then compares with the target pixel for pixel.
    pub fn for_targets(
        viewport: Option<&str>,
        targets: &[viga_core::TargetSpec],
    ) -> Result<Self, ViewportChoiceError> {
        let viewport = match (viewport, targets.iter().find(|t| t.view.is_none())) {
            (Some(text), _) => parse_viewport(text).map_err(ViewportChoiceError::Given)?,
            (None, Some(target)) => {
                let unreadable = |why: String| ViewportChoiceError::Target {
                    path: target.path.clone(),
                    why,
                };
                let bytes = std::fs::read(&target.path)
                    .map_err(|err| unreadable(format!("cannot be read: {err}")))?;
                let (width, height) = viga_skills::metrics::image_size(&bytes)
                    .map_err(|err| unreadable(err.to_string()))?;
                check_viewport(Viewport { width, height })
                    .map_err(|why| unreadable(format!("cannot be a window: {why}")))?
            }
            (None, None) => DEFAULT_VIEWPORT,
        };
        Ok(Self { viewport })
    }

    pub fn problems(&self) -> Vec<String> {
        check_viewport(self.viewport)
            .err()
            .map(|why| format!("the page viewport: {why}"))
            .into_iter()
            .collect()
    }
}

/// Why a page run's window could not be chosen ([`PageSettings::for_targets`]).
#[derive(Debug, thiserror::Error)]
pub enum ViewportChoiceError {
    /// The viewport given is not one.
    #[error("{0}")]
    Given(String),
    /// The target picture the window would take its size from.
    #[error("the target {} {why}; give the window's size", path.display())]
    Target { path: PathBuf, why: String },
}

fn check_viewport(viewport: Viewport) -> Result<Viewport, String> {
    let fits = |side: u32| (1..=viga_web::MAX_VIEWPORT).contains(&side);
    if fits(viewport.width) && fits(viewport.height) {
        Ok(viewport)
    } else {
        Err(format!(
            "a window is 1 to {} pixels a side, not {}x{}",
            viga_web::MAX_VIEWPORT,
            viewport.width,
            viewport.height
        ))
    }
}

/// `WIDTHxHEIGHT` (`1280x800`) as a viewport.
pub fn parse_viewport(text: &str) -> Result<Viewport, String> {
    let parsed = text
        .trim()
        .split_once(['x', 'X'])
        .and_then(|(w, h)| w.trim().parse().ok().zip(h.trim().parse().ok()))
        .map(|(width, height)| Viewport { width, height });
    match parsed {
        Some(viewport) => check_viewport(viewport),
        None => Err(format!(
            "{text:?} is not a viewport; write WIDTHxHEIGHT in pixels, e.g. 390x844"
        )),
    }
}

/// The viewport a target's view names (`390x844`), or `default` when it names none.
fn viewport_of(view: Option<&str>, default: Viewport) -> Result<Viewport, String> {
    match view {
        None => Ok(default),
        Some(view) => parse_viewport(view)
            .map_err(|why| format!("the target view {view:?} names no viewport: {why}")),
    }
}

fn label(viewport: Viewport) -> String {
    format!("{}x{}", viewport.width, viewport.height)
}

/// Where the domain keeps what it records in the run folder.
#[derive(Debug, Default)]
struct Recording {
    folder: Option<PathBuf>,
    iteration: Option<u32>,
}

/// A page built by whole HTML documents, each loaded afresh.
pub struct PageDomain {
    settings: PageSettings,
    worker: std::sync::Arc<WebWorker>,
    watch: WorkerWatch,
    /// Whether the last program's page is loaded and can be looked at.
    loaded: Mutex<bool>,
    recording: Mutex<Recording>,
    tools: RoleTools<PageDomain>,
    /// What containment Chromium runs under, as its launcher reported it.
    containment: Option<ContainmentStatus>,
}

impl std::fmt::Debug for PageDomain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PageDomain")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

/// Said when there is no page to look at.
const NO_PAGE_YET: &str = "the last program's page did not load, so there is nothing to look at";

impl PageDomain {
    pub fn new(
        settings: PageSettings,
        worker: std::sync::Arc<WebWorker>,
    ) -> Result<Self, CoreError> {
        let tools = tools::registries()?;
        Ok(Self {
            settings,
            worker,
            watch: WorkerWatch::new(),
            loaded: Mutex::new(false),
            recording: Mutex::new(Recording::default()),
            tools,
            containment: None,
        })
    }

    /// Records that Chromium runs under `status`, as its containment launcher reported it,
    /// for the run folder.
    pub fn with_containment(mut self, status: ContainmentStatus) -> Self {
        self.containment = Some(status);
        self
    }

    /// The settings the page run in `run_folder` recorded in its `args.json`; a run of
    /// another domain is refused.
    pub fn recorded_settings(run_folder: &Path) -> Result<PageSettings, CoreError> {
        viga_core::recorded_settings(run_folder, PAGE_DOMAIN)
    }

    pub fn settings(&self) -> &PageSettings {
        &self.settings
    }

    fn is_loaded(&self) -> bool {
        self.loaded.lock().map(|loaded| *loaded).unwrap_or(false)
    }

    fn set_loaded(&self, loaded: bool) {
        if let Ok(mut flag) = self.loaded.lock() {
            *flag = loaded;
        }
    }

    /// A browser error as the loop's fault, losses reported to the watch (the page is gone
    /// with its tab). `limit` is set when the call was the program's load.
    fn fault(&self, err: WebError, limit: Option<Duration>) -> WorkerFault {
        match err {
            WebError::Lost(worker_lost) => {
                self.set_loaded(false);
                lost(&self.watch, worker_lost, limit)
            }
            WebError::Start(why) => {
                self.set_loaded(false);
                not_started(&self.watch, format!("Chromium could not start: {why}"))
            }
            WebError::Refused(_) | WebError::BadRequest(_) => {
                WorkerFault::new(FaultKind::Refused, err.to_string())
            }
            err => WorkerFault::other(err.to_string()),
        }
    }

    /// A screenshot of the loaded page as `shot` says, or why there is none in words for the
    /// model.
    async fn shoot(
        &self,
        view: &str,
        shot: Shot,
    ) -> Result<Result<CapturedRender, String>, WorkerFault> {
        if !self.is_loaded() {
            return Ok(Err(NO_PAGE_YET.to_owned()));
        }
        let started = Instant::now();
        match self.worker.screenshot(shot).await {
            Ok(screenshot) => {
                self.watch.answered();
                Ok(Ok(CapturedRender {
                    picture: picture(
                        screenshot.png,
                        screenshot.width,
                        screenshot.height,
                        elapsed_ms(started),
                    ),
                    view: view.to_owned(),
                    file: None,
                }))
            }
            Err(err @ WebError::BadRequest(_)) => Ok(Err(err.to_string())),
            Err(err) => Err(self.fault(err, None)),
        }
    }

    /// Keeps the refused requests of the iteration's page in the run folder.
    fn record_refused(&self, report: &PageReport) {
        let Ok(recording) = self.recording.lock() else {
            return;
        };
        let Some(folder) = &recording.folder else {
            return;
        };
        let line = serde_json::json!({
            "iteration": recording.iteration,
            "refused": report.refused,
            "refused_total": report.refused_total,
        });
        let path = folder.join(NETWORK_FILE);
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| {
                use std::io::Write as _;
                writeln!(file, "{line}")
            });
        if let Err(err) = appended {
            tracing::warn!(path = %path.display(), %err, "the refused requests were not recorded");
        }
    }
}

/// What a page's refused requests mean for the model.
pub fn refused_note(report: &PageReport) -> Option<String> {
    if report.refused_total == 0 {
        return None;
    }
    let named: Vec<String> = report
        .refused
        .iter()
        .take(REQUESTS_TOLD)
        .map(|request| format!("{} ({})", request.url, request.resource_type))
        .collect();
    let more = report.refused_total.saturating_sub(named.len());
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    Some(format!(
        "the page asked for {} resource(s) outside itself, which were refused and got no response (pages reach no network): {}{more}. Put everything in the document: inline CSS and scripts, pictures as inline SVG or data: URIs, system fonts.",
        report.refused_total,
        named.join(", ")
    ))
}

fn tool_error(fault: WorkerFault) -> ToolError {
    ToolError::Recoverable(fault.message)
}

#[async_trait]
impl Domain for PageDomain {
    fn name(&self) -> &str {
        PAGE_DOMAIN
    }

    fn program_format(&self) -> ProgramFormat {
        ProgramFormat::new("html", "the whole HTML document, with its CSS inline")
            .with_aliases(&["htm", "xhtml"])
    }

    fn prompts(&self) -> Prompts {
        Prompts {
            plan: include_str!("../prompts/plan.md").to_owned(),
            generator: include_str!("../prompts/generator.md").to_owned(),
            generator_tools: include_str!("../prompts/generator_tools.md").to_owned(),
            fast_fix: include_str!("../prompts/fast_fix.md").to_owned(),
            verifier: include_str!("../prompts/verifier.md").to_owned(),
            ..Prompts::default()
        }
    }

    fn watch(&self) -> &WorkerWatch {
        &self.watch
    }

    fn describe(&self) -> String {
        format!(
            "HTML pages in {} at {}",
            self.worker.version(),
            label(self.settings.viewport)
        )
    }

    fn worker_name(&self) -> &str {
        "Chromium"
    }

    fn containment(&self) -> Option<ContainmentStatus> {
        self.containment.clone()
    }

    fn settings(&self) -> Value {
        serde_json::to_value(&self.settings).unwrap_or(Value::Null)
    }

    fn problems(&self, _generator_tools: bool) -> Vec<String> {
        self.settings.problems()
    }

    fn brief(&self, targets: &[TargetView]) -> Option<String> {
        let mut brief = vec![format!(
            "The page is shown in a browser window of {} CSS pixels (device scale 1), with no network.",
            label(self.settings.viewport)
        )];
        let mut others: Vec<String> = targets
            .iter()
            .filter_map(|target| target.view.clone())
            .collect();
        others.dedup();
        if !others.is_empty() {
            brief.push(format!(
                "Some target pictures show the page in other windows ({}): the page must look like each of them at that size.",
                others.join(", ")
            ));
        }
        Some(brief.join(" "))
    }

    async fn check_targets(&self, targets: &[TargetView]) -> Result<Vec<String>, WorkerFault> {
        Ok(targets
            .iter()
            .filter_map(|target| viewport_of(target.view.as_deref(), self.settings.viewport).err())
            .collect())
    }

    fn begin_run(&self, folder: &Path, _targets: &[TargetView]) {
        if let Ok(mut recording) = self.recording.lock() {
            recording.folder = Some(folder.to_path_buf());
        }
    }

    fn begin_iteration(&self, renders: &Path) {
        // renders/<n>: the iteration's number names the folder.
        let iteration = renders
            .file_name()
            .and_then(|name| name.to_str())
            .and_then(|name| name.parse().ok());
        if let Ok(mut recording) = self.recording.lock() {
            recording.iteration = iteration;
        }
    }

    async fn execute(
        &self,
        program: &str,
        limit: Duration,
    ) -> Result<ExecutionResult, WorkerFault> {
        self.set_loaded(false);
        let started = Instant::now();
        let loaded = match self
            .worker
            .load_within(program, self.settings.viewport, limit)
            .await
        {
            Ok(loaded) => loaded,
            Err(err @ (WebError::BadRequest(_) | WebError::PageFailed(_))) => {
                return Ok(ExecutionResult {
                    error: Some(ExecutionError {
                        error_type: "PageFailed".to_owned(),
                        message: err.to_string(),
                        traceback: String::new(),
                        line: None,
                    }),
                    duration_ms: elapsed_ms(started),
                    ..ExecutionResult::default()
                });
            }
            Err(err) => return Err(self.fault(err, Some(limit))),
        };
        self.watch.answered();
        self.set_loaded(true);
        let report = &loaded.report;
        let mut stderr: Vec<String> = report.errors.clone();
        if report.errors_total > report.errors.len() {
            stderr.push(format!(
                "... {} more script errors",
                report.errors_total - report.errors.len()
            ));
        }
        let error = report.uncaught.first().map(|first| ExecutionError {
            error_type: UNCAUGHT_ERROR.to_owned(),
            message: first.lines().next().unwrap_or_default().to_owned(),
            traceback: report.uncaught.join("\n"),
            line: None,
        });
        Ok(ExecutionResult {
            stdout: format!(
                "The page loaded in {:.0} ms.",
                loaded.elapsed.as_secs_f64() * 1000.0
            ),
            stderr: stderr.join("\n"),
            error,
            duration_ms: elapsed_ms(started),
        })
    }

    async fn result_notes(&self) -> Result<Vec<String>, WorkerFault> {
        if !self.is_loaded() {
            return Ok(Vec::new());
        }
        // What the page asked for since it was loaded, late requests of its scripts included.
        let report = self.worker.page_report().await;
        if report.refused_total > 0 {
            self.record_refused(&report);
        }
        Ok(refused_note(&report).into_iter().collect())
    }

    async fn render_view(
        &self,
        target: &TargetView,
        _width: u32,
        _height: u32,
    ) -> Result<ViewRender, WorkerFault> {
        let viewport = match viewport_of(target.view.as_deref(), self.settings.viewport) {
            Ok(viewport) => viewport,
            Err(why) => return Ok(ViewRender::Unavailable(why)),
        };
        let view = label(viewport);
        let shot = Shot {
            viewport: Some(viewport),
            scroll: Some((0.0, 0.0)),
            full_page: false,
        };
        match self.shoot(&view, shot).await? {
            Ok(render) => Ok(ViewRender::Rendered {
                view,
                picture: render.picture,
            }),
            Err(why) => Ok(ViewRender::Unavailable(why)),
        }
    }

    async fn overview(&self) -> Result<ToolOutput, ToolError> {
        let viewport = self.settings.viewport;
        let view = label(viewport);
        let shot = Shot {
            viewport: Some(viewport),
            scroll: Some((0.0, 0.0)),
            full_page: false,
        };
        let render = self
            .shoot(&view, shot)
            .await
            .map_err(tool_error)?
            .map_err(ToolError::Recoverable)?;
        let height = match self.worker.element_boxes("html").await {
            Ok(matched) => matched.elements.first().map(|html| html.height),
            Err(err @ WebError::Lost(_)) => return Err(tool_error(self.fault(err, None))),
            Err(_) => None,
        };
        let below = match height {
            Some(height) if height > f64::from(viewport.height) + 1.0 => format!(
                " The page is {height:.0} px tall: {:.0} px are below the window (scroll_page shows them).",
                height - f64::from(viewport.height)
            ),
            _ => " The whole page fits in the window.".to_owned(),
        };
        Ok(ToolOutput {
            text: format!("The page in its {view} window, scrolled to the top.{below}"),
            images: vec![ImageData::png(render.picture.image.data.clone())],
            renders: vec![render],
            ..ToolOutput::default()
        })
    }

    fn tools(&self, role: ToolRole) -> Vec<ToolSpec> {
        self.tools.specs(role)
    }

    async fn call_tool(
        &self,
        role: ToolRole,
        name: &str,
        arguments: Value,
    ) -> Result<ToolOutput, ToolError> {
        self.tools.invoke(self, role, name, arguments).await
    }

    async fn save_result(
        &self,
        program: &str,
        limit: Duration,
        folder: &Path,
    ) -> Result<Vec<PathBuf>, WorkerFault> {
        let result = self.execute(program, limit).await?;
        if !self.is_loaded() {
            return Err(WorkerFault::other(format!(
                "the final page no longer loads: {}",
                result.error.map(|e| e.message).unwrap_or_default()
            )));
        }
        let io = |path: &Path, err: std::io::Error| {
            WorkerFault::other(format!("{}: {err}", path.display())).with_source(err)
        };
        let page = folder.join(FINAL_PAGE);
        viga_io::files::write_atomic(&page, program.as_bytes()).map_err(|err| io(&page, err))?;
        let view = label(self.settings.viewport);
        let shot = Shot {
            viewport: Some(self.settings.viewport),
            scroll: Some((0.0, 0.0)),
            full_page: false,
        };
        let render = self.shoot(&view, shot).await?.map_err(WorkerFault::other)?;
        let screenshot = folder.join(FINAL_SCREENSHOT);
        viga_io::files::write_atomic(&screenshot, &render.picture.image.data)
            .map_err(|err| io(&screenshot, err))?;
        Ok(vec![page, screenshot])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn viewports_are_width_by_height() {
        assert_eq!(
            parse_viewport("390x844"),
            Ok(Viewport {
                width: 390,
                height: 844
            })
        );
        assert_eq!(viewport_of(None, DEFAULT_VIEWPORT), Ok(DEFAULT_VIEWPORT));
        for bad in ["390", "0x10", "wide", "5000x10"] {
            assert!(parse_viewport(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_window_is_the_given_size_else_the_target_pictures_else_the_default() {
        let folder = tempfile::tempdir().unwrap();
        let shot = folder.path().join("shot.png");
        std::fs::write(&shot, viga_testkit::picture::halves_png(390, 844)).unwrap();
        let targets = [viga_core::TargetSpec::picture(&shot)];
        let window = |given: Option<&str>, targets: &[viga_core::TargetSpec]| {
            PageSettings::for_targets(given, targets).map(|settings| settings.viewport)
        };
        let phone = Viewport {
            width: 390,
            height: 844,
        };
        assert_eq!(window(None, &targets).unwrap(), phone);
        assert_eq!(window(Some("390x844"), &[]).unwrap(), phone);
        assert_eq!(window(None, &[]).unwrap(), DEFAULT_VIEWPORT);
        let err = window(Some("wide"), &targets).unwrap_err();
        assert!(matches!(err, ViewportChoiceError::Given(_)), "{err}");
        let missing = [viga_core::TargetSpec::picture(
            folder.path().join("gone.png"),
        )];
        let err = window(None, &missing).unwrap_err().to_string();
        assert!(err.contains("gone.png cannot be read"), "{err}");
        std::fs::write(&shot, viga_testkit::picture::halves_png(5000, 10)).unwrap();
        let err = window(None, &targets).unwrap_err().to_string();
        assert!(err.contains("cannot be a window"), "{err}");
    }

    #[test]
    fn refused_requests_are_named_and_counted() {
        assert_eq!(refused_note(&PageReport::default()), None);
        let report = PageReport {
            refused: (0..10)
                .map(|n| viga_web::RefusedRequest {
                    url: format!("https://cdn.example/{n}.png"),
                    resource_type: "Image".to_owned(),
                })
                .collect(),
            refused_total: 12,
            ..PageReport::default()
        };
        let note = refused_note(&report).unwrap();
        assert!(note.contains("asked for 12 resource(s)"), "{note}");
        assert!(note.contains("https://cdn.example/7.png (Image)"), "{note}");
        assert!(!note.contains("8.png"), "{note}");
        assert!(note.contains("and 4 more"), "{note}");
    }
}
