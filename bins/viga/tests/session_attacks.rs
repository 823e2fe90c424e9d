//! A model-written program that goes for the desktop session, run by `viga run` in its
//! contained worker (real Blender): the session bus, an X11 socket folder and an SSH
//! agent's socket cannot be connected to, `~/.ssh` and a secret in the home folder or
//! beside the run's inputs cannot be read, no display, bus or agent variable reaches it,
//! and a process it starts in a session of its own dies with the worker.
//!
//! Everything the attack aims at is a stand-in made here: a home folder, a runtime folder
//! with a bus socket, an X11-style socket folder under /tmp, a key and canaries. The real
//! ones are never touched.
//!
//! Each test checks one protection and fails without it. To see that, run them with
//! `VIGA_CONTAIN_TEST_WITHOUT` naming the half (a test-only variable, passed on to the
//! `viga run` they start): `unix-sockets` for the sockets, `reads` for the canary beside
//! the inputs (the home folder is hidden as well as unreadable, so its files need both off),
//! `processes` for the process, `environment` together with the worker's allowlist for
//! the variables (the launcher test below fails with `environment` alone).
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};
use viga_testkit::BLENDER_TEST_LIMIT;

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
    survivors: Vec<u64>,
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
seen = {{}}
def attempt(name, action):
    try:
        action()
        seen[name] = "done"
    except OSError as err:
        seen[name] = "failed: %s" % err
def connect(path):
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
marker = os.path.join(tempfile.gettempdir(), "left-behind-%d" % time.monotonic_ns())
# /proc is the host's; NSpid lists the process's ids from the outermost namespace in.
child = ("import time\n"
         "for line in open('/proc/self/status'):\n"
         "    if line.startswith('NSpid:'):\n"
         "        open(%r, 'w').write(line.split()[1])\n"
         "time.sleep(600)\n") % marker
subprocess.Popen([sys.executable, "-c", child], start_new_session=True)
while not os.path.exists(marker) or not open(marker).read():
    time.sleep(0.02)
seen["left_behind"] = int(open(marker).read())
print("ATTACK " + json.dumps(seen))
"#,
        bus = path(&sockets[0].1),
        x11 = path(&sockets[1].1),
        agent = path(&sockets[2].1),
        key = path(&key),
        home_canary = path(&home_canary),
        elsewhere_canary = path(&elsewhere_canary),
        variables = SESSION_VARIABLES,
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
    let left_behind: Vec<u64> = reports
        .iter()
        .map(|seen| seen["left_behind"].as_u64().unwrap())
        .collect();
    // The worker is gone with viga; its processes are given a moment to be reaped.
    let alive = |pid: &u64| Path::new("/proc").join(pid.to_string()).exists();
    for _ in 0..50 {
        if !left_behind.iter().any(alive) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(Attack {
        seen: reports[0].clone(),
        reached,
        survivors: left_behind.into_iter().filter(alive).collect(),
    })
}

/// A script whose model plans, writes `program` and then accepts the scene.
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
    let script = folder.join("attack.json");
    std::fs::write(
        &script,
        json!({"description": "attack", "turns": turns}).to_string(),
    )
    .unwrap();
    script
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
    let status = printed
        .lines()
        .find_map(|line| line.strip_prefix("VIGA_CONTAINED "))
        .unwrap();
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
    let status: Value = serde_json::from_str(status).unwrap();
    assert_eq!(status["environment"]["active"], true, "{status}");
}
