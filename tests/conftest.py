"""Session-wide fixtures: one throwaway PostgreSQL server per test session and the
production fixture database built in it (DESIGN 10.1: real server, no mock database)."""

from __future__ import annotations

import os

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from extrarlhf.production.fixture import build_fixture

from extrarlhf.production.localdb import PostgresUnavailable, ThrowawayPostgres

# 400 battles, not 300: at about 60% human-vs-human, 300 battles leave fewer than the 200
# finished human-vs-human battles that training_ready_standard needs.
PRODUCTION_FIXTURE = {"battles": 400, "players": 60, "days": 3, "seed": 7}


@dataclass(frozen=True)
class ProductionDB:
    """The filled production database: its DSN and the fixture's summary (build_fixture's return)."""

    dsn: str
    summary: dict[str, Any]


@pytest.fixture(scope="session")
def pg_server() -> Iterator[ThrowawayPostgres]:
    try:
        server = ThrowawayPostgres()
    except PostgresUnavailable as exc:
        if os.environ.get("RLHF_REQUIRE_POSTGRES") == "1":  # make test: a missing server is a failure
            raise
        pytest.skip(str(exc))
    with server:
        yield server


@pytest.fixture(scope="session")
def production_db(pg_server: ThrowawayPostgres) -> ProductionDB:
    dsn = pg_server.create_database("prod_fixture")
    return ProductionDB(dsn, build_fixture(dsn, **PRODUCTION_FIXTURE))
