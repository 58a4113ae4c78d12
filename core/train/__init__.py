"""``tv.train``: optimizers, device setters, the cluster spec (and, with storage, the Saver)."""
from ..runtime.cluster.spec import ClusterSpec
from .device_setter import replica_device_setter
from .optimizers import (AdagradOptimizer, AdamOptimizer, GradientDescentOptimizer,
                         MomentumOptimizer, Optimizer, create_global_step,
                         get_global_step, get_or_create_global_step)

from .optimizers_ext import (AdadeltaOptimizer, FtrlOptimizer, ProximalAdagradOptimizer,
                             ProximalGradientDescentOptimizer, RMSPropOptimizer)
from .learning_rate import (cosine_decay, exponential_decay, inverse_time_decay,
                            natural_exp_decay, piecewise_constant, polynomial_decay)

__all__ = ["ClusterSpec", "replica_device_setter", "Optimizer", "GradientDescentOptimizer",
           "MomentumOptimizer", "AdagradOptimizer", "AdamOptimizer", "get_global_step",
           "get_or_create_global_step", "create_global_step", "RMSPropOptimizer",
           "AdadeltaOptimizer", "FtrlOptimizer", "ProximalGradientDescentOptimizer",
           "ProximalAdagradOptimizer", "exponential_decay", "natural_exp_decay",
           "inverse_time_decay", "polynomial_decay", "piecewise_constant", "cosine_decay"]
from .saver import Saver, checkpoint_exists, latest_checkpoint, list_checkpoints  # noqa: E402
from .input import (SplitQueue, SplitRead, batch, read_split, shuffle_batch,  # noqa: E402
                    split_input_producer, string_input_producer)
from .queue_runner import (QUEUE_RUNNERS, Coordinator, QueueRunner,  # noqa: E402
                           add_queue_runner, start_queue_runners)

__all__ += ["Saver", "latest_checkpoint", "list_checkpoints", "checkpoint_exists",
            "split_input_producer", "string_input_producer", "read_split", "SplitQueue",
            "SplitRead", "batch", "shuffle_batch", "QueueRunner", "Coordinator",
            "start_queue_runners", "add_queue_runner", "QUEUE_RUNNERS"]
from .device_setter import (GreedyLoadBalancingStrategy, RoundRobinStrategy, byte_size_load_fn)  # noqa
from ..ops.state.partitioners import (PartitionedVariable, fixed_size_partitioner,  # noqa: E402
                           min_max_variable_partitioner, partitioned_variable)
from .sync_replicas import SyncReplicasOptimizer  # noqa: E402

__all__ += ["GreedyLoadBalancingStrategy", "RoundRobinStrategy", "byte_size_load_fn",
            "PartitionedVariable", "fixed_size_partitioner", "min_max_variable_partitioner",
            "partitioned_variable", "SyncReplicasOptimizer"]
from .hooks import (CheckpointSaverHook, LoggingTensorHook, NanLossDuringTrainingError,  # noqa
                    NanTensorHook, SessionRunArgs, SessionRunContext, SessionRunHook,
                    SessionRunValues, StepCounterHook, StopAtStepHook, SummarySaverHook)
from .monitored_session import MonitoredSession, MonitoredTrainingSession, Scaffold  # noqa

__all__ += ["CheckpointSaverHook", "LoggingTensorHook", "NanLossDuringTrainingError",
            "NanTensorHook", "SessionRunArgs", "SessionRunContext", "SessionRunHook",
            "SessionRunValues", "StepCounterHook", "StopAtStepHook", "SummarySaverHook",
            "MonitoredSession", "MonitoredTrainingSession", "Scaffold"]
from .hooks import CheckpointSaverListener  # noqa: E402

__all__ += ["CheckpointSaverListener"]
from .tf_input import (EpochQueue, batch_join, input_producer, match_filenames_once,  # noqa
                       range_input_producer, shuffle_batch_join, slice_input_producer)
from ..storage.tf_protos import (BytesList, Example, Feature, FeatureList,  # noqa: E402
                                 FeatureLists, Features, FloatList, Int64List, SequenceExample)

__all__ += ["EpochQueue", "batch_join", "input_producer", "match_filenames_once",
            "range_input_producer", "shuffle_batch_join", "slice_input_producer",
            "BytesList", "Example", "Feature", "FeatureList", "FeatureLists", "Features",
            "FloatList", "Int64List", "SequenceExample"]
from .server import Server  # noqa: E402  (tf.train.Server: a Dask worker named after its task)
from .supervisor import Supervisor  # noqa: E402

__all__ += ["Server", "Supervisor"]
from .replicas import (ReplicaContext, TrainResult, cycling_batch, run_replicas,  # noqa: E402
                       split_batches)

__all__ += ["ReplicaContext", "TrainResult", "cycling_batch", "run_replicas", "split_batches"]
from .meta_graph import export_meta_graph  # noqa: E402
from .saver import import_meta_graph  # noqa: E402

__all__ += ["export_meta_graph", "import_meta_graph"]
from .moving_averages import ExponentialMovingAverage  # noqa: E402

__all__ += ["ExponentialMovingAverage"]
from .checkpoint_utils import (CheckpointReader, NewCheckpointReader, list_variables,  # noqa
                               load_variable)

__all__ += ["CheckpointReader", "NewCheckpointReader", "list_variables", "load_variable"]
from .checkpoint_utils import (CheckpointState, checkpoints_iterator,  # noqa: E402
                               generate_checkpoint_state_proto, get_checkpoint_mtimes,
                               get_checkpoint_state, init_from_checkpoint, load_checkpoint,
                               remove_checkpoint, summary_iterator, update_checkpoint_state,
                               write_graph)

__all__ += ["CheckpointState", "checkpoints_iterator", "generate_checkpoint_state_proto",
            "get_checkpoint_mtimes", "get_checkpoint_state", "init_from_checkpoint",
            "load_checkpoint", "remove_checkpoint", "summary_iterator",
            "update_checkpoint_state", "write_graph"]
from .learning_rate import (cosine_decay_restarts, linear_cosine_decay,  # noqa: E402
                            noisy_linear_cosine_decay, piecewise_constant_decay)

__all__ += ["cosine_decay_restarts", "linear_cosine_decay", "noisy_linear_cosine_decay",
            "piecewise_constant_decay"]
from .checkpoint_utils import warm_start  # noqa: E402

__all__ += ["warm_start"]
from .hooks import FeedFnHook, FinalOpsHook, GlobalStepWaiterHook, SecondOrStepTimer  # noqa

__all__ += ["FeedFnHook", "FinalOpsHook", "GlobalStepWaiterHook", "SecondOrStepTimer"]
from .session_creators import (ChiefSessionCreator, LooperThread, SessionCreator,  # noqa: E402
                               SessionManager, SingularMonitoredSession, WorkerSessionCreator,
                               assert_global_step, basic_train_loop, global_step, limit_epochs)
__all__ += ["ChiefSessionCreator", "LooperThread", "SessionCreator", "SessionManager",
            "SingularMonitoredSession", "WorkerSessionCreator", "assert_global_step",
            "basic_train_loop", "global_step", "limit_epochs"]
from .coordinator import ClusterCoordinator, PerWorkerValues, RemoteValue, Worker  # noqa: E402

__all__ += ["ClusterCoordinator", "PerWorkerValues", "RemoteValue", "Worker"]
from .exactly_once import ExactlyOnce, exactly_once  # noqa: E402
__all__ += ["ExactlyOnce", "exactly_once"]
