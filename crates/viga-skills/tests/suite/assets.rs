//! Asset sources: the local folder (formats, subfolders, sidecars, ranking), import snippets
//! for any path, Poly Haven against a local server replaying recorded API responses
//! (`tests/fixtures/polyhaven/`), and real Blender importing through the snippets.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use viga_blender::{BlenderCommands as _, Worker, WorkerConfig, locate};
use viga_protocol::bridge::SceneReset;
use viga_skills::ToolError;
use viga_skills::assets::{
    AssetFormat, AssetHit, AssetOrigin, AssetSource, LocalAssetFolder, open_asset_sources,
    python_string,
};
use viga_skills::polyhaven::{PolyHaven, PolyHavenConfig};
use viga_skills::scene::summarize;
use viga_testkit::http::{Reply, Request, TestServer, closed_address};
use viga_testkit::{BLENDER_TEST_LIMIT, within};

/// How long a test without Blender may take: everything here is local.
const LIMIT: Duration = Duration::from_secs(60);

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/polyhaven")
}

fn write(path: &Path, bytes: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn names(hits: &[AssetHit]) -> Vec<(&str, Option<AssetFormat>)> {
    hits.iter().map(|h| (h.name.as_str(), h.format())).collect()
}

/// A folder with every format, subfolders, both kinds of sidecar and things to skip.
fn asset_folder() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(&root.join("oak_chair.glb"), "x");
    write(&root.join("oak_chair.txt"), "A wooden dining chair\n");
    write(&root.join("red_lamp.blend"), "x");
    write(&root.join("red_lamp.blend1"), "a backup, not an asset");
    write(&root.join("notes.md"), "x");
    write(&root.join("furniture/chair.gltf"), "x");
    write(&root.join("furniture/chair.obj"), "x");
    write(&root.join("furniture/stool.obj"), "x");
    write(&root.join("furniture/stool.txt"), "A wooden bar stool");
    write(&root.join("furniture/office/swivel_chair.fbx"), "x");
    write(
        &root.join("furniture/office/swivel_chair.json"),
        r#"{"description": "Office chair on wheels", "tags": ["seat", "desk"]}"#,
    );
    write(&root.join("broken/crate.obj"), "x");
    write(&root.join("broken/crate.json"), "{not json");
    write(&root.join(".hidden/secret_chair.obj"), "x");
    // Blender reads the backslash as a separator and could not open it.
    write(&root.join("back\\slash/chair_b.obj"), "x");
    dir
}

#[tokio::test]
async fn the_local_folder_ranks_every_format_across_subfolders_and_sidecars() {
    let dir = asset_folder();
    let folder = LocalAssetFolder::open(dir.path()).unwrap();
    assert_eq!(
        folder.len(),
        7,
        "asset files only; hidden folders, backups and paths Blender cannot open left out"
    );

    let hits = folder.search("wooden chairs", 10).await.unwrap();
    assert_eq!(
        names(&hits),
        [
            ("oak_chair", Some(AssetFormat::Glb)),
            // Half the query each: the file name matches before a sidecar does, then by
            // name and format, so equal hits always come in this order.
            ("furniture/chair", Some(AssetFormat::Gltf)),
            ("furniture/chair", Some(AssetFormat::Obj)),
            ("furniture/office/swivel_chair", Some(AssetFormat::Fbx)),
            ("furniture/stool", Some(AssetFormat::Obj)),
        ]
    );
    assert_eq!(hits[0].score, 1.0);
    assert_eq!(hits[0].description, "A wooden dining chair");
    assert!(hits[1..].iter().all(|hit| hit.score == 0.5));
    let again = LocalAssetFolder::open(dir.path())
        .unwrap()
        .search("wooden chairs", 10)
        .await
        .unwrap();
    assert_eq!(again, hits, "the same folder ranks the same way every time");
    assert_eq!(folder.search("chair", 2).await.unwrap().len(), 2);

    let tagged = folder.search("desk seat", 5).await.unwrap();
    assert_eq!(names(&tagged)[0].0, "furniture/office/swivel_chair");
    assert_eq!(tagged[0].description, "Office chair on wheels");
    assert_eq!(
        names(&folder.search("office", 5).await.unwrap()),
        [("furniture/office/swivel_chair", Some(AssetFormat::Fbx))],
        "folder names are words too"
    );
    assert_eq!(
        folder.search("crate", 5).await.unwrap()[0].description,
        "",
        "a sidecar that is not JSON is ignored"
    );

    for (query, operator) in [
        ("oak", "bpy.ops.import_scene.gltf(filepath="),
        ("lamp", "bpy.data.libraries.load("),
        ("stool", "bpy.ops.wm.obj_import(filepath="),
        ("swivel", "bpy.ops.import_scene.fbx(filepath="),
    ] {
        let snippet = folder.search(query, 1).await.unwrap()[0].import_snippet();
        assert!(snippet.contains(operator), "{query}: {snippet}");
        assert!(snippet.contains("imported = "), "{snippet}");
    }
    assert!(folder.search("secret", 5).await.unwrap().is_empty());
    assert!(folder.search("spaceship", 5).await.unwrap().is_empty());
    let empty = folder.search(" the, a ", 5).await.unwrap_err();
    assert!(matches!(empty, ToolError::Recoverable(m) if m.contains("no words")));
    let backslash = LocalAssetFolder::open(&dir.path().join("back\\slash")).unwrap_err();
    assert!(
        matches!(&backslash, ToolError::Fatal(m) if m.contains("rename the folder")),
        "{backslash}"
    );
    let missing = LocalAssetFolder::open(&dir.path().join("missing")).unwrap_err();
    assert!(
        matches!(&missing, ToolError::Fatal(m) if m.contains("cannot be read")),
        "{missing}"
    );
}

#[test]
fn import_snippets_quote_any_path_as_one_python_string() {
    let hostile = "/tmp/a\"b'c\\d\ne\r\t\u{0}f ü 😀/x\"); import os; os.system(\"rm -rf ~\") #";
    for extension in ["obj", "fbx", "glb", "gltf", "blend"] {
        let path = format!("{hostile}.{extension}");
        let hit = AssetHit {
            name: "x".into(),
            path: PathBuf::from(&path),
            description: String::new(),
            score: 1.0,
            origin: AssetOrigin::Local,
            licence: None,
            generation: None,
        };
        let snippet = hit.import_snippet();
        let literal = python_string(&path);
        assert!(snippet.contains(&literal), "{snippet}");
        // The literal is a JSON string, and reads back as the path.
        assert_eq!(serde_json::from_str::<String>(&literal).unwrap(), path);
        assert!(
            !literal.contains(['\n', '\r', '\0']),
            "no raw line break or NUL inside: {literal}"
        );
        // The import, then the loop that marks each new object with where it came from.
        let lines = if extension == "blend" { 6 } else { 4 } + 3;
        assert_eq!(snippet.lines().count(), lines, "{snippet}");
    }
    let unknown = AssetHit {
        name: "x".into(),
        path: PathBuf::from("/a/b.usdz"),
        description: String::new(),
        score: 1.0,
        origin: AssetOrigin::Local,
        licence: None,
        generation: None,
    };
    assert!(
        unknown
            .import_snippet()
            .starts_with("raise RuntimeError(\"viga cannot import \" + \"/a/b.usdz\"")
    );
}

/// A local HTTP server replaying the recorded Poly Haven responses in
/// `tests/fixtures/polyhaven/`, counting every request.
struct Replay {
    server: TestServer,
    /// While set, every request is answered with HTTP 503.
    down: Arc<AtomicBool>,
}

impl Replay {
    fn start() -> Self {
        let down = Arc::new(AtomicBool::new(false));
        let outage = Arc::clone(&down);
        let server = TestServer::start(move |request: &Request| {
            if outage.load(Ordering::SeqCst) {
                return Reply::bytes(503, "down for maintenance");
            }
            let (status, location, body) = route(&request.target, &request.base);
            let reply = Reply::bytes(status, body);
            match location {
                Some(location) => reply.with_header("Location", &location),
                None => reply,
            }
        })
        .unwrap();
        Self { server, down }
    }

    /// The target of every request so far; each must have named viga as its user agent.
    fn requests(&self) -> Vec<String> {
        let requests = self.server.requests();
        for request in &requests {
            assert!(
                request
                    .header("user-agent")
                    .is_some_and(|agent| agent.to_ascii_lowercase().starts_with("viga/")),
                "Poly Haven's terms ask for a user agent naming viga: {request:?}"
            );
        }
        requests.into_iter().map(|request| request.target).collect()
    }

    /// The requests since the first `since`.
    fn requests_since(&self, since: usize) -> Vec<String> {
        self.requests()[since..].to_vec()
    }

    /// Poly Haven has an outage (every answer is HTTP 503), or is back.
    fn set_down(&self, down: bool) {
        self.down.store(down, Ordering::SeqCst);
    }

    /// A config for this server with a cache in `cache`; downloads only from the server.
    fn config(&self, cache: &Path) -> PolyHavenConfig {
        PolyHavenConfig {
            api_url: self.server.base().to_owned(),
            download_hosts: Vec::new(),
            cache_dir: Some(cache.to_path_buf()),
            ..PolyHavenConfig::default()
        }
    }

    /// Closes the server: its port refuses connections from now on.
    fn stop(self) {
        drop(self.server);
    }
}

fn route(target: &str, base: &str) -> (u16, Option<String>, Vec<u8>) {
    let json = |file: PathBuf| match std::fs::read_to_string(file) {
        Ok(text) => (
            200,
            None,
            text.replace("https://dl.polyhaven.org", &format!("{base}/dl"))
                .into_bytes(),
        ),
        Err(_) => (404, None, b"{\"error\": \"not found\"}".to_vec()),
    };
    if target == "/assets?type=models" {
        return json(fixtures().join("api/assets-type-models.json"));
    }
    if target == "/files/Lantern_01" {
        let elsewhere = "https://elsewhere.example/files/Lantern_01".to_owned();
        return (302, Some(elsewhere), Vec::new());
    }
    if let Some(id) = target.strip_prefix("/files/") {
        return json(fixtures().join("api/files").join(format!("{id}.json")));
    }
    if let Some(file) = target.strip_prefix("/dl/")
        && !file.contains("..")
        && let Ok(bytes) = std::fs::read(fixtures().join("dl").join(file))
    {
        return (200, None, bytes);
    }
    (404, None, b"not found".to_vec())
}

const CHAIR_FILES: [&str; 3] = [
    "/dl/file/ph-assets/Models/gltf/1k/dining_chair_02/dining_chair_02_1k.gltf",
    "/dl/file/ph-assets/Models/gltf/8k/dining_chair_02/dining_chair_02.bin",
    "/dl/file/ph-assets/Models/png/1k/dining_chair_02/dining_chair_02_diff_1k.png",
];

#[tokio::test]
async fn poly_haven_downloads_a_model_once_and_then_serves_it_from_the_cache() {
    within(LIMIT, "the test", async {
        let server = Replay::start();
        let cache = tempfile::tempdir().unwrap();
        let polyhaven = PolyHaven::new(server.config(cache.path())).unwrap();
        assert!(polyhaven.describe().contains("powered by Poly Haven"));
        assert!(
            server.requests().is_empty(),
            "nothing is asked before a search"
        );

        // One hit: the best match, not the more popular texture or the entry whose id is no
        // plain name, both tagged "chair" and "wooden" too.
        let hits = polyhaven.search("wooden chairs", 1).await.unwrap();
        assert_eq!(names(&hits), [("Dining Chair 02", Some(AssetFormat::Gltf))]);
        let folder = cache.path().join("dining_chair_02").join("1k-d1b2c3d4e5f6");
        assert_eq!(hits[0].path, folder.join("dining_chair_02_1k.gltf"));
        assert_eq!(hits[0].score, 1.0);
        assert!(
            hits[0]
                .description
                .starts_with("Free 4K model of a wooden dining chair")
                && hits[0].description.contains("powered by Poly Haven"),
            "{}",
            hits[0].description
        );
        let served = fixtures().join("dl/file/ph-assets/Models");
        for (kept, original) in [
            (
                "dining_chair_02_1k.gltf",
                "gltf/1k/dining_chair_02/dining_chair_02_1k.gltf",
            ),
            (
                "dining_chair_02.bin",
                "gltf/8k/dining_chair_02/dining_chair_02.bin",
            ),
            (
                "textures/dining_chair_02_diff_1k.png",
                "png/1k/dining_chair_02/dining_chair_02_diff_1k.png",
            ),
        ] {
            assert_eq!(
                std::fs::read(folder.join(kept)).unwrap(),
                std::fs::read(served.join(original)).unwrap(),
                "{kept}"
            );
        }
        let leftovers: Vec<_> = std::fs::read_dir(cache.path().join("dining_chair_02"))
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        assert_eq!(
            leftovers,
            ["1k-d1b2c3d4e5f6"],
            "no partial download is left"
        );
        let mut expected = vec!["/assets?type=models", "/files/dining_chair_02"];
        expected.extend(CHAIR_FILES);
        assert_eq!(server.requests(), expected);
        assert!(hits[0].import_snippet().contains(&format!(
            "bpy.ops.import_scene.gltf(filepath={})",
            python_string(hits[0].path.to_str().unwrap())
        )));

        assert_eq!(polyhaven.search("wooden chair", 1).await.unwrap(), hits);
        assert_eq!(
            server.requests().len(),
            expected.len(),
            "the second search asks nothing"
        );
        let restarted = PolyHaven::new(server.config(cache.path())).unwrap();
        assert_eq!(restarted.search("chair wooden", 1).await.unwrap(), hits);
        assert_eq!(
            server.requests().len(),
            expected.len(),
            "a new process finds the list and the model in the cache"
        );
        assert!(polyhaven.search("spaceship", 5).await.unwrap().is_empty());
        assert!(polyhaven.search("texture", 5).await.unwrap().is_empty());
        assert!(polyhaven.search("escape", 5).await.unwrap().is_empty());
        assert!(matches!(
            polyhaven.search("   ", 5).await,
            Err(ToolError::Recoverable(_))
        ));
        assert_eq!(server.requests().len(), expected.len());
    })
    .await;
}

#[tokio::test]
async fn poly_haven_serves_a_model_it_has_only_at_another_resolution_from_the_cache() {
    within(LIMIT, "the test", async {
        let server = Replay::start();
        let cache = tempfile::tempdir().unwrap();
        let polyhaven = PolyHaven::new(server.config(cache.path())).unwrap();
        // Not offered at the default 1k: it comes at its smallest, 2k.
        let hits = polyhaven.search("copper teapot", 1).await.unwrap();
        assert_eq!(names(&hits), [("Copper Teapot", Some(AssetFormat::Gltf))]);
        let folder = cache.path().join("copper_teapot").join("2k-b3b2c3d4e5f6");
        assert_eq!(hits[0].path, folder.join("copper_teapot_2k.gltf"));
        assert!(folder.join("copper_teapot.bin").is_file());
        assert_eq!(
            server.requests(),
            [
                "/assets?type=models",
                "/files/copper_teapot",
                "/dl/file/ph-assets/Models/gltf/2k/copper_teapot/copper_teapot_2k.gltf",
                "/dl/file/ph-assets/Models/gltf/8k/copper_teapot/copper_teapot.bin",
            ]
        );

        let asked = server.requests().len();
        assert_eq!(polyhaven.search("teapot", 1).await.unwrap(), hits);
        assert_eq!(
            server.requests_since(asked),
            Vec::<String>::new(),
            "the second search asks nothing, not even the model's file list"
        );
        let restarted = PolyHaven::new(server.config(cache.path())).unwrap();
        assert_eq!(restarted.search("copper kettle", 1).await.unwrap(), hits);
        assert_eq!(
            server.requests_since(asked),
            Vec::<String>::new(),
            "a new process finds the resolution it came at noted in the cache"
        );

        // Asked for at 2k, the same download is found at once; asked for at 4k, which Poly
        // Haven offers, the 2k copy does not stand in for it.
        let at_2k = PolyHaven::new(PolyHavenConfig {
            resolution: "2k".to_owned(),
            ..server.config(cache.path())
        })
        .unwrap();
        assert_eq!(at_2k.search("teapot", 1).await.unwrap(), hits);
        assert_eq!(server.requests_since(asked), Vec::<String>::new());
        let at_4k = PolyHaven::new(PolyHavenConfig {
            resolution: "4k".to_owned(),
            ..server.config(cache.path())
        })
        .unwrap();
        let missing = at_4k.search("teapot", 1).await.unwrap_err();
        assert!(missing.to_string().contains("HTTP 404"), "{missing}");
        assert_eq!(
            server.requests_since(asked),
            [
                "/files/copper_teapot",
                "/dl/file/ph-assets/Models/gltf/4k/copper_teapot/copper_teapot_4k.gltf",
            ]
        );
    })
    .await;
}

#[tokio::test]
async fn poly_haven_asks_for_the_list_again_soon_after_an_outage() {
    within(LIMIT, "the test", async {
        let server = Replay::start();
        let cache = tempfile::tempdir().unwrap();
        let hits = PolyHaven::new(server.config(cache.path()))
            .unwrap()
            .search("wooden chair", 1)
            .await
            .unwrap();
        // The list kept in the cache is two days old, and Poly Haven is down.
        let listing = cache.path().join("models.json");
        let two_days_ago = SystemTime::now() - Duration::from_secs(2 * 24 * 60 * 60);
        std::fs::File::options()
            .write(true)
            .open(&listing)
            .unwrap()
            .set_modified(two_days_ago)
            .unwrap();
        server.set_down(true);

        // By default the kept list stands in for a few minutes after a failed try.
        let asked = server.requests().len();
        let patient = PolyHaven::new(server.config(cache.path())).unwrap();
        assert_eq!(patient.search("wooden chair", 1).await.unwrap(), hits);
        assert_eq!(patient.search("wooden chair", 1).await.unwrap(), hits);
        assert_eq!(
            server.requests_since(asked),
            ["/assets?type=models"],
            "one try, then the kept list for a while"
        );

        // With no wait, the search after Poly Haven is back fetches the list anew, which
        // is then kept for a day again.
        let asked = server.requests().len();
        let eager = PolyHaven::new(PolyHavenConfig {
            listing_retry_after: Duration::ZERO,
            ..server.config(cache.path())
        })
        .unwrap();
        assert_eq!(eager.search("wooden chair", 1).await.unwrap(), hits);
        assert_eq!(eager.search("wooden chair", 1).await.unwrap(), hits);
        assert_eq!(
            server.requests_since(asked),
            ["/assets?type=models", "/assets?type=models"],
            "every search tries again while it is down"
        );
        server.set_down(false);
        assert_eq!(eager.search("wooden chair", 1).await.unwrap(), hits);
        assert_eq!(eager.search("wooden chair", 1).await.unwrap(), hits);
        assert_eq!(
            server.requests_since(asked),
            ["/assets?type=models"; 3],
            "fetched once it is back, then kept"
        );
        let modified = std::fs::metadata(&listing).unwrap().modified().unwrap();
        assert!(
            modified > two_days_ago,
            "the fresh list is kept in the cache"
        );
    })
    .await;
}

#[tokio::test]
async fn poly_haven_refuses_hostile_file_lists_before_downloading_anything() {
    within(LIMIT, "the test", async {
        let server = Replay::start();
        let scratch = tempfile::tempdir().unwrap();
        let cache = scratch.path().join("a").join("cache");
        let polyhaven = PolyHaven::new(server.config(&cache)).unwrap();

        let climbing = polyhaven.search("cabinet", 5).await.unwrap_err();
        assert!(
            matches!(&climbing, ToolError::Recoverable(m) if m.contains("cursed_cabinet was not downloaded")
                && m.contains("\"../../outside.txt\" is refused")
                && m.contains("climbs out of its folder")),
            "{climbing}"
        );
        let elsewhere = polyhaven.search("vase", 5).await.unwrap_err();
        assert!(
            matches!(&elsewhere, ToolError::Recoverable(m) if m.contains("https://elsewhere.example/far_away_vase.bin is refused")),
            "{elsewhere}"
        );
        let reaching_out = polyhaven.search("bar stool", 5).await.unwrap_err();
        assert!(
            matches!(&reaching_out, ToolError::Recoverable(m) if m.contains("sneaky_stool was not downloaded")
                && m.contains("refers to \"../../../../etc/hostname\", which is not one of the files it includes")),
            "{reaching_out}"
        );
        let redirected = polyhaven.search("lantern", 5).await.unwrap_err();
        assert!(
            matches!(&redirected, ToolError::Recoverable(m) if m.contains("redirect to https://elsewhere.example/files/Lantern_01 is not followed")),
            "{redirected}"
        );
        assert_eq!(
            server.requests(),
            [
                "/assets?type=models",
                "/files/cursed_cabinet",
                "/files/far_away_vase",
                "/files/sneaky_stool",
                "/dl/file/ph-assets/Models/gltf/1k/sneaky_stool/sneaky_stool_1k.gltf",
                "/files/Lantern_01"
            ],
            "no file of a refused model is downloaded (a .gltf is checked once it is here)"
        );
        let stool: Vec<_> = std::fs::read_dir(cache.join("sneaky_stool")).unwrap().collect();
        assert!(stool.is_empty(), "the refused download is not kept");
        for outside in ["a/outside.txt", "outside.txt", "a/cache/outside.txt"] {
            assert!(!scratch.path().join(outside).exists(), "{outside}");
        }
        for refused in ["cursed_cabinet", "far_away_vase", "Lantern_01", "sneaky_stool/1k-a2b2c3d4e5f6"] {
            assert!(!cache.join(refused).exists(), "{refused}");
        }
    })
    .await;
}

#[tokio::test]
async fn poly_haven_bounds_what_it_reads() {
    within(LIMIT, "the test", async {
        let server = Replay::start();
        let cache = tempfile::tempdir().unwrap();
        let small_files = PolyHaven::new(PolyHavenConfig {
            max_file_bytes: 100,
            ..server.config(cache.path())
        })
        .unwrap();
        let err = small_files.search("dining chair", 1).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("dining_chair_02_1k.gltf is 1167 bytes, more than the 100 bytes"),
            "{err}"
        );
        assert!(!server.requests().iter().any(|r| r.starts_with("/dl/")));

        let other_cache = tempfile::tempdir().unwrap();
        let small_list = PolyHaven::new(PolyHavenConfig {
            max_listing_bytes: 100,
            ..server.config(other_cache.path())
        })
        .unwrap();
        let err = small_list.search("dining chair", 1).await.unwrap_err();
        assert!(
            err.to_string()
                .contains("larger than the 100 bytes viga reads"),
            "{err}"
        );
    })
    .await;
}

#[tokio::test]
async fn poly_haven_offline_says_so_and_keeps_serving_the_cache() {
    within(LIMIT, "the test", async {
        let address = closed_address().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let offline = PolyHaven::new(PolyHavenConfig {
            api_url: address.clone(),
            download_hosts: Vec::new(),
            cache_dir: Some(cache.path().to_path_buf()),
            ..PolyHavenConfig::default()
        })
        .unwrap();
        let err = offline.search("wooden chair", 1).await.unwrap_err();
        assert!(
            matches!(&err, ToolError::Recoverable(m) if m.contains(&format!("Poly Haven cannot be reached at {address}"))
                && m.contains("Check the network connection")),
            "{err}"
        );

        // Downloaded while online; then the server goes away and the list is out of date.
        let server = Replay::start();
        let online = PolyHaven::new(server.config(cache.path())).unwrap();
        let hits = online.search("wooden chair", 1).await.unwrap();
        let config = PolyHavenConfig {
            listing_max_age: Duration::ZERO,
            ..server.config(cache.path())
        };
        server.stop();
        let later = PolyHaven::new(config).unwrap();
        assert_eq!(
            later.search("wooden chair", 1).await.unwrap(),
            hits,
            "the kept list and the cached model still answer"
        );
        let missing = later.search("cabinet", 1).await.unwrap_err();
        assert!(missing.to_string().contains("cannot be reached"), "{missing}");
    })
    .await;
}

#[tokio::test]
async fn open_asset_sources_merges_the_local_folder_and_poly_haven() {
    within(LIMIT, "the test", async {
        assert!(open_asset_sources(None, None, None).unwrap().is_none());
        let dir = asset_folder();
        let local = open_asset_sources(Some(dir.path()), None, None)
            .unwrap()
            .unwrap();
        assert!(local.describe().starts_with("local asset folder"));
        assert!(matches!(
            open_asset_sources(Some(&dir.path().join("missing")), None, None),
            Err(ToolError::Fatal(_))
        ));

        let server = Replay::start();
        let cache = tempfile::tempdir().unwrap();
        let both = open_asset_sources(Some(dir.path()), Some(server.config(cache.path())), None)
            .unwrap()
            .unwrap();
        assert!(
            both.describe().contains(" and Poly Haven"),
            "{}",
            both.describe()
        );
        let hits = both.search("wooden dining chair", 3).await.unwrap();
        assert_eq!(
            names(&hits),
            [
                ("oak_chair", Some(AssetFormat::Glb)),
                ("Dining Chair 02", Some(AssetFormat::Gltf)),
                ("furniture/chair", Some(AssetFormat::Gltf)),
            ],
            "merged by score; a tie keeps the local folder first"
        );
        server.stop();

        // Poly Haven unreachable: the local folder still answers, and with nothing local the
        // reason is told.
        let offline_cache = tempfile::tempdir().unwrap();
        let offline = open_asset_sources(
            Some(dir.path()),
            Some(PolyHavenConfig {
                api_url: "http://127.0.0.1:9".into(),
                cache_dir: Some(offline_cache.path().to_path_buf()),
                ..PolyHavenConfig::default()
            }),
            None,
        )
        .unwrap()
        .unwrap();
        assert_eq!(offline.search("stool", 3).await.unwrap().len(), 1);
        let err = offline.search("cabinet", 3).await.unwrap_err();
        assert!(err.to_string().contains("cannot be reached"), "{err}");
    })
    .await;
}

/// Every format's snippet imports in real Blender, from a folder whose name has quotes, a
/// line break and non-ASCII letters, and so does a Poly Haven download, textures included.
#[tokio::test]
async fn blender_imports_assets_through_the_snippets() {
    within(BLENDER_TEST_LIMIT, "the test", async {
        let scratch = tempfile::tempdir().unwrap();
        // No backslash: Blender reads one as a separator (such files are not indexed).
        let folder = scratch.path().join("we\"ird 'assets' with\na line ü");
        write(
            &folder.join("crate.obj"),
            "o Crate\nv 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n",
        );
        let served = fixtures().join("dl/file/ph-assets/Models");
        write(
            &folder.join("lamp.gltf"),
            std::fs::read(served.join("gltf/1k/dining_chair_02/dining_chair_02_1k.gltf")).unwrap(),
        );
        write(
            &folder.join("dining_chair_02.bin"),
            std::fs::read(served.join("gltf/8k/dining_chair_02/dining_chair_02.bin")).unwrap(),
        );
        write(
            &folder.join("textures/dining_chair_02_diff_1k.png"),
            std::fs::read(served.join("png/1k/dining_chair_02/dining_chair_02_diff_1k.png"))
                .unwrap(),
        );
        let worker = Worker::start(WorkerConfig::new(locate().unwrap()))
            .await
            .unwrap();
        let made = worker
            .execute(
                "import bpy\nbpy.ops.mesh.primitive_cube_add()\nbpy.context.object.name = 'Box'\n",
                Some(SceneReset::Factory),
                None,
            )
            .await
            .unwrap();
        assert!(made.succeeded(), "{made:?}");
        worker
            .save_blend(folder.join("box.blend").to_str().unwrap())
            .await
            .unwrap();

        let local = LocalAssetFolder::open(&folder).unwrap();
        assert_eq!(local.len(), 3);
        let server = Replay::start();
        let cache = tempfile::tempdir().unwrap();
        let polyhaven = PolyHaven::new(server.config(cache.path())).unwrap();
        let mut hits = Vec::new();
        for query in ["crate", "lamp", "box"] {
            hits.push(local.search(query, 1).await.unwrap().remove(0));
        }
        hits.push(polyhaven.search("wooden chair", 1).await.unwrap().remove(0));
        for hit in &hits {
            let program = format!(
                "{}print('IMPORTED', sorted(obj.type for obj in imported))\nprint('PIXELS', sorted(len(image.pixels) for image in bpy.data.images))\n",
                hit.import_snippet()
            );
            let ran = worker
                .execute(&program, Some(SceneReset::Factory), None)
                .await
                .unwrap();
            assert!(ran.succeeded(), "{}: {ran:?}\n{program}", hit.name);
            assert!(
                ran.stdout.contains("IMPORTED ['MESH']"),
                "{}: {}",
                hit.name,
                ran.stdout
            );
            if hit.format() == Some(AssetFormat::Gltf) {
                assert!(
                    ran.stdout.contains("PIXELS [16]"),
                    "{}: the texture beside the .gltf was loaded: {}",
                    hit.name,
                    ran.stdout
                );
            }
            // The scene says where the imported object came from.
            let info = worker.scene_info(0, 100).await.unwrap();
            let sources: Vec<(&str, Option<&str>)> = info
                .objects
                .iter()
                .map(|o| (o.kind.as_str(), o.source.as_deref()))
                .collect();
            assert!(
                sources.contains(&("MESH", Some(hit.origin.as_str()))),
                "{}: {sources:?}",
                hit.name
            );
            assert!(
                summarize(&info).contains(&format!("source={}", hit.origin.as_str())),
                "{}",
                summarize(&info)
            );
        }
        // A program may set the property to anything; only a short string is reported, and
        // objects without it say nothing.
        let odd = worker
            .execute(
                "import bpy\nbpy.ops.object.camera_add()\nbpy.context.object.name = 'Camera'\nbpy.context.object['viga_source'] = 42\nbpy.ops.mesh.primitive_cube_add()\nbpy.context.object.name = 'Cube'\nbpy.context.object['viga_source'] = 'x' * 500\nbpy.ops.mesh.primitive_cube_add()\nbpy.context.object.name = 'Plain'\n",
                Some(SceneReset::Factory),
                None,
            )
            .await
            .unwrap();
        assert!(odd.succeeded(), "{odd:?}");
        let info = worker.scene_info(0, 100).await.unwrap();
        let shown: Vec<Option<usize>> = info
            .objects
            .iter()
            .map(|o| o.source.as_ref().map(String::len))
            .collect();
        assert_eq!(shown, [None, Some(32), None], "Camera, Cube, Plain");
    })
    .await;
}
