"""`dfl-launch`'s entry point: the command's process settings, then the command line.

pydantic looks for plugins of its own (installed packages' `pydantic` entry points) when it
builds its first model, reading every installed distribution's metadata: about 20 ms of CPU,
paid before a misspelt key can be refused, for plugins dfl-launch never uses. The command's
own process does without them unless the user says otherwise (`PYDANTIC_DISABLE_PLUGINS`
set); a Python program that imports the launcher keeps its plugins.
"""

from __future__ import annotations

import os


def main() -> None:
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    from launcher.cli import main as command_line

    command_line()


if __name__ == "__main__":
    main()
