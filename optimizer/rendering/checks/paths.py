"""``render --check`` rule ``paths``: every checkpoint path the rendered job writes lies under a
bucket key that a rendered lifecycle rule covers, and the words the training process receives
from a RayJob entrypoint (:mod:`ptplan.rendering.checks.cluster`)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from typing import Any

from ptplan.rendering.checks.readers import _docs, _rayjob


def entry_words(entrypoint: str) -> list[str]:
    """The words the training process receives (bash → list2cmdline → sh, modelled with
    POSIX shlex; tests/test_render.py runs the real shells)."""
    words = shlex.split(subprocess.list2cmdline(shlex.split(entrypoint)))
    if len(words) == 3 and words[0] == "echo" and words[1].endswith("|base64") \
            and words[2] == "-d|sh":  # transport.ray_entrypoint's base64 form
        import base64

        return shlex.split(base64.b64decode(words[1][:-len("|base64")]).decode())[1:]
    return words


def check_paths(files: dict[str, str], out: list[str]) -> None:
    prefixes: list[str] = []
    for rel, text in files.items():
        if rel == "lifecycle/s3-lifecycle.json":
            prefixes += [r["Filter"]["Prefix"] for r in json.loads(text)["Rules"]
                         if "Transitions" in r or "Expiration" in r]
        elif rel == "lifecycle/gcs-lifecycle.json":
            prefixes += [p for r in json.loads(text)["lifecycle"]["rule"]
                         if r["action"]["type"] != "AbortIncompleteMultipartUpload"
                         for p in r["condition"]["matchesPrefix"]]
    if not prefixes:
        return
    writes: list[tuple[str, str, str]] = []  # (where, path, bucket key prefix of /checkpoints)
    job = _rayjob(files)
    if job is not None:
        pod = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
        mount: dict[str, Any] = next((m for m in pod["containers"][0].get("volumeMounts", [])
                                  if m["mountPath"] == "/checkpoints"), {})
        root = (mount.get("subPath", "").strip("/") + "/").lstrip("/")
        writes += [("RayJob entrypoint", w, root) for w in entry_words(job["spec"]["entrypoint"])]
    for rel, text in files.items():
        if rel.startswith("skypilot/"):
            for t in _docs(text)[1:]:
                m = t["file_mounts"]["/checkpoints"]
                src = m.get("source", "")
                parts = src.split("://", 1)[-1].split("/", 1)
                root = parts[1].strip("/") + "/" if len(parts) > 1 and parts[1] else ""
                for line in t["run"].splitlines():
                    try:
                        writes += [(f"{rel} {t['name']}", w, root) for w in shlex.split(line)]
                    except ValueError:
                        continue
    for where, word, root in writes:
        for path in re.findall(r"(?:^|=)(/checkpoints(?:/[^\s,]*)?)", word):
            key = root + path[len("/checkpoints"):].strip("/") + "/"
            if not any(key.startswith(p) for p in prefixes):
                out.append(f"paths: {where} writes {path} = bucket key {key!r}, which no "
                           f"lifecycle rule covers (rules: {', '.join(sorted(set(prefixes)))})")
