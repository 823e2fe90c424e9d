//! Model code contained by the OS: a Blender worker started through `viga contain` (as every
//! command that runs model-written programs starts it) cannot open a network connection,
//! write outside its folders, read viga's environment or signal it; normal programs, renders,
//! .blend saves and checkpoints in its folders still work, and so does a restart. `require`
//! refuses when any half is missing. At the end, a program that goes for the desktop
//! session (its bus, display and agents, `~/.ssh`, secrets, a `setsid` process) gets none
//! of it.
//!
//! On Linux these tests require the containment they check (Landlock and unprivileged user
//! namespaces), so a machine without it fails them rather than passing them vacuously.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use crate::support;
use std::ffi::OsString;
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};
use viga_blender::{
    Access, BlenderCommands as _, BlenderTransport as _, Containment, ContainmentPolicy,
    TransportError, Worker, WorkerConfig, locate,
};
use viga_testkit::CONTAINMENT_HALVES as HALVES;
use viga_testkit::{BLENDER_TEST_LIMIT, within};

/// Python for the programs below: `attempt(name, action)` notes in `seen` whether the
/// action was done or failed, and why.
const ATTEMPTS: &str = r#"seen = {}
def attempt(name, action):
    try:
        action()
        seen[name] = "done"
    except OSError as err:
        seen[name] = "failed: %s" % err
"#;

/// The default limits, with the process limit turned off by name where it cannot hold (as
/// root): these tests are about the halves; `limits.rs` tests the limits.
fn limits_that_hold_here() -> viga_blender::Limits {
    let limits = viga_blender::Limits::default();
    if viga_testkit::running_as_root() {
        limits.with(viga_blender::Limit::Processes, None)
    } else {
        limits
    }
}

async fn contained_worker(writable: &Path) -> Worker {
    let mut config = WorkerConfig::new(locate().expect("Blender (run `cargo xtask setup`)"));
    config.containment = Some(
        Containment::new(
            vec![OsString::from(env!("CARGO_BIN_EXE_viga")), "contain".into()],
            ContainmentPolicy::Require,
        )
        .with_access(&Access::writing(vec![writable.canonicalize().unwrap()]))
        .with_limits(limits_that_hold_here()),
    );
    Worker::start(config)
        .await
        .expect("a contained worker starts")
}

/// Runs `code` and returns the JSON object it prints on its last line.
async fn outcome(worker: &Worker, code: &str) -> Value {
    let result = worker
        .execute(code, None, Some(Duration::from_secs(60)))
        .await
        .unwrap();
    assert!(result.succeeded(), "{:?}\n{}", result.error, result.stderr);
    let last = result.stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|_| panic!("no JSON line in {:?}", result.stdout))
}

#[tokio::test]
async fn model_code_reaches_no_network() {
    within(BLENDER_TEST_LIMIT, "the contained worker", async {
        let run = tempfile::tempdir().unwrap();
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        tcp.set_nonblocking(true).unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_nonblocking(true).unwrap();
        let worker = contained_worker(run.path()).await;
        assert!(
            worker.containment().is_complete(),
            "{}",
            worker.containment().summary()
        );
        let code = format!(
            r#"import json, socket
seen = {{}}
try:
    socket.create_connection(("127.0.0.1", {tcp}), timeout=3).close()
    seen["tcp"] = "connected"
except OSError as err:
    seen["tcp"] = "failed: %s" % err
try:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.sendto(b"leak", ("127.0.0.1", {udp}))
    seen["udp"] = "sent"
except OSError as err:
    seen["udp"] = "failed: %s" % err
try:
    socket.getaddrinfo("example.com", 443)
    seen["dns"] = "resolved"
except OSError as err:
    seen["dns"] = "failed: %s" % err
print(json.dumps(seen))
"#,
            tcp = tcp.local_addr().unwrap().port(),
            udp = udp.local_addr().unwrap().port(),
        );
        let seen = outcome(&worker, &code).await;
        for channel in ["tcp", "udp", "dns"] {
            let text = seen[channel].as_str().unwrap();
            assert!(text.starts_with("failed"), "{channel}: {text}");
        }
        // Nothing arrived on this side either.
        assert!(tcp.accept().is_err());
        assert!(udp.recv(&mut [0u8; 16]).is_err());
        worker.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn model_code_writes_only_in_its_folders_and_cannot_reach_viga() {
    within(BLENDER_TEST_LIMIT, "the contained worker", async {
        let run = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let worker = contained_worker(run.path()).await;
        let allowed = run.path().canonicalize().unwrap();
        let forbidden = elsewhere.path().join("planted.py");
        let code = format!(
            r#"import json, os, tempfile, bpy
{ATTEMPTS}def write(path):
    with open(path, "w") as handle:
        handle.write("x")
attempt("outside", lambda: write({forbidden:?}))
attempt("home", lambda: write(os.path.expanduser("~/.viga-containment-canary")))
attempt("inside", lambda: write({inside:?}))
attempt("environ", lambda: open("/proc/{viga}/environ", "rb").read())
attempt("signal", lambda: os.kill({viga}, 0))
attempt("devnull", lambda: write(os.devnull))
attempt("shm", lambda: write("/dev/shm/viga-containment-canary"))
bpy.ops.mesh.primitive_cube_add()
bpy.ops.object.camera_add(location=(4, -4, 3), rotation=(1.1, 0, 0.8))
scene = bpy.context.scene
scene.camera = bpy.context.object
scene.render.engine = "BLENDER_WORKBENCH"
scene.render.resolution_x = scene.render.resolution_y = 32
scene.render.filepath = {render:?}
attempt("render", lambda: bpy.ops.render.render(write_still=True))
attempt("scratch", lambda: write(os.path.join(tempfile.gettempdir(), "scratch.txt")))
print(json.dumps(seen))
"#,
            forbidden = forbidden.display().to_string(),
            inside = allowed.join("inside.txt").display().to_string(),
            render = allowed.join("render.png").display().to_string(),
            viga = std::process::id(),
        );
        let seen = outcome(&worker, &code).await;
        // A session of its own has no controlling terminal to type into (TIOCSTI on
        // /dev/tty). Seen from here: inside its PID namespace every session number led
        // outside it reads as 0, viga's included.
        let own = stat_field("self", SESSION);
        let below = processes_below(std::process::id());
        assert!(!below.is_empty(), "the worker runs below this test");
        for process in below {
            assert_ne!(stat_field(&process, SESSION), own, "process {process}");
        }
        for denied in ["outside", "home", "environ", "signal", "shm"] {
            let text = seen[denied].as_str().unwrap();
            assert!(text.starts_with("failed"), "{denied}: {text}");
        }
        for allowed_step in ["inside", "render", "scratch", "devnull"] {
            assert_eq!(seen[allowed_step], "done", "{allowed_step}: {seen}");
        }
        assert!(!forbidden.exists());
        assert!(allowed.join("render.png").is_file());
        // The commands the loop uses to keep a scene work too.
        let saved = allowed.join("scene.blend");
        worker.save_blend(&saved.to_string_lossy()).await.unwrap();
        assert!(saved.is_file());
        worker.checkpoint().await.unwrap();
        worker.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_killed_contained_worker_comes_back_contained() {
    within(BLENDER_TEST_LIMIT, "the contained worker", async {
        let run = tempfile::tempdir().unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let worker = contained_worker(run.path()).await;
        // A program leaves a process behind, as a program that starts a server would.
        let program = format!(
            "import bpy, json\nbpy.ops.mesh.primitive_cube_add()\n{}print(json.dumps(left_behind))\n",
            leave_a_process(false)
        );
        let left_behind = outcome(&worker, &program).await;
        let left_behind = left_behind.as_str().unwrap().to_owned();
        assert!(!running_with(&left_behind).is_empty(), "never started");
        worker.checkpoint().await.unwrap();
        let pid = worker.hello().pid;
        std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap();
        let lost = worker.ping().await;
        assert!(matches!(lost, Err(TransportError::Lost { .. })), "{lost:?}");
        // The new Blender binds its socket again (the dead one's is removed) and is contained.
        let code = format!(
            r#"import json, socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    print(json.dumps({{"tcp": "connected"}}))
except OSError as err:
    print(json.dumps({{"tcp": "failed: %s" % err}}))
"#,
            port = listener.local_addr().unwrap().port()
        );
        let seen = outcome(&worker, &code).await;
        assert!(
            seen["tcp"].as_str().unwrap().starts_with("failed"),
            "{seen}"
        );
        assert!(listener.accept().is_err());
        assert!(worker.containment().is_complete());
        assert_eq!(worker.restarts(), 1);
        // Killed with its Blender's process group, not left to run on.
        let gone = (0..50).any(|_| {
            std::thread::sleep(Duration::from_millis(100));
            running_with(&left_behind).is_empty()
        });
        assert!(gone, "process {left_behind} outlived its Blender");
        worker.shutdown().await;
    })
    .await;
}

/// The program's /proc is its PID namespace's own: it lists the namespace's first process
/// (the launcher's placeholder), Blender and what Blender started, and nothing else of the
/// machine: not viga, not other people's runs or their command lines.
#[tokio::test]
async fn proc_lists_only_the_workers_own_processes() {
    within(BLENDER_TEST_LIMIT, "the contained worker", async {
        let run = tempfile::tempdir().unwrap();
        let worker = contained_worker(run.path()).await;
        // Something of this machine's own, with a word on its command line to look for.
        let word = format!("viga-elsewhere-{}", std::process::id());
        let mut elsewhere = std::process::Command::new("sleep")
            .arg("600")
            .arg0(&word)
            .spawn()
            .unwrap();
        let code = format!(
            r#"import json, os, subprocess, time
helper = subprocess.Popen(["sleep", "30"])
# Under load the helper's command line can read empty while it is still being executed.
for _ in range(500):
    if open("/proc/%d/cmdline" % helper.pid, "rb").read():
        break
    time.sleep(0.01)
seen = {{}}
for name in os.listdir("/proc"):
    if name.isdigit():
        try:
            seen[name] = open("/proc/%s/cmdline" % name, "rb").read().replace(b"\0", b" ").decode()
        except OSError:
            seen[name] = ""
helper.kill()
print(json.dumps({{"processes": seen, "viga": os.path.exists("/proc/{viga}")}}))
"#,
            viga = std::process::id()
        );
        let seen = outcome(&worker, &code).await;
        let _ = elsewhere.kill();
        let _ = elsewhere.wait();
        worker.shutdown().await;
        assert_eq!(seen["viga"], false, "{seen}");
        let processes = seen["processes"].as_object().unwrap();
        assert!(processes.len() <= 4, "{seen}");
        let commands: Vec<&str> = processes.values().map(|c| c.as_str().unwrap()).collect();
        assert!(commands.iter().any(|c| c.contains("cat")), "{seen}");
        assert!(commands.iter().any(|c| c.starts_with("sleep 30")), "{seen}");
        assert!(!commands.iter().any(|c| c.contains(&word)), "{seen}");
        assert!(
            first_is_the_placeholder(&seen),
            "the placeholder is the first process: {seen}"
        );
    })
    .await;
}

/// The namespace's first process is the launcher's placeholder (`cat`), Blender second.
fn first_is_the_placeholder(seen: &Value) -> bool {
    seen["processes"]["1"]
        .as_str()
        .is_some_and(|command| command.contains("cat"))
}

#[test]
fn the_probe_reports_containment_and_a_missing_folder_is_refused() {
    let viga = env!("CARGO_BIN_EXE_viga");
    let scratch = tempfile::tempdir().unwrap();
    let probe = std::process::Command::new(viga)
        .args(["contain", "--policy", "require", "--write"])
        .arg(scratch.path())
        .args(viga_testkit::process_limit_off_as_root())
        .arg("--probe")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&probe.stdout);
    assert!(probe.status.success(), "{stdout}");
    let status = reported_status(&stdout);
    for half in HALVES {
        assert_eq!(status[half]["active"], true, "{half}: {status}");
    }
    let processes = status["processes"]["detail"].as_str().unwrap();
    assert!(
        processes.contains("a /proc of its own that lists only its processes"),
        "{processes}"
    );
    // A launcher asked to write in a folder that does not exist refuses to start anything.
    let refused = std::process::Command::new(viga)
        .args(["contain", "--write", "/no/such/folder", "--", "true"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("/no/such/folder is not a folder"),
        "{stderr}"
    );
}

/// `viga run` contains the Blender its model's programs run in, and the run folder says so:
/// a scripted model's program that plants a file elsewhere and phones home does neither,
/// and the run still completes.
#[test]
fn viga_run_contains_the_programs_of_its_model_and_records_it() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let planted = elsewhere.path().join("planted.txt");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let program = format!(
        "import bpy, socket\nbpy.ops.mesh.primitive_cube_add()\ntry:\n    open({planted:?}, 'w').write('x')\nexcept OSError as err:\n    print('write refused:', err)\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=3)\nexcept OSError as err:\n    print('connect refused:', err)\n",
        planted = planted.display().to_string(),
        port = listener.local_addr().unwrap().port(),
    );
    let script = scripted_session(dir.path(), &program);
    let out = dir.path().join("out");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_viga"));
    command
        .args([
            "run",
            "--task",
            "escape",
            "--provider",
            "scripted",
            "--script",
        ])
        .arg(&script)
        .args(["--max-iterations", "1", "--resolution", "32", "--output"])
        .arg(&out)
        .env_remove("VIGA_CONTAINMENT");
    let output = viga_testkit::output_within(&mut command, BLENDER_TEST_LIMIT);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!planted.exists(), "the program wrote outside its folders");
    assert!(
        listener.accept().is_err(),
        "the program reached the network"
    );
    let record = find_file(&out, "containment.json")
        .unwrap_or_else(|| panic!("no containment.json below {}", out.display()));
    // Renders and the final scene reach the run folder all the same: viga writes them.
    let run_folder = record.parent().unwrap();
    assert!(run_folder.join("final.blend").is_file(), "no final.blend");
    assert!(
        pngs_below(&run_folder.join("renders")) > 0,
        "no render kept"
    );
    let status: Value = serde_json::from_str(&std::fs::read_to_string(record).unwrap()).unwrap();
    assert_eq!(status["policy"], "auto");
    for half in HALVES {
        assert_eq!(status[half]["active"], true, "{half}: {status}");
    }
    // The report says it too.
    let report = find_file(&out, "report.html").expect("the run writes its report");
    let report = std::fs::read_to_string(report).unwrap();
    assert!(
        report.contains("<th>containment</th><td colspan=\"3\">auto: network contained"),
        "{report}"
    );
}

/// Python that starts a process which keeps running (in a session of its own when
/// `own_session`: out of Blender's process group) and sets `left_behind` to a word on its
/// command line, by which viga's side finds it ([`running_with`]): the program's /proc is
/// its PID namespace's own, whose ids viga does not see.
fn leave_a_process(own_session: bool) -> String {
    format!(
        r#"import os, subprocess, sys, tempfile, time
left_behind = "viga-left-behind-%d-%d" % (os.getpid(), time.monotonic_ns())
marker = os.path.join(tempfile.gettempdir(), left_behind)
child = "import sys, time\nopen(sys.argv[2], 'w').write('up')\ntime.sleep(600)\n"
subprocess.Popen([sys.executable, "-c", child, left_behind, marker], start_new_session={session})
while not os.path.exists(marker) or not open(marker).read():
    time.sleep(0.02)
"#,
        session = if own_session { "True" } else { "False" }
    )
}

/// The ids of the machine's processes with `word` on their command line.
fn running_with(word: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let words = String::from_utf8_lossy(&cmdline).into_owned();
            words.split('\0').any(|arg| arg == word).then_some(pid)
        })
        .collect()
}

/// A scripted model that plans, writes `program` and then accepts the scene.
fn scripted_session(folder: &Path, program: &str) -> PathBuf {
    let turn = |text: &str| json!({"response": {"text": text, "finish_reason": "stop"}});
    let verdict = json!({"response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [
        {"id": "v", "name": "end_process", "arguments": {"visual_differences": [], "suggestions": [], "accepted": true}}
    ]}});
    let turns = json!([
        turn("1. look around"),
        turn(&format!("```python\n{program}```")),
        verdict
    ]);
    support::script_file(folder, "session.json", turns)
}

/// The status the launcher printed (its `VIGA_CONTAINED` line) in `stdout`.
fn reported_status(stdout: &str) -> Value {
    let line = stdout
        .lines()
        .find_map(|line| line.strip_prefix("VIGA_CONTAINED "))
        .unwrap_or_else(|| panic!("no status in {stdout}"));
    serde_json::from_str(line).unwrap()
}

/// Fields of /proc/<id>/stat, counted after the command's name.
const PARENT: usize = 1;
const SESSION: usize = 3;

/// A number field of a process's (`self`, or an id) /proc stat line; 0 once it is gone.
fn stat_field(process: &str, field: usize) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{process}/stat")) else {
        return 0;
    };
    let after_name = stat.rsplit_once(')').unwrap().1;
    after_name
        .split_whitespace()
        .nth(field)
        .unwrap()
        .parse()
        .unwrap()
}

/// Every process that descends from `ancestor`, by id.
fn processes_below(ancestor: u32) -> Vec<String> {
    let processes: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name.bytes().all(|byte| byte.is_ascii_digit()))
        .collect();
    let descends = |process: &str| {
        let mut current = process.to_owned();
        for _ in 0..64 {
            match stat_field(&current, PARENT) {
                0 => return false,
                parent if parent == u64::from(ancestor) => return true,
                parent => current = parent.to_string(),
            }
        }
        false
    };
    processes
        .iter()
        .filter(|process| descends(process))
        .cloned()
        .collect()
}

fn find_file(dir: &Path, name: &str) -> Option<PathBuf> {
    std::fs::read_dir(dir).ok()?.flatten().find_map(|entry| {
        let path = entry.path();
        if path.is_dir() {
            find_file(&path, name)
        } else {
            (entry.file_name() == name).then_some(path)
        }
    })
}

fn pngs_below(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| {
            let path = entry.path();
            if path.is_dir() {
                pngs_below(&path)
            } else {
                usize::from(path.extension().is_some_and(|e| e == "png"))
            }
        })
        .sum()
}

/// What a program leaves in the scratch folder is read as untrusted: a program that swaps its
/// output log for a link to a file of viga's, or for a FIFO, and then runs out of time gets
/// neither the file's content into its reported output nor viga stuck reading it.
#[tokio::test]
async fn a_program_cannot_make_viga_read_its_files_through_the_scratch_folder() {
    within(BLENDER_TEST_LIMIT, "the contained worker", async {
        let run = tempfile::tempdir().unwrap();
        let private = tempfile::tempdir().unwrap();
        let secret = private.path().join("keys.txt");
        std::fs::write(&secret, "sk-canary-scratch-7f3e").unwrap();
        let worker = contained_worker(run.path()).await;
        for trap in [
            format!("os.symlink({:?}, log + '.1')", secret.display().to_string()),
            "os.remove(log)\nos.mkfifo(log)".to_owned(),
        ] {
            let code = format!(
                "import os\nlog = os.environ['VIGA_PROGRAM_LOG']\nprint('before the trap')\n{trap}\nwhile True:\n    pass\n"
            );
            let stopped = worker
                .execute(&code, None, Some(Duration::from_secs(3)))
                .await;
            assert!(
                matches!(stopped, Err(TransportError::Lost { .. })),
                "{stopped:?}"
            );
            let output = worker.last_program_output().unwrap_or_default();
            assert!(!output.contains("sk-canary"), "{trap}: {output}");
        }
        worker.shutdown().await;
    })
    .await;
}

/// A policy that is not one of off, auto and require is refused before anything starts,
/// from the flag and from the environment alike.
#[test]
fn an_unknown_containment_policy_is_refused_with_what_to_use() {
    let viga = env!("CARGO_BIN_EXE_viga");
    let flag = std::process::Command::new(viga)
        .args(["--containment", "maybe", "doctor"])
        .output()
        .unwrap();
    let env = std::process::Command::new(viga)
        .arg("doctor")
        .env("VIGA_CONTAINMENT", "maybe")
        .output()
        .unwrap();
    for output in [flag, env] {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("not off, auto or require"), "{stderr}");
    }
}

/// `require` refuses to start anything unless every half holds: each half left out in turn
/// (the launcher's test-only switch) is refused and named, and `auto` runs without it and
/// says so.
#[test]
fn require_refuses_when_any_half_is_missing_and_auto_says_which() {
    let viga = env!("CARGO_BIN_EXE_viga");
    let scratch = tempfile::tempdir().unwrap();
    for half in [
        "network",
        "writes",
        "reads",
        "unix-sockets",
        "processes",
        "environment",
    ] {
        let launch = |policy: &str| {
            std::process::Command::new(viga)
                .args(["contain", "--policy", policy, "--write"])
                .arg(scratch.path())
                .args(["--test-without", half, "--", "/bin/true"])
                .output()
                .unwrap()
        };
        let refused = launch("require");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(7), "{half}: {stderr}");
        assert!(
            stderr.contains(&format!("but not held: {half}")),
            "{half}: {stderr}"
        );
        let ran = launch("auto");
        let stdout = String::from_utf8_lossy(&ran.stdout);
        assert!(ran.status.success(), "{half}: {stdout}");
        let status = reported_status(&stdout);
        let key = half.replace('-', "_");
        assert_eq!(status[&key]["active"], false, "{half}: {status}");
        for other in HALVES.iter().filter(|other| **other != key) {
            assert_eq!(status[other]["active"], true, "{half}, {other}: {status}");
        }
    }
}

/// The same through viga: with a half turned off (`VIGA_CONTAIN_TEST_WITHOUT`, for tests
/// only), `viga doctor` says which half does not hold, and `--containment require` refuses
/// to start a run's Blender.
#[test]
fn viga_doctor_names_the_missing_half_and_a_required_run_does_not_start() {
    let viga = env!("CARGO_BIN_EXE_viga");
    let doctor = std::process::Command::new(viga)
        .arg("doctor")
        .env_remove("VIGA_CONTAINMENT")
        .env("VIGA_CONTAIN_TEST_WITHOUT", "unix-sockets")
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(doctor.status.success(), "{report}");
    assert!(
        report.contains("containment (auto): NOT every half holds"),
        "{report}"
    );
    assert!(
        report.contains("  unix-sockets: NOT contained (left out on purpose"),
        "{report}"
    );
    assert!(report.contains("  network: contained ("), "{report}");
    let out = tempfile::tempdir().unwrap();
    // The model is never asked: the run stops before Blender starts.
    let script = out.path().join("never.json");
    std::fs::write(&script, r#"{"description": "never asked", "turns": []}"#).unwrap();
    let mut run = std::process::Command::new(viga);
    run.args(["--containment", "require", "run", "--task", "refused"])
        .args(["--provider", "scripted", "--script"])
        .arg(&script)
        .arg("--output")
        .arg(out.path())
        .env("VIGA_CONTAIN_TEST_WITHOUT", "unix-sockets");
    let refused = viga_testkit::output_within(&mut run, BLENDER_TEST_LIMIT);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(7), "{stderr}");
    assert!(
        stderr.contains("containment is required") && stderr.contains("not held: unix-sockets"),
        "{stderr}"
    );
}

// ---------------------------------------------------------------------------------------
// A model-written program that goes for the desktop session, run by `viga run` in its
// contained worker: the session bus, an X11 socket folder and an SSH agent's socket cannot
// be connected to, `~/.ssh` and a secret in the home folder or beside the run's inputs
// cannot be read, no display, bus or agent variable reaches it, and a process it starts in
// a session of its own dies with the worker.
//
// Everything the attack aims at is a stand-in made here: a home folder, a runtime folder
// with a bus socket, an X11-style socket folder under /tmp, a key and canaries. The real
// ones are never touched.
//
// Each test checks one protection and fails without it. To see that, run them with
// `VIGA_CONTAIN_TEST_WITHOUT` naming the half (a test-only variable, passed on to the
// `viga run` they start): `unix-sockets` for the sockets, `reads` for the canary beside the
// inputs (the home folder is hidden as well as unreadable, so its files need both off),
// `processes` for the process, `environment` together with the worker's allowlist for the
// variables (the launcher test fails with `--test-without environment` alone).

/// The variables of the session the attack looks for in its environment.
const SESSION_VARIABLES: [&str; 5] = [
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "DBUS_SESSION_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
    "SSH_AUTH_SOCK",
];

/// The stand-in session and what the attack saw in it.
struct Attack {
    /// What the program reported, by attempt.
    seen: Value,
    /// Whether anything connected to each stand-in socket.
    reached: Vec<(&'static str, bool)>,
    /// Whether each process the program left in a session of its own outlived the run.
    survivors: Vec<u32>,
}

/// Runs the attack once for all tests of this file (a failed run fails them all, once).
fn attack() -> &'static Attack {
    static ATTACK: OnceLock<Result<Attack, String>> = OnceLock::new();
    match ATTACK.get_or_init(run_attack) {
        Ok(attack) => attack,
        Err(why) => panic!("{why}"),
    }
}

fn run_attack() -> Result<Attack, String> {
    let base = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let home = base.path().join("home");
    let runtime = base.path().join("runtime");
    let elsewhere = base.path().join("elsewhere");
    let ssh = home.join(".ssh");
    for folder in [&ssh, &runtime, &elsewhere] {
        std::fs::create_dir_all(folder).unwrap();
    }
    // An X server's socket folder is /tmp/.X11-unix; a folder like it beside it stands in.
    let x11 = tempfile::Builder::new()
        .prefix(".X11-unix-viga-test-")
        .tempdir_in("/tmp")
        .unwrap();
    let key = ssh.join("id_ed25519");
    std::fs::write(
        &key,
        "-----BEGIN OPENSSH PRIVATE KEY----- sk-canary-ssh-key",
    )
    .unwrap();
    let home_canary = home.join("secrets.txt");
    std::fs::write(&home_canary, "sk-canary-home-4411").unwrap();
    let elsewhere_canary = elsewhere.join("secrets.txt");
    std::fs::write(&elsewhere_canary, "sk-canary-elsewhere-8830").unwrap();
    let sockets = [
        ("session_bus", runtime.join("bus")),
        ("x11", x11.path().join("X0")),
        ("ssh_agent", ssh.join("agent.sock")),
    ];
    let listeners: Vec<UnixListener> = sockets
        .iter()
        .map(|(_, path)| {
            let listener = UnixListener::bind(path).unwrap();
            listener.set_nonblocking(true).unwrap();
            listener
        })
        .collect();
    let path = |path: &Path| path.display().to_string();
    let program = format!(
        r#"import bpy, json, os, socket, subprocess, sys, tempfile, time
bpy.ops.mesh.primitive_cube_add()
{ATTEMPTS}def connect(path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(3)
    sock.connect(path)
    sock.close()
def read(path):
    with open(path, "rb") as handle:
        seen[path] = handle.read().decode("utf-8", "replace")
attempt("session_bus", lambda: connect({bus:?}))
attempt("x11", lambda: connect({x11:?}))
attempt("ssh_agent", lambda: connect({agent:?}))
attempt("ssh_key", lambda: read({key:?}))
attempt("home_canary", lambda: read({home_canary:?}))
attempt("elsewhere_canary", lambda: read({elsewhere_canary:?}))
seen["environment"] = sorted(name for name in {variables:?} if name in os.environ)
{leave}seen["left_behind"] = left_behind
print("ATTACK " + json.dumps(seen))
"#,
        bus = path(&sockets[0].1),
        x11 = path(&sockets[1].1),
        agent = path(&sockets[2].1),
        key = path(&key),
        home_canary = path(&home_canary),
        elsewhere_canary = path(&elsewhere_canary),
        variables = SESSION_VARIABLES,
        leave = leave_a_process(true),
    );
    let output = base.path().join("out");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_viga"));
    command
        .args(["run", "--task", "attack", "--provider", "scripted"])
        .arg("--script")
        .arg(scripted_session(base.path(), &program))
        .args(["--max-iterations", "1", "--resolution", "32", "--output"])
        .arg(&output)
        .env_remove("VIGA_CONTAINMENT")
        .env("HOME", &home)
        .env("XDG_RUNTIME_DIR", &runtime)
        .env(
            "DBUS_SESSION_BUS_ADDRESS",
            format!("unix:path={}", path(&sockets[0].1)),
        )
        .env("DISPLAY", ":77")
        .env("WAYLAND_DISPLAY", "wayland-77")
        .env("SSH_AUTH_SOCK", &sockets[2].1)
        // Asked for by name: still not passed.
        .env("VIGA_WORKER_ENV", SESSION_VARIABLES.join(","));
    let run = viga_testkit::output_within(&mut command, BLENDER_TEST_LIMIT);
    let stderr = String::from_utf8_lossy(&run.stderr);
    if !run.status.success() {
        return Err(format!("viga run failed: {stderr}"));
    }
    let reports = attack_reports(&output);
    if reports.is_empty() {
        return Err(format!("the program never reported: {stderr}"));
    }
    let reached = sockets
        .iter()
        .zip(&listeners)
        .map(|((name, _), listener)| (*name, listener.accept().is_ok()))
        .collect();
    let left_behind: Vec<String> = reports
        .iter()
        .map(|seen| seen["left_behind"].as_str().unwrap().to_owned())
        .collect();
    // The worker is gone with viga; its processes are given a moment to be reaped.
    let survivors = || -> Vec<u32> {
        left_behind
            .iter()
            .flat_map(|word| running_with(word))
            .collect()
    };
    for _ in 0..50 {
        if survivors().is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(Attack {
        seen: reports[0].clone(),
        reached,
        survivors: survivors(),
    })
}

/// The `ATTACK {…}` lines the program printed, from the run's event log.
fn attack_reports(output: &Path) -> Vec<Value> {
    let log = find_file(output, "events.jsonl").expect("the run keeps its events");
    let mut reports = Vec::new();
    for line in std::fs::read_to_string(log).unwrap().lines() {
        let event: Value = serde_json::from_str(line).unwrap();
        if let Some(stdout) = event.pointer("/result/stdout").and_then(Value::as_str) {
            reports.extend(
                stdout
                    .lines()
                    .filter_map(|line| line.strip_prefix("ATTACK "))
                    .map(|json| serde_json::from_str::<Value>(json).unwrap()),
            );
        }
    }
    reports
}

fn refused(seen: &Value, attempt: &str) {
    let text = seen[attempt].as_str().unwrap_or_default();
    assert!(text.starts_with("failed"), "{attempt}: {seen}");
}

#[test]
fn the_session_bus_the_x11_socket_folder_and_the_ssh_agent_are_out_of_reach() {
    let attack = attack();
    for socket in ["session_bus", "x11", "ssh_agent"] {
        refused(&attack.seen, socket);
    }
    for (socket, reached) in &attack.reached {
        assert!(!reached, "{socket}: a connection arrived");
    }
}

#[test]
fn ssh_keys_and_secrets_in_the_home_folder_or_beside_the_inputs_are_unreadable() {
    let attack = attack();
    for file in ["ssh_key", "home_canary", "elsewhere_canary"] {
        refused(&attack.seen, file);
    }
    assert!(
        !attack.seen.to_string().contains("sk-canary"),
        "{}",
        attack.seen
    );
}

#[test]
fn no_display_bus_or_agent_variable_reaches_the_program() {
    assert_eq!(attack().seen["environment"], json!([]), "{}", attack().seen);
}

#[test]
fn a_process_in_a_session_of_its_own_dies_with_the_worker() {
    let survivors = &attack().survivors;
    assert!(
        survivors.is_empty(),
        "processes {survivors:?} outlived their worker"
    );
}

/// The launcher itself, for any program: the session's variables are not passed on.
#[test]
fn the_launcher_passes_no_session_variable_to_its_program() {
    let scratch = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_viga"))
        .args(["contain", "--policy", "auto", "--write"])
        .arg(scratch.path())
        .args(["--", "/usr/bin/env"])
        .env("DISPLAY", ":77")
        .env("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/77/bus")
        .env("SSH_AUTH_SOCK", "/tmp/agent.77")
        .env("XDG_RUNTIME_DIR", "/run/user/77")
        .env("DOCKER_HOST", "unix:///run/docker.sock")
        .env("VIGA_KEPT", "yes")
        .output()
        .unwrap();
    assert!(output.status.success());
    let printed = String::from_utf8_lossy(&output.stdout);

    let variables: Vec<&str> = printed
        .lines()
        .filter(|line| !line.starts_with("VIGA_CONTAINED "))
        .filter_map(|line| line.split_once('=').map(|(name, _)| name))
        .collect();
    assert!(variables.contains(&"VIGA_KEPT"), "{printed}");
    for name in [
        "DISPLAY",
        "DBUS_SESSION_BUS_ADDRESS",
        "SSH_AUTH_SOCK",
        "XDG_RUNTIME_DIR",
        "DOCKER_HOST",
    ] {
        assert!(!variables.contains(&name), "{name} was passed: {printed}");
    }
    let status = reported_status(&printed);
    assert_eq!(status["environment"]["active"], true, "{status}");
}
