"""TF 1.x readers and a TF checkpoint on a LocalCluster (1 PS + 2 worker processes): the
filename queue lives on the PS task, readers read there (colocated with it), parsing and
batching run on the workers; every record arrives exactly once."""
import os

import numpy as np
import pytest
import tensorvm as tf

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]
DATA = os.path.join(os.path.dirname(__file__), "data")
TV_CLUSTER_SHARED = True  # kills no worker, leaves no state


def test_csv_pipeline_across_devices_reads_every_record_once(cluster, tmp_path):
    files, want = [], []
    for f in range(4):
        lines = [f"{f * 100 + r},{(f * 100 + r) * 0.25}" for r in range(25)]
        (tmp_path / f"p{f}.csv").write_text("\n".join(lines) + "\n")
        files.append(str(tmp_path / f"p{f}.csv"))
        want += [f * 100 + r for r in range(25)]
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/job:ps/task:0"):
            q = tf.train.string_input_producer(files, num_epochs=1, seed=2)
        examples = []
        for w in range(2):
            with tf.device(f"/job:worker/task:{w}"):
                _, line = tf.TextLineReader(name=f"reader_{w}").read(q)
                rid, x = tf.decode_csv(line, [[0], [0.0]])
                examples.append([rid, x * 4.0])
        with tf.device("/job:worker/task:0"):
            ids, xs = tf.train.batch_join(examples, batch_size=10,
                                          allow_smaller_final_batch=True)
    s = cluster.session(graph)
    coord = tf.train.Coordinator()
    threads = tf.train.start_queue_runners(s, coord)
    got_ids, got_x = [], []
    try:
        while True:
            i, x = s.run([ids, xs])
            got_ids += i.tolist()
            got_x += x.tolist()
    except tf.errors.OutOfRangeError:
        pass
    coord.request_stop()
    coord.join(threads)
    assert sorted(got_ids) == sorted(want)
    np.testing.assert_allclose(got_x, got_ids)


def test_tf_checkpoint_restores_onto_ps_variables(cluster):
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/job:ps/task:0"):
            w = tf.Variable(np.zeros((3, 2), np.float32), name="w")
        with tf.device("/job:worker/task:1"):
            y = tf.reduce_sum(w * 2.0)
        saver = tf.train.Saver([w])
    s = cluster.session(graph)
    saver.restore(s, tf.train.latest_checkpoint(os.path.join(DATA, "tf_ckpt")))
    assert s.run(y) == pytest.approx(2.0 * np.arange(6).sum() * 0.5)


def test_a_one_shot_iterator_starts_afresh_in_each_session(cluster):
    """TF deletes a one-shot (or unshared initializable) iterator with its session's kernels:
    a second session of the same graph reads the data from the start, while one made with a
    shared_name is shared across sessions (an Estimator's second call on a cluster read the
    first call's exhausted iterator)."""
    graph = tf.Graph()
    with graph.as_default(), tf.device("/job:worker/task:0"):
        one_shot = tf.data.Dataset.range(5).make_one_shot_iterator().get_next()
        shared = tf.data.Dataset.range(5).make_initializable_iterator(shared_name="tv_shared_it")
        shared_next = shared.get_next()
    s1 = cluster.session(graph)
    assert [int(s1.run(one_shot)) for _ in range(3)] == [0, 1, 2]
    s1.run(shared.initializer)
    assert int(s1.run(shared_next)) == 0
    s2 = cluster.session(graph)
    assert [int(s2.run(one_shot)) for _ in range(2)] == [0, 1]
    assert int(s2.run(shared_next)) == 1  # shared by name across sessions, as TF
    assert int(s1.run(one_shot)) == 3     # the first session's own iterator goes on
