//! Target pictures as a person names them: one picture, a picture per view (`Camera1=front.png`),
//! a folder of them (`<View>.png` per camera as VIGA's static scenes have them,
//! `<View>_f<frame>.png` or numbered frames for an animation), or a video, whose frames
//! ffmpeg decodes.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::CoreError;
use crate::config::TargetSpec;

/// Picture files a target folder may hold.
const PICTURE_EXTENSIONS: [&str; 3] = ["png", "jpg", "jpeg"];
/// Files read as videos (decoded with ffmpeg).
const VIDEO_EXTENSIONS: [&str; 8] = ["mp4", "mov", "webm", "mkv", "avi", "gif", "m4v", "mpg"];
/// How long ffmpeg or ffprobe may take on one video before it is stopped.
const DECODE_LIMIT: Duration = Duration::from_secs(120);
/// The most frames of an animation a run compares (each is a render per iteration).
const MAX_FRAMES: usize = 24;

/// How animation targets are read: which frames to compare (scene frames, 1 being a
/// video's first), and where a video's frames are decoded to.
#[derive(Debug, Clone, Default)]
pub struct FrameChoice {
    /// The frames to compare; empty: the first, middle and last of a video, every frame of a
    /// folder of frames.
    pub frames: Vec<i32>,
    /// Where decoded video frames go (the caller keeps the folder until the run has copied
    /// its targets).
    pub decode_into: Option<PathBuf>,
}

/// The targets one argument names: `PATH` (a picture of the default view, a folder, see
/// [`targets_in_folder`], or a video, see [`video_targets`]) or `VIEW=PATH` (a picture or
/// video of `VIEW`: a camera's name, a slide).
pub fn parse_target_argument(
    text: &str,
    choice: &FrameChoice,
) -> Result<Vec<TargetSpec>, CoreError> {
    let targets = read_target_argument(text, choice)?;
    keep_chosen_frames(targets, &choice.frames)
}

fn read_target_argument(text: &str, choice: &FrameChoice) -> Result<Vec<TargetSpec>, CoreError> {
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
            "target {} does not exist; give a picture (PNG or JPEG), VIEW=PICTURE, a folder of pictures or a video",
            path.display()
        )));
    }
    if has_extension(&path, &VIDEO_EXTENSIONS) {
        let Some(into) = &choice.decode_into else {
            return Err(CoreError::Config(format!(
                "{} is a video, and this front end reads no video targets; pass a folder of its frames",
                path.display()
            )));
        };
        return video_targets(&path, view, &choice.frames, into);
    }
    Ok(vec![TargetSpec {
        path,
        view,
        frame: None,
    }])
}

fn has_extension(path: &Path, extensions: &[&str]) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| extensions.contains(&e.to_ascii_lowercase().as_str()))
}

/// Keeps the targets at `frames` when any are chosen: every chosen frame must be there.
fn keep_chosen_frames(
    targets: Vec<TargetSpec>,
    frames: &[i32],
) -> Result<Vec<TargetSpec>, CoreError> {
    if frames.is_empty() || targets.iter().all(|t| t.frame.is_none()) {
        return Ok(targets);
    }
    for frame in frames {
        if !targets.iter().any(|t| t.frame == Some(*frame)) {
            return Err(CoreError::Config(format!(
                "--frames names frame {frame}, which no target picture shows"
            )));
        }
    }
    Ok(targets
        .into_iter()
        .filter(|t| t.frame.is_none_or(|f| frames.contains(&f)))
        .collect())
}

/// The frames of `video` as targets of `view` (the default view when `None`): the chosen
/// scene frames (frame 1 is the video's first), else its first, middle and last, decoded
/// by ffmpeg into `into`.
pub fn video_targets(
    video: &Path,
    view: Option<String>,
    frames: &[i32],
    into: &Path,
) -> Result<Vec<TargetSpec>, CoreError> {
    let count = count_video_frames(video)?;
    let frames: Vec<i32> = if frames.is_empty() {
        let mut chosen = vec![1, (count + 1) / 2, count];
        chosen.dedup();
        chosen
    } else {
        frames.to_vec()
    };
    if frames.len() > MAX_FRAMES {
        return Err(CoreError::Config(format!(
            "{} frames chosen; compare at most {MAX_FRAMES} (each is rendered every iteration)",
            frames.len()
        )));
    }
    if let Some(outside) = frames.iter().find(|&&f| f < 1 || f > count) {
        return Err(CoreError::Config(format!(
            "frame {outside} is outside {} (frames 1 to {count})",
            video.display()
        )));
    }
    std::fs::create_dir_all(into).map_err(|err| CoreError::io(into, err))?;
    let select = frames
        .iter()
        .map(|frame| format!("eq(n\\,{})", frame - 1))
        .collect::<Vec<_>>()
        .join("+");
    let pattern = into.join("decoded_%04d.png");
    let mut ffmpeg = Command::new(tool("ffmpeg"));
    ffmpeg
        .args(["-v", "error", "-nostdin", "-y", "-i"])
        .arg(video)
        .args([
            "-vf",
            &format!("select='{select}'"),
            "-fps_mode",
            "passthrough",
        ])
        .arg(&pattern);
    run_tool(ffmpeg, "ffmpeg", video)?;
    let mut sorted = frames.clone();
    sorted.sort_unstable();
    sorted
        .iter()
        .enumerate()
        .map(|(i, frame)| {
            let decoded = into.join(format!("decoded_{:04}.png", i + 1));
            if !decoded.is_file() {
                return Err(CoreError::Config(format!(
                    "ffmpeg decoded fewer frames of {} than asked for (frame {frame} is missing)",
                    video.display()
                )));
            }
            // The decoded file is the target as it is: the run folder copies it under a name
            // that says its frame.
            Ok(TargetSpec {
                path: decoded,
                view: view.clone(),
                frame: Some(*frame),
            })
        })
        .collect()
}

/// How many frames `video` has (ffprobe counts its packets).
fn count_video_frames(video: &Path) -> Result<i32, CoreError> {
    let mut ffprobe = Command::new(tool("ffprobe"));
    ffprobe
        .args([
            "-v",
            "error",
            "-select_streams",
            "v:0",
            "-count_packets",
            "-show_entries",
            "stream=nb_read_packets",
            "-of",
            "csv=p=0",
        ])
        .arg(video);
    let out = run_tool(ffprobe, "ffprobe", video)?;
    out.trim()
        .split(|c: char| !c.is_ascii_digit())
        .find(|part| !part.is_empty())
        .and_then(|n| n.parse::<i32>().ok())
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            CoreError::Config(format!(
                "{} has no video frames that ffprobe can count",
                video.display()
            ))
        })
}

/// `name`, or the path `VIGA_FFMPEG_DIR` gives for it.
fn tool(name: &str) -> PathBuf {
    match std::env::var_os("VIGA_FFMPEG_DIR") {
        Some(dir) => PathBuf::from(dir).join(name),
        None => PathBuf::from(name),
    }
}

/// Runs an ffmpeg tool on `video` within [`DECODE_LIMIT`]; its stdout on success.
fn run_tool(mut command: Command, name: &str, video: &Path) -> Result<String, CoreError> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|err| {
            CoreError::Config(format!(
                "a video target needs {name}, which could not be run ({err}): install ffmpeg (Debian and Ubuntu: apt-get install ffmpeg; macOS: brew install ffmpeg), set VIGA_FFMPEG_DIR to the folder holding it, or pass a folder of the video's frames instead"
            ))
        })?;
    // Read on threads of their own, so a chatty tool never blocks on a full pipe.
    let stdout = child
        .stdout
        .take()
        .map(|pipe| std::thread::spawn(move || bounded_text(pipe)));
    let stderr = child
        .stderr
        .take()
        .map(|pipe| std::thread::spawn(move || bounded_text(pipe)));
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < DECODE_LIMIT => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(CoreError::Config(format!(
                    "{name} did not finish reading {} within {} s",
                    video.display(),
                    DECODE_LIMIT.as_secs()
                )));
            }
        }
    };
    let joined = |reader: Option<std::thread::JoinHandle<String>>| {
        reader.and_then(|r| r.join().ok()).unwrap_or_default()
    };
    let (out, errors) = (joined(stdout), joined(stderr));
    if !status.success() {
        return Err(CoreError::Config(format!(
            "{name} could not read {} ({status}): {}",
            video.display(),
            errors.trim()
        )));
    }
    Ok(out)
}

/// What a pipe gives, up to 64 KiB (the rest is drained and dropped).
fn bounded_text(mut pipe: impl std::io::Read) -> String {
    use std::io::Read as _;
    let mut kept = Vec::new();
    let _ = pipe.by_ref().take(64 * 1024).read_to_end(&mut kept);
    let _ = std::io::copy(&mut pipe, &mut std::io::sink());
    String::from_utf8_lossy(&kept).into_owned()
}

/// The pictures in `folder`, by name: `<View>.png` is a picture of that view (a camera),
/// `<View>_f<frame>.png` that view at an animation frame, and a plain number (`0012.png`)
/// the default view at that frame. Sorted by view, then frame.
pub fn targets_in_folder(folder: &Path) -> Result<Vec<TargetSpec>, CoreError> {
    let entries = std::fs::read_dir(folder).map_err(|err| CoreError::io(folder, err))?;
    let mut targets = Vec::new();
    for entry in entries {
        let path = entry.map_err(|err| CoreError::io(folder, err))?.path();
        let is_picture = has_extension(&path, &PICTURE_EXTENSIONS);
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
        let choice = FrameChoice::default();
        let one = parse_target_argument(picture.to_str().unwrap(), &choice).unwrap();
        assert_eq!((one[0].view.as_deref(), one[0].frame), (None, None));
        let named =
            parse_target_argument(&format!("Camera2={}", picture.display()), &choice).unwrap();
        assert_eq!(named[0].view.as_deref(), Some("Camera2"));
        let missing = parse_target_argument("Camera2=/nowhere/x.png", &choice).unwrap_err();
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
        let found = parse_target_argument(folder.to_str().unwrap(), &choice).unwrap();
        let labels: Vec<_> = found
            .iter()
            .map(|t| crate::domain::label_of(t.view.as_deref(), t.frame))
            .collect();
        assert_eq!(labels, ["default@f3", "Camera1", "Camera1@f12", "Camera2"]);
        let empty = dir.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        assert!(parse_target_argument(empty.to_str().unwrap(), &choice).is_err());
        let frame_3 = FrameChoice {
            frames: vec![3],
            ..FrameChoice::default()
        };
        let chosen = parse_target_argument(folder.to_str().unwrap(), &frame_3).unwrap();
        assert_eq!(chosen.len(), 3, "frame 3 and the stills: {chosen:?}");
        let frame_9 = FrameChoice {
            frames: vec![9],
            ..FrameChoice::default()
        };
        let missing = parse_target_argument(folder.to_str().unwrap(), &frame_9).unwrap_err();
        assert!(missing.to_string().contains("frame 9"), "{missing}");
        let twice = [named[0].clone(), named[0].clone()];
        assert_eq!(target_problems(&twice).len(), 1);
    }
}
