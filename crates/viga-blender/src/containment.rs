//! Containment of the Blender that runs model-written programs: no network, and writes only
//! inside named folders, enforced by the kernel rather than by a lint of the program.
//!
//! How: viga starts that Blender through a launcher of its own (`viga contain --write DIR …
//! -- blender …`). The launcher is a fresh, single-threaded process, so it can enter a new
//! user and network namespace (nix's safe `unshare`), restrict itself with Landlock (the
//! `landlock` crate), print what it achieved on one line ([`CONTAINED_MARKER`]), and `exec`
//! Blender, which inherits both. Nothing of this runs in viga's own process, which keeps its
//! network for the model providers. The bridge of a contained worker listens on a Unix socket
//! in the worker's private scratch folder: the one way in across the namespace.
//!
//! Where the kernel offers less, [`ContainmentPolicy::Auto`] runs with what there is and says
//! so; [`ContainmentPolicy::Require`] refuses to start Blender instead.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The line the launcher prints before it runs Blender: this marker, then the
/// [`ContainmentStatus`] as JSON.
pub const CONTAINED_MARKER: &str = "VIGA_CONTAINED ";

/// Whether model-written programs run contained.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContainmentPolicy {
    /// Not contained: for a Blender that must reach the network or write anywhere.
    Off,
    /// Contained as far as the kernel allows; what is missing is stated, not refused.
    #[default]
    Auto,
    /// Blender does not start unless both the network and the filesystem are contained.
    Require,
}

impl ContainmentPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Auto => "auto",
            Self::Require => "require",
        }
    }
}

impl std::fmt::Display for ContainmentPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ContainmentPolicy {
    type Err = ContainError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "off" => Ok(Self::Off),
            "auto" => Ok(Self::Auto),
            "require" => Ok(Self::Require),
            other => Err(ContainError::Usage(format!(
                "containment {other:?} is not off, auto or require"
            ))),
        }
    }
}

/// One side of containment (network or filesystem): whether it holds, and how or why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Guard {
    pub active: bool,
    pub detail: String,
}

impl Guard {
    fn active(detail: impl Into<String>) -> Self {
        Self {
            active: true,
            detail: detail.into(),
        }
    }

    fn absent(detail: impl Into<String>) -> Self {
        Self {
            active: false,
            detail: detail.into(),
        }
    }
}

/// What containment a worker's Blender runs under, as its launcher reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainmentStatus {
    pub policy: ContainmentPolicy,
    pub network: Guard,
    pub filesystem: Guard,
}

impl ContainmentStatus {
    /// The status of a worker started without the launcher.
    pub fn off() -> Self {
        Self {
            policy: ContainmentPolicy::Off,
            network: Guard::absent("containment is off"),
            filesystem: Guard::absent("containment is off"),
        }
    }

    /// Both the network and the filesystem are contained.
    pub fn is_complete(&self) -> bool {
        self.network.active && self.filesystem.active
    }

    /// One line for a person: what holds and what does not.
    pub fn summary(&self) -> String {
        let side = |guard: &Guard| {
            if guard.active {
                format!("contained ({})", guard.detail)
            } else {
                format!("NOT contained ({})", guard.detail)
            }
        };
        format!(
            "network {}; files {}",
            side(&self.network),
            side(&self.filesystem)
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ContainError {
    #[error("{0}")]
    Usage(String),
    #[error(
        "containment is required (--containment require) but {0}; run where Landlock and unprivileged user namespaces are available, or choose --containment auto"
    )]
    Unavailable(String),
    #[error("could not contain Blender: {0}")]
    Setup(String),
    #[error("could not run {program}: {source}")]
    Exec {
        program: String,
        #[source]
        source: std::io::Error,
    },
}

/// How a worker's Blender is started contained: through `launcher` (for the CLI, its own
/// binary and `contain`), allowed to write in `writable` and in the worker's scratch folder.
#[derive(Debug, Clone)]
pub struct Containment {
    pub launcher: Vec<OsString>,
    pub writable: Vec<PathBuf>,
    pub policy: ContainmentPolicy,
}

impl Containment {
    /// The launcher's command line around `program args`: Blender may write in
    /// [`Self::writable`] and in `also_writable` (the worker's scratch folder, a GPU kernel
    /// cache).
    pub fn command_line(
        &self,
        also_writable: &[&Path],
        program: PathBuf,
        args: Vec<OsString>,
    ) -> Result<(PathBuf, Vec<OsString>), ContainError> {
        let Some((launcher, launcher_args)) = self.launcher.split_first() else {
            return Err(ContainError::Usage(
                "the containment launcher is empty".to_owned(),
            ));
        };
        let mut line: Vec<OsString> = launcher_args.to_vec();
        line.push("--policy".into());
        line.push(self.policy.as_str().into());
        for folder in self
            .writable
            .iter()
            .map(PathBuf::as_path)
            .chain(also_writable.iter().copied())
        {
            line.push("--write".into());
            line.push(folder.into());
        }
        line.push("--".into());
        line.push(program.into());
        line.extend(args);
        Ok((PathBuf::from(launcher), line))
    }
}

/// What the launcher was asked to do: parsed from its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainRequest {
    pub policy: ContainmentPolicy,
    pub writable: Vec<PathBuf>,
    /// Report what containment this system offers and exit, instead of running a program.
    pub probe: bool,
    /// The program and its arguments.
    pub command: Vec<OsString>,
}

impl ContainRequest {
    /// `[--policy auto|require] [--write DIR]… (--probe | -- PROGRAM ARGS…)`.
    pub fn parse(args: &[OsString]) -> Result<Self, ContainError> {
        let mut request = Self {
            policy: ContainmentPolicy::Auto,
            writable: Vec::new(),
            probe: false,
            command: Vec::new(),
        };
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            match arg.to_str() {
                Some("--") => {
                    request.command = rest.cloned().collect();
                    break;
                }
                Some("--probe") => request.probe = true,
                Some("--write") => {
                    let folder = rest
                        .next()
                        .ok_or_else(|| ContainError::Usage("--write needs a folder".to_owned()))?;
                    request.writable.push(PathBuf::from(folder));
                }
                Some("--policy") => {
                    let policy = rest.next().and_then(|p| p.to_str()).ok_or_else(|| {
                        ContainError::Usage("--policy needs auto or require".to_owned())
                    })?;
                    request.policy = policy.parse()?;
                }
                _ => {
                    return Err(ContainError::Usage(format!(
                        "unknown argument {}: expected --policy, --write DIR, --probe or -- PROGRAM",
                        arg.to_string_lossy()
                    )));
                }
            }
        }
        if !request.probe && request.command.is_empty() {
            return Err(ContainError::Usage(
                "no program to run: give one after --".to_owned(),
            ));
        }
        Ok(request)
    }
}

/// The launcher: contains this process as `request` asks, prints the
/// [`CONTAINED_MARKER`] line, and then replaces itself with the program (never returning on
/// success) or, for a probe, returns the status. Call it only from a single-threaded process
/// (before any async runtime starts): a process with threads cannot enter a user namespace.
pub fn launch(request: &ContainRequest) -> Result<ContainmentStatus, ContainError> {
    for folder in &request.writable {
        if !folder.is_dir() {
            return Err(ContainError::Setup(format!(
                "{} is not a folder; Blender may write only in existing folders",
                folder.display()
            )));
        }
    }
    let status = enter(request.policy, &request.writable)?;
    announce(&status)?;
    if request.probe {
        return Ok(status);
    }
    Err(exec(&request.command))
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

/// Contains the calling process (and whatever it runs next) as far as `policy` and the
/// kernel allow.
fn enter(
    policy: ContainmentPolicy,
    writable: &[PathBuf],
) -> Result<ContainmentStatus, ContainError> {
    if policy == ContainmentPolicy::Off {
        return Ok(ContainmentStatus::off());
    }
    let status = platform::enter(policy, writable)?;
    if policy == ContainmentPolicy::Require && !status.is_complete() {
        return Err(ContainError::Unavailable(status.summary()));
    }
    Ok(status)
}

#[cfg(unix)]
fn exec(command: &[OsString]) -> ContainError {
    use std::os::unix::process::CommandExt as _;
    let Some((program, args)) = command.split_first() else {
        return ContainError::Usage("no program to run".to_owned());
    };
    let source = std::process::Command::new(program).args(args).exec();
    ContainError::Exec {
        program: program.to_string_lossy().into_owned(),
        source,
    }
}

#[cfg(not(unix))]
fn exec(_command: &[OsString]) -> ContainError {
    ContainError::Usage("the containment launcher runs only on Unix".to_owned())
}

#[cfg(target_os = "linux")]
mod platform {
    use std::path::PathBuf;

    use landlock::{
        ABI, AccessFs, AccessNet, CompatLevel, Compatible as _, LandlockStatus, Ruleset,
        RulesetAttr as _, RulesetCreatedAttr as _, RulesetStatus, Scope, path_beneath_rules,
    };
    use nix::sched::{CloneFlags, unshare};

    use super::{ContainError, ContainmentPolicy, ContainmentStatus, Guard};

    /// Newest Landlock ABI this code asks for; an older kernel gets what it has.
    const WANTED_ABI: ABI = ABI::V10;

    /// Devices anything may write to (nothing is created in `/dev`, and no other device,
    /// a terminal above all, can be opened for writing).
    const SINKS: [&str; 3] = ["/dev/null", "/dev/zero", "/dev/full"];

    /// GPU devices, written to and driven by ioctl when Blender renders on a GPU.
    fn gpu_devices() -> Vec<PathBuf> {
        let mut devices: Vec<PathBuf> = ["/dev/dri", "/dev/kfd"].map(PathBuf::from).to_vec();
        if let Ok(listing) = std::fs::read_dir("/dev") {
            devices.extend(
                listing
                    .flatten()
                    .filter(|entry| entry.file_name().to_string_lossy().starts_with("nvidia"))
                    .map(|entry| entry.path()),
            );
        }
        devices.retain(|device| device.exists());
        devices
    }

    pub(super) fn enter(
        policy: ContainmentPolicy,
        writable: &[PathBuf],
    ) -> Result<ContainmentStatus, ContainError> {
        leave_terminal()?;
        let mut network = isolate_network()?;
        let (filesystem, abi) = restrict(writable)?;
        if !network.active {
            network = match abi {
                Some(abi) if abi >= ABI::V10 => Guard::active(format!(
                    "TCP and UDP denied by Landlock {abi:?} ({})",
                    network.detail
                )),
                Some(abi) if abi >= ABI::V4 => Guard::absent(format!(
                    "{}; Landlock {abi:?} denies TCP but cannot deny UDP (name lookups and datagrams go out)",
                    network.detail
                )),
                _ => network,
            };
        }
        Ok(ContainmentStatus {
            policy,
            network,
            filesystem,
        })
    }

    /// A session of its own, without a controlling terminal: a program cannot open
    /// `/dev/tty` and type into the shell viga was started from.
    fn leave_terminal() -> Result<(), ContainError> {
        nix::unistd::setsid().map(drop).map_err(|errno| {
            ContainError::Setup(format!("could not leave the terminal's session ({errno})"))
        })
    }

    /// A new user namespace (mapping only this user, so files keep their owner) with a new
    /// network namespace: no interface but a loopback that is down.
    fn isolate_network() -> Result<Guard, ContainError> {
        if let Some(why) = user_namespaces_restricted() {
            return Ok(Guard::absent(why));
        }
        let uid = nix::unistd::getuid().as_raw();
        let gid = nix::unistd::getgid().as_raw();
        if let Err(errno) = unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET) {
            return Ok(Guard::absent(format!(
                "no network namespace: unshare failed ({errno})"
            )));
        }
        // Past this point the process is in the new namespace: without the maps it could
        // not create a file at all, so a failure here ends the launch.
        let write = |file: &str, text: String| {
            std::fs::write(file, text).map_err(|err| {
                ContainError::Setup(format!(
                    "entered a user namespace but could not write {file}: {err}"
                ))
            })
        };
        write("/proc/self/setgroups", "deny".to_owned())?;
        write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
        write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
        Ok(Guard::active("own network namespace, no interfaces"))
    }

    /// Why this kernel will not give an unprivileged process a usable user namespace, when
    /// a setting says so up front (trying would leave the launcher in a namespace where it
    /// cannot create files).
    fn user_namespaces_restricted() -> Option<String> {
        let setting = |path: &str| {
            std::fs::read_to_string(path)
                .ok()
                .map(|text| text.trim().to_owned())
        };
        if setting("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
            return Some("user namespaces are disabled (user.max_user_namespaces = 0)".to_owned());
        }
        if setting("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
            return Some(
                "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)"
                    .to_owned(),
            );
        }
        if setting("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1")
        {
            return Some(
                "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)"
                    .to_owned(),
            );
        }
        None
    }

    /// Landlock: writes only beneath `writable` (and to a few sink devices and the GPU), no
    /// TCP or UDP, no signals or abstract Unix sockets reaching outside. Returns the
    /// filesystem guard and the Landlock ABI in force, if any.
    fn restrict(writable: &[PathBuf]) -> Result<(Guard, Option<ABI>), ContainError> {
        let setup = |err: landlock::RulesetError| ContainError::Setup(format!("Landlock: {err}"));
        let write_access = AccessFs::from_write(WANTED_ABI);
        let status = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(write_access)
            .map_err(setup)?
            .handle_access(
                AccessNet::BindTcp
                    | AccessNet::ConnectTcp
                    | AccessNet::BindUdp
                    | AccessNet::ConnectSendUdp,
            )
            .map_err(setup)?
            .scope(Scope::AbstractUnixSocket | Scope::Signal)
            .map_err(setup)?
            .create()
            .map_err(setup)?
            .add_rules(path_beneath_rules(writable, write_access))
            .map_err(setup)?
            .add_rules(path_beneath_rules(
                SINKS
                    .iter()
                    .filter(|sink| std::path::Path::new(sink).exists()),
                AccessFs::WriteFile,
            ))
            .map_err(setup)?
            .add_rules(path_beneath_rules(
                gpu_devices(),
                AccessFs::WriteFile | AccessFs::IoctlDev,
            ))
            .map_err(setup)?
            .restrict_self()
            .map_err(setup)?;
        let abi = match status.landlock {
            LandlockStatus::Available { effective_abi, .. } => Some(effective_abi),
            LandlockStatus::NotEnabled | LandlockStatus::NotImplemented => None,
        };
        let folders = if writable.is_empty() {
            "the folders each command names".to_owned()
        } else {
            writable
                .iter()
                .map(|folder| folder.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let filesystem = match (status.ruleset, abi) {
            (RulesetStatus::NotEnforced, _) | (_, None) => Guard::absent(match status.landlock {
                LandlockStatus::NotEnabled => "Landlock is built into this kernel but not enabled",
                LandlockStatus::NotImplemented => "this kernel has no Landlock",
                LandlockStatus::Available { .. } => "Landlock did not enforce the rules",
            }),
            (enforced, Some(abi)) => Guard::active(format!(
                "Landlock {abi:?}: writes only in {folders}{}",
                if enforced == RulesetStatus::PartiallyEnforced {
                    "; rights of newer Landlock versions are not available on this kernel"
                } else {
                    ""
                }
            )),
        };
        Ok((filesystem, abi))
    }
}

#[cfg(not(target_os = "linux"))]
mod platform {
    use std::path::PathBuf;

    use super::{ContainError, ContainmentPolicy, ContainmentStatus, Guard};

    pub(super) fn enter(
        policy: ContainmentPolicy,
        _writable: &[PathBuf],
    ) -> Result<ContainmentStatus, ContainError> {
        let why = "containment needs Linux (Landlock and namespaces)";
        Ok(ContainmentStatus {
            policy,
            network: Guard::absent(why),
            filesystem: Guard::absent(why),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &[&str]) -> Vec<OsString> {
        line.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_command_line_round_trips_through_the_parser() {
        let containment = Containment {
            launcher: args(&["/bin/viga", "contain"]),
            writable: vec![PathBuf::from("/runs")],
            policy: ContainmentPolicy::Require,
        };
        let (program, line) = containment
            .command_line(
                &[Path::new("/tmp/scratch")],
                PathBuf::from("/venv/python"),
                args(&["-P", "bridge.py", "--", "--mode", "serve"]),
            )
            .unwrap();
        assert_eq!(program, PathBuf::from("/bin/viga"));
        assert_eq!(line[0], "contain");
        let request = ContainRequest::parse(&line[1..]).unwrap();
        assert_eq!(request.policy, ContainmentPolicy::Require);
        assert_eq!(
            request.writable,
            vec![PathBuf::from("/runs"), PathBuf::from("/tmp/scratch")]
        );
        assert!(!request.probe);
        assert_eq!(
            request.command,
            args(&["/venv/python", "-P", "bridge.py", "--", "--mode", "serve"])
        );
    }

    #[test]
    fn bad_launcher_arguments_say_what_is_wrong() {
        for (line, expected) in [
            (vec!["--write"], "--write needs a folder"),
            (vec!["--policy", "maybe"], "not off, auto or require"),
            (vec!["--frobnicate"], "unknown argument --frobnicate"),
            (vec!["--write", "/x"], "no program to run"),
        ] {
            let err = ContainRequest::parse(&args(&line)).unwrap_err().to_string();
            assert!(err.contains(expected), "{line:?}: {err}");
        }
        assert!(ContainRequest::parse(&args(&["--probe"])).unwrap().probe);
    }

    #[test]
    fn a_summary_says_what_is_not_contained() {
        let status = ContainmentStatus {
            policy: ContainmentPolicy::Auto,
            network: Guard::absent("no namespaces"),
            filesystem: Guard::active("Landlock ABI 7"),
        };
        assert!(!status.is_complete());
        assert_eq!(
            status.summary(),
            "network NOT contained (no namespaces); files contained (Landlock ABI 7)"
        );
    }
}
