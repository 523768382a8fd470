"""The ``workbench`` command: ``workbench demo`` (and later ``tune``, ``profile``, ``bench``).

Subcommands are registered in :data:`COMMANDS` (name -> (help, add_arguments, run)), so a
feature adds its command without touching the parser code.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Callable, Sequence

Command = tuple[str, Callable[[argparse.ArgumentParser], None], Callable[[argparse.Namespace], int]]
COMMANDS: dict[str, Command] = {}


def command(name: str, help: str,  # noqa: A002
            add_arguments: Callable[[argparse.ArgumentParser], None] = lambda p: None):
    """Register ``fn(args) -> exit code`` as the subcommand ``name``."""
    def wrap(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        COMMANDS[name] = (help, add_arguments, fn)
        return fn
    return wrap


# ---- demo ------------------------------------------------------------------------------------

def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("steps", nargs="*", metavar="STEP",
                   help="run only these steps (default: all; see --list)")
    p.add_argument("--list", action="store_true", help="list the demo steps and exit")
    p.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats")


@command("demo", "build a few kernels, check them against numpy and time them",
         _demo_arguments)
def _demo(args: argparse.Namespace) -> int:
    from workbench import demo
    if args.list:
        for s in demo.DEMO_STEPS:
            print(f"{s.name:<12} {s.description}")
        return 0
    config = demo.DemoConfig(quick=args.quick, repeat=3 if args.quick else 5,
                             min_repeat_ms=10.0 if args.quick else 40.0)
    import os

    from workbench import options
    # Parallel kernels share the cores with everything else: the load explains noisy rows.
    load = f", load average {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else ""
    print(f"workbench demo: {options.get('num_threads')} thread(s){load}; times are medians, "
          "'vs numpy' = numpy time / workbench time")
    start = time.perf_counter()
    rows: list[tuple[str, ...]] = []
    failed = []

    def show(r: demo.DemoResult) -> None:
        rows.append(demo.format_row(r))
        if not r.ok:
            failed.append(r.name)
        print(f"  {r.name:<10} {'ok' if r.ok else 'WRONG'}  "
              f"({time.perf_counter() - start:.1f} s)", flush=True)
    try:
        demo.run_steps(args.steps or None, config, show)
    except ValueError as e:
        print(f"workbench demo: {e}", file=sys.stderr)
        return 2
    print()
    print(demo.format_table(rows))
    print(f"\n{len(rows)} step(s) in {time.perf_counter() - start:.1f} s"
          + (f"; WRONG RESULTS: {', '.join(failed)}" if failed else "; all results match numpy"))
    return 1 if failed else 0


# ---- entry point -----------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    from workbench import __version__
    parser = argparse.ArgumentParser(
        prog="workbench",
        description="Workbench: a tensor-program compiler, runtime and tuner with TVM's API "
                    "names. Try `workbench demo`.")
    parser.add_argument("--version", action="version", version=f"workbench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_, add_args, _) in COMMANDS.items():
        add_args(sub.add_parser(name, help=help_, description=help_))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: ``sys.argv[1:]``), run the subcommand, return its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return COMMANDS[args.command][2](args)


if __name__ == "__main__":
    sys.exit(main())
