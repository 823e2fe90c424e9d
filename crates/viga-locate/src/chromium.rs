//! Finding Chromium: `VIGA_CHROMIUM`, else `chromium`, `chromium-browser` or `google-chrome`
//! on `PATH`.

use std::path::PathBuf;

use crate::{NotFound, find_program};

/// Names a Chromium (or Chrome) binary, instead of looking on `PATH`.
pub const CHROMIUM_ENV: &str = "VIGA_CHROMIUM";
/// What to install on Debian or Ubuntu.
pub const CHROMIUM_PACKAGES: &str = "chromium fonts-dejavu-core";

pub fn find_chromium() -> Result<PathBuf, NotFound> {
    find_program(
        "Chromium",
        CHROMIUM_ENV,
        &["chromium", "chromium-browser", "google-chrome"],
        &format!(
            "install Chromium: Debian/Ubuntu `sudo apt-get install --no-install-recommends {CHROMIUM_PACKAGES}`; or set {CHROMIUM_ENV}=/path/to/chromium"
        ),
    )
}
