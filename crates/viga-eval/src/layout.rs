//! The BlenderGym data layout: `<data>/<task><i>/` holding `blender_file.blend`, `start.py`,
//! `goal.py` and `renders/goal/render<k>.png` (one per camera `Camera<k>`).

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::EvalError;

/// The five BlenderGym task families.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    Blendshape,
    Placement,
    Geometry,
    Lighting,
    Material,
}

impl Task {
    /// In the leaderboard's column order.
    pub const ALL: [Task; 5] = [
        Task::Blendshape,
        Task::Placement,
        Task::Geometry,
        Task::Lighting,
        Task::Material,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Task::Blendshape => "blendshape",
            Task::Placement => "placement",
            Task::Geometry => "geometry",
            Task::Lighting => "lighting",
            Task::Material => "material",
        }
    }

    /// The tasks the paper reports Chamfer distance for (shape changes; lighting and
    /// material leave geometry alone, so CD would be 0 by construction).
    pub fn has_chamfer(self) -> bool {
        matches!(self, Task::Blendshape | Task::Placement | Task::Geometry)
    }

    /// The leaderboard's display scale for PL and N-CLIP: x1e-3 for blendshape and
    /// placement, x1e-2 for the others (a shown value v means v x scale).
    pub fn display_scale(self) -> f64 {
        match self {
            Task::Blendshape | Task::Placement => 1e-3,
            Task::Geometry | Task::Lighting | Task::Material => 1e-2,
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
    Task::ALL.into_iter().find_map(|task| {
        let digits = name.strip_prefix(task.name())?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok().map(|number| (task, number))
    })
}

/// Reads the instances under `data`, sorted by task (leaderboard order) then number, so every
/// process sees the same order (sharding depends on it).
pub fn discover(data: &Path, selection: &Selection) -> Result<Vec<Instance>, EvalError> {
    let data = std::path::absolute(data).map_err(|err| EvalError::io(data, err))?;
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
    if let Some(names) = &selection.instances {
        for wanted in names {
            if !found.iter().any(|instance| &instance.name == wanted) {
                return Err(EvalError::NoSuchInstance {
                    name: wanted.clone(),
                    data: data.clone(),
                });
            }
        }
    }
    found.sort_by_key(|instance| (instance.task, instance.number));
    if found.is_empty() {
        return Err(EvalError::NoInstances { data });
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
    })
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
        assert!("shadows".parse::<Task>().is_err());
    }
}
