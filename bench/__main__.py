"""``python -m bench``: run every benchmark module's main() in turn."""
import importlib
import pkgutil
import sys


def main(argv=None):
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("bench_"))
    wanted = (argv or sys.argv[1:]) or names
    for name in names:
        if name in wanted:
            print(f"\n=== {name} ===", flush=True)
            mod = importlib.import_module(f"bench.{name}")
            mod.main([])


if __name__ == "__main__":
    main()
