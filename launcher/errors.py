"""User errors: one line on stderr, exit code 2, before anything starts."""


class LaunchError(Exception):
    pass
