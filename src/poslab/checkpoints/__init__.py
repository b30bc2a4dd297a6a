"""Reading real model files into position tables: files, model folders, cache snapshots, training runs."""

from .files import TensorInfo, list_tensors, load_tensor
from .inspect import inspect_source
from .models import Checkpoint, open_checkpoint
from .positions import FAMILIES, Candidate, Selection, load_position_table, select_position_table
from .runs import TrainingRun, is_training_run, open_training_run
from .sources import ModelSource, SourceError, read_json, resolve_model

__all__ = [
    "FAMILIES",
    "Candidate",
    "Checkpoint",
    "ModelSource",
    "SourceError",
    "Selection",
    "TensorInfo",
    "TrainingRun",
    "inspect_source",
    "is_training_run",
    "list_tensors",
    "load_position_table",
    "load_tensor",
    "open_checkpoint",
    "open_training_run",
    "read_json",
    "resolve_model",
    "select_position_table",
]
