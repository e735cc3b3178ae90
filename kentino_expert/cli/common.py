"""What every command module shares: the user-error exception, the one mapping of library errors to it, reading
an input file no larger than 1 MB, the --rules/--knowledge/--db options, opening the expert and the log, the
line that names the directories a command used, and diagnostics' paths as ruff prints them."""
from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import click

from ..decisions.connect import log_target, open_log, sqlite_path
from ..decisions.log import DecisionLog
from ..decisions.sqlite import not_a_log, open_unwritable
from ..domain.workload import MAX_FACTS_BYTES
from ..errors import DecisionLogError, KentinoError, RuleFileError, printable
from ..expert import Expert
from ..paths import locate
from ..sandbox import vet


class UserError(click.ClickException):
    """A user mistake: printed as one line on stderr, exit 2, nothing on stdout."""

    exit_code = 2

    def show(self, file=None):
        # library errors are printable already; text built here (paths, OS messages) is made so too.
        # A rule set's diagnostics are one per line, so each line is escaped on its own.
        lines = self.format_message().split("\n")
        click.echo("error: " + "\n".join(printable(line) for line in lines), err=True)


def read_input(path: str) -> tuple[str, str]:
    """The text of FILE or stdin, read no further than one byte past the limit: /dev/zero or an endless pipe
    is refused at once instead of growing until memory runs out."""
    source = "<stdin>" if path == "-" else path
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_FACTS_BYTES + 1)
        else:
            with open(path, "rb") as handle:
                data = handle.read(MAX_FACTS_BYTES + 1)
    except OSError as exc:
        raise UserError(f"{source}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_FACTS_BYTES:
        raise UserError(f"{source}: input larger than 1 MB")
    try:
        return data.decode("utf-8"), source
    except UnicodeDecodeError as exc:
        raise UserError(f"{source}: cannot read: not UTF-8 text (byte {exc.start + 1})") from None


class KentinoGroup(click.Group):
    """A command group whose commands' library errors (KentinoError) become UserError here, once: the
    commands raise what the library raises, and the edge turns it into one line and exit 2."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except RuleFileError as exc:  # each diagnostic at a path that opens from here
            dirs = (ctx.meta.get(_META.format("rules")), ctx.meta.get(_META.format("knowledge")))
            shown = located(exc.diagnostics, *dirs)
            raise UserError("\n".join(str(d) for d in shown) or str(exc)) from None
        except KentinoError as exc:
            raise UserError(str(exc)) from None


_META = "kentino_expert.{}"  # ctx.meta (shared by every command's context): the directories a command uses


def _located(name: str):
    """An option callback: the absolute directory the command uses (paths.locate), or a one-line error; kept
    in ctx.meta too, where an error's diagnostics find it (KentinoGroup)."""
    def callback(ctx, param, value):
        ctx.meta[_META.format(name)] = found = str(locate(name, value))
        return found
    return callback


def shown_path(file: str, *roots) -> str:
    """A diagnostic's file as ruff prints one: relative to the working directory when it is under it, else
    absolute. A rule set names its files `DIR/NAME.yaml` after the directory `DIR` it read (one of `roots`):
    that path opens only from the directory's parent."""
    path = Path(file)
    if not path.is_absolute():
        root = next((Path(r) for r in roots if r and path.parts[:1] == (Path(r).name,)), None)
        if root is None:
            return file  # not a file of the directories (a scenario's place, `<grid>`): as it is
        path = root.parent / path
    here = Path.cwd()
    try:
        return str(path.relative_to(here))
    except ValueError:
        resolved = Path(os.path.realpath(path))
        try:
            return str(resolved.relative_to(here))
        except ValueError:
            return str(path)


def located(diagnostics, rules_dir, knowledge_dir) -> tuple:
    """The diagnostics with their files as `shown_path` prints them."""
    return tuple(replace(d, location=replace(d.location, file=shown_path(d.location.file, rules_dir, knowledge_dir)))
                 for d in diagnostics)


_WHERE = ("(default: $KENTINO_{upper}, else the {name}/ of the checkout this runs in, found from its "
          "kentino.toml or pyproject.toml [tool.kentino], else the packaged {name}/).")
rules_option = click.option("--rules", "rules_dir", type=click.Path(), default=None, callback=_located("rules"),
                            envvar="KENTINO_RULES",
                            help="Rule directory " + _WHERE.format(upper="RULES", name="rules"))
knowledge_option = click.option("--knowledge", "knowledge_dir", type=click.Path(), default=None,
                                callback=_located("knowledge"), envvar="KENTINO_KNOWLEDGE",
                                help="Knowledge directory " + _WHERE.format(upper="KNOWLEDGE", name="knowledge"))
db_option = click.option("--db", "db", default=None, metavar="URL", envvar="KENTINO_DB",
                         help="Decision log: a SQLite path or postgresql:// URL (default: $KENTINO_DB, "
                              "else ./kentino-decisions.db).")


def make_expert(rules_dir, knowledge_dir, vetted: bool = False) -> Expert:
    """The Expert; with `vetted`, only after a trial load in a sandbox (sandbox.vet)."""
    if vetted:
        vet(rules_dir, knowledge_dir)
    return Expert(rules_dir, knowledge_dir)


def open_decision_log(db, must_exist: bool = False) -> DecisionLog:
    """The decision log `db` names (connect.log_target); a read command must find one, not create one
    (opening writes the schema into the file)."""
    target = log_target(db)
    if not must_exist:
        return open_log(target)
    _check_log_file(target)
    try:
        return open_log(target)
    except DecisionLogError as exc:  # an existing file that cannot be written (a read-only mount) is still read
        if sqlite_path(target) is None:
            raise
        return open_unwritable(sqlite_path(target), exc)


def _check_log_file(target: str) -> None:
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
    problem = not_a_log(path)  # before open_log, which would write the schema into another app's database
    if problem:
        raise UserError(f"{target}: {problem}")


# Every command names the directories it read: a text report in its own words (sources_line), a JSON
# report in two keys (sources), output meant for a program (a table, YAML, a schema, a protocol) on
# stderr (announce).

def sources_line(rules_dir, knowledge_dir) -> str:
    """`rules: DIR, knowledge: DIR`."""
    return f"rules: {rules_dir}, knowledge: {knowledge_dir}"


def sources(rules_dir, knowledge_dir) -> dict:
    """The same as two keys of a JSON report."""
    return {"rules_directory": str(rules_dir), "knowledge_directory": str(knowledge_dir)}


def announce(expert) -> None:
    """The directories an Expert was loaded from, on stderr: apart from output meant for a program."""
    click.echo(sources_line(expert.rules_dir, expert.knowledge_dir), err=True)


def progress(enabled: bool):
    """A progress line on stderr every 500 items (corpora of 1,000 and more), or None."""
    if not enabled:
        return None

    def report(done: int, total: int):
        if done == total or done % 500 == 0:
            click.echo(f"\r{done}/{total}", err=True, nl=done == total)
    return report
