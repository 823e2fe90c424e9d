//! viga inside Blender, on real Blender: the extension installed from its zip in a headless
//! host (`viga addon host`'s machinery, timers driven by a loop), then `viga ... --attach`
//! against it as against a person's Blender.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers may panic: that is how tests fail

use crate::support;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use viga_blender::addon::{HostOptions, RunningHost, build_zip, start_host};
use viga_blender::attach::{Connection, attach};
use viga_blender::client::FramedClient;
use viga_blender::{BlenderCommands as _, locate};
use viga_testkit::scene::SCENE_DUMP;
use viga_testkit::{BLENDER_TEST_LIMIT, kill_after, output_within, status_within, within};

const VIGA: &str = env!("CARGO_BIN_EXE_viga");

/// A headless Blender with the viga extension installed from its zip, as a person would
/// have it; killed when dropped.
struct Host {
    child: Child,
    connection: PathBuf,
    dir: tempfile::TempDir,
}

impl Host {
    fn start(blend: Option<&Path>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let zip = build_zip(&dir.path().join("dist")).unwrap();
        let options = HostOptions {
            user_dir: dir.path().join("blender-user"),
            blend: blend.map(Path::to_path_buf),
            stats: None,
            connection_dir: Some(dir.path().join("connections")),
            addons: None,
            server: None,
        };
        let RunningHost { child, connection } =
            start_host(&locate().unwrap(), &zip, &options, BLENDER_TEST_LIMIT).unwrap();
        Self {
            child,
            connection,
            dir,
        }
    }

    fn connection_dir(&self) -> PathBuf {
        self.dir.path().join("connections")
    }

    /// viga with this host's connection folder.
    fn viga(&self) -> Command {
        let mut command = Command::new(VIGA);
        command.env("VIGA_CONNECTION_DIR", self.connection_dir());
        command
    }

    async fn client(&self) -> Arc<FramedClient> {
        let connection = Connection::read(&self.connection).unwrap();
        Arc::new(attach(&connection, Duration::from_secs(60)).await.unwrap())
    }

    /// Ends the host as Blender ends: SIGTERM, the add-on disabled.
    fn stop(mut self) -> std::process::ExitStatus {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        // A host that hangs on the way out is killed, and the caller's check of its status fails.
        let watchdog = kill_after(&self.child, BLENDER_TEST_LIMIT, "the host after SIGTERM");
        let status = self.child.wait().unwrap();
        drop(watchdog);
        status
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The scene's render engine, size and output format, as a line.
async fn render_settings(client: &FramedClient) -> String {
    let code = "import bpy\nr = bpy.context.scene.render\nprint(r.engine, r.resolution_x, r.resolution_y, r.resolution_percentage, r.image_settings.file_format, r.filepath)";
    client.execute(code, None, None).await.unwrap().stdout
}

/// The names of the scene's camera datablocks, as a line.
async fn camera_data(client: &FramedClient) -> String {
    let code = "import bpy\nprint(sorted(c.name for c in bpy.data.cameras))";
    client.execute(code, None, None).await.unwrap().stdout
}

async fn object_names(client: &FramedClient) -> Vec<String> {
    let info = client.scene_info(0, 500).await.unwrap();
    let mut names: Vec<String> = info.objects.iter().map(|o| o.name.clone()).collect();
    names.sort();
    names
}

/// A .blend as a person's file: a cube named UserCube, a plane named Plane.
fn user_blend(dir: &Path) -> PathBuf {
    let path = dir.join("user.blend");
    let script = format!(
        "import bpy\nbpy.ops.wm.read_factory_settings(use_empty=True)\n\
         bpy.ops.mesh.primitive_cube_add(location=(3, 0, 0))\nbpy.context.object.name = 'UserCube'\n\
         bpy.ops.mesh.primitive_plane_add(size=4)\nbpy.context.object.name = 'Plane'\n\
         bpy.ops.wm.save_as_mainfile(filepath={:?})\n",
        path.display().to_string()
    );
    let status = status_within(
        Command::new(python(&locate().unwrap()))
            .args(["-c", &script])
            .stdout(Stdio::null()),
        BLENDER_TEST_LIMIT,
    );
    assert!(status.success());
    path
}

fn python(launcher: &viga_blender::BlenderLauncher) -> PathBuf {
    match launcher {
        viga_blender::BlenderLauncher::PythonModule { python } => python.clone(),
        viga_blender::BlenderLauncher::Binary { .. } => {
            panic!("these tests need the bpy module (cargo xtask setup)")
        }
    }
}

fn workspace_file(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(relative)
}

fn stdout_lines(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_zip_installs_and_its_connection_file_is_private_and_goes_away_on_disable() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let host = Host::start(None);
        use std::os::unix::fs::PermissionsExt as _;
        let file_mode = std::fs::metadata(&host.connection)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(file_mode & 0o777, 0o600);
        let dir_mode = std::fs::metadata(host.connection.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dir_mode & 0o777, 0o700);
        let client = host.client().await;
        assert_eq!(client.hello().mode, "addon");
        // A person's file is never replaced or closed by a client.
        let refused = client.load_blend("/nonexistent.blend").await.unwrap_err();
        assert!(
            refused.to_string().contains("belongs to its user"),
            "{refused}"
        );
        drop(client);
        let connection = host.connection.clone();
        assert!(host.stop().success());
        assert!(
            !connection.exists(),
            "the connection file outlived the add-on"
        );
    })
    .await;
}

/// The scene and the file of `client` written down ([`SCENE_DUMP`]).
async fn scene_dump(client: &FramedClient) -> Value {
    let result = client.execute(SCENE_DUMP, None, None).await.unwrap();
    assert!(result.succeeded(), "{result:?}");
    serde_json::from_str(result.stdout.trim()).unwrap()
}

/// One undo in `client` gives back the scene written down as `before`.
async fn undo_gives_back(client: &FramedClient, before: &Value) {
    client.undo().await.unwrap();
    assert_eq!(
        &scene_dump(client).await,
        before,
        "one undo gives the scene back"
    );
}

/// Runs `expression` in `client` and returns what it printed.
async fn print_in(client: &FramedClient, expression: &str) -> String {
    let code = format!("import bpy\nprint({expression})\n");
    let result = client.execute(&code, None, None).await.unwrap();
    assert!(result.succeeded(), "{result:?}");
    result.stdout.trim().to_owned()
}

/// Waits until the panel of `host` says its result is applied, and returns its log. The
/// bridge serves one client at a time, and `viga apply` is one while it works: a look that
/// finds it busy is tried again.
async fn panel_applied(host: &Host) -> String {
    let connection = Connection::read(&host.connection).unwrap();
    let look = "import bpy\nstatus = bpy.context.window_manager.viga_run\n\
                print(status.applied, [line.text for line in status.log])\n";
    let started = Instant::now();
    loop {
        assert!(
            started.elapsed() < BLENDER_TEST_LIMIT,
            "the panel's apply did not end"
        );
        if let Ok(client) = attach(&connection, Duration::from_secs(10)).await
            && let Ok(result) = client.execute(look, None, None).await
            && result.stdout.starts_with("True")
        {
            return result.stdout;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `viga apply RUN --connection <host's>` with `extra` flags.
fn viga_apply(host: &Host, run_folder: &Path, extra: &[&str]) -> Output {
    let mut command = host.viga();
    command
        .arg("apply")
        .arg(run_folder)
        .arg("--connection")
        .arg(&host.connection)
        .args(extra)
        .stdin(Stdio::null());
    output_within(&mut command, BLENDER_TEST_LIMIT)
}

/// The run folder of an attached `viga run --events jsonl` that ended accepted.
fn accepted_run_folder(output: &Output) -> PathBuf {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let lines = stdout_lines(output);
    let finished = lines.last().unwrap();
    assert_eq!(finished["kind"], "finished", "{lines:?}");
    assert_eq!(finished["stop"]["reason"], "accepted", "{lines:?}");
    run_folder_of(output)
}

/// A scripted session without plans: each program of `programs` is one iteration, and the
/// verifier accepts the last one.
fn iterations_script(dir: &Path, programs: &[&str]) -> PathBuf {
    let mut turns = Vec::new();
    for (index, program) in programs.iter().enumerate() {
        let accepted = index + 1 == programs.len();
        turns.push(json!({"response": {"text": format!("```python\n{program}```"), "finish_reason": "stop"}}));
        turns.push(
            json!({"response": {"text": "", "finish_reason": "tool_calls", "tool_calls": [
                {"id": format!("v{index}"), "name": "end_process", "arguments": {
                    "visual_differences": if accepted { vec![] } else { vec!["not yet"] },
                    "suggestions": [], "accepted": accepted}}
            ]}}),
        );
    }
    support::script_file(dir, "iterations.json", Value::from(turns))
}

/// `viga run --attach` on `host` with `script`, contained as `--containment require` says,
/// never applying the result itself.
fn attached_run(host: &Host, files: &Path, script: &Path, iterations: usize) -> Output {
    let mut command = host.viga();
    command
        .args(["--containment", "require"])
        // The process limit cannot hold as root; it has tests of its own.
        .args(viga_testkit::process_limit_flag_off_as_root())
        .args(["run", "--attach", "--apply", "never"])
        .args(["--events", "jsonl", "--no-plan", "--task", "a scene"])
        .args(["--provider", "scripted", "--script"])
        .arg(script)
        .args([
            "--max-iterations",
            &iterations.to_string(),
            "--resolution",
            "32",
        ])
        .arg("--output")
        .arg(files.join("runs"))
        .stdin(Stdio::null());
    output_within(&mut command, BLENDER_TEST_LIMIT)
}

/// An attached run works on a copy; its result comes into the person's scene as data,
/// matching what the program built, as one undo step that one undo takes back exactly; and
/// any iteration that ran can be applied the same way.
#[tokio::test(flavor = "multi_thread")]
async fn an_attached_run_leaves_the_scene_alone_then_applies_the_result_as_one_undo_step() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let files = tempfile::tempdir().unwrap();
        let blend = user_blend(files.path());
        let blend_before = std::fs::read(&blend).unwrap();
        let host = Host::start(Some(&blend));
        let client = host.client().await;
        assert_eq!(object_names(&client).await, ["Plane", "UserCube"]);
        let before = scene_dump(&client).await;
        drop(client);

        let mut command = host.viga();
        command
            .args(["run", "--attach", "--apply", "always", "--events", "jsonl"])
            .args([
                "--task",
                "a red crate on a grey floor",
                "--provider",
                "scripted",
                "--script",
            ])
            .arg(workspace_file("fixtures/sessions/demo.json"))
            .args(["--max-iterations", "3", "--resolution", "48", "--output"])
            .arg(files.path().join("runs"));
        let output = output_within(&mut command, BLENDER_TEST_LIMIT);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let run_folder = accepted_run_folder(&output);
        assert_eq!(
            stdout_lines(&output).last().unwrap()["v"],
            1,
            "every line carries the stream's version"
        );
        assert!(
            run_folder.join("base.blend").is_file(),
            "no snapshot of the user's scene"
        );
        assert!(
            stderr.contains("as one undo step")
                && stderr.contains("added")
                && stderr.contains("Crate"),
            "{stderr}"
        );

        // What the final program built (demo.json's second iteration), with the person's
        // objects as they were.
        let client = host.client().await;
        let after = scene_dump(&client).await;
        let crate_ = &after[0]["Crate"];
        assert_eq!(crate_[0], "MESH");
        assert_eq!(crate_[1], json!([0.0, 0.0, 0.8]), "{after}");
        assert_eq!(crate_[2], json!([0.0, 0.0, 0.5]), "{after}");
        assert_eq!(crate_[5], json!(["Crate"]), "{after}");
        assert_eq!(after[4]["Crate"], json!([0.8, 0.1, 0.05, 1.0]), "{after}");
        assert_eq!(after[0]["Floor"][5], json!(["Floor"]), "{after}");
        assert_eq!(after[1], "Camera1", "the run made its camera the scene's");
        for name in ["Plane", "UserCube"] {
            assert_eq!(after[0][name], before[0][name], "{name}");
        }
        assert!(after[0].get("Sun").is_some(), "{after}");
        undo_gives_back(&client, &before).await;
        drop(client);

        // The first iteration's program: the smaller blue crate.
        let first = viga_apply(&host, &run_folder, &["--iteration", "1"]);
        assert!(
            first.status.success(),
            "{}",
            String::from_utf8_lossy(&first.stderr)
        );
        let client = host.client().await;
        let after = scene_dump(&client).await;
        assert_eq!(after[0]["Crate"][1], json!([0.0, 0.0, 0.4]), "{after}");
        assert_eq!(after[4]["Crate"], json!([0.1, 0.2, 0.8, 1.0]), "{after}");
        undo_gives_back(&client, &before).await;
        drop(client);

        // The panel's Apply: `viga apply` as a child of the person's Blender, attaching back
        // to it while the panel's timer waits for it to end.
        let client = host.client().await;
        let final_program = run_folder.join("final.py");
        // The add-on finds viga where its preferences say (a person sets it, or has viga on
        // the PATH Blender started with).
        let press_apply = format!(
            "import bpy\n\
             viga = [a for a in bpy.context.preferences.addons if a.module.endswith('viga_blender')]\n\
             viga[0].preferences.viga_path = {:?}\n\
             status = bpy.context.window_manager.viga_run\n\
             status.state, status.kind, status.task = 'FINISHED', 'SCENE', 'a red crate'\n\
             status.run_folder, status.final_program, status.applied = {:?}, {:?}, False\n\
             print(bpy.ops.viga.apply_result('EXEC_DEFAULT'))\n",
            VIGA,
            run_folder.display().to_string(),
            final_program.display().to_string()
        );
        let pressed = client.execute(&press_apply, None, None).await.unwrap();
        assert!(pressed.stdout.contains("FINISHED"), "{pressed:?}");
        drop(client);
        let applied = panel_applied(&host).await;
        assert!(
            applied.contains("added") && applied.contains("Crate"),
            "{applied}"
        );
        let client = host.client().await;
        let after = scene_dump(&client).await;
        assert_eq!(after[0]["Crate"][1], json!([0.0, 0.0, 0.8]), "{after}");
        undo_gives_back(&client, &before).await;
        drop(client);

        let missing = viga_apply(&host, &run_folder, &["--iteration", "9"]);
        let message = one_line_error(&missing);
        assert!(
            message.contains("no program of iteration 9")
                && message.contains("iterations with a program: 1, 2"),
            "{message}"
        );
        assert_eq!(
            std::fs::read(&blend).unwrap(),
            blend_before,
            "the user's .blend was written"
        );
    })
    .await;
}

/// A result that carries a text, a driver needing Python, data linked from another file or a
/// script node is refused, and the person's scene stays exactly as it was.
#[tokio::test(flavor = "multi_thread")]
async fn a_result_carrying_code_or_links_is_refused_and_the_scene_is_untouched() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let files = tempfile::tempdir().unwrap();
        let host = Host::start(Some(&user_blend(files.path())));
        let programs = [
            "import bpy\nobj = bpy.data.objects.new('Notes', None)\nbpy.context.scene.collection.objects.link(obj)\n\
             text = bpy.data.texts.new('evil.py')\ntext.from_string('print(1)')\ntext.use_module = True\nobj['notes'] = text\n",
            "import bpy\nbpy.ops.mesh.primitive_cube_add()\nobj = bpy.context.object\nobj.name = 'Driven'\n\
             curve = obj.driver_add('location', 0)\ncurve.driver.type = 'SCRIPTED'\n\
             curve.driver.expression = \"__import__('os').getpid()\"\n",
            "import bpy, os, tempfile\npath = os.path.join(tempfile.gettempdir(), 'elsewhere.blend')\n\
             bpy.data.libraries.write(path, {bpy.data.meshes.new('Far')}, fake_user=True)\n\
             with bpy.data.libraries.load(path, link=True) as (source, target):\n    target.meshes = ['Far']\n\
             obj = bpy.data.objects.new('Linker', target.meshes[0])\nbpy.context.scene.collection.objects.link(obj)\n",
            "import bpy\nbpy.ops.mesh.primitive_cube_add()\nobj = bpy.context.object\nobj.name = 'Scripted'\n\
             material = bpy.data.materials.new('Osl')\nnode = material.node_tree.nodes.new('ShaderNodeScript')\n\
             node.mode = 'EXTERNAL'\nnode.filepath = '/tmp/evil.osl'\nobj.data.materials.append(material)\n",
            // What issue #32 measured: an Import OBJ node aimed at the home folder.
            "import bpy, os\ntree = bpy.data.node_groups.new('Reader', 'GeometryNodeTree')\n\
             tree.interface.new_socket('Geometry', in_out='OUTPUT', socket_type='NodeSocketGeometry')\n\
             node = tree.nodes.new('GeometryNodeImportOBJ')\nnode.inputs['Path'].default_value = os.path.expanduser('~')\n\
             tree.links.new(node.outputs[0], tree.nodes.new('NodeGroupOutput').inputs[0])\n\
             bpy.ops.mesh.primitive_cube_add()\nbpy.context.object.modifiers.new('Reader', 'NODES').node_group = tree\n",
        ];
        let script = iterations_script(files.path(), &programs);
        let run_folder = accepted_run_folder(&attached_run(&host, files.path(), &script, programs.len()));
        let client = host.client().await;
        let before = scene_dump(&client).await;
        drop(client);
        let needles = [
            "Text 'evil.py'",
            "driver that needs Python",
            "linked from another file",
            "script node",
            "holds an Import OBJ node, which would read a file in your Blender",
        ];
        for (index, needle) in needles.iter().enumerate() {
            let iteration = (index + 1).to_string();
            let refused = viga_apply(&host, &run_folder, &["--iteration", &iteration]);
            let message = one_line_error(&refused);
            assert!(
                message.contains("refused") && message.contains(needle),
                "iteration {iteration}: {message}"
            );
            let client = host.client().await;
            assert_eq!(
                scene_dump(&client).await,
                before,
                "iteration {iteration}: the scene changed"
            );
        }
    })
    .await;
}

/// A texture the run loaded from its own assets comes into the person's scene packed (the
/// worker packs it before it saves the result): the person's Blender reads no file for it.
#[tokio::test(flavor = "multi_thread")]
async fn an_image_from_the_runs_assets_comes_in_packed() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let files = tempfile::tempdir().unwrap();
        let host = Host::start(Some(&user_blend(files.path())));
        // The picture is put in the run's assets after the run, so while it runs the
        // program makes the crate without it.
        let program = "import bpy, os\npath = os.path.join(os.environ['VIGA_ASSETS_DIR'], 'wood.png')\n\
             material = bpy.data.materials.new('Wood')\nnode = material.node_tree.nodes.new('ShaderNodeTexImage')\n\
             node.image = bpy.data.images.load(path) if os.path.isfile(path) else None\n\
             bpy.ops.mesh.primitive_cube_add()\nobj = bpy.context.object\nobj.name = 'Crate'\n\
             obj.data.materials.append(material)\n";
        let script = iterations_script(files.path(), &[program]);
        let run_folder = accepted_run_folder(&attached_run(&host, files.path(), &script, 1));
        let client = host.client().await;
        let make_png = format!(
            "import bpy\nimage = bpy.data.images.new('png', 4, 4)\nimage.filepath_raw = {:?}\n\
             image.file_format = 'PNG'\nimage.save()\nbpy.data.images.remove(image)\n",
            run_folder.join("assets/wood.png").display().to_string()
        );
        assert!(client.execute(&make_png, None, None).await.unwrap().succeeded());
        drop(client);
        let applied = viga_apply(&host, &run_folder, &[]);
        assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
        let client = host.client().await;
        assert_eq!(
            print_in(&client, "[(i.name, i.packed_file is not None) for i in bpy.data.images]").await,
            "[('wood.png', True)]"
        );
    })
    .await;
}

/// A model's program that writes a file and reads a canary, applied as data: it runs only in
/// viga's contained worker, so nothing of it happens in the person's Blender (no file, no
/// canary, no trace in the process) and what comes in is the scene it could build there.
/// Trusted mode, confirmed, runs it in the person's Blender, where it gets both.
#[tokio::test(flavor = "multi_thread")]
async fn an_attacking_program_applied_as_data_never_runs_in_the_persons_blender() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let files = tempfile::tempdir().unwrap();
        let loot = files.path().join("loot");
        std::fs::create_dir(&loot).unwrap();
        let canary = files.path().join("canary.txt");
        std::fs::write(&canary, "canary-5d1f").unwrap();
        let program = format!(
            "import bpy, os\n\
             try:\n    mark = open({canary:?}).read()\nexcept OSError:\n    mark = 'unreadable'\n\
             try:\n    open(os.path.join({loot:?}, 'written-%d' % os.getpid()), 'w').write(mark)\nexcept OSError:\n    pass\n\
             bpy.app.driver_namespace['viga_ran_here'] = mark\n\
             bpy.ops.mesh.primitive_cube_add(location=(0, 0, 4))\nobj = bpy.context.object\nobj.name = 'Loot'\nobj['mark'] = mark\n",
            canary = canary.display().to_string(),
            loot = loot.display().to_string(),
        );
        let host = Host::start(Some(&user_blend(files.path())));
        let host_pid = host.child.id();
        let script = iterations_script(files.path(), &[&program]);
        let run_folder = accepted_run_folder(&attached_run(&host, files.path(), &script, 1));
        let client = host.client().await;
        let before = scene_dump(&client).await;
        drop(client);

        let mut applied = host.viga();
        applied
            .args(["--containment", "require"])
            .args(viga_testkit::process_limit_flag_off_as_root())
            .arg("apply")
            .arg(&run_folder)
            .arg("--connection")
            .arg(&host.connection)
            .stdin(Stdio::null());
        let applied = output_within(&mut applied, BLENDER_TEST_LIMIT);
        assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
        let client = host.client().await;
        let after = scene_dump(&client).await;
        assert_eq!(after[0]["Loot"][8], json!({"mark": "unreadable"}), "{after}");
        assert!(!after.to_string().contains("canary-5d1f"), "{after}");
        assert_eq!(
            print_in(&client, "bpy.app.driver_namespace.get('viga_ran_here')").await,
            "None",
            "the program ran in the person's Blender"
        );
        let written: Vec<_> = std::fs::read_dir(&loot).unwrap().collect();
        assert!(written.is_empty(), "the program wrote {written:?}");
        undo_gives_back(&client, &before).await;
        drop(client);

        // Trusted mode needs a confirmation; nobody at a terminal is a no.
        let unconfirmed = viga_apply(&host, &run_folder, &["--trusted"]);
        assert!(one_line_error(&unconfirmed).contains("was not confirmed"));
        assert!(std::fs::read_dir(&loot).unwrap().next().is_none());
        let trusted = viga_apply(&host, &run_folder, &["--trusted", "--confirm-trusted"]);
        assert!(trusted.status.success(), "{}", String::from_utf8_lossy(&trusted.stderr));
        let in_host = loot.join(format!("written-{host_pid}"));
        assert_eq!(std::fs::read_to_string(&in_host).unwrap(), "canary-5d1f");
        let client = host.client().await;
        assert_eq!(
            print_in(&client, "bpy.app.driver_namespace.get('viga_ran_here')").await,
            "canary-5d1f"
        );
    })
    .await;
}

fn gn_script(dir: &Path, delay_first_ms: u64) -> PathBuf {
    gn_script_with(dir, delay_first_ms, &[])
}

/// A scripted Geometry Nodes session: one reply that scatters points on the Plane (group and
/// modifier "Scatter"), with `more` steps after it, and says it is done.
fn gn_script_with(dir: &Path, delay_first_ms: u64, more: &[Value]) -> PathBuf {
    let mut steps = vec![
        json!({"id": "scatter", "type": "GN_OPS", "payload": {"ops": [
            {"op": "ensure_target", "object": "Plane", "modifier": "Scatter"},
            {"op": "ensure_single_group_io"},
            {"op": "add_node", "id": "points", "bl_idname": "GeometryNodeDistributePointsOnFaces"},
            {"op": "link", "from_node": "Group Input", "from_socket": "Geometry", "to_node": "points", "to_socket": "Mesh"},
            {"op": "link", "from_node": "points", "from_socket": "Points", "to_node": "Group Output", "to_socket": "Geometry"}
        ]}}),
    ];
    steps.extend(more.iter().cloned());
    let reply =
        json!({"version": 1, "steps": steps, "done": true, "final_message": "points on the plane"});
    let turns = json!([{"response": {"text": reply.to_string(), "finish_reason": "stop"}, "delay_ms": delay_first_ms}]);
    support::script_file(dir, "gn.json", turns)
}

/// A PYTHON step that gives the Scatter modifier a Density input of 7.5, and marks the cube:
/// the mark shows where the step ran, since only node groups and modifiers come back from a
/// copy.
fn density_and_mark_step() -> Value {
    let code = "tree = bpy.data.node_groups['Scatter']\n\
                socket = tree.interface.new_socket('Density', in_out='INPUT', socket_type='NodeSocketFloat')\n\
                bpy.data.objects['Plane'].modifiers['Scatter'][socket.identifier] = 7.5\n\
                bpy.data.objects['UserCube']['viga_mark'] = 1\n";
    json!({"id": "density", "type": "PYTHON", "payload": {"code": code}})
}

async fn plane_modifiers(client: &FramedClient) -> Vec<String> {
    let info = client.scene_info(0, 500).await.unwrap();
    let plane = info.objects.iter().find(|o| o.name == "Plane").unwrap();
    plane.modifiers.iter().map(|m| m.name.clone()).collect()
}

/// The Scatter modifier's Density and whether the cube carries the mark, as a line.
async fn density_and_mark(client: &FramedClient) -> String {
    let code = "import bpy\n\
                modifier = bpy.data.objects['Plane'].modifiers.get('Scatter')\n\
                values = [v for k, v in modifier.items() if isinstance(v, float)] if modifier else []\n\
                print(values, 'viga_mark' in bpy.data.objects['UserCube'])";
    client
        .execute(code, None, None)
        .await
        .unwrap()
        .stdout
        .trim()
        .to_owned()
}

/// `viga gn` attached to `host`, on the Plane, with a scripted session and `extra` flags.
fn gn_attached_command(host: &Host, files: &Path, script: &Path, extra: &[&str]) -> Command {
    let mut command = host.viga();
    command
        .args([
            "gn",
            "scatter points on the plane",
            "--attach",
            "--object",
            "Plane",
        ])
        .args(["--events", "jsonl", "--provider", "scripted", "--script"])
        .arg(script)
        .arg("--output")
        .arg(files.join("runs"))
        .args(extra)
        .stdin(Stdio::null());
    command
}

fn gn_attached(host: &Host, files: &Path, script: &Path, extra: &[&str]) -> Output {
    output_within(
        &mut gn_attached_command(host, files, script, extra),
        BLENDER_TEST_LIMIT,
    )
}

fn run_folder_of(output: &Output) -> PathBuf {
    stdout_lines(output)
        .iter()
        .find(|line| line["kind"] == "run_folder")
        .and_then(|line| line["path"].as_str())
        .map(PathBuf::from)
        .unwrap()
}

/// Attached, a Geometry Nodes run works on a copy in viga's own contained worker; when it is
/// done its node groups and modifiers (with their input values) come into the person's scene
/// as one undo step. What else its steps did stays in the copy.
#[tokio::test(flavor = "multi_thread")]
async fn gn_attached_works_on_a_copy_and_brings_the_result_back_as_one_undo_step() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let files = tempfile::tempdir().unwrap();
        let host = Host::start(Some(&user_blend(files.path())));
        let script = gn_script_with(files.path(), 0, &[density_and_mark_step()]);
        let output = gn_attached(&host, files.path(), &script, &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{stderr}");
        assert!(
            stderr.contains("in your scene as one undo step: node groups Scatter"),
            "{stderr}"
        );
        let folder = run_folder_of(&output);
        for file in ["base.blend", "final.blend", "containment.json"] {
            assert!(
                folder.join(file).is_file(),
                "no {file} in {}",
                folder.display()
            );
        }
        let client = host.client().await;
        assert_eq!(plane_modifiers(&client).await, ["Scatter"]);
        assert_eq!(density_and_mark(&client).await, "[7.5] False");
        client.undo().await.unwrap();
        assert!(
            plane_modifiers(&client).await.is_empty(),
            "one undo takes the run back"
        );
    })
    .await;
}

/// What issue #32 measured: a Geometry Nodes run whose group holds an Import Text node (it
/// would read a file of the person's when evaluated there) is not brought in, and the scene
/// is as it was.
#[tokio::test(flavor = "multi_thread")]
async fn gn_attached_refuses_a_group_holding_an_import_text_node() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let files = tempfile::tempdir().unwrap();
        let host = Host::start(Some(&user_blend(files.path())));
        let reader = json!({"id": "reader", "type": "GN_OPS", "payload": {"ops": [
            {"op": "add_node", "id": "text", "bl_idname": "GeometryNodeImportText"}
        ]}});
        let script = gn_script_with(files.path(), 0, &[reader]);
        let client = host.client().await;
        let before = scene_dump(&client).await;
        drop(client);
        let output = gn_attached(&host, files.path(), &script, &[]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{stderr}");
        assert!(
            stderr.contains("holds an Import Text node")
                && stderr.contains("would read a file in your Blender"),
            "{stderr}"
        );
        let client = host.client().await;
        assert_eq!(scene_dump(&client).await, before, "the scene changed");
    })
    .await;
}

/// Trusted mode runs the steps in the person's Blender itself (the mark lands on their
/// cube), confirmed for the run; unconfirmed, nothing runs.
#[tokio::test(flavor = "multi_thread")]
async fn gn_attached_trusted_runs_in_the_persons_blender_only_when_confirmed() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let files = tempfile::tempdir().unwrap();
        let host = Host::start(Some(&user_blend(files.path())));
        let script = gn_script_with(files.path(), 0, &[density_and_mark_step()]);
        let unconfirmed = gn_attached(&host, files.path(), &script, &["--trusted"]);
        let stderr = String::from_utf8_lossy(&unconfirmed.stderr);
        assert!(!unconfirmed.status.success(), "{stderr}");
        assert!(stderr.contains("was not confirmed"), "{stderr}");
        assert!(stderr.contains("your own Blender"), "{stderr}");
        let client = host.client().await;
        assert!(plane_modifiers(&client).await.is_empty());
        drop(client);

        let output = gn_attached(
            &host,
            files.path(),
            &script,
            &["--trusted", "--confirm-trusted"],
        );
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let client = host.client().await;
        assert_eq!(plane_modifiers(&client).await, ["Scatter"]);
        assert_eq!(density_and_mark(&client).await, "[7.5] True");
        client.undo().await.unwrap();
        assert!(plane_modifiers(&client).await.is_empty());
        assert_eq!(density_and_mark(&client).await, "[] False", "one undo step");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_an_attached_gn_run_leaves_the_scene_as_it_was() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let files = tempfile::tempdir().unwrap();
        let host = Host::start(Some(&user_blend(files.path())));
        let script = gn_script(files.path(), 60_000);
        let mut child = gn_attached_command(&host, files.path(), &script, &[])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let watchdog = kill_after(&child, BLENDER_TEST_LIMIT, "viga gn --attach");
        // Wait until the run is in its (slow) model call, then cancel as the panel does.
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        loop {
            let line = lines.next().unwrap().unwrap();
            if line.contains("\"generating\"") {
                break;
            }
        }
        let cancelled_at = Instant::now();
        Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        let status = child.wait().unwrap();
        drop(watchdog);
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        assert!(
            cancelled_at.elapsed() < Duration::from_secs(3),
            "cancel took {:?}",
            cancelled_at.elapsed()
        );
        assert_eq!(status.code(), Some(130));
        assert!(rest.iter().any(|l| l.contains("\"cancelled\"")), "{rest:?}");
        let client = host.client().await;
        assert!(plane_modifiers(&client).await.is_empty());
        assert_eq!(object_names(&client).await, ["Plane", "UserCube"]);
    })
    .await;
}

fn attach_error(host_dir: &Path, args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let mut command = Command::new(VIGA);
    command
        .env("VIGA_CONNECTION_DIR", host_dir)
        .args(["run", "--task", "x", "--provider", "scripted", "--script"])
        .arg(workspace_file("fixtures/sessions/demo.json"))
        .args(args);
    let output = output_within(&mut command, BLENDER_TEST_LIMIT);
    (output, started.elapsed())
}

fn one_line_error(output: &Output) -> String {
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    let last = stderr.lines().last().unwrap_or_default().to_owned();
    assert!(last.starts_with("error: "), "{stderr}");
    last
}

#[test]
fn attaching_with_no_blender_running_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let (output, took) = attach_error(dir.path(), &["--attach"]);
    let message = one_line_error(&output);
    assert!(
        message.contains("no Blender with the viga add-on is running"),
        "{message}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
}

fn write_connection(dir: &Path, info: Value) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(format!("blender-{}.json", info["pid"]));
    std::fs::write(&path, info.to_string()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

#[test]
fn a_stale_connection_file_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    // A pid no process has (pid_max is at most 2^22).
    write_connection(
        dir.path(),
        json!({"port": 9, "token": "t", "pid": 4_194_304 + 7, "protocol_version": 1}),
    );
    let (output, took) = attach_error(dir.path(), &["--attach"]);
    let message = one_line_error(&output);
    assert!(message.contains("is no longer running"), "{message}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn another_protocol_version_is_refused_before_connecting() {
    let dir = tempfile::tempdir().unwrap();
    let me = std::process::id();
    let file = write_connection(
        dir.path(),
        json!({"port": 9, "token": "t", "pid": me, "protocol_version": 999}),
    );
    let (output, took) = attach_error(dir.path(), &["--connection", file.to_str().unwrap()]);
    let message = one_line_error(&output);
    assert!(message.contains("speaks protocol 999"), "{message}");
    assert!(message.contains("viga addon build"), "{message}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_token_is_refused_with_a_clear_message() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let host = Host::start(None);
        let mut info: Value =
            serde_json::from_str(&std::fs::read_to_string(&host.connection).unwrap()).unwrap();
        info["token"] = json!("not-the-token");
        let forged_dir = tempfile::tempdir().unwrap();
        let forged = write_connection(forged_dir.path(), info);
        let (output, took) = attach_error(
            forged_dir.path(),
            &["--connection", forged.to_str().unwrap()],
        );
        let message = one_line_error(&output);
        assert!(message.contains("refused the token"), "{message}");
        assert!(took < Duration::from_secs(5), "{took:?}");
        // The add-on still serves the right token afterwards.
        host.client().await.ping().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_attached_edits_the_open_scene_one_undo_step_per_program() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        use rmcp::ServiceExt as _;
        use rmcp::model::{CallToolRequestParams, ContentBlock};
        use rmcp::transport::TokioChildProcess;

        let host = Host::start(None);
        let settings_before = render_settings(&*host.client().await).await;
        let cameras_before = camera_data(&*host.client().await).await;
        let mut command = tokio::process::Command::new(VIGA);
        command
            .env("VIGA_CONNECTION_DIR", host.connection_dir())
            .args(["mcp", "--attach", "--trusted", "--resolution", "32"]);
        let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
        let tools = client.list_all_tools().await.unwrap();
        let execute = tools.iter().find(|t| t.name == "execute_code").unwrap();
        assert!(
            execute
                .description
                .as_deref()
                .unwrap_or_default()
                .contains("live mode"),
            "{execute:?}"
        );
        let run = |code: &str| {
            let arguments = json!({ "code": code }).as_object().unwrap().clone();
            client.call_tool(CallToolRequestParams::new("execute_code").with_arguments(arguments))
        };
        let add = |name: &str| {
            format!(
                "import bpy\nbpy.ops.mesh.primitive_cube_add()\nbpy.context.object.name = '{name}'\n"
            )
        };
        run(&add("Live1")).await.unwrap();
        run(&add("Live2")).await.unwrap();

        let failed = run(&format!("{}raise RuntimeError('no')\n", add("Broken")))
            .await
            .unwrap();
        assert_eq!(failed.is_error, Some(true), "a program that raises is a failed call");
        match &failed.content[0] {
            ContentBlock::Text(text) => assert!(text.text.contains("undone"), "{}", text.text),
            other => panic!("expected text, got {other:?}"),
        }
        // Looking at the scene renders it, and leaves no trace: the person's own render
        // settings stay theirs, and no inspection camera (object or data) stays behind.
        let looked = client
            .call_tool(CallToolRequestParams::new("initialize_viewpoint"))
            .await
            .unwrap();
        assert!(
            looked.content.iter().any(|block| matches!(block, ContentBlock::Image(_))),
            "{looked:?}"
        );
        let arguments = json!({"location": [6.0, -6.0, 4.0]}).as_object().unwrap().clone();
        let moved = client
            .call_tool(CallToolRequestParams::new("set_camera").with_arguments(arguments))
            .await
            .unwrap();
        assert_ne!(moved.is_error, Some(true), "{moved:?}");
        client.cancel().await.unwrap();

        let user = host.client().await;
        assert_eq!(render_settings(&user).await, settings_before);
        assert_eq!(camera_data(&user).await, cameras_before);
        let names = object_names(&user).await;
        assert!(
            !names.iter().any(|name| name.starts_with("viga_view_camera")),
            "a look left its camera in the scene: {names:?}"
        );
        assert!(
            names.contains(&"Live1".to_owned()) && names.contains(&"Live2".to_owned()),
            "{names:?}"
        );
        assert!(
            !names.contains(&"Broken".to_owned()),
            "a failing program was left half-applied: {names:?}"
        );
        user.undo().await.unwrap();
        let names = object_names(&user).await;
        assert!(
            names.contains(&"Live1".to_owned()) && !names.contains(&"Live2".to_owned()),
            "{names:?}"
        );
    })
    .await;
}

/// `viga mcp --attach` would run every program its client sends in the person's Blender: it
/// refuses unless told `--trusted`.
#[test]
fn mcp_attached_runs_nothing_in_the_persons_blender_without_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(VIGA);
    command
        .env("VIGA_CONNECTION_DIR", dir.path())
        .args(["mcp", "--attach"])
        .stdin(Stdio::null());
    let output = output_within(&mut command, BLENDER_TEST_LIMIT);
    let message = one_line_error(&output);
    assert!(
        message.contains("--trusted") && message.contains("uncontained"),
        "{message}"
    );
}

/// `viga addon host` stopped with SIGTERM or SIGINT sent to viga alone (a batch system,
/// `kill`, a background job whose SIGINT the host would not hear) stops its Blender cleanly:
/// the add-on is disabled and its connection file is gone (issue 36).
#[test]
fn the_addon_host_stops_cleanly_on_sigterm_and_sigint() {
    for signal in ["-TERM", "-INT"] {
        let dir = tempfile::tempdir().unwrap();
        let connections = dir.path().join("connections");
        let mut viga = Command::new(VIGA)
            .env("VIGA_CONNECTION_DIR", &connections)
            .args(["addon", "host", "--user-dir"])
            .arg(dir.path().join("user"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let watchdog = kill_after(&viga, BLENDER_TEST_LIMIT, "viga addon host");
        let files = || -> Vec<PathBuf> {
            std::fs::read_dir(&connections)
                .map(|entries| entries.flatten().map(|e| e.path()).collect())
                .unwrap_or_default()
        };
        let deadline = Instant::now() + BLENDER_TEST_LIMIT;
        while files().is_empty() {
            assert!(Instant::now() < deadline, "the host never connected");
            std::thread::sleep(Duration::from_millis(100));
        }
        Command::new("kill")
            .args([signal, &viga.id().to_string()])
            .status()
            .unwrap();
        let status = viga.wait().unwrap();
        drop(watchdog);
        assert!(status.success(), "{signal}: {status}");
        assert!(
            files().is_empty(),
            "{signal}: stale connection files {:?}",
            files()
        );
    }
}

/// A second client while one holds the person's Blender is told so, in words, quickly: not
/// that Blender "may be frozen" (issue 36).
#[tokio::test]
async fn a_second_client_is_told_another_holds_the_blender() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let host = Host::start(None);
        let _first = host.client().await;
        let dir = host.connection_dir();
        let (output, took) = tokio::task::spawn_blocking(move || attach_error(&dir, &["--attach"]))
            .await
            .unwrap();
        assert!(!output.status.success());
        let said = String::from_utf8_lossy(&output.stderr);
        assert!(said.contains("is serving another viga client"), "{said}");
        assert!(!said.contains("frozen"), "{said}");
        assert!(took < Duration::from_secs(10), "{took:?}");
    })
    .await;
}
