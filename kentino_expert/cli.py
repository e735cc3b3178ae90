"""The command line: a thin skin over the library; library errors become click errors (exit 2)."""
from __future__ import annotations

import json
import sys

import click

from .errors import KentinoError, RuleFileError


class UserError(click.ClickException):
    """A user mistake: printed as one line on stderr, exit 2, nothing on stdout."""

    exit_code = 2

    def show(self, file=None):
        click.echo(f"error: {self.format_message()}", err=True)


def _expert(rules, knowledge):
    from .api import Expert
    try:
        return Expert(rules, knowledge)
    except KentinoError as exc:
        raise UserError(str(exc)) from None


def _read_input(path: str) -> tuple[str, str]:
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read(), path
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None


rules_option = click.option("--rules", "rules_dir", type=click.Path(), default=None,
                            help="Rule directory (default: the bundled rules/).")
knowledge_option = click.option("--knowledge", "knowledge_dir", type=click.Path(), default=None,
                                help="Knowledge directory (default: the bundled knowledge/).")


@click.group()
@click.version_option(package_name="kentino-expert")
def main():
    """Kentino Expert: what GPU server to buy for a workload, and why."""


@main.command("recommend")
@click.argument("facts_file")
@click.option("--format", "fmt", type=click.Choice(["text", "json", "markdown"]), default="text")
@rules_option
@knowledge_option
def recommend_command(facts_file, fmt, rules_dir, knowledge_dir):
    """Recommend a build for the workload facts in FACTS_FILE (YAML or JSON; - for stdin)."""
    from .render import FORMATS
    text, source = _read_input(facts_file)
    expert = _expert(rules_dir, knowledge_dir)
    try:
        answer = expert.recommend_text(text, source)
    except KentinoError as exc:
        raise UserError(str(exc)) from None
    click.echo(FORMATS[fmt](answer), nl=False)


@main.group("rules")
def rules_group():
    """Check and list the rule set."""


@rules_group.command("check")
@rules_option
@knowledge_option
@click.option("--strict", is_flag=True, help="Fail on warnings too.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def rules_check(rules_dir, knowledge_dir, strict, fmt):
    """Load, validate and compile the rules; report every problem as file:line:col."""
    from .checking import check_directory
    try:
        report = check_directory(rules_dir, knowledge_dir)
    except KentinoError as exc:
        raise UserError(str(exc)) from None
    if fmt == "json":
        click.echo(json.dumps([d.as_dict() for d in report.diagnostics], indent=2))
    else:
        for diagnostic in report.diagnostics:
            click.echo(str(diagnostic), err=diagnostic.severity == "error")
        click.echo(report.summary(), err=not report.ok(strict))
    if not report.ok(strict):
        sys.exit(2)


@rules_group.command("list")
@rules_option
@knowledge_option
def rules_list(rules_dir, knowledge_dir):
    """List the rules in the order they are tried."""
    expert = _expert(rules_dir, knowledge_dir)
    for rule in expert.ruleset.rules:
        click.echo(f"{rule.priority:>6g}  {rule.id:<48} {','.join(rule.heuristics):<40} {rule.location}")


if __name__ == "__main__":  # pragma: no cover
    main()
