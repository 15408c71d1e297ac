"""What the scikit-learn estimators of every paper share: printing a fitted estimator prints its explanation."""

from __future__ import annotations

from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted


class ExplainedEstimatorMixin:
    """``str()`` / ``print`` of a fitted estimator is its ``explain()``; of an unfitted one, the usual
    scikit-learn representation of its parameters (``repr`` is that representation either way)."""

    def __str__(self) -> str:
        try:
            check_is_fitted(self)
        except NotFittedError:
            return super().__str__()
        return str(self.explain())
