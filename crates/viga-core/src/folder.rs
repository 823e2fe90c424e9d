//! The run folder, `output/<mode>/<timestamp>/<task>/`, written as the run goes:
//! `args.json`, `events.jsonl`, `target.png`, `codes/<n>.py`, `generator_thoughts/<n>.md`,
//! `verifier_thoughts/<n>.md`, `renders/<n>/<view>.png`, `scores.json`, `final.py` and
//! `final.blend`; attached to a person's Blender, also `base.blend`, the snapshot of their
//! scene every iteration starts from.
//! Files other than the append-only event log are written whole and renamed into place, so a
//! killed run never leaves a half-written file. viga writes them all, Blender none: a
//! contained Blender may write only in its own scratch folder, so renders come back as bytes
//! (`ToolContext::set_render_folder`) and scenes are saved there and moved in
//! ([`save_scene_as`]).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use viga_blender::{BlenderCommands as _, BlenderTransport};
use viga_protocol::event::RunEvent;
use viga_skills::CapturedRender;
use viga_skills::context::safe_file_stem;

use crate::CoreError;
use crate::config::RunConfig;

pub const ARGS_FILE: &str = "args.json";
pub const EVENTS_FILE: &str = "events.jsonl";
pub const SCORES_FILE: &str = "scores.json";
pub const TARGET_FILE: &str = "target.png";
pub const FINAL_BLEND: &str = "final.blend";
/// The run's HTML report.
pub const REPORT_FILE: &str = "report.html";
/// The provider settings a run was started with (never a key), for resume.
pub const PROVIDER_FILE: &str = "provider.json";
/// The program of the run's result: what is applied to a person's scene.
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

/// `<output>/<mode>/<timestamp>/<task>/` for a new run, refused when it exists already.
pub(crate) fn new_run_root(
    output_root: &Path,
    mode: &str,
    task_name: &str,
) -> Result<PathBuf, CoreError> {
    let root = output_root.join(mode).join(timestamp()).join(task_name);
    if root.exists() {
        return Err(CoreError::Config(format!(
            "run folder {} already exists; wait a second or choose another --output",
            root.display()
        )));
    }
    Ok(root)
}

/// Records in `folder` (a run's, or a Geometry Nodes run's) what containment its programs
/// ran under, so the folder says it after the fact.
pub fn write_containment(
    folder: &Path,
    status: &viga_blender::ContainmentStatus,
) -> Result<(), CoreError> {
    let path = folder.join(CONTAINMENT_FILE);
    let json = serde_json::to_vec_pretty(status)
        .map_err(|err| CoreError::Config(format!("containment status not encodable: {err}")))?;
    viga_memory::files::write_atomic(&path, &json).map_err(|err| io(&path, err))
}

/// Saves the scene in `blender` as `path` on this machine. A Blender that shares a folder
/// with this process (a worker's scratch folder, the one place a contained Blender may
/// write) saves there, and the file is moved into place; one without (a person's Blender)
/// writes `path` itself.
pub async fn save_scene_as(blender: &dyn BlenderTransport, path: &Path) -> Result<(), CoreError> {
    let saving = |err| {
        CoreError::blender(
            format!("the scene could not be saved as {}", path.display()),
            err,
        )
    };
    let Some(shared) = blender.shared_folder() else {
        blender
            .save_blend(&path.to_string_lossy())
            .await
            .map_err(saving)?;
        return Ok(());
    };
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let staged = shared.join(format!(
        "scene-{}.blend",
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    blender
        .save_blend(&staged.to_string_lossy())
        .await
        .map_err(saving)?;
    // Copied, not renamed: the staged name is in a folder programs write, so it is opened
    // as untrusted (a link swapped in for it is refused).
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(|err| io(parent, err))?;
    }
    let copied = viga_blender::scratch::copy_regular(&staged, path).map_err(|err| io(path, err));
    let _ = std::fs::remove_file(&staged);
    copied
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

    pub fn write_args(&self, config: &RunConfig) -> Result<(), CoreError> {
        self.write_json(ARGS_FILE, config)
    }

    /// Saves the provider settings the run was started with (they name the key's
    /// environment variable, never the key).
    pub fn write_provider(
        &self,
        settings: &viga_provider::ProviderConfig,
    ) -> Result<(), CoreError> {
        self.write_json(PROVIDER_FILE, settings)
    }

    /// The provider settings the run was started with, when it saved readable ones.
    pub fn read_provider(&self) -> Option<viga_provider::ProviderConfig> {
        let text = std::fs::read_to_string(self.root.join(PROVIDER_FILE)).ok()?;
        serde_json::from_str(&text).ok()
    }

    pub fn read_args(&self) -> Result<RunConfig, CoreError> {
        let path = self.root.join(ARGS_FILE);
        let text = std::fs::read_to_string(&path).map_err(|err| io(&path, err))?;
        let invalid = |err: serde_json::Error| {
            CoreError::Config(format!("{} is not valid: {err}", path.display()))
        };
        let mut args: serde_json::Value = serde_json::from_str(&text).map_err(invalid)?;
        keep_the_verifier_engine_of_older_runs(&mut args);
        serde_json::from_value(args).map_err(invalid)
    }

    pub fn write_code(&self, index: u32, code: &str) -> Result<(), CoreError> {
        self.write_bytes(&format!("codes/{index}.py"), code.as_bytes())
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
    pub(crate) fn keep_render(
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
                self.write_render(index, &view, &render.output.image.data)?
            }
        };
        let event = RunEvent::RenderProduced {
            index,
            render_id: render_id.clone(),
            view: render.view.clone(),
            width: render.output.width,
            height: render.output.height,
            render_ms: render.output.render_ms,
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
        viga_memory::files::write_atomic(&path, bytes).map_err(|err| io(&path, err))
    }
}

/// Runs written before `verifier_engine` existed rendered everything with `render.engine`;
/// they resume with it, not with the engine a target picture picks today.
fn keep_the_verifier_engine_of_older_runs(args: &mut serde_json::Value) {
    let Some(settings) = args.as_object_mut() else {
        return;
    };
    if settings.contains_key("verifier_engine") {
        return;
    }
    if let Some(engine) = settings
        .get("render")
        .and_then(|render| render.get("engine"))
        .cloned()
    {
        settings.insert("verifier_engine".to_owned(), engine);
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
    use viga_protocol::bridge::RenderEngine;

    use super::{ARGS_FILE, EVENTS_FILE, RunConfig, RunFolder, civil_from_days};

    #[test]
    fn runs_written_before_verifier_engine_resume_with_their_own_engine() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = RunConfig::new("a lamp");
        config.target = Some(dir.path().join("goal.png"));
        let mut old = serde_json::to_value(&config).unwrap();
        let settings = old.as_object_mut().unwrap();
        settings.remove("verifier_engine");
        settings.remove("verifier_samples");
        std::fs::write(dir.path().join(ARGS_FILE), old.to_string()).unwrap();
        std::fs::write(dir.path().join(EVENTS_FILE), "").unwrap();
        let folder = RunFolder::open(dir.path()).unwrap();
        assert_eq!(
            folder.read_args().unwrap().verifier_render().engine,
            RenderEngine::Workbench,
            "it rendered with render.engine, and goes on so"
        );
        folder.write_args(&config).unwrap();
        assert_eq!(
            folder.read_args().unwrap().verifier_render().engine,
            RenderEngine::Cycles,
            "a new run with a target picks Cycles"
        );
    }

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_779), (2026, 11, 22));
    }
}
