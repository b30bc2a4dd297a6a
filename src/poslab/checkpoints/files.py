"""Read one tensor from a checkpoint file without loading the rest, and without unpickling.

Formats
-------
``.safetensors``
    Opened with the safetensors library (``safe_open``): only the header and
    the requested tensor are read, so a large checkpoint is never loaded
    whole. bfloat16 tensors, which numpy cannot hold and safetensors' numpy
    backend therefore cannot return, are read by this module from the file's
    header (8-byte little-endian header length, then a JSON header giving
    each tensor's ``dtype``, ``shape`` and ``data_offsets``) and converted
    exactly to float32 (bits << 16).
``*.index.json``
    A sharded checkpoint (``model.safetensors.index.json``,
    ``pytorch_model.bin.index.json``): its ``weight_map`` names the shard
    file holding each tensor; only that shard is opened.
``.npy`` / ``.npz``
    Read with ``allow_pickle=False``.
``.bin`` / ``.pt`` / ``.pth``
    PyTorch files, read only through ``torch.load(weights_only=True,
    map_location="cpu", mmap=True)`` and only when torch is installed
    (``pip install 'poslab[train]'``). Nothing else is ever unpickled.

Dtypes are reported with numpy / PyTorch names (``float32``, ``bfloat16``,
``float16``, ``int64``...).
"""

from __future__ import annotations

import dataclasses
import json
import math
import pickle
import re
import struct
import warnings
import zipfile
from pathlib import Path

import numpy as np

from .sources import SourceError, cache_repo_of, capped, confined, link_problem, plain_name, read_json

__all__ = ["TensorInfo", "list_tensors", "load_tensor", "tensor_list", "SUPPORTED_SUFFIXES", "FLOAT_DTYPES",
           "TORCH_EXTRA"]

TORCH_SUFFIXES = (".bin", ".pt", ".pth")
SUPPORTED_SUFFIXES = (".npy", ".npz", ".safetensors", *TORCH_SUFFIXES, ".index.json")
#: dtypes a position table may have (after reading: bfloat16 becomes float32 exactly).
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
#: how to install the optional dependency that reads PyTorch files.
TORCH_EXTRA = "pip install 'poslab[train]'"

# safetensors dtype codes -> numpy/PyTorch names
_ST_DTYPES = {
    "F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
    "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8",
    "U64": "uint64", "U32": "uint32", "U16": "uint16", "U8": "uint8", "BOOL": "bool",
}


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """Name, shape and dtype of a tensor in a file (no data read).

    Attributes
    ----------
    key : str or None
        Tensor name (None for a ``.npy`` file or a bare saved tensor).
    shape : tuple of int
    dtype : str
        numpy / PyTorch name as stored (``bfloat16``, ``float16``, ``float32``, ``int64``...).
    file : str or None
        The shard holding the tensor, for sharded checkpoints.
    """

    key: str | None
    shape: tuple[int, ...]
    dtype: str
    file: str | None = None

    def __str__(self):
        return f"{self.key if self.key is not None else '<array>'} {self.shape} {self.dtype}"


def tensor_list(infos, limit: int = 20) -> str:
    """``N tensor(s): name (shape) dtype; ...`` for a message, the first ``limit`` named and the rest counted."""
    infos = list(infos)
    return f"{len(infos)} tensor{'s' if len(infos) != 1 else ''}: {capped(infos, limit)}"


def _suffix(path: Path) -> str:
    return ".index.json" if path.name.endswith(".index.json") else path.suffix


def _check_path(path) -> Path:
    path = Path(path).expanduser()  # never resolved: a cache snapshot's symlink keeps its suffix
    if not path.is_file():
        raise FileNotFoundError(link_problem(path) if path.is_symlink() else f"no such file: {path}")
    if _suffix(path) not in SUPPORTED_SUFFIXES:
        raise ValueError(
            f"cannot read {path.name}: supported formats are {', '.join(SUPPORTED_SUFFIXES)} "
            "(PyTorch files only through torch.load(weights_only=True); nothing else is unpickled)"
        )
    if path.stat().st_size == 0:
        raise ValueError(f"cannot read {path}: the file is empty (0 bytes; an interrupted download or copy?); "
                         "save or copy it again")
    return path


def _safe_text(exc) -> str:
    """An exception's message without advice to load unsafely (torch suggests weights_only=False)."""
    lines = [line for line in str(exc).splitlines() if "weights_only" not in line and "trust" not in line.lower()]
    text = " ".join(line.strip() for line in lines if line.strip()).rstrip(".")
    return text or type(exc).__name__


def _unreadable(path, exc) -> ValueError:
    if type(exc).__name__ == "SafetensorError" or _suffix(Path(path)) == ".safetensors":
        return ValueError(
            f"cannot read {path}: {_safe_text(exc)}. The safetensors header or data is damaged "
            "(a truncated download or copy?); copy or save the file again"
        )
    return ValueError(
        f"cannot read {path}: {_safe_text(exc)}. Expected a numeric array written by numpy.save / "
        "numpy.savez, safetensors or torch.save; object (pickled) arrays are refused"
    )


# ---------------------------------------------------------------- safetensors
def _safetensors_header(path: Path) -> tuple[int, dict]:
    """(data start in bytes, header dict) of a safetensors file, read per the format's spec."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError("file shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", head)
        if n > path.stat().st_size - 8:
            raise ValueError(f"header length {n} exceeds the file size")
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return 8 + n, header


def decode_tensor_bytes(raw: bytes, info: TensorInfo, where: str) -> np.ndarray:
    """The little-endian bytes of a safetensors tensor as an array of ``info.shape``.

    bfloat16 becomes float32 exactly (its 16 bits are the top half of a
    float32); every other dtype keeps its numpy equivalent.

    Raises
    ------
    ValueError
        The byte count does not match the shape, or the dtype has no numpy equivalent.
    """
    count = math.prod(info.shape)
    if info.dtype == "bfloat16":
        np_dtype = np.dtype("<u2")
    elif info.dtype in _ST_DTYPES.values():
        np_dtype = np.dtype(info.dtype).newbyteorder("<")
    else:
        raise ValueError(f"cannot read {info.key!r} from {where}: its dtype {info.dtype} has no numpy equivalent; "
                         "save the tensor as float32")
    if len(raw) != count * np_dtype.itemsize:
        raise ValueError(f"tensor {info.key!r} in {where}: {len(raw)} bytes do not hold {count} {info.dtype} values")
    arr = np.frombuffer(raw, dtype=np_dtype).reshape(info.shape)
    if info.dtype == "bfloat16":
        return (arr.astype(np.uint32) << 16).view(np.float32)
    return arr.astype(np_dtype.newbyteorder("="))


def _read_bf16(path: Path, key: str) -> np.ndarray:
    """A bfloat16 tensor as float32 (exact): the 16 bits are the top half of a float32."""
    start, header = _safetensors_header(path)
    entry = header[key]
    begin, end = entry["data_offsets"]
    shape = tuple(entry["shape"])
    count = math.prod(shape)
    if end - begin != 2 * count or start + end > path.stat().st_size:
        raise ValueError(f"tensor {key!r}: data_offsets {begin}..{end} do not hold {count} bfloat16 values")
    with open(path, "rb") as f:
        f.seek(start + begin)
        raw = f.read(end - begin)
    return decode_tensor_bytes(raw, TensorInfo(key, shape, "bfloat16"), path.name)


def _list_safetensors(path: Path) -> list[TensorInfo]:
    from safetensors import safe_open

    with safe_open(str(path), framework="np") as f:
        out = []
        for k in f.keys():
            sl = f.get_slice(k)
            raw = sl.get_dtype()
            out.append(TensorInfo(k, tuple(sl.get_shape()), _ST_DTYPES.get(raw, raw)))
        return out


def _load_safetensors(path: Path, info: TensorInfo) -> np.ndarray:
    if info.dtype == "bfloat16":
        return _read_bf16(path, info.key)
    if info.dtype not in _ST_DTYPES.values():
        raise ValueError(
            f"cannot read {info.key!r} from {path.name}: its dtype {info.dtype} has no numpy equivalent; "
            "save the tensor as float32 (e.g. tensor.float() before safetensors.torch.save_file)"
        )
    from safetensors import safe_open

    with safe_open(str(path), framework="np") as f:
        return f.get_tensor(info.key)


# -------------------------------------------------------------------- PyTorch
def _import_torch(path: Path):
    try:
        import torch
    except ImportError:
        raise ImportError(
            f"{path.name} is a PyTorch file; reading it needs torch, which is not installed: {TORCH_EXTRA} "
            "(or convert the file to .safetensors)"
        ) from None
    return torch


def _torch_state(path: Path) -> dict:
    """Name -> tensor of a PyTorch file, loaded with weights_only=True (nested dicts flattened with '.')."""
    torch = _import_torch(path)
    try:
        with warnings.catch_warnings():  # torch's note on a legacy pickle protocol: the error below says more
            warnings.filterwarnings("ignore", message="Detected pickle protocol", category=UserWarning)
            try:
                obj = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError as exc:  # legacy (non-zip) files cannot be memory-mapped
                if "mmap" not in str(exc):
                    raise
                obj = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:  # torch's own text advises unsafe loading: never shown
        found = re.search(r"GLOBAL ([\w.]+)", str(exc))
        what = f"a pickled {found.group(1)} object" if found else "pickled objects other than tensors"
        raise ValueError(
            f"cannot read {path}: it holds {what}, which torch.load(weights_only=True) refuses; poslab never "
            "unpickles arbitrary objects. Save a plain state dict of tensors (torch.save(model.state_dict(), "
            "...)), or convert the file to .safetensors"
        ) from None
    except (RuntimeError, OSError, EOFError, ValueError, zipfile.BadZipFile) as exc:
        raise _unreadable(path, exc) from None
    if isinstance(obj, torch.Tensor):
        return {None: obj}
    out: dict = {}

    def walk(d, prefix):
        for k, v in d.items():
            name = f"{prefix}{k}"
            if isinstance(v, torch.Tensor):
                out[name] = v
            elif isinstance(v, dict):
                walk(v, name + ".")

    if not isinstance(obj, dict):
        raise ValueError(f"cannot read {path}: expected a state dict or a tensor, got {type(obj).__name__}")
    walk(obj, "")
    return out


def _torch_dtype(t) -> str:
    return str(t.dtype).removeprefix("torch.")


def _torch_numpy(t) -> np.ndarray:
    import torch

    t = t.detach()
    if t.dtype == torch.bfloat16:
        t = t.float()  # exact
    return np.array(t.numpy())


# -------------------------------------------------------------------- sharded
def _weight_map(path: Path) -> dict[str, str]:
    index = read_json(path, 'a sharded-checkpoint index (JSON with a "weight_map" object)')
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise ValueError(
            f"cannot read {path}: not a sharded-checkpoint index; expected JSON with a "
            '"weight_map" object mapping tensor names to shard file names'
        )
    return weight_map


def _shard(path: Path, filename: str) -> Path:
    """The shard ``filename`` named by index ``path``: a weights file inside the index's folder (or cache repo)."""
    plain_name(filename, where=str(path), what="shard")
    if filename.endswith(".index.json") or _suffix(Path(filename)) not in (".safetensors", *TORCH_SUFFIXES):
        raise SourceError(f"{path} names {filename!r} as a shard; shards are .safetensors or PyTorch weights "
                         "files, not an index or another format")
    shard = path.parent / filename
    repo = cache_repo_of(path.parent)
    confined(shard, repo or path.parent, what="cache repo" if repo else "model folder")
    if not shard.is_file():
        problem = link_problem(shard) if shard.is_symlink() else "missing"
        raise FileNotFoundError(f"{path.name} names the shard {filename}, which is {problem} in {path.parent}"
                                if problem == "missing" else f"{path.name} names the shard {filename}: {problem}")
    return shard


# ------------------------------------------------------------------------ npz
def _npz_members(path: Path) -> list[TensorInfo]:
    """Name, shape and dtype of every array of a ``.npz``, from each member's .npy header only.

    Only the first bytes of each member are decompressed (the header), so a
    member that inflates to gigabytes costs nothing to list.
    """
    out = []
    with zipfile.ZipFile(path) as zf:
        for member in zf.infolist():
            if not member.filename.endswith(".npy"):
                continue
            with zf.open(member) as f:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(f)
                elif version == (2, 0):
                    shape, _, dtype = np.lib.format.read_array_header_2_0(f)
                else:
                    raise ValueError(f"member {member.filename}: unsupported .npy format version {version}")
            if dtype.hasobject:
                raise ValueError(_objects(path, f"member {member.filename!r}"))
            out.append(TensorInfo(member.filename.removesuffix(".npy"), tuple(shape), str(dtype)))
    return out


def _objects(path: Path, what: str = "it") -> str:
    """The refusal of an array of Python objects (dtype object): numpy pickles them, and poslab never unpickles."""
    return (f"cannot read {path}: {what} holds Python objects (dtype object), not numbers, and poslab never "
            "unpickles; save the table as floats, e.g. table.astype('float32')")


def _npy_holds_objects(path: Path) -> bool:
    """Whether a ``.npy`` file's header declares an object dtype (header only; False when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
            return version in read and read[version](f)[2].hasobject
    except (OSError, ValueError, EOFError):
        return False  # np.load says what is wrong


# --------------------------------------------------------------------- public
def list_tensors(path) -> list[TensorInfo]:
    """Every tensor in ``path`` with its shape and dtype.

    ``.npy``, ``.safetensors`` and sharded safetensors data are not read
    (headers only); of a ``.npz`` only each member's .npy header is
    decompressed; PyTorch files are memory-mapped when torch can.

    Raises
    ------
    FileNotFoundError, ValueError
        Missing file (or shard) or unsupported / unreadable format.
    ImportError
        A PyTorch file without torch installed (the message names the extra).
    """
    path = _check_path(path)
    suffix = _suffix(path)
    try:
        if suffix == ".npy":
            if _npy_holds_objects(path):
                raise ValueError(_objects(path))
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
            return [TensorInfo(None, tuple(arr.shape), str(arr.dtype))]
        if suffix == ".npz":
            return _npz_members(path)
        if suffix in TORCH_SUFFIXES:
            return [TensorInfo(k, tuple(t.shape), _torch_dtype(t)) for k, t in _torch_state(path).items()]
        if suffix == ".index.json":
            weight_map = _weight_map(path)
            out = []
            for filename in dict.fromkeys(weight_map.values()):
                names = {k for k, v in weight_map.items() if v == filename}
                out += [dataclasses.replace(i, file=filename) for i in list_tensors(_shard(path, filename))
                        if i.key in names]
            return out
        return _list_safetensors(path)
    except (ValueError, OSError, EOFError, RecursionError, zipfile.BadZipFile) as exc:
        if isinstance(exc, (FileNotFoundError, SourceError)) or str(exc).startswith("cannot read"):
            raise
        raise _unreadable(path, exc) from None
    except Exception as exc:  # safetensors raises its own SafetensorError for a corrupt header
        if type(exc).__name__ == "SafetensorError":
            raise _unreadable(path, exc) from None
        raise


def load_tensor(path, key: str | None = None) -> np.ndarray:
    """Read one tensor from ``path``, and only that one.

    Parameters
    ----------
    path : str or Path
        A ``.npy``, ``.npz``, ``.safetensors``, ``*.index.json`` (sharded) or
        PyTorch ``.bin`` / ``.pt`` / ``.pth`` file.
    key : str, optional
        Tensor name. May be omitted when the file holds exactly one tensor.

    Returns
    -------
    ndarray
        The tensor with its stored shape and dtype, except bfloat16, which
        numpy lacks: returned as float32, exactly (its original dtype is in
        :func:`list_tensors`).

    Raises
    ------
    KeyError
        ``key`` is missing (or omitted with several tensors): the message
        lists the tensors with shape and dtype.
    FileNotFoundError, ValueError, ImportError
        See :func:`list_tensors`.
    """
    path = _check_path(path)
    suffix = _suffix(path)
    if suffix == ".npy":
        if key is not None:
            raise KeyError(f"{path.name} is a .npy file holding one array; remove key={key!r}")
        if _npy_holds_objects(path):
            raise ValueError(_objects(path))
        try:
            return np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise _unreadable(path, exc) from None
    if suffix in TORCH_SUFFIXES:
        state = _torch_state(path)
        infos = [TensorInfo(k, tuple(t.shape), _torch_dtype(t)) for k, t in state.items()]
    else:
        infos = list_tensors(path)
    names = [i.key for i in infos]
    if key is None:
        if len(infos) != 1:
            raise KeyError(f"{path.name} holds {tensor_list(infos)}; choose one with key = NAME")
        key = names[0]
    if key not in names:
        raise KeyError(f"no tensor {key!r} in {path.name}; it holds {tensor_list(infos)}")
    info = infos[names.index(key)]
    try:
        if suffix in TORCH_SUFFIXES:
            return _torch_numpy(state[key])
        if suffix == ".npz":
            with np.load(path, allow_pickle=False) as npz:
                return npz[key]
        if suffix == ".index.json":
            return load_tensor(_shard(path, info.file), key)
        return _load_safetensors(path, info)
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise _unreadable(path, exc) from None
    except Exception as exc:
        if type(exc).__name__ == "SafetensorError":
            raise _unreadable(path, exc) from None
        raise
