"""tv.estimator: TF 1.x's Estimator programs — training to the closed-form solution,
resuming from checkpoints, evaluation and prediction against NumPy, numpy_input_fn's
epochs/shuffle semantics, and TF's errors for bad specs and arguments."""
import itertools

import numpy as np
import pytest
import tensorvm as tv
from tensorvm.estimator.summary_io import read_scalars

ModeKeys = tv.estimator.ModeKeys
_RNG = np.random.RandomState(0)
X = _RNG.randn(50, 3).astype(np.float32)
W_TRUE = np.array([1.0, -2.0, 0.5], np.float32)
Y = (X @ W_TRUE + 0.3 + 0.1 * _RNG.randn(50)).astype(np.float32)
_DIRS = itertools.count()


def _mem_dir(tag):
    return f"memory://tvm-test-estimator/{tag}-{next(_DIRS)}"


def linear_model_fn(features, labels, mode, params):
    """y = x @ w + b, mean squared error, plain gradient descent."""
    w = tv.get_variable("w", [3, 1], initializer=tv.zeros_initializer())
    b = tv.get_variable("b", [], initializer=tv.zeros_initializer())
    pred = tv.reshape(tv.matmul(features["x"], w), [-1]) + b
    if mode == ModeKeys.PREDICT:
        return tv.estimator.EstimatorSpec(mode, predictions={"y": pred, "twice": 2.0 * pred})
    loss = tv.reduce_mean(tv.square(pred - labels))
    train_op = tv.train.GradientDescentOptimizer(params["lr"]).minimize(
        loss, global_step=tv.train.get_global_step())
    metrics = {"mae": tv.metrics.mean(tv.abs(pred - labels)),
               "sign_acc": tv.metrics.accuracy(tv.cast(labels > 0.0, tv.int32),
                                               tv.cast(pred > 0.0, tv.int32))}
    return tv.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op,
                                      eval_metric_ops=metrics)


def _full_batch(num_epochs=None):
    return tv.estimator.inputs.numpy_input_fn({"x": X}, Y, batch_size=len(X),
                                              num_epochs=num_epochs, shuffle=False)


def _estimator(model_dir=None, lr=0.1, **config):
    config.setdefault("log_step_count_steps", 1000)
    return tv.estimator.Estimator(linear_model_fn, model_dir=model_dir or _mem_dir("lin"),
                                  params={"lr": lr},
                                  config=tv.estimator.RunConfig(**config))


@pytest.fixture(scope="module")
def trained():
    est = _estimator(save_checkpoints_steps=100)
    est.train(_full_batch(), steps=300)
    return est


def _params(est):
    return est.get_variable_value("w").reshape(-1), float(est.get_variable_value("b"))


def test_linear_regression_trains_to_the_least_squares_solution(trained):
    A = np.hstack([X, np.ones((len(X), 1), np.float32)]).astype(np.float64)
    sol = np.linalg.lstsq(A, Y.astype(np.float64), rcond=None)[0]
    w, b = _params(trained)
    np.testing.assert_allclose(w, sol[:3], atol=1e-4)
    assert abs(b - sol[3]) < 1e-4
    assert sorted(trained.get_variable_names()) == ["b", "global_step", "w"]
    assert int(trained.get_variable_value("global_step")) == 300
    assert trained.latest_checkpoint().endswith("model.ckpt-300")


def test_training_resumes_from_the_checkpoint_and_respects_max_steps():
    est = _estimator(save_checkpoints_steps=4, keep_checkpoint_max=2)
    est.train(_full_batch(), steps=10)
    assert int(est.get_variable_value("global_step")) == 10
    est.train(_full_batch(), steps=5)  # steps count from the restored global step
    assert int(est.get_variable_value("global_step")) == 15
    before = _params(est)
    est.train(_full_batch(), max_steps=12)  # already past: nothing runs
    assert int(est.get_variable_value("global_step")) == 15
    np.testing.assert_array_equal(_params(est)[0], before[0])
    est.train(_full_batch(), max_steps=20)
    assert int(est.get_variable_value("global_step")) == 20
    kept = [c["step"] for c in tv.train.list_checkpoints(est.model_dir)]
    # keep_checkpoint_max=2; every 4 steps counted from the restored step 15 (TF's timer),
    # and at the end
    assert kept == [19, 20]
    # a second Estimator on the same folder continues too
    again = _estimator(model_dir=est.model_dir)
    again.train(_full_batch(), steps=1)
    assert int(again.get_variable_value("global_step")) == 21
    # 10 + 5 + 5 + 1 resumed steps are the 21 steps of one uninterrupted run
    straight = _estimator(save_checkpoints_steps=1000)
    straight.train(_full_batch(), steps=21)
    np.testing.assert_allclose(_params(again)[0], _params(straight)[0], rtol=1e-6)


def test_training_ends_with_the_input_and_saves_at_the_end():
    est = _estimator(save_checkpoints_secs=600)
    fn = tv.estimator.inputs.numpy_input_fn({"x": X}, Y, batch_size=20, num_epochs=2,
                                            shuffle=False)
    est.train(fn)  # 100 rows in batches of 20: 5 steps, then OutOfRange ends training
    assert int(est.get_variable_value("global_step")) == 5
    assert est.latest_checkpoint().endswith("model.ckpt-5")


def test_evaluate_averages_metrics_over_the_whole_set(trained):
    fn = tv.estimator.inputs.numpy_input_fn({"x": X}, Y, batch_size=16, shuffle=False)
    res = trained.evaluate(fn, name="holdout")
    w, b = _params(trained)
    pred = X @ w + b
    assert set(res) == {"mae", "sign_acc", "loss", "global_step"}
    np.testing.assert_allclose(res["mae"], np.mean(np.abs(pred - Y)), rtol=1e-5)
    np.testing.assert_allclose(res["sign_acc"], np.mean((pred > 0) == (Y > 0)), rtol=1e-6)
    # loss: the mean of the per-batch losses (batches of 16, 16, 16 and 2), as TF's
    batches = [slice(i, i + 16) for i in range(0, 50, 16)]
    np.testing.assert_allclose(
        res["loss"], np.mean([np.mean((pred[s] - Y[s]) ** 2) for s in batches]), rtol=1e-5)
    assert res["global_step"] == 300
    scalars = read_scalars(trained.eval_dir("holdout"))
    assert trained.eval_dir("holdout").endswith("/eval_holdout")
    got = {tag: v for step, tag, v in scalars if step == 300}
    assert set(got) == {"mae", "sign_acc", "loss"}
    np.testing.assert_allclose(got["mae"], res["mae"], rtol=1e-6)
    # steps=2 evaluates the first two batches only
    two = trained.evaluate(fn, steps=2)
    np.testing.assert_allclose(two["mae"], np.mean(np.abs(pred[:32] - Y[:32])), rtol=1e-5)


def test_predict_yields_numpy_values(trained):
    w, b = _params(trained)
    fn = tv.estimator.inputs.numpy_input_fn({"x": X}, batch_size=16, shuffle=False)
    preds = list(trained.predict(fn))
    assert len(preds) == 50 and set(preds[0]) == {"y", "twice"}
    np.testing.assert_allclose([p["y"] for p in preds], X @ w + b, rtol=1e-5, atol=1e-6)
    only = list(trained.predict(fn, predict_keys=["twice"]))
    assert set(only[0]) == {"twice"}
    np.testing.assert_allclose([p["twice"] for p in only], 2 * (X @ w + b), rtol=1e-5,
                               atol=1e-6)
    batches = list(trained.predict(fn, yield_single_examples=False))
    assert [len(p["y"]) for p in batches] == [16, 16, 16, 2]
    with pytest.raises(ValueError, match="Expected to run at least one output from"):
        next(trained.predict(fn, predict_keys=["nope"]))


def test_predict_of_a_tensor_and_an_input_fn_returning_a_dataset():
    def model_fn(features, mode):
        w = tv.get_variable("w", [], initializer=tv.constant_initializer(3.0))
        return tv.estimator.EstimatorSpec(mode, predictions=features * w)

    est = tv.estimator.Estimator(model_fn, model_dir=_mem_dir("ds"))
    vals = np.arange(7, dtype=np.float32)
    got = list(est.predict(lambda: tv.data.Dataset.from_tensor_slices(vals).batch(3)))
    np.testing.assert_allclose(got, 3 * vals)  # no checkpoint: initialised variables
    with pytest.raises(ValueError, match="predict_keys argument is not valid in case of "
                                         "non-dict predictions."):
        next(est.predict(lambda: tv.data.Dataset.from_tensor_slices(vals), predict_keys=["a"]))


def test_train_and_evaluate_with_datasets_and_input_fn_params():
    seen = []

    def input_fn(params, mode):
        seen.append((mode, params["lr"]))
        ds = tv.data.Dataset.from_tensor_slices(({"x": X}, Y))
        return ds.repeat().batch(25) if mode == ModeKeys.TRAIN else ds.batch(25)

    est = _estimator(save_checkpoints_steps=5, lr=0.1)
    train_spec = tv.estimator.TrainSpec(input_fn, max_steps=15)
    eval_spec = tv.estimator.EvalSpec(input_fn, steps=None, name="val", throttle_secs=0)
    metrics, exports = tv.estimator.train_and_evaluate(est, train_spec, eval_spec)
    assert metrics["global_step"] == 15 and exports == []
    steps = sorted({s for s, tag, _ in read_scalars(est.eval_dir("val")) if tag == "loss"})
    assert steps == [5, 10, 15]  # after each checkpoint but the untrained first one
    assert seen[0] == (ModeKeys.TRAIN, 0.1) and (ModeKeys.EVAL, 0.1) in seen
    # again from the checkpoint at 15: evaluations at 20 and 25, not at the restored 15
    more = tv.estimator.TrainSpec(input_fn, max_steps=25)
    metrics, _ = tv.estimator.train_and_evaluate(est, more, eval_spec)
    steps = [s for s, tag, _ in read_scalars(est.eval_dir("val")) if tag == "loss"]
    assert metrics["global_step"] == 25 and sorted(steps) == [5, 10, 15, 20, 25]
    assert tv.estimator.train_and_evaluate(est, more, eval_spec) == (None, None)  # done
    w, b = _params(est)
    np.testing.assert_allclose(metrics["mae"], np.mean(np.abs(X @ w + b - Y)), rtol=1e-5)


def test_a_summary_of_exactly_zero_is_written_whole():
    # a serialized Summary of 0.0 ends in \0 bytes, which a NumPy 'S' array drops
    def model_fn(features, labels, mode):
        w = tv.get_variable("w", [], initializer=tv.zeros_initializer())
        loss = tv.reduce_mean(tv.square(features * w - labels))
        train_op = tv.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=tv.train.get_global_step())
        return tv.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)

    d = _mem_dir("zero")
    est = tv.estimator.Estimator(model_fn, model_dir=d,
                                 config=tv.estimator.RunConfig(save_summary_steps=1))
    zeros = np.zeros(4, np.float32)
    est.train(tv.estimator.inputs.numpy_input_fn(zeros, zeros, 4, None, False), steps=2)
    assert [(s, v) for s, tag, v in read_scalars(d) if tag == "loss"] == [(1, 0.0), (2, 0.0)]


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the overflow to NaN
def test_training_hooks_summaries_and_nan_loss():
    calls = []

    class Count(tv.train.SessionRunHook):
        def after_run(self, run_context, run_values):
            calls.append(1)

    def model_fn(features, labels, mode):
        spec = linear_model_fn(features, labels, mode, {"lr": 0.1})
        return spec._replace(training_hooks=[Count()])

    d = _mem_dir("hooks")
    est = tv.estimator.Estimator(model_fn, model_dir=d, config=tv.estimator.RunConfig(
        save_summary_steps=2, log_step_count_steps=2))
    user = Count()
    est.train(_full_batch(), steps=4, hooks=[user])
    assert len(calls) == 8  # the spec's hook and the caller's, 4 steps each
    losses = [(s, v) for s, tag, v in read_scalars(d) if tag == "loss"]
    assert [s for s, _ in losses] == [1, 3]  # the first step, then every 2
    nan = tv.estimator.Estimator(linear_model_fn, model_dir=_mem_dir("nan"),
                                 params={"lr": 1e30})
    with pytest.raises(tv.train.NanLossDuringTrainingError, match="NaN loss"):
        nan.train(_full_batch(), steps=50)


def test_warm_start_from_another_models_checkpoint(trained):
    est = tv.estimator.Estimator(linear_model_fn, model_dir=_mem_dir("warm"),
                                 params={"lr": 0.1}, warm_start_from=trained.model_dir)
    fn = tv.estimator.inputs.numpy_input_fn({"x": X}, batch_size=50, shuffle=False)
    w, b = _params(trained)
    got = np.array([p["y"] for p in est.predict(fn)])
    np.testing.assert_allclose(got, X @ w + b, rtol=1e-5, atol=1e-6)
    settings = tv.estimator.WarmStartSettings(trained.model_dir, vars_to_warm_start="w")
    only_w = tv.estimator.Estimator(linear_model_fn, model_dir=_mem_dir("warm"),
                                    params={"lr": 0.1}, warm_start_from=settings)
    got = np.array([p["y"] for p in only_w.predict(fn)])
    np.testing.assert_allclose(got, X @ w, rtol=1e-5, atol=1e-6)  # b starts at 0


def test_model_dir_on_local_disk(tmp_path):
    est = _estimator(model_dir=str(tmp_path / "m"), save_checkpoints_steps=5)
    est.train(_full_batch(), steps=5)
    res = est.evaluate(_full_batch(num_epochs=1))
    assert res["global_step"] == 5
    assert (tmp_path / "m" / "eval").is_dir()
    assert [s for s, tag, _ in read_scalars(str(tmp_path / "m" / "eval"))] == [5, 5, 5]


# ---- numpy_input_fn ----------------------------------------------------------------------

def _drain(fn, n=None):
    with tv.Graph().as_default():
        out = fn()
        with tv.Session() as s:
            s.run(tv.train.Scaffold.default_local_init_op())  # starts the input
            got = []
            for _ in itertools.count() if n is None else range(n):
                try:
                    got.append(s.run(out))
                except tv.errors.OutOfRangeError:
                    break
            return got


def test_numpy_input_fn_epochs_run_across_batches_and_end_with_out_of_range():
    x = np.arange(10, dtype=np.float32)
    fn = tv.estimator.inputs.numpy_input_fn({"a": x}, x * 10, batch_size=4, num_epochs=2,
                                            shuffle=False)
    got = _drain(fn)
    assert [f["a"].tolist() for f, _ in got] == [
        [0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1], [2, 3, 4, 5], [6, 7, 8, 9]]
    assert [y.tolist() for _, y in got][2] == [80, 90, 0, 10]
    forever = _drain(tv.estimator.inputs.numpy_input_fn(x, batch_size=4, num_epochs=None,
                                                        shuffle=False), n=6)
    assert all(len(b) == 4 for b in forever)  # features alone, a tensor for an array x
    assert np.concatenate(forever).tolist() == (list(range(10)) * 3)[:24]


def test_numpy_input_fn_shuffle_covers_each_epoch_once():
    x = np.arange(20)
    y = {"twice": 2 * x}
    with tv.Graph().as_default():
        tv.set_random_seed(3)
        f, labels = tv.estimator.inputs.numpy_input_fn({"x": x}, y, batch_size=20,
                                                       num_epochs=2, shuffle=True)()
        with tv.Session() as s:
            s.run(tv.train.Scaffold.default_local_init_op())
            e1, e2 = s.run([f["x"], labels["twice"]]), s.run(f["x"])
            with pytest.raises(tv.errors.OutOfRangeError):
                s.run(f["x"])
    assert sorted(e1[0].tolist()) == list(range(20)) == sorted(e2.tolist())
    assert e1[0].tolist() != list(range(20)) and e1[0].tolist() != e2.tolist()
    np.testing.assert_array_equal(e1[1], 2 * e1[0])  # rows stay together


@pytest.mark.parametrize("args, err, msg", [
    ({"x": {"a": np.zeros(3)}, "shuffle": None}, ValueError,
     "shuffle must be provided and explicitly set as boolean"),
    ({"x": {"a": np.zeros(3)}, "y": np.zeros(4), "shuffle": False}, ValueError,
     "Length of tensors in x and y is mismatched"),
    ({"x": {}, "shuffle": False}, ValueError, "x cannot be an empty dict"),
    ({"x": [1, 2], "shuffle": False}, TypeError, "x must be a dict or array"),
    ({"x": {"a": np.zeros(3)}, "y": {"a": np.zeros(3)}, "shuffle": False}, ValueError,
     "1 duplicate keys are found in both x and y"),
    ({"x": {"a": np.zeros(3)}, "y": {}, "shuffle": False}, ValueError,
     "y cannot be empty dict, use None instead."),
])
def test_numpy_input_fn_errors(args, err, msg):
    with pytest.raises(err, match=msg), tv.Graph().as_default():
        tv.estimator.inputs.numpy_input_fn(**args)()


# ---- EstimatorSpec validation --------------------------------------------------------------

def _spec_error(make, err, msg):
    with tv.Graph().as_default():
        loss, pred = tv.constant(1.0), tv.constant([1.0, 2.0])
        train_op = tv.no_op()
        with pytest.raises(err, match=msg):
            make(loss, pred, train_op)


@pytest.mark.parametrize("make, err, msg", [
    (lambda l, p, t: tv.estimator.EstimatorSpec(ModeKeys.TRAIN, loss=l), ValueError,
     r"^Missing train_op\.$"),
    (lambda l, p, t: tv.estimator.EstimatorSpec(ModeKeys.TRAIN, train_op=t), ValueError,
     r"^Missing loss\.$"),
    (lambda l, p, t: tv.estimator.EstimatorSpec(ModeKeys.EVAL), ValueError,
     r"^Missing loss\.$"),
    (lambda l, p, t: tv.estimator.EstimatorSpec(ModeKeys.PREDICT), ValueError,
     r"^Missing predictions\.$"),
    (lambda l, p, t: tv.estimator.EstimatorSpec("fit", loss=l), ValueError, "unrecognized"),
    (lambda l, p, t: tv.estimator.EstimatorSpec(ModeKeys.EVAL, loss=p), ValueError,
     "Loss must be scalar, given: "),
    (lambda l, p, t: tv.estimator.EstimatorSpec(ModeKeys.EVAL, loss=1.0), TypeError,
     "loss must be Tensor, given: 1.0"),
    (lambda l, p, t: tv.estimator.EstimatorSpec(ModeKeys.TRAIN, loss=l, train_op="go"),
     TypeError, "train_op must be Operation or Tensor, given: go"),
    (lambda l, p, t: tv.estimator.EstimatorSpec(ModeKeys.PREDICT, predictions={"a": 1}),
     TypeError, r"predictions\[a\] must be Tensor, given: 1"),
    (lambda l, p, t: tv.estimator.EstimatorSpec(ModeKeys.EVAL, loss=l, eval_metric_ops=[1]),
     TypeError, r"eval_metric_ops must be a dict, given: \[1\]"),
    (lambda l, p, t: tv.estimator.EstimatorSpec(ModeKeys.EVAL, loss=l,
                                                eval_metric_ops={"m": l}),
     TypeError, "Values of eval_metric_ops must be \\(metric_value, update_op\\) tuples"),
    (lambda l, p, t: tv.estimator.EstimatorSpec(ModeKeys.EVAL, loss=l,
                                                eval_metric_ops={"m": (l, 3)}),
     TypeError, r"eval_metric_ops\[m\] must be Operation or Tensor"),
    (lambda l, p, t: tv.estimator.EstimatorSpec(ModeKeys.TRAIN, loss=l, train_op=t,
                                                training_hooks=[object()]),
     TypeError, "All hooks must be SessionRunHook instances, given: "),
    (lambda l, p, t: tv.estimator.EstimatorSpec(ModeKeys.EVAL, loss=l, scaffold=3),
     TypeError, "scaffold must be tf.train.Scaffold. Given: 3"),
])
def test_estimator_spec_errors(make, err, msg):
    _spec_error(make, err, msg)


def test_estimator_spec_other_graph_and_shape_one_loss():
    with tv.Graph().as_default():
        foreign = tv.constant(1.0)
    with tv.Graph().as_default():
        with pytest.raises(ValueError, match='loss with "Const:0" must be from the default '
                                             "graph"):
            tv.estimator.EstimatorSpec(ModeKeys.EVAL, loss=foreign)
        spec = tv.estimator.EstimatorSpec(ModeKeys.EVAL, loss=tv.constant([2.0]))
        assert spec.loss.shape.as_list() == []
        assert spec.predictions == {} and spec.eval_metric_ops == {}
        with pytest.raises(ValueError, match="mode of EstimatorSpec cannot be changed."):
            spec._replace(mode=ModeKeys.TRAIN)


# ---- Estimator and RunConfig arguments -----------------------------------------------------

def test_estimator_constructor_errors():
    with pytest.raises(ValueError, match="model_fn must be provided to Estimator."):
        tv.estimator.Estimator(None)
    with pytest.raises(ValueError, match="must include features argument"):
        tv.estimator.Estimator(lambda x, labels: None)
    with pytest.raises(ValueError, match="does not include params argument, but params"):
        tv.estimator.Estimator(lambda features, labels: None, params={"a": 1})
    with pytest.raises(ValueError, match=r"has following not expected args: \['extra'\]"):
        tv.estimator.Estimator(lambda features, extra: None)
    with pytest.raises(ValueError, match="`model_dir` are set both in constructor and "
                                         "`RunConfig`, but with different values"):
        tv.estimator.Estimator(linear_model_fn, model_dir="memory://a", params={},
                               config=tv.estimator.RunConfig(model_dir="memory://b"))
    with pytest.raises(ValueError, match="config must be an instance of `RunConfig`"):
        tv.estimator.Estimator(linear_model_fn, params={}, config={"model_dir": "x"})
    est = tv.estimator.Estimator(linear_model_fn, params={"lr": 1})
    assert est.model_dir and est.latest_checkpoint() is None  # a temporary folder
    with pytest.raises(ValueError, match="Could not find trained model in model_dir: "):
        est.get_variable_value("w")
    with pytest.raises(ValueError, match="Could not find trained model in model_dir: "):
        est.get_variable_names()


def test_train_evaluate_argument_errors(trained):
    fn = _full_batch()
    est = _estimator()
    for kwargs, msg in [({"steps": 1, "max_steps": 2},
                         "Can not provide both steps and max_steps."),
                        ({"steps": 0}, "Must specify steps > 0, given: 0"),
                        ({"max_steps": -1}, "Must specify max_steps > 0, given: -1")]:
        with pytest.raises(ValueError, match=msg):
            est.train(fn, **kwargs)
    with pytest.raises(TypeError, match="Hooks must be a SessionRunHook, given: 3"):
        est.train(fn, steps=1, hooks=[3])
    with pytest.raises(ValueError, match="Must specify steps > 0, given: 0"):
        est.evaluate(fn, steps=0)
    with pytest.raises(tv.errors.NotFoundError, match="Key nope not found in checkpoint"):
        trained.get_variable_value("nope")


def test_model_fn_contract_errors():
    fn = _full_batch()
    not_a_spec = tv.estimator.Estimator(lambda features, labels: features,
                                        model_dir=_mem_dir("bad"))
    with pytest.raises(ValueError, match="model_fn should return an EstimatorSpec."):
        not_a_spec.train(fn, steps=1)
    no_labels = tv.estimator.Estimator(lambda features: None, model_dir=_mem_dir("bad"))
    with pytest.raises(ValueError, match="model_fn does not take labels, but input_fn "
                                         "returns labels."):
        no_labels.train(fn, steps=1)

    def with_loss_metric(features, labels, mode):
        spec = linear_model_fn(features, labels, mode, {"lr": 0.1})
        return spec._replace(eval_metric_ops={"loss": tv.metrics.mean(spec.loss)})

    est = tv.estimator.Estimator(with_loss_metric, model_dir=_mem_dir("bad"))
    with pytest.raises(ValueError, match='Metric with name "loss" is not allowed, because '
                                         "Estimator already defines a default metric"):
        est.evaluate(_full_batch(num_epochs=1))
    bad_input = tv.estimator.Estimator(linear_model_fn, model_dir=_mem_dir("bad"),
                                       params={"lr": 1})
    with pytest.raises(ValueError, match=r"input_fn should return \(features, labels\) as "
                                         "a len 2 tuple."):
        bad_input.train(lambda: (tv.constant(1.0),) * 3, steps=1)


def test_run_config_values_and_errors():
    c = tv.estimator.RunConfig()
    assert (c.save_checkpoints_secs, c.save_checkpoints_steps, c.keep_checkpoint_max,
            c.log_step_count_steps, c.save_summary_steps) == (600, None, 5, 100, 100)
    r = c.replace(save_checkpoints_steps=7)
    assert (r.save_checkpoints_steps, r.save_checkpoints_secs, c.save_checkpoints_secs) == \
        (7, None, 600)
    with pytest.raises(ValueError, match="`save_checkpoints_steps` and "
                                         "`save_checkpoints_secs` cannot be both set."):
        tv.estimator.RunConfig(save_checkpoints_steps=1, save_checkpoints_secs=1)
    with pytest.raises(ValueError, match="keep_checkpoint_max should be >= 0"):
        tv.estimator.RunConfig(keep_checkpoint_max=-1)
    with pytest.raises(ValueError, match="tf_random_seed must be integer."):
        tv.estimator.RunConfig(tf_random_seed=1.5)
    with pytest.raises(ValueError, match="model_dir should be non-empty."):
        tv.estimator.RunConfig(model_dir="")
    with pytest.raises(ValueError, match="Replacing colour is not supported."):
        c.replace(colour=1)
    with pytest.raises(TypeError, match="`eval_spec` must have type `tf.estimator.EvalSpec`"):
        tv.estimator.train_and_evaluate(_estimator(), tv.estimator.TrainSpec(_full_batch()),
                                        None)
    with pytest.raises(ValueError, match="Must specify max_steps > 0, given: 0"):
        tv.estimator.TrainSpec(_full_batch(), max_steps=0)


# ---- a TF 1.x custom-estimator program (tensorflow/models samples/core/get_started) ---------

tf = tv  # the program below is the sample's, with its data made here (no download)


def _iris_like(n, seed):
    rng = np.random.RandomState(seed)
    labels = rng.randint(0, 3, n)
    centers = np.array([[5.0, 3.4, 1.5, 0.2], [5.9, 2.8, 4.3, 1.3], [6.6, 3.0, 5.6, 2.0]])
    x = centers[labels] + 0.3 * rng.randn(n, 4)
    names = ["SepalLength", "SepalWidth", "PetalLength", "PetalWidth"]
    return {k: x[:, i].astype(np.float32) for i, k in enumerate(names)}, labels


def train_input_fn(features, labels, batch_size):
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    dataset = dataset.shuffle(1000).repeat().batch(batch_size)
    return dataset.make_one_shot_iterator().get_next()


def eval_input_fn(features, labels=None, batch_size=None):
    inputs = features if labels is None else (features, labels)
    dataset = tf.data.Dataset.from_tensor_slices(inputs)
    dataset = dataset.batch(batch_size)
    return dataset.make_one_shot_iterator().get_next()


def my_model(features, labels, mode, params):
    net = tf.feature_column.input_layer(features, params['feature_columns'])
    for units in params['hidden_units']:
        net = tf.layers.dense(net, units=units, activation=tf.nn.relu)
    logits = tf.layers.dense(net, params['n_classes'], activation=None)
    predicted_classes = tf.argmax(logits, 1)
    if mode == tf.estimator.ModeKeys.PREDICT:
        predictions = {
            'class_ids': predicted_classes[:, tf.newaxis],
            'probabilities': tf.nn.softmax(logits),
            'logits': logits,
        }
        return tf.estimator.EstimatorSpec(mode, predictions=predictions)
    onehot_labels = tf.one_hot(labels, 3, 1, 0)
    loss = tf.losses.softmax_cross_entropy(onehot_labels=onehot_labels, logits=logits)
    accuracy = tf.metrics.accuracy(labels=labels, predictions=predicted_classes,
                                   name='acc_op')
    metrics = {'accuracy': accuracy}
    tf.summary.scalar('accuracy', accuracy[1])
    if mode == tf.estimator.ModeKeys.EVAL:
        return tf.estimator.EstimatorSpec(mode, loss=loss, eval_metric_ops=metrics)
    assert mode == tf.estimator.ModeKeys.TRAIN
    optimizer = tf.train.AdagradOptimizer(learning_rate=0.1)
    train_op = optimizer.minimize(loss, global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


def test_the_custom_estimator_sample_runs_unchanged():
    (train_x, train_y), (test_x, test_y) = _iris_like(120, 1), _iris_like(30, 2)
    my_feature_columns = [tf.feature_column.numeric_column(key=key) for key in train_x]
    classifier = tf.estimator.Estimator(
        model_fn=my_model, model_dir=_mem_dir("iris"),
        config=tf.estimator.RunConfig(tf_random_seed=7),
        params={'feature_columns': my_feature_columns, 'hidden_units': [10, 10],
                'n_classes': 3})
    classifier.train(input_fn=lambda: train_input_fn(train_x, train_y, 32), steps=300)
    eval_result = classifier.evaluate(input_fn=lambda: eval_input_fn(test_x, test_y, 8))
    preds = list(classifier.predict(input_fn=lambda: eval_input_fn(test_x, batch_size=8)))
    class_ids = np.array([p['class_ids'][0] for p in preds])
    probs = np.array([p['probabilities'] for p in preds])
    np.testing.assert_array_equal(class_ids, probs.argmax(1))
    np.testing.assert_allclose(probs.sum(1), 1.0, rtol=1e-5)
    assert eval_result['accuracy'] == pytest.approx(np.mean(class_ids == test_y), abs=1e-6)
    assert eval_result['accuracy'] > 0.9 and eval_result['global_step'] == 300


# ---- feature columns and canned estimators -------------------------------------------------

fc = tv.feature_column


def _run(fn):
    with tv.Graph().as_default():
        out = fn()
        with tv.Session() as s:
            s.run(tv.global_variables_initializer())
            return s.run(out)


def test_input_layer_of_numeric_bucketized_indicator_and_embedding_columns():
    feats = {"n": np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32),
             "v": np.array([-1.0, 0.5, 7.0], np.float32),
             "k": np.array([2, 0, 5]), "c": np.array(["b", "z", "a"], dtype=object)}
    cols = [fc.numeric_column("n", shape=(2,), normalizer_fn=lambda x: x * 10),
            fc.bucketized_column(fc.numeric_column("v"), [0.0, 1.0, 5.0]),
            fc.indicator_column(fc.categorical_column_with_identity("k", 4)),
            fc.indicator_column(fc.categorical_column_with_vocabulary_list("c", ["a", "b"]))]
    got = _run(lambda: fc.input_layer(feats, cols))
    # columns in name order: c_indicator, k_indicator, n, v_bucketized
    c = np.array([[0, 1], [0, 0], [1, 0]])  # "z" is out of the vocabulary: no bucket
    k = np.eye(4)[[2, 0]].tolist() + [[0, 0, 0, 0]]  # 5 is out of range
    v = np.eye(4)[np.digitize(feats["v"], [0.0, 1.0, 5.0])]
    np.testing.assert_allclose(got, np.hstack([c, k, feats["n"] * 10, v]))

    def embedded():
        emb = fc.embedding_column(fc.categorical_column_with_identity("ids", 3), 2,
                                  combiner="mean")
        out = fc.input_layer({"ids": np.array([[0, 2], [1, 1]])}, [emb])
        table = next(v for v in tv.global_variables() if "embedding_weights" in v.name)
        return out, table

    out, table = _run(embedded)
    np.testing.assert_allclose(out, [(table[0] + table[2]) / 2, table[1]], rtol=1e-6)
    with pytest.raises(ValueError, match="Items of feature_columns must be a _DenseColumn"):
        _run(lambda: fc.input_layer(feats, [fc.categorical_column_with_identity("k", 4)]))
    with pytest.raises(ValueError, match="boundaries must be a sorted list"):
        fc.bucketized_column(fc.numeric_column("v"), [1.0, 0.0])


def test_linear_regressor_fits_least_squares_and_reports_regression_metrics():
    cols = [fc.numeric_column("x", shape=(3,))]
    est = tv.estimator.LinearRegressor(cols, model_dir=_mem_dir("linreg"),
                                       optimizer=tv.train.GradientDescentOptimizer(0.002))
    est.train(tv.estimator.inputs.numpy_input_fn({"x": X}, Y, 50, None, False), steps=400)
    A = np.hstack([X, np.ones((50, 1), np.float32)]).astype(np.float64)
    sol = np.linalg.lstsq(A, Y.astype(np.float64), rcond=None)[0]
    w = est.get_variable_value("linear/linear_model/x/weights").ravel()
    b = est.get_variable_value("linear/linear_model/bias_weights").item()
    np.testing.assert_allclose(np.append(w, b), sol, atol=1e-4)
    res = est.evaluate(tv.estimator.inputs.numpy_input_fn({"x": X}, Y, 16, 1, False))
    pred = X @ w + b
    np.testing.assert_allclose(res["average_loss"], np.mean((pred - Y) ** 2), rtol=1e-4)
    np.testing.assert_allclose(res["label/mean"], Y.mean(), rtol=1e-5)
    np.testing.assert_allclose(res["prediction/mean"], pred.mean(), rtol=1e-4, atol=1e-6)
    out = list(est.predict(tv.estimator.inputs.numpy_input_fn({"x": X}, None, 16, 1, False)))
    np.testing.assert_allclose([p["predictions"][0] for p in out], pred, rtol=1e-5, atol=1e-5)


def test_dnn_and_linear_classifiers():
    feats, labels = _iris_like(90, 3)
    cols = [fc.numeric_column(k) for k in feats]
    vocab = ["setosa", "versicolor", "virginica"]
    named = np.array(vocab, dtype=object)[labels]
    dnn = tv.estimator.DNNClassifier([16], cols, model_dir=_mem_dir("dnn"), n_classes=3,
                                     label_vocabulary=vocab,
                                     optimizer=tv.train.AdamOptimizer(0.05),
                                     config=tv.estimator.RunConfig(tf_random_seed=1))
    dnn.train(tv.estimator.inputs.numpy_input_fn(feats, named, 30, None, True), steps=150)
    res = dnn.evaluate(tv.estimator.inputs.numpy_input_fn(feats, named, 30, 1, False))
    preds = list(dnn.predict(tv.estimator.inputs.numpy_input_fn(feats, None, 30, 1, False)))
    ids = np.array([p["class_ids"][0] for p in preds])
    assert res["accuracy"] == pytest.approx(np.mean(ids == labels), abs=1e-6) and \
        res["accuracy"] > 0.9
    assert preds[0]["classes"][0] == vocab[ids[0]].encode()
    assert set(preds[0]) == {"logits", "probabilities", "class_ids", "classes",
                             "all_class_ids", "all_classes"}
    # binary: logistic head, precision/recall against NumPy
    y2 = (labels == 2).astype(np.int64)
    lin = tv.estimator.LinearClassifier(cols, model_dir=_mem_dir("lincls"),
                                        optimizer=tv.train.GradientDescentOptimizer(0.01))
    lin.train(tv.estimator.inputs.numpy_input_fn(feats, y2, 90, None, False), steps=100)
    res = lin.evaluate(tv.estimator.inputs.numpy_input_fn(feats, y2, 25, 1, False))
    p = np.array([q["class_ids"][0] for q in lin.predict(
        tv.estimator.inputs.numpy_input_fn(feats, None, 25, 1, False))])
    assert res["accuracy"] == pytest.approx(np.mean(p == y2), abs=1e-6)
    assert res["precision"] == pytest.approx(y2[p == 1].mean(), abs=1e-6)
    assert res["recall"] == pytest.approx(p[y2 == 1].mean(), abs=1e-6)
    assert res["accuracy_baseline"] == pytest.approx(max(y2.mean(), 1 - y2.mean()), abs=1e-6)


def test_canned_estimator_argument_errors():
    cols = [fc.numeric_column("x")]
    with pytest.raises(ValueError, match="n_classes must be > 1: 1"):
        tv.estimator.DNNClassifier([4], cols, n_classes=1)
    with pytest.raises(ValueError, match="feature_columns must be defined."):
        tv.estimator.LinearRegressor([])
    est = tv.estimator.LinearRegressor(cols, optimizer="Nope", model_dir=_mem_dir("bad"))
    with pytest.raises(ValueError, match="Unsupported optimizer name: Nope"):
        est.train(tv.estimator.inputs.numpy_input_fn({"x": X[:, 0]}, Y, 10, 1, False))


# ---- queue-based input (TF 1.x's tf.train.batch pipelines) ----------------------------------

def test_queue_input_fn_runs_without_starting_queue_runners_by_hand():
    # TF's MonitoredSession starts the graph's queue runners (and stops them at the end)
    def input_fn():
        x, y = tv.train.slice_input_producer([X, Y], num_epochs=2, shuffle=False)
        xb, yb = tv.train.batch([x, y], batch_size=25)
        return {"x": xb}, yb

    est = _estimator(save_checkpoints_steps=1000)
    est.train(input_fn)  # 2 epochs of 50 rows in batches of 25, then OutOfRange
    assert int(est.get_variable_value("global_step")) == 4
    res = est.evaluate(input_fn)
    assert res["global_step"] == 4
    w, b = _params(est)
    np.testing.assert_allclose(res["mae"], np.mean(np.abs(X @ w + b - Y)), rtol=1e-5)


def test_a_queue_runners_error_ends_the_monitored_session_and_is_raised():
    with tv.Graph().as_default():
        q = tv.FIFOQueue(4, tv.float32, shapes=[[]])
        bad = tv.check_numerics(tv.constant(np.float32(np.nan)), "bad input")
        tv.train.add_queue_runner(tv.train.QueueRunner(q, [q.enqueue(bad)]))
        tv.train.get_or_create_global_step()
        x = q.dequeue()
        with pytest.raises(tv.errors.InvalidArgumentError, match="bad input"), \
                tv.train.MonitoredTrainingSession() as sess:
            while not sess.should_stop():
                sess.run(x)


# ---- on a cluster: the variables on the ps task, the loop on the chief -----------------------

TV_CLUSTER = {"ps": 1, "worker": 1}
TV_CLUSTER_SHARED = True  # kills no worker, leaves no state


def test_an_estimator_on_a_cluster_keeps_its_variables_on_the_ps(tv_cluster, tmp_path):
    devices = []

    def model_fn(features, labels, mode, params):
        spec = linear_model_fn(features, labels, mode, params)
        devices.extend((mode, v.op.name, v.device) for v in tv.global_variables())
        return spec

    cfg = tv.estimator.RunConfig(master=tv_cluster.address, cluster_spec=TV_CLUSTER,
                                 save_checkpoints_steps=20, log_step_count_steps=1000)
    assert (cfg.num_ps_replicas, cfg.num_worker_replicas, cfg.task_type) == (1, 1, "worker")
    est = tv.estimator.Estimator(model_fn, model_dir=f"file://{tmp_path}/m",
                                 params={"lr": 0.1}, config=cfg)
    est.train(_full_batch(), steps=30)
    assert {d for m, _, d in devices if m == ModeKeys.TRAIN} == {"/job:ps/task:0"}
    local = _estimator()
    local.train(_full_batch(), steps=30)
    np.testing.assert_allclose(_params(est)[0], _params(local)[0], rtol=1e-5)
    fn = tv.estimator.inputs.numpy_input_fn({"x": X}, Y, batch_size=16, shuffle=False)
    first, again = est.evaluate(fn), est.evaluate(fn)  # each call reads the whole input
    w, b = _params(est)
    for res in (first, again):
        assert res["global_step"] == 30
        np.testing.assert_allclose(res["mae"], np.mean(np.abs(X @ w + b - Y)), rtol=1e-5)
    preds = [p["y"] for p in est.predict(fn)]
    np.testing.assert_allclose(preds, X @ w + b, rtol=1e-5, atol=1e-5)
    with pytest.raises(tv.errors.InvalidArgumentError, match="memory:// checkpoints on a "
                                                            "distributed session"):
        tv.estimator.Estimator(model_fn, model_dir=_mem_dir("cl"), params={"lr": 0.1},
                               config=cfg).train(_full_batch(), steps=1)


def test_export_saved_model_and_load_it_back(trained, tmp_path):
    fn = tv.estimator.export.build_raw_serving_input_receiver_fn(
        {"x": tv.placeholder(tv.float32, [None, 3])})
    path = trained.export_saved_model(str(tmp_path / "export"), fn)
    assert isinstance(path, bytes) and (tmp_path / "export").is_dir()
    second = trained.export_savedmodel(str(tmp_path / "export"), fn)
    assert second != path  # a new timestamped folder
    w, b = _params(trained)
    with tv.Graph().as_default(), tv.Session() as sess:
        sig = tv.estimator.export.load(sess, path)
        assert set(sig["outputs"]) == {"y", "twice"}
        got = sess.run(sig["outputs"]["y"], {sig["inputs"]["x"]: X})
    np.testing.assert_allclose(got, X @ w + b, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="Couldn't find trained model at"):
        _estimator().export_saved_model(str(tmp_path / "none"), fn)
    with tv.Graph().as_default(), pytest.raises(
            TypeError, match="Values in export_outputs must be ExportOutput objects"):
        tv.estimator.EstimatorSpec(ModeKeys.PREDICT, predictions=tv.constant(1.0),
                                   export_outputs={"a": 1})


def test_default_optimizers_train_and_a_parsing_export_serves_examples():
    cols = [fc.numeric_column("x", shape=(3,))]
    fn = tv.estimator.inputs.numpy_input_fn({"x": X}, Y, 50, None, False)
    ev = tv.estimator.inputs.numpy_input_fn({"x": X}, Y, 50, 1, False)
    for est in (tv.estimator.LinearRegressor(cols, model_dir=_mem_dir("ftrl")),  # FTRL
                tv.estimator.DNNRegressor([8], cols, model_dir=_mem_dir("adagrad"))):
        before = est.evaluate(ev)["average_loss"]
        est.train(fn, steps=100)
        assert est.evaluate(ev)["average_loss"] < 0.2 * before
    spec = {"x": tv.FixedLenFeature([3], tv.float32)}
    path = est.export_saved_model(
        _mem_dir("exp"), tv.estimator.export.build_parsing_serving_input_receiver_fn(spec))
    examples = np.array([tv.train.Example(features=tv.train.Features(feature={
        "x": tv.train.Feature(float_list=tv.train.FloatList(value=row.tolist()))}))
        .SerializeToString() for row in X[:4]], dtype=object)
    with tv.Graph().as_default(), tv.Session() as sess:
        sig = tv.estimator.export.load(sess, path)
        served = sess.run(sig["outputs"]["predictions"], {sig["inputs"]["examples"]: examples})
    want = [p["predictions"] for p in est.predict(
        tv.estimator.inputs.numpy_input_fn({"x": X[:4]}, None, 4, 1, False))]
    np.testing.assert_allclose(served, want, rtol=1e-6)


def test_early_stopping_hooks_read_the_evaluations():
    est = _estimator(save_checkpoints_steps=5, lr=0.0)  # lr 0: the loss never decreases
    stall = tv.estimator.experimental.stop_if_no_decrease_hook(
        est, "loss", max_steps_without_decrease=10, run_every_secs=None, run_every_steps=1)
    eval_spec = tv.estimator.EvalSpec(_full_batch(num_epochs=1), steps=None, throttle_secs=0)
    tv.estimator.train_and_evaluate(
        est, tv.estimator.TrainSpec(_full_batch(), max_steps=100, hooks=[stall]), eval_spec)
    evals = tv.estimator.experimental.read_eval_metrics(est.eval_dir())
    assert list(evals)[:3] == [5, 10, 15]  # evaluated at 5, no decrease by 15: stop
    assert 15 <= int(est.get_variable_value("global_step")) < 20
    low = _estimator(save_checkpoints_steps=5)
    done = tv.estimator.experimental.stop_if_lower_hook(low, "loss", threshold=1e9,
                                                        run_every_steps=1, run_every_secs=None)
    tv.estimator.train_and_evaluate(
        low, tv.estimator.TrainSpec(_full_batch(), max_steps=100, hooks=[done]), eval_spec)
    assert int(low.get_variable_value("global_step")) < 10  # the first evaluation at 5
    with pytest.raises(ValueError, match="Only one of `run_every_secs` and `run_every_steps`"):
        tv.estimator.experimental.stop_if_higher_hook(low, "loss", 1.0, run_every_steps=1)


# ---- TF 1.x hooks an Estimator program uses ------------------------------------------------

def test_feed_fn_final_ops_and_global_step_waiter_hooks():
    with tv.Graph().as_default():
        p = tv.placeholder(tv.float32, [])
        gs = tv.train.get_or_create_global_step()
        total = tv.Variable(0.0, name="total")
        step = tv.group(total.assign_add(p), gs.assign_add(1))
        feeds = iter([1.0, 2.0, 3.0])
        final = tv.train.FinalOpsHook({"total": total})
        naps = []
        waiter = tv.train.GlobalStepWaiterHook(0, sleep=naps.append)
        with tv.train.MonitoredTrainingSession(hooks=[
                tv.train.FeedFnHook(lambda: {p: next(feeds)}), final, waiter,
                tv.train.StopAtStepHook(last_step=3)]) as sess:
            while not sess.should_stop():
                sess.run(step)
        assert final.final_ops_values == {"total": 6.0} and naps == []
        blocked = tv.train.GlobalStepWaiterHook(5, sleep=naps.append)
        blocked.begin()

        class Ctx:  # the session's step moves on while the hook waits
            class session:
                runs = iter([0, 2, 5])

                @staticmethod
                def run(_):
                    return next(Ctx.session.runs)

        blocked.before_run(Ctx)
        assert len(naps) == 2
    timer = tv.train.SecondOrStepTimer(every_steps=3)
    assert timer.should_trigger_for_step(1) and timer.update_last_triggered_step(1) == \
        (None, None)
    assert not timer.should_trigger_for_step(1) and not timer.should_trigger_for_step(3)
    assert timer.should_trigger_for_step(4) and timer.update_last_triggered_step(4)[1] == 3
    assert timer.last_triggered_step() == 4


def test_stop_iteration_ends_training_cleanly_as_out_of_range():
    class EndAt3(tv.train.SessionRunHook):
        def after_run(self, run_context, run_values):
            if int(run_context.session.run(tv.train.get_global_step())) >= 3:
                raise StopIteration  # TF's MonitoredSession takes it as the input's end

    est = _estimator(save_checkpoints_steps=1000)
    est.train(_full_batch(), hooks=[EndAt3()])
    assert est.latest_checkpoint().endswith("model.ckpt-3")
