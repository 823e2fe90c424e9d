//! Sharding as a batch engine runs it: three `viga eval` processes, one shard each, then
//! `viga eval merge`; the merged results equal an unsharded run's, instance by instance.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use viga_testkit::{BLENDER_TEST_LIMIT, kill_after, output_within, status_within};

const VIGA: &str = env!("CARGO_BIN_EXE_viga");

fn eval(out: &Path, shard: &str, baseline: &str) -> Command {
    let mini = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/blendergym-mini");
    let mut command = Command::new(VIGA);
    command
        .args(["eval", "blendergym", "--data"])
        .arg(mini)
        .args([
            "--baseline",
            baseline,
            "--engine",
            "workbench",
            "--resolution",
            "16",
        ])
        .args([
            "--samples",
            "1",
            "--chamfer-points",
            "500",
            "--shard",
            shard,
            "--out",
        ])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

fn json(path: PathBuf) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
        .unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

fn instances(out: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(out)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|entry| entry.path().join("scores.json").is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn three_shard_processes_merged_equal_one_unsharded_run() {
    let dir = tempfile::tempdir().unwrap();
    let shards: Vec<PathBuf> = (0..3)
        .map(|i| dir.path().join(format!("shard-{i}")))
        .collect();
    let running: Vec<_> = shards
        .iter()
        .enumerate()
        .map(|(i, out)| {
            let child = eval(out, &format!("{i}/3"), "noop").spawn().unwrap();
            let watchdog = kill_after(
                &child,
                BLENDER_TEST_LIMIT,
                &format!("viga eval --shard {i}/3"),
            );
            (child, watchdog)
        })
        .collect();
    for (child, watchdog) in running {
        let output = child.wait_with_output().unwrap();
        drop(watchdog);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let merged = dir.path().join("merged");
    let status = status_within(
        Command::new(VIGA)
            .args(["eval", "merge", "--into"])
            .arg(&merged)
            .args(&shards)
            .stdout(Stdio::null()),
        BLENDER_TEST_LIMIT,
    );
    assert!(status.success());
    let whole = dir.path().join("whole");
    let output = output_within(&mut eval(&whole, "0/1", "noop"), BLENDER_TEST_LIMIT);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let names = instances(&whole);
    assert_eq!(names.len(), 15, "{names:?}");
    assert_eq!(instances(&merged), names);
    for shard in &shards {
        let own = instances(shard).len();
        assert!(
            (4..=6).contains(&own),
            "shards are balanced: {own} in {}",
            shard.display()
        );
    }
    // Everything but the wall time an instance took.
    let scores = |out: &Path, name: &str| {
        let mut value = json(out.join(name).join("scores.json"));
        value.as_object_mut().unwrap().remove("seconds");
        value
    };
    for name in &names {
        assert_eq!(scores(&merged, name), scores(&whole, name), "{name}");
    }
    let summary = |out: &Path| {
        let mut value = json(out.join("summary.json"));
        value.as_object_mut().unwrap().remove("settings");
        value
    };
    assert_eq!(summary(&merged), summary(&whole));
}

/// `--search-views` is checked before Blender starts: only for the search, only view names,
/// only views every selected instance has; nothing is written when it is refused.
#[test]
fn bad_search_views_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    for (baseline, views, expected) in [
        (
            "noop",
            "Camera1",
            "--search-views applies to --baseline search only",
        ),
        (
            "search",
            "Camera1,Camera3",
            "--search-views: Camera1, Camera3 are not views of every selected instance (blendshape1 has 2 view(s),",
        ),
        (
            "search",
            "camera1",
            "--search-views: \"camera1\" is not a view name; views are the cameras Camera1, Camera2, ...",
        ),
        ("search", "Camera1,Camera1", "Camera1 is named twice"),
    ] {
        let mut command = eval(&out, "0/1", baseline);
        command.args(["--search-views", views]);
        let output = output_within(&mut command, BLENDER_TEST_LIMIT);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{views}: {stderr}");
        assert!(stderr.contains(expected), "{views}: {stderr}");
        assert!(!out.exists(), "{views}: a refused run writes nothing");
    }
}

/// An evaluation says what held, as `viga run` does: with a half of containment missing (the
/// launcher's test switch) it warns under `auto`, and eval.json, each instance's folder and
/// the report record it, for a baseline too.
#[test]
fn an_evaluation_with_a_half_missing_warns_and_records_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut command = eval(&out, "0/1", "noop");
    command
        .args(["--instances", "placement2"])
        .env("VIGA_CONTAIN_TEST_WITHOUT", "network")
        .env("VIGA_CONTAINMENT", "auto");
    let output = output_within(&mut command, BLENDER_TEST_LIMIT);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: model-written programs run with")
            && stderr.contains("network NOT contained"),
        "{stderr}"
    );
    let settings = json(out.join("eval.json"));
    assert_eq!(
        settings["containment"]["network"]["active"], false,
        "{settings}"
    );
    assert_eq!(
        settings["containment"]["writes"]["active"], true,
        "{settings}"
    );
    let instance = json(out.join("placement2/containment.json"));
    assert_eq!(instance["network"]["active"], false, "{instance}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("Containment of the workers: NOT every half held")
            && report.contains("network NOT contained"),
        "{report}"
    );
}
