"""Labels follow the class, not the split folder: a split lacking a class keeps its labels."""

from __future__ import annotations

from pathlib import Path

from dataprep.prepare import prepare_dataset
from tests.test_prepare import SIZE, make_folder, read_back


def test_a_split_folder_lacking_a_class_labels_its_images_as_the_train_split_does(
    tmp_path: Path,
) -> None:
    source = tmp_path / "src"
    make_folder(source / "train", {"cat": 4, "dog": 4, "fish": 4})
    make_folder(source / "test", {"cat": 2, "fish": 3})  # no dog here
    metadata = prepare_dataset(str(source), str(tmp_path / "out"), image_size=SIZE, seed=0)

    assert metadata["class_names"] == ["cat", "dog", "fish"]
    assert metadata["splits"]["test"]["per_class"] == {"cat": 2, "dog": 0, "fish": 3}
    for split, examples in read_back(tmp_path / "out", metadata).items():
        for _, label, key in examples:  # key: <split folder>/<class>/<file>
            assert metadata["class_names"][label] == key.split("/")[1], (split, key)
