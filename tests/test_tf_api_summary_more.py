"""tv.summary.audio / tensor_summary, SessionLog and FileWriterCache, read back with
TensorBoard's own reader."""
from __future__ import annotations

import io
import wave

import numpy as np
import pytest

import tensorvm as tv


def test_audio_tensor_summaries_and_session_log_read_back(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util
    wave_in = np.sin(np.linspace(0, 100, 800)).reshape(2, 400).astype(np.float32)
    table = np.arange(6, dtype=np.float32).reshape(2, 3)
    with tv.Graph().as_default():
        tv.summary.audio("clip", tv.constant(wave_in), 8000.0, max_outputs=2)
        tv.summary.tensor_summary("t", tv.constant(table), "a table")
        merged = tv.summary.merge_all()
        writer = tv.summary.FileWriterCache.get(str(tmp_path))
        assert writer is tv.summary.FileWriterCache.get(str(tmp_path))
        writer.add_session_log(tv.summary.SessionLog(status=tv.summary.SessionLog.START), 0)
        with tv.Session() as s:
            writer.add_summary(s.run(merged), 1)
    tv.summary.FileWriterCache.clear()
    acc = EventAccumulator(str(tmp_path), size_guidance={"audio": 10, "tensors": 10})
    acc.Reload()
    assert sorted(acc.Tags()["audio"]) == ["clip/audio/0", "clip/audio/1"]
    clip = acc.Audio("clip/audio/1")[0]
    assert clip.sample_rate == 8000 and clip.content_type == "audio/wav"
    with wave.open(io.BytesIO(clip.encoded_audio_string)) as w:
        pcm = np.frombuffer(w.readframes(w.getnframes()), "<i2")
        assert (w.getframerate(), w.getnchannels()) == (8000, 1)
    np.testing.assert_allclose(pcm / 32767.0, wave_in[1], atol=1e-4)
    got = tensor_util.make_ndarray(acc.Tensors("t")[0].tensor_proto)
    np.testing.assert_array_equal(got, table)


def test_summary_errors():
    with tv.Graph().as_default():
        bad = tv.summary.audio("a", tv.zeros([2, 3, 4, 5]), 100.0)
        with tv.Session() as s, pytest.raises(tv.errors.InvalidArgumentError,
                                              match="tensor must be 3-D"):
            s.run(bad)
        with pytest.raises(tv.errors.InvalidArgumentError, match="sample_rate must be a float"):
            tv.summary.audio("a", tv.zeros([1, 3]), tv.constant([1.0, 2.0]))
