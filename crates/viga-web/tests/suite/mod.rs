mod hostile;
mod network;
mod pages;
mod site;

use std::time::Duration;

use viga_web::{Viewport, WebConfig, WebWorker};

/// One test's budget: Chromium starts in well under a second, a page takes a fraction of one.
pub const LIMIT: Duration = Duration::from_secs(120);

/// Real Chromium, or a failure that says what to install: these tests never skip.
pub fn config() -> WebConfig {
    WebConfig::locate().unwrap_or_else(|err| panic!("{err}"))
}

pub async fn worker() -> WebWorker {
    WebWorker::start(config()).await.unwrap()
}

pub const SMALL: Viewport = Viewport {
    width: 320,
    height: 240,
};

/// The colour at (x, y) of a PNG.
pub fn pixel(png: &[u8], x: u32, y: u32) -> [u8; 3] {
    let picture = image::load_from_memory(png).unwrap().to_rgb8();
    picture.get_pixel(x, y).0
}

/// A red page with a blue box at (10, 20), 100 x 50, a heading, and a green band at 1000 px.
pub const BOXES: &str = r#"<!doctype html>
<html><head><style>
  body { margin: 0; background: #ff0000; height: 1200px; }
  #box { position: absolute; left: 10px; top: 20px; width: 100px; height: 50px; background: #0000ff; }
  h1 { position: absolute; left: 150px; top: 0; margin: 0; font: bold 24px "DejaVu Sans"; color: rgb(255, 255, 0); }
  .band { position: absolute; left: 0; top: 1000px; width: 100%; height: 100px; background: #00ff00; }
</style></head>
<body><div id="box" class="card wide">Box</div><h1>Title</h1><div class="band"></div></body></html>
"#;
