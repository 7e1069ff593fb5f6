"""Make models/skl_zipmap_int.onnx and models/skl_zipmap_str.onnx: scikit-learn logistic
regressions (6 features, 3 classes, fitted on make_classification with seed 0) exported by
skl2onnx with its default ZipMap, so ``output_probability`` is a sequence of maps, class
label (int64, or string for the second) to probability.

skl2onnx and scikit-learn are needed only to run this script, never by graphexec or its tests
(the files are committed beside it): ``pip install scikit-learn skl2onnx``, then
``python models/export_zipmap.py``.
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent
OUT_INT, OUT_STR = HERE / "skl_zipmap_int.onnx", HERE / "skl_zipmap_str.onnx"


def main() -> None:
    import numpy as np
    from skl2onnx import to_onnx
    from sklearn.datasets import make_classification
    from sklearn.linear_model import LogisticRegression

    x, y = make_classification(200, 6, n_informative=4, n_classes=3, random_state=0)
    x = x.astype(np.float32)
    opsets = {"": 17, "ai.onnx.ml": 3}
    for path, labels in ((OUT_INT, y), (OUT_STR, np.array(["cat", "dog", "eel"])[y])):
        model = LogisticRegression(max_iter=500).fit(x, labels)
        path.write_bytes(to_onnx(model, x[:1], target_opset=opsets).SerializeToString())
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
