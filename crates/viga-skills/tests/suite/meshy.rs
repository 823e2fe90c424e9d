//! Meshy against a local server that replays the task objects Meshy documents
//! (`tests/fixtures/meshy/`): text-to-3D with its preview and refine tasks, image-to-3D from a
//! crop of a target picture, rigging and animation, tasks that fail or run past the deadline,
//! model URLs off Meshy's hosts, redirects, huge and hostile models, refused keys; and the
//! asset sources deciding when to generate. Never the live API.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};
use viga_protocol::message::ImageData;
use viga_skills::ToolError;
use viga_skills::assets::{
    Animation, AssetOrigin, AssetRequest, AssetSource, AssetSources, LocalAssetFolder, Reference,
    ReferencePicture, Region, RunBinding, Sourcing, read_asset_records,
};
use viga_skills::meshy::{Meshy, MeshyConfig};
use viga_testkit::http::{Reply, Request, TestServer};
use viga_testkit::mesh::{cube_glb, glb};
use viga_testkit::picture::files_under;
use viga_testkit::within;

const LIMIT: Duration = Duration::from_secs(60);
const KEY: &str = "msy-test-key-not-a-real-one";

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/meshy")
        .join(format!("{name}.json"));
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

/// What the replay answers: for each kind of task, the fixtures its successive looks return
/// (the last repeats), and what the model URL is replaced with.
#[derive(Default)]
struct Script {
    looks: HashMap<&'static str, Vec<&'static str>>,
    /// Replaces the GLB URL of every task state (`{base}` is the server).
    glb_url: Option<String>,
    /// Every request to the API is answered with this status and body instead.
    refuse: Option<(u16, &'static str)>,
    created: u32,
    kinds: HashMap<String, &'static str>,
    seen: HashMap<String, usize>,
}

struct Replay {
    server: TestServer,
    script: Arc<Mutex<Script>>,
}

impl Replay {
    fn start(looks: &[(&'static str, &[&'static str])]) -> Self {
        let script = Arc::new(Mutex::new(Script {
            looks: looks.iter().map(|(k, v)| (*k, v.to_vec())).collect(),
            ..Script::default()
        }));
        let answering = Arc::clone(&script);
        let server =
            TestServer::start(move |request| answer(&mut answering.lock().unwrap(), request))
                .unwrap();
        Self { server, script }
    }

    /// A text-to-3D replay whose preview looks are `preview` and whose refine succeeds.
    fn text_to_3d(preview: &[&'static str]) -> Self {
        Self::start(&[
            ("text_preview", preview),
            ("text_refine", &["text-to-3d-refine-succeeded"]),
        ])
    }

    fn set_looks(&self, kind: &'static str, looks: &[&'static str]) {
        self.script
            .lock()
            .unwrap()
            .looks
            .insert(kind, looks.to_vec());
    }

    /// Meshy forgets every task it made (as it does after a few days).
    fn forget_tasks(&self) {
        self.script.lock().unwrap().kinds.clear();
    }

    fn set_glb_url(&self, url: &str) {
        self.script.lock().unwrap().glb_url = Some(url.to_owned());
    }

    fn config(&self) -> MeshyConfig {
        MeshyConfig {
            api_url: format!("{}/openapi", self.server.base()),
            download_hosts: Vec::new(),
            poll_first: Duration::from_millis(5),
            poll_max: Duration::from_millis(20),
            max_model_bytes: 1 << 20,
            ..MeshyConfig::default()
        }
    }

    fn meshy(&self, config: MeshyConfig) -> Meshy {
        Meshy::with_key(config, &viga_protocol::Secret::new(KEY)).unwrap()
    }

    /// A Meshy source working for `run`.
    fn bound(&self, config: MeshyConfig, run: &RunBinding) -> Meshy {
        let meshy = self.meshy(config);
        meshy.bind_run(run);
        meshy
    }

    fn lines(&self) -> Vec<String> {
        self.server.lines()
    }

    /// The bodies of the task creations on `path`, as JSON.
    fn created(&self, path: &str) -> Vec<Value> {
        self.server
            .requests()
            .iter()
            .filter(|r| r.method == "POST" && r.path() == path)
            .map(|r| serde_json::from_slice(&r.body).unwrap())
            .collect()
    }
}

fn answer(script: &mut Script, request: &Request) -> Reply {
    let base = &request.base;
    if let Some(asset) = request.path().strip_prefix("/assets/") {
        return match asset {
            "huge.glb" => Reply::endless(),
            "away.glb" => Reply::redirect("https://elsewhere.example/model.glb"),
            "outside.glb" => Reply::bytes(
                200,
                glb(
                    r#"{"asset": {"version": "2.0"}, "images": [{"uri": "../../../../etc/hostname"}]}"#,
                    None,
                ),
            ),
            asset if asset.ends_with(".glb") => Reply::bytes(200, cube_glb(asset)),
            _ => Reply::not_found(),
        };
    }
    let Some(api) = request.path().strip_prefix("/openapi/") else {
        return Reply::not_found();
    };
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {KEY}").as_str()),
        "every API call carries the key"
    );
    if let Some((status, body)) = script.refuse {
        return Reply::json(status, body);
    }
    let parts: Vec<&str> = api.split('/').collect();
    if request.method == "POST" {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let kind = match (parts.as_slice(), body["mode"].as_str()) {
            (["v2", "text-to-3d"], Some("preview")) => "text_preview",
            (["v2", "text-to-3d"], Some("refine")) => "text_refine",
            (["v1", "image-to-3d"], _) => "image",
            (["v1", "rigging"], _) => "rigging",
            (["v1", "animations"], _) => "animation",
            _ => return Reply::json(400, r#"{"message": "Invalid request"}"#),
        };
        script.created += 1;
        let id = format!("{kind}-{}", script.created);
        script.kinds.insert(id.clone(), kind);
        return Reply::json(202, fixture("created").replace("{id}", &id));
    }
    let Some(id) = parts.last().map(|id| (*id).to_owned()) else {
        return Reply::not_found();
    };
    let Some(kind) = script.kinds.get(&id).copied() else {
        return Reply::json(404, r#"{"message": "Task not found"}"#);
    };
    let looks = &script.looks[kind];
    let seen = script.seen.entry(id.clone()).or_default();
    let name = looks[(*seen).min(looks.len() - 1)];
    *seen += 1;
    let mut text = fixture(name);
    if let Some(url) = &script.glb_url {
        text = text.replace("{base}/assets/{id}/model.glb?Expires=1692945600", url);
    }
    Reply::json(200, text.replace("{id}", &id).replace("{base}", base))
}

fn run_folder() -> (tempfile::TempDir, RunBinding) {
    let dir = tempfile::tempdir().unwrap();
    let run = RunBinding {
        folder: dir.path().to_path_buf(),
        pictures: vec![target_picture()],
    };
    (dir, run)
}

/// A 64x32 target: its left half red, its right half blue.
fn target_picture() -> ReferencePicture {
    ReferencePicture {
        label: "Camera1".to_owned(),
        image: ImageData {
            media_type: "image/png".to_owned(),
            data: viga_testkit::picture::halves_png(64, 32),
        },
    }
}

/// All of the target picture `view` (the first when `None`) as a reference.
fn whole_picture(view: Option<&str>) -> Reference {
    Reference::Image {
        region: Region {
            left: 0.0,
            top: 0.0,
            right: 1.0,
            bottom: 1.0,
        },
        view: view.map(str::to_owned),
    }
}

fn generate(words: &str) -> AssetRequest {
    AssetRequest {
        sourcing: Sourcing::Generate,
        ..AssetRequest::words(words, 1)
    }
}

fn files_in(folder: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn meshy_makes_a_textured_model_from_words_once_and_keeps_it_in_the_run_folder() {
    within(LIMIT, "the test", async {
        let replay = Replay::start(&[
            (
                "text_preview",
                &[
                    "text-to-3d-pending",
                    "text-to-3d-in-progress",
                    "text-to-3d-succeeded",
                ],
            ),
            (
                "text_refine",
                &["text-to-3d-in-progress", "text-to-3d-refine-succeeded"],
            ),
        ]);
        let (_dir, run) = run_folder();
        let meshy = replay.meshy(replay.config());
        assert!(
            replay.lines().is_empty(),
            "nothing is asked before a request"
        );
        let unbound = meshy.find(&generate("a monster mask")).await.unwrap_err();
        assert!(unbound.to_string().contains("run's folder"), "{unbound}");
        meshy.bind_run(&run);

        let request = AssetRequest {
            object_name: Some("Mask".to_owned()),
            ..generate("a monster mask")
        };
        let hits = meshy.find(&request).await.unwrap();
        assert_eq!(hits.len(), 1);
        let hit = &hits[0];
        assert_eq!(hit.origin, AssetOrigin::Meshy);
        let folder = hit.path.parent().unwrap().to_path_buf();
        assert!(
            folder.starts_with(run.folder.join("assets/meshy")),
            "{}",
            folder.display()
        );
        assert!(hit.name.starts_with("Mask-"), "{}", hit.name);
        assert_eq!(
            std::fs::read(&hit.path).unwrap(),
            cube_glb("text_refine-2/model.glb")
        );
        assert_eq!(
            files_in(&folder),
            ["model.glb", "request.json", "result.json"]
        );
        let generation = hit.generation.clone().unwrap();
        assert!(!generation.cached);
        assert_eq!(
            generation.credits, 30.0,
            "20 documented for the preview, 10 reported for the refine"
        );
        let stages: Vec<(&str, bool)> = generation
            .tasks
            .iter()
            .map(|t| (t.stage.as_str(), t.credits_reported))
            .collect();
        assert_eq!(
            stages,
            [("text-to-3d preview", false), ("text-to-3d refine", true)]
        );
        assert!(
            hit.description.contains("Meshy: 30 credits"),
            "{}",
            hit.description
        );
        let result: Value =
            serde_json::from_slice(&std::fs::read(folder.join("result.json")).unwrap()).unwrap();
        assert_eq!(result["generation"]["tasks"][0]["id"], "text_preview-1");
        let asked: Value =
            serde_json::from_slice(&std::fs::read(folder.join("request.json")).unwrap()).unwrap();
        assert_eq!(asked["request"]["query"], "a monster mask");

        assert_eq!(
            replay.lines(),
            [
                "POST /openapi/v2/text-to-3d",
                "GET /openapi/v2/text-to-3d/text_preview-1",
                "GET /openapi/v2/text-to-3d/text_preview-1",
                "GET /openapi/v2/text-to-3d/text_preview-1",
                "POST /openapi/v2/text-to-3d",
                "GET /openapi/v2/text-to-3d/text_refine-2",
                "GET /openapi/v2/text-to-3d/text_refine-2",
                "GET /assets/text_refine-2/model.glb?Expires=1692945600",
            ]
        );
        let created = replay.created("/openapi/v2/text-to-3d");
        assert_eq!(
            created[0],
            json!({"mode": "preview", "prompt": "a monster mask", "ai_model": "latest"})
        );
        assert_eq!(created[1]["preview_task_id"], "text_preview-1");

        // The same request again, from this source or a new one (a resumed run): no task.
        let asked_before = replay.lines().len();
        let again = meshy.find(&request).await.unwrap();
        assert_eq!(again[0].path, hit.path);
        assert!(again[0].generation.as_ref().unwrap().cached);
        assert!(
            again[0]
                .description
                .contains("no new task and nothing spent")
        );
        let resumed = replay.bound(replay.config(), &run);
        assert_eq!(resumed.find(&request).await.unwrap()[0].path, hit.path);
        assert_eq!(replay.lines().len(), asked_before, "nothing asked of Meshy");
    })
    .await;
}

#[tokio::test]
async fn meshy_makes_a_rigged_animated_model_from_a_crop_of_the_target() {
    within(LIMIT, "the test", async {
        let replay = Replay::start(&[
            (
                "image",
                &["text-to-3d-in-progress", "image-to-3d-succeeded"],
            ),
            ("rigging", &["rigging-succeeded"]),
            ("animation", &["text-to-3d-pending", "animation-succeeded"]),
        ]);
        let (_dir, run) = run_folder();
        let meshy = replay.bound(replay.config(), &run);
        let crop = Reference::Image {
            region: Region {
                left: 0.0,
                top: 0.0,
                right: 0.5,
                bottom: 1.0,
            },
            view: Some("Camera1".to_owned()),
        };
        let walking = AssetRequest {
            object_name: Some("robot".to_owned()),
            reference: crop.clone(),
            rig: true,
            animation: Some(Animation::Walking),
            ..AssetRequest::words("a small robot", 1)
        };
        let hit = meshy.find(&walking).await.unwrap().remove(0);
        let sent = &replay.created("/openapi/v1/image-to-3d")[0];
        let data_uri = sent["image_url"].as_str().unwrap();
        let png = base64::engine::general_purpose::STANDARD
            .decode(data_uri.strip_prefix("data:image/png;base64,").unwrap())
            .unwrap();
        let sent_crop = image::load_from_memory(&png).unwrap().to_rgb8();
        assert_eq!(sent_crop.dimensions(), (32, 32));
        assert!(
            sent_crop.pixels().all(|p| p.0 == [255, 0, 0]),
            "the left, red half"
        );
        assert_eq!(sent["texture_prompt"], "a small robot");
        let folder = hit.path.parent().unwrap();
        assert_eq!(std::fs::read(folder.join("reference.png")).unwrap(), png);
        assert_eq!(
            replay.created("/openapi/v1/rigging")[0],
            json!({"input_task_id": "image-1"})
        );
        assert!(
            replay
                .lines()
                .contains(&"GET /assets/rigging-2/walking.glb?Expires=1692945600".to_owned())
        );
        let generation = hit.generation.unwrap();
        assert_eq!(
            generation.credits, 35.0,
            "30 for a textured picture model, 5 for the rig"
        );
        assert!(
            hit.description
                .contains("from a crop of the target picture, rigged and walking")
        );

        let dancing = AssetRequest {
            animation: Some(Animation::Action(92)),
            ..walking.clone()
        };
        let hit = meshy.find(&dancing).await.unwrap().remove(0);
        assert_eq!(
            replay.created("/openapi/v1/animations")[0],
            json!({"rig_task_id": "rigging-4", "action_id": 92})
        );
        assert!(
            replay
                .lines()
                .last()
                .unwrap()
                .contains("/assets/animation-5/animation.glb")
        );
        assert_eq!(hit.generation.unwrap().credits, 38.0);

        let unrigged = AssetRequest {
            rig: false,
            ..dancing
        };
        let err = meshy.find(&unrigged).await.unwrap_err();
        assert!(err.to_string().contains("needs a rig"), "{err}");
        let elsewhere = AssetRequest {
            reference: whole_picture(Some("Camera7")),
            ..AssetRequest::words("a small robot", 1)
        };
        let err = meshy.find(&elsewhere).await.unwrap_err();
        assert!(
            err.to_string().contains("the targets are: Camera1"),
            "{err}"
        );
    })
    .await;
}

/// A request whose preview task has the `preview` looks fails with all of `expected`; once Meshy
/// says the preview succeeded, the same request again succeeds. The replay and the second
/// answer's hit come back.
async fn fails_then_succeeds(
    preview: &[&'static str],
    config: impl FnOnce(MeshyConfig) -> MeshyConfig,
    expected: &[&str],
) -> (Replay, viga_skills::assets::AssetHit) {
    let replay = Replay::text_to_3d(preview);
    let (_dir, run) = run_folder();
    let meshy = replay.bound(config(replay.config()), &run);
    let err = meshy.find(&generate("a monster mask")).await.unwrap_err();
    assert!(
        matches!(&err, ToolError::Recoverable(m) if expected.iter().all(|part| m.contains(part))),
        "{err}"
    );
    replay.set_looks("text_preview", &["text-to-3d-succeeded"]);
    let hit = meshy
        .find(&generate("a monster mask"))
        .await
        .unwrap()
        .remove(0);
    assert!(hit.path.is_file());
    (replay, hit)
}

#[tokio::test]
async fn a_failed_task_is_said_with_meshys_reason_and_asked_anew_next_time() {
    within(LIMIT, "the test", async {
        let (replay, _) = fails_then_succeeds(
            &["text-to-3d-in-progress", "text-to-3d-failed"],
            |config| config,
            &["text-to-3d preview task text_preview-1 ended FAILED: The server is busy. Please try again later."],
        )
        .await;
        assert_eq!(
            replay.created("/openapi/v2/text-to-3d").len(),
            3,
            "a new preview, then the refine"
        );
    })
    .await;
}

#[tokio::test]
async fn a_task_past_the_deadline_is_picked_up_again_without_a_new_task() {
    within(LIMIT, "the test", async {
        let (replay, hit) = fails_then_succeeds(
            &["text-to-3d-pending", "text-to-3d-in-progress"],
            |config| MeshyConfig {
                deadline: Duration::from_millis(300),
                ..config
            },
            &[
                "task text_preview-1 is still IN_PROGRESS (45% done)",
                "ask again with the same arguments to pick it up without a new task",
            ],
        )
        .await;
        let previews: Vec<Value> = replay
            .created("/openapi/v2/text-to-3d")
            .into_iter()
            .filter(|body| body["mode"] == "preview")
            .collect();
        assert_eq!(
            previews.len(),
            1,
            "the noted task is polled again, not paid for twice"
        );
        assert_eq!(hit.generation.unwrap().tasks[0].id, "text_preview-1");
    })
    .await;
}

#[tokio::test]
async fn a_noted_task_meshy_no_longer_has_is_forgotten_and_made_anew() {
    within(LIMIT, "the test", async {
        let replay = Replay::text_to_3d(&["text-to-3d-in-progress"]);
        let (_dir, run) = run_folder();
        let meshy = replay.bound(
            MeshyConfig {
                deadline: Duration::from_millis(200),
                ..replay.config()
            },
            &run,
        );
        let running = meshy.find(&generate("a monster mask")).await.unwrap_err();
        assert!(
            running.to_string().contains("still IN_PROGRESS"),
            "{running}"
        );
        replay.forget_tasks();
        let gone = meshy.find(&generate("a monster mask")).await.unwrap_err();
        assert!(
            gone.to_string()
                .contains("task text_preview-1 ended GONE: Meshy no longer has this task"),
            "{gone}"
        );
        replay.set_looks("text_preview", &["text-to-3d-succeeded"]);
        let hit = meshy
            .find(&generate("a monster mask"))
            .await
            .unwrap()
            .remove(0);
        assert_eq!(
            hit.generation.unwrap().tasks[0].id,
            "text_preview-2",
            "a new task"
        );
    })
    .await;
}

#[tokio::test]
async fn model_urls_off_meshy_redirects_and_huge_or_hostile_models_are_refused() {
    within(LIMIT, "the test", async {
        let replay = Replay::start(&[("text_preview", &["text-to-3d-succeeded"])]);
        let (_dir, run) = run_folder();
        let meshy = replay.bound(
            MeshyConfig {
                texture: false,
                ..replay.config()
            },
            &run,
        );
        let base = replay.server.base().to_owned();
        for (url, why) in [
            (
                "https://elsewhere.example/model.glb",
                "is refused: it is neither on",
            ),
            (
                &format!("{base}/assets/away.glb") as &str,
                "redirect to https://elsewhere.example/model.glb is not followed",
            ),
            (
                &format!("{base}/assets/huge.glb"),
                "larger than the 1.0 MiB viga accepts",
            ),
            (
                &format!("{base}/assets/outside.glb"),
                "refers to the file \"../../../../etc/hostname\"",
            ),
            ("not a url", "is not a URL"),
        ] {
            replay.set_glb_url(url);
            let err = meshy
                .find(&generate(&format!("a lamp for {url}")))
                .await
                .unwrap_err();
            assert!(
                matches!(&err, ToolError::Recoverable(m) if m.contains(why)),
                "{url}: {err}"
            );
        }
        assert!(
            !replay.lines().iter().any(|line| line.contains("elsewhere")),
            "nothing is fetched off the allowed hosts"
        );
        let kept: Vec<PathBuf> = files_under(&run.folder.join("assets/meshy"))
            .into_iter()
            .filter(|p| {
                p.extension().is_some_and(|e| e == "glb")
                    || p.file_name().is_some_and(viga_io::files::is_partial)
            })
            .collect();
        assert!(kept.is_empty(), "no refused model is kept: {kept:?}");
    })
    .await;
}

#[tokio::test]
async fn refusals_say_what_to_do_and_quote_meshy() {
    within(LIMIT, "the test", async {
        let (_dir, run) = run_folder();
        for (status, body, advice) in [
            (401, r#"{"message": "Invalid API key"}"#, "Meshy refused the key in MESHY_API_KEY"),
            (402, r#"{"message": "Insufficient credits"}"#, "too few credits"),
            (429, r#"{"message": "Too many requests"}"#, "slow down"),
        ] {
            let replay = Replay::start(&[]);
            replay.script.lock().unwrap().refuse = Some((status, body));
            let meshy = replay.bound(replay.config(), &run);
            let err = meshy.find(&generate("a monster mask")).await.unwrap_err();
            let message = serde_json::from_str::<Value>(body).unwrap()["message"]
                .as_str()
                .unwrap()
                .to_owned();
            assert!(
                matches!(&err, ToolError::Recoverable(m) if m.contains(&format!("HTTP {status}")) && m.contains(advice) && m.contains(&message)),
                "{err}"
            );
        }
        let unreachable = Meshy::with_key(
            MeshyConfig {
                api_url: viga_testkit::http::closed_address().unwrap(),
                ..MeshyConfig::default()
            },
            &viga_protocol::Secret::new(KEY),
        )
        .unwrap();
        unreachable.bind_run(&run);
        let err = unreachable.find(&generate("a monster mask")).await.unwrap_err();
        assert!(err.to_string().contains("Meshy cannot be reached"), "{err}");
        let bad_key = Meshy::with_key(
            MeshyConfig::default(),
            &viga_protocol::Secret::new("msy\nkey"),
        )
        .unwrap_err();
        assert!(matches!(bad_key, ToolError::Fatal(m) if m.contains("line breaks")));
    })
    .await;
}

#[tokio::test]
async fn asset_sources_generate_only_when_asked_or_when_the_libraries_have_nothing() {
    within(LIMIT, "the test", async {
        let replay = Replay::start(&[("text_preview", &["text-to-3d-succeeded"])]);
        let library = tempfile::tempdir().unwrap();
        std::fs::write(library.path().join("oak_chair.glb"), cube_glb("chair")).unwrap();
        std::fs::write(
            library.path().join("oak_chair.json"),
            r#"{"description": "a wooden chair", "licence": "CC-BY 4.0, Jane Doe"}"#,
        )
        .unwrap();
        let (_dir, run) = run_folder();
        let sources = AssetSources::new(vec![
            Arc::new(LocalAssetFolder::open(library.path()).unwrap()),
            Arc::new(replay.meshy(MeshyConfig {
                texture: false,
                ..replay.config()
            })),
        ]);
        sources.bind_run(&run);

        let chair = sources.search("wooden chair", 3).await.unwrap();
        assert_eq!(chair.len(), 1);
        assert_eq!(chair[0].origin, AssetOrigin::Local);
        assert_eq!(chair[0].licence.as_deref(), Some("CC-BY 4.0, Jane Doe"));
        assert!(
            replay.lines().is_empty(),
            "the library had it: nothing generated"
        );
        let library_only = AssetRequest {
            sourcing: Sourcing::Library,
            ..AssetRequest::words("monster mask", 3)
        };
        assert!(sources.find(&library_only).await.unwrap().is_empty());
        assert!(replay.lines().is_empty());
        let mask = sources.search("monster mask", 3).await.unwrap();
        assert_eq!(
            mask[0].origin,
            AssetOrigin::Meshy,
            "nothing in the library: generated"
        );
        assert!(
            mask[0]
                .import_snippet()
                .contains("obj[\"viga_source\"] = \"meshy\"")
        );

        let records = read_asset_records(&run.folder);
        let answered: Vec<(String, Vec<AssetOrigin>)> = records
            .iter()
            .map(|r| {
                (
                    r.request.query.clone(),
                    r.hits.iter().map(|h| h.origin).collect(),
                )
            })
            .collect();
        assert_eq!(
            answered,
            [
                ("wooden chair".to_owned(), vec![AssetOrigin::Local]),
                ("monster mask".to_owned(), vec![]),
                ("monster mask".to_owned(), vec![AssetOrigin::Meshy]),
            ]
        );
        assert_eq!(
            records[2].hits[0].generation.as_ref().unwrap().credits,
            20.0
        );

        let no_generator = AssetSources::new(vec![Arc::new(
            LocalAssetFolder::open(library.path()).unwrap(),
        )]);
        let picture = AssetRequest {
            reference: whole_picture(None),
            ..AssetRequest::words("wooden chair", 1)
        };
        let err = no_generator.find(&picture).await.unwrap_err();
        assert!(err.to_string().contains("no asset generator"), "{err}");
    })
    .await;
}
