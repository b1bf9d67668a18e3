"""Which images of a conversation a model call sends as pixels: the newest few.

The history holds image references only (`ImagePart` without data). Before each model call the
agent loop asks `ImageWindow.attach` for the messages to send: the newest `keep` images get
their bytes, read from the workspace; every older one stays a reference, which the providers
show as a one-line placeholder. A long conversation with many photos therefore costs a line
per old photo, and a photo sent a minute ago can still be talked about.

The bytes are cached (a few MiB, newest first) so the rounds of one turn read each file once.
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from gateway.agent.conversation import ImagePart, Message

log = logging.getLogger(__name__)

CACHE_BYTES = 16 * 1024 * 1024
MAX_IMAGE_BYTES = 8 * 1024 * 1024  # a resized copy is well under 1 MB; anything this big is not


class ImageWindow:
    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._cache: OrderedDict[tuple[str, int, int], bytes] = OrderedDict()
        self._cached_bytes = 0

    def attach(self, history: Sequence[Message], workspace: Path) -> list[Message]:
        """`history` with the newest `keep` images' bytes filled in (the rest untouched)."""
        messages = list(history)
        left = self.keep
        for index in range(len(messages) - 1, -1, -1):
            if left <= 0:
                break
            message = messages[index]
            if not message.images:
                continue
            images = list(message.images)
            for position in range(len(images) - 1, -1, -1):
                if left <= 0:
                    break
                left -= 1
                data = self._read(workspace, images[position])
                if data:
                    images[position] = replace(images[position], data=data)
            messages[index] = replace(message, images=tuple(images))
        return messages

    def _read(self, workspace: Path, image: ImagePart) -> bytes:
        """The image's bytes, or b"" when it is gone or not a file inside the workspace (the
        reference comes from a transcript; a moved or deleted file becomes a placeholder)."""
        root = os.path.realpath(workspace)
        path = os.path.realpath(os.path.join(root, image.path))
        if os.path.commonpath([root, path]) != root:
            log.warning("image reference outside the workspace ignored: %s", image.path)
            return b""
        try:
            st = os.stat(path)
            key = (path, st.st_mtime_ns, st.st_size)
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
            if st.st_size > MAX_IMAGE_BYTES:
                return b""
            with open(path, "rb") as handle:
                data = handle.read(MAX_IMAGE_BYTES + 1)
        except OSError:
            return b""
        self._remember(key, data)
        return data

    def _remember(self, key: tuple[str, int, int], data: bytes) -> None:
        self._cache[key] = data
        self._cached_bytes += len(data)
        while self._cached_bytes > CACHE_BYTES and len(self._cache) > 1:
            _, dropped = self._cache.popitem(last=False)
            self._cached_bytes -= len(dropped)
