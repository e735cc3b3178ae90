"""The `kentino-expert` command: its group, `recommend` and `schema`; the other commands come from rules.py,
service.py and decisions.py. Library errors become one-line user errors once, in the group (common.py)."""
from __future__ import annotations

import json

import click

from ..answer.charts import context_of
from ..answer.render import FORMATS, render
from ..domain.workload import read_facts
from ..ruleset.schemas import facts_schema, rules_schema
from ..service.decide import decide
from .common import (
    KentinoGroup,
    announce,
    knowledge_option,
    make_expert,
    open_decision_log,
    read_input,
    rules_option,
)
from .decisions import decisions, explain
from .rules import rules_group, test_command
from .service import mcp, serve


@click.group(cls=KentinoGroup)
@click.version_option(package_name="kentino-expert")
def main():
    """Kentino Expert: what GPU server to buy for a workload, and why."""


@main.command("recommend")
@click.argument("facts_file")
@click.option("--format", "fmt", type=click.Choice(list(FORMATS)), default="text")
@rules_option
@knowledge_option
@click.option("--log", "log_target", is_flag=False, flag_value="", default=None, metavar="[DB]",
              help="Record the decision in the decision log (a SQLite path or postgresql:// URL; "
                   "default $KENTINO_DB, else ./kentino-decisions.db).")
def recommend_command(facts_file, fmt, rules_dir, knowledge_dir, log_target):
    """Recommend a build for the workload facts in FACTS_FILE (YAML or JSON; - for stdin)."""
    text, source = read_input(facts_file)
    expert = make_expert(rules_dir, knowledge_dir)
    workload = read_facts(text, source)
    if log_target is None:
        answer, _, _, questions = expert.decide_parts(workload)
        click.echo(render(fmt, answer, questions, context_of(expert)), nl=False)
        return
    log = open_decision_log(log_target)
    try:  # committed before the answer is printed: an acknowledged decision is never lost
        decision = decide(expert, log, workload, "cli")
    finally:
        log.close()
    click.echo(render(fmt, decision.answer, decision.questions, context_of(expert)), nl=False)
    click.echo(f"decision {decision.decision_id} recorded", err=True)


@main.command("schema")
@click.argument("which", type=click.Choice(["rules", "facts"]))
@rules_option
@knowledge_option
def schema_command(which, rules_dir, knowledge_dir):
    """Print the JSON Schema of rule files or of the input facts."""
    if which == "rules":
        click.echo(json.dumps(rules_schema(), indent=2))
    else:
        expert = make_expert(rules_dir, knowledge_dir)
        announce(expert)
        click.echo(json.dumps(facts_schema(expert.ruleset, expert.knowledge), indent=2))


for _command in (rules_group, test_command, serve, mcp, decisions, explain):
    main.add_command(_command)

if __name__ == "__main__":  # pragma: no cover
    main()
