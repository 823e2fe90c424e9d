//! Round trips, user exceptions, hangs and crashes, on real Blender.

use std::time::Duration;

use viga_blender::bridge::BridgeMode;
use viga_blender::{
    BlenderCommands, LostReason, Recovery, TransportError, Worker, WorkerConfig, WorkerPool,
};
use viga_protocol::bridge::SceneReset;
use viga_protocol::iteration::FailureClass;
use viga_testkit::{BLENDER_TEST_LIMIT, within};

#[tokio::test]
async fn round_trip_with_handshake_facts() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let worker = super::worker().await;
        assert!(
            worker.hello().blender_version.starts_with("5."),
            "{:?}",
            worker.hello()
        );
        assert!(worker.hello().capabilities.iter().any(|c| c == "render"));
        worker.ping().await.unwrap();
        let result = worker
            .execute("print('hello from blender')\nx = 2 + 2\n", None, None)
            .await
            .unwrap();
        assert!(result.succeeded(), "{result:?}");
        assert_eq!(result.stdout, "hello from blender\n");
        let busy = worker.blender_busy();
        assert!(busy > Duration::ZERO, "Blender reports the time it worked");
        worker.ping().await.unwrap();
        assert!(worker.blender_busy() >= busy);
        worker.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn exceptions_come_back_with_type_traceback_and_line() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let worker = super::worker().await;
        let code =
            "import bpy\n\ndef place():\n    bpy.data.objects['Missing'].location.x = 1\n\nplace()\n";
        let result = worker
            .execute(code, Some(SceneReset::Factory), None)
            .await
            .unwrap();
        let error = result.error.expect("the program raised");
        assert_eq!(error.error_type, "KeyError");
        assert_eq!(error.line, Some(4), "{error:?}");
        assert!(
            error.traceback.contains("<viga-program>"),
            "{}",
            error.traceback
        );
        assert!(
            error.traceback.contains("bpy.data.objects['Missing']"),
            "source line shown: {}",
            error.traceback
        );
        assert!(
            !error.traceback.contains("viga_bridge"),
            "bridge frames hidden: {}",
            error.traceback
        );

        let syntax = worker.execute("x = 1\ny = (\n", None, None).await.unwrap();
        let error = syntax.error.expect("a syntax error");
        assert_eq!(error.error_type, "SyntaxError");
        assert_eq!(error.line, Some(2), "{error:?}");

        let exit = worker
            .execute("import sys\nsys.exit(3)\n", None, None)
            .await
            .unwrap();
        assert_eq!(
            exit.error.expect("SystemExit is caught").error_type,
            "SystemExit"
        );
        worker
            .ping()
            .await
            .expect("the worker survives its program's exceptions");
        assert_eq!(worker.restarts(), 0);
    })
    .await;
}

#[tokio::test]
async fn an_infinite_loop_times_out_and_the_worker_restarts() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let worker = super::worker().await;
        let err = worker
            .execute(
                "while True:\n    pass\n",
                None,
                Some(Duration::from_secs(2)),
            )
            .await
            .unwrap_err();
        assert_eq!(err.failure_class(), FailureClass::E0);
        match &err {
            TransportError::Lost {
                reason: LostReason::Timeout(limit),
                recovery: Recovery::Restarted { .. },
                ..
            } => assert_eq!(*limit, Duration::from_secs(2)),
            other => panic!("expected a timeout and a restart, got {other}"),
        }
        assert_eq!(worker.restarts(), 1);
        let result = worker.execute("print('alive')", None, None).await.unwrap();
        assert_eq!(result.stdout, "alive\n");
    })
    .await;
}

#[tokio::test]
async fn a_crash_restarts_and_restores_the_checkpoint() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let worker = super::worker().await;
        let build =
            "import bpy\nbpy.ops.mesh.primitive_cube_add()\nbpy.context.object.name = 'Keeper'\n";
        assert!(
            worker
                .execute(build, Some(SceneReset::Factory), None)
                .await
                .unwrap()
                .succeeded()
        );
        let checkpoint = worker.checkpoint().await.unwrap();
        let err = worker
            .execute("import os\nos._exit(1)\n", None, None)
            .await
            .unwrap_err();
        assert_eq!(err.failure_class(), FailureClass::E0);
        match &err {
            TransportError::Lost {
                reason: LostReason::Exited(_),
                recovery:
                    Recovery::Restarted {
                        restored_checkpoint: Some(path),
                    },
                ..
            } => assert_eq!(path, &checkpoint),
            other => panic!("expected exit, restart and restore, got {other}"),
        }
        let scene = worker.scene_info(0, 10).await.unwrap();
        let names: Vec<&str> = scene.objects.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(names, ["Keeper"]);
    })
    .await;
}

#[tokio::test]
async fn two_pooled_workers_run_in_parallel_with_independent_scenes() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let pool = WorkerPool::start(2, WorkerConfig::new(super::blender()))
            .await
            .unwrap();
        let (first, second) = (pool.acquire().await.unwrap(), pool.acquire().await.unwrap());
        let add = |name: &str| {
            format!(
                "import bpy\nbpy.ops.mesh.primitive_cube_add()\nbpy.context.object.name = '{name}'\n"
            )
        };
        let (code_a, code_b) = (add("OnlyInFirst"), add("OnlyInSecond"));
        let (a, b) = tokio::join!(
            first.execute(&code_a, Some(SceneReset::Factory), None),
            second.execute(&code_b, Some(SceneReset::Factory), None),
        );
        assert!(a.unwrap().succeeded() && b.unwrap().succeeded());
        let (a, b) = tokio::join!(first.scene_info(0, 10), second.scene_info(0, 10));
        assert_eq!(
            a.unwrap()
                .objects
                .iter()
                .map(|o| o.name.clone())
                .collect::<Vec<_>>(),
            ["OnlyInFirst"]
        );
        assert_eq!(
            b.unwrap()
                .objects
                .iter()
                .map(|o| o.name.clone())
                .collect::<Vec<_>>(),
            ["OnlyInSecond"]
        );
        assert_ne!(first.hello().pid, second.hello().pid);
        drop(first);
        let again = pool.acquire().await.unwrap();
        again.ping().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn queue_mode_serves_through_the_main_thread_queue() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let mut config = WorkerConfig::new(super::blender());
        config.mode = BridgeMode::Queue;
        let worker = Worker::start(config).await.unwrap();
        assert_eq!(worker.hello().mode, "queue");
        let result = worker
            .execute(
                "import bpy, threading\nprint(threading.current_thread() is threading.main_thread())\n",
                None,
                None,
            )
            .await
            .unwrap();
        assert_eq!(
            result.stdout, "True\n",
            "programs run on Blender's main thread"
        );
        let err = worker
            .execute(
                "while True:\n    pass\n",
                None,
                Some(Duration::from_secs(2)),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, TransportError::Lost { .. }), "{err}");
        worker.ping().await.unwrap();
    })
    .await;
}
