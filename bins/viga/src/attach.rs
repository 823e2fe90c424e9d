//! `--attach`: driving the Blender a person has open, through the connection file the viga
//! add-on writes there, and `viga addon build|host`.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use clap::{Args, Subcommand};
use viga_blender::locate;

#[derive(Debug, Clone, Default, Args)]
pub struct AttachArgs {
    /// Work with the Blender you have open (the viga add-on must be enabled there) instead
    /// of a Blender of viga's own.
    #[arg(long)]
    pub attach: bool,
    /// The connection file of the Blender to attach to, when several run (implies --attach).
    #[arg(long, value_name = "FILE")]
    pub connection: Option<PathBuf>,
}

impl AttachArgs {
    pub fn wanted(&self) -> bool {
        self.attach || self.connection.is_some()
    }
}

#[derive(Debug, Subcommand)]
pub enum AddonCommand {
    /// Write the Blender extension zip (install it with Edit > Preferences > Get Extensions >
    /// Install from Disk, or `blender --command extension install-file -r user_default ZIP`).
    Build {
        /// The folder to write viga_blender-<version>.zip into.
        #[arg(long, default_value = ".")]
        out: PathBuf,
    },
    /// Run a headless Blender with the extension installed from its zip and its timers
    /// driven, as a stand-in for a person's Blender (tests, CI); runs until killed.
    Host {
        /// The extension zip (default: build one).
        #[arg(long)]
        zip: Option<PathBuf>,
        /// A .blend to open first.
        #[arg(long)]
        blend: Option<PathBuf>,
        /// Blender's user folder for the host (default: a fresh temporary one, so your own
        /// Blender settings are never touched).
        #[arg(long)]
        user_dir: Option<PathBuf>,
        /// Write how long each timer callback held the main thread here, on exit (JSON).
        #[arg(long)]
        stats: Option<PathBuf>,
        /// Add-on packages to load as if they were enabled in this Blender.
        #[arg(long)]
        addons: Option<PathBuf>,
        /// Connect the add-on to this viga server (ws:// or wss://) as --username, with the
        /// token in VIGA_SERVER_TOKEN, as a person does in the add-on's preferences.
        #[arg(long, requires = "username")]
        server: Option<String>,
        #[arg(long, requires = "server")]
        username: Option<String>,
        /// The only folder the server's add-on commands may name (default: a temporary one).
        #[arg(long, requires = "server")]
        server_files: Option<PathBuf>,
    },
}

/// `viga addon host`'s options besides the zip.
#[derive(Debug)]
struct HostArgs {
    blend: Option<PathBuf>,
    user_dir: Option<PathBuf>,
    stats: Option<PathBuf>,
    addons: Option<PathBuf>,
    server: Option<(String, String)>,
    server_files: Option<PathBuf>,
}

pub async fn addon(command: AddonCommand) -> Result<std::process::ExitCode> {
    match command {
        AddonCommand::Build { out } => {
            let path = viga_blender::addon::build_zip(&out)?;
            println!("{}", path.display());
            println!(
                "install it in Blender 4.2 or newer: Edit > Preferences > Get Extensions > Install from Disk"
            );
            // The zip names no path of this machine, so the add-on looks for viga on the PATH
            // Blender starts with; a person who never put viga there needs this one's path.
            if let Ok(viga) = std::env::current_exe() {
                println!(
                    "the add-on starts the viga on Blender's PATH, or the one set in Preferences > Add-ons > viga > viga executable (this one is {})",
                    viga.display()
                );
            }
            Ok(std::process::ExitCode::SUCCESS)
        }
        AddonCommand::Host {
            zip,
            blend,
            user_dir,
            stats,
            addons,
            server,
            username,
            server_files,
        } => {
            let args = HostArgs {
                blend,
                user_dir,
                stats,
                addons,
                server: server.zip(username),
                server_files,
            };
            host(zip, args).await
        }
    }
}

async fn host(zip: Option<PathBuf>, args: HostArgs) -> Result<std::process::ExitCode> {
    let scratch = tempfile::Builder::new()
        .prefix("viga-addon-host-")
        .tempdir()
        .context("cannot make a temporary folder for the host")?;
    let zip = match zip {
        Some(zip) => zip,
        None => viga_blender::addon::build_zip(scratch.path())?,
    };
    let server = match args.server {
        Some((url, username)) => {
            let token =
                std::env::var(viga_blender::addon::SERVER_TOKEN_ENV).with_context(|| {
                    format!(
                        "--server needs your token in {}",
                        viga_blender::addon::SERVER_TOKEN_ENV
                    )
                })?;
            Some(viga_blender::addon::ServerLogin {
                url,
                username,
                token,
                config_dir: scratch.path().join("config"),
                files: args
                    .server_files
                    .unwrap_or_else(|| scratch.path().join("server-files")),
            })
        }
        None => None,
    };
    let options = viga_blender::addon::HostOptions {
        user_dir: args
            .user_dir
            .unwrap_or_else(|| scratch.path().join("blender-user")),
        blend: args.blend,
        stats: args.stats,
        connection_dir: None,
        addons: args.addons,
        server,
    };
    let mut command = viga_blender::addon::host_command(
        &locate().map_err(viga_app::AppError::from)?,
        &zip,
        &options,
    )?;
    let mut child = command
        .kill_on_drop(true)
        .spawn()
        .context("cannot start the headless Blender")?;
    let mut stops = crate::progress::StopSignals::listen();
    let status = tokio::select! {
        status = child.wait() => status.context("the host could not be waited for")?,
        _ = stops.next() => stop_host(&mut child).await?,
    };
    Ok(if status.success() {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::from(1)
    })
}

/// Stops the headless host on SIGINT or SIGTERM to viga (sent to viga alone, as a batch
/// system or `kill` does, the host would not hear it): it disables the add-on, which removes
/// its connection file, and quits.
async fn stop_host(child: &mut tokio::process::Child) -> Result<std::process::ExitStatus> {
    if let Some(pid) = child.id() {
        viga_blender::addon::ask_host_to_stop(pid);
    }
    child
        .wait()
        .await
        .context("the host could not be waited for")
}
