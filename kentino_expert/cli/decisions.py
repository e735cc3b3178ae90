"""`kentino-expert decisions list|show|replay|prune` and `kentino-expert explain`: reading the decision log.

`decisions replay` exits 1 when the answer changed.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..answer.explain import chart_files, explain_html, explain_markdown
from ..answer.subject import checked_subject
from ..decisions.meta import normalise_time
from ..domain.vocabulary import KINDS
from ..domain.workload import strict_json_loads
from ..errors import InputError, KentinoError, clipped, printable
from ..service.replay import replay
from .common import (
    KentinoGroup,
    UserError,
    db_option,
    knowledge_option,
    make_expert,
    open_decision_log,
    read_input,
    rules_option,
    sources,
    sources_line,
)


@click.group("decisions")
def decisions():
    """List, show, replay and prune logged decisions."""


_JSON_KEYS = ("decision_id", "created_at", "session_id", "turn", "source", "facts", "kind", "digest", "engine",
              "status", "summary")


@decisions.command("list")
@click.option("--since", default=None, metavar="ISO", help="Only decisions at or after this ISO-8601 time.")
@click.option("--kind", default=None, type=click.Choice(KINDS), help="Only decisions of this recommendation kind.")
@click.option("--limit", default=100, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@db_option
def decisions_list(since, kind, limit, fmt, db):
    """Decisions newest first (read a page at a time, printed as they come)."""
    log = open_decision_log(db, must_exist=True)
    rows = log.iter_decisions(since=since, kind=kind, limit=limit, with_facts=fmt == "json")
    try:
        if fmt == "json":
            _echo_json_array({k: row[k] for k in _JSON_KEYS} for row in rows)
            return
        count = 0
        for row in rows:
            where = f" session={row['session_id']}" + (f" turn={row['turn']}" if row["turn"] is not None else "") \
                if row["session_id"] else ""
            # the row may come from another program: its text must not colour the terminal or forge a line
            click.echo(printable(f"{row['created_at']}  {row['decision_id']}  {row['source']:<4} {row['kind']:<16} "
                                 f"{row['digest'][:12]}{where}"))
            count += 1
        click.echo(f"{count} decision(s)")
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
    if not before:
        raise UserError("decisions prune needs --before DATE (e.g. --before 2025-01-31): "
                        "it deletes nothing without an explicit date")
    try:
        cutoff = normalise_time(before)
    except KentinoError as exc:
        raise UserError(f"--before: {exc}") from None
    log = open_decision_log(db, must_exist=True)
    try:
        count = log.prune(before, dry_run=dry_run)
    finally:
        log.close()
    click.echo(f"{'would delete' if dry_run else 'deleted'} {count} decision(s) created before {cutoff}")


def _decision(db, decision_id) -> dict:
    """The logged decision with this id, or UserError."""
    log = open_decision_log(db, must_exist=True)
    try:
        row = log.get(decision_id)
    finally:
        log.close()
    if row is None:
        raise UserError(f"no decision '{clipped(decision_id, 200)}' in {log.safe_url()}")  # as the API quotes it
    return row


@decisions.command("show")
@click.argument("decision_id")
@db_option
def decisions_show(decision_id, db):
    """Print one decision as JSON."""
    click.echo(json.dumps(_decision(db, decision_id), indent=2, ensure_ascii=False))


@decisions.command("replay")
@click.argument("decision_id")
@rules_option
@knowledge_option
@db_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def decisions_replay(decision_id, rules_dir, knowledge_dir, db, fmt):
    """Re-evaluate a decision's facts with the current rules; exit 0 if unchanged, 1 if changed."""
    row = _decision(db, decision_id)
    expert = make_expert(rules_dir, knowledge_dir)
    try:
        result = replay(expert, row)
    except InputError as exc:  # a row another program wrote
        raise UserError(f"{decision_id}: cannot replay: {exc}") from None
    if fmt == "json":
        click.echo(json.dumps({**result.report(), **sources(expert.rules_dir, expert.knowledge_dir)}, indent=2,
                              default=str))
    else:
        _echo_replay(result, sources_line(expert.rules_dir, expert.knowledge_dir))
    sys.exit(0 if result.unchanged else 1)


def _echo_replay(result, where: str) -> None:
    drift = (f"digest drift: {result.old_digest[:16]} -> {result.new_digest[:16]}"
             if result.digest_changed else f"same digest {result.new_digest[:16]}")
    drift += f"; {where}"
    if result.error:
        click.echo(f"changed ({drift}): the stored facts no longer evaluate: {result.error}")
    elif result.unchanged:
        click.echo(f"unchanged ({drift})")
    else:
        click.echo(f"changed ({drift})")
        for key, change in result.changes.items():
            click.echo(f"  {key}: {change.old} -> {change.new}")
        for rule in result.rules_changed:
            click.echo(f"  rule {rule.rule}: {rule.change}")
        for code in result.warnings_changed:
            click.echo(f"  warning {code}: given only by one of the two")


@click.command("explain")
@click.argument("target", metavar="ID|TRACE.json")
@click.option("--format", "fmt", type=click.Choice(["markdown", "html"]), default="markdown")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write to this file instead of stdout.")
@click.option("--charts", "charts_dir", type=click.Path(file_okay=False), default=None,
              help="Also write each chart as an SVG file (memory.svg, builds.svg, time.svg, efficiency.svg) in "
                   "this directory.")
@rules_option
@knowledge_option
@db_option
def explain(target, fmt, output, charts_dir, rules_dir, knowledge_dir, db):
    """Explain a logged decision (by id) or an answer file (`recommend --format json` output, or facts)."""
    path = Path(target)
    if _is_file(path):
        subject = _read_subject(path, target)
    else:
        if target.endswith((".json", ".yaml", ".yml")):
            raise UserError(f"{target}: no such file")
        subject = _decision(db, target)
    expert = make_expert(rules_dir, knowledge_dir)
    try:
        text = (explain_html if fmt == "html" else explain_markdown)(expert, subject)
        charts = chart_files(expert, subject) if charts_dir else {}
    except (KentinoError, KeyError, TypeError) as exc:
        raise UserError(f"{target}: cannot explain: {exc}") from None
    if charts_dir:
        _write_charts(Path(charts_dir), charts)
    if output:
        try:
            Path(output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UserError(f"{output}: cannot write: {exc.strerror}") from None
        click.echo(f"wrote {output}")
    else:
        click.echo(text, nl=False)


def _is_file(path: Path) -> bool:
    """Whether `path` is a file; False for a name no file can have (longer than the system allows: an id)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _read_subject(path: Path, target: str) -> dict:
    """The answer, decision or facts in a JSON file, read as `recommend` reads JSON (strict: no duplicate key,
    NaN or Infinity; depth-limited) and its shape checked (explain.checked_subject); else `TARGET: problem`."""
    text, _ = read_input(str(path))  # at most 1 MB, as `recommend` and every HTTP body (MCP explain too)
    try:
        data = strict_json_loads(text)
    except RecursionError:
        raise UserError(f"{target}: not a JSON answer or decision: JSON nests too deeply") from None
    except ValueError as exc:  # not JSON, a duplicate key, NaN, or an integer too long for Python
        raise UserError(f"{target}: not a JSON answer or decision: {str(exc)[:200]}") from None
    try:
        return checked_subject(data)
    except InputError as exc:
        raise UserError(f"{target}: {exc}") from None


def _write_charts(directory: Path, charts: dict[str, str]) -> None:
    """Each chart beside a temporary name first, then renamed: a failed write leaves no half-written chart."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, svg in charts.items():
            partial = directory / f".{name}.partial"
            partial.write_text(svg, encoding="utf-8")
            partial.replace(directory / name)
    except OSError as exc:
        raise UserError(f"{directory}: cannot write the charts: {exc.strerror}") from None
    click.echo(f"wrote {len(charts)} chart{'s' if len(charts) != 1 else ''} to {directory}"
               + (f": {', '.join(sorted(charts))}" if charts else ""), err=True)


@click.group(cls=KentinoGroup)
def standalone():
    """The log commands on their own (`python -m kentino_expert.cli.decisions ...`)."""


standalone.add_command(decisions)
standalone.add_command(explain)

if __name__ == "__main__":  # pragma: no cover
    standalone()
