//! The launcher: contains itself as asked, says what holds, then starts the program and
//! stays as its parent until it ends, passing its exit status on.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::time::Duration;

use crate::{
    CONTAINED_MARKER, ContainError, ContainRequest, ContainmentPolicy, ContainmentStatus, Guard,
    Half, LIMIT_MARKER, LIMITS_ENV, Limit, Limits, LimitsStatus, session_variables_in,
};

/// How often the launcher looks whether its program ended, its own parent went away, or
/// its writable folders grew past the scratch limit.
pub(crate) const SUPERVISION_PERIOD: Duration = Duration::from_millis(100);

/// A request with its paths resolved: real paths (Landlock rules and mounts name them),
/// readable paths that do not exist left out.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Plan {
    pub policy: ContainmentPolicy,
    writable: Vec<PathBuf>,
    readable: Vec<PathBuf>,
    pub hidden: Vec<PathBuf>,
    test_without: Vec<Half>,
    pub limits: Limits,
}

impl Plan {
    fn resolve(request: &ContainRequest) -> Result<Self, ContainError> {
        let mut writable = Vec::new();
        for folder in &request.access.writable {
            match folder.canonicalize() {
                Ok(real) if real.is_dir() => writable.push(real),
                _ => {
                    return Err(ContainError::Setup(format!(
                        "{} is not a folder; a contained program may write only in existing folders",
                        folder.display()
                    )));
                }
            }
        }
        // An input that is not there yet (a download cache) is nothing to read.
        let readable = request
            .access
            .readable
            .iter()
            .filter_map(|path| path.canonicalize().ok())
            .collect();
        Ok(Self {
            policy: request.policy,
            writable,
            readable,
            hidden: request.hidden.clone(),
            test_without: request.test_without.clone(),
            limits: request.limits,
        })
    }

    /// Whether `half` is to be established (every half is, but those a test leaves out).
    pub fn wants(&self, half: Half) -> bool {
        !self.test_without.contains(&half)
    }

    pub fn writable(&self) -> Vec<PathBuf> {
        self.writable.clone()
    }

    pub fn readable(&self) -> Vec<PathBuf> {
        self.readable.clone()
    }

    /// Every path the program reads or writes.
    pub fn needed(&self) -> Vec<PathBuf> {
        self.readable
            .iter()
            .chain(&self.writable)
            .cloned()
            .collect()
    }
}

/// The halves a platform establishes (the environment is the launcher's own).
pub(crate) struct Guards {
    pub network: Guard,
    pub writes: Guard,
    pub reads: Guard,
    pub unix_sockets: Guard,
    pub processes: Guard,
    pub limits: LimitsStatus,
    /// The cgroup v2 leaf the launcher moved into, when one bounds the program.
    pub cgroup: Option<PathBuf>,
    /// The first process of the program's PID namespace, holding its own `/proc`, when the
    /// program is not it; it ends when its input (held by the launcher alone) closes.
    pub init: Option<std::process::Child>,
}

/// What the launcher has set up before it runs the program.
struct Entered {
    status: ContainmentStatus,
    /// Variables the program is not to get.
    removed: Vec<OsString>,
    cgroup: Option<PathBuf>,
    init: Option<std::process::Child>,
}

/// How a launch ended.
#[derive(Debug)]
pub enum Launched {
    /// A probe: what containment this system gives.
    Probed(Box<ContainmentStatus>),
    /// The program ran and ended with this exit code (128 + the signal that ended it).
    Exited(u8),
}

/// The launcher: contains this process as `request` asks, prints the [`CONTAINED_MARKER`]
/// line, then runs the program and waits for it (or, for a probe, returns the status).
/// Call it only from a single-threaded process (before any async runtime starts): a
/// process with threads cannot enter a user namespace.
#[cfg(unix)]
pub fn launch(request: &ContainRequest) -> Result<Launched, ContainError> {
    let parent = std::os::unix::process::parent_id();
    let plan = Plan::resolve(request)?;
    let mut entered = enter(&plan)?;
    let announced = announce(&entered.status);
    if request.probe || announced.is_err() {
        end(&mut entered.init);
        announced?;
        return Ok(Launched::Probed(Box::new(entered.status)));
    }
    let ran = program_command(&request.command, &entered).and_then(|program| {
        let watch = Watch::new(&plan, &entered.status.limits);
        run(program, parent, watch)
    });
    // The program is gone: what it left in its namespace goes with the first process.
    end(&mut entered.init);
    let code = ran?;
    if let Some(leaf) = &entered.cgroup
        && crate::platform::oom_killed(leaf)
        && let Some(memory) = plan.limits.memory
    {
        say_limit(
            Limit::Memory,
            &format!(
                "the program used more than the memory limit ({}) and the kernel stopped it",
                Limit::Memory.show(memory)
            ),
        );
    }
    Ok(Launched::Exited(code))
}

#[cfg(not(unix))]
pub fn launch(_request: &ContainRequest) -> Result<Launched, ContainError> {
    Err(ContainError::Usage(
        "the containment launcher runs only on Unix".to_owned(),
    ))
}

/// Contains the calling process (and whatever it runs next) as far as the policy and the
/// kernel allow. Returns the status and the variables the program is not to get.
fn enter(plan: &Plan) -> Result<Entered, ContainError> {
    if plan.policy == ContainmentPolicy::Off {
        return Ok(Entered {
            status: ContainmentStatus::off(),
            removed: Vec::new(),
            cgroup: None,
            init: None,
        });
    }
    let guards = crate::platform::contain(plan)?;
    let (environment, removed) = environment(plan);
    let status = ContainmentStatus {
        policy: plan.policy,
        network: guards.network,
        writes: guards.writes,
        reads: guards.reads,
        unix_sockets: guards.unix_sockets,
        processes: guards.processes,
        environment,
        limits: guards.limits,
    };
    let mut init = guards.init;
    if plan.policy == ContainmentPolicy::Require && !status.is_complete() {
        end(&mut init);
        let remedy = match status.remedy() {
            remedy if remedy.is_empty() => "run where Landlock and unprivileged user namespaces are available, or choose --containment auto".to_owned(),
            remedy => remedy,
        };
        return Err(ContainError::Unavailable {
            missing: status.missing_names().join(", "),
            summary: status.summary(),
            remedy,
        });
    }
    Ok(Entered {
        status,
        removed,
        cgroup: guards.cgroup,
        init,
    })
}

/// Ends the PID namespace's first process, and with it every process left in it: it
/// reads a pipe until the launcher closes it.
fn end(init: &mut Option<std::process::Child>) {
    if let Some(mut init) = init.take() {
        drop(init.stdin.take());
        let _ = init.wait();
    }
}

/// The environment half: the session's display, bus and agent variables are not passed on.
fn environment(plan: &Plan) -> (Guard, Vec<OsString>) {
    if !plan.wants(Half::Environment) {
        return (
            Guard::absent("left out on purpose (environment off for a test)"),
            Vec::new(),
        );
    }
    let removed = session_variables_in(std::env::vars_os().map(|(name, _)| name));
    let guard = if removed.is_empty() {
        Guard::active("no display, bus or agent variable is passed on (none was set)")
    } else {
        let names: Vec<String> = removed
            .iter()
            .map(|name| name.to_string_lossy().into_owned())
            .collect();
        Guard::active(format!(
            "display, bus and agent variables not passed on: {}",
            names.join(", ")
        ))
    };
    (guard, removed)
}

fn announce(status: &ContainmentStatus) -> Result<(), ContainError> {
    use std::io::Write as _;
    let json = serde_json::to_string(status)
        .map_err(|err| ContainError::Setup(format!("status not encodable: {err}")))?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{CONTAINED_MARKER}{json}")
        .and_then(|()| stdout.flush())
        .map_err(|err| ContainError::Setup(format!("could not write the status: {err}")))
}

/// The program's command: without the session's variables, told its limits, and with
/// SIGXFSZ ignored when a file-size limit holds (through `/bin/sh`'s `trap`, as the
/// workspace has no unsafe code to set it here and an ignored signal stays ignored across
/// `exec`), so a write past the limit fails with EFBIG instead of killing the program.
fn program_command(command: &[OsString], entered: &Entered) -> Result<Command, ContainError> {
    let Some((program, args)) = command.split_first() else {
        return Err(ContainError::Usage("no program to run".to_owned()));
    };
    let shell = std::path::Path::new("/bin/sh");
    let mut child_command = if entered.status.limits.file_size.active && shell.exists() {
        let mut wrapped = Command::new(shell);
        wrapped
            .args(["-c", "trap '' XFSZ; exec \"$0\" \"$@\""])
            .arg(program)
            .args(args);
        wrapped
    } else {
        let mut plain = Command::new(program);
        plain.args(args);
        plain
    };
    for name in &entered.removed {
        child_command.env_remove(name);
    }
    let limits = entered.status.limits.environment();
    if !limits.is_empty() {
        child_command.env(LIMITS_ENV, limits);
    }
    Ok(child_command)
}

/// The scratch limit as the launcher watches it: what the writable folders held when the
/// program started, and how much more they may hold.
struct Watch {
    folders: Vec<PathBuf>,
    start: u64,
    limit: Option<u64>,
}

impl Watch {
    fn new(plan: &Plan, limits: &LimitsStatus) -> Self {
        let folders = plan.writable();
        let limit = plan.limits.scratch.filter(|_| limits.scratch.active);
        let start = if limit.is_some() {
            crate::limits::usage(&folders)
        } else {
            0
        };
        Self {
            folders,
            start,
            limit,
        }
    }

    /// The sentence to stop the program with, when it went past the limit.
    fn exceeded(&self) -> Option<String> {
        let limit = self.limit?;
        let grown = crate::limits::usage(&self.folders).saturating_sub(self.start);
        (grown > limit).then(|| {
            format!(
                "the program wrote more than the scratch limit ({}) into its scratch folder and was stopped",
                Limit::Scratch.show(limit)
            )
        })
    }
}

/// The line that tells viga the program was stopped for going past `limit`.
fn say_limit(limit: Limit, sentence: &str) {
    eprintln!("{LIMIT_MARKER}{limit} {sentence}");
}

#[cfg(unix)]
/// Runs the program and stays its parent: in a PID namespace it is the namespace's first
/// process, and every process it starts ends when it does. Ends it when `parent` (whoever
/// started the launcher) is gone, when the launcher is told to stop (SIGTERM, SIGINT,
/// SIGHUP, SIGQUIT), or when its writable folders grew past the scratch limit.
fn run(mut command: Command, parent: u32, watch: Watch) -> Result<u8, ContainError> {
    let program = command.get_program().to_string_lossy().into_owned();
    let mut child = command
        .spawn()
        .map_err(|source| ContainError::Exec { program, source })?;
    // Only now: a blocked signal would stay blocked in the program and all it starts.
    let stop_signals = crate::platform::hold_stop_signals();
    let failed_wait =
        |err: std::io::Error| ContainError::Setup(format!("could not wait for the program: {err}"));
    loop {
        if let Some(status) = child.try_wait().map_err(failed_wait)? {
            return Ok(exit_code(status));
        }
        let past_limit = watch.exceeded();
        // Told to stop, past a limit, or nobody is left to talk to the program or stop it.
        if crate::platform::stop_asked(&stop_signals)
            || past_limit.is_some()
            || std::os::unix::process::parent_id() != parent
        {
            let _ = child.kill();
            let status = child.wait().map_err(failed_wait)?;
            if let Some(sentence) = past_limit {
                say_limit(Limit::Scratch, &sentence);
            }
            return Ok(exit_code(status));
        }
        std::thread::sleep(SUPERVISION_PERIOD);
    }
}

#[cfg(unix)]
/// The program's exit code, or 128 + the signal that ended it, as a shell reports it.
fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt as _;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(signal)) => u8::try_from((128 + signal) & 0xff).unwrap_or(1),
        (None, None) => 1,
    }
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::Access;

    #[test]
    fn a_plan_resolves_real_paths_and_refuses_a_missing_writable_folder() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().canonicalize().unwrap();
        let link = real.join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let request = |writable: Vec<PathBuf>| ContainRequest {
            policy: ContainmentPolicy::Auto,
            access: Access {
                readable: vec![link.clone(), real.join("not-yet")],
                writable,
            },
            hidden: Vec::new(),
            test_without: vec![Half::Processes],
            limits: Limits::default(),
            probe: true,
            command: Vec::new(),
        };
        let plan = Plan::resolve(&request(vec![link.clone()])).unwrap();
        assert_eq!(plan.writable(), vec![real.clone()]);
        assert_eq!(plan.readable(), vec![real.clone()]);
        assert!(!plan.wants(Half::Processes) && plan.wants(Half::Reads));
        let err = Plan::resolve(&request(vec![real.join("missing")]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing is not a folder"), "{err}");
    }

    #[test]
    fn the_scratch_watch_counts_what_the_folders_gained_since_the_start() {
        let dir = tempfile::tempdir().unwrap();
        // Held before the program starts: not counted.
        std::fs::write(dir.path().join("before.bin"), vec![1u8; 3 << 20]).unwrap();
        let request = ContainRequest {
            policy: ContainmentPolicy::Auto,
            access: Access::writing(vec![dir.path().to_path_buf()]),
            hidden: Vec::new(),
            test_without: Vec::new(),
            limits: Limits::default().with(Limit::Scratch, Some(1 << 20)),
            probe: false,
            command: Vec::new(),
        };
        let plan = Plan::resolve(&request).unwrap();
        let mut status = LimitsStatus::all_missing("test");
        status.scratch = crate::LimitGuard::held(crate::Enforcement::Watched, 1 << 20, "watched");
        let watch = Watch::new(&plan, &status);
        assert_eq!(watch.exceeded(), None);
        std::fs::write(dir.path().join("during.bin"), vec![1u8; 2 << 20]).unwrap();
        let sentence = watch.exceeded().unwrap();
        assert!(
            sentence.starts_with("the program wrote more than the scratch limit (1 MiB)"),
            "{sentence}"
        );
        // A limit that does not hold is not watched.
        let unwatched = Watch::new(&plan, &LimitsStatus::all_missing("test"));
        assert_eq!(unwatched.exceeded(), None);
    }

    #[test]
    fn exit_codes_pass_on_as_a_shell_reports_them() {
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        // Killed by SIGKILL (9).
        assert_eq!(exit_code(ExitStatus::from_raw(9)), 137);
    }
}
