//! Starting a process through a containment launcher. The launcher (today `viga contain`,
//! moving into the `viga-sandbox` crate) is a prefix put before the real command line: it
//! contains itself (no network, writes only in the folders it is given) and then runs the
//! program, which inherits that. This crate does not know how the launcher works; it only
//! builds its command line, in the shape of `viga_blender::containment::Containment`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The line a containment launcher prints on its standard output before it runs the
/// program: this marker, then what containment holds, as JSON.
pub const CONTAINED_MARKER: &str = "VIGA_CONTAINED ";

/// How a worker's processes are started contained. The launcher must start a session of its
/// own (as `viga contain` does: `setsid`), so the process it runs leads a process group whose
/// id is the launcher's process id, and the worker kills that group whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confinement {
    /// The launcher and its fixed arguments (for the CLI: its own binary, `contain` and the
    /// policy, `--policy require`).
    pub launcher: Vec<OsString>,
    /// Folders the process may write in besides its worker's scratch folder.
    pub writable: Vec<PathBuf>,
    /// `None`: the launcher does not limit reads (today's `viga contain`). `Some`: reads are
    /// limited to these folders plus what each worker adds (its program's installation, the
    /// scratch folder), passed as `--read DIR`.
    pub readable: Option<Vec<PathBuf>>,
}

impl Confinement {
    /// The launcher's command line around `program args`: `LAUNCHER… [--write DIR]…
    /// [--read DIR]… -- PROGRAM ARGS…`, with `also_writable` (the scratch folder) after
    /// [`Self::writable`] and, when reads are limited, `also_readable` (what the worker's
    /// program needs) after [`Self::readable`].
    pub fn command_line(
        &self,
        also_writable: &[&Path],
        also_readable: &[&Path],
        program: &Path,
        args: &[OsString],
    ) -> Result<(PathBuf, Vec<OsString>), EmptyLauncher> {
        let (launcher, fixed) = self.launcher.split_first().ok_or(EmptyLauncher)?;
        let mut line: Vec<OsString> = fixed.to_vec();
        let writable = self.writable.iter().map(PathBuf::as_path);
        for folder in writable.chain(also_writable.iter().copied()) {
            line.push("--write".into());
            line.push(folder.into());
        }
        if let Some(readable) = &self.readable {
            let readable = readable.iter().map(PathBuf::as_path);
            for folder in readable.chain(also_readable.iter().copied()) {
                line.push("--read".into());
                line.push(folder.into());
            }
        }
        line.push("--".into());
        line.push(program.into());
        line.extend(args.iter().cloned());
        Ok((PathBuf::from(launcher), line))
    }
}

#[derive(Debug, thiserror::Error)]
#[error("the containment launcher is empty: name the program that contains, e.g. `viga contain`")]
pub struct EmptyLauncher;

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &[&str]) -> Vec<OsString> {
        line.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_prefix_names_folders_then_the_program() {
        let launcher = words(&["/bin/viga", "contain", "--policy", "require"]);
        let writes = words(&["--write", "/out", "--write", "/scratch"]);
        let reads = words(&["--read", "/inputs", "--read", "/usr/lib/libreoffice"]);
        let program = words(&["--", "/venv/bin/python", "-I", "helper.py"]);
        for (readable, expected_reads) in [
            (None, Vec::new()),
            (Some(vec![PathBuf::from("/inputs")]), reads),
        ] {
            let confinement = Confinement {
                launcher: launcher.clone(),
                writable: vec![PathBuf::from("/out")],
                readable,
            };
            let (first, line) = confinement
                .command_line(
                    &[Path::new("/scratch")],
                    &[Path::new("/usr/lib/libreoffice")],
                    Path::new("/venv/bin/python"),
                    &words(&["-I", "helper.py"]),
                )
                .unwrap();
            assert_eq!(first, PathBuf::from("/bin/viga"));
            let expected: Vec<OsString> =
                [&launcher[1..], &writes, &expected_reads, &program].concat();
            assert_eq!(line, expected);
        }
    }

    #[test]
    fn an_empty_launcher_is_refused() {
        let confinement = Confinement {
            launcher: Vec::new(),
            writable: Vec::new(),
            readable: None,
        };
        let err = confinement
            .command_line(&[], &[], Path::new("/bin/true"), &[])
            .unwrap_err();
        assert!(err.to_string().contains("launcher is empty"), "{err}");
    }
}
