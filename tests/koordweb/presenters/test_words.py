"""The words for device kinds (`presenters.words`): an Ascend card held in AI cores is an NPU, a
Cambricon slice an MLU, a GPU share a GPU; several jobs' cards of mixed kinds are 'cards'."""

from __future__ import annotations

import pytest

from koordweb.presenters.words import card_hours_text, card_kind_word, cards_word


@pytest.mark.parametrize(
    ("requests", "word"),
    [
        ({"nvidia.com/gpu": 8}, "GPUs"),
        ({"koordinator.sh/gpu-core": 50, "koordinator.sh/gpu-memory-ratio": 50}, "GPUs"),
        ({"huawei.com/npu": 2}, "NPUs"),
        ({"huawei.com/npu-core": 20, "cpu": 4000}, "NPUs"),
        ({"cambricon.com/mlu": 1}, "MLUs"),
        ({"cambricon.com/mlu.smlu.vcore": 50}, "MLUs"),
        ({"amd.com/gpu": 1}, "GPUs"),
        ({"cpu": 1000}, "GPUs"),
        ({"huawei.com/npu-core": 0, "nvidia.com/gpu": 1}, "GPUs"),
    ],
)
def test_card_kind_word_names_whole_cards_and_shares_by_their_kind(
    requests: dict[str, int], word: str
) -> None:
    assert card_kind_word(requests) == word


def test_cards_word_is_the_shared_kind_or_cards_when_mixed() -> None:
    assert cards_word(["NPUs", "NPUs"]) == "NPUs"
    assert cards_word(["MLUs"]) == "MLUs"
    assert cards_word(["NPUs", "GPUs"]) == "cards"
    assert cards_word([]) == "GPUs"


def test_card_hours_text_says_the_kind_with_the_number_as_gpu_hours() -> None:
    assert card_hours_text(5) == "5.00 GPU-hours"
    assert card_hours_text(5, "NPUs") == "5.00 NPU-hours"
    assert card_hours_text(1240, "MLUs") == "1,240 MLU-hours"
    assert card_hours_text(12.5, "cards") == "12.5 card-hours"
