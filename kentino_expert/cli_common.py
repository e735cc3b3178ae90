"""What every command module shares: the user-error exception and the --rules/--knowledge options."""
from __future__ import annotations

import click


class UserError(click.ClickException):
    """A user mistake: printed as one line on stderr, exit 2, nothing on stdout."""

    exit_code = 2

    def show(self, file=None):
        click.echo(f"error: {self.format_message()}", err=True)


rules_option = click.option("--rules", "rules_dir", type=click.Path(), default=None,
                            help="Rule directory (default: the bundled rules/).")
knowledge_option = click.option("--knowledge", "knowledge_dir", type=click.Path(), default=None,
                                help="Knowledge directory (default: the bundled knowledge/).")
