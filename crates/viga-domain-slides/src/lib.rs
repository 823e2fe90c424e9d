//! Slides as a domain of the loop (AutoPresent / SlideBench): a program is Python using
//! python-pptx that builds a whole deck and saves it where `VIGA_DECK_PATH` says; each
//! program runs in a fresh Python with the run's time limit, and its deck is rendered slide
//! by slide by a warm LibreOffice ([`viga_slides::SlideWorker`]). A target picture shows one
//! slide (its view is the slide's number, `2` or `slide2`; the first slide by default). The
//! verifier is shown every slide as one labelled montage and may look at any slide, zoom into
//! a region and read a slide's structure (shapes, text, fonts, colours, positions) as text.
//!
//! **Owns:** the domain ([`SlidesDomain`]), its settings as run folders record them, its
//! kind for reports and resume ([`SlidesKind`]), its prompts (`prompts/`).
//!
//! **Must not:** parse command lines, print, or start its renderer: the front end starts the
//! [`viga_slides::SlideWorker`] under its containment and hands it in.

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

mod tools;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use viga_contain::ContainedWorkers;
use viga_protocol::iteration::{ExecutionError, ExecutionResult};
use viga_protocol::message::ToolSpec;
use viga_sandbox::Access;
use viga_sandbox::ContainmentStatus;
use viga_skills::montage::{View, montage};
use viga_skills::{CapturedRender, ToolError, ToolOutput};
use viga_slides::{Deck, ProgramStatus, SlideTools, SlideWorker, SlidesConfig, SlidesError};

use viga_core::domain::{
    Domain, FaultKind, ProgramFormat, RoleTools, TargetView, ToolRole, ViewRender, WorkerFault,
    WorkerWatch,
};
use viga_core::renderer::{elapsed_ms, lost, not_started, picture};
use viga_core::{CoreError, Prompts};

/// The slides domain as run folders know it.
#[derive(Debug, Clone, Copy, Default)]
pub struct SlidesKind;

#[async_trait]
impl viga_core::DomainKind for SlidesKind {
    fn name(&self) -> &'static str {
        SLIDES_DOMAIN
    }

    fn describe(&self, _recorded: &viga_core::RecordedDomain, _has_target: bool) -> String {
        "slides: python-pptx programs, each slide rendered by LibreOffice".to_owned()
    }

    fn view_words(&self, view: Option<&str>, _frame: Option<i32>) -> String {
        match slide_of(view) {
            Ok(number) => format!("slide {number}"),
            Err(_) => view.unwrap_or_default().to_owned(),
        }
    }

    async fn reopen(
        &self,
        run_folder: &Path,
        contained: &ContainedWorkers,
        _provider: Arc<dyn viga_provider::Provider>,
    ) -> Result<Arc<dyn Domain>, CoreError> {
        let settings = SlidesDomain::recorded_settings(run_folder)?;
        let (config, _) = viga_core::RunFolder::open(run_folder)?.read_args()?;
        Ok(Arc::new(
            start(settings, contained, config.program_timeout).await?,
        ))
    }
}

/// A LibreOffice of its own for slides, its processes (LibreOffice and every python-pptx
/// program) started under `contained`, reaching what `reads` names besides their own folder,
/// with what holds for them (the launcher's report).
pub async fn start_renderer(
    contained: &ContainedWorkers,
    reads: &Access,
    program_timeout: Duration,
) -> Result<(SlideWorker, ContainmentStatus), CoreError> {
    let not_started = |err| CoreError::not_started("the slide renderer did not start", err);
    let tools = SlideTools::locate().map_err(|err| CoreError::not_started("slides", err))?;
    let mut config = SlidesConfig::new(tools);
    config.confinement = contained.confinement(reads).map_err(not_started)?;
    config.program_timeout = program_timeout;
    let worker = SlideWorker::start(config)
        .await
        .map_err(|err| CoreError::not_started("the slide renderer did not start", err))?;
    let status = contained
        .renderer_status(worker.contained_report().await.as_deref())
        .map_err(not_started)?;
    Ok((worker, status))
}

/// The slides domain on a LibreOffice of its own (see [`start_renderer`]), reading the
/// settings' asset folder; the run records what holds for it.
pub async fn start(
    settings: SlidesSettings,
    contained: &ContainedWorkers,
    program_timeout: Duration,
) -> Result<SlidesDomain, CoreError> {
    let reads = Access::reading(settings.assets.iter().cloned().collect());
    let (worker, status) = start_renderer(contained, &reads, program_timeout).await?;
    Ok(SlidesDomain::new(settings, Arc::new(worker))?.with_containment(status))
}

/// The domain's name, in run folders and args.json.
pub const SLIDES_DOMAIN: &str = "slides";
/// The deck a finished run leaves in its folder, beside one picture per slide.
pub const FINAL_DECK: &str = "final.pptx";
/// The folder of the final deck's slide pictures (`slide-1.png`, ...).
pub const FINAL_SLIDES_DIR: &str = "final_slides";
/// `error_type` of a program that ran to its end without saving a deck.
pub const NO_DECK_ERROR: &str = "NoDeck";
/// `error_type` of a program that ended without a report (killed, `os._exit`, a crash).
pub const PROGRAM_DIED_ERROR: &str = "ProgramDied";
/// The most slides the overview shows; the verifier can ask for any other.
const OVERVIEW_SLIDES: usize = 12;

/// How the slides of a run are looked at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlidesSettings {
    /// Width in pixels of the slide pictures the verifier is shown (its overview, each
    /// slide it asks for, each zoom).
    pub view_width: u32,
    /// A folder of pictures the programs may put on slides (read-only), listed for the model.
    #[serde(default)]
    pub assets: Option<PathBuf>,
}

impl Default for SlidesSettings {
    fn default() -> Self {
        Self {
            view_width: 960,
            assets: None,
        }
    }
}

impl SlidesSettings {
    /// What is wrong with the settings, in words a person can act on.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if !(64..=viga_slides::MAX_RENDER_WIDTH).contains(&self.view_width) {
            problems.push(format!(
                "the slide view width must be 64 to {} pixels, not {}",
                viga_slides::MAX_RENDER_WIDTH,
                self.view_width
            ));
        }
        if let Some(assets) = self.assets.as_deref().filter(|folder| !folder.is_dir()) {
            problems.push(format!(
                "the assets folder {} does not exist; give a folder of pictures the slides may use",
                assets.display()
            ));
        }
        problems
    }

    /// The pictures in the assets folder, sorted (at most 200), for the model's brief.
    fn asset_files(&self) -> Vec<PathBuf> {
        let Some(folder) = &self.assets else {
            return Vec::new();
        };
        // Named to the model by the real path the contained program is granted.
        let folder = viga_io::files::real_path(folder);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| {
                path.extension().and_then(|e| e.to_str()).is_some_and(|e| {
                    ["png", "jpg", "jpeg", "gif", "bmp"].contains(&e.to_ascii_lowercase().as_str())
                })
            })
            .collect();
        files.sort();
        files.truncate(200);
        files
    }
}

/// The slide a target's view names: `2`, `slide2`, `slide_2`, `Slide 2` (1-based); the first
/// slide when it names none.
pub fn slide_of(view: Option<&str>) -> Result<usize, String> {
    let Some(view) = view else {
        return Ok(1);
    };
    let lower = view.trim().to_ascii_lowercase();
    let digits = lower.strip_prefix("slide").map_or(lower.as_str(), |rest| {
        rest.trim_start_matches(['_', '-', ' '])
    });
    let number = (!digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()))
        .then(|| digits.parse::<usize>().ok())
        .flatten()
        .filter(|number| *number >= 1);
    number.ok_or_else(|| {
        format!(
            "the target view {view:?} names no slide; name a slide by its number, e.g. 2=slide2.png or slide2=slide2.png"
        )
    })
}

/// A deck built by whole python-pptx programs, each run in a fresh Python.
pub struct SlidesDomain {
    settings: SlidesSettings,
    worker: Arc<SlideWorker>,
    watch: WorkerWatch,
    /// The deck the last program saved; `None` when it saved none.
    deck: tokio::sync::Mutex<Option<Deck>>,
    /// What the last program printed before it was stopped at its time limit.
    stopped_output: Mutex<Option<String>>,
    tools: RoleTools<SlidesDomain>,
    /// What containment the renderer runs under, as its launcher reported it.
    containment: Option<ContainmentStatus>,
}

impl std::fmt::Debug for SlidesDomain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlidesDomain")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl SlidesDomain {
    pub fn new(settings: SlidesSettings, worker: Arc<SlideWorker>) -> Result<Self, CoreError> {
        let tools = tools::registries()?;
        Ok(Self {
            settings,
            worker,
            watch: WorkerWatch::new(),
            deck: tokio::sync::Mutex::new(None),
            stopped_output: Mutex::new(None),
            tools,
            containment: None,
        })
    }

    /// Records that the renderer (LibreOffice and every python-pptx program) runs under
    /// `status`, as its containment launcher reported it, for the run folder.
    pub fn with_containment(mut self, status: ContainmentStatus) -> Self {
        self.containment = Some(status);
        self
    }

    /// The settings the slides run in `run_folder` recorded in its `args.json`; a run of
    /// another domain is refused.
    pub fn recorded_settings(run_folder: &Path) -> Result<SlidesSettings, CoreError> {
        viga_core::recorded_settings(run_folder, SLIDES_DOMAIN)
    }

    pub fn settings(&self) -> &SlidesSettings {
        &self.settings
    }

    /// A renderer error as the loop's fault, losses reported to the watch.
    fn fault(&self, err: SlidesError) -> WorkerFault {
        match err {
            SlidesError::Lost(worker_lost) => lost(&self.watch, worker_lost, None),
            SlidesError::Start(why) => not_started(
                &self.watch,
                format!("the slide renderer could not start: {why}"),
            ),
            SlidesError::Refused { .. } | SlidesError::BadRequest(_) => {
                WorkerFault::new(FaultKind::Refused, err.to_string())
            }
            err => WorkerFault::other(err.to_string()),
        }
    }

    /// The current deck's slide `number` at `width`, or why it cannot be shown in words for
    /// the model (no deck, no such slide).
    async fn slide_picture(
        &self,
        number: usize,
        width: u32,
    ) -> Result<Result<(Vec<u8>, u32, u32, f64), String>, WorkerFault> {
        let deck = self.deck.lock().await;
        let Some(deck) = deck.as_ref() else {
            return Ok(Err(NO_DECK_YET.to_owned()));
        };
        let started = Instant::now();
        match self.worker.render_slide(deck, number, width).await {
            Ok(slide) => {
                self.watch.answered();
                Ok(Ok((
                    slide.png,
                    slide.width,
                    slide.height,
                    elapsed_ms(started),
                )))
            }
            Err(err @ (SlidesError::Refused { .. } | SlidesError::BadRequest(_))) => {
                self.watch.answered();
                Ok(Err(err.to_string()))
            }
            Err(err) => Err(self.fault(err)),
        }
    }
}

/// Said when there is no deck to look at.
const NO_DECK_YET: &str = "the last program saved no deck, so there is nothing to look at";

/// A tool's failure: said to the model; a lost renderer is already reported to the watch, so
/// the loop rebuilds the deck and asks again.
fn tool_error(fault: WorkerFault) -> ToolError {
    ToolError::Recoverable(fault.message)
}

#[async_trait]
impl Domain for SlidesDomain {
    fn name(&self) -> &str {
        SLIDES_DOMAIN
    }

    fn program_format(&self) -> ProgramFormat {
        ProgramFormat::new(
            "python",
            "the whole python-pptx program that builds and saves the deck",
        )
        .with_aliases(&["py", "python3"])
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
            "python-pptx programs, slides rendered by LibreOffice {}",
            self.worker.office_version()
        )
    }

    fn worker_name(&self) -> &str {
        "Python"
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
        let mut brief = Vec::new();
        let mut slides: Vec<usize> = targets
            .iter()
            .filter_map(|target| slide_of(target.view.as_deref()).ok())
            .collect();
        slides.sort_unstable();
        slides.dedup();
        if !slides.is_empty() {
            let names: Vec<String> = slides.iter().map(usize::to_string).collect();
            brief.push(format!(
                "The target pictures show slide(s) {} of the deck: each is compared with a picture of that slide of your deck, so the deck must have them, in that order.",
                names.join(", ")
            ));
        }
        let pictures = self.settings.asset_files();
        if !pictures.is_empty() {
            let listed: Vec<String> = pictures
                .iter()
                .map(|path| format!("- {}", path.display()))
                .collect();
            brief.push(format!(
                "Pictures you may put on the slides (read-only; add them with slide.shapes.add_picture and their full path):\n{}",
                listed.join("\n")
            ));
        }
        (!brief.is_empty()).then(|| brief.join("\n"))
    }

    async fn check_targets(&self, targets: &[TargetView]) -> Result<Vec<String>, WorkerFault> {
        Ok(targets
            .iter()
            .filter_map(|target| slide_of(target.view.as_deref()).err())
            .collect())
    }

    async fn execute(
        &self,
        program: &str,
        limit: Duration,
    ) -> Result<ExecutionResult, WorkerFault> {
        // The deck of the program before is not this program's result.
        *self.deck.lock().await = None;
        let outcome = match self.worker.run_program(program, Some(limit)).await {
            Ok(outcome) => outcome,
            Err(err @ SlidesError::BadRequest(_)) => {
                return Ok(failed("ProgramTooLarge", err.to_string(), 0.0));
            }
            Err(err) => return Err(self.fault(err)),
        };
        let run = outcome.run;
        let mut result = ExecutionResult {
            stdout: run.stdout.text.clone(),
            stderr: run.stderr.text.clone(),
            error: None,
            duration_ms: run.elapsed.as_secs_f64() * 1000.0,
        };
        match run.status {
            ProgramStatus::Saved => {
                *self.deck.lock().await = outcome.deck;
            }
            ProgramStatus::Failed(error) => {
                result.error = Some(ExecutionError {
                    error_type: error.kind,
                    message: error.message,
                    traceback: error.traceback,
                    line: error.line,
                });
            }
            ProgramStatus::NoDeck { detail } => {
                result.error = Some(plain_error(NO_DECK_ERROR, detail));
            }
            ProgramStatus::Died { detail } => {
                result.error = Some(plain_error(
                    PROGRAM_DIED_ERROR,
                    format!("the program ended without finishing ({detail})"),
                ));
            }
            ProgramStatus::TimedOut { limit_ms } => {
                let printed = [run.stdout.text.as_str(), run.stderr.text.as_str()]
                    .iter()
                    .filter(|text| !text.is_empty())
                    .copied()
                    .collect::<Vec<_>>()
                    .join("\n");
                if let Ok(mut kept) = self.stopped_output.lock() {
                    *kept = Some(printed);
                }
                let limit = Duration::from_millis(limit_ms);
                return Err(WorkerFault::new(
                    FaultKind::TimedOut(limit),
                    format!(
                        "the program was still running after {:.1} s and was stopped with everything it started",
                        limit.as_secs_f64()
                    ),
                ));
            }
        }
        Ok(result)
    }

    fn last_program_output(&self) -> Option<String> {
        self.stopped_output.lock().ok()?.take()
    }

    async fn render_view(
        &self,
        target: &TargetView,
        width: u32,
        _height: u32,
    ) -> Result<ViewRender, WorkerFault> {
        let number = match slide_of(target.view.as_deref()) {
            Ok(number) => number,
            Err(why) => return Ok(ViewRender::Unavailable(why)),
        };
        let view = format!("slide{number}");
        // The slide at the target's width; its height follows the deck's aspect ratio (the
        // score resizes the target to it).
        match self.slide_picture(number, width).await? {
            Ok((png, width, height, ms)) => Ok(ViewRender::Rendered {
                picture: picture(png, width, height, ms),
                view,
            }),
            Err(why) => Ok(ViewRender::Unavailable(why)),
        }
    }

    async fn overview(&self) -> Result<ToolOutput, ToolError> {
        let deck = self.deck.lock().await;
        let Some(deck) = deck.as_ref() else {
            return Err(ToolError::Recoverable(NO_DECK_YET.to_owned()));
        };
        let started = Instant::now();
        let rendered = self
            .worker
            .render(deck, self.settings.view_width)
            .await
            .map_err(|err| tool_error(self.fault(err)))?;
        self.watch.answered();
        let ms = elapsed_ms(started) / rendered.slides.len().max(1) as f64;
        let shown: Vec<_> = rendered.slides.iter().take(OVERVIEW_SLIDES).collect();
        if shown.is_empty() {
            return Ok(ToolOutput::text("The deck has no slides."));
        }
        let views: Vec<View> = shown
            .iter()
            .map(|slide| View {
                label: format!("slide {}", slide.number),
                png: slide.png.clone(),
            })
            .collect();
        let image = montage(&views)?;
        let renders = shown
            .iter()
            .map(|slide| CapturedRender {
                view: format!("slide{}", slide.number),
                picture: picture(slide.png.clone(), slide.width, slide.height, ms),
                file: None,
            })
            .collect();
        let more = if rendered.slide_count > shown.len() {
            format!(
                " Only slides 1 to {} are shown; look at the others with show_slide.",
                shown.len()
            )
        } else {
            String::new()
        };
        Ok(ToolOutput {
            text: format!(
                "The deck has {} slide(s), shown in one labelled picture.{more}",
                rendered.slide_count
            ),
            images: vec![image],
            renders,
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
        if !result.succeeded() {
            return Err(WorkerFault::other(
                "the final program no longer builds its deck",
            ));
        }
        let deck = self.deck.lock().await;
        let Some(deck) = deck.as_ref() else {
            return Err(WorkerFault::other("the final program saved no deck"));
        };
        let io = |path: &Path, err: std::io::Error| {
            WorkerFault::other(format!("{}: {err}", path.display())).with_source(err)
        };
        let mut written = Vec::new();
        let path = folder.join(FINAL_DECK);
        let bytes = deck.read().map_err(|err| io(deck.path(), err))?;
        viga_io::files::write_atomic(&path, &bytes).map_err(|err| io(&path, err))?;
        written.push(path);
        let rendered = self
            .worker
            .render(deck, self.settings.view_width)
            .await
            .map_err(|err| self.fault(err))?;
        let slides = folder.join(FINAL_SLIDES_DIR);
        std::fs::create_dir_all(&slides).map_err(|err| io(&slides, err))?;
        for slide in rendered.slides {
            let path = slides.join(format!("slide-{}.png", slide.number));
            viga_io::files::write_atomic(&path, &slide.png).map_err(|err| io(&path, err))?;
            written.push(path);
        }
        Ok(written)
    }
}

fn plain_error(error_type: &str, message: String) -> ExecutionError {
    ExecutionError {
        error_type: error_type.to_owned(),
        message,
        traceback: String::new(),
        line: None,
    }
}

fn failed(error_type: &str, message: String, duration_ms: f64) -> ExecutionResult {
    ExecutionResult {
        error: Some(plain_error(error_type, message)),
        duration_ms,
        ..ExecutionResult::default()
    }
}

#[cfg(test)]
mod tests {
    use super::slide_of;

    #[test]
    fn slides_are_named_by_number() {
        for (view, slide) in [
            (None, 1),
            (Some("2"), 2),
            (Some("slide3"), 3),
            (Some("slide_4"), 4),
            (Some("Slide 5"), 5),
        ] {
            assert_eq!(slide_of(view), Ok(slide), "{view:?}");
        }
        for bad in ["0", "Camera1x", "slide", "-1"] {
            let err = slide_of(Some(bad)).unwrap_err();
            assert!(err.contains("names no slide"), "{bad}: {err}");
        }
    }
}
