//! `viga key set|status|delete VARIABLE`: API keys kept once, in the keyring or a private
//! file (viga-keys), for people who cannot set environment variables (Blender started from a
//! desktop launcher). A key is read from standard input, never from a flag, and never
//! printed. Providers read a key from its environment variable first and from the store when
//! the variable is not set (`viga_app::provider::build`).

use std::io::{IsTerminal as _, Read as _};
use std::process::ExitCode;

use anyhow::{Context as _, Result};
use clap::Subcommand;
use viga_keys::KeyStore;

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Keep the key for VARIABLE (e.g. OPENAI_API_KEY), read from standard input: pipe it in
    /// or paste it and press Enter.
    Set { variable: String },
    /// Say whether a key is kept for VARIABLE, and where (never the key); exit code 1 when
    /// none is.
    Status { variable: String },
    /// Forget the key kept for VARIABLE.
    Delete { variable: String },
}

pub fn run(command: &KeyCommand) -> Result<ExitCode> {
    let store = KeyStore::from_environment()?;
    match command {
        KeyCommand::Set { variable } => {
            if std::io::stdin().is_terminal() {
                eprintln!(
                    "Paste the key for {variable} and press Enter (it shows as you type; `viga key set {variable} < file` does not):"
                );
            }
            let mut key = String::new();
            if std::io::stdin().is_terminal() {
                std::io::stdin().read_line(&mut key)?;
            } else {
                std::io::stdin()
                    .take(64 * 1024)
                    .read_to_string(&mut key)
                    .context("cannot read the key from standard input")?;
            }
            let place = store.set(variable, &key)?;
            println!("{variable}: kept in {place}");
        }
        KeyCommand::Status { variable } => {
            let from_environment = std::env::var(variable).is_ok_and(|v| !v.trim().is_empty());
            match store.get(variable)? {
                Some((_, place)) => {
                    println!("{variable}: kept in {place}");
                    if from_environment {
                        println!("{variable} is also set in the environment, which wins");
                    }
                }
                None if from_environment => {
                    println!("{variable}: not kept; it is set in the environment");
                    return Ok(ExitCode::from(1));
                }
                None => {
                    println!("{variable}: not kept, and not set in the environment");
                    return Ok(ExitCode::from(1));
                }
            }
        }
        KeyCommand::Delete { variable } => {
            let removed = store.delete(variable)?;
            if removed.is_empty() {
                println!("{variable}: no key was kept");
            }
            for place in removed {
                println!("{variable}: removed from {place}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
