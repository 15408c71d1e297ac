"""What the scikit-learn estimators of every paper share: printing a fitted estimator prints its explanation,
and a fit that fails leaves the estimator as it was."""

from __future__ import annotations

import functools

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


def atomic_fit(fit):
    """``fit`` made all-or-nothing: when it raises (an error, or KeyboardInterrupt), the estimator's attributes
    are put back as they were before the call, so that no half-fitted estimator remains (a fitted one keeps
    its previous fit; an unfitted one stays unfitted and says so)."""

    @functools.wraps(fit)
    def all_or_nothing(self, *args, **kwargs):
        before = dict(vars(self))
        try:
            return fit(self, *args, **kwargs)
        except BaseException:
            vars(self).clear()
            vars(self).update(before)
            raise

    return all_or_nothing
