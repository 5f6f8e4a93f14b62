"""The classical sequence baselines: fitted in one pass over the training split instead of trained by gradient
descent, with the time-series features they are made of and their own fit path beside the trainer.

Every baseline takes series ``x (N, T, C)`` with a mask ``(N, T)`` of real steps, resamples each series' real steps
to one length ``L`` and predicts one output per series: class logits ``(N, K)`` or regression values ``(N, k)``.

The registered baselines (``neurodyn info models``; presets ``majority/sequence``, ``knn/sequence``,
``minirocket/sequence``, ``multirocket/sequence``, ``hydra/sequence``):

* ``majority`` (:mod:`.majority`): the training-class frequencies as log-probabilities, or the training mean;
* ``knn`` (:mod:`.knn`): the one nearest training series, squared Euclidean distance or DTW;
* ``minirocket`` (:mod:`.minirocket`): MiniRocket features and a ridge classifier or regressor;
* ``multirocket`` (:mod:`.multirocket`): MultiRocket features (MiniRocket's kernels on the series and its first
  difference, four pooling operators) and a ridge classifier or regressor;
* ``hydra`` (:mod:`.hydra`): Hydra features (groups of random kernels competing at each time step, on the series and
  its first difference) and a ridge classifier or regressor.

What they are made of:

* :mod:`.fitted`: :class:`FittedConfig` (the fields every baseline's config has: channels, ``per_step``,
  ``length``) and :class:`FittedSequenceModel` (resampling, the fitted state in buffers, input checks);
* :mod:`.dtw`: ``(N, L, C) x (M, L', C) -> (N, M)`` squared Euclidean and Sakoe-Chiba DTW distances
  (+ ``dtw_distance_ref``); :mod:`.ridge`: ridge regression with its penalty chosen by exact leave-one-out error
  (+ ``loo_errors_ref``); :mod:`.minirocket_transform`: MiniRocket's kernels, dilations, biases and PPV features
  (+ ``minirocket_transform_ref``); :mod:`.multirocket_transform`: MultiRocket's two representations and four
  pooling operators (+ ``multirocket_transform_ref``); :mod:`.hydra_transform`: Hydra's kernels, competing counts
  and their scaling (+ ``hydra_transform_ref``). Each reference is the plain loop its function is tested against
  (``tests/baselines/``); :mod:`.feature_ridge`: what MultiRocket and Hydra share (features, their scaling, ridge);
* :mod:`.fit`: :func:`fit_baseline`, the one-pass path (fit, training loss, validation; given a run folder the
  checkpoint in the trainer's format, ``metrics.jsonl``), which :func:`neurodyn.train.experiment.run_experiment`
  takes for a baseline, and :func:`fit_on`, its one pass.

**Why modules.** A baseline is an ``nn.Module`` whose fitted state lives in buffers: a checkpoint is the trainer's
format (registered name + config, ``state_dict``, normalizers, task), so ``neurodyn.load_run``, ``neurodyn
evaluate / predict``, ``compare`` and the estimators restore it as any run, and the same sequence task normalises
its inputs and scores it. It is never handed to the trainer: there is no optimizer step to take.

**Layer.** Above ``models/`` (it registers in ``models.registry`` and checks inputs with ``models.inputs``), below
``train/`` (which dispatches to :func:`fit_baseline`); it imports ``models``, ``ops`` and the base modules only, and
takes the sequence task as an argument. The registry finds these models by name (``models.registry.
MODEL_PACKAGES``), so ``neurodyn.models.build("knn", ...)`` works without importing this package first.

**Adding a baseline** (as MultiRocket and Hydra were):

1. its features, if new, in one module with their reference beside them (``multirocket_transform.py``:
   ``multirocket_fit`` / ``multirocket_transform`` / ``multirocket_transform_ref``, shapes and equations in the
   docstring) and a test in ``tests/baselines/`` comparing the two;
2. the baseline in one module (copy :mod:`.minirocket`, or :mod:`.multirocket` for features + ridge: a
   :class:`~.feature_ridge.FeatureRidgeModel` names its transform's buffers and implements ``fit_transform`` and
   ``transform``): a ``@dataclass`` config extending :class:`FittedConfig`
   (``MODEL`` = its name; ``__post_init__`` calls ``super().__post_init__()`` then checks its own fields), and a
   :class:`FittedSequenceModel` subclass decorated ``@register("name", Config)`` (``from ..models.registry import
   register``) that declares its buffers in ``__init__`` (any shape: a checkpoint's shapes win), implements
   ``fit_state(x (N, L, C), y, progress)`` (keep the state with ``set_state(name=tensor, ...)``) and
   ``predict(x (B, L, C)) -> (B, out_channels)``, sets ``min_length`` if its kernels need it, and
   ``predict_seconds(n)`` if a pass can take minutes;
3. a preset ``experiments/<name>/sequence.yaml`` (copy ``minirocket/sequence.yaml``), and a test of the model
   against an oracle (copy ``tests/baselines/test_fitted_models.py``).

Nothing else: the registry finds the module (every module of this package is imported at the first lookup by
name), and the experiment, the estimators and ``compare`` take any :class:`FittedSequenceModel` through
:func:`fit_baseline`.
"""

from .feature_ridge import FeatureRidgeModel, RidgeConfig
from .fit import BaselineFit, baseline_checkpoint, fit_baseline, fit_on
from .fitted import FittedConfig, FittedSequenceModel
from .hydra import HydraConfig, HydraModel
from .knn import KNNConfig, KNNModel
from .majority import MajorityModel
from .minirocket import MiniRocketConfig, MiniRocketModel
from .multirocket import MultiRocketConfig, MultiRocketModel

__all__ = [
    "BaselineFit",
    "FeatureRidgeModel",
    "FittedConfig",
    "FittedSequenceModel",
    "HydraConfig",
    "HydraModel",
    "KNNConfig",
    "KNNModel",
    "MajorityModel",
    "MiniRocketConfig",
    "MiniRocketModel",
    "MultiRocketConfig",
    "MultiRocketModel",
    "RidgeConfig",
    "baseline_checkpoint",
    "fit_baseline",
    "fit_on",
]
