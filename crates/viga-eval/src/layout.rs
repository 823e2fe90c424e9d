//! The data layouts: BlenderGym's `<data>/<task><i>/` and BlenderBench's
//! `<data>/level<k>/<name>/`, each instance holding `blender_file.blend`, `start.py`,
//! `goal.py` and `renders/goal/render<k>.png` (one per camera `Camera<k>`); a BlenderBench
//! instance also its task text (`task.txt`) and, when the data has one, the stylised picture of
//! its goal that a model is shown (`renders/goal/visprompt1.png` or `style1.png`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::EvalError;

/// The benchmarks whose layouts are read. An output folder holds results of one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Suite {
    /// BlenderGym (CVPR 2025): five task families, `<data>/<task><i>/`.
    #[default]
    BlenderGym,
    /// BlenderBench (VIGA, arXiv 2601.11109; its runner is "blenderstudio"): three levels,
    /// `<data>/level<k>/<name>/`.
    BlenderBench,
}

impl Suite {
    pub fn name(self) -> &'static str {
        match self {
            Suite::BlenderGym => "BlenderGym",
            Suite::BlenderBench => "BlenderBench",
        }
    }

    /// The suite's tasks, in its reports' column order.
    pub fn tasks(self) -> &'static [Task] {
        match self {
            Suite::BlenderGym => &Task::GYM,
            Suite::BlenderBench => &Task::LEVELS,
        }
    }

    /// `serde(skip_serializing_if)`: settings of BlenderGym results are written as they were
    /// before BlenderBench existed.
    pub fn is_blendergym(&self) -> bool {
        *self == Suite::BlenderGym
    }

    /// Reads the suite's instances under `data` (see [`discover`] and [`discover_levels`]).
    pub fn discover(self, data: &Path, selection: &Selection) -> Result<Vec<Instance>, EvalError> {
        if let Some(other) = selection
            .tasks
            .iter()
            .flatten()
            .find(|task| task.suite() != self)
        {
            return Err(EvalError::WrongSuite {
                task: other.name().to_owned(),
                suite: self.name(),
                tasks: self
                    .tasks()
                    .iter()
                    .map(|task| task.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        match self {
            Suite::BlenderGym => discover(data, selection),
            Suite::BlenderBench => discover_levels(data, selection),
        }
    }
}

/// The five BlenderGym task families and BlenderBench's three levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    Blendshape,
    Placement,
    Geometry,
    Lighting,
    Material,
    /// BlenderBench task 1: camera adjustment.
    Level1,
    /// BlenderBench task 2: multi-step editing.
    Level2,
    /// BlenderBench task 3: compositional editing.
    Level3,
}

impl Task {
    /// BlenderGym's, in the leaderboard's column order.
    pub const GYM: [Task; 5] = [
        Task::Blendshape,
        Task::Placement,
        Task::Geometry,
        Task::Lighting,
        Task::Material,
    ];

    /// BlenderBench's levels.
    pub const LEVELS: [Task; 3] = [Task::Level1, Task::Level2, Task::Level3];

    /// Every task of every suite, BlenderGym's first.
    pub const ALL: [Task; 8] = [
        Task::Blendshape,
        Task::Placement,
        Task::Geometry,
        Task::Lighting,
        Task::Material,
        Task::Level1,
        Task::Level2,
        Task::Level3,
    ];

    /// As in folder names and results: `placement`, `level1`.
    pub fn name(self) -> &'static str {
        match self {
            Task::Blendshape => "blendshape",
            Task::Placement => "placement",
            Task::Geometry => "geometry",
            Task::Lighting => "lighting",
            Task::Material => "material",
            Task::Level1 => "level1",
            Task::Level2 => "level2",
            Task::Level3 => "level3",
        }
    }

    pub fn suite(self) -> Suite {
        match self {
            Task::Level1 | Task::Level2 | Task::Level3 => Suite::BlenderBench,
            _ => Suite::BlenderGym,
        }
    }

    /// What a BlenderBench level asks for, as the paper names it; `None` for BlenderGym's
    /// families, whose names say it.
    pub fn level_title(self) -> Option<&'static str> {
        match self {
            Task::Level1 => Some("camera adjustment"),
            Task::Level2 => Some("multi-step editing"),
            Task::Level3 => Some("compositional editing"),
            _ => None,
        }
    }

    /// The tasks the paper reports Chamfer distance for (shape changes; lighting and
    /// material leave geometry alone, so CD would be 0 by construction). BlenderBench reports
    /// none.
    pub fn has_chamfer(self) -> bool {
        matches!(self, Task::Blendshape | Task::Placement | Task::Geometry)
    }

    /// The display scale for PL and N-CLIP: BlenderGym's leaderboard's, x1e-3 for blendshape
    /// and placement, x1e-2 for its other families; x1e-2 for BlenderBench's levels (ours: no
    /// published table fixes one). A shown value v means v x scale.
    pub fn display_scale(self) -> f64 {
        match self {
            Task::Blendshape | Task::Placement => 1e-3,
            _ => 1e-2,
        }
    }
}

impl fmt::Display for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Task {
    type Err = EvalError;

    fn from_str(text: &str) -> Result<Self, EvalError> {
        Task::ALL
            .into_iter()
            .find(|task| task.name() == text.trim().to_ascii_lowercase())
            .ok_or_else(|| EvalError::UnknownTask(text.to_owned()))
    }
}

/// One benchmark instance, with every file it needs checked to exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// The folder name, `<task><i>`: unique, and the key of results and resume.
    pub name: String,
    pub task: Task,
    pub number: u32,
    pub dir: PathBuf,
    /// Absolute, because Blender opens it from its own working folder.
    pub blend: PathBuf,
    pub start_py: PathBuf,
    pub goal_py: PathBuf,
    /// Views scored: `Camera1..=CameraN`, N = the number of shipped goal renders. The shipped
    /// PNGs only say how many cameras there are; scoring re-renders the goal.
    pub views: u32,
    /// The instance's own task text (BlenderBench's `task.txt`); `None` for BlenderGym, whose
    /// task family says what to do, and for a BlenderBench instance that ships none.
    pub description: Option<String>,
    /// The picture of the goal a model is shown when the data has one (BlenderBench's
    /// `renders/goal/visprompt1.png`, `style1.png` or `_style1.png`: stylised or annotated, so
    /// never scored against); otherwise the goal's Camera1 render, re-rendered, is shown.
    pub visual_prompt: Option<PathBuf>,
}

impl Instance {
    pub fn cameras(&self) -> impl Iterator<Item = String> {
        (1..=self.views).map(|k| format!("Camera{k}"))
    }
}

/// Which instances to read. `None` means all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    pub tasks: Option<Vec<Task>>,
    /// Instance folder names, e.g. `placement3`.
    pub instances: Option<Vec<String>>,
}

/// Splits `placement12` into its task and number; other folder names are not instances.
fn parse_name(name: &str) -> Option<(Task, u32)> {
    Task::GYM.into_iter().find_map(|task| {
        let digits = name.strip_prefix(task.name())?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok().map(|number| (task, number))
    })
}

/// `data` by its real path (links resolved, `..` gone): every path derived from it (a base
/// scene, a reference deck a program opens) is then the one a contained worker is granted,
/// wherever the folder sits (under the home folder or `/tmp`, which the container hides).
pub(crate) fn real_data_folder(data: &Path) -> Result<PathBuf, EvalError> {
    data.canonicalize().map_err(|err| EvalError::DataDir {
        path: data.to_path_buf(),
        message: err.to_string(),
    })
}

/// Reads the instances under `data`, sorted by task (leaderboard order) then number.
pub fn discover(data: &Path, selection: &Selection) -> Result<Vec<Instance>, EvalError> {
    let data = real_data_folder(data)?;
    let entries = std::fs::read_dir(&data).map_err(|err| EvalError::DataDir {
        path: data.clone(),
        message: err.to_string(),
    })?;
    let mut found = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|err| EvalError::io(&data, err))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((task, number)) = parse_name(&name) else {
            continue;
        };
        if !entry.path().is_dir() {
            continue;
        }
        if selection
            .tasks
            .as_ref()
            .is_some_and(|tasks| !tasks.contains(&task))
        {
            continue;
        }
        if selection
            .instances
            .as_ref()
            .is_some_and(|names| !names.contains(&name))
        {
            continue;
        }
        found.push(read_instance(&entry.path(), name, task, number)?);
    }
    finish(
        found,
        selection,
        data,
        "BlenderGym instances (folders named <task><i>, e.g. placement1)",
    )
}

/// Checks that every instance named in the selection was found and that some were, and sorts
/// them by task, number and name, so every process sees the same order (sharding depends on
/// it).
fn finish(
    mut found: Vec<Instance>,
    selection: &Selection,
    data: PathBuf,
    layout: &'static str,
) -> Result<Vec<Instance>, EvalError> {
    if let Some(names) = &selection.instances {
        for wanted in names {
            if !found.iter().any(|instance| &instance.name == wanted) {
                return Err(EvalError::NoSuchInstance {
                    name: wanted.clone(),
                    data,
                });
            }
        }
    }
    found.sort_by(|a, b| (a.task, a.number, &a.name).cmp(&(b.task, b.number, &b.name)));
    if found.is_empty() {
        return Err(EvalError::NoInstances { data, layout });
    }
    Ok(found)
}

fn read_instance(dir: &Path, name: String, task: Task, number: u32) -> Result<Instance, EvalError> {
    let required = |file: &str| -> Result<PathBuf, EvalError> {
        let path = dir.join(file);
        if path.is_file() {
            Ok(path)
        } else {
            Err(EvalError::MissingFile {
                instance: name.clone(),
                file: file.to_owned(),
                dir: dir.to_path_buf(),
            })
        }
    };
    let blend = required("blender_file.blend")?;
    let start_py = required("start.py")?;
    let goal_py = required("goal.py")?;
    required("renders/goal/render1.png")?;
    let mut views = 1;
    while dir
        .join(format!("renders/goal/render{}.png", views + 1))
        .is_file()
    {
        views += 1;
    }
    Ok(Instance {
        name,
        task,
        number,
        dir: dir.to_path_buf(),
        blend,
        start_py,
        goal_py,
        views,
        description: None,
        visual_prompt: None,
    })
}

/// The pictures of the goal shown to a model, in the order VIGA's prompt builder looks for
/// them (its reference-free evaluator also accepts `_style1.png`).
const VISUAL_PROMPTS: [&str; 3] = ["visprompt1.png", "style1.png", "_style1.png"];

/// Reads BlenderBench's layout: `<data>/level<k>/<folder>/` for k in 1..=3, each instance
/// named `level<k>-<folder>` (a plain name, as results are stored by name; VIGA writes
/// `level<k>/<folder>`). Sorted by level, then the number the folder name ends with (VIGA's
/// `camera1`, `attribute5`), then the name. Entries that are not folders, and folders whose
/// names start with a dot, are ignored.
pub fn discover_levels(data: &Path, selection: &Selection) -> Result<Vec<Instance>, EvalError> {
    let data = real_data_folder(data)?;
    if let Err(err) = std::fs::read_dir(&data) {
        return Err(EvalError::DataDir {
            path: data.clone(),
            message: err.to_string(),
        });
    }
    let mut found = Vec::new();
    for task in Task::LEVELS {
        if selection
            .tasks
            .as_ref()
            .is_some_and(|tasks| !tasks.contains(&task))
        {
            continue;
        }
        let level_dir = data.join(task.name());
        if !level_dir.is_dir() {
            continue;
        }
        let entries =
            std::fs::read_dir(&level_dir).map_err(|err| EvalError::io(&level_dir, err))?;
        for entry in entries {
            let entry = entry.map_err(|err| EvalError::io(&level_dir, err))?;
            let folder = entry.file_name().to_string_lossy().into_owned();
            if folder.starts_with('.') || !entry.path().is_dir() {
                continue;
            }
            let name = format!("{}-{folder}", task.name());
            if selection
                .instances
                .as_ref()
                .is_some_and(|names| !names.contains(&name))
            {
                continue;
            }
            let number = trailing_number(&folder);
            found.push(read_level_instance(&entry.path(), name, task, number)?);
        }
    }
    finish(
        found,
        selection,
        data,
        "BlenderBench instances (folders level1/<name>, level2/<name>, level3/<name>, e.g. level1/camera1)",
    )
}

/// The number a folder name ends with (`camera12` gives 12), 0 without one.
fn trailing_number(folder: &str) -> u32 {
    let digits = folder.len() - folder.bytes().rev().take_while(u8::is_ascii_digit).count();
    folder[digits..].parse().unwrap_or(0)
}

fn read_level_instance(
    dir: &Path,
    name: String,
    task: Task,
    number: u32,
) -> Result<Instance, EvalError> {
    viga_skills::names::plain_name("instance name", &name).map_err(|err| EvalError::Io {
        path: dir.to_path_buf(),
        message: format!("{err}; rename the folder"),
    })?;
    let mut instance = read_instance(dir, name, task, number)?;
    let task_file = dir.join("task.txt");
    instance.description = if task_file.is_file() {
        let text =
            std::fs::read_to_string(&task_file).map_err(|err| EvalError::io(&task_file, err))?;
        Some(text.trim().to_owned()).filter(|text| !text.is_empty())
    } else {
        None
    };
    instance.visual_prompt = VISUAL_PROMPTS
        .iter()
        .map(|file| dir.join("renders/goal").join(file))
        .find(|path| path.is_file());
    Ok(instance)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_names() {
        assert_eq!(parse_name("placement12"), Some((Task::Placement, 12)));
        assert_eq!(parse_name("geometry1"), Some((Task::Geometry, 1)));
        for bad in [
            "placement",
            "placement1a",
            "light1",
            "README.md",
            "placement-1",
        ] {
            assert_eq!(parse_name(bad), None, "{bad}");
        }
        assert_eq!("Lighting".parse::<Task>().unwrap(), Task::Lighting);
        assert_eq!("level2".parse::<Task>().unwrap(), Task::Level2);
        assert!("shadows".parse::<Task>().is_err());
        // A BlenderGym folder named like a level is not an instance of either suite.
        assert_eq!(parse_name("level1"), None);
    }

    #[test]
    fn folder_numbers() {
        assert_eq!(trailing_number("camera12"), 12);
        assert_eq!(trailing_number("attribute5"), 5);
        assert_eq!(trailing_number("scene"), 0);
        assert_eq!(trailing_number("7"), 7);
    }
}
