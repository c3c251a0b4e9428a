"""Print pyproject.toml's requirements (the project's and those of the extras named) one a line:
the images' deps stages install them from pyproject.toml alone, so that their pip layer is
rebuilt when pyproject.toml or docker/constraints.txt changes, not at every source change.

    python requirements.py pyproject.toml services > requirements.txt
"""

import sys
import tomllib

with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)["project"]
extras = project.get("optional-dependencies", {})
for requirement in project["dependencies"] + [r for e in sys.argv[2:] for r in extras[e]]:
    print(requirement)
