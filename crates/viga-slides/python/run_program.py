"""Runs one python-pptx program for viga (crates/viga-slides) and reports how it ended.

    python -I run_program.py PROGRAM RESULT

The program runs as `__main__` in a fresh process, in its own working folder, with
VIGA_DECK_PATH naming the deck it must save (`deck.pptx` in that folder). Its outcome goes to
RESULT as JSON: `{"ok": true}`, or the exception's type, message, line in the program and
traceback (without this runner's frame), so a broken program's error comes back as data.
"""

import json
import os
import sys
import traceback

MAX_MESSAGE = 4000
MAX_TRACEBACK = 16000


def report(result_path, result):
    partial = result_path + ".partial"
    with open(partial, "w", encoding="utf-8") as out:
        json.dump(result, out)
    os.replace(partial, result_path)


def failure(error, frames_from):
    line = None
    for frame in traceback.extract_tb(frames_from):
        if frame.filename == "program.py":
            line = frame.lineno
    if isinstance(error, SyntaxError) and error.filename == "program.py":
        line = error.lineno
    text = "".join(traceback.format_exception(type(error), error, frames_from))
    if len(text) > MAX_TRACEBACK:
        text = text[:MAX_TRACEBACK // 4] + "\n[…]\n" + text[-MAX_TRACEBACK * 3 // 4:]
    return {
        "ok": False,
        "type": type(error).__name__,
        "message": str(error)[:MAX_MESSAGE],
        "line": line,
        "traceback": text,
    }


def main():
    program_path, result_path = sys.argv[1], sys.argv[2]
    with open(program_path, encoding="utf-8") as source_file:
        source = source_file.read()
    try:
        code = compile(source, "program.py", "exec")
    except SyntaxError as error:
        report(result_path, failure(error, None))
        return 1
    namespace = {"__name__": "__main__", "__file__": "program.py", "__builtins__": __builtins__}
    try:
        exec(code, namespace)
    except SystemExit as exit_request:
        if exit_request.code not in (None, 0):
            report(result_path, failure(exit_request, exit_request.__traceback__.tb_next))
            return 1
    except BaseException as error:
        report(result_path, failure(error, error.__traceback__.tb_next))
        return 1
    report(result_path, {"ok": True})
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(status)
