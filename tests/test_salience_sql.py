"""Salience has one definition (`decay.salience_formula`); each engine's SQL is rendered from it and equals it.

The rendered expression is evaluated by each engine on sample inputs (DuckDB always,
PostgreSQL when MNEMO_TEST_PG_DSN answers) and compared with the Python value. The
whole decay pass over stored memories is checked in test_decay_store.py.
"""

from __future__ import annotations

import itertools

import pytest
from conftest import require_postgres

from mnemo.config import DecayConfig
from mnemo.decay import salience_formula
from mnemo.store import DUCKDB, POSTGRES, split_dsn
from mnemo.store.sql import salience_sql

CONFIGS = [DecayConfig(), DecayConfig(reinforcement_weight=0.0, corroboration_weight=1.5),
           DecayConfig(reinforcement_weight=2, corroboration_weight=0)]  # an int weight renders as a float too
# (importance, access_count, corroborations, age in days, half-life in days): edges and ordinary values.
SAMPLES = [
    (0.0, 0, 0, 0.0, 14.0), (1.0, 0, 0, 0.0, 14.0), (0.3, 0, 0, 21.0, 14.0), (0.3, 0, 0, 26.7, 14.0),
    (0.5, 3, 1, 100.0, 180.0), (1.0, 50, 10, 800.0, 365.0), (-0.2, 2, 0, 1.0, 14.0), (1.7, 0, 4, 3.5, 180.0),
    (0.08, 1, 1, 0.0001, 14.0), (0.9, 7, 2, 1e4, 14.0),
]


def _python(cfg: DecayConfig) -> list[float]:
    return [salience_formula(i, a, c, age, h, cfg) for i, a, c, age, h in SAMPLES]


def _values(mark_row: str) -> str:
    return ", ".join(mark_row for _ in SAMPLES)


@pytest.mark.parametrize("cfg", CONFIGS)
def test_duckdb_rendering_equals_the_python_formula(cfg):
    import duckdb

    sql = (f"SELECT k, {salience_sql(DUCKDB, cfg)} FROM (VALUES {_values('(?, ?, ?, ?, ?, ?)')}) "
           "AS t(k, importance, access_count, corroborations, age, h) ORDER BY k")
    params = [x for k, (i, a, c, age, h) in enumerate(SAMPLES) for x in (k, i, a, c, age, h)]
    with duckdb.connect() as con:
        got = [r[1] for r in con.execute(sql, params).fetchall()]
    assert got == pytest.approx(_python(cfg), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("cfg", CONFIGS)
def test_postgres_rendering_equals_the_python_formula(cfg):
    dsn = require_postgres()
    import psycopg

    row = "(%s::int, %s::float8, %s::int, %s::int, %s::float8, %s::float8)"
    sql = (f"SELECT k, {salience_sql(POSTGRES, cfg)} FROM (VALUES {_values(row)}) "
           "AS t(k, importance, access_count, corroborations, age, h) ORDER BY k")
    params = list(itertools.chain.from_iterable((k, *s) for k, s in enumerate(SAMPLES)))
    with psycopg.connect(split_dsn(dsn)[0]) as con:
        got = [r[1] for r in con.execute(sql, params).fetchall()]
    assert got == pytest.approx(_python(cfg), rel=1e-12, abs=1e-15)


def test_the_formula_is_rendered_not_restated():
    # Changing the one definition changes both renderings: the weights appear as literals from the config.
    for dialect in (DUCKDB, POSTGRES):
        a = salience_sql(dialect, DecayConfig(reinforcement_weight=0.25))
        b = salience_sql(dialect, DecayConfig(reinforcement_weight=0.5))
        assert a != b and dialect.number(0.25) in a and dialect.number(0.5) in b
