"""The contract (dplace.contract), one named check at a time, over every registered method."""
import dplace
from dplace.contract import parametrize_with_checks


@parametrize_with_checks(dplace.methods())
def test_contract(method, check):
    check(method)
