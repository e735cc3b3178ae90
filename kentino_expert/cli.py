"""The command line: a thin skin over the library; library errors become click errors (exit 2)."""
from __future__ import annotations

import json
import sys

import click

from .cli_common import UserError, announce, knowledge_option, rules_option, sources, sources_line
from .errors import KentinoError
from .facts import read_facts


def _expert(rules, knowledge):
    from .api import Expert
    try:
        return Expert(rules, knowledge)
    except KentinoError as exc:
        raise UserError(str(exc)) from None


def _read_input(path: str) -> tuple[str, str]:
    if path == "-":
        try:
            return sys.stdin.buffer.read().decode("utf-8"), "<stdin>"
        except UnicodeDecodeError as exc:
            raise UserError(f"<stdin>: cannot read: not UTF-8 text (byte {exc.start + 1})") from None
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(), path
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None


@click.group()
@click.version_option(package_name="kentino-expert")
def main():
    """Kentino Expert: what GPU server to buy for a workload, and why."""


@main.command("recommend")
@click.argument("facts_file")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text")
@rules_option
@knowledge_option
@click.option("--log", "log_target", is_flag=False, flag_value="", default=None, metavar="[DB]",
              help="Record the decision in the decision log (a SQLite path or postgresql:// URL; "
                   "default $KENTINO_DB, else ./kentino-decisions.db).")
def recommend_command(facts_file, fmt, rules_dir, knowledge_dir, log_target):
    """Recommend a build for the workload facts in FACTS_FILE (YAML or JSON; - for stdin)."""
    from .render import FORMATS
    text, source = _read_input(facts_file)
    expert = _expert(rules_dir, knowledge_dir)
    try:
        workload = read_facts(text, source)
        answer = expert.recommend(workload)
        decision_id = _log_decision(log_target, workload, answer) if log_target is not None else None
    except KentinoError as exc:
        raise UserError(str(exc)) from None
    click.echo(FORMATS[fmt](answer), nl=False)
    if decision_id:
        click.echo(f"decision {decision_id} recorded", err=True)


def _log_decision(target: str, workload, answer) -> str:
    """Commit the decision before the answer is printed (an acknowledged decision is never lost)."""
    import os

    from .decisions import DEFAULT_PATH, DecisionLog
    log = DecisionLog.open(target or os.environ.get("KENTINO_DB") or DEFAULT_PATH)
    try:
        return log.record(workload.known(), answer, "cli")
    finally:
        log.close()


@main.group("rules")
def rules_group():
    """Check and list the rule set."""


@rules_group.command("check")
@rules_option
@knowledge_option
@click.option("--strict", is_flag=True, help="Fail on warnings too.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def rules_check(rules_dir, knowledge_dir, strict, fmt):
    """Load, validate and compile the rules, then build the engine and answer each rule's example in a
    sandbox (KENTINO_SANDBOX_SECONDS, KENTINO_SANDBOX_MEMORY_MB); report every problem as file:line:col."""
    from .checking import check_directory
    from .sandbox import Limits
    try:
        report = check_directory(rules_dir, knowledge_dir, sandbox=Limits.from_env())
    except KentinoError as exc:
        raise UserError(str(exc)) from None
    if fmt == "json":
        click.echo(sources_line(rules_dir, knowledge_dir), err=True)
        click.echo(json.dumps([d.as_dict() for d in report.diagnostics], indent=2))
    else:
        for diagnostic in report.diagnostics:
            click.echo(str(diagnostic))
        click.echo(f"{report.summary()} ({sources_line(rules_dir, knowledge_dir)})")
    if not report.ok(strict):
        sys.exit(2)


@rules_group.command("list")
@rules_option
@knowledge_option
def rules_list(rules_dir, knowledge_dir):
    """List the rules in the order they are tried."""
    expert = _expert(rules_dir, knowledge_dir)
    announce(expert)
    for rule in expert.ruleset.rules:
        click.echo(f"{rule.priority:>6g}  {rule.id:<48} {','.join(rule.heuristics):<40} {rule.location}")


def _progress(enabled: bool):
    if not enabled:
        return None

    def report(done: int, total: int):
        if done == total or done % 500 == 0:
            click.echo(f"\r{done}/{total}", err=True, nl=done == total)
    return report


@main.command("test")
@click.argument("paths", nargs=-1, type=click.Path())
@rules_option
@knowledge_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
@click.option("--min-coverage", type=click.FloatRange(0, 100), default=None, help="Fail below this rule coverage (%).")
@click.option("--coverage/--no-coverage", "show_coverage", default=True, help="Print rule coverage.")
def test_command(paths, rules_dir, knowledge_dir, fmt, min_coverage, show_coverage):
    """Run scenario files (default: tests/scenarios) like `opa test`; exit 1 on any failure."""
    from .scenarios import failure_lines, load_scenarios, run_all
    expert = _expert(rules_dir, knowledge_dir)
    try:
        scenarios = load_scenarios(paths or ["tests/scenarios"], expert.ruleset)
    except KentinoError as exc:
        raise UserError(str(exc)) from None
    outcomes, coverage = run_all(expert, scenarios, _progress(len(scenarios) >= 1000 and fmt == "text"))
    failed = [o for o in outcomes if not o.passed]
    below = min_coverage is not None and coverage.percent < min_coverage
    if fmt == "json":
        click.echo(json.dumps({
            **sources(expert.rules_dir, expert.knowledge_dir), "passed": len(outcomes) - len(failed),
            "failed": len(failed),
            "failures": [{"scenario": o.scenario.name, "location": str(o.scenario.location), "error": o.error,
                          "failures": [{"what": w, "expected": e, "actual": a} for w, e, a in o.failures],
                          "decided_by": o.deciders} for o in failed],
            "coverage": {"percent": round(coverage.percent, 2), "counts": coverage.counts, "never_fired": coverage.never_fired},
        }, indent=2, default=str))
    else:
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
        click.echo(f"{len(outcomes) - len(failed)} passed, {len(failed)} failed")
    if failed or below:
        sys.exit(1)


@rules_group.command("diff")
@click.option("--base", required=True, help="The old rules: a directory or a git revision.")
@rules_option
@knowledge_option
@click.argument("scenarios", nargs=-1, type=click.Path())
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text")
def rules_diff(base, rules_dir, knowledge_dir, scenarios, fmt):
    """Show which answers change between the --base rules and the new ones; exit 1 if any."""
    from pathlib import Path

    from .ruleset_diff import checkout_rules, diff, grid_scenarios, to_markdown
    from .scenarios import load_scenarios
    new_dir = Path(rules_dir)
    try:
        workloads = load_scenarios(scenarios) if scenarios else grid_scenarios()
        with checkout_rules(base, new_dir) as base_dir:  # the base rules are read into memory here
            old_expert = _expert(base_dir, knowledge_dir)
    except KentinoError as exc:
        raise UserError(str(exc)) from None
    new_expert = _expert(new_dir, knowledge_dir)
    changes = diff(old_expert, new_expert, workloads, _progress(len(workloads) >= 1000 and fmt == "text"))
    named = sources_line(new_expert.rules_dir, new_expert.knowledge_dir)
    if fmt == "json":
        click.echo(json.dumps({"total": len(workloads), "changed": [c.as_dict() for c in changes],
                               "base_digest": old_expert.ruleset.digest, "new_digest": new_expert.ruleset.digest,
                               "base": base, **sources(new_expert.rules_dir, new_expert.knowledge_dir)}, indent=2))
    elif fmt == "markdown":
        click.echo(to_markdown(changes, len(workloads), old_expert.ruleset.digest, new_expert.ruleset.digest), nl=False)
        click.echo(f"\nBase: `{base}`; rules: `{new_expert.rules_dir}`, knowledge: `{new_expert.knowledge_dir}`.")
    else:
        click.echo(f"base: {base}, {named}")
        for change in changes:
            row = change.as_dict()
            click.echo(f"{row['scenario']}: {row['old']} -> {row['new']}  (rules: {', '.join(row['rules_changed']) or '-'})")
        moved = sum(1 for c in changes if c.old != c.new)
        click.echo(f"{len(changes)} of {len(workloads)} answers changed ({moved} in kind/nodes/precision, "
                   f"{len(changes) - moved} in the rules that decided)")
    sys.exit(1 if changes else 0)


@rules_group.command("docs")
@click.argument("outdir", type=click.Path())
@rules_option
@knowledge_option
@click.option("--guides", type=click.Path(exists=True, file_okay=False), default=None,
              help="Also refresh the generated tables in the guides (*.md) of this directory.")
def rules_docs(outdir, rules_dir, knowledge_dir, guides):
    """Write one Markdown page per rule and an index to OUTDIR."""
    from .docs import write_docs
    expert = _expert(rules_dir, knowledge_dir)
    written = write_docs(expert, outdir)
    click.echo(f"wrote {len(written)} pages to {outdir} ({sources_line(expert.rules_dir, expert.knowledge_dir)})")
    if guides is not None:
        from .reference_tables import refresh_guides
        try:
            changed = refresh_guides(guides, expert.ruleset, expert.knowledge)
        except (KentinoError, OSError) as exc:
            raise UserError(f"{guides}: {exc}" if isinstance(exc, OSError) else str(exc)) from None
        click.echo(f"refreshed the generated tables of {len(changed)} guide(s) in {guides}")


@rules_group.command("examples")
@rules_option
@knowledge_option
def rules_examples(rules_dir, knowledge_dir):
    """Print a scenario file that checks each rule's `example` fires the rule."""
    from .docs import rule_examples_yaml
    expert = _expert(rules_dir, knowledge_dir)
    announce(expert)
    click.echo(rule_examples_yaml(expert.ruleset), nl=False)


@main.command("schema")
@click.argument("which", type=click.Choice(["rules", "facts"]))
@rules_option
@knowledge_option
def schema_command(which, rules_dir, knowledge_dir):
    """Print the JSON Schema of rule files or of the input facts."""
    from .schemas import facts_schema, rules_schema
    if which == "rules":
        click.echo(json.dumps(rules_schema(), indent=2))
    else:
        expert = _expert(rules_dir, knowledge_dir)
        announce(expert)
        click.echo(json.dumps(facts_schema(expert.ruleset, expert.knowledge), indent=2))


def _attach_service_commands() -> None:
    from .cli_service import commands
    for command in commands:
        main.add_command(command)


_attach_service_commands()

if __name__ == "__main__":  # pragma: no cover
    main()
