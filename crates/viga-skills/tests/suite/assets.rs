use viga_skills::assets::{AssetSource, LocalAssetFolder};

#[tokio::test]
async fn the_local_folder_ranks_by_words_and_reads_sidecars() {
    let dir = tempfile::tempdir().unwrap();
    for (file, text) in [
        ("oak_chair.glb", Some("A wooden dining chair")),
        ("red_lamp.blend", None),
        ("notes.md", None),
    ] {
        std::fs::write(dir.path().join(file), b"x").unwrap();
        if let Some(text) = text {
            std::fs::write(dir.path().join(file).with_extension("txt"), text).unwrap();
        }
    }
    let folder = LocalAssetFolder::open(dir.path()).unwrap();
    assert_eq!(folder.len(), 2, "only asset files are indexed");
    let hits = folder.search("wooden chair", 5).await.unwrap();
    assert_eq!(hits.len(), 1);
    assert_eq!((hits[0].name.as_str(), hits[0].score), ("oak_chair", 1.0));
    assert!(hits[0].import_snippet().contains("import_scene.gltf"));
    let lamp = folder.search("lamp", 5).await.unwrap();
    assert!(lamp[0].import_snippet().contains("bpy.data.libraries.load"));
    assert!(folder.search("   ", 5).await.is_err());
    assert!(folder.search("spaceship", 5).await.unwrap().is_empty());
    assert!(LocalAssetFolder::open(&dir.path().join("missing")).is_err());
}
