"""What a user names as a model — a file, a folder, a cache entry or a Hub id — resolved to the files to read.

One resolver for every place poslab reads a model (``learned source = ...``,
``rotary config = ...``, ``poslab inspect``), so they accept exactly the same
things:

- a ``config.json`` (the model folder around it supplies the weights, if any);
- a weights file (``.safetensors``, ``*.index.json``, ``.npy``, ``.npz``,
  ``.bin`` / ``.pt`` / ``.pth``); a ``config.json`` beside it is used;
- a model folder (``config.json`` and ``model.safetensors``,
  ``model.safetensors.index.json``, ``pytorch_model.bin`` or
  ``pytorch_model.bin.index.json``, first present wins; else its single
  weights file);
- a snapshot of the Hugging Face cache, ``models--ORG--NAME/snapshots/REV``,
  or the ``models--ORG--NAME`` folder itself (the snapshot ``refs/main``
  names, else its only snapshot);
- a Hub id ``ORG/NAME`` or ``ORG/NAME@REVISION`` (a branch, tag or commit)
  that is not an existing path and does not look like one (see
  :func:`looks_like_path`): looked up in the local Hugging Face cache
  (``HF_HUB_CACHE``, else ``HF_HOME/hub``, as huggingface_hub reads them).
  poslab never reaches the network on its own: a Hub id that is not cached is
  refused with the command that downloads it. Only when the user sets
  ``HF_HUB_OFFLINE=0`` explicitly (:func:`downloads_allowed`) is
  ``config.json`` downloaded into that cache; weights are never downloaded
  here (:mod:`poslab.checkpoints.hub` reads just the position tensor).

A source that looks like a file (it ends in a suffix poslab reads, or starts
with ``./``, ``../``, ``/`` or ``~``) is always a path: when nothing is there
it is refused at once, naming the absolute path tried, and never looked up
as a Hub id.

Every file poslab derives from what the user named — the weights and
``config.json`` of a folder, a cache snapshot's links into ``blobs/``, the
snapshot ``refs/main`` names, the shards of an index — must lie inside the
folder (or, for the cache, the ``models--ORG--NAME`` repo folder) it came
from, after following symlinks; anything else is refused with a message,
never read under the model's name.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import re
from pathlib import Path

__all__ = ["ModelSource", "SourceError", "resolve_model", "read_json", "confined", "cache_repo_of", "snapshot_of",
           "WEIGHT_FILES", "WEIGHT_SUFFIXES", "PATH_SUFFIXES", "parse_hub_id", "looks_like_path",
           "downloads_allowed", "plain_name", "quoted", "capped"]

#: weights file names of a Hugging Face model folder, in order of preference.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
#: file name endings poslab reads tensors from.
WEIGHT_SUFFIXES = (".npy", ".npz", ".safetensors", ".bin", ".pt", ".pth", ".index.json")
#: file name endings that make a source a path, never a Hub id (``.gguf`` is refused later, as a format).
PATH_SUFFIXES = WEIGHT_SUFFIXES + (".json", ".gguf")
_PATH_PREFIXES = ("./", "../", "/", "~", ".\\", "..\\")

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")  # a snapshot name: one path component
_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")  # a branch, tag or commit (refs/pr/1 has slashes)


class SourceError(ValueError):
    """A model source that cannot be resolved, or that names files outside where it came from."""


@dataclasses.dataclass(frozen=True)
class ModelSource:
    """A resolved model source: which files hold its config and weights, and where they came from.

    Attributes
    ----------
    source : str
        What the user wrote.
    what : str
        ``config file``, ``weights file``, ``model folder``, ``Hugging Face cache snapshot``,
        ``model folder in a Hugging Face cache snapshot``, ``Hugging Face cache repo`` or ``Hub id``.
    root : Path or None
        The folder (model folder, or a cache repo ``models--ORG--NAME``)
        every derived path lies in; None only for a Hub id with nothing cached.
    config_path : Path or None
        The model's ``config.json``, if there is one.
    weights_path : Path or None
        The file holding the tensors (an ``*.index.json`` for a sharded
        checkpoint), if there is one on disk.
    repo_id : str or None
        ``ORG/NAME`` for a Hub id or a cache entry (anything inside ``models--ORG--NAME``).
    revision : str or None
        The snapshot (a commit hash) read, for a Hub id or a cache entry.
    requested_revision : str or None
        The revision asked for (``@REV`` of a Hub id; ``main`` otherwise).
    """

    source: str
    what: str
    root: Path | None
    config_path: Path | None
    weights_path: Path | None
    repo_id: str | None = None
    revision: str | None = None
    requested_revision: str | None = None

    @property
    def label(self) -> str:
        """A short name for messages: the Hub id with its revision, else the path given."""
        if self.repo_id is not None and self.what in ("Hub id",):
            return f"{self.repo_id}@{self.revision}" if self.revision else self.repo_id
        return self.source

    def read_config(self) -> dict | None:
        """The parsed ``config.json`` (a JSON object), or None when there is none.

        Raises
        ------
        SourceError
            Unreadable, not JSON, nested too deeply or not an object.
        """
        return None if self.config_path is None else read_json(self.config_path, "a model's config.json")


# ------------------------------------------------------------------ helpers
def quoted(value, limit: int = 200) -> str:
    """``repr(value)`` for a message: whole when it has at most ``limit`` characters, else visibly cut.

    A cut value keeps its first ``limit`` characters, then ``…`` and how long the whole is, so a
    quoted value is never mistaken for the complete one.
    """
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} characters in all)"


def capped(items, limit: int = 20, sep: str = "; ") -> str:
    """The first ``limit`` of ``items`` (as text) joined by ``sep``, then ``… and N more`` if there are more."""
    items = [str(i) for i in items]
    more = f"{sep}… and {len(items) - limit} more" if len(items) > limit else ""
    return sep.join(items[:limit]) + more


def read_json(path, what: str = "JSON") -> dict:
    """Parse ``path`` as a JSON object, with a message naming the file whatever goes wrong.

    Raises
    ------
    SourceError
        Not readable, not UTF-8, not JSON, nested deeper than the parser's
        recursion limit, or not a JSON object.
    """
    path = Path(path)
    try:
        value = json.loads(path.read_text(encoding="utf-8-sig"))
    except RecursionError:
        raise SourceError(f"cannot read {path}: JSON nested too deeply for Python's parser; expected {what}") from None
    except UnicodeDecodeError as exc:
        raise SourceError(f"cannot read {path}: not UTF-8 text ({exc.reason}); expected {what}") from None
    except ValueError as exc:
        raise SourceError(f"cannot read {path}: not valid JSON ({exc}); expected {what}") from None
    except OSError as exc:
        raise SourceError(f"cannot read {path}: {_os_reason(path, exc)}; expected {what}") from None
    if not isinstance(value, dict):
        raise SourceError(f"{path} holds a JSON {type(value).__name__}, not an object; expected {what}")
    return value


def _os_reason(path: Path, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return f"{path.name} is a symlink loop (it points to itself, directly or through other links)"
    return exc.strerror or str(exc)


def link_problem(path: Path) -> str | None:
    """Why ``path`` cannot be opened (a symlink loop, a broken link, missing), or None if it is a file."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return f"{path.name} is a symlink loop (it points to itself, directly or through other links)"
        if path.is_symlink():
            return f"{path.name} is a broken symlink (to {os.readlink(path)}; in a cache: its blob was not downloaded)"
        return f"{path} does not exist"
    return None if path.is_file() else f"{path} is not a file"


def cache_repo_of(path: Path) -> Path | None:
    """The ``models--ORG--NAME`` folder holding ``path`` (a snapshot or a file in one), else None."""
    parts = Path(os.path.abspath(path)).parts
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] == "snapshots" and parts[i - 1].startswith("models--"):
            return Path(*parts[:i])
    return None


def snapshot_of(path) -> tuple[str, str] | None:
    """(repo id ``ORG/NAME``, snapshot name) of a path inside ``models--ORG--NAME/snapshots/REV``, else None.

    The snapshot name is the commit the cache entry was downloaded at (huggingface_hub names
    snapshot folders by commit hash).
    """
    parts = Path(os.path.abspath(path)).parts
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] == "snapshots" and parts[i - 1].startswith("models--"):
            return _repo_id(Path(*parts[:i])), parts[i + 1]
    return None


def confined(path: Path, root: Path, *, what: str) -> Path:
    """``path`` itself, after checking that it lies inside ``root`` once symlinks are followed.

    Parameters
    ----------
    path : Path
        A file poslab derived from what the user named (never the named path itself).
    root : Path
        The model folder or cache repo it must stay in.
    what : str
        How ``root`` is named in the message (``model folder``, ``cache repo``).

    Raises
    ------
    SourceError
        ``path`` resolves outside ``root``; the message names both.
    """
    real, top = os.path.realpath(path), os.path.realpath(root)
    if os.path.commonpath([real, top]) != top:
        raise SourceError(
            f"{path} resolves to {real}, outside the {what} {root}; poslab reads only files inside the "
            f"{what} a model comes from. Copy the file into it, or name that file directly")
    return path


def plain_name(name, *, where: str, what: str = "file") -> str:
    """``name`` itself, checked to be a file name relative to its folder (no absolute path, no '..').

    Raises
    ------
    SourceError
        Naming ``where`` (the file holding the entry) and what was found.
    """
    if not isinstance(name, str) or not name or os.path.isabs(name) or name.startswith(("/", "\\")) \
            or ".." in Path(name).parts or "\\" in name:
        raise SourceError(f"{where} names the {what} {name!r}: expected a file name inside its folder "
                          "(no absolute path, no '..'); poslab never reads outside the model's folder")
    return name


def looks_like_path(text) -> bool:
    """True when ``text`` is written like a file path, never a Hub id.

    That is: it starts with ``./``, ``../``, ``/`` or ``~``, or its name ends in
    one of :data:`PATH_SUFFIXES` (``.safetensors``, ``.bin``, ``.pt``, ``.pth``,
    ``.npy``, ``.npz``, ``.json``, ``.gguf``), case-insensitively.
    """
    if not isinstance(text, str):
        return False
    name = text.split("@", 1)[0] if not text.startswith(_PATH_PREFIXES) else text
    return text.startswith(_PATH_PREFIXES) or os.path.isabs(text) or name.lower().endswith(PATH_SUFFIXES)


def downloads_allowed() -> bool:
    """True only when the user set ``HF_HUB_OFFLINE=0`` (or false/no/off) explicitly.

    poslab promises that nothing is downloaded at run time: with ``HF_HUB_OFFLINE`` unset
    poslab behaves as if it were 1 and never reaches the network.
    """
    value = os.environ.get("HF_HUB_OFFLINE")
    if value is None or value.strip().lower() not in ("0", "false", "no", "off"):
        return False
    from huggingface_hub import constants

    return not constants.HF_HUB_OFFLINE


def missing_path(text: str, path: Path) -> FileNotFoundError:
    """The refusal for a source written like a path with nothing there: the absolute path tried, what to write."""
    return FileNotFoundError(
        f"{text!r} looks like a file path, and there is no file or folder {Path(os.path.abspath(path))}. "
        "Write the path of an existing file or folder (a relative path is read beside the study file, "
        "else from the working folder), or a Hub id ORG/NAME that is in the local Hugging Face cache")


def parse_hub_id(text: str) -> tuple[str, str | None] | None:
    """(repo_id, revision or None) if ``text`` is written like a Hub id ``ORG/NAME[@REV]``, else None.

    A text that :func:`looks_like_path` is never a Hub id.
    """
    if not isinstance(text, str) or text.count("/") != 1 or text.startswith((".", "~")) or looks_like_path(text):
        return None
    repo_id, _, revision = text.partition("@")
    try:
        from huggingface_hub.utils import HFValidationError, validate_repo_id
    except ImportError:  # pragma: no cover - a runtime dependency
        return None
    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        return None
    if revision == "" and "@" in text:
        return None
    return repo_id, (revision or None)


# ------------------------------------------------------------- cache layout
def _snapshot(repo: Path, revision: str | None) -> Path:
    """The snapshot folder of cache repo ``repo`` for ``revision`` (a ref name or commit; default main)."""
    snapshots = repo / "snapshots"
    wanted = revision or "main"
    if not _REVISION.match(wanted) or ".." in wanted.split("/"):
        raise SourceError(f"revision {wanted!r} is not a branch, tag or commit name")
    if _COMMIT.match(wanted) and (snapshots / wanted).is_dir():
        return confined(snapshots / wanted, repo, what="cache repo")
    ref = repo / "refs" / wanted
    if ref.is_file() or ref.is_symlink():
        confined(ref, repo, what="cache repo")
        try:
            commit = ref.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise SourceError(f"cannot read {ref}: {exc}; it should hold a commit hash") from None
        if not _REF.match(commit):
            raise SourceError(f"{ref} holds {quoted(commit)}; expected the name of a snapshot in {snapshots} "
                              "(a commit hash). The cache entry is damaged: download the model again")
        snap = snapshots / commit
        if not snap.is_dir():
            raise FileNotFoundError(f"{ref} names snapshot {commit}, which is not in {snapshots}")
        return confined(snap, repo, what="cache repo")
    revs = sorted(p.name for p in snapshots.iterdir() if p.is_dir()) if snapshots.is_dir() else []
    if revision is None and len(revs) == 1:
        return confined(snapshots / revs[0], repo, what="cache repo")
    if revision is not None:
        raise FileNotFoundError(f"revision {revision!r} is not in the cache repo {repo} (snapshots: "
                                f"{', '.join(revs) or 'none'}; refs: {', '.join(_refs(repo)) or 'none'})")
    raise SourceError(
        f"{repo} is a Hugging Face cache folder without refs/main and with {len(revs)} snapshots "
        f"({', '.join(revs) or 'none'}); pass one snapshot folder, {snapshots}/REV")


def _refs(repo: Path) -> list[str]:
    refs = repo / "refs"
    return sorted(str(p.relative_to(refs)) for p in refs.rglob("*") if p.is_file()) if refs.is_dir() else []


def _repo_id(repo: Path) -> str | None:
    name = repo.name.removeprefix("models--")
    return name.replace("--", "/") if name != repo.name else None


def _provenance(path: Path) -> dict:
    """repo_id and revision of a path inside a cache snapshot (a file or a subfolder of one), else nothing."""
    snap = snapshot_of(path)
    return dict(repo_id=snap[0], revision=snap[1]) if snap else {}


def _weights_in(folder: Path, root: Path, root_what: str) -> Path | None:
    """The weights file of a model folder (WEIGHT_FILES first, else its single weights file), confined."""
    for name in WEIGHT_FILES:
        p = folder / name
        if p.is_file() or p.is_symlink():
            problem = link_problem(p)
            if problem:
                raise FileNotFoundError(f"{folder}: {problem}")
            return confined(p, root, what=root_what)
    readable = sorted(p for p in folder.iterdir()
                      if p.name.endswith(WEIGHT_SUFFIXES) and p.is_file() and p.name != "config.json")
    if len(readable) == 1:
        return confined(readable[0], root, what=root_what)
    return None


def _config_in(folder: Path, root: Path, root_what: str) -> Path | None:
    p = folder / "config.json"
    if not (p.is_file() or p.is_symlink()):
        return None
    problem = link_problem(p)
    if problem:
        raise FileNotFoundError(f"{folder}: {problem}")
    return confined(p, root, what=root_what)


def _folder_source(source: str, folder: Path, what: str, root: Path, root_what: str, **hub) -> ModelSource:
    return ModelSource(source, what, root, _config_in(folder, root, root_what), _weights_in(folder, root, root_what),
                       **hub)


def _cache_folder(source: str, folder: Path) -> ModelSource:
    """A ``models--ORG--NAME`` folder or one of its snapshots."""
    if folder.name.startswith("models--"):
        snap = _snapshot(folder, None)
        return _folder_source(source, snap, "Hugging Face cache repo", folder, "cache repo",
                              repo_id=_repo_id(folder), revision=snap.name, requested_revision="main")
    repo = cache_repo_of(folder)
    return _folder_source(source, folder, "Hugging Face cache snapshot", repo, "cache repo",
                          repo_id=_repo_id(repo), revision=folder.name)


def _hub_source(source: str, repo_id: str, revision: str | None) -> ModelSource:
    from huggingface_hub import constants
    from huggingface_hub.file_download import repo_folder_name

    cache = Path(constants.HF_HUB_CACHE)
    repo = cache / repo_folder_name(repo_id=repo_id, repo_type="model")
    offline = not downloads_allowed()
    snap = None
    if (repo / "snapshots").is_dir():
        try:
            snap = _snapshot(repo, revision)
        except FileNotFoundError:
            if offline:
                raise
        except SourceError:
            if revision is not None or offline:
                raise
    config = weights = None
    if snap is not None:
        config, weights = _config_in(snap, repo, "cache repo"), _weights_in(snap, repo, "cache repo")
    if config is None and not offline:
        config, snap = _download_config(repo_id, revision, repo) or (None, snap)
    if snap is None:
        how = (f"and poslab never downloads unless you set HF_HUB_OFFLINE=0. Download it first (for example "
               f"`hf download {repo_id} config.json model.safetensors`), or set HF_HUB_OFFLINE=0 to let "
               "poslab fetch config.json and the position tensor alone"
               if offline else "and it could not be found on the Hub")
        raise FileNotFoundError(f"the Hub model {repo_id}"
                                f"{'@' + revision if revision else ''} is not in the local cache {cache} "
                                f"(HF_HUB_CACHE / HF_HOME), {how}")
    return ModelSource(source, "Hub id", repo, config, weights, repo_id, snap.name, revision or "main")


def _download_config(repo_id: str, revision: str | None, repo: Path):
    """Download config.json into the cache; (config path, snapshot) or None when the repo has no config.json."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, HfHubHTTPError, LocalEntryNotFoundError

    try:
        path = Path(hf_hub_download(repo_id, "config.json", revision=revision))
    except EntryNotFoundError:
        return None
    except LocalEntryNotFoundError as exc:
        raise FileNotFoundError(f"{repo_id}: not in the local cache and the Hub could not be reached ({exc}); "
                                "check the network, or download the model first") from None
    except (HfHubHTTPError, OSError) as exc:
        raise FileNotFoundError(f"{repo_id}: {str(exc).splitlines()[0]}") from None
    return confined(path, repo, what="cache repo"), path.parent


# ------------------------------------------------------------------ public
def resolve_model(source) -> ModelSource:
    """Resolve what a user named to its ``config.json`` and weights file.

    Parameters
    ----------
    source : str or os.PathLike
        A ``config.json``, a weights file, a model folder, a Hugging Face
        cache snapshot ``models--ORG--NAME/snapshots/REV`` or repo folder
        ``models--ORG--NAME``, or a Hub id ``ORG/NAME[@REVISION]`` (only when
        no such path exists). ``~`` is expanded.

    Returns
    -------
    ModelSource
        A frozen record; paths inside ``root``. ``weights_path`` is None when
        there are no weights on disk (a config-only folder, or a Hub id whose
        weights are not cached).

    Raises
    ------
    FileNotFoundError
        Nothing at ``source`` and not a Hub id (at once, without any lookup,
        when ``source`` :func:`looks_like_path`), a Hub id not cached (and,
        with ``HF_HUB_OFFLINE=0``, not reachable), a broken or looping symlink.
    SourceError
        A path escaping its folder or cache repo, a bad ``refs`` entry, an
        ambiguous cache folder.
    """
    text = os.fspath(source)
    if not text.strip():  # Path("") is the working folder: never read it for an empty source
        raise ValueError("the source is empty: give a bundled name, a file, a folder or a Hub id ORG/NAME")
    path = Path(text).expanduser()
    if path.is_symlink() and link_problem(path) and not path.exists():
        raise FileNotFoundError(f"{text}: {link_problem(path)}")
    if path.is_file():
        repo = cache_repo_of(path.parent)
        root, root_what = (repo, "cache repo") if repo else (path.parent, "model folder")
        hub = _provenance(path)
        if path.name == "config.json" or (path.suffix == ".json" and not path.name.endswith(".index.json")):
            return ModelSource(text, "config file", root, path, _weights_in(path.parent, root, root_what), **hub)
        if not path.name.endswith(WEIGHT_SUFFIXES):
            raise SourceError(f"cannot read {path.name}: supported formats are {', '.join(WEIGHT_SUFFIXES)} "
                              "and a model's config.json (PyTorch files only through "
                              "torch.load(weights_only=True); nothing else is unpickled)")
        return ModelSource(text, "weights file", root, _config_in(path.parent, root, root_what), path, **hub)
    if path.is_dir():
        if path.name.startswith("models--") and ((path / "snapshots").is_dir() or (path / "refs").is_dir()):
            return _cache_folder(text, path)
        if cache_repo_of(path) is not None and path.parent.name == "snapshots":
            return _cache_folder(text, path)
        repo = cache_repo_of(path)
        if repo is not None:  # a model in a subfolder of a snapshot: its files link into the repo's blobs/
            return _folder_source(text, path, "model folder in a Hugging Face cache snapshot", repo, "cache repo",
                                  **_provenance(path))
        return _folder_source(text, path, "model folder", path, "model folder")
    if looks_like_path(text):
        raise missing_path(text, path)
    hub = parse_hub_id(text)
    if hub is not None:
        try:
            return _hub_source(text, *hub)
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"{text!r} is not an existing file or folder; as a Hub id: {exc}") from None
    raise FileNotFoundError(
        f"{text!r} is neither an existing file or folder nor a Hub id (ORG/NAME, optionally @REVISION); give the "
        "path of an existing file or folder, or a Hub id in the local Hugging Face cache")
