"""The ``tensorvm`` command line (click), after spark-submit's conventions.

::

    tensorvm run JOB [JOB OPTIONS] [--scheduler ADDR | --cluster ps=1,worker=2 | --in-process]
                 [--conf key=value ...] [--keep-alive] [--quiet | --json] [--verbose]
    tensorvm jobs                      # the bundled jobs, one line each
    tensorvm plan JOB [JOB OPTIONS] [--dot FILE] [--svg FILE]
    tensorvm ckpt ls|show|verify URL
    tensorvm tf PROGRAM.py [ARGS...]   # a TF 1.x program, unchanged (import tensorflow = tensorvm)
    tensorvm --version                 # also: python -m tensorvm
    tensorvm up [--cluster ps=1,worker=2] [--threads N] | status | down   # jobs/local_up.py

``tensorvm run`` without ``--scheduler``/``--in-process`` runs on the ``tensorvm up`` cluster
when one is up and has the tasks ``--cluster`` asks for (a clean one: earlier jobs' variables
cleared), else on a LocalCluster of its own (one thread per worker when the workers fill the
cores; ``--conf tensorvm.worker-threads=N``).

``JOB`` is a bundled job's name or a file ``job.py`` defining one ``@tensorvm.job`` function
(``job.py:function`` picks one); the function's typed parameters are the job's options
(``tensorvm run JOB --help``). ``--conf`` sets Dask config (``logging.tensorvm=debug``,
``distributed.scheduler.work-stealing=false``...), TLS to a ``tls://`` scheduler included
(``distributed.comm.tls.ca-file=...``, ``distributed.comm.tls.client.cert=...``,
``distributed.comm.tls.client.key=...``): scheduler access is code execution.

Exit codes: 0 done; 1 the job failed (one line; the traceback with ``--verbose``) or the
scheduler could not be reached; 2 bad usage — an unknown option, job or value, a number out
of its range (``--num-reducers 0``: click's ``IntRange``, checked before any cluster starts), a
missing input, an output that exists or that another job is writing (one line saying what to
fix); 130 interrupted (Ctrl-C); 143 terminated (SIGTERM, as
Kubernetes, Slurm or systemd stop a job: handled as Ctrl-C is, the job's uncommitted output
removed).
"""
from __future__ import annotations

import contextlib
import json
import logging
import re
import signal
import sys
import threading
import traceback

import click

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
EXIT_TERMINATED = 128 + signal.SIGTERM
LINK_AFTER_S = 1.0  # a job still running after this long gets its dashboard link in a log
logger = logging.getLogger("tensorvm")


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that it unwinds as Ctrl-C does (the job's
    output aborted, the session and cluster closed) and ends with exit code 143."""


def _interrupted(exc: BaseException) -> int:
    """Print the one line of an interruption; return its exit code."""
    if isinstance(exc, Terminated):
        click.echo("tensorvm: terminated", err=True)
        return EXIT_TERMINATED
    click.echo("tensorvm: interrupted", err=True)
    return EXIT_INTERRUPTED


@contextlib.contextmanager
def _sigterm_raises():
    """While the command runs, SIGTERM raises :class:`Terminated` in the main thread (only
    there can a handler be set); the previous handler comes back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise Terminated()
    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class Failure(Exception):
    """Ends the command with ``code`` after printing ``message`` (one line)."""

    def __init__(self, message: str, code: int = EXIT_FAILED):
        super().__init__(message)
        self.code = code


def _version() -> str:
    import tensorvm
    return tensorvm.__version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=None, package_name="tensorvm", prog_name="tensorvm",
                      message="%(prog)s %(version)s")
def cli():
    """tensorvm: TensorFlow 1.x-style graphs as a distributed virtual machine on Dask."""


# ---- run ------------------------------------------------------------------------------------
def _run_options() -> list[click.Option]:
    return [
        click.Option(["--scheduler"], metavar="ADDR",
                     help="Run on the Dask scheduler at ADDR (tcp://host:8786)."),
        click.Option(["--cluster"], metavar="SPEC",
                     help="Start a LocalCluster with these tasks: ps=1,worker=2."),
        click.Option(["--in-process"], is_flag=True,
                     help="Run in this process (no cluster, no dashboard)."),
        click.Option(["--conf"], multiple=True, metavar="KEY=VALUE",
                     help="Dask config for the run (repeatable)."),
        click.Option(["--history"], metavar="URL",
                     help="Write the job's event log under URL (fsspec; 'off': none); "
                          "default: tensorvm.history.url, $TENSORVM_HISTORY, else "
                          "~/.local/share/tensorvm/history."),
        click.Option(["--resume"], is_flag=True,
                     help="Resume a map-reduce job whose driver died (Ctrl-C, kill -9): keep "
                          "the reducers' output it had written, run only the rest."),
        click.Option(["--keep-alive"], is_flag=True,
                     help="Keep the cluster and dashboard up after the job until Ctrl-C."),
        click.Option(["--connect-timeout"], type=click.FloatRange(min=0.1), default=10.0,
                     show_default=True, help="Seconds to reach --scheduler."),
        click.Option(["-q", "--quiet"], is_flag=True, help="No progress display or summary."),
        click.Option(["--json", "as_json"], is_flag=True,
                     help="Print one JSON document (the summary) on stdout."),
        click.Option(["-v", "--verbose"], is_flag=True,
                     help="Log progress; show the traceback of a failure."),
    ]


RUN_OPTIONS = {o.name for o in _run_options()}


def job_command(spec, action) -> click.Command:
    """The click command of one job: its own options, then the run options."""
    from .bundled import BUNDLED
    from .options import (BUNDLED_RANGES, UnsupportedParameter, bundled_help, job_help,
                          job_options)
    bundled = BUNDLED.get(spec.name) == spec.source  # (a user's job file: its annotations)
    helps = {p.name: bundled_help(spec.name, p.name) for p in spec.params} if bundled else None
    try:
        own = job_options(spec.fn, ranges=BUNDLED_RANGES if bundled else None, helps=helps)
    except UnsupportedParameter as exc:
        raise Failure(f"job {spec.name}: {exc}", EXIT_USAGE) from exc
    clash = sorted({o.name for o in own} & RUN_OPTIONS)
    if clash:
        raise Failure(f"job {spec.name}: parameter(s) {', '.join(clash)} clash with tensorvm "
                      "run's own options; rename them", EXIT_USAGE)
    return click.Command(spec.name, params=own + _run_options(), callback=action,
                         help=job_help(spec.fn), context_settings={
                             "help_option_names": ["-h", "--help"]})


def _resolve(job: str):
    from .bundled import JobLoadError, JobNotFound, resolve
    try:
        return resolve(job)
    except JobLoadError as exc:
        raise Failure(str(exc), EXIT_USAGE) from exc
    except JobNotFound as exc:
        raise Failure(f"{exc} (tensorvm jobs lists the bundled jobs)", EXIT_USAGE) from exc


def _invoke_job(command: str, job: str | None, args: tuple, action) -> int:
    if job is None or job in ("-h", "--help"):
        click.echo(click.get_current_context().get_help())
        return EXIT_OK if job else EXIT_USAGE
    try:  # an interruption ends here: click would turn it into Abort and print a blank line
        spec = _resolve(job)
        cmd = job_command(spec, lambda **kw: _unless_interrupted(action, spec, kw))
        rv = cmd.main(list(args), prog_name=f"tensorvm {command} {job}",
                      standalone_mode=False)
    except KeyboardInterrupt as exc:
        return _interrupted(exc)
    return rv if isinstance(rv, int) else EXIT_OK


def _unless_interrupted(action, spec, kw) -> int:
    try:
        return action(spec, kw)
    except KeyboardInterrupt as exc:
        return _interrupted(exc)


_PASS_THROUGH = {"ignore_unknown_options": True, "allow_extra_args": True,
                 "help_option_names": []}


@cli.command(context_settings=_PASS_THROUGH)
@click.argument("job", required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(job, args):
    """Run JOB (a bundled job or job.py) with its options; JOB --help lists them."""
    sys.exit(_invoke_job("run", job, args, _run_job))


def _conf(items) -> dict:
    import yaml
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise Failure(f"--conf {item!r}: write KEY=VALUE", EXIT_USAGE)
        out[key] = yaml.safe_load(value) if value else ""
    return out


@contextlib.contextmanager
def _logging_to(console, verbose: bool):
    """The ``tensorvm`` logger on ``console`` for the run, at the level of Dask's config
    (``--conf logging.tensorvm=debug``), else INFO with --verbose, else WARNING; restored
    afterwards (``main`` may run inside another program)."""
    import dask
    from rich.logging import RichHandler
    level = dask.config.get("logging.tensorvm", None) or ("info" if verbose else "warning")
    log = logging.getLogger("tensorvm")
    saved = log.level, log.propagate
    handler = RichHandler(console=console, show_path=False, show_time=False)
    log.setLevel(str(level).upper() if isinstance(level, str) else level)
    log.addHandler(handler)
    log.propagate = False
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(saved[0])
        log.propagate = saved[1]


def _run_job(spec, kw) -> int:
    import dask
    from rich.console import Console
    opts = {k: kw.pop(k) for k in list(kw) if k in RUN_OPTIONS}
    if sum(bool(opts[k]) for k in ("scheduler", "cluster", "in_process")) > 1:
        raise Failure("give at most one of --scheduler, --cluster, --in-process", EXIT_USAGE)
    cluster = None
    if opts["cluster"]:
        from .runner import parse_cluster
        try:
            cluster = parse_cluster(opts["cluster"])
        except ValueError as exc:
            raise Failure(str(exc), EXIT_USAGE) from exc
    from .bundled import check_cluster, preflight
    try:  # before anything starts: task names the job cannot use, an output that exists...
        if cluster:
            check_cluster(spec, cluster)
        preflight(spec, kw)
    except ValueError as exc:
        raise Failure(str(exc), EXIT_USAGE) from exc
    err = Console(stderr=True)
    conf = _conf(opts["conf"])
    if opts["history"]:  # read where the scheduler runs (tensorvm.scheduler_ext.history)
        conf["tensorvm.history.url"] = opts["history"]
    with dask.config.set(conf), _logging_to(err, opts["verbose"]):
        return _execute(spec, kw, opts, cluster, err)


def _execute(spec, kw, opts, cluster, err) -> int:
    from rich.console import Console

    from .display import LiveDisplay, print_summary
    from .local_up import cluster_for, fresh_state
    from .runner import ConnectError, JobRun
    quiet, as_json = opts["quiet"], opts["as_json"]
    # the cluster of `tensorvm up` when one is up and has the tasks --cluster asks for
    up = None if opts["scheduler"] or opts["in_process"] else cluster_for(cluster)
    run = JobRun(spec, scheduler=up["address"] if up else opts["scheduler"], cluster=cluster,
                 in_process=opts["in_process"], connect_timeout=opts["connect_timeout"],
                 args=kw, resume=opts["resume"])
    live = err.is_terminal and not (quiet or as_json)  # in a pipe: no live display
    if live and not (run.scheduler or run.in_process):  # seconds of nothing, else
        from .runner import local_cluster_label
        err.print(f"starting LocalCluster ({local_cluster_label(cluster)})…", highlight=False)
    try:
        run.__enter__()  # the cluster or connection, the session, the job's registration
    except ConnectError as exc:
        raise Failure(str(exc), EXIT_FAILED) from exc
    except Exception as exc:
        if opts["verbose"]:
            err.print(traceback.format_exc(), markup=False, highlight=False)
        raise Failure(f"could not start a session for job {spec.name}: "
                      f"{_classify(exc, spec, kw)[1]}") from exc
    code, summary = EXIT_OK, None
    if up:  # the job starts from a clean cluster, as on a LocalCluster of its own
        fresh_state(run.client)
    if up and not (quiet or as_json):
        err.print(f"cluster: {run.scheduler} (tensorvm up)", highlight=False)
    link = None
    try:
        if run.dashboard and not live and not (quiet or as_json):  # (live: in its frame)
            # a log says where to watch a job that runs on; a job that fails at once (a bad
            # input) stays one line
            link = threading.Timer(LINK_AFTER_S, click.echo, (f"dashboard: {run.dashboard}",),
                                   {"err": True})
            link.daemon = True
            link.start()
        try:
            if live:
                with LiveDisplay(run, err):
                    result = run.call(kw)
            else:
                result = run.call(kw)
            summary = run.finish("done", result)
        except KeyboardInterrupt as exc:
            terminated = isinstance(exc, Terminated)
            summary = run.finish("failed", reason="terminated" if terminated else "interrupted")
            code = _interrupted(exc)
        except Exception as exc:  # noqa: BLE001 - the job's error, reported in one line
            code, line = _classify(exc, spec, kw)
            summary = run.finish("failed", reason=line)
            if opts["verbose"]:
                err.print(traceback.format_exc(), markup=False, highlight=False)
            click.echo(f"tensorvm: job {spec.name} failed: {line}", err=True)
        if as_json:
            click.echo(json.dumps(summary))
        elif not quiet and code == EXIT_OK:
            if not run.scheduler:  # the job's page closes with the cluster this command ran
                summary = {k: v for k, v in summary.items() if k != "dashboard"}
            print_summary(summary, Console())
        if opts["keep_alive"] and code not in (EXIT_INTERRUPTED, EXIT_TERMINATED) \
                and run.dashboard:
            _keep_alive(run, err)
    finally:
        if link is not None:
            link.cancel()
        if up:  # its variables do not hold the workers' memory until the next job
            fresh_state(run.client)
        run.__exit__(None, None, None)
    return code


def _classify(exc: BaseException, spec=None, kw: dict | None = None) -> tuple[int, str]:
    """Exit code and one line for a job's exception: a missing input, an output path that
    cannot be made, an output that exists and one that another job is writing are bad usage,
    named by the job's option."""
    msg = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, FileNotFoundError):
        msg = re.sub(r"^(input not found: )+", "", msg)
        flag = _option_in(msg, kw)
        if flag is not None and "output" in flag:
            value = kw[flag.replace("-", "_")]
            return EXIT_USAGE, f"cannot write --{flag} {value}: {msg} (its parent folder " \
                               "is missing or not writable)"
        where = f"--{flag}" if flag else "the job's input options"
        return EXIT_USAGE, f"input not found: {msg} (check {where})"
    from tensorvm.framework.errors import AlreadyExistsError
    if isinstance(exc, AlreadyExistsError):  # another job owns the output now
        return EXIT_USAGE, msg
    if isinstance(exc, FileExistsError):
        msg = re.sub(r"\s*\(pass overwrite=True to replace it\)", "", msg)
        fix = "add --overwrite to replace it" if "overwrite" in (kw or {}) \
            else "choose another output"
        return EXIT_USAGE, f"{msg} ({fix})"
    return EXIT_FAILED, f"{type(exc).__name__}: {msg}"


def _option_in(msg: str, kw: dict | None) -> str | None:
    """The command-line name of the job option whose path (or a parent folder of it, as
    ``os.makedirs`` reports) the error message names."""
    named = {t.strip("[]'\",()").split("://", 1)[-1].rstrip("/") for t in msg.split()}
    named = {t for t in named if t.count("/") >= 2 or (t and "/" not in t)}
    for name, value in (kw or {}).items():
        if not isinstance(value, str) or not value:
            continue
        path = value.split("://", 1)[-1].rstrip("/")
        if path and (value in msg or any(path == t or path.startswith(t + "/")
                                         for t in named)):
            return name.replace("_", "-")
    return None


def _keep_alive(run, err) -> None:
    import threading
    try:  # a Ctrl-C right after the line (its reader acts on it) still ends here
        err.print(f"keeping the cluster up: {run.dashboard} (Ctrl-C to stop)",
                  highlight=False)
        threading.Event().wait()
    except KeyboardInterrupt:
        pass


# ---- jobs, plan, ckpt, version, demo ---------------------------------------------------------
@cli.command()
def jobs():
    """List the bundled jobs, one line each."""
    from .bundled import bundled
    specs = bundled()
    width = max(len(s.name) for s in specs)
    for s in specs:
        click.echo(f"{s.name:<{width}}  {s.summary}")


@cli.command(context_settings=_PASS_THROUGH)
@click.argument("job", required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def plan(job, args):
    """Print JOB's partitioned plan(s) (it runs in process); --dot/--svg FILE export it."""
    args = list(args)
    exports = {}
    for flag in ("--dot", "--svg"):
        while flag in args:
            i = args.index(flag)
            if i + 1 >= len(args):
                raise click.UsageError(f"{flag} needs a FILE (or - for stdout)")
            exports[flag[2:]] = args[i + 1]
            del args[i:i + 2]
    sys.exit(_invoke_job("plan", job, tuple(args),
                         lambda spec, kw: _plan(spec, kw, exports)))


def _plan(spec, kw, exports) -> int:
    from .plans import capture_plans, plan_svg
    kw = {k: v for k, v in kw.items() if k not in RUN_OPTIONS}
    try:
        plans = capture_plans(spec, kw)
    except FileNotFoundError as exc:
        raise Failure(_classify(exc, spec, kw)[1], EXIT_USAGE) from exc
    if not plans:
        raise Failure(f"job {spec.name} ran no graph step: no plan to show")
    for i, p in enumerate(plans):
        click.echo(f"# plan {i + 1}/{len(plans)}")
        click.echo(str(p))
    # the plan with the most tasks, then the most ops (in process every plan is one task:
    # the training step, not the initializer that ran first)
    biggest = max(plans, key=lambda p: (len(p.tasks),
                                        sum(len(t.program.instrs) for t in p.tasks)))
    for kind, path in exports.items():
        text = biggest.to_dot() if kind == "dot" else plan_svg(biggest)
        if path == "-":
            click.echo(text)
            continue
        try:
            with open(path, "w") as f:
                f.write(text)
        except OSError as exc:
            raise Failure(f"cannot write --{kind} {path}: {exc.strerror or exc}",
                          EXIT_USAGE) from exc
    return EXIT_OK


@cli.group()
def ckpt():
    """Inspect checkpoints: ls DIR, show CKPT, verify CKPT."""


@ckpt.command("ls")
@click.argument("url")
@click.option("--json", "as_json", is_flag=True)
def ckpt_ls(url, as_json):
    """The committed checkpoints of folder URL, oldest first."""
    from tensorvm.storage import list_checkpoints
    rows = _storage_call(list_checkpoints, url)
    if as_json:
        click.echo(json.dumps(rows))
        return
    for r in rows:
        if r.get("error"):
            click.echo(f"{r['path']}  CORRUPT: {r['error']}")
        else:
            click.echo(f"{r['path']}  step {r['step']}  {r['num_tensors']} tensors  "
                       f"{r['bytes']} bytes")
    if not rows:
        click.echo(f"no committed checkpoint in {url}")


@ckpt.command("show")
@click.argument("url")
@click.option("--json", "as_json", is_flag=True)
def ckpt_show(url, as_json):
    """The tensors of checkpoint URL (name, dtype, shape, slice, bytes)."""
    from tensorvm.storage import show_checkpoint
    rows = _storage_call(show_checkpoint, url)
    if as_json:
        click.echo(json.dumps(rows))
        return
    for r in rows:
        sl = f"  slice {r['slice']}" if r.get("slice") else ""
        click.echo(f"{r['name']}  {r['dtype']}{r['shape']}{sl}  {r['bytes']} bytes")


@ckpt.command("verify")
@click.argument("url")
def ckpt_verify(url):
    """Read and check every record of checkpoint URL; exit 1 naming each problem."""
    from tensorvm.storage import read_index, verify_checkpoint
    _storage_call(read_index, url)  # no checkpoint there: bad usage, one line
    problems = _storage_call(verify_checkpoint, url)
    for p in problems:
        click.echo(p, err=True)
    if problems:
        raise Failure(f"{url}: {len(problems)} problem(s)")
    click.echo(f"{url}: OK")


def _storage_call(fn, url):
    from tensorvm.storage import CheckpointNotFoundError, DataLossError
    try:
        return fn(url)
    except (CheckpointNotFoundError, FileNotFoundError) as exc:
        raise Failure(f"no checkpoint at {url}: {exc}", EXIT_USAGE) from exc
    except DataLossError as exc:
        raise Failure(str(exc)) from exc


@cli.command()
@click.option("--in-process", is_flag=True, help="Run in this process, without a cluster.")
@click.option("--steps", type=click.IntRange(min=1), default=200, show_default=True,
              help="Gradient-descent steps of the PS-trained ridge regression.")
def demo(in_process: bool, steps: int):
    """A word count and a PS-trained ridge regression, each checked against a reference."""
    from .demo import main
    argv = ["--steps", str(steps)] + (["--in-process"] if in_process else [])
    sys.exit(main(argv))


@cli.command("tf", context_settings=_PASS_THROUGH)
@click.argument("program", required=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def tf_program(program, args):
    """Run a TensorFlow 1.x PROGRAM.py unchanged: its "import tensorflow" gives tensorvm.

    PROGRAM.py runs as __main__ with ARGS as its sys.argv[1:] (its flags, --help
    included); its exit status is the command's."""
    if program is None or program in ("-h", "--help"):
        click.echo(click.get_current_context().get_help())
        sys.exit(EXIT_OK if program else EXIT_USAGE)
    from tensorvm.tf_api.tf_shim import UsageError, run_program
    try:
        run_program(program, list(args))
    except UsageError as exc:
        raise Failure(str(exc), EXIT_USAGE) from exc
    except KeyboardInterrupt as exc:  # Ctrl-C 130, SIGTERM 143 (click would make it Abort)
        sys.exit(_interrupted(exc))
    except SystemExit as exc:  # the program's own exit (tf.app.run ends with sys.exit)
        if exc.code is None or isinstance(exc.code, int):
            sys.exit(exc.code or EXIT_OK)
        click.echo(str(exc.code), err=True)  # as Python prints sys.exit("message")
        sys.exit(EXIT_FAILED)


@cli.command()
def version():
    """Print the tensorvm version."""
    click.echo(_version())


from .local_up import down, status, up  # noqa: E402 - tensorvm up/status/down (issue 25)

cli.add_command(up)
cli.add_command(status)
cli.add_command(down)

from .history_cmds import history, ui  # noqa: E402 - tensorvm history/ui (issue 25)

cli.add_command(history)
cli.add_command(ui)


_NO_ARGS = getattr(click.exceptions, "NoArgsIsHelpError", ())


def main(argv=None) -> int:
    """The console script: runs the CLI and exits with its code."""
    try:
        with _sigterm_raises():
            rv = cli.main(args=argv, prog_name="tensorvm", standalone_mode=False)
        code = rv if isinstance(rv, int) else EXIT_OK
    except _NO_ARGS as e:  # a bare ``tensorvm``: its help, as a usage error (click's code)
        click.echo(e.format_message(), err=True)
        code = EXIT_USAGE
    except click.UsageError as e:
        hint = f" (try '{e.ctx.command_path} --help')" if e.ctx is not None else ""
        click.echo(f"tensorvm: {e.format_message()}{hint}", err=True)
        code = EXIT_USAGE
    except click.ClickException as e:
        click.echo(f"tensorvm: {e.format_message()}", err=True)
        code = e.exit_code
    except Failure as e:
        click.echo(f"tensorvm: {e}", err=True)
        code = e.code
    except (click.Abort, KeyboardInterrupt) as exc:
        code = _interrupted(exc)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (EXIT_OK if e.code is None else 1)
    sys.exit(code)


if __name__ == "__main__":
    main()
