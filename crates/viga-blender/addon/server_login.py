# SPDX-License-Identifier: GPL-3.0-or-later
# Where the add-on keeps the token it logs in to a viga server with: a JSON file readable by
# this user alone (mode 0600, written by exclusive create and rename) in a private folder,
# never the .blend and never Blender's preferences file, which people share and back up.
# Three functions, so the token can move to the panel's key store (the OS keyring) by
# changing this file alone.

import contextlib
import json
import os

from . import viga_bridge

CONFIG_DIR_ENV = "VIGA_CONFIG_DIR"
TOKENS_FILE = "server-tokens.json"


def config_dir():
    """$VIGA_CONFIG_DIR, else $XDG_CONFIG_HOME/viga, else ~/.config/viga."""
    explicit = os.environ.get(CONFIG_DIR_ENV)
    if explicit:
        return explicit
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "viga")


def _key(url, username):
    return "%s %s" % (username.strip(), url.strip())


def _read(path):
    try:
        with open(path, "r", encoding="utf-8") as handle:
            tokens = json.load(handle)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return {}
    return tokens if isinstance(tokens, dict) else {}


def _path():
    return os.path.join(viga_bridge.private_dir(config_dir()), TOKENS_FILE)


def load_token(url, username):
    """The token stored for `username` at `url`, or None."""
    try:
        token = _read(_path()).get(_key(url, username))
    except OSError:
        return None
    return token if isinstance(token, str) and token else None


def store_token(url, username, token):
    """Keeps `token` for `username` at `url` (replacing an earlier one). Raises OSError when
    the private folder cannot be made or is not private."""
    path = _path()
    tokens = _read(path)
    tokens[_key(url, username)] = token
    viga_bridge.write_private_json(path, tokens)


def forget_token(url, username):
    """Removes the token stored for `username` at `url`, if any."""
    with contextlib.suppress(OSError):
        path = _path()
        tokens = _read(path)
        if tokens.pop(_key(url, username), None) is not None:
            viga_bridge.write_private_json(path, tokens)
