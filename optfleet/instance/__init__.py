"""Instance files: schemas, presets and profiles, loading and validation."""

from optfleet.instance.loader import LoadedInstance, load_instance

__all__ = ["LoadedInstance", "load_instance"]
