"""scikit-learn's estimator checks of the clusterers (BCMClusterer, MGMClusterer): a file of their own,
since each check fits a new number of observations and so compiles the sampler or search again (about
three minutes in all on 2 cores), and the suite's workers take files as units."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from tests.test_sklearn_conformance import COMPILING_PER_SHAPE, expected_failures


@parametrize_with_checks(COMPILING_PER_SHAPE, expected_failed_checks=expected_failures)
def test_scikit_learn_estimator_checks_of_the_clusterers(estimator, check):
    check(estimator)
