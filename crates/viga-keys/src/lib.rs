//! # viga-keys
//!
//! API keys a desktop user gives once (the Blender add-on's preferences, or `viga key set`),
//! kept where only they can read them, and looked up by the name of the environment variable
//! that would otherwise hold them (`OPENAI_API_KEY`). A key set in the environment wins;
//! the store is asked only when the variable is not set.
//!
//! **Where a key is kept** ([`KeyStore::from_environment`], `VIGA_KEY_STORE`):
//! - `keyring`: the operating system's keyring, through its own command-line tool, so viga
//!   links no keyring library: the Secret Service (GNOME Keyring, KWallet) through
//!   `secret-tool` on Linux and the BSDs, the login Keychain through `security` on macOS.
//!   The key goes to the tool on its standard input, never on its command line.
//! - `file`: one file per key, mode 0600, in a folder of mode 0700 that belongs to the user
//!   (`VIGA_KEY_DIR`, else `$XDG_CONFIG_HOME/viga/keys` or `~/.config/viga/keys`; on Windows
//!   `%APPDATA%\viga\keys`, private to the user by the profile's permissions). A folder that
//!   is a link, belongs to someone else or others may enter is refused.
//! - `auto` (the default): the keyring where its tool is installed and answers, else the
//!   file. Windows has no keyring backend: its Credential Manager's `cmdkey` cannot read a
//!   secret back.
//!
//! **Must not:** print, log or pass a key on a command line; depend on any other viga crate.

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

mod file;
mod keyring;

use std::path::PathBuf;

pub use file::FileStore;
pub use keyring::{Keyring, KeyringTool};

/// Where a key is kept, as said to the user (never the key itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// The operating system's keyring, by name ("the Secret Service", "the macOS Keychain").
    Keyring(&'static str),
    /// A file only the user can read.
    File(PathBuf),
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Keyring(name) => write!(f, "{name}"),
            Self::File(path) => write!(f, "{} (readable only by you)", path.display()),
        }
    }
}

/// Which store `VIGA_KEY_STORE` chooses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StoreChoice {
    /// The keyring where it answers, else the file.
    #[default]
    Auto,
    Keyring,
    File,
}

impl std::str::FromStr for StoreChoice {
    type Err = KeyError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(Self::Auto),
            "keyring" => Ok(Self::Keyring),
            "file" => Ok(Self::File),
            other => Err(KeyError::Setting(format!(
                "VIGA_KEY_STORE={other:?} is not a key store; use auto, keyring or file"
            ))),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The variable name a key is stored under is not one.
    #[error(
        "{0:?} is not a variable name (letters, digits and _, not starting with a digit, at most 128 characters)"
    )]
    Name(String),
    /// The key has characters no API key has.
    #[error("{0}")]
    Secret(&'static str),
    /// A setting (`VIGA_KEY_STORE`, `VIGA_KEY_DIR`) that cannot work.
    #[error("{0}")]
    Setting(String),
    /// The keyring's tool failed.
    #[error("{tool} failed: {message}")]
    Keyring { tool: String, message: String },
    /// The key file or its folder cannot be used.
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
}

/// The longest key kept: API keys are a few hundred characters at most.
const MAX_SECRET_CHARS: usize = 4096;

/// Checks a variable name: the key's name in the store, and a file name in the folder.
fn check_name(name: &str) -> Result<(), KeyError> {
    let mut chars = name.chars();
    let first_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_');
    if first_ok && name.len() <= 128 && chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(())
    } else {
        Err(KeyError::Name(name.to_owned()))
    }
}

/// The key as it will be kept: surrounding white space (a pasted newline) left out.
fn clean_secret(secret: &str) -> Result<&str, KeyError> {
    let secret = secret.trim();
    if secret.is_empty() {
        return Err(KeyError::Secret("the key is empty"));
    }
    if secret.chars().count() > MAX_SECRET_CHARS {
        return Err(KeyError::Secret(
            "the key is longer than any API key (4096 characters at most)",
        ));
    }
    // Printable ASCII without spaces or quotes: every provider's keys fit, and so it passes
    // through a keyring tool's input unchanged.
    if !secret
        .chars()
        .all(|c| c.is_ascii_graphic() && !matches!(c, '"' | '\'' | '\\'))
    {
        return Err(KeyError::Secret(
            "the key has spaces, quotes or characters no API key has; copy it again from the provider",
        ));
    }
    Ok(secret)
}

/// The keyring and the file, and which one new keys go to.
#[derive(Debug, Clone)]
pub struct KeyStore {
    choice: StoreChoice,
    keyring: Option<Keyring>,
    file: FileStore,
}

impl KeyStore {
    pub fn new(choice: StoreChoice, keyring: Option<Keyring>, file: FileStore) -> Self {
        Self {
            choice,
            keyring,
            file,
        }
    }

    /// The store the environment chooses: `VIGA_KEY_STORE` (auto, keyring or file),
    /// `VIGA_KEY_DIR` for the file's folder, and the keyring tool found on `PATH`.
    pub fn from_environment() -> Result<Self, KeyError> {
        let choice: StoreChoice = std::env::var("VIGA_KEY_STORE")
            .unwrap_or_default()
            .parse()?;
        let file = FileStore::new(file::default_dir()?);
        let keyring = match choice {
            StoreChoice::File => None,
            StoreChoice::Auto | StoreChoice::Keyring => Keyring::find(),
        };
        if choice == StoreChoice::Keyring && keyring.is_none() {
            return Err(KeyError::Setting(format!(
                "VIGA_KEY_STORE=keyring, but {} was not found on PATH; install it or use VIGA_KEY_STORE=file",
                keyring::tool_for_this_system()
                    .map(KeyringTool::program)
                    .unwrap_or("a keyring tool (none is supported on this system)")
            )));
        }
        Ok(Self::new(choice, keyring, file))
    }

    /// Keeps `secret` under `name`: in the keyring when there is one (with `auto`, the file
    /// when the keyring fails, say with no Secret Service running), else in the file. A key
    /// of that name kept in the other place is removed, so one key is kept once.
    pub fn set(&self, name: &str, secret: &str) -> Result<Place, KeyError> {
        check_name(name)?;
        let secret = clean_secret(secret)?;
        if let Some(keyring) = &self.keyring {
            match keyring.set(name, secret) {
                Ok(place) => {
                    self.file.delete(name)?;
                    return Ok(place);
                }
                Err(err) if self.choice == StoreChoice::Keyring => return Err(err),
                Err(_) => {}
            }
        }
        let place = self.file.set(name, secret)?;
        if let Some(keyring) = &self.keyring {
            // Best effort: a keyring that could not store it may not answer this either.
            let _ = keyring.delete(name);
        }
        Ok(place)
    }

    /// The key kept under `name` and where it was found; `None` when none is kept.
    pub fn get(&self, name: &str) -> Result<Option<(String, Place)>, KeyError> {
        check_name(name)?;
        if let Some(keyring) = &self.keyring {
            match keyring.get(name) {
                Ok(Some(secret)) => return Ok(Some(secret)),
                Ok(None) => {}
                Err(err) if self.choice == StoreChoice::Keyring => return Err(err),
                Err(_) => {}
            }
        }
        self.file.get(name)
    }

    /// Removes the key kept under `name` wherever it is; the places it was removed from.
    pub fn delete(&self, name: &str) -> Result<Vec<Place>, KeyError> {
        check_name(name)?;
        let mut removed = Vec::new();
        if let Some(keyring) = &self.keyring
            && keyring.get(name).ok().flatten().is_some()
        {
            removed.push(keyring.delete(name)?);
        }
        if let Some(place) = self.file.delete(name)? {
            removed.push(place);
        }
        Ok(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_keys_are_checked() {
        assert!(check_name("OPENAI_API_KEY").is_ok());
        for bad in ["", "1KEY", "../KEY", "A B", "KEY/X", &"K".repeat(129)] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert_eq!(clean_secret(" sk-abc_DEF.1\n").unwrap(), "sk-abc_DEF.1");
        for bad in ["", "  ", "sk abc", "sk\"abc", "sk'x", "sk\\x", "ключ"] {
            assert!(clean_secret(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn store_choices_are_read() {
        assert_eq!("".parse::<StoreChoice>().unwrap(), StoreChoice::Auto);
        assert_eq!("File".parse::<StoreChoice>().unwrap(), StoreChoice::File);
        assert!("vault".parse::<StoreChoice>().is_err());
    }
}
