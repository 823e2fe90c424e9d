//! Meshy (<https://www.meshy.ai>) as an asset generator: `get_better_assets` asks it for a
//! model made from words (text-to-3D: a preview mesh, then a refine task that textures it)
//! or from a crop of a target picture (image-to-3D), optionally rigged and animated for a 4D
//! scene (auto-rigging, then the rig's walking or running cycle or an action of Meshy's
//! animation library).
//!
//! Each request creates tasks on Meshy's REST API (`https://api.meshy.ai/openapi`), polls
//! them with a growing pause up to a deadline, and downloads the resulting GLB into the run's
//! folder, `assets/meshy/<object>-<request hash>/`, beside `request.json` (what was asked),
//! `reference.png` (the crop, for a picture reference) and `result.json` (each task with its
//! id, credits and time). The same request again is answered from that folder: no second
//! task, nothing spent. A task is noted there as soon as Meshy names it, so a request that
//! ran past its deadline, or a run that was killed, picks the same task up again instead of
//! paying for a new one.
//!
//! The key is read from `MESHY_API_KEY` only (never a flag, never a file viga writes) and
//! sent only to the API's own origin; downloads must be on Meshy's asset host over HTTPS (or
//! the API's origin), redirects elsewhere are refused, and every answer and download is
//! bounded ([`crate::http`]). A downloaded model is checked as a GLB that holds all its data
//! before anyone imports it ([`crate::meshfile`]). What each task cost is Meshy's
//! `consumed_credits` when the task reports it, else the price Meshy documents for it, and
//! is said in the tool's answer and kept in `result.json`.

mod api;
mod crop;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use reqwest::Url;
use reqwest::header::HeaderValue;
use serde::{Deserialize, Serialize};
use sha2::Digest as _;
use viga_io::files::PartialFile;

use self::api::{Stage, TaskOutcome};
use crate::assets::{
    Animation, AssetHit, AssetOrigin, AssetRequest, AssetSource, Generation, GenerationTask,
    Reference, RunBinding, SourceKind,
};
use crate::context::safe_file_stem;
use crate::http::{ServiceClient, ServiceSpec, base_url};
use crate::meshfile::{MeshFormat, check_mesh};
use crate::registry::ToolError;

/// Where Meshy's API is.
pub const MESHY_API: &str = "https://api.meshy.ai/openapi";
/// Where its model URLs point.
pub const MESHY_DOWNLOAD_HOST: &str = "assets.meshy.ai";
/// The environment variable the key is read from.
pub const MESHY_KEY_ENV: &str = "MESHY_API_KEY";
/// The environment variable that points viga at another Meshy address (a proxy, a test
/// server). It is never recorded in a run folder, so a run folder cannot send the key
/// elsewhere.
pub const MESHY_URL_ENV: &str = "VIGA_MESHY_URL";
/// The longest prompt Meshy takes.
pub const MAX_PROMPT_CHARS: usize = 600;

/// How viga talks to Meshy. [`Default`] is the real service; [`MeshyConfig::from_env`] the
/// one `VIGA_MESHY_URL` names, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct MeshyConfig {
    /// The API's base URL (with `/openapi`), without a trailing slash.
    pub api_url: String,
    /// Hosts model URLs may point at (over HTTPS); the API's own origin always may.
    pub download_hosts: Vec<String>,
    /// Meshy's model (`latest`, `meshy-6`, `meshy-5`).
    pub ai_model: String,
    /// Textured models (a refine task after a text preview; `should_texture` for pictures).
    pub texture: bool,
    /// The first pause between two looks at a running task; it doubles up to `poll_max`.
    pub poll_first: Duration,
    pub poll_max: Duration,
    /// How long one request may take, all its tasks and the download included.
    pub deadline: Duration,
    pub connect_timeout: Duration,
    /// One API call (creating a task, looking at one).
    pub request_timeout: Duration,
    /// How long a response may send nothing before viga gives up on it.
    pub idle_timeout: Duration,
    /// The model's download.
    pub download_timeout: Duration,
    /// The largest API answer read.
    pub max_answer_bytes: u64,
    /// The largest model downloaded.
    pub max_model_bytes: u64,
    /// A picture reference is scaled down to fit this many pixels on its longer side.
    pub max_reference_side: u32,
}

impl Default for MeshyConfig {
    fn default() -> Self {
        Self {
            api_url: MESHY_API.to_owned(),
            download_hosts: vec![MESHY_DOWNLOAD_HOST.to_owned()],
            ai_model: "latest".to_owned(),
            texture: true,
            poll_first: Duration::from_secs(2),
            poll_max: Duration::from_secs(30),
            // VIGA's own limit for a preview task.
            deadline: Duration::from_secs(900),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(30),
            download_timeout: Duration::from_secs(600),
            max_answer_bytes: 4 << 20,
            max_model_bytes: 256 << 20,
            max_reference_side: 1024,
        }
    }
}

impl MeshyConfig {
    /// The default, at the address `VIGA_MESHY_URL` names when it is set.
    pub fn from_env() -> Self {
        let mut config = Self::default();
        if let Some(url) = std::env::var(MESHY_URL_ENV)
            .ok()
            .filter(|url| !url.trim().is_empty())
        {
            config.api_url = url;
        }
        config
    }
}

/// Meshy as an [`AssetSource`] that generates.
pub struct Meshy {
    config: MeshyConfig,
    api: Url,
    http: ServiceClient,
    run: Mutex<Option<RunBinding>>,
    /// One request at a time, so the same request asked twice at once makes one task.
    busy: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Meshy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Meshy")
            .field("api", &self.api.as_str())
            .finish_non_exhaustive()
    }
}

/// What `request.json` keeps of a request: the request and how it was put to Meshy.
#[derive(Debug, Serialize, Deserialize)]
struct RequestFile {
    request: AssetRequest,
    /// What Meshy is asked to make it from: `text` or `image`.
    from: String,
    prompt: String,
    ai_model: String,
    texture: bool,
    /// The picture reference's SHA-256 (the crop is `reference.png`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reference_sha256: Option<String>,
}

/// What `result.json` keeps: the generation and the file.
#[derive(Debug, Serialize, Deserialize)]
struct ResultFile {
    generation: Generation,
    /// The URL the model came from (it expires).
    model_url: String,
}

/// The run-folder files of one request.
const REQUEST_FILE: &str = "request.json";
const RESULT_FILE: &str = "result.json";
/// The tasks created so far, by stage, until the request is done.
const TASKS_FILE: &str = "tasks.json";
const MODEL_FILE: &str = "model.glb";
const REFERENCE_FILE: &str = "reference.png";
/// The folder of Meshy's assets in the run's `assets/`.
const MESHY_DIR: &str = "meshy";
/// The longest object part of a request's folder name.
const MAX_STEM_CHARS: usize = 40;

impl Meshy {
    /// Checks the configuration and reads the key from `MESHY_API_KEY`; nothing is asked of
    /// Meshy until the first request it must serve.
    pub fn new(config: MeshyConfig) -> Result<Self, ToolError> {
        let key = std::env::var(MESHY_KEY_ENV)
            .ok()
            .filter(|key| !key.trim().is_empty())
            .ok_or_else(|| {
                ToolError::Fatal(format!(
                    "asset generation with Meshy needs its API key: export {MESHY_KEY_ENV}=msy_... (made at https://www.meshy.ai/settings/api); viga reads it from the environment only"
                ))
            })?;
        Self::with_key(config, &viga_protocol::Secret::new(key.trim()))
    }

    /// [`Self::new`] with the key given (a library caller that keeps its own).
    pub fn with_key(config: MeshyConfig, key: &viga_protocol::Secret) -> Result<Self, ToolError> {
        let mut authorization =
            HeaderValue::from_str(&format!("Bearer {}", key.expose())).map_err(|_| {
                ToolError::Fatal(format!(
                    "the key in ${MESHY_KEY_ENV} has characters that cannot go in an HTTP header; check for stray quotes or line breaks"
                ))
            })?;
        authorization.set_sensitive(true);
        let api = base_url(&config.api_url, "the Meshy API address").map_err(|why| {
            ToolError::Fatal(format!(
                "{why}; leave {MESHY_URL_ENV} unset for {MESHY_API}"
            ))
        })?;
        let http = ServiceClient::new(ServiceSpec {
            hosts: config.download_hosts.clone(),
            connect_timeout: config.connect_timeout,
            idle_timeout: config.idle_timeout,
            unreachable_hint: "Check the network connection (and HTTPS_PROXY); meanwhile, find a ready-made asset or model the object with Blender Python".to_owned(),
            retry_hint: "try again later (the same request picks up a task Meshy already runs), or model the object with Blender Python".to_owned(),
            status_advice: Some(std::sync::Arc::new(|status| {
                Some(match status {
                    401 | 403 => format!("Meshy refused the key in {MESHY_KEY_ENV}; check it at https://www.meshy.ai/settings/api"),
                    402 => "the Meshy account has too few credits for this; find a ready-made asset or model the object with Blender Python".to_owned(),
                    400 | 422 => "Meshy refused the request as asked; change the description or the picture region, or model the object with Blender Python".to_owned(),
                    _ => return None,
                })
            })),
            quote_error_message: true,
            origin_authorization: Some(authorization),
            ..ServiceSpec::new("Meshy", api.clone())
        })
        .map_err(ToolError::Fatal)?;
        Ok(Self {
            config,
            api,
            http,
            run: Mutex::new(None),
            busy: tokio::sync::Mutex::new(()),
        })
    }

    fn bound_run(&self) -> Result<RunBinding, ToolError> {
        self.run.lock().ok().and_then(|run| run.clone()).ok_or_else(|| {
            ToolError::Recoverable(
                "Meshy generates assets into a run's folder, and this session has none; find a ready-made asset or model the object with Blender Python".to_owned(),
            )
        })
    }

    /// `<api>/<segments...>`, each segment percent-encoded.
    fn endpoint(&self, segments: &[&str]) -> Url {
        let mut url = self.api.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    async fn generate(&self, request: &AssetRequest) -> Result<AssetHit, ToolError> {
        let run = self.bound_run()?;
        let prompt = checked_prompt(request)?;
        let reference = self.reference_picture(&run, request)?;
        let asked = self.request_file(request, &prompt, reference.as_deref());
        let folder = request_folder(&run, request, &asked);
        let _one_at_a_time = self.busy.lock().await;
        if let Some(hit) = cached_hit(&folder, request) {
            return Ok(hit);
        }
        note_request(&folder, &asked, reference.as_deref())?;
        let started = Instant::now();
        let deadline = started + self.config.deadline;
        let mut tasks = Vec::new();
        let model_url = self
            .run_tasks(
                &folder,
                request,
                &prompt,
                reference.as_deref(),
                deadline,
                &mut tasks,
            )
            .await?;
        let model = self.download(&model_url, &folder, deadline).await?;
        let generation = Generation {
            service: "Meshy".to_owned(),
            credits: tasks.iter().map(|task: &GenerationTask| task.credits).sum(),
            tasks,
            seconds: started.elapsed().as_secs_f64(),
            cached: false,
        };
        note_result(&folder, &generation, &model_url)?;
        Ok(hit(request, &folder, model, generation))
    }

    /// The crop of the target picture a picture reference names (PNG), `None` for words.
    fn reference_picture(
        &self,
        run: &RunBinding,
        request: &AssetRequest,
    ) -> Result<Option<Vec<u8>>, ToolError> {
        match &request.reference {
            Reference::Text => Ok(None),
            Reference::Image { region, view } => crop::crop_target(
                &run.pictures,
                view.as_deref(),
                *region,
                self.config.max_reference_side,
            )
            .map(Some)
            .map_err(ToolError::Recoverable),
        }
    }

    /// What Meshy is asked for the request, as `request.json` keeps it.
    fn request_file(
        &self,
        request: &AssetRequest,
        prompt: &str,
        reference: Option<&[u8]>,
    ) -> RequestFile {
        RequestFile {
            request: request.clone(),
            from: if reference.is_some() { "image" } else { "text" }.to_owned(),
            prompt: prompt.to_owned(),
            ai_model: self.config.ai_model.clone(),
            texture: self.config.texture,
            reference_sha256: reference.map(|png| hex(&sha2::Sha256::digest(png))),
        }
    }

    /// Runs the request's tasks in turn, each noted in `folder` as soon as Meshy names it:
    /// the model (from words a preview, then its refinement when it is to be textured; or
    /// from the picture), then its rig and animation when asked for. Returns the URL of the
    /// model to download.
    async fn run_tasks(
        &self,
        folder: &Path,
        request: &AssetRequest,
        prompt: &str,
        reference: Option<&[u8]>,
        deadline: Instant,
        tasks: &mut Vec<GenerationTask>,
    ) -> Result<Url, ToolError> {
        let (base_stage, base_body) = self.first_task(prompt, reference);
        let mut last = self
            .run_stage(folder, base_stage, base_body, deadline, tasks)
            .await?;
        if base_stage == Stage::TextPreview && self.config.texture {
            let body = serde_json::json!({"mode": "refine", "preview_task_id": last.id, "ai_model": self.config.ai_model});
            last = self
                .run_stage(folder, Stage::TextRefine, body, deadline, tasks)
                .await?;
        }
        // The model itself must be there even when its rigged form is what is downloaded.
        let model_url = last.model_glb(base_stage)?;
        if !request.rig {
            return Ok(model_url);
        }
        self.rig_and_animate(
            folder,
            &last.id,
            request.animation.as_ref(),
            deadline,
            tasks,
        )
        .await
    }

    /// The first task of a request and its body: a preview from words, or a model from the
    /// picture (textured, from the words too, when the configuration textures).
    fn first_task(&self, prompt: &str, reference: Option<&[u8]>) -> (Stage, serde_json::Value) {
        match reference {
            None => (
                Stage::TextPreview,
                serde_json::json!({"mode": "preview", "prompt": prompt, "ai_model": self.config.ai_model}),
            ),
            Some(png) => {
                let mut body = serde_json::json!({
                    "image_url": format!("data:image/png;base64,{}", base64_of(png)),
                    "ai_model": self.config.ai_model,
                    "should_texture": self.config.texture,
                });
                if !prompt.is_empty() && self.config.texture {
                    body["texture_prompt"] = serde_json::Value::String(prompt.to_owned());
                }
                (Stage::ImageTo3d, body)
            }
        }
    }

    /// Rigs the model of task `model_id` and, when asked, animates it; returns the URL of
    /// the rigged or animated model.
    async fn rig_and_animate(
        &self,
        folder: &Path,
        model_id: &str,
        animation: Option<&Animation>,
        deadline: Instant,
        tasks: &mut Vec<GenerationTask>,
    ) -> Result<Url, ToolError> {
        let rig = self
            .run_stage(
                folder,
                Stage::Rigging,
                serde_json::json!({"input_task_id": model_id}),
                deadline,
                tasks,
            )
            .await?;
        match animation {
            None => rig.result_url(&["rigged_character_glb_url"]),
            Some(Animation::Walking) => rig.result_url(&["basic_animations", "walking_glb_url"]),
            Some(Animation::Running) => rig.result_url(&["basic_animations", "running_glb_url"]),
            Some(Animation::Action(action)) => {
                let body = serde_json::json!({"rig_task_id": rig.id, "action_id": action});
                self.run_stage(folder, Stage::Animation, body, deadline, tasks)
                    .await?
                    .result_url(&["animation_glb_url"])
            }
        }
    }

    /// Runs one stage: the task noted for it in the request's folder (a retry after a
    /// deadline, or a killed run) or a new one, polled until it ends. A task that failed is
    /// forgotten, so asking again starts a new one.
    async fn run_stage(
        &self,
        folder: &Path,
        stage: Stage,
        body: serde_json::Value,
        deadline: Instant,
        tasks: &mut Vec<GenerationTask>,
    ) -> Result<api::Task, ToolError> {
        let mut noted = read_noted(folder);
        let started = Instant::now();
        let id = match noted.get(stage.key()) {
            Some(id) => id.clone(),
            None => {
                let id = self.create(stage, &body).await?;
                noted.insert(stage.key().to_owned(), id.clone());
                write_json(&folder.join(TASKS_FILE), &noted)?;
                id
            }
        };
        let outcome = self.poll(stage, &id, deadline).await;
        let task = match outcome {
            Ok(TaskOutcome::Succeeded(task)) => task,
            Ok(TaskOutcome::Failed { status, message }) => {
                noted.remove(stage.key());
                write_json(&folder.join(TASKS_FILE), &noted)?;
                return Err(ToolError::Recoverable(format!(
                    "Meshy's {} task {id} ended {status}: {message}; ask again (a new task) with other words, or model the object with Blender Python",
                    stage.describe()
                )));
            }
            Err(err) => return Err(err),
        };
        let (credits, credits_reported) = match task.consumed_credits {
            Some(credits) => (credits, true),
            None => (stage.documented_credits(&self.config), false),
        };
        tasks.push(GenerationTask {
            stage: stage.describe().to_owned(),
            id: id.clone(),
            credits,
            credits_reported,
            seconds: started.elapsed().as_secs_f64(),
        });
        Ok(task)
    }

    async fn create(&self, stage: Stage, body: &serde_json::Value) -> Result<String, ToolError> {
        let url = self.endpoint(stage.path());
        let what = format!("the new {} task", stage.describe());
        let answer = self
            .http
            .fetch_bytes(
                reqwest::Method::POST,
                &url,
                Some(crate::http::Body::json(body)),
                self.config.max_answer_bytes,
                self.config.request_timeout,
                &what,
            )
            .await?;
        api::created_task_id(&answer).map_err(|why| {
            ToolError::Recoverable(format!(
                "Meshy's answer to {what} cannot be used: {why}; try again later"
            ))
        })
    }

    /// Looks at the task with a growing pause until it ends or `deadline` passes.
    async fn poll(
        &self,
        stage: Stage,
        id: &str,
        deadline: Instant,
    ) -> Result<TaskOutcome, ToolError> {
        let mut path: Vec<&str> = stage.path().to_vec();
        path.push(id);
        let url = self.endpoint(&path);
        let what = format!("the state of {} task {id}", stage.describe());
        let mut pause = self.config.poll_first;
        loop {
            let looked = self
                .http
                .get_bytes(
                    &url,
                    self.config.max_answer_bytes,
                    self.config.request_timeout,
                    &what,
                )
                .await;
            let answer = match looked {
                // A task noted long ago: Meshy keeps them for days, not for ever.
                Err(err) if err.status == Some(404) => {
                    return Ok(TaskOutcome::Failed {
                        status: "GONE".to_owned(),
                        message: "Meshy no longer has this task".to_owned(),
                    });
                }
                looked => looked?,
            };
            let state = api::task_state(&answer).map_err(|why| {
                ToolError::Recoverable(format!(
                    "Meshy's answer to {what} cannot be used: {why}; try again later"
                ))
            })?;
            match state {
                api::Polled::Done(outcome) => return Ok(outcome),
                api::Polled::Running { status, progress } => {
                    let now = Instant::now();
                    if now >= deadline {
                        return Err(ToolError::Recoverable(format!(
                            "Meshy's {} task {id} is still {status} ({}% done) after {:.0} s, viga's limit for one request; it keeps running on Meshy: ask again with the same arguments to pick it up without a new task, or model the object with Blender Python meanwhile",
                            stage.describe(),
                            progress.unwrap_or(0.0).round(),
                            self.config.deadline.as_secs_f64()
                        )));
                    }
                    tokio::time::sleep(pause.min(deadline - now)).await;
                    pause = (pause * 2).min(self.config.poll_max);
                }
            }
        }
    }

    /// Downloads the model into `model.glb` in `folder`, checked as a self-contained GLB.
    async fn download(
        &self,
        url: &Url,
        folder: &Path,
        deadline: Instant,
    ) -> Result<PathBuf, ToolError> {
        if !self.http.allowed(url) {
            return Err(ToolError::Recoverable(format!(
                "Meshy's model URL {url} is refused: it is neither on {} over HTTPS nor on the API's own address",
                self.config.download_hosts.join(", ")
            )));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let model = folder.join(MODEL_FILE);
        // Published whole once checked: a killed or refused download leaves no model.glb.
        let partial = PartialFile::create(&model).map_err(|err| write_error(folder, &err))?;
        self.http
            .download(
                url,
                partial.path(),
                self.config.max_model_bytes,
                self.config
                    .download_timeout
                    .min(left.max(Duration::from_secs(1))),
                "the generated model",
            )
            .await?;
        check_mesh(partial.path(), MeshFormat::Glb).map_err(|why| {
            ToolError::Recoverable(format!(
                "Meshy's model from {url} is refused: {why}; ask again, or model the object with Blender Python"
            ))
        })?;
        partial.publish().map_err(|err| write_error(folder, &err))?;
        Ok(model)
    }
}

#[async_trait]
impl AssetSource for Meshy {
    fn describe(&self) -> String {
        format!("Meshy's generated models ({})", self.api)
    }

    fn kind(&self) -> SourceKind {
        SourceKind::Generator
    }

    fn bind_run(&self, run: &RunBinding) {
        if let Ok(mut bound) = self.run.lock() {
            *bound = Some(run.clone());
        }
    }

    async fn find(&self, request: &AssetRequest) -> Result<Vec<AssetHit>, ToolError> {
        Ok(vec![self.generate(request).await?])
    }
}

/// The request's description, trimmed, or why Meshy cannot be asked for it as it stands.
fn checked_prompt(request: &AssetRequest) -> Result<String, ToolError> {
    let prompt = request.query.trim().to_owned();
    if prompt.chars().count() > MAX_PROMPT_CHARS {
        return Err(ToolError::Recoverable(format!(
            "the description has {} characters; Meshy takes at most {MAX_PROMPT_CHARS}: say it shorter",
            prompt.chars().count()
        )));
    }
    if request.animation.is_some() && !request.rig {
        return Err(ToolError::Recoverable(
            "an animation needs a rig: ask with rig: true as well".to_owned(),
        ));
    }
    Ok(prompt)
}

/// Makes the request's folder and writes what was asked into it (`request.json`, and the
/// crop as `reference.png`) before any task is created.
fn note_request(
    folder: &Path,
    asked: &RequestFile,
    reference: Option<&[u8]>,
) -> Result<(), ToolError> {
    std::fs::create_dir_all(folder).map_err(|err| write_error(folder, &err))?;
    write_json(&folder.join(REQUEST_FILE), asked)?;
    if let Some(png) = reference {
        viga_io::files::write_atomic(&folder.join(REFERENCE_FILE), png)
            .map_err(|err| write_error(folder, &err))?;
    }
    Ok(())
}

/// Keeps the finished generation in `result.json`; the tasks noted on the way are no
/// longer needed.
fn note_result(folder: &Path, generation: &Generation, model_url: &Url) -> Result<(), ToolError> {
    write_json(
        &folder.join(RESULT_FILE),
        &ResultFile {
            generation: generation.clone(),
            model_url: model_url.to_string(),
        },
    )?;
    let _ = std::fs::remove_file(folder.join(TASKS_FILE));
    Ok(())
}

/// `<run>/assets/meshy/<object>-<hash of what was asked>/`.
fn request_folder(run: &RunBinding, request: &AssetRequest, asked: &RequestFile) -> PathBuf {
    let object = request
        .object_name
        .as_deref()
        .filter(|name| !name.trim().is_empty())
        .unwrap_or(&request.query);
    let stem: String = safe_file_stem(object.trim())
        .chars()
        .take(MAX_STEM_CHARS)
        .collect();
    // What Meshy is asked decides the asset; the hit count and the sourcing do not.
    let identity = serde_json::json!({
        "from": asked.from,
        "prompt": asked.prompt,
        "ai_model": asked.ai_model,
        "texture": asked.texture,
        "reference": asked.reference_sha256,
        "rig": request.rig,
        "animation": request.animation,
    });
    let digest = hex(&sha2::Sha256::digest(identity.to_string().as_bytes()));
    run.assets_dir()
        .join(MESHY_DIR)
        .join(format!("{stem}-{}", &digest[..16]))
}

/// The request's model from the run's cache, when it was made before.
fn cached_hit(folder: &Path, request: &AssetRequest) -> Option<AssetHit> {
    let model = folder.join(MODEL_FILE);
    if !model.is_file() {
        return None;
    }
    let kept: ResultFile =
        serde_json::from_slice(&std::fs::read(folder.join(RESULT_FILE)).ok()?).ok()?;
    let generation = Generation {
        cached: true,
        ..kept.generation
    };
    Some(hit(request, folder, model, generation))
}

fn hit(request: &AssetRequest, folder: &Path, model: PathBuf, generation: Generation) -> AssetHit {
    let from = match request.reference {
        Reference::Text => format!("from the words {:?}", request.query.trim()),
        Reference::Image { .. } => "from a crop of the target picture".to_owned(),
    };
    let mut description = format!("Generated by Meshy {from}");
    if request.rig {
        description.push_str(", rigged");
    }
    match &request.animation {
        Some(Animation::Walking) => description.push_str(" and walking"),
        Some(Animation::Running) => description.push_str(" and running"),
        Some(Animation::Action(action)) => {
            description.push_str(&format!(" and animated (action {action})"))
        }
        None => {}
    }
    description.push_str(&format!(". {}.", generation.summary()));
    AssetHit {
        name: folder
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default(),
        path: model,
        description,
        score: 1.0,
        origin: AssetOrigin::Meshy,
        licence: None,
        generation: Some(generation),
    }
}

/// The tasks noted in a request's folder, by stage.
fn read_noted(folder: &Path) -> std::collections::BTreeMap<String, String> {
    std::fs::read(folder.join(TASKS_FILE))
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<(), ToolError> {
    let bytes = serde_json::to_vec_pretty(value)
        .map_err(|err| ToolError::Fatal(format!("{} cannot be encoded: {err}", path.display())))?;
    viga_io::files::write_atomic(path, &bytes).map_err(|err| write_error(path, &err))
}

fn write_error(path: &Path, err: &std::io::Error) -> ToolError {
    ToolError::Fatal(format!(
        "the run folder cannot be written at {}: {err}; check its permissions and the free disk space",
        path.display()
    ))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
