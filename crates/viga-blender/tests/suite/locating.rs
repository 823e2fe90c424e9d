use std::ffi::OsString;
use std::path::PathBuf;

use viga_blender::BlenderLauncher;
use viga_blender::locate::{
    BLENDER_ENV, LocateError, PYTHON_ENV, VENV_DIR, locate_in, venv_python,
};

fn env_of<'a>(pairs: &'a [(&'static str, PathBuf)]) -> impl Fn(&str) -> Option<OsString> + 'a {
    move |name| {
        pairs
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.clone().into_os_string())
    }
}

#[test]
fn blender_binary_from_env_wins() {
    let dir = tempfile::tempdir().unwrap();
    let blender = dir.path().join("blender");
    std::fs::write(&blender, "").unwrap();
    let python = dir.path().join("python");
    std::fs::write(&python, "").unwrap();
    let env = [(BLENDER_ENV, blender.clone()), (PYTHON_ENV, python)];
    assert_eq!(
        locate_in(dir.path(), env_of(&env)).unwrap(),
        BlenderLauncher::Binary { blender }
    );
}

#[test]
fn a_missing_path_in_env_is_an_error_naming_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let env = [(BLENDER_ENV, dir.path().join("nope"))];
    let err = locate_in(dir.path(), env_of(&env)).unwrap_err();
    assert!(matches!(
        err,
        LocateError::MissingFromEnv {
            variable: BLENDER_ENV,
            ..
        }
    ));
    assert!(err.to_string().contains("VIGA_BLENDER"), "{err}");
}

#[test]
fn the_venv_is_found_at_the_workspace_root_only() {
    let root = tempfile::tempdir().unwrap();
    let python = venv_python(&root.path().join(VENV_DIR));
    std::fs::create_dir_all(python.parent().unwrap()).unwrap();
    std::fs::write(&python, "").unwrap();
    assert_eq!(
        locate_in(root.path(), |_| None).unwrap(),
        BlenderLauncher::PythonModule { python }
    );
    // One planted in a parent folder (a shared /tmp) is never used.
    let checkout = root.path().join("a/b/checkout");
    std::fs::create_dir_all(&checkout).unwrap();
    assert!(matches!(
        locate_in(&checkout, |_| None),
        Err(LocateError::NotFound { .. })
    ));
}

#[test]
fn nothing_found_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let err = locate_in(dir.path(), |_| None).unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("cargo xtask setup") && message.contains("VIGA_BLENDER"),
        "{message}"
    );
}

/// A contained Blender must read its install: a venv and the Python it was made from,
/// wherever that really is (a pyenv in the home folder), or a Blender binary's own folder.
#[cfg(unix)]
#[test]
fn the_install_folders_of_a_venv_include_the_python_it_was_made_from() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let prefix = root.join("pyenv/versions/3.11.7");
    std::fs::create_dir_all(prefix.join("bin")).unwrap();
    std::fs::write(prefix.join("bin/python3.11"), "").unwrap();
    let venv = root.join("checkout/.viga/venv");
    std::fs::create_dir_all(venv.join("bin")).unwrap();
    std::fs::write(venv.join("pyvenv.cfg"), "home = elsewhere\n").unwrap();
    std::os::unix::fs::symlink(prefix.join("bin/python3.11"), venv.join("bin/python")).unwrap();
    let launcher = BlenderLauncher::PythonModule {
        python: venv.join("bin/python"),
    };
    assert_eq!(launcher.install_folders(), vec![venv, prefix]);
    let binary = BlenderLauncher::Binary {
        blender: root.join("blender-5.0/blender"),
    };
    assert_eq!(binary.install_folders(), vec![root.join("blender-5.0")]);
}
