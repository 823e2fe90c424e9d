//! Target pictures as a person names them: one picture, a picture per view (`Camera1=front.png`),
//! or a folder of them (`<View>.png` per camera as VIGA's static scenes have them,
//! `<View>_f<frame>.png` or numbered frames for an animation).

use std::path::{Path, PathBuf};

use crate::CoreError;
use crate::config::TargetSpec;

/// Picture files a target folder may hold.
const PICTURE_EXTENSIONS: [&str; 3] = ["png", "jpg", "jpeg"];

/// The targets one argument names: `PATH` (a picture of the default view, or a folder, see
/// [`targets_in_folder`]) or `VIEW=PATH` (a picture of `VIEW`: a camera's name, a slide).
pub fn parse_target_argument(text: &str) -> Result<Vec<TargetSpec>, CoreError> {
    let whole = Path::new(text);
    let (view, path) = match text.split_once('=') {
        // A file whose name holds `=` is still a file.
        _ if whole.exists() => (None, whole.to_path_buf()),
        Some((view, path)) if !view.trim().is_empty() && !path.is_empty() => {
            (Some(view.trim().to_owned()), PathBuf::from(path))
        }
        _ => (None, whole.to_path_buf()),
    };
    if path.is_dir() {
        if let Some(view) = view {
            return Err(CoreError::Config(format!(
                "--target {view}={} names a folder; give one picture per view (VIEW=PICTURE), or the folder alone",
                path.display()
            )));
        }
        return targets_in_folder(&path);
    }
    if !path.is_file() {
        return Err(CoreError::Config(format!(
            "target {} does not exist; give a picture (PNG or JPEG), VIEW=PICTURE, or a folder of pictures",
            path.display()
        )));
    }
    Ok(vec![TargetSpec {
        path,
        view,
        frame: None,
    }])
}

/// The pictures in `folder`, by name: `<View>.png` is a picture of that view (a camera),
/// `<View>_f<frame>.png` that view at an animation frame, and a plain number (`0012.png`)
/// the default view at that frame. Sorted by view, then frame.
pub fn targets_in_folder(folder: &Path) -> Result<Vec<TargetSpec>, CoreError> {
    let entries = std::fs::read_dir(folder).map_err(|err| CoreError::io(folder, err))?;
    let mut targets = Vec::new();
    for entry in entries {
        let path = entry.map_err(|err| CoreError::io(folder, err))?.path();
        let is_picture = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| PICTURE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()));
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if !is_picture || !path.is_file() || stem.starts_with('.') {
            continue;
        }
        let (view, frame) = view_and_frame(stem);
        targets.push(TargetSpec {
            view,
            frame,
            path: path.clone(),
        });
    }
    if targets.is_empty() {
        return Err(CoreError::Config(format!(
            "target folder {} holds no pictures; put one <Camera>.png per camera in it (or numbered frames)",
            folder.display()
        )));
    }
    targets.sort_by(|a, b| (&a.view, a.frame).cmp(&(&b.view, b.frame)));
    Ok(targets)
}

/// `Camera1` → (Camera1, none); `Camera1_f24` → (Camera1, 24); `0012` → (default, 12).
fn view_and_frame(stem: &str) -> (Option<String>, Option<i32>) {
    if let Ok(frame) = stem.parse::<i32>() {
        return (None, Some(frame));
    }
    if let Some((view, frame)) = stem.rsplit_once("_f")
        && !view.is_empty()
        && let Ok(frame) = frame.parse::<i32>()
    {
        return (Some(view.to_owned()), Some(frame));
    }
    (Some(stem.to_owned()), None)
}

/// What is wrong with a set of targets: two pictures of the same view at the same frame.
pub(crate) fn target_problems(targets: &[TargetSpec]) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, target) in targets.iter().enumerate() {
        if targets[..i]
            .iter()
            .any(|earlier| (&earlier.view, earlier.frame) == (&target.view, target.frame))
        {
            problems.push(format!(
                "two target pictures show {}: give one picture per view (and frame)",
                crate::domain::label_of(target.view.as_deref(), target.frame)
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_and_folders() {
        let dir = tempfile::tempdir().unwrap();
        let picture = dir.path().join("front.png");
        std::fs::write(&picture, b"png").unwrap();
        let one = parse_target_argument(picture.to_str().unwrap()).unwrap();
        assert_eq!((one[0].view.as_deref(), one[0].frame), (None, None));
        let named = parse_target_argument(&format!("Camera2={}", picture.display())).unwrap();
        assert_eq!(named[0].view.as_deref(), Some("Camera2"));
        let missing = parse_target_argument("Camera2=/nowhere/x.png").unwrap_err();
        assert!(missing.to_string().contains("does not exist"), "{missing}");

        let folder = dir.path().join("views");
        std::fs::create_dir(&folder).unwrap();
        for name in [
            "Camera2.png",
            "Camera1.jpg",
            "Camera1_f12.png",
            "notes.txt",
            "0003.png",
        ] {
            std::fs::write(folder.join(name), b"x").unwrap();
        }
        let found = parse_target_argument(folder.to_str().unwrap()).unwrap();
        let labels: Vec<_> = found
            .iter()
            .map(|t| crate::domain::label_of(t.view.as_deref(), t.frame))
            .collect();
        assert_eq!(labels, ["default@f3", "Camera1", "Camera1@f12", "Camera2"]);
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert!(parse_target_argument(empty.to_str().unwrap()).is_err());
        let twice = [named[0].clone(), named[0].clone()];
        assert_eq!(target_problems(&twice).len(), 1);
    }
}
