//! `doctor`: what this machine gives viga, line by line: the Blender found and its bridge,
//! the keys each provider would find, what containment holds, the slide and page renderers,
//! and the Blenders `--attach` would reach.

use viga_blender::{
    BlenderCommands as _, BlenderTransport as _, ContainedWorkers, Worker, WorkerConfig, locate,
};

use crate::{AppError, Tell};

/// The check, said line by line through `tell` as each is known (so the Blender found is
/// said before it is started); an error when no Blender is found or it does not start.
pub async fn check(contained: &ContainedWorkers, tell: &dyn Tell) -> Result<(), AppError> {
    let launcher = locate()?;
    tell.say(&format!("blender: {}", launcher.describe()));
    let worker = Worker::start(WorkerConfig::new(launcher)).await?;
    let hello = worker.hello().clone();
    tell.say(&format!(
        "bridge: Blender {} ({} mode), capabilities: {}",
        hello.blender_version,
        hello.mode,
        hello.capabilities.join(", ")
    ));
    let started = std::time::Instant::now();
    worker.ping().await?;
    tell.say(&format!(
        "round trip: {:.2} ms",
        started.elapsed().as_secs_f64() * 1000.0
    ));
    worker.shutdown().await;
    let say_all = |lines: Vec<String>| lines.iter().for_each(|line| tell.say(line));
    say_all(keys());
    say_all(containment(contained).await);
    say_all(renderers());
    say_all(attachable().await);
    Ok(())
}

/// Whether each provider's and service's key variable is set, or kept in the key store.
fn keys() -> Vec<String> {
    let providers = viga_provider::ProviderKind::ALL
        .into_iter()
        .filter_map(|kind| Some((kind.name(), kind.default_key_env()?)));
    let services = [(
        "meshy (--assets-generate)",
        viga_skills::meshy::MESHY_KEY_ENV,
    )];
    providers
        .chain(services)
        .map(|(kind, variable)| {
            let present = std::env::var_os(variable).is_some_and(|v| !v.is_empty());
            let kept = viga_keys::KeyStore::from_environment()
                .and_then(|store| store.get(variable))
                .map(|found| found.map(|(_, place)| place));
            let state = match (present, kept) {
                (true, _) => "is set".to_owned(),
                (false, Ok(Some(place))) => format!("is not set; kept in {place}"),
                (false, Ok(None)) => "is not set".to_owned(),
                (false, Err(err)) => format!("is not set; the key store cannot be read: {err}"),
            };
            format!("{kind}: {variable} {state}")
        })
        .collect()
}

/// What containment holds here under the chosen policy, half by half and limit by limit.
async fn containment(contained: &ContainedWorkers) -> Vec<String> {
    let status = match contained.probe().await {
        Ok(status) => status,
        Err(err) => return vec![format!("containment: unavailable: {err}")],
    };
    let halves = if status.missing().is_empty() {
        "every half holds"
    } else {
        "NOT every half holds"
    };
    let limits = if status.missing_limits().is_empty() {
        "every limit holds"
    } else {
        "NOT every limit holds"
    };
    let mut lines = vec![format!(
        "containment ({}): {halves}; {limits}",
        status.policy
    )];
    for (half, guard) in status.halves() {
        let held = if guard.active {
            "contained"
        } else {
            "NOT contained"
        };
        lines.push(format!("  {half}: {held} ({})", guard.detail));
    }
    for (limit, guard) in status.limits.limits() {
        let shown = viga_sandbox::describe_limit(limit, guard);
        lines.push(format!("  {}: {shown}", limit.noun()));
    }
    lines
}

/// Whether what slides and pages need is there: they start through the containment
/// launcher above, under the same policy.
fn renderers() -> Vec<String> {
    let slides = match viga_slides::SlideTools::locate() {
        Ok(tools) => format!(
            "slides: python-pptx in {}, LibreOffice in {} (contained as above)",
            tools.python.display(),
            tools.office_program_dir.display()
        ),
        Err(err) => format!("slides: unavailable: {err}"),
    };
    let pages = match viga_web::locate::find_chromium() {
        Ok(chromium) => format!(
            "pages: Chromium {} (contained as above)",
            chromium.display()
        ),
        Err(err) => format!("pages: unavailable: {err}"),
    };
    vec![slides, pages]
}

/// Which running Blenders `--attach` would find, and whether they answer.
async fn attachable() -> Vec<String> {
    let (found, problems) = viga_blender::attach::discover();
    let dir = viga_blender::attach::connection_dir();
    let mut lines = Vec::new();
    if found.is_empty() && problems.is_empty() {
        lines.push(format!(
            "attach: no Blender with the viga add-on is running (looked in {})",
            dir.display()
        ));
    }
    lines.extend(
        problems
            .into_iter()
            .map(|problem| format!("attach: {problem}")),
    );
    for connection in found {
        let info = &connection.info;
        let state = if !connection.is_live() {
            "stale (its Blender is gone)".to_owned()
        } else {
            match viga_blender::attach::attach(&connection, std::time::Duration::from_secs(5)).await
            {
                Ok(client) => format!("attachable ({})", client.describe()),
                Err(err) => err.to_string(),
            }
        };
        lines.push(format!(
            "attach: Blender {} pid {} via {}: {state}",
            info.blender_version,
            info.pid,
            connection.file.display()
        ));
    }
    lines
}
