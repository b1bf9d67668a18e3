"""A sqlite3 module that can load extensions (sqlite-vec needs that).

Some Python builds (pyenv's defaults among them) ship a stdlib sqlite3 without
`enable_load_extension`; pysqlite3-binary, installed on Linux x86_64, fills the gap. The
stdlib is preferred wherever it works.
"""

from __future__ import annotations

import sqlite3
from types import ModuleType
from typing import Any


def _can_load_extensions(module: Any) -> bool:
    try:
        connection = module.connect(":memory:")
    except Exception:
        return False
    try:
        return hasattr(connection, "enable_load_extension")
    finally:
        connection.close()


def sqlite_module() -> ModuleType:
    if _can_load_extensions(sqlite3):
        return sqlite3
    try:
        from pysqlite3 import dbapi2 as module
    except ImportError as exc:
        raise RuntimeError(
            "this Python's sqlite3 cannot load extensions and pysqlite3-binary is not "
            "installed; install it (pip install pysqlite3-binary) or use a Python build "
            "whose sqlite3 supports extensions"
        ) from exc
    found: ModuleType = module
    return found


def connect_with_vec(path: str = ":memory:") -> Any:
    """A connection with sqlite-vec loaded."""
    import sqlite_vec

    connection = sqlite_module().connect(path)
    connection.enable_load_extension(True)
    sqlite_vec.load(connection)
    connection.enable_load_extension(False)
    return connection


def vec_version() -> str:
    connection = connect_with_vec()
    try:
        return str(connection.execute("select vec_version()").fetchone()[0])
    finally:
        connection.close()
