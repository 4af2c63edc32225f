"""Sub-commands of the changelake CLI."""
