"""A family directory's family.json, read and written the one way the tools share (indent 2,
a final newline), so that a tool changing one entry leaves the others as they were."""
import json
import os


def path(models):
    return os.path.join(models, "family.json")


def load(models):
    with open(path(models)) as f:
        return json.load(f)


def save(models, family):
    with open(path(models), "w") as f:
        json.dump(family, f, indent=2)
        f.write("\n")


def update_method_defaults(models, written):
    """Puts `written` ({method: defaults}) over family.json's method_defaults."""
    family = load(models)
    family.setdefault("method_defaults", {}).update(written)
    save(models, family)
