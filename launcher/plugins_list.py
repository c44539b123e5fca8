"""`dfl-launch plugins`: what is installed at each plugin point, and what failed to load.

A plugin that cannot be loaded is left out of its table (dfl_config/plugins.py), so that it
breaks only a run that names it; this listing is where its reason is shown without naming it.
It loads every entry point, node classes included, so it imports torch.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import click

from dfl_config.plugins import NODES_GROUP, Plugins, discover, group_entry_points, package_of


def rows(plugins: Plugins) -> Iterator[tuple[str, str, str]]:
    """(name, package, status) of each entry point of one group, by name."""
    names = sorted({*plugins.found, *plugins.clashes, *plugins.failed})
    for name in names:
        if name in plugins.failed:
            yield name, plugins.packages.get(name, ""), "FAILED: " + plugins.failed[name]
        elif name in plugins.clashes:
            yield name, " and ".join(plugins.clashes[name]), "refused: registered twice"
        else:
            yield name, plugins.packages[name], "ok"


def compressor_rows(group: str, failed: Mapping[str, str]) -> Iterator[tuple[str, str, str]]:
    for ep in sorted(group_entry_points(group), key=lambda e: e.name):
        reason = failed.get(f"{group}:{ep.name}")
        yield ep.name, package_of(ep), "ok" if reason is None else "FAILED: " + reason


@click.command("plugins")
def plugins_cmd() -> None:
    """List the installed protocols, models, datasets and compressors, and what failed."""
    from dfl_node.learning.generated import DATASETS_GROUP, dataset_plugins
    from dfl_node.settings.model import MODELS_GROUP, model_plugins
    from protocols.registry import GROUP, compressor_plugins, protocol_plugins

    compressor_groups, failed_parts = compressor_plugins()
    groups = [(GROUP, rows(protocol_plugins())), (NODES_GROUP, rows(discover(NODES_GROUP))),
              (MODELS_GROUP, rows(model_plugins())), (DATASETS_GROUP, rows(dataset_plugins())),
              *((group, compressor_rows(group, failed_parts)) for group in compressor_groups)]
    failed = 0
    for group, found in groups:
        click.echo(group)
        for name, package, status in found:
            failed += status.startswith("FAILED")
            click.echo(f"  {name:<18} {package:<24} {status}".rstrip())
    click.echo(f"{failed} failed to load" if failed else "every plugin loaded")
