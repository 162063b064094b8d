"""The `deltalog` command: `run` (Soufflé-style batch), `repl`, `demo`, `recover` and
`explain`.

Layer: datalog (front end). Uses the public API (`Database`), the fact-file
sources and, for display only, the query checker. Heavy modules are imported
inside the commands so `deltalog --version` starts at once.

    deltalog run PROGRAM.dl [-F FACTS_DIR] [-D OUTPUT_DIR]   # like `souffle -F -D`
    deltalog repl                                           # interactive session
    deltalog demo                                           # the built-in example
    deltalog recover DIR                                    # repair a durable database
    deltalog explain PROGRAM.dl QUERY [--passes] [--format text|dot] [--plan P] [-F DIR]
    deltalog serve [--host H] [--port P] [--token T]       # the WebSocket server
    deltalog run --engine spark [--spark-master URL] ...      # evaluate on Spark
    deltalog serve --db DIR --spark-load REL=PATH [--spark-master URL] ...
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import datalog

if TYPE_CHECKING:
    from datalog.storage.repair import Repair

EXAMPLES = Path(__file__).with_name("examples")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (default `sys.argv[1:]`); returns the exit status."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["serve"]:  # its options belong to the server package
        return run_serve(arguments[1:])  # (but for --spark-*: see `spark_preload`)
    args = _parser().parse_args(arguments)
    command: Callable[[argparse.Namespace], int] = args.command
    try:
        return command(args)
    except BrokenPipeError:  # `deltalog run ... -D - | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="deltalog", description="An embedded incremental Datalog engine.")
    parser.add_argument("--version", action="version", version=f"deltalog {datalog.__version__}")
    commands = parser.add_subparsers(title="commands", required=True, metavar="COMMAND")
    run = commands.add_parser("run", help="evaluate a program like `souffle -F -D`")
    run.add_argument("program", type=Path, metavar="PROGRAM.dl")
    run.add_argument("-F", "--fact-dir", default=".", help="where .input files are (default .)")
    run.add_argument(
        "-D", "--output-dir", default=".", help="where .output files go; `-` for stdout"
    )
    run.add_argument(
        "--progress", action=argparse.BooleanOptionalAction, default=None,
        help="show a progress line for large fact files (default: when stderr is a TTY)",
    )  # fmt: skip
    run.add_argument(
        "--allow-missing-inputs", action="store_true",
        help="an `.input` relation whose fact file does not exist starts empty "
        "(default: an error, as in Soufflé)",
    )  # fmt: skip
    run.add_argument(
        "--engine", choices=("embedded", "spark"), default="embedded",
        help="evaluate in this process (default) or on Spark (needs pyspark and Java)",
    )  # fmt: skip
    _spark_options(run)
    _functors_option(run)
    run.set_defaults(command=run_program)
    repl = commands.add_parser("repl", help="an interactive session (reads stdin)")
    _functors_option(repl)
    repl.set_defaults(command=run_repl)
    demo = commands.add_parser("demo", help="run the built-in social-graph example")
    demo.set_defaults(command=run_demo)
    recover = commands.add_parser(
        "recover", help="repair a durable database that does not open (says what it lost)"
    )
    recover.add_argument("directory", type=Path, metavar="DIR")
    recover.set_defaults(command=run_recover)
    _explain_parser(commands)
    commands.add_parser("serve", help="serve a database over WebSocket (serve --help)")
    return parser


class _Parser(argparse.ArgumentParser):
    """argparse's parser with `_Formatter` (its subcommands' parsers are of its class)."""

    def __init__(self, **options: Any) -> None:
        super().__init__(formatter_class=_Formatter, **options)


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter, sized to the terminal without `shutil`, which loads bz2,
    lzma and fnmatch (1 MiB resident a run, ADR 0084): argparse makes a formatter for
    every option it is given."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24) -> None:
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2)


def _columns() -> int:
    """The terminal's width as `shutil.get_terminal_size` finds it ($COLUMNS, else
    standard output's terminal, else 80)."""
    with contextlib.suppress(KeyError, ValueError):
        if (columns := int(os.environ["COLUMNS"])) > 0:
            return columns
    with contextlib.suppress(ValueError, OSError):
        stdout = sys.__stdout__
        if stdout is not None and (columns := os.get_terminal_size(stdout.fileno()).columns) > 0:
            return columns
    return 80


def _explain_parser(commands: Any) -> None:
    explain = commands.add_parser(
        "explain", help="print how a query over a program is planned (Database.explain)"
    )
    explain.add_argument("program", type=Path, metavar="PROGRAM.dl")
    explain.add_argument("query", metavar="QUERY", help='a query, e.g. "reach(1, y)"')
    explain.add_argument(
        "--passes", action="store_true", help="the plan after each planning pass (text only)"
    )
    explain.add_argument(
        "--format", choices=("text", "dot"), default="text",
        help="text (default) or dot: the dataflow as a Graphviz digraph",
    )  # fmt: skip
    explain.add_argument(
        "--plan", choices=("auto", "wcoj", "binary"), default="auto",
        help="delta queries where they fit (auto, default), wherever possible (wcoj), or none",
    )  # fmt: skip
    explain.add_argument(
        "-F", "--fact-dir", default=None,
        help="load the .input files from here first (a delta query orders its variables "
        "by the relations' sizes); default: only the program's own facts",
    )  # fmt: skip
    _functors_option(explain)
    explain.set_defaults(command=run_explain)


def _functors_option(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--functors", type=Path, action="append", default=[], metavar="FILE.py",
        help="bind `.functor`s to the functions of this Python file (its FUNCTORS mapping, "
        "or its public functions by name); may be repeated",
    )  # fmt: skip


def _spark_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--spark-master", metavar="URL",
        help="where Spark runs: local[N], spark://HOST:PORT, ... (default "
        "$DELTALOG_SPARK_MASTER, else local[*]); a running session is reused",
    )  # fmt: skip
    command.add_argument(
        "--spark-conf", action="append", default=[], metavar="KEY=VALUE", type=_setting,
        help="a Spark option for a new session, e.g. spark.executor.memory=4g (may be repeated)",
    )  # fmt: skip


def _setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, not {text!r}")
    return key, value


def spark_of(args: argparse.Namespace) -> Any:
    """The Spark session `--spark-master` and `--spark-conf` ask for (reused if running)."""
    from datalog.io.spark.session import spark_session

    return spark_session(args.spark_master, dict(args.spark_conf))


def load_functors(paths: Sequence[Path]) -> dict[str, object]:
    """The functors offered by the files `--functors` names, later files winning."""
    from datalog import functors_in_file

    found: dict[str, object] = {}
    for path in paths:
        found.update(functors_in_file(path))
    return found


# --- run --------------------------------------------------------------------------------


def run_program(args: argparse.Namespace) -> int:
    """Load the program and its `.input` files, write `.output`s, print `.printsize`s."""
    from datalog.db.database import Database
    from datalog.io.sources.csv import load_inputs, read_outputs, write_outputs
    from datalog.lang.errors import DatalogError

    text = _program_text(args.program)
    if text is None:
        return 1
    if args.engine == "spark":
        return _run_on_spark(text, args)
    if args.spark_master or args.spark_conf:
        print("error: --spark-master and --spark-conf need --engine spark", file=sys.stderr)
        return 2
    try:
        db = Database(functors=load_functors(args.functors))
        db.define(text)
        load_inputs(
            db, args.fact_dir, progress=args.progress, allow_missing=args.allow_missing_inputs
        )
        answers = read_outputs(db)  # one evaluation for every printed relation
        write_outputs(db, args.output_dir, sys.stdout, answers)
        for directive in db.checked.directives:
            if directive.kind == "printsize":
                print(f"{directive.relation}\t{answers[directive.relation].size}")
    except DatalogError as error:
        print(error.format(), file=sys.stderr)
        return 1
    except OSError as error:  # an output directory that cannot be written, say
        print(f"error: {error.strerror}: {error.filename}", file=sys.stderr)
        return 1
    return 0


def run_explain(args: argparse.Namespace) -> int:
    """Print the plan of `args.query` over the program (exit 1 on a bad program or
    query, with its position; 2 on options that do not go together)."""
    from datalog.db.database import Database
    from datalog.io.sources.csv import load_inputs
    from datalog.lang.errors import DatalogError

    if args.passes and args.format != "text":
        print("error: --passes prints text: it does not go with --format dot", file=sys.stderr)
        return 2
    text = _program_text(args.program)
    if text is None:
        return 1
    try:
        db = Database(functors=load_functors(args.functors))
        db.define(text)
        if args.fact_dir is not None:
            load_inputs(db, args.fact_dir, progress=False, allow_missing=False)
    except DatalogError as error:
        print(f"in {args.program}:\n{error.format()}", file=sys.stderr)
        return 1
    try:
        print(db.explain(args.query, plan=args.plan, format=args.format, passes=args.passes))
    except DatalogError as error:
        print(f"in the query:\n{error.format()}", file=sys.stderr)
        return 1
    return 0


def _program_text(path: Path) -> str | None:
    """The program's text, or None after saying why it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        print(f"error: cannot read {path}: {exc.strerror}", file=sys.stderr)
    except UnicodeDecodeError as exc:
        print(f"error: {path} is not UTF-8 text (at byte {exc.start})", file=sys.stderr)
    return None


def _run_on_spark(text: str, args: argparse.Namespace) -> int:
    from datalog.io.sources.csv import missing_file
    from datalog.io.spark.run import input_files, run
    from datalog.lang.checks import check_program
    from datalog.lang.errors import DatalogError
    from datalog.lang.parser import parse_program

    try:
        files = input_files(check_program(parse_program(text)), args.fact_dir)
        for file in files:  # Spark would fail on it with a stack trace
            if not file.path.exists():
                spark = "; --allow-missing-inputs is not supported with --engine spark"
                raise missing_file(file, spark if args.allow_missing_inputs else "")
        run(text, args.fact_dir, args.output_dir, spark_of(args), stdout=sys.stdout)
    except DatalogError as error:
        print(error.format(), file=sys.stderr)
        return 1
    return 0


# --- repl ------------------------------------------------------------------------------------


def run_repl(args: argparse.Namespace) -> int:
    from datalog.cli.repl import Session
    from datalog.db.database import Database
    from datalog.lang.errors import DatalogError

    try:
        db = Database(functors=load_functors(args.functors))
    except DatalogError as error:
        print(error.format(), file=sys.stderr)
        return 1
    interactive = sys.stdin.isatty()
    session = Session(db)
    if interactive:
        print(f"deltalog {datalog.__version__}: type :help for commands, :quit to leave")
    for line in _lines(interactive, session.prompt):
        if not session.handle(line):
            break
    return 0


def _lines(interactive: bool, prompt: Callable[[], str]) -> Iterator[str]:
    if not interactive:
        yield from sys.stdin
        return
    with contextlib.suppress(ImportError):  # line editing and history for input()
        import readline  # noqa: F401
    while True:
        try:
            yield input(prompt())
        except EOFError:
            print()
            return
        except KeyboardInterrupt:
            print("^C")


# --- demo ------------------------------------------------------------------------------------


def run_demo(args: argparse.Namespace) -> int:
    from datalog.cli.demo import demo

    demo(EXAMPLES)
    return 0


# --- recover ---------------------------------------------------------------------------------


def run_recover(args: argparse.Namespace) -> int:
    """Repair what can be repaired (`datalog.storage.repair`), then open the database,
    cutting the log before a record that does not replay until it opens; say what was
    done and what was lost. 0 once the database opens, else 1."""
    from datalog.lang.errors import DatalogError

    if not args.directory.is_dir():
        print(f"error: {args.directory} is not a directory", file=sys.stderr)
        return 1
    try:
        report, epoch = _recovered(args.directory)
    except DatalogError as error:
        print(error.format(), file=sys.stderr)
        print(f"error: {args.directory} still cannot be opened", file=sys.stderr)
        return 1
    print(f"lost: {report.lost(epoch)}")
    print(f"{args.directory} opens at epoch {epoch}")
    return 0


def _recovered(directory: Path) -> tuple[Repair, int]:
    """Repair `directory` and open it (printing each action as it is taken): the
    report and the epoch it opens at."""
    from datalog.db.database import Database
    from datalog.storage.frames import CorruptLogError
    from datalog.storage.repair import cut, repair

    report = repair(directory)
    print("\n".join(report.actions or ["nothing to repair"]))
    cuts: set[tuple[Path, int]] = set()
    while True:
        try:
            with Database(directory) as db:
                return report, db.epoch
        except CorruptLogError as error:  # a record that does not replay
            where = (error.path, error.offset)
            if where in cuts or error.path.parent != directory:
                raise
            cuts.add(where)
            step = cut(directory, error.path, error.offset, error.reason)
            print("\n".join(step.actions))
            report.add(step)


# --- serve -----------------------------------------------------------------------------------


def run_serve(argv: Sequence[str]) -> int:
    """`deltalog serve ...`: hand over to the server package, found by name at run time.

    `datalog` never imports `server` (the layers point down); the server package
    registers nothing here, it is only looked up when asked for
    (docs/adr/0006-server-entry-point.md).
    """
    import importlib

    argv, failed = spark_preload(argv)
    if failed:
        return failed
    if "pyspark" in sys.modules:  # the preload's session is not needed any more
        from datalog.io.spark.session import stop_session

        stop_session()
    try:
        entry = importlib.import_module("server.main")
    except ImportError as exc:
        print(f"error: the server is not available: {exc}", file=sys.stderr)
        return 1
    status: int = entry.main(argv)
    return status


def spark_preload(argv: Sequence[str]) -> tuple[list[str], int]:
    """`serve --spark-load RELATION=PATH ...`: load Parquet files or directories (or
    fact files, `.facts`/`.tsv`/`.csv`) with Spark into the durable database of
    `--db` (defining `--program` first if it defines nothing yet), before the
    server opens it. Returns the server's arguments and a status."""
    parser = argparse.ArgumentParser(prog="deltalog serve", add_help=False)
    _spark_options(parser)
    parser.add_argument("--spark-load", action="append", default=[], type=_setting)
    parser.add_argument("--db", type=Path)
    parser.add_argument("--program", type=Path)
    parser.add_argument("-F", "--fact-dir", type=Path)
    parser.add_argument("--functors", type=Path, action="append", default=[])
    args, _ = parser.parse_known_args(argv)
    server_args = _without_spark_options(list(argv))
    if not args.spark_load:
        if args.spark_master or args.spark_conf:
            print("error: --spark-master and --spark-conf need --spark-load", file=sys.stderr)
            return server_args, 2
        return server_args, 0
    if args.db is None:
        print("error: --spark-load needs --db (a durable database to load into)", file=sys.stderr)
        return server_args, 2
    from datalog.db.database import Database
    from datalog.io.sources.csv import load_inputs
    from datalog.io.sources.spark import load_paths
    from datalog.lang.errors import DatalogError

    try:
        with Database(args.db, functors=load_functors(args.functors)) as db:
            if args.program is not None:  # as the server would, before the loads need it
                text = args.program.read_text(encoding="utf-8")
                if not any(definition.text == text for definition in db.definitions):
                    db.define(text)
                    if args.fact_dir is not None:
                        load_inputs(db, args.fact_dir)
            load_paths(db, spark_of(args), dict(args.spark_load))
    except (OSError, DatalogError) as error:
        print(error.format() if isinstance(error, DatalogError) else error, file=sys.stderr)
        return server_args, 1
    return server_args, 0


def _without_spark_options(argv: list[str]) -> list[str]:
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--spark-master", "--spark-conf", "--spark-load"):
            skip = True
        elif not arg.startswith(("--spark-master=", "--spark-conf=", "--spark-load=")):
            kept.append(arg)
    return kept


if __name__ == "__main__":
    sys.exit(main())
