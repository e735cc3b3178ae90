"""What every command module shares: the user-error exception and the --rules/--knowledge options."""
from __future__ import annotations

import click

from .errors import printable


class UserError(click.ClickException):
    """A user mistake: printed as one line on stderr, exit 2, nothing on stdout."""

    exit_code = 2

    def show(self, file=None):
        # library errors are printable already; text built here (paths, OS messages) is made so too.
        # A rule set's diagnostics are one per line, so each line is escaped on its own.
        lines = self.format_message().split("\n")
        click.echo("error: " + "\n".join(printable(line) for line in lines), err=True)


rules_option = click.option("--rules", "rules_dir", type=click.Path(), default=None,
                            help="Rule directory (default: the bundled rules/).")
knowledge_option = click.option("--knowledge", "knowledge_dir", type=click.Path(), default=None,
                                help="Knowledge directory (default: the bundled knowledge/).")
