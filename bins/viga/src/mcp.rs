//! `viga mcp`: one warm Blender served over MCP on stdin/stdout. Everything else this
//! process says goes to stderr, because stdout is the protocol channel.
//! `viga gateway`: add-on commands over WebSocket, one Blender per user.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context as _, Result};
use viga_app::serve::{McpBlender, McpSettings};
use viga_blender::locate;
use viga_protocol::bridge::RenderSpec;
use viga_serve::ws::{Gateway, GatewayConfig};

use viga_blender::ContainedWorkers;

pub async fn serve(
    attach: &crate::attach::AttachArgs,
    trusted: bool,
    live: bool,
    addons: Option<&Path>,
    resolution: &str,
    contained: &ContainedWorkers,
) -> Result<std::process::ExitCode> {
    let (width, height) = crate::args::parse_resolution(resolution)?;
    if trusted && !attach.wanted() {
        anyhow::bail!(
            "--trusted lets the MCP client's programs run in your own Blender and needs --attach; without --attach they run in viga's contained Blender"
        );
    }
    // Every program the client sends would run in the person's Blender, uncontained, as
    // them: only when they said so. (A copy would not do: the client edits the scene the
    // person watches, one program after another.)
    if attach.wanted() && !trusted {
        anyhow::bail!(
            "viga mcp --attach runs every program the MCP client sends in your own Blender, uncontained: as you, with your files, your network and the keys in Blender's environment. Add --trusted to allow that for this server, or drop --attach to have them run in viga's contained Blender"
        );
    }
    let blender = if attach.wanted() {
        McpBlender::Trusted(viga_app::attach::attach(attach.connection.as_deref()).await?)
    } else {
        McpBlender::Own { live }
    };
    let settings = McpSettings {
        blender,
        addons: addons.map(Path::to_path_buf),
        render: (width, height),
    };
    let (server, ready) = viga_app::serve::mcp_server(settings, contained, &OnStderr).await?;
    eprintln!("viga mcp: {ready}");
    server.serve_stdio().await?;
    Ok(std::process::ExitCode::SUCCESS)
}

/// Remarks of `viga mcp`, all on stderr: stdout is the protocol channel.
struct OnStderr;

impl viga_app::Tell for OnStderr {
    fn say(&self, line: &str) {
        eprintln!("viga mcp: {}", viga_io::terminal::terminal_safe(line));
    }
    fn warn(&self, line: &str) {
        eprintln!("viga mcp: {}", viga_io::terminal::terminal_safe(line));
    }
}

pub async fn gateway(
    args: crate::args::GatewayArgs,
    contained: &ContainedWorkers,
) -> Result<std::process::ExitCode> {
    use viga_serve::ws::{BlenderSessions, Credentials, ListenSecurity, TlsFiles};
    anyhow::ensure!(
        args.max_sessions >= 1
            && args.max_connections >= 1
            && args.max_waiting_connections >= 1
            && args.waiting_per_address >= 1,
        "--max-sessions, --max-connections, --max-waiting-connections and --waiting-per-address must be at least 1"
    );
    let credentials = Credentials::from_environment(args.users.as_deref())?;
    let setup_code = match &args.setup {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?,
        ),
        None => None,
    };
    let chat = if args.wants_agent() {
        Some(chat_settings(&args)?)
    } else {
        None
    };
    let users = credentials.user_names().len();
    let config = gateway_config(&args, credentials, chat);
    let security = ListenSecurity {
        tls: args
            .tls_cert
            .clone()
            .zip(args.tls_key.clone())
            .map(|(certificate, key)| TlsFiles { certificate, key }),
        plain_on_public_address: args.insecure_plain_on_public_address,
    };
    // Each user's Blender runs that user's add-on commands: contained, reading the
    // add-ons and writing only the user's own folder.
    let sessions = BlenderSessions {
        launcher: locate().map_err(viga_app::AppError::from)?,
        addons_folder: args.addons.clone(),
        setup_code,
        contained: contained.clone(),
    };
    let agent = config
        .chat
        .as_ref()
        .map(|chat| format!("the agent ({})", chat.provider.model()))
        .unwrap_or_else(|| "no agent (give --provider and --model for one)".to_owned());
    let gateway = Gateway::new(config, Arc::new(sessions))?;
    let listener = Gateway::bind(args.listen, &security).await?;
    let address = listener.local_addr()?;
    let page = if listener.scheme() == "wss" {
        "https"
    } else {
        "http"
    };
    eprintln!(
        "viga gateway: listening on {}://{address} for {users} user(s); at most {} connections at once (a person with a page and a dialled-in Blender holds two: about {} people), and {} Blenders of the server's; chat page {page}://{address}/ with {agent}; Blenders dial in at {}://{address}/blender",
        listener.scheme(),
        args.max_connections,
        args.max_connections / 2,
        args.max_sessions,
        listener.scheme(),
    );
    serve_until_stopped(gateway, listener).await;
    Ok(std::process::ExitCode::SUCCESS)
}

/// Serves until SIGINT or SIGTERM, then stops: the requests in flight first (each page is
/// told), then every page, then the server's Blenders.
async fn serve_until_stopped(gateway: Arc<Gateway>, listener: viga_serve::ws::Listener) {
    let mut stops = crate::progress::StopSignals::listen();
    tokio::select! {
        () = Arc::clone(&gateway).serve(listener) => {}
        _ = stops.next() => {}
    }
    eprintln!(
        "viga gateway: stopping: requests in flight are cancelled (up to {} s to end) and every page is told",
        STOP_GRACE.as_secs()
    );
    let left = gateway.shut_down(STOP_GRACE).await;
    if left > 0 {
        eprintln!(
            "viga gateway: {left} request(s) were still waiting on a command in someone's Blender; they were ended as the server stopped"
        );
    }
    eprintln!("viga gateway: stopping every user's Blender");
    gateway.stop_sessions().await;
}

/// How long requests in flight get to end when the gateway stops.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// The gateway's settings from its flags.
fn gateway_config(
    args: &crate::args::GatewayArgs,
    credentials: viga_serve::ws::Credentials,
    chat: Option<viga_serve::ws::ChatSettings>,
) -> GatewayConfig {
    use viga_serve::ws::{DialLimits, GatewayLimits};
    GatewayConfig {
        credentials,
        limits: GatewayLimits {
            max_sessions: args.max_sessions,
            session_idle: std::time::Duration::from_secs(args.session_idle),
            max_connections: args.max_connections,
            max_waiting: args.max_waiting_connections,
            waiting_per_address: args.waiting_per_address,
            connection_idle: std::time::Duration::from_secs(args.connection_idle),
            ..GatewayLimits::default()
        },
        files_root: args.files_root.clone(),
        keep_requests: (args.keep_requests_days > 0)
            .then(|| std::time::Duration::from_secs(args.keep_requests_days * 24 * 60 * 60)),
        dial: DialLimits {
            reconnect_grace: std::time::Duration::from_secs(args.reconnect_grace),
            ..DialLimits::default()
        },
        chat,
    }
}

/// The agent behind the chat page, from the provider flags.
fn chat_settings(args: &crate::args::GatewayArgs) -> Result<viga_serve::ws::ChatSettings> {
    use viga_provider::ProviderKind;
    let settings = viga_app::provider::settings(&args.provider.choice(), None)?;
    let provider = viga_app::provider::build(&settings)?;
    let (width, height) = crate::args::parse_resolution(&args.resolution)?;
    anyhow::ensure!(args.max_steps >= 1, "--max-steps must be at least 1");
    let model_sees = match args.model_sees {
        crate::args::ModelSees::Yes => true,
        crate::args::ModelSees::No => false,
        crate::args::ModelSees::Auto => matches!(
            settings.kind,
            ProviderKind::OpenAi | ProviderKind::Anthropic | ProviderKind::Gemini
        ),
    };
    Ok(viga_serve::ws::ChatSettings {
        provider,
        max_steps: args.max_steps,
        // Cycles at few samples, as viga run's verifier: Workbench shows a material's
        // viewport colour, so a scene painted red through its nodes would look grey.
        render: RenderSpec {
            engine: viga_protocol::bridge::RenderEngine::Cycles,
            width,
            height,
            samples: Some(viga_domain_scene::VERIFIER_CYCLES_SAMPLES),
        },
        model_sees,
        max_tokens: 4096,
        remembered_turns: args.remembered_turns,
        server_blenders: !args.no_server_blenders,
        server_addons: args.addons.clone(),
    })
}
