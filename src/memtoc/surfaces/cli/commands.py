"""Imports every command module so its commands register on the app."""

from memtoc.surfaces.cli import bench_cmds, demo, store_cmds, toc_cmds

__all__ = ["bench_cmds", "demo", "store_cmds", "toc_cmds"]
