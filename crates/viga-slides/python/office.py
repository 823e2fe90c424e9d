"""viga's warm slide renderer: LibreOffice in this process, through LibreOfficeKit.

Started by viga (crates/viga-slides) with the project venv's Python, which has python-pptx:

    python -I office.py --office PROGRAM_DIR --profile DIR

LibreOfficeKit runs the office inside this process (no `soffice` listener, so no socket or
pipe in /tmp, which a contained process may not create). Every slide is exported with
LibreOffice's own PNG export (what a slide show shows, not the editing view), selected with
`setPart`. The same process reads a deck's structure with python-pptx.

Protocol: one JSON request per line on stdin, one JSON reply per line on the standard output
this process had when it started (LibreOffice's own output goes to stderr). The first line is
`VIGA_SLIDES_READY {...}`. Replies are `{"ok": true, ...}` or `{"ok": false, "error": "..."}`.
"""

import ctypes
import json
import os
import re
import sys
import zipfile
from xml.etree import ElementTree

READY = "VIGA_SLIDES_READY "
LOK_DOCTYPE_PRESENTATION = 2
MAX_REQUEST_BYTES = 1 << 20
MAX_TEXT = 2000
# The largest presentation.xml read to count a deck's slides.
MAX_PRESENTATION_XML = 64 << 20

# LibreOfficeKit's C interface: a struct of function pointers per object, in this order
# (LibreOfficeKit.h; members are only ever appended, so these indices are stable).
OFFICE_GET_ERROR = 3
OFFICE_LOAD_WITH_OPTIONS = 4
OFFICE_FREE_ERROR = 5
OFFICE_VERSION_INFO = 10
DOC_DESTROY = 1
DOC_SAVE_AS = 2
DOC_TYPE = 3
DOC_PARTS = 4
DOC_SET_PART = 7
DOC_SIZE = 12

# Macros never run, whatever a document asks (a program can save any file as its deck).
PROFILE_SETTINGS = """<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="MacroSecurityLevel" oor:op="fuse"><value>3</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Security/Scripting"><prop oor:name="DisableMacrosExecution" oor:op="fuse"><value>true</value></prop></item>
</oor:items>
"""


class Refused(Exception):
    """A request that cannot be done as asked; the reply says why."""


def method(obj, index, restype, *argtypes):
    table = ctypes.cast(ctypes.cast(obj, ctypes.POINTER(ctypes.c_void_p))[0],
                        ctypes.POINTER(ctypes.c_void_p))
    function = ctypes.CFUNCTYPE(restype, ctypes.c_void_p, *argtypes)(table[index])
    return lambda *args: function(obj, *args)


def file_url(path):
    from urllib.parse import quote
    return "file://" + quote(os.path.abspath(path))


class Office:
    def __init__(self, program_dir, profile):
        user = os.path.join(profile, "user")
        os.makedirs(user, exist_ok=True)
        settings = os.path.join(user, "registrymodifications.xcu")
        if not os.path.exists(settings):
            with open(settings, "w", encoding="utf-8") as out:
                out.write(PROFILE_SETTINGS)
        library = None
        for name in ("libsofficeapp.so", "libmergedlo.so"):
            path = os.path.join(program_dir, name)
            if os.path.exists(path):
                library = ctypes.CDLL(path)
                break
        if library is None:
            raise SystemExit("no LibreOfficeKit library (libsofficeapp.so or libmergedlo.so) in " + program_dir)
        hook = library.libreofficekit_hook_2
        hook.restype = ctypes.c_void_p
        hook.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
        self.office = hook(program_dir.encode(), file_url(profile).encode())
        if not self.office:
            raise SystemExit("LibreOfficeKit did not start (profile " + profile + ")")
        self.load = method(self.office, OFFICE_LOAD_WITH_OPTIONS, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
        self.get_error = method(self.office, OFFICE_GET_ERROR, ctypes.c_void_p)
        self.free_error = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(
            ctypes.cast(ctypes.cast(self.office, ctypes.POINTER(ctypes.c_void_p))[0],
                        ctypes.POINTER(ctypes.c_void_p))[OFFICE_FREE_ERROR])

    def version(self):
        info = method(self.office, OFFICE_VERSION_INFO, ctypes.c_void_p)()
        if not info:
            return "unknown"
        text = ctypes.string_at(info).decode("utf-8", "replace")
        self.free_error(info)
        try:
            return json.loads(text).get("ProductVersion", text)
        except ValueError:
            return text

    def last_error(self):
        error = self.get_error()
        if not error:
            return "no reason given"
        text = ctypes.string_at(error).decode("utf-8", "replace")
        self.free_error(error)
        return text[:MAX_TEXT]

    def render(self, request):
        deck = request["deck"]
        out_dir = request["out_dir"]
        width = int(request["width"])
        max_slides = int(request["max_slides"])
        with open(deck, "rb") as head:
            if head.read(4) != b"PK\x03\x04":
                raise Refused("the deck is not a .pptx file (not a zip archive)")
        # LibreOffice lays out every slide when it opens a deck (minutes for 10,000), so a
        # deck with too many is refused before it is opened.
        listed = count_slides(deck)
        if listed > int(request["max_deck_slides"]):
            raise Refused("the deck has %d slides; at most %d are rendered" % (listed, request["max_deck_slides"]))
        refuse_outside_links(deck)
        doc = self.load(file_url(deck).encode(), b"Language=en-US")
        if not doc:
            raise Refused("LibreOffice could not open the deck: " + self.last_error())
        try:
            if method(doc, DOC_TYPE, ctypes.c_int)() != LOK_DOCTYPE_PRESENTATION:
                raise Refused("the deck is not a presentation")
            count = method(doc, DOC_PARTS, ctypes.c_int)()
            wanted = request.get("slides")
            numbers = wanted if wanted else list(range(1, min(count, max_slides) + 1))
            for number in numbers:
                if not 1 <= number <= count:
                    raise Refused("there is no slide %d: the deck has %d" % (number, count))
            set_part = method(doc, DOC_SET_PART, None, ctypes.c_int)
            size = method(doc, DOC_SIZE, None, ctypes.POINTER(ctypes.c_long), ctypes.POINTER(ctypes.c_long))
            save_as = method(doc, DOC_SAVE_AS, ctypes.c_int, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p)
            images = []
            for number in numbers:
                set_part(number - 1)
                twips_w, twips_h = ctypes.c_long(), ctypes.c_long()
                size(ctypes.byref(twips_w), ctypes.byref(twips_h))
                if twips_w.value <= 0 or twips_h.value <= 0:
                    raise Refused("slide %d has no size" % number)
                height = max(1, round(width * twips_h.value / twips_w.value))
                name = "slide-%d.png" % number
                options = json.dumps({
                    "PixelWidth": {"type": "long", "value": str(width)},
                    "PixelHeight": {"type": "long", "value": str(height)},
                })
                saved = save_as(file_url(os.path.join(out_dir, name)).encode(), b"png", options.encode())
                if not saved:
                    raise Refused("LibreOffice could not export slide %d: %s" % (number, self.last_error()))
                images.append({"slide": number, "file": name, "width": width, "height": height})
            return {"slide_count": count, "images": images}
        finally:
            method(doc, DOC_DESTROY, None)()


def count_slides(deck):
    """The slides a .pptx lists, from its presentation.xml, without opening it."""
    try:
        with zipfile.ZipFile(deck) as archive:
            info = archive.getinfo("ppt/presentation.xml")
            if info.file_size > MAX_PRESENTATION_XML:
                raise Refused("the deck's presentation.xml is larger than %d bytes" % MAX_PRESENTATION_XML)
            listing = archive.read(info)
    except (KeyError, zipfile.BadZipFile) as error:
        raise Refused("the deck is not a .pptx file (%s)" % error)
    return len(re.findall(rb"<(?:[A-Za-z_][\w.-]*:)?sldId[\s/>]", listing))


def refuse_outside_links(deck):
    """LibreOffice fetches a picture, video or object a deck links to by address (an HTTP
    request, seen here) instead of embedding: such a deck is refused, whatever the address.
    Hyperlinks, which it does not follow, are allowed."""
    with zipfile.ZipFile(deck) as archive:
        for info in archive.infolist():
            if not info.filename.endswith(".rels"):
                continue
            if info.file_size > MAX_PRESENTATION_XML:
                raise Refused("%s is larger than %d bytes" % (info.filename, MAX_PRESENTATION_XML))
            try:
                relations = ElementTree.fromstring(archive.read(info))
            except ElementTree.ParseError as error:
                raise Refused("%s is not XML (%s)" % (info.filename, error))
            for relation in relations.iter():
                if not relation.tag.endswith("Relationship"):
                    continue
                external = relation.get("TargetMode", "").strip().lower() == "external"
                hyperlink = relation.get("Type", "").endswith("/hyperlink")
                if external and not hyperlink:
                    raise Refused(
                        "the deck links to an outside file (%s) instead of embedding it: add pictures with "
                        "slide.shapes.add_picture(path or file object)" % cut(relation.get("Target", ""))[:200])


def cut(text):
    text = text or ""
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"


def attempt(read):
    """What `read()` gives, or None where python-pptx cannot say (a theme colour, an
    inherited value, a shape kind without the property)."""
    try:
        return read()
    except Exception:
        return None


def colour_of(colour_format):
    if colour_format is None:
        return None
    rgb = attempt(lambda: colour_format.rgb)
    if rgb is not None:
        return "#" + str(rgb)
    theme = attempt(lambda: colour_format.theme_color)
    if theme is not None:
        return "theme:" + str(theme).split(" ")[0].split(".")[-1]
    return None


def fill_colour(fill):
    from pptx.enum.dml import MSO_FILL
    if fill is None or attempt(lambda: fill.type) != MSO_FILL.SOLID:
        return None
    return colour_of(fill.fore_color)


def describe_run(run):
    font = run.font
    size = attempt(lambda: font.size)
    colour = attempt(lambda: font.color) if attempt(lambda: font.color.type) is not None else None
    return {
        "text": cut(run.text),
        "font": attempt(lambda: font.name),
        "size_pt": size.pt if size is not None else None,
        "bold": attempt(lambda: font.bold),
        "italic": attempt(lambda: font.italic),
        "underline": bool(attempt(lambda: font.underline)) if attempt(lambda: font.underline) is not None else None,
        "color": colour_of(colour),
    }


def describe_text(frame):
    paragraphs = []
    for paragraph in frame.paragraphs[:100]:
        alignment = attempt(lambda: paragraph.alignment)
        paragraphs.append({
            "text": cut(attempt(lambda: paragraph.text)),
            "level": attempt(lambda: paragraph.level) or 0,
            "alignment": str(alignment).split(" ")[0] if alignment is not None else None,
            "runs": [describe_run(run) for run in paragraph.runs[:50]],
        })
    return paragraphs


def describe_shape(shape, budget):
    budget[0] -= 1
    kind = attempt(lambda: shape.shape_type)
    placeholder = None
    if attempt(lambda: shape.is_placeholder):
        placeholder = str(attempt(lambda: shape.placeholder_format.type)).split(" ")[0]
    line = attempt(lambda: shape.line)
    info = {
        "id": attempt(lambda: shape.shape_id),
        "name": cut(attempt(lambda: shape.name)),
        "kind": str(kind).split(" ")[0] if kind is not None else "UNKNOWN",
        "left": attempt(lambda: int(shape.left)) if attempt(lambda: shape.left) is not None else None,
        "top": attempt(lambda: int(shape.top)) if attempt(lambda: shape.top) is not None else None,
        "width": attempt(lambda: int(shape.width)) if attempt(lambda: shape.width) is not None else None,
        "height": attempt(lambda: int(shape.height)) if attempt(lambda: shape.height) is not None else None,
        "rotation": attempt(lambda: shape.rotation) or 0.0,
        "placeholder": placeholder,
        "fill": fill_colour(attempt(lambda: shape.fill)),
        "line": colour_of(attempt(lambda: line.color)) if line is not None and attempt(lambda: line.fill.type) is not None else None,
        "text": describe_text(shape.text_frame) if attempt(lambda: shape.has_text_frame) else [],
        "table": None,
        "image": None,
        "children": [],
    }
    if attempt(lambda: shape.has_table):
        rows = []
        for row in list(shape.table.rows)[:50]:
            rows.append([cut(cell.text) for cell in list(row.cells)[:20]])
        info["table"] = rows
    image = attempt(lambda: shape.image)
    if image is not None:
        info["image"] = {"content_type": attempt(lambda: image.content_type), "bytes": len(image.blob)}
    if attempt(lambda: shape.shapes) is not None:
        for child in shape.shapes:
            if budget[0] <= 0:
                break
            info["children"].append(describe_shape(child, budget))
    return info


def structure(request):
    from pptx import Presentation
    deck = Presentation(request["deck"])
    max_slides = int(request["max_slides"])
    max_shapes = int(request["max_shapes"])
    slides = []
    all_slides = list(deck.slides)
    for number, slide in enumerate(all_slides[:max_slides], start=1):
        budget = [max_shapes]
        shapes = []
        total = len(slide.shapes)
        for shape in slide.shapes:
            if budget[0] <= 0:
                break
            shapes.append(describe_shape(shape, budget))
        background = None
        if not attempt(lambda: slide.follow_master_background):
            background = fill_colour(attempt(lambda: slide.background.fill))
        notes = None
        if attempt(lambda: slide.has_notes_slide):
            notes = cut(attempt(lambda: slide.notes_slide.notes_text_frame.text))
        slides.append({
            "number": number,
            "layout": cut(attempt(lambda: slide.slide_layout.name)),
            "background": background,
            "shapes": shapes,
            "omitted_shapes": max(0, total - len(shapes)),
            "notes": notes,
        })
    return {
        "slide_width": int(deck.slide_width),
        "slide_height": int(deck.slide_height),
        "slide_count": len(all_slides),
        "slides": slides,
    }


def fill_of(fill):
    """A shape's fill as SlideBench's colour score compares it: its type, and a solid fill's
    colour (RGB or theme)."""
    from pptx.enum.dml import MSO_COLOR_TYPE, MSO_FILL
    kind = attempt(lambda: fill.type)
    if kind == MSO_FILL.SOLID:
        colour_type = attempt(lambda: fill.fore_color.type)
        if colour_type == MSO_COLOR_TYPE.RGB:
            return {"type": "solid", "rgb": list(fill.fore_color.rgb)}
        if colour_type == MSO_COLOR_TYPE.SCHEME:
            return {"type": "solid", "theme": str(fill.fore_color.theme_color)}
        return {"type": "solid"}
    if kind == MSO_FILL.BACKGROUND:
        return {"type": "background"}
    return {"type": "inherited" if kind is None else str(kind).split(" ")[0].lower()}


def blocks(request):
    """One slide's blocks as AutoPresent's evaluator reads them: every top-level shape with a
    text frame (its text and fill) and every picture (the SHA-1 of its image), positions and
    sizes as shares of the slide; and the slide's own background when it is a solid RGB
    colour."""
    from pptx import Presentation
    from pptx.enum.shapes import MSO_SHAPE_TYPE
    deck = Presentation(request["deck"])
    slides = list(deck.slides)
    number = int(request["slide"])
    if not 1 <= number <= len(slides):
        raise Refused("there is no slide %d: the deck has %d" % (number, len(slides)))
    slide = slides[number - 1]
    width, height = int(deck.slide_width), int(deck.slide_height)
    found = []
    for shape in list(slide.shapes)[: int(request["max_shapes"])]:
        if attempt(lambda: shape.has_text_frame):
            block = {"kind": "text", "text": cut(shape.text_frame.text), "fill": fill_of(attempt(lambda: shape.fill))}
        elif attempt(lambda: shape.shape_type) == MSO_SHAPE_TYPE.PICTURE:
            block = {"kind": "image", "image_sha1": attempt(lambda: shape.image.sha1)}
        else:
            continue
        place = [attempt(lambda: int(shape.left)), attempt(lambda: int(shape.top)),
                 attempt(lambda: int(shape.width)), attempt(lambda: int(shape.height))]
        block["left"], block["top"], block["width"], block["height"] = [
            (value or 0) / size for value, size in zip(place, (width, height, width, height))]
        found.append(block)
    background = None
    if attempt(lambda: slide.follow_master_background) is False:
        rgb = attempt(lambda: slide.background.fill.fore_color.rgb)
        background = list(rgb) if rgb is not None else None
    return {"blocks": found, "background": background, "slide_count": len(slides)}


def main():
    args = sys.argv[1:]
    program_dir = args[args.index("--office") + 1]
    profile = args[args.index("--profile") + 1]
    # The protocol keeps this process's standard output; anything else printed goes to stderr.
    protocol = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    try:
        import pptx
    except ImportError:
        raise SystemExit("python-pptx is not installed for " + sys.executable + ": run `cargo xtask setup`")
    office = Office(program_dir, profile)
    protocol.write(READY + json.dumps({"office": office.version(), "pptx": pptx.__version__}) + "\n")
    while True:
        line = sys.stdin.readline(MAX_REQUEST_BYTES)
        if not line:
            return
        try:
            request = json.loads(line)
            op = request.get("op")
            if op == "render":
                reply = office.render(request)
            elif op == "structure":
                reply = {"structure": structure(request)}
            elif op == "blocks":
                reply = {"blocks": blocks(request)}
            elif op == "ping":
                reply = {}
            else:
                raise Refused("unknown op %r" % op)
            reply["ok"] = True
        except Refused as refusal:
            reply = {"ok": False, "error": str(refusal)}
        except Exception as error:
            reply = {"ok": False, "error": cut("%s: %s" % (type(error).__name__, error))}
        protocol.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
