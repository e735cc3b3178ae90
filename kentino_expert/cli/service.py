"""Commands for the service side: `serve`, `mcp`, `decisions list|show|replay|prune` and `explain`.

The lead attaches `commands` to the main click group. User mistakes are cli.UserError (exit 2, one
line on stderr, no traceback); `decisions replay` exits 1 when the answer changed.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import click

from .common import UserError, announce, knowledge_option, rules_option, sources, sources_line
from ..errors import KentinoError

db_option = click.option("--db", "db", default=None, metavar="URL",
                         help="Decision log: a SQLite path or postgresql:// URL (default: $KENTINO_DB, "
                              "else ./kentino-decisions.db).")


def _is_url(target: str) -> bool:
    return "://" in target


def _log(db, must_exist: bool = False):
    from ..decisions.log import DEFAULT_PATH, DecisionLog
    target = db or os.environ.get("KENTINO_DB") or DEFAULT_PATH
    if must_exist:
        _check_log_file(target)
    try:
        return DecisionLog.open(target)
    except KentinoError as exc:
        raise UserError(str(exc)) from None


def _check_log_file(target: str) -> None:
    """A read command must find a log, not create one (opening writes the schema into the file)."""
    from ..decisions.log import sqlite_path
    path = sqlite_path(target)
    if path is None:  # PostgreSQL: the server says whether the database exists
        return
    try:
        empty = Path(path).stat().st_size == 0 if Path(path).is_file() else None
    except OSError:
        empty = None
    if empty is None:
        raise UserError(f"no decision log at {target} (give --db or set KENTINO_DB)")
    if empty:  # a log, even one without decisions, holds its schema; WAL mode writes it at once
        raise UserError(f"{target} is an empty file, not a decision log (give --db or set KENTINO_DB)")


def _bound_socket(host: str, port: int):
    """A socket bound to (host, port), or UserError: uvicorn would print four lines and exit 3."""
    import socket
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except (OSError, OverflowError) as exc:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}") from None
    return sock


def _announcing_server_class():
    import uvicorn

    class AnnouncingServer(uvicorn.Server):
        """uvicorn logs 'Uvicorn running on ...' only for a socket it bound itself: said here too."""

        async def startup(self, sockets=None):
            await super().startup(sockets)
            announce = getattr(self, "_log_started_message", None)
            if sockets and announce is not None and not self.should_exit:
                announce(sockets)

    return AnnouncingServer


def _serve_one(sock, host: str, port: int, options: dict, log, log_level: str, limits) -> None:
    """One uvicorn server on `sock`, bound before the app is built so that a port in use fails fast."""
    from ..service.http_limits import server_config
    from ..service.app import create_app, tune_gc_for_serving
    try:
        app = create_app(log=log, **options)
    except KentinoError as exc:
        raise UserError(str(exc)) from None
    tune_gc_for_serving()
    server = _announcing_server_class()(server_config(app, limits, host=host, port=port, log_level=log_level))
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl+C it handled; uvicorn.run swallows it too
        pass
    if not server.started:  # what uvicorn.run does when the app's startup failed
        raise SystemExit(3)


def _expert(rules_dir, knowledge_dir, vet: bool = False):
    """The Expert, or UserError; with `vet`, only after a trial load in a sandbox (sandbox.vet)."""
    from ..expert import Expert
    try:
        if vet:
            from ..sandbox import vet as trial
            trial(rules_dir, knowledge_dir)
        expert = Expert(rules_dir, knowledge_dir)
    except KentinoError as exc:
        raise UserError(str(exc)) from None
    return expert


def _allowed_hosts(host: str, given: tuple[str, ...]) -> tuple[str, ...]:
    """The --allowed-host values, checked; the loopback names by default on a loopback bind; else UserError."""
    from ..service.guard import check_host_entry, default_allowed_hosts
    if not given:
        default = default_allowed_hosts(host)
        if default is None:
            raise UserError(f"--host {host} is not a loopback address: name the Host each client uses with "
                            "--allowed-host (repeatable; '*' accepts any, see docs/threat-model.md)")
        return default
    try:
        return tuple(check_host_entry(entry) for entry in given)
    except ValueError as exc:
        raise UserError(f"--allowed-host {exc}") from None


def _limits(max_header_bytes, max_headers, header_timeout, body_timeout):
    from ..service.http_limits import HttpLimits
    return HttpLimits(max_head_bytes=max_header_bytes, max_header_fields=max_headers, header_timeout=header_timeout,
                      body_timeout=body_timeout)


TOKEN_NOTE = "Prefer the environment variable: a command line is visible to other users in `ps`."


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64), help="Worker processes.")
@rules_option
@knowledge_option
@db_option
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["critical", "error", "warning", "info", "debug"]))
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="NAME[:PORT]",
              help="A Host header to answer (repeatable; '*' any). Default on a loopback --host: localhost, "
                   "127.0.0.1 and [::1]; required on any other.")
@click.option("--read-token", envvar="KENTINO_READ_TOKEN", default=None, metavar="TOKEN",
              help=f"Bearer token that reads the decision log [env KENTINO_READ_TOKEN]. {TOKEN_NOTE}")
@click.option("--admin-token", envvar="KENTINO_ADMIN_TOKEN", default=None, metavar="TOKEN",
              help="Bearer token that reloads the rules and reads the log; without it HTTP reload is off "
                   f"[env KENTINO_ADMIN_TOKEN]. {TOKEN_NOTE}")
@click.option("--max-header-bytes", default=16384, show_default=True, type=click.IntRange(1024, 1 << 20),
              help="Request line and header fields, in bytes (431 above).")
@click.option("--max-headers", default=100, show_default=True, type=click.IntRange(1, 10_000),
              help="Header fields per request (431 above).")
@click.option("--header-timeout", default=10.0, show_default=True, type=click.FloatRange(0.1, 3600),
              help="Seconds to receive a request's line and headers (408 after).")
@click.option("--body-timeout", default=30.0, show_default=True, type=click.FloatRange(0.1, 3600),
              help="Seconds to receive a request's body once its headers are in (408 after).")
def serve(host, port, workers, rules_dir, knowledge_dir, db, log_level, allowed_hosts, read_token, admin_token,
          max_header_bytes, max_headers, header_timeout, body_timeout):
    """Serve the HTTP API (POST /v1/recommend, ...) with uvicorn; SIGHUP or POST /v1/admin/reload reloads rules."""
    from ..service.guard import is_loopback
    hosts = _allowed_hosts(host, allowed_hosts)
    limits = _limits(max_header_bytes, max_headers, header_timeout, body_timeout)
    if not is_loopback(host) and not (read_token or admin_token):
        click.echo(f"warning: on {host} the decision log is readable by anyone who reaches the port: set "
                   "KENTINO_READ_TOKEN (see docs/threat-model.md)", err=True)
    expert = _expert(rules_dir, knowledge_dir, vet=True)  # refuse to start on a broken rule set, with its diagnostics
    log = _log(db)
    if workers == 1:
        sock = _bound_socket(host, port)
        announce(expert)
        options = {"rules_dir": rules_dir, "knowledge_dir": knowledge_dir, "read_token": read_token or "",
                   "admin_token": admin_token or "", "allowed_hosts": hosts}
        try:
            _serve_one(sock, host, port, options, log, log_level, limits)
        finally:
            sock.close()
        return
    log.close()
    target = db or os.environ.get("KENTINO_DB") or "kentino-decisions.db"
    os.environ.update({
        "KENTINO_RULES": str(Path(rules_dir).resolve()) if rules_dir else "",
        "KENTINO_KNOWLEDGE": str(Path(knowledge_dir).resolve()) if knowledge_dir else "",
        "KENTINO_DB": target if _is_url(target) else str(Path(target).resolve()),
        "KENTINO_READ_TOKEN": read_token or "", "KENTINO_ADMIN_TOKEN": admin_token or "",
        "KENTINO_ALLOWED_HOSTS": ",".join(hosts),
    })
    _serve_workers(expert, host, port, workers, log_level, limits)


def _serve_workers(expert, host: str, port: int, workers: int, log_level: str, limits) -> None:
    """`workers` processes on (host, port), each app built by service.app_from_env from the environment."""
    from ..service.workers import APP, Supervisor, reload_marker, reuse_port_available
    with reload_marker() as marker:
        os.environ["KENTINO_RELOAD_FILE"] = marker
        if reuse_port_available():  # a socket per worker: the kernel balances kept-alive connections
            try:
                supervisor = Supervisor(host, port, workers, log_level, limits)
            except OSError as exc:
                raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
            announce(expert)
            supervisor.run()
        else:  # what uvicorn.run does for workers, with the limited protocol (its limits travel in the config)
            announce(expert)
            from uvicorn.supervisors import Multiprocess

            from ..service.http_limits import server_config
            import uvicorn
            config = server_config(APP, limits, factory=True, host=host, port=port, workers=workers,
                                   log_level=log_level)
            Multiprocess(config, target=uvicorn.Server(config).run, sockets=[config.bind_socket()]).run()


@click.command("mcp")
@rules_option
@knowledge_option
@db_option
def mcp(rules_dir, knowledge_dir, db):
    """Run the MCP server (tools `recommend` and `explain`) on stdin/stdout."""
    try:
        from ..service.mcp_server import main as mcp_main, _server_classes
        _server_classes()
    except ImportError:
        raise UserError("the MCP server needs the mcp package: pip install mcp") from None
    expert = _expert(rules_dir, knowledge_dir)
    _log(db).close()
    announce(expert)  # stdout carries the protocol
    try:
        mcp_main(rules_dir, knowledge_dir, db)
    except KentinoError as exc:
        raise UserError(str(exc)) from None


@click.group("decisions")
def decisions():
    """List, show, replay and prune logged decisions."""


_JSON_KEYS = ("decision_id", "created_at", "session_id", "turn", "source", "facts", "kind", "digest", "engine",
              "status", "summary")


@decisions.command("list")
@click.option("--since", default=None, metavar="ISO", help="Only decisions at or after this ISO-8601 time.")
@click.option("--kind", default=None, help="Only decisions of this recommendation kind.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@db_option
def decisions_list(since, kind, limit, fmt, db):
    """Decisions newest first (read a page at a time, printed as they come)."""
    log = _log(db, must_exist=True)
    rows = log.iter_decisions(since=since, kind=kind, limit=limit, with_facts=fmt == "json")
    try:
        if fmt == "json":
            _echo_json_array({k: row[k] for k in _JSON_KEYS} for row in rows)
            return
        count = 0
        for row in rows:
            where = f" session={row['session_id']}" + (f" turn={row['turn']}" if row["turn"] is not None else "") \
                if row["session_id"] else ""
            click.echo(f"{row['created_at']}  {row['decision_id']}  {row['source']:<4} {row['kind']:<16} "
                       f"{row['digest'][:12]}{where}")
            count += 1
        click.echo(f"{count} decision(s)")
    except KentinoError as exc:
        raise UserError(str(exc)) from None
    finally:
        log.close()


def _echo_json_array(items) -> None:
    """What json.dumps(list(items), indent=2) prints, written an item at a time."""
    opened = False
    for item in items:
        text = "\n".join("  " + line for line in json.dumps(item, indent=2, ensure_ascii=False).splitlines())
        click.echo(("[\n" if not opened else ",\n") + text, nl=False)
        opened = True
    click.echo("\n]" if opened else "[]")


@decisions.command("prune")
@click.option("--before", default=None, metavar="DATE",
              help="Required: delete the decisions created before this ISO-8601 date or time (UTC when no zone "
                   "is given); it must be in the past.")
@click.option("--dry-run", is_flag=True, help="Only count the decisions that would be deleted.")
@db_option
def decisions_prune(before, dry_run, db):
    """Delete old decisions, a batch per transaction (service writes go on meanwhile); print how many."""
    from ..decisions.meta import normalise_time
    if not before:
        raise UserError("decisions prune needs --before DATE (e.g. --before 2025-01-31): "
                        "it deletes nothing without an explicit date")
    try:
        cutoff = normalise_time(before)
    except KentinoError as exc:
        raise UserError(f"--before: {exc}") from None
    log = _log(db, must_exist=True)
    try:
        count = log.prune(before, dry_run=dry_run)
    except KentinoError as exc:
        raise UserError(str(exc)) from None
    finally:
        log.close()
    click.echo(f"{'would delete' if dry_run else 'deleted'} {count} decision(s) created before {cutoff}")


def _decision(log, decision_id):
    try:
        row = log.get(decision_id)
    except KentinoError as exc:
        raise UserError(str(exc)) from None
    if row is None:
        raise UserError(f"no decision '{decision_id}' in {log.url}")
    return row


@decisions.command("show")
@click.argument("decision_id")
@db_option
def decisions_show(decision_id, db):
    """Print one decision as JSON."""
    click.echo(json.dumps(_decision(_log(db, must_exist=True), decision_id), indent=2, ensure_ascii=False))


@decisions.command("replay")
@click.argument("decision_id")
@rules_option
@knowledge_option
@db_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def decisions_replay(decision_id, rules_dir, knowledge_dir, db, fmt):
    """Re-evaluate a decision's facts with the current rules; exit 0 if unchanged, 1 if changed."""
    import sys

    from ..decisions.log import replay
    row = _decision(_log(db, must_exist=True), decision_id)
    expert = _expert(rules_dir, knowledge_dir)
    report = replay(expert, row)
    if fmt == "json":
        click.echo(json.dumps({**{k: v for k, v in report.items() if k != "new_answer"},
                               **sources(expert.rules_dir, expert.knowledge_dir)}, indent=2, default=str))
    else:
        drift = (f"digest drift: {report['old_digest'][:16]} -> {report['new_digest'][:16]}"
                 if report["digest_changed"] else f"same digest {report['new_digest'][:16]}")
        drift += f"; {sources_line(expert.rules_dir, expert.knowledge_dir)}"
        if report.get("error"):
            click.echo(f"changed: the stored facts no longer evaluate: {report['error']}")
        elif report["unchanged"]:
            click.echo(f"unchanged ({drift})")
        else:
            click.echo(f"changed ({drift})")
            for key, change in report["changes"].items():
                click.echo(f"  {key}: {change['old']} -> {change['new']}")
            for rule in report["rules_changed"]:
                click.echo(f"  rule {rule['rule']}: {rule['change']}")
            for code in report["warnings_changed"]:
                click.echo(f"  warning {code}: given only by one of the two")
    sys.exit(0 if report["unchanged"] else 1)


@click.command("explain")
@click.argument("target", metavar="ID|TRACE.json")
@click.option("--format", "fmt", type=click.Choice(["markdown", "html"]), default="markdown")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write to this file instead of stdout.")
@rules_option
@knowledge_option
@db_option
def explain(target, fmt, output, rules_dir, knowledge_dir, db):
    """Explain a logged decision (by id) or an answer file (`recommend --format json` output, or facts)."""
    from ..answer.explain import explain_html, explain_markdown
    path = Path(target)
    if path.is_file():
        try:
            subject = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise UserError(f"{target}: not a JSON answer or decision: {exc}") from None
        if not isinstance(subject, dict):
            raise UserError(f"{target}: expected a JSON object (an answer, a decision or facts)")
    else:
        if target.endswith((".json", ".yaml", ".yml")):
            raise UserError(f"{target}: no such file")
        subject = _decision(_log(db, must_exist=True), target)
    expert = _expert(rules_dir, knowledge_dir)
    try:
        text = (explain_html if fmt == "html" else explain_markdown)(expert, subject)
    except (KentinoError, KeyError, TypeError) as exc:
        raise UserError(f"{target}: cannot explain: {exc}") from None
    if output:
        try:
            Path(output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"{output}: cannot write: {exc.strerror}") from None
        click.echo(f"wrote {output}")
    else:
        click.echo(text, nl=False)


commands = [serve, mcp, decisions, explain]


@click.group()
def standalone():
    """The service commands on their own (`python -m kentino_expert.cli.service ...`)."""


for _command in commands:
    standalone.add_command(_command)

if __name__ == "__main__":  # pragma: no cover
    standalone()
