//! The operating system's keyring, through its own command-line tool: `secret-tool` (the
//! Secret Service: GNOME Keyring, KWallet) and macOS's `security` (the login Keychain). A key
//! goes to the tool on its standard input and comes back on its standard output; it is never
//! on a command line, where every local user could read it (`/proc/<pid>/cmdline`).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{KeyError, Place};

/// The service name keys are kept under in the keyring.
const SERVICE: &str = "viga";

/// Which keyring tool speaks for the keyring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyringTool {
    /// `secret-tool`, the Secret Service's (Linux and the BSDs).
    SecretTool,
    /// `security`, the macOS Keychain's.
    MacSecurity,
}

impl KeyringTool {
    /// The program's name on `PATH`.
    pub fn program(self) -> &'static str {
        match self {
            Self::SecretTool => "secret-tool",
            Self::MacSecurity => "security",
        }
    }

    fn place(self) -> Place {
        match self {
            Self::SecretTool => Place::Keyring("the Secret Service keyring"),
            Self::MacSecurity => Place::Keyring("the macOS Keychain"),
        }
    }
}

/// The keyring tool of this operating system, if it has one viga speaks to.
pub(crate) fn tool_for_this_system() -> Option<KeyringTool> {
    if cfg!(target_os = "macos") {
        Some(KeyringTool::MacSecurity)
    } else if cfg!(windows) {
        None
    } else {
        Some(KeyringTool::SecretTool)
    }
}

/// A keyring tool at a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keyring {
    tool: KeyringTool,
    program: PathBuf,
}

/// What a tool said and how it ended.
struct Said {
    success: bool,
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Keyring {
    pub fn new(tool: KeyringTool, program: impl Into<PathBuf>) -> Self {
        Self {
            tool,
            program: program.into(),
        }
    }

    /// This system's keyring tool, when it is on `PATH`.
    pub fn find() -> Option<Self> {
        let tool = tool_for_this_system()?;
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .map(|dir| dir.join(tool.program()))
            .find(|candidate| candidate.is_file())
            .map(|program| Self::new(tool, program))
    }

    pub(crate) fn set(&self, name: &str, secret: &str) -> Result<Place, KeyError> {
        let label = format!("viga: {name}");
        let said = match self.tool {
            KeyringTool::SecretTool => self.run(
                &[
                    "store", "--label", &label, "service", SERVICE, "variable", name,
                ],
                Some(secret),
            )?,
            // `security -i` reads commands from its input; `-U` replaces an earlier key. The
            // key has no spaces or quotes (`clean_secret`), so it is one word there.
            KeyringTool::MacSecurity => self.run(
                &["-i"],
                Some(&format!(
                    "add-generic-password -U -s {SERVICE} -a {name} -l \"{label}\" -w {secret}\n"
                )),
            )?,
        };
        if !said.success
            || (self.tool == KeyringTool::MacSecurity && !said.stderr.trim().is_empty())
        {
            return Err(self.failed(&said));
        }
        Ok(self.tool.place())
    }

    pub(crate) fn get(&self, name: &str) -> Result<Option<(String, Place)>, KeyError> {
        let said = match self.tool {
            KeyringTool::SecretTool => {
                self.run(&["lookup", "service", SERVICE, "variable", name], None)?
            }
            KeyringTool::MacSecurity => self.run(
                &["find-generic-password", "-s", SERVICE, "-a", name, "-w"],
                None,
            )?,
        };
        let secret = said.stdout.trim();
        if said.success && !secret.is_empty() {
            return Ok(Some((secret.to_owned(), self.tool.place())));
        }
        // Not found: secret-tool ends with 1 and says nothing; security ends with 44.
        let not_found = match self.tool {
            KeyringTool::SecretTool => said.stderr.trim().is_empty(),
            KeyringTool::MacSecurity => said.code == Some(44),
        };
        if not_found || said.success {
            Ok(None)
        } else {
            Err(self.failed(&said))
        }
    }

    pub(crate) fn delete(&self, name: &str) -> Result<Place, KeyError> {
        let said = match self.tool {
            KeyringTool::SecretTool => {
                self.run(&["clear", "service", SERVICE, "variable", name], None)?
            }
            KeyringTool::MacSecurity => self.run(
                &["delete-generic-password", "-s", SERVICE, "-a", name],
                None,
            )?,
        };
        if said.success {
            Ok(self.tool.place())
        } else {
            Err(self.failed(&said))
        }
    }

    fn run(&self, args: &[&str], input: Option<&str>) -> Result<Said, KeyError> {
        let mut child = Command::new(&self.program)
            .args(args)
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|err| self.error(format!("cannot start it: {err}")))?;
        if let (Some(input), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin
                .write_all(input.as_bytes())
                .map_err(|err| self.error(format!("cannot hand it the key: {err}")))?;
        }
        let output = child
            .wait_with_output()
            .map_err(|err| self.error(err.to_string()))?;
        Ok(Said {
            success: output.status.success(),
            code: output.status.code(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        })
    }

    fn failed(&self, said: &Said) -> KeyError {
        let why = said.stderr.trim();
        self.error(if why.is_empty() {
            format!("it ended with {:?}", said.code)
        } else {
            why.lines().next().unwrap_or(why).to_owned()
        })
    }

    fn error(&self, message: String) -> KeyError {
        KeyError::Keyring {
            tool: self.program_name().to_owned(),
            message,
        }
    }

    fn program_name(&self) -> &str {
        Path::new(&self.program)
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or(self.tool.program())
    }
}

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used)] // test helpers may panic: that is how tests fail
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;
    use crate::{FileStore, KeyStore, StoreChoice};

    /// A stand-in `secret-tool`: keeps secrets as files in `vault`, records every command
    /// line, and fails every call when `vault/down` exists (no Secret Service running).
    fn fake_secret_tool(dir: &Path) -> PathBuf {
        let program = dir.join("secret-tool");
        let vault = dir.join("vault");
        std::fs::create_dir_all(&vault).unwrap();
        let script = format!(
            r#"#!/bin/sh
vault='{vault}'
echo "$@" >> "$vault/argv"
if [ -e "$vault/down" ]; then echo "secret-tool: Cannot autolaunch D-Bus" >&2; exit 1; fi
case "$1" in
  store) cat > "$vault/$7" ;;
  lookup) [ -e "$vault/$5" ] || exit 1; cat "$vault/$5" ;;
  clear) rm -f "$vault/$5" ;;
esac
"#,
            vault = vault.display()
        );
        std::fs::write(&program, script).unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        program
    }

    #[test]
    fn keys_go_to_the_keyring_on_standard_input_never_on_a_command_line() {
        let dir = tempfile::tempdir().unwrap();
        let keyring = Keyring::new(KeyringTool::SecretTool, fake_secret_tool(dir.path()));
        let file = FileStore::new(dir.path().join("keys"));
        let store = KeyStore::new(StoreChoice::Auto, Some(keyring), file.clone());
        let place = store.set("OPENAI_API_KEY", "sk-canary-1234").unwrap();
        assert_eq!(place, Place::Keyring("the Secret Service keyring"));
        assert_eq!(
            store.get("OPENAI_API_KEY").unwrap().unwrap(),
            ("sk-canary-1234".to_owned(), place.clone())
        );
        let argv = std::fs::read_to_string(dir.path().join("vault/argv")).unwrap();
        assert!(
            argv.contains(
                "store --label viga: OPENAI_API_KEY service viga variable OPENAI_API_KEY"
            ),
            "{argv}"
        );
        assert!(
            !argv.contains("sk-canary"),
            "the key was on a command line: {argv}"
        );
        assert!(!file.dir().join("OPENAI_API_KEY").exists());
        assert_eq!(store.delete("OPENAI_API_KEY").unwrap(), vec![place]);
        assert_eq!(store.get("OPENAI_API_KEY").unwrap(), None);
    }

    #[test]
    fn auto_falls_back_to_the_file_when_the_keyring_does_not_answer() {
        let dir = tempfile::tempdir().unwrap();
        let program = fake_secret_tool(dir.path());
        std::fs::write(dir.path().join("vault/down"), "").unwrap();
        let file = FileStore::new(dir.path().join("keys"));
        let auto = KeyStore::new(
            StoreChoice::Auto,
            Some(Keyring::new(KeyringTool::SecretTool, &program)),
            file.clone(),
        );
        let place = auto.set("ANTHROPIC_API_KEY", "sk-ant-1").unwrap();
        assert_eq!(place, Place::File(file.dir().join("ANTHROPIC_API_KEY")));
        assert_eq!(
            auto.get("ANTHROPIC_API_KEY").unwrap().unwrap().0,
            "sk-ant-1"
        );
        // Asked for the keyring alone, its failure is the answer.
        let keyring_only = KeyStore::new(
            StoreChoice::Keyring,
            Some(Keyring::new(KeyringTool::SecretTool, &program)),
            file,
        );
        let err = keyring_only
            .set("ANTHROPIC_API_KEY", "sk-ant-2")
            .unwrap_err();
        assert!(err.to_string().contains("Cannot autolaunch D-Bus"), "{err}");
    }
}
