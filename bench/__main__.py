"""``python -m bench [NAME ...]`` (``make bench [BENCH="NAME ..."]``): run each benchmark
module's ``main()`` in turn, all of them or those named (``bench_planning`` or ``planning``);
``--list`` prints their names."""
import importlib
import pkgutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def names() -> list[str]:
    """The benchmark modules (``bench/bench_*.py``), sorted."""
    return sorted(m.name for m in pkgutil.iter_modules([str(HERE)])
                  if m.name.startswith("bench_"))


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else list(argv)
    known = names()
    if args == ["--list"]:
        print("\n".join(known))
        return 0
    wanted = [a if a.startswith("bench_") else f"bench_{a}" for a in args] or known
    unknown = [w for w in wanted if w not in known]
    if unknown:
        print(f"unknown benchmark {unknown[0]!r}; there are: {' '.join(known)}", file=sys.stderr)
        return 2
    for name in wanted:
        print(f"\n=== {name} ===", flush=True)
        mod = importlib.import_module(f"bench.{name}")
        mod.main([])
    return 0


if __name__ == "__main__":
    sys.exit(main())
