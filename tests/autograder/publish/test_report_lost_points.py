"""The report splits each student's lost automatic points: in the exercise itself, or only through a part."""
from __future__ import annotations

from autograder.publish.report import lost_points, lost_points_section


def test_only_intended_cascades_lose_points_through_a_part():
    itself, through = lost_points({"test_masked_mean_pool": 15.0, "test_TransformerClassifier": 0.0,
                                   "test_train_one_epoch": 0.0, "test_trained_classifier": 10.0})
    assert itself == {"test_masked_mean_pool": 15.0}
    assert through == {"test_trained_classifier": (10.0, ["test_masked_mean_pool"])}


def test_a_result_lost_with_every_part_working_is_lost_in_itself():
    itself, through = lost_points({"test_masked_mean_pool": 0.0, "test_trained_classifier": 10.0})
    assert itself == {"test_trained_classifier": 10.0} and through == {}


def test_a_composite_whose_part_failed_is_judged_on_its_own():
    """EncoderBlock is graded given a working feed-forward: points it lost are its own."""
    itself, through = lost_points({"test_positionwise_feed_forward": 20.0, "test_encoder_block": 45.0})
    assert itself == {"test_positionwise_feed_forward": 20.0, "test_encoder_block": 45.0} and through == {}


def test_the_section_lists_both_kinds_per_student():
    data = {"lost": {("ada", "07_yelp_classifier"): {"test_masked_mean_pool": 15.0, "test_trained_classifier": 10.0},
                     ("bob", "07_yelp_classifier"): {"test_masked_mean_pool": 0.0}}}
    html = lost_points_section(data)
    assert "ada" in html and "bob" not in html
    assert "test_trained_classifier (&minus;10; needs test_masked_mean_pool)" in html
    assert "No automatic points lost" in lost_points_section({"lost": {}})
