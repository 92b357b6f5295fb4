"""Audio clips to log-mel features, with no audio library: stdlib `wave`, numpy, torch.

Speech Commands ships 16 kHz mono 16-bit PCM WAV files. They are read with
the standard library's `wave` module (PCM only: anything else is refused),
padded or cut to a fixed length, and turned into log-mel spectrograms with
`torch.stft` and a triangular mel filterbank written out here (HTK mel
scale, no area normalisation, as torchaudio's `melscale_fbanks` defaults).

The files are untrusted input: nothing here runs code, and a clip is read
with `readframes(n)` for the n samples the features keep, so a header that
declares gigabytes of audio allocates one clip's worth and no more. A file
that is not a readable PCM WAV of the expected format raises one
FedbenchError line naming it.
"""

from __future__ import annotations

import io
import wave
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from fedbench.errors import FedbenchError

# Bounds the STFT temporaries: 1,024 clips x 257 bins x 101 frames x complex64.
_CHUNK = 1024
# Added before the log: -13.8 for silence (all-zero padding) instead of -inf.
_LOG_FLOOR = 1e-6


@dataclass(frozen=True)
class MelSpec:
    """How clips become features: their length, the STFT and the mel bands.

    The defaults are the keyword-spotting standard (Warden 2018, Sainath &
    Parada 2015): 1 s at 16 kHz, 25 ms windows every 10 ms, 40 bands from
    20 Hz to Nyquist, giving (1, 40, 101) per clip (STFT frames are centred,
    so 16,000 / 160 + 1 frames).
    """

    sample_rate: int = 16_000
    clip_ms: int = 1000
    window_ms: float = 25.0
    hop_ms: float = 10.0
    n_mels: int = 40
    f_min: float = 20.0

    @property
    def clip_samples(self) -> int:
        return self.sample_rate * self.clip_ms // 1000

    @property
    def window(self) -> int:
        return round(self.sample_rate * self.window_ms / 1000)

    @property
    def hop(self) -> int:
        return round(self.sample_rate * self.hop_ms / 1000)

    @property
    def n_fft(self) -> int:
        """The FFT size: the window rounded up to a power of two (400 -> 512)."""
        return 1 << (self.window - 1).bit_length()

    @property
    def shape(self) -> tuple[int, int, int]:
        """One clip's features: (1 channel, mel bands, frames)."""
        return (1, self.n_mels, self.clip_samples // self.hop + 1)

    def check(self, where: str) -> None:
        """FedbenchError (naming `where`) unless the sizes make a spectrogram."""
        ok = 0 < self.hop <= self.window <= self.clip_samples and self.n_mels > 0
        if not ok or not 0 <= self.f_min < self.sample_rate / 2:
            raise FedbenchError(
                f"{where}: window_ms={self.window_ms}, hop_ms={self.hop_ms}, n_mels={self.n_mels}, "
                f"f_min={self.f_min}: need 0 < hop <= window <= the clip, n_mels > 0 and "
                f"0 <= f_min < {self.sample_rate / 2:g} Hz"
            )


def read_wav(source: Path | bytes, name: str, spec: MelSpec) -> np.ndarray:
    """The first `spec.clip_samples` samples of a mono 16-bit PCM WAV, as float32 in [-1, 1).

    `source` is a file or the file's bytes; `name` is what an error calls it.
    Only one clip's frames are ever read, whatever the header declares.
    """
    try:
        stream = io.BytesIO(source) if isinstance(source, bytes) else open(source, "rb")  # noqa: SIM115
    except OSError as e:
        raise FedbenchError(f"{name}: cannot read it: {e.strerror or e}") from e
    with stream:
        try:
            with wave.open(stream, "rb") as clip:
                fmt = (clip.getnchannels(), clip.getsampwidth(), clip.getframerate())
                frames = clip.readframes(spec.clip_samples)
        except (wave.Error, EOFError, ValueError, OSError) as e:
            raise FedbenchError(f"{name}: not a readable PCM WAV file ({e})") from e
    if fmt != (1, 2, spec.sample_rate):
        raise FedbenchError(
            f"{name}: {fmt[0]} channel(s), {8 * fmt[1]}-bit, {fmt[2]} Hz; "
            f"expected mono 16-bit PCM at {spec.sample_rate} Hz"
        )
    usable = len(frames) - len(frames) % 2  # a truncated file may end mid-sample
    pcm = np.frombuffer(frames[:usable], dtype="<i2")
    return pcm.astype(np.float32) / 32768.0


def fit_clip(samples: np.ndarray, length: int) -> np.ndarray:
    """`samples` zero-padded at the end, or cut, to exactly `length` (float32)."""
    out = np.zeros(length, dtype=np.float32)
    n = min(length, samples.shape[0])
    out[:n] = samples[:n]
    return out


def _hz_to_mel(hz: np.ndarray) -> np.ndarray:
    return 2595.0 * np.log10(1.0 + hz / 700.0)


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)


def mel_filterbank(spec: MelSpec) -> torch.Tensor:
    """(n_mels, n_fft // 2 + 1) triangular filters, equally spaced on the HTK mel scale.

    Filter m rises from mel point m to m + 1 and falls to m + 2 over the
    FFT bin frequencies, peaking at 1 (no area normalisation).
    """
    bins = np.linspace(0.0, spec.sample_rate / 2, spec.n_fft // 2 + 1)
    edges = np.array([spec.f_min, spec.sample_rate / 2], dtype=np.float64)
    lo, hi = _hz_to_mel(edges)
    points = _mel_to_hz(np.linspace(lo, hi, spec.n_mels + 2))
    left, centre, right = points[:-2, None], points[1:-1, None], points[2:, None]
    rising = (bins[None, :] - left) / (centre - left)
    falling = (right - bins[None, :]) / (right - centre)
    bank = np.clip(np.minimum(rising, falling), 0.0, None)
    return torch.from_numpy(bank.astype(np.float32))


def log_mel(waves: torch.Tensor, spec: MelSpec) -> torch.Tensor:
    """Log-mel features (N, 1, n_mels, frames) of clips `waves` (N, clip_samples), float32.

    Power spectrum of Hann-windowed, centred frames, the mel filterbank,
    then log(x + 1e-6). Computed in chunks of clips so the complex STFT of a
    whole data set is never held at once.
    """
    if waves.dim() != 2 or waves.shape[1] != spec.clip_samples:
        raise ValueError(f"waves must be (N, {spec.clip_samples}), got {tuple(waves.shape)}")
    bank = mel_filterbank(spec)
    window = torch.hann_window(spec.window)
    out = torch.empty((waves.shape[0], *spec.shape), dtype=torch.float32)
    for start in range(0, waves.shape[0], _CHUNK):
        stft = torch.stft(
            waves[start : start + _CHUNK],
            n_fft=spec.n_fft,
            hop_length=spec.hop,
            win_length=spec.window,
            window=window,
            center=True,
            return_complex=True,
        )
        power = stft.real.square() + stft.imag.square()  # (n, bins, frames)
        mel = torch.matmul(bank, power)  # (n, n_mels, frames)
        out[start : start + _CHUNK, 0] = torch.log(mel + _LOG_FLOOR)
    return out


def log_mel_clips(clips: Iterable[tuple[Path | bytes, str]], spec: MelSpec) -> torch.Tensor:
    """Features (N, 1, n_mels, frames) of WAV clips given as (file or bytes, name) pairs.

    Reads, fits and transforms `_CHUNK` clips at a time, so only the
    features (16 KB a clip at the defaults), never every clip's samples, are
    held: all of Speech Commands' raw audio would take 6.7 GB as float32.
    """
    parts: list[torch.Tensor] = []
    batch: list[np.ndarray] = []
    for source, name in clips:
        batch.append(fit_clip(read_wav(source, name, spec), spec.clip_samples))
        if len(batch) == _CHUNK:
            parts.append(log_mel(torch.from_numpy(np.stack(batch)), spec))
            batch = []
    if batch:
        parts.append(log_mel(torch.from_numpy(np.stack(batch)), spec))
    if not parts:
        return torch.empty((0, *spec.shape), dtype=torch.float32)
    return parts[0] if len(parts) == 1 else torch.cat(parts)
