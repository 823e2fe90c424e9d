//! Finding what slides need: a Python with python-pptx (the project venv that `cargo xtask
//! setup` makes, or `VIGA_PPTX_PYTHON`) and LibreOffice (`VIGA_SOFFICE`, else `soffice` or
//! `libreoffice` on `PATH`), whose program folder must hold LibreOfficeKit.

use std::path::{Path, PathBuf};

use crate::blender::{VENV_DIR, venv_python};
use crate::{NotFound, find_program, workspace_root};

/// Names a Python that has python-pptx, instead of the project venv.
pub const PYTHON_ENV: &str = "VIGA_PPTX_PYTHON";
/// Names LibreOffice's `soffice`, instead of looking on `PATH`.
pub const SOFFICE_ENV: &str = "VIGA_SOFFICE";
/// The python-pptx release `cargo xtask setup` installs into the venv.
pub const PPTX_REQUIREMENT: &str = "python-pptx==1.0.2";
/// What to install on Debian or Ubuntu.
pub const OFFICE_PACKAGES: &str = "libreoffice-impress fonts-dejavu-core";

/// The programs a slide worker runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlideTools {
    /// Runs python-pptx programs and the warm renderer.
    pub python: PathBuf,
    /// LibreOffice's program folder (`…/libreoffice/program`), where LibreOfficeKit lives.
    pub office_program_dir: PathBuf,
}

impl SlideTools {
    /// Finds both, or says what is missing and what to do.
    pub fn locate() -> Result<Self, NotFound> {
        Ok(Self {
            python: find_python()?,
            office_program_dir: find_office()?,
        })
    }
}

/// `VIGA_PPTX_PYTHON`, else the venv at the root of the checkout viga was built in (never
/// one found from the current folder, like the Blender venv).
pub fn find_python() -> Result<PathBuf, NotFound> {
    let not_found = |detail: String| NotFound {
        what: "a Python with python-pptx".to_owned(),
        detail,
        install: format!(
            "run `cargo xtask setup` in the viga checkout (it installs {PPTX_REQUIREMENT} into {VENV_DIR}), or set {PYTHON_ENV}=/path/to/python"
        ),
    };
    if let Some(named) = crate::program::named_file(PYTHON_ENV) {
        return named.map_err(not_found);
    }
    let python = venv_python(&workspace_root().join(VENV_DIR));
    if python.is_file() {
        Ok(python)
    } else {
        Err(not_found(format!("{} does not exist", python.display())))
    }
}

/// LibreOffice's program folder, from `soffice` with its links resolved.
pub fn find_office() -> Result<PathBuf, NotFound> {
    let install = format!(
        "install LibreOffice: Debian/Ubuntu `sudo apt-get install --no-install-recommends {OFFICE_PACKAGES}`; or set {SOFFICE_ENV}=/path/to/soffice"
    );
    let soffice = find_program(
        "LibreOffice",
        SOFFICE_ENV,
        &["soffice", "libreoffice"],
        &install,
    )?;
    let program_dir = soffice
        .canonicalize()
        .ok()
        .and_then(|real| real.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    let has_kit = ["libsofficeapp.so", "libmergedlo.so"]
        .iter()
        .any(|library| program_dir.join(library).is_file());
    if has_kit {
        Ok(program_dir)
    } else {
        Err(NotFound {
            what: "LibreOfficeKit".to_owned(),
            detail: format!(
                "{} (from {}) has neither libsofficeapp.so nor libmergedlo.so",
                program_dir.display(),
                soffice.display()
            ),
            install,
        })
    }
}
