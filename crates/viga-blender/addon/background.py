# SPDX-License-Identifier: GPL-3.0-or-later
# Work that must not hold Blender's main thread (a viga command that stores a key or applies a
# result, reading a conversation's run folders) runs on a thread of its own. What it returns
# is handed back to the main thread: the runner's tick calls drain(), which calls each job's
# `done` there, the only place that may touch bpy data.

import queue
import subprocess
import threading
import traceback

MAX_DONE_PER_TICK = 20
# A viga command the panel waits for (key store, presets, apply) ends long before this; one
# that does not is killed, so no thread waits forever.
COMMAND_TIMEOUT_S = 600.0

_finished = queue.Queue()
_in_flight = [0]
_lock = threading.Lock()


def submit(work, done):
    """Runs work() on a thread; done(result, error) is called later on the main thread, with
    error the exception work() raised (result is then None)."""
    with _lock:
        _in_flight[0] += 1

    def run():
        try:
            result, error = work(), None
        except Exception as exc:  # noqa: BLE001 - handed to `done`, which says it to the user
            result, error = None, exc
        _finished.put((done, result, error))

    threading.Thread(target=run, name="viga-background", daemon=True).start()


def drain(max_jobs=MAX_DONE_PER_TICK):
    """Calls `done` of at most max_jobs finished jobs (main thread only); returns how many."""
    handled = 0
    while handled < max_jobs:
        try:
            done, result, error = _finished.get_nowait()
        except queue.Empty:
            break
        with _lock:
            _in_flight[0] -= 1
        try:
            done(result, error)
        except Exception:  # noqa: BLE001 - a failing callback must not stop the others
            traceback.print_exc()
        handled += 1
    return handled


def busy():
    """Whether a job is running or waits for its `done`."""
    with _lock:
        return _in_flight[0] > 0


def run_command(argv, environment, stdin_text=None):
    """Runs a command to its end (on a background thread): (exit code, stdout, stderr). What
    goes in on stdin (a key) is never on its command line."""
    completed = subprocess.run(
        argv, input=stdin_text if stdin_text is not None else "", capture_output=True, text=True,
        encoding="utf-8", errors="replace", env=environment, timeout=COMMAND_TIMEOUT_S, check=False,
    )
    return completed.returncode, completed.stdout, completed.stderr
