//! Hostile decks and a renderer that dies or hangs.

use std::time::Duration;

use viga_slides::{
    LostReason, ProgramStatus, Recovery, SlideWorker, SlidesConfig, SlidesError, WorkerLost,
};
use viga_testkit::within;

use super::{LIMIT, TWO_SLIDES, config, deck, worker};

/// `count` blank slides, each with its number in a text box.
fn many_slides(count: usize) -> String {
    format!(
        "import os\nfrom pptx import Presentation\nfrom pptx.util import Inches\nprs = Presentation()\nfor n in range({count}):\n    s = prs.slides.add_slide(prs.slide_layouts[6])\n    s.shapes.add_textbox(Inches(1), Inches(1), Inches(2), Inches(1)).text = str(n + 1)\nprs.save(os.environ['VIGA_DECK_PATH'])\n"
    )
}

#[tokio::test]
async fn a_big_deck_is_rendered_and_described_only_up_to_the_bound() {
    within(LIMIT, "the test", async {
        let worker = SlideWorker::start(SlidesConfig {
            max_slides: 3,
            max_shapes: 1,
            ..config()
        })
        .await
        .unwrap();
        let deck = deck(&worker, &many_slides(8)).await;
        let render = worker.render(&deck, 64).await.unwrap();
        assert_eq!(render.slide_count, 8);
        assert_eq!(render.slides.len(), 3);
        let structure = worker.structure(&deck).await.unwrap();
        assert_eq!(structure.slide_count, 8);
        assert_eq!(structure.slides.len(), 3);
        assert!(
            structure.to_text().contains("… slides 4 to 8 not listed"),
            "{}",
            structure.to_text()
        );
        // One past the bound can still be asked for by number.
        assert_eq!(worker.render_slide(&deck, 8, 64).await.unwrap().number, 8);
        worker.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_deck_that_is_not_a_presentation_is_refused_and_the_renderer_stays() {
    within(LIMIT, "the test", async {
        let worker = worker().await;
        let html = "import os\nopen(os.environ['VIGA_DECK_PATH'], 'w').write('<html><img src=\"http://127.0.0.1:9/x.png\"></html>')\n";
        let fake = deck(&worker, html).await;
        let err = worker.render(&fake, 64).await.unwrap_err();
        assert!(matches!(&err, SlidesError::Refused { message, .. } if message.contains("not a .pptx")), "{err}");
        // A word processor's document (a valid ODT) saved under the deck's name.
        let odt = r#"import os, zipfile
manifest = '<?xml version="1.0"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.2"><manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.text"/><manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/></manifest:manifest>'
content = '<?xml version="1.0"?><office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" office:version="1.2"><office:body><office:text><text:p>hello</text:p></office:text></office:body></office:document-content>'
with zipfile.ZipFile(os.environ['VIGA_DECK_PATH'], 'w') as z:
    z.writestr('mimetype', 'application/vnd.oasis.opendocument.text')
    z.writestr('META-INF/manifest.xml', manifest)
    z.writestr('content.xml', content)
"#;
        let text = deck(&worker, odt).await;
        let err = worker.render(&text, 64).await.unwrap_err();
        assert!(matches!(err, SlidesError::Refused { .. }), "{err}");
        assert_eq!(worker.restarts(), 0);
        let good = deck(&worker, TWO_SLIDES).await;
        assert_eq!(worker.render(&good, 64).await.unwrap().slides.len(), 2);
        worker.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_killed_renderer_is_restarted_and_says_so() {
    within(LIMIT, "the test", async {
        let worker = worker().await;
        let deck = deck(&worker, TWO_SLIDES).await;
        let pid = worker.renderer_pid().await.unwrap();
        let killed = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let err = worker.render(&deck, 64).await.unwrap_err();
        let SlidesError::Lost(WorkerLost {
            reason, recovery, ..
        }) = &err
        else {
            panic!("{err}");
        };
        assert!(
            matches!(reason, LostReason::Exited(_) | LostReason::Disconnected(_)),
            "{reason}"
        );
        assert_eq!(
            *recovery,
            Recovery::Restarted {
                restored_checkpoint: None
            }
        );
        assert_eq!(worker.restarts(), 1);
        assert_ne!(worker.renderer_pid().await, Some(pid));
        assert_eq!(worker.render(&deck, 64).await.unwrap().slides.len(), 2);
        worker.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_render_past_its_limit_is_stopped_and_the_renderer_restarted() {
    within(LIMIT, "the test", async {
        let worker = SlideWorker::start(SlidesConfig {
            call_timeout: Duration::from_secs(3),
            max_slides: 200,
            ..config()
        })
        .await
        .unwrap();
        let deck = deck(&worker, &many_slides(120)).await;
        // 120 slides at 8192 pixels take far longer than 3 s.
        let err = worker.render(&deck, 8192).await.unwrap_err();
        let SlidesError::Lost(WorkerLost {
            reason, recovery, ..
        }) = &err
        else {
            panic!("{err}");
        };
        assert_eq!(*reason, LostReason::Timeout(Duration::from_secs(3)));
        assert!(recovery.restarted(), "{recovery}");
        assert_eq!(worker.render_slide(&deck, 1, 64).await.unwrap().width, 64);
        worker.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn the_renderer_and_every_program_start_through_the_containment_launcher() {
    within(LIMIT, "the test", async {
        let folder = tempfile::tempdir().unwrap();
        let (launcher, log) = viga_testkit::recording_launcher(folder.path());
        let mut config = config();
        config.confinement = Some(viga_slides::Confinement {
            launcher,
            writable: Vec::new(),
            readable: Some(Vec::new()),
        });
        let worker = SlideWorker::start(config).await.unwrap();
        let report = worker.contained_report().await;
        assert_eq!(report.as_deref(), Some(viga_testkit::RECORDED_REPORT));
        let result = worker.run_program(TWO_SLIDES, None).await.unwrap();
        // The launcher's report line is not the program's output.
        assert_eq!(result.run.stdout.text, "saving to deck.pptx\n");
        let render = worker.render(&result.deck.unwrap(), 64).await.unwrap();
        assert_eq!(render.slides.len(), 2);
        let scratch = worker.scratch_folder().to_path_buf();
        viga_testkit::assert_launched(&log, &scratch, &["office.py", "run_program.py"]);
        worker.shutdown().await;
    })
    .await;
}

/// A deck of 10,000 slides, written straight into the .pptx archive (python-pptx itself takes
/// minutes to add that many).
const TEN_THOUSAND_SLIDES: &str = r#"
import io, os, re, zipfile
from pptx import Presentation
from pptx.util import Inches
COUNT = 10000
prs = Presentation()
prs.slides.add_slide(prs.slide_layouts[6]).shapes.add_textbox(Inches(1), Inches(1), Inches(3), Inches(1)).text = "many"
one = io.BytesIO()
prs.save(one)
source = zipfile.ZipFile(one)
slide, slide_rels = source.read("ppt/slides/slide1.xml"), source.read("ppt/slides/_rels/slide1.xml.rels")
ids = "".join('<p:sldId id="%d" r:id="rIdS%d"/>' % (256 + n, n) for n in range(COUNT))
presentation = re.sub(r"<p:sldIdLst>.*?</p:sldIdLst>", "<p:sldIdLst>" + ids + "</p:sldIdLst>", source.read("ppt/presentation.xml").decode(), flags=re.S)
links = "".join('<Relationship Id="rIdS%d" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/slide" Target="slides/slide%d.xml"/>' % (n, n + 1) for n in range(COUNT))
relations = re.sub(r'<Relationship[^>]*relationships/slide"[^>]*/>', "", source.read("ppt/_rels/presentation.xml.rels").decode()).replace("</Relationships>", links + "</Relationships>")
kinds = "".join('<Override PartName="/ppt/slides/slide%d.xml" ContentType="application/vnd.openxmlformats-officedocument.presentationml.slide+xml"/>' % (n + 1) for n in range(1, COUNT))
types = source.read("[Content_Types].xml").decode().replace("</Types>", kinds + "</Types>")
replaced = {"ppt/presentation.xml": presentation, "ppt/_rels/presentation.xml.rels": relations, "[Content_Types].xml": types}
with zipfile.ZipFile(os.environ["VIGA_DECK_PATH"], "w", zipfile.ZIP_DEFLATED) as out:
    for item in source.infolist():
        if not item.filename.startswith("ppt/slides/"):
            out.writestr(item.filename, replaced.get(item.filename) or source.read(item.filename))
    for n in range(1, COUNT + 1):
        out.writestr("ppt/slides/slide%d.xml" % n, slide)
        out.writestr("ppt/slides/_rels/slide%d.xml.rels" % n, slide_rels)
"#;

#[tokio::test]
async fn a_ten_thousand_slide_deck_is_bounded() {
    within(LIMIT, "the test", async {
        let worker = worker().await;
        // Built slide by slide it takes too long, and is stopped.
        let slow = "from pptx import Presentation\nprs = Presentation()\nfor _ in range(10000):\n    prs.slides.add_slide(prs.slide_layouts[6])\n";
        let result = worker.run_program(slow, Some(Duration::from_secs(3))).await.unwrap();
        assert_eq!(result.run.status, ProgramStatus::TimedOut { limit_ms: 3000 });
        // Written directly, it is refused for rendering before LibreOffice opens it, and
        // described only in part.
        let deck = deck(&worker, TEN_THOUSAND_SLIDES).await;
        let started = std::time::Instant::now();
        let err = worker.render(&deck, 64).await.unwrap_err();
        assert!(
            matches!(&err, SlidesError::Refused { message, .. } if message.contains("the deck has 10000 slides; at most 1000 are rendered")),
            "{err}"
        );
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        let structure = worker.structure(&deck).await.unwrap();
        assert_eq!(structure.slide_count, 10_000);
        assert_eq!(structure.slides.len(), 50);
        assert_eq!(worker.restarts(), 0);
        worker.shutdown().await;
    })
    .await;
}

#[tokio::test]
async fn a_deck_that_links_a_picture_from_outside_is_refused_and_nothing_is_fetched() {
    within(LIMIT, "the test", async {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        listener.set_nonblocking(true).unwrap();
        // A picture added, then its relationship turned into a link to the loopback server.
        let program = format!(
            r#"import io, os, re, zipfile
from pptx import Presentation
from pptx.util import Inches
import PIL.Image
picture = io.BytesIO()
PIL.Image.new("RGB", (4, 4), (255, 0, 0)).save(picture, "PNG")
picture.seek(0)
prs = Presentation()
prs.slides.add_slide(prs.slide_layouts[6]).shapes.add_picture(picture, Inches(1), Inches(1))
whole = io.BytesIO()
prs.save(whole)
source = zipfile.ZipFile(whole)
with zipfile.ZipFile(os.environ["VIGA_DECK_PATH"], "w") as out:
    for item in source.infolist():
        data = source.read(item.filename)
        if item.filename == "ppt/slides/slide1.xml":
            data = data.replace(b'r:embed="', b'r:link="')
        if item.filename == "ppt/slides/_rels/slide1.xml.rels":
            data = re.sub(rb'Target="../media/image1.png"', b'Target="http://127.0.0.1:{port}/x.png" TargetMode="&#69;xternal"', data)
        out.writestr(item, data)
"#
        );
        let worker = worker().await;
        let linked = deck(&worker, &program).await;
        let err = worker.render(&linked, 64).await.unwrap_err();
        assert!(
            matches!(&err, SlidesError::Refused { message, .. } if message.contains(&format!("outside file (http://127.0.0.1:{port}/x.png)"))),
            "{err}"
        );
        assert!(listener.accept().is_err(), "LibreOffice fetched the linked picture");
        worker.shutdown().await;
    })
    .await;
}
