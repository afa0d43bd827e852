"""Training runs: config, submission, the `train` job, backends, progress, checkpoints.

Client side (no heavy imports): `TrainConfig`, `start_run`, `resume_run`. Job side
(imports torch inside functions): `trainkit_core.training.job:train`. The layout a run
leaves on the models volume is described in `trainkit_core.models.trained.layout`.
"""

from __future__ import annotations

from trainkit_core.training.config import TrainConfig
from trainkit_core.training.submit import resume_run, start_run

__all__ = ["TrainConfig", "resume_run", "start_run"]
