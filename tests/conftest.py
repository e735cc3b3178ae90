"""Shared fixtures: the bundled expert on both backends, decision logs on both databases, scenario data, and a
reset of global engine state."""
from __future__ import annotations

import os
import uuid
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from kentino_expert.answer.failures import forget_logged_sites
from kentino_expert.decisions.connect import open_log
from kentino_expert.expert import Expert, reset_default_expert
from kentino_expert.service.log_failures import forget_logged

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "tests" / "scenarios" / "reference.yaml"
PG_URL = os.environ.get("KENTINO_TEST_PG_URL")


# The tests the fast tier (`python3 -m pytest -m "not slow"`, the inner loop) leaves out, by file, each for
# what makes it slow: real parts started (server processes, Chromium, HAProxy, PostgreSQL) or a grid of
# thousands of answers. The README's test command runs them all; so does CI.
SLOW_FILES = {
    "test_price_grid.py": "a grid of 11,000 workloads, each sized on every card",
    "test_charts_layout.py": "Chromium measures every chart text",
    "test_charts_report.py": "Chromium renders the HTML reports",
    "test_ui.py": "Chromium drives the decision browser",
    "test_deploy_files.py": "HAProxy, PostgreSQL and server processes from the deployment files",
    "test_replicas.py": "HAProxy and two replica processes on PostgreSQL",
    "test_service_limits.py": "server processes under load, behind HAProxy",
    "test_service_live.py": "a live server process",
    "test_env_config.py": "server processes configured by the environment",
    "test_hostile_live.py": "hostile rule sets against a live server",
    "test_mcp_http.py": "a live server's MCP endpoint",
    "test_metrics.py": "a live server's metrics",
    "test_one_rule_set.py": "replicas on PostgreSQL",
    "test_published.py": "rule sets published to replicas",
    "test_monotone_grid.py": "a grid of more than 10,000 answers",
    "test_pergpu_grid.py": "a grid of per-GPU figures over every build",
    "test_openapi_fuzz.py": "schemathesis against the OpenAPI document",
    "test_install.py": "a wheel built and installed into a fresh venv",
    "test_readme.py": "the documents' shell sessions replayed, servers included",
    "test_pm_loop.py": "rules diff over grids of answers, each rule set built twice",
    "test_honest_texts.py": "every text of a grid of answers checked against its figures",
}
SLOW_CLASSES = {  # classes of otherwise fast files
    "TestRulesDocsOutdir": "every rule page and guide generated, per case",
    "TestRulesDocsGuides": "every rule page and guide generated, per case",
    "TestReferenceTables": "every generated table of the guides rebuilt",
    "TestGeneratedBlocks": "every generated block of the guides rebuilt",
    "TestSoak": "a hundred thousand evaluations",
}
SLOW_TESTS = {  # single tests of otherwise fast files
    "test_html_renders_in_headless_chromium": "Chromium renders the explanation",
    "test_the_compact_view_of_every_workload_of_a_grid_fits": "a grid of answers",
    # the heaviest of the fast tier (7-25 s each on 2 cores): properties over hundreds of answers or rule files
    "test_what_check_accepts_the_engine_runs": "every rule shape `rules check` accepts, run on every backend",
    "test_a_batch_of_probes_reaches_the_kinds_durable_reaches": "probe batches against durable-rules",
    "test_text_reports_name_them": "every command run on its own project",
    "test_json_reports_carry_them": "every command run on its own project",
    "test_facts_at_any_corner_of_the_contract_are_sized": "every corner of the facts' contract sized",
    "test_bigger_model_never_needs_less": "pairs of answers over the model catalog",
    "test_field_order_does_not_matter": "hundreds of answers, twice each",
    "test_one_recommendation_with_a_trace": "hundreds of traced answers",
    "test_generated_hostile_rules_are_refused_where_they_are_or_run": "hundreds of generated hostile rule files",
    "test_the_heaviest_rule_set_check_passes_answers_within_the_bound": "the heaviest rule set the bounds admit",
    "test_a_10000_rule_file_is_refused_in_that_file": "a 10,000-rule file read",
    "test_the_slips_of_the_bundled_files_are_all_said_in_words": "every slip of every bundled file",
    "test_conditions_under_one_node": "durable-rules' core driven until it hangs, in child processes",
    "test_same_firings_trace_and_final_state": "1,500 workloads on three engines",
    "test_same_kind_as_the_full_rule_set": "400 workloads on durable-rules",
}


def pytest_collection_modifyitems(items):
    """Marks the tests of SLOW_FILES, SLOW_CLASSES and SLOW_TESTS, and every test run on PostgreSQL, `slow`."""
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if (item.path.name in SLOW_FILES or item.originalname in SLOW_TESTS
                or getattr(item.cls, "__name__", None) in SLOW_CLASSES or "postgresql" in params.values()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _reset_engine_state():
    """Every test starts without the process-wide expert (its durable session counter and handles), and with no
    evaluation failure's traceback or decision log failure logged yet."""
    reset_default_expert()
    forget_logged_sites()
    forget_logged()
    yield
    reset_default_expert()


@pytest.fixture(scope="session")
def expert() -> Expert:
    """The bundled rules on durable-rules (the engine that answers)."""
    return Expert()


@pytest.fixture(scope="session")
def reference_expert() -> Expert:
    """The bundled rules on the reference evaluator (the oracle)."""
    return Expert(backend="reference")


def load_scenarios():
    return yaml.safe_load(SCENARIOS.read_text())


def _postgres_or_skip() -> str:
    if not PG_URL:
        pytest.skip("PostgreSQL log not tested: set KENTINO_TEST_PG_URL=postgresql://user@127.0.0.1/db to run it")
    pytest.importorskip("psycopg", reason="the PostgreSQL log needs psycopg 3 (pip install 'psycopg[binary]')")
    return PG_URL


@pytest.fixture(params=["sqlite", "postgresql"])
def log(request, tmp_path):
    """A decision log on each backend; PostgreSQL only when KENTINO_TEST_PG_URL names a database."""
    opened = open_log(_postgres_or_skip() if request.param == "postgresql" else tmp_path / "decisions.db")
    yield opened
    opened.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def log_target(request, tmp_path):
    """Where no decision log exists yet, on each backend: a new SQLite file, or a new PostgreSQL schema
    (reached through the URL's search_path, dropped afterwards)."""
    if request.param == "sqlite":
        yield str(tmp_path / "fresh.db")
        return
    with _pg_schema() as url:
        yield url


@pytest.fixture
def pg_target():
    """A new PostgreSQL schema where no log exists yet (its URL), dropped afterwards; skipped without a server."""
    with _pg_schema() as url:
        yield url


@contextmanager
def _pg_schema():
    import psycopg
    url, schema = _postgres_or_skip(), f"kentino_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
