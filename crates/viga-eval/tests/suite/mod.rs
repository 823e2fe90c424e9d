mod agent;
mod blenderbench;
#[cfg(feature = "clip")]
mod clip;
mod flat;
mod fresh;
mod honesty;
mod judge;
mod layout;
mod mini;
mod search;

/// A pool of `workers` warm Blenders, the project's own (not contained: these tests run the
/// programs of the fixtures, not a model's).
async fn warm_pool(workers: usize) -> std::sync::Arc<viga_blender::WorkerPool> {
    let config = viga_blender::WorkerConfig::new(viga_blender::locate().unwrap());
    std::sync::Arc::new(
        viga_blender::WorkerPool::start(workers, config)
            .await
            .unwrap(),
    )
}
