"""Instance files: reading YAML or JSON and validating it against the schema of its kind."""

from optfleet.instance.loader import LoadedInstance, load_instance

__all__ = ["LoadedInstance", "load_instance"]
