#!/usr/bin/env python3
"""Serve VIGA's own scene reconstruction (SAM segmentation, then one SAM-3D mesh per object)
behind viga's reconstruction-service contract, for `viga run --init URL`.

The contract is docs/init-service.md: viga POSTs the target pictures as JSON
({"viga_init": 1, "pictures": [{"view", "media_type", "data"}]}) and gets back, per object, a
name, a mesh URL on this server, a transform in Blender's world coordinates and a confidence.

This adapter does no reconstruction itself. It runs the workers of a checkout of the official
VIGA repository (https://github.com/Fugtemypt123/VIGA), each in the Python environment VIGA's
own setup made for it, exactly as VIGA's `tools/sam_init.py` does:

  1. `tools/sam_worker.py --image target.png --out all_masks.npy` (SAM ViT-H masks, named by a
     vision-language model; VIGA names them `object_N` when that model cannot be reached);
  2. for each mask, `tools/sam3d_worker.py --image target.png --mask NAME.npy --config
     pipeline.yaml --glb NAME.glb` (SAM-3D: a GLB and the object's pose);
  3. the pose turned into Blender coordinates as VIGA's `tools/import_glbs_to_blend.py` does
     (OpenCV camera axes to Blender's: a half turn about X; translation times its scale;
     the object's own scale last).

Those models need CUDA GPUs and their weights; run this on such a machine, e.g.

    python tools/init_service/sam3d_adapter.py --viga ~/VIGA \\
        --sam-python ~/envs/sam/bin/python --sam3d-python ~/envs/sam3d/bin/python \\
        --port 8765

and start viga with `--init http://GPU-HOST:8765/reconstruct`. viga's CI never runs this
script: the models cannot run there. It uses the Python standard library only.

VIGA's workers report no confidence per object, so every object gets --default-confidence
and the answer says so ("confidence_source": "default").
"""

import argparse
import base64
import binascii
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: The largest request body read (the target pictures, base64).
MAX_REQUEST_BYTES = 64 << 20
#: Object names as viga takes them: short, printable.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_\-. ]{1,63}$")


def quaternion_from_matrix(m):
    """A unit quaternion (w, x, y, z) of the 3x3 rotation matrix `m` (rows)."""
    trace = m[0][0] + m[1][1] + m[2][2]
    if trace > 0:
        s = 0.5 / math.sqrt(trace + 1.0)
        q = (0.25 / s, (m[2][1] - m[1][2]) * s, (m[0][2] - m[2][0]) * s, (m[1][0] - m[0][1]) * s)
    elif m[0][0] > m[1][1] and m[0][0] > m[2][2]:
        s = 2.0 * math.sqrt(1.0 + m[0][0] - m[1][1] - m[2][2])
        q = ((m[2][1] - m[1][2]) / s, 0.25 * s, (m[0][1] + m[1][0]) / s, (m[0][2] + m[2][0]) / s)
    elif m[1][1] > m[2][2]:
        s = 2.0 * math.sqrt(1.0 + m[1][1] - m[0][0] - m[2][2])
        q = ((m[0][2] - m[2][0]) / s, (m[0][1] + m[1][0]) / s, 0.25 * s, (m[1][2] + m[2][1]) / s)
    else:
        s = 2.0 * math.sqrt(1.0 + m[2][2] - m[0][0] - m[1][1])
        q = ((m[1][0] - m[0][1]) / s, (m[0][2] + m[2][0]) / s, (m[1][2] + m[2][1]) / s, 0.25 * s)
    norm = math.sqrt(sum(c * c for c in q))
    return [c / norm for c in q]


def matrix_from_quaternion(q):
    w, x, y, z = q
    return [
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ]


def flat(value):
    """Nested lists of one number each (`[[1.0]]`, as the workers print tensors) unwrapped."""
    while isinstance(value, list) and len(value) == 1 and isinstance(value[0], list):
        value = value[0]
    return value


def blender_transform(info):
    """viga's transform of one SAM-3D result (`translation`, `rotation`, `scale`,
    `translation_scale`), as VIGA's import_glbs_to_blend.py places the object."""
    translation = flat(info.get("translation")) or [0.0, 0.0, 0.0]
    translation_scale = flat(info.get("translation_scale", 1.0))
    if isinstance(translation_scale, list):
        translation_scale = translation_scale[0] if translation_scale else 1.0
    rotation = flat(info.get("rotation")) or [1.0, 0.0, 0.0, 0.0]
    if len(rotation) == 4 and not isinstance(rotation[0], list):
        matrix = matrix_from_quaternion(rotation)
    else:
        matrix = rotation
    # OpenCV camera axes (X right, Y down, Z forward) to Blender's: negate Y and Z rows.
    fixed = [matrix[0], [-v for v in matrix[1]], [-v for v in matrix[2]]]
    location = [
        float(translation[0]) * translation_scale,
        -float(translation[1]) * translation_scale,
        -float(translation[2]) * translation_scale,
    ]
    scale = flat(info.get("scale", 1.0))
    if not isinstance(scale, list):
        scale = [scale, scale, scale]
    elif len(scale) == 1:
        scale = scale * 3
    return {
        "location": location,
        "rotation_quaternion": quaternion_from_matrix(fixed),
        "scale": [float(s) for s in scale[:3]],
    }


class Reconstructor:
    def __init__(self, args):
        self.args = args
        self.work = args.work or tempfile.mkdtemp(prefix="viga-sam3d-")
        self.lock = threading.Lock()  # one reconstruction at a time: the GPUs are shared

    def run(self, command, what):
        done = subprocess.run(
            command,
            cwd=self.args.viga,
            capture_output=True,
            text=True,
            timeout=self.args.worker_timeout,
        )
        if done.returncode != 0:
            tail = (done.stderr or done.stdout)[-2000:]
            raise RuntimeError("%s failed (exit %d): %s" % (what, done.returncode, tail))
        return done.stdout

    def reconstruct(self, picture_bytes, base_url):
        job = uuid.uuid4().hex
        folder = os.path.join(self.work, job)
        os.makedirs(folder)
        target = os.path.join(folder, "target.png")
        with open(target, "wb") as file:
            file.write(picture_bytes)
        masks = os.path.join(folder, "all_masks.npy")
        with self.lock:
            self.run(
                [self.args.sam_python, "tools/sam_worker.py", "--image", target, "--out", masks],
                "VIGA's SAM worker",
            )
            names_file = masks.replace(".npy", "_object_names.json")
            with open(names_file) as file:
                names = json.load(file).get("object_mapping", [])
            objects = []
            for name in names:
                objects.append(self.one_object(folder, target, name, job, base_url))
        return [o for o in objects if o is not None]

    def one_object(self, folder, target, name, job, base_url):
        if not NAME_PATTERN.match(name):
            return None
        glb = os.path.join(folder, name + ".glb")
        stdout = self.run(
            [
                self.args.sam3d_python,
                "tools/sam3d_worker.py",
                "--image", target,
                "--mask", os.path.join(folder, name + ".npy"),
                "--config", self.args.sam3d_config,
                "--glb", glb,
            ],
            "VIGA's SAM-3D worker for %s" % name,
        )
        info = json.loads(stdout.strip().splitlines()[-1])
        if not info.get("glb_path") or not os.path.isfile(glb):
            return None
        return {
            "name": name,
            "mesh": "%s/meshes/%s/%s.glb" % (base_url, job, name),
            "format": "glb",
            "transform": blender_transform(info),
            "confidence": self.args.default_confidence,
            "confidence_source": "default",
        }

    def mesh_path(self, job, file_name):
        """The path of a mesh this adapter made, or None: only `<job>/<name>.glb` of a job
        folder, nothing else of the disk."""
        if not re.fullmatch(r"[0-9a-f]{32}", job) or not file_name.endswith(".glb"):
            return None
        if not NAME_PATTERN.match(file_name[: -len(".glb")]):
            return None
        path = os.path.join(self.work, job, file_name)
        return path if os.path.isfile(path) else None


def handler_for(reconstructor):
    class Handler(BaseHTTPRequestHandler):
        def answer(self, status, body, content_type="application/json"):
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def refuse(self, status, message):
            self.answer(status, json.dumps({"message": message}).encode())

        def do_POST(self):
            if self.path.rstrip("/") != "/reconstruct":
                return self.refuse(404, "POST the pictures to /reconstruct")
            length = int(self.headers.get("Content-Length") or 0)
            if length <= 0 or length > MAX_REQUEST_BYTES:
                return self.refuse(413, "the request must carry the pictures, at most 64 MiB")
            try:
                request = json.loads(self.rfile.read(length))
                if request.get("viga_init") != 1:
                    return self.refuse(400, "this adapter speaks viga_init 1")
                picture = base64.b64decode(request["pictures"][0]["data"], validate=True)
            except (ValueError, KeyError, IndexError, TypeError, binascii.Error) as err:
                return self.refuse(400, "not the contract's request: %s" % err)
            host = self.headers.get("Host") or "%s:%d" % self.server.server_address[:2]
            try:
                objects = reconstructor.reconstruct(picture, "http://%s" % host)
            except (RuntimeError, OSError, ValueError, subprocess.TimeoutExpired) as err:
                return self.refuse(500, str(err)[-1000:])
            self.answer(200, json.dumps({"objects": objects}).encode())

        def do_GET(self):
            parts = self.path.split("?")[0].strip("/").split("/")
            path = None
            if len(parts) == 3 and parts[0] == "meshes":
                path = reconstructor.mesh_path(parts[1], parts[2])
            if path is None:
                return self.refuse(404, "no such mesh")
            with open(path, "rb") as file:
                self.answer(200, file.read(), "model/gltf-binary")

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--viga", required=True, help="a checkout of the official VIGA repository")
    parser.add_argument("--sam-python", required=True, help="the Python of VIGA's SAM environment")
    parser.add_argument("--sam3d-python", required=True, help="the Python of VIGA's SAM-3D environment")
    parser.add_argument(
        "--sam3d-config",
        default="utils/sam3d/checkpoints/hf/pipeline.yaml",
        help="SAM-3D's pipeline config, relative to --viga (VIGA's default)",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0: any free port (printed)")
    parser.add_argument("--work", help="where jobs are kept (default: a new temporary folder)")
    parser.add_argument("--worker-timeout", type=float, default=1800.0, help="seconds per worker run")
    parser.add_argument("--default-confidence", type=float, default=0.5)
    args = parser.parse_args()
    if not os.path.isfile(os.path.join(args.viga, "tools", "sam3d_worker.py")):
        sys.exit("%s is not a VIGA checkout (no tools/sam3d_worker.py)" % args.viga)
    reconstructor = Reconstructor(args)
    server = ThreadingHTTPServer((args.host, args.port), handler_for(reconstructor))
    host, port = server.server_address[:2]
    print("serving VIGA's SAM / SAM-3D reconstruction for viga --init at http://%s:%d/reconstruct (jobs in %s)"
          % (host, port, reconstructor.work), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
