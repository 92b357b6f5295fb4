"""Speech Commands on small generated WAV files, in both layouts; the log-mel features."""

from __future__ import annotations

import io
import struct
import wave
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import DictConfig, OmegaConf

from fedbench.data import build_source
from fedbench.data.audio import MelSpec, fit_clip, log_mel, mel_filterbank, read_wav
from fedbench.data.speech_commands import TARBALL, WORDS, SpeechCommandsSource
from fedbench.errors import FedbenchError
from fedbench.paths import conf_dir

SHAPE = (1, 40, 101)
# (word, file name, in testing_list.txt): three speakers, one of them only in the test split.
CLIPS = [
    ("yes", "aaa_nohash_0.wav", False),
    ("yes", "bbb_nohash_0.wav", False),
    ("no", "aaa_nohash_1.wav", False),
    ("visual", "ccc_nohash_0.wav", True),
]


def wav_bytes(
    seconds: float = 0.8, hz: float = 440.0, rate: int = 16_000, channels: int = 1, width: int = 2
) -> bytes:
    """A sine tone as WAV file bytes."""
    n = int(seconds * rate)
    tone = (np.sin(2 * np.pi * hz * np.arange(n) / rate) * 8000).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        data = np.repeat(tone, channels).tobytes() if width == 2 else bytes(n * channels)
        w.writeframes(data)
    return buffer.getvalue()


def _tone(i: int) -> bytes:
    return wav_bytes(seconds=0.6 + 0.2 * i, hz=300.0 + 400.0 * i)


def make_folder(root: Path) -> Path:
    for i, (word, name, _) in enumerate(CLIPS):
        (root / word).mkdir(parents=True, exist_ok=True)
        (root / word / name).write_bytes(_tone(i))
    (root / "_background_noise_").mkdir()
    (root / "_background_noise_" / "noise.wav").write_bytes(b"not a wav")  # ignored
    listed = [f"{w}/{n}" for w, n, test in CLIPS if test]
    (root / "testing_list.txt").write_text("\n".join(listed) + "\n")
    (root / "validation_list.txt").write_text("yes/bbb_nohash_0.wav\n")  # stays in the pool
    return root


def make_hf(root: Path) -> Path:
    """The same clips as a save_to_disk DatasetDict with google/speech_commands' columns."""
    import datasets
    from datasets import Audio, ClassLabel, Features, Value

    features = Features(
        {
            "file": Value("string"),
            # Stored as bytes + path, then cast: encoding into Audio would need torchcodec.
            "audio": {"bytes": Value("binary"), "path": Value("string")},
            "label": ClassLabel(names=[*WORDS, "_silence_"]),
            "is_unknown": Value("bool"),
            "speaker_id": Value("string"),
            "utterance_id": Value("int8"),
        }
    )

    def split(rows: list[tuple[int, tuple[str, str, bool]]]) -> datasets.Dataset:
        columns: dict[str, list[object]] = {k: [] for k in features}
        for i, (word, name, _) in rows:
            columns["file"].append(f"{word}/{name}")
            columns["audio"].append({"bytes": _tone(i), "path": f"{word}/{name}"})
            columns["label"].append(WORDS.index(word))
            columns["is_unknown"].append(False)
            columns["speaker_id"].append(name.split("_nohash_")[0])
            columns["utterance_id"].append(int(name[-5]))
        ds = datasets.Dataset.from_dict(columns, features=features)
        return ds.cast_column("audio", Audio(sampling_rate=16_000))

    rows = list(enumerate(CLIPS))
    silence = {"file": ["_silence_/x.wav"], "audio": [{"bytes": _tone(0), "path": "x.wav"}]}
    silence |= {"label": [len(WORDS)], "is_unknown": [False], "speaker_id": [None]}
    silent = datasets.Dataset.from_dict({**silence, "utterance_id": [0]}, features=features)
    train = datasets.concatenate_datasets(
        [split([r for r in rows[:1]]), silent.cast_column("audio", Audio(sampling_rate=16_000))]
    )
    saved = datasets.DatasetDict(
        train=train,
        validation=split(rows[1:3]),
        test=split([r for r in rows if r[1][2]]),
    )
    saved.save_to_disk(str(root))
    return root


def test_folder_layout_labels_speakers_and_split(tmp_path: Path) -> None:
    source = SpeechCommandsSource(root=str(make_folder(tmp_path / "sc")))
    pool, test = source.load(SHAPE)
    assert pool.shape == SHAPE and test.shape == SHAPE
    assert pool.y.tolist() == [WORDS.index("yes"), WORDS.index("yes"), WORDS.index("no")]
    assert test.y.tolist() == [WORDS.index("visual")]
    # Speakers aaa, bbb, ccc in sorted order, across both splits.
    assert pool.ids is not None and test.ids is not None
    assert pool.ids.tolist() == [0, 1, 0] and test.ids.tolist() == [2]
    # Standardised with the pool's statistics.
    assert abs(float(pool.x.mean())) < 1e-4 and float(pool.x.std()) == pytest.approx(1.0, abs=1e-3)
    assert torch.isfinite(test.x).all()


def test_hf_layout_gives_the_same_tensors_as_the_folder(tmp_path: Path) -> None:
    folder = SpeechCommandsSource(root=str(make_folder(tmp_path / "sc")))
    hf = SpeechCommandsSource(root=str(make_hf(tmp_path / "hf")), layout="hf")
    for a, b in zip(folder.load(SHAPE), hf.load(SHAPE), strict=True):
        # HF orders the pool train then validation; the folder, word by word: same here.
        torch.testing.assert_close(a.x, b.x)
        assert torch.equal(a.y, b.y) and a.ids is not None and b.ids is not None
        assert torch.equal(a.ids, b.ids)  # the _silence_ row (no speaker) is left out


def _one_line_error(source: SpeechCommandsSource, shape: tuple[int, ...] = SHAPE) -> str:
    with pytest.raises(FedbenchError) as err:
        source.load(shape)
    assert "\n" not in str(err.value)
    return str(err.value)


def test_model_shape_must_equal_the_features(tmp_path: Path) -> None:
    source = SpeechCommandsSource(root=str(tmp_path))  # checked before any file is read
    message = _one_line_error(source, (3, 32, 32))
    assert "(1, 40, 101)" in message and "audio_cnn" in message
    assert SpeechCommandsSource(root="x", n_mels=64).spec.shape == (1, 64, 101)


def test_missing_root_says_how_to_get_the_data(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    message = _one_line_error(SpeechCommandsSource(root=str(missing)))
    assert str(missing) in message and TARBALL in message
    message = _one_line_error(SpeechCommandsSource(root=str(missing), layout="hf"))
    assert "save_to_disk" in message and "google/speech_commands" in message
    message = _one_line_error(SpeechCommandsSource(root=str(tmp_path), layout="hf"))
    assert "save_to_disk" in message  # a folder that is not a saved dataset
    assert "layout" in _one_line_error(SpeechCommandsSource(root=str(tmp_path), layout="zip"))


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"RIFF\x00\x00", "not a readable PCM WAV"),
        (wav_bytes(channels=2), "2 channel"),
        (wav_bytes(rate=8000), "8000 Hz"),
        (wav_bytes(width=1), "8-bit"),
    ],
    ids=["truncated", "stereo", "8kHz", "8-bit"],
)
def test_a_bad_file_is_refused_naming_it(tmp_path: Path, content: bytes, expected: str) -> None:
    root = make_folder(tmp_path / "sc")
    bad = root / "no" / "ddd_nohash_0.wav"
    bad.write_bytes(content)
    message = _one_line_error(SpeechCommandsSource(root=str(root)))
    assert str(bad) in message and expected in message


def test_a_file_without_a_speaker_is_refused(tmp_path: Path) -> None:
    root = make_folder(tmp_path / "sc")
    (root / "no" / "stray.wav").write_bytes(_tone(0))
    assert "stray.wav" in _one_line_error(SpeechCommandsSource(root=str(root)))


def test_a_huge_declared_size_reads_one_clip_at_most() -> None:
    spec = MelSpec()
    # A header declaring ~2 GB of samples, followed by 100 real bytes.
    fmt = struct.pack("<HHIIHH", 1, 1, 16_000, 32_000, 2, 16)
    body = b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt
    body += b"data" + struct.pack("<I", 0x7FFFFFF0) + bytes(100)
    samples = read_wav(b"RIFF" + struct.pack("<I", 0x7FFFFFF0) + body, "huge.wav", spec)
    assert samples.shape == (50,)
    long = read_wav(wav_bytes(seconds=3.0), "long.wav", spec)
    assert long.shape == (spec.clip_samples,)  # never more than one clip is read


def test_fit_clip_pads_and_cuts() -> None:
    assert fit_clip(np.ones(3, np.float32), 5).tolist() == [1, 1, 1, 0, 0]
    assert fit_clip(np.arange(8, dtype=np.float32), 4).tolist() == [0, 1, 2, 3]


def test_log_mel_puts_a_tone_in_its_band() -> None:
    spec = MelSpec()
    bank = mel_filterbank(spec)
    assert bank.shape == (40, 257) and float(bank.max()) <= 1.0
    assert (bank.sum(dim=1) > 0).all()  # no empty band at 40 mels and 512 points
    t = torch.arange(spec.clip_samples) / spec.sample_rate
    low, high = (torch.sin(2 * torch.pi * f * t) for f in (500.0, 3000.0))
    features = log_mel(torch.stack([low, high]), spec)
    assert features.shape == (2, *SHAPE)
    peaks = features[:, 0, :, 50].argmax(dim=1)  # the loudest band mid-clip
    centres = bank.argmax(dim=1).float() * spec.sample_rate / spec.n_fft
    assert abs(float(centres[peaks[0]]) - 500.0) < 150.0
    assert abs(float(centres[peaks[1]]) - 3000.0) < 300.0


def _config() -> DictConfig:
    cfg = OmegaConf.load(conf_dir() / "data" / "speech_commands.yaml")
    assert isinstance(cfg, DictConfig)
    return cfg


def test_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = conf_dir() / "data" / "speech_commands.yaml"
    first = path.read_text().splitlines()[0]
    assert first.startswith("# python -m fedbench data=speech_commands")
    cfg = _config()
    assert list(cfg.defaults) == [{"partition": "default"}, "_self_"]
    assert cfg.partition.scheme == "natural_id" and cfg.augment is False
    assert cfg.num_classes == len(WORDS) == 35
    monkeypatch.setenv("FEDBENCH_DATA", str(tmp_path))
    source = build_source(_config())
    assert isinstance(source, SpeechCommandsSource)
    assert source.root_path == tmp_path / "speech_commands" and source.layout == "folder"
    model = OmegaConf.load(conf_dir() / "model" / "audio_cnn.yaml")
    assert tuple(model.input_shape) == source.spec.shape
