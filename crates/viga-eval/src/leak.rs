//! The answer-leakage check of BlenderBench instances. VIGA's users found that start files of
//! its camera-adjustment tasks already hold the goal camera pose (`level1/camera1`: the
//! `.blend` has Camera1 where `goal.py` puts it, and `start.py` moves it away), so a program
//! that drops the start program's camera lines, or a look at the raw scene, recovers the
//! answer without solving anything. The check reads every camera's pose in three states of
//! the instance: the scene file as it is, after `start.py` and after `goal.py`. A camera
//! *leaks* when the task moves it (its start and goal poses differ) and the scene file already
//! holds its goal pose.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use viga_blender::{BlenderTransport, TransportError};
use viga_protocol::bridge::SceneReset;

use crate::layout::Instance;
use crate::scene::{self, SceneError};

/// Two locations closer than this (scene units) are the same place: BlenderBench's
/// programs write poses to four decimals.
pub const LOCATION_TOLERANCE: f64 = 1e-3;
/// Two orientations less than this apart (radians, about 0.06 degrees) are the same.
pub const ROTATION_TOLERANCE: f64 = 1e-3;
/// Two focal lengths closer than this (millimetres) are the same.
pub const LENS_TOLERANCE: f64 = 1e-3;

/// A camera's world pose and focal length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CameraPose {
    pub name: String,
    pub location: [f64; 3],
    /// World rotation as a unit quaternion (w, x, y, z).
    pub rotation: [f64; 4],
    /// Focal length in millimetres.
    pub lens: f64,
}

impl CameraPose {
    /// Whether `other` is the same pose within the tolerances above.
    pub fn same_as(&self, other: &CameraPose) -> bool {
        let distance = self
            .location
            .iter()
            .zip(&other.location)
            .map(|(a, b)| (a - b).powi(2))
            .sum::<f64>()
            .sqrt();
        // q and -q are the same rotation; the angle between two unit quaternions' rotations
        // is 2 acos(|q1 . q2|).
        let dot = self
            .rotation
            .iter()
            .zip(&other.rotation)
            .map(|(a, b)| a * b)
            .sum::<f64>()
            .abs()
            .min(1.0);
        let angle = 2.0 * dot.acos();
        distance <= LOCATION_TOLERANCE
            && angle <= ROTATION_TOLERANCE
            && (self.lens - other.lens).abs() <= LENS_TOLERANCE
    }

    fn describe(&self) -> String {
        format!(
            "location ({:.4}, {:.4}, {:.4}), lens {:.1} mm",
            self.location[0], self.location[1], self.location[2], self.lens
        )
    }
}

/// What the check found for an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeakStatus {
    /// A camera the task moves is already at its goal pose in the scene file.
    Leaks,
    /// The task moves a camera, and the scene file holds no camera at its goal pose.
    Clean,
    /// The task moves no camera (start and goal poses agree): there is no camera answer to
    /// leak.
    NoCameraChange,
}

impl LeakStatus {
    pub fn describe(self) -> &'static str {
        match self {
            LeakStatus::Leaks => "leaks the goal camera pose",
            LeakStatus::Clean => "clean",
            LeakStatus::NoCameraChange => "no camera change to leak",
        }
    }
}

/// The check's result for one instance (`scores.json`'s `answer_leak`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeakCheck {
    pub status: LeakStatus,
    /// The cameras the task moves.
    pub moved: Vec<String>,
    /// Of them, those the scene file already holds at their goal pose.
    pub leaked: Vec<String>,
    /// In words, for the reports.
    pub detail: String,
}

/// Compares the poses of the scene file, the start and the goal. A camera missing from the
/// start or the goal is not one the task moves; one missing from the file (the start program
/// adds it) cannot leak.
pub fn compare(file: &[CameraPose], start: &[CameraPose], goal: &[CameraPose]) -> LeakCheck {
    let find = |poses: &[CameraPose], name: &str| -> Option<CameraPose> {
        poses.iter().find(|pose| pose.name == name).cloned()
    };
    let mut moved = Vec::new();
    let mut leaked = Vec::new();
    let mut details = Vec::new();
    for goal_pose in goal {
        let Some(start_pose) = find(start, &goal_pose.name) else {
            continue;
        };
        if start_pose.same_as(goal_pose) {
            continue;
        }
        moved.push(goal_pose.name.clone());
        if find(file, &goal_pose.name).is_some_and(|file_pose| file_pose.same_as(goal_pose)) {
            leaked.push(goal_pose.name.clone());
            details.push(format!(
                "{} is already at its goal pose in blender_file.blend ({}), and start.py moves it away ({})",
                goal_pose.name,
                goal_pose.describe(),
                start_pose.describe()
            ));
        }
    }
    let (status, detail) = if !leaked.is_empty() {
        (
            LeakStatus::Leaks,
            format!(
                "answer leak: {}; a program that leaves the camera alone, or a look at the scene file, finds the answer",
                details.join("; ")
            ),
        )
    } else if moved.is_empty() {
        (
            LeakStatus::NoCameraChange,
            "the task moves no camera (start.py and goal.py agree on every camera's pose)"
                .to_owned(),
        )
    } else {
        (
            LeakStatus::Clean,
            format!(
                "the task moves {}; blender_file.blend holds none of them at its goal pose",
                moved.join(", ")
            ),
        )
    };
    LeakCheck {
        status,
        moved,
        leaked,
        detail,
    }
}

/// Why the check could not be made (a harness failure of the instance).
#[derive(Debug, thiserror::Error)]
pub enum LeakCheckError {
    #[error("Blender: {0}")]
    Transport(#[from] TransportError),
    #[error("reading the camera poses of {state}: {source}")]
    Poses {
        state: &'static str,
        source: SceneError,
    },
    #[error("start.py fails in this Blender ({0}), so its camera poses cannot be read")]
    StartFails(String),
}

/// Reads the scene file's and the start program's camera poses and compares them with the
/// goal's, read by the caller while the goal was loaded. Leaves the worker holding the start
/// state.
pub async fn check(
    blender: &dyn BlenderTransport,
    instance: &Instance,
    goal: &[CameraPose],
    timeout: Duration,
) -> Result<LeakCheck, LeakCheckError> {
    let reset = SceneReset::Blend {
        path: instance.blend.to_string_lossy().into_owned(),
    };
    let file = scene::camera_poses(blender, Some(reset), timeout)
        .await
        .map_err(|source| LeakCheckError::Poses {
            state: "blender_file.blend",
            source,
        })?;
    let start_code = std::fs::read_to_string(&instance.start_py).map_err(|err| {
        LeakCheckError::StartFails(format!(
            "cannot read {}: {err}",
            instance.start_py.display()
        ))
    })?;
    let ran = scene::run_program(blender, instance, &start_code, timeout).await?;
    if let Some(error) = ran.error {
        return Err(LeakCheckError::StartFails(error.to_string()));
    }
    let start = scene::camera_poses(blender, None, timeout)
        .await
        .map_err(|source| LeakCheckError::Poses {
            state: "the start (after start.py)",
            source,
        })?;
    Ok(compare(&file, &start, goal))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pose(name: &str, x: f64, yaw: f64) -> CameraPose {
        let half = yaw / 2.0;
        CameraPose {
            name: name.to_owned(),
            location: [x, 0.0, 1.0],
            rotation: [half.cos(), 0.0, 0.0, half.sin()],
            lens: 50.0,
        }
    }

    #[test]
    fn a_file_that_holds_the_goal_pose_of_a_moved_camera_leaks() {
        let goal = [pose("Camera1", -1.0292, 3.6424)];
        let start = [pose("Camera1", 1.0765, 0.6753)];
        let check = compare(&goal, &start, &goal);
        assert_eq!(check.status, LeakStatus::Leaks);
        assert_eq!(check.leaked, ["Camera1"]);
        assert!(
            check.detail.contains("Camera1 is already at its goal pose"),
            "{}",
            check.detail
        );

        // The file's camera somewhere else: clean.
        let file = [pose("Camera1", 0.0, 0.0)];
        let check = compare(&file, &start, &goal);
        assert_eq!((check.status, check.moved.len()), (LeakStatus::Clean, 1));

        // Start and goal agree: nothing to leak, even though the file holds that pose.
        let check = compare(&goal, &goal, &goal);
        assert_eq!(check.status, LeakStatus::NoCameraChange);
    }

    #[test]
    fn poses_match_within_the_tolerances_and_not_beyond() {
        let a = pose("Camera1", 1.0, 0.5);
        let mut near = pose(
            "Camera1",
            1.0 + 0.5 * LOCATION_TOLERANCE,
            0.5 + 0.5 * ROTATION_TOLERANCE,
        );
        assert!(a.same_as(&near));
        // The same rotation written as -q.
        near.rotation = near.rotation.map(|c| -c);
        assert!(a.same_as(&near));
        assert!(!a.same_as(&pose("Camera1", 1.0 + 2.0 * LOCATION_TOLERANCE, 0.5)));
        assert!(!a.same_as(&pose("Camera1", 1.0, 0.5 + 2.0 * ROTATION_TOLERANCE)));
        let mut zoomed = a.clone();
        zoomed.lens = 35.0;
        assert!(!a.same_as(&zoomed));
    }

    #[test]
    fn cameras_missing_from_a_state_are_left_out() {
        let goal = [pose("Camera1", 2.0, 0.0), pose("Camera2", 3.0, 0.0)];
        let start = [pose("Camera1", 1.0, 0.0)];
        let file = [pose("Camera2", 3.0, 0.0)];
        let check = compare(&file, &start, &goal);
        assert_eq!(check.status, LeakStatus::Clean, "{check:?}");
        assert_eq!(check.moved, ["Camera1"]);
    }
}
