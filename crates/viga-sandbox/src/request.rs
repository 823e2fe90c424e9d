//! How a worker is started contained ([`Containment`], turned into the launcher's command
//! line) and what the launcher reads back from it ([`ContainRequest`]).

use std::ffi::OsString;
use std::path::PathBuf;

use crate::{ContainError, ContainmentPolicy, Half, Limits, session_socket_folders};

/// What a contained program may read and write besides the system's folders. Writable
/// folders are readable too.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// Folders (or single files) the program reads: its install, its inputs.
    pub readable: Vec<PathBuf>,
    /// Folders the program writes in: its scratch folder, a results folder.
    pub writable: Vec<PathBuf>,
}

impl Access {
    /// Reading `readable`, writing nothing.
    pub fn reading(readable: Vec<PathBuf>) -> Self {
        Self {
            readable,
            writable: Vec::new(),
        }
    }

    /// Writing (and reading) `writable`.
    pub fn writing(writable: Vec<PathBuf>) -> Self {
        Self {
            readable: Vec::new(),
            writable,
        }
    }

    /// Both lists of `self` followed by those of `more`.
    pub fn and(&self, more: &Access) -> Access {
        let join = |a: &[PathBuf], b: &[PathBuf]| a.iter().chain(b).cloned().collect();
        Access {
            readable: join(&self.readable, &more.readable),
            writable: join(&self.writable, &more.writable),
        }
    }
}

/// How a worker's program is started contained: through `launcher` (for the CLI, its own
/// binary and `contain`), under `policy`, with `access`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Containment {
    pub launcher: Vec<OsString>,
    pub policy: ContainmentPolicy,
    pub access: Access,
    /// Folders to hide besides those the launcher always hides (`/tmp`, `/var/tmp`,
    /// `/run`, `/var/run`, `/dev/shm`): the session's runtime and home folders and where
    /// its agent sockets are ([`Containment::new`] fills it from this process's
    /// environment, which the launcher's own no longer holds).
    pub hidden: Vec<PathBuf>,
    /// Halves left out on purpose. For tests only: they check that each protection is
    /// what stops an attack, and that `require` refuses when a half is missing.
    pub test_without: Vec<Half>,
    /// What the program may use: memory, processes, one file's size, what it writes.
    pub limits: Limits,
}

impl Containment {
    /// Containment under `policy` through `launcher`, hiding this session's socket
    /// folders; no folder readable or writable yet.
    pub fn new(launcher: Vec<OsString>, policy: ContainmentPolicy) -> Self {
        Self {
            launcher,
            policy,
            access: Access::default(),
            hidden: session_socket_folders(|name| std::env::var_os(name)),
            test_without: Vec::new(),
            limits: Limits::default(),
        }
    }

    /// The same containment under `limits`.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The same containment with more the program may read and write.
    pub fn with_access(mut self, more: &Access) -> Self {
        self.access = self.access.and(more);
        self
    }

    /// The launcher's command line around `program args`, with `more` access besides
    /// [`Self::access`] (what the caller itself adds: a scratch folder, the program's
    /// install).
    pub fn command_line(
        &self,
        more: &Access,
        program: PathBuf,
        args: Vec<OsString>,
    ) -> Result<(PathBuf, Vec<OsString>), ContainError> {
        let (launcher, mut line) = self.options(more)?;
        line.push("--".into());
        line.push(program.into());
        line.extend(args);
        Ok((launcher, line))
    }

    /// The launcher and every option of this containment, without a program: the prefix a
    /// worker that adds its own folders and program after it starts its processes with
    /// (the slide and page renderers' `Confinement`).
    pub fn prefix(&self) -> Result<Vec<OsString>, ContainError> {
        let (launcher, options) = self.options(&Access::default())?;
        Ok(std::iter::once(launcher.into_os_string())
            .chain(options)
            .collect())
    }

    /// The launcher's command line that reports what containment this system gives and
    /// runs nothing (`viga doctor`).
    pub fn probe_command_line(&self) -> Result<(PathBuf, Vec<OsString>), ContainError> {
        let (launcher, mut line) = self.options(&Access::default())?;
        line.push("--probe".into());
        Ok((launcher, line))
    }

    fn options(&self, more: &Access) -> Result<(PathBuf, Vec<OsString>), ContainError> {
        let Some((launcher, launcher_args)) = self.launcher.split_first() else {
            return Err(ContainError::Usage(
                "the containment launcher is empty".to_owned(),
            ));
        };
        let mut line: Vec<OsString> = launcher_args.to_vec();
        line.push("--policy".into());
        line.push(self.policy.as_str().into());
        let access = self.access.and(more);
        let options = [
            ("--write", &access.writable),
            ("--read", &access.readable),
            ("--hide", &self.hidden),
        ];
        for (flag, paths) in options {
            for path in paths {
                line.push(flag.into());
                line.push(path.into());
            }
        }
        for half in &self.test_without {
            line.push("--test-without".into());
            line.push(half.as_str().into());
        }
        line.extend(self.limits.options());
        Ok((PathBuf::from(launcher), line))
    }
}

/// What the launcher was asked to do: parsed from its arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainRequest {
    pub policy: ContainmentPolicy,
    pub access: Access,
    pub hidden: Vec<PathBuf>,
    pub test_without: Vec<Half>,
    /// The limits asked for (the defaults for those not named).
    pub limits: Limits,
    /// Report what containment this system offers and exit, instead of running a program.
    pub probe: bool,
    /// The program and its arguments.
    pub command: Vec<OsString>,
}

/// The launcher's arguments, for its usage message.
pub const USAGE: &str = "[--policy auto|require] [--write DIR]… [--read PATH]… [--hide DIR]… [--test-without HALF]… [--limit NAME=VALUE|NAME=none]… (--probe | -- PROGRAM ARGS…)";

impl ContainRequest {
    /// Parses [`USAGE`].
    pub fn parse(args: &[OsString]) -> Result<Self, ContainError> {
        let mut request = Self {
            policy: ContainmentPolicy::Auto,
            access: Access::default(),
            hidden: Vec::new(),
            test_without: Vec::new(),
            limits: Limits::default(),
            probe: false,
            command: Vec::new(),
        };
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            let flag = arg.to_str();
            let mut value = |what: &str| {
                rest.next().cloned().ok_or_else(|| {
                    ContainError::Usage(format!("{} needs {what}", arg.to_string_lossy()))
                })
            };
            match flag {
                Some("--") => {
                    request.command = rest.cloned().collect();
                    break;
                }
                Some("--probe") => request.probe = true,
                Some("--write") => request.access.writable.push(value("a folder")?.into()),
                Some("--read") => request.access.readable.push(value("a path")?.into()),
                Some("--hide") => request.hidden.push(value("a folder")?.into()),
                Some("--policy") => {
                    let policy = value("auto or require")?;
                    request.policy = policy.to_string_lossy().parse()?;
                }
                Some("--limit") => {
                    let assignment = value("NAME=VALUE")?;
                    request.limits.assign(&assignment.to_string_lossy())?;
                }
                Some("--test-without") => {
                    let half = value("a half of containment")?;
                    request.test_without.push(half.to_string_lossy().parse()?);
                }
                _ => {
                    return Err(ContainError::Usage(format!(
                        "unknown argument {}: expected {USAGE}",
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn args(line: &[&str]) -> Vec<OsString> {
        line.iter().map(OsString::from).collect()
    }

    fn paths(list: &[&str]) -> Vec<PathBuf> {
        list.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn the_command_line_round_trips_through_the_parser() {
        let containment = Containment {
            launcher: args(&["/bin/viga", "contain"]),
            policy: ContainmentPolicy::Require,
            access: Access {
                readable: paths(&["/data/base.blend"]),
                writable: paths(&["/runs"]),
            },
            hidden: paths(&["/home/ada", "/run/user/1000"]),
            test_without: vec![Half::UnixSockets],
            limits: Limits::default()
                .with(crate::Limit::Processes, None)
                .with(crate::Limit::Scratch, Some(64 << 20)),
        };
        let more = Access {
            readable: paths(&["/venv", "/opt/python"]),
            writable: paths(&["/tmp/scratch"]),
        };
        let (program, line) = containment
            .command_line(
                &more,
                PathBuf::from("/venv/python"),
                args(&["-P", "bridge.py", "--", "--mode", "serve"]),
            )
            .unwrap();
        assert_eq!(program, PathBuf::from("/bin/viga"));
        assert_eq!(line[0], "contain");
        let request = ContainRequest::parse(&line[1..]).unwrap();
        assert_eq!(request.policy, ContainmentPolicy::Require);
        assert_eq!(request.access.writable, paths(&["/runs", "/tmp/scratch"]));
        assert_eq!(
            request.access.readable,
            paths(&["/data/base.blend", "/venv", "/opt/python"])
        );
        assert_eq!(request.hidden, paths(&["/home/ada", "/run/user/1000"]));
        assert_eq!(request.test_without, vec![Half::UnixSockets]);
        assert_eq!(request.limits, containment.limits);
        assert!(!request.probe);
        // Everything after the program's own "--" is the program's.
        assert_eq!(
            request.command,
            args(&["/venv/python", "-P", "bridge.py", "--", "--mode", "serve"])
        );
        // The prefix is the command line without its program: a worker adds folders and
        // its program after it, and the launcher reads the whole as one request.
        let mut prefixed = containment.prefix().unwrap();
        prefixed.extend(args(&["--write", "/tmp/scratch", "--", "/venv/python"]));
        assert_eq!(prefixed[0], "/bin/viga");
        let request = ContainRequest::parse(&prefixed[2..]).unwrap();
        assert_eq!(request.policy, ContainmentPolicy::Require);
        assert_eq!(request.access.writable, paths(&["/runs", "/tmp/scratch"]));
        assert_eq!(request.hidden, paths(&["/home/ada", "/run/user/1000"]));
        assert_eq!(request.command, args(&["/venv/python"]));
        assert_eq!(request.limits, containment.limits);
        let (_, probe) = containment.probe_command_line().unwrap();
        let probe = ContainRequest::parse(&probe[1..]).unwrap();
        assert!(probe.probe && probe.command.is_empty());
        assert_eq!(probe.access, containment.access);
    }

    #[test]
    fn bad_launcher_arguments_say_what_is_wrong() {
        for (line, expected) in [
            (vec!["--write"], "--write needs a folder"),
            (vec!["--read"], "--read needs a path"),
            (vec!["--hide"], "--hide needs a folder"),
            (vec!["--policy", "maybe"], "not off, auto or require"),
            (
                vec!["--test-without", "sockets"],
                "not a half of containment",
            ),
            (vec!["--frobnicate"], "unknown argument --frobnicate"),
            (vec!["--limit"], "--limit needs NAME=VALUE"),
            (vec!["--limit", "memory=lots"], "not a valid memory limit"),
            (vec!["--limit", "disk=1G"], "\"disk\" is not a limit"),
            (vec!["--write", "/x"], "no program to run"),
        ] {
            let err = ContainRequest::parse(&args(&line)).unwrap_err().to_string();
            assert!(err.contains(expected), "{line:?}: {err}");
        }
        assert!(ContainRequest::parse(&args(&["--probe"])).unwrap().probe);
    }

    #[test]
    fn an_empty_launcher_is_refused() {
        let containment = Containment::new(Vec::new(), ContainmentPolicy::Auto);
        let err = containment
            .command_line(&Access::default(), PathBuf::from("/bin/true"), Vec::new())
            .unwrap_err();
        assert!(err.to_string().contains("launcher is empty"), "{err}");
    }
}
