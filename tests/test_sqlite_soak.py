"""Soak of the default SQLite storage with graph worker processes: 500 questions at once over
250 threads (each thread's second message a follow-up) at one ``python -m bot run`` whose chat
process and three graph workers write the one checkpoint file (WAL, busy timeout): every
question is answered once, none apologised for, and the log never says "database is locked".
Figures: bench/bench_sqlite_soak.py and bench/README.md."""

from __future__ import annotations

import pytest

from tests.fakes.soak import soak


@pytest.mark.slow
async def test_500_questions_with_graph_workers_never_meet_a_locked_database(tmp_path):
    r = await soak(tmp_path, questions=500, threads=250, workers=3, timeout=100)
    assert r["workers_ready"] == ["3"], r
    assert r["locked_lines"] == [] and r["errors"] == [], r
    assert r["http_statuses"] == [200] and r["replies"] == 500 and r["answered"] == 500, r
    assert r["apologies"] == 0, r
