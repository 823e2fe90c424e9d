//! Limits of contained programs, on real Blender started through `viga contain`: a program
//! that allocates past the memory limit, writes a file past the file-size limit or forks
//! past the process limit gets its own Python error naming the limit, and one that fills its
//! scratch folder past the scratch limit is stopped and named; the worker comes back each
//! time and the next program runs (with an emptied scratch folder). Where a limit cannot
//! hold here (the process limit as root, without a delegated cgroup v2), `viga doctor` and
//! the launcher's status say so and `require` refuses. The limits are small so the tests
//! are fast.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use std::ffi::OsString;
use std::time::Duration;

use serde_json::Value;
use viga_blender::{
    BlenderCommands as _, Containment, ContainmentPolicy, Limit, Limits, TransportError, Worker,
    WorkerConfig, locate,
};
use viga_testkit::{BLENDER_TEST_LIMIT, running_as_root, within};

const MIB: u64 = 1 << 20;

/// Small limits: 1 GiB of memory, 64 processes, 32 MiB for one file, 64 MiB written.
fn small() -> Limits {
    Limits {
        memory: Some(1024 * MIB),
        processes: Some(64),
        file_size: Some(32 * MIB),
        scratch: Some(64 * MIB),
    }
}

/// `limits` with the process limit turned off by name where it cannot hold (as root).
fn holding_here(limits: Limits) -> Limits {
    if running_as_root() {
        limits.with(Limit::Processes, None)
    } else {
        limits
    }
}

async fn worker(limits: Limits) -> Worker {
    let mut config = WorkerConfig::new(locate().expect("Blender (run `cargo xtask setup`)"));
    config.containment = Some(
        Containment::new(
            vec![OsString::from(env!("CARGO_BIN_EXE_viga")), "contain".into()],
            ContainmentPolicy::Require,
        )
        .with_limits(limits),
    );
    Worker::start(config)
        .await
        .expect("a contained worker starts under require")
}

/// Runs `code`, which must fail, and returns its error's type and message.
async fn failure(worker: &Worker, code: &str) -> (String, String) {
    let result = worker
        .execute(code, None, Some(Duration::from_secs(60)))
        .await
        .unwrap();
    let error = result
        .error
        .unwrap_or_else(|| panic!("the program succeeded: {}", result.stdout));
    (error.error_type, error.message)
}

/// The worker runs the next program as if nothing happened.
async fn still_works(worker: &Worker) {
    let result = worker
        .execute("print('still here')", None, Some(Duration::from_secs(60)))
        .await
        .unwrap();
    assert!(result.succeeded(), "{:?}", result.error);
    assert_eq!(result.stdout.trim(), "still here");
}

#[tokio::test]
async fn a_program_past_the_memory_limit_gets_a_memory_error_naming_it() {
    within(BLENDER_TEST_LIMIT, "the limited worker", async {
        let worker = worker(holding_here(small())).await;
        let status = worker.containment();
        assert!(status.limits.memory.active, "{status:?}");
        let (kind, message) = failure(&worker, "hoard = bytearray(2 * 1024 ** 3)\n").await;
        assert_eq!(kind, "MemoryError", "{message}");
        assert!(
            message.contains("the program hit the memory limit (1 GiB)"),
            "{message}"
        );
        still_works(&worker).await;
        worker.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_write_past_the_file_size_limit_fails_with_efbig_naming_it() {
    within(BLENDER_TEST_LIMIT, "the limited worker", async {
        let worker = worker(holding_here(small())).await;
        let code = "import os, tempfile\nwith open(os.path.join(tempfile.gettempdir(), 'big.bin'), 'wb') as f:\n    for _ in range(48):\n        f.write(b'x' * 1024 * 1024)\n";
        let (kind, message) = failure(&worker, code).await;
        assert_eq!(kind, "OSError", "{message}");
        assert!(message.contains("File too large"), "{message}");
        assert!(
            message.contains("the program hit the file-size limit (32 MiB)"),
            "{message}"
        );
        still_works(&worker).await;
        worker.shutdown().await;
    })
    .await;
}

/// Files of 24 MiB each (under the file-size limit) until the scratch folder has gained
/// more than 64 MiB, then a wait the launcher does not let it finish.
const FILL_SCRATCH: &str = "import os, tempfile, time\nfor i in range(5):\n    with open(os.path.join(tempfile.gettempdir(), 'fill-%d.bin' % i), 'wb') as f:\n        f.write(os.urandom(24 * 1024 * 1024))\ntime.sleep(30)\n";

#[tokio::test]
async fn a_program_past_the_scratch_limit_is_stopped_named_and_its_files_removed() {
    within(BLENDER_TEST_LIMIT, "the limited worker", async {
        let worker = worker(holding_here(small())).await;
        let started = std::time::Instant::now();
        let err = worker
            .execute(FILL_SCRATCH, None, Some(Duration::from_secs(60)))
            .await
            .unwrap_err();
        assert!(
            started.elapsed() < Duration::from_secs(25),
            "stopped at once, not at the end of its wait"
        );
        let TransportError::Lost { reason, .. } = &err else {
            panic!("not a lost worker: {err}");
        };
        let reason = reason.to_string();
        assert!(
            reason.contains(
                "the program wrote more than the scratch limit (64 MiB) into its scratch folder"
            ),
            "{reason}"
        );
        // Back, with room: what the program wrote is gone.
        let result = worker
            .execute(
                "import os, tempfile\nprint(sorted(n for n in os.listdir(tempfile.gettempdir()) if n.startswith('fill-')))\n",
                None,
                Some(Duration::from_secs(60)),
            )
            .await
            .unwrap();
        assert!(result.succeeded(), "{:?}", result.error);
        assert_eq!(result.stdout.trim(), "[]");
        worker.shutdown().await;
    })
    .await;
}

/// As another user than root the kernel applies RLIMIT_NPROC: starting processes past the
/// limit fails with the program's own error, naming it. As root (CI) it cannot hold
/// without a delegated cgroup v2: the status says why, and `require` refuses.
#[tokio::test]
async fn the_process_limit_holds_or_require_refuses_and_says_why() {
    within(BLENDER_TEST_LIMIT, "the limited worker", async {
        if running_as_root() {
            let probe = std::process::Command::new(env!("CARGO_BIN_EXE_viga"))
                .args(["contain", "--policy", "require", "--limit", "processes=64"])
                .arg("--probe")
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&probe.stderr);
            assert_eq!(probe.status.code(), Some(7), "{stderr}");
            assert!(stderr.contains("not held: the process limit"), "{stderr}");
            assert!(
                stderr.contains("the kernel does not apply RLIMIT_NPROC to root"),
                "{stderr}"
            );
            return;
        }
        let worker = worker(small()).await;
        assert!(worker.containment().limits.processes.active);
        let code = "import subprocess\nkept = []\nfor _ in range(200):\n    kept.append(subprocess.Popen(['sleep', '30']))\n";
        let (kind, message) = failure(&worker, code).await;
        assert!(
            message.contains("the program hit the process limit (64 processes)"),
            "{kind}: {message}"
        );
        still_works(&worker).await;
        worker.shutdown().await;
    })
    .await;
}

/// `viga doctor` prints each limit, how it holds or why it does not; the launcher's status
/// (what `containment.json` records) carries value and way.
#[test]
fn viga_doctor_and_the_status_name_each_limit() {
    let viga = env!("CARGO_BIN_EXE_viga");
    let doctor = std::process::Command::new(viga)
        .args(["--memory-limit", "2G", "doctor"])
        .env_remove("VIGA_CONTAINMENT")
        .env("VIGA_SCRATCH_LIMIT", "64M")
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(doctor.status.success(), "{report}");
    assert!(
        report.contains("  memory limit: 2 GiB (rlimit: RLIMIT_DATA"),
        "{report}"
    );
    assert!(
        report.contains("  file-size limit: 1 GiB (rlimit: RLIMIT_FSIZE"),
        "{report}"
    );
    assert!(
        report.contains("  scratch limit: 64 MiB (watched: "),
        "{report}"
    );
    if running_as_root() {
        assert!(report.contains("NOT every limit holds"), "{report}");
        assert!(
            report.contains("  process limit: of 256 processes NOT held (the kernel does not apply RLIMIT_NPROC to root"),
            "{report}"
        );
    }
    let probe = std::process::Command::new(viga)
        .args(["contain", "--limit", "file-size=none", "--probe"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&probe.stdout);
    let line = stdout
        .lines()
        .find_map(|line| line.strip_prefix("VIGA_CONTAINED "))
        .unwrap_or_else(|| panic!("no status in {stdout}"));
    let status: Value = serde_json::from_str(line).unwrap();
    let limits = &status["limits"];
    assert_eq!(limits["memory"]["value"], 4u64 << 30, "{limits}");
    assert_eq!(limits["memory"]["how"], "rlimit", "{limits}");
    assert_eq!(limits["file_size"]["how"], "unlimited", "{limits}");
    assert_eq!(limits["scratch"]["how"], "watched", "{limits}");
    let viga_limits = std::process::Command::new(viga)
        .args(["--process-limit", "lots", "doctor"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&viga_limits.stderr);
    assert_eq!(viga_limits.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not a valid process limit"), "{stderr}");
}

/// `viga run` with `flags` whose model writes `program` first, then, told `expected`, a
/// program that works: the run is accepted. Returns its events and run folder.
fn run_past_a_limit(
    dir: &std::path::Path,
    flags: &[&str],
    program: &str,
    expected: &str,
) -> (Vec<Value>, std::path::PathBuf) {
    let turn =
        |text: &str| serde_json::json!({"response": {"text": text, "finish_reason": "stop"}});
    let turns = serde_json::json!([
        turn("1. a cube"),
        turn(&format!("```python\n{program}```")),
        {"expect": {"last_message_contains": expected},
         "response": {"text": "```python\nimport bpy\nbpy.ops.mesh.primitive_cube_add()\n```", "finish_reason": "stop"}},
        {"response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [
            {"id": "v", "name": "end_process", "arguments": {"visual_differences": [], "suggestions": [], "accepted": true}}
        ]}}
    ]);
    let script = crate::support::script_file(dir, "script.json", turns);
    let out = dir.join("out");
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_viga"));
    command
        .args(flags)
        .args(["run", "--task", "a cube", "--resolution", "32"])
        .args(["--max-iterations", "1", "--events", "jsonl", "--output"])
        .arg(&out)
        .args(["--provider", "scripted", "--script"])
        .arg(&script)
        .env_remove("VIGA_CONTAINMENT");
    let output = viga_testkit::output_within(&mut command, BLENDER_TEST_LIMIT);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let events: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["kind"] == "event")
        .map(|line| line["event"].clone())
        .collect();
    let of = |kind: &str| -> Vec<&Value> {
        events
            .iter()
            .filter(|event| event["type"] == kind)
            .collect()
    };
    // Told at once: not run a second time, as a crash would be.
    assert_eq!(
        of("worker_restarted").len(),
        1,
        "run once only: {events:#?}"
    );
    let error = of("fast_retry")[0]["error"].as_str().unwrap().to_owned();
    assert!(error.contains(expected), "{error}");
    let stopped = of("execution_finished")[0];
    assert_eq!(stopped["failure"], "E1", "{stopped}");
    assert_eq!(
        stopped["result"]["error"]["error_type"],
        viga_core::LIMIT_ERROR,
        "{stopped}"
    );
    assert_eq!(of("run_finished")[0]["stop"]["reason"], "accepted");
    (events, out)
}

/// Through `viga run`: a program past the scratch limit is a failure of the program (E1,
/// `LimitExceeded`) told to the model in the launcher's words at once, and
/// `containment.json` records the limits.
#[test]
fn viga_run_tells_the_model_which_limit_its_program_went_past() {
    let dir = tempfile::tempdir().unwrap();
    let (_, out) = run_past_a_limit(
        dir.path(),
        &["--scratch-limit", "64M", "--file-size-limit", "32M"],
        FILL_SCRATCH,
        "The program wrote more than the scratch limit (64 MiB) into its scratch folder",
    );
    let record = find_containment_json(&out).expect("the run records its containment");
    let status: Value = serde_json::from_str(&std::fs::read_to_string(record).unwrap()).unwrap();
    assert_eq!(status["limits"]["scratch"]["value"], 64 * MIB, "{status}");
    assert_eq!(status["limits"]["scratch"]["how"], "watched", "{status}");
    assert_eq!(status["limits"]["file_size"]["value"], 32 * MIB, "{status}");
}

/// Blender's own allocations past the memory limit (a mesh too big) crash it rather than
/// raise `MemoryError`: its allocator's last words name it, and the model is told the
/// memory limit at once.
#[test]
fn blender_out_of_memory_under_the_limit_is_told_as_the_memory_limit() {
    let dir = tempfile::tempdir().unwrap();
    run_past_a_limit(
        dir.path(),
        &["--memory-limit", "1G"],
        "import bpy\nbpy.ops.mesh.primitive_grid_add(x_subdivisions=6000, y_subdivisions=6000)\n",
        "The program hit the memory limit (1 GiB)",
    );
}

fn find_containment_json(dir: &std::path::Path) -> Option<std::path::PathBuf> {
    std::fs::read_dir(dir).ok()?.flatten().find_map(|entry| {
        let path = entry.path();
        if path.is_dir() {
            find_containment_json(&path)
        } else {
            (entry.file_name() == "containment.json").then_some(path)
        }
    })
}
