"""`kentino-expert serve` (the HTTP service, one process or several workers) and `kentino-expert mcp`.

The HTTP stack (FastAPI, uvicorn: about 0.2 s to import) and the mcp package are imported
inside these commands, so that every other command starts without them.
"""
from __future__ import annotations

import contextlib
import os
import re
import socket
from pathlib import Path

import click

from ..decisions.connect import is_url, log_target
from ..decisions.meta import check_instance
from ..errors import KentinoError
from ..service.mcp_server import main as mcp_main
from ..service.mcp_server import mcp_installed
from .common import (
    KentinoGroup,
    UserError,
    announce,
    db_option,
    knowledge_option,
    make_expert,
    open_decision_log,
    rules_option,
)


def _bound_socket(host: str, port: int):
    """A socket bound to (host, port), or UserError: uvicorn would print four lines and exit 3."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except (OSError, OverflowError) as exc:
        sock.close()
        raise UserError(f"cannot listen on {host}:{port}: {getattr(exc, 'strerror', None) or exc}") from None
    return sock


def _announcing_server_class():
    import uvicorn  # the HTTP stack: see the module's docstring

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
    from ..service.app import create_app, tune_gc_for_serving  # the HTTP stack: see the module's docstring
    from ..service.http_limits import server_config
    app = create_app(log=log, **options)
    tune_gc_for_serving()
    server = _announcing_server_class()(server_config(app, limits, host=host, port=port, log_level=log_level))
    # uvicorn re-raises the Ctrl+C it handled; uvicorn.run swallows it too
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])
    if not server.started:  # what uvicorn.run does when the app's startup failed
        raise SystemExit(3)


def _allowed_hosts(host: str, given: tuple[str, ...]) -> tuple[str, ...]:
    """The --allowed-host values, checked; the loopback names by default on a loopback bind; else UserError."""
    from ..service.guard import check_host_entry, default_allowed_hosts  # the HTTP stack
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
    from ..service.http_limits import HttpLimits  # the HTTP stack
    return HttpLimits(max_head_bytes=max_header_bytes, max_header_fields=max_headers, header_timeout=header_timeout,
                      body_timeout=body_timeout)


TOKEN_NOTE = "Prefer the environment variable: a command line is visible to other users in `ps`."


class HostList(click.ParamType):
    """--allowed-host: one name per flag; from $KENTINO_ALLOWED_HOSTS, names separated by commas or spaces."""

    name = "NAME[:PORT]"

    def split_envvar_value(self, rv: str):
        return [part for part in re.split(r"[,\s]+", rv.strip()) if part]


def _instance(ctx, param, value):
    if value is None:
        return None
    try:
        return check_instance(value)
    except KentinoError as exc:
        raise click.BadParameter(exc.message) from None


def env(name: str) -> dict:
    """An option's environment variable, KENTINO_<NAME> (a flag on the command line wins over it)."""
    return {"envvar": f"KENTINO_{name}", "show_envvar": True}


instance_option = click.option(
    "--instance", default=None, callback=_instance, **env("INSTANCE"),
    help="This process's label, recorded in every decision; serve's /readyz and /metrics show it (default: "
         "HOSTNAME:PORT for serve, HOSTNAME for mcp).")


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.", **env("HOST"))
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.",
              **env("PORT"))
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 64), help="Worker processes.",
              **env("WORKERS"))
@rules_option
@knowledge_option
@db_option
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["critical", "error", "warning", "info", "debug"]), **env("LOG_LEVEL"))
@click.option("--allowed-host", "allowed_hosts", multiple=True, type=HostList(), **env("ALLOWED_HOSTS"),
              help="A Host header to answer (repeatable; '*' any; the variable takes several, separated by commas). "
                   "Default on a loopback --host: localhost, 127.0.0.1 and [::1]; required on any other.")
@click.option("--read-token", default=None, metavar="TOKEN", **env("READ_TOKEN"),
              help=f"Bearer token that reads the decision log and /metrics. {TOKEN_NOTE}")
@click.option("--admin-token", default=None, metavar="TOKEN", **env("ADMIN_TOKEN"),
              help="Bearer token that reloads the rules and reads the log; without it HTTP reload is off. "
                   f"{TOKEN_NOTE}")
@instance_option
@click.option("--max-header-bytes", default=16384, show_default=True, type=click.IntRange(1024, 1 << 20),
              help="Request line and header fields, in bytes (431 above).", **env("MAX_HEADER_BYTES"))
@click.option("--max-headers", default=100, show_default=True, type=click.IntRange(1, 10_000),
              help="Header fields per request (431 above).", **env("MAX_HEADERS"))
@click.option("--header-timeout", default=10.0, show_default=True, type=click.FloatRange(0.1, 3600),
              help="Seconds to receive a request's line and headers (408 after).", **env("HEADER_TIMEOUT"))
@click.option("--body-timeout", default=30.0, show_default=True, type=click.FloatRange(0.1, 3600),
              help="Seconds to receive a request's body once its headers are in (408 after).", **env("BODY_TIMEOUT"))
def serve(host, port, workers, rules_dir, knowledge_dir, db, log_level, allowed_hosts, read_token, admin_token,
          instance, max_header_bytes, max_headers, header_timeout, body_timeout):
    """Serve the HTTP API (POST /v1/recommend, ...) with uvicorn; SIGHUP or POST /v1/admin/reload reloads rules.
    On a postgresql:// log the rule set published there (`rules publish`), once there is one, is served instead."""
    from ..service.guard import is_loopback  # the HTTP stack
    hosts = _allowed_hosts(host, allowed_hosts)
    limits = _limits(max_header_bytes, max_headers, header_timeout, body_timeout)
    if not is_loopback(host) and not (read_token or admin_token):
        click.echo(f"warning: on {host} the decision log is readable by anyone who reaches the port: set "
                   "KENTINO_READ_TOKEN (see docs/threat-model.md)", err=True)
    expert = make_expert(rules_dir, knowledge_dir, vetted=True)  # a broken rule set: refused, with its diagnostics
    log = open_decision_log(db)
    if workers == 1:
        sock = _bound_socket(host, port)
        announce(expert)
        options = {"rules_dir": rules_dir, "knowledge_dir": knowledge_dir, "read_token": read_token or "",
                   "admin_token": admin_token or "", "allowed_hosts": hosts,
                   "instance": instance or default_label(sock.getsockname()[1])}
        try:
            _serve_one(sock, host, port, options, log, log_level, limits)
        finally:
            sock.close()
        return
    log.close()
    target = log_target(db)
    os.environ.update({  # what each worker's app_from_env reads
        "KENTINO_RULES": str(Path(rules_dir).resolve()) if rules_dir else "",
        "KENTINO_KNOWLEDGE": str(Path(knowledge_dir).resolve()) if knowledge_dir else "",
        "KENTINO_DB": target if is_url(target) else str(Path(target).resolve()),
        "KENTINO_READ_TOKEN": read_token or "", "KENTINO_ADMIN_TOKEN": admin_token or "",
        "KENTINO_ALLOWED_HOSTS": ",".join(hosts),
    })
    _serve_workers(expert, host, port, workers, log_level, limits, instance)


def default_label(port: int) -> str:
    """A serving process's instance label when none is given: HOSTNAME:PORT."""
    return f"{socket.gethostname() or 'localhost'}:{port}"


def _serve_workers(expert, host: str, port: int, workers: int, log_level: str, limits, instance) -> None:
    """`workers` processes on (host, port), each app built by service.app.app_from_env from the environment,
    with one directory for their metrics (see service/metrics.py), removed when they stop."""
    from ..service.workers import APP, Supervisor, metrics_directory, reload_marker, reuse_port_available
    with reload_marker() as marker, metrics_directory() as metrics_dir:
        os.environ.update({"KENTINO_RELOAD_FILE": marker, "PROMETHEUS_MULTIPROC_DIR": metrics_dir})
        if reuse_port_available():  # a socket per worker: the kernel balances kept-alive connections
            try:
                supervisor = Supervisor(host, port, workers, log_level, limits)
            except OSError as exc:
                raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
            os.environ["KENTINO_INSTANCE"] = instance or default_label(supervisor.port)
            announce(expert)
            supervisor.run()
        else:  # what uvicorn.run does for workers, with the limited protocol (its limits travel in the config)
            os.environ["KENTINO_INSTANCE"] = instance or default_label(port)
            announce(expert)
            import uvicorn
            from uvicorn.supervisors import Multiprocess

            from ..service.http_limits import server_config
            config = server_config(APP, limits, factory=True, host=host, port=port, workers=workers,
                                   log_level=log_level)
            Multiprocess(config, target=uvicorn.Server(config).run, sockets=[config.bind_socket()]).run()


@click.command("mcp")
@rules_option
@knowledge_option
@db_option
@instance_option
def mcp(rules_dir, knowledge_dir, db, instance):
    """Run the MCP server (tools `recommend` and `explain`) on stdin/stdout."""
    if not mcp_installed():
        raise UserError("the MCP server needs the mcp package (2.x): pip install 'mcp>=2.3,<3'")
    expert = make_expert(rules_dir, knowledge_dir)
    open_decision_log(db).close()
    announce(expert)  # stdout carries the protocol
    if instance:
        os.environ["KENTINO_INSTANCE"] = instance  # what the log records (decisions.log.default_instance)
    mcp_main(rules_dir, knowledge_dir, db)


@click.group(cls=KentinoGroup)
def standalone():
    """The service commands on their own (`python -m kentino_expert.cli.service ...`)."""


standalone.add_command(serve)
standalone.add_command(mcp)

if __name__ == "__main__":  # pragma: no cover
    standalone()
