//! A pool of warm workers for parallel jobs: each job borrows a whole worker (and so a whole
//! scene) and gives it back when the borrow ends.

use std::ops::Deref;

use tokio::sync::{Mutex, mpsc};

use crate::transport::TransportError;
use crate::worker::{Worker, WorkerConfig};

#[derive(Debug)]
pub struct WorkerPool {
    home: mpsc::UnboundedSender<Worker>,
    idle: Mutex<mpsc::UnboundedReceiver<Worker>>,
    size: usize,
}

impl WorkerPool {
    /// Starts `size` workers at once, named `<name>-0`, `<name>-1`, ...
    pub async fn start(size: usize, config: WorkerConfig) -> Result<Self, TransportError> {
        if size == 0 {
            return Err(TransportError::Start(
                "a worker pool needs at least one worker".to_owned(),
            ));
        }
        let mut starting = tokio::task::JoinSet::new();
        for index in 0..size {
            let mut config = config.clone();
            config.name = format!("{}-{index}", config.name);
            starting.spawn(Worker::start(config));
        }
        let (home, idle) = mpsc::unbounded_channel();
        while let Some(joined) = starting.join_next().await {
            let worker = joined.map_err(|err| {
                TransportError::Start(format!("a worker failed to start: {err}"))
            })??;
            // The receiver is alive in this scope, so sending cannot fail.
            let _ = home.send(worker);
        }
        Ok(Self {
            home,
            idle: Mutex::new(idle),
            size,
        })
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// Waits for an idle worker and lends it out until the returned guard is dropped.
    pub async fn acquire(&self) -> Result<PooledWorker, TransportError> {
        let worker = self
            .idle
            .lock()
            .await
            .recv()
            .await
            .ok_or_else(|| TransportError::Start("the worker pool is closed".to_owned()))?;
        Ok(PooledWorker {
            worker: Some(worker),
            home: self.home.clone(),
        })
    }
}

/// A worker borrowed from a pool.
#[derive(Debug)]
pub struct PooledWorker {
    worker: Option<Worker>,
    home: mpsc::UnboundedSender<Worker>,
}

impl Deref for PooledWorker {
    type Target = Worker;

    fn deref(&self) -> &Worker {
        match &self.worker {
            Some(worker) => worker,
            // `worker` is only taken in Drop.
            None => unreachable!("a pooled worker is present until dropped"),
        }
    }
}

impl Drop for PooledWorker {
    fn drop(&mut self) {
        if let Some(worker) = self.worker.take() {
            // The pool may be gone already; the worker is then dropped and its process killed.
            let _ = self.home.send(worker);
        }
    }
}
