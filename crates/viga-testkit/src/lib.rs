//! Time limits for tests that drive Blender or `viga` processes.
//!
//! A hung Blender, bridge or `viga` process must fail the one test that waits on it, with a
//! message that says so, instead of holding the whole CI run until its budget runs out.
//! Async code is bounded with [`within`]; a blocking wait on a `std::process::Child` cannot be
//! interrupted by a Tokio timeout, so those children get a [`Watchdog`] that kills them
//! ([`kill_after`], or [`output_within`] and [`status_within`] in place of `Command::output`
//! and `Command::status`).
//!
//! Tests that stand in for a web service get a loopback server ([`http::TestServer`]), a model
//! server replaying answers over OpenAI's chat completions API on it ([`openai`]), small mesh
//! files ([`mesh`]) and pictures ([`picture`]). Tests of a person's scene write it down with
//! [`scene::SCENE_DUMP`].
//!
//! A dev-dependency only: nothing here belongs in a library or the product. Unix only, like
//! the tests it serves: a watchdog kills with `kill -KILL`.
//!
//! Unit tests of the layers above the transport (the loop, the add-on registry, the gateway)
//! talk to a [`blender::FakeBlender`]; everything that touches a scene uses real Blender.
//!
//! [`mcp_for_blender`] runs that project's Blender add-on and names its MCP server, for tests
//! and benchmarks of viga beside it.
//!
//! [`websocket`] is a client for the tests of the WebSocket gateway. [`install_extension`]
//! is the Blender program that installs an add-on folder the way a person does.

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

pub mod websocket;

pub mod blender;
pub mod http;
pub mod mcp_for_blender;
pub mod mesh;
pub mod openai;
pub mod picture;
pub mod scene;

use std::future::Future;
use std::panic::Location;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long one test that drives Blender, or one `viga` or Blender process of it, may take.
/// A passing test takes seconds here; the margin is for slow, shared CI machines. Tests that
/// legitimately take longer name their own, larger limit.
pub const BLENDER_TEST_LIMIT: Duration = Duration::from_secs(120);

/// Runs `future` and returns its output, or panics when it has not finished within `limit`.
/// The panic names `what`, the limit and the caller's location.
///
/// The future is dropped when the limit runs out, and with it every worker, client and
/// `kill_on_drop` child it owns, so a hung Blender does not outlive its test. Needs a Tokio
/// runtime with its timer enabled (`#[tokio::test]` has one). It cannot interrupt code that
/// blocks the thread: bound blocking waits on processes with [`kill_after`],
/// [`output_within`] or [`status_within`].
#[track_caller]
pub fn within<F: Future>(
    limit: Duration,
    what: &str,
    future: F,
) -> impl Future<Output = F::Output> {
    let caller = Location::caller();
    async move {
        match tokio::time::timeout(limit, future).await {
            Ok(output) => output,
            Err(_) => panic!(
                "{what} did not finish within {limit:?} (at {caller}): \
                 a Blender or viga process it waits on has probably hung"
            ),
        }
    }
}

/// Runs `command` to completion like [`Command::output`] (stdin empty, stdout and stderr
/// captured, whatever the command said before), but kills it when it has not finished within
/// `limit` and then panics, naming the command and showing what it wrote to stderr.
#[track_caller]
pub fn output_within(command: &mut Command, limit: Duration) -> Output {
    let what = format!("{command:?}");
    let child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("cannot start {what}: {err}"));
    let watchdog = kill_after(&child, limit, &what);
    let output = child
        .wait_with_output()
        .unwrap_or_else(|err| panic!("cannot wait for {what}: {err}"));
    if watchdog.fired() {
        panic!(
            "{what} did not finish within {limit:?} and was killed; its stderr:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    output
}

/// Runs `command` to completion like [`Command::status`] (stdio inherited unless the command
/// says otherwise), but kills it when it has not finished within `limit` and then panics,
/// naming the command.
#[track_caller]
pub fn status_within(command: &mut Command, limit: Duration) -> ExitStatus {
    let what = format!("{command:?}");
    let mut child = command
        .spawn()
        .unwrap_or_else(|err| panic!("cannot start {what}: {err}"));
    let watchdog = kill_after(&child, limit, &what);
    let status = child
        .wait()
        .unwrap_or_else(|err| panic!("cannot wait for {what}: {err}"));
    if watchdog.fired() {
        panic!("{what} did not finish within {limit:?} and was killed");
    }
    status
}

/// Arms a [`Watchdog`] that kills `child` (SIGKILL) if it is still armed after `limit`.
/// `what` names the process in the message the watchdog prints when it fires; the test then
/// fails at its next read from or wait on the child, and that message in its output says why.
pub fn kill_after(child: &Child, limit: Duration, what: &str) -> Watchdog {
    let pid = child.id();
    let what = what.to_owned();
    let (orders, received) = mpsc::channel::<bool>();
    let fired = Arc::new(AtomicBool::new(false));
    let thread = std::thread::spawn({
        let fired = Arc::clone(&fired);
        move || {
            let kill = match received.recv_timeout(limit) {
                // Sent by the watchdog's drop: whether the test is failing.
                Ok(kill) => kill,
                Err(RecvTimeoutError::Disconnected) => false,
                Err(RecvTimeoutError::Timeout) => {
                    fired.store(true, Ordering::SeqCst);
                    // Threads inherit the test's output capture, so this shows with the failure.
                    eprintln!("{what} did not finish within {limit:?}: killing it (pid {pid})");
                    true
                }
            };
            if kill {
                // `Child::kill` needs the child itself, which the test is busy waiting on.
                let killed = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
                if !killed.as_ref().is_ok_and(|status| status.success()) {
                    eprintln!("could not kill {what} (pid {pid}): {killed:?}");
                }
            }
        }
    });
    Watchdog {
        orders,
        thread: Some(thread),
        fired,
    }
}

/// Kills a child process that outlives its time limit; made by [`kill_after`].
///
/// Dropping it disarms it. Drop it as soon as the child has been waited for: after that the
/// child's pid may be reused by another process. Dropped while the test panics (it failed
/// before waiting for the child), it kills the child at once, since nothing will wait for it.
#[derive(Debug)]
#[must_use = "a watchdog is disarmed as soon as it is dropped"]
pub struct Watchdog {
    orders: mpsc::Sender<bool>,
    thread: Option<JoinHandle<()>>,
    fired: Arc<AtomicBool>,
}

impl Watchdog {
    /// Whether the limit ran out and the child was killed.
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // The thread may already have fired and be gone, so a failed send is fine.
        let _ = self.orders.send(std::thread::panicking());
        // Joined, so no kill can arrive after the watchdog is gone.
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A stand-in containment launcher for tests of workers that take a launcher prefix: a
/// shell script that appends its arguments to `launches.log` in `folder`, prints a
/// `VIGA_CONTAINED` report, and runs the program after `--` in a session of its own, as
/// `viga contain` does (without containing anything). Returns the launcher prefix and the
/// log's path.
pub fn recording_launcher(
    folder: &std::path::Path,
) -> (Vec<std::ffi::OsString>, std::path::PathBuf) {
    use std::os::unix::fs::PermissionsExt as _;
    let log = folder.join("launches.log");
    let script = folder.join("launcher.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nlog=\"$1\"; shift\necho \"$@\" >> \"$log\"\necho 'VIGA_CONTAINED {\"policy\":\"recorded\"}'\nwhile [ \"$1\" != \"--\" ]; do shift; done; shift\nexec setsid \"$@\"\n",
    )
    .unwrap_or_else(|err| panic!("cannot write {}: {err}", script.display()));
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
        .unwrap_or_else(|err| panic!("cannot make {} executable: {err}", script.display()));
    let launcher = vec!["/bin/sh".into(), script.into(), log.clone().into()];
    (launcher, log)
}

/// The report [`recording_launcher`] prints, as a worker should keep it.
pub const RECORDED_REPORT: &str = "{\"policy\":\"recorded\"}";

/// Checks [`recording_launcher`]'s log: one launch per entry of `programs` (a word each
/// command line must hold, in order), each with `scratch` writable and its reads named.
#[track_caller]
pub fn assert_launched(log: &std::path::Path, scratch: &std::path::Path, programs: &[&str]) {
    let launches = std::fs::read_to_string(log)
        .unwrap_or_else(|err| panic!("nothing was launched ({}: {err})", log.display()));
    let lines: Vec<&str> = launches.lines().collect();
    assert_eq!(lines.len(), programs.len(), "launches: {launches}");
    let writable = format!("--write {} ", scratch.display());
    for (line, program) in lines.iter().zip(programs) {
        assert!(line.contains(&writable), "{writable:?} not in {line}");
        assert!(
            line.contains("--read "),
            "reads are named when limited: {line}"
        );
        assert!(line.contains(program), "{program:?} not in {line}");
    }
}

/// Every half of containment, as `containment.json` and the launcher's status name them.
pub const CONTAINMENT_HALVES: [&str; 6] = [
    "network",
    "writes",
    "reads",
    "unix_sockets",
    "processes",
    "environment",
];

/// Whether the tests run as root. The kernel does not apply RLIMIT_NPROC to root, so there
/// the process limit of containment holds only with a delegated cgroup v2, and `require`
/// refuses unless the limit is turned off by name.
pub fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    // /proc/self belongs to the process's effective user.
    std::fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0)
}

/// The launcher's options for a test under `require` that checks something other than the
/// limits: the process limit turned off by name where it cannot hold (as root); nothing
/// otherwise. The limits have tests of their own.
pub fn process_limit_off_as_root() -> Vec<&'static str> {
    if running_as_root() {
        vec!["--limit", "processes=none"]
    } else {
        Vec::new()
    }
}

/// The same for `viga`'s own flags.
pub fn process_limit_flag_off_as_root() -> Vec<&'static str> {
    if running_as_root() {
        vec!["--process-limit", "none"]
    } else {
        Vec::new()
    }
}

/// Fails with the process's output unless it succeeded.
#[track_caller]
pub fn assert_succeeded(output: &Output) {
    assert!(
        output.status.success(),
        "viga failed ({}):\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The run folder `viga run` (or `viga resume`) printed as `run folder: PATH`.
#[track_caller]
pub fn printed_run_folder(output: &Output) -> std::path::PathBuf {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find_map(|line| line.strip_prefix("run folder: "))
        .unwrap_or_else(|| panic!("no run folder in {stdout}"));
    std::path::PathBuf::from(line)
}

/// A Blender Python program that zips the add-on folder `source` into `zip` and installs it
/// as an extension, enabled, through Blender's own machinery: what a person does with
/// Preferences > Get Extensions > Install from Disk.
pub fn install_extension(source: &std::path::Path, zip: &std::path::Path) -> String {
    format!(
        r#"
import os, zipfile, bpy
source, zip_path = {source:?}, {zip:?}
with zipfile.ZipFile(zip_path, "w") as archive:
    for name in sorted(os.listdir(source)):
        if os.path.isfile(os.path.join(source, name)):
            archive.write(os.path.join(source, name), name)
result = bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user_default", enable_on_install=True)
assert result == {{"FINISHED"}}, result
"#
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests may panic: that is how they fail

    use std::os::unix::process::ExitStatusExt as _;
    use std::panic::AssertUnwindSafe;
    use std::time::Instant;

    use super::*;

    const SHORT: Duration = Duration::from_millis(200);

    fn sleeper() -> Command {
        let mut command = Command::new("sleep");
        command.arg("30");
        command
    }

    /// The panic message of `run`, which must panic (with a formatted message, as ours do).
    fn panic_message(run: impl FnOnce()) -> String {
        let payload = std::panic::catch_unwind(AssertUnwindSafe(run)).unwrap_err();
        *payload.downcast::<String>().unwrap()
    }

    #[tokio::test]
    async fn a_future_that_finishes_in_time_gives_its_output() {
        assert_eq!(within(SHORT, "a ready future", async { 7 }).await, 7);
    }

    #[test]
    fn a_future_that_never_finishes_fails_naming_what_and_the_limit() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let started = Instant::now();
        let message = panic_message(|| {
            runtime.block_on(within(
                SHORT,
                "the hung bridge",
                std::future::pending::<()>(),
            ));
        });
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(
            message.starts_with("the hung bridge did not finish within 200ms (at ")
                && message.contains(file!()),
            "{message}"
        );
    }

    #[test]
    fn a_command_that_finishes_in_time_gives_its_output() {
        let output = output_within(Command::new("echo").arg("hello"), SHORT * 10);
        assert!(output.status.success());
        assert_eq!(output.stdout, b"hello\n");
    }

    #[test]
    fn a_sleeping_command_is_killed_and_named() {
        let started = Instant::now();
        let message = panic_message(|| {
            output_within(&mut sleeper(), SHORT);
        });
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(
            message.contains("\"sleep\" \"30\" did not finish within 200ms and was killed"),
            "{message}"
        );
    }

    #[test]
    fn a_command_run_for_its_status_is_killed_and_named_too() {
        assert!(status_within(&mut Command::new("true"), SHORT * 10).success());
        let message = panic_message(|| {
            status_within(&mut sleeper(), SHORT);
        });
        assert!(
            message.contains("\"sleep\" \"30\" did not finish within 200ms and was killed"),
            "{message}"
        );
    }

    #[test]
    fn a_sleeping_child_is_killed_at_the_limit() {
        let mut child = sleeper().spawn().unwrap();
        let started = Instant::now();
        let watchdog = kill_after(&child, SHORT, "sleep 30");
        let status = child.wait().unwrap();
        assert!(watchdog.fired());
        drop(watchdog);
        assert_eq!(status.signal(), Some(9), "{status:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn a_watchdog_dropped_by_a_failing_test_kills_its_child_at_once() {
        let mut child = sleeper().spawn().unwrap();
        let watchdog = kill_after(&child, Duration::from_secs(60), "sleep 30");
        let _ = std::panic::catch_unwind(AssertUnwindSafe(move || {
            let _watchdog = watchdog;
            panic!("the test failed");
        }));
        assert_eq!(child.wait().unwrap().signal(), Some(9));
    }

    #[test]
    fn a_dropped_watchdog_kills_nothing() {
        let mut child = Command::new("sleep").arg("0.5").spawn().unwrap();
        drop(kill_after(&child, SHORT, "sleep 0.5"));
        assert!(child.wait().unwrap().success());
    }
}
