"""`python -m kentino_expert` runs the command line."""
from .cli import main

main(prog_name="kentino-expert")
