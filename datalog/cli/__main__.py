"""`python -m datalog.cli ...`: the `deltalog` command."""

from datalog.cli.commands import main

if __name__ == "__main__":
    raise SystemExit(main())
