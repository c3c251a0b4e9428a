"""The `mots` command line."""
