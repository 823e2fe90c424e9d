//! A slide worker: runs python-pptx programs and renders their decks in one warm LibreOffice,
//! supervised like the Blender worker: a per-call limit, a lost or hung renderer killed with
//! its process group and restarted, and an error that says so.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Mutex;
use viga_locate::{NotFound, real_folder};
use viga_process::{Confinement, Recovery, ScratchFolder, WorkerLost};

use crate::locate::SlideTools;
use crate::office::{OFFICE_SCRIPT, OfficeLaunch, OfficeProcess};
use crate::program::{self, DECK_FILE, ProgramLaunch, ProgramRun, ProgramStatus, RUNNER_SCRIPT};
use crate::structure::{DeckStructure, SlideBlocks};

/// The widest picture a worker renders (a zoomed region is rendered from a slide this wide at
/// most).
pub const MAX_RENDER_WIDTH: u32 = 8192;
/// The longest program a worker accepts.
pub const MAX_PROGRAM_BYTES: usize = 4 * 1024 * 1024;

#[derive(Debug, Clone)]
pub struct SlidesConfig {
    pub tools: SlideTools,
    /// Limit of one renderer call (a render, a structure read).
    pub call_timeout: Duration,
    /// Default limit of one program; [`SlideWorker::run_program`] may pass its own.
    pub program_timeout: Duration,
    /// Limit for LibreOffice to start.
    pub startup_timeout: Duration,
    /// Start the renderer and every program through this launcher (no network, writes only
    /// in the worker's scratch folder).
    pub confinement: Option<Confinement>,
    /// Slides rendered or described per deck at most; the rest are counted, not rendered.
    pub max_slides: usize,
    /// A deck with more slides than this is not opened for rendering at all (LibreOffice lays
    /// out every slide of a deck it opens: minutes for 10,000).
    pub max_deck_slides: usize,
    /// Shapes described per slide at most.
    pub max_shapes: usize,
    /// The largest deck a program may leave.
    pub max_deck_bytes: u64,
    /// The largest slide picture read back.
    pub max_image_bytes: u64,
    /// Name in logs.
    pub name: String,
}

impl SlidesConfig {
    pub fn new(tools: SlideTools) -> Self {
        Self {
            tools,
            call_timeout: Duration::from_secs(60),
            program_timeout: Duration::from_secs(60),
            startup_timeout: Duration::from_secs(60),
            confinement: None,
            max_slides: 50,
            max_deck_slides: 1000,
            max_shapes: 200,
            max_deck_bytes: 100 * 1024 * 1024,
            max_image_bytes: 64 * 1024 * 1024,
            name: "slides".to_owned(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SlidesError {
    #[error(transparent)]
    NotFound(#[from] NotFound),
    #[error("could not start the slide renderer: {0}")]
    Start(String),
    /// The request cannot be done as asked (a width of 0, a region outside the slide).
    #[error("{0}")]
    BadRequest(String),
    /// LibreOffice or python-pptx answered that it could not do it (a deck that does not
    /// open, a slide that does not exist). The renderer is fine.
    #[error("the slide renderer refused `{op}`: {message}")]
    Refused { op: &'static str, message: String },
    /// The renderer hung or died during the call; `recovery` says whether it was restarted.
    #[error(transparent)]
    Lost(WorkerLost),
    /// What the renderer left could not be used (a link, too large, not a picture).
    #[error("unusable output of `{op}`: {message}")]
    Output { op: &'static str, message: String },
    #[error("{0}")]
    Io(String),
}

/// A deck a program saved (or one imported), kept outside the scratch folder where programs
/// cannot change it; removed when dropped.
#[derive(Debug)]
pub struct Deck {
    path: PathBuf,
    bytes: u64,
}

impl Deck {
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn size(&self) -> u64 {
        self.bytes
    }

    /// The .pptx file's bytes (for a run folder).
    pub fn read(&self) -> std::io::Result<Vec<u8>> {
        std::fs::read(&self.path)
    }
}

impl Drop for Deck {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// A program's run and, when it saved one, its deck.
#[derive(Debug)]
pub struct ProgramResult {
    pub run: ProgramRun,
    pub deck: Option<Deck>,
}

/// One rendered slide.
#[derive(Debug, Clone)]
pub struct SlideImage {
    /// 1-based.
    pub number: usize,
    pub width: u32,
    pub height: u32,
    pub png: Vec<u8>,
}

/// A deck's slides as pictures.
#[derive(Debug, Clone)]
pub struct DeckRender {
    /// Slides in the deck; past [`SlidesConfig::max_slides`] they are not rendered.
    pub slide_count: usize,
    pub slides: Vec<SlideImage>,
}

/// A part of a slide, in fractions of its width and height from its top left corner.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Region {
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

#[derive(Debug, Deserialize)]
struct RenderReply {
    slide_count: usize,
    images: Vec<RenderedFile>,
}

#[derive(Debug, Deserialize)]
struct RenderedFile {
    slide: usize,
    file: String,
    width: u32,
    height: u32,
}

/// A supervised slide worker.
#[derive(Debug)]
pub struct SlideWorker {
    config: SlidesConfig,
    scratch: ScratchFolder,
    scripts: PathBuf,
    kept: PathBuf,
    /// Folders the processes read, for a launcher that limits reads.
    readable: Vec<PathBuf>,
    office: Mutex<Option<OfficeProcess>>,
    office_version: String,
    next_id: AtomicU64,
    restarts: AtomicU32,
    /// Serialises programs, so one program's leftovers are gone before the next starts.
    program_lock: Mutex<()>,
    /// Private to this worker (mode 0700): `scratch/` (where the processes may write),
    /// `scripts/`, `kept/` (decks, written by viga only). Held for its removal on drop:
    /// last, so the processes (above) are killed before their folder goes.
    _root: viga_process::PrivateFolder,
}

impl SlideWorker {
    /// Starts LibreOffice and waits until it is ready.
    pub async fn start(config: SlidesConfig) -> Result<Self, SlidesError> {
        let root = viga_process::private_folder("viga-slides-").map_err(|err| {
            SlidesError::Start(format!("could not make the worker's folder: {err}"))
        })?;
        let make = |name: &str| {
            let folder = root.path().join(name);
            std::fs::create_dir(&folder)
                .map(|()| folder)
                .map_err(|err| SlidesError::Start(format!("could not make {name}: {err}")))
        };
        let scratch = make("scratch")?;
        let scripts = make("scripts")?;
        let kept = make("kept")?;
        for (name, text) in [
            ("office.py", OFFICE_SCRIPT),
            ("run_program.py", RUNNER_SCRIPT),
        ] {
            std::fs::write(scripts.join(name), text)
                .map_err(|err| SlidesError::Start(format!("could not write {name}: {err}")))?;
        }
        let mut readable = vec![scripts.clone(), kept.clone()];
        readable.extend(python_folders(&config.tools.python));
        if let Some(install) = config.tools.office_program_dir.parent() {
            readable.push(install.to_path_buf());
            // Debian links parts of the install to /etc and /var (the registry, the
            // bundled extensions): LibreOffice does not start without them.
            readable.extend(linked_outside(install));
        }
        let worker = Self {
            scratch: ScratchFolder::new(scratch),
            _root: root,
            scripts,
            kept,
            readable,
            office: Mutex::new(None),
            office_version: String::new(),
            next_id: AtomicU64::new(0),
            restarts: AtomicU32::new(0),
            program_lock: Mutex::new(()),
            config,
        };
        let office = OfficeProcess::start(&worker.office_launch())
            .await
            .map_err(SlidesError::Start)?;
        tracing::info!(worker = %worker.config.name, office = %office.ready.office, pptx = %office.ready.pptx, "slide renderer ready");
        let office_version = office.ready.office.clone();
        *worker.office.lock().await = Some(office);
        Ok(Self {
            office_version,
            ..worker
        })
    }

    /// LibreOffice's version, as it reported it.
    pub fn office_version(&self) -> &str {
        &self.office_version
    }

    /// How many times the renderer was restarted.
    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// What the containment launcher reported for the running renderer (JSON), if any.
    pub async fn contained_report(&self) -> Option<String> {
        self.office.lock().await.as_ref()?.contained.clone()
    }

    /// Where the worker's processes may write.
    pub fn scratch_folder(&self) -> &Path {
        self.scratch.path()
    }

    /// The process id of the running renderer (the leader of its process group).
    pub async fn renderer_pid(&self) -> Option<u32> {
        self.office.lock().await.as_ref()?.pid()
    }

    /// Runs a python-pptx program in a fresh Python (its own working folder, `limit` or the
    /// configured one); its deck, if it saved one, is kept. A program that fails, saves
    /// nothing or runs too long is a [`ProgramStatus`], not an error.
    pub async fn run_program(
        &self,
        source: &str,
        limit: Option<Duration>,
    ) -> Result<ProgramResult, SlidesError> {
        if source.len() > MAX_PROGRAM_BYTES {
            return Err(SlidesError::BadRequest(format!(
                "the program is {} bytes; at most {MAX_PROGRAM_BYTES} are run",
                source.len()
            )));
        }
        let _one_at_a_time = self.program_lock.lock().await;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let work = PathBuf::from(format!("program-{id}"));
        std::fs::create_dir(self.scratch.path().join(&work)).map_err(|err| {
            SlidesError::Io(format!("could not make the program's folder: {err}"))
        })?;
        let runner = self.scripts.join("run_program.py");
        let launch = ProgramLaunch {
            python: &self.config.tools.python,
            runner: &runner,
            scratch: &self.scratch,
            work: &work,
            readable: &self.readable,
            confinement: self.config.confinement.as_ref(),
            limit: limit.unwrap_or(self.config.program_timeout),
        };
        let mut run = program::run(source, &launch)
            .await
            .map_err(SlidesError::Io)?;
        let mut deck = None;
        if run.status == ProgramStatus::Saved {
            let kept = self.kept.join(format!("deck-{id}.pptx"));
            match self
                .scratch
                .copy_out(&work.join(DECK_FILE), self.config.max_deck_bytes, &kept)
            {
                Ok(bytes) => deck = Some(Deck { path: kept, bytes }),
                Err(err) => {
                    run.status = ProgramStatus::NoDeck {
                        detail: format!(
                            "the deck cannot be used: {err} (at most {} bytes)",
                            self.config.max_deck_bytes
                        ),
                    }
                }
            }
        }
        let _ = std::fs::remove_dir_all(self.scratch.path().join(&work));
        Ok(ProgramResult { run, deck })
    }

    /// Copies a .pptx file (a reference deck) in, to render or read like a program's.
    pub fn import_deck(&self, path: &Path) -> Result<Deck, SlidesError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let kept = self.kept.join(format!("deck-{id}.pptx"));
        let size = std::fs::metadata(path)
            .map_err(|err| SlidesError::Io(format!("cannot read {}: {err}", path.display())))?
            .len();
        if size > self.config.max_deck_bytes {
            return Err(SlidesError::BadRequest(format!(
                "{} is {size} bytes; at most {} are rendered",
                path.display(),
                self.config.max_deck_bytes
            )));
        }
        std::fs::copy(path, &kept)
            .map_err(|err| SlidesError::Io(format!("cannot copy {}: {err}", path.display())))?;
        Ok(Deck {
            path: kept,
            bytes: size,
        })
    }

    /// Every slide (up to [`SlidesConfig::max_slides`]) as a PNG `width` pixels wide.
    pub async fn render(&self, deck: &Deck, width: u32) -> Result<DeckRender, SlidesError> {
        self.render_slides(deck, None, width).await
    }

    /// One slide (1-based) as a PNG `width` pixels wide.
    pub async fn render_slide(
        &self,
        deck: &Deck,
        number: usize,
        width: u32,
    ) -> Result<SlideImage, SlidesError> {
        let render = self.render_slides(deck, Some(number), width).await?;
        render
            .slides
            .into_iter()
            .next()
            .ok_or_else(|| SlidesError::Output {
                op: "render",
                message: format!("slide {number} was not rendered"),
            })
    }

    /// A region of one slide, zoomed: the slide is rendered large enough that the region is
    /// `width` pixels wide, and the region is cut out.
    pub async fn render_region(
        &self,
        deck: &Deck,
        number: usize,
        region: Region,
        width: u32,
    ) -> Result<SlideImage, SlidesError> {
        let inside = |start: f64, size: f64| {
            start.is_finite()
                && size.is_finite()
                && start >= 0.0
                && size > 0.0
                && start + size <= 1.0 + 1e-9
        };
        if !inside(region.x, region.width) || !inside(region.y, region.height) {
            return Err(SlidesError::BadRequest(format!(
                "the region {region:?} is not inside the slide: x, y, width and height are fractions of the slide (0 to 1), with x + width and y + height at most 1"
            )));
        }
        let full_width = (f64::from(width) / region.width)
            .ceil()
            .min(f64::from(MAX_RENDER_WIDTH));
        let slide = self.render_slide(deck, number, full_width as u32).await?;
        crop(&slide, region).map_err(|message| SlidesError::Output {
            op: "render",
            message,
        })
    }

    /// Slide `number`'s blocks (1-based) as SlideBench's reference-based metrics read them.
    pub async fn blocks(&self, deck: &Deck, number: usize) -> Result<SlideBlocks, SlidesError> {
        let request = json!({
            "op": "blocks",
            "deck": deck.path,
            "slide": number,
            "max_shapes": self.config.max_shapes,
        });
        let mut reply = self.office_call("blocks", &request).await?;
        serde_json::from_value(reply["blocks"].take()).map_err(|err| SlidesError::Output {
            op: "blocks",
            message: err.to_string(),
        })
    }

    /// The deck's structure, as python-pptx reads it.
    pub async fn structure(&self, deck: &Deck) -> Result<DeckStructure, SlidesError> {
        let request = json!({
            "op": "structure",
            "deck": deck.path,
            "max_slides": self.config.max_slides,
            "max_shapes": self.config.max_shapes,
        });
        let mut reply = self.office_call("structure", &request).await?;
        serde_json::from_value(reply["structure"].take()).map_err(|err| SlidesError::Output {
            op: "structure",
            message: err.to_string(),
        })
    }

    /// Stops LibreOffice.
    pub async fn shutdown(self) {
        if let Some(office) = self.office.lock().await.take() {
            office.shutdown().await;
        }
    }

    async fn render_slides(
        &self,
        deck: &Deck,
        number: Option<usize>,
        width: u32,
    ) -> Result<DeckRender, SlidesError> {
        if width == 0 || width > MAX_RENDER_WIDTH {
            return Err(SlidesError::BadRequest(format!(
                "a slide is rendered 1 to {MAX_RENDER_WIDTH} pixels wide, not {width}"
            )));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let out = PathBuf::from(format!("render-{id}"));
        let out_dir = self.scratch.path().join(&out);
        std::fs::create_dir(&out_dir)
            .map_err(|err| SlidesError::Io(format!("could not make a render folder: {err}")))?;
        let request = json!({
            "op": "render",
            "deck": deck.path,
            "out_dir": out_dir,
            "width": width,
            "slides": number.map(|n| vec![n]),
            "max_slides": self.config.max_slides,
            "max_deck_slides": self.config.max_deck_slides,
        });
        let asked = AskedSlides { number, width };
        let result = self.collect_render(&out, &request, &asked).await;
        let _ = std::fs::remove_dir_all(&out_dir);
        result
    }

    async fn collect_render(
        &self,
        out: &Path,
        request: &Value,
        asked: &AskedSlides,
    ) -> Result<DeckRender, SlidesError> {
        let reply = self.office_call("render", request).await?;
        let reply: RenderReply =
            serde_json::from_value(reply).map_err(|err| SlidesError::Output {
                op: "render",
                message: err.to_string(),
            })?;
        let mut slides: Vec<SlideImage> = Vec::with_capacity(reply.images.len());
        for image in reply.images {
            let unusable = |message: String| SlidesError::Output {
                op: "render",
                message,
            };
            // Only the files the renderer was asked for: a slide asked for, once, under the
            // name it is given for that slide, as wide as asked.
            let expected_file = format!("slide-{}.png", image.slide);
            let last = match asked.number {
                Some(number) => number.min(reply.slide_count),
                None => reply.slide_count.min(self.config.max_slides),
            };
            let wanted = asked.number.is_none_or(|number| number == image.slide)
                && (1..=last).contains(&image.slide)
                && !slides.iter().any(|kept| kept.number == image.slide);
            if image.file != expected_file || !wanted || image.width != asked.width {
                return Err(unusable(format!(
                    "the renderer answered with {:?} for slide {} at {} pixels wide, which viga did not ask for",
                    image.file, image.slide, image.width
                )));
            }
            let png = self
                .scratch
                .read(&out.join(&image.file), self.config.max_image_bytes)
                .map_err(|err| unusable(format!("slide {}: {err}", image.slide)))?;
            let (width, height) =
                image::load_from_memory_with_format(&png, image::ImageFormat::Png)
                    .map(|picture| (picture.width(), picture.height()))
                    .map_err(|err| {
                        unusable(format!("slide {} is not a PNG: {err}", image.slide))
                    })?;
            if (width, height) != (image.width, image.height) {
                return Err(unusable(format!(
                    "slide {} is {width}x{height}, not the {}x{} asked for",
                    image.slide, image.width, image.height
                )));
            }
            slides.push(SlideImage {
                number: image.slide,
                width,
                height,
                png,
            });
        }
        Ok(DeckRender {
            slide_count: reply.slide_count,
            slides,
        })
    }

    /// One request to the renderer; a lost renderer is killed and started again.
    async fn office_call(&self, op: &'static str, request: &Value) -> Result<Value, SlidesError> {
        let mut office = self.office.lock().await;
        if office.is_none() {
            // An earlier restart failed: try again before giving up on this call.
            let started = OfficeProcess::start(&self.office_launch()).await;
            *office = Some(started.map_err(SlidesError::Start)?);
        }
        let Some(process) = office.as_mut() else {
            return Err(SlidesError::Start("the renderer is not running".to_owned()));
        };
        match process.call(request, self.config.call_timeout).await {
            Ok(reply) if reply["ok"] == true => Ok(reply),
            Ok(reply) => Err(SlidesError::Refused {
                op,
                message: reply["error"]
                    .as_str()
                    .unwrap_or("no reason given")
                    .to_owned(),
            }),
            Err(reason) => {
                process.kill();
                *office = None;
                self.restarts.fetch_add(1, Ordering::Relaxed);
                let recovery = match OfficeProcess::start(&self.office_launch()).await {
                    Ok(restarted) => {
                        *office = Some(restarted);
                        // A renderer keeps no state between calls: nothing to restore.
                        Recovery::Restarted {
                            restored_checkpoint: None,
                        }
                    }
                    Err(why) => Recovery::RestartFailed(why),
                };
                tracing::warn!(worker = %self.config.name, op, %reason, %recovery, "slide renderer lost");
                Err(SlidesError::Lost(WorkerLost {
                    worker: "the slide renderer",
                    op,
                    reason,
                    recovery,
                }))
            }
        }
    }

    fn office_launch(&self) -> OfficeLaunch {
        OfficeLaunch {
            python: self.config.tools.python.clone(),
            script: self.scripts.join("office.py"),
            office_program_dir: self.config.tools.office_program_dir.clone(),
            scratch: self.scratch.path().to_path_buf(),
            readable: self.readable.clone(),
            confinement: self.config.confinement.clone(),
            startup_timeout: self.config.startup_timeout,
            name: self.config.name.clone(),
        }
    }
}

/// The venv and the Python installation it was made from (links resolved), which a launcher
/// that limits reads must let Python read.
fn python_folders(python: &Path) -> Vec<PathBuf> {
    let mut folders = Vec::new();
    // …/venv/bin/python: the venv is two levels up.
    folders.extend(
        python
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf),
    );
    folders.extend(real_folder(python).and_then(|bin| bin.parent().map(Path::to_path_buf)));
    folders
}

/// Where the links in LibreOffice's install (to a few levels down) lead outside it and
/// outside `/usr`, which a launcher that limits reads must let it read.
fn linked_outside(install: &Path) -> Vec<PathBuf> {
    const DEPTH: usize = 4;
    const MOST_ENTRIES: usize = 20_000;
    let mut found = Vec::new();
    let mut folders = vec![(install.to_path_buf(), 0)];
    let mut seen = 0;
    while let Some((folder, depth)) = folders.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MOST_ENTRIES {
                return found;
            }
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_symlink() {
                if let Ok(target) = path.canonicalize()
                    && !target.starts_with(install)
                    && !target.starts_with("/usr")
                    && !found.contains(&target)
                {
                    found.push(target);
                }
            } else if kind.is_dir() && depth < DEPTH {
                folders.push((path, depth + 1));
            }
        }
    }
    found
}

fn crop(slide: &SlideImage, region: Region) -> Result<SlideImage, String> {
    let picture = image::load_from_memory_with_format(&slide.png, image::ImageFormat::Png)
        .map_err(|err| err.to_string())?;
    let scale = |fraction: f64, size: u32| (fraction * f64::from(size)).round() as u32;
    let x = scale(region.x, slide.width).min(slide.width.saturating_sub(1));
    let y = scale(region.y, slide.height).min(slide.height.saturating_sub(1));
    let width = scale(region.width, slide.width).clamp(1, slide.width - x);
    let height = scale(region.height, slide.height).clamp(1, slide.height - y);
    let part = picture.crop_imm(x, y, width, height);
    let mut png = Vec::new();
    part.write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
        .map_err(|err| err.to_string())?;
    Ok(SlideImage {
        number: slide.number,
        width,
        height,
        png,
    })
}

/// Which slides a render asked for (one, or every slide) and how wide.
struct AskedSlides {
    number: Option<usize>,
    width: u32,
}
