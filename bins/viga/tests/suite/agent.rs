//! `viga agent` end to end on real Blender with the example add-ons and a scripted model: on
//! viga's own Blender (JSON lines, run folder, report, final.blend), and attached to a
//! headless Blender with the viga add-on installed from its zip, where every command is one
//! undo step and a cancelled run keeps the steps it finished.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use crate::support;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use viga_blender::BlenderCommands as _;
use viga_blender::client::FramedClient;
use viga_testkit::{BLENDER_TEST_LIMIT, kill_after, output_within, within};

use support::{Host, table_and_lamp_blend, workspace_file};

const VIGA: &str = env!("CARGO_BIN_EXE_viga");
const REQUEST: &str = "put the lamp to the left of the table and paint it red";

fn tool_turn(expect: Value, name: &str, arguments: Value) -> Value {
    json!({"expect": expect, "response": {"text": "", "finish_reason": "tool_calls",
        "tool_calls": [{"id": name, "name": name, "arguments": arguments}]}})
}

fn place_lamp_left() -> Value {
    tool_turn(
        json!({"system_contains": "Object Placer", "last_message_contains": "Lamp [MESH]"}),
        "place_object_relative",
        json!({"object1_name": "Lamp", "object2_name": "Table", "side": "left"}),
    )
}

fn script_file(dir: &Path, turns: Vec<Value>) -> PathBuf {
    support::script_file(dir, "agent.json", Value::from(turns))
}

/// Moves the lamp, paints it, answers.
fn whole_session(dir: &Path) -> PathBuf {
    script_file(
        dir,
        vec![
            place_lamp_left(),
            tool_turn(
                json!({"last_message_contains": "\"scene\":["}),
                "paint_object",
                json!({"object_name": "Lamp", "color": [1.0, 0.0, 0.0]}),
            ),
            json!({"expect": {"last_message_contains": "Lamp_paint"},
                   "response": {"text": "The lamp is left of the table, and red.", "finish_reason": "stop"}}),
        ],
    )
}

fn agent_command(script: &Path, output: &Path) -> Command {
    let mut command = Command::new(VIGA);
    command
        .args(["agent", REQUEST, "--events", "jsonl", "--resolution", "48"])
        .arg("--addons")
        .arg(workspace_file("fixtures/addons"))
        .args(["--provider", "scripted", "--script"])
        .arg(script)
        .arg("--output")
        .arg(output);
    command
}

fn stdout_lines(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect()
}

fn run_folder(lines: &[Value]) -> PathBuf {
    lines
        .iter()
        .find(|line| line["kind"] == "run_folder")
        .and_then(|line| line["path"].as_str())
        .map(PathBuf::from)
        .unwrap()
}

#[test]
fn on_its_own_blender_the_agent_streams_events_and_leaves_a_run_folder() {
    let files = tempfile::tempdir().unwrap();
    let blend = table_and_lamp_blend(files.path());
    let mut command = agent_command(&whole_session(files.path()), &files.path().join("runs"));
    command.arg("--blend").arg(&blend);
    let output = output_within(&mut command, BLENDER_TEST_LIMIT);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines = stdout_lines(&output);
    let finished = lines.last().unwrap();
    assert_eq!(
        (
            &finished["kind"],
            &finished["stop"]["reason"],
            &finished["message"]
        ),
        (
            &json!("finished"),
            &json!("accepted"),
            &json!("The lamp is left of the table, and red.")
        ),
        "{lines:?}"
    );
    let types: Vec<&str> = lines
        .iter()
        .filter(|line| line["kind"] == "event")
        .filter_map(|line| line["event"]["type"].as_str())
        .collect();
    assert_eq!(
        types,
        [
            "run_started",
            "model_called",
            "tool_started",
            "tool_invoked",
            "model_called",
            "tool_started",
            "tool_invoked",
            "model_called",
            "run_finished"
        ]
    );
    assert!(
        lines
            .iter()
            .any(|line| line["event"]["role"] == "agent" && line["event"]["index"] == 2)
    );
    let folder = run_folder(&lines);
    for file in [
        "args.json",
        "provider.json",
        "events.jsonl",
        "transcript.json",
        "report.html",
        "final.blend",
    ] {
        assert!(folder.join(file).is_file(), "missing {file}");
    }
    let report = std::fs::read_to_string(folder.join("report.html")).unwrap();
    assert!(report.contains("paint_object") && report.contains("Lamp_paint"));
    assert!(std::fs::metadata(folder.join("final.blend")).unwrap().len() > 0);

    // A follow-up sees the earlier request, its answer and its commands, and works on the
    // scene the first run left (the lamp is left of the table now: x < 0).
    let follow_up = script_file(
        files.path(),
        vec![
            json!({"expect": {"last_message_contains": "1. Request: put the lamp to the left of the table and paint it red\n   Result: answered: The lamp is left of the table, and red.; commands: place_object_relative("},
                     "response": {"text": "It is already red.", "finish_reason": "stop"}}),
        ],
    );
    let mut command = Command::new(VIGA);
    command
        .args([
            "agent",
            "is it red?",
            "--events",
            "jsonl",
            "--resolution",
            "48",
        ])
        .arg("--addons")
        .arg(workspace_file("fixtures/addons"))
        .args(["--provider", "scripted", "--script"])
        .arg(&follow_up)
        .arg("--continue")
        .arg(&folder)
        .arg("--output")
        .arg(files.path().join("runs"));
    let output = output_within(&mut command, BLENDER_TEST_LIMIT);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let second = run_folder(&stdout_lines(&output));
    let args: Value =
        serde_json::from_slice(&std::fs::read(second.join("args.json")).unwrap()).unwrap();
    assert_eq!(args["conversation"][0]["run"], json!(folder));
    let transcript = std::fs::read_to_string(second.join("transcript.json")).unwrap();
    assert!(
        transcript.contains("Lamp_paint"),
        "the follow-up did not start from the first run's scene: {transcript}"
    );
}

impl Host {
    /// `viga agent --attach` against this host.
    fn agent(&self, script: &Path, output: &Path) -> Command {
        let mut command = agent_command(script, output);
        command
            .arg("--attach")
            .env("VIGA_CONNECTION_DIR", self.connection_dir());
        command
    }
}

/// The lamp's x and its materials.
async fn lamp(client: &FramedClient) -> (f64, Vec<String>) {
    let info = client.scene_info(0, 100).await.unwrap();
    let lamp = info.objects.iter().find(|o| o.name == "Lamp").unwrap();
    (
        (lamp.location[0] * 1000.0).round() / 1000.0,
        lamp.materials.clone(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn attached_every_command_is_one_undo_step_in_the_users_scene() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let files = tempfile::tempdir().unwrap();
        let host = Host::start(&table_and_lamp_blend(files.path()), None, None);
        let mut command = host.agent(&whole_session(files.path()), &files.path().join("runs"));
        let output = output_within(&mut command, BLENDER_TEST_LIMIT);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let lines = stdout_lines(&output);
        assert_eq!(
            lines.last().unwrap()["stop"]["reason"],
            "accepted",
            "answered: {lines:?}"
        );
        assert!(
            !run_folder(&lines).join("final.blend").exists(),
            "the person's scene holds the result"
        );

        let client = host.client().await;
        assert_eq!(lamp(&client).await, (-0.7, vec!["Lamp_paint".to_owned()]));
        client.undo().await.unwrap();
        assert_eq!(
            lamp(&client).await,
            (-0.7, vec![]),
            "one undo takes the paint back"
        );
        client.undo().await.unwrap();
        assert_eq!(
            lamp(&client).await,
            (3.0, vec![]),
            "a second takes the move back"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_attached_run_keeps_the_commands_it_finished() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let files = tempfile::tempdir().unwrap();
        let host = Host::start(&table_and_lamp_blend(files.path()), None, None);
        let slow_answer =
            json!({"delay_ms": 60_000, "response": {"text": "too late", "finish_reason": "stop"}});
        let script = script_file(files.path(), vec![place_lamp_left(), slow_answer]);
        let mut child = host
            .agent(&script, &files.path().join("runs"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let watchdog = kill_after(&child, BLENDER_TEST_LIMIT, "viga agent --attach");
        // Wait until the command is done and the run is in its (slow) second model call.
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        while !lines.next().unwrap().unwrap().contains("\"tool_invoked\"") {}
        tokio::time::sleep(Duration::from_millis(300)).await;
        let cancelled_at = Instant::now();
        Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        let status = child.wait().unwrap();
        drop(watchdog);
        assert!(cancelled_at.elapsed() < Duration::from_secs(3));
        assert_eq!(status.code(), Some(130));
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        assert!(rest.iter().any(|l| l.contains("\"cancelled\"")), "{rest:?}");

        let client = host.client().await;
        assert_eq!(lamp(&client).await.0, -0.7, "the finished command stays");
        client.undo().await.unwrap();
        assert_eq!(lamp(&client).await.0, 3.0, "and is one undo step");
    })
    .await;
}

/// The agent's own Blender writes its run's results folder and nothing else: a path
/// parameter pointing out (nested too) is refused before Blender sees it, one inside lands
/// in `<run>/results/`, and an add-on whose own code writes wherever it is named cannot
/// reach another run's folder.
#[test]
fn the_agent_writes_only_its_own_runs_results_folder() {
    // Not under /tmp, which contained programs do not see at all: here only the limit on
    // writes stands in the way.
    let files = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let output = files.path().join("runs");
    let other_run = output.join("scene/earlier/task");
    std::fs::create_dir_all(&other_run).unwrap();
    let planted = other_run.join("final.py");
    let note = |path: &str| json!({"note_path": path});
    let script = script_file(
        files.path(),
        vec![
            tool_turn(json!({}), "write_note", note("../../../escape.txt")),
            tool_turn(
                json!({"last_message_contains": "`..` may not appear in a path"}),
                "write_note",
                note("note.txt"),
            ),
            tool_turn(
                json!({}),
                "plant",
                json!({"target_name": planted.display().to_string()}),
            ),
            json!({"expect": {"last_message_contains": "refused"},
                   "response": {"text": "done", "finish_reason": "stop"}}),
        ],
    );
    let mut command = Command::new(VIGA);
    command
        .args(["agent", "write a note", "--events", "jsonl", "--addons"])
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/addons"))
        .args(["--provider", "scripted", "--script"])
        .arg(&script)
        .arg("--output")
        .arg(&output)
        .env_remove("VIGA_CONTAINMENT");
    let ran = output_within(&mut command, BLENDER_TEST_LIMIT);
    let stderr = String::from_utf8_lossy(&ran.stderr);
    assert!(ran.status.success(), "{stderr}");
    let folder = run_folder(&stdout_lines(&ran));
    assert_eq!(
        std::fs::read_to_string(folder.join("results/note.txt")).unwrap_or_default(),
        "a note"
    );
    assert!(
        !planted.exists(),
        "the agent's Blender wrote another run's folder"
    );
    assert!(!files.path().join("escape.txt").exists());
    assert!(!output.join("escape.txt").exists());
    let status: Value =
        serde_json::from_str(&std::fs::read_to_string(folder.join("containment.json")).unwrap())
            .unwrap();
    assert_eq!(status["writes"]["active"], true, "{status}");
}

/// An object whose name holds terminal escape sequences (a title change, a screen clear)
/// reaches the terminal as codes, in the command's summary (JSON) and in the model's answer
/// that repeats it: the person's terminal is not steered by a scene.
#[test]
fn names_from_the_scene_are_printed_with_their_control_characters_escaped() {
    const NAME: &str = "Lamp\u{1b}]0;owned\u{7}\u{1b}[2J";
    let files = tempfile::tempdir().unwrap();
    let objects = format!(
        "bpy.ops.mesh.primitive_cube_add(size=1, location=(0, 0, 0.5))\nbpy.context.object.name = 'Table'\n\
         bpy.ops.mesh.primitive_cube_add(size=0.4, location=(3, 0, 0.2))\nbpy.context.object.name = {}\n",
        serde_json::Value::from(NAME)
    );
    let blend = support::blend_with(files.path(), "escapes.blend", &objects);
    let script = script_file(
        files.path(),
        vec![
            tool_turn(
                json!({}),
                "place_object_relative",
                json!({"object1_name": NAME, "object2_name": "Table", "side": "left"}),
            ),
            // The model names the object as the scene does, in its answer.
            json!({"response": {"text": format!("Moved {NAME}."), "finish_reason": "stop"}}),
        ],
    );
    let mut command = Command::new(VIGA);
    command
        .args(["agent", REQUEST, "--resolution", "32"])
        .arg("--addons")
        .arg(workspace_file("fixtures/addons"))
        .args(["--provider", "scripted", "--script"])
        .arg(&script)
        .arg("--blend")
        .arg(&blend)
        .arg("--output")
        .arg(files.path().join("runs"));
    let output = output_within(&mut command, BLENDER_TEST_LIMIT);
    let printed = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        printed.contains("Lamp\\u{1b}]0;owned\\u{7}\\u{1b}[2J"),
        "{printed}"
    );
    assert!(
        !printed.contains('\u{1b}') && !printed.contains('\u{7}'),
        "{printed}"
    );
}

/// A scene the agent cannot open stops it before its first step, naming the file, and
/// leaves no run folder behind.
#[test]
fn a_scene_that_cannot_be_opened_is_named_and_leaves_no_run_folder() {
    let dir = tempfile::tempdir().unwrap();
    let script = whole_session(dir.path());
    let output = dir.path().join("out");
    let missing = dir.path().join("no-such-scene.blend");
    let result = output_within(
        agent_command(&script, &output).arg("--blend").arg(&missing),
        BLENDER_TEST_LIMIT,
    );
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(!result.status.success(), "{stderr}");
    assert!(
        stderr.contains("cannot open") && stderr.contains("no-such-scene.blend"),
        "{stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(&output)
        .map(|entries| entries.flatten().map(|entry| entry.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// Through mcp-for-blender (from PyPI, its add-on in a headless Blender with the scene open),
/// without viga's add-on: the agent's commands land in that Blender, one undo step each.
#[test]
fn through_mcp_for_blender_every_command_is_one_undo_step_in_the_persons_scene() {
    use viga_testkit::mcp_for_blender::{PeerBlender, TELEMETRY_OFF};
    let files = tempfile::tempdir().unwrap();
    let peer = PeerBlender::start(None, Some(&table_and_lamp_blend(files.path()))).unwrap();
    let mut command = agent_command(&whole_session(files.path()), &files.path().join("runs"));
    command
        .args(["--through-mcp", &peer.server_command()])
        .envs(TELEMETRY_OFF);
    let output = output_within(&mut command, BLENDER_TEST_LIMIT);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let lines = stdout_lines(&output);
    assert_eq!(
        lines.last().unwrap()["stop"]["reason"],
        "accepted",
        "{lines:?}"
    );
    let lamp = |peer: &PeerBlender| {
        peer.execute(
            "import bpy\nlamp = bpy.data.objects['Lamp']\nprint(round(lamp.location.x, 3), [m.name for m in lamp.data.materials])",
        )
        .unwrap()
    };
    assert_eq!(lamp(&peer).trim(), "-0.7 ['Lamp_paint']");
    peer.execute("import bpy\nbpy.ops.ed.undo()").unwrap();
    assert_eq!(
        lamp(&peer).trim(),
        "-0.7 []",
        "one undo takes the paint back"
    );
    peer.execute("import bpy\nbpy.ops.ed.undo()").unwrap();
    assert_eq!(lamp(&peer).trim(), "3.0 []", "a second takes the move back");
}
