//! `viga`: the command line. Thin: it parses arguments, builds the configuration, and hands
//! everything else to the library crates.

mod args;
mod gn;
mod mcp;
mod progress;
mod search;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use clap::Parser as _;
use viga_blender::{BlenderCommands as _, BlenderTransport, Worker, WorkerConfig, locate};
use viga_core::RunHandle;
use viga_provider::{ProviderConfig, ProviderKind, build_provider};

use crate::args::{Cli, Command, ProviderArgs, RunArgs};

/// Where a run keeps the provider settings it was started with (never a key).
const PROVIDER_FILE: &str = "provider.json";

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("VIGA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    match dispatch(cli.command).await {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::from(2)
        }
    }
}

async fn dispatch(command: Command) -> Result<std::process::ExitCode> {
    match command {
        Command::Run(args) if args.generator == args::Generator::Search => search::run(args).await,
        Command::Run(args) => run(args).await,
        Command::Eval {
            command: args::EvalCommand::Merge { into, shards },
        } => {
            let summary = viga_eval::report::merge(&shards, &into)?;
            println!("{}", viga_eval::report::markdown(&summary));
            println!("merged into {}", into.display());
            Ok(std::process::ExitCode::SUCCESS)
        }
        Command::Resume {
            run,
            provider,
            max_iterations,
        } => resume(&run, provider, max_iterations).await,
        Command::Report { run, out } => {
            let path = write_report(&run, out.as_deref())?;
            println!("report: {}", path.display());
            Ok(std::process::ExitCode::SUCCESS)
        }
        Command::Doctor => doctor().await,
        Command::Gn(args) => gn::run(args).await,
        Command::Mcp { addons, resolution } => mcp::serve(addons.as_deref(), &resolution).await,
        Command::Gateway {
            listen,
            addons,
            setup,
        } => mcp::gateway(listen, addons, setup).await,
    }
}

fn provider_config(args: &ProviderArgs, saved: Option<ProviderConfig>) -> Result<ProviderConfig> {
    if let Some(path) = &args.provider_config {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        return serde_json::from_str(&text)
            .with_context(|| format!("{} is not a valid provider config", path.display()));
    }
    let mut config = match (&args.provider, saved) {
        (None, Some(saved)) => saved,
        (kind, _) => {
            let kind = kind.as_deref().unwrap_or("openai");
            let kind: ProviderKind = serde_json::from_value(serde_json::Value::String(kind.to_owned())).map_err(|_| {
                anyhow::anyhow!("unknown provider {kind:?}; use openai, anthropic, gemini, openai_compatible or scripted")
            })?;
            ProviderConfig::new(kind, args.model.clone().unwrap_or_default())
        }
    };
    if let Some(model) = &args.model {
        config.model.clone_from(model);
    }
    if let Some(url) = &args.base_url {
        config.base_url = Some(url.clone());
    }
    if let Some(var) = &args.api_key_env {
        config.api_key_env = Some(var.clone());
    }
    if let Some(script) = &args.script {
        config.script = Some(script.clone());
    }
    Ok(config)
}

async fn start_blender() -> Result<Arc<dyn BlenderTransport>> {
    let launcher = locate()?;
    let worker = Worker::start(WorkerConfig::new(launcher)).await?;
    Ok(Arc::new(worker))
}

async fn run(args: RunArgs) -> Result<std::process::ExitCode> {
    let provider_settings = provider_config(&args.provider, None)?;
    let mut config = args.run_config()?;
    config.provider = provider_settings.kind.name().to_owned();
    let provider = build_provider(&provider_settings)?;
    // The provider's own name for its model: for a scripted run, the script's label.
    config.model = provider.model().to_owned();
    if provider_settings.kind == ProviderKind::Scripted {
        println!(
            "[scripted provider] every model answer is replayed from {}",
            display_opt(&provider_settings.script)
        );
    }
    let blender = start_blender().await?;
    let handle = viga_core::start(config.clone(), provider, blender, &args.output)?;
    let settings = serde_json::to_string_pretty(&provider_settings)?;
    std::fs::write(handle.folder().join(PROVIDER_FILE), settings)
        .context("cannot save provider.json")?;
    follow(handle, config.max_iterations).await
}

async fn resume(
    folder: &Path,
    args: ProviderArgs,
    max_iterations: Option<u32>,
) -> Result<std::process::ExitCode> {
    // Checked first, so a wrong path is reported as such, not as a provider problem.
    viga_core::RunFolder::open(folder)?;
    let saved = std::fs::read_to_string(folder.join(PROVIDER_FILE))
        .ok()
        .and_then(|text| serde_json::from_str::<ProviderConfig>(&text).ok());
    let provider_settings = provider_config(&args, saved)?;
    let provider = build_provider(&provider_settings)?;
    let blender = start_blender().await?;
    let handle = viga_core::resume(folder, provider, blender, max_iterations)?;
    let max = max_iterations.unwrap_or(0);
    follow(handle, max).await
}

/// Prints progress until the run ends; Ctrl-C cancels it cleanly.
async fn follow(mut handle: RunHandle, max_iterations: u32) -> Result<std::process::ExitCode> {
    let canceller = handle.canceller();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\nstopping after the current step (Ctrl-C)...");
            canceller.cancel();
        }
    });
    println!("run folder: {}", handle.folder().display());
    let mut printer = progress::Printer::new(max_iterations);
    while let Some(event) = handle.next_event().await {
        printer.show(&event.event);
    }
    let outcome = handle.wait().await?;
    let report = write_report(&outcome.folder, None)?;
    println!("report: {}", report.display());
    Ok(match outcome.stop {
        viga_protocol::event::StopReason::Failed { .. } => std::process::ExitCode::from(1),
        _ => std::process::ExitCode::SUCCESS,
    })
}

fn write_report(folder: &Path, out: Option<&Path>) -> Result<PathBuf> {
    let html = viga_core::report::render_html(folder)?;
    let path = out
        .map(Path::to_path_buf)
        .unwrap_or_else(|| folder.join("report.html"));
    std::fs::write(&path, html).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

async fn doctor() -> Result<std::process::ExitCode> {
    let launcher = match locate() {
        Ok(launcher) => launcher,
        Err(err) => bail!("{err}"),
    };
    println!("blender: {}", launcher.describe());
    let worker = Worker::start(WorkerConfig::new(launcher)).await?;
    let hello = worker.hello().clone();
    println!(
        "bridge: Blender {} ({} mode), capabilities: {}",
        hello.blender_version,
        hello.mode,
        hello.capabilities.join(", ")
    );
    let started = std::time::Instant::now();
    worker.ping().await?;
    println!(
        "round trip: {:.2} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    for (kind, variable) in [
        ("openai", "OPENAI_API_KEY"),
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("gemini", "GEMINI_API_KEY"),
    ] {
        let present = std::env::var_os(variable).is_some_and(|v| !v.is_empty());
        println!(
            "{kind}: {variable} {}",
            if present { "is set" } else { "is not set" }
        );
    }
    worker.shutdown().await;
    Ok(std::process::ExitCode::SUCCESS)
}

fn display_opt(path: &Option<PathBuf>) -> String {
    path.as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "(no script)".to_owned())
}
