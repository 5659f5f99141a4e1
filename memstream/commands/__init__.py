"""The ``memstream`` verbs, one module per family, imported only when their verb runs."""


class CliError(Exception):
    """A problem to report in one line, with a non-zero exit."""
