//! Finding the programs a renderer needs: a variable that names one, else a list of names on
//! `PATH`; when none is there, an error that says what to install.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// A program that could not be found, with what to do about it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{what}: {detail}; {install}")]
pub struct NotFound {
    /// What was looked for ("LibreOffice", "Chromium").
    pub what: String,
    /// Where it was looked for.
    pub detail: String,
    /// What to install or set.
    pub install: String,
}

/// The program named by the variable `variable` (which must then exist), else the first of
/// `names` found on `PATH`.
pub fn find_program(
    what: &str,
    variable: &str,
    names: &[&str],
    install: &str,
) -> Result<PathBuf, NotFound> {
    let not_found = |detail: String| NotFound {
        what: what.to_owned(),
        detail,
        install: install.to_owned(),
    };
    if let Some(named) = named_file(variable) {
        return named.map_err(not_found);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    names
        .iter()
        .find_map(|name| on_path(&path, name))
        .ok_or_else(|| {
            not_found(format!(
                "none of {} is on PATH and {variable} is not set",
                names.join(", ")
            ))
        })
}

/// The file the variable `variable` names, when it is set and not empty; `Err` says that it
/// names something that is not a file.
pub(crate) fn named_file(variable: &str) -> Option<Result<PathBuf, String>> {
    let named = PathBuf::from(std::env::var_os(variable).filter(|value| !value.is_empty())?);
    Some(if named.is_file() {
        Ok(named)
    } else {
        Err(format!(
            "{variable} is set to {}, which is not a file",
            named.display()
        ))
    })
}

fn on_path(path: &OsStr, name: &str) -> Option<PathBuf> {
    std::env::split_paths(path)
        .map(|folder| folder.join(name))
        .find(|candidate| is_executable(candidate))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    path.metadata()
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

/// The folder `path` is really in (links resolved): what a containment launcher must let a
/// process read to run it.
pub fn real_folder(path: &Path) -> Option<PathBuf> {
    path.canonicalize().ok()?.parent().map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_program_says_what_to_install() {
        let err = find_program(
            "Nothing",
            "VIGA_TEST_NO_SUCH_VARIABLE",
            &["viga-no-such-program"],
            "install the nothing package",
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("viga-no-such-program"), "{text}");
        assert!(text.contains("install the nothing package"), "{text}");
        assert!(find_program("a shell", "VIGA_TEST_NO_SUCH_VARIABLE", &["sh"], "").is_ok());
    }
}
