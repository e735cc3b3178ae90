"""`python -m kentino_expert` runs the command line."""
from .cli.main import main

main(prog_name="kentino-expert")
