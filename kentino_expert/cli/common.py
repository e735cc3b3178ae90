"""What every command module shares: the user-error exception, the --rules/--knowledge options and the line
that names the directories a command used."""
from __future__ import annotations

import click

from ..errors import KentinoError, printable


class UserError(click.ClickException):
    """A user mistake: printed as one line on stderr, exit 2, nothing on stdout."""

    exit_code = 2

    def show(self, file=None):
        # library errors are printable already; text built here (paths, OS messages) is made so too.
        # A rule set's diagnostics are one per line, so each line is escaped on its own.
        lines = self.format_message().split("\n")
        click.echo("error: " + "\n".join(printable(line) for line in lines), err=True)


def _located(name: str):
    """An option callback: the absolute directory the command uses (paths.locate), or a one-line error."""
    def callback(ctx, param, value):
        from ..paths import locate
        try:
            return str(locate(name, value))
        except KentinoError as exc:
            raise UserError(str(exc)) from None
    return callback


_WHERE = ("(default: $KENTINO_{upper}, else the {name}/ of the checkout this runs in, found from its "
          "kentino.toml or pyproject.toml [tool.kentino], else the packaged {name}/).")
rules_option = click.option("--rules", "rules_dir", type=click.Path(), default=None, callback=_located("rules"),
                            help="Rule directory " + _WHERE.format(upper="RULES", name="rules"))
knowledge_option = click.option("--knowledge", "knowledge_dir", type=click.Path(), default=None,
                                callback=_located("knowledge"),
                                help="Knowledge directory " + _WHERE.format(upper="KNOWLEDGE", name="knowledge"))


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
