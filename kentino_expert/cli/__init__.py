"""The `kentino-expert` command line: a thin skin over the library, errors mapped once at the edge."""
