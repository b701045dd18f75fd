"""``python -m memtoc``: the same command as ``memtoc`` (used by hooks when no script is on PATH)."""

from memtoc.surfaces.quick import main

if __name__ == "__main__":
    main()
