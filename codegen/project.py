"""The project a command works on: its root, its rules folder, its output folder and the output's package.

Found the way ruff and buf find theirs, by walking up from the working directory: the first folder with a
`stampgen.toml`, or a `pyproject.toml` holding a `[tool.stampgen]` table, is the root; failing that, the
first folder with a `rules/` folder of `*.rules` files; failing that, the working directory itself. So
every command works the same from any subfolder, and what `generate` writes never depends on where it ran:
rules files are named relative to the root, and the generated tests find the root relative to themselves.

Settings (all optional):

    rules   = "rules"       # where rules/*.rules live, relative to the root
    out     = "generated"   # the output folder, relative to the root
    package = "generated"   # the import path of the output folder (default: `out` with `/` as `.`)
"""

from __future__ import annotations

import sys
from pathlib import Path

import msgspec

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

CONFIG_FILE = "stampgen.toml"
PYPROJECT = "pyproject.toml"


class ProjectError(Exception):
    """The project's configuration cannot be used (unreadable, malformed, a bad setting)."""


class Settings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    rules: str = "rules"
    out: str = "generated"
    package: str | None = None


class Project(msgspec.Struct, frozen=True):
    root: Path  # absolute
    settings: Settings
    config: Path | None  # the file the settings came from, None when there is none

    @property
    def rules_dir(self) -> Path:
        return self.root / self.settings.rules

    @property
    def out_dir(self) -> Path:
        return self.root / self.settings.out

    def relative(self, path: Path | str) -> str:
        """`path` as the output names it: relative to the root, with `/`; as given when outside it."""
        p = Path(path)
        absolute = p if p.is_absolute() else Path.cwd() / p
        try:
            return absolute.resolve().relative_to(self.root).as_posix()
        except ValueError:
            return p.as_posix()

    def package_for(self, out_dir: Path) -> str | None:
        """The import path of an output folder: the configured package for the configured folder, else its
        path below the root as dotted names; None when it has no such name (outside the root, or a part
        that is not a Python name)."""
        target = out_dir.resolve()
        if target == self.out_dir.resolve() and self.settings.package:
            return self.settings.package
        try:
            parts = target.relative_to(self.root).parts
        except ValueError:
            return None
        if parts and all(part.isidentifier() for part in parts):
            return ".".join(parts)
        return None


def _settings_from(path: Path) -> Settings | None:
    """The settings in a config file; None for a pyproject.toml without a [tool.stampgen] table."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ProjectError(f"{path}: cannot read it: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProjectError(f"{path}: not valid TOML: {exc}") from None
    if path.name == PYPROJECT:
        tool = data.get("tool")
        table = tool.get("stampgen") if isinstance(tool, dict) else None  # `tool = 1` is not our table
        if table is None:
            return None
        where = f"{path} [tool.stampgen]"
    else:
        table, where = data, str(path)
    try:
        settings = msgspec.convert(table, Settings)
    except msgspec.ValidationError as exc:
        raise ProjectError(f"{where}: {exc}") from None
    for name in ("rules", "out"):
        value = getattr(settings, name)
        if not value or Path(value).is_absolute() or ".." in Path(value).parts:
            raise ProjectError(f"{where}: `{name}` must be a folder inside the project, got {value!r}")
    if settings.package is not None and not all(p.isidentifier() for p in settings.package.split(".")):
        raise ProjectError(f"{where}: `package` must be a dotted Python name, got {settings.package!r}")
    return settings


def find_project(start: Path | None = None) -> Project:
    """The project that `start` (default: the working directory) is in."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        for name in (CONFIG_FILE, PYPROJECT):
            candidate = folder / name
            if candidate.is_file():
                settings = _settings_from(candidate)
                if settings is not None:
                    return Project(folder, settings, candidate)
    for folder in (here, *here.parents):
        rules = folder / "rules"
        if rules.is_dir() and any(rules.glob("*.rules")):
            return Project(folder, Settings(), None)
    return Project(here, Settings(), None)
