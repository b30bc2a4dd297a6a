"""Reading real model files into position tables."""

from .files import TensorInfo, list_tensors, load_tensor

__all__ = ["TensorInfo", "list_tensors", "load_tensor"]
