"""Read one tensor from a ``.npy``, ``.npz`` or ``.safetensors`` file without unpickling.

``.safetensors`` files are opened with the safetensors library and only the
requested tensor is read, so a large checkpoint is never loaded whole.
``.npy`` headers are read through a memory map.
"""

from __future__ import annotations

import dataclasses
import zipfile
from pathlib import Path

import numpy as np

__all__ = ["TensorInfo", "list_tensors", "load_tensor", "SUPPORTED_SUFFIXES"]

SUPPORTED_SUFFIXES = (".npy", ".npz", ".safetensors")


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """Name, shape and dtype of a tensor in a file (no data read)."""

    key: str | None
    shape: tuple[int, ...]
    dtype: str

    def __str__(self):
        return f"{self.key if self.key is not None else '<array>'} {self.shape} {self.dtype}"


def _check_path(path) -> Path:
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    if path.suffix not in SUPPORTED_SUFFIXES:
        raise ValueError(
            f"cannot read {path.name}: supported formats are {', '.join(SUPPORTED_SUFFIXES)} "
            "(PyTorch .bin/.pt files are not unpickled; convert them to .safetensors)"
        )
    return path


def _unreadable(path, exc) -> ValueError:
    return ValueError(
        f"cannot read {path}: {str(exc).rstrip('.')}. Expected a numeric array written by numpy.save / "
        "numpy.savez or safetensors; object (pickled) arrays are refused"
    )


def list_tensors(path) -> list[TensorInfo]:
    """Every tensor in ``path`` with its shape and dtype.

    ``.npy`` and ``.safetensors`` data are not read (header only); ``.npz``
    members are read, as numpy offers no header-only access to them.

    Raises
    ------
    FileNotFoundError, ValueError
        Missing file or unsupported format.
    """
    path = _check_path(path)
    try:
        if path.suffix == ".npy":
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
            return [TensorInfo(None, tuple(arr.shape), str(arr.dtype))]
        if path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as npz:
                return [TensorInfo(k, tuple(npz[k].shape), str(npz[k].dtype)) for k in npz.files]
        from safetensors import safe_open

        with safe_open(str(path), framework="np") as f:
            return [TensorInfo(k, tuple(f.get_slice(k).get_shape()), f.get_slice(k).get_dtype()) for k in f.keys()]
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        raise _unreadable(path, exc) from None
    except Exception as exc:  # safetensors raises its own SafetensorError for a corrupt header
        if type(exc).__name__ == "SafetensorError":
            raise _unreadable(path, exc) from None
        raise


def load_tensor(path, key: str | None = None) -> np.ndarray:
    """Read one tensor from ``path``.

    Parameters
    ----------
    path : str or Path
        A ``.npy``, ``.npz`` or ``.safetensors`` file.
    key : str, optional
        Tensor name (for ``.npz`` and ``.safetensors``). May be omitted when
        the file holds exactly one tensor.

    Returns
    -------
    ndarray, the tensor as stored (not yet upcast).

    Raises
    ------
    KeyError
        ``key`` is missing (or omitted with several tensors): the message
        lists the tensors with shape and dtype.
    """
    path = _check_path(path)
    infos = list_tensors(path)
    if path.suffix == ".npy":
        if key is not None:
            raise KeyError(f"{path.name} is a .npy file holding one array; remove key={key!r}")
        try:
            return np.load(path, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise _unreadable(path, exc) from None
    names = [i.key for i in infos]
    if key is None:
        if len(infos) != 1:
            raise KeyError(
                f"{path.name} holds {len(infos)} tensors; choose one with key = ...: "
                + "; ".join(str(i) for i in infos)
            )
        key = names[0]
    if key not in names:
        raise KeyError(f"no tensor {key!r} in {path.name}; it holds: " + "; ".join(str(i) for i in infos))
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as npz:
            return npz[key]
    from safetensors import safe_open

    with safe_open(str(path), framework="np") as f:
        try:
            return f.get_tensor(key)
        except TypeError as exc:  # numpy has no bfloat16
            dtype = next(i.dtype for i in infos if i.key == key)
            raise ValueError(
                f"cannot read {key!r} from {path.name}: its dtype {dtype} has no numpy equivalent ({exc}); "
                "save the tensor as float32 (e.g. tensor.float() before safetensors.torch.save_file)"
            ) from None
