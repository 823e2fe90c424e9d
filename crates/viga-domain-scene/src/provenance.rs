//! Where a scene run's objects came from, for its report: the objects the base scene was
//! initialised with (`init.json`) and every asset `get_better_assets` found or generated
//! (`assets/requests.jsonl`), each with its source, its licence where known and, for a
//! generated one, what it cost.

use std::fmt::Write as _;
use std::path::Path;

use viga_skills::assets::{AssetRecord, read_asset_records};

use super::init::{InitRecord, read_init_record};
use viga_core::report::escape;

/// The report's "Assets" section, or nothing when the run neither was initialised nor asked
/// for assets.
pub(crate) fn assets_section(run_folder: &Path) -> String {
    let init = read_init_record(run_folder);
    let requests = read_asset_records(run_folder);
    if init.is_none() && requests.is_empty() {
        return String::new();
    }
    let mut html = String::from("<section><h2>Assets</h2>");
    if let Some(init) = &init {
        init_table(&mut html, init);
    }
    if !requests.is_empty() {
        requests_table(&mut html, &requests);
    }
    html.push_str("</section>");
    html
}

fn init_table(html: &mut String, init: &InitRecord) {
    let _ = write!(
        html,
        "<h3>Initialised from the target pictures</h3><p>by the reconstruction service at {} in {:.0} s; the base scene is <code>init/init.blend</code>, the service's answer <code>init.json</code>.</p>\
         <table class=\"calls\"><tr><th>object</th><th>in the scene as</th><th>source</th><th>confidence</th><th>mesh</th></tr>",
        escape(&init.service),
        init.service_seconds
    );
    for object in &init.objects {
        let _ = write!(
            html,
            "<tr><td>{}</td><td>{}</td><td>init</td><td>{:.2}</td><td>{}</td></tr>",
            escape(&object.name),
            escape(&object.scene_name),
            object.confidence,
            escape(&object.mesh.display().to_string())
        );
    }
    for refused in &init.refused {
        let _ = write!(
            html,
            "<tr class=\"error\"><td>{}</td><td colspan=\"4\">not imported: {}</td></tr>",
            escape(&refused.name),
            escape(&refused.reason)
        );
    }
    html.push_str("</table>");
}

fn requests_table(html: &mut String, requests: &[AssetRecord]) {
    let credits: f64 = requests
        .iter()
        .flat_map(|r| &r.hits)
        .filter_map(|hit| hit.generation.as_ref())
        .filter(|generation| !generation.cached)
        .map(|generation| generation.credits)
        .sum();
    let _ = write!(
        html,
        "<h3>get_better_assets</h3><p>{} requests; generated assets cost {credits} credits in all (recorded in <code>assets/requests.jsonl</code>).</p>\
         <table class=\"calls\"><tr><th>request</th><th>asset</th><th>source</th><th>licence</th><th>cost</th></tr>",
        requests.len()
    );
    for record in requests {
        let request = escape(&record.request.query);
        if let Some(error) = &record.error {
            let _ = write!(
                html,
                "<tr class=\"error\"><td>{request}</td><td colspan=\"4\">{}</td></tr>",
                escape(error)
            );
            continue;
        }
        if record.hits.is_empty() {
            let _ = write!(
                html,
                "<tr><td>{request}</td><td colspan=\"4\">nothing found</td></tr>"
            );
        }
        for hit in &record.hits {
            let cost = hit
                .generation
                .as_ref()
                .map(|generation| generation.summary())
                .unwrap_or_else(|| "free".to_owned());
            let _ = write!(
                html,
                "<tr><td>{request}</td><td>{}<br><small>{}</small></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&hit.name),
                escape(&hit.path.display().to_string()),
                hit.origin.as_str(),
                escape(hit.licence.as_deref().unwrap_or("not known")),
                escape(&cost)
            );
        }
    }
    html.push_str("</table>");
}
