"""Dump SkyPilot's task JSON schema (sky.utils.schemas.get_task_schema) without installing
SkyPilot's dependencies: missing third-party modules are stubbed (the schema is plain data)."""
import importlib.abc
import importlib.machinery
import json
import sys
import types

sys.path.insert(0, sys.argv[1])


class Stub(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Stub(self.__name__ + "." + name)

    def __call__(self, *a, **k):
        return Stub("call")

    def __mro_entries__(self, bases):
        return (object,)


NEVER = {"chardet", "simplejson", "brotli", "brotlicffi", "socks", "zstandard", "h2"}


class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        root = name.split(".")[0]
        if root == "sky" or root in sys.stdlib_module_names or root in NEVER:
            return None
        try:
            if importlib.machinery.PathFinder.find_spec(name, path) is not None:
                return None
        except Exception:
            pass
        return importlib.machinery.ModuleSpec(name, self, is_package=True)

    def create_module(self, spec):
        return Stub(spec.name)

    def exec_module(self, module):
        module.__path__ = []


sys.meta_path.append(Finder())
from sky.utils import schemas  # noqa: E402

which = sys.argv[2] if len(sys.argv) > 2 else "task"
schema = schemas.get_task_schema() if which == "task" else schemas.get_resources_schema()
json.dump(schema, sys.stdout, indent=1, sort_keys=True)
sys.stdout.write("\n")
