//! Blender workers for model-written programs, contained under the front end's choice
//! ([`ContainedWorkers`], from viga-contain): the configuration of such a worker and the
//! one way it is started ([`StartBlender`]).

use std::path::{Path, PathBuf};

use viga_contain::{ContainedWorkers, ContainedWorkersError};
use viga_sandbox::Access;

use crate::locate::BlenderLauncher;
use crate::transport::TransportError;
use crate::worker::{Worker, WorkerConfig};

/// The variable that tells a run's programs where its fetched and generated assets are.
pub const ASSETS_DIR_ENV: &str = "VIGA_ASSETS_DIR";

/// The program a worker runs just before it saves a scene result for a person's Blender:
/// images and fonts the run loaded from its asset folder ([`ASSETS_DIR_ENV`]) are packed
/// into the result (the person's Blender takes in no image or font read from a file outside
/// it), and every other path is made absolute.
pub const PACK_RESULT_ASSETS: &str = include_str!("../python/result_assets.py");

/// A Blender worker for model-written programs to start.
#[derive(Debug, Clone)]
pub struct WorkerRequest {
    /// Which Blender.
    pub blender: BlenderLauncher,
    /// What its programs may read and write besides its scratch folder and Blender's install.
    pub access: Access,
    /// The run's asset folder, which its programs find in [`ASSETS_DIR_ENV`].
    pub assets: Option<PathBuf>,
    /// Name used in logs.
    pub name: Option<String>,
}

impl WorkerRequest {
    /// `blender`, reaching what `access` names, with no asset folder.
    pub fn new(blender: BlenderLauncher, access: Access) -> Self {
        Self {
            blender,
            access,
            assets: None,
            name: None,
        }
    }

    /// The same request, its programs finding the run's assets in `assets`.
    pub fn with_assets(mut self, assets: Option<&Path>) -> Self {
        self.assets = assets.map(Path::to_path_buf);
        self
    }

    /// The same request, its worker named `name` in logs.
    pub fn named(mut self, name: String) -> Self {
        self.name = Some(name);
        self
    }
}

/// Why a contained Blender worker did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Its containment could not be made (a folder, the launcher).
    #[error(transparent)]
    Contained(#[from] ContainedWorkersError),
    /// Blender itself did not start; the transport's error says why.
    #[error(transparent)]
    Start(TransportError),
}

/// Starting contained Blender workers: the one way a Blender for model-written programs
/// starts.
#[async_trait::async_trait]
pub trait StartBlender {
    /// The configuration of the Blender worker `request` asks for: contained under the
    /// policy, its programs told where the run's assets are.
    fn worker_config(&self, request: &WorkerRequest) -> Result<WorkerConfig, StartError>;

    /// Starts the Blender worker `request` asks for, for model-written programs.
    async fn start(&self, request: &WorkerRequest) -> Result<Worker, StartError>;
}

#[async_trait::async_trait]
impl StartBlender for ContainedWorkers {
    fn worker_config(&self, request: &WorkerRequest) -> Result<WorkerConfig, StartError> {
        let mut config = WorkerConfig::new(request.blender.clone());
        config.containment = self.containment(&request.access)?;
        if let Some(name) = &request.name {
            config.name.clone_from(name);
        }
        if let Some(assets) = &request.assets {
            // By the path it is granted by: the one the programs can reach.
            let assets = crate::real_paths::real_path(assets);
            config.program_env.push((ASSETS_DIR_ENV.to_owned(), assets));
        }
        Ok(config)
    }

    async fn start(&self, request: &WorkerRequest) -> Result<Worker, StartError> {
        let config = self.worker_config(request)?;
        Worker::start(config).await.map_err(StartError::Start)
    }
}

#[cfg(test)]
mod tests {
    use viga_sandbox::ContainmentPolicy;

    use super::*;

    fn workers(policy: ContainmentPolicy) -> (ContainedWorkers, tempfile::TempDir) {
        let folder = tempfile::tempdir().unwrap();
        let (launcher, _log) = viga_testkit::recording_launcher(folder.path());
        (ContainedWorkers::new(policy, launcher), folder)
    }

    #[test]
    fn the_policy_off_gives_a_worker_no_containment_and_makes_no_folder() {
        let (workers, folder) = workers(ContainmentPolicy::Off);
        let results = folder.path().join("results");
        let request = WorkerRequest::new(
            BlenderLauncher::Binary {
                blender: "blender".into(),
            },
            Access::writing(vec![results.clone()]),
        );
        assert_eq!(workers.worker_config(&request).unwrap().containment, None);
        assert!(!results.exists());
    }

    #[test]
    fn a_request_names_its_worker_and_its_assets() {
        let (workers, folder) = workers(ContainmentPolicy::Off);
        let assets = folder.path().join("assets");
        let request = WorkerRequest::new(
            BlenderLauncher::Binary {
                blender: "blender".into(),
            },
            Access::default(),
        )
        .with_assets(Some(&assets))
        .named("user-alice".to_owned());
        let config = workers.worker_config(&request).unwrap();
        assert_eq!(config.name, "user-alice");
        assert_eq!(
            config.program_env,
            vec![(ASSETS_DIR_ENV.to_owned(), assets)]
        );
    }
}
