"""Read one tensor of a model on the Hugging Face Hub without downloading the checkpoint.

Used only when a Hub id's weights are not in the local cache and the user
set ``HF_HUB_OFFLINE=0`` explicitly (poslab never reaches the network
otherwise). What is transferred:

- the safetensors headers, through huggingface_hub's
  ``HfApi.get_safetensors_metadata`` (the first 100 kB of each weights file,
  more only if a header is longer; for a sharded model also the small
  ``model.safetensors.index.json``);
- the 8-byte header length of the file holding the chosen tensor, and that
  tensor's bytes, by HTTP range requests (rows × dim × bytes per value: GPT-2
  small's ``wpe`` is 1024 × 768 × 4 B = 3 MiB).

Nothing is written to the cache by these reads. Models whose weights are
only PyTorch pickles (``pytorch_model.bin``) cannot be read by range and are
refused with what to download.

This path needs the network; the test suite (offline) cannot exercise it.
"""

from __future__ import annotations

import dataclasses
import math
import struct

import numpy as np

from .files import TensorInfo, _ST_DTYPES, decode_tensor_bytes

__all__ = ["HubWeights", "open_hub_weights"]

_TIMEOUT = 30.0


@dataclasses.dataclass(frozen=True)
class HubWeights:
    """The safetensors headers of a Hub model at one commit; reads single tensors by range.

    Attributes
    ----------
    repo_id : str
    revision : str
        The commit the headers were read at.
    infos : tuple of TensorInfo
        Every tensor (``file`` = the shard holding it).
    """

    repo_id: str
    revision: str
    infos: tuple[TensorInfo, ...]
    offsets: tuple[tuple[int, int], ...]  # data_offsets of each tensor in its file

    def tensors(self) -> list[TensorInfo]:
        """Every tensor of the model, from the headers."""
        return list(self.infos)

    def read(self, key: str) -> np.ndarray:
        """The tensor ``key``, fetched by two range requests (header length, then its bytes)."""
        i = [t.key for t in self.infos].index(key)
        info, (begin, end) = self.infos[i], self.offsets[i]
        header = _range(self.repo_id, self.revision, info.file, 0, 8)
        (n,) = struct.unpack("<Q", header)
        raw = _range(self.repo_id, self.revision, info.file, 8 + n + begin, end - begin)
        return decode_tensor_bytes(raw, info, f"{self.repo_id}/{info.file}")


def _range(repo_id: str, revision: str, filename: str, start: int, length: int) -> bytes:
    from huggingface_hub import get_session, hf_hub_url
    from huggingface_hub.utils import build_hf_headers, hf_raise_for_status

    url = hf_hub_url(repo_id, filename, revision=revision)
    headers = {**build_hf_headers(), "range": f"bytes={start}-{start + length - 1}"}
    response = get_session().get(url, headers=headers, timeout=_TIMEOUT, follow_redirects=True)
    hf_raise_for_status(response)
    data = response.content
    if len(data) != length:
        raise ValueError(f"{repo_id}/{filename}: asked the Hub for {length} bytes at {start}, got {len(data)}")
    return data


def open_hub_weights(repo_id: str, revision: str | None) -> HubWeights:
    """Read the safetensors headers of ``repo_id`` at ``revision`` (a commit, branch or tag).

    Raises
    ------
    FileNotFoundError
        The repo has no safetensors weights (the message says what to download), or cannot be reached.
    """
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, NotASafetensorsRepoError, SafetensorsParsingError

    api = HfApi()
    try:
        meta = api.get_safetensors_metadata(repo_id, revision=revision, timeout=_TIMEOUT)
        commit = revision if revision and len(revision) == 40 else api.model_info(repo_id, revision=revision).sha
    except NotASafetensorsRepoError:
        raise FileNotFoundError(
            f"{repo_id}: no model.safetensors or model.safetensors.index.json on the Hub; poslab reads single "
            f"tensors only from safetensors. Download the weights (e.g. `hf download {repo_id}`) and pass the "
            "folder") from None
    except (HfHubHTTPError, SafetensorsParsingError, OSError) as exc:
        raise FileNotFoundError(f"{repo_id}: cannot read its safetensors headers from the Hub "
                                f"({str(exc).splitlines()[0]})") from None
    infos, offsets = [], []
    for filename, fmeta in sorted(meta.files_metadata.items()):
        for key, t in fmeta.tensors.items():
            infos.append(TensorInfo(key, tuple(t.shape), _ST_DTYPES.get(t.dtype, t.dtype), filename))
            offsets.append(tuple(t.data_offsets))
    return HubWeights(repo_id, commit or revision or "main", tuple(infos), tuple(offsets))


def tensor_nbytes(info: TensorInfo) -> int:
    """Bytes of ``info``'s data (what a range read of it transfers)."""
    size = {"float64": 8, "int64": 8, "uint64": 8, "float32": 4, "int32": 4, "uint32": 4,
            "float16": 2, "bfloat16": 2, "int16": 2, "uint16": 2}.get(info.dtype, 1)
    return size * math.prod(info.shape)
