"""The ``tensorvm`` command line (click).

``tensorvm demo`` runs the bundled ridge-regression job on a LocalCluster;
``tensorvm version`` prints the version. Bad arguments exit non-zero with one line.
"""
from __future__ import annotations

import sys

import click


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def cli():
    """tensorvm: TensorFlow 1.x-style graphs as a distributed virtual machine on Dask."""


@cli.command()
@click.option("--in-process", is_flag=True, help="Run in this process, without a cluster.")
@click.option("--steps", type=click.IntRange(min=1), default=200, show_default=True,
              help="Gradient-descent steps.")
def demo(in_process: bool, steps: int):
    """Ridge regression in-graph and by gradient descent, checked against NumPy."""
    from .demo import main
    argv = ["--steps", str(steps)] + (["--in-process"] if in_process else [])
    sys.exit(main(argv))


@cli.command()
def version():
    """Print the tensorvm version."""
    import tensorvm
    click.echo(tensorvm.__version__)


def main(argv=None):
    try:
        cli.main(args=argv, prog_name="tensorvm", standalone_mode=False)
    except click.UsageError as e:
        click.echo(f"tensorvm: {e.format_message()}", err=True)
        sys.exit(2)
    except click.Abort:
        sys.exit(130)
    return 0


if __name__ == "__main__":
    main()
