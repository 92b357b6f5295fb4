"""Google Speech Commands v0.02 by speaker: 35 spoken words as log-mel features.

Two layouts of the same data under `root`:

- "folder": the release tarball extracted
  (http://download.tensorflow.org/data/speech_commands_v0.02.tar.gz):
  `root/<word>/<speaker>_nohash_<n>.wav` and `testing_list.txt`;
- "hf": Hugging Face `google/speech_commands` v0.02 saved with
  `save_to_disk` (splits train/validation/test, columns `audio`, `label`,
  `speaker_id`). It is read with `datasets.load_from_disk` (Arrow files,
  no loading script, so nothing from the data is run) and the audio column
  cast to `Audio(decode=False)`: the WAV bytes are decoded by
  fedbench.data.audio, so no audio library is needed.

Labels are the 35 words of v0.02, in Hugging Face's ClassLabel order in
both layouts. Not the 12-class task (10 words + silence + unknown): its
"silence" examples are cut from background-noise recordings that have no
speaker, so they could not go to a device by owner, and "unknown" lumps 25
words into one class that holds most of the data; every one of the 35
classes is a real word said by a real speaker. Clips of other words,
`_background_noise_` and HF's `_silence_` rows are left out.

Split: `testing_list.txt` (HF "test") is the official test split; the
training and validation files (HF "train" and "validation") form the
pool. The lists split by speaker hash, so no test speaker is in the pool.
`Tensors.ids` is the speaker's index among all speakers in sorted order,
so `partition.scheme: natural_id` gives one speaker to one device.

Each clip is padded or cut to 1 s and becomes (1, n_mels, frames) log-mel
features, (1, 40, 101) at the defaults, standardised with the pool's
statistics. A file that is not a mono 16-bit 16 kHz PCM WAV is refused with
one line naming it (not skipped: a silently smaller data set would change
every partition and result without a trace).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from fedbench.data.audio import MelSpec, log_mel_clips
from fedbench.data.source import DataSource, Tensors, check_input_shape, data_root, standardise
from fedbench.errors import FedbenchError, choices

# The 35 words of v0.02 in the order of Hugging Face's ClassLabel.
WORDS: tuple[str, ...] = (
    "yes", "no", "up", "down", "left", "right", "on", "off", "stop", "go",
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
    "bed", "bird", "cat", "dog", "happy", "house", "marvin", "sheila", "tree", "wow",
    "backward", "forward", "follow", "learn", "visual",
)  # fmt: skip
LAYOUTS: tuple[str, ...] = ("folder", "hf")
TARBALL = "http://download.tensorflow.org/data/speech_commands_v0.02.tar.gz"
_HF_COLUMNS = ("audio", "label", "speaker_id")


@dataclass(frozen=True)
class Part:
    """One split before it becomes `Tensors`: features, word labels and speaker names."""

    x: torch.Tensor
    y: torch.Tensor
    speakers: tuple[str, ...]


@dataclass(frozen=True)
class SpeechCommandsSource(DataSource):
    """Speech Commands under `root` in `layout` ("folder" or "hf"); see the module docstring."""

    name: ClassVar[str] = "speech_commands"
    num_classes: ClassVar[int] = len(WORDS)

    root: str
    layout: str = "folder"
    n_mels: int = 40
    window_ms: float = 25.0
    hop_ms: float = 10.0

    @property
    def root_path(self) -> Path:
        return data_root(self.root)

    @property
    def spec(self) -> MelSpec:
        return MelSpec(window_ms=self.window_ms, hop_ms=self.hop_ms, n_mels=self.n_mels)

    def load(self, input_shape: tuple[int, ...]) -> tuple[Tensors, Tensors]:
        spec = self._checked_spec(input_shape)
        root = self.root_path
        if not root.is_dir():
            raise self._not_found(f"no folder {root}")
        if self.layout == "folder":
            pool, test = read_folder(root, spec)
        else:
            pool, test = read_hf(root, spec)
        if len(pool.y) == 0:
            raise self._not_found(f"no clips of the {len(WORDS)} words in {root}")
        index = {s: i for i, s in enumerate(sorted({*pool.speakers, *test.speakers}))}
        standardise(pool.x, test.x)
        return _tensors(pool, index), _tensors(test, index)

    def _checked_spec(self, input_shape: tuple[int, ...]) -> MelSpec:
        """The features' spec, after checking layout, spec and the model's input shape."""
        if self.layout not in LAYOUTS:
            raise FedbenchError(f"data.source.layout={self.layout!r}; valid: {choices(LAYOUTS)}")
        spec = self.spec
        spec.check("data.source")
        shape = check_input_shape(input_shape)
        if shape != spec.shape:
            dims = ", ".join(map(str, spec.shape))
            raise FedbenchError(
                f"model input shape {shape}: data={self.name} gives log-mel features {spec.shape} "
                f"(n_mels={self.n_mels}, hop_ms={self.hop_ms}); use a model with "
                f"input_shape [{dims}], e.g. model=audio_cnn"
            )
        return spec

    def _not_found(self, why: str) -> FedbenchError:
        root = self.root_path
        if self.layout == "hf":
            how = (
                "python -c \"import datasets; datasets.load_dataset('google/speech_commands', "
                f"'v0.02').save_to_disk('{root}')\""
            )
        else:
            how = f"mkdir -p {root} && curl -L {TARBALL} | tar xz -C {root}"
        return FedbenchError(
            f"Speech Commands not found ({why}): data.source.root={self.root!r} "
            f"(layout={self.layout}); get it with `{how}`; FEDBENCH_DATA sets another root"
        )


def _tensors(part: Part, index: dict[str, int]) -> Tensors:
    ids = torch.tensor([index[s] for s in part.speakers], dtype=torch.int64)
    return Tensors(part.x, part.y, ids)


def _part(clips: list[tuple[Path | bytes, str, int, str]], spec: MelSpec) -> Part:
    """Features, labels and speakers of (source, name, label, speaker) clips, in order."""
    x = log_mel_clips(((c[0], c[1]) for c in clips), spec)
    y = torch.tensor([c[2] for c in clips], dtype=torch.int64)
    return Part(x, y, tuple(c[3] for c in clips))


def read_folder(root: Path, spec: MelSpec) -> tuple[Part, Part]:
    """(pool, test) of the release tree: files named in testing_list.txt are the test split."""
    listed = root / "testing_list.txt"
    test_names = set(listed.read_text().split()) if listed.is_file() else set()
    pool: list[tuple[Path | bytes, str, int, str]] = []
    test: list[tuple[Path | bytes, str, int, str]] = []
    for label, word in enumerate(WORDS):
        for path in sorted((root / word).glob("*.wav")):
            if "_nohash_" not in path.name:
                raise FedbenchError(
                    f"{path}: expected a name <speaker>_nohash_<n>.wav (the speaker is its owner)"
                )
            clip = (path, str(path), label, path.name.split("_nohash_")[0])
            (test if f"{word}/{path.name}" in test_names else pool).append(clip)
    return _part(pool, spec), _part(test, spec)


def read_hf(root: Path, spec: MelSpec) -> tuple[Part, Part]:
    """(pool, test) of a saved DatasetDict: train + validation, and test."""
    import datasets

    try:
        saved = datasets.load_from_disk(str(root))
    except FileNotFoundError as e:
        raise FedbenchError(
            f"{root}: not a Hugging Face dataset saved with save_to_disk (layout=hf): {e}"
        ) from e
    if not isinstance(saved, datasets.DatasetDict) or "test" not in saved:
        found = list(saved) if isinstance(saved, datasets.DatasetDict) else "one Dataset"
        raise FedbenchError(
            f"{root}: expected a DatasetDict with splits train, validation, test; found {found}"
        )
    pool = [
        c
        for split in ("train", "validation")
        if split in saved
        for c in _hf_rows(saved, split, root)
    ]
    return _part(pool, spec), _part(list(_hf_rows(saved, "test", root)), spec)


def _hf_rows(saved: Any, split: str, root: Path) -> Iterator[tuple[Path | bytes, str, int, str]]:
    """(WAV bytes or file, name, label, speaker) of one split's word clips with a speaker."""
    import datasets

    ds = saved[split]
    missing = [c for c in _HF_COLUMNS if c not in ds.column_names]
    if missing:
        raise FedbenchError(
            f"{root}/{split}: no column(s) {', '.join(missing)} (google/speech_commands has them)"
        )
    names = ds.features["label"].names if hasattr(ds.features["label"], "names") else []
    to_word = {i: WORDS.index(n) for i, n in enumerate(names) if n in WORDS}
    ds = ds.select_columns(list(_HF_COLUMNS)).cast_column("audio", datasets.Audio(decode=False))
    for row_index, row in enumerate(ds):
        label, speaker = row["label"], row["speaker_id"]
        if label not in to_word or not speaker:
            continue
        name = f"{root}/{split}[{row_index}]"
        yield _hf_audio(row["audio"], name), name, to_word[label], str(speaker)


def _hf_audio(audio: Any, name: str) -> Path | bytes:
    """The bytes of an undecoded Audio cell, or its file when only the path was stored."""
    if isinstance(audio, dict) and isinstance(audio.get("bytes"), bytes):
        return audio["bytes"]
    if isinstance(audio, dict) and isinstance(audio.get("path"), str):
        return Path(audio["path"])
    raise FedbenchError(f"{name}: its audio cell has neither WAV bytes nor a path")
