"""A fresh PostgreSQL database per test on the local server (127.0.0.1:5432, trust auth,
user postgres): ``CREATE DATABASE tw_<random>`` through the ``test`` database, dropped
(with its connections) afterwards. Tests skip, saying why, only when the server cannot
be reached at all."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/test"


def _admin():
    import psycopg

    return psycopg.connect(ADMIN_URL, autocommit=True, connect_timeout=3)


def url_of(name: str) -> str:
    return f"postgresql://postgres@127.0.0.1:5432/{name}"


def terminate(name: str) -> int:
    """Cut every connection to database ``name`` (``pg_terminate_backend``); returns how many."""
    with _admin() as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        ).fetchall()
    return len(rows)


@contextmanager
def outage(name: str) -> Iterator[None]:
    """Database ``name`` goes away for the body: new connections are refused
    (``ALLOW_CONNECTIONS false``) and the open ones cut; back afterwards."""
    with _admin() as conn:
        conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
    try:
        terminate(name)
        yield
    finally:
        with _admin() as conn:
            conn.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')


@pytest.fixture
def pg_database() -> Iterator[tuple[str, str]]:
    """``(name, url)`` of a new empty database, dropped after the test."""
    try:
        admin = _admin()
    except Exception as exc:  # noqa: BLE001
        pytest.skip(
            f"PostgreSQL at 127.0.0.1:5432 is unreachable ({type(exc).__name__}: {exc}); "
            "start it (.ci/run does) to run the PostgreSQL tests"
        )
    name = f"tw_{uuid.uuid4().hex[:12]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name, url_of(name)
    finally:
        with _admin() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
