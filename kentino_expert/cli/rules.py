"""`kentino-expert rules check|list|diff|docs|examples|publish` and `kentino-expert test`: the rule author's
commands."""
from __future__ import annotations

import getpass
import json
import socket
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import click

from .. import fastjson
from ..authoring.reference_tables import guide_updates, options_table, write_guides
from ..authoring.rule_pages import rule_examples_yaml, write_docs
from ..authoring.rules_diff import checkout_rules, diff, diff_summary, grid_scenarios, to_markdown
from ..authoring.scenarios import failure_lines, load_scenarios, run_all
from ..decisions import published
from ..decisions.connect import log_target
from ..decisions.replicas import DEFAULT_WAIT_SECONDS, publish_to_replicas
from ..errors import KentinoError, printable
from ..ruleset.diagnostics import UnknownCode, explain
from ..sandbox import Limits, check_in_sandbox
from .common import (
    UserError,
    announce,
    db_option,
    knowledge_option,
    located,
    make_expert,
    open_decision_log,
    progress,
    rules_option,
    shown_path,
    sources,
    sources_line,
)
from .service import mcp, serve


@click.group("rules")
def rules_group():
    """Check and list the rule set."""


@rules_group.command("check")
@rules_option
@knowledge_option
@click.option("--strict", is_flag=True, help="Fail on warnings too.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.option("--explain", "code", metavar="CODE", default=None,
              help="Explain a diagnostic code (its meaning, an example and the fix) instead of checking.")
def rules_check(rules_dir, knowledge_dir, strict, fmt, code):
    """Load, validate and compile the rules, then build the engine and answer each rule's example in a
    sandbox (KENTINO_SANDBOX_SECONDS, KENTINO_SANDBOX_MEMORY_MB); report every problem as file:line:col,
    root causes (files that cannot be read) first."""
    if code is not None:
        try:
            click.echo(explain(code), nl=False)
        except UnknownCode as exc:
            raise UserError(str(exc)) from None
        return
    report = check_in_sandbox(rules_dir, knowledge_dir, Limits.from_env())
    shown = located(report.diagnostics, rules_dir, knowledge_dir)  # paths that open from here, as ruff's
    if fmt == "json":
        click.echo(sources_line(rules_dir, knowledge_dir), err=True)
        click.echo(json.dumps([d.as_dict() for d in shown], indent=2))
    else:
        for diagnostic in shown:
            click.echo(str(diagnostic))
        click.echo(f"{report.summary()} ({sources_line(rules_dir, knowledge_dir)})")
    if not report.ok(strict):
        sys.exit(2)


@rules_group.command("list")
@rules_option
@knowledge_option
def rules_list(rules_dir, knowledge_dir):
    """List the rules in the order they are tried."""
    expert = make_expert(rules_dir, knowledge_dir)
    announce(expert)
    for rule in expert.ruleset.rules:
        where = replace(rule.location, file=shown_path(rule.location.file, expert.rules_dir))
        click.echo(f"{rule.priority:>6g}  {rule.id:<48} {','.join(rule.heuristics):<40} {where}")


@click.command("test")
@click.argument("paths", nargs=-1, type=click.Path())
@rules_option
@knowledge_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.option("--min-coverage", type=click.FloatRange(0, 100), default=None, help="Fail below this rule coverage (%).")
@click.option("--coverage/--no-coverage", "show_coverage", default=True, help="Print rule coverage.")
def test_command(paths, rules_dir, knowledge_dir, fmt, min_coverage, show_coverage):
    """Run scenario files (default: tests/scenarios) like `opa test`; exit 1 on any failure."""
    expert = make_expert(rules_dir, knowledge_dir)
    scenarios = load_scenarios(paths or ["tests/scenarios"], expert.ruleset)
    outcomes, coverage = run_all(expert, scenarios, progress(len(scenarios) >= 1000 and fmt == "text"),
                                 lambda file: shown_path(file, expert.rules_dir))  # a decider's file opens from here
    failed = [o for o in outcomes if not o.passed]
    below = min_coverage is not None and coverage.percent < min_coverage
    if fmt == "json":
        click.echo(json.dumps({
            **sources(expert.rules_dir, expert.knowledge_dir), "passed": len(outcomes) - len(failed),
            "failed": len(failed), "failures": [_failure_json(o) for o in failed],
            "coverage": {"percent": round(coverage.percent, 2), "counts": coverage.counts,
                         "never_fired": coverage.never_fired},
        }, indent=2, default=str))
    else:
        _echo_test_report(expert, failed, coverage, show_coverage, below, min_coverage, len(outcomes))
    if failed or below:
        sys.exit(1)


def _failure_json(outcome) -> dict:
    return {"scenario": outcome.scenario.name, "location": str(outcome.scenario.location), "error": outcome.error,
            "failures": [{"what": w, "expected": e, "actual": a} for w, e, a in outcome.failures],
            "decided_by": outcome.deciders}


def _echo_test_report(expert, failed, coverage, show_coverage, below, min_coverage, total) -> None:
    click.echo(sources_line(expert.rules_dir, expert.knowledge_dir))
    for outcome in failed:
        for line in failure_lines(outcome):
            click.echo(line)
    if show_coverage:
        click.echo(f"rule coverage: {coverage.percent:.1f}% ({len(coverage.counts) - len(coverage.never_fired)}"
                   f"/{len(coverage.counts)} rules fired)")
        for rule in coverage.never_fired:
            click.echo(f"  never fired: {rule}")
    if below:
        click.echo(f"coverage {coverage.percent:.1f}% is below --min-coverage {min_coverage:g}%")
    click.echo(f"{total - len(failed)} passed, {len(failed)} failed")


@rules_group.command("diff")
@click.option("--base", default=None, help="The old rules: a directory or a git revision (default: the --rules "
              "directory, when --base-knowledge is given).")
@click.option("--base-knowledge", type=click.Path(), default=None,
              help="The old knowledge directory (default: the --knowledge directory, on both sides).")
@rules_option
@knowledge_option
@click.argument("scenarios", nargs=-1, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text")
def rules_diff(base, base_knowledge, rules_dir, knowledge_dir, scenarios, fmt):
    """Show which answers change between the --base rules (and --base-knowledge) and the new ones; exit 1 if
    any."""
    if base is None and base_knowledge is None:
        raise UserError("rules diff needs --base (the old rules), --base-knowledge (the old knowledge) or both")
    base = str(rules_dir) if base is None else base
    workloads = load_scenarios(scenarios) if scenarios else grid_scenarios()
    # the new side first: an error in the knowledge both sides share is not the base's
    new_expert = make_expert(rules_dir, knowledge_dir)
    with checkout_rules(base, Path(rules_dir)) as base_dir:  # the base rules are read into memory here
        old_expert = _base_expert(base, base_dir, base_knowledge or knowledge_dir)
    if base_knowledge is not None:
        base = f"{base} with knowledge {old_expert.knowledge_dir}"
    changes = diff(old_expert, new_expert, workloads, progress(len(workloads) >= 1000 and fmt == "text"))
    old_digest, new_digest = old_expert.ruleset.digest, new_expert.ruleset.digest
    if fmt == "json":
        click.echo(json.dumps({"total": len(workloads), "changed": [c.as_dict() for c in changes],
                               "base_digest": old_digest, "new_digest": new_digest, "base": base,
                               **sources(new_expert.rules_dir, new_expert.knowledge_dir)}, indent=2))
    elif fmt == "markdown":
        click.echo(to_markdown(changes, len(workloads), old_digest, new_digest), nl=False)
        click.echo(f"\nBase: `{base}`; rules: `{new_expert.rules_dir}`, knowledge: `{new_expert.knowledge_dir}`.")
    else:
        click.echo(f"base: {base}, {sources_line(new_expert.rules_dir, new_expert.knowledge_dir)}")
        for change in changes:
            row = change.as_dict()
            click.echo(f"{row['scenario']}: {row['old']} -> {row['new']}  ({change.why()})")
        click.echo(diff_summary(changes, len(workloads)))
    sys.exit(1 if changes else 0)


def _base_expert(base: str, base_dir: Path, knowledge_dir):
    """The Expert of the base rules and knowledge. Both sides' files are named rules/NAME.yaml (a git base is
    extracted to a temporary rules/), so each line of an error here says it is the base's."""
    try:
        return make_expert(base_dir, knowledge_dir)
    except KentinoError as exc:
        raise UserError("\n".join(f"base {printable(base)}: {line}" for line in str(exc).split("\n"))) from None


@rules_group.command("docs")
@click.argument("outdir", type=click.Path())
@rules_option
@knowledge_option
@click.option("--guides", type=click.Path(exists=True, file_okay=False), default=None,
              help="Also refresh the generated tables in the guides (*.md) of this directory.")
def rules_docs(outdir, rules_dir, knowledge_dir, guides):
    """Write one Markdown page per rule and an index to OUTDIR."""
    expert = make_expert(rules_dir, knowledge_dir)
    # the guides are read and checked first: a bad one stops the command before any page is written
    updates = None if guides is None else guide_updates(guides, expert.ruleset, expert.knowledge, cli_tables(expert))
    written = write_docs(expert, outdir)
    click.echo(f"wrote {len(written)} pages to {outdir} ({sources_line(expert.rules_dir, expert.knowledge_dir)})")
    if updates is not None:
        changed = write_guides(updates)
        click.echo(f"refreshed the generated tables of {len(changed)} guide(s) in {guides}")


DOC_DIRECTORIES = ("/home/you/kentino-expert/rules", "/home/you/kentino-expert/knowledge")  # as the guides show them


def cli_tables(expert=None) -> dict[str, str]:
    """The guides' tables whose source is above the authoring layer (reference_tables.PASSED_IN): the command
    line itself, and the service's measured answer sizes and error codes (`expert`: default the bundled rules)."""
    from ..expert import Expert
    from ..service.answer_size import chat_bot_sizes, log_row_sizes, measure
    from ..service.error_codes import codes_table
    from ..service.scopes import routes_table
    from ..service.tool_schema import tool_definition

    expert = expert or Expert()
    sizes = measure(expert, directories=DOC_DIRECTORIES)  # where the clone is changes no figure
    tool = len(fastjson.dumps_bytes(tool_definition(expert.ruleset, expert.knowledge)))
    return {"service-options": options_table(serve, mcp), "answer-sizes": chat_bot_sizes(sizes, tool),
            "log-row-sizes": log_row_sizes(sizes), "http-errors": codes_table(), "route-scopes": routes_table()}


@rules_group.command("examples")
@rules_option
@knowledge_option
def rules_examples(rules_dir, knowledge_dir):
    """Print a scenario file that checks each rule's `example` fires the rule."""
    expert = make_expert(rules_dir, knowledge_dir)
    announce(expert)
    click.echo(rule_examples_yaml(expert.ruleset), nl=False)


@rules_group.command("publish")
@rules_option
@knowledge_option
@db_option
@click.option("--by", default=None, metavar="NAME", help="Who publishes, recorded with the set (default: USER@HOST).")
@click.option("--strict", is_flag=True, help="Refuse a set with warnings too.")
@click.option("--wait", "wait_seconds", type=click.FloatRange(0, 3600), default=DEFAULT_WAIT_SECONDS,
              show_default=True, metavar="SECONDS",
              help="How long every replica alive may take to build the set before it is activated; 0: activate "
                   "without asking them.")
def rules_publish(rules_dir, knowledge_dir, db, by, strict, wait_seconds):
    """Check the rule set as `rules check` does, store it in the postgresql:// decision log, have every replica
    alive build it, and only when every one did make it the set they serve (each switches on NOTIFY). A broken
    set, or one a replica refuses or does not build in time, is not activated (exit 2, the reasons printed)."""
    target = log_target(db)
    if not target.lower().startswith(("postgresql://", "postgres://")):
        raise UserError(f"rules publish needs a postgresql:// decision log (--db or KENTINO_DB), not '{target}': "
                        "a service on SQLite reloads its own directories (SIGHUP or POST /v1/admin/reload)")
    files = published.read_files(rules_dir, knowledge_dir)
    report = check_in_sandbox(rules_dir, knowledge_dir, Limits.from_env())
    for diagnostic in located(report.diagnostics, rules_dir, knowledge_dir):
        click.echo(str(diagnostic))
    if not report.ok(strict):
        raise UserError(f"rule set not published: {report.summary()} ({sources_line(rules_dir, knowledge_dir)})")
    if published.read_files(rules_dir, knowledge_dir) != files:
        raise UserError("rule set not published: its files changed while it was checked; publish again")
    with tempfile.TemporaryDirectory(prefix="kentino-publish-") as copy:  # the digest of exactly what is stored
        digest = make_expert(*published.write_files(files, Path(copy))).ruleset.digest
    log = open_decision_log(db)
    try:
        outcome = publish_to_replicas(log, published.PublishedSet(digest, files), by or _publisher(), wait_seconds)
        where = log.safe_url()
    finally:
        log.close()
    for line in outcome.lines:
        click.echo(line)
    if outcome.refused:
        raise UserError(f"rule set {digest[:16]} not activated: {outcome.refused}; the replicas keep serving "
                        f"{(outcome.serving or 'their rules')[:16]}")
    rules_count = sum(name.startswith("rules/") for name in files)
    if outcome.changed:
        click.echo(f"published rule set {digest} ({rules_count} rule files, {len(files) - rules_count} knowledge "
                   f"files; {sources_line(rules_dir, knowledge_dir)}) to {where}: {outcome.summary}")
    else:
        click.echo(f"rule set {digest} is already the published one in {where}: nothing changed")


def _publisher() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"
