//! python-pptx programs: errors as data, time limits, leftovers, what they can see.

use std::time::{Duration, Instant};

use viga_slides::ProgramStatus;
use viga_testkit::within;

use super::{LIMIT, TWO_SLIDES, worker};

#[tokio::test]
async fn a_broken_program_gives_its_error_and_traceback_as_data() {
    within(LIMIT, "the test", async {
        let worker = worker().await;
        let broken = "from pptx import Presentation\nprs = Presentation()\nslide = prs.slides.add_slide(prs.slide_layouts[99])\n";
        let result = worker.run_program(broken, None).await.unwrap();
        assert!(result.deck.is_none());
        let ProgramStatus::Failed(error) = &result.run.status else {
            panic!("{:?}", result.run.status);
        };
        assert_eq!(error.kind, "IndexError");
        assert_eq!(error.line, Some(3));
        assert!(error.traceback.contains("File \"program.py\", line 3"), "{}", error.traceback);
        assert!(error.traceback.contains("prs.slide_layouts[99]"), "the line's source: {}", error.traceback);
        assert!(!error.traceback.contains("run_program.py"), "viga's runner is not shown: {}", error.traceback);

        let result = worker.run_program("x = 1\nif x\n    pass\n", None).await.unwrap();
        let ProgramStatus::Failed(error) = &result.run.status else {
            panic!("{:?}", result.run.status);
        };
        assert_eq!(error.kind, "SyntaxError");
        assert_eq!(error.line, Some(2));

        let result = worker.run_program("import sys\nprint('bye')\nsys.exit(3)\n", None).await.unwrap();
        assert!(matches!(&result.run.status, ProgramStatus::Failed(error) if error.kind == "SystemExit"), "{:?}", result.run.status);
        assert_eq!(result.run.stdout.text, "bye\n");

        let result = worker.run_program("print('no deck')\n", None).await.unwrap();
        let ProgramStatus::NoDeck { detail } = &result.run.status else {
            panic!("{:?}", result.run.status);
        };
        assert!(detail.contains("VIGA_DECK_PATH"), "{detail}");

        let result = worker.run_program("import os\nos._exit(9)\n", None).await.unwrap();
        assert!(matches!(&result.run.status, ProgramStatus::Died { detail } if detail.contains("9")), "{:?}", result.run.status);
        worker.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn an_endless_program_is_stopped_at_its_limit_and_the_next_one_works() {
    within(LIMIT, "the test", async {
        let worker = worker().await;
        // It also starts a process that would outlive it, and says where to find it.
        let endless = "import subprocess\nchild = subprocess.Popen(['sleep', '300'])\nprint(child.pid, flush=True)\nwhile True:\n    pass\n";
        let started = Instant::now();
        let result = worker.run_program(endless, Some(Duration::from_secs(2))).await.unwrap();
        assert_eq!(result.run.status, ProgramStatus::TimedOut { limit_ms: 2000 });
        assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
        let leftover: u32 = result.run.stdout.text.trim().parse().unwrap();
        assert!(!running(leftover), "the program's child {leftover} outlived it");

        let result = worker.run_program(TWO_SLIDES, None).await.unwrap();
        assert_eq!(result.run.status, ProgramStatus::Saved, "{}", result.run.stderr.text);
        let render = worker.render(result.deck.as_ref().unwrap(), 100).await.unwrap();
        assert_eq!(render.slides.len(), 2);
        worker.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_program_sees_no_secrets_and_writes_its_home_in_the_scratch_folder() {
    within(LIMIT, "the test", async {
        let worker = worker().await;
        let program =
            "import os\nprint(sorted(os.environ))\nprint(os.environ['HOME'])\nprint(os.getcwd())\n";
        let result = worker.run_program(program, None).await.unwrap();
        let printed = &result.run.stdout.text;
        for secret in [
            "API_KEY",
            "TOKEN",
            "DISPLAY",
            "DBUS",
            "SSH_AUTH_SOCK",
            "CARGO",
        ] {
            assert!(
                !printed.contains(secret),
                "{secret} reaches the program: {printed}"
            );
        }
        let scratch = worker.scratch_folder().canonicalize().unwrap();
        let lines: Vec<&str> = printed.lines().collect();
        assert!(lines[1].starts_with(scratch.to_str().unwrap()), "{printed}");
        assert_eq!(lines[1], lines[2], "home is the working folder");
        worker.shutdown().await;
    })
    .await;
}

fn running(pid: u32) -> bool {
    // A zombie is dead; it only waits to be reaped by whoever inherited it.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| !stat.contains(") Z "))
}
