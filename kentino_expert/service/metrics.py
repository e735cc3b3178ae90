"""GET /metrics in Prometheus' text format: decisions, their latency, reloads, the rule set served, the answer
cache and the group commit (prometheus-client).

With `serve --workers N` the supervisor gives every worker one PROMETHEUS_MULTIPROC_DIR (a private
temporary directory, removed when it stops): each worker writes its values there, and a scrape of any
worker reads them all (prometheus-client's multiprocess mode), so the counters are the whole service's.
The route needs the read token when one is configured (guard.py). Names:

- kentino_decisions_total{kind,status,source}: decisions recorded (committed to the log).
- kentino_decision_seconds{code}: POST /v1/recommend from request to response, by HTTP status.
- kentino_log_record_seconds: a decision's commit to the log, waiting for its group-commit transaction included.
- kentino_reloads_total{result,trigger}: rule-set builds after the start, `ok` or `refused`, asked by
  `http`, `sighup`, `worker` (another worker's reload) or `published` (a NOTIFY).
- kentino_rule_set_info{digest,instance,source}: 1 for the rule set served (0 for one served before); source is
  `local`, `published`, or `published-earlier` (the active published set does not build here).
- kentino_rule_set_behind{instance}: 1 while this replica does not serve the active published set (it serves
  an earlier one, or its refusal of the new one is being retried), else 0.
- kentino_answer_cache_hits_total, kentino_answer_cache_misses_total: decisions answered from the cache.
- kentino_group_commit_batches_total, kentino_group_commit_rows_total: transactions, and the rows in them.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import generate_latest as _generate
from prometheus_client import multiprocess as _multiprocess
from starlette.responses import Response

from .error_codes import INTERNAL_ERROR

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

DECISIONS = Counter("kentino_decisions", "Decisions recorded in the log, by recommendation kind, status and source.",
                    ["kind", "status", "source"])
DECISION_SECONDS = Histogram("kentino_decision_seconds", "POST /v1/recommend from request to response (deciding "
                             "and committing), by HTTP status.", ["code"],
                             buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30))
RECORD_SECONDS = Histogram("kentino_log_record_seconds", "A decision's commit to the log (waiting for its group-commit "
                           "transaction included).", buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                              0.25, 0.5, 1, 2.5, 5))
RELOADS = Counter("kentino_reloads", "Rule-set builds after the start, by result (ok, refused) and trigger.",
                  ["result", "trigger"])
RULE_SET = Gauge("kentino_rule_set_info", "The rule set served (1; 0 for a set served before), by digest, "
                 "instance and source (local or published).", ["digest", "instance", "source"],
                 multiprocess_mode="livemax")
BEHIND = Gauge("kentino_rule_set_behind", "1 while the active published rule set is not the one served (it does "
               "not build here), else 0.", ["instance"], multiprocess_mode="livemax")
CACHE_HITS = Counter("kentino_answer_cache_hits", "Decisions whose evaluation came from the answer cache.")
CACHE_MISSES = Counter("kentino_answer_cache_misses", "Decisions evaluated because the answer cache lacked them.")
BATCHES = Counter("kentino_group_commit_batches", "Decision-log transactions of the group commit.")
BATCH_ROWS = Counter("kentino_group_commit_rows", "Decisions written by the group commit's transactions.")


def multiprocess() -> bool:
    return bool(os.environ.get(MULTIPROC_ENV))


def exposition() -> bytes:
    """Every metric, in the text format (all workers' in multiprocess mode)."""
    if not multiprocess():
        return _generate(REGISTRY)
    registry = CollectorRegistry()
    _multiprocess.MultiProcessCollector(registry)
    return _generate(registry)


def leave_directory() -> None:
    """An orphaned worker on its way out (its supervisor was killed, so nobody else removes the metrics directory):
    remove this process's files and those of processes gone, then the directory if that left it empty. Each orphan
    does this as it exits, so the last one out removes the directory."""
    directory = os.environ.get(MULTIPROC_ENV)
    if not directory:
        return
    with contextlib.suppress(OSError):
        for path in Path(directory).glob("*.db"):  # prometheus-client's files: {kind}_{pid}.db
            pid = path.stem.rpartition("_")[2]
            if pid.isdigit() and (int(pid) == os.getpid() or not _alive(int(pid))):
                path.unlink(missing_ok=True)
        os.rmdir(directory)  # fails while another live worker still has files there: it removes it


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def worker_exited(pid: int) -> None:
    """Forget a dead worker's live gauges (the rule set it served); its counters stay counted."""
    if multiprocess():
        with contextlib.suppress(OSError):
            _multiprocess.mark_process_dead(pid)


class ServiceMetrics:
    """The metrics of one app: hooks for the holder (reloads) and the log (decisions, batches), and the
    answer cache of the expert served, read into counters after each decision and before each scrape."""

    def __init__(self, holder, instance: str):
        self.holder, self.instance = holder, instance
        self._lock = threading.Lock()
        self._cache = None  # a weak reference to the cache last read, and its counts then
        self._hits = self._misses = 0
        self._shown: tuple | None = None
        self.serving(holder.serving)

    # -- hooks ------------------------------------------------------------------------------------
    def recorded(self, row: dict, seconds: float) -> None:
        DECISIONS.labels(row["kind"], row.get("status") or "", row["source"]).inc()
        RECORD_SECONDS.observe(seconds)

    @staticmethod
    def batched(rows: int) -> None:
        BATCHES.inc()
        BATCH_ROWS.inc(rows)

    def reloaded(self, result: str, trigger: str, serving) -> None:
        RELOADS.labels(result, trigger).inc()
        self.serving(serving)

    def serving(self, serving) -> None:
        """Show `serving`'s rule set as the one served (and the one shown before as no longer served)."""
        shown = (serving.expert.ruleset.digest, self.instance, serving.source)
        with self._lock:
            previous, self._shown = self._shown, shown
        if previous == shown:
            return
        if previous is not None:
            if multiprocess():  # prometheus-client cannot remove a series there
                RULE_SET.labels(*previous).set(0)
            else:
                RULE_SET.remove(*previous)
        RULE_SET.labels(*shown).set(1)

    def sync_behind(self) -> None:
        """Whether the active published set is served, as last read (a NOTIFY changes it without a build)."""
        BEHIND.labels(self.instance).set(1 if self.holder.serving.behind else 0)

    def sync_cache(self) -> None:
        """Add what the served expert's answer cache counted since the last look (a new expert: all of it)."""
        cache = self.holder.serving.expert.answer_cache
        with self._lock:
            same = self._cache is not None and self._cache() is cache
            hits, misses = cache.hits, cache.misses
            new_hits, new_misses = (hits - self._hits, misses - self._misses) if same else (hits, misses)
            self._cache, self._hits, self._misses = weakref.ref(cache), hits, misses
        if new_hits > 0:
            CACHE_HITS.inc(new_hits)
        if new_misses > 0:
            CACHE_MISSES.inc(new_misses)


class DecisionTimer:
    """ASGI middleware: times POST /v1/recommend into kentino_decision_seconds and reads the answer cache after."""

    def __init__(self, app, metrics: ServiceMetrics):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != "/v1/recommend":
            await self.app(scope, receive, send)
            return
        start, code = time.perf_counter(), [INTERNAL_ERROR.status]  # the app raised before it answered

        async def sending(message):
            if message["type"] == "http.response.start":
                code[0] = message["status"]
            await send(message)
        try:
            await self.app(scope, receive, sending)
        finally:
            DECISION_SECONDS.labels(str(code[0])).observe(time.perf_counter() - start)
            self.metrics.sync_cache()


def install(app, holder, decision_log, instance: str) -> ServiceMetrics:
    """Hook the metrics into the holder and the log, time decisions, and serve GET /metrics."""
    metrics = ServiceMetrics(holder, instance)
    holder.on_reload = metrics.reloaded
    decision_log.on_record = metrics.recorded
    decision_log.on_batch = metrics.batched
    app.add_middleware(DecisionTimer, metrics=metrics)

    @app.get("/metrics", include_in_schema=False)  # for operators' scrapers, not a tool (like /readyz)
    def metrics_route():
        metrics.sync_cache()
        metrics.sync_behind()
        return Response(exposition(), media_type=CONTENT_TYPE_LATEST)
    return metrics
