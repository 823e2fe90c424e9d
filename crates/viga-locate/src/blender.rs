//! Finding a Blender to run.
//!
//! Order: `VIGA_BLENDER` (a user's own `blender` binary), then `VIGA_PYTHON` (a Python that
//! can `import bpy`), then the project-local virtual environment `.viga/venv` made by
//! `cargo xtask setup` at the root of the checkout viga was built in ([`workspace_root`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

pub use crate::workspace_root;

/// Names a user's own Blender binary, run as `blender -b --factory-startup -P script`.
pub const BLENDER_ENV: &str = "VIGA_BLENDER";
/// Names a Python interpreter that has the `bpy` module installed.
pub const PYTHON_ENV: &str = "VIGA_PYTHON";
/// The project-local virtual environment, relative to the workspace root.
pub const VENV_DIR: &str = ".viga/venv";
/// The `bpy` release `cargo xtask setup` installs.
pub const BPY_VERSION: &str = "5.0.1";

/// How to start a Blender that runs a Python script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlenderLauncher {
    /// Blender as a Python module: `python script.py -- args`.
    PythonModule { python: PathBuf },
    /// A Blender binary: `blender -b --factory-startup -P script.py -- args`.
    Binary { blender: PathBuf },
}

impl BlenderLauncher {
    /// The program and arguments that run `script` with `script_args` after `--`.
    pub fn command_line(
        &self,
        script: &Path,
        script_args: &[OsString],
    ) -> (PathBuf, Vec<OsString>) {
        let mut args: Vec<OsString> = match self {
            // -P: the script's folder is not put first on sys.path, so a `json.py` lying
            // beside it (a temporary folder) is never imported in its place.
            Self::PythonModule { .. } => vec!["-P".into(), script.into()],
            Self::Binary { .. } => vec![
                "-b".into(),
                "--factory-startup".into(),
                "--python-exit-code".into(),
                "1".into(),
                "-P".into(),
                script.into(),
            ],
        };
        args.push("--".into());
        args.extend(script_args.iter().cloned());
        let program = match self {
            Self::PythonModule { python } => python.clone(),
            Self::Binary { blender } => blender.clone(),
        };
        (program, args)
    }

    /// The folders this Blender runs from, which a contained Blender must be able to read:
    /// a venv and the Python it was made from (its real prefix, wherever it lives, a
    /// pyenv in the home folder included), or a Blender binary's own folder (its
    /// libraries and data lie beside it). A Python that is not a venv's may have `bpy`
    /// installed for the user alone (`pip install --user`): then `~/.local/lib` too.
    pub fn install_folders(&self) -> Vec<PathBuf> {
        let program = match self {
            Self::PythonModule { python } => python,
            Self::Binary { blender } => blender,
        };
        // `<prefix>/bin/python` -> `<prefix>`; a binary's folder is its install.
        let install = |program: &Path| {
            match self {
                Self::PythonModule { .. } => program.parent().and_then(Path::parent),
                Self::Binary { .. } => program.parent(),
            }
            .map(Path::to_path_buf)
        };
        let mut folders: Vec<PathBuf> = install(program).into_iter().collect();
        if let Ok(real) = program.canonicalize() {
            folders.extend(install(&real));
        }
        let in_a_venv = install(program).is_some_and(|prefix| prefix.join("pyvenv.cfg").is_file());
        if matches!(self, Self::PythonModule { .. }) && !in_a_venv {
            folders.extend(
                std::env::var_os("HOME")
                    .map(|home| PathBuf::from(home).join(".local").join("lib"))
                    .filter(|user_site| user_site.is_absolute() && user_site.is_dir()),
            );
        }
        folders.retain(|folder| folder.parent().is_some());
        folders.sort();
        folders.dedup();
        folders
    }

    /// A short human description, for logs and `viga doctor`.
    pub fn describe(&self) -> String {
        match self {
            Self::PythonModule { python } => format!("bpy module via {}", python.display()),
            Self::Binary { blender } => format!("Blender binary {}", blender.display()),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LocateError {
    #[error(
        "{variable} is set to {path}, which does not exist; point it at an existing file or unset it"
    )]
    MissingFromEnv {
        variable: &'static str,
        path: PathBuf,
    },
    #[error(
        "no Blender found: run `cargo xtask setup` in the viga checkout (it installs bpy {BPY_VERSION} into {}), \
         or set {BLENDER_ENV}=/path/to/blender, or {PYTHON_ENV}=/path/to/python-with-bpy",
        venv.display()
    )]
    NotFound { venv: PathBuf },
}

/// Finds a Blender: the variables, then the venv of the checkout viga was built in.
pub fn locate() -> Result<BlenderLauncher, LocateError> {
    locate_in(&workspace_root(), |name| std::env::var_os(name))
}

/// Finds a Blender with an explicit workspace root and environment (for tests and tools).
pub fn locate_in(
    workspace_root: &Path,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<BlenderLauncher, LocateError> {
    if let Some(blender) = env(BLENDER_ENV).filter(|value| !value.is_empty()) {
        let blender = PathBuf::from(blender);
        return if blender.exists() {
            Ok(BlenderLauncher::Binary { blender })
        } else {
            Err(LocateError::MissingFromEnv {
                variable: BLENDER_ENV,
                path: blender,
            })
        };
    }
    if let Some(python) = env(PYTHON_ENV).filter(|value| !value.is_empty()) {
        let python = PathBuf::from(python);
        return if python.exists() {
            Ok(BlenderLauncher::PythonModule { python })
        } else {
            Err(LocateError::MissingFromEnv {
                variable: PYTHON_ENV,
                path: python,
            })
        };
    }
    let venv = workspace_root.join(VENV_DIR);
    let python = venv_python(&venv);
    if python.exists() {
        return Ok(BlenderLauncher::PythonModule { python });
    }
    Err(LocateError::NotFound { venv })
}

/// The interpreter inside a virtual environment.
pub fn venv_python(venv: &Path) -> PathBuf {
    if cfg!(windows) {
        venv.join("Scripts").join("python.exe")
    } else {
        venv.join("bin").join("python")
    }
}
