//! The run folder, `output/<mode>/<timestamp>/<task>/`, written as the run goes:
//! `args.json` (the run's settings and its domain's), `events.jsonl`, `targets/` (the target
//! pictures; the first also as `target.png`), `codes/<n>.<ext>`, `generator_thoughts/<n>.md`,
//! `verifier_thoughts/<n>.md`, `renders/<n>/<view>.png`, `scores.json`, `final.<ext>` and
//! what the domain saves of the result (a scene's `final.blend`); attached to a person's
//! Blender, also `base.blend`, the snapshot of their scene every iteration starts from.
//! Files other than the append-only event log are written whole and renamed into place, so a
//! killed run never leaves a half-written file. viga writes them all, the workers none: a
//! contained worker may write only in its own scratch folder, so renders come back as bytes
//! and results are saved there and copied in.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use viga_protocol::event::{RunEvent, StopReason};
use viga_provider::ProviderConfig;
use viga_sandbox::ContainmentStatus;
use viga_skills::CapturedRender;
use viga_skills::context::safe_file_stem;

use crate::CoreError;
use crate::config::{RunConfig, TargetSpec};

pub const ARGS_FILE: &str = "args.json";
pub const EVENTS_FILE: &str = "events.jsonl";
pub const SCORES_FILE: &str = "scores.json";
pub const TARGET_FILE: &str = "target.png";
/// The folder the target pictures are copied into, in the order `args.json` lists them.
pub const TARGETS_DIR: &str = "targets";
pub const FINAL_BLEND: &str = "final.blend";
/// The run's HTML report.
pub const REPORT_FILE: &str = "report.html";
/// The provider settings a run was started with (never a key), for resume.
pub const PROVIDER_FILE: &str = "provider.json";
/// The program of a scene run's result: what is applied to a person's scene (other domains
/// keep theirs as `final.<ext>`, see [`final_program_name`]).
pub const FINAL_PROGRAM: &str = "final.py";
/// The snapshot of a person's scene an attached run starts every iteration from.
pub const BASE_SNAPSHOT: &str = "base.blend";
/// What containment the Blender that ran the folder's programs was under.
pub const CONTAINMENT_FILE: &str = "containment.json";
const SUBFOLDERS: [&str; 4] = [
    "codes",
    "generator_thoughts",
    "verifier_thoughts",
    "renders",
];

#[derive(Debug, Clone)]
pub struct RunFolder {
    root: PathBuf,
}

/// `<output>/<mode>/<timestamp>/<task>/` for a new run, refused when it exists already
/// (for a run of the loop's own, [`RunFolder::create`] makes it; other kinds of run, such as
/// a scene search, lay theirs out the same way through this).
pub fn new_run_root(output_root: &Path, mode: &str, task_name: &str) -> Result<PathBuf, CoreError> {
    let root = output_root.join(mode).join(timestamp()).join(task_name);
    if root.exists() {
        return Err(CoreError::Config(format!(
            "run folder {} already exists; wait a second or choose another --output",
            root.display()
        )));
    }
    Ok(root)
}

/// Records in `folder` (a run's, or a Geometry Nodes run's) how the run was set up, before
/// its first event, so that a run which ends at once still says it: the settings its
/// provider was built from (`provider.json`; they name the key's variable, never the key),
/// from which `resume` builds the same provider, and what containment its programs run
/// under (`containment.json`). Either is left out when there is none to record.
pub fn write_setup(
    folder: &Path,
    provider: Option<&ProviderConfig>,
    containment: Option<&ContainmentStatus>,
) -> Result<(), CoreError> {
    if let Some(settings) = provider {
        write_json_file(&folder.join(PROVIDER_FILE), settings)?;
    }
    if let Some(status) = containment {
        write_containment(folder, status)?;
    }
    Ok(())
}

/// Records in `folder` what containment its programs ran under, so the folder says it
/// after the fact.
pub fn write_containment(folder: &Path, status: &ContainmentStatus) -> Result<(), CoreError> {
    write_json_file(&folder.join(CONTAINMENT_FILE), status)
}

/// Writes `value` as pretty JSON to `path`, whole, renamed into place.
fn write_json_file(path: &Path, value: &impl Serialize) -> Result<(), CoreError> {
    let json = serde_json::to_vec_pretty(value)
        .map_err(|err| CoreError::Config(format!("{} not encodable: {err}", path.display())))?;
    viga_io::files::write_atomic(path, &json).map_err(|err| io(path, err))
}

/// The provider settings a run folder names, as far as they can be trusted. A run folder is
/// data and may come from anyone: a server or key variable it names would send one of your
/// keys wherever it says. So only the provider kind's own base URL and key variable are
/// taken from it; any other is set aside here, and must be given again to be used.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedProvider {
    /// The saved settings without the base URL and key variable set aside (the kind's
    /// defaults apply in their place).
    pub settings: ProviderConfig,
    /// The base URL the folder names, when it is not the kind's own: not used.
    pub untrusted_base_url: Option<String>,
    /// The key variable the folder names, when it is not the kind's own: not read.
    pub untrusted_key_env: Option<String>,
}

impl SavedProvider {
    fn trusting_defaults_only(mut settings: ProviderConfig) -> Self {
        let kind = settings.kind;
        let untrusted_base_url = settings
            .base_url
            .take_if(|url| Some(url.as_str()) != kind.default_base_url());
        let untrusted_key_env = settings
            .api_key_env
            .take_if(|variable| Some(variable.as_str()) != kind.default_key_env());
        Self {
            settings,
            untrusted_base_url,
            untrusted_key_env,
        }
    }
}

/// The folders of a run folder its worker reads ([`RunFolder::worker_inputs`]), absolute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerInputs {
    /// Generated and fetched assets; the run's programs find it in `VIGA_ASSETS_DIR`.
    pub assets: PathBuf,
    /// The domain's own input folders (a scene's reconstruction).
    pub own: Vec<PathBuf>,
}

impl WorkerInputs {
    /// Every folder, for the worker's read access.
    pub fn paths(&self) -> Vec<PathBuf> {
        std::iter::once(self.assets.clone())
            .chain(self.own.iter().cloned())
            .collect()
    }
}

/// Removes the run folder `root` made for a run that then failed to start, and the timestamp
/// and mode folders above it when they are left empty, so a failed start leaves nothing. A
/// folder whose run started (its event log holds an event) is never removed.
pub fn discard_unstarted(root: &Path) {
    let started = std::fs::metadata(root.join(EVENTS_FILE)).is_ok_and(|log| log.len() > 0);
    if started {
        return;
    }
    let _ = std::fs::remove_dir_all(root);
    // `remove_dir` removes only empty folders: another run's stay.
    for parent in root.ancestors().skip(1).take(2) {
        if std::fs::remove_dir(parent).is_err() {
            break;
        }
    }
}

/// The domain a run folder's programs built, as `args.json` records it under `domain`: its
/// name and its own settings, so a front end can build the same domain to resume the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedDomain {
    pub name: String,
    #[serde(default)]
    pub settings: Value,
}

/// What `args.json` holds: the loop's settings, and the domain's beside them.
#[derive(Serialize)]
struct ArgsFile<'a> {
    #[serde(flatten)]
    config: &'a RunConfig,
    domain: &'a RecordedDomain,
}

/// The file name of a run's final program in the language `language` (`final.py`,
/// `final.html`).
pub fn final_program_name(language: &str) -> String {
    format!("final.{}", program_extension(language))
}

/// The file extension programs of `language` are kept under.
pub fn program_extension(language: &str) -> &str {
    match language {
        "python" | "py" | "python3" => "py",
        "" => "txt",
        other => other,
    }
}

fn io(path: &Path, err: std::io::Error) -> CoreError {
    CoreError::io(path, err)
}

impl RunFolder {
    /// Creates a new run folder under `output_root`.
    pub fn create(output_root: &Path, config: &RunConfig) -> Result<Self, CoreError> {
        let root = new_run_root(output_root, &config.mode, &config.task_name)?;
        for sub in SUBFOLDERS {
            let path = root.join(sub);
            std::fs::create_dir_all(&path).map_err(|err| io(&path, err))?;
        }
        Ok(Self { root })
    }

    /// Ends the log of a run nobody will finish any more (a front end left it busy after a
    /// cancel; a server stopped in the middle of it): `run_finished` with `stop`, and the
    /// iterations recorded, so the folder says how the run ended. A log that already ends
    /// the run is left as it is. Returns how the log ends now.
    pub fn finish_left_run(&self, stop: StopReason) -> Result<StopReason, CoreError> {
        let path = self.events_path();
        let log = viga_memory::read_run_log(&path)?;
        if let Some(ended) = log.events.iter().find_map(|e| match &e.event {
            RunEvent::RunFinished { stop, .. } => Some(stop.clone()),
            _ => None,
        }) {
            return Ok(ended);
        }
        let iterations = viga_memory::iterations_in(&log.events)
            .last()
            .map_or(0, |record| record.index);
        viga_memory::RunLog::open_append(&path)?.append(RunEvent::RunFinished {
            stop: stop.clone(),
            iterations,
        })?;
        Ok(stop)
    }

    /// Opens an existing run folder (for resume and reports).
    pub fn open(root: &Path) -> Result<Self, CoreError> {
        for required in [ARGS_FILE, EVENTS_FILE] {
            if !root.join(required).is_file() {
                return Err(CoreError::Config(format!(
                    "{} is not a viga run folder: it has no {required}",
                    root.display()
                )));
            }
        }
        Ok(Self {
            root: root.to_path_buf(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn events_path(&self) -> PathBuf {
        self.root.join(EVENTS_FILE)
    }

    pub fn target_path(&self) -> PathBuf {
        self.root.join(TARGET_FILE)
    }

    pub fn final_blend_path(&self) -> PathBuf {
        self.root.join(FINAL_BLEND)
    }

    pub fn final_program_path(&self) -> PathBuf {
        self.root.join(FINAL_PROGRAM)
    }

    pub fn write_args(&self, config: &RunConfig, domain: &RecordedDomain) -> Result<(), CoreError> {
        self.write_json(ARGS_FILE, &ArgsFile { config, domain })
    }

    /// The provider settings the run was started with ([`write_setup`]), when it saved
    /// readable ones, as far as they can be trusted ([`SavedProvider`]).
    pub fn read_provider(&self) -> Option<SavedProvider> {
        let text = std::fs::read_to_string(self.root.join(PROVIDER_FILE)).ok()?;
        let settings = serde_json::from_str(&text).ok()?;
        Some(SavedProvider::trusting_defaults_only(settings))
    }

    /// The run's settings and its domain's. Folders written before domains existed were
    /// all Blender scenes, with the scene's settings among the run's: they are read as such.
    pub fn read_args(&self) -> Result<(RunConfig, RecordedDomain), CoreError> {
        let path = self.root.join(ARGS_FILE);
        let text = std::fs::read_to_string(&path).map_err(|err| io(&path, err))?;
        let invalid = |err: serde_json::Error| {
            CoreError::Config(format!("{} is not valid: {err}", path.display()))
        };
        let mut args: Value = serde_json::from_str(&text).map_err(invalid)?;
        let Some(settings) = args.as_object_mut() else {
            return Err(CoreError::Config(format!(
                "{} is not valid: it is not a JSON object",
                path.display()
            )));
        };
        let domain = match settings.remove("domain") {
            Some(domain) => serde_json::from_value(domain).map_err(invalid)?,
            None => legacy_scene_domain(settings),
        };
        Ok((serde_json::from_value(args).map_err(invalid)?, domain))
    }

    /// Removes a run folder whose run never started (see [`discard_unstarted`]).
    pub fn discard(self) {
        discard_unstarted(&self.root);
    }

    /// The folders of the run whose files its worker opens, made now: the assets and the
    /// domain's `own` (relative to the run folder). A contained worker is allowed to read
    /// them, and nothing else of the run folder.
    pub fn worker_inputs(&self, own: &[&str]) -> Result<WorkerInputs, CoreError> {
        let made = |name: &str| -> Result<PathBuf, CoreError> {
            let path = std::path::absolute(self.root.join(name))
                .map_err(|err| io(&self.root.join(name), err))?;
            std::fs::create_dir_all(&path).map_err(|err| io(&path, err))?;
            Ok(path)
        };
        Ok(WorkerInputs {
            assets: made(viga_skills::assets::ASSETS_DIR)?,
            own: own
                .iter()
                .map(|name| made(name))
                .collect::<Result<_, _>>()?,
        })
    }

    /// Keeps the program of iteration `index`, in `language`.
    pub fn write_code(&self, index: u32, language: &str, code: &str) -> Result<(), CoreError> {
        self.write_bytes(
            &format!("codes/{index}.{}", program_extension(language)),
            code.as_bytes(),
        )
    }

    /// Copies the target pictures in: `targets/<n>-<label>.<ext>`, the first also as
    /// `target.png`. Returns the copies' paths, in order.
    pub fn write_targets(
        &self,
        targets: &[TargetSpec],
        images: &[viga_protocol::message::ImageData],
    ) -> Result<Vec<PathBuf>, CoreError> {
        let mut copies = Vec::with_capacity(targets.len());
        for (number, (target, image)) in targets.iter().zip(images).enumerate() {
            let relative = format!("{TARGETS_DIR}/{}", target_file_name(number, target, image));
            self.write_bytes(&relative, &image.data)?;
            if number == 0 {
                self.write_bytes(TARGET_FILE, &image.data)?;
            }
            copies.push(self.root.join(relative));
        }
        Ok(copies)
    }

    /// The run folder's copies of `targets`, in order (see [`Self::write_targets`]); a folder
    /// from before `targets/` existed has its one target as `target.png`.
    pub fn target_copies(&self, targets: &[TargetSpec]) -> Vec<PathBuf> {
        let dir = self.root.join(TARGETS_DIR);
        if !dir.is_dir() {
            return targets.iter().take(1).map(|_| self.target_path()).collect();
        }
        let entries: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|read| read.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        (0..targets.len())
            .filter_map(|number| {
                let prefix = format!("{number:02}-");
                entries
                    .iter()
                    .find(|path| {
                        path.file_name()
                            .and_then(|name| name.to_str())
                            .is_some_and(|name| name.starts_with(&prefix))
                    })
                    .cloned()
            })
            .collect()
    }

    pub fn write_generator_thought(&self, index: u32, text: &str) -> Result<(), CoreError> {
        self.write_bytes(&format!("generator_thoughts/{index}.md"), text.as_bytes())
    }

    pub fn write_verifier_thought(&self, index: u32, text: &str) -> Result<(), CoreError> {
        self.write_bytes(&format!("verifier_thoughts/{index}.md"), text.as_bytes())
    }

    /// Saves a render and returns its id: the path relative to the run folder.
    pub fn write_render(&self, index: u32, view: &str, png: &[u8]) -> Result<String, CoreError> {
        let relative = format!("renders/{index}/{}.png", safe_file_stem(view));
        self.write_bytes(&relative, png)?;
        Ok(relative)
    }

    /// The folder of iteration `index`'s renders, created if needed, as an absolute path:
    /// the tools have Blender, whose working directory may differ, write the verifier's
    /// renders straight into it.
    pub fn renders_dir(&self, index: u32) -> Result<PathBuf, CoreError> {
        let dir = self.root.join(format!("renders/{index}"));
        std::fs::create_dir_all(&dir).map_err(|err| io(&dir, err))?;
        std::path::absolute(&dir).map_err(|err| io(&dir, err))
    }

    /// Keeps a tool's render in the run folder: where the tool context already wrote it, or
    /// else written now as `<view>-<number>`, `number` asked for only then. Returns its id
    /// and the event announcing it.
    pub fn keep_render(
        &self,
        index: u32,
        render: &CapturedRender,
        number: impl FnOnce() -> usize,
    ) -> Result<(String, RunEvent), CoreError> {
        let kept = render.file.as_deref().and_then(|file| self.id_of(file));
        let render_id = match kept {
            Some(id) => id,
            None => {
                let view = format!("{}-{}", render.view, number());
                self.write_render(index, &view, &render.picture.image.data)?
            }
        };
        let event = RunEvent::RenderProduced {
            index,
            render_id: render_id.clone(),
            view: render.view.clone(),
            width: render.picture.width,
            height: render.picture.height,
            render_ms: render.picture.render_ms,
            engine: render.picture.engine,
        };
        Ok((render_id, event))
    }

    /// The id (path relative to the run folder, `/`-separated) of a file inside it, given
    /// relative to the working directory or absolute.
    pub fn id_of(&self, file: &Path) -> Option<String> {
        let absolute_root = std::path::absolute(&self.root).ok()?;
        let relative = file
            .strip_prefix(&self.root)
            .or_else(|_| file.strip_prefix(&absolute_root))
            .ok()?;
        let parts: Option<Vec<&str>> = relative
            .components()
            .map(|part| part.as_os_str().to_str())
            .collect();
        parts.map(|parts| parts.join("/"))
    }

    pub fn write_json<T: Serialize>(&self, relative: &str, value: &T) -> Result<(), CoreError> {
        let text = serde_json::to_string_pretty(value)
            .map_err(|err| CoreError::Config(err.to_string()))?;
        self.write_bytes(relative, text.as_bytes())
    }

    /// Writes a whole file and renames it into place.
    pub fn write_bytes(&self, relative: &str, bytes: &[u8]) -> Result<(), CoreError> {
        let path = self.root.join(relative);
        viga_io::files::write_atomic(&path, bytes).map_err(|err| io(&path, err))
    }
}

/// The file name stem of the render of target `label`'s view (in `renders/<n>/`).
pub fn target_render_stem(label: &str) -> String {
    safe_file_stem(&format!("target-{label}"))
}

/// `<nn>-<label>.<png|jpg>` for a target picture.
fn target_file_name(
    number: usize,
    target: &TargetSpec,
    image: &viga_protocol::message::ImageData,
) -> String {
    let mut label = target.view.clone().unwrap_or_else(|| "default".to_owned());
    if let Some(frame) = target.frame {
        label.push_str(&format!("_f{frame}"));
    }
    let extension = if image.media_type == "image/jpeg" {
        "jpg"
    } else {
        "png"
    };
    format!("{number:02}-{}.{extension}", safe_file_stem(&label))
}

/// The keys of a Blender scene's settings in `args.json` files written before domains.
const LEGACY_SCENE_KEYS: [&str; 6] = [
    "base_blend",
    "render",
    "verifier_engine",
    "verifier_samples",
    "assets",
    "polyhaven",
];

/// Reads a run folder from before domains as the scene run it was: the scene's settings
/// move under `domain`, the one target (and the camera it showed) into `targets`. Runs
/// written before `verifier_engine` existed rendered everything with `render.engine`, so
/// they resume with it, not with the engine a target picture picks today.
fn legacy_scene_domain(args: &mut serde_json::Map<String, Value>) -> RecordedDomain {
    let mut scene = serde_json::Map::new();
    for key in LEGACY_SCENE_KEYS {
        if let Some(value) = args.remove(key) {
            scene.insert(key.to_owned(), value);
        }
    }
    if !scene.contains_key("verifier_engine")
        && let Some(engine) = scene.get("render").and_then(|r| r.get("engine")).cloned()
    {
        scene.insert("verifier_engine".to_owned(), engine);
    }
    let camera = args.remove("target_camera").filter(|c| !c.is_null());
    if let Some(path) = args.remove("target").filter(|t| !t.is_null()) {
        let target = serde_json::json!({"path": path, "view": camera});
        args.insert("targets".to_owned(), Value::Array(vec![target]));
    }
    RecordedDomain {
        name: "scene".to_owned(),
        settings: Value::Object(scene),
    }
}

/// `YYYYMMDD-HHMMSS` in UTC.
pub fn timestamp() -> String {
    let seconds = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}",
        rest / 3600,
        (rest % 3600) / 60,
        rest % 60
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u32;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::{ARGS_FILE, EVENTS_FILE, RecordedDomain, RunFolder, civil_from_days};

    /// A run its front end left busy after a cancel still ends its log, once.
    #[test]
    fn a_run_left_busy_after_a_cancel_ends_its_log_as_cancelled() {
        use viga_protocol::event::{RunEvent, StopReason};
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(ARGS_FILE), "{}").unwrap();
        let mut log = viga_memory::RunLog::create(&dir.path().join(EVENTS_FILE)).unwrap();
        log.append(RunEvent::IterationStarted { index: 1 }).unwrap();
        drop(log);
        let folder = RunFolder::open(dir.path()).unwrap();
        assert_eq!(
            folder.finish_left_run(StopReason::Cancelled).unwrap(),
            StopReason::Cancelled
        );
        let other = StopReason::failed("later", viga_protocol::event::FailureKind::Other);
        assert_eq!(
            folder.finish_left_run(other).unwrap(),
            StopReason::Cancelled
        );
        let events = viga_memory::read_run_log(&folder.events_path())
            .unwrap()
            .events;
        let finished: Vec<&RunEvent> = events
            .iter()
            .map(|e| &e.event)
            .filter(|e| matches!(e, RunEvent::RunFinished { .. }))
            .collect();
        assert_eq!(
            finished,
            [&RunEvent::RunFinished {
                stop: StopReason::Cancelled,
                iterations: 0
            }]
        );
    }

    #[test]
    fn folders_written_before_domains_read_as_scene_runs() {
        let dir = tempfile::tempdir().unwrap();
        let old = serde_json::json!({
            "task": "a lamp", "task_name": "a-lamp", "mode": "scene",
            "target": dir.path().join("goal.png"), "target_camera": "Camera2",
            "base_blend": null,
            "render": {"engine": "workbench", "width": 64, "height": 64, "samples": null},
            "max_iterations": 2, "memory_window": 3, "memory_budget_bytes": 12000,
            "max_fast_retries": 3, "verifier_max_turns": 6, "plan_each_iteration": true,
            "provider": "scripted", "model": "m", "max_tokens": 1000
        });
        std::fs::write(dir.path().join(ARGS_FILE), old.to_string()).unwrap();
        std::fs::write(dir.path().join(EVENTS_FILE), "").unwrap();
        let folder = RunFolder::open(dir.path()).unwrap();
        let (config, domain) = folder.read_args().unwrap();
        assert_eq!(config.targets.len(), 1);
        assert_eq!(config.targets[0].view.as_deref(), Some("Camera2"));
        assert_eq!(domain.name, "scene");
        assert_eq!(
            domain.settings["verifier_engine"], "workbench",
            "it rendered with render.engine, and goes on so"
        );
        let rewritten = RecordedDomain {
            name: "scene".into(),
            settings: serde_json::json!({"polyhaven": true}),
        };
        folder.write_args(&config, &rewritten).unwrap();
        assert_eq!(folder.read_args().unwrap(), (config, rewritten));
    }

    /// A run folder is data: a base URL or key variable it names that is not the provider's
    /// own is set aside, never used; the provider's own are kept.
    #[test]
    fn saved_provider_settings_trust_only_the_kinds_defaults() {
        use viga_provider::{ProviderConfig, ProviderKind};
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(ARGS_FILE), "{}").unwrap();
        std::fs::write(dir.path().join(EVENTS_FILE), "").unwrap();
        let folder = RunFolder::open(dir.path()).unwrap();
        let kind = ProviderKind::OpenAi;
        let mut planted = ProviderConfig::new(kind, "gpt-test");
        planted.base_url = Some("https://collector.example/v1".to_owned());
        planted.api_key_env = Some("SOME_OTHER_KEY".to_owned());
        super::write_setup(dir.path(), Some(&planted), None).unwrap();
        let saved = folder.read_provider().unwrap();
        assert_eq!(saved.settings, ProviderConfig::new(kind, "gpt-test"));
        assert_eq!(
            saved.untrusted_base_url.as_deref(),
            Some("https://collector.example/v1")
        );
        assert_eq!(saved.untrusted_key_env.as_deref(), Some("SOME_OTHER_KEY"));

        let mut own = ProviderConfig::new(kind, "gpt-test");
        own.base_url = kind.default_base_url().map(str::to_owned);
        own.api_key_env = kind.default_key_env().map(str::to_owned);
        super::write_setup(dir.path(), Some(&own), None).unwrap();
        let saved = folder.read_provider().unwrap();
        assert_eq!(saved.settings, own);
        assert_eq!(
            (saved.untrusted_base_url, saved.untrusted_key_env),
            (None, None)
        );
    }

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_779), (2026, 11, 22));
    }
}
